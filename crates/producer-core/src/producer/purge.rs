//! Control over what the producer holds: `purge` (records removed before they are acknowledged,
//! each handed back with [`ProduceError::Purged`]), and the deadlines of `flush_within` and
//! `close_within` (the core's one timer: [`TimerKind::FlushDeadline`],
//! [`TimerKind::CloseDeadline`]).

use std::sync::Arc;
use std::time::Instant;

use crate::timer::TimerKind;
use crate::types::{Event, Output, ProduceError};

use super::Producer;

/// Which records [`crate::Producer::purge`] removes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PurgeScope {
    /// Every record of every topic.
    All,
    /// The records of one topic (every partition, and those waiting for its metadata).
    Topic(Arc<str>),
    /// The records of one partition of a topic (and those waiting for the topic's metadata
    /// with this explicit partition; a record without one has no partition yet and stays).
    Partition(Arc<str>, i32),
}

/// What [`crate::Producer::purge`] does with records whose batch was already sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InFlight {
    /// Leave them to finish: they are reported when their answer comes (or their retries end),
    /// as if no purge had happened.
    Wait,
    /// Abandon them: they are reported at once with [`ProduceError::Purged`]
    /// (`possibly_persisted` true: they were sent and may have been written), and the answers
    /// to their requests are ignored. An idempotent producer restarts the sequence of each such
    /// partition under a new epoch before it sends there again.
    Abandon,
}

/// The pending deadlines of `flush_within` and `close_within`.
#[derive(Debug, Default)]
pub(super) struct Deadlines {
    /// A `flush_within` waits for every record to be acknowledged until this instant.
    flush: Option<Instant>,
    /// A `close_within` ends what is still held at this instant.
    close: Option<Instant>,
    /// The close's deadline passed: the close completes without waiting for any answer.
    pub(super) close_passed: bool,
    /// The close's deadline is being handled: the close completes once that is done (its
    /// event comes after the reports and [`Event::CloseDeadlineReached`]).
    pub(super) ending: bool,
}

/// Records a purge ended, by kind.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    /// Never sent: [`ProduceError::Purged`] with `possibly_persisted` false.
    unsent: usize,
    /// Sent and abandoned.
    sent: usize,
}

impl<T> Producer<T> {
    /// [`Producer::purge`].
    pub(super) fn purge_records(&mut self, scope: &PurgeScope, in_flight: InFlight) -> usize {
        let sent_error = ProduceError::Purged {
            possibly_persisted: true,
        };
        let t = self.purge_scope(scope, in_flight == InFlight::Abandon, sent_error, true);
        t.unsent + t.sent
    }

    /// Ends the records in `scope`: those never sent with [`ProduceError::Purged`] (not
    /// persisted), and with `abandon` those sent and not finished with `sent_error`. In a
    /// transaction, with `abort_txn`, removing any record aborts the open transaction (see
    /// [`Producer::txn_purge_abort`]).
    fn purge_scope(
        &mut self,
        scope: &PurgeScope,
        abandon: bool,
        sent_error: ProduceError,
        abort_txn: bool,
    ) -> Tally {
        let unsent_error = ProduceError::Purged {
            possibly_persisted: false,
        };
        let (topics, partition): (Vec<u32>, Option<i32>) = match scope {
            PurgeScope::All => ((0..self.topics.len()).collect(), None),
            PurgeScope::Topic(name) => (self.topics.lookup(name).into_iter().collect(), None),
            PurgeScope::Partition(name, p) => {
                (self.topics.lookup(name).into_iter().collect(), Some(*p))
            }
        };
        let idempotent = self.config.idempotence;
        let mut tally = Tally::default();
        let mut touched = Vec::new();
        for t in topics {
            // Records waiting for the topic's metadata: never sent.
            let holding = std::mem::take(&mut self.topics.get_mut(t).holding);
            let (purged, kept): (Vec<_>, Vec<_>) = holding
                .into_iter()
                .partition(|h| partition.is_none_or(|p| h.partition == Some(p)));
            self.topics.get_mut(t).holding = kept.into_iter().collect();
            for h in purged {
                tally.unsent += 1;
                self.fail_unrouted(
                    t,
                    h.partition.unwrap_or(-1),
                    h.pending,
                    unsent_error.clone(),
                );
            }
            let count = self.topics.partition_count(t);
            let parts: Vec<u32> = match partition {
                None => (0..count).collect(),
                Some(p) => u32::try_from(p)
                    .ok()
                    .filter(|&p| p < count)
                    .into_iter()
                    .collect(),
            };
            for p in parts {
                let pq = self.topics.partition_mut(t, p);
                if pq.is_empty() {
                    continue;
                }
                let c = pq.purge(abandon, &unsent_error, &sent_error, idempotent);
                tally.unsent += c.unsent;
                tally.sent += c.sent;
                if let Some(records) = c.open {
                    self.fail_records(t, p as i32, records, unsent_error.clone());
                }
                touched.push((t, p));
            }
        }
        if abort_txn && tally.unsent + tally.sent > 0 {
            self.txn_purge_abort();
        }
        for (t, p) in touched {
            self.emit_done(t, p);
            self.mark_partition_dirty(t, p);
        }
        self.work_pending = true;
        self.check_closed();
        tally
    }

