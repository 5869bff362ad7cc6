//! The `hostile_broker` fuzz target: the real [`Producer`], from bootstrap on, against a
//! scripted broker that answers every request the producer actually sends with a structurally
//! valid response of the request's version whose values come from the fuzz input
//! ([`broker`]), while the input also drives the application (records, flushes, transactions)
//! and the network (connections refused, dropped, answers held back or cut in pieces, garbage,
//! virtual time).
//!
//! # Input
//! `[mode] [tuning] [ops length: u16 BE] [ops ...] [values ...]`: see [`Settings::read`] for the
//! two configuration bytes and [`Run::op`] for the operations. The values feed the broker's
//! answers ([`input::Values`]); a zero selector is a sane value, so zeros make a sane run.
//!
//! # Checks (after every step)
//! - no panic, no allocation over [`crate::alloc::MAX_ALLOCATION`], the heap's growth during
//!   the run under [`HEAP_CAP`];
//! - `buffered_bytes` and `buffered_records` within `buffer.memory` and
//!   `queue.buffering.max.messages`; the broker table within [`BROKER_TABLE_CAP`]; no
//!   negative node id; at most `max.in.flight` Produce requests in flight per broker;
//! - requests per unit of virtual time ([`rates`]): at most `2·B·M + 2 + 2·D` retry-only
//!   Produce requests in any window of `W = 0.8·retry.backoff.ms` (B brokers connected, M
//!   `max.in.flight`, D distinct batches retried in the window), at most `2·B + 4 + 2·A`
//!   requests of each other API per window (A the application's calls in it), at most
//!   `2·H + 2` connection attempts per window (H hosts), at most 6 ApiVersions per connection;
//! - each Produce partition was listed by some Metadata answer as exactly `0..n-1`;
//! - every report is for an accepted record, at most one per record, and tells the truth about
//!   the broker's answers ([`ledger`]);
//! - at the end, `close` completes within a bounded number of steps and of virtual time, with
//!   the broker answering sanely or not at all, and every accepted record has its report.

mod broker;
mod input;
mod ledger;
mod rates;

use std::collections::{BTreeMap, VecDeque};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use producer_core::{
    Acks, Config, ConnId, ConsumerGroupMetadata, Event, Mechanism, OAuthToken, OffsetToCommit,
    Output, Producer, Record, SaslConfig, SecurityProtocol, TransactionState,
};

use broker::{
    Broker, Hint, MetadataHack, ProduceExchange, Standing, DOWN_HOST, HOSTS, MAX_BROKERS_PER_ANSWER,
};
use input::{Bytes, Values};
use ledger::{Ledger, Violation};
use rates::Rates;

/// Growth of the heap during one run, at most (above `buffer.memory`).
pub const HEAP_CAP: usize = 48 << 20;
/// Broker slots the producer may hold: the bootstrap address and, three times over, the most
/// brokers one Metadata answer names (answers replace each other; slots of brokers that left
/// must go).
pub const BROKER_TABLE_CAP: usize = 1 + 3 * MAX_BROKERS_PER_ANSWER;
/// Outputs one drain may yield.
const MAX_OUTPUTS: usize = 200_000;
/// Rounds of answers at one instant before the exchange counts as a livelock.
const MAX_ROUNDS: usize = 5_000;
/// Timer firings in one run.
const MAX_WAKEUPS: u64 = 200_000;
/// Requests one run may answer before its remaining operations are skipped (the close still
/// runs): virtual hours at a short backoff would otherwise make one input take minutes.
const REQUEST_BUDGET: u64 = 5_000;
/// Steps `close` may take once the broker is sane or silent.
const MAX_CLOSE_STEPS: u64 = 50_000;
/// `max.block.ms` of the producer under test: a close waits at most this long for a
/// transaction to end once its records are answered.
const MAX_BLOCK: Duration = Duration::from_secs(3);

/// Prints what the run does (`HOSTILE_TRACE=1`), for reading a reproducer.
fn tracing() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("HOSTILE_TRACE").is_some())
}

macro_rules! trace {
    ($($t:tt)*) => { if tracing() { eprintln!($($t)*); } };
}

/// Which producer the run builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// acks=all, idempotent.
    Idempotent,
    /// acks=1, idempotence off.
    Plain,
    /// transactional (idempotent, acks=all).
    Transactional,
    /// acks=0.
    AcksZero,
}

/// The run's configuration, from the first two input bytes.
#[derive(Debug, Clone)]
struct Settings {
    mode: Mode,
    sasl: Option<Mechanism>,
    /// At the end, the broker stops answering (else it answers sanely).
    end_silent: bool,
    tv2: bool,
    linger: Duration,
    max_in_flight: usize,
    retry_backoff: Duration,
    batch_size: usize,
    buffer_memory: usize,
    buffer_records: usize,
    request_timeout: Duration,
    delivery_timeout: Duration,
    /// `transaction.timeout.ms`.
    transaction_timeout: Duration,
    seed: u64,
    /// The kind of the first OAUTHBEARER token (0 sane, 1 refused, 2 lifetime zero, 3
    /// `Duration::MAX`, 4 one millisecond, 5 `u64::MAX` ms, 6 a token with `\x01`, 7 an
    /// extension `auth`, more: a lifetime from the values).
    first_token: u8,
}

