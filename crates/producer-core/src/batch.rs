//! A record on its way into a batch, the open batch records are appended to, and a closed batch
//! (encoded once, resent byte for byte) with its sending state.
//!
//! Each type keeps its own rules: an [`OpenBatch`] appends a record's bytes and its report entry
//! together, a [`Batch`] stamps its sequence number with its bytes and counts its attempts, and
//! both hand their records back as one [`Unreported`] when they fail.

use std::time::Instant;

use bytes::Bytes;

use crate::buffer::{BufferPool, FullSize};
use crate::classify::{LeaderHint, RetriesAtOnce};
use crate::record::{
    BatchBuilder, Compression, CompressionError, DecodedRecord, Header, SealedBatch,
    RECORD_BATCH_OVERHEAD,
};
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

/// The records of a batch that failed, on their way to their failure reports: each report entry
/// with its record decoded back out of the batch (in the same order), and the buffer space they
/// release.
#[derive(Debug)]
pub(crate) struct Unreported<T> {
    pub(crate) records: Vec<Pending<T>>,
    /// The records' contents, or why they could not be decoded (then each record is reported
    /// with its topic and partition only).
    pub(crate) decoded: Result<Vec<DecodedRecord>, String>,
    pub(crate) charged: usize,
}

/// Names one closed batch of one partition, in requests and timers. Batch ids are unique within
/// their partition and never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchRef {
    pub(crate) topic: u32,
    pub(crate) partition: u32,
    pub(crate) id: u64,
}

/// The batch records are being appended to.
#[derive(Debug)]
pub(crate) struct OpenBatch<T> {
    id: u64,
    builder: BatchBuilder,
    records: Vec<Pending<T>>,
    /// Bytes its records count against `buffer_memory`.
    charged: usize,
    created: Instant,
    /// Bytes (uncompressed, header included) past which it takes no record: `batch_size`,
    /// or more once it grew ([`OpenBatch::grow_to`]).
    limit: usize,
    /// `batch_size` when it was opened: its limit until it grows.
    batch_size: usize,
    /// Opened at full size: its share of the pool's budget for that, given back when the
    /// batch is sealed or fails (dropped with it).
    _full_size: Option<FullSize>,
}

impl<T> OpenBatch<T> {
    /// Most records a batch opened at full size reserves room for up front.
    const MAX_RESERVED_RECORDS: usize = 1024;

    /// An empty batch with a buffer of `pool` for batches of `batch_size` bytes whose first
    /// record takes `record_size` bytes (encoded): at full size (`batch_size`, and report
    /// entries for as many records of that size as fit) while the pool's budget for that has
    /// room, else with room for its first record only, growing with what it holds (see
    /// [`OpenBatch::try_append`] and [`BufferPool`]).
    pub(crate) fn new(
        id: u64,
        pool: &mut BufferPool,
        batch_size: usize,
        record_size: usize,
        created: Instant,
    ) -> Self {
        let needed = RECORD_BATCH_OVERHEAD + record_size;
        let full_records = (batch_size / record_size.max(1) + 1).min(Self::MAX_RESERVED_RECORDS);
        let entries = full_records * std::mem::size_of::<Pending<T>>();
        let (buf, records, full_size) = match pool.take_full_size(needed, entries) {
            Some((buf, share)) => (buf, Vec::with_capacity(full_records), Some(share)),
            None => (pool.take(needed), Vec::new(), None),
        };
        OpenBatch {
            id,
            builder: BatchBuilder::with_buffer(buf),
            records,
            charged: 0,
            created,
            limit: batch_size,
            batch_size,
            _full_size: full_size,
        }
    }

    /// The bytes past which it takes no record: `batch_size` until it grows.
    #[inline(always)]
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Lets it take records up to `limit` bytes (more than its `batch_size`): its leader's
    /// in-flight slots are all busy, so it could not go out sooner anyway. Its buffer is not
    /// grown here: it grows as records arrive (see [`OpenBatch::try_append`]). From now on it
    /// is [`OpenBatch::grown`].
    pub(crate) fn grow_to(&mut self, limit: usize) {
        debug_assert!(limit > self.limit, "a batch only grows");
        self.limit = self.limit.max(limit);
    }

