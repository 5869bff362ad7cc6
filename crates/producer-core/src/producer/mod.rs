//! The public state machine: records and network events in, bytes, connections and delivery
//! reports out.
//!
//! This file holds the [`Producer`] struct and its public methods only; each method hands its
//! work to the module of one concern:
//!
//! | module | its job |
//! |---|---|
//! | `intake` | `send`: size and buffer checks, the holding area for unknown topics, routing, appending to the open batch, closing batches (`flush`) |
//! | `partitioning` | the sticky partition of records without a key: when it moves on, the weighted choice of the next one, leaders' availability; the application's partitioner called |
//! | `partitions` | a topic's partitions for the application (`partitions`, `request_partitions` and their events), setting a partitioner |
//! | `produce` | choosing the sendable batches of a broker, building its Produce request, handling the answer: success, retry, backoff, split, failure, delivery timeout |
//! | `cluster` | the Metadata request and answer: brokers, leaders, topic errors, leader hints, the refresh policy |
//! | `identity` | the producer id: InitProducerId request and answer, per-partition epoch bumps and sequence restarts |
//! | `auth` | SASL: SaslHandshake and SaslAuthenticate, OAUTHBEARER tokens, re-authentication, authentication failures |
//! | `connections` | opening connections, ApiVersions, reading frames and dispatching answers, request timeouts, lost connections, reconnect backoff |
//! | `lifecycle` | `close`, the end of a close, and fatal errors |
//! | `purge` | `purge` (records removed before they are acknowledged), the deadlines of `flush_within` and `close_within` |
//! | `reports` | delivery reports: successes of a finished batch, failures with their records handed back |
//! | `telemetry` | KIP-714 client telemetry: GetTelemetrySubscriptions and PushTelemetry, the subscription, pushes of the metrics as OTLP, the terminating push on close |
//! | `transaction` | the transactional producer: init, begin, offsets, commit and abort, the coordinator requests, the reports held until a transaction ends |

mod active;
mod auth;
#[cfg(test)]
mod buffer_tests;
mod cluster;
mod connections;
mod growth;
mod identity;
mod intake;
mod lifecycle;
mod partitioning;
mod partitions;
#[cfg(test)]
mod partitions_tests;
mod produce;
mod purge;
#[cfg(test)]
mod purge_tests;
mod reports;
pub(crate) mod telemetry;
pub(crate) mod transaction;
mod transactions;

use std::time::{Duration, Instant};

use crate::brokers::Brokers;
use crate::buffer::{BufferPool, BufferUse};
use crate::config::Config;
use crate::metrics::{
    BrokerMetrics, ConnectionState, Metrics, MetricsSnapshot, SendWaitCause, SettingsInUse,
};
use crate::outputs::OutputQueue;
use crate::partitioner::Rng;
use crate::queue_delay::QueueDelay;
use crate::timer::{TimerKind, Timers};
use crate::topics::Topics;
use crate::types::{ConnId, Output, ProduceError, Record, SendError};

use auth::Auth;
use cluster::MetadataPolicy;
use identity::PidState;
use lifecycle::Lifecycle;
use partitioning::Partitioning;
pub use partitions::TopicPartitions;
pub use purge::{InFlight, PurgeScope};
pub use telemetry::{TelemetryState, TelemetryStatus};
use transaction::TransactionBook;
pub use transactions::Transactions;

use crate::stats::Stats;

