//! Where a [`crate::DeliveryFuture`]'s report waits: a one-shot slot, carved out of blocks of
//! [`SLOTS`] that each sending thread allocates.
//!
//! A future per record used to cost a `tokio::sync::oneshot` per record: one allocation on the
//! sending thread, freed on whichever thread drops the future last (in an application that
//! awaits its futures on another task, another thread). A thread that allocates what other
//! threads free never finds memory in its own allocator cache: that allocation and its free
//! were about an eighth of the instructions of a record sent with `send(record).await`
//! (callgrind on `bench_e2e worker --producer tokio-idem`). Here a thread allocates one block
//! for [`SLOTS`] records, freed when the last end of its slots is dropped.
//!
//! Each slot has one [`Sender`] (the producer task reports through it, once) and one
//! [`Receiver`] (inside the future). They meet under the slot's own lock, which neither holds
//! for more than a few instructions; the value and the waker are handed over under it, and a
//! wake-up happens after it is released. Whichever of a value and a gone receiver comes second
//! drops the value at once, so a record handed back in a failure report is not kept for the
//! rest of the block.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// Slots per block: one allocation per this many futures sent from one thread.
pub(crate) const SLOTS: usize = 64;

/// What one slot holds, under its lock.
struct SlotState<T> {
    /// The value, between its sending and its taking.
    value: Option<T>,
    /// The waker of a receiver polled before the value came.
    waker: Option<Waker>,
    /// The sender was dropped without sending.
    closed: bool,
    /// The receiver was dropped: a value sent from now on is dropped at once.
    receiver_gone: bool,
}

struct Slot<T>(Mutex<SlotState<T>>);

impl<T> Slot<T> {
    fn lock(&self) -> MutexGuard<'_, SlotState<T>> {
        // Every change under the lock is a single assignment: a panic elsewhere while it was
        // held leaves it consistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// [`SLOTS`] slots in one allocation; every end of a slot holds the block.
struct Block<T> {
    slots: [Slot<T>; SLOTS],
}

impl<T> Block<T> {
    fn new() -> Arc<Block<T>> {
        Arc::new(Block {
            slots: std::array::from_fn(|_| {
                Slot(Mutex::new(SlotState {
                    value: None,
                    waker: None,
                    closed: false,
                    receiver_gone: false,
                }))
            }),
        })
    }
}

/// The block a thread hands slots out of, and the index of the next one. Opaque outside this
/// module: each value type keeps one per thread (see [`SlotSource`]).
pub(crate) struct Cursor<T> {
    block: std::cell::RefCell<Option<(Arc<Block<T>>, usize)>>,
}

impl<T> Cursor<T> {
    /// A cursor with no block yet (for a `thread_local!`).
    pub(crate) const fn new() -> Self {
        Cursor {
            block: std::cell::RefCell::new(None),
        }
    }

    /// The next slot: the block and the slot's index in it.
    fn next(&self) -> (Arc<Block<T>>, usize) {
        let mut current = self.block.borrow_mut();
        let (block, index) = match current.take() {
            Some((block, index)) => (block, index),
            None => (Block::new(), 0),
        };
        if index + 1 < SLOTS {
            *current = Some((block.clone(), index + 1));
        }
        (block, index)
    }
}

/// Where the calling thread's slots come from, for a value type: its thread-local [`Cursor`].
pub(crate) trait SlotSource: Sized + Send + 'static {
    /// Runs `f` with this thread's cursor; `None` once it is destroyed (the thread is ending).
    fn with_cursor<R>(f: impl FnOnce(&Cursor<Self>) -> R) -> Option<R>;
}

/// A new slot's two ends. Call once per record, on the thread that sends it.
pub(crate) fn channel<T: SlotSource>() -> (Sender<T>, Receiver<T>) {
    // A thread-local destroyed already (a future made in another one's destructor): a block
    // for this slot alone.
    let (block, index) = T::with_cursor(Cursor::next).unwrap_or_else(|| (Block::new(), 0));
    (
        Sender {
            end: End {
                block: block.clone(),
                index,
            },
            sent: false,
        },
        Receiver {
            end: End { block, index },
            done: false,
        },
    )
}

/// One end of a slot: the block it lives in and its place there.
struct End<T> {
    block: Arc<Block<T>>,
    index: usize,
}

impl<T> End<T> {
    fn slot(&self) -> &Slot<T> {
        &self.block.slots[self.index]
    }
}