    /// Whether it grew past `batch_size` ([`OpenBatch::grow_to`]): then it is sent as soon
    /// as its leader can take it, as a full batch is, not after its linger.
    #[inline]
    pub(crate) fn grown(&self) -> bool {
        self.limit > self.batch_size
    }

    /// How many batches of `batch_size` it stands for, at least 1: what the adaptive
    /// partitioner weighs a partition's queue by (a grown batch holds what several would).
    pub(crate) fn batch_equivalents(&self) -> usize {
        (self.size_in_bytes() / self.batch_size.max(1)).max(1)
    }

    /// The batch's id (its linger timer names it).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// When its first record was appended (linger and delivery timeout count from here).
    pub(crate) fn created(&self) -> Instant {
        self.created
    }

    /// Encoded bytes so far.
    #[inline]
    pub(crate) fn size_in_bytes(&self) -> usize {
        self.builder.size_in_bytes()
    }

    /// Appends a record if it fits in the batch's [`OpenBatch::limit`] (`batch_size`, unless
    /// it grew; a record always fits an empty batch): its bytes go into the batch, its report
    /// entry and buffer charge with them. `payload` is the record's
    /// [`BatchBuilder::payload_size`]. A record that does not fit comes back.
    ///
    /// The batch's buffer grows with what it holds: a record that does not fit in it doubles
    /// it (or makes room for the record, if more), so a batch opened small holds at most twice
    /// its bytes, in a buffer of a size class of the pool (see [`BufferPool`]).
    #[inline(always)]
    pub(crate) fn try_append(
        &mut self,
        record: Unrouted<T>,
        payload: usize,
    ) -> Result<(), Unrouted<T>> {
        let appended = self.builder.try_append_with_payload(
            self.limit,
            record.timestamp.unwrap_or(-1),
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
            payload,
        );
        if !appended {
            return Err(record);
        }
        // Key, value and headers now live in the batch bytes; they are dropped here.
        self.records.push(Pending {
            opaque: record.opaque,
            timestamp: record.timestamp.unwrap_or(-1),
            explicit_partition: record.explicit_partition,
        });
        self.charged += record.size;
        Ok(())
    }

    /// Bytes the batch's buffer and its list of report entries hold, used or not.
    #[cfg(test)]
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.builder.capacity() + self.records.capacity() * std::mem::size_of::<Pending<T>>()
    }

    /// Bytes the batch's records and header use in its buffer and list of report entries.
    #[cfg(test)]
    pub(crate) fn used_bytes(&self) -> usize {
        self.builder.size_in_bytes() + self.records.len() * std::mem::size_of::<Pending<T>>()
    }

    /// Encodes the batch for sending (compressing it once) as batch `id` of its partition; the
    /// second value is the uncompressed buffer, free for reuse, when compression made a new one.
    /// When compression fails, the records come back to be reported with the error.
    #[allow(clippy::type_complexity)]
    pub(crate) fn seal(
        self,
        compression: Compression,
        transactional: bool,
    ) -> Result<(Batch<T>, Option<Vec<u8>>), (CompressionError, Unreported<T>)> {
        let OpenBatch {
            id,
            builder,
            mut records,
            charged,
            created,
            _full_size,
            ..
        } = self;
        // The list waits for the batch's answer: holding what it needs, as the bytes do.
        if records.capacity() - records.len() > records.len() / 4 {
            records.shrink_to_fit();
        }
        match builder.seal_or_keep(compression) {
            Ok((mut sealed, spare)) => {
                if transactional {
                    sealed.set_transactional(true);
                }
                Ok((Batch::new(id, sealed, records, charged, created), spare))
            }
            Err((e, builder)) => Err((
                e,
                Unreported {
                    records,
                    decoded: builder.into_records().map_err(|e| e.to_string()),
                    charged,
                },
            )),
        }
    }

    /// Closes the batch as already failed with `error`, sealed uncompressed (its bytes only
    /// serve to hand its records back), so it can wait in its partition's queue for the
    /// batches before it and be reported after them. If it cannot be sealed even so (not
    /// expected), its records come back to be reported at once.
    pub(crate) fn into_failed(self, error: ProduceError) -> Result<Batch<T>, Unreported<T>> {
        match self.seal(Compression::None, false) {
            Ok((mut batch, _)) => {
                batch.finish(Err(error));
                Ok(batch)
            }
            Err((_, records)) => Err(records),
        }
    }

    /// How many records it holds.
    pub(crate) fn record_count(&self) -> usize {
        self.records.len()
    }

    /// Gives the records up for their failure reports.
    pub(crate) fn into_unreported(self) -> Unreported<T> {
        Unreported {
            decoded: self.builder.into_records().map_err(|e| e.to_string()),
            records: self.records,
            charged: self.charged,
        }
    }
}

