//! The ready-made threaded producer: a thread running its own `mio::Poll` with a
//! [`MioDriver`], fed through a bounded command queue.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use mio::{Events, Poll, Waker};
use producer_core::{
    Callback, Config, ConsumerGroupMetadata, Delivery, Event, MetricsSnapshot, OAuthToken,
    OffsetToCommit, ProduceError, Record, SendErrorReason, TransactionError, TransactionOperation,
};
use producer_driver::panic::InjectedPanics;
use producer_driver::{
    call_user, contain, log_event, timestamp, Cohort, CommandQueue, FlushTracker, Refused,
};

use crate::driver::MioDriver;
use crate::error::StartError;
use crate::sink::DeliverySink;
use crate::tokens::TokenRange;

/// [`ThreadedProducer::send_batch`] was called after [`ThreadedProducer::close`]: nothing was
/// taken, the records are still the caller's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("producer closed")]
pub struct BatchClosed;

/// [`ThreadedProducer::send`] refused a record; it comes back with its opaque value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError<T = ()> {
    /// The command queue is full (the producer thread is behind, or the core's buffer is full
    /// and the thread is waiting for deliveries). Retry later, or drop the record.
    #[error("producer queue full")]
    Full(Record, T),
    /// [`ThreadedProducer::close`] was called (or the producer thread ended).
    #[error("producer closed")]
    Closed(Record, T),
}

impl<T> SendError<T> {
    /// The record handed back.
    pub fn record(&self) -> &Record {
        match self {
            SendError::Full(r, _) | SendError::Closed(r, _) => r,
        }
    }

    /// The record and opaque value handed back.
    pub fn into_parts(self) -> (Record, T) {
        match self {
            SendError::Full(r, o) | SendError::Closed(r, o) => (r, o),
        }
    }
}

enum Command<T> {
    /// A record, with the bytes handling it frees in the queue (see
    /// [`CommandQueue::push_burst`]).
    Send(Record, T, usize),
    Flush(SyncSender<()>),
    Metrics(SyncSender<MetricsSnapshot>),
    /// A transactional operation, answered when the core reports it complete.
    Txn(TxnCmd, TxnReply),
}

/// The transactional operations, as a handle queues them.
enum TxnCmd {
    Init,
    Begin,
    SendOffsets(Vec<OffsetToCommit>, ConsumerGroupMetadata),
    Commit,
    Abort,
}

impl TxnCmd {
    fn operation(&self) -> TransactionOperation {
        match self {
            TxnCmd::Init => TransactionOperation::Init,
            TxnCmd::Begin => TransactionOperation::Begin,
            TxnCmd::SendOffsets(..) => TransactionOperation::SendOffsets,
            TxnCmd::Commit => TransactionOperation::Commit,
            TxnCmd::Abort => TransactionOperation::Abort,
        }
    }
}

/// Where a transactional operation's result goes.
type TxnReply = SyncSender<Result<(), TransactionError>>;

/// What the handles and the thread share.
struct Shared<T> {
    /// Records and flushes for the thread. The thread lowers its count of held commands every
    /// [`RELEASE_EVERY`] records, so a sender may see the queue a little fuller than it is.
    queue: CommandQueue<Command<T>>,
    waker: Arc<Waker>,
    /// `close` was called.
    close_requested: AtomicBool,
    /// A wake-up is pending: senders skip the (syscall) wake while it is set.
    wake_pending: AtomicBool,
    /// The core's metrics as the thread stopped (set before the queue stops).
    final_metrics: Mutex<Option<MetricsSnapshot>>,
    /// The fatal error of a transactional producer, set before the queue stops: operations
    /// after it get this rather than `Closed`.
    transaction_failure: Mutex<Option<TransactionError>>,
}

/// How many records the thread hands to the driver between two releases of the queue's held
/// count (and two readings of the clock).
const RELEASE_EVERY: usize = 256;

impl<T> Shared<T> {
    fn wake(&self) {
        // A plain load first: the flag is usually set while the thread is busy, and a load
        // does not take the cache line away from the thread the way a swap does.
        if self.wake_pending.load(Ordering::Relaxed) {
            return;
        }
        if !self.wake_pending.swap(true, Ordering::SeqCst) {
            if let Err(e) = self.waker.wake() {
                tracing::warn!(error = %e, "cannot wake the producer thread");
            }
        }
    }
}

struct Inner<T> {
    shared: Arc<Shared<T>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: ThreadId,
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // The last handle is gone: let the thread close the producer in the background.
        self.shared.queue.senders_gone();
        self.shared.wake_pending.store(true, Ordering::SeqCst);
        if let Err(e) = self.shared.waker.wake() {
            tracing::warn!(error = %e, "cannot wake the producer thread");
        }
    }
}

