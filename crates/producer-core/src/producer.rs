//! The public state machine: records and network events in, bytes, connections and delivery
//! reports out.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::accumulator::{
    charged_size, Batch, BatchState, BufferPool, OpenBatch, Pending, Unrouted,
};
use crate::config::{Acks, Config};
use crate::connection::{ConnState, Connection, RequestKind};
use crate::metadata::{BrokerSlot, Held, MetadataPolicy, TopicState};
use crate::outputs::{OutputQueue, SuccessRun};
use crate::partitioner::{partition_for_key, Rng};
use crate::protocol::api_versions::ApiVersionsRequest;
use crate::protocol::ApiKey;
use crate::record::{BatchBuilder, DecodedRecord, RECORD_BATCH_OVERHEAD};
use crate::timer::{TimerKind, Timers};
use crate::types::{
    ConnId, Delivery, DeliveryFailure, Event, Output, ProduceError, Record, SendError,
    SendErrorReason,
};

/// Bytes a Produce request needs besides its batches, at most (header, client id, topic and
/// partition framing), used to refuse records that could never fit in a request.
/// What a record held for its topic's metadata costs beyond its batch charge: its `Held`
/// entry (the whole record's parts, queued) minus the `Pending` entry the charge includes.
fn held_extra<T>() -> usize {
    std::mem::size_of::<Held<T>>().saturating_sub(std::mem::size_of::<Pending<T>>())
}

pub(crate) fn request_overhead(client_id: &str, topic: &str) -> usize {
    64 + client_id.len() + topic.len()
}

/// The producer id state of an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PidState {
    /// Not idempotent: batches carry -1.
    Disabled,
    /// Needed; no request in flight. Retry allowed from the instant.
    Needed { retry_at: Option<Instant> },
    /// InitProducerId in flight.
    Requesting,
    /// Assigned.
    Ready { producer_id: i64, epoch: i16 },
}

/// Counters an operator may want to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Produce requests built.
    pub produce_requests: u64,
    /// Batches sent (retries included).
    pub batches_sent: u64,
    /// Batches retried.
    pub retries: u64,
    /// Responses that could not be parsed (the connection was closed).
    pub malformed_responses: u64,
    /// Bytes after complete response bodies that the body did not use (ignored).
    pub trailing_response_bytes: u64,
    /// Connections lost or timed out.
    pub disconnects: u64,
    /// Metadata responses applied.
    pub metadata_refreshes: u64,
    /// Responses to acks=0 requests (which expect none), ignored.
    pub ignored_responses: u64,
}

/// The sans-IO Kafka producer. `T` is a value of the caller's, handed back in each record's
/// delivery report (a channel sender, a callback id, `()`).
///
/// # The run loop
/// Feed inputs with the `handle_*` methods and [`Producer::send`]; after any of them, drain
/// [`Producer::poll_output`] until it returns `None`, doing what each output says; then sleep
/// until [`Producer::poll_timeout`] or the next I/O event, and call [`Producer::handle_timeout`]
/// when the deadline passes. Every mutating call takes the current `Instant`; the producer never
/// reads a clock, does no I/O and holds no lock.
#[derive(Debug)]
pub struct Producer<T> {
    pub(crate) config: Config,
    pub(crate) now: Instant,
    pub(crate) rng: Rng,
    pub(crate) timers: Timers,
    pub(crate) outputs: OutputQueue<T>,
    pub(crate) topics: Vec<TopicState<T>>,
    pub(crate) topic_index: crate::metadata::TopicIndex,
    /// The topic of the last `send` and its id: callers sending many records to one topic share
    /// one `Arc<str>`, so a pointer comparison usually saves hashing the name.
    pub(crate) last_topic: Option<(Arc<str>, u32)>,
    /// Buffers of finished batches, reused by new ones.
    pub(crate) buffers: BufferPool,
    pub(crate) brokers: Vec<BrokerSlot>,
    pub(crate) node_slots: HashMap<i32, u32>,
    pub(crate) dirty_brokers: Vec<u32>,
    pub(crate) work_pending: bool,
    pub(crate) metadata: MetadataPolicy,
    pub(crate) pid: PidState,
    pub(crate) buffered_bytes: usize,
    pub(crate) buffered_records: usize,
    pub(crate) closing: bool,
    /// With acks=0, `close` sent one answered request per connection to wait on.
    pub(crate) close_barrier_sent: bool,
    pub(crate) closed: bool,
    pub(crate) fatal: Option<ProduceError>,
    pub(crate) stats: Stats,
    /// Bootstrap slot to try next when no broker is reachable.
    pub(crate) next_bootstrap: usize,
}