/// Where a closed batch stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BatchState {
    /// Waiting to be sent (for the first time, or again).
    Ready,
    /// In a request on this connection.
    InFlight { conn: ConnId },
    /// Finished: base offset and log-append time on success, or the error.
    Done(Result<(i64, i64), ProduceError>),
}

/// A closed batch: encoded once, resent byte for byte.
#[derive(Debug)]
pub(crate) struct Batch<T> {
    id: u64,
    sealed: SealedBatch,
    records: Vec<Pending<T>>,
    /// Bytes its records count against `buffer_memory`.
    charged: usize,
    created: Instant,
    state: BatchState,
    /// Attempts made (requests that carried it).
    attempts: u32,
    /// The base sequence it was stamped with; `None` until first sent.
    base_sequence: Option<i32>,
    /// A previous attempt may have been written.
    possibly_persisted: bool,
    /// Its retries at once on leader hints (the retry table's timing rule).
    at_once: RetriesAtOnce,
    /// The records the broker rejected themselves, when it failed the batch because of them
    /// (KIP-467); their batch mates take the batch's own error. `None` on every other path, so
    /// a success pays for one pointer-sized field and nothing else.
    record_errors: Option<Box<RecordFailures>>,
    /// It was sealed because it was full (for the diagnosis's count of full batches).
    sealed_full: bool,
}

impl<T> Batch<T> {
    /// A batch never sent, ready to go.
    pub(crate) fn new(
        id: u64,
        sealed: SealedBatch,
        records: Vec<Pending<T>>,
        charged: usize,
        created: Instant,
    ) -> Self {
        Batch {
            id,
            sealed,
            records,
            charged,
            created,
            state: BatchState::Ready,
            attempts: 0,
            base_sequence: None,
            possibly_persisted: false,
            sealed_full: false,
            at_once: RetriesAtOnce::default(),
            record_errors: None,
        }
    }

