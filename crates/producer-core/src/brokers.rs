//! The brokers the producer may connect to: one slot per bootstrap address and per node from
//! metadata, each with at most one connection, the partitions it leads, its reconnect backoff
//! and throttle, and whether it has something to send.
//!
//! Bootstrap slots stay for the producer's life. A node's slot is retired when the cluster no
//! longer lists the node ([`Brokers::retire`]), and a later node takes the free slot over. A
//! slot's connection generation goes on counting across owners, so a [`ConnId`] of a retired
//! node's connection never names its successor's; timers naming a retired slot are forgotten
//! by whoever retires it.

use std::num::NonZeroU64;
use std::time::{Duration, Instant};

use crate::active::{ActivePartitions, Listed, Listing};
use crate::connection::{ConnState, Connection};
use crate::limits::{MAX_BROKERS, MAX_THROTTLE};
use crate::types::{ConnId, ConnectionError};

/// A broker the producer may connect to: a node from metadata, or a bootstrap address.
#[derive(Debug)]
pub(crate) struct BrokerSlot {
    /// Node id, or -1 for a bootstrap address.
    pub(crate) node_id: i32,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) conn: Option<Connection>,
    /// Incremented for every new connection, so late events for old ones are ignored.
    generation: u32,
    /// Partitions this broker leads: (topic, partition).
    pub(crate) partitions: Vec<(u32, u32)>,
    /// Something may be sendable; the request builder should look.
    dirty: bool,
    /// No request before this instant (`throttle_time_ms`).
    pub(crate) throttled_until: Option<Instant>,
    /// No connection attempt before this instant.
    pub(crate) reconnect_at: Option<Instant>,
    /// Consecutive failed connection attempts (reconnect backoff exponent).
    pub(crate) failures: u32,
    /// The partitions it leads that have something to send, in the order requests serve them
    /// (round robin, so no partition starves).
    pub(crate) active: ActivePartitions,
    /// Every in-flight slot of its connection is busy (`max_in_flight` Produce requests
    /// outstanding): the open batches of the partitions it leads may grow past `batch_size`
    /// (`crate::producer::growth`). Set when the count changes, read once per batch.
    produce_slots_full: bool,
    /// Why its last connection failed, until a connection to it is ready again.
    last_error: Option<Box<ConnectionError>>,
    /// The node left the cluster and the slot is free: it has no connection, leads nothing,
    /// and is skipped by every search until a node takes it over.
    retired: bool,
}

impl BrokerSlot {
    fn new(node_id: i32, host: String, port: u16, generation: u32) -> Self {
        BrokerSlot {
            node_id,
            host,
            port,
            conn: None,
            generation,
            partitions: Vec::new(),
            dirty: false,
            throttled_until: None,
            reconnect_at: None,
            failures: 0,
            active: ActivePartitions::default(),
            produce_slots_full: false,
            last_error: None,
            retired: false,
        }
    }

    /// Notes how many Produce requests are outstanding on its connection (0 when it has
    /// none): call whenever that count changes (a request sent, answered, or lost with its
    /// connection).
    pub(crate) fn set_produce_in_flight(&mut self, in_flight: usize, max_in_flight: usize) {
        self.produce_slots_full = in_flight >= max_in_flight;
    }

    /// Whether every in-flight slot of its connection is busy, as last noted by
    /// [`BrokerSlot::set_produce_in_flight`].
    pub(crate) fn produce_slots_full(&self) -> bool {
        self.produce_slots_full
    }

    /// Whether the slot is a bootstrap address (not a node, nor a retired one).
    fn is_bootstrap(&self) -> bool {
        self.node_id < 0 && !self.retired
    }

    /// A broker answered with `throttle_time_ms`: no request before `now` plus that (at most
    /// [`MAX_THROTTLE`]). Returns when the throttle ends, for the caller's timer, or `None`
    /// when the answer asked for none.
    #[must_use = "the throttle's end must be armed as the broker's timer"]
    pub(crate) fn throttle(&mut self, now: Instant, throttle_time_ms: i32) -> Option<Instant> {
        let ms = u64::try_from(throttle_time_ms).ok().filter(|&ms| ms > 0)?;
        let until = now + Duration::from_millis(ms).min(MAX_THROTTLE);
        self.throttled_until = Some(until);
        Some(until)
    }

