//! A tokio driver for [`producer_core`]: one task owns the sans-IO state machine, and a
//! cloneable [`ProducerHandle`] sends records to it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use producer_tokio::{Config, Producer, Record};
//!
//! let handle = Producer::start(Config::builder([("localhost", 9092)]).build()?)?;
//! let delivery = handle.send(Record::new("events", "hello").with_key("k")).await?;
//! let metadata = delivery.await?; // partition and offset
//! println!("written at {}-{}", metadata.partition, metadata.offset);
//! handle.close().await;
//! # Ok(()) }
//! ```
//!
//! # How it works
//! * **The actor.** [`Producer::start`] spawns one task that owns
//!   [`producer_core::Producer`]. It reads commands from the handles through a *bounded* queue
//!   (a mutex-guarded deque the actor empties in one go, then handles in batches, reading the
//!   clock once per batch), events from the connection tasks through a bounded channel, and
//!   sleeps until the
//!   core's [`poll_timeout`](producer_core::Producer::poll_timeout). After every input it drains
//!   the core's outputs. The deadline is compared against the clock (not only the sleep future)
//!   before `handle_timeout` is called. The clock is [`tokio::time::Instant`], so tests may pause
//!   time.
//! * **Connections.** Each `Output::Connect` spawns one task. It connects with
//!   [`tokio::net::TcpStream::connect`] (tokio resolves the host name off the event loop) under
//!   a connect timeout (`request_timeout` by default; the core has none for the TCP handshake).
//!   It then reads into a reusable buffer and forwards chunks to the actor, and writes the
//!   frames the actor hands it whole and in order. `Output::Disconnect` lets the task write what is queued, then close. Events
//!   from a connection the core has since dropped are harmless: the core ignores stale ids.
//! * **Backpressure.** When the core answers `Full`, the actor keeps that one record aside and
//!   stops reading the command queue until deliveries free space. The bounded command queue
//!   then fills, and [`ProducerHandle::send`] waits. Nothing in the driver grows without bound:
//!   commands are bounded by the queue's capacity, records by the core's `buffer_memory` /
//!   `buffer_max_records`, and read chunks by the event channel. A connection's write queue
//!   holds what the core has transmitted and the socket has not yet taken: the core bounds it
//!   with `max_in_flight` requests, and the driver stops reading commands while any connection's
//!   backlog exceeds [`ProducerBuilder::write_backlog`] (this is what bounds it with
//!   `acks=none`, where a batch is done as soon as it is handed over).
//! * **Flush.** Records accepted before a flush carry an epoch number; the flush resolves when
//!   no record of its epoch or an earlier one is unreported. Records that were waiting for
//!   their topic's metadata are flushed again when it arrives.
//! * **Reports.** Each record carries a oneshot sender. Its [`DeliveryFuture`] resolves when
//!   the core reports the record. Dropping the future only discards the report: the record is
//!   still delivered. The driver always asks the core for success reports
//!   (`report_successes` is forced on) because every future must resolve.
//! * **Detached records.** [`ProducerHandle::send_detached`] skips the per-record future: the
//!   record carries a caller's `u64` tag, and its [`Report`] goes to the
//!   [`ProducerBuilder::on_delivery`] callback, run on the producer task (as the Java client
//!   and librdkafka report through callbacks). This is the cheaper path for high rates.
//!   [`ProducerHandle::send_batch_detached`] and [`ProducerHandle::try_send_batch_detached`]
//!   queue a whole burst of them under one lock with one wall-clock reading.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// The errors hand the record back by value, as the core's do; boxing would only move it.
#![allow(clippy::result_large_err)]

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes, BytesMut};
use producer_core::{ConnId, Event, Output};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn};

pub use producer_core::{
    Acks, Compression, Config, ConfigBuilder, ConfigError, DeliveryFailure, ErrorCode, Header,
    ProduceError, Record, RecordMetadata, SendErrorReason,
};

/// What a [`DeliveryFuture`] resolves to.
pub type DeliveryResult = Result<RecordMetadata, DeliveryError>;

/// Where one record's report goes.
enum ReplyTo {
    /// To its [`DeliveryFuture`].
    Future(oneshot::Sender<DeliveryResult>),
    /// To the [`ProducerBuilder::on_delivery`] callback, with the caller's tag.
    Detached(u64),
}

/// Commands that handles put in the actor's bounded queue.
enum Cmd {
    Send { record: Record, reply: ReplyTo },
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<()>),
}

/// Events from the connection tasks.
enum Net {
    Connected(ConnId),
    ConnectFailed(ConnId),
    Data(ConnId, Bytes),
    /// The connection's write backlog fell back under the limit.
    Drained(ConnId),
    Closed(ConnId),
}

/// The opaque value each record carries through the core.
struct Reply {
    to: ReplyTo,
    /// The flush epoch the record was accepted in (see [`Actor::settle`]).
    epoch: u64,
}

/// The command queue: handles push, the actor takes everything queued in one go.
#[derive(Default)]
struct Queue {
    cmds: VecDeque<Cmd>,
    /// Commands the actor took and has not handled yet: they count against the capacity.
    held: usize,
    /// Senders waiting for space since the actor last woke them.
    space_waiters: usize,
    /// Every handle is gone.
    handles_gone: bool,
    /// The actor stopped: nothing is taken any more.
    stopped: bool,
}

/// State shared by the handles and the actor.
struct Shared {
    /// `close` was called: new sends are refused at once.
    closing: AtomicBool,
    /// The core refused a record as `Full` and the actor holds it aside: `try_send` answers
    /// `Full` without queueing.
    core_full: AtomicBool,
    queue: Mutex<Queue>,
    /// Most `Send` commands queued or held by the actor.
    capacity: usize,
    /// Wakes the actor: notified when a command lands in an empty queue (the actor looks at
    /// the queue again before sleeping whenever it took something).
    cmd_ready: Notify,
    /// Wakes senders waiting for space.
    space: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a command that does not count against the capacity (flush, close): false when
    /// the actor has stopped.
    fn push_control(&self, cmd: Cmd) -> bool {
        let mut q = self.lock();
        if q.stopped {
            return false;
        }
        let first = q.cmds.is_empty();
        q.cmds.push_back(cmd);
        drop(q);
        if first {
            self.cmd_ready.notify_one();
        }
        true
    }
}