/// The producer task's end: delivers the value once. Dropped unsent, it resolves the
/// receiver to `None`.
pub(crate) struct Sender<T> {
    end: End<T>,
    /// [`Sender::send`] ran: the drop has nothing more to say.
    sent: bool,
}

impl<T> Sender<T> {
    /// Hands `value` to the receiver and wakes it; drops `value` if the receiver is gone.
    pub(crate) fn send(mut self, value: T) {
        self.sent = true;
        let mut state = self.end.slot().lock();
        if state.receiver_gone {
            drop(state);
            drop(value);
            return;
        }
        state.value = Some(value);
        wake_after_unlock(state);
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.sent {
            return;
        }
        let mut state = self.end.slot().lock();
        state.closed = true;
        wake_after_unlock(state);
    }
}

/// Takes the receiver's waker, releases the slot's lock, then wakes the receiver (a wake-up may
/// run arbitrary code: never under the lock).
fn wake_after_unlock<T>(mut state: MutexGuard<'_, SlotState<T>>) {
    let waker = state.waker.take();
    drop(state);
    if let Some(w) = waker {
        w.wake();
    }
}

/// The future's end: resolves to the value, or to `None` if the sender was dropped unsent.
pub(crate) struct Receiver<T> {
    end: End<T>,
    /// Resolved already.
    done: bool,
}

impl<T> Future for Receiver<T> {
    type Output = Option<T>;

