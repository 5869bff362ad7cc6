//! The network between the client and the brokers: connections, bytes in flight each way
//! with their seeded latencies, resets and orderly closes, and the client-facing events.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{later, SimCluster};

/// Identifies one simulated client connection. Opaque: compare it, hash it, print it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub(super) u64);

impl ConnId {
    /// The raw number behind this id (unique within one [`SimCluster`]).
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

/// Whether a broker's events are held back from the client (see
/// [`SimCluster::stall_connections_to`](crate::SimCluster::stall_connections_to)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stall {
    None,
    Until(Instant),
    Indefinite,
}

/// A client-side network event, returned by [`SimCluster::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetEvent {
    /// The connection started by [`SimCluster::connect`] is established; writes may follow.
    Connected(ConnId),
    /// The connection could not be established: no broker listens on that address, or it is
    /// stopped (or was stopped before the connection completed). The id is dead.
    ConnectFailed(ConnId),
    /// Bytes from the broker, in order. Response frames may be split across several `Data`
    /// events when [`SimConfig::fragment_responses`](crate::SimConfig::fragment_responses) is set.
    Data(ConnId, Bytes),
    /// The broker side closed the connection (fault injection, broker stop, malformed request,
    /// acks=0 error, random drop). Bytes still in flight were lost. The id is dead.
    Closed(ConnId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClientView {
    Connecting,
    Open,
    Closed,
}

#[derive(Debug)]
pub(super) struct Pending<T> {
    pub(super) at: Instant,
    pub(super) seq: u64,
    pub(super) item: T,
}

#[derive(Debug)]
pub(super) struct Conn {
    /// Broker node id, or `None` when the address matched no broker.
    pub(super) broker: Option<i32>,
    pub(super) view: ClientView,
    /// The broker still reads from / writes to this connection.
    pub(super) broker_open: bool,
    /// The client called `close`.
    pub(super) client_closed: bool,
    pub(super) to_broker: VecDeque<Pending<Bytes>>,
    pub(super) to_client: VecDeque<Pending<NetEvent>>,
    pub(super) last_to_broker: Instant,
    pub(super) last_to_client: Instant,
    pub(super) inbuf: Vec<u8>,
    /// The connection's SASL session, as the broker sees it.
    pub(super) sasl: super::broker::SaslSession,
}

impl SimCluster {
    /// Starts a connection to `host:port`. The outcome arrives one latency later as
    /// [`NetEvent::Connected`] or [`NetEvent::ConnectFailed`] (no broker at that address, or it is
    /// stopped).
    #[must_use = "the connection is only reachable through its id"]
    pub fn connect(&mut self, now: Instant, host: &str, port: u16) -> ConnId {
        let now = self.clock(now);
        let id = self.next_conn;
        self.next_conn += 1;
        let broker = self
            .brokers
            .values()
            .find(|b| b.spec.host == host && b.spec.port == port);
        let (broker_id, up) = match broker {
            Some(b) => (Some(b.spec.node_id), b.running),
            None => (None, false),
        };
        let lat = self.latency();
        self.conns.insert(
            id,
            Conn {
                broker: broker_id,
                view: ClientView::Connecting,
                broker_open: up,
                client_closed: false,
                to_broker: VecDeque::new(),
                to_client: VecDeque::new(),
                last_to_broker: now,
                last_to_client: now,
                inbuf: Vec::new(),
                sasl: super::broker::SaslSession::default(),
            },
        );
        let ev = if up {
            NetEvent::Connected(ConnId(id))
        } else {
            NetEvent::ConnectFailed(ConnId(id))
        };
        self.push_to_client(id, later(now, lat), ev);
        ConnId(id)
    }

    /// Sends client bytes to the broker (any chunking; the broker reassembles size-prefixed
    /// frames). Ignored on a connection that is closed (by either side) or failed.
    pub fn write(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        let now = self.clock(now);
        if bytes.is_empty() {
            return;
        }
        let lat = self.latency();
        let seq = self.seq();
        let Some(c) = self.conns.get_mut(&conn.0) else {
            return;
        };
        if !c.broker_open || c.client_closed || c.view == ClientView::Closed {
            return;
        }
        let at = later(now, lat).max(c.last_to_broker);
        c.last_to_broker = at;
        c.to_broker.push_back(Pending {
            at,
            seq,
            item: Bytes::copy_from_slice(bytes),
        });
    }

    /// The client closes the connection. Bytes it already wrote still reach the broker and are
    /// handled (their effects persist); nothing more is delivered to the client on this id.
    pub fn close(&mut self, now: Instant, conn: ConnId) {
        self.clock(now);
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.client_closed = true;
            c.view = ClientView::Closed;
            c.to_client.clear();
        }
    }

    /// Handles everything broker-side due at or before `now`, then returns the next client-side
    /// event due at or before `now` (the earliest first), or `None`.
    #[must_use = "a dropped event is lost to the client"]
    pub fn poll_event(&mut self, now: Instant) -> Option<NetEvent> {
        let now = self.clock(now);
        self.advance(now);
        let mut best: Option<(Instant, u64, u64)> = None;
        for (&id, c) in &self.conns {
            let Some(front) = c.to_client.front() else {
                continue;
            };
            let Some(at) = self.deliverable_at(c, front.at) else {
                continue;
            };
            if at > now {
                continue;
            }
            if best.is_none_or(|(bat, bseq, _)| (at, front.seq) < (bat, bseq)) {
                best = Some((at, front.seq, id));
            }
        }
        let (_, _, id) = best?;
        let c = self.conns.get_mut(&id)?;
        let ev = c.to_client.pop_front()?.item;
        match &ev {
            NetEvent::Connected(_) => c.view = ClientView::Open,
            NetEvent::ConnectFailed(_) | NetEvent::Closed(_) => {
                c.view = ClientView::Closed;
                c.to_client.clear();
            }
            NetEvent::Data(..) => {}
        }
        Some(ev)
    }

    /// When the next event is due: a client-side delivery (after stalls), a broker-side
    /// arrival, or the transaction coordinator writing delayed markers
    /// ([`SimConfig::transaction_marker_delay`](crate::SimConfig::transaction_marker_delay)).
    /// `None` when nothing is scheduled (or everything left is stalled indefinitely).
    /// Transaction timeouts are not events: the coordinator aborts a transaction open longer
    /// than its timeout at the first [`SimCluster::advance`] (or [`SimCluster::poll_event`], or
    /// request handled) after its deadline.
    #[must_use]
    pub fn next_event_time(&self) -> Option<Instant> {
        let mut next: Option<Instant> = self.txn_next_completion();
        let mut consider = |t: Instant| {
            next = Some(next.map_or(t, |n: Instant| n.min(t)));
        };
        for c in self.conns.values() {
            if let Some(f) = c.to_broker.front() {
                consider(f.at);
            }
            if let Some(f) = c.to_client.front() {
                if let Some(at) = self.deliverable_at(c, f.at) {
                    consider(at);
                }
            }
        }
        next
    }

    /// Handles, broker-side, every arrival due at or before `now`, in time order (each at its
    /// own arrival instant, so the result does not depend on how often this is called).
    /// [`SimCluster::poll_event`] calls it; calling it directly is only needed to let brokers
    /// act without consuming client events. Afterwards the transaction coordinator acts up to
    /// `now`: delayed markers are written, timed-out transactions aborted.
    pub fn advance(&mut self, now: Instant) {
        let now = self.clock(now);
        loop {
            let mut best: Option<(Instant, u64, u64)> = None;
            for (&id, c) in &self.conns {
                if let Some(f) = c.to_broker.front() {
                    if f.at <= now && best.is_none_or(|(a, s, _)| (f.at, f.seq) < (a, s)) {
                        best = Some((f.at, f.seq, id));
                    }
                }
            }
            let Some((at, _, id)) = best else { break };
            let Some(chunk) = self
                .conns
                .get_mut(&id)
                .and_then(|c| c.to_broker.pop_front())
            else {
                break;
            };
            self.broker_receive(id, at, chunk.item);
        }
        self.txn_tick(now);
    }

    /// Connections the client has not seen closed yet (connecting or open).
    pub fn open_connections(&self) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| c.view != ClientView::Closed && !c.client_closed)
            .map(|(id, _)| ConnId(*id))
            .collect()
    }

    pub(super) fn latency(&mut self) -> Duration {
        let (min, max) = self.cfg.latency;
        self.rng.duration(min, max)
    }

    /// When a client-side event queued at `at` can be delivered, given the broker's stall.
    fn deliverable_at(&self, c: &Conn, at: Instant) -> Option<Instant> {
        let stall = c
            .broker
            .and_then(|b| self.brokers.get(&b))
            .map_or(Stall::None, |b| b.stall);
        match stall {
            Stall::None => Some(at),
            Stall::Until(t) => Some(at.max(t)),
            Stall::Indefinite => None,
        }
    }

    fn push_to_client(&mut self, id: u64, at: Instant, ev: NetEvent) {
        let seq = self.seq();
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.client_closed || c.view == ClientView::Closed {
            return;
        }
        let at = at.max(c.last_to_client);
        c.last_to_client = at;
        c.to_client.push_back(Pending { at, seq, item: ev });
    }

    pub(super) fn reset_conns(&mut self, now: Instant, pred: impl Fn(&Conn) -> bool) {
        self.reset_conns_by_id(now, |_, c| pred(c));
    }

    /// Connection reset seen by the client at `now`: everything in flight is lost.
    pub(super) fn reset_conns_by_id(&mut self, now: Instant, pred: impl Fn(u64, &Conn) -> bool) {
        let ids: Vec<u64> = self
            .conns
            .iter()
            .filter(|(id, c)| pred(**id, c))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.reset_conn(id, now);
        }
    }

    pub(super) fn reset_conn(&mut self, id: u64, at: Instant) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.view == ClientView::Closed || c.client_closed {
            c.broker_open = false;
            c.to_broker.clear();
            return;
        }
        let connecting = c.view == ClientView::Connecting
            && matches!(c.to_client.front(), Some(p) if matches!(p.item, NetEvent::Connected(_)));
        let was_open = c.broker_open;
        c.broker_open = false;
        c.to_broker.clear();
        c.inbuf.clear();
        if !was_open {
            // Already closed broker-side: a Closed/ConnectFailed is queued already.
            return;
        }
        c.to_client.clear();
        c.last_to_client = at;
        let ev = if connecting {
            NetEvent::ConnectFailed(ConnId(id))
        } else {
            NetEvent::Closed(ConnId(id))
        };
        self.push_to_client(id, at, ev);
    }

    /// Broker-initiated orderly close at `at`: responses already queued are delivered first,
    /// then `Closed` one latency later.
    pub(super) fn broker_close(&mut self, id: u64, at: Instant) {
        let lat = self.latency();
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if !c.broker_open {
            return;
        }
        c.broker_open = false;
        c.to_broker.clear();
        c.inbuf.clear();
        self.push_to_client(id, later(at, lat), NetEvent::Closed(ConnId(id)));
    }

    /// Bytes arriving at the broker at `at`: reassemble frames, handle each.
    fn broker_receive(&mut self, id: u64, at: Instant, bytes: Bytes) {
        let max = self.cfg.max_frame_size;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if !c.broker_open {
            return;
        }
        let broker = c.broker;
        c.inbuf.extend_from_slice(&bytes);
        loop {
            let Some(c) = self.conns.get_mut(&id) else {
                return;
            };
            if !c.broker_open || c.inbuf.len() < 4 {
                return;
            }
            let size = i32::from_be_bytes([c.inbuf[0], c.inbuf[1], c.inbuf[2], c.inbuf[3]]);
            let usize_size = usize::try_from(size).ok().filter(|s| *s <= max && *s >= 8);
            let Some(len) = usize_size else {
                self.violation(
                    broker,
                    id,
                    format!("invalid frame size {size} (must be 8..={max}); connection closed"),
                );
                self.broker_close(id, at);
                return;
            };
            if c.inbuf.len() < 4 + len {
                return;
            }
            let frame: Vec<u8> = c.inbuf.drain(..4 + len).skip(4).collect();
            self.handle_frame(id, at, Bytes::from(frame));
        }
    }

    /// Queues a response frame (already size-prefixed) from the broker of `id` at `at`.
    pub(super) fn send_response(&mut self, id: u64, at: Instant, frame: Vec<u8>) {
        let broker = self.conns.get(&id).and_then(|c| c.broker);
        let mut extra = Duration::ZERO;
        if let Some(b) = broker.and_then(|b| self.brokers.get_mut(&b)) {
            if let Some((d, n)) = b.delay {
                extra = d;
                b.delay = (n > 1).then_some((d, n - 1));
            }
        }
        let lat = self.latency();
        let arrival = later(later(at, lat), extra);
        if self.cfg.fragment_responses && frame.len() > 1 {
            let pieces = 1 + self.rng.below(3) as usize;
            let mut cuts: Vec<usize> = (1..pieces)
                .map(|_| 1 + self.rng.below(frame.len() as u64 - 1) as usize)
                .collect();
            cuts.sort_unstable();
            cuts.dedup();
            let frame = Bytes::from(frame);
            let mut start = 0;
            for cut in cuts.into_iter().chain(std::iter::once(frame.len())) {
                if cut > start {
                    self.push_to_client(
                        id,
                        arrival,
                        NetEvent::Data(ConnId(id), frame.slice(start..cut)),
                    );
                    start = cut;
                }
            }
        } else {
            self.push_to_client(id, arrival, NetEvent::Data(ConnId(id), Bytes::from(frame)));
        }
    }
}