/// What the handles hold: when the last one is dropped, the actor is told.
struct HandleInner {
    shared: Arc<Shared>,
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        self.shared.lock().handles_gone = true;
        self.shared.cmd_ready.notify_one();
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// [`ProducerHandle::send`] refused a record; the record comes back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The producer is closing or closed (or its task has stopped).
    #[error("producer is closed")]
    Closed(Record),
}

impl SendError {
    /// The record that was not sent.
    pub fn into_record(self) -> Record {
        match self {
            SendError::Closed(r) => r,
        }
    }
}

/// [`ProducerHandle::try_send`] refused a record; the record comes back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrySendError {
    /// The command queue or the producer's buffer is full; try again later, or use
    /// [`ProducerHandle::send`] to wait for space.
    #[error("producer buffer is full")]
    Full(Record),
    /// The producer is closing or closed (or its task has stopped).
    #[error("producer is closed")]
    Closed(Record),
}

impl TrySendError {
    /// The record that was not sent.
    pub fn into_record(self) -> Record {
        match self {
            TrySendError::Full(r) | TrySendError::Closed(r) => r,
        }
    }
}

/// [`ProducerHandle::try_send_batch_detached`] or [`ProducerHandle::send_batch_detached`] was
/// called after [`ProducerHandle::close`] (or the producer task has stopped). The records not
/// taken are still in the caller's vector; those taken before are reported as usual.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("producer is closed")]
pub struct BatchClosed;

/// Why a record accepted by the handle was not delivered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// The core failed the record (broker error, delivery timeout, unknown topic, closed, ...).
    /// The failure carries the record.
    #[error("delivery failed: {}", .0.error)]
    Failed(Box<DeliveryFailure>),
    /// The core refused the record when the actor handed it over (too large, invalid
    /// partition, producer closed or failed). The record comes back.
    #[error("record rejected: {reason}")]
    Rejected {
        /// Why.
        reason: SendErrorReason,
        /// The record.
        record: Record,
    },
    /// The producer task stopped without reporting the record. This happens only when the
    /// runtime shut down under it (or a bug panicked it); the record is gone with the task.
    #[error("producer task stopped before reporting the record")]
    Lost,
}

impl DeliveryError {
    /// The record handed back, if any (every variant but [`DeliveryError::Lost`]).
    pub fn into_record(self) -> Option<Record> {
        match self {
            DeliveryError::Failed(f) => Some(f.record),
            DeliveryError::Rejected { record, .. } => Some(record),
            DeliveryError::Lost => None,
        }
    }

    /// The record handed back, by reference.
    pub fn record(&self) -> Option<&Record> {
        match self {
            DeliveryError::Failed(f) => Some(&f.record),
            DeliveryError::Rejected { record, .. } => Some(record),
            DeliveryError::Lost => None,
        }
    }
}

/// [`Producer::start`] could not start the producer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Not called from within a tokio runtime.
    #[error("producer-tokio must be started from within a tokio runtime")]
    NoRuntime,
    /// A channel capacity or buffer size of zero was configured.
    #[error("{0} must be positive")]
    Zero(&'static str),
}

// ---------------------------------------------------------------------------------------------
// The delivery future
// ---------------------------------------------------------------------------------------------

/// Resolves to one record's delivery report. Dropping it is harmless: the record is still
/// delivered and its report discarded.
#[derive(Debug)]
pub struct DeliveryFuture {
    rx: oneshot::Receiver<DeliveryResult>,
}

impl Future for DeliveryFuture {
    type Output = DeliveryResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<DeliveryResult> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(DeliveryError::Lost)))
    }
}

// ---------------------------------------------------------------------------------------------
// Detached reports
// ---------------------------------------------------------------------------------------------

/// The report of a record sent with [`ProducerHandle::send_detached`] (or
/// [`ProducerHandle::try_send_detached`]), handed to the [`ProducerBuilder::on_delivery`]
/// callback.
#[derive(Debug)]
pub struct Report {
    /// The tag the record was sent with.
    pub tag: u64,
    /// Where the record landed, or why it was not delivered (with the record).
    pub result: DeliveryResult,
}

/// The callback of [`ProducerBuilder::on_delivery`].
#[derive(Clone)]
struct OnDelivery(Arc<dyn Fn(Report) + Send + Sync>);

impl std::fmt::Debug for OnDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnDelivery(..)")
    }
}

// ---------------------------------------------------------------------------------------------
// Starting
// ---------------------------------------------------------------------------------------------

/// Entry point: [`Producer::start`] with defaults, or [`Producer::builder`] to tune the driver.
#[derive(Debug)]
pub struct Producer(());

impl Producer {
    /// Spawns the producer task on the current tokio runtime with the default driver settings
    /// and returns a handle to it. Call it from within a runtime.
    pub fn start(config: Config) -> Result<ProducerHandle, StartError> {
        Producer::builder(config).start()
    }

    /// A builder for the driver's own settings (channel sizes, connect timeout).
    pub fn builder(config: Config) -> ProducerBuilder {
        ProducerBuilder {
            config,
            command_capacity: 1024,
            event_capacity: 64,
            read_buffer: 64 * 1024,
            connect_timeout: None,
            write_backlog: None,
            on_delivery: None,
        }
    }
}

/// Driver settings; [`ProducerBuilder::start`] spawns the producer.
#[derive(Debug, Clone)]
pub struct ProducerBuilder {
    config: Config,
    command_capacity: usize,
    event_capacity: usize,
    read_buffer: usize,
    connect_timeout: Option<Duration>,
    write_backlog: Option<usize>,
    on_delivery: Option<OnDelivery>,
}

