//! What the simulator records for tests to inspect: each partition's log, every request the
//! brokers handled, and the protocol violations they saw.

use std::time::Instant;

use bytes::Bytes;

use super::SimCluster;
use crate::ConnId;

/// One record in a partition log, see [`SimCluster::log`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRecord {
    /// Offset in the partition (0, 1, 2, ... per partition).
    pub offset: i64,
    /// Record key.
    pub key: Option<Bytes>,
    /// Record value.
    pub value: Option<Bytes>,
    /// Record headers, in wire order (duplicates kept).
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Record timestamp (batch base timestamp + delta).
    pub timestamp: i64,
    /// Producer id of the batch (-1 when not idempotent).
    pub producer_id: i64,
    /// Producer epoch of the batch.
    pub producer_epoch: i16,
    /// Sequence number of this record (base sequence + index, wrapping at `i32::MAX` to 0);
    /// -1 when not idempotent.
    pub sequence: i32,
    /// Offset of the first record of the batch this record came in.
    pub batch_base_offset: i64,
    /// The batch was transactional (attributes bit 4).
    pub transactional: bool,
    /// `Some` for a transaction marker the coordinator wrote (a control batch, attributes bits
    /// 4 and 5, holding one record whose key is Kafka's `ControlRecordType` version 0 with type
    /// 0 abort / 1 commit and whose value is an `EndTransactionMarker` version 0 with
    /// coordinator epoch 0); `None` for a record a producer wrote.
    pub control: Option<ControlMarker>,
}

/// What a transaction marker ends its transaction with, see [`LoggedRecord::control`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlMarker {
    /// An abort marker (control record type 0).
    Abort,
    /// A commit marker (control record type 1).
    Commit,
}

/// What one partition of a Produce request carried and how it was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartitionRecord {
    /// Topic name (empty when a v13 topic id was unknown).
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// RecordsCount from the batch header (0 when it could not be read).
    pub record_count: i32,
    /// ProducerId from the batch header (-1 when it could not be read).
    pub producer_id: i64,
    /// ProducerEpoch from the batch header (-1 when it could not be read).
    pub producer_epoch: i16,
    /// BaseSequence from the batch header (-1 when it could not be read).
    pub base_sequence: i32,
    /// Error code returned for this partition (0 = success).
    pub error_code: i16,
    /// Base offset returned (-1 on error); for a duplicate, the original offset.
    pub base_offset: i64,
    /// True when the batch was appended to the log by this request.
    pub appended: bool,
    /// Size of the record batch as the request carried it, in bytes.
    pub batch_bytes: usize,
}

/// One request a broker received, see [`SimCluster::request_log`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// When the broker handled it.
    pub at: Instant,
    /// Broker that received it.
    pub broker_id: i32,
    /// Connection it came on.
    pub conn: ConnId,
    /// API key from the request header.
    pub api_key: i16,
    /// API version from the request header.
    pub api_version: i16,
    /// Correlation id from the request header.
    pub correlation_id: i32,
    /// Produce only: the acks field.
    pub acks: Option<i16>,
    /// Produce only: the partitions carried, in request order.
    pub produce: Vec<ProducePartitionRecord>,
    /// Top-level error code of the response (ApiVersions, InitProducerId, Metadata v13+,
    /// FindCoordinator v0-3, AddOffsetsToTxn, EndTxn; 0 otherwise).
    pub error_code: i16,
    /// True when a response was queued towards the client (false for acks=0, dropped
    /// connections and malformed requests).
    pub responded: bool,
    /// Produce only: the `throttle_time_ms` the response carried.
    pub throttle_time_ms: i32,
}

impl SimCluster {
    /// The records of a partition log (empty for an unknown topic or partition).
    pub fn log(&self, topic: &str, partition: i32) -> &[LoggedRecord] {
        self.partition(topic, partition)
            .map(|p| p.log.as_slice())
            .unwrap_or(&[])
    }

    /// The last stable offset of a partition (`None` for an unknown topic or partition): the
    /// first offset of its earliest open transaction, else its high watermark. A
    /// read_committed consumer reads nothing at or beyond it.
    pub fn last_stable_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        let p = self.partition(topic, partition)?;
        let hw = p.log.len() as i64;
        Some(p.open_txns.values().copied().min().unwrap_or(hw))
    }

    /// The high watermark of a partition (`None` for an unknown topic or partition): the
    /// offset after its last record. Every append is replicated at once, so it is the log end
    /// offset.
    pub fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        self.partition(topic, partition).map(|p| p.log.len() as i64)
    }

    /// What a consumer with `isolation.level=read_committed` reads from a partition, in
    /// offset order: the records below the last stable offset, without transaction markers
    /// and without the records of aborted transactions (Kafka's aborted-transaction index: a
    /// producer's records from its aborted transaction's first offset up to the abort marker).
    /// Non-transactional records are all there. Empty for an unknown topic or partition.
    ///
    /// The coordinator acts when the simulator sees time pass; call
    /// [`SimCluster::advance`] first to let markers and timeouts due by `now` happen.
    pub fn read_committed(&self, topic: &str, partition: i32) -> Vec<LoggedRecord> {
        let Some(p) = self.partition(topic, partition) else {
            return Vec::new();
        };
        let lso = p.open_txns.values().copied().min().unwrap_or(i64::MAX);
        p.log
            .iter()
            .take_while(|r| r.offset < lso)
            .filter(|r| r.control.is_none())
            .filter(|r| {
                !p.aborted.iter().any(|a| {
                    a.producer_id == r.producer_id
                        && a.first_offset <= r.offset
                        && r.offset < a.marker_offset
                })
            })
            .cloned()
            .collect()
    }

    /// What a consumer with `isolation.level=read_uncommitted` reads from a partition: every
    /// record up to the high watermark but the transaction markers, aborted or open
    /// transactions included. Empty for an unknown topic or partition.
    pub fn read_uncommitted(&self, topic: &str, partition: i32) -> Vec<LoggedRecord> {
        self.partition(topic, partition)
            .map(|p| {
                p.log
                    .iter()
                    .filter(|r| r.control.is_none())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every request the brokers handled (or dropped), in handling order.
    pub fn request_log(&self) -> &[RequestRecord] {
        &self.request_log
    }

    /// Protocol violations the brokers saw: malformed frames, bad CRCs, corrupt batches,
    /// unsupported versions, producer ids never allocated, and so on. A correct client leaves
    /// this empty.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    pub(super) fn violation(&mut self, broker: Option<i32>, conn: u64, msg: String) {
        let b = broker.map_or_else(|| "?".to_string(), |b| b.to_string());
        self.violations
            .push(format!("[broker {b} conn#{conn}] {msg}"));
    }
}
