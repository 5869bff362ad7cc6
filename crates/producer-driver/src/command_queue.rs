//! The bounded queue between the application's handles and the task or thread that owns the
//! core.
//!
//! Handles push one command (or a burst) under a mutex; the owner takes everything queued in
//! one go by swapping the queue with its own empty buffer (no command is moved, and both
//! buffers stay allocated and warm), then handles what it took in chunks. Commands it took
//! and has not handled yet still count against the capacity, so the bound holds end to end.
//! Waking the owner, and waiting senders, is the driver's (a tokio `Notify`, a mio `Waker`):
//! the queue says when to.
//!
//! Two bounds hold at once: a number of commands, and a budget of bytes that the records
//! queued share with the records the core holds (`buffer_memory`): a record is charged what the
//! core charges for it ([`producer_core::Producer::buffer_charge`]) from the moment it is queued,
//! and the owner publishes the core's own count ([`producer_core::Producer::buffered_bytes`])
//! as it hands records over and as reports free space. So the bytes queued, taken and not yet
//! handed over, and held by the core stay within the budget together.
//!
//! The core's queue-delay limit (`queue.delay.target.ms`) bounds them further: the owner
//! publishes, with the core's bytes, how many more bytes the limit lets in beside what the core
//! holds unacknowledged ([`producer_core::Producer::queue_delay_room`], a [`CoreLoad`]), and a
//! record is queued only while the bytes queued and taken are below that room (as the core
//! takes records while its unacknowledged bytes are below the limit).
//! So a sender is held back here, before the core, once the queue and the core together hold
//! what the cluster drains in the target delay; it is woken as the room grows again.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Why [`CommandQueue::push`] did not queue an item; the item comes back. Exhaustive on
/// purpose: a driver answers each reason its own way.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused<I> {
    /// The queue holds its capacity in commands (queued, or taken and not yet handled), or
    /// the item's bytes do not fit the byte budget beside what is queued and what the core
    /// holds.
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
    /// Senders wait for room and there is room again (see [`CommandQueue::settle`]): wake
    /// them all (the count of waiting senders starts again from zero).
    pub wake_senders: bool,
    /// Every sender is gone ([`CommandQueue::senders_gone`]) and nothing is left to handle:
    /// no command will ever come again.
    pub finished: bool,
}

/// What the owner publishes of the core's state for the queue's byte bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreLoad {
    /// The bytes the core holds against `buffer_memory`
    /// ([`producer_core::Producer::buffered_bytes`]).
    pub bytes: usize,
    /// The bytes the core's queue-delay limit lets in beside what it holds unacknowledged
    /// ([`producer_core::Producer::queue_delay_room`]; [`usize::MAX`]: no such limit).
    pub delay_room: usize,
}

impl CoreLoad {
    /// What `core` holds and lets in now.
    #[inline]
    pub fn of<T>(core: &producer_core::Producer<T>) -> Self {
        CoreLoad {
            bytes: core.buffered_bytes(),
            delay_room: core.queue_delay_room(),
        }
    }
}

impl From<usize> for CoreLoad {
    /// The core holds `bytes`, with no queue-delay limit.
    fn from(bytes: usize) -> Self {
        CoreLoad {
            bytes,
            delay_room: usize::MAX,
        }
    }
}

/// A bounded multi-producer queue of commands `C`, taken whole by one owner.
#[derive(Debug)]
pub struct CommandQueue<C> {
    state: Mutex<State<C>>,
    /// Most commands queued or taken and not yet handled.
    capacity: usize,
    /// Most bytes of records queued, taken and not yet handled, and held by the core, together.
    byte_budget: usize,
    /// Commands the owner took and has not released yet ([`CommandQueue::release`]). Outside
    /// the lock so the owner can lower it while senders push; a sender may see it a little
    /// high, never low.
    held: AtomicUsize,
    /// The bytes of those commands, likewise.
    held_bytes: AtomicUsize,
    /// What the core holds against the budget, as the owner last published it. Raised before
    /// `held_bytes` is lowered for the same records, so a sender never sees a record in
    /// neither.
    core_bytes: AtomicUsize,
    /// The bytes the core's queue-delay limit lets in beside what it holds, as the owner last
    /// published it ([`CoreLoad::delay_room`]). Lowered before `held_bytes` is, as
    /// `core_bytes` is raised.
    delay_room: AtomicUsize,
}

