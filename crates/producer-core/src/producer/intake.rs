//! Records in: the checks `send` makes, the holding area for topics whose metadata is unknown,
//! routing to a partition (explicit, the application's partitioner when it set one, murmur2
//! of the key, else the sticky partition that `partitioning` keeps), appending to the
//! partition's open batch, and closing batches (full, lingered, flushed).

use std::time::Duration;

use crate::batch::{charged_size, OpenBatch, Pending, Unrouted};
use crate::partitioner::partition_for_key;
use crate::partitioners::Route;
use crate::record::{BatchBuilder, RECORD_BATCH_OVERHEAD};
use crate::timer::TimerKind;
use crate::topic_name::check_topic_name;
use crate::topics::Held;
use crate::types::{ProduceError, Record, SendError, SendErrorReason};

use super::Producer;

/// Bytes a Produce request needs besides its batches, at most (header, client id, topic and
/// partition framing), used to refuse records that could never fit in a request.
pub(super) fn request_overhead(client_id: &str, topic: &str) -> usize {
    64 + client_id.len() + topic.len()
}

/// What a record held for its topic's metadata costs beyond its batch charge: its `Held`
/// entry (the whole record's parts, queued) minus the `Pending` entry the charge includes.
fn held_extra<T>() -> usize {
    std::mem::size_of::<Held<T>>().saturating_sub(std::mem::size_of::<Pending<T>>())
}

/// A record's payload size and its encoded size as the first record of a batch
/// ([`BatchBuilder::first_record_sizes`]): what `send` checks against `max_request_size` and
/// charges, and what [`super::Producer::buffer_charge`] tells a driver.
#[inline(always)]
fn first_record_sizes(record: &Record) -> (usize, usize) {
    BatchBuilder::first_record_sizes(
        record.key.as_deref(),
        record.value.as_deref(),
        &record.headers,
    )
}

/// [`super::Producer::buffer_charge`]: the charge [`Producer::accept`] makes for a record
/// whose topic is known.
#[inline(always)]
pub(super) fn buffer_charge<T>(record: &Record) -> usize {
    charged_size::<T>(first_record_sizes(record).1)
}

/// What appending a record did: the bytes it added to the partition's batches (a new batch's
/// header included) and whether the partition's batch is still open after it (a batch that
/// reached `batch_size` is closed). A batch that grows past `batch_size` while its leader is
/// busy counts as closed each time it passes a multiple of `batch_size`: for the sticky
/// partitioner it stands for batches of `batch_size`, with their boundaries.
#[derive(Debug, Clone, Copy)]
pub(super) struct Appended {
    pub(super) bytes: usize,
    pub(super) batch_open: bool,
}

