//! The timed flush and close of the drivers' handles, and what they answer: the waiters of
//! `flush_within` (answered by the core's [`Event::FlushCompleted`] or
//! [`Event::FlushTimedOut`]; the core keeps one pending flush, armed with the earliest
//! waiter's deadline and armed again for the next), and of `close_within` (answered when the
//! core closed, with the counts of its [`Event::CloseDeadlineReached`]).
//!
//! The deadlines are the core's (one timer): nothing here reads a clock.

use std::time::Instant;

use producer_core::{Event, Producer};

/// How a `flush_within` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[must_use = "says whether every record was acknowledged in time"]
pub struct FlushOutcome {
    /// Records not acknowledged when it ended: 0 when the flush completed (every record
    /// accepted is acknowledged: reported, or, in a transaction, held for its end); else the
    /// count at the deadline. Nothing was cancelled: those records go on, each with its own
    /// report later.
    pub unreported: usize,
}

impl FlushOutcome {
    /// An outcome of `unreported` records left.
    pub fn new(unreported: usize) -> Self {
        FlushOutcome { unreported }
    }

    /// Whether the flush completed before its deadline.
    pub fn is_complete(&self) -> bool {
        self.unreported == 0
    }
}

/// How a `close_within` ended. Each record still comes back in its own report (one report
/// per record); these are the counts of those the deadline ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
#[must_use = "says how many records the deadline ended"]
pub struct CloseOutcome {
    /// Records never sent, reported with [`producer_core::ProduceError::Purged`]
    /// (`possibly_persisted` false).
    pub purged: usize,
    /// Records in a sent request or waiting to be sent again, reported with
    /// [`producer_core::ProduceError::CloseTimedOut`] (`possibly_persisted` true).
    pub timed_out: usize,
}

impl CloseOutcome {
    /// An outcome with these counts.
    pub fn new(purged: usize, timed_out: usize) -> Self {
        CloseOutcome { purged, timed_out }
    }

    /// Whether the close completed before its deadline (nothing was ended by it).
    pub fn in_time(&self) -> bool {
        self.purged == 0 && self.timed_out == 0
    }
}

/// The waiters of `flush_within` and `close_within`: `F` answers a flush, `C` a close.
#[derive(Debug)]
pub(crate) struct TimedWaiters<F, C> {
    /// Flushes waiting, each with its deadline.
    flushes: Vec<(Instant, F)>,
    /// The deadline the core's pending flush is armed with.
    armed: Option<Instant>,
    /// A flush timed out at this deadline (passed, so not later than the core's time) and
    /// later ones wait: arm the core again.
    rearm: Option<Instant>,
    closes: Vec<C>,
    /// What the close's deadline ended (zero when the close completed in time).
    close_outcome: CloseOutcome,
}

impl<F, C> Default for TimedWaiters<F, C> {
    fn default() -> Self {
        TimedWaiters {
            flushes: Vec::new(),
            armed: None,
            rearm: None,
            closes: Vec::new(),
            close_outcome: CloseOutcome::default(),
        }
    }
}

impl<F, C> TimedWaiters<F, C> {
    /// A `flush_within` until `deadline`: the core flushes now and its pending flush is armed
    /// with the earliest deadline waiting.
    pub(crate) fn flush_within<T>(
        &mut self,
        core: &mut Producer<T>,
        now: Instant,
        deadline: Instant,
        waiter: F,
    ) {
        self.flushes.push((deadline, waiter));
        let earliest = self.earliest().unwrap_or(deadline);
        self.armed = Some(earliest);
        core.flush_within(now, earliest);
    }

    fn earliest(&self) -> Option<Instant> {
        self.flushes.iter().map(|(d, _)| *d).min()
    }

    /// A `close_within`: answered once the core closed.
    pub(crate) fn close_within(&mut self, waiter: C) {
        self.closes.push(waiter);
    }

    /// The loop failed `purged` records as never sent at a close's deadline, before the core
    /// had them (held aside while the core was full, or queued behind): the outcome counts
    /// them with the core's.
    pub(crate) fn purged_before_close(&mut self, purged: usize) {
        self.close_outcome.purged += purged;
    }

