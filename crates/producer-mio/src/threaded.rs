//! The ready-made threaded producer: a thread running its own `mio::Poll` with a
//! [`MioDriver`], fed through a bounded command queue.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::Duration;

use mio::{Events, Poll, Waker};
use producer_core::{Config, Delivery, DeliveryFailure, ProduceError, Record, SendErrorReason};

use crate::driver::{wall_clock_ms, MioDriver, TokenRange};

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
    Send(Record, T),
    Flush(SyncSender<()>),
}

/// What the handles and the thread share.
struct Shared {
    waker: Arc<Waker>,
    /// Set by the thread once it stopped taking commands: sends are refused from then on. The
    /// lock makes "check, then enqueue" atomic against the thread's final drain, so no record
    /// can slip into the queue after it.
    stopped: RwLock<bool>,
    /// `close` was called.
    close_requested: AtomicBool,
    /// A wake-up is pending: senders skip the (syscall) wake while it is set.
    wake_pending: AtomicBool,
}

impl Shared {
    fn wake(&self) {
        if !self.wake_pending.swap(true, Ordering::SeqCst) {
            if let Err(e) = self.waker.wake() {
                tracing::warn!(error = %e, "cannot wake the producer thread");
            }
        }
    }
}

struct Inner<T> {
    tx: SyncSender<Command<T>>,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: ThreadId,
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
/// A record without a timestamp gets the wall clock when `send` is called.
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
    /// for the thread; `on_delivery` receives every report on the producer thread. Fails if the
    /// `Poll`, its waker or the thread cannot be created.
    pub fn spawn<F>(config: Config, queue_capacity: usize, on_delivery: F) -> io::Result<Self>
    where
        F: FnMut(Delivery<T>) + Send + 'static,
    {
        let poll = Poll::new()?;
        let driver = MioDriver::<Tracked<T>>::new(
            config,
            poll.registry(),
            TokenRange::new(mio::Token(0), 1024),
        )?;
        let shared = Arc::new(Shared {
            waker: driver.waker().clone(),
            stopped: RwLock::new(false),
            close_requested: AtomicBool::new(false),
            wake_pending: AtomicBool::new(false),
        });
        let capacity = queue_capacity.max(1);
        let (tx, rx) = mpsc::sync_channel(capacity);
        let loop_shared = shared.clone();
        let handle = thread::Builder::new()
            .name("producer-mio".into())
            .spawn(move || {
                let mut state = Loop {
                    driver,
                    poll,
                    rx,
                    shared: loop_shared,
                    on_delivery,
                    stash: None,
                    flushes: FlushTracker::default(),
                    closing: false,
                    batch: capacity,
                };
                state.run();
            })?;
        let thread_id = handle.thread().id();
        Ok(ThreadedProducer {
            inner: Arc::new(Inner {
                tx,
                shared,
                thread: Mutex::new(Some(handle)),
                thread_id,
            }),
        })
    }