/// The sans-IO Kafka producer. `T` is a value of the caller's, handed back in each record's
/// delivery report (a channel sender, a callback id, `()`).
///
/// # The run loop
/// Feed inputs with the `handle_*` methods and [`Producer::send`]; after any of them, drain
/// [`Producer::poll_output`] until it returns `None`, doing what each output says; then sleep
/// until [`Producer::poll_timeout`] or the next I/O event, and call [`Producer::handle_timeout`]
/// when the deadline passes. Every mutating call takes the current `Instant`; the producer never
/// reads a clock, does no I/O and holds no lock.
///
/// # Deadlines the producer owns
/// Every deadline is the core's, armed in its one timer: `linger`, retry and reconnect backoff,
/// `request_timeout` (for each request in flight, and for a connection attempt: a connection
/// still not reported connected after `request_timeout` is given up with
/// [`Output::Disconnect`]), `delivery_timeout`, `max_block` for unknown topics, metadata
/// refreshes, and `token_timeout` for an OAUTHBEARER token asked of the application. A driver
/// needs no timer of its own.
#[derive(Debug)]
pub struct Producer<T> {
    config: Config,
    /// The latest `now` any input carried.
    now: Instant,
    rng: Rng,
    /// The adaptive partitioner's table and leaders' availability.
    partitioning: Partitioning,
    /// The application's partitioner, if it set one (`None`: the built-in rule, inline).
    partitioner: Option<crate::partitioners::Custom>,
    timers: Timers,
    outputs: OutputQueue<T>,
    topics: Topics<T>,
    brokers: Brokers,
    metadata: MetadataPolicy,
    pid: PidState,
    /// Consecutive InitProducerId answers with a retriable error (its backoff exponent).
    pid_failures: u32,
    buffered: BufferUse,
    /// Buffers of finished batches, reused by new ones.
    buffers: BufferPool,
    lifecycle: Lifecycle,
    auth: Auth,
    stats: Stats,
    /// Histograms and errors by code.
    metrics: Metrics,
    /// Inputs made work due (connections, requests); `poll_output` does it.
    work_pending: bool,
    /// The transactional state, with a `transactional.id`.
    txn: Option<TransactionBook<T>>,
    /// The deadlines of `flush_within` and `close_within`.
    deadlines: purge::Deadlines,
    /// Client telemetry (KIP-714).
    telemetry: telemetry::TelemetryBook,
    /// The queue-delay limit (`queue.delay.target.ms`): unacknowledged bytes `send` may reach.
    queue_delay: QueueDelay,
}

