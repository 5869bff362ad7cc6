//! The time senders are held back in a [`crate::CommandQueue`], in front of the core, for the
//! core's metrics (`bufferpool-wait-time-ns-total`, the queue-delay wait, the diagnosis).
//!
//! The rule is the core's own for `send`: a wait runs from the first refusal as full (the
//! byte budget or the command capacity: [`SendWaitCause::BufferMemory`]; the queue-delay
//! room: [`SendWaitCause::QueueDelay`], by the first refusal's reason) to the next record the
//! queue takes. The queue keeps it under its lock and reads its clock only on those two
//! events (never for a record taken while nobody was refused); the owner hands the waits
//! that ended to the core when it takes the queue ([`crate::Refill::send_waits`],
//! [`SendWaits::note_in`]), which owns the totals and the windows.

use std::time::{Duration, Instant};

use producer_core::{Producer, SendWaitCause};

/// Waits that ended in the queue since the owner last took them, by cause, and the one
/// running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendWaits {
    /// Ended waits for the byte budget (`buffer.memory`) or the command capacity, added up.
    pub buffer_memory: Duration,
    /// Ended waits for the queue-delay room (`queue.delay.target.ms`), added up.
    pub queue_delay: Duration,
    /// The wait running: since when, and why (`None`: nobody was refused since the last
    /// record taken).
    pub running: Option<(Instant, SendWaitCause)>,
}

impl SendWaits {
    /// Hands the waits to `core` at `now` (the core's clock): the ended ones are counted
    /// ([`Producer::note_send_wait`]), the running one shown in snapshots
    /// ([`Producer::note_send_wait_running`]). Call it each time the queue is taken.
    #[inline]
    pub fn note_in<T>(self, core: &mut Producer<T>, now: impl FnOnce() -> Instant) {
        if !self.buffer_memory.is_zero() || !self.queue_delay.is_zero() {
            let now = now();
            for (waited, cause) in [
                (self.buffer_memory, SendWaitCause::BufferMemory),
                (self.queue_delay, SendWaitCause::QueueDelay),
            ] {
                if !waited.is_zero() {
                    core.note_send_wait(now, waited, cause);
                }
            }
        }
        core.note_send_wait_running(self.running);
    }
}

/// The wait bookkeeping a queue keeps under its lock.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    waits: SendWaits,
}

impl Holds {
    /// Whether a wait runs (one branch on the path of a record taken).
    #[inline(always)]
    pub(crate) fn running(&self) -> bool {
        self.waits.running.is_some()
    }

    /// A sender was refused as full by `cause`: a wait starts at `clock()`, unless one runs.
    #[cold]
    #[inline(never)]
    pub(crate) fn refused(&mut self, clock: fn() -> Instant, cause: SendWaitCause) {
        if self.waits.running.is_none() {
            self.waits.running = Some((clock(), cause));
        }
    }

    /// A record was taken after refusals: the wait ends at `clock()`.
    #[cold]
    #[inline(never)]
    pub(crate) fn let_through(&mut self, clock: fn() -> Instant) {
        if let Some((since, cause)) = self.waits.running.take() {
            let waited = clock().saturating_duration_since(since);
            let total = match cause {
                SendWaitCause::QueueDelay => &mut self.waits.queue_delay,
                _ => &mut self.waits.buffer_memory,
            };
            *total = total.saturating_add(waited);
        }
    }

    /// The ended waits (taken: counted once) and the one running (kept).
    #[inline]
    pub(crate) fn take(&mut self) -> SendWaits {
        let waits = self.waits;
        self.waits.buffer_memory = Duration::ZERO;
        self.waits.queue_delay = Duration::ZERO;
        waits
    }
}
