//! The ready-made threaded producer: a thread running its own `mio::Poll` with a
//! [`MioDriver`], fed through a bounded command queue.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use mio::{Events, Poll, Waker};
use producer_core::{Config, Delivery, ProduceError, Record, SendErrorReason};

use crate::driver::{wall_clock_ms, DeliverySink, MioDriver, TokenRange};

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
    Send(Record, T),
    Flush(SyncSender<()>),
}

/// The command queue proper: what the handles push and the thread takes in bulk.
struct Queue<T> {
    cmds: VecDeque<Command<T>>,
    /// Set by the thread once it stopped taking commands: sends are refused from then on.
    /// Checked and set under the same lock as `cmds`, so no record can slip into the queue
    /// after the thread's final drain.
    stopped: bool,
}

/// What the handles and the thread share.
struct Shared<T> {
    queue: Mutex<Queue<T>>,
    /// Most records queued or taken by the thread and not yet handed to the driver.
    capacity: usize,
    /// Records the thread took from `queue` and has not handed to the driver yet (it lowers
    /// the count every [`RELEASE_EVERY`] records, so a sender may see it a little high).
    held: AtomicUsize,
    waker: Arc<Waker>,
    /// `close` was called.
    close_requested: AtomicBool,
    /// Every handle is gone: the thread closes the producer.
    handles_gone: AtomicBool,
    /// A wake-up is pending: senders skip the (syscall) wake while it is set.
    wake_pending: AtomicBool,
}