impl ProducerBuilder {
    /// The callback that receives the [`Report`] of every record sent with
    /// [`ProducerHandle::send_detached`] or [`ProducerHandle::try_send_detached`] (records sent
    /// with [`ProducerHandle::send`] report through their [`DeliveryFuture`] instead). Use it
    /// for high rates: a detached record costs no channel or future of its own, as with the
    /// callbacks of the Java client and librdkafka.
    ///
    /// It runs **on the producer task**, once per record, in the order the core reports them
    /// (per partition, in send order). Keep it short and non-blocking (count, or forward to a
    /// channel): the producer waits for it. Without a callback, detached reports are discarded
    /// (failures are logged at `warn`).
    pub fn on_delivery<F>(mut self, f: F) -> Self
    where
        F: Fn(Report) + Send + Sync + 'static,
    {
        self.on_delivery = Some(OnDelivery(Arc::new(f)));
        self
    }

    /// Capacity of the command queue between handles and the producer task (default 1024):
    /// records queued plus those the task took and has not handed to the core yet. When the
    /// producer's buffer is full, at most this many sends queue before
    /// [`ProducerHandle::send`] waits and [`ProducerHandle::try_send`] answers `Full`.
    pub fn command_capacity(mut self, n: usize) -> Self {
        self.command_capacity = n;
        self
    }

    /// Capacity of the channel carrying network events to the producer task (default 64).
    pub fn event_capacity(mut self, n: usize) -> Self {
        self.event_capacity = n;
        self
    }

    /// Bytes read from a socket at a time (default 64 KiB).
    pub fn read_buffer(mut self, n: usize) -> Self {
        self.read_buffer = n;
        self
    }

