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
//! what the cluster drains in the target delay; it is woken as the room grows again. A sender
//! that waits for room ([`OnFull::Look`], [`OnFull::Wait`]) is held back by the room without
//! the limit's burst floor ([`producer_core::Producer::queue_delay_room_waiting`]); one that
//! is refused at once ([`OnFull::Return`]) by the whole room.
//!
//! The time senders are held back is measured here, by the core's rule for `send` (see
//! [`crate::send_wait`]), and handed to the core with each [`Refill`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use producer_core::SendWaitCause;

use crate::send_wait::{Holds, SendWaits};

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

/// What a sender does when the queue refuses it as full: it says which queue-delay room
/// bounds it, and whether the refusal counts it as waiting to be woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFull {
    /// It hands the record back to its caller (`try_send`, a non-blocking batch): bounded by
    /// the whole queue-delay room ([`CoreLoad::delay_room`]), burst floor included, so that
    /// a caller that cannot wait is not refused after a quiet spell.
    Return,
    /// It waits for room (`send`, `send_timeout`) and is not registered for a wake-up yet:
    /// refused, it registers and looks again ([`OnFull::Wait`]). Bounded by the room for
    /// senders that wait ([`CoreLoad::delay_room_waiting`]).
    Look,
    /// It waits for room, registered for a wake-up: a refusal counts it as waiting, to be
    /// woken ([`Refill::wake_senders`], [`CommandQueue::settle`]). Bounded as
    /// [`OnFull::Look`].
    Wait,
}

impl OnFull {
    /// Whether the sender waits for room.
    fn waits(self) -> bool {
        self != OnFull::Return
    }
}

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
    /// The time senders were held back since the last refill, and the wait running: for the
    /// core ([`SendWaits::note_in`]).
    pub send_waits: SendWaits,
}

/// What the owner publishes of the core's state for the queue's byte bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreLoad {
    /// The bytes the core holds against `buffer_memory`
    /// ([`producer_core::Producer::buffered_bytes`]).
    pub bytes: usize,
    /// The bytes the core's queue-delay limit lets in beside what it holds unacknowledged
    /// ([`producer_core::Producer::queue_delay_room`]; [`usize::MAX`]: no such limit), for
    /// senders refused at once ([`OnFull::Return`]).
    pub delay_room: usize,
    /// The same for senders that wait for room
    /// ([`producer_core::Producer::queue_delay_room_waiting`]; at most `delay_room`).
    pub delay_room_waiting: usize,
}

impl CoreLoad {
    /// What `core` holds and lets in now.
    #[inline]
    pub fn of<T>(core: &producer_core::Producer<T>) -> Self {
        CoreLoad {
            bytes: core.buffered_bytes(),
            delay_room: core.queue_delay_room(),
            delay_room_waiting: core.queue_delay_room_waiting(),
        }
    }
}