    /// [`Producer::flush_within`]: closes every open batch and reports the flush's end.
    pub(super) fn begin_flush_within(&mut self, deadline: Instant) {
        self.close_all_open_batches();
        self.deadlines.flush = Some(deadline);
        self.timers.arm(deadline, TimerKind::FlushDeadline);
    }

    /// A pending `flush_within` completes once no record is unacknowledged: called by
    /// `poll_output` when its queue is empty, so the event comes after the reports.
    pub(super) fn check_flush(&mut self) {
        if self.deadlines.flush.is_some() && self.unacknowledged_records() == 0 {
            self.deadlines.flush = None;
            self.outputs.push_back(Output::Event(Event::FlushCompleted));
        }
    }

    /// [`TimerKind::FlushDeadline`]: the pending flush, if its deadline passed, timed out.
    pub(super) fn flush_deadline_fired(&mut self) {
        if self.deadlines.flush.is_some_and(|at| at <= self.now) {
            self.check_flush();
        }
        if self.deadlines.flush.is_some_and(|at| at <= self.now) {
            self.deadlines.flush = None;
            let unacknowledged = self.unacknowledged_records();
            self.outputs
                .push_back(Output::Event(Event::FlushTimedOut { unacknowledged }));
        }
    }

    /// [`Producer::close_within`]: a close (if none began), and its deadline (the earlier of
    /// two, if called again).
    pub(super) fn begin_close_within(&mut self, deadline: Instant) {
        if !self.lifecycle.closing {
            self.begin_close();
        }
        if self.lifecycle.closed {
            return;
        }
        let at = self.deadlines.close.map_or(deadline, |d| d.min(deadline));
        self.deadlines.close = Some(at);
        self.timers.arm(at, TimerKind::CloseDeadline);
        if at <= self.now {
            self.close_deadline_fired();
        }
    }

    /// [`TimerKind::CloseDeadline`]: if the close's deadline passed and it has not completed,
    /// everything still held ends now (never sent: [`ProduceError::Purged`]; sent:
    /// [`ProduceError::CloseTimedOut`]), a transactional producer stops waiting for its
    /// coordinator (the held records fail as [`Producer::txn_abandon`] says), and the close
    /// completes without waiting for any answer.
    pub(super) fn close_deadline_fired(&mut self) {
        if self.lifecycle.closed || self.deadlines.close.is_none_or(|at| at > self.now) {
            return;
        }
        self.deadlines.close = None;
        self.deadlines.ending = true;
        let t = self.purge_scope(
            &PurgeScope::All,
            true,
            ProduceError::CloseTimedOut {
                possibly_persisted: true,
            },
            false,
        );
        self.txn_deadline_passed();
        self.outputs
            .push_back(Output::Event(Event::CloseDeadlineReached {
                purged: t.unsent,
                timed_out: t.sent,
            }));
        self.deadlines.ending = false;
        self.deadlines.close_passed = true;
        self.check_closed();
    }
}
