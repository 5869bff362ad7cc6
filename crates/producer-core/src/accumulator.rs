//! Per-partition batches: the open batch records are appended to, and the closed batches of the
//! partition in send order, each with its sending state.
//!
//! A partition's closed batches form one queue. Batches leave it only from the front, once they
//! and every batch before them are done, so delivery reports come out in send order whatever
//! order responses resolve them in.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use crate::record::{BatchBuilder, Header, SealedBatch, RECORD_BATCH_OVERHEAD};
use crate::types::{ConnId, ProduceError};

/// A record accepted by `send` that is not in a batch yet: waiting for its topic's metadata,
/// or on its way to a partition. Carries the record's parts until they are encoded.
#[derive(Debug)]
pub(crate) struct Unrouted<T> {
    pub(crate) opaque: T,
    pub(crate) key: Option<Bytes>,
    pub(crate) value: Option<Bytes>,
    pub(crate) headers: Vec<Header>,
    pub(crate) timestamp: Option<i64>,
    pub(crate) explicit_partition: bool,
    /// Bytes this record counts against `buffer_memory` (see [`charged_size`]).
    pub(crate) size: usize,
}

impl<T> Unrouted<T> {
    /// The record's [`BatchBuilder::payload_size`].
    pub(crate) fn payload_size(&self) -> usize {
        BatchBuilder::payload_size(self.key.as_deref(), self.value.as_deref(), &self.headers)
    }
}

/// One record in a batch, waiting for its report: only what the report needs beyond the batch.
/// The key, value and headers live in the batch bytes alone; a failure decodes them back out
/// (see [`SealedBatch::into_records`]), so a buffered record costs its encoded size plus this.
#[derive(Debug)]
pub(crate) struct Pending<T> {
    pub(crate) opaque: T,
    /// The record's timestamp as written (-1: none), for the success report.
    pub(crate) timestamp: i64,
    /// The caller chose the partition (the failure report hands it back as chosen).
    pub(crate) explicit_partition: bool,
}

/// Bytes a record counts against `buffer_memory`, from its encoded size as the first record of
/// a batch (`BatchBuilder::record_size_with_payload(0, 0, payload)`, which `send` computes
/// anyway for its size limit): that plus its [`Pending`] entry. A pure function of key, value
/// and headers, so a record decoded back out of a batch is released for exactly what it was
/// charged.
pub(crate) fn charged_size<T>(encoded: usize) -> usize {
    encoded + std::mem::size_of::<Pending<T>>()
}

/// The batch records are being appended to.
#[derive(Debug)]
pub(crate) struct OpenBatch<T> {
    pub(crate) id: u64,
    pub(crate) builder: BatchBuilder,
    pub(crate) records: Vec<Pending<T>>,
    /// Bytes its records count against `buffer_memory`.
    pub(crate) charged: usize,
    pub(crate) created: Instant,
}

/// Where a closed batch stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BatchState {
    /// Waiting to be sent (for the first time, or again).
    Ready,
    /// In a request on this connection.
    InFlight { conn: ConnId, correlation_id: i32 },
    /// Finished: base offset and log-append time on success, or the error.
    Done(Result<(i64, i64), ProduceError>),
}

impl<T> OpenBatch<T> {
    /// Most records a new batch reserves room for up front.
    const MAX_RESERVED_RECORDS: usize = 1024;

    /// An empty batch writing into `buf` (from [`BufferPool::take`], sized for `batch_size`, so
    /// appending never regrows it: a batch closes before a record would take it past
    /// `batch_size`, unless that record is alone). `record_size` (the first record's encoded
    /// size) estimates how many records fit.
    pub(crate) fn new(
        id: u64,
        buf: Vec<u8>,
        batch_size: usize,
        record_size: usize,
        created: Instant,
    ) -> Self {
        let records = (batch_size / record_size.max(1) + 1).min(Self::MAX_RESERVED_RECORDS);
        OpenBatch {
            id,
            builder: BatchBuilder::with_buffer(buf),
            records: Vec::with_capacity(records),
            charged: 0,
            created,
        }
    }
}

