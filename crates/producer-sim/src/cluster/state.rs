//! What the brokers keep: each broker's running state and fault settings, and per partition
//! its leader, its log and the idempotent producers' windows.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::network::Stall;
use crate::config::BrokerSpec;
use crate::LoggedRecord;

/// One broker: what it advertises, whether it runs, and the faults set on it.
#[derive(Debug)]
pub(super) struct Broker {
    pub(super) spec: BrokerSpec,
    pub(super) api_versions: Vec<(i16, i16, i16)>,
    pub(super) running: bool,
    pub(super) stall: Stall,
    /// Extra travel time for the next `n` responses.
    pub(super) delay: Option<(Duration, u32)>,
    /// `throttle_time_ms` for the next `n` responses that carry it.
    pub(super) throttle: Option<(i32, u32)>,
    /// How the broker serves Produce requests in turn, if it does
    /// ([`super::SimCluster::serve_produce_in_turn`]).
    pub(super) service: Option<Service>,
}

/// A broker that serves Produce requests one at a time, from all its connections, each taking
/// a fixed cost plus a cost per byte (as a Kafka node bound by its CPU does): a request
/// arriving while another is served waits for it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Service {
    pub(super) per_request: std::time::Duration,
    /// Bytes of request served per second.
    pub(super) bytes_per_second: u64,
    /// When the request being served (the last one taken) is done.
    pub(super) busy_until: std::time::Instant,
}

impl Service {
    /// Takes a request of `bytes` arriving at `at`; returns when it is served.
    pub(super) fn serve(&mut self, at: std::time::Instant, bytes: usize) -> std::time::Instant {
        let start = self.busy_until.max(at);
        let work = self.per_request
            + std::time::Duration::from_secs_f64(
                bytes as f64 / self.bytes_per_second.max(1) as f64,
            );
        self.busy_until = start + work;
        self.busy_until
    }
}

/// One appended batch in a producer's idempotence window.
#[derive(Debug, Clone)]
pub(super) struct BatchMeta {
    pub(super) first_seq: i32,
    pub(super) last_seq: i32,
    pub(super) base_offset: i64,
    #[allow(dead_code)]
    pub(super) timestamp: i64,
}

/// One idempotent producer's state in a partition: its current epoch and its last batches.
#[derive(Debug, Clone)]
pub(super) struct ProducerEntry {
    pub(super) epoch: i16,
    pub(super) batches: VecDeque<BatchMeta>,
}

/// One partition: its leader, its log and its producers.
#[derive(Debug)]
pub(super) struct Partition {
    pub(super) leader: i32,
    pub(super) leader_epoch: i32,
    pub(super) log: Vec<LoggedRecord>,
    pub(super) producers: BTreeMap<i64, ProducerEntry>,
    /// Producer id -> offset of the first record of its open transaction in this partition
    /// (Kafka's `currentTxnFirstOffset`): set by the first transactional batch, cleared by the
    /// transaction's marker. The smallest one is the last stable offset.
    pub(super) open_txns: BTreeMap<i64, i64>,
    /// Kafka's aborted-transaction index: every aborted transaction that wrote here.
    pub(super) aborted: Vec<AbortedTxn>,
}

/// One aborted transaction in a partition: its producer's records from `first_offset` up to
/// the abort marker at `marker_offset` are invisible to read_committed readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AbortedTxn {
    pub(super) producer_id: i64,
    pub(super) first_offset: i64,
    pub(super) marker_offset: i64,
}

/// One topic: its id (Metadata v10+, Produce v13) and its partitions.
#[derive(Debug)]
pub(super) struct Topic {
    pub(super) id: uuid::Uuid,
    pub(super) partitions: Vec<Partition>,
    /// `cleanup.policy` includes `compact`: every record needs a key.
    pub(super) compacted: bool,
    /// `max.message.bytes`: the largest batch it takes, as a request carries it.
    pub(super) max_message_bytes: usize,
}