    /// Polling again after it resolved gives `Ready(None)`.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if self.done {
            return Poll::Ready(None);
        }
        let mut state = self.end.slot().lock();
        if let Some(value) = state.value.take() {
            drop(state);
            self.done = true;
            return Poll::Ready(Some(value));
        }
        if state.closed {
            drop(state);
            self.done = true;
            return Poll::Ready(None);
        }
        match &mut state.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut state = self.end.slot().lock();
        state.receiver_gone = true;
        let value = state.value.take();
        let waker = state.waker.take();
        drop(state);
        // Outside the lock: a value's or a waker's drop may run arbitrary code.
        drop((value, waker));
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Weak;
    use std::task::Wake;

    /// A value that counts its drops.
    struct Counted(Arc<AtomicUsize>, u32);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    thread_local! {
        static COUNTED: Cursor<Counted> = const { Cursor::new() };
    }
    impl SlotSource for Counted {
        fn with_cursor<R>(f: impl FnOnce(&Cursor<Self>) -> R) -> Option<R> {
            COUNTED.try_with(f).ok()
        }
    }

    struct CountWakes(AtomicUsize);
    impl Wake for CountWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll<T>(rx: &mut Receiver<T>, wakes: &Arc<CountWakes>) -> Poll<Option<T>> {
        let waker = Waker::from(wakes.clone());
        Pin::new(rx).poll(&mut Context::from_waker(&waker))
    }

    fn counter() -> Arc<AtomicUsize> {
        Arc::new(AtomicUsize::new(0))
    }

    fn wakes() -> Arc<CountWakes> {
        Arc::new(CountWakes(AtomicUsize::new(0)))
    }

    /// Runs `f` on a thread of its own, whose cursor goes with it.
    fn on_thread<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        std::thread::spawn(f).join().expect("test thread")
    }

    #[test]
    fn a_value_sent_before_the_poll_is_taken_without_a_wake() {
        let drops = counter();
        let w = wakes();
        let (tx, mut rx) = channel::<Counted>();
        tx.send(Counted(drops.clone(), 7));
        match poll(&mut rx, &w) {
            Poll::Ready(Some(v)) => assert_eq!(v.1, 7),
            _ => panic!("the value was sent"),
        }
        assert_eq!(w.0.load(Ordering::SeqCst), 0);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "the taken value, dropped here"
        );
        assert!(matches!(poll(&mut rx, &w), Poll::Ready(None)));
    }

    #[test]
    fn a_pending_receiver_is_woken_by_the_send_from_another_thread() {
        let drops = counter();
        let w = wakes();
        let (tx, mut rx) = channel::<Counted>();
        assert!(poll(&mut rx, &w).is_pending());
        assert!(
            poll(&mut rx, &w).is_pending(),
            "polled twice, one waker kept"
        );
        on_thread(move || tx.send(Counted(drops, 1)));
        assert_eq!(w.0.load(Ordering::SeqCst), 1);
        assert!(matches!(
            poll(&mut rx, &w),
            Poll::Ready(Some(Counted(_, 1)))
        ));
    }

    #[test]
    fn each_value_is_dropped_once_at_once_whoever_goes_first() {
        let drops = counter();
        // The receiver goes first: the send drops the value.
        let (tx, rx) = channel::<Counted>();
        drop(rx);
        tx.send(Counted(drops.clone(), 1));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // The value comes first and is never taken: the receiver's drop drops it.
        let (tx, rx) = channel::<Counted>();
        tx.send(Counted(drops.clone(), 2));
        assert_eq!(drops.load(Ordering::SeqCst), 1, "held for the receiver");
        drop(rx);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_sender_dropped_unsent_wakes_and_resolves_the_receiver_to_none() {
        let w = wakes();
        let (tx, mut rx) = channel::<Counted>();
        assert!(poll(&mut rx, &w).is_pending());
        drop(tx);
        assert_eq!(w.0.load(Ordering::SeqCst), 1);
        assert!(matches!(poll(&mut rx, &w), Poll::Ready(None)));
    }

    #[test]
    fn a_thread_shares_one_block_among_slots_until_it_is_used_up() {
        let blocks = on_thread(|| {
            let ends: Vec<_> = (0..SLOTS + 1).map(|_| channel::<Counted>()).collect();
            let first = Arc::downgrade(&ends[0].1.end.block);
            let same = ends[..SLOTS]
                .iter()
                .all(|(_, rx)| Arc::ptr_eq(&rx.end.block, &ends[0].1.end.block));
            let next = !Arc::ptr_eq(&ends[SLOTS].1.end.block, &ends[0].1.end.block);
            (first, same, next, Arc::downgrade(&ends[SLOTS].1.end.block))
        });
        let (first, same, next, second): (Weak<Block<Counted>>, bool, bool, Weak<_>) = blocks;
        assert!(same, "the first {SLOTS} slots share a block");
        assert!(next, "slot {SLOTS} is in a new one");
        assert!(
            first.upgrade().is_none() && second.upgrade().is_none(),
            "both freed"
        );
    }

    /// Many slots across blocks, senders on another thread, receivers polled, dropped or kept
    /// in every order: each value is taken or dropped exactly once, and every block is freed.
    #[test]
    fn values_cross_threads_and_every_block_is_freed() {
        let n: u32 = 20_000;
        let drops = counter();
        let sender_drops = drops.clone();
        let (taken, blocks) = on_thread(move || {
            let (to_sender, senders) = std::sync::mpsc::channel::<(u32, Sender<Counted>)>();
            let sending = std::thread::spawn(move || {
                for (i, tx) in senders {
                    if i % 7 == 3 {
                        drop(tx);
                    } else {
                        tx.send(Counted(sender_drops.clone(), i));
                    }
                }
            });
            let w = wakes();
            let mut kept = Vec::new();
            let mut blocks = Vec::new();
            let mut taken = 0;
            for i in 0..n {
                let (tx, mut rx) = channel::<Counted>();
                if i as usize % SLOTS == 0 {
                    blocks.push(Arc::downgrade(&rx.end.block));
                }
                if i % 5 == 0 {
                    if let Poll::Ready(v) = poll(&mut rx, &w) {
                        panic!("resolved before its sender had it: {:?}", v.map(|c| c.1));
                    }
                }
                to_sender.send((i, tx)).expect("sender alive");
                if i % 3 == 0 {
                    drop(rx);
                } else {
                    kept.push((i, rx));
                }
            }
            drop(to_sender);
            sending.join().expect("sender thread");
            for (i, mut rx) in kept {
                match poll(&mut rx, &w) {
                    Poll::Ready(Some(v)) => {
                        assert_eq!(v.1, i);
                        taken += 1;
                    }
                    Poll::Ready(None) => assert_eq!(i % 7, 3, "only an unsent slot is empty"),
                    Poll::Pending => panic!("slot {i} unresolved after its sender went"),
                }
            }
            (taken, blocks)
        });
        let sent = (0..n).filter(|i| i % 7 != 3).count();
        let kept_sent = (0..n).filter(|i| i % 3 != 0 && i % 7 != 3).count();
        assert_eq!(taken, kept_sent);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            sent,
            "every value dropped once"
        );
        assert_eq!(blocks.len(), (n as usize).div_ceil(SLOTS));
        assert!(
            blocks.iter().all(|b| b.upgrade().is_none()),
            "every block freed"
        );
    }
}