impl<T> Producer<T> {
    /// A producer with a validated configuration. It starts connecting at the first
    /// `poll_output`. A configuration whose public fields were changed after
    /// [`crate::ConfigBuilder::build`] is brought within the bounds `build` enforces on
    /// durations and sizes (capped, not refused).
    pub fn new(config: Config, now: Instant) -> Self {
        let config = config.within_bounds();
        Producer {
            rng: Rng::new(config.seed),
            partitioning: Partitioning::default(),
            partitioner: None,
            now,
            timers: Timers::default(),
            outputs: OutputQueue::new(),
            topics: Topics::default(),
            brokers: Brokers::new(&config.bootstrap),
            metadata: MetadataPolicy::new(now),
            pid: PidState::initial(&config),
            pid_failures: 0,
            buffered: BufferUse::default(),
            buffers: BufferPool::new(&config),
            lifecycle: Lifecycle::default(),
            auth: Auth::new(&config),
            stats: Stats::default(),
            metrics: Metrics::new(
                config.metrics_sample_window,
                config.metrics_num_samples,
                now,
            ),
            // The first `poll_output` connects and asks for metadata.
            work_pending: true,
            txn: TransactionBook::new(&config),
            deadlines: purge::Deadlines::default(),
            telemetry: telemetry::TelemetryBook::new(&config, now),
            queue_delay: QueueDelay::new(&config),
            config,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The counters (cheap: a reference). [`Producer::metrics`] has them too, with the rest.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// A snapshot of every metric: the counters, errors by code, buffer use, each broker's
    /// connection state and requests in flight, the producer id, and the latency and batch-size
    /// histograms (names and meanings in [`crate::metrics`]). Call it whenever the numbers are
    /// wanted (a scrape, a log line); it reads the producer's state and changes nothing. It
    /// copies the histograms and allocates a vector of brokers, so it is meant for a scrape
    /// interval, not for every record.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics_at(self.now)
    }

    /// [`Producer::metrics`] with the windowed figures and ages measured at `now` (a driver's
    /// clock at the scrape) rather than at the latest input's time; an instant before that
    /// counts as it.
    pub fn metrics_at(&self, now: Instant) -> MetricsSnapshot {
        let now = now.max(self.now);
        let mut s = MetricsSnapshot {
            counters: self.stats.clone(),
            buffered_records: self.buffered.records(),
            buffered_bytes: self.buffered.bytes(),
            producer_id: self.pid.assigned(),
            buffer_total_bytes: self.config.buffer_memory,
            settings: SettingsInUse {
                linger: self.config.linger,
                batch_size: self.config.batch_size,
                max_in_flight: self.config.max_in_flight,
                buffer_max_records: self.config.buffer_max_records,
            },
            queue_delay_limit_bytes: self.queue_delay_limit(),
            unacknowledged_bytes: self.buffered.unacknowledged_bytes(),
            ..MetricsSnapshot::default()
        };
        self.metrics
            .snapshot_into(&mut s, now, &self.stats, self.queue_delay.held_since());
        s.topics = self
            .topics
            .numbers()
            .map(|t| self.metrics.topic_metrics(t, self.topics.name(t)))
            .collect();
        s.brokers = self
            .brokers
            .live()
            .map(|(slot, b)| {
                let (state, in_flight_requests, in_flight_produce) = match &b.conn {
                    Some(c) => (c.state.reported(), c.inflight.len(), c.produce_in_flight()),
                    None if b.reconnect_at.is_some_and(|t| t > now) => {
                        (ConnectionState::BackingOff, 0, 0)
                    }
                    None => (ConnectionState::Disconnected, 0, 0),
                };
                let mut m = BrokerMetrics::new(b.node_id, b.host.clone(), b.port, state);
                m.in_flight_requests = in_flight_requests;
                m.in_flight_produce = in_flight_produce;
                m.records_waiting = self.has_active_partition(slot as u32);
                self.metrics.broker_into(slot as u32, &mut m, now);
                m
            })
            .collect();
        s
    }

    /// "Why is it slow?": a verdict per broker over the last sample window, measured at `now`
    /// (see [`crate::diagnosis`]). Call it during or right after the run to explain (a progress
    /// line, the end of a run); it reads the producer's state and changes nothing. It takes a
    /// [`Producer::metrics_at`] snapshot, so it costs what one does.
    pub fn diagnose(&self, now: Instant) -> crate::Diagnosis {
        self.metrics_at(now).diagnose()
    }

    /// Records accepted and not yet reported.
    pub fn buffered_records(&self) -> usize {
        self.buffered.records()
    }

    /// Records accepted and neither acknowledged by their broker nor reported. The same as
    /// [`Producer::buffered_records`], except for a transactional producer, whose acknowledged
    /// records wait for their transaction's end to be reported: watch this reach zero to know
    /// a [`Producer::flush`] inside a transaction completed.
    pub fn unacknowledged_records(&self) -> usize {
        self.buffered.records() - self.txn_held_records()
    }

    /// Bytes of records accepted and not yet reported (as counted against `buffer_memory`).
    pub fn buffered_bytes(&self) -> usize {
        self.buffered.bytes()
    }

    /// The queue-delay limit now (`queue.delay.target.ms`, see
    /// [`crate::Config::queue_delay_target`]): `send` accepts records while the
    /// unacknowledged bytes are below it (so it is passed by one record at most); `None` when
    /// the limit is off. It moves as Produce answers measure the cluster's drain rate.
    pub fn queue_delay_limit(&self) -> Option<usize> {
        Some(self.queue_delay.allowed()).filter(|&a| a != usize::MAX)
    }

    /// Bytes of records accepted and not yet acknowledged (what the queue-delay limit
    /// counts): [`Producer::buffered_bytes`] less the acknowledged records a transactional
    /// producer holds for their transaction's end.
    pub fn unacknowledged_bytes(&self) -> usize {
        self.buffered.unacknowledged_bytes()
    }

    /// For a driver that queues records before handing them to `send` (and bounds its queue
    /// by [`Producer::buffer_charge`]s within `buffer_memory`): how many more bytes of
    /// records the queue-delay limit lets in beside what the producer holds unacknowledged
    /// now: a driver lets records into its queue while the bytes queued are below it, as
    /// `send` accepts them while the unacknowledged bytes are below the limit
    /// ([`usize::MAX`] when it is off). It rises when reports free space and when a Produce answer raises the
    /// limit: read it again after handling outputs.
    pub fn queue_delay_room(&self) -> usize {
        self.room_below(self.queue_delay.allowed())
    }

    /// [`Producer::queue_delay_room`] for the senders a driver lets wait for room (an async
    /// `send`, a blocking `send_timeout`), where the other is for senders refused at once (a
    /// `try_send`): the limit without its burst floor, an eighth of `buffer_memory` that
    /// `send` takes while no sender is held back, so that a caller that cannot wait is not
    /// refused after a quiet spell. A sender that can wait loses nothing by waiting, and
    /// records it queues in a burst wait behind the whole burst: from a producer's start,
    /// before any drain is measured, that was the eighth, 200 ms behind one Kafka node that
    /// drains 20 MB/s. At most [`Producer::queue_delay_room`]; read it with it.
    pub fn queue_delay_room_waiting(&self) -> usize {
        self.room_below(self.queue_delay.allowed_waiting())
    }

    /// The bytes the queue-delay limit `allowed` lets in beside those unacknowledged.
    fn room_below(&self, allowed: usize) -> usize {
        match allowed {
            usize::MAX => usize::MAX,
            allowed => allowed.saturating_sub(self.buffered.unacknowledged_bytes()),
        }
    }

    /// For a driver that holds senders back in its own queue in front of the producer (by
    /// [`Producer::buffer_charge`]s against `buffer_memory`, or by
    /// [`Producer::queue_delay_room`]): a sender held back there since `now - waited` was let
    /// through at `now`. Call it when the driver next holds the producer (once per wait, not
    /// per record); the wait counts as one `send` refused it for `waited`: in
    /// [`Stats::buffer_wait_ns`] (and `bufferpool-wait-ratio`) for
    /// [`SendWaitCause::BufferMemory`], in [`Stats::queue_delay_wait_ns`] for
    /// [`SendWaitCause::QueueDelay`], and so in the [`crate::diagnosis`]. A `now` before the
    /// latest input's time counts as it.
    pub fn note_send_wait(&mut self, now: Instant, waited: Duration, cause: SendWaitCause) {
        let now = now.max(self.now);
        if cause == SendWaitCause::QueueDelay {
            self.queue_delay.held_in_driver();
        }
        self.metrics
            .send_wait_ended(now, waited, cause, &mut self.stats);
    }

    /// For a driver that holds senders back in its own queue (see
    /// [`Producer::note_send_wait`]): whether a wait runs there now, since when and why
    /// (`None`: nobody waits). Call it whenever the driver learns it (each time it takes its
    /// queue); snapshots count it as a wait running ([`MetricsSnapshot::buffer_wait_running`],
    /// [`MetricsSnapshot::queue_delay_wait_running`]) until told otherwise. While it says a
    /// wait for the queue-delay limit runs, the limit counts every drain sample as one during
    /// which senders were held back (it follows the cluster's drain, not its burst floor),
    /// until it is told that none runs, or a wait for `buffer.memory` (a wait's cause is its
    /// first refusal's: one that began for the byte budget or the command capacity and goes on
    /// for the queue-delay room counts as a wait for `buffer.memory` here).
    pub fn note_send_wait_running(&mut self, since: Option<(Instant, SendWaitCause)>) {
        self.queue_delay
            .driver_hold(matches!(since, Some((_, SendWaitCause::QueueDelay))));
        self.metrics.send_wait_running(since);
    }

    /// Whether `close` has completed (every record reported, connections closed).
    pub fn is_closed(&self) -> bool {
        self.lifecycle.closed
    }

    /// The producer id and epoch, once assigned (idempotent producers).
    pub fn producer_id(&self) -> Option<(i64, i16)> {
        self.pid.assigned()
    }

    /// Every input starts here: time moves forward (never back), and work may be due.
    fn touch(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
        self.work_pending = true;
    }

    /// The bytes `record` counts against `buffer_memory` once [`Producer::send`] takes it (its
    /// encoded size and the entry that tracks it; a record waiting for its topic's metadata
    /// costs a few dozen bytes more): for a driver that queues records before handing them to
    /// `send` and bounds its queue by the same budget, so that the two agree. Cheap enough for
    /// every record.
    #[inline(always)]
    pub fn buffer_charge(record: &Record) -> usize {
        intake::buffer_charge::<T>(record)
    }

    /// Accepts a record for sending. Never blocks. On success the record will get exactly one
    /// delivery report carrying `opaque`. On error the record and `opaque` come back: `Full`
    /// means try again once reports have drained.
    // The error is large on purpose: it hands the record back by value, without an allocation.
    #[allow(clippy::result_large_err)]
    pub fn send(&mut self, now: Instant, record: Record, opaque: T) -> Result<(), SendError<T>> {
        self.touch(now);
        self.accept(record, opaque)
    }

    /// The transactional API, when the producer has a `transactional.id`
    /// ([`crate::ConfigBuilder::transactional_id`]); `None` otherwise, so a producer without one
    /// cannot call it. Borrowed for each call (or a few in a row): see [`Transactions`] for
    /// when to call each operation and what changes after it.
    pub fn transactions(&mut self) -> Option<Transactions<'_, T>> {
        self.txn.as_ref()?;
        Some(Transactions { producer: self })
    }