    /// One half of a batch the broker found too large: it inherits the original's age,
    /// attempts and "possibly written" mark, and is stamped with `stamp` (producer id, epoch
    /// and base sequence) if the original had a sequence, else unstamped (-1).
    pub(crate) fn half_of(
        original: &SplitOrigin,
        id: u64,
        mut sealed: SealedBatch,
        records: Vec<Pending<T>>,
        charged: usize,
        stamp: Option<(i64, i16, i32)>,
    ) -> Self {
        match stamp {
            Some((pid, epoch, seq)) => sealed.stamp(pid, epoch, seq),
            None => sealed.stamp(-1, -1, -1),
        }
        Batch {
            id,
            sealed,
            records,
            charged,
            created: original.created,
            state: BatchState::Ready,
            attempts: original.attempts,
            base_sequence: stamp.map(|(_, _, seq)| seq),
            possibly_persisted: original.possibly_persisted,
            at_once: RetriesAtOnce::default(),
            record_errors: None,
            sealed_full: false,
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }
    pub(crate) fn created(&self) -> Instant {
        self.created
    }
    pub(crate) fn state(&self) -> &BatchState {
        &self.state
    }
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }
    /// Whether it was sealed because it was full ([`Batch::mark_sealed_full`]).
    pub(crate) fn sealed_full(&self) -> bool {
        self.sealed_full
    }
    /// Marks it as sealed because it was full (`batch.size` reached, or the next record did
    /// not fit); call once, when it is sealed.
    pub(crate) fn mark_sealed_full(&mut self) {
        self.sealed_full = true;
    }
    pub(crate) fn record_count(&self) -> i32 {
        self.records.len() as i32
    }
    pub(crate) fn is_done(&self) -> bool {
        matches!(self.state, BatchState::Done(_))
    }
    pub(crate) fn is_in_flight(&self) -> bool {
        matches!(self.state, BatchState::InFlight { .. })
    }
    pub(crate) fn is_in_flight_on(&self, conn: ConnId) -> bool {
        matches!(self.state, BatchState::InFlight { conn: c } if c == conn)
    }
    pub(crate) fn possibly_persisted(&self) -> bool {
        self.possibly_persisted
    }
    /// An attempt of this batch may have been written (lost connection, timeout, "unsure"
    /// answer): a later failure says so, and without idempotence a retry may duplicate it.
    pub(crate) fn mark_possibly_persisted(&mut self) {
        self.possibly_persisted = true;
    }
    /// Its retries at once on leader hints so far: whether the next may go at once.
    pub(crate) fn retries_at_once(&self) -> &RetriesAtOnce {
        &self.at_once
    }
    /// The batch is put back to be retried: at once on the leader hint `at_once_on`, or
    /// (`None`) after its backoff.
    pub(crate) fn retried(&mut self, at_once_on: Option<LeaderHint>) {
        self.at_once.retried(at_once_on);
    }
    /// The encoded bytes for a request to carry as they are (shared, not copied).
    pub(crate) fn share_bytes(&mut self) -> bytes::Bytes {
        self.sealed.share()
    }
    pub(crate) fn len_bytes(&self) -> usize {
        self.sealed.len_bytes()
    }
    /// The batch's size before compression (its header included).
    pub(crate) fn uncompressed_size(&self) -> usize {
        self.sealed.uncompressed_size()
    }

    /// Writes the producer id, epoch and base sequence into the batch's bytes (and CRC), for
    /// its first send or a sequence restart; -1s for a producer without idempotence.
    pub(crate) fn stamp(&mut self, producer_id: i64, epoch: i16, base_sequence: Option<i32>) {
        self.sealed
            .stamp(producer_id, epoch, base_sequence.unwrap_or(-1));
        self.base_sequence = base_sequence;
    }

    /// The batch goes out in a request on `conn`.
    pub(crate) fn begin_attempt(&mut self, conn: ConnId) {
        self.state = BatchState::InFlight { conn };
        self.attempts += 1;
    }

    /// The batch waits to be sent again.
    pub(crate) fn ready_again(&mut self) {
        self.state = BatchState::Ready;
    }

    /// The batch is finished; its report leaves the partition once the batches before it have.
    pub(crate) fn finish(&mut self, result: Result<(i64, i64), ProduceError>) {
        self.state = BatchState::Done(result);
    }

    /// Names the records the broker rejected themselves, for the failure that follows
    /// ([`crate::partition::PartitionQueue::fail_sent`] with the error of their batch mates):
    /// each named record is reported with its own error instead.
    pub(crate) fn set_record_errors(&mut self, failures: RecordFailures) {
        self.record_errors = Some(Box::new(failures));
    }

    /// What a split keeps of the original batch.
    pub(crate) fn split_origin(&self) -> SplitOrigin {
        SplitOrigin {
            created: self.created,
            attempts: self.attempts,
            possibly_persisted: self.possibly_persisted,
            base_sequence: self.base_sequence,
        }
    }

    /// Takes the finished batch apart: its result, its report entries, the buffer space they
    /// release, and its bytes (a buffer to reuse on success, the records to decode on failure).
    pub(crate) fn into_finished(self) -> Finished<T> {
        let result = match self.state {
            BatchState::Done(r) => r,
            // Only finished batches leave a partition; anything else is reported as a bug.
            other => Err(ProduceError::BatchDecode(format!(
                "batch left its partition while {other:?}"
            ))),
        };
        Finished {
            result,
            records: self.records,
            charged: self.charged,
            sealed: self.sealed,
            record_errors: self.record_errors,
        }
    }

    /// Gives the records up for their failure reports (decoding them back out of the batch).
    pub(crate) fn into_unreported(self) -> Unreported<T> {
        Unreported {
            decoded: self.sealed.into_records().map_err(|e| e.to_string()),
            records: self.records,
            charged: self.charged,
        }
    }