    /// How long a TCP connection attempt (name resolution included) may take before it counts
    /// as failed (default: the config's `request_timeout`).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = Some(d);
        self
    }

    /// Bytes handed to a connection and not yet written to its socket above which the
    /// producer stops taking new records until the socket catches up (default:
    /// `max_request_size * max_in_flight`). With `acks` other than none the core already bounds
    /// this by `max_in_flight` requests; with `acks=none` a batch counts as done once handed over,
    /// so only this limit keeps a slow socket from queueing without bound.
    pub fn write_backlog(mut self, bytes: usize) -> Self {
        self.write_backlog = Some(bytes);
        self
    }

    /// Spawns the producer task on the current tokio runtime and returns a handle to it.
    pub fn start(self) -> Result<ProducerHandle, StartError> {
        let rt = tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        for (name, v) in [
            ("command_capacity", self.command_capacity),
            ("event_capacity", self.event_capacity),
            ("read_buffer", self.read_buffer),
        ] {
            if v == 0 {
                return Err(StartError::Zero(name));
            }
        }
        let mut config = self.config;
        // Every DeliveryFuture must resolve, successes included.
        config.report_successes = true;
        let connect_timeout = self.connect_timeout.unwrap_or(config.request_timeout);
        let write_backlog = self
            .write_backlog
            .unwrap_or(config.max_request_size.saturating_mul(config.max_in_flight))
            .max(1);
        let (net_tx, net_rx) = mpsc::channel(self.event_capacity);
        let shared = Arc::new(Shared {
            closing: AtomicBool::new(false),
            core_full: AtomicBool::new(false),
            queue: Mutex::new(Queue::default()),
            capacity: self.command_capacity,
            cmd_ready: Notify::new(),
            space: Notify::new(),
        });
        let actor = Actor {
            core: producer_core::Producer::new(config, now()),
            taken: VecDeque::new(),
            cmd_open: true,
            net_tx,
            net_rx,
            conns: HashMap::new(),
            closing: Vec::new(),
            stash: None,
            shared: shared.clone(),
            epochs: Epochs::default(),
            flush_waiters: Vec::new(),
            on_delivery: self.on_delivery,
            close_waiters: Vec::new(),
            reflush: false,
            read_buffer: self.read_buffer,
            connect_timeout,
            write_backlog,
            congested: 0,
        };
        rt.spawn(actor.run());
        Ok(ProducerHandle {
            inner: Arc::new(HandleInner { shared }),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The handle
// ---------------------------------------------------------------------------------------------

/// A cloneable handle to a running producer. When the last handle is dropped, the producer
/// closes in the background: records already sent are still delivered.
#[derive(Clone)]
pub struct ProducerHandle {
    inner: Arc<HandleInner>,
}

impl std::fmt::Debug for ProducerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerHandle")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// The wall clock in milliseconds since the epoch (0 before it).
fn wall_clock_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        // Seconds and milliseconds separately: `as_millis` goes through a u128.
        Ok(d) => d.as_secs() as i64 * 1000 + i64::from(d.subsec_millis()),
        Err(_) => 0,
    }
}

fn fill_timestamp(record: &mut Record) {
    if record.timestamp.is_none() {
        record.timestamp = Some(wall_clock_ms());
    }
}

/// Why a record could not be queued.
enum Refused {
    Full,
    Closed,
}

impl ProducerHandle {
    /// Sends a record, waiting while the producer's buffer is full (backpressure). Returns a
    /// future of the record's delivery report once the producer task has the record. Records
    /// sent through one handle keep their order per partition.
    ///
    /// A record without a timestamp gets the wall clock. Returns [`SendError::Closed`] with
    /// the record once [`ProducerHandle::close`] has been called. Cancelling this future
    /// before it completes drops the record unsent.
    pub async fn send(&self, record: Record) -> Result<DeliveryFuture, SendError> {
        let (tx, rx) = oneshot::channel();
        self.enqueue(record, ReplyTo::Future(tx)).await?;
        Ok(DeliveryFuture { rx })
    }

    /// Like [`ProducerHandle::send`], but the report goes to the
    /// [`ProducerBuilder::on_delivery`] callback as a [`Report`] carrying `tag` (for instance
    /// an index into the caller's own table), instead of a future per record. The cheapest way
    /// to send many records. Waits while the producer's buffer is full; resolves once the
    /// record is queued for the producer task. Returns [`SendError::Closed`] with the record
    /// once [`ProducerHandle::close`] has been called.
    pub async fn send_detached(&self, record: Record, tag: u64) -> Result<(), SendError> {
        self.enqueue(record, ReplyTo::Detached(tag)).await
    }

    /// Like [`ProducerHandle::try_send`], but the report goes to the
    /// [`ProducerBuilder::on_delivery`] callback with `tag` (see
    /// [`ProducerHandle::send_detached`]). Never waits: [`TrySendError::Full`] hands the
    /// record back when the producer's buffer or the command queue is full.
    pub fn try_send_detached(&self, record: Record, tag: u64) -> Result<(), TrySendError> {
        self.try_enqueue(record, ReplyTo::Detached(tag))
    }

    /// Queues many detached records at once without waiting: one queue lock and one
    /// wall-clock reading for the whole call (records without a timestamp all get the time of
    /// this call), instead of one each as with [`ProducerHandle::try_send_detached`]. Use it
    /// when records arrive in bursts (a consumer's poll, a file read) and the per-record cost
    /// matters, from code that must not wait (else see
    /// [`ProducerHandle::send_batch_detached`]). Reports go to the
    /// [`ProducerBuilder::on_delivery`] callback with each record's tag.
    ///
    /// Records are taken from the front of `records`, in order, while the command queue has
    /// room; returns how many were taken. Those left in `records` were not queued (the queue
    /// is full, or the producer's buffer is: what [`TrySendError::Full`] means for
    /// `try_send`): call again later with what is left. After [`ProducerHandle::close`] it
    /// takes nothing and returns [`BatchClosed`], leaving every record in `records`.
    pub fn try_send_batch_detached(
        &self,
        records: &mut Vec<(Record, u64)>,
    ) -> Result<usize, BatchClosed> {
        let shared = self.shared();
        if shared.closing.load(Ordering::Acquire) {
            return Err(BatchClosed);
        }
        if shared.core_full.load(Ordering::Acquire) || records.is_empty() {
            return Ok(0);
        }
        self.push_batch(records, false)
    }

    /// Queues every record of `records` as detached records (reports to the
    /// [`ProducerBuilder::on_delivery`] callback with each record's tag), waiting for room as
    /// [`ProducerHandle::send_detached`] does. One queue lock and one wall-clock reading per
    /// chunk that fits in the queue, instead of one each per record: the cheapest way to send
    /// records that come in bursts. Records keep their order (per partition, as with
    /// `send_detached`); `records` is empty when this resolves `Ok`.
    ///
    /// Records are taken from the front of `records`. Returns [`BatchClosed`] once
    /// [`ProducerHandle::close`] has been called: the records not yet taken stay in `records`
    /// (those taken before are reported as usual). Cancelling the future leaves the records
    /// not yet taken in `records`, so none is lost.
    pub async fn send_batch_detached(
        &self,
        records: &mut Vec<(Record, u64)>,
    ) -> Result<(), BatchClosed> {
        let shared = self.shared();
        loop {
            if shared.closing.load(Ordering::Acquire) {
                return Err(BatchClosed);
            }
            if records.is_empty() {
                return Ok(());
            }
            self.push_batch(records, false)?;
            if records.is_empty() {
                return Ok(());
            }
            // The queue is full: register for a wake-up, then look again (a wake-up between
            // the look and the wait is kept).
            let space = shared.space.notified();
            tokio::pin!(space);
            space.as_mut().enable();
            self.push_batch(records, true)?;
            if records.is_empty() {
                return Ok(());
            }
            space.await;
        }
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// Queues detached records from the front of `records` while the queue has room, under
    /// one lock, with one clock reading (none when nothing fits); how many it took. `waiting`: the caller registered
    /// for a wake-up and waits when some are left.
    fn push_batch(
        &self,
        records: &mut Vec<(Record, u64)>,
        waiting: bool,
    ) -> Result<usize, BatchClosed> {
        let shared = self.shared();
        let mut q = shared.lock();
        if q.stopped {
            return Err(BatchClosed);
        }
        let room = shared.capacity.saturating_sub(q.cmds.len() + q.held);
        let n = room.min(records.len());
        if waiting && n < records.len() {
            q.space_waiters += 1;
        }
        if n == 0 {
            return Ok(0);
        }
        // Read only when something fits: one reading per chunk taken (a vDSO call, short
        // next to moving the records).
        let now = wall_clock_ms();
        let first = q.cmds.is_empty();
        q.cmds.extend(records.drain(..n).map(|(mut record, tag)| {
            if record.timestamp.is_none() {
                record.timestamp = Some(now);
            }
            Cmd::Send {
                record,
                reply: ReplyTo::Detached(tag),
            }
        }));
        drop(q);
        if first {
            shared.cmd_ready.notify_one();
        }
        Ok(n)
    }

    /// Queues `record` (its timestamp filled in) if there is room. `waiting`: the caller
    /// registered for a wake-up and waits when refused as full.
    fn push(
        &self,
        mut record: Record,
        reply: ReplyTo,
        waiting: bool,
    ) -> Result<(), (Refused, Record, ReplyTo)> {
        let shared = self.shared();
        let filled = record.timestamp.is_none();
        fill_timestamp(&mut record);
        let mut q = shared.lock();
        let refused = if q.stopped {
            Refused::Closed
        } else if q.cmds.len() + q.held >= shared.capacity {
            q.space_waiters += usize::from(waiting);
            Refused::Full
        } else {
            let first = q.cmds.is_empty();
            q.cmds.push_back(Cmd::Send { record, reply });
            drop(q);
            if first {
                shared.cmd_ready.notify_one();
            }
            return Ok(());
        };
        drop(q);
        if filled {
            record.timestamp = None;
        }
        Err((refused, record, reply))
    }

    /// Queues a record, waiting for room.
    async fn enqueue(&self, mut record: Record, mut reply: ReplyTo) -> Result<(), SendError> {
        let shared = self.shared();
        loop {
            if shared.closing.load(Ordering::Acquire) {
                return Err(SendError::Closed(record));
            }
            match self.push(record, reply, false) {
                Ok(()) => return Ok(()),
                Err((Refused::Closed, r, _)) => return Err(SendError::Closed(r)),
                Err((Refused::Full, r, back)) => (record, reply) = (r, back),
            }
            // Full: register for a wake-up, then look again (a wake-up between the look and
            // the wait is kept).
            let space = shared.space.notified();
            tokio::pin!(space);
            space.as_mut().enable();
            match self.push(record, reply, true) {
                Ok(()) => return Ok(()),
                Err((Refused::Closed, r, _)) => return Err(SendError::Closed(r)),
                Err((Refused::Full, r, back)) => {
                    (record, reply) = (r, back);
                    space.await;
                }
            }
        }
    }

    /// Queues a record without waiting (see [`ProducerHandle::try_send`]).
    fn try_enqueue(&self, record: Record, reply: ReplyTo) -> Result<(), TrySendError> {
        let shared = self.shared();
        if shared.closing.load(Ordering::Acquire) {
            return Err(TrySendError::Closed(record));
        }
        if shared.core_full.load(Ordering::Acquire) {
            return Err(TrySendError::Full(record));
        }
        self.push(record, reply, false)
            .map_err(|(why, r, _)| match why {
                Refused::Full => TrySendError::Full(r),
                Refused::Closed => TrySendError::Closed(r),
            })
    }

    /// Sends a record without waiting. Returns [`TrySendError::Full`] with the record when the
    /// producer's buffer is full (the task holds a refused record aside) or the command queue
    /// is full. The record is never queued in that case.
    ///
    /// Design: the handle never waits for the task's answer. It checks a flag that the task
    /// sets while the core refuses records, then queues the record if the queue has room. A
    /// record that passes both checks is accepted: if the core fills up in the meantime, the
    /// task holds it aside (one record at most) and sends it when space frees. So `Ok` means
    /// "will be delivered or reported", and `Full` always returns the record.
    pub fn try_send(&self, record: Record) -> Result<DeliveryFuture, TrySendError> {
        let (tx, rx) = oneshot::channel();
        self.try_enqueue(record, ReplyTo::Future(tx))?;
        Ok(DeliveryFuture { rx })
    }

    /// Sends every buffered record now, ignoring `linger`. Resolves when every record sent
    /// before the call (through any handle) has its report; records sent afterwards do not
    /// delay it.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if !self.shared().push_control(Cmd::Flush(tx)) {
            return; // The task has finished: every record was reported.
        }
        let _ = rx.await;
    }

    /// Closes the producer: refuses new records, delivers (or fails, at the latest after
    /// `delivery_timeout`) every record already sent, closes the connections and stops the
    /// task. Resolves when that is done. Any handle may call it, any number of times.
    pub async fn close(&self) {
        self.shared().closing.store(true, Ordering::Release);
        let (tx, rx) = oneshot::channel();
        if !self.shared().push_control(Cmd::Close(tx)) {
            return; // Already stopped.
        }
        let _ = rx.await;
    }

    /// Whether [`ProducerHandle::close`] was called or the producer task has stopped.
    pub fn is_closed(&self) -> bool {
        self.shared().closing.load(Ordering::Acquire) || self.shared().lock().stopped
    }
}