/// Batch buffers of finished batches, kept for new batches: a steady stream of batches then
/// allocates (and page-faults) nothing. Holds at most [`BufferPool::MAX_BYTES`] of buffers.
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    free: Vec<Vec<u8>>,
}

impl BufferPool {
    /// Most bytes of buffers kept.
    const MAX_BYTES: usize = 4 << 20;

    /// The capacity a batch buffer needs for batches of `batch_size` bytes.
    fn capacity_for(batch_size: usize) -> usize {
        batch_size.max(RECORD_BATCH_OVERHEAD)
    }

    /// A buffer for a new batch of `batch_size` bytes: a kept one, or a new one.
    pub(crate) fn take(&mut self, batch_size: usize) -> Vec<u8> {
        self.free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(Self::capacity_for(batch_size)))
    }

    /// Keeps a buffer no longer needed if it suits batches of `batch_size` bytes (not smaller,
    /// nor much larger after an outsized record) and the pool has room.
    pub(crate) fn give(&mut self, buf: Vec<u8>, batch_size: usize) {
        let want = Self::capacity_for(batch_size);
        let fits = buf.capacity() >= want && buf.capacity() <= 2 * want;
        if fits && (self.free.len() + 1) * want <= Self::MAX_BYTES {
            self.free.push(buf);
        }
    }
}

/// A closed batch: encoded once, resent byte for byte.
#[derive(Debug)]
pub(crate) struct Batch<T> {
    pub(crate) id: u64,
    pub(crate) sealed: SealedBatch,
    pub(crate) records: Vec<Pending<T>>,
    /// Bytes its records count against `buffer_memory`.
    pub(crate) charged: usize,
    pub(crate) created: Instant,
    pub(crate) state: BatchState,
    /// Attempts made (requests that carried it).
    pub(crate) attempts: u32,
    /// The base sequence it was stamped with; `None` until first sent.
    pub(crate) base_sequence: Option<i32>,
    /// A previous attempt may have been written.
    pub(crate) possibly_persisted: bool,
}

impl<T> Batch<T> {
    pub(crate) fn record_count(&self) -> i32 {
        self.records.len() as i32
    }
    pub(crate) fn is_done(&self) -> bool {
        matches!(self.state, BatchState::Done(_))
    }
}

/// A partition's batches and its sending state.
#[derive(Debug)]
pub(crate) struct PartitionQueue<T> {
    pub(crate) open: Option<OpenBatch<T>>,
    /// Closed batches in send order.
    pub(crate) batches: VecDeque<Batch<T>>,
    /// How many batches at the front of `batches` have been sent at least once (and so have
    /// sequence numbers).
    pub(crate) sent: usize,
    /// Batches currently in flight, and the connection they are on.
    pub(crate) inflight: usize,
    pub(crate) inflight_conn: Option<ConnId>,
    /// Leader node id (-1 unknown) and epoch.
    pub(crate) leader: i32,
    pub(crate) leader_epoch: i32,
    /// No send before this instant (retry backoff).
    pub(crate) backoff_until: Option<Instant>,
    /// Waiting for a metadata refresh before sending again.
    pub(crate) needs_metadata: bool,
    /// Producer id, epoch and next sequence this partition's batches are stamped with.
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    pub(crate) next_sequence: i32,
    /// This connection answered a batch of the partition with success, so the partition may
    /// pipeline more than one request on it.
    pub(crate) ok_on_conn: Option<ConnId>,
    /// The partition must bump its epoch and restamp its unacknowledged batches before it sends
    /// again (once nothing is in flight).
    pub(crate) needs_reset: bool,
    /// The batch whose failure left a hole in the sequence. Batches before it still belong to
    /// the old epoch's sequence and are resolved under it first; the reset happens once this
    /// batch has left the queue (so everything before it is done).
    pub(crate) reset_barrier: Option<u64>,
    /// The delivery-timeout deadline currently armed for this partition.
    pub(crate) delivery_timer: Option<Instant>,
    /// Id of the next batch opened on this partition (ids identify batches in requests).
    pub(crate) next_batch_id: u64,
}