    /// Whether a ready connection exists.
    pub(crate) fn is_ready(&self) -> bool {
        self.conn
            .as_ref()
            .is_some_and(|c| c.state == ConnState::Ready)
    }

    /// Whether a connection attempt is allowed at `now`: the slot has no connection (one
    /// already open, even one that cannot serve the request at hand, is never replaced by a new
    /// attempt: that left the old socket open and, for a bootstrap broker that does not offer
    /// InitProducerId, reconnected on every answer) and its reconnect backoff is over.
    pub(crate) fn may_connect(&self, now: Instant) -> bool {
        self.conn.is_none() && self.reconnect_at.is_none_or(|t| t <= now)
    }

    /// The connection succeeded in negotiating: the reconnect backoff starts over, and its
    /// last connection error is forgotten.
    fn connection_ready(&mut self) {
        self.failures = 0;
        self.reconnect_at = None;
        self.last_error = None;
    }

    /// `host:port`, with an IPv6 literal in brackets.
    pub(crate) fn address(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// What [`Brokers::count_failure`] concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureOutcome {
    /// Other connections are up or on their way, or this episode was reported already.
    Counted,
    /// No connection is up or being set up: report that every broker is down (once per
    /// episode).
    AllDown {
        /// Some connection was ready at some point.
        cluster_reached: bool,
    },
}

/// Every broker slot, by slot number (bootstrap addresses first, then nodes as metadata names
/// them), the node id -> slot map, and the slots marked as having something to send.
#[derive(Debug)]
pub(crate) struct Brokers {
    slots: Vec<BrokerSlot>,
    /// Node id -> slot, sorted by node id (at most [`MAX_BROKERS`]): looked up a few times per
    /// batch (a partition's leader), where a binary search costs less than hashing.
    by_node: Vec<(i32, u32)>,
    dirty: Vec<u32>,
    /// Bootstrap slot to try next when no broker is reachable.
    next_bootstrap: usize,
    /// The latest connection failure of any slot.
    latest_error: Option<Box<ConnectionError>>,
    /// Some connection was ready at some point.
    ever_ready: bool,
    /// "Every broker is down" was reported, and no connection has been ready since.
    all_down_reported: bool,
    /// Retired slots, for the next new node.
    free: Vec<u32>,
    /// The sequence number of the next partition listing ([`crate::active`]).
    next_listing: u64,
}

impl Brokers {
    /// One slot per bootstrap address.
    pub(crate) fn new(bootstrap: &[(String, u16)]) -> Self {
        Brokers {
            slots: bootstrap
                .iter()
                .map(|(h, p)| BrokerSlot::new(-1, h.clone(), *p, 0))
                .collect(),
            by_node: Vec::new(),
            dirty: Vec::new(),
            next_bootstrap: 0,
            latest_error: None,
            ever_ready: false,
            all_down_reported: false,
            free: Vec::new(),
            next_listing: 0,
        }
    }

    /// How many slots there are, retired ones included: slot numbers run below it. (A retired
    /// slot has no connection and leads nothing; [`Brokers::mark_dirty`] ignores it.)
    pub(crate) fn len(&self) -> u32 {
        self.slots.len() as u32
    }

    /// What the queue-delay limit's floor counts: the brokers metadata named (at least one) and
    /// the partitions with something to send (each list's entries, stale ones included, at most
    /// the partitions its broker leads). A scan of the slots: once per queue-delay sample.
    pub(crate) fn backlog(&self) -> crate::queue_delay::Backlog {
        let (mut brokers, mut partitions) = (0, 0);
        for b in self.iter().filter(|b| b.node_id >= 0) {
            brokers += 1;
            partitions += b.active.len().min(b.partitions.len());
        }
        crate::queue_delay::Backlog {
            brokers: brokers.max(1),
            partitions,
        }
    }

    /// The slots of live brokers (bootstrap addresses and nodes), with their numbers.
    pub(crate) fn live(&self) -> impl Iterator<Item = (usize, &BrokerSlot)> {
        self.slots.iter().enumerate().filter(|(_, b)| !b.retired)
    }