// ---------------------------------------------------------------------------------------------
// The actor
// ---------------------------------------------------------------------------------------------

/// Resolves when the actor has commands to handle: at once when it still holds some, else
/// when a handle queues one.
async fn commands(ready: &Notify, holding: bool) {
    if !holding {
        ready.notified().await;
    }
}

fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// Commands or events handled per wake-up before the outputs are drained.
const BATCH: usize = 128;

struct ConnHandle {
    writer: mpsc::UnboundedSender<Bytes>,
    task: JoinHandle<()>,
    /// Bytes handed to the writer and not yet written (shared with the connection task).
    backlog: Arc<AtomicUsize>,
    /// The backlog is over the limit: counted in [`Actor::congested`].
    over: bool,
}

struct Actor {
    core: producer_core::Producer<Reply>,
    /// Commands taken from the queue and not handled yet (counted in [`Queue::held`]).
    taken: VecDeque<Cmd>,
    /// False once every handle is gone.
    cmd_open: bool,
    net_tx: mpsc::Sender<Net>,
    net_rx: mpsc::Receiver<Net>,
    conns: HashMap<ConnId, ConnHandle>,
    /// Tasks of connections the core closed, still writing their queued frames.
    closing: Vec<JoinHandle<()>>,
    /// The one record the core refused as `Full`; while it is here no command is read.
    stash: Option<(Record, Reply)>,
    shared: Arc<Shared>,
    /// Records not yet reported, per flush epoch.
    epochs: Epochs,
    /// Flushes waiting for every record of their epoch and earlier ones.
    flush_waiters: Vec<(u64, oneshot::Sender<()>)>,
    /// Receives the reports of detached records.
    on_delivery: Option<OnDelivery>,
    close_waiters: Vec<oneshot::Sender<()>>,
    /// Metadata arrived while a flush is pending: flush the core again.
    reflush: bool,
    read_buffer: usize,
    connect_timeout: Duration,
    write_backlog: usize,
    /// Connections whose write backlog is over the limit; while any is, no command is read.
    congested: usize,
}

/// Unreported records per flush epoch: records accepted now carry the current epoch, and each
/// flush ends one. O(1) per record: the counts of the open epochs sit in a deque starting at
/// `base`.
struct Epochs {
    /// The epoch of `counts[0]`; every older epoch is fully reported.
    base: u64,
    /// From `base` to the current epoch (the last entry, always present).
    counts: VecDeque<usize>,
}

impl Default for Epochs {
    fn default() -> Self {
        Epochs {
            base: 0,
            counts: VecDeque::from([0]),
        }
    }
}