    /// One of the core's events: the flushes it ends, answered by `flushed`.
    pub(crate) fn event(&mut self, event: &Event, mut flushed: impl FnMut(F, FlushOutcome)) {
        match event {
            Event::FlushCompleted => {
                self.armed = None;
                for (_, w) in self.flushes.drain(..) {
                    flushed(w, FlushOutcome::new(0));
                }
            }
            Event::FlushTimedOut { unacknowledged } => {
                let Some(at) = self.armed.take() else { return };
                let (due, later): (Vec<_>, Vec<_>) =
                    self.flushes.drain(..).partition(|(d, _)| *d <= at);
                self.flushes = later;
                for (_, w) in due {
                    flushed(w, FlushOutcome::new(*unacknowledged));
                }
                self.rearm = (!self.flushes.is_empty()).then_some(at);
            }
            Event::CloseDeadlineReached { purged, timed_out } => {
                // Added to the records the loop ended before the core had them.
                self.close_outcome.purged += *purged;
                self.close_outcome.timed_out += *timed_out;
            }
            _ => {}
        }
    }

    /// Arms the core again for the flushes still waiting after one timed out; whether it did
    /// (the core then has outputs to act on).
    pub(crate) fn rearm<T>(&mut self, core: &mut Producer<T>) -> bool {
        let (Some(at), Some(earliest)) = (self.rearm.take(), self.earliest()) else {
            return false;
        };
        self.armed = Some(earliest);
        // `at` passed already: given as `now`, it moves the core's time nowhere.
        core.flush_within(at, earliest);
        true
    }

    /// The loop stopped (the core closed, or a panic): every waiter is answered, the flushes
    /// with `unreported` (0 after a close: every record was reported), the closes with what
    /// the deadline ended.
    pub(crate) fn finish(
        &mut self,
        unreported: usize,
        mut flushed: impl FnMut(F, FlushOutcome),
        mut closed: impl FnMut(C, CloseOutcome),
    ) {
        for (_, w) in self.flushes.drain(..) {
            flushed(w, FlushOutcome::new(unreported));
        }
        for w in self.closes.drain(..) {
            closed(w, self.close_outcome);
        }
    }

    /// What the close's deadline ended so far.
    pub(crate) fn close_outcome(&self) -> CloseOutcome {
        self.close_outcome
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use producer_core::{Config, Record};

    use super::*;

    /// Two flushes with different deadlines on a core that cannot deliver: the earlier times
    /// out at its deadline, the later is armed again and times out at its own, each told the
    /// count left; a close's counts come from the core's deadline event.
    #[test]
    fn each_flush_ends_at_its_own_deadline_and_a_close_gets_its_counts() {
        let config = Config::builder([("127.0.0.1", 9)]).build().unwrap();
        let t0 = Instant::now();
        let mut core: Producer<u32> = Producer::new(config, t0);
        core.send(t0, Record::new("t", "v"), 1).unwrap();
        let mut w: TimedWaiters<&str, &str> = TimedWaiters::default();
        let (a, b) = (t0 + Duration::from_secs(1), t0 + Duration::from_secs(3));
        w.flush_within(&mut core, t0, b, "late");
        w.flush_within(&mut core, t0, a, "early");
        let mut answered: Vec<(&str, usize, Instant)> = Vec::new();
        for t in [a, b] {
            core.handle_timeout(t);
            while let Some(o) = core.poll_output() {
                if let producer_core::Output::Event(e) = o {
                    w.event(&e, |f, o| answered.push((f, o.unreported, t)));
                }
            }
            w.rearm(&mut core);
        }
        assert_eq!(answered, [("early", 1, a), ("late", 1, b)]);

        w.close_within("close");
        w.event(
            &Event::CloseDeadlineReached {
                purged: 2,
                timed_out: 3,
            },
            |_, _| {},
        );
        let mut closes = Vec::new();
        w.finish(0, |_, _| {}, |c, o| closes.push((c, o)));
        assert_eq!(closes, [("close", CloseOutcome::new(2, 3))]);
        assert!(!closes[0].1.in_time());
    }
}