impl Settings {
    /// Byte 0: bits 0-1 mode (idempotent, plain acks=1, transactional, acks=0), bits 2-3 SASL
    /// (none, none, PLAIN, OAUTHBEARER), bit 4 the broker goes silent at the end, bit 5
    /// transaction version 2, bit 6 linger 0 (else 5 ms), bit 7 `max.in.flight` 1 (else 5).
    /// Byte 1: bits 0-1 `retry.backoff.ms` (100, 10, 1000, 250), bit 2 `batch.size` 1 KiB
    /// (else 16 KiB), bit 3 `buffer.memory` 64 KiB (else 1 MiB), bits 4-7 the kind of the
    /// first OAUTHBEARER token ([`Settings::first_token`]); the byte is also the seed.
    fn read(b0: u8, b1: u8) -> Self {
        let mode = [
            Mode::Idempotent,
            Mode::Plain,
            Mode::Transactional,
            Mode::AcksZero,
        ][usize::from(b0 & 3)];
        Settings {
            mode,
            sasl: match (b0 >> 2) & 3 {
                2 => Some(Mechanism::Plain),
                3 => Some(Mechanism::OAuthBearer),
                _ => None,
            },
            end_silent: b0 & 0x10 != 0,
            tv2: b0 & 0x20 != 0,
            linger: Duration::from_millis(if b0 & 0x40 != 0 { 0 } else { 5 }),
            max_in_flight: if b0 & 0x80 != 0 { 1 } else { 5 },
            retry_backoff: Duration::from_millis([100, 10, 1000, 250][usize::from(b1 & 3)]),
            batch_size: if b1 & 4 != 0 { 1024 } else { 16 * 1024 },
            buffer_memory: if b1 & 8 != 0 { 64 * 1024 } else { 1024 * 1024 },
            buffer_records: 500,
            request_timeout: Duration::from_secs(2),
            delivery_timeout: Duration::from_secs(10),
            transaction_timeout: Duration::from_secs(8),
            seed: u64::from(b1),
            first_token: b1 >> 4,
        }
    }

    fn config(&self) -> Config {
        let mut b = Config::builder([("boot", 9092)])
            .linger(self.linger)
            .max_in_flight(self.max_in_flight)
            .retry_backoff(self.retry_backoff)
            .retry_backoff_max(self.retry_backoff * 10)
            .reconnect_backoff(self.retry_backoff)
            .reconnect_backoff_max(self.retry_backoff * 10)
            .batch_size(self.batch_size)
            .max_request_size(32 * 1024)
            .buffer_memory(self.buffer_memory)
            .buffer_max_records(self.buffer_records)
            .request_timeout(self.request_timeout)
            .delivery_timeout(self.delivery_timeout)
            .max_block(MAX_BLOCK)
            .metadata_max_age(Duration::from_secs(30))
            .seed(self.seed);
        b = match self.mode {
            Mode::Idempotent => b,
            Mode::Plain => b.acks(Acks::Leader).enable_idempotence(false),
            Mode::AcksZero => b.acks(Acks::None).enable_idempotence(false),
            Mode::Transactional => b
                .transactional_id("fuzz-txn")
                .transaction_timeout(self.transaction_timeout),
        };
        if let Some(m) = self.sasl {
            b = b
                .security_protocol(SecurityProtocol::SaslPlaintext)
                .sasl(SaslConfig::with(m, "user", "secret").with_nonce_seed([7; 32]));
        }
        b.build().expect("the fuzz configuration is valid")
    }

    /// The shortest retry or reconnect backoff the jitter allows: the request-rate window.
    fn window(&self) -> Duration {
        Duration::try_from_secs_f64(self.retry_backoff.as_secs_f64() * 0.8)
            .unwrap_or(self.retry_backoff)
    }
}

/// One response on its way back, and what it answers.
#[derive(Debug)]
struct Pending {
    frame: Vec<u8>,
    sent: usize,
    /// The frame carries the request's correlation id.
    matches: bool,
    produce: Option<ProduceExchange>,
}

/// One connection as the network sees it.
#[derive(Debug)]
struct Conn {
    host: String,
    connected: bool,
    /// Refuse this connection attempt.
    refuse: bool,
    /// Request bytes not yet framed.
    inbox: Vec<u8>,
    outbox: VecDeque<Pending>,
    /// Answers held back (the broker is slow).
    held: bool,
    /// Answers delivered in pieces of this size.
    chunk: Option<usize>,
    /// Garbage was read on it: later answers are read out of frame.
    tainted: bool,
    /// The broker closes it (a resetting proxy).
    drop: bool,
    api_versions: u32,
}