    /// Gives the records and bytes up, to split them into two batches.
    pub(crate) fn into_split_parts(self) -> (SealedBatch, Vec<Pending<T>>, usize) {
        (self.sealed, self.records, self.charged)
    }
}

/// What the halves of a split batch inherit from the original.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SplitOrigin {
    pub(crate) created: Instant,
    pub(crate) attempts: u32,
    pub(crate) possibly_persisted: bool,
    pub(crate) base_sequence: Option<i32>,
}

/// A batch that left its partition, finished.
#[derive(Debug)]
pub(crate) struct Finished<T> {
    pub(crate) result: Result<(i64, i64), ProduceError>,
    pub(crate) records: Vec<Pending<T>>,
    pub(crate) charged: usize,
    pub(crate) sealed: SealedBatch,
    /// On failure, the records that take an error of their own (see [`RecordFailures`]).
    pub(crate) record_errors: Option<Box<RecordFailures>>,
}

/// The records of a failed batch that the broker rejected themselves (Produce `RecordErrors`,
/// KIP-467), each with its own error; the other records of the batch take the batch's error.
/// Built only from entries that name a record of the batch, sorted by index, at most one per
/// record, never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordFailures {
    /// `(index within the batch, error)`, indexes strictly increasing.
    errors: Vec<(usize, ProduceError)>,
}

impl RecordFailures {
    /// The failures from `(index, error)` pairs naming records of a batch of `record_count`
    /// records: entries whose index names no record are left out, and of several for the same
    /// record the first is kept. `None` when no entry is left.
    pub(crate) fn new(
        record_count: usize,
        entries: impl IntoIterator<Item = (i64, ProduceError)>,
    ) -> Option<Self> {
        let mut errors: Vec<(usize, ProduceError)> = entries
            .into_iter()
            .filter_map(|(i, e)| {
                let i = usize::try_from(i).ok().filter(|&i| i < record_count)?;
                Some((i, e))
            })
            .collect();
        // A stable sort keeps the entries of one index in their order: the first one stays.
        errors.sort_by_key(|&(i, _)| i);
        errors.dedup_by_key(|&mut (i, _)| i);
        (!errors.is_empty()).then_some(RecordFailures { errors })
    }

    /// The errors, to adjust them once the set is known.
    pub(crate) fn errors_mut(&mut self) -> impl Iterator<Item = &mut ProduceError> {
        self.errors.iter_mut().map(|(_, e)| e)
    }

    /// How many records have an error of their own.
    pub(crate) fn len(&self) -> usize {
        self.errors.len()
    }