    /// Where the transactional producer stands ([`crate::TransactionState::Uninitialized`]
    /// for a producer without a `transactional.id`): see [`Transactions`] for what moves it.
    pub fn transaction_state(&self) -> crate::TransactionState {
        self.current_transaction_state()
    }

    /// Closes every open batch now, ignoring `linger`, so everything buffered is sent as soon
    /// as the ordering rules allow. Records sent afterwards linger as usual. Watch
    /// [`Producer::buffered_records`] reach zero to know the flush completed.
    pub fn flush(&mut self, now: Instant) {
        self.touch(now);
        self.close_all_open_batches();
    }

    /// [`Producer::flush`], with an end the producer reports: [`crate::Event::FlushCompleted`]
    /// once [`Producer::unacknowledged_records`] reaches zero (after the reports that brought
    /// it there; at the next [`Producer::poll_output`] when nothing is unacknowledged now), or
    /// [`crate::Event::FlushTimedOut`] with the count still unacknowledged when `deadline`
    /// passes first (the deadline is the core's: [`Producer::poll_timeout`] wakes the driver
    /// for it). One of the two, once. Nothing is cancelled at the deadline: the records go on.
    ///
    /// Call it when the application must know within a bound whether everything it sent is
    /// acknowledged (before a checkpoint, say). A second call while one is pending replaces
    /// the pending one's deadline (one event answers both). Records sent after the call count
    /// too: a steady stream may keep the flush from completing before its deadline.
    pub fn flush_within(&mut self, now: Instant, deadline: Instant) {
        self.touch(now);
        self.begin_flush_within(deadline);
    }