impl<T> Producer<T> {
    /// [`Producer::send`] after the clock moved: refuses what can never be sent or does not fit
    /// the buffer (handing it back), else charges the record and routes it (or holds it until
    /// its topic's metadata arrives).
    #[allow(clippy::result_large_err)]
    #[inline(always)]
    pub(super) fn accept(&mut self, record: Record, opaque: T) -> Result<(), SendError<T>> {
        let refuse = |reason, record, opaque| {
            Err(SendError {
                reason,
                record,
                opaque,
            })
        };
        if let Some(e) = self.fatal_error() {
            return refuse(SendErrorReason::Fatal(e.clone()), record, opaque);
        }
        if self.lifecycle.closing {
            return refuse(SendErrorReason::Closed, record, opaque);
        }
        if self.txn.as_ref().is_some_and(|t| !t.accepts_records()) {
            return refuse(SendErrorReason::NoTransaction, record, opaque);
        }
        if let Some(p) = record.partition.filter(|&p| p < 0) {
            return refuse(SendErrorReason::InvalidPartition(p), record, opaque);
        }
        if !self.topics.known(&record.topic) {
            // Checked once per name: a topic in use passed this already.
            if let Err(e) = check_topic_name(&record.topic) {
                return refuse(SendErrorReason::InvalidTopic(e), record, opaque);
            }
        }
        let (payload, encoded) = first_record_sizes(&record);
        let limit = self.config.max_request_size.saturating_sub(
            RECORD_BATCH_OVERHEAD + request_overhead(&self.config.client_id, &record.topic),
        );
        if encoded > limit {
            let reason = SendErrorReason::RecordTooLarge {
                size: encoded,
                max: self.config.max_request_size,
            };
            return refuse(reason, record, opaque);
        }
        let (topic, new) = self.topics.id_of(&record.topic, self.now);
        if new {
            self.request_metadata_for_new_topic();
        }
        let t = self.topics.get(topic);
        let known = t.known;
        // A record held for its topic's metadata also costs its whole `Held` entry.
        let size = charged_size::<T>(encoded) + if known { 0 } else { held_extra::<T>() };
        if !self.buffered.has_room(size, &self.config) {
            // The wait for buffer space (`bufferpool-wait-time-ns-total`) runs from here to
            // the next record accepted.
            self.metrics.buffer_full(self.now);
            return refuse(SendErrorReason::Full, record, opaque);
        }
        let unacknowledged = self.buffered.unacknowledged_bytes();
        if !self.queue_delay.admits(unacknowledged) {
            // Pushed back by the queue-delay limit (`queue-delay-wait-time-ns-total` runs
            // from here to the next record accepted).
            self.queue_delay.held_back(self.now);
            return refuse(SendErrorReason::Full, record, opaque);
        }
        if let Some(p) = record
            .partition
            .filter(|&p| known && p >= t.partitions.len() as i32)
        {
            return refuse(SendErrorReason::InvalidPartition(p), record, opaque);
        }
        // Accepted: a wait for buffer space ends (before the record's parts move into its
        // entry, so that the call does not make them wait on the stack).
        if self.metrics.waiting_for_buffer() {
            self.metrics.buffer_wait_ended(self.now, &mut self.stats);
        }
        if self.queue_delay.holding_back() {
            self.queue_delay_wait_ended();
        }
        if unacknowledged == 0 {
            self.queue_delay.busy_from(self.now);
        }
        let Record {
            partition,
            key,
            value,
            headers,
            timestamp,
            ..
        } = record;
        let pending = Unrouted {
            opaque,
            key,
            value,
            headers,
            timestamp,
            explicit_partition: partition.is_some(),
            size,
        };
        self.buffered.charge(size);
        if let Some(code) = self.topics.get(topic).error {
            let err = ProduceError::Broker {
                code,
                message: None,
                possibly_persisted: false,
            };
            self.fail_unrouted(topic, partition.unwrap_or(-1), pending, err);
            return Ok(());
        }
        if !known {
            self.hold(topic, pending, partition);
            return Ok(());
        }
        self.route_sized(topic, pending, partition, payload);
        Ok(())
    }