    /// The errors in index order, to walk alongside the batch's records.
    pub(crate) fn into_sorted(self) -> std::vec::IntoIter<(usize, ProduceError)> {
        self.errors.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use bytes::Bytes;

    use super::*;
    use crate::config::Config;

    fn record(i: usize, value: usize) -> Unrouted<usize> {
        let value = Bytes::from(vec![i as u8; value]);
        Unrouted {
            opaque: i,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(value),
            headers: Vec::new(),
            timestamp: Some(1_000 + i as i64),
            explicit_partition: false,
            size: 0,
        }
    }

    fn encoded(r: &Unrouted<usize>) -> usize {
        BatchBuilder::record_size_with_payload(0, 0, r.payload_size())
    }

    /// An open batch's buffer and list of report entries grow with what it holds, up to a
    /// `batch_size` of 1 MiB (more than the budget of full-size batches, a sixteenth of
    /// `buffer_memory`): after every append each is at most twice what it uses (or the
    /// smallest buffer, or four entries), never `batch_size` up front; the records come back
    /// intact after every move to a larger buffer.
    #[test]
    fn an_open_batch_holds_at_most_twice_its_bytes_not_batch_size() {
        const BATCH_SIZE: usize = 1 << 20;
        let config = Config::builder([("k", 9092)])
            .batch_size(BATCH_SIZE)
            .buffer_memory(8 << 20)
            .build()
            .unwrap();
        let mut pool = BufferPool::new(&config);
        let first = record(0, 100);
        let mut open = OpenBatch::new(0, &mut pool, BATCH_SIZE, encoded(&first), Instant::now());
        assert!(open.capacity_bytes() <= 2 * BufferPool::MIN_CAPACITY);
        let mut appended = 0;
        let mut next = Some(first);
        while let Some(r) = next.take() {
            let payload = r.payload_size();
            if open.try_append(r, payload).is_err() {
                break;
            }
            appended += 1;
            let bytes = open.builder.size_in_bytes();
            assert!(
                open.builder.capacity() <= (2 * bytes).max(BufferPool::MIN_CAPACITY),
                "{appended} records: {bytes} bytes in a buffer of {}",
                open.builder.capacity()
            );
            assert!(
                open.records.capacity() <= (2 * open.records.len()).max(4),
                "{appended} records: {} entries of room",
                open.records.capacity()
            );
            assert!(open.capacity_bytes() <= 2 * open.used_bytes() + BufferPool::MIN_CAPACITY);
            next = Some(record(appended, 100));
        }
        assert!(
            appended > 8000,
            "the batch filled up to batch_size: {appended}"
        );
        assert!(open.size_in_bytes() <= BATCH_SIZE);
        let records = open.into_unreported().decoded.unwrap();
        assert_eq!(records.len(), appended);
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.key.as_deref(), Some(format!("key-{i}").as_bytes()));
            assert_eq!(r.value.as_deref(), Some(&vec![i as u8; 100][..]));
            assert_eq!(r.timestamp, 1_000 + i as i64);
        }
    }

    /// A batch closed before it filled (its linger, a flush) keeps what it needs while it
    /// waits for its answer: its buffer and entries, opened at full size, are trimmed when it
    /// is sealed.
    #[test]
    fn a_batch_sealed_half_full_is_trimmed_to_what_it_holds() {
        let config = Config::builder([("k", 9092)])
            .batch_size(4096)
            .build()
            .unwrap();
        let mut pool = BufferPool::new(&config);
        let first = record(0, 100);
        let mut open = OpenBatch::new(0, &mut pool, 4096, encoded(&first), Instant::now());
        assert_eq!(open.builder.capacity(), 4096, "opened at full size");
        for i in 0..5 {
            let r = record(i, 100);
            let payload = r.payload_size();
            open.try_append(r, payload).unwrap();
        }
        let used = open.size_in_bytes();
        let (batch, spare) = open.seal(Compression::None, false).unwrap();
        assert!(spare.is_none());
        assert_eq!(batch.len_bytes(), used);
        let (sealed, records, _) = batch.into_split_parts();
        assert!(records.capacity() <= records.len() + records.len() / 4);
        let buf = sealed.into_buffer();
        assert!(
            buf.capacity() <= used + used / 4,
            "{} for {used}",
            buf.capacity()
        );
    }

    /// Batches open at full size while their buffers fit in the budget (a sixteenth of
    /// `buffer_memory`); past it they open small; a batch sealed gives its share back.
    #[test]
    fn batches_open_at_full_size_within_the_budget_only() {
        let config = Config::builder([("k", 9092)])
            .buffer_memory(4 << 20)
            .build()
            .unwrap();
        let budget = config.buffer_memory / 16;
        let mut pool = BufferPool::new(&config);
        let r = record(0, 100);
        let open = |pool: &mut BufferPool| {
            OpenBatch::<usize>::new(0, pool, config.batch_size, encoded(&r), Instant::now())
        };
        let mut full = Vec::new();
        loop {
            let o = open(&mut pool);
            if o.builder.capacity() < config.batch_size {
                break;
            }
            full.push(o);
        }
        let held: usize = full.iter().map(|o| o.capacity_bytes()).sum();
        assert!(
            !full.is_empty() && held <= budget,
            "{} full-size batches hold {held}",
            full.len()
        );
        assert!(
            held + full[0].capacity_bytes() > budget,
            "the budget is used up"
        );
        let small = open(&mut pool);
        assert!(small.capacity_bytes() <= 2 * BufferPool::MIN_CAPACITY);
        let sealed = full.pop().unwrap().seal(Compression::None, false).unwrap();
        drop(sealed);
        assert_eq!(open(&mut pool).builder.capacity(), config.batch_size);
    }
}