    /// Removes records before they are acknowledged, each reported with
    /// [`ProduceError::Purged`] and handed back, and returns how many it removed (their reports
    /// come out of [`Producer::poll_output`]). Call it to drop what is buffered (on shutdown, on
    /// failover, when the records' content went stale); the producer goes on, and records sent
    /// afterwards are produced as usual.
    ///
    /// `scope` says which records: every record, one topic's, or one partition's
    /// ([`PurgeScope`]). Records that were never in a sent request (the open batch, closed
    /// batches not sent yet, records waiting for their topic's metadata) are removed with
    /// `possibly_persisted` false: they were certainly not written. Records whose batch was
    /// sent (in flight, or waiting to be sent again) are left to finish with
    /// [`InFlight::Wait`]; with [`InFlight::Abandon`] they are removed too, with
    /// `possibly_persisted` true, and the answers to their requests are ignored; an idempotent
    /// producer then bumps the epoch of each such partition and restarts its sequence at 0
    /// before sending there again, so the broker accepts what follows (no gap, no duplicate
    /// within what it acknowledges).
    ///
    /// A partition's reports keep their send order: with [`InFlight::Wait`], the purged
    /// records of a partition with batches in flight are reported after those batches' own
    /// reports.
    ///
    /// In a transaction, a purge that removes any record aborts the open transaction, as
    /// [`crate::Transactions::abort`] would: the records of the transaction not removed and
    /// not in flight fail with [`ProduceError::TransactionAborted`], so do its acknowledged
    /// records once the abort completes, a commit or `send_offsets` under way fails with
    /// [`crate::TransactionError::Purged`], and so does every `commit` and `send_offsets`
    /// call until the next `begin`; an `abort` call completes when the purge's abort does (at
    /// once if it already has), after which `begin` starts the next transaction.
    ///
    /// Does nothing (returns 0) once the producer is closed.
    pub fn purge(&mut self, now: Instant, scope: PurgeScope, in_flight: InFlight) -> usize {
        self.touch(now);
        if self.lifecycle.closed {
            return 0;
        }
        self.purge_records(&scope, in_flight)
    }