impl Epochs {
    fn current(&self) -> u64 {
        self.base + self.counts.len() as u64 - 1
    }

    /// Counts one record in the current epoch, which it returns.
    fn accept(&mut self) -> u64 {
        if let Some(n) = self.counts.back_mut() {
            *n += 1;
        }
        self.current()
    }

    /// One record of `epoch` has its report; true when the oldest open epoch just emptied.
    fn settle(&mut self, epoch: u64) -> bool {
        let Some(i) = epoch.checked_sub(self.base) else {
            return false;
        };
        let Some(n) = self.counts.get_mut(i as usize) else {
            return false;
        };
        *n = n.saturating_sub(1);
        i == 0 && *n == 0
    }

    /// Ends the current epoch (a flush), returning it.
    fn end(&mut self) -> u64 {
        let ended = self.current();
        self.counts.push_back(0);
        ended
    }

    /// The oldest epoch with unreported records (`u64::MAX`: none), after dropping the
    /// fully reported ones.
    fn oldest_open(&mut self) -> u64 {
        while self.counts.len() > 1 && self.counts.front() == Some(&0) {
            self.counts.pop_front();
            self.base += 1;
        }
        if self.counts.front().is_some_and(|n| *n > 0) {
            self.base
        } else {
            u64::MAX
        }
    }
}

impl Actor {
    async fn run(mut self) {
        let sleep = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(sleep);
        loop {
            self.drain_outputs();
            if std::mem::take(&mut self.reflush) {
                // Records that waited for their topic's metadata were just appended to batches
                // that linger as usual: a pending flush covers them too.
                self.core.flush(now());
                self.drain_outputs();
            }
            if self.core.is_closed() {
                break;
            }
            let deadline = self.core.poll_timeout();
            if let Some(d) = deadline {
                sleep.as_mut().reset(tokio::time::Instant::from_std(d));
            }
            let read_cmds = self.cmd_open && self.stash.is_none() && self.congested == 0;
            tokio::select! {
                biased;
                Some(ev) = self.net_rx.recv() => {
                    // A clock reading per event: handling a chunk of responses takes a while.
                    self.on_net(now(), ev);
                    for _ in 0..BATCH {
                        match self.net_rx.try_recv() {
                            Ok(ev) => self.on_net(now(), ev),
                            Err(_) => break,
                        }
                    }
                }
                () = commands(&self.shared.cmd_ready, !self.taken.is_empty()), if read_cmds => {
                    if self.taken.is_empty() {
                        self.sync_queue(0);
                    }
                    // One clock reading for the whole batch: it is handled within
                    // microseconds.
                    let t = now();
                    let mut handled = 0;
                    while handled < BATCH && self.stash.is_none() {
                        let Some(cmd) = self.taken.pop_front() else {
                            break;
                        };
                        handled += 1;
                        self.on_cmd(t, cmd);
                    }
                    self.sync_queue(handled);
                }
                () = &mut sleep, if deadline.is_some() => {}
            }
            // Compare against the clock: the sleep may not be what woke us, and a woken sleep
            // may race with the deadline moving.
            let t = now();
            if self.core.poll_timeout().is_some_and(|d| d <= t) {
                self.core.handle_timeout(t);
            }
            self.retry_stash();
        }
        self.shutdown().await;
    }

