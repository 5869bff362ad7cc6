//! The ready-made threaded producer: a thread running its own `mio::Poll` with a
//! [`MioDriver`], fed through a bounded command queue.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use mio::{Events, Poll, Waker};
use producer_core::{
    Config, Delivery, Diagnosis, Event, MetricsSnapshot, OAuthToken, Partitioner, Record,
    TransactionError,
};
use producer_driver::panic::InjectedPanics;
use producer_driver::{
    contain, step, Answered, Channel, Command, CommandQueue, CoreOf, Driven, DriverLoop, Host,
    Intake, Interceptor, Interceptors, LastWords, OnFull, Refused, Tracked, TransactionCall,
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
pub enum TrySendError<T = ()> {
    /// The command queue is full (the producer thread is behind, or the core's buffer is full
    /// and the thread is waiting for deliveries). Retry later, or drop the record.
    #[error("producer queue full")]
    Full(Record, T),
    /// [`ThreadedProducer::close`] was called (or the producer thread ended).
    #[error("producer closed")]
    Closed(Record, T),
}

impl<T> TrySendError<T> {
    /// The record handed back.
    pub fn record(&self) -> &Record {
        match self {
            TrySendError::Full(r, _) | TrySendError::Closed(r, _) => r,
        }
    }

    /// The record and opaque value handed back.
    pub fn into_parts(self) -> (Record, T) {
        match self {
            TrySendError::Full(r, o) | TrySendError::Closed(r, o) => (r, o),
        }
    }
}

/// What the handles put in the thread's queue.
pub(crate) type Cmd<T> = Command<MioReplies<T>>;

/// How the thread answers the handles' waiting calls: down a channel of one.
pub(crate) type MioReplies<T> = Answered<T, SyncChannel>;

/// `std::sync::mpsc::sync_channel(1)`: the handle blocks on its receiver.
pub(crate) struct SyncChannel;

impl Channel for SyncChannel {
    type Sender<V> = SyncSender<V>;

    fn send<V>(sender: SyncSender<V>, value: V) {
        let _ = sender.try_send(value);
    }
}

/// What the handles and the thread share.
struct Shared<T> {
    /// Records and flushes for the thread. The thread lowers its count of held commands every
    /// 256 commands ([`INTAKE`]), so a sender may see the queue a little fuller than it is.
    queue: CommandQueue<Cmd<T>>,
    waker: Arc<Waker>,
    /// `close` was called.
    close_requested: AtomicBool,
    /// A wake-up is pending: senders skip the (syscall) wake while it is set.
    wake_pending: AtomicBool,
    /// The core's metrics and transactional failure as the thread stopped (set before the
    /// queue stops): calls after it get these.
    last_words: LastWords,
    /// The producer has a `transactional.id`: the handles have the transactional API.
    transactional: bool,
    /// Where [`ThreadedProducer::send_timeout`] waits for room; the thread says when there is.
    space: Arc<Space>,
    /// The send calls stamp the caller's OpenTelemetry context on each record
    /// ([`ThreadedBuilder::opentelemetry`]).
    #[cfg(feature = "opentelemetry")]
    stamp_trace_context: bool,
}

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
///   [`TrySendError::Full`]. [`ThreadedProducer::send_timeout`] waits for room instead, up to a
///   timeout. Behind the queue, the core's own limits (`buffer_memory`,
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
        ThreadedBuilder::new(config)
    }

    /// Queues a record with `opaque`, handed back in its report. Never blocks: when the queue
    /// is full the record comes back in [`TrySendError::Full`]; after `close`, in
    /// [`TrySendError::Closed`].
    pub fn send_with(&self, record: Record, opaque: T) -> Result<(), TrySendError<T>> {
        #[cfg(feature = "opentelemetry")]
        if self.inner.shared.stamp_trace_context {
            return self.send_stamped(record, opaque);
        }
        self.queue_record(record, opaque, OnFull::Return)
    }

    /// [`ThreadedProducer::send_with`] for a producer that traces: the caller's context
    /// stamped on the record first. Out of line, so that the record path of a producer that
    /// does not trace stays one branch (a record borrowed mutably there was copied once more).
    #[cfg(feature = "opentelemetry")]
    #[cold]
    #[inline(never)]
    fn send_stamped(&self, mut record: Record, opaque: T) -> Result<(), TrySendError<T>> {
        producer_driver::otel::inject_current_context(&mut record);
        self.queue_record(record, opaque, OnFull::Return)
    }

    /// Queues `record` as it is (see [`ThreadedProducer::send_with`]). `on_full`: what the
    /// caller does if refused; with [`OnFull::Wait`] it counts as waiting for room (the thread
    /// then wakes [`Shared::space`] when there is room: see [`ThreadedProducer::send_timeout`]).
    #[inline(always)]
    fn queue_record(
        &self,
        record: Record,
        opaque: T,
        on_full: OnFull,
    ) -> Result<(), TrySendError<T>> {
        let shared = &self.inner.shared;
        if shared.close_requested.load(Ordering::Relaxed) {
            return Err(TrySendError::Closed(record, opaque));
        }
        let bytes = charge::<T>(&record);
        let sent = (record, opaque);
        match shared
            .queue
            .push(sent, bytes, on_full, |(record, opaque)| Command::Send {
                record,
                opaque,
                bytes,
            }) {
            Ok(_) => {
                shared.wake();
                Ok(())
            }
            Err(Refused::Full((record, opaque))) => Err(TrySendError::Full(record, opaque)),
            Err(Refused::Stopped((record, opaque))) => Err(TrySendError::Closed(record, opaque)),
        }
    }

    /// Queues a record (see [`ThreadedProducer::send_with`]); its report carries
    /// `T::default()`.
    pub fn send(&self, record: Record) -> Result<(), TrySendError<T>>
    where
        T: Default,
    {
        self.send_with(record, T::default())
    }

    /// Queues a record with `opaque`, blocking while the queue is full for at most `timeout`
    /// (as Java's `send` blocks up to `max.block.ms`): the call to use when the application
    /// would rather wait than handle [`TrySendError::Full`] itself. It waits until the
    /// producer thread says there is room (deliveries freed space in `buffer_memory`, or the
    /// queue-delay limit let more in: see `queue.delay.target.ms`), then tries again; no
    /// polling. The wait counts in the producer's metrics as a `send` held back
    /// (`buffer_wait_ns` or `queue_delay_wait_ns`). After `timeout` with no room the record
    /// comes back in [`TrySendError::Full`]; once `close` is called (also while it waits), or
    /// if the thread ended, in [`TrySendError::Closed`]. `Duration::ZERO` makes it [`ThreadedProducer::send_with`];
    /// `Duration::MAX` waits as long as it takes.
    /// Must not be called from the delivery callback (the thread that frees the room would
    /// wait for itself): there it returns as `send_with` does, without waiting.
    pub fn send_timeout(
        &self,
        record: Record,
        opaque: T,
        timeout: Duration,
    ) -> Result<(), TrySendError<T>> {
        // Stamped once, before the first try: the tries after it queue the record as it is.
        #[cfg(feature = "opentelemetry")]
        let record = {
            let mut record = record;
            if self.inner.shared.stamp_trace_context {
                producer_driver::otel::inject_current_context(&mut record);
            }
            record
        };
        // `None`: a timeout past any instant (`Duration::MAX`), no deadline.
        let deadline = Instant::now().checked_add(timeout);
        let may_wait = !timeout.is_zero() && thread::current().id() != self.inner.thread_id;
        let space = &self.inner.shared.space;
        let look = if may_wait {
            OnFull::Look
        } else {
            OnFull::Return
        };
        let mut sent = self.queue_record(record, opaque, look);
        loop {
            let (record, opaque) = match sent {
                Err(TrySendError::Full(record, opaque)) if may_wait => (record, opaque),
                other => return other,
            };
            // The generation read before the look that registers the caller as waiting: a
            // wake-up after that look moves it, and `wait_past` returns at once.
            let seen = space.generation();
            let (record, opaque) = match self.queue_record(record, opaque, OnFull::Wait) {
                Err(TrySendError::Full(record, opaque)) => (record, opaque),
                other => return other,
            };
            let woken = space.wait_past(seen, deadline);
            // Woken, or the time is up: one more look either way (the thread wakes waiters
            // only once a good share of the queue is free; less room may still take it).
            sent = self.queue_record(record, opaque, OnFull::Look);
            if !woken || deadline.is_some_and(|d| Instant::now() >= d) {
                return sent;
            }
        }
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

    /// Stops intake (later sends return [`TrySendError::Closed`]), then waits until every record
    /// has been delivered or failed, the connections are closed and the thread has exited.
    /// Records queued before the call are still sent. Called from the delivery callback it
    /// starts the close and returns without waiting.
    pub fn close(&self) {
        self.inner
            .shared
            .close_requested
            .store(true, Ordering::SeqCst);
        // Senders waiting for room in `send_timeout` see the close at once.
        self.inner.shared.space.freed();
        self.inner.shared.wake();
        self.join();
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
        self.inner.shared.last_words.metrics()
    }

    /// "Why is it slow?": a verdict per broker over the last sample window (see
    /// [`producer_core::diagnosis`]), from a [`ThreadedProducer::metrics`] snapshot (it blocks
    /// as that does, and is `None` when that is). Call it during or right after the run to
    /// explain: a progress line, the end of a run.
    pub fn diagnose(&self) -> Option<Diagnosis> {
        self.metrics().map(|m| m.diagnose())
    }

    /// Queues a call that waits for the producer thread (`command` made with the sending half
    /// of a channel of one) and wakes the thread; the receiving half, or `None` when called on
    /// the producer thread (it cannot wait for itself) or after the thread stopped.
    pub(crate) fn queue_call<V>(
        &self,
        command: impl FnOnce(SyncSender<V>) -> Cmd<T>,
    ) -> Option<mpsc::Receiver<V>> {
        if thread::current().id() == self.inner.thread_id {
            return None;
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.inner.shared.queue.push_control(command(tx)).ok()?;
        self.inner.shared.wake();
        Some(rx)
    }

    /// Whether the producer has a `transactional.id` (and so
    /// [`ThreadedProducer::transactions`]).
    pub(crate) fn is_transactional(&self) -> bool {
        self.inner.shared.transactional
    }

    /// Queues a transactional operation and blocks until its result (see
    /// [`crate::ThreadedTransactions`]). From the delivery callback (the producer thread) it
    /// cannot wait: refused with [`TransactionError::InProgress`].
    pub(crate) fn transaction_call(&self, call: TransactionCall) -> Result<(), TransactionError> {
        if thread::current().id() == self.inner.thread_id {
            return Err(TransactionError::InProgress {
                operation: call.operation(),
            });
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let shared = &self.inner.shared;
        if shared
            .queue
            .push_control(Command::Transaction(call, tx))
            .is_err()
        {
            return Err(shared.last_words.transaction_error());
        }
        shared.wake();
        rx.recv()
            .unwrap_or_else(|_| Err(shared.last_words.transaction_error()))
    }

    /// Queues the command `make` builds around a reply channel and, unless called from the
    /// delivery callback (the producer thread, which cannot wait for itself: then `None`, the
    /// command applied after the callback returns), blocks until it is answered. `None` too
    /// once the thread has stopped. With `closing`, later sends are refused from now on.
    pub(crate) fn ask<V>(
        &self,
        closing: bool,
        make: impl FnOnce(SyncSender<V>) -> Cmd<T>,
    ) -> Option<V> {
        let shared = &self.inner.shared;
        if closing {
            shared.close_requested.store(true, Ordering::SeqCst);
        }
        let (tx, rx) = mpsc::sync_channel(1);
        if shared.queue.push_control(make(tx)).is_err() {
            return None;
        }
        shared.wake();
        if thread::current().id() == self.inner.thread_id {
            return None;
        }
        rx.recv().ok()
    }

    /// Waits for the producer thread to end (after a close). Not from the producer thread.
    pub(crate) fn join(&self) {
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

    /// Whether `close` was called or the producer thread ended.
    pub fn is_closed(&self) -> bool {
        self.inner.shared.close_requested.load(Ordering::SeqCst)
            || self.inner.shared.queue.is_stopped()
    }
}

mod batch;
mod builder;
mod space;

use builder::OnEvent;
pub use builder::ThreadedBuilder;
use space::Space;

/// However the producer thread ends (a panic its loop could not contain), the handles stop
/// waiting: the queue stops (the commands still in it are dropped, so their waiters return)
/// and later sends are refused.
struct StopOnDrop<T>(Arc<Shared<T>>);

impl<T> Drop for StopOnDrop<T> {
    fn drop(&mut self) {
        self.0.close_requested.store(true, Ordering::SeqCst);
        drop(self.0.queue.stop());
        // Senders waiting for room see the queue stopped.
        self.0.space.freed();
    }
}

/// What `record` counts against `buffer_memory` in the command queue: what the core will
/// charge for it.
#[inline]
fn charge<T>(record: &Record) -> usize {
    producer_driver::DriverLoop::<Reports<T, fn(Delivery<T>)>>::charge(record)
}

/// The thread's [`Host`]: each report goes straight from the core to the delivery callback,
/// each event to the event callback.
struct Reports<T, F> {
    on_delivery: F,
    on_event: Option<OnEvent>,
    /// Shared with the handles: woken when senders waiting for room may go.
    space: Arc<Space>,
    _reports: std::marker::PhantomData<fn(T)>,
}

impl<T, F: FnMut(Delivery<T>)> Host for Reports<T, F> {
    type Replies = MioReplies<T>;

    #[inline]
    fn deliver(&mut self, delivery: Delivery<T>) {
        (self.on_delivery)(delivery)
    }

    fn show(&mut self, event: &Event) {
        if let Some(f) = self.on_event.as_mut() {
            f(event)
        }
    }

    fn wake_senders(&mut self) {
        self.space.freed();
    }
}

/// The command layer is the driver's sink: reports reach it, and the callbacks, the moment
/// the core produces them.
impl<T, F: FnMut(Delivery<T>)> DeliverySink<Tracked<T>> for DriverLoop<Reports<T, F>> {
    #[inline]
    fn deliver(&mut self, d: Delivery<Tracked<T>>) {
        DriverLoop::deliver(self, d);
    }

    fn event(&mut self, event: &Event) {
        // The driver has logged it.
        DriverLoop::event(self, event);
    }
}

/// Most commands handled per loop iteration; then the loop polls its sockets (without
/// sleeping) before handling more. The queue's held count is lowered every 256 commands (and
/// the clock read again).
const INTAKE: Intake = Intake {
    per_call: 4096,
    release_every: 256,
};

/// The producer thread's state.
struct Loop<T, F: FnMut(Delivery<T>)> {
    /// The driver; its sink is the command layer.
    driver: MioDriver<Tracked<T>, DriverLoop<Reports<T, F>>>,
    poll: Poll,
    shared: Arc<Shared<T>>,
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
        while let Some(Turn::Again) = step(self, |l| l.turn(&mut events)) {}
        self.shutdown();
        tracing::debug!("producer thread stopped");
    }

    /// One turn: commands, the core's outputs, the sockets' events, the deadlines.
    fn turn(&mut self, events: &mut Events) -> Turn {
        self.shared.wake_pending.store(false, Ordering::SeqCst);
        let more = self.take_commands();
        // Records were handed over without acting on the core's outputs: once for all now.
        self.act_on_outputs();
        if self.driver.is_closed() {
            return Turn::Closed;
        }
        let timeout = if more {
            Some(Duration::ZERO)
        } else {
            // The deadlines of the timed commands behind a record held aside, too.
            let behind = self.driver.parts_mut().1.next_deadline();
            let behind = behind.map(|at| at.saturating_duration_since(Instant::now()));
            match (self.driver.next_timeout(), behind) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
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
        self.settle();
        Turn::Again
    }

    /// Retries the record held aside, then hands the queued commands to the command layer;
    /// starts closing once the queue is found empty after `close` was requested. Returns
    /// whether more commands wait.
    fn take_commands(&mut self) -> bool {
        let (core, layer) = self.driver.parts_mut();
        let queue = &self.shared.queue;
        layer.retry_stash(core, queue, Instant::now());
        if !layer.reads_commands() {
            if layer.scans_commands() {
                // Behind a record held aside: read only for the deadlines (a close's may
                // end the record held, and then the commands are handled again).
                return layer.take_commands(core, queue, INTAKE, Instant::now);
            }
            return false;
        }
        let more = layer.take_commands(core, queue, INTAKE, Instant::now);
        if !more && layer.reads_commands() && self.shared.close_requested.load(Ordering::SeqCst) {
            layer.close(core, Instant::now());
        }
        more
    }

    /// Answers the waiter of each transactional operation the core completed, lets the queue
    /// see the bytes reports freed, and answers the flushes of a transactional producer once
    /// every record is acknowledged; flushes again when metadata arrived for a pending flush.
    fn settle(&mut self) {
        loop {
            while let Some(r) = self.driver.poll_transaction() {
                self.driver.sink_mut().transaction_done(r);
            }
            let (core, layer) = self.driver.parts_mut();
            if !layer.settle(core, &self.shared.queue) {
                return;
            }
            self.driver.flush();
        }
    }

    /// After the core closed (or a panic stopped the loop): refuse new sends, fail what is
    /// still queued, answer every waiting call.
    fn shutdown(&mut self) {
        if self.driver.sink().core_usable() {
            let _ = contain(|| self.settle());
        }
        let (core, layer) = self.driver.parts_mut();
        layer.shutdown(core, &self.shared.queue, &self.shared.last_words);
    }
}

impl<T, F: FnMut(Delivery<T>)> Driven for Loop<T, F> {
    type Host = Reports<T, F>;

    fn parts(&mut self) -> (&mut CoreOf<Reports<T, F>>, &mut DriverLoop<Reports<T, F>>) {
        self.driver.parts_mut()
    }

    fn act_on_outputs(&mut self) {
        self.driver.drive(Instant::now());
        self.settle();
    }
}