/// One run.
struct Run<'a> {
    s: Settings,
    producer: Producer<u64>,
    t0: Instant,
    now: Instant,
    ops: Bytes<'a>,
    vals: Values<'a>,
    broker: Broker,
    conns: BTreeMap<ConnId, Conn>,
    ledger: Ledger,
    rates: Rates,
    next_id: u64,
    wakeups: u64,
    heap_base: usize,
    /// Standing network behaviours.
    silent: bool,
    refuse_connects: bool,
    drop_after_request: bool,
    fatal: bool,
    /// Requests answered so far.
    requests: u64,
    /// `close` was called: time runs to its end whatever the budget.
    closing: bool,
    /// The kind of the first OAUTHBEARER token (0: sane), from the tuning byte.
    first_token: Option<u8>,
}

/// [`run`] with a producer that authenticates with SASL OAUTHBEARER (the mode byte's SASL
/// bits forced), for the `oauthbearer` target: tokens and sessions of any lifetime.
pub fn run_oauth(data: &[u8]) {
    let mut data = data.to_vec();
    if let Some(b) = data.first_mut() {
        *b |= 0b1100;
    }
    run(&data);
}

/// Runs the input; panics with the broken rule when the producer breaks one.
pub fn run(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let s = Settings::read(data[0], data[1]);
    let ops_len = usize::from(u16::from_be_bytes([data[2], data[3]]));
    let rest = &data[4..];
    let (ops, vals) = rest.split_at(ops_len.min(rest.len()));
    let config = s.config();
    execute(s, config, ops, vals);
}

/// A producer with `config` (any configuration `build` accepts; its bootstrap list is
/// replaced by the scripted broker's) through a sane run: records to each topic, time,
/// a flush, the close. For the `config_properties` target: whatever the durations and sizes,
/// the same checks hold.
pub fn run_config(mut config: Config) {
    config.bootstrap = vec![("boot".to_string(), 9092)];
    let mode = if config.transactional_id.is_some() {
        Mode::Transactional
    } else if config.acks == Acks::None {
        Mode::AcksZero
    } else if config.idempotence {
        Mode::Idempotent
    } else {
        Mode::Plain
    };
    let backoffs = [
        config.retry_backoff,
        config.retry_backoff_max,
        config.reconnect_backoff,
        config.reconnect_backoff_max,
    ];
    let s = Settings {
        mode,
        sasl: config.sasl.as_ref().map(|s| s.mechanism),
        end_silent: false,
        tv2: false,
        linger: config.linger,
        max_in_flight: config.max_in_flight,
        // The rate window: the shortest backoff, at most a second (a producer backing off for
        // hours sends little anyway).
        retry_backoff: backoffs
            .into_iter()
            .min()
            .unwrap_or_default()
            .min(Duration::from_secs(1)),
        batch_size: config.batch_size,
        buffer_memory: config.buffer_memory,
        buffer_records: config.buffer_max_records,
        request_timeout: config.request_timeout,
        delivery_timeout: config.delivery_timeout,
        transaction_timeout: config.transaction_timeout,
        seed: config.seed,
        first_token: 0,
    };
    // Records to each topic and partition, keyed and not, a flush, time.
    let ops = [0, 0x03, 0, 0x17, 0, 0x21, 1, 3, 3, 4, 0, 3, 5, 9, 1, 3, 7];
    execute(s, config, &ops, &[]);
}

fn execute(s: Settings, config: Config, ops: &[u8], vals: &[u8]) {
    let t0 = Instant::now();
    let heap_base = crate::alloc::reset_peak();
    let mut run = Run {
        producer: Producer::new(config, t0),
        t0,
        now: t0,
        ops: Bytes::new(ops),
        vals: Values::new(vals),
        broker: Broker::new(s.tv2, s.sasl.map(|m| m.kafka_name())),
        conns: BTreeMap::new(),
        ledger: Ledger::new(s.mode == Mode::AcksZero, s.mode == Mode::Transactional),
        rates: Rates::new(s.window(), s.max_in_flight),
        next_id: 0,
        wakeups: 0,
        heap_base,
        silent: false,
        refuse_connects: false,
        drop_after_request: false,
        fatal: false,
        requests: 0,
        closing: false,
        first_token: Some(s.first_token),
        s,
    };
    trace!("settings {:?}", run.s);
    if run.s.mode == Mode::Transactional {
        run.rates.call(t0);
        let r = run.producer.transactions().map(|mut t| t.init(t0));
        trace!("init_transactions: {r:?}");
    }
    run.pump();
    run.check(true);
    while !run.ops.is_empty() && run.requests < REQUEST_BUDGET {
        run.op();
        run.pump();
        run.check(true);
    }
    run.finish();
}

