//! The bounded queue between the application's handles and the task or thread that owns the
//! core.
//!
//! Handles push one command (or a burst) under a mutex; the owner takes everything queued in
//! one go by swapping the queue with its own empty buffer (no command is moved, and both
//! buffers stay allocated and warm), then handles what it took in chunks. Commands it took
//! and has not handled yet still count against the capacity, so the bound holds end to end.
//! Waking the owner, and waiting senders, is the driver's (a tokio `Notify`, a mio `Waker`):
//! the queue says when to.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Why [`CommandQueue::push`] did not queue an item; the item comes back. Exhaustive on
/// purpose: a driver answers each reason its own way.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused<I> {
    /// The queue holds its capacity in commands (queued, or taken and not yet handled).
    #[error("command queue full")]
    Full(I),
    /// [`CommandQueue::stop`] was called: nothing is taken any more.
    #[error("command queue stopped")]
    Stopped(I),
}

/// [`CommandQueue::push_burst`] found the queue stopped ([`CommandQueue::stop`] was called):
/// nothing was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("command queue stopped")]
pub struct Stopped;

/// What [`CommandQueue::push_burst`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burst {
    /// How many items it took from the front of the caller's vector.
    pub taken: usize,
    /// The queue was empty before: the owner may be asleep, wake it.
    pub was_empty: bool,
}

/// What the owner learns when it takes commands ([`CommandQueue::refill`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refill {
    /// Senders wait for room and half the capacity is free again: wake them all (the count
    /// of waiting senders starts again from zero).
    pub wake_senders: bool,
    /// Every sender is gone ([`CommandQueue::senders_gone`]) and nothing is left to handle:
    /// no command will ever come again.
    pub finished: bool,
}

/// A bounded multi-producer queue of commands `C`, taken whole by one owner.
#[derive(Debug)]
pub struct CommandQueue<C> {
    state: Mutex<State<C>>,
    /// Most commands queued or taken and not yet handled.
    capacity: usize,
    /// Commands the owner took and has not released yet ([`CommandQueue::release`]). Outside
    /// the lock so the owner can lower it while senders push; a sender may see it a little
    /// high, never low.
    held: AtomicUsize,
}

#[derive(Debug)]
struct State<C> {
    queued: VecDeque<C>,
    /// Set by [`CommandQueue::stop`]. Checked and set under the same lock as `queued`, so no
    /// command can slip in after the owner's final drain.
    stopped: bool,
    /// Set by [`CommandQueue::senders_gone`], under the same lock as `queued`, so the owner
    /// never sees it before a command pushed ahead of it.
    senders_gone: bool,
    /// Senders refused as full that wait to be woken.
    waiting_senders: usize,
}

impl<C> CommandQueue<C> {
    /// An empty queue for at most `capacity` commands (at least 1).
    pub fn new(capacity: usize) -> Self {
        CommandQueue {
            state: Mutex::new(State {
                queued: VecDeque::new(),
                stopped: false,
                senders_gone: false,
                waiting_senders: 0,
            }),
            capacity: capacity.max(1),
            held: AtomicUsize::new(0),
        }
    }

