//! The producer's view of the cluster: brokers (one slot each, with at most one connection),
//! topics and their partitions' leaders, and the refresh policy.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::accumulator::{PartitionQueue, Unrouted};
use crate::connection::Connection;
use crate::ErrorCode;

/// A broker the producer may connect to: a node from metadata, or a bootstrap address.
#[derive(Debug)]
pub(crate) struct BrokerSlot {
    /// Node id, or -1 for a bootstrap address.
    pub(crate) node_id: i32,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) conn: Option<Connection>,
    /// Incremented for every new connection, so late events for old ones are ignored.
    pub(crate) generation: u32,
    /// Partitions this broker leads: (topic, partition).
    pub(crate) partitions: Vec<(u32, u32)>,
    /// Something may be sendable; the sink should look.
    pub(crate) dirty: bool,
    /// No request before this instant (`throttle_time_ms`).
    pub(crate) throttled_until: Option<Instant>,
    /// No connection attempt before this instant.
    pub(crate) reconnect_at: Option<Instant>,
    /// Consecutive failed connection attempts (reconnect backoff exponent).
    pub(crate) failures: u32,
    /// Round-robin start for the next request, so no partition starves.
    pub(crate) drain_index: usize,
}

impl BrokerSlot {
    pub(crate) fn new(node_id: i32, host: String, port: u16) -> Self {
        BrokerSlot {
            node_id,
            host,
            port,
            conn: None,
            generation: 0,
            partitions: Vec::new(),
            dirty: false,
            throttled_until: None,
            reconnect_at: None,
            failures: 0,
            drain_index: 0,
        }
    }

    /// Whether a ready connection exists.
    pub(crate) fn is_ready(&self) -> bool {
        self.conn
            .as_ref()
            .is_some_and(|c| c.state == crate::connection::ConnState::Ready)
    }
}

/// A record held because its topic's metadata is not known yet.
#[derive(Debug)]
pub(crate) struct Held<T> {
    pub(crate) pending: Unrouted<T>,
    pub(crate) partition: Option<i32>,
    pub(crate) since: Instant,
}

/// A topic in use.
#[derive(Debug)]
pub(crate) struct TopicState<T> {
    pub(crate) name: Arc<str>,
    pub(crate) partitions: Vec<PartitionQueue<T>>,
    /// Metadata with partitions has arrived.
    pub(crate) known: bool,
    /// Records waiting for metadata (bounded by the buffer limits).
    pub(crate) holding: VecDeque<Held<T>>,
    pub(crate) holding_timer: Option<Instant>,
    /// The partition null-key records stick to.
    pub(crate) sticky: Option<u32>,
    /// A permanent error metadata reported for the topic (e.g. authorization).
    pub(crate) error: Option<ErrorCode>,
    /// `flush` was called while records were held: close their batches once routed.
    pub(crate) flush_held: bool,
}

impl<T> TopicState<T> {
    pub(crate) fn new(name: Arc<str>) -> Self {
        TopicState {
            name,
            partitions: Vec::new(),
            known: false,
            holding: VecDeque::new(),
            holding_timer: None,
            sticky: None,
            error: None,
            flush_held: false,
        }
    }
}

/// Metadata refresh bookkeeping: at most one request in flight, rate-limited.
#[derive(Debug)]
pub(crate) struct MetadataPolicy {
    /// A refresh is wanted.
    pub(crate) wanted: bool,
    /// A request is in flight.
    pub(crate) in_flight: bool,
    /// No request before this instant (rate limit).
    pub(crate) next_allowed: Instant,
    /// When the last successful refresh arrived.
    pub(crate) last_refresh: Option<Instant>,
}

/// Topic name -> topic id, hashed with FNV-1a: names come from the application (never from the
/// network: metadata responses only look names up), are short, and are hashed on every send
/// that changes topic, where SipHash costs several times more.
pub(crate) type TopicIndex =
    std::collections::HashMap<std::sync::Arc<str>, u32, std::hash::BuildHasherDefault<Fnv1a>>;

/// The 64-bit FNV-1a hash.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        // From the FNV reference (draft-eastlake-fnv): "" and "a" and "foobar".
        for (input, want) in [
            (&b""[..], 0xcbf2_9ce4_8422_2325u64),
            (b"a", 0xaf63_dc4c_8601_ec8c),
            (b"foobar", 0x8594_4171_f739_67e8),
        ] {
            let mut h = Fnv1a::default();
            h.write(input);
            assert_eq!(h.finish(), want);
        }
    }

    #[test]
    fn topic_index_finds_names_by_content() {
        let mut index = TopicIndex::default();
        index.insert(std::sync::Arc::from("orders"), 0);
        index.insert(std::sync::Arc::from("clicks"), 1);
        assert_eq!(index.get("orders"), Some(&0));
        assert_eq!(index.get(&*std::sync::Arc::<str>::from("clicks")), Some(&1));
        assert_eq!(index.get("other"), None);
    }
}