impl Run<'_> {
    /// A broken rule: a panic naming its class.
    fn fail(&mut self, (class, msg): Violation) {
        panic!(
            "hostile_broker [{class}] at t+{:?} ({:?}): {msg}",
            self.now - self.t0,
            self.s.mode
        );
    }

    /// One operation of the input: `op % 12` picks it, the next byte is its argument.
    fn op(&mut self) {
        let op = self.ops.u8();
        let arg = self.ops.u8();
        if matches!(op % 12, 0..=2 | 4 | 9) {
            self.rates.call(self.now);
        }
        match op % 12 {
            0..=2 => self.send(arg),
            3 => {
                let ms = if arg >= 240 {
                    u64::from(self.ops.u16())
                } else {
                    [
                        0, 1, 3, 10, 30, 100, 300, 1000, 3000, 10_000, 60_000, 300_000,
                    ][usize::from(arg) % 12]
                };
                trace!("advance {ms} ms");
                self.advance_to(self.now + Duration::from_millis(ms));
            }
            4 => {
                trace!("flush");
                self.producer.flush(self.now);
            }
            5 => self.connection_event(arg),
            6 => {
                const CODES: [i16; 16] =
                    [6, 74, 19, 7, 45, 59, 47, 31, 10, 13, 3, 56, 90, 120, 46, 0];
                const HINTS: [Hint; 5] = [
                    Hint::None,
                    Hint::SameLeader,
                    Hint::EpochBump,
                    Hint::OtherLeader,
                    Hint::UnknownNode,
                ];
                let code = CODES[usize::from(arg) % 16];
                let hint = HINTS[usize::from(arg >> 4) % 5];
                let left = self.left();
                let only = match self.ops.u8() {
                    p @ 0..=3 => Some(i32::from(p)),
                    _ => None,
                };
                trace!("policy: Produce answers {code} hint {hint:?} x{left} partition {only:?}");
                self.broker.policies.produce = Some(Standing { code, left });
                self.broker.policies.produce_partition = only;
                self.broker.policies.hint = Some(hint);
            }
            7 => {
                const CODES: [i16; 8] = [3, 5, 29, 17, 100, 129, 6, -1];
                const INDICES: [i32; 8] = [10_000_000, i32::MAX, -1, 5, 0, 1000, 65_536, 12];
                const NODES: [i32; 8] = [-1, 77, -5, i32::MAX, 0, 4, 1, i32::MIN];
                let k = usize::from(arg >> 2) % 8;
                let hack = match arg % 4 {
                    0 => MetadataHack::TopicError(CODES[k]),
                    1 => MetadataHack::PartitionIndex(INDICES[k]),
                    2 => MetadataHack::Leader(NODES[k]),
                    _ if k == 6 => MetadataHack::NewNodeIds,
                    _ => MetadataHack::BrokerNode(NODES[k]),
                };
                let left = self.left();
                trace!("policy: Metadata answers {hack:?} x{left}");
                self.broker.policies.metadata = Some((hack, left));
            }
            8 => {
                const APIS: [i16; 10] = [22, 10, 24, 26, 25, 28, 36, 17, 18, 3];
                const CODES: [i16; 16] = [
                    15, 16, 14, 51, 90, 53, 47, 48, 58, 120, 7, 35, -1, 13, 129, 31,
                ];
                let api = APIS[usize::from(arg) % 10];
                let code = CODES[usize::from(self.ops.u8()) % 16];
                let left = self.left();
                trace!("policy: api {api} answers {code} x{left}");
                self.broker.policies.api = Some((api, Standing { code, left }));
            }
            9 => self.transaction_op(arg),
            10 => self.garbage(arg),
            _ => match arg % 8 {
                0 | 4 => {
                    trace!("policy: all cleared");
                    self.broker.policies = Default::default();
                    self.silent = false;
                    self.refuse_connects = false;
                    self.drop_after_request = false;
                }
                1 => {
                    self.silent = !self.silent;
                    trace!("policy: silent {}", self.silent);
                }
                2 => {
                    self.refuse_connects = !self.refuse_connects;
                    trace!("policy: refuse connects {}", self.refuse_connects);
                }
                3 | 7 => {
                    self.drop_after_request = !self.drop_after_request;
                    trace!("policy: drop after request {}", self.drop_after_request);
                }
                k => {
                    let ms = [i32::MAX, 60_000][usize::from(k == 6)];
                    self.broker.policies.throttle = Some(ms);
                    trace!("policy: every answer throttles {ms} ms");
                }
            },
        }
    }

    /// How many answers a standing policy lasts (255: for good).
    fn left(&mut self) -> u32 {
        match self.ops.u8() {
            255 => u32::MAX,
            n => u32::from(n) + 1,
        }
    }

    /// Sends 1-4 records: topic, routing and size from `arg`.
    fn send(&mut self, arg: u8) {
        if self.s.mode == Mode::Transactional
            && self.producer.transaction_state() == TransactionState::Ready
        {
            let now = self.now;
            let r = self.producer.transactions().map(|mut t| t.begin(now));
            trace!("begin_transaction: {r:?}");
        }
        let topic = ["t0", "t1", "t2", "t0"][usize::from(arg >> 2) & 3];
        let routing = (arg >> 4) & 3;
        let pad = [0, 10, 100, 3000][usize::from(arg >> 6)];
        let explicit = match routing {
            2 => Some(i32::from(self.ops.u8() % 4)),
            3 => Some(i32::from(self.ops.u8()) - 2),
            _ => None,
        };
        for _ in 0..=(arg & 3) {
            let id = self.next_id;
            self.next_id += 1;
            let mut value = id.to_le_bytes().to_vec();
            value.resize(8 + pad, b'v');
            let mut r = Record::new(topic, value).with_timestamp(1_700_000_000_000 + id as i64);
            if routing == 1 {
                r = r.with_key(vec![arg, id as u8]);
            }
            if let Some(p) = explicit {
                r = r.with_partition(p);
            }
            let copy = r.clone();
            match self.producer.send(self.now, r, id) {
                Ok(()) => {
                    trace!("send {id} to {topic} {explicit:?}: accepted");
                    self.ledger.accept(id, &copy);
                    self.broker.note_record(id, &copy.topic);
                }
                Err(e) => {
                    trace!("send {id} to {topic} {explicit:?}: {}", e.reason);
                    if e.record != copy || e.opaque != id {
                        self.fail((
                            "refused-record-changed",
                            format!("send refused record {id} and handed back another"),
                        ));
                    }
                }
            }
        }
    }

    fn transaction_op(&mut self, arg: u8) {
        if self.s.mode != Mode::Transactional {
            self.producer.flush(self.now);
            return;
        }
        let now = self.now;
        let Some(mut txn) = self.producer.transactions() else {
            return;
        };
        let r = match arg % 5 {
            0 => txn.begin(now),
            1 | 4 => txn.commit(now),
            2 => txn.abort(now),
            _ => txn.send_offsets(
                now,
                vec![OffsetToCommit::new("t0", 0, 42)],
                ConsumerGroupMetadata::new("group"),
            ),
        };
        trace!("transaction op {}: {r:?}", arg % 5);
    }

    /// Drops, holds, chunks or refuses one connection (`arg % n` of them, by handle).
    fn connection_event(&mut self, arg: u8) {
        let n = self.conns.len();
        if n == 0 {
            return;
        }
        let Some(&id) = self.conns.keys().nth(usize::from(arg) % n) else {
            return;
        };
        let now = self.now;
        let kind = (arg >> 4) % 4;
        if kind == 0 {
            trace!("network: {id:?} reset");
            self.lose(id);
            self.producer.handle_disconnected(
                now,
                id,
                std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset (fuzz)"),
            );
            return;
        }
        let c = self.conns.get_mut(&id).expect("listed");
        match kind {
            1 => {
                c.held = !c.held;
                trace!("network: {id:?} held {}", c.held);
            }
            2 => {
                c.chunk = Some(usize::from(arg & 0x0F) + 1);
                trace!("network: {id:?} answers in pieces of {:?}", c.chunk);
            }
            _ if !c.connected => {
                c.refuse = true;
                trace!("network: {id:?} will be refused");
            }
            _ => {
                c.chunk = None;
                trace!("network: {id:?} answers whole");
            }
        }
    }

    /// Bytes that are not the broker's answers on one connection (`arg % n` of them): a size
    /// prefix (any size up to `u32::MAX`), then up to 255 bytes, from the operations.
    fn garbage(&mut self, arg: u8) {
        let mut bytes = self.ops.take(4).to_vec();
        let len = usize::from(self.ops.u8());
        bytes.extend_from_slice(self.ops.take(len));
        let n = self.conns.len();
        let Some((&id, c)) = self.conns.iter_mut().nth(usize::from(arg) % n.max(1)) else {
            return;
        };
        if !c.connected || bytes.is_empty() {
            return;
        }
        c.tainted = true;
        trace!("network: {} bytes of garbage on {id:?}", bytes.len());
        self.producer.handle_read(self.now, id, &bytes);
    }

    /// The answers still on their way on `id` never arrive.
    fn lose(&mut self, id: ConnId) {
        if let Some(c) = self.conns.remove(&id) {
            for p in c.outbox {
                if let Some(x) = &p.produce {
                    self.ledger.lost(x);
                }
            }
        }
    }

    /// Executes the producer's outputs until it has none; returns whether there were any.
    fn drain(&mut self) -> bool {
        let mut n = 0;
        while let Some(out) = self.producer.poll_output() {
            n += 1;
            if n > MAX_OUTPUTS {
                self.fail(("livelock", "poll_output did not drain".into()));
                return true;
            }
            match out {
                Output::Connect { conn, host, port } => {
                    trace!("connect {conn:?} {host}:{port}");
                    if let Err(v) = self
                        .rates
                        .connect(self.now, &host, port, self.broker.naming())
                    {
                        self.fail(v);
                    }
                    self.conns.insert(
                        conn,
                        Conn {
                            refuse: host == DOWN_HOST
                                || !(HOSTS.contains(&host.as_str()) || host == "boot"),
                            host,
                            connected: false,
                            inbox: Vec::new(),
                            outbox: VecDeque::new(),
                            held: false,
                            chunk: None,
                            tainted: false,
                            drop: false,
                            api_versions: 0,
                        },
                    );
                }
                Output::Transmit { conn, bytes } => self.transmit(conn, &bytes.to_contiguous()),
                Output::Disconnect { conn } => {
                    trace!("disconnect {conn:?}");
                    self.lose(conn);
                }
                Output::TokenRequest => {
                    let token = self.token();
                    trace!("token: {token:?}");
                    self.producer.handle_token(self.now, token);
                }
                Output::Delivery(d) => {
                    trace!(
                        "report {}: {:?}",
                        d.opaque,
                        d.result.as_ref().map(|m| m.offset).map_err(|f| &f.error)
                    );
                    if let Err(v) = self.ledger.report(&d) {
                        self.fail(v);
                    }
                }
                Output::Transaction(r) => trace!("transaction result {r:?}"),
                Output::Event(e) => {
                    if let Event::Fatal(e) = &e {
                        trace!("FATAL {e}");
                        self.fatal = true;
                    } else {
                        trace!("event {e:?}");
                    }
                }
            }
        }
        n > 0
    }

    /// An OAUTHBEARER token, sane (valid for an hour) or not: the first one of the kind the
    /// tuning byte names, the later ones from the values.
    fn token(&mut self) -> Result<OAuthToken, String> {
        let kind = match self.first_token.take() {
            Some(k) => k.checked_sub(1),
            None => self.vals.hostile(),
        };
        let v = &mut self.vals;
        Ok(match kind {
            None => OAuthToken::new("token", Duration::from_secs(3600)),
            Some(0) => return Err("no token (fuzz)".into()),
            Some(1) => OAuthToken::new("token", Duration::ZERO),
            Some(2) => OAuthToken::new("token", Duration::MAX),
            Some(3) => OAuthToken::new("token", Duration::from_millis(1)),
            Some(4) => OAuthToken::new("token", Duration::from_millis(u64::MAX)),
            Some(5) => OAuthToken::new("to\u{1}ken=x", Duration::from_secs(60)),
            Some(6) => {
                let mut t = OAuthToken::new("token", Duration::from_secs(60));
                t.extensions.push(("auth".into(), "Bearer\u{1}x".into()));
                t
            }
            Some(_) => OAuthToken::new("token", Duration::from_millis(u64::from(v.raw_u16()))),
        })
    }

    /// Request bytes written on `conn`: each complete frame is decoded and answered.
    fn transmit(&mut self, conn: ConnId, bytes: &[u8]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            self.fail((
                "transmit-on-closed",
                format!("Transmit on {conn:?}, which is not open"),
            ));
            return;
        };
        c.inbox.extend_from_slice(bytes);
        loop {
            let c = self.conns.get_mut(&conn).expect("checked above");
            if c.inbox.len() < 4 {
                return;
            }
            let size = i32::from_be_bytes([c.inbox[0], c.inbox[1], c.inbox[2], c.inbox[3]]);
            let Ok(size) = usize::try_from(size) else {
                self.fail(("bad-request", format!("negative request size {size}")));
                return;
            };
            if c.inbox.len() < 4 + size {
                return;
            }
            let frame: Vec<u8> = c.inbox.drain(..4 + size).skip(4).collect();
            let answered = match self.broker.answer(&mut self.vals, &frame) {
                Ok(a) => a,
                Err(e) => {
                    self.fail(("bad-request", e));
                    return;
                }
            };
            let api = answered.api;
            self.requests += 1;
            trace!(
                "request {api:?} on {conn:?} ({}): {}",
                self.conns[&conn].host,
                answered
                    .produce
                    .as_ref()
                    .map(|x| format!(
                        "{:?} answered {:?} (ok seen {:?})",
                        x.batches
                            .iter()
                            .map(|b| (&b.topic, b.partition, b.ids.len()))
                            .collect::<Vec<_>>(),
                        x.outcomes,
                        x.ok_seen
                    ))
                    .unwrap_or_default()
            );
            let c = self.conns.get_mut(&conn).expect("checked above");
            if api == kafka_protocol::messages::ApiKey::ApiVersions {
                c.api_versions += 1;
                if c.api_versions > 6 {
                    let n = c.api_versions;
                    self.fail((
                        "request-storm",
                        format!("{n} ApiVersions requests on one connection"),
                    ));
                }
            }
            if let Err(v) = self
                .rates
                .request(self.now, api as i16, answered.produce.as_ref())
            {
                self.fail(v);
            }
            if let Some(x) = &answered.produce {
                if let Err(v) = self.ledger.sent(x) {
                    self.fail(v);
                }
                for b in &x.batches {
                    let listed = self.broker.listed.get(&b.topic).copied().unwrap_or(0);
                    if b.partition < 0 || b.partition >= listed {
                        self.fail((
                            "unlisted-partition",
                            format!(
                                "Produce to {}-{}: no Metadata answer listed the topic's partitions as 0..n-1 with n > {} (largest such n: {listed})",
                                b.topic, b.partition, b.partition
                            ),
                        ));
                    }
                }
            }
            let c = self.conns.get_mut(&conn).expect("checked above");
            if self.drop_after_request {
                c.drop = true;
            }
            match answered.frame {
                Some(frame) => c.outbox.push_back(Pending {
                    frame,
                    sent: 0,
                    matches: answered.matches,
                    produce: answered.produce,
                }),
                None => {
                    if let Some(x) = &answered.produce {
                        self.ledger.lost(x);
                    }
                }
            }
        }
    }

    /// Lets the network run at the current instant until nothing moves: connection attempts
    /// complete (or are refused), answers are read (whole or in pieces), outputs executed.
    ///
    /// A round counts towards [`MAX_ROUNDS`] when the producer did something in it (outputs) or
    /// an exchange completed (a whole answer read, a connection settled); a round that only
    /// handed over a piece of an answer does not (answers in pieces of a few bytes would
    /// otherwise count as the producer's livelock; the pieces of one frame are finite).
    fn pump(&mut self) {
        let mut rounds = 0;
        loop {
            if rounds > MAX_ROUNDS {
                self.fail((
                    "livelock",
                    format!("no rest after {MAX_ROUNDS} rounds at one instant"),
                ));
                return;
            }
            let mut progress = self.drain();
            let mut counted = progress;
            let now = self.now;
            let ids: Vec<ConnId> = self.conns.keys().copied().collect();
            for id in ids {
                let Some(c) = self.conns.get_mut(&id) else {
                    continue;
                };
                if c.drop {
                    trace!("network: {id:?} closed by the broker");
                    self.lose(id);
                    self.producer.handle_disconnected(
                        now,
                        id,
                        std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "reset by the broker (fuzz)",
                        ),
                    );
                    progress = true;
                    counted = true;
                    continue;
                }
                if !c.connected {
                    if self.silent && !c.refuse {
                        continue;
                    }
                    progress = true;
                    counted = true;
                    if c.refuse || self.refuse_connects {
                        trace!("network: {id:?} refused");
                        self.conns.remove(&id);
                        self.producer.handle_connect_failed(
                            now,
                            id,
                            std::io::Error::new(
                                std::io::ErrorKind::ConnectionRefused,
                                "refused (fuzz)",
                            ),
                        );
                    } else {
                        c.connected = true;
                        self.producer.handle_connected(now, id);
                    }
                    continue;
                }
                if c.held || self.silent {
                    continue;
                }
                let Some(p) = c.outbox.front_mut() else {
                    continue;
                };
                let n = c.chunk.unwrap_or(usize::MAX).min(p.frame.len() - p.sent);
                let piece = p.frame[p.sent..p.sent + n].to_vec();
                p.sent += n;
                let done = p.sent == p.frame.len();
                let finished = if done { c.outbox.pop_front() } else { None };
                let tainted = c.tainted;
                progress = true;
                counted |= finished.is_some();
                // What the producer learns is settled before it reads the last byte, and its
                // reports are drained before the next connection's bytes: each report is
                // checked against what the producer had read when it made it (a producer that
                // failed for good while reading one answer has reported the batches in flight
                // elsewhere before it reads their answers).
                if let Some(p) = finished {
                    if let Some(x) = &p.produce {
                        if tainted {
                            self.ledger.garbled(x);
                        } else if p.matches {
                            self.ledger.answered(x);
                        } else {
                            self.ledger.lost(x);
                        }
                    }
                }
                self.producer.handle_read(now, id, &piece);
                counted |= self.drain();
            }
            if !progress {
                return;
            }
            if counted {
                rounds += 1;
            }
        }
    }

    /// Moves virtual time to `to`, firing the producer's deadlines in order on the way.
    fn advance_to(&mut self, to: Instant) {
        while let Some(t) = self.producer.poll_timeout() {
            if t > to || (self.requests > REQUEST_BUDGET && !self.closing) {
                break;
            }
            self.wakeups += 1;
            if self.wakeups > MAX_WAKEUPS {
                self.fail(("timer-storm", format!("more than {MAX_WAKEUPS} wakeups")));
                return;
            }
            self.now = self.now.max(t);
            self.producer.handle_timeout(self.now);
            if let Some(next) = self.producer.poll_timeout() {
                if next <= self.now {
                    self.fail((
                        "timer-contract",
                        format!("poll_timeout {:?} not after handle_timeout", next - self.t0),
                    ));
                    return;
                }
            }
            self.pump();
            self.check(false);
        }
        self.now = self.now.max(to);
    }

    /// The caps, after every operation (`full`: the broker table too, from a metrics
    /// snapshot) and every deadline fired.
    fn check(&mut self, full: bool) {
        let mut broken: Vec<Violation> = Vec::new();
        let p = &self.producer;
        if p.buffered_bytes() > self.s.buffer_memory {
            broken.push((
                "buffer-cap",
                format!(
                    "buffered_bytes {} > buffer.memory {}",
                    p.buffered_bytes(),
                    self.s.buffer_memory
                ),
            ));
        }
        if p.buffered_records() > self.s.buffer_records {
            broken.push((
                "buffer-cap",
                format!(
                    "buffered_records {} > {}",
                    p.buffered_records(),
                    self.s.buffer_records
                ),
            ));
        }
        let m = if full {
            p.metrics()
        } else {
            Default::default()
        };
        if m.brokers.len() > BROKER_TABLE_CAP {
            broken.push((
                "broker-table",
                format!("{} broker slots (cap {BROKER_TABLE_CAP})", m.brokers.len()),
            ));
        }
        for b in &m.brokers {
            if b.node_id < -1 {
                broken.push((
                    "negative-node-id",
                    format!("broker slot with node id {}", b.node_id),
                ));
            }
            if b.in_flight_produce > self.s.max_in_flight {
                broken.push((
                    "in-flight-cap",
                    format!(
                        "{} Produce requests in flight to node {} (max.in.flight {})",
                        b.in_flight_produce, b.node_id, self.s.max_in_flight
                    ),
                ));
            }
        }
        drop(m);
        let grown = crate::alloc::peak().saturating_sub(self.heap_base);
        if grown > HEAP_CAP.saturating_add(self.s.buffer_memory) {
            broken.push(("heap-cap", format!("the heap grew by {grown} bytes")));
        }
        for v in broken {
            self.fail(v);
        }
    }

    /// The broker answers sanely (or stops answering), the application closes the producer:
    /// `close` must finish within bounded steps and virtual time, every record reported.
    fn finish(mut self) {
        self.broker.policies = Default::default();
        self.refuse_connects = false;
        self.drop_after_request = false;
        self.silent = self.s.end_silent;
        for c in self.conns.values_mut() {
            c.held = false;
            c.chunk = None;
        }
        trace!(
            "close (broker {})",
            if self.silent { "silent" } else { "sane" }
        );
        self.closing = true;
        self.producer.close(self.now);
        self.pump();
        let start = self.now;
        // Records keep their delivery timeout; a transaction ending is waited for at most
        // `max.block.ms` from the close (and until its records are answered and no
        // coordinator request is in flight); then the requests in flight time out.
        let txn_wait = match self.s.mode {
            Mode::Transactional => MAX_BLOCK,
            _ => Duration::ZERO,
        };
        let bound = self
            .s
            .delivery_timeout
            .max(txn_wait)
            .max(Duration::from_secs(8))
            .saturating_add(self.s.request_timeout.saturating_mul(4))
            .saturating_add(self.s.retry_backoff.saturating_mul(20))
            .saturating_add(Duration::from_secs(5));
        let mut steps = 0u64;
        while !self.producer.is_closed() {
            steps += 1;
            if steps > MAX_CLOSE_STEPS {
                self.fail((
                    "close-hangs",
                    format!("close not done after {MAX_CLOSE_STEPS} steps"),
                ));
                return;
            }
            let Some(next) = self.producer.poll_timeout() else {
                self.fail((
                    "close-hangs",
                    format!(
                        "close waits with no deadline, {} records unreported: {:?}",
                        self.producer.buffered_records(),
                        self.ledger.unreported().iter().take(8).collect::<Vec<_>>()
                    ),
                ));
                return;
            };
            if start.checked_add(bound).is_some_and(|end| next > end) {
                self.fail((
                    "close-hangs",
                    format!(
                        "close not done {:?} after it began (next deadline {:?} later), {} records unreported",
                        bound,
                        next - start,
                        self.producer.buffered_records()
                    ),
                ));
                return;
            }
            self.advance_to(next);
        }
        let unreported = self.ledger.unreported();
        if !unreported.is_empty() {
            self.fail((
                "unreported",
                format!(
                    "closed with {} of {} records unreported: {:?}",
                    unreported.len(),
                    self.ledger.accepted(),
                    &unreported[..unreported.len().min(8)]
                ),
            ));
        }
        trace!(
            "closed at t+{:?}: {} delivered, {} failed, fatal {}",
            self.now - self.t0,
            self.ledger.delivered,
            self.ledger.failed,
            self.fatal
        );
    }
}