impl<T> Producer<T> {
    /// A producer with a validated configuration. It starts connecting at the first
    /// `poll_output`.
    pub fn new(config: Config, now: Instant) -> Self {
        let brokers = config
            .bootstrap
            .iter()
            .map(|(h, p)| BrokerSlot::new(-1, h.clone(), *p))
            .collect();
        let pid = if config.idempotence {
            PidState::Needed { retry_at: None }
        } else {
            PidState::Disabled
        };
        Producer {
            rng: Rng::new(config.seed),
            now,
            timers: Timers::default(),
            outputs: OutputQueue::new(),
            topics: Vec::new(),
            topic_index: Default::default(),
            last_topic: None,
            buffers: BufferPool::default(),
            brokers,
            node_slots: HashMap::new(),
            dirty_brokers: Vec::new(),
            work_pending: true,
            metadata: MetadataPolicy {
                wanted: true,
                in_flight: false,
                next_allowed: now,
                last_refresh: None,
            },
            pid,
            buffered_bytes: 0,
            buffered_records: 0,
            closing: false,
            close_barrier_sent: false,
            closed: false,
            fatal: None,
            stats: Stats::default(),
            next_bootstrap: 0,
            config,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Records accepted and not yet reported.
    pub fn buffered_records(&self) -> usize {
        self.buffered_records
    }

    /// Bytes of records accepted and not yet reported (as counted against `buffer_memory`).
    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Whether `close` has completed (every record reported, connections closed).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The producer id and epoch, once assigned (idempotent producers).
    pub fn producer_id(&self) -> Option<(i64, i16)> {
        match self.pid {
            PidState::Ready { producer_id, epoch } => Some((producer_id, epoch)),
            _ => None,
        }
    }

    pub(crate) fn touch(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
        self.work_pending = true;
    }

    // -----------------------------------------------------------------------------------------
    // Records in
    // -----------------------------------------------------------------------------------------

    /// Accepts a record for sending. Never blocks. On success the record will get exactly one
    /// delivery report carrying `opaque`. On error the record and `opaque` come back: `Full`
    /// means try again once reports have drained.
    // The error is large on purpose: it hands the record back by value, without an allocation.
    #[allow(clippy::result_large_err)]
    pub fn send(&mut self, now: Instant, record: Record, opaque: T) -> Result<(), SendError<T>> {
        self.touch(now);
        let reason = if let Some(e) = &self.fatal {
            Some(SendErrorReason::Fatal(e.clone()))
        } else if self.closing {
            Some(SendErrorReason::Closed)
        } else if record.partition.is_some_and(|p| p < 0) {
            Some(SendErrorReason::InvalidPartition(
                record.partition.unwrap_or(-1),
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(SendError {
                reason,
                record,
                opaque,
            });
        }
        let payload = BatchBuilder::payload_size(
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        );
        let encoded = BatchBuilder::record_size_with_payload(0, 0, payload);
        let size = charged_size::<T>(encoded);
        let limit = self.config.max_request_size.saturating_sub(
            RECORD_BATCH_OVERHEAD + request_overhead(&self.config.client_id, &record.topic),
        );
        if encoded > limit {
            return Err(SendError {
                reason: SendErrorReason::RecordTooLarge {
                    size: encoded,
                    max: self.config.max_request_size,
                },
                record,
                opaque,
            });
        }
        let topic = self.topic_id(&record.topic);
        let t = &self.topics[topic as usize];
        // A record held for its topic's metadata also costs its whole `Held` entry.
        let size = if t.known {
            size
        } else {
            size + held_extra::<T>()
        };
        if self.buffered_bytes + size > self.config.buffer_memory
            || self.buffered_records >= self.config.buffer_max_records
        {
            return Err(SendError {
                reason: SendErrorReason::Full,
                record,
                opaque,
            });
        }
        if t.known {
            if let Some(p) = record.partition {
                if p >= t.partitions.len() as i32 {
                    return Err(SendError {
                        reason: SendErrorReason::InvalidPartition(p),
                        record,
                        opaque,
                    });
                }
            }
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
        self.buffered_bytes += size;
        self.buffered_records += 1;
        if let Some(code) = self.topics[topic as usize].error {
            let err = ProduceError::Broker {
                code,
                message: None,
                possibly_persisted: false,
            };
            self.fail_unrouted(topic, partition.unwrap_or(-1), pending, err);
            return Ok(());
        }
        if !self.topics[topic as usize].known {
            self.hold(topic, pending, partition);
            return Ok(());
        }
        debug_assert_eq!(pending.size, charged_size::<T>(encoded));
        self.route_sized(topic, pending, partition, payload);
        Ok(())
    }

    /// The id of a topic, registering it (and asking for its metadata) the first time.
    fn topic_id(&mut self, name: &Arc<str>) -> u32 {
        if let Some((last, id)) = &self.last_topic {
            if Arc::ptr_eq(last, name) {
                return *id;
            }
        }
        let id = match self.topic_index.get(name) {
            Some(&id) => id,
            None => self.register_topic(name),
        };
        self.last_topic = Some((name.clone(), id));
        id
    }

    fn register_topic(&mut self, name: &Arc<str>) -> u32 {
        let id = self.topics.len() as u32;
        self.topics.push(TopicState::new(name.clone()));
        self.topic_index.insert(name.clone(), id);
        self.request_metadata();
        id
    }

    /// How long a record may wait for its topic's metadata: `max_block`, and never longer than
    /// its delivery timeout.
    fn holding_limit(&self) -> Duration {
        self.config.max_block.min(self.config.delivery_timeout)
    }

    fn hold(&mut self, topic: u32, pending: Unrouted<T>, partition: Option<i32>) {
        let now = self.now;
        let deadline = now + self.holding_limit();
        let t = &mut self.topics[topic as usize];
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

    /// Routes the records held for a topic whose metadata just arrived (in the order they
    /// were sent), releasing what their `Held` entries cost beyond their batch charge. The
    /// holding queue is taken whole: no copy of it is made.
    pub(crate) fn route_held(&mut self, topic: u32) {
        let held = std::mem::take(&mut self.topics[topic as usize].holding);
        let extra = held_extra::<T>();
        for mut h in held {
            h.pending.size -= extra;
            self.buffered_bytes -= extra;
            self.route(topic, h.pending, h.partition);
        }
    }

    /// Picks the partition of a record of a known topic and appends it.
    pub(crate) fn route(&mut self, topic: u32, pending: Unrouted<T>, partition: Option<i32>) {
        let payload = pending.payload_size();
        self.route_sized(topic, pending, partition, payload);
    }

    /// [`Producer::route`] with the record's [`BatchBuilder::payload_size`] already known.
    fn route_sized(
        &mut self,
        topic: u32,
        pending: Unrouted<T>,
        partition: Option<i32>,
        payload: usize,
    ) {
        let count = self.topics[topic as usize].partitions.len() as i32;
        let p = match (partition, &pending.key) {
            (Some(p), _) if p < count => p as u32,
            (Some(p), _) => {
                self.fail_unrouted(
                    topic,
                    p,
                    pending,
                    ProduceError::UnknownPartition {
                        partition: p,
                        count,
                    },
                );
                return;
            }
            (None, Some(key)) => partition_for_key(key, count) as u32,
            (None, None) => self.sticky_partition(topic),
        };
        self.append(topic, p, pending, payload);
    }

    fn sticky_partition(&mut self, topic: u32) -> u32 {
        if let Some(p) = self.topics[topic as usize].sticky {
            return p;
        }
        let t = &self.topics[topic as usize];
        let available: Vec<u32> = (0..t.partitions.len() as u32)
            .filter(|&p| t.partitions[p as usize].leader >= 0)
            .collect();
        let p = if available.is_empty() {
            self.rng.below(t.partitions.len() as u64) as u32
        } else {
            available[self.rng.below(available.len() as u64) as usize]
        };
        self.topics[topic as usize].sticky = Some(p);
        p
    }

    /// Appends a record to the open batch of a partition, closing the batch first when the
    /// record would take it past `batch_size` and after when it reached it.
    fn append(&mut self, topic: u32, p: u32, pending: Unrouted<T>, payload: usize) {
        let batch_size = self.config.batch_size;
        if !self.try_append_open(topic, p, &pending, payload) {
            if self.topics[topic as usize].partitions[p as usize]
                .open
                .is_some()
            {
                self.close_open_batch(topic, p);
            }
            let encoded = BatchBuilder::record_size_with_payload(0, 0, payload);
            self.open_batch(topic, p, encoded);
            let appended = self.try_append_open(topic, p, &pending, payload);
            debug_assert!(appended, "a record always fits an empty batch");
        }
        let pq = &mut self.topics[topic as usize].partitions[p as usize];
        let open = pq.open.as_mut().expect("the record was just appended");
        // Key, value and headers now live in the batch bytes; they are dropped here.
        open.records.push(Pending {
            opaque: pending.opaque,
            timestamp: pending.timestamp.unwrap_or(-1),
            explicit_partition: pending.explicit_partition,
        });
        open.charged += pending.size;
        if open.builder.size_in_bytes() >= batch_size {
            self.close_open_batch(topic, p);
        }
        if self.config.linger.is_zero() {
            self.mark_partition_dirty(topic, p);
        }
        if self.topics[topic as usize].partitions[p as usize].leader < 0 {
            // No leader known (offline broker, election): look again, rate-limited.
            self.request_metadata();
        }
    }

    /// Encodes a record into the partition's open batch if there is one and the record fits
    /// in `batch_size` (it always fits an empty batch). The caller pushes `pending` after.
    fn try_append_open(
        &mut self,
        topic: u32,
        p: u32,
        pending: &Unrouted<T>,
        payload: usize,
    ) -> bool {
        let batch_size = self.config.batch_size;
        let pq = &mut self.topics[topic as usize].partitions[p as usize];
        let Some(open) = pq.open.as_mut() else {
            return false;
        };
        open.builder.try_append_with_payload(
            batch_size,
            pending.timestamp.unwrap_or(-1),
            pending.key.as_deref(),
            pending.value.as_deref(),
            &pending.headers,
            payload,
        )
    }

    /// Starts a new open batch for a partition and arms its linger and delivery timers.
    /// `encoded` is the first record's size, to size the batch's record list.
    fn open_batch(&mut self, topic: u32, p: u32, encoded: usize) {
        let now = self.now;
        let batch_size = self.config.batch_size;
        let buf = self.buffers.take(batch_size);
        let pq = &mut self.topics[topic as usize].partitions[p as usize];
        let id = pq.next_batch_id;
        pq.next_batch_id += 1;
        pq.open = Some(OpenBatch::new(id, buf, batch_size, encoded, now));
        self.timers.arm(
            now + self.config.linger,
            TimerKind::Linger {
                topic,
                partition: p,
                batch: id,
            },
        );
        self.arm_delivery_timer(topic, p, now + self.config.delivery_timeout);
    }

    /// Seals the open batch of a partition and queues it; with a null-key sticky partition this
    /// is the batch boundary where the sticky choice moves on.
    pub(crate) fn close_open_batch(&mut self, topic: u32, p: u32) {
        let compression = self.config.compression;
        let t = &mut self.topics[topic as usize];
        let Some(open) = t.partitions[p as usize].open.take() else {
            return;
        };
        if t.sticky == Some(p) {
            t.sticky = None;
        }
        let OpenBatch {
            id,
            builder,
            records,
            charged,
            created,
        } = open;
        match builder.seal_or_keep(compression) {
            Ok((sealed, spare)) => {
                if let Some(buf) = spare {
                    self.buffers.give(buf, self.config.batch_size);
                }
                let t = &mut self.topics[topic as usize];
                let pq = &mut t.partitions[p as usize];
                pq.batches.push_back(Batch {
                    id,
                    sealed,
                    records,
                    charged,
                    created,
                    state: BatchState::Ready,
                    attempts: 0,
                    base_sequence: None,
                    possibly_persisted: false,
                });
                self.mark_partition_dirty(topic, p);
            }
            Err((e, builder)) => {
                let err = ProduceError::Compression(e.to_string());
                let decoded = builder.into_records().map_err(|e| e.to_string());
                self.fail_records(topic, p as i32, records, decoded, charged, err);
            }
        }
    }

    /// Marks the leader of a partition as having something to send.
    pub(crate) fn mark_partition_dirty(&mut self, topic: u32, p: u32) {
        let leader = self.topics[topic as usize].partitions[p as usize].leader;
        if let Some(&slot) = self.node_slots.get(&leader) {
            self.mark_broker_dirty(slot);
        }
    }

    pub(crate) fn mark_broker_dirty(&mut self, slot: u32) {
        let b = &mut self.brokers[slot as usize];
        if !b.dirty {
            b.dirty = true;
            self.dirty_brokers.push(slot);
        }
        self.work_pending = true;
    }

    pub(crate) fn arm_delivery_timer(&mut self, topic: u32, p: u32, at: Instant) {
        let pq = &mut self.topics[topic as usize].partitions[p as usize];
        if pq.delivery_timer.is_none_or(|t| t > at) {
            pq.delivery_timer = Some(at);
            self.timers.arm(
                at,
                TimerKind::Delivery {
                    topic,
                    partition: p,
                },
            );
        }
    }

    /// Closes every open batch now, ignoring `linger`, so everything buffered is sent as soon
    /// as the ordering rules allow. Records sent afterwards linger as usual. Watch
    /// [`Producer::buffered_records`] reach zero to know the flush completed.
    pub fn flush(&mut self, now: Instant) {
        self.touch(now);
        for t in &mut self.topics {
            // Records still waiting for metadata are flushed as soon as they are routed.
            t.flush_held |= !t.holding.is_empty();
        }
        for t in 0..self.topics.len() as u32 {
            for p in 0..self.topics[t as usize].partitions.len() as u32 {
                if self.topics[t as usize].partitions[p as usize]
                    .open
                    .is_some()
                {
                    self.close_open_batch(t, p);
                }
            }
        }
    }

    /// Stops accepting records, flushes, and once every record has its report emits
    /// [`Event::Closed`] and disconnects. Records keep their delivery timeout, so this ends.
    pub fn close(&mut self, now: Instant) {
        self.touch(now);
        self.closing = true;
        self.flush(now);
        self.check_closed();
    }

    pub(crate) fn check_closed(&mut self) {
        if self.closing && !self.closed && self.buffered_records == 0 {
            if self.fatal.is_none() && !self.close_barrier_sent && self.config.acks == Acks::None {
                // acks=0 requests get no answer, and a broker may drop requests it has read but
                // not yet handled when the connection closes. Answers come in order, so one
                // answered request per connection proves every earlier one was handled.
                self.close_barrier_sent = true;
                for slot in 0..self.brokers.len() {
                    let ready = self.brokers[slot]
                        .conn
                        .as_ref()
                        .filter(|c| c.state == ConnState::Ready);
                    if let Some(conn) = ready.map(|c| c.id) {
                        self.send_api_versions(conn, 0);
                    }
                }
            }
            let waiting = self
                .brokers
                .iter()
                .filter_map(|b| b.conn.as_ref())
                .any(|c| !c.inflight.is_empty());
            if waiting && self.fatal.is_none() {
                return; // bounded by the request timeout
            }
            self.closed = true;
            for slot in 0..self.brokers.len() {
                if let Some(c) = self.brokers[slot].conn.take() {
                    self.outputs.push_back(Output::Disconnect { conn: c.id });
                }
            }
            self.outputs.push_back(Output::Event(Event::Closed));
        }
    }

    // -----------------------------------------------------------------------------------------
    // Reports out
    // -----------------------------------------------------------------------------------------

    /// Reports one record that never reached a batch as failed, handing back its parts, and
    /// releases its buffer space.
    pub(crate) fn fail_unrouted(
        &mut self,
        topic: u32,
        partition: i32,
        p: Unrouted<T>,
        error: ProduceError,
    ) {
        self.release(p.size);
        let record = Record {
            topic: self.topics[topic as usize].name.clone(),
            partition: p.explicit_partition.then_some(partition),
            key: p.key,
            value: p.value,
            headers: p.headers,
            timestamp: p.timestamp,
        };
        self.report_failure(p.opaque, error, record);
    }

    /// Queues the failure report of one record.
    fn report_failure(&mut self, opaque: T, error: ProduceError, record: Record) {
        self.outputs.push_back(Output::Delivery(Delivery {
            opaque,
            result: Err(Box::new(DeliveryFailure { error, record })),
        }));
    }

    /// Reports the records of a batch as failed, each with its record decoded back out of the
    /// batch (`decoded`, in the same order as `records`), and releases the batch's `charged`
    /// buffer space. Decoding a batch this producer wrote does not fail; if it ever did, each
    /// record is still reported (its opaque value comes back) with the record's topic and
    /// partition only, so nothing is lost silently.
    pub(crate) fn fail_records(
        &mut self,
        topic: u32,
        partition: i32,
        records: Vec<Pending<T>>,
        decoded: Result<Vec<DecodedRecord>, String>,
        charged: usize,
        error: ProduceError,
    ) {
        // Decoded records pair with the pending entries one to one, or not at all.
        let decoded = decoded.and_then(|d| match d.len() == records.len() {
            true => Ok(d),
            false => Err(format!("{} records decoded for {}", d.len(), records.len())),
        });
        debug_assert!(
            decoded.is_ok(),
            "records of a batch did not decode: {decoded:?}"
        );
        self.buffered_bytes -= charged;
        self.buffered_records -= records.len();
        let mut decoded = decoded.unwrap_or_default().into_iter();
        let name = self.topics[topic as usize].name.clone();
        for p in records {
            let d = decoded.next();
            let (key, value, headers, timestamp) = match d {
                Some(d) => (d.key, d.value, d.headers, d.timestamp),
                None => (None, None, Vec::new(), p.timestamp),
            };
            let record = Record {
                topic: name.clone(),
                partition: p.explicit_partition.then_some(partition),
                key,
                value,
                headers,
                timestamp: (timestamp != -1).then_some(timestamp),
            };
            self.report_failure(p.opaque, error.clone(), record);
        }
    }

    fn release(&mut self, size: usize) {
        self.buffered_bytes -= size;
        self.buffered_records -= 1;
    }

    /// Emits the reports of the finished batches at the front of a partition, in order.
    pub(crate) fn emit_done(&mut self, topic: u32, p: u32) {
        while let Some(batch) = self.topics[topic as usize].partitions[p as usize].pop_done() {
            let BatchState::Done(result) = batch.state else {
                continue;
            };
            match result {
                Ok((base, append_time)) => {
                    self.buffers
                        .give(batch.sealed.into_buffer(), self.config.batch_size);
                    self.buffered_bytes -= batch.charged;
                    self.buffered_records -= batch.records.len();
                    if self.config.report_successes {
                        let name = self.topics[topic as usize].name.clone();
                        let base = if base >= 0 { base } else { -1 };
                        let run = SuccessRun::new(batch.records, name, p as i32, base, append_time);
                        self.outputs.push_successes(run);
                    }
                }
                Err(e) => {
                    let decoded = batch.sealed.into_records().map_err(|e| e.to_string());
                    self.fail_records(topic, p as i32, batch.records, decoded, batch.charged, e);
                }
            }
        }
        self.check_closed();
    }

    /// Fails every record held and refuses new ones.
    pub(crate) fn go_fatal(&mut self, error: ProduceError) {
        if self.fatal.is_some() {
            return;
        }
        self.fatal = Some(error.clone());
        self.outputs
            .push_back(Output::Event(Event::Fatal(error.clone())));
        for t in 0..self.topics.len() as u32 {
            let held = std::mem::take(&mut self.topics[t as usize].holding);
            for h in held {
                self.fail_unrouted(t, h.partition.unwrap_or(-1), h.pending, error.clone());
            }
            for p in 0..self.topics[t as usize].partitions.len() as u32 {
                let pq = &mut self.topics[t as usize].partitions[p as usize];
                let batches: Vec<_> = pq.batches.drain(..).collect();
                let open = pq.open.take();
                pq.sent = 0;
                pq.inflight = 0;
                pq.inflight_conn = None;
                for b in batches {
                    let decoded = b.sealed.into_records().map_err(|e| e.to_string());
                    self.fail_records(t, p as i32, b.records, decoded, b.charged, error.clone());
                }
                if let Some(o) = open {
                    let decoded = o.builder.into_records().map_err(|e| e.to_string());
                    self.fail_records(t, p as i32, o.records, decoded, o.charged, error.clone());
                }
            }
        }
        self.closing = true;
        self.check_closed();
    }

    // -----------------------------------------------------------------------------------------
    // Network events in
    // -----------------------------------------------------------------------------------------

    fn conn_mut(&mut self, conn: ConnId) -> Option<&mut Connection> {
        self.brokers
            .get_mut(conn.slot as usize)?
            .conn
            .as_mut()
            .filter(|c| c.id == conn)
    }

    /// The driver's connection attempt for `conn` succeeded. The producer starts with
    /// ApiVersions on it.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId) {
        self.touch(now);
        let Some(c) = self.conn_mut(conn) else { return };
        if c.state != ConnState::Connecting {
            return;
        }
        c.state = ConnState::Negotiating;
        self.send_api_versions(conn, 3);
    }

    pub(crate) fn send_api_versions(&mut self, conn: ConnId, version: i16) {
        let body = ApiVersionsRequest {
            client_software_name: "producer-core",
            client_software_version: env!("CARGO_PKG_VERSION"),
        };
        self.send_control_request(
            conn,
            ApiKey::ApiVersions,
            version,
            RequestKind::ApiVersions,
            |b| body.encode(version, b),
        );
    }

    pub(crate) fn arm_request_timer(&mut self, slot: u32) {
        let Some(c) = self.brokers[slot as usize].conn.as_ref() else {
            return;
        };
        if let Some(front) = c.inflight.front() {
            self.timers.arm(
                front.sent_at + self.config.request_timeout,
                TimerKind::Request { slot },
            );
        }
    }

    /// The driver could not connect `conn` (refused, unreachable, name not resolved).
    pub fn handle_connect_failed(&mut self, now: Instant, conn: ConnId) {
        self.touch(now);
        if self.conn_mut(conn).is_none() {
            return;
        }
        self.connection_lost(conn, false);
    }

    /// The connection `conn` was closed by the peer or failed. Batches in flight on it are
    /// retried as possibly written.
    pub fn handle_disconnected(&mut self, now: Instant, conn: ConnId) {
        self.touch(now);
        if self.conn_mut(conn).is_none() {
            return;
        }
        self.connection_lost(conn, false);
    }

    /// Bytes read from `conn`, in any chunking. Complete responses are processed at once.
    pub fn handle_read(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        self.touch(now);
        let Some(c) = self.conn_mut(conn) else { return };
        c.decoder.push(bytes);
        loop {
            let Some(c) = self.conn_mut(conn) else { return };
            match c.decoder.next_frame() {
                Ok(Some(frame)) => {
                    if !self.handle_frame(conn, &frame) {
                        return;
                    }
                }
                Ok(None) => return,
                Err(_) => {
                    self.stats.malformed_responses += 1;
                    self.connection_lost(conn, true);
                    return;
                }
            }
        }
    }

    /// Processes every deadline due at `now`. Spurious calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.touch(now);
        while let Some(kind) = self.timers.pop_due(now) {
            self.on_timer(kind);
        }
    }

    /// The next instant at which [`Producer::handle_timeout`] should be called, if any. Cheap:
    /// the earliest entry of a heap.
    #[must_use = "the driver must wake the producer at this instant"]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// The next thing to do or report. Drain it until `None` after every input.
    #[must_use = "every output must be carried out (or a report handed on)"]
    pub fn poll_output(&mut self) -> Option<Output<T>> {
        if let Some(o) = self.outputs.pop_front() {
            return Some(o);
        }
        if self.work_pending {
            self.work_pending = false;
            self.pump();
        }
        self.outputs.pop_front()
    }

    // -----------------------------------------------------------------------------------------
    // Timers
    // -----------------------------------------------------------------------------------------

    fn on_timer(&mut self, kind: TimerKind) {
        let now = self.now;
        match kind {
            TimerKind::Linger {
                topic,
                partition,
                batch,
            } => {
                let open = self.topics[topic as usize].partitions[partition as usize]
                    .open
                    .as_ref();
                if open.is_some_and(|o| o.id == batch) {
                    self.mark_partition_dirty(topic, partition);
                }
            }
            TimerKind::Backoff { topic, partition } => {
                let pq = &mut self.topics[topic as usize].partitions[partition as usize];
                if pq.backoff_until.is_some_and(|t| t <= now) {
                    pq.backoff_until = None;
                    self.mark_partition_dirty(topic, partition);
                }
            }
            TimerKind::Delivery { topic, partition } => {
                let pq = &mut self.topics[topic as usize].partitions[partition as usize];
                if pq.delivery_timer.is_some_and(|t| t <= now) {
                    pq.delivery_timer = None;
                    self.expire_partition(topic, partition);
                }
            }
            TimerKind::Request { slot } => self.check_request_timeout(slot),
            TimerKind::Broker { slot } => self.mark_broker_dirty(slot),
            TimerKind::Metadata => self.work_pending = true,
            TimerKind::Holding { topic } => self.expire_holding(topic),
            TimerKind::ProducerId => self.work_pending = true,
        }
    }

    fn check_request_timeout(&mut self, slot: u32) {
        let now = self.now;
        let timeout = self.config.request_timeout;
        let Some(c) = self.brokers[slot as usize].conn.as_ref() else {
            return;
        };
        if c.state == ConnState::Connecting {
            // The connection attempt itself is bounded by the request timeout too.
            if c.opened_at + timeout <= now {
                let id = c.id;
                self.connection_lost(id, true);
            } else {
                self.timers
                    .arm(c.opened_at + timeout, TimerKind::Request { slot });
            }
            return;
        }
        let Some(front) = c.inflight.front() else {
            return;
        };
        if front.sent_at + timeout <= now {
            let id = c.id;
            self.connection_lost(id, true);
        } else {
            self.timers
                .arm(front.sent_at + timeout, TimerKind::Request { slot });
        }
    }

    fn expire_holding(&mut self, topic: u32) {
        let now = self.now;
        let max_block = self.holding_limit();
        // With metadata from the cluster the topic is known not to exist; without any, the
        // cluster was never reached and the records simply ran out of time.
        let error = if self.metadata.last_refresh.is_some() {
            ProduceError::UnknownTopic
        } else {
            ProduceError::DeliveryTimeout {
                possibly_persisted: false,
            }
        };
        let t = &mut self.topics[topic as usize];
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

    /// Fails the batches of a partition whose delivery timeout passed, in order; a batch in
    /// flight waits for its response.
    fn expire_partition(&mut self, topic: u32, p: u32) {
        let now = self.now;
        let timeout = self.config.delivery_timeout;
        let mut next_deadline = None;
        {
            let pq = &mut self.topics[topic as usize].partitions[p as usize];
            for i in 0..pq.batches.len() {
                let b = &mut pq.batches[i];
                if b.created + timeout > now {
                    next_deadline = Some(b.created + timeout);
                    break;
                }
                match b.state {
                    BatchState::Ready => {
                        let was_sent = i < pq.sent;
                        let possibly_persisted = b.possibly_persisted;
                        b.state = BatchState::Done(Err(ProduceError::DeliveryTimeout {
                            possibly_persisted,
                        }));
                        if was_sent {
                            // A hole (or a possible duplicate) in the sequence: restart it.
                            let id = b.id;
                            pq.request_reset(Some(id));
                        } else {
                            pq.sent = i + 1;
                        }
                    }
                    BatchState::InFlight { .. } | BatchState::Done(_) => {}
                }
            }
            if next_deadline.is_none() {
                if let Some(open) = &pq.open {
                    if open.created + timeout > now {
                        next_deadline = Some(open.created + timeout);
                    }
                }
            }
        }
        let open_expired = self.topics[topic as usize].partitions[p as usize]
            .open
            .as_ref()
            .is_some_and(|o| o.created + timeout <= now);
        if open_expired {
            let open = self.topics[topic as usize].partitions[p as usize]
                .open
                .take();
            if let Some(open) = open {
                let decoded = open.builder.into_records().map_err(|e| e.to_string());
                let error = ProduceError::DeliveryTimeout {
                    possibly_persisted: false,
                };
                self.fail_records(topic, p as i32, open.records, decoded, open.charged, error);
            }
        }
        if let Some(at) = next_deadline {
            self.arm_delivery_timer(topic, p, at);
        }
        self.emit_done(topic, p);
        self.mark_partition_dirty(topic, p);
    }

    /// Exponential backoff with ±20% jitter (KIP-580): `retry_backoff * 2^attempts`, capped.
    pub(crate) fn retry_backoff(&mut self, attempts: u32) -> Duration {
        backoff(
            &mut self.rng,
            self.config.retry_backoff,
            self.config.retry_backoff_max,
            attempts,
        )
    }

    /// Asks for a metadata refresh (rate-limited, at most one in flight).
    pub(crate) fn request_metadata(&mut self) {
        self.metadata.wanted = true;
        self.work_pending = true;
    }
}

/// `base * 2^attempts` with a random factor in [0.8, 1.2), at most `max`.
pub(crate) fn backoff(rng: &mut Rng, base: Duration, max: Duration, attempts: u32) -> Duration {
    let exp = base.as_secs_f64() * 2f64.powi(attempts.min(30) as i32) * rng.factor(0.8, 1.2);
    Duration::from_secs_f64(exp.min(max.as_secs_f64()))
}