impl<T> PartitionQueue<T> {
    pub(crate) fn new() -> Self {
        PartitionQueue {
            open: None,
            batches: VecDeque::new(),
            sent: 0,
            inflight: 0,
            inflight_conn: None,
            leader: -1,
            leader_epoch: -1,
            backoff_until: None,
            needs_metadata: false,
            producer_id: -1,
            epoch: -1,
            next_sequence: 0,
            ok_on_conn: None,
            needs_reset: false,
            reset_barrier: None,
            delivery_timer: None,
            next_batch_id: 0,
        }
    }

    /// Whether anything (open, queued or in flight) is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.open.is_none() && self.batches.is_empty()
    }

    /// Index of the batch with this id, if it is still held.
    pub(crate) fn find(&self, id: u64) -> Option<usize> {
        // A split batch's halves get fresh ids, so ids are not ordered along the queue; but the
        // batches looked up (in flight, or just answered) sit near its front.
        self.batches.iter().position(|b| b.id == id)
    }

    /// The index of the batch this partition would send next on `conn`, if the ordering rules
    /// allow one now. Open batches are not considered (the sink closes them first).
    pub(crate) fn next_sendable(&self, conn: ConnId, idempotent: bool) -> Option<usize> {
        if self.blocked_on(conn) {
            return None;
        }
        // A batch waiting to be sent again comes first, and alone.
        if let Some(i) = self.first_retry() {
            let before_barrier = self.barrier_position().is_some_and(|b| i < b);
            let allowed = self.inflight == 0 && (!self.needs_reset || before_barrier);
            return allowed.then_some(i);
        }
        if self.sent >= self.batches.len() {
            return None;
        }
        self.fresh_allowed(conn, idempotent).then_some(self.sent)
    }

    /// Whether the partition could start a new batch from its open one on `conn` (the same
    /// rules as a fresh closed batch).
    pub(crate) fn may_send_fresh(&self, conn: ConnId, idempotent: bool) -> bool {
        !self.blocked_on(conn)
            && self.sent >= self.batches.len()
            && self.first_retry().is_none()
            && self.fresh_allowed(conn, idempotent)
    }

    /// Nothing may go to `conn` now: no leader known, waiting for metadata, or batches of this
    /// partition in flight on another connection (never overlap across a leader move).
    fn blocked_on(&self, conn: ConnId) -> bool {
        self.needs_metadata
            || self.leader < 0
            || (self.inflight > 0 && self.inflight_conn != Some(conn))
    }

    /// The first sent batch waiting to be sent again.
    fn first_retry(&self) -> Option<usize> {
        self.batches
            .iter()
            .take(self.sent)
            .position(|b| b.state == BatchState::Ready)
    }

    /// Whether a batch never sent may go out on `conn`: with idempotence, after a success on
    /// that connection (pipelining) or with nothing in flight, and not before a pending reset;
    /// without it, one batch in flight per partition keeps order under retries.
    fn fresh_allowed(&self, conn: ConnId, idempotent: bool) -> bool {
        if idempotent {
            !self.needs_reset && (self.inflight == 0 || self.ok_on_conn == Some(conn))
        } else {
            self.inflight == 0
        }
    }

    /// Asks for an epoch bump and sequence restart. `after` is the batch whose failure left the
    /// hole (`None` when the broker rejected the partition's head batch itself).
    pub(crate) fn request_reset(&mut self, after: Option<u64>) {
        self.needs_reset = true;
        let Some(id) = after else { return };
        let new_pos = self.find(id);
        match self.barrier_position() {
            Some(old) if new_pos.is_none_or(|n| n <= old) => {}
            _ => self.reset_barrier = Some(id),
        }
    }

    /// Where the reset barrier batch sits, if it is still queued.
    pub(crate) fn barrier_position(&self) -> Option<usize> {
        self.reset_barrier.and_then(|id| self.find(id))
    }

    /// Removes the finished batches at the front, in order.
    pub(crate) fn pop_done(&mut self) -> Option<Batch<T>> {
        if self.batches.front().is_some_and(Batch::is_done) {
            let b = self.batches.pop_front();
            if self.sent > 0 {
                self.sent -= 1;
            }
            return b;
        }
        None
    }
}