    /// The capacity given to [`CommandQueue::new`].
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    #[inline]
    fn lock(&self) -> MutexGuard<'_, State<C>> {
        // A panic while holding the lock leaves the queue consistent (every change is one
        // push, extend or swap): go on with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    fn used(&self, state: &State<C>) -> usize {
        state.queued.len() + self.held.load(Ordering::Relaxed)
    }

    /// Queues the command `make` builds from `item` if the queue has room (`make` runs under
    /// the lock, only then); a refused `item` comes back as it was. `Ok(true)`: the queue was
    /// empty, wake the owner. With `wait_if_full`, a refusal as [`Refused::Full`] counts the
    /// caller as waiting for room: it must then wait to be woken (the owner's
    /// [`Refill::wake_senders`]).
    #[inline]
    pub fn push<I>(
        &self,
        item: I,
        wait_if_full: bool,
        make: impl FnOnce(I) -> C,
    ) -> Result<bool, Refused<I>> {
        let mut state = self.lock();
        if state.stopped {
            return Err(Refused::Stopped(item));
        }
        if self.used(&state) >= self.capacity {
            state.waiting_senders += usize::from(wait_if_full);
            return Err(Refused::Full(item));
        }
        let was_empty = state.queued.is_empty();
        state.queued.push_back(make(item));
        Ok(was_empty)
    }

    /// Queues a command whatever the capacity (a flush or a close: each blocks its caller, so
    /// there are never more of them than callers). `Ok(true)`: the queue was empty, wake the
    /// owner. Refused only once stopped.
    #[inline]
    pub fn push_control(&self, cmd: C) -> Result<bool, C> {
        let mut state = self.lock();
        if state.stopped {
            return Err(cmd);
        }
        let was_empty = state.queued.is_empty();
        state.queued.push_back(cmd);
        Ok(was_empty)
    }

    /// Queues commands made from the front of `from`, in order, while the queue has room,
    /// under one lock; `make` runs under it, once per item taken. The items not taken stay in
    /// `from`. With `wait_if_full`, the caller counts as waiting for room when some are left.
    #[inline]
    pub fn push_burst<I>(
        &self,
        from: &mut Vec<I>,
        wait_if_full: bool,
        make: impl FnMut(I) -> C,
    ) -> Result<Burst, Stopped> {
        let mut state = self.lock();
        if state.stopped {
            return Err(Stopped);
        }
        let room = self.capacity.saturating_sub(self.used(&state));
        let taken = room.min(from.len());
        if wait_if_full && taken < from.len() {
            state.waiting_senders += 1;
        }
        let was_empty = state.queued.is_empty();
        if taken > 0 {
            state.queued.extend(from.drain(..taken).map(make));
        }
        Ok(Burst { taken, was_empty })
    }

    /// Call when every sender is gone (the last handle dropped): the owner's next
    /// [`CommandQueue::refill`] that finds nothing left says [`Refill::finished`].
    pub fn senders_gone(&self) {
        self.lock().senders_gone = true;
    }

    /// For the owner, when it is ready for more: if `taken` is empty, moves everything queued
    /// into it (a swap under one lock) and counts it as held until
    /// [`CommandQueue::release`]. Says whether to wake waiting senders and whether no command
    /// will ever come again.
    #[inline]
    #[must_use = "waiting senders must be woken, and a finished queue means closing"]
    pub fn refill(&self, taken: &mut VecDeque<C>) -> Refill {
        let mut state = self.lock();
        if taken.is_empty() {
            std::mem::swap(&mut state.queued, taken);
            self.held.store(taken.len(), Ordering::Relaxed);
        }
        let wake_senders = state.waiting_senders > 0 && self.used(&state) <= self.capacity / 2;
        if wake_senders {
            state.waiting_senders = 0;
        }
        Refill {
            wake_senders,
            finished: state.senders_gone && taken.is_empty(),
        }
    }

    /// For the owner: `handled` of the commands it took are handled and no longer count
    /// against the capacity.
    #[inline]
    pub fn release(&self, handled: usize) {
        if handled > 0 {
            self.held.fetch_sub(handled, Ordering::Relaxed);
        }
    }

    /// For the owner, once it stops: refuses every later push and returns what is still
    /// queued, for the owner to answer (fail each record, answer each flush).
    #[must_use = "every command still queued must be answered"]
    pub fn stop(&self) -> VecDeque<C> {
        let mut state = self.lock();
        state.stopped = true;
        std::mem::take(&mut state.queued)
    }

    /// Whether [`CommandQueue::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.lock().stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(x: i32) -> i32 {
        x
    }

    #[test]
    fn taken_commands_count_until_released() {
        let q = CommandQueue::new(2);
        assert!(q.push(1, false, id).unwrap(), "first into an empty queue");
        assert!(!q.push(2, false, id).unwrap());
        assert!(matches!(q.push(3, false, id), Err(Refused::Full(3))));
        let mut taken = VecDeque::new();
        let refill = q.refill(&mut taken);
        assert_eq!(taken, [1, 2]);
        assert_eq!(
            refill,
            Refill {
                wake_senders: false,
                finished: false
            }
        );
        assert!(
            matches!(q.push(3, false, id), Err(Refused::Full(3))),
            "still held"
        );
        taken.pop_front();
        q.release(1);
        assert!(q.push(3, false, id).is_ok());
        // `taken` is not empty: nothing moves.
        let _ = q.refill(&mut taken);
        assert_eq!(taken, [2]);
    }

    #[test]
    fn control_commands_ignore_the_capacity_but_not_a_stop() {
        let q = CommandQueue::new(1);
        q.push(1, false, id).unwrap();
        assert!(q.push_control(2).is_ok());
        assert_eq!(q.stop(), [1, 2]);
        assert!(q.is_stopped());
        assert_eq!(q.push_control(3), Err(3));
        assert!(matches!(q.push(4, false, id), Err(Refused::Stopped(4))));
        let mut v = vec![5];
        assert_eq!(q.push_burst(&mut v, false, |x| x), Err(Stopped));
        assert_eq!(v, [5], "nothing taken after stop");
    }

    #[test]
    fn a_burst_takes_what_fits_from_the_front() {
        let q = CommandQueue::new(3);
        let mut v = vec![1, 2, 3, 4, 5];
        let b = q.push_burst(&mut v, false, |x| x * 10).unwrap();
        assert_eq!(
            b,
            Burst {
                taken: 3,
                was_empty: true
            }
        );
        assert_eq!(v, [4, 5]);
        let b = q.push_burst(&mut v, false, |x| x * 10).unwrap();
        assert_eq!(
            b,
            Burst {
                taken: 0,
                was_empty: false
            }
        );
        assert_eq!(q.stop(), [10, 20, 30]);
    }

    #[test]
    fn waiting_senders_are_woken_once_half_the_room_is_free() {
        let q = CommandQueue::new(4);
        let mut v = vec![1, 2, 3, 4, 5];
        q.push_burst(&mut v, true, |x| x).unwrap();
        assert!(matches!(q.push(6, true, id), Err(Refused::Full(6))));
        let mut taken = VecDeque::new();
        assert!(!q.refill(&mut taken).wake_senders, "all four still held");
        taken.drain(..2);
        q.release(2);
        assert!(q.refill(&mut taken).wake_senders, "two of four held");
        assert!(!q.refill(&mut taken).wake_senders, "woken once");
    }

    #[test]
    fn finished_once_the_senders_are_gone_and_nothing_is_left() {
        let q = CommandQueue::new(4);
        q.push(1, false, id).unwrap();
        q.senders_gone();
        let mut taken = VecDeque::new();
        assert!(!q.refill(&mut taken).finished, "one command left");
        taken.clear();
        q.release(1);
        assert!(q.refill(&mut taken).finished);
    }
}