#[derive(Debug)]
struct State<C> {
    queued: VecDeque<C>,
    /// The bytes of `queued`.
    queued_bytes: usize,
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
    /// An empty queue for at most `capacity` commands (at least 1), whose records share
    /// `byte_budget` bytes with what the core holds (`buffer_memory`; `usize::MAX`: no byte
    /// bound).
    pub fn new(capacity: usize, byte_budget: usize) -> Self {
        CommandQueue {
            state: Mutex::new(State {
                queued: VecDeque::new(),
                queued_bytes: 0,
                stopped: false,
                senders_gone: false,
                waiting_senders: 0,
            }),
            capacity: capacity.max(1),
            byte_budget,
            held: AtomicUsize::new(0),
            held_bytes: AtomicUsize::new(0),
            core_bytes: AtomicUsize::new(0),
            delay_room: AtomicUsize::new(usize::MAX),
        }
    }

    /// The capacity given to [`CommandQueue::new`].
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The byte budget given to [`CommandQueue::new`].
    pub fn byte_budget(&self) -> usize {
        self.byte_budget
    }

    #[inline]
    fn lock(&self) -> MutexGuard<'_, State<C>> {
        // A panic while holding the lock leaves the queue consistent (every change is one
        // push, extend or swap and its counts): go on with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    fn used(&self, state: &State<C>) -> usize {
        state.queued.len() + self.held.load(Ordering::Relaxed)
    }

    /// The bytes queued and taken but not yet handed to the core. `held_bytes` is read before
    /// `core_bytes` (see [`CommandQueue::release`]).
    #[inline]
    fn queue_bytes(&self, state: &State<C>) -> usize {
        state.queued_bytes + self.held_bytes.load(Ordering::Acquire)
    }

    /// Whether a record charged `bytes` fits beside what is queued and what the core holds. A
    /// record larger than the whole budget never fits: it is let in alone (nothing else of the
    /// queue's), for the core to refuse it as too large.
    #[inline]
    fn fits(&self, state: &State<C>, bytes: usize) -> bool {
        let queue = self.queue_bytes(state);
        let used = queue.saturating_add(self.core_bytes.load(Ordering::Acquire));
        let budget = used.saturating_add(bytes) <= self.byte_budget
            || (queue == 0 && bytes > self.byte_budget);
        // The queue-delay limit: records go while the queue is below its room (a command
        // that carries no record bytes is not held back by it).
        budget && (bytes == 0 || queue < self.delay_room.load(Ordering::Acquire))
    }

    /// Publishes what the core holds and lets in. Returns whether room grew: the core's bytes
    /// went down or the queue-delay room went up.
    #[inline]
    fn publish(&self, core: CoreLoad) -> bool {
        let freed = core.bytes < self.core_bytes.swap(core.bytes, Ordering::AcqRel);
        let grew = core.delay_room > self.delay_room.swap(core.delay_room, Ordering::AcqRel);
        freed || grew
    }

    /// Whether senders refused as full should be woken: half the command capacity is free,
    /// and half the byte budget is, and the queue holds at most half the queue-delay room (or
    /// the queue holds no record bytes at all: then only the core's records stand in the way,
    /// and a sender whose record fits may go).
    #[inline]
    fn room_for_waiters(&self, state: &State<C>) -> bool {
        if self.used(state) > self.capacity / 2 {
            return false;
        }
        let queue = self.queue_bytes(state);
        let used = queue.saturating_add(self.core_bytes.load(Ordering::Acquire));
        queue == 0
            || (used <= self.byte_budget / 2
                && queue <= self.delay_room.load(Ordering::Acquire) / 2)
    }

    /// Queues the command `make` builds from `item` if the queue has room for one more
    /// command of `bytes` (`make` runs under the lock, only then); a refused `item` comes back
    /// as it was. The command must carry its `bytes`, for the owner to give back to
    /// [`CommandQueue::release`] once it has handled it. `Ok(true)`: the queue was empty, wake
    /// the owner. With `wait_if_full`, a refusal as [`Refused::Full`] counts the caller as
    /// waiting for room: it must then wait to be woken (the owner's [`Refill::wake_senders`],
    /// [`CommandQueue::settle`]).
    #[inline]
    pub fn push<I>(
        &self,
        item: I,
        bytes: usize,
        wait_if_full: bool,
        make: impl FnOnce(I) -> C,
    ) -> Result<bool, Refused<I>> {
        let mut state = self.lock();
        if state.stopped {
            return Err(Refused::Stopped(item));
        }
        if self.used(&state) >= self.capacity || !self.fits(&state, bytes) {
            state.waiting_senders += usize::from(wait_if_full);
            return Err(Refused::Full(item));
        }
        let was_empty = state.queued.is_empty();
        state.queued_bytes += bytes;
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

    /// Queues commands made from the front of `from`, in order, while the queue has room
    /// (each item charged `charge(item)` bytes), under one lock; `charge` and `make` run under
    /// it, once per item. The items not taken stay in `from`. With `wait_if_full`, the caller
    /// counts as waiting for room when some are left.
    ///
    /// `make` is given each item and the bytes its command must carry for
    /// [`CommandQueue::release`]: the burst's bytes are all carried by its last command (0 by
    /// the others), so the owner releases them once it has handled the whole burst, and the
    /// records it handed over before count twice until then (in the queue and in the core),
    /// never in neither.
    #[inline]
    pub fn push_burst<I>(
        &self,
        from: &mut Vec<I>,
        wait_if_full: bool,
        mut charge: impl FnMut(&I) -> usize,
        mut make: impl FnMut(I, usize) -> C,
    ) -> Result<Burst, Stopped> {
        let mut state = self.lock();
        if state.stopped {
            return Err(Stopped);
        }
        let room = self.capacity.saturating_sub(self.used(&state));
        let queue = self.queue_bytes(&state);
        let free = self
            .byte_budget
            .saturating_sub(queue.saturating_add(self.core_bytes.load(Ordering::Acquire)));
        let delay_room = self.delay_room.load(Ordering::Acquire);
        // The items that fit: by count, then by bytes (a record larger than the whole budget
        // goes alone into an empty queue, as with `push`), and while the queue is below the
        // queue-delay room.
        let mut taken = 0;
        let mut added = 0usize;
        for item in from.iter().take(room) {
            let bytes = charge(item);
            let alone = queue == 0 && taken == 0 && bytes > self.byte_budget;
            if (added.saturating_add(bytes) > free && !alone)
                || queue.saturating_add(added) >= delay_room
            {
                break;
            }
            added = added.saturating_add(bytes);
            taken += 1;
        }
        if wait_if_full && taken < from.len() {
            state.waiting_senders += 1;
        }
        let was_empty = state.queued.is_empty();
        if taken > 0 {
            state.queued_bytes += added;
            let last = taken - 1;
            let commands = from
                .drain(..taken)
                .enumerate()
                .map(|(i, item)| make(item, if i == last { added } else { 0 }));
            state.queued.extend(commands);
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
    /// [`CommandQueue::release`]. `core_bytes` is what the core holds now
    /// ([`producer_core::Producer::buffered_bytes`]). Says whether to wake waiting senders and
    /// whether no command will ever come again.
    #[inline]
    #[must_use = "waiting senders must be woken, and a finished queue means closing"]
    pub fn refill(&self, taken: &mut VecDeque<C>, core: impl Into<CoreLoad>) -> Refill {
        let mut state = self.lock();
        self.publish(core.into());
        if taken.is_empty() {
            std::mem::swap(&mut state.queued, taken);
            // Added to what is still held: a record the owner holds aside (the core was full)
            // stays counted until the owner releases it.
            self.held.fetch_add(taken.len(), Ordering::Relaxed);
            self.held_bytes
                .fetch_add(std::mem::take(&mut state.queued_bytes), Ordering::Release);
        }
        Refill {
            wake_senders: self.wake_check(&mut state),
            finished: state.senders_gone && taken.is_empty(),
        }
    }

    /// For the owner, while it cannot handle what it took yet (a record held aside: the core
    /// was full) but still watches what comes (the deadlines of timed commands): moves
    /// everything queued behind what `taken` holds, counted as held until
    /// [`CommandQueue::release`] as [`CommandQueue::refill`] counts it. Nothing moves in or
    /// out of the budgets: the commands go from queued to held. Says whether to wake waiting
    /// senders.
    #[must_use = "waiting senders must be woken"]
    pub fn take_behind(&self, taken: &mut VecDeque<C>, core: impl Into<CoreLoad>) -> bool {
        let mut state = self.lock();
        self.publish(core.into());
        if !state.queued.is_empty() {
            self.held.fetch_add(state.queued.len(), Ordering::Relaxed);
            self.held_bytes
                .fetch_add(std::mem::take(&mut state.queued_bytes), Ordering::Release);
            taken.append(&mut state.queued);
        }
        self.wake_check(&mut state)
    }

    /// Whether to wake the waiting senders now; if so they no longer count as waiting.
    fn wake_check(&self, state: &mut State<C>) -> bool {
        let wake = state.waiting_senders > 0 && self.room_for_waiters(state);
        if wake {
            state.waiting_senders = 0;
        }
        wake
    }

    /// For the owner: `handled` of the commands it took, carrying `bytes` in all (see
    /// [`CommandQueue::push`]), are handled and no longer count against the capacity; the core now
    /// holds `core_bytes` (the records handed over count there from now on: published first).
    #[inline]
    pub fn release(&self, handled: usize, bytes: usize, core: impl Into<CoreLoad>) {
        let core = core.into();
        self.core_bytes.store(core.bytes, Ordering::Release);
        // Lowered only: a rise is published where waiting senders are checked (`settle`,
        // `refill`), so that no sender waits for a rise already seen.
        self.delay_room.fetch_min(core.delay_room, Ordering::AcqRel);
        if bytes > 0 {
            self.held_bytes.fetch_sub(bytes, Ordering::Release);
        }
        if handled > 0 {
            self.held.fetch_sub(handled, Ordering::Relaxed);
        }
    }

    /// For the owner, after reports freed space in the core or a Produce answer raised its
    /// queue-delay limit (`core` is what it holds and lets in now): whether to wake the
    /// senders waiting for room. Takes the lock only when the core's count went down or the
    /// queue-delay room went up.
    #[inline]
    #[must_use = "waiting senders must be woken"]
    pub fn settle(&self, core: impl Into<CoreLoad>) -> bool {
        let core = core.into();
        if core.bytes >= self.core_bytes.load(Ordering::Relaxed)
            && core.delay_room <= self.delay_room.load(Ordering::Relaxed)
        {
            // Nothing freed (a rise is published before the records leave the held count).
            self.publish(core);
            return false;
        }
        let mut state = self.lock();
        self.publish(core);
        self.wake_check(&mut state)
    }

    /// For the owner, once it stops: refuses every later push and returns what is still
    /// queued, for the owner to answer (fail each record, answer each flush).
    #[must_use = "every command still queued must be answered"]
    pub fn stop(&self) -> VecDeque<C> {
        let mut state = self.lock();
        state.stopped = true;
        state.queued_bytes = 0;
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

    fn commands(taken: &VecDeque<i32>) -> Vec<i32> {
        taken.iter().copied().collect()
    }

    const NO_BYTE_BOUND: usize = usize::MAX;

    #[test]
    fn taken_commands_count_until_released() {
        let q = CommandQueue::new(2, NO_BYTE_BOUND);
        assert!(
            q.push(1, 0, false, id).unwrap(),
            "first into an empty queue"
        );
        assert!(!q.push(2, 0, false, id).unwrap());
        assert!(matches!(q.push(3, 0, false, id), Err(Refused::Full(3))));
        let mut taken = VecDeque::new();
        let refill = q.refill(&mut taken, 0);
        assert_eq!(commands(&taken), [1, 2]);
        assert_eq!(
            refill,
            Refill {
                wake_senders: false,
                finished: false
            }
        );
        assert!(
            matches!(q.push(3, 0, false, id), Err(Refused::Full(3))),
            "still held"
        );
        taken.pop_front();
        q.release(1, 0, 0);
        assert!(q.push(3, 0, false, id).is_ok());
        // `taken` is not empty: nothing moves.
        let _ = q.refill(&mut taken, 0);
        assert_eq!(commands(&taken), [2]);
    }

    #[test]
    fn control_commands_ignore_the_capacity_but_not_a_stop() {
        let q = CommandQueue::new(1, 10);
        q.push(1, 10, false, id).unwrap();
        assert!(q.push_control(2).is_ok(), "neither the count nor the bytes");
        assert_eq!(q.stop(), [1, 2]);
        assert!(q.is_stopped());
        assert_eq!(q.push_control(3), Err(3));
        assert!(matches!(q.push(4, 0, false, id), Err(Refused::Stopped(4))));
        let mut v = vec![5];
        assert_eq!(q.push_burst(&mut v, false, |_| 0, |x, _| x), Err(Stopped));
        assert_eq!(v, [5], "nothing taken after stop");
    }

    #[test]
    fn a_burst_takes_what_fits_from_the_front() {
        let q = CommandQueue::new(3, NO_BYTE_BOUND);
        let mut v = vec![1, 2, 3, 4, 5];
        let b = q.push_burst(&mut v, false, |_| 0, |x, _| x * 10).unwrap();
        assert_eq!(
            b,
            Burst {
                taken: 3,
                was_empty: true
            }
        );
        assert_eq!(v, [4, 5]);
        let b = q.push_burst(&mut v, false, |_| 0, |x, _| x * 10).unwrap();
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
        let q = CommandQueue::new(4, NO_BYTE_BOUND);
        let mut v = vec![1, 2, 3, 4, 5];
        q.push_burst(&mut v, true, |_| 0, |x, _| x).unwrap();
        assert!(matches!(q.push(6, 0, true, id), Err(Refused::Full(6))));
        let mut taken = VecDeque::new();
        assert!(!q.refill(&mut taken, 0).wake_senders, "all four still held");
        taken.drain(..2);
        q.release(2, 0, 0);
        assert!(q.refill(&mut taken, 0).wake_senders, "two of four held");
        assert!(!q.refill(&mut taken, 0).wake_senders, "woken once");
    }

    #[test]
    fn finished_once_the_senders_are_gone_and_nothing_is_left() {
        let q = CommandQueue::new(4, NO_BYTE_BOUND);
        q.push(1, 0, false, id).unwrap();
        q.senders_gone();
        let mut taken = VecDeque::new();
        assert!(!q.refill(&mut taken, 0).finished, "one command left");
        taken.clear();
        q.release(1, 0, 0);
        assert!(q.refill(&mut taken, 0).finished);
    }

    /// Bytes queued, taken and not yet handled, and held by the core share one budget: a
    /// record moves from the queue's count to the core's without ever being in neither, and
    /// the queue refuses what would go over the budget.
    #[test]
    fn queued_taken_and_core_bytes_share_the_budget() {
        let q = CommandQueue::new(100, 1000);
        assert!(q.push(1, 400, false, id).is_ok());
        assert!(q.push(2, 400, false, id).is_ok());
        assert!(
            matches!(q.push(3, 300, false, id), Err(Refused::Full(3))),
            "800 queued + 300 > 1000"
        );
        let mut taken = VecDeque::new();
        let _ = q.refill(&mut taken, 0);
        assert!(
            matches!(q.push(3, 300, false, id), Err(Refused::Full(3))),
            "taken and not handled: still counted"
        );
        // The owner hands record 1 to the core, which now holds 400 bytes: moved, not freed.
        taken.pop_front();
        q.release(1, 400, 400);
        assert!(matches!(q.push(3, 300, false, id), Err(Refused::Full(3))));
        // A report frees the core's 400 bytes.
        let _ = q.settle(0);
        assert!(q.push(3, 300, false, id).is_ok(), "400 taken + 300 queued");
    }

    /// Taken behind what the owner holds (a record held aside): the commands move from queued
    /// to held, in order, and count against the capacity and the byte budget exactly as
    /// before until released.
    #[test]
    fn taken_behind_what_is_held_stays_counted_until_released() {
        let q = CommandQueue::new(4, 1000);
        q.push(1, 300, false, id).unwrap();
        let mut taken = VecDeque::new();
        let _ = q.refill(&mut taken, 0);
        q.push(2, 300, false, id).unwrap();
        q.push(3, 300, false, id).unwrap();
        assert!(!q.take_behind(&mut taken, 0));
        assert_eq!(commands(&taken), [1, 2, 3]);
        assert!(
            matches!(q.push(4, 200, false, id), Err(Refused::Full(4))),
            "900 held + 200 > 1000"
        );
        assert!(q.push(4, 100, false, id).is_ok());
        assert!(
            matches!(q.push(5, 0, false, id), Err(Refused::Full(5))),
            "3 held + 1 queued: the capacity"
        );
        // Nothing queued: nothing moves.
        let mut more = VecDeque::from([9]);
        let _ = q.take_behind(&mut more, 0);
        let _ = q.take_behind(&mut more, 0);
        assert_eq!(commands(&more), [9, 4]);
        // The owner ends commands 1..=3 without the core (failed, never sent).
        taken.clear();
        q.release(3, 900, 0);
        assert!(q.push(5, 800, false, id).is_ok(), "100 held + 800 queued");
    }

    /// A record larger than the whole budget could never fit: it goes in alone, into a queue
    /// that holds no record bytes, for the core to refuse; never beside other records.
    #[test]
    fn a_record_larger_than_the_budget_goes_in_alone() {
        let q = CommandQueue::new(100, 1000);
        q.push(1, 10, false, id).unwrap();
        assert!(matches!(q.push(2, 5000, false, id), Err(Refused::Full(2))));
        let mut taken = VecDeque::new();
        let _ = q.refill(&mut taken, 0);
        taken.pop_front();
        q.release(1, 10, 10);
        assert!(
            q.push(2, 5000, false, id).is_ok(),
            "the core's records do not stop it"
        );
        assert!(matches!(q.push(3, 1, false, id), Err(Refused::Full(3))));
        let mut v = vec![4, 5];
        let b = q.push_burst(&mut v, false, |_| 5000, |x, _| x).unwrap();
        assert_eq!(b.taken, 0, "not beside the queued one");
    }

    #[test]
    fn a_burst_stops_at_the_first_record_over_the_byte_budget() {
        let q = CommandQueue::new(100, 1000);
        let mut v = vec![300, 300, 300, 300, 50];
        let b = q
            .push_burst(&mut v, true, |&x| x as usize, |x, bytes| (x, bytes))
            .unwrap();
        assert_eq!(b.taken, 3);
        assert_eq!(v, [300, 50], "in order: the small one waits behind");
        let mut taken = VecDeque::new();
        let _ = q.refill(&mut taken, 0);
        assert_eq!(
            taken.iter().map(|&(_, bytes)| bytes).collect::<Vec<_>>(),
            [0, 0, 900],
            "the last command carries the burst's charge"
        );
    }

    /// Senders waiting for room are woken when reports free the core's bytes, even while the
    /// queue itself holds nothing to take.
    #[test]
    fn waiting_senders_are_woken_when_the_core_frees_bytes() {
        let q = CommandQueue::new(100, 1000);
        let mut taken = VecDeque::new();
        let _ = q.refill(&mut taken, 900);
        assert!(matches!(q.push(1, 200, true, id), Err(Refused::Full(1))));
        assert!(!q.settle(900), "nothing freed");
        assert!(q.settle(850), "the queue holds no bytes: waiters may try");
        assert!(!q.settle(800), "woken once");
        assert!(q.push(1, 200, false, id).is_ok());
        assert!(matches!(q.push(2, 1, true, id), Err(Refused::Full(2))));
        assert!(!q.settle(700), "200 queued, 900 used: not half free");
        assert!(q.settle(200), "half free");
    }

    fn load(bytes: usize, delay_room: usize) -> CoreLoad {
        CoreLoad { bytes, delay_room }
    }

    /// The core's queue-delay limit bounds the queue below `buffer_memory`: records are
    /// queued while the queued and taken bytes are below the room the core publishes, for
    /// single records and bursts alike; a sender refused by it is woken once a report or a
    /// Produce answer grows the room, and never by a release that only moves records to the
    /// core.
    #[test]
    fn the_queue_delay_room_holds_senders_back_below_the_byte_budget() {
        let q = CommandQueue::new(100, 10_000);
        let mut taken = VecDeque::new();
        // The core holds 1000 bytes unacknowledged and its limit is 1500: room for 500.
        let _ = q.refill(&mut taken, load(1000, 500));
        assert!(q.push(1, 300, false, id).is_ok());
        assert!(
            q.push(2, 400, false, id).is_ok(),
            "300 queued: below the room"
        );
        assert!(
            matches!(q.push(3, 1, true, id), Err(Refused::Full(3))),
            "700 queued: over the room, far below the byte budget"
        );
        let mut burst = vec![4, 5];
        let b = q.push_burst(&mut burst, true, |_| 10, |x, _| x).unwrap();
        assert_eq!(b.taken, 0, "a burst is held back too");
        // The owner hands both to the core (its room shrinks by as much): no room grew.
        let _ = q.refill(&mut taken, load(1000, 500));
        taken.clear();
        q.release(2, 700, load(1700, 0));
        assert!(!q.settle(load(1700, 0)), "nothing freed, no room grew");
        assert!(
            matches!(q.push(4, 1, true, id), Err(Refused::Full(4))),
            "no room: not even into the empty queue"
        );
        // A release that would raise the room does not: the rise waits for `settle`, which
        // wakes the senders refused meanwhile.
        q.release(0, 0, load(1700, 700));
        assert!(matches!(q.push(4, 1, true, id), Err(Refused::Full(4))));
        assert!(
            q.settle(load(1000, 700)),
            "reports freed bytes and the room grew: wake"
        );
        assert!(
            q.push(4, 5000, false, id).is_ok(),
            "larger than the room, into a queue below it"
        );
        assert!(matches!(q.push(5, 1, false, id), Err(Refused::Full(5))));
        assert!(
            q.push(6, 0, false, id).is_ok(),
            "a command without record bytes is not held back"
        );
        // Without a limit (the room usize::MAX) the byte budget alone counts.
        assert!(!q.settle(load(1000, usize::MAX)), "no sender waits");
        assert!(
            q.push(7, 4000, false, id).is_ok(),
            "5000 + 4000 + 1000 <= 10 000"
        );
    }

    /// A Produce answer that raises the limit without freeing bytes (a transactional
    /// producer's acknowledged records stay held) still wakes the waiting senders, once the
    /// queue holds at most half the room.
    #[test]
    fn a_rise_of_the_queue_delay_room_alone_wakes_waiting_senders() {
        let q = CommandQueue::new(100, 10_000);
        let mut taken = VecDeque::new();
        let _ = q.refill(&mut taken, load(2000, 100));
        q.push(1, 100, false, id).unwrap();
        assert!(matches!(q.push(2, 100, true, id), Err(Refused::Full(2))));
        assert!(!q.settle(load(2000, 100)), "nothing changed");
        assert!(
            !q.settle(load(2000, 150)),
            "100 queued: over half the room, not yet"
        );
        assert!(q.settle(load(2000, 400)), "the room grew to 400: wake");
        assert!(q.push(2, 100, false, id).is_ok());
    }
}
