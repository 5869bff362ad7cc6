//! Driving a [`producer_core::Producer`] against the simulated cluster in virtual time.
//!
//! [`Harness`] is the reference run loop of the sans-IO contract: it executes every output of
//! the producer on the simulated network, feeds every network event back, and advances virtual
//! time to the earlier of the producer's deadline and the network's next event. It also checks
//! the contract as it goes: `poll_output` must drain in bounded steps, and after
//! `handle_timeout(t)` the producer's next deadline must be later than `t`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use producer_core::{
    ConnId as CoreConn, Delivery, Event, Output, Producer, Record, SendError, TransactionResult,
};

use crate::{ConnId as SimConn, NetEvent, SimCluster};

/// Most outputs one drain may yield before the harness calls it a livelock.
pub const MAX_OUTPUTS_PER_DRAIN: usize = 1_000_000;

/// A producer wired to a simulated cluster.
#[derive(Debug)]
pub struct Harness<T> {
    /// The producer under test.
    pub producer: Producer<T>,
    /// The simulated cluster.
    pub cluster: SimCluster,
    /// Virtual time.
    pub now: Instant,
    /// Every delivery report, in the order the producer emitted them.
    pub deliveries: Vec<Delivery<T>>,
    /// Every event the producer emitted.
    pub events: Vec<Event>,
    /// Every transactional operation's result, in the order the producer emitted them.
    pub transactions: Vec<TransactionResult>,
    /// Contract violations seen (a deadline not moving past `handle_timeout`, an endless drain).
    pub contract_violations: Vec<String>,
    /// The largest number of outputs one drain yielded.
    pub max_drain: usize,
    /// The token the harness hands over when the producer asks for one (SASL OAUTHBEARER);
    /// `None` answers that there is none.
    pub oauth_token: Option<producer_core::OAuthToken>,
    /// When true, token requests are counted and left unanswered, as a token provider that
    /// hangs leaves them (the test answers with `producer.handle_token` when it wants).
    pub hold_token_requests: bool,
    /// How many `TokenRequest`s the producer emitted.
    pub token_requests: usize,
    stuck_steps: u32,
    to_sim: HashMap<CoreConn, SimConn>,
    to_core: HashMap<SimConn, CoreConn>,
}

impl<T> Harness<T> {
    /// Wires `producer` to `cluster`, with virtual time starting at `now`.
    pub fn new(producer: Producer<T>, cluster: SimCluster, now: Instant) -> Self {
        Harness {
            producer,
            cluster,
            now,
            deliveries: Vec::new(),
            events: Vec::new(),
            transactions: Vec::new(),
            contract_violations: Vec::new(),
            max_drain: 0,
            oauth_token: None,
            hold_token_requests: false,
            token_requests: 0,
            stuck_steps: 0,
            to_sim: HashMap::new(),
            to_core: HashMap::new(),
        }
    }

    /// Sends a record at the current virtual time.
    // The error hands the record back by value, as the core's does.
    #[allow(clippy::result_large_err)]
    pub fn send(&mut self, record: Record, opaque: T) -> Result<(), SendError<T>> {
        self.producer.send(self.now, record, opaque)
    }

    /// Executes the producer's outputs until it has none.
    pub fn drain(&mut self) {
        let mut n = 0;
        while let Some(out) = self.producer.poll_output() {
            n += 1;
            if n > MAX_OUTPUTS_PER_DRAIN {
                self.contract_violations
                    .push("poll_output did not drain".into());
                return;
            }
            self.execute(out);
        }
        self.max_drain = self.max_drain.max(n);
    }

    fn execute(&mut self, out: Output<T>) {
        let now = self.now;
        match out {
            Output::Connect { conn, host, port } => {
                let sim = self.cluster.connect(now, &host, port);
                self.to_sim.insert(conn, sim);
                self.to_core.insert(sim, conn);
            }
            Output::Transmit { conn, bytes } => {
                if let Some(&sim) = self.to_sim.get(&conn) {
                    // One write per transmit, as before the core sent requests in pieces:
                    // the simulated network's timing and faults work per write.
                    self.cluster.write(now, sim, &bytes.to_contiguous());
                }
            }
            Output::Disconnect { conn } => {
                if let Some(sim) = self.to_sim.remove(&conn) {
                    self.to_core.remove(&sim);
                    self.cluster.close(now, sim);
                }
            }
            Output::Transaction(r) => self.transactions.push(r),
            Output::TokenRequest if self.hold_token_requests => self.token_requests += 1,
            Output::TokenRequest => {
                self.token_requests += 1;
                let token = self
                    .oauth_token
                    .clone()
                    .ok_or_else(|| "the harness has no OAUTHBEARER token".to_string());
                self.producer.handle_token(now, token);
            }
            Output::Delivery(d) => self.deliveries.push(d),
            Output::Event(e) => self.events.push(e),
        }
    }