    /// Everything is reported and the core has closed: stop the connections, refuse what is
    /// still queued, and wake the waiters.
    async fn shutdown(&mut self) {
        for (_, c) in self.conns.drain() {
            c.task.abort();
        }
        // Connections the core closed write what was queued for them before `close` returns.
        let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
        for task in self.closing.drain(..) {
            let abort = task.abort_handle();
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                abort.abort();
            }
        }
        self.shared.closing.store(true, Ordering::Release);
        let queued = {
            let mut q = self.shared.lock();
            q.stopped = true;
            std::mem::take(&mut q.cmds)
        };
        // Senders waiting for space see `stopped` and give up.
        self.shared.space.notify_waiters();
        if let Some((record, reply)) = self.stash.take() {
            self.reject(reply, SendErrorReason::Closed, record);
        }
        let taken = std::mem::take(&mut self.taken);
        for cmd in taken.into_iter().chain(queued) {
            match cmd {
                Cmd::Send { record, reply } => self.report(
                    reply,
                    Err(DeliveryError::Rejected {
                        reason: SendErrorReason::Closed,
                        record,
                    }),
                ),
                Cmd::Flush(tx) | Cmd::Close(tx) => {
                    let _ = tx.send(());
                }
            }
        }
        for (_, tx) in self.flush_waiters.drain(..) {
            let _ = tx.send(());
        }
        for tx in self.close_waiters.drain(..) {
            let _ = tx.send(());
        }
        info!("producer task stopped");
    }

    /// Settles with the queue after handling `handled` commands: they no longer count against
    /// the capacity; takes everything queued when the taken commands are used up; wakes the
    /// senders waiting for space once half the capacity is free; starts closing when every handle is gone and nothing is
    /// left.
    fn sync_queue(&mut self, handled: usize) {
        let mut q = self.shared.lock();
        q.held = q.held.saturating_sub(handled);
        if self.taken.is_empty() {
            std::mem::swap(&mut q.cmds, &mut self.taken);
            q.held = self.taken.len();
        }
        // Waiting senders are woken once half the capacity is free, not for every batch: a
        // sender that outpaces the actor then sleeps once per half queue, not per batch.
        let wake = q.space_waiters > 0 && q.cmds.len() + q.held <= self.shared.capacity / 2;
        if wake {
            q.space_waiters = 0;
        }
        let gone = q.handles_gone && self.taken.is_empty();
        drop(q);
        if wake {
            self.shared.space.notify_waiters();
        }
        if gone && self.cmd_open {
            debug!("every producer handle dropped; closing");
            self.cmd_open = false;
            self.core.close(now());
        }
    }

    /// Handles one command; `t` is a recent clock reading.
    fn on_cmd(&mut self, t: std::time::Instant, cmd: Cmd) {
        match cmd {
            Cmd::Send { record, reply } => {
                let epoch = self.epochs.accept();
                self.submit(t, record, Reply { to: reply, epoch });
            }
            Cmd::Flush(tx) => {
                let epoch = self.epochs.end();
                self.flush_waiters.push((epoch, tx));
                self.core.flush(t);
                self.wake_flushes();
            }
            Cmd::Close(tx) => {
                self.close_waiters.push(tx);
                self.core.close(t);
            }
        }
    }

    /// Hands a record to the core; `Full` keeps it aside.
    fn submit(&mut self, t: std::time::Instant, record: Record, reply: Reply) {
        match self.core.send(t, record, reply) {
            Ok(()) => {}
            Err(e) if e.reason == SendErrorReason::Full => {
                self.stash = Some((e.record, e.opaque));
                self.shared.core_full.store(true, Ordering::Release);
            }
            Err(e) => self.reject(e.opaque, e.reason, e.record),
        }
    }

    fn retry_stash(&mut self) {
        if let Some((record, reply)) = self.stash.take() {
            self.shared.core_full.store(false, Ordering::Release);
            self.submit(now(), record, reply);
        }
    }

    fn reject(&mut self, reply: Reply, reason: SendErrorReason, record: Record) {
        self.settle(reply.epoch);
        self.report(reply.to, Err(DeliveryError::Rejected { reason, record }));
    }

    /// Hands one record's report to its future or to the callback.
    fn report(&self, to: ReplyTo, result: DeliveryResult) {
        match to {
            // The receiver may be gone (future dropped): the report is discarded.
            ReplyTo::Future(tx) => {
                let _ = tx.send(result);
            }
            ReplyTo::Detached(tag) => match &self.on_delivery {
                Some(f) => (f.0)(Report { tag, result }),
                None => {
                    if let Err(e) = result {
                        warn!(tag, error = %e, "detached record not delivered (no on_delivery callback)");
                    }
                }
            },
        }
    }

    /// One record of `epoch` has its report.
    fn settle(&mut self, epoch: u64) {
        if self.epochs.settle(epoch) && !self.flush_waiters.is_empty() {
            self.wake_flushes();
        }
    }

    /// Completes the flushes whose records (and all earlier ones) are reported.
    fn wake_flushes(&mut self) {
        let oldest = self.epochs.oldest_open();
        let (done, waiting): (Vec<_>, Vec<_>) = self
            .flush_waiters
            .drain(..)
            .partition(|(epoch, _)| *epoch < oldest);
        self.flush_waiters = waiting;
        for (_, tx) in done {
            let _ = tx.send(());
        }
    }

    /// Handles one network event; `t` is a recent clock reading.
    fn on_net(&mut self, t: std::time::Instant, ev: Net) {
        match ev {
            Net::Connected(conn) => self.core.handle_connected(t, conn),
            Net::ConnectFailed(conn) => {
                self.remove_conn(conn);
                self.core.handle_connect_failed(t, conn);
            }
            Net::Data(conn, bytes) => self.core.handle_read(t, conn, &bytes),
            Net::Drained(conn) => {
                let limit = self.write_backlog;
                if let Some(c) = self.conns.get_mut(&conn) {
                    if c.over && c.backlog.load(Ordering::Acquire) <= limit {
                        c.over = false;
                        self.congested -= 1;
                    }
                }
            }
            Net::Closed(conn) => {
                self.remove_conn(conn);
                self.core.handle_disconnected(t, conn);
            }
        }
    }

    fn drain_outputs(&mut self) {
        while let Some(out) = self.core.poll_output() {
            match out {
                Output::Connect { conn, host, port } => self.connect(conn, host, port),
                Output::Transmit { conn, bytes } => match self.conns.get_mut(&conn) {
                    Some(c) => {
                        let len = bytes.len();
                        // Counted before the writer can see the frame, so its decrement never
                        // comes first.
                        let backlog = c.backlog.fetch_add(len, Ordering::AcqRel) + len;
                        // A send error means the task ended; its Closed event is on the way.
                        if c.writer.send(bytes).is_ok() && backlog > self.write_backlog && !c.over {
                            c.over = true;
                            self.congested += 1;
                            debug!(
                                conn = conn.as_u64(),
                                backlog, "write backlog over the limit; pausing records"
                            );
                        }
                    }
                    None => debug!(
                        conn = conn.as_u64(),
                        "transmit for a connection that is gone"
                    ),
                },
                Output::Disconnect { conn } => {
                    let known = self.remove_conn(conn);
                    if known {
                        debug!(conn = conn.as_u64(), "connection closed by the producer");
                    }
                }
                Output::Delivery(d) => {
                    let Reply { to, epoch } = d.opaque;
                    self.report(to, d.result.map_err(DeliveryError::Failed));
                    self.settle(epoch);
                }
                Output::Event(e) => {
                    if e == Event::MetadataUpdated && !self.flush_waiters.is_empty() {
                        self.reflush = true;
                    }
                    log_event(&e);
                }
            }
        }
    }

    fn connect(&mut self, conn: ConnId, host: String, port: u16) {
        let (writer, frames) = mpsc::unbounded_channel();
        let backlog = Arc::new(AtomicUsize::new(0));
        let io = ConnIo {
            conn,
            frames,
            net: self.net_tx.clone(),
            backlog: backlog.clone(),
            backlog_limit: self.write_backlog,
            read_buffer: self.read_buffer,
            connect_timeout: self.connect_timeout,
        };
        let task = tokio::spawn(io.run(host, port));
        self.conns.insert(
            conn,
            ConnHandle {
                writer,
                task,
                backlog,
                over: false,
            },
        );
    }

    /// Forgets a connection; whether it was known. Its task first writes the frames already
    /// handed to it (the core counts them as sent: with acks=0 they are even reported
    /// delivered), then closes; it is stopped outright if that takes longer than
    /// [`CLOSE_GRACE`].
    fn remove_conn(&mut self, conn: ConnId) -> bool {
        let Some(c) = self.conns.remove(&conn) else {
            return false;
        };
        let ConnHandle {
            writer, task, over, ..
        } = c;
        drop(writer); // the writer loop ends once the queued frames are written
        self.closing.retain(|t| !t.is_finished());
        self.closing.push(task);
        if over {
            self.congested -= 1;
        }
        true
    }
}