    pub(crate) fn slot(&self, slot: u32) -> &BrokerSlot {
        &self.slots[slot as usize]
    }

    pub(crate) fn slot_mut(&mut self, slot: u32) -> &mut BrokerSlot {
        &mut self.slots[slot as usize]
    }

    /// Every live slot (retired ones are skipped).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &BrokerSlot> {
        self.live().map(|(_, b)| b)
    }

    /// The slot of a node named by metadata, if known.
    pub(crate) fn slot_of_node(&self, node_id: i32) -> Option<u32> {
        self.by_node
            .binary_search_by_key(&node_id, |&(n, _)| n)
            .ok()
            .map(|i| self.by_node[i].1)
    }

    /// Whether metadata named this node.
    pub(crate) fn knows_node(&self, node_id: i32) -> bool {
        self.slot_of_node(node_id).is_some()
    }

    /// The slot of a node, created (or its address updated) from a broker entry of a Metadata
    /// answer, a Produce answer's node endpoints or a FindCoordinator answer. A new node takes
    /// a retired slot over if there is one.
    ///
    /// Refused (`None`, nothing changes) for a negative node id, and for a new node when
    /// [`MAX_BROKERS`] nodes are known already.
    pub(crate) fn node_slot(&mut self, node_id: i32, host: &str, port: i32) -> Option<u32> {
        if node_id < 0 {
            return None;
        }
        let port = u16::try_from(port).unwrap_or(0);
        let at = match self.by_node.binary_search_by_key(&node_id, |&(n, _)| n) {
            Ok(i) => {
                let slot = self.by_node[i].1;
                let b = &mut self.slots[slot as usize];
                if b.host != host || b.port != port {
                    b.host = host.to_owned();
                    b.port = port;
                }
                return Some(slot);
            }
            Err(at) => at,
        };
        if self.by_node.len() >= MAX_BROKERS {
            return None;
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                let b = &mut self.slots[slot as usize];
                *b = BrokerSlot::new(node_id, host.to_owned(), port, b.generation);
                slot
            }
            None => {
                self.slots
                    .push(BrokerSlot::new(node_id, host.to_owned(), port, 0));
                self.slots.len() as u32 - 1
            }
        };
        self.by_node.insert(at, (node_id, slot));
        Some(slot)
    }

    /// The node slots whose node is not in `listed` (the node ids of a Metadata answer): the
    /// brokers that left the cluster.
    pub(crate) fn nodes_not_listed(&self, listed: &[i32]) -> Vec<u32> {
        let mut listed = listed.to_vec();
        listed.sort_unstable();
        self.by_node
            .iter()
            .filter(|(node, _)| listed.binary_search(node).is_err())
            .map(|&(_, slot)| slot)
            .collect()
    }

    /// Frees the slot of a node that left the cluster. Call it once the slot's connection is
    /// closed (taken), its partitions have moved to other leaders, and the timers naming it
    /// are forgotten: afterwards the slot is skipped by every search, [`Brokers::mark_dirty`]
    /// ignores it, and the next new node takes it over (its connections under generations
    /// after this one's). Bootstrap slots are never retired.
    pub(crate) fn retire(&mut self, slot: u32) {
        let b = &mut self.slots[slot as usize];
        if b.is_bootstrap() || b.retired {
            return;
        }
        debug_assert!(b.conn.is_none(), "the connection is closed first");
        debug_assert!(b.partitions.is_empty(), "the partitions move first");
        if let Ok(i) = self.by_node.binary_search_by_key(&b.node_id, |&(n, _)| n) {
            if self.by_node[i].1 == slot {
                self.by_node.remove(i);
            }
        }
        let mut vacant = BrokerSlot::new(-1, String::new(), 0, b.generation);
        vacant.retired = true;
        *b = vacant;
        self.dirty.retain(|&s| s != slot);
        self.free.push(slot);
    }

    /// Forgets every partition of `topic` (a topic the producer forgets): no slot leads it.
    pub(crate) fn forget_topic(&mut self, topic: u32) {
        for b in &mut self.slots {
            b.partitions.retain(|&(t, _)| t != topic);
            b.active.forget_topic(topic);
        }
    }

    /// The live connection `conn`, if it is still the slot's current one.
    pub(crate) fn conn(&self, conn: ConnId) -> Option<&Connection> {
        self.slots
            .get(conn.slot as usize)?
            .conn
            .as_ref()
            .filter(|c| c.id == conn)
    }

    /// [`Brokers::conn`], mutably.
    pub(crate) fn conn_mut(&mut self, conn: ConnId) -> Option<&mut Connection> {
        self.slots
            .get_mut(conn.slot as usize)?
            .conn
            .as_mut()
            .filter(|c| c.id == conn)
    }

    /// Replaces the slot's connection with a new one, `Connecting` from `now`, under a new
    /// generation; returns its handle.
    pub(crate) fn open_connection(&mut self, slot: u32, max_frame: usize, now: Instant) -> ConnId {
        let b = &mut self.slots[slot as usize];
        b.generation = b.generation.wrapping_add(1);
        let id = ConnId {
            slot,
            generation: b.generation,
        };
        b.conn = Some(Connection::new(id, max_frame, now));
        id
    }

    /// Takes the connection `conn` out of its slot, if it is the current one.
    pub(crate) fn take_conn(&mut self, conn: ConnId) -> Option<Connection> {
        let b = self.slots.get_mut(conn.slot as usize)?;
        if b.conn.as_ref().is_some_and(|c| c.id == conn) {
            b.conn.take()
        } else {
            None
        }
    }

    /// A connection failed with `error` (its connection already taken out of the slot): the
    /// slot counts the failure and remembers why and, for a bootstrap address, the next attempt
    /// goes to the next bootstrap address. `was_ready`: the connection had been usable (its
    /// loss alone does not mean the brokers are down: an idle connection closed by the broker).
    pub(crate) fn count_failure(
        &mut self,
        slot: u32,
        error: ConnectionError,
        was_ready: bool,
    ) -> FailureOutcome {
        let error = Box::new(error);
        let b = &mut self.slots[slot as usize];
        b.failures += 1;
        b.last_error = Some(error.clone());
        if b.is_bootstrap() {
            self.next_bootstrap += 1;
        }
        self.latest_error = Some(error);
        let none_left = self.slots.iter().all(|b| b.conn.is_none());
        if was_ready || !none_left || self.all_down_reported {
            return FailureOutcome::Counted;
        }
        self.all_down_reported = true;
        FailureOutcome::AllDown {
            cluster_reached: self.ever_ready,
        }
    }

    /// A connection of `slot` is ready (set up, authenticated): its backoff and last error are
    /// forgotten, and a later loss of every broker is a new episode.
    pub(crate) fn connection_ready(&mut self, slot: u32) {
        self.slots[slot as usize].connection_ready();
        self.ever_ready = true;
        self.all_down_reported = false;
    }

    /// The connection error to name when a record of a partition led by `leader` times out:
    /// that broker's last failure if metadata names it (none if it connected since); for a
    /// partition without a known leader, the latest failure of any connection, unless some
    /// connection is ready now.
    pub(crate) fn error_for(&self, leader: i32) -> Option<Box<ConnectionError>> {
        if let Some(slot) = self.slot_of_node(leader) {
            return self.slots[slot as usize].last_error.clone();
        }
        if self.iter().any(BrokerSlot::is_ready) {
            return None;
        }
        self.latest_error.clone()
    }

    /// Marks a slot as having something to send; true when it was not marked yet. A retired
    /// slot is never marked.
    pub(crate) fn mark_dirty(&mut self, slot: u32) -> bool {
        let b = &mut self.slots[slot as usize];
        if b.dirty || b.retired {
            return false;
        }
        b.dirty = true;
        self.dirty.push(slot);
        true
    }

    /// The slots marked dirty, unmarked (they are about to be serviced).
    pub(crate) fn take_dirty(&mut self) -> Vec<u32> {
        let dirty = std::mem::take(&mut self.dirty);
        for &slot in &dirty {
            self.slots[slot as usize].dirty = false;
        }
        dirty
    }

    /// Lists `(topic, partition)` with `slot` as having something to send, at the back of its
    /// [`ActivePartitions`]; the partition is to keep the returned listing (its entry is valid
    /// while it does).
    pub(crate) fn list(&mut self, slot: u32, (topic, partition): (u32, u32)) -> Listing {
        // 1, 2, 3, ...: u64 does not run out.
        let seq = NonZeroU64::MIN.saturating_add(self.next_listing);
        self.next_listing += 1;
        self.slots[slot as usize].active.push(Listed {
            topic,
            partition,
            seq,
        });
        Listing { slot, seq }
    }

    /// Records that `leader` now leads `(topic, partition)` instead of `old`.
    pub(crate) fn move_partition(&mut self, tp: (u32, u32), old: i32, leader: i32) {
        if let Some(slot) = self.slot_of_node(old) {
            self.slots[slot as usize].partitions.retain(|&x| x != tp);
        }
        if let Some(slot) = self.slot_of_node(leader) {
            self.slots[slot as usize].partitions.push(tp);
        }
    }

    /// A ready connection for a control request (the least loaded), optionally one whose broker
    /// offers InitProducerId, optionally one to a bootstrap address only (rebootstrapping).
    pub(crate) fn ready_control_connection(
        &self,
        needs_init_pid: bool,
        bootstrap_only: bool,
    ) -> Option<ConnId> {
        self.iter()
            .filter(|b| !bootstrap_only || b.is_bootstrap())
            .filter_map(|b| b.conn.as_ref())
            .filter(|c| c.state == ConnState::Ready)
            .filter(|c| !needs_init_pid || c.versions.is_some_and(|v| v.init_producer_id.is_some()))
            .min_by_key(|c| c.inflight.len())
            .map(|c| c.id)
    }

    /// Whether some connection is being set up (connecting or negotiating), optionally only
    /// among the bootstrap addresses.
    pub(crate) fn any_connecting(&self, bootstrap_only: bool) -> bool {
        self.iter()
            .filter(|b| !bootstrap_only || b.is_bootstrap())
            .any(|b| b.conn.as_ref().is_some_and(|c| c.state != ConnState::Ready))
    }

    /// The known node to connect to for control requests when nothing is connected: the one
    /// with the fewest failures whose backoff is over.
    pub(crate) fn pick_node_to_connect(&self, now: Instant) -> Option<u32> {
        self.live()
            .filter(|(_, b)| b.node_id >= 0 && b.may_connect(now))
            .min_by_key(|(_, b)| b.failures)
            .map(|(i, _)| i as u32)
    }

    /// The bootstrap address to connect to next (round-robin from the one after the last that
    /// failed) whose backoff is over.
    pub(crate) fn pick_bootstrap_to_connect(&self, now: Instant) -> Option<u32> {
        let boot: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].is_bootstrap())
            .collect();
        (0..boot.len())
            .map(|k| boot[(self.next_bootstrap + k) % boot.len()])
            .find(|&i| self.slots[i].may_connect(now))
            .map(|i| i as u32)
    }

    /// The earliest instant after `now` some slot's reconnect backoff ends, among the
    /// bootstrap addresses only or among every slot.
    pub(crate) fn earliest_reconnect(&self, now: Instant, bootstrap_only: bool) -> Option<Instant> {
        self.iter()
            .filter(|b| !bootstrap_only || b.is_bootstrap())
            .filter_map(|b| b.reconnect_at)
            .filter(|&at| at > now)
            .min()
    }

    /// Whether any connection still waits for a response.
    pub(crate) fn any_in_flight(&self) -> bool {
        self.slots
            .iter()
            .filter_map(|b| b.conn.as_ref())
            .any(|c| !c.inflight.is_empty())
    }

    /// Whether a Produce request is awaiting its answer on any connection.
    pub(crate) fn any_produce_in_flight(&self) -> bool {
        self.slots
            .iter()
            .filter_map(|b| b.conn.as_ref())
            .any(|c| c.produce_in_flight() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brokers() -> Brokers {
        Brokers::new(&[("boot".to_string(), 9092)])
    }

    /// Fuzz regression `bootstrap-without-init-pid`: an idempotent producer whose bootstrap
    /// broker offers no InitProducerId found no connection to ask for its id and picked the
    /// bootstrap slot again, replacing its open connection (the socket left open) on every
    /// answer: a slot with a connection is never picked for a new attempt.
    #[test]
    fn a_slot_with_a_connection_is_not_picked_to_connect() {
        let now = Instant::now();
        let mut b = brokers();
        let s1 = b.node_slot(1, "b1", 9092).unwrap();
        assert_eq!(b.pick_bootstrap_to_connect(now), Some(0));
        assert_eq!(b.pick_node_to_connect(now), Some(s1));
        let boot = b.open_connection(0, 1024, now);
        let node = b.open_connection(s1, 1024, now);
        assert_eq!(b.pick_bootstrap_to_connect(now), None);
        assert_eq!(b.pick_node_to_connect(now), None);
        b.take_conn(boot).unwrap();
        b.take_conn(node).unwrap();
        assert_eq!(b.pick_bootstrap_to_connect(now), Some(0));
        assert_eq!(b.pick_node_to_connect(now), Some(s1));
    }

    #[test]
    fn a_negative_node_id_gets_no_slot() {
        let mut b = brokers();
        assert_eq!(b.node_slot(-1, "h", 9092), None);
        assert_eq!(b.node_slot(-7, "h", 9092), None);
        assert_eq!(b.len(), 1, "only the bootstrap slot");
        assert_eq!(b.node_slot(0, "h", 9092), Some(1));
    }

    #[test]
    fn no_new_node_past_the_cap() {
        let mut b = brokers();
        for id in 0..MAX_BROKERS as i32 {
            assert!(b.node_slot(id, "h", 9092).is_some());
        }
        assert_eq!(b.node_slot(MAX_BROKERS as i32, "h", 9092), None);
        // A known node is still updated.
        assert_eq!(b.node_slot(3, "moved", 9093), Some(4));
        assert_eq!(b.slot(4).host, "moved");
    }

    #[test]
    fn a_retired_slot_is_skipped_and_reused_under_later_generations() {
        let now = Instant::now();
        let mut b = brokers();
        let s1 = b.node_slot(1, "b1", 9092).unwrap();
        let s2 = b.node_slot(2, "b2", 9092).unwrap();
        let old = b.open_connection(s2, 1024, now);
        b.slot_mut(s2).partitions.push((0, 0));
        assert!(b.mark_dirty(s2));
        assert_eq!(b.nodes_not_listed(&[1]), vec![s2]);
        // Retired once its connection is closed and its partitions moved.
        b.take_conn(old).unwrap();
        b.slot_mut(s2).partitions.clear();
        b.retire(s2);
        assert!(!b.knows_node(2));
        assert_eq!(b.iter().count(), 2, "the bootstrap slot and node 1");
        assert!(
            b.take_dirty().is_empty(),
            "a retired slot leaves the dirty list"
        );
        assert!(!b.mark_dirty(s2), "and is never marked again");
        assert_eq!(b.pick_bootstrap_to_connect(now), Some(0));
        assert_eq!(b.pick_node_to_connect(now), Some(s1));
        assert!(!b.any_connecting(true));
        // Bootstrap slots are never retired.
        b.retire(0);
        assert_eq!(b.iter().count(), 2);
        // The next new node takes the slot over; its connections never reuse the old handle.
        assert_eq!(b.node_slot(3, "b3", 9092), Some(s2));
        let new = b.open_connection(s2, 1024, now);
        assert_ne!(new, old);
        assert!(b.conn(old).is_none(), "the old handle names nothing");
        assert!(b.conn(new).is_some());
        assert_eq!(b.slot_of_node(3), Some(s2));
    }

    #[test]
    fn a_throttle_is_capped() {
        let now = Instant::now();
        let mut b = brokers();
        let slot = b.slot_mut(0);
        assert_eq!(slot.throttle(now, 0), None);
        assert_eq!(slot.throttle(now, -5), None);
        assert_eq!(
            slot.throttle(now, 250),
            Some(now + Duration::from_millis(250))
        );
        assert_eq!(slot.throttle(now, i32::MAX), Some(now + MAX_THROTTLE));
        assert_eq!(slot.throttled_until, Some(now + MAX_THROTTLE));
    }
}