    /// Queues a record with `opaque`, handed back in its report. Never blocks: when the queue
    /// is full the record comes back in [`SendError::Full`]; after `close`, in
    /// [`SendError::Closed`].
    pub fn send_with(&self, mut record: Record, opaque: T) -> Result<(), SendError<T>> {
        if record.timestamp.is_none() {
            record.timestamp = Some(wall_clock_ms());
        }
        let shared = &self.inner.shared;
        let stopped = shared.stopped.read().unwrap_or_else(|e| e.into_inner());
        if *stopped || shared.close_requested.load(Ordering::SeqCst) {
            return Err(SendError::Closed(record, opaque));
        }
        let result = self.inner.tx.try_send(Command::Send(record, opaque));
        drop(stopped);
        match result {
            Ok(()) => {
                shared.wake();
                Ok(())
            }
            Err(TrySendError::Full(Command::Send(r, o))) => Err(SendError::Full(r, o)),
            Err(TrySendError::Disconnected(Command::Send(r, o))) => Err(SendError::Closed(r, o)),
            Err(
                TrySendError::Full(Command::Flush(_))
                | TrySendError::Disconnected(Command::Flush(_)),
            ) => {
                // try_send hands back what it was given: a Send.
                Ok(())
            }
        }
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
        if *self
            .inner
            .shared
            .stopped
            .read()
            .unwrap_or_else(|e| e.into_inner())
        {
            return;
        }
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        // Blocking send: a full queue only delays the flush. Fails once the thread is gone.
        if self.inner.tx.send(Command::Flush(done_tx)).is_err() {
            return;
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

    /// Whether `close` was called or the producer thread ended.
    pub fn is_closed(&self) -> bool {
        self.inner.shared.close_requested.load(Ordering::SeqCst)
            || *self
                .inner
                .shared
                .stopped
                .read()
                .unwrap_or_else(|e| e.into_inner())
    }
}

/// The opaque value inside the core: the caller's, plus the flush generation it was sent in.
struct Tracked<T> {
    generation: u64,
    opaque: T,
}

/// Knows when every record sent before a flush has its report: records are counted per
/// generation; each flush closes a generation and waits until it and the older ones are empty.
#[derive(Default)]
struct FlushTracker {
    generation: u64,
    outstanding: BTreeMap<u64, usize>,
    waiters: VecDeque<(u64, SyncSender<()>)>,
}

impl FlushTracker {
    fn accepted(&mut self) -> u64 {
        *self.outstanding.entry(self.generation).or_insert(0) += 1;
        self.generation
    }

    fn reported(&mut self, generation: u64) {
        if let Some(n) = self.outstanding.get_mut(&generation) {
            *n -= 1;
            if *n == 0 {
                self.outstanding.remove(&generation);
                self.release();
            }
        }
    }

    fn flush(&mut self, done: SyncSender<()>) {
        self.waiters.push_back((self.generation, done));
        self.generation += 1;
        self.release();
    }

    fn release(&mut self) {
        let oldest = self.outstanding.keys().next().copied().unwrap_or(u64::MAX);
        while self.waiters.front().is_some_and(|(g, _)| *g < oldest) {
            if let Some((_, done)) = self.waiters.pop_front() {
                let _ = done.try_send(());
            }
        }
    }

    fn release_all(&mut self) {
        for (_, done) in self.waiters.drain(..) {
            let _ = done.try_send(());
        }
    }
}

/// The producer thread's state.
struct Loop<T, F> {
    driver: MioDriver<Tracked<T>>,
    poll: Poll,
    rx: Receiver<Command<T>>,
    shared: Arc<Shared>,
    on_delivery: F,
    /// One record the core refused as `Full`, retried before reading more commands.
    stash: Option<(Record, T)>,
    flushes: FlushTracker,
    closing: bool,
    /// Most commands taken per loop iteration (then the loop polls I/O before taking more).
    batch: usize,
}

impl<T, F: FnMut(Delivery<T>)> Loop<T, F> {
    fn run(&mut self) {
        tracing::debug!("producer thread started");
        let mut events = Events::with_capacity(1024);
        loop {
            self.shared.wake_pending.store(false, Ordering::SeqCst);
            if let Some((record, opaque)) = self.stash.take() {
                self.submit(record, opaque);
            }
            let more = self.take_commands();
            self.deliver();
            if self.driver.is_closed() {
                break;
            }
            let timeout = if more {
                Some(Duration::ZERO)
            } else {
                self.driver.next_timeout()
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::error!(error = %e, "mio poll failed");
                }
                continue;
            }
            for event in events.iter() {
                if self.driver.owns_token(event.token()) {
                    self.driver.handle_event(event);
                }
            }
            self.driver.handle_timeout();
            self.deliver();
        }
        self.shutdown();
        tracing::debug!("producer thread stopped");
    }

    /// Takes commands until the queue is empty, a record is stashed, or `batch` were taken
    /// (returns true then: more may be waiting). Starts closing once the queue is found empty
    /// after `close` was requested, or when every handle is gone.
    fn take_commands(&mut self) -> bool {
        let mut taken = 0;
        while self.stash.is_none() {
            if taken == self.batch {
                return true;
            }
            match self.rx.try_recv() {
                Ok(Command::Send(record, opaque)) => {
                    taken += 1;
                    self.submit(record, opaque);
                }
                Ok(Command::Flush(done)) => {
                    self.driver.flush();
                    self.flushes.flush(done);
                }
                Err(TryRecvError::Empty) => {
                    if self.shared.close_requested.load(Ordering::SeqCst) {
                        self.begin_close();
                    }
                    break;
                }
                Err(TryRecvError::Disconnected) => {
                    self.begin_close();
                    break;
                }
            }
        }
        false
    }

    fn begin_close(&mut self) {
        if !self.closing {
            self.closing = true;
            tracing::info!("closing the producer");
            self.driver.close();
        }
    }

    fn submit(&mut self, record: Record, opaque: T) {
        let generation = self.flushes.accepted();
        match self.driver.send(record, Tracked { generation, opaque }) {
            Ok(()) => {}
            Err(e) if e.reason == SendErrorReason::Full => {
                self.flushes.reported(generation);
                self.stash = Some((e.record, e.opaque.opaque));
            }
            Err(e) => {
                self.flushes.reported(generation);
                let error = match e.reason {
                    SendErrorReason::RecordTooLarge { size, .. } => {
                        ProduceError::RecordTooLarge { size }
                    }
                    SendErrorReason::Fatal(err) => err,
                    SendErrorReason::InvalidPartition(partition) => {
                        ProduceError::UnknownPartition {
                            partition,
                            count: -1,
                        }
                    }
                    _ => ProduceError::Closed,
                };
                (self.on_delivery)(Delivery {
                    opaque: e.opaque.opaque,
                    result: Err(DeliveryFailure {
                        error,
                        record: e.record,
                    }),
                });
            }
        }
    }

    fn deliver(&mut self) {
        while let Some(d) = self.driver.poll_delivery() {
            let Delivery {
                opaque: Tracked { generation, opaque },
                result,
            } = d;
            (self.on_delivery)(Delivery { opaque, result });
            self.flushes.reported(generation);
        }
    }

    /// After the core closed: refuse new sends, fail what is still queued, answer flushes.
    fn shutdown(&mut self) {
        *self
            .shared
            .stopped
            .write()
            .unwrap_or_else(|e| e.into_inner()) = true;
        if let Some((record, opaque)) = self.stash.take() {
            (self.on_delivery)(Delivery {
                opaque,
                result: Err(DeliveryFailure {
                    error: ProduceError::Closed,
                    record,
                }),
            });
        }
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Send(record, opaque) => (self.on_delivery)(Delivery {
                    opaque,
                    result: Err(DeliveryFailure {
                        error: ProduceError::Closed,
                        record,
                    }),
                }),
                Command::Flush(done) => {
                    let _ = done.try_send(());
                }
            }
        }
        self.flushes.release_all();
    }
}