/// Most frames handed to one vectored write.
const MAX_IOV: usize = 64;

/// How long a connection the core closed may take to write the frames already queued for it.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

fn log_event(e: &Event) {
    match e {
        Event::Retry {
            topic,
            partition,
            error,
        } => warn!(%topic, partition, %error, "retrying batch"),
        Event::MetadataUpdated => debug!("metadata updated"),
        Event::BrokerReady { node_id } => debug!(node_id, "broker ready"),
        Event::ProducerId { producer_id, epoch } => {
            info!(producer_id, epoch, "producer id assigned")
        }
        Event::Fatal(err) => error!(%err, "producer failed; every record fails"),
        Event::Closed => info!("producer closed"),
        other => debug!(event = ?other, "producer event"),
    }
}

/// What a connection task owns.
struct ConnIo {
    conn: ConnId,
    frames: mpsc::UnboundedReceiver<Bytes>,
    net: mpsc::Sender<Net>,
    backlog: Arc<AtomicUsize>,
    backlog_limit: usize,
    read_buffer: usize,
    connect_timeout: Duration,
}

impl ConnIo {
    /// Connects, then reads and writes until either side ends; reports each step to the actor.
    async fn run(self, host: String, port: u16) {
        let ConnIo {
            conn,
            mut frames,
            net,
            backlog,
            backlog_limit,
            read_buffer,
            connect_timeout,
        } = self;
        let id = conn.as_u64();
        debug!(conn = id, %host, port, "connecting");
        let stream = match tokio::time::timeout(
            connect_timeout,
            TcpStream::connect((host.as_str(), port)),
        )
        .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                warn!(conn = id, %host, port, error = %e, "connection failed");
                let _ = net.send(Net::ConnectFailed(conn)).await;
                return;
            }
            Err(_) => {
                warn!(conn = id, %host, port, timeout = ?connect_timeout, "connection timed out");
                let _ = net.send(Net::ConnectFailed(conn)).await;
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        info!(conn = id, %host, port, "connected");
        if net.send(Net::Connected(conn)).await.is_err() {
            return;
        }
        let (mut rd, mut wr) = stream.into_split();
        let reader = async {
            let mut buf = BytesMut::with_capacity(read_buffer);
            loop {
                // Reclaims the space of chunks the actor has finished with.
                buf.reserve(read_buffer);
                match rd.read_buf(&mut buf).await {
                    Ok(0) => return None,
                    Ok(_) => {
                        if net
                            .send(Net::Data(conn, buf.split().freeze()))
                            .await
                            .is_err()
                        {
                            return None;
                        }
                    }
                    Err(e) => return Some(e),
                }
            }
        };
        let writer = async {
            // Frames handed over and not fully written; the front one may be partly written.
            let mut pending: VecDeque<Bytes> = VecDeque::new();
            loop {
                if pending.is_empty() {
                    match frames.recv().await {
                        Some(frame) => pending.push_back(frame),
                        None => break,
                    }
                }
                // Everything queued goes out in one vectored write (one syscall for many
                // frames when the actor produced several at once).
                while pending.len() < MAX_IOV {
                    match frames.try_recv() {
                        Ok(frame) => pending.push_back(frame),
                        Err(_) => break,
                    }
                }
                let mut iov = [io::IoSlice::new(&[]); MAX_IOV];
                let mut count = 0;
                for (slot, frame) in iov.iter_mut().zip(pending.iter()) {
                    *slot = io::IoSlice::new(frame);
                    count += 1;
                }
                let n = wr.write_vectored(&iov[..count]).await?;
                if n == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                let mut left = n;
                while left > 0 {
                    let Some(front) = pending.front_mut() else {
                        break;
                    };
                    if front.len() <= left {
                        left -= front.len();
                        pending.pop_front();
                    } else {
                        front.advance(left);
                        left = 0;
                    }
                }
                let before = backlog.fetch_sub(n, Ordering::AcqRel);
                if before > backlog_limit && before - n <= backlog_limit {
                    let _ = net.send(Net::Drained(conn)).await;
                }
            }
            Ok::<(), io::Error>(())
        };
        let err = tokio::select! {
            e = reader => e,
            r = writer => match r {
                // The actor dropped its sender: every queued frame is written; close.
                Ok(()) => {
                    let _ = wr.shutdown().await;
                    debug!(conn = id, "closed after writing every queued frame");
                    return;
                }
                Err(e) => Some(e),
            },
        };
        match err {
            Some(e) => info!(conn = id, %host, port, error = %e, "connection lost"),
            None => info!(conn = id, %host, port, "connection closed by the peer"),
        }
        let _ = net.send(Net::Closed(conn)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::Epochs;

    #[test]
    fn epochs_track_the_oldest_open_one() {
        let mut e = Epochs::default();
        assert_eq!(e.oldest_open(), u64::MAX, "nothing outstanding");
        let a = e.accept();
        let b = e.accept();
        assert_eq!((a, b), (0, 0));
        assert_eq!(e.end(), 0);
        let c = e.accept();
        assert_eq!(c, 1);
        assert_eq!(e.end(), 1);
        assert!(!e.settle(c), "epoch 1 is not the oldest");
        assert_eq!(e.oldest_open(), 0);
        assert!(!e.settle(a));
        assert!(e.settle(b), "the oldest epoch just emptied");
        assert_eq!(e.oldest_open(), u64::MAX);
        assert_eq!(e.counts.len(), 1, "only the current epoch is kept");
        assert_eq!(e.current(), 2);
        // Reports for epochs already dropped are ignored.
        assert!(!e.settle(0));
    }
}