    /// [`Producer::close`], bounded by `deadline` (the core's: [`Producer::poll_timeout`]
    /// wakes the driver for it). If the close has not completed by then, everything still
    /// held ends at the deadline: records never sent fail with [`ProduceError::Purged`]
    /// (`possibly_persisted` false), records in a sent request or waiting to be sent again with
    /// [`ProduceError::CloseTimedOut`] (`possibly_persisted` true); a transactional producer
    /// stops waiting for its coordinator at once, and its acknowledged records fail as a
    /// close that stopped waiting says (see [`Producer::close`]:
    /// [`ProduceError::TransactionInDoubt`] when the commit was asked for and not answered,
    /// else [`ProduceError::TransactionAborted`]). Then [`crate::Event::CloseDeadlineReached`]
    /// (with the two counts), every connection is closed and [`crate::Event::Closed`] emitted,
    /// without waiting for any answer.
    ///
    /// Call it to shut down within a bound (Java's `close(Duration)`). Called again, or after
    /// [`Producer::close`], the earlier deadline counts.
    pub fn close_within(&mut self, now: Instant, deadline: Instant) {
        self.touch(now);
        self.begin_close_within(deadline);
    }

    /// For a driver whose own code, or this producer's, panicked while handling this producer:
    /// it cannot be trusted to go on. Fails every record it holds with
    /// [`crate::ProduceError::Panicked`] (after [`crate::Event::Fatal`]; a record sent and not
    /// answered is marked `possibly_persisted`), fails the transactional operation under way,
    /// and closes without waiting for answers: drain [`Producer::poll_output`] for the reports,
    /// the `Disconnect`s and [`crate::Event::Closed`]; [`Producer::is_closed`] is then true and
    /// `send` refuses records as after a fatal error. Does nothing if the producer already
    /// failed fatally.
    pub fn fail_after_panic(&mut self, message: String) {
        self.go_fatal_after_panic(message);
    }

    /// Stops accepting records, flushes, and once every record has its report emits
    /// [`crate::Event::Closed`] and disconnects. Records keep their delivery timeout, so this
    /// ends.
    ///
    /// A transactional producer aborts the open transaction first, and waits for a commit or
    /// an abort under way, but not for ever: once `max_block` has passed since this call, it
    /// stops waiting for the coordinator as soon as every record of the transaction has been
    /// answered and no coordinator request is in flight. Its held records then fail with
    /// [`ProduceError::TransactionInDoubt`] when the commit had been asked for, else with
    /// [`ProduceError::TransactionAborted`]. So [`crate::Event::Closed`] comes at the latest
    /// when `max_block` has passed since the close and `delivery_timeout` since the last
    /// record was sent, plus `request_timeout` for a request in flight then.
    pub fn close(&mut self, now: Instant) {
        self.touch(now);
        self.begin_close();
    }