    /// A record was accepted after the queue-delay limit refused records: the wait ends,
    /// counted in [`crate::Stats::queue_delay_wait_ns`].
    #[cold]
    #[inline(never)]
    fn queue_delay_wait_ended(&mut self) {
        let waited = self.queue_delay.hold_ended(self.now);
        self.stats.queue_delay_wait_ns = self
            .stats
            .queue_delay_wait_ns
            .saturating_add(u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX));
    }

    /// How long a record may wait for its topic's metadata: `max_block`, and never longer than
    /// its delivery timeout.
    fn holding_limit(&self) -> Duration {
        self.config.max_block.min(self.config.delivery_timeout)
    }

    /// Keeps a record until its topic's metadata arrives (or `max_block` passes).
    fn hold(&mut self, topic: u32, pending: Unrouted<T>, partition: Option<i32>) {
        let now = self.now;
        let deadline = now + self.holding_limit();
        let t = self.topics.get_mut(topic);
        t.holding.push_back(Held {
            pending,
            partition,
            since: now,
        });
        if t.holding_timer.is_none() {
            t.holding_timer = Some(deadline);
            self.timers.arm(deadline, TimerKind::Holding { topic });
        }
    }

    /// The topic's metadata arrived: routes the records held for it (in the order they were
    /// sent), releasing what their `Held` entries cost beyond their batch charge, and closes
    /// their batches if a flush came while they were held. The holding queue is taken whole: no
    /// copy of it is made.
    pub(super) fn route_held(&mut self, topic: u32) {
        let held = std::mem::take(&mut self.topics.get_mut(topic).holding);
        let extra = held_extra::<T>();
        for mut h in held {
            h.pending.size -= extra;
            self.buffered.discount(extra);
            let payload = h.pending.payload_size();
            self.route_sized(topic, h.pending, h.partition, payload);
        }
        if std::mem::take(&mut self.topics.get_mut(topic).flush_held) {
            for p in 0..self.topics.partition_count(topic) {
                self.close_open_batch(topic, p);
            }
        }
    }

    /// Records held for a topic reached `max_block`: they fail, oldest first.
    pub(super) fn expire_holding(&mut self, topic: u32) {
        let now = self.now;
        let max_block = self.holding_limit();
        // With metadata from the cluster the topic is known not to exist; without any, the
        // cluster was never reached and the records simply ran out of time.
        let error = self.unknown_topic_error();
        let t = self.topics.get_mut(topic);
        t.holding_timer = None;
        let mut expired = Vec::new();
        while t
            .holding
            .front()
            .is_some_and(|h| h.since + max_block <= now)
        {
            expired.extend(t.holding.pop_front());
        }
        if let Some(h) = t.holding.front() {
            let at = h.since + max_block;
            t.holding_timer = Some(at);
            self.timers.arm(at, TimerKind::Holding { topic });
        }
        for h in expired {
            self.fail_unrouted(topic, h.partition.unwrap_or(-1), h.pending, error.clone());
        }
        self.check_closed();
    }

    /// Picks the partition of a record of a known topic and appends it. `payload` is the
    /// record's [`BatchBuilder::payload_size`].
    fn route_sized(
        &mut self,
        topic: u32,
        pending: Unrouted<T>,
        partition: Option<i32>,
        payload: usize,
    ) {
        if partition.is_none() && self.partitioner.is_some() {
            // The application's partitioner: one branch here while there is none.
            return self.route_custom(topic, pending, payload);
        }
        let count = self.topics.partition_count(topic) as i32;
        let p = match (partition, &pending.key) {
            (Some(p), _) if p < count => p as u32,
            (Some(p), _) => {
                let error = ProduceError::UnknownPartition {
                    partition: p,
                    count,
                };
                self.fail_unrouted(topic, p, pending, error);
                return;
            }
            (None, Some(key)) if !self.config.partitioner_ignore_keys => {
                partition_for_key(key, count) as u32
            }
            (None, _) => {
                // As `append_sticky`, written out here: the hot path of records without a key
                // moves the record once (a call taking it by value copies it again).
                let mut p = self.sticky_partition(topic);
                let appended = match self.append_to_open(topic, p, pending, payload) {
                    Ok(appended) => appended,
                    Err(pending) => {
                        // The open batch is closed now (or there was none): a batch boundary,
                        // where a switch held back earlier happens before the record goes
                        // anywhere (Java: `partitionChanged` before `appendNewBatch`).
                        p = self.sticky_partition(topic);
                        self.append(topic, p, pending, payload)
                    }
                };
                self.sticky_appended(topic, appended);
                return;
            }
        };
        self.append(topic, p, pending, payload);
    }

    /// Routes a record without an explicit partition by the application's partitioner, and
    /// appends it (or fails it with the partitioner's error). Out of line and cold, so that the
    /// built-in route, taken when no partitioner is set, stays as tight as it was.
    #[cold]
    #[inline(never)]
    fn route_custom(&mut self, topic: u32, pending: Unrouted<T>, payload: usize) {
        match self.custom_route(topic, &pending) {
            Ok(Route::Partition(p)) => {
                self.append(topic, p, pending, payload);
            }
            Ok(Route::Sticky) => self.append_sticky(topic, pending, payload),
            Err(e) => self.fail_unrouted(topic, -1, pending, ProduceError::Partitioner(e)),
        }
    }

    /// Appends a record to the sticky partition of `topic` chosen by the application's
    /// partitioner ([`Route::Sticky`]); the built-in route writes the same steps out.
    fn append_sticky(&mut self, topic: u32, pending: Unrouted<T>, payload: usize) {
        let mut p = self.sticky_partition(topic);
        let appended = match self.append_to_open(topic, p, pending, payload) {
            Ok(appended) => appended,
            Err(pending) => {
                // The open batch is closed now (or there was none): a batch boundary, where a
                // switch held back earlier happens before the record goes anywhere (Java:
                // `partitionChanged` before `appendNewBatch`).
                p = self.sticky_partition(topic);
                self.append(topic, p, pending, payload)
            }
        };
        self.sticky_appended(topic, appended);
    }

    /// Appends a record to the open batch of a partition, closing the batch first when the
    /// record would take it past `batch_size` and after when it reached it. Returns what the
    /// append did, which the sticky partitioner counts.
    #[inline(always)]
    fn append(&mut self, topic: u32, p: u32, pending: Unrouted<T>, payload: usize) -> Appended {
        match self.append_to_open(topic, p, pending, payload) {
            Ok(appended) => appended,
            Err(pending) => self.append_to_new(topic, p, pending, payload),
        }
    }

    /// Appends a record to the partition's open batch if it fits (see [`Producer::append`]).
    /// A record that does not fit closes the batch and comes back, as it does when the
    /// partition has no open batch: then [`Producer::append_to_new`] takes it.
    #[inline(always)]
    fn append_to_open(
        &mut self,
        topic: u32,
        p: u32,
        pending: Unrouted<T>,
        payload: usize,
    ) -> Result<Appended, Unrouted<T>> {
        let Some(open) = self.topics.partition_mut(topic, p).open.as_mut() else {
            return Err(pending);
        };
        let before = open.size_in_bytes();
        match open.try_append(pending, payload) {
            Ok(()) => Ok(self.appended(topic, p, before)),
            Err(pending) => self.open_batch_full(topic, p, pending, payload),
        }
    }

    /// The record did not fit in the partition's open batch: the batch grows if its leader is
    /// busy ([`Producer::grow_open_batch`]) and takes the record, or it is closed as full and
    /// the record comes back (see [`Producer::append_to_open`]).
    #[inline(never)]
    fn open_batch_full(
        &mut self,
        topic: u32,
        p: u32,
        pending: Unrouted<T>,
        payload: usize,
    ) -> Result<Appended, Unrouted<T>> {
        let pending = if self.grow_open_batch(topic, p) {
            let Some(open) = self.topics.partition_mut(topic, p).open.as_mut() else {
                return Err(pending);
            };
            let before = open.size_in_bytes();
            match open.try_append(pending, payload) {
                Ok(()) => return Ok(self.appended(topic, p, before)),
                Err(pending) => pending,
            }
        } else {
            pending
        };
        self.close_full_batch(topic, p);
        Err(pending)
    }

    /// Appends a record to a new open batch of a partition that has none (see
    /// [`Producer::append`]).
    fn append_to_new(
        &mut self,
        topic: u32,
        p: u32,
        pending: Unrouted<T>,
        payload: usize,
    ) -> Appended {
        let encoded = BatchBuilder::record_size_with_payload(0, 0, payload);
        let open = self.open_batch(topic, p, encoded);
        if let Err(pending) = open.try_append(pending, payload) {
            // A record always fits an empty batch; were that ever wrong, the record is
            // reported rather than lost.
            debug_assert!(false, "a record did not fit an empty batch");
            let error = ProduceError::BatchDecode("a record did not fit an empty batch".into());
            self.fail_unrouted(topic, p as i32, pending, error);
            return Appended {
                bytes: 0,
                batch_open: true,
            };
        }
        self.appended(topic, p, 0)
    }

    /// A record went into the open batch of a partition, which held `before` bytes: closes the
    /// batch once it reached its limit (`batch_size`, unless it grows: see
    /// [`Producer::grow_open_batch`]), tells the leader when nothing lingers, asks for metadata
    /// when the partition has no leader.
    #[inline(always)]
    fn appended(&mut self, topic: u32, p: u32, before: usize) -> Appended {
        let (size, limit) = self
            .topics
            .partition(topic, p)
            .open
            .as_ref()
            .map_or((before, 0), |o| (o.size_in_bytes(), o.limit()));
        if size >= limit && !self.grow_open_batch(topic, p) {
            self.close_full_batch(topic, p);
        }
        if self.config.linger.is_zero() {
            self.mark_partition_dirty(topic, p);
        }
        if self.topics.partition(topic, p).leader() < 0 {
            // No leader known (offline broker, election): look again, rate-limited.
            self.request_metadata();
        }
        // At least 1: `batch.size` 0 (a batch per record) divides nothing by zero.
        let batch_size = self.config.batch_size.max(1);
        Appended {
            bytes: size - before,
            // The division only for a batch past `batch_size` (one that grows).
            batch_open: size < batch_size || before / batch_size == size / batch_size,
        }
    }

    /// Starts a new open batch for a partition and arms its linger and delivery timers.
    /// `encoded` is the first record's size, to size the batch's buffer.
    fn open_batch(&mut self, topic: u32, p: u32, encoded: usize) -> &mut OpenBatch<T> {
        let now = self.now;
        let id = self.topics.partition_mut(topic, p).take_batch_id();
        self.timers.arm(
            now + self.config.linger,
            TimerKind::Linger {
                topic,
                partition: p,
                batch: id,
            },
        );
        self.arm_delivery_timer(topic, p, now + self.config.delivery_timeout);
        let open = OpenBatch::new(id, &mut self.buffers, self.config.batch_size, encoded, now);
        self.topics.partition_mut(topic, p).open = Some(open);
        // Listed with its leader, so that a request to it takes the batch along (in the walk
        // of the partitions with something to send, not of every partition it leads).
        self.list_partition(topic, p);
        self.topics
            .partition_mut(topic, p)
            .open
            .as_mut()
            .expect("opened above")
    }

    /// Seals the open batch of a partition and queues it (a batch boundary, where a sticky
    /// partition that had its `batch_size` bytes may move on at the next record). A batch that
    /// fails to compress fails its records.
    pub(super) fn close_open_batch(&mut self, topic: u32, p: u32) {
        self.seal_open_batch(topic, p, false);
    }

    /// [`Producer::close_open_batch`] for a batch that is full (`batch.size` reached, or the
    /// next record does not fit): it is counted as sealed full.
    fn close_full_batch(&mut self, topic: u32, p: u32) {
        self.seal_open_batch(topic, p, true);
    }

    fn seal_open_batch(&mut self, topic: u32, p: u32, full: bool) {
        let t = self.topics.get_mut(topic);
        let Some(open) = t.partitions[p as usize].open.take() else {
            return;
        };
        // A grown batch is full too: it went past `batch_size`.
        let full = full || open.grown();
        match open.seal(self.config.compression, self.txn.is_some()) {
            Ok((mut batch, spare)) => {
                if full {
                    batch.mark_sealed_full();
                }
                if let Some(buf) = spare {
                    self.buffers.give(buf, self.config.batch_size);
                }
                self.metrics.batch_closed(batch.len_bytes());
                self.topics.partition_mut(topic, p).push_closed(batch);
                self.mark_partition_dirty(topic, p);
            }
            Err((e, records)) => {
                let error = ProduceError::Compression(e.to_string());
                self.fail_records(topic, p as i32, records, error);
            }
        }
    }

    /// Closes every open batch ([`Producer::flush`]); records still waiting for their topic's
    /// metadata are flushed as soon as they are routed.
    pub(super) fn close_all_open_batches(&mut self) {
        for t in self.topics.iter_mut() {
            t.flush_held |= !t.holding.is_empty();
        }
        for t in 0..self.topics.len() {
            for p in 0..self.topics.partition_count(t) {
                if self.topics.partition(t, p).open.is_some() {
                    self.close_open_batch(t, p);
                }
            }
        }
    }

    /// The linger timer of open batch `batch` fired: if it is still open, its leader has
    /// something to send.
    pub(super) fn linger_expired(&mut self, topic: u32, p: u32, batch: u64) {
        let open = self.topics.partition(topic, p).open.as_ref();
        if open.is_some_and(|o| o.id() == batch) {
            self.mark_partition_dirty(topic, p);
        }
    }
}
