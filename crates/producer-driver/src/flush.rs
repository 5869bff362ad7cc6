//! Knowing when a flush is done: every record sent before it has its report.
//!
//! Records are counted per *cohort*: the records a driver accepted between two flushes. Each
//! flush closes the current cohort and waits until it and every older one are fully reported.
//! ("Cohort" because Kafka already uses "epoch" for producer and leader epochs, and the core's
//! connection handles carry a "generation".)

use std::collections::VecDeque;

/// The cohort a record was accepted in: a driver keeps it with the record (in the opaque
/// value it hands the core) and gives it back to [`FlushTracker::reported`] with the record's
/// report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cohort(u64);

/// Unreported records per cohort, and the flushes waiting for them. `W` is what a waiting
/// flush is answered through (a oneshot sender, a channel); the tracker hands each one back
/// once its flush is done, and the driver answers it.
///
/// O(1) per record: the counts of the open cohorts sit in a deque that starts at the oldest
/// cohort with unreported records.
#[derive(Debug)]
pub struct FlushTracker<W> {
    /// The cohort of `counts[0]`; every older cohort is fully reported.
    base: u64,
    /// Unreported records per cohort, from `base` to the current one (the last entry, always
    /// present).
    counts: VecDeque<usize>,
    /// Flushes in the order they came, each with the last cohort it waits for.
    waiters: VecDeque<(u64, W)>,
}

impl<W> Default for FlushTracker<W> {
    fn default() -> Self {
        FlushTracker {
            base: 0,
            counts: VecDeque::from([0]),
            waiters: VecDeque::new(),
        }
    }
}

impl<W> FlushTracker<W> {
    /// The cohort records accepted now belong to.
    #[inline]
    pub fn current(&self) -> Cohort {
        Cohort(self.base + self.counts.len() as u64 - 1)
    }

    /// Call when the driver accepts a record: counts it in the current cohort, which it
    /// returns. Every accepted record must come back once through [`FlushTracker::reported`].
    #[inline]
    #[must_use = "the cohort must come back with the record's report, or its flushes never finish"]
    pub fn accept(&mut self) -> Cohort {
        if let Some(n) = self.counts.back_mut() {
            *n += 1;
        }
        self.current()
    }

    /// Call when a record of `cohort` has its report (or is handed back, no longer the
    /// driver's to report). Returns the flushes this completed, oldest first, for the driver to
    /// answer; usually none. A cohort already fully reported is ignored.
    #[inline]
    #[must_use = "the flushes returned are done and must be answered"]
    pub fn reported(&mut self, cohort: Cohort) -> Done<'_, W> {
        let Some(index) = cohort.0.checked_sub(self.base) else {
            return Done(None);
        };
        let Some(n) = self.counts.get_mut(index as usize) else {
            return Done(None);
        };
        *n = n.saturating_sub(1);
        if index == 0 && *n == 0 && !self.waiters.is_empty() {
            self.release()
        } else {
            // The path of nearly every report: nothing to drain.
            Done(None)
        }
    }

    /// Call for a flush: closes the current cohort and queues `waiter` until it and every older
    /// cohort are reported. Returns the flushes that are done already (this one, when nothing
    /// is outstanding).
    #[must_use = "the flushes returned are done and must be answered"]
    pub fn flush(&mut self, waiter: W) -> Done<'_, W> {
        self.waiters.push_back((self.current().0, waiter));
        self.counts.push_back(0);
        self.release()
    }

    /// Whether any flush is waiting.
    #[inline]
    pub fn is_waiting(&self) -> bool {
        !self.waiters.is_empty()
    }

    /// Call when the driver stops (every record is reported or handed back): every waiting
    /// flush, to be answered.
    #[must_use = "the flushes returned must be answered"]
    pub fn release_all(&mut self) -> Done<'_, W> {
        let all = self.waiters.len();
        self.done(all)
    }

    /// Drops the fully reported cohorts at the front; the flushes they complete.
    fn release(&mut self) -> Done<'_, W> {
        while self.counts.len() > 1 && self.counts.front() == Some(&0) {
            self.counts.pop_front();
            self.base += 1;
        }
        let oldest_open = if self.counts.front().is_some_and(|n| *n > 0) {
            self.base
        } else {
            u64::MAX
        };
        let finished = self
            .waiters
            .iter()
            .take_while(|(last, _)| *last < oldest_open)
            .count();
        self.done(finished)
    }

    /// The first `n` waiting flushes, taken out.
    fn done(&mut self, n: usize) -> Done<'_, W> {
        Done(Some(self.waiters.drain(..n)))
    }
}

/// Flushes that are done, oldest first: answer each (dropping one unanswered is a bug, so the
/// iterator is `#[must_use]`).
#[must_use = "the flushes are done and must be answered"]
#[derive(Debug)]
pub struct Done<'a, W>(Option<std::collections::vec_deque::Drain<'a, (u64, W)>>);

impl<W> Iterator for Done<'_, W> {
    type Item = W;

    #[inline]
    fn next(&mut self) -> Option<W> {
        self.0.as_mut()?.next().map(|(_, w)| w)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.as_ref().map_or((0, Some(0)), |d| d.size_hint())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(done: Done<'_, &'static str>) -> Vec<&'static str> {
        done.collect()
    }

    #[test]
    fn a_flush_waits_for_its_cohort_and_older_ones() {
        let mut t = FlushTracker::default();
        let a = t.accept();
        let b = t.accept();
        assert_eq!(a, b);
        assert!(answered(t.flush("first")).is_empty());
        let c = t.accept();
        assert_ne!(c, a);
        assert!(answered(t.flush("second")).is_empty());
        // The second cohort completes first: both flushes still wait for the first one.
        assert!(answered(t.reported(c)).is_empty());
        assert!(answered(t.reported(a)).is_empty());
        assert_eq!(
            answered(t.reported(b)),
            ["first", "second"],
            "the first cohort is reported; the second was already empty"
        );
        assert_eq!(t.counts.len(), 1, "only the current cohort is kept");
        assert_eq!(t.current(), Cohort(2));
        assert!(!t.is_waiting());
    }

    #[test]
    fn a_flush_with_nothing_outstanding_is_done_at_once() {
        let mut t = FlushTracker::default();
        assert_eq!(answered(t.flush("empty")), ["empty"]);
        // A later record does not count against the answered flush, and a stray report for a
        // cohort already reported is ignored.
        let g = t.accept();
        assert!(answered(t.reported(Cohort(0))).is_empty());
        assert!(answered(t.flush("later")).is_empty());
        assert_eq!(answered(t.reported(g)), ["later"]);
    }

    #[test]
    fn release_all_hands_back_every_waiting_flush() {
        let mut t = FlushTracker::default();
        let _ = t.accept();
        assert!(answered(t.flush("waiting")).is_empty());
        assert!(t.is_waiting());
        assert_eq!(answered(t.release_all()), ["waiting"]);
        assert!(!t.is_waiting());
    }
}