/// How many records the thread hands to the driver between two updates of [`Shared::held`]
/// (and two readings of the clock).
const RELEASE_EVERY: usize = 256;

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Queue<T>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

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

    fn is_stopped(&self) -> bool {
        self.lock().stopped
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
        self.shared.handles_gone.store(true, Ordering::SeqCst);
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
    /// for the thread (those in the queue plus those the thread took in its last bulk take and
    /// has not handed to the core yet); `on_delivery` receives every report on the producer thread. Fails if the
    /// `Poll`, its waker or the thread cannot be created.
    pub fn spawn<F>(config: Config, queue_capacity: usize, on_delivery: F) -> io::Result<Self>
    where
        F: FnMut(Delivery<T>) + Send + 'static,
    {
        let poll = Poll::new()?;
        let driver = MioDriver::with_sink(
            config,
            poll.registry(),
            TokenRange::new(mio::Token(0), 1024),
            None,
            Reports {
                on_delivery,
                flushes: FlushTracker::default(),
            },
        )?;
        let capacity = queue_capacity.max(1);
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                cmds: VecDeque::new(),
                stopped: false,
            }),
            capacity,
            held: AtomicUsize::new(0),
            waker: driver.waker().clone(),
            close_requested: AtomicBool::new(false),
            handles_gone: AtomicBool::new(false),
            wake_pending: AtomicBool::new(false),
        });
        let loop_shared = shared.clone();
        let handle = thread::Builder::new()
            .name("producer-mio".into())
            .spawn(move || {
                let mut state = Loop {
                    driver,
                    poll,
                    shared: loop_shared,
                    taken: VecDeque::with_capacity(CHUNK),
                    unreleased: 0,
                    stash: None,
                    closing: false,
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

    /// Queues a record with `opaque`, handed back in its report. Never blocks: when the queue
    /// is full the record comes back in [`SendError::Full`]; after `close`, in
    /// [`SendError::Closed`].
    pub fn send_with(&self, mut record: Record, opaque: T) -> Result<(), SendError<T>> {
        if record.timestamp.is_none() {
            record.timestamp = Some(wall_clock_ms());
        }
        let shared = &self.inner.shared;
        if shared.close_requested.load(Ordering::Relaxed) {
            return Err(SendError::Closed(record, opaque));
        }
        {
            let mut queue = shared.lock();
            if queue.stopped {
                return Err(SendError::Closed(record, opaque));
            }
            if queue.cmds.len() + shared.held.load(Ordering::Relaxed) >= shared.capacity {
                return Err(SendError::Full(record, opaque));
            }
            queue.cmds.push_back(Command::Send(record, opaque));
        }
        shared.wake();
        Ok(())
    }

    /// Queues many records at once: one lock and one wall-clock reading for the whole call
    /// (records without a timestamp all get the time of this call), instead of one each as
    /// with [`ThreadedProducer::send_with`]. Use it when records arrive in bursts (a consumer's
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
        let now = wall_clock_ms();
        let taken = {
            let mut queue = shared.lock();
            if queue.stopped {
                return Err(BatchClosed);
            }
            let used = queue.cmds.len() + shared.held.load(Ordering::Relaxed);
            let room = shared.capacity.saturating_sub(used);
            let n = room.min(records.len());
            queue
                .cmds
                .extend(records.drain(..n).map(|(mut record, opaque)| {
                    if record.timestamp.is_none() {
                        record.timestamp = Some(now);
                    }
                    Command::Send(record, opaque)
                }));
            n
        };
        if taken > 0 {
            shared.wake();
        }
        Ok(taken)
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
        {
            let mut queue = self.inner.shared.lock();
            if queue.stopped {
                return;
            }
            // Flushes are not counted against the capacity: each one blocks its caller, so
            // there are never more of them than threads.
            queue.cmds.push_back(Command::Flush(done_tx));
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
        self.inner.shared.close_requested.load(Ordering::SeqCst) || self.inner.shared.is_stopped()
    }
}

/// The opaque value inside the core: the caller's, plus the flush generation it was sent in.
struct Tracked<T> {
    generation: u64,
    opaque: T,
}

/// Knows when every record sent before a flush has its report: records are counted per
/// generation; each flush closes a generation and waits until it and the older ones are empty.
/// O(1) per record: the counts of the open generations sit in a deque that starts at `base`.
struct FlushTracker {
    /// The generation of `counts[0]`; every older generation is fully reported.
    base: u64,
    /// Unreported records per generation, from `base` to the current one (the last entry,
    /// always present).
    counts: VecDeque<usize>,
    waiters: VecDeque<(u64, SyncSender<()>)>,
}

impl Default for FlushTracker {
    fn default() -> Self {
        FlushTracker {
            base: 0,
            counts: VecDeque::from([0]),
            waiters: VecDeque::new(),
        }
    }
}

impl FlushTracker {
    /// The current generation.
    fn generation(&self) -> u64 {
        self.base + self.counts.len() as u64 - 1
    }

    fn accepted(&mut self) -> u64 {
        if let Some(n) = self.counts.back_mut() {
            *n += 1;
        }
        self.generation()
    }

    fn reported(&mut self, generation: u64) {
        let Some(index) = generation.checked_sub(self.base) else {
            return;
        };
        let Some(n) = self.counts.get_mut(index as usize) else {
            return;
        };
        *n = n.saturating_sub(1);
        if index == 0 && *n == 0 && !self.waiters.is_empty() {
            self.release();
        }
    }

    fn flush(&mut self, done: SyncSender<()>) {
        self.waiters.push_back((self.generation(), done));
        self.counts.push_back(0);
        self.release();
    }

    /// Drops the fully reported generations at the front and answers the flushes they end.
    fn release(&mut self) {
        while self.counts.len() > 1 && self.counts.front() == Some(&0) {
            self.counts.pop_front();
            self.base += 1;
        }
        let oldest = if self.counts.front().is_some_and(|n| *n > 0) {
            self.base
        } else {
            u64::MAX
        };
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

/// The thread's [`DeliverySink`]: each report goes straight from the core to the callback.
struct Reports<F> {
    on_delivery: F,
    flushes: FlushTracker,
}

impl<T, F: FnMut(Delivery<T>)> DeliverySink<Tracked<T>> for Reports<F> {
    fn deliver(&mut self, d: Delivery<Tracked<T>>) {
        let mut generation = 0;
        let d = d.map_opaque(|t| {
            generation = t.generation;
            t.opaque
        });
        (self.on_delivery)(d);
        self.flushes.reported(generation);
    }
}

/// Most commands handled per loop iteration; then the loop polls its sockets (without
/// sleeping) before handling more.
const CHUNK: usize = 4096;

/// The producer thread's state.
struct Loop<T, F: FnMut(Delivery<T>)> {
    /// The driver; its sink holds the callback and the flush tracker.
    driver: MioDriver<Tracked<T>, Reports<F>>,
    poll: Poll,
    shared: Arc<Shared<T>>,
    /// Commands taken from the queue a chunk at a time and not handled yet (counted in
    /// [`Shared::held`]).
    taken: VecDeque<Command<T>>,
    /// Commands handled since [`Shared::held`] was last lowered.
    unreleased: usize,
    /// One record the core refused as `Full`, retried before handling more commands.
    stash: Option<(Record, T)>,
    closing: bool,
}

impl<T, F: FnMut(Delivery<T>)> Loop<T, F> {
    fn run(&mut self) {
        tracing::debug!("producer thread started");
        let mut events = Events::with_capacity(1024);
        loop {
            self.shared.wake_pending.store(false, Ordering::SeqCst);
            if let Some((record, opaque)) = self.stash.take() {
                self.submit(Instant::now(), record, opaque);
            }
            let more = self.take_commands();
            // Records were handed over without acting on the core's outputs: once for all now.
            self.driver.drive(Instant::now());
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
        }
        self.shutdown();
        tracing::debug!("producer thread stopped");
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
            let mut queue = self.shared.lock();
            // The whole queue at once, by swapping it with the (empty) take buffer: no command
            // is moved, and the two buffers trade places, so both stay allocated and warm.
            std::mem::swap(&mut self.taken, &mut queue.cmds);
            // Every command taken before was handled: the count starts afresh.
            self.shared.held.store(self.taken.len(), Ordering::Relaxed);
            self.unreleased = 0;
            drop(queue);
            if self.taken.is_empty() {
                if self.shared.close_requested.load(Ordering::SeqCst)
                    || self.shared.handles_gone.load(Ordering::SeqCst)
                {
                    self.begin_close();
                }
                return false;
            }
        }
        let mut now = Instant::now();
        let mut handled = 0;
        while self.stash.is_none() && handled < CHUNK {
            let Some(cmd) = self.taken.pop_front() else {
                break;
            };
            handled += 1;
            self.unreleased += 1;
            if self.unreleased == RELEASE_EVERY {
                self.shared.held.fetch_sub(RELEASE_EVERY, Ordering::Relaxed);
                self.unreleased = 0;
                now = Instant::now();
            }
            match cmd {
                Command::Send(record, opaque) => self.submit(now, record, opaque),
                Command::Flush(done) => {
                    self.driver.flush();
                    self.driver.sink_mut().flushes.flush(done);
                    now = Instant::now();
                }
            }
        }
        if self.taken.is_empty() && self.unreleased > 0 {
            // All taken commands are handled: senders see the exact count again.
            self.shared
                .held
                .fetch_sub(self.unreleased, Ordering::Relaxed);
            self.unreleased = 0;
        }
        handled == CHUNK
    }

    fn begin_close(&mut self) {
        if !self.closing {
            self.closing = true;
            tracing::info!("closing the producer");
            self.driver.close();
        }
    }

    fn submit(&mut self, now: Instant, record: Record, opaque: T) {
        let generation = self.driver.sink_mut().flushes.accepted();
        match self
            .driver
            .accept(now, record, Tracked { generation, opaque })
        {
            Ok(()) => {}
            Err(e) if e.reason == SendErrorReason::Full => {
                self.driver.sink_mut().flushes.reported(generation);
                self.stash = Some((e.record, e.opaque.opaque));
            }
            Err(e) => {
                self.driver.sink_mut().flushes.reported(generation);
                let error = ProduceError::Refused(Box::new(e.reason));
                (self.driver.sink_mut().on_delivery)(Delivery::failed(
                    e.opaque.opaque,
                    error,
                    e.record,
                ));
            }
        }
    }

    /// After the core closed: refuse new sends, fail what is still queued, answer flushes.
    fn shutdown(&mut self) {
        let queued = {
            let mut queue = self.shared.lock();
            queue.stopped = true;
            std::mem::take(&mut queue.cmds)
        };
        if let Some((record, opaque)) = self.stash.take() {
            (self.driver.sink_mut().on_delivery)(Delivery::failed(
                opaque,
                ProduceError::Closed,
                record,
            ));
        }
        let taken = std::mem::take(&mut self.taken);
        for cmd in taken.into_iter().chain(queued) {
            match cmd {
                Command::Send(record, opaque) => (self.driver.sink_mut().on_delivery)(
                    Delivery::failed(opaque, ProduceError::Closed, record),
                ),
                Command::Flush(done) => {
                    let _ = done.try_send(());
                }
            }
        }
        self.driver.sink_mut().flushes.release_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(rx: &mpsc::Receiver<()>) -> bool {
        rx.try_recv().is_ok()
    }

    #[test]
    fn flush_waits_for_its_generation_and_older_ones() {
        let mut t = FlushTracker::default();
        let a = t.accepted();
        let b = t.accepted();
        assert_eq!((a, b), (0, 0));
        let (tx1, rx1) = mpsc::sync_channel(1);
        t.flush(tx1);
        let c = t.accepted();
        assert_eq!(c, 1);
        let (tx2, rx2) = mpsc::sync_channel(1);
        t.flush(tx2);
        // Generation 1 completes first: the second flush still waits for generation 0.
        t.reported(c);
        assert!(!answered(&rx1) && !answered(&rx2));
        t.reported(a);
        assert!(!answered(&rx1));
        t.reported(b);
        assert!(
            answered(&rx1),
            "first flush answered once generation 0 is reported"
        );
        assert!(
            answered(&rx2),
            "second flush answered: generation 1 was already empty"
        );
        assert_eq!(t.counts.len(), 1, "only the current generation is kept");
        assert_eq!(t.generation(), 2);
    }

    #[test]
    fn flush_with_nothing_outstanding_answers_at_once() {
        let mut t = FlushTracker::default();
        let (tx, rx) = mpsc::sync_channel(1);
        t.flush(tx);
        assert!(answered(&rx));
        // A later record does not count against the answered flush, and a stray report for
        // an old generation is ignored.
        let g = t.accepted();
        t.reported(0);
        let (tx, rx) = mpsc::sync_channel(1);
        t.flush(tx);
        assert!(!answered(&rx));
        t.reported(g);
        assert!(answered(&rx));
    }

    #[test]
    fn release_all_answers_every_waiter() {
        let mut t = FlushTracker::default();
        t.accepted();
        let (tx, rx) = mpsc::sync_channel(1);
        t.flush(tx);
        assert!(!answered(&rx));
        t.release_all();
        assert!(answered(&rx));
    }
}
