//! Where [`super::ThreadedProducer::send_timeout`] waits for room in the command queue: a
//! generation count under a mutex and a condition variable. The producer thread bumps the
//! count and wakes every waiter when the queue says senders may go again (the driver loop's
//! [`producer_driver::Host::wake_senders`]), and when it stops.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// Room in the command queue, as the senders that wait for it see it.
#[derive(Debug, Default)]
pub(crate) struct Space {
    /// How many times the producer thread said there is room again.
    generation: Mutex<u64>,
    freed: Condvar,
}

impl Space {
    /// The current generation: read it *before* asking the queue for room again (with the
    /// sender registered as waiting), then [`Space::wait_past`] it, so that a wake-up between
    /// the two is not missed.
    pub(crate) fn generation(&self) -> u64 {
        *self.lock()
    }

    /// Blocks until the generation moves past `seen` or `deadline` passes (`None`: no
    /// deadline). Returns whether it moved (else the deadline passed). Spurious wake-ups are
    /// waited out.
    pub(crate) fn wait_past(&self, seen: u64, deadline: Option<Instant>) -> bool {
        let mut generation = self.lock();
        while *generation == seen {
            generation = match deadline {
                None => self
                    .freed
                    .wait(generation)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    self.freed
                        .wait_timeout(generation, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        true
    }

    /// For the producer thread: there is room again (or the queue stopped). Wakes every
    /// waiting sender; each looks at the queue again.
    pub(crate) fn freed(&self) {
        *self.lock() += 1;
        self.freed.notify_all();
    }

    /// The lock: only a counter is behind it, so a panic while holding it leaves nothing
    /// half-done.
    fn lock(&self) -> MutexGuard<'_, u64> {
        self.generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_wake_up_after_the_generation_was_read_is_not_missed() {
        let space = Space::default();
        let seen = space.generation();
        space.freed();
        // Already past: returns at once, whatever the deadline.
        assert!(space.wait_past(seen, Some(Instant::now())));
    }

    #[test]
    fn a_waiter_is_woken_by_another_thread() {
        let space = Arc::new(Space::default());
        let seen = space.generation();
        let waker = {
            let space = space.clone();
            std::thread::spawn(move || space.freed())
        };
        assert!(space.wait_past(seen, None));
        waker.join().unwrap();
    }

    #[test]
    fn without_a_wake_up_the_wait_ends_at_its_deadline() {
        let space = Space::default();
        assert!(!space.wait_past(space.generation(), Some(Instant::now())));
    }
}