/// A Kafka producer running on its own thread (an event loop on a private `mio::Poll` with a
/// [`MioDriver`]). The handle is cheap to clone and can be used from any thread.
///
/// - [`ThreadedProducer::send`] never blocks: the command queue is bounded (its capacity is
///   given to [`ThreadedProducer::spawn`]); when it is full the record comes back at once in
///   [`SendError::Full`]. Behind the queue, the core's own limits (`buffer_memory`,
///   `buffer_max_records`) apply: when the core is full the thread holds one record back and
///   stops reading the queue until deliveries free space, so the queue fills and `send`
///   answers `Full`. Nothing is buffered without bound.
/// - Every accepted record gets exactly one [`Delivery`] report, passed to the `on_delivery`
///   callback **on the producer thread**, in the order the core produces them (per partition,
///   in send order). Keep the callback short and non-blocking (forward to a channel if the
///   work is heavy): the event loop waits for it. Records the core refuses at once
///   (too large, invalid partition, closed, fatal error) are reported through the callback too,
///   as failures with the record handed back.
/// - [`ThreadedProducer::flush`] blocks until every record sent before it has its report.
/// - [`ThreadedProducer::close`] stops intake, delivers or fails everything (records keep
///   their delivery timeout, so it ends), and joins the thread. Dropping every handle without
///   `close` closes the producer the same way in the background.
///
/// A record without a timestamp gets the wall clock when the producer thread takes it from the
/// queue (one reading for each run of records it takes).
pub struct ThreadedProducer<T = ()> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for ThreadedProducer<T> {
    fn clone(&self) -> Self {
        ThreadedProducer {
            inner: self.inner.clone(),
        }
    }
}