impl From<usize> for CoreLoad {
    /// The core holds `bytes`, with no queue-delay limit.
    fn from(bytes: usize) -> Self {
        CoreLoad {
            bytes,
            delay_room: usize::MAX,
            delay_room_waiting: usize::MAX,
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
    /// The same for senders that wait ([`CoreLoad::delay_room_waiting`]).
    delay_room_waiting: AtomicUsize,
    /// The clock the core runs on, read only when a sender is held back and when the next
    /// record is taken after that.
    clock: fn() -> Instant,
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
    /// The time senders are held back.
    holds: Holds,
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
                holds: Holds::default(),
            }),
            capacity: capacity.max(1),
            byte_budget,
            held: AtomicUsize::new(0),
            held_bytes: AtomicUsize::new(0),
            core_bytes: AtomicUsize::new(0),
            delay_room: AtomicUsize::new(usize::MAX),
            delay_room_waiting: AtomicUsize::new(usize::MAX),
            clock: Instant::now,
        }
    }

    /// The queue with `clock` for the time senders are held back: the clock the core runs
    /// on, when it is not [`Instant::now`] (a runtime's that tests may pause).
    #[must_use]
    pub fn with_clock(mut self, clock: fn() -> Instant) -> Self {
        self.clock = clock;
        self
    }

    /// For the owner, once, before a handle can push: publishes what the core holds and lets
    /// in at its start. Until the owner first publishes, the queue knows no queue-delay room and
    /// lets records in up to its byte budget and capacity (a mio producer flooded from its start
    /// queued 4 MB there, in front of the core's limit).
    pub fn start_from(&self, core: impl Into<CoreLoad>) {
        self.publish(core.into());
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

    /// The queue-delay room that bounds a sender that does `on_full` when refused.
    #[inline]
    fn delay_room(&self, on_full: OnFull) -> usize {
        if on_full.waits() {
            self.delay_room_waiting.load(Ordering::Acquire)
        } else {
            self.delay_room.load(Ordering::Acquire)
        }
    }

    /// Why a command of `bytes` from a sender that does `on_full` when refused is refused, if
    /// it is: the command capacity or the byte budget (the bytes do not fit beside what is
    /// queued and what the core holds), or the queue-delay room for such a sender. A record
    /// larger than the whole budget never fits: it is let in alone (nothing else of the
    /// queue's), for the core to refuse it as too large.
    #[inline]
    fn refusal(&self, state: &State<C>, bytes: usize, on_full: OnFull) -> Option<SendWaitCause> {
        let queue = self.queue_bytes(state);
        let used = queue.saturating_add(self.core_bytes.load(Ordering::Acquire));
        let budget = used.saturating_add(bytes) <= self.byte_budget
            || (queue == 0 && bytes > self.byte_budget);
        if self.used(state) >= self.capacity || !budget {
            return Some(SendWaitCause::BufferMemory);
        }
        // The queue-delay limit: records go while the queue is below its room (a command
        // that carries no record bytes is not held back by it).
        (bytes > 0 && queue >= self.delay_room(on_full)).then_some(SendWaitCause::QueueDelay)
    }

    /// Publishes what the core holds and lets in. Returns whether room grew for senders that
    /// wait: the core's bytes went down or their queue-delay room went up.
    #[inline]
    fn publish(&self, core: CoreLoad) -> bool {
        let freed = core.bytes < self.core_bytes.swap(core.bytes, Ordering::AcqRel);
        self.delay_room.store(core.delay_room, Ordering::Release);
        let grew = core.delay_room_waiting
            > self
                .delay_room_waiting
                .swap(core.delay_room_waiting, Ordering::AcqRel);
        freed || grew
    }

    /// Whether senders refused as full should be woken: half the command capacity is free,
    /// and half the byte budget is, and the queue holds at most half the queue-delay room for
    /// senders that wait (the only ones woken) (or
    /// the queue holds no record bytes at all: then only the core's records stand in the way,
    /// and a sender whose record fits may go).
    #[inline]
    fn room_for_waiters(&self, state: &State<C>) -> bool {
        if self.used(state) > self.capacity / 2 {
            return false;
        }
        let queue = self.queue_bytes(state);
        let used = queue.saturating_add(self.core_bytes.load(Ordering::Acquire));
        queue == 0 || (used <= self.byte_budget / 2 && queue <= self.delay_room(OnFull::Wait) / 2)
    }

    /// Queues the command `make` builds from `item` if the queue has room for one more
    /// command of `bytes` (`make` runs under the lock, only then); a refused `item` comes back
    /// as it was. The command must carry its `bytes`, for the owner to give back to
    /// [`CommandQueue::release`] once it has handled it. `Ok(true)`: the queue was empty, wake
    /// the owner. `on_full` is what the caller does if refused as [`Refused::Full`] (which
    /// queue-delay room bounds it, and with [`OnFull::Wait`] the refusal counts it as waiting
    /// for room: it must then wait to be woken, by the owner's [`Refill::wake_senders`] or
    /// [`CommandQueue::settle`]).
    #[inline]
    pub fn push<I>(
        &self,
        item: I,
        bytes: usize,
        on_full: OnFull,
        make: impl FnOnce(I) -> C,
    ) -> Result<bool, Refused<I>> {
        let mut state = self.lock();
        if state.stopped {
            return Err(Refused::Stopped(item));
        }
        if let Some(cause) = self.refusal(&state, bytes, on_full) {
            state.waiting_senders += usize::from(on_full == OnFull::Wait);
            if !state.holds.running() {
                state.holds.refused(self.clock, cause);
            }
            return Err(Refused::Full(item));
        }
        if state.holds.running() {
            state.holds.let_through(self.clock);
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
    /// it, once per item. The items not taken stay in `from`. `on_full` as for
    /// [`CommandQueue::push`]: with [`OnFull::Wait`], the caller counts as waiting for room
    /// when some are left.
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
        on_full: OnFull,
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
        let delay_room = self.delay_room(on_full);
        // The items that fit: by count, then by bytes (a record larger than the whole budget
        // goes alone into an empty queue, as with `push`), and while the queue is below the
        // queue-delay room.
        let mut taken = 0;
        let mut added = 0usize;
        let mut refused = SendWaitCause::BufferMemory;
        for item in from.iter().take(room) {
            let bytes = charge(item);
            let alone = queue == 0 && taken == 0 && bytes > self.byte_budget;
            if added.saturating_add(bytes) > free && !alone {
                break;
            }
            if queue.saturating_add(added) >= delay_room {
                refused = SendWaitCause::QueueDelay;
                break;
            }
            added = added.saturating_add(bytes);
            taken += 1;
        }
        if taken > 0 && state.holds.running() {
            state.holds.let_through(self.clock);
        }
        if taken < from.len() {
            state.waiting_senders += usize::from(on_full == OnFull::Wait);
            if !state.holds.running() {
                state.holds.refused(self.clock, refused);
            }
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
            send_waits: state.holds.take(),
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
        self.delay_room_waiting
            .fetch_min(core.delay_room_waiting, Ordering::AcqRel);
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
    /// queue-delay room for senders that wait went up.
    #[inline]
    #[must_use = "waiting senders must be woken"]
    pub fn settle(&self, core: impl Into<CoreLoad>) -> bool {
        let core = core.into();
        if core.bytes >= self.core_bytes.load(Ordering::Relaxed)
            && core.delay_room_waiting <= self.delay_room_waiting.load(Ordering::Relaxed)
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
mod tests;