    /// The driver's connection attempt for `conn` succeeded. The producer starts with
    /// ApiVersions on it.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId) {
        self.touch(now);
        self.connection_established(conn);
    }

    /// The driver could not connect `conn` (refused, unreachable, name not resolved, every
    /// address of the name tried), for `reason`: the OS error of the last attempt, as the
    /// driver got it (`std::io::Error::other(..)` or `io::Error::new(kind, ..)` for a failure
    /// of its own, such as a name that resolved to no address). Call it instead of
    /// [`Producer::handle_connected`]; the driver has nothing to close.
    ///
    /// After it, the broker backs off before the next attempt; `reason` becomes the broker's
    /// last connection error, named by [`ProduceError::DeliveryTimeout`] for its records until
    /// a connection to it is ready again, and [`crate::Event::AllBrokersDown`] is emitted when
    /// no other connection is up or being set up.
    pub fn handle_connect_failed(&mut self, now: Instant, conn: ConnId, reason: std::io::Error) {
        self.touch(now);
        if self.brokers.conn(conn).is_some() {
            self.connection_lost(conn, false, reason.kind(), reason.to_string());
        }
    }

    /// The driver's TLS handshake on `conn` failed, for `reason` (a certificate that does not
    /// verify, a name mismatch, a missing client certificate, a peer that does not speak TLS).
    /// Handled as an authentication failure: [`crate::Event::AuthenticationFailed`], the
    /// records waiting fail at once with [`crate::ProduceError::Authentication`], and the
    /// reconnect backs off. The driver closes the connection itself; call this instead of
    /// [`Producer::handle_connect_failed`] or [`Producer::handle_disconnected`].
    pub fn handle_tls_failed(&mut self, now: Instant, conn: ConnId, reason: String) {
        self.touch(now);
        if self.brokers.conn(conn).is_some() {
            self.tls_failed(conn, reason);
        }
    }

    /// The established connection `conn` was closed by the peer or failed, for `reason`: the
    /// OS error of the read or write that failed, or `io::ErrorKind::UnexpectedEof` for a peer
    /// that closed it. The driver has closed its socket already (no [`Output::Disconnect`]
    /// follows).
    ///
    /// After it, batches in flight on it are retried as possibly written, requests of the
    /// connection's setup start over on the next connection (after the reconnect backoff), and
    /// `reason` becomes the broker's last connection error as for
    /// [`Producer::handle_connect_failed`].
    pub fn handle_disconnected(&mut self, now: Instant, conn: ConnId, reason: std::io::Error) {
        self.touch(now);
        if self.brokers.conn(conn).is_some() {
            self.connection_lost(conn, false, reason.kind(), reason.to_string());
        }
    }

    /// Bytes read from `conn`, in any chunking. Complete responses are processed at once.
    pub fn handle_read(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        self.touch(now);
        self.read_frames(conn, bytes);
    }

    /// The application's answer to [`Output::TokenRequest`]: an OAUTHBEARER token (valid for
    /// its `lifetime` from `now`), or why there is none. Connections waiting for it go on
    /// authenticating, or fail. Call it for every answer, also one that comes after
    /// `token_timeout` (the connections that waited have failed by then): the token is kept
    /// for the next connections.
    pub fn handle_token(&mut self, now: Instant, token: Result<crate::OAuthToken, String>) {
        self.touch(now);
        self.token_arrived(token);
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
        if self.outputs.is_empty() {
            self.check_flush();
        }
        self.outputs.pop_front()
    }

    /// Does the work that inputs made due: metadata, the producer id, and Produce requests for
    /// the brokers marked as having something to send.
    fn pump(&mut self) {
        if self.lifecycle.closed {
            return;
        }
        self.maybe_send_metadata();
        self.maybe_init_producer_id();
        self.drive_transaction();
        self.drive_telemetry();
        let track = self.tracks_availability();
        for slot in self.brokers.take_dirty() {
            let requests = self.stats.produce_requests;
            self.service_broker(slot);
            if track {
                self.broker_serviced(slot, self.stats.produce_requests > requests);
            }
        }
    }

    /// A deadline fired; each kind belongs to one concern, which checks it still applies.
    fn on_timer(&mut self, kind: TimerKind) {
        match kind {
            TimerKind::Linger {
                topic,
                partition,
                batch,
            } => self.linger_expired(topic, partition, batch),
            TimerKind::Backoff { topic, partition } => self.backoff_expired(topic, partition),
            TimerKind::Delivery { topic, partition } => self.delivery_timer_fired(topic, partition),
            TimerKind::Request { slot } => self.check_request_timeout(slot),
            TimerKind::Broker { slot } => self.mark_broker_dirty(slot),
            TimerKind::Metadata | TimerKind::ProducerId => self.work_pending = true,
            TimerKind::Telemetry => self.telemetry_timer_fired(),
            TimerKind::Transaction => self.txn_timer_fired(),
            TimerKind::Holding { topic } => {
                self.expire_holding(topic);
                self.partitions_ask_expired(topic);
            }
            TimerKind::Reauthenticate { slot } => self.reauthentication_due(slot),
            TimerKind::TokenRequest => self.token_request_expired(),
            TimerKind::FlushDeadline => self.flush_deadline_fired(),
            TimerKind::CloseDeadline => self.close_deadline_fired(),
        }
    }

    /// The producer's mode, the key of the retry table ([`crate::classify::decide`]).
    fn mode(&self) -> crate::classify::Mode {
        crate::classify::Mode::of(self.config.idempotence, self.txn.is_some())
    }

    /// The producer failed for good with `error` earlier, if it did.
    fn fatal_error(&self) -> Option<&ProduceError> {
        self.lifecycle.fatal.as_ref()
    }

    /// Marks the leader of a partition as having something to send (and lists the partition
    /// with it when it holds anything: [`crate::active`]).
    fn mark_partition_dirty(&mut self, topic: u32, p: u32) {
        let leader = self.topics.partition(topic, p).leader();
        if let Some(slot) = self.brokers.slot_of_node(leader) {
            self.list_partition_with(slot, topic, p);
            self.mark_broker_dirty(slot);
        }
    }

    /// Marks a broker as having something to send; `poll_output` services it.
    fn mark_broker_dirty(&mut self, slot: u32) {
        self.brokers.mark_dirty(slot);
        self.work_pending = true;
    }
}