impl<T> std::fmt::Debug for ThreadedProducer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedProducer")
            .field("thread", &self.inner.thread_id)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> ThreadedProducer<T> {
    /// Starts the producer thread. `queue_capacity` (at least 1) bounds the commands waiting
    /// for the thread (those in the queue plus those the thread took in its last bulk take and
    /// has not handed to the core yet; their records share `buffer_memory` with the core's);
    /// `on_delivery` receives every report on the producer thread. Fails if the `Poll`, its
    /// waker or the thread cannot be created ([`StartError::Io`]), or the TLS files of an
    /// `SSL` or `SASL_SSL` configuration cannot be used ([`StartError::Tls`]). For an event
    /// callback or a token provider, see [`ThreadedProducer::builder`].
    pub fn spawn<F>(
        config: Config,
        queue_capacity: usize,
        on_delivery: F,
    ) -> Result<Self, StartError>
    where
        F: FnMut(Delivery<T>) + Send + 'static,
    {
        Self::builder(config)
            .queue_capacity(queue_capacity)
            .spawn(on_delivery)
    }

    /// [`ThreadedProducer::spawn`] with an OAUTHBEARER token provider (for
    /// `sasl.mechanism=OAUTHBEARER`): whenever the core needs a token, `provider` is called on
    /// a helper thread of its own, so it may block (see [`MioDriver::set_token_provider`]).
    pub fn spawn_with_token_provider<F, P>(
        config: Config,
        queue_capacity: usize,
        on_delivery: F,
        provider: P,
    ) -> Result<Self, StartError>
    where
        F: FnMut(Delivery<T>) + Send + 'static,
        P: FnMut() -> Result<OAuthToken, String> + Send + 'static,
    {
        Self::builder(config)
            .queue_capacity(queue_capacity)
            .oauth_token_provider(provider)
            .spawn(on_delivery)
    }

    /// A builder for the producer thread's settings besides the delivery callback: the queue's
    /// capacity, an event callback, a token provider; [`ThreadedBuilder::spawn`] starts it.
    pub fn builder(config: Config) -> ThreadedBuilder<T> {
        ThreadedBuilder {
            config,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            on_event: None,
            token_provider: None,
            injected: InjectedPanics::default(),
            _reports: std::marker::PhantomData,
        }
    }

    /// Queues a record with `opaque`, handed back in its report. Never blocks: when the queue
    /// is full the record comes back in [`SendError::Full`]; after `close`, in
    /// [`SendError::Closed`].
    pub fn send_with(&self, record: Record, opaque: T) -> Result<(), SendError<T>> {
        let shared = &self.inner.shared;
        if shared.close_requested.load(Ordering::Relaxed) {
            return Err(SendError::Closed(record, opaque));
        }
        let bytes = charge::<T>(&record);
        let sent = (record, opaque);
        match shared
            .queue
            .push(sent, bytes, false, |(r, o)| Command::Send(r, o, bytes))
        {
            Ok(_) => {
                shared.wake();
                Ok(())
            }
            Err(Refused::Full((record, opaque))) => Err(SendError::Full(record, opaque)),
            Err(Refused::Stopped((record, opaque))) => Err(SendError::Closed(record, opaque)),
        }
    }

    /// Queues many records at once: one lock for the whole call, instead of one each as with
    /// [`ThreadedProducer::send_with`]. Use it when records arrive in bursts (a consumer's
    /// poll, a file read) and the per-record overhead matters.
    ///
    /// Records are taken from the front of `records`, in order, while the queue has room;
    /// returns how many were taken. Those left in `records` were not queued (the queue is
    /// full, as [`SendError::Full`] means for `send`): call again later with what is left.
    /// Never blocks. After [`ThreadedProducer::close`] it takes nothing and returns
    /// [`BatchClosed`], leaving every record in `records`.
    pub fn send_batch(&self, records: &mut Vec<(Record, T)>) -> Result<usize, BatchClosed> {
        let shared = &self.inner.shared;
        if shared.close_requested.load(Ordering::Relaxed) {
            return Err(BatchClosed);
        }
        let burst = shared
            .queue
            .push_burst(
                records,
                false,
                |(record, _)| charge::<T>(record),
                |(record, opaque), bytes| Command::Send(record, opaque, bytes),
            )
            .map_err(|_| BatchClosed)?;
        if burst.taken > 0 {
            shared.wake();
        }
        Ok(burst.taken)
    }

    /// Queues a record (see [`ThreadedProducer::send_with`]); its report carries
    /// `T::default()`.
    pub fn send(&self, record: Record) -> Result<(), SendError<T>>
    where
        T: Default,
    {
        self.send_with(record, T::default())
    }

    /// Sends everything queued now (ignoring `linger`) and blocks until every record sent
    /// before this call has its report (callbacks included). Returns at once after `close`
    /// (which reports everything) and when called from the delivery callback (waiting there
    /// would deadlock).
    pub fn flush(&self) {
        if thread::current().id() == self.inner.thread_id {
            return;
        }
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        // Flushes are not counted against the capacity: each one blocks its caller, so there
        // are never more of them than threads.
        if self
            .inner
            .shared
            .queue
            .push_control(Command::Flush(done_tx))
            .is_err()
        {
            return; // The thread has stopped: every record was reported.
        }
        self.inner.shared.wake();
        // An error means the thread ended, after reporting everything.
        let _ = done_rx.recv();
    }

    /// Stops intake (later sends return [`SendError::Closed`]), then waits until every record
    /// has been delivered or failed, the connections are closed and the thread has exited.
    /// Records queued before the call are still sent. Called from the delivery callback it
    /// starts the close and returns without waiting.
    pub fn close(&self) {
        self.inner
            .shared
            .close_requested
            .store(true, Ordering::SeqCst);
        self.inner.shared.wake();
        if thread::current().id() == self.inner.thread_id {
            return;
        }
        // Holding the lock while joining makes concurrent closers wait too.
        let mut guard = self.inner.thread.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(handle) = guard.take() {
            if handle.join().is_err() {
                tracing::error!("the producer thread panicked (in the delivery callback?)");
            }
        }
    }

    /// A snapshot of the core's metrics (see [`producer_core::metrics`]; render it with
    /// [`MetricsSnapshot::render_prometheus`]). Blocks while the producer thread takes it
    /// between two batches of commands; after the thread ended, the snapshot it took as it
    /// stopped. `None` only when called from the delivery callback (the thread is busy
    /// calling it). Meant for a scrape interval, not for every record.
    pub fn metrics(&self) -> Option<MetricsSnapshot> {
        if thread::current().id() == self.inner.thread_id {
            return None;
        }
        let (tx, rx) = mpsc::sync_channel(1);
        if self
            .inner
            .shared
            .queue
            .push_control(Command::Metrics(tx))
            .is_ok()
        {
            self.inner.shared.wake();
            if let Ok(m) = rx.recv() {
                return Some(m);
            }
        }
        // The thread stopped: it left its last snapshot before stopping the queue.
        let last = self.inner.shared.final_metrics.lock();
        last.unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Queues a transactional operation and blocks until its result. From the delivery
    /// callback (the producer thread) it cannot wait: refused with
    /// [`TransactionError::InProgress`].
    fn transaction(&self, op: TxnCmd) -> Result<(), TransactionError> {
        if thread::current().id() == self.inner.thread_id {
            return Err(TransactionError::InProgress {
                operation: op.operation(),
            });
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let stopped = || {
            let failure = self.inner.shared.transaction_failure.lock();
            let failure = failure.unwrap_or_else(|e| e.into_inner()).clone();
            Err(failure.unwrap_or(TransactionError::Closed))
        };
        if self
            .inner
            .shared
            .queue
            .push_control(Command::Txn(op, tx))
            .is_err()
        {
            return stopped();
        }
        self.inner.shared.wake();
        rx.recv().unwrap_or_else(|_| stopped())
    }

    /// Starts the transactional producer (`transactional.id` in the config): finds its
    /// coordinator and gets its producer id, fencing any earlier producer with the same id.
    /// Blocks until done. Call it once, before the first
    /// [`ThreadedProducer::begin_transaction`].
    pub fn init_transactions(&self) -> Result<(), TransactionError> {
        self.transaction(TxnCmd::Init)
    }

    /// Opens a transaction: records sent from now on belong to it (a transactional
    /// producer's records sent outside one fail with `SendErrorReason::NoTransaction`).
    pub fn begin_transaction(&self) -> Result<(), TransactionError> {
        self.transaction(TxnCmd::Begin)
    }

    /// Adds a consumer group's offsets to the open transaction (committed for the group if
    /// and only if the transaction commits); blocks until the group's coordinator has them.
    pub fn send_offsets_to_transaction(
        &self,
        offsets: Vec<OffsetToCommit>,
        group: ConsumerGroupMetadata,
    ) -> Result<(), TransactionError> {
        self.transaction(TxnCmd::SendOffsets(offsets, group))
    }

    /// Commits the open transaction: flushes its records and blocks until each is
    /// acknowledged and the transaction ended; the records' reports (with `committed` set)
    /// reach the callback before this returns. On [`TransactionError::Abortable`], abort.
    pub fn commit_transaction(&self) -> Result<(), TransactionError> {
        self.transaction(TxnCmd::Commit)
    }

    /// Aborts the open transaction and blocks until done: its records fail with
    /// `ProduceError::TransactionAborted`, each handed back in its report.
    pub fn abort_transaction(&self) -> Result<(), TransactionError> {
        self.transaction(TxnCmd::Abort)
    }

    /// Whether `close` was called or the producer thread ended.
    pub fn is_closed(&self) -> bool {
        self.inner.shared.close_requested.load(Ordering::SeqCst)
            || self.inner.shared.queue.is_stopped()
    }
}

/// The capacity of a [`ThreadedBuilder`]'s command queue unless set.
const DEFAULT_QUEUE_CAPACITY: usize = 1024;

/// The event callback of a [`ThreadedBuilder`].
type OnEvent = Box<dyn FnMut(&Event) + Send>;

/// The settings of a [`ThreadedProducer`] about to start ([`ThreadedProducer::builder`]);
/// [`ThreadedBuilder::spawn`] starts its thread. The protocol's settings are the [`Config`]'s.
#[must_use = "a builder does nothing until `spawn` is called"]
pub struct ThreadedBuilder<T> {
    config: Config,
    queue_capacity: usize,
    on_event: Option<OnEvent>,
    token_provider: Option<crate::token::Provider>,
    injected: InjectedPanics,
    _reports: std::marker::PhantomData<fn(T)>,
}

impl<T> std::fmt::Debug for ThreadedBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedBuilder")
            .field("queue_capacity", &self.queue_capacity)
            .field("on_event", &self.on_event.is_some())
            .field("token_provider", &self.token_provider.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> ThreadedBuilder<T> {
    /// The most commands waiting for the producer thread (default 1024; at least 1): see
    /// [`ThreadedProducer::spawn`].
    pub fn queue_capacity(mut self, n: usize) -> Self {
        self.queue_capacity = n;
        self
    }

    /// The callback that receives every [`Event`] of the producer (they are logged with
    /// `tracing` either way), **on the producer thread**, in the order they happen; keep it
    /// short and non-blocking. A callback (this one, the delivery callback, the token
    /// provider) that panics does not stop the producer: the panic is caught around that call
    /// and named by an [`Event::CallbackPanicked`], which this callback receives too (if it
    /// panics on that one, the panic is only logged). A report whose callback panicked is not
    /// handed over again.
    pub fn on_event<E>(mut self, on_event: E) -> Self
    where
        E: FnMut(&Event) + Send + 'static,
    {
        self.on_event = Some(Box::new(on_event));
        self
    }

    /// The OAUTHBEARER token provider (for `sasl.mechanism=OAUTHBEARER`): whenever the core
    /// needs a token, `provider` is called on a helper thread of its own, so it may block (see
    /// [`MioDriver::set_token_provider`]).
    pub fn oauth_token_provider<P>(mut self, provider: P) -> Self
    where
        P: FnMut() -> Result<OAuthToken, String> + Send + 'static,
    {
        self.token_provider = Some(Box::new(provider));
        self
    }

    /// For tests only: panics injected into the producer thread's loop, to prove that the
    /// producer contains them. Not part of the supported API.
    #[doc(hidden)]
    pub fn inject_panics(mut self, injected: InjectedPanics) -> Self {
        self.injected = injected;
        self
    }

    /// Starts the producer thread; `on_delivery` receives every report on it (see
    /// [`ThreadedProducer::spawn`] for the errors).
    pub fn spawn<F>(self, on_delivery: F) -> Result<ThreadedProducer<T>, StartError>
    where
        F: FnMut(Delivery<T>) + Send + 'static,
    {
        let ThreadedBuilder {
            config,
            queue_capacity,
            on_event,
            token_provider,
            injected,
            ..
        } = self;
        let poll = Poll::new()?;
        let buffer_memory = config.buffer_memory;
        let mut driver = MioDriver::with_sink(
            config,
            poll.registry(),
            TokenRange::new(mio::Token(0), 1024),
            None,
            Reports {
                on_delivery,
                on_event,
                flushes: FlushTracker::default(),
            },
        )?;
        if let Some(provider) = token_provider {
            driver.set_token_provider(provider);
        }
        let shared = Arc::new(Shared {
            queue: CommandQueue::new(queue_capacity, buffer_memory),
            waker: driver.waker().clone(),
            close_requested: AtomicBool::new(false),
            wake_pending: AtomicBool::new(false),
            final_metrics: Mutex::new(None),
            transaction_failure: Mutex::new(None),
        });
        let loop_shared = shared.clone();
        let handle = thread::Builder::new()
            .name("producer-mio".into())
            .spawn(move || {
                let _stop = StopOnDrop(loop_shared.clone());
                let mut state = Loop {
                    driver,
                    poll,
                    shared: loop_shared,
                    taken: VecDeque::with_capacity(CHUNK),
                    unreleased: 0,
                    unreleased_bytes: 0,
                    stash: None,
                    closing: false,
                    txn_waiter: None,
                    txn_flushes: Vec::new(),
                    handed: 0,
                    injected,
                    panic_at: injected.panic_at(),
                    panicked: None,
                    core_broken: false,
                };
                state.run();
            })?;
        let thread_id = handle.thread().id();
        Ok(ThreadedProducer {
            inner: Arc::new(Inner {
                shared,
                thread: Mutex::new(Some(handle)),
                thread_id,
            }),
        })
    }
}

/// However the producer thread ends (a panic its loop could not contain), the handles stop
/// waiting: the queue stops (the commands still in it are dropped, so their waiters return)
/// and later sends are refused.
struct StopOnDrop<T>(Arc<Shared<T>>);

impl<T> Drop for StopOnDrop<T> {
    fn drop(&mut self) {
        self.0.close_requested.store(true, Ordering::SeqCst);
        drop(self.0.queue.stop());
    }
}

/// What `record` counts against `buffer_memory` in the command queue: what the core will
/// charge for it.
#[inline]
fn charge<T>(record: &Record) -> usize {
    producer_core::Producer::<Tracked<T>>::buffer_charge(record)
}

/// The opaque value inside the core: the caller's, plus the flush cohort it was sent in.
struct Tracked<T> {
    cohort: Cohort,
    opaque: T,
}

/// A flush waiting for its records, answered on its channel.
type FlushDone = SyncSender<()>;

/// Answers flushes that are done (on every report: inlined, as there is rarely any).
#[inline(always)]
fn answer(done: impl Iterator<Item = FlushDone>) {
    for waiter in done {
        let _ = waiter.try_send(());
    }
}

/// The thread's [`DeliverySink`]: each report goes straight from the core to the callback,
/// each event to the event callback; a callback's panic is caught around that call.
struct Reports<F> {
    on_delivery: F,
    on_event: Option<OnEvent>,
    flushes: FlushTracker<FlushDone>,
}

impl<F> Reports<F> {
    /// Hands a report to the delivery callback; a panic in it is named by an event, and the
    /// report counts as handed over.
    #[inline]
    fn hand_over<T>(&mut self, d: Delivery<T>)
    where
        F: FnMut(Delivery<T>),
    {
        let on_delivery = &mut self.on_delivery;
        // The report moves into the callback through the closure's reference, not by value
        // into the closure.
        let mut d = Some(d);
        let call = || {
            if let Some(d) = d.take() {
                on_delivery(d)
            }
        };
        if let Err(panicked) = call_user(Callback::Delivery, call) {
            self.emit(&panicked);
        }
    }

    /// Logs an event and hands it to the event callback. A callback that panics is named by an
    /// event of its own, logged and handed to it once (a second panic is only logged).
    fn emit(&mut self, event: &Event) {
        log_event(event);
        self.show(event);
    }

    /// Hands an event (logged already) to the event callback, as [`Reports::emit`] does.
    fn show(&mut self, event: &Event) {
        let Some(f) = self.on_event.as_mut() else {
            return;
        };
        if let Err(panicked) = call_user(Callback::Event, || f(event)) {
            log_event(&panicked);
            if let Err(again) = call_user(Callback::Event, || f(&panicked)) {
                log_event(&again);
            }
        }
    }
}

impl<T, F: FnMut(Delivery<T>)> DeliverySink<Tracked<T>> for Reports<F> {
    #[inline]
    fn deliver(&mut self, d: Delivery<Tracked<T>>) {
        let mut cohort = self.flushes.current();
        let d = d.map_opaque(|t| {
            cohort = t.cohort;
            t.opaque
        });
        self.hand_over(d);
        answer(self.flushes.reported(cohort));
    }

    fn event(&mut self, event: &Event) {
        // The driver has logged it.
        self.show(event);
    }
}

/// Most commands handled per loop iteration; then the loop polls its sockets (without
/// sleeping) before handling more.
const CHUNK: usize = 4096;

/// A record the core refused as `Full`, retried before handling more commands. Its bytes
/// stay counted in the command queue's held bytes until the core takes it.
struct Stashed<T> {
    record: Record,
    opaque: T,
    bytes: usize,
}

/// The producer thread's state.
struct Loop<T, F: FnMut(Delivery<T>)> {
    /// The driver; its sink holds the callbacks and the flush tracker.
    driver: MioDriver<Tracked<T>, Reports<F>>,
    poll: Poll,
    shared: Arc<Shared<T>>,
    /// Commands taken from the queue and not handled yet (still held in the queue's count).
    taken: VecDeque<Command<T>>,
    /// Commands handled since the queue's held count was last lowered, and their bytes.
    unreleased: usize,
    unreleased_bytes: usize,
    /// One record the core refused as `Full`, retried before handling more commands.
    stash: Option<Stashed<T>>,
    closing: bool,
    /// Who waits for the transactional operation under way (the core runs one at a time).
    txn_waiter: Option<TxnReply>,
    /// Flushes of a transactional producer, answered once every record is acknowledged.
    txn_flushes: Vec<FlushDone>,
    /// Records handed to the core so far (for [`InjectedPanics`]).
    handed: u64,
    injected: InjectedPanics,
    /// `injected.panic_at()`, compared with `handed` before every record.
    panic_at: u64,
    /// The message of a panic in the producer's own code: the thread is stopping because of
    /// it.
    panicked: Option<String>,
    /// Failing the records after that panic panicked too: the core is not touched again.
    core_broken: bool,
}

/// What one turn of the producer thread's loop found.
enum Turn {
    Again,
    Closed,
}

impl<T, F: FnMut(Delivery<T>)> Loop<T, F> {
    fn run(&mut self) {
        tracing::debug!("producer thread started");
        let mut events = Events::with_capacity(1024);
        loop {
            match contain(|| self.turn(&mut events)) {
                Ok(Turn::Again) => {}
                Ok(Turn::Closed) => break,
                Err(message) => {
                    self.after_panic(message);
                    break;
                }
            }
        }
        self.shutdown();
        tracing::debug!("producer thread stopped");
    }

    /// One turn: commands, the core's outputs, the sockets' events, the deadlines.
    fn turn(&mut self, events: &mut Events) -> Turn {
        self.shared.wake_pending.store(false, Ordering::SeqCst);
        self.retry_stash();
        let more = self.take_commands();
        // Records were handed over without acting on the core's outputs: once for all now.
        self.driver.drive(Instant::now());
        self.answer_transactions();
        if self.driver.is_closed() {
            return Turn::Closed;
        }
        let timeout = if more {
            Some(Duration::ZERO)
        } else {
            self.driver.next_timeout()
        };
        if let Err(e) = self.poll.poll(events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::error!(error = %e, "mio poll failed");
            }
            return Turn::Again;
        }
        for event in events.iter() {
            if self.driver.owns_token(event.token()) {
                self.driver.handle_event(event);
            }
        }
        self.driver.handle_timeout();
        self.answer_transactions();
        Turn::Again
    }

    /// Handles up to [`CHUNK`] commands, taking the whole queue (one lock, a swap) when
    /// the previous take is used up. Returns true when more may be waiting (the chunk was used
    /// up). Stops at a stashed record. Starts closing once the queue is found empty after `close` was
    /// requested, or when every handle is gone. The clock is read once per
    /// [`RELEASE_EVERY`] records.
    fn take_commands(&mut self) -> bool {
        if self.stash.is_some() {
            return false;
        }
        if self.taken.is_empty() {
            // The whole queue at once; every command taken before was handled and released.
            let refill = self
                .shared
                .queue
                .refill(&mut self.taken, self.driver.core().buffered_bytes());
            if self.taken.is_empty() {
                if self.shared.close_requested.load(Ordering::SeqCst) || refill.finished {
                    self.begin_close();
                }
                return false;
            }
        }
        // Records without a timestamp get the wall clock here rather than in `send`: one
        // reading per run of commands, as for the monotonic clock.
        let mut now = Instant::now();
        let mut wall_ms = timestamp::wall_clock_ms();
        let mut handled = 0;
        while self.stash.is_none() && handled < CHUNK {
            if self.handed == self.panic_at && matches!(self.taken.front(), Some(Command::Send(..)))
            {
                InjectedPanics::before_record(self.handed);
            }
            let Some(command) = self.taken.pop_front() else {
                break;
            };
            handled += 1;
            self.unreleased += 1;
            if self.unreleased == RELEASE_EVERY {
                self.release();
                now = Instant::now();
                wall_ms = timestamp::wall_clock_ms();
            }
            match command {
                Command::Send(mut record, opaque, bytes) => {
                    self.unreleased_bytes += bytes;
                    timestamp::fill_at(&mut record, wall_ms);
                    self.submit(now, record, opaque, bytes)
                }
                Command::Flush(done) if self.driver.core().config().transactional_id.is_some() => {
                    // Reports wait for the transaction's end: the flush is done once every
                    // record is acknowledged (as the Java client's, which waits for all).
                    self.driver.flush();
                    self.txn_flushes.push(done);
                    now = Instant::now();
                }
                Command::Flush(done) => {
                    self.driver.flush();
                    answer(self.driver.sink_mut().flushes.flush(done));
                    now = Instant::now();
                }
                Command::Metrics(reply) => {
                    let _ = reply.try_send(self.driver.metrics());
                }
                Command::Txn(op, reply) => {
                    self.start_transaction_op(op, reply);
                    now = Instant::now();
                }
            }
        }
        if let Some(s) = &self.stash {
            // Held aside: it stays counted until the core takes it.
            self.unreleased_bytes -= s.bytes;
        }
        if self.taken.is_empty() && self.unreleased > 0 {
            // All taken commands are handled: senders see the exact count again.
            self.release();
        }
        handled == CHUNK
    }

    /// Lowers the queue's held count by the commands handled since the last release (the
    /// records among them count in the core now).
    fn release(&mut self) {
        let core_bytes = self.driver.core().buffered_bytes();
        self.shared
            .queue
            .release(self.unreleased, self.unreleased_bytes, core_bytes);
        self.unreleased = 0;
        self.unreleased_bytes = 0;
    }

    /// Hands a transactional operation to the driver; its result is answered now when it was
    /// refused (or is local), else when the core reports it complete.
    fn start_transaction_op(&mut self, op: TxnCmd, reply: TxnReply) {
        let started = match op {
            TxnCmd::Init => self.driver.init_transactions(),
            TxnCmd::Begin => {
                let _ = reply.try_send(self.driver.begin_transaction());
                return;
            }
            TxnCmd::SendOffsets(offsets, group) => {
                self.driver.send_offsets_to_transaction(offsets, group)
            }
            TxnCmd::Commit => self.driver.commit_transaction(),
            TxnCmd::Abort => self.driver.abort_transaction(),
        };
        match started {
            Ok(()) => self.txn_waiter = Some(reply),
            Err(e) => {
                let _ = reply.try_send(Err(e));
            }
        }
    }

    /// Answers the waiter of each transactional operation the core completed, and the
    /// flushes of a transactional producer once every record is acknowledged; wakes nothing
    /// (senders never wait here), but lets the queue see the bytes reports freed.
    fn answer_transactions(&mut self) {
        let _ = self
            .shared
            .queue
            .settle(self.driver.core().buffered_bytes());
        if !self.txn_flushes.is_empty() && self.driver.core().unacknowledged_records() == 0 {
            answer(self.txn_flushes.drain(..));
        }
        while let Some(r) = self.driver.poll_transaction() {
            if let Some(w) = self.txn_waiter.take() {
                let _ = w.try_send(r.result);
            }
        }
    }

    fn begin_close(&mut self) {
        if !self.closing {
            self.closing = true;
            tracing::info!("closing the producer");
            self.driver.close();
        }
    }

    fn submit(&mut self, now: Instant, record: Record, opaque: T, bytes: usize) {
        let cohort = self.driver.sink_mut().flushes.accept();
        self.handed += 1;
        match self.driver.accept(now, record, Tracked { cohort, opaque }) {
            Ok(()) => {}
            Err(e) if e.reason == SendErrorReason::Full => {
                // Held back, no longer counted: it joins the cohort of the time it is retried.
                self.handed -= 1;
                answer(self.driver.sink_mut().flushes.reported(cohort));
                self.stash = Some(Stashed {
                    record: e.record,
                    opaque: e.opaque.opaque,
                    bytes,
                });
            }
            Err(e) => {
                answer(self.driver.sink_mut().flushes.reported(cohort));
                let error = ProduceError::Refused(Box::new(e.reason));
                let d = Delivery::failed(e.opaque.opaque, error, e.record);
                self.driver.sink_mut().hand_over(d);
            }
        }
    }

    /// Hands the record held aside to the core again; once the core took it, its bytes leave
    /// the command queue's count.
    fn retry_stash(&mut self) {
        if let Some(s) = self.stash.take() {
            let bytes = s.bytes;
            self.submit(Instant::now(), s.record, s.opaque, bytes);
            if self.stash.is_none() {
                let core_bytes = self.driver.core().buffered_bytes();
                self.shared.queue.release(0, bytes, core_bytes);
            }
        }
    }

    /// The producer's own code panicked (the core's, or this loop's): fails every record the
    /// core holds, with the panic's message, and closes it; if that panics too, the core is
    /// left alone (its records cannot be reported). The thread then stops
    /// ([`Loop::shutdown`]).
    fn after_panic(&mut self, message: String) {
        tracing::error!(
            %message,
            "the producer thread panicked in its own code; every record fails"
        );
        self.panicked = Some(message.clone());
        let injected = self.injected;
        let failed = contain(|| {
            injected.before_recovery();
            self.driver.core_mut().fail_after_panic(message);
            self.driver.drive(Instant::now());
            self.answer_transactions();
            self.driver.is_closed()
        });
        if failed != Ok(true) {
            tracing::error!(
                "failing the records after the panic failed too; \
                 the records the core held get no report"
            );
            self.core_broken = true;
        }
    }

    /// The core's last metrics and its transactional failure, as the thread stops; none when
    /// the core cannot be trusted to give them (after a panic in failing its records).
    fn last_words(&self) -> (Option<MetricsSnapshot>, Option<TransactionError>) {
        if self.core_broken {
            return (None, None);
        }
        contain(|| {
            (
                Some(self.driver.metrics()),
                self.driver.core().transaction_failure(),
            )
        })
        .unwrap_or((None, None))
    }

    /// After the core closed (or a panic stopped the loop): refuse new sends, fail what is
    /// still queued, answer flushes.
    fn shutdown(&mut self) {
        let (last, failure) = self.last_words();
        *self
            .shared
            .transaction_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = failure.clone();
        let stopped = failure.unwrap_or(TransactionError::Closed);
        *self
            .shared
            .final_metrics
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = last.clone();
        let queued = self.shared.queue.stop();
        // Records the core never took: closed, or failed with the panic that stopped the
        // thread (they surely never went out).
        let never_sent = match &self.panicked {
            Some(message) => ProduceError::Panicked {
                message: message.clone(),
                possibly_persisted: false,
            },
            None => ProduceError::Closed,
        };
        if let Some(s) = self.stash.take() {
            let d = Delivery::failed(s.opaque, never_sent.clone(), s.record);
            self.driver.sink_mut().hand_over(d);
        }
        let taken = std::mem::take(&mut self.taken);
        for command in taken.into_iter().chain(queued) {
            match command {
                Command::Send(record, opaque, _) => {
                    let d = Delivery::failed(opaque, never_sent.clone(), record);
                    self.driver.sink_mut().hand_over(d);
                }
                Command::Flush(done) => {
                    let _ = done.try_send(());
                }
                Command::Metrics(reply) => {
                    if let Some(m) = &last {
                        let _ = reply.try_send(m.clone());
                    }
                }
                Command::Txn(_, reply) => {
                    let _ = reply.try_send(Err(stopped.clone()));
                }
            }
        }
        if !self.core_broken {
            let _ = contain(|| self.answer_transactions());
        }
        answer(self.txn_flushes.drain(..));
        if let Some(w) = self.txn_waiter.take() {
            let _ = w.try_send(Err(stopped));
        }
        answer(self.driver.sink_mut().flushes.release_all());
    }
}