    fn on_net(&mut self, ev: NetEvent) {
        let now = self.now;
        match ev {
            NetEvent::Connected(sim) => {
                if let Some(&c) = self.to_core.get(&sim) {
                    self.producer.handle_connected(now, c);
                }
            }
            NetEvent::ConnectFailed(sim) => {
                if let Some(c) = self.to_core.remove(&sim) {
                    self.to_sim.remove(&c);
                    // The simulated network refuses a connection to an address where no
                    // broker listens or a stopped one, as a closed port does.
                    let reason = std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        "connection refused (simulated: no broker listening)",
                    );
                    self.producer.handle_connect_failed(now, c, reason);
                }
            }
            NetEvent::Data(sim, bytes) => {
                if let Some(&c) = self.to_core.get(&sim) {
                    self.producer.handle_read(now, c, &bytes);
                }
            }
            NetEvent::Closed(sim) => {
                if let Some(c) = self.to_core.remove(&sim) {
                    self.to_sim.remove(&c);
                    let reason = std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "connection reset (simulated: closed by the broker)",
                    );
                    self.producer.handle_disconnected(now, c, reason);
                }
            }
        }
    }

    /// Feeds `bytes` to the producer as if read from one of its open connections (the one
    /// with the smallest handle), bypassing the brokers: for fuzzing the producer's response
    /// handling with arbitrary input. Does nothing when no connection is open.
    pub fn feed_bytes(&mut self, bytes: &[u8]) {
        if let Some(&conn) = self.to_sim.keys().min() {
            self.producer.handle_read(self.now, conn, bytes);
            self.drain();
        }
    }

    /// The next instant anything happens (producer deadline or network event).
    #[must_use]
    pub fn next_wakeup(&self) -> Option<Instant> {
        match (self.producer.poll_timeout(), self.cluster.next_event_time()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs one step: drains outputs, moves time to the next wakeup (never past `limit`),
    /// delivers due network events and fires due timers. Returns false when nothing is
    /// scheduled before `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        self.drain();
        let Some(next) = self.next_wakeup() else {
            return false;
        };
        if next > limit {
            self.now = self.now.max(limit);
            return false;
        }
        if next <= self.now {
            self.stuck_steps += 1;
            if self.stuck_steps > 100_000 {
                // Something keeps asking to be woken in the past: record it and move on.
                self.contract_violations
                    .push(format!("no progress at {:?}", self.now));
                self.now += Duration::from_millis(1);
                self.stuck_steps = 0;
            }
        } else {
            self.stuck_steps = 0;
        }
        self.now = self.now.max(next);
        let now = self.now;
        while let Some(ev) = self.cluster.poll_event(now) {
            self.on_net(ev);
            self.drain();
        }
        if self.producer.poll_timeout().is_some_and(|t| t <= now) {
            self.producer.handle_timeout(now);
            if let Some(t) = self.producer.poll_timeout() {
                if t <= now {
                    self.contract_violations.push(format!(
                        "poll_timeout {:?} not after handle_timeout({:?})",
                        t - self.now,
                        now
                    ));
                }
            }
        }
        self.drain();
        true
    }

    /// Steps until `done` holds or `timeout` of virtual time passes. Returns whether `done` held.
    #[must_use = "whether the condition held is the point of the call"]
    pub fn run_until(&mut self, timeout: Duration, mut done: impl FnMut(&Self) -> bool) -> bool {
        let limit = self.now + timeout;
        loop {
            self.drain();
            if done(self) {
                return true;
            }
            if !self.step(limit) {
                self.drain();
                return done(self);
            }
        }
    }

    /// Steps for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        while self.step(limit) {}
        self.now = self.now.max(limit);
    }

    /// Flushes and runs until every accepted record has its report (or `timeout` passes).
    #[must_use = "false means some record had no report by the timeout"]
    pub fn flush(&mut self, timeout: Duration) -> bool {
        self.producer.flush(self.now);
        self.run_until(timeout, |h| h.producer.buffered_records() == 0)
    }
}
