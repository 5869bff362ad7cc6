//! Deadlines that hold while the core is full. A record the core refused as full is held
//! aside (the stash) and no command is handled until the core takes it, so that records and
//! controls keep their order. The timed commands behind it (`flush_within`, `close_within`)
//! carry their deadline from the call ([`crate::deadline_after`]), and the loop keeps reading
//! the queue for them (without handling anything: [`crate::CommandQueue::take_behind`]) and
//! wakes for the earliest ([`DriverLoop::next_deadline`]). Until the deadline nothing changes:
//! the records before the command keep their chance, in order. At it, with the record still
//! held aside:
//!
//! * a `close_within` fails that record and every record queued before the close as never
//!   sent ([`ProduceError::Purged`], `possibly_persisted` false: the core never had them),
//!   applies the other commands before it in order, then the close, already past its
//!   deadline: the core ends what it holds at once. The outcome's `purged` counts both.
//! * a `flush_within` is answered with the records not reported yet: the core's unacknowledged
//!   ones, the one held aside and those queued before the flush. Nothing is cancelled (as at
//!   the deadline of a flush the core took); the command leaves the queue.
//!
//! The other commands wait their turn: `purge` and `partitions_for` are not deadline-bound
//! (a purge counts what the core holds once every record sent before it is there; the mio
//! handle's `partitions_for` has its own timeout).

use std::time::Instant;

use producer_core::{Delivery, ProduceError};

use super::{Cmd, CoreOf, DriverLoop, Host};
use crate::commands::{Command, Replies};
use crate::control::FlushOutcome;
use crate::{CommandQueue, CoreLoad};

/// A timed command in the loop's `taken`: its number ([`DriverLoop`]'s `popped` counts the
/// commands taken off the front), its deadline, and whether it is a close.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timed {
    index: u64,
    deadline: Instant,
    close: bool,
}

impl<H: Host> DriverLoop<H> {
    /// Whether the loop reads the queue for the deadlines of timed commands without handling
    /// anything: it holds a record the full core refused ([`DriverLoop::reads_commands`] is
    /// false then). A driver still wakes for commands and calls
    /// [`DriverLoop::take_commands`], which handles none of them until the core takes the
    /// record, or a close's deadline passes.
    pub fn scans_commands(&self) -> bool {
        self.stash.is_some() && !self.senders_gone
    }

    /// The earliest deadline of a `flush_within` or `close_within` waiting behind a record the
    /// full core refused, if any: a driver sleeps until the earlier of it and the core's
    /// [`producer_core::Producer::poll_timeout`], then calls [`DriverLoop::retry_stash`] (which
    /// ends what the deadline ends).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.stash.as_ref()?;
        self.behind
            .iter()
            .filter(|t| t.index >= self.popped)
            .map(|t| t.deadline)
            .min()
    }

    /// A record was just held aside: notes the timed commands already in `taken` unless they
    /// are noted. Only then: a loop whose core takes every record never scans its commands.
    pub(super) fn note_timed_behind_stash(&mut self) {
        if !self.behind_noted {
            self.behind.clear();
            self.note_timed(0);
            self.behind_noted = true;
        }
    }

    /// Notes the timed commands among `taken[from..]`, just appended; whether there was any.
    pub(super) fn note_timed(&mut self, from: usize) -> bool {
        let mut found = false;
        for (i, command) in self.taken.iter().enumerate().skip(from) {
            let (deadline, close) = match command {
                Command::FlushWithin(d, _) => (*d, false),
                Command::CloseWithin(d, _) => (*d, true),
                _ => continue,
            };
            found = true;
            self.behind.push_back(Timed {
                index: self.popped + i as u64,
                deadline,
                close,
            });
        }
        found
    }

    /// Forgets the timed commands handled already (taken off the front): the list holds only
    /// those still in `taken`.
    pub(super) fn forget_handled_timed(&mut self) {
        while self.behind.front().is_some_and(|t| t.index < self.popped) {
            self.behind.pop_front();
        }
    }

    /// While a record is held aside: reads what is queued (handling nothing), flushes the core
    /// when a timed command arrived (the records before it get their chance now, not after
    /// `linger`), and ends what the deadlines that passed end. Whether the record held aside
    /// is gone (a close's deadline failed it): the commands are then handled again.
    pub(super) fn watch_behind_stash(
        &mut self,
        core: &mut CoreOf<H>,
        queue: &CommandQueue<Cmd<H>>,
        now: Instant,
    ) -> bool {
        if !self.senders_gone {
            let before = self.taken.len();
            if queue.take_behind(&mut self.taken, CoreLoad::of(core)) {
                self.host.wake_senders();
            }
            if self.note_timed(before) {
                core.flush(now);
            }
        }
        self.expire(core, queue, now);
        self.stash.is_none()
    }

    /// Ends what the deadlines that passed by `now` end while a record is held aside (see the
    /// module's documentation).
    pub(super) fn expire(
        &mut self,
        core: &mut CoreOf<H>,
        queue: &CommandQueue<Cmd<H>>,
        now: Instant,
    ) {
        if self.stash.is_none() {
            return;
        }
        self.forget_handled_timed();
        let due = |t: &&Timed| t.deadline <= now;
        if let Some(close) = self.behind.iter().filter(due).find(|t| t.close).copied() {
            self.end_before_close(core, queue, now, close.index);
            return;
        }
        while let Some(at) = self.behind.iter().position(|t| t.deadline <= now) {
            let Some(flush) = self.behind.remove(at) else {
                break;
            };
            let pos = (flush.index - self.popped) as usize;
            let queued = self.taken.iter().take(pos);
            let queued = queued.filter(|c| matches!(c, Command::Send { .. })).count();
            let Some(Command::FlushWithin(_, waiter)) = self.taken.remove(pos) else {
                unreachable!("a timed flush is noted at its place");
            };
            for later in self.behind.iter_mut().skip(at) {
                later.index -= 1;
            }
            // Handled: it leaves the queue's held count.
            self.unreleased += 1;
            let unreported = core.unacknowledged_records() + 1 + queued;
            H::Replies::flushed(waiter, FlushOutcome::new(unreported));
        }
        self.release(core, queue);
    }

    /// A close's deadline passed with a record held aside: that record and the records queued
    /// before the close (number `close`) fail as never sent, the other commands before it are
    /// applied in order, then the close.
    fn end_before_close(
        &mut self,
        core: &mut CoreOf<H>,
        queue: &CommandQueue<Cmd<H>>,
        now: Instant,
        close: u64,
    ) {
        let never_sent = ProduceError::Purged {
            possibly_persisted: false,
        };
        let Some(held) = self.stash.take() else {
            return;
        };
        self.host.core_full(false);
        queue.release(0, held.bytes, CoreLoad::of(core));
        self.deliver(Delivery::failed(
            held.opaque,
            never_sent.clone(),
            held.record,
        ));
        let mut purged = 1;
        while self.popped <= close {
            let Some(command) = self.taken.pop_front() else {
                break;
            };
            self.popped += 1;
            self.unreleased += 1;
            match command {
                Command::Send {
                    record,
                    opaque,
                    bytes,
                } => {
                    self.unreleased_bytes += bytes;
                    purged += 1;
                    self.hand_over(None, Delivery::failed(opaque, never_sent.clone(), record));
                }
                Command::CloseWithin(..) if self.popped == close + 1 => {
                    self.timed.purged_before_close(purged);
                    let _ = self.apply(core, now, command);
                }
                other => {
                    let _ = self.apply(core, now, other);
                }
            }
        }
        self.release(core, queue);
    }
}
