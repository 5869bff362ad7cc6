//! The command layer every threaded driver runs around the core: the commands the
//! application's handles queue, applied to the core; the flush, close and transaction
//! bookkeeping; the core's reports and events handed to the application; and the rule for a
//! panic in the producer's own code. A driver keeps only its sockets, its wake-ups and the
//! shape of its public handle.
//!
//! A driver implements [`Host`] (where reports and events go, how a waiting call is
//! answered), owns one [`DriverLoop`] and one [`producer_core::Producer`] of [`Tracked`]
//! values, and calls, in its own loop:
//!
//! 1. [`DriverLoop::retry_stash`] and [`DriverLoop::take_commands`] when commands may be
//!    waiting (only while [`DriverLoop::reads_commands`] or [`DriverLoop::scans_commands`]),
//!    and [`DriverLoop::retry_stash`] at least by [`DriverLoop::next_deadline`] (sleep until
//!    the earlier of it and the core's deadline);
//! 2. after every input to the core, [`DriverLoop::drain`] (or, when another part of the
//!    driver polls the core's outputs, [`DriverLoop::deliver`], [`DriverLoop::event`] and
//!    [`DriverLoop::transaction_done`] for the outputs that are reports), then
//!    [`DriverLoop::settle`];
//! 3. each step through [`step`], which contains a panic in the producer's own code (the
//!    driver implements [`Driven`] for it);
//! 4. once the core is closed (or after a panic), [`DriverLoop::shutdown`].

mod deadlines;
mod shutdown;

pub use shutdown::LastWords;

use std::collections::VecDeque;
use std::time::Instant;

use producer_core::{
    Callback, Delivery, Event, Output, ProduceError, Producer, Record, SendErrorReason,
    TransactionError, TransactionResult,
};

use crate::commands::{Command, Replies, TransactionCall};
use crate::control::TimedWaiters;
use crate::interceptors::{OnSendPanicked, RecordId};
use crate::panic::InjectedPanics;
use crate::partitions::PartitionWaiters;
use crate::{call_user, contain, log_event, timestamp, Cohort, CommandQueue, FlushTracker};
use crate::{Acknowledgement, CoreLoad, Interceptors};

/// What a driver supplies to its [`DriverLoop`]: where reports and events go.
pub trait Host {
    /// How its waiting calls are answered.
    type Replies: Replies;

    /// Hands one report to where it goes (a future, the application's callback). Called inside
    /// [`call_user`]: a panic here is named by an [`Event::CallbackPanicked`], and the report
    /// counts as handed over.
    fn deliver(&mut self, delivery: Delivery<Opaque<Self>>);
    /// Shows an event (already logged) to the application's event callback, if any. Called
    /// inside [`call_user`].
    fn show(&mut self, event: &Event);
    /// The core refused a record as full and the loop holds it aside (`true`), or the core
    /// took it (`false`). Does nothing by default.
    fn core_full(&mut self, full: bool) {
        let _ = full;
    }
    /// Senders waiting for room in the command queue may go now. Does nothing by default
    /// (for handles that never wait).
    fn wake_senders(&mut self) {}
}

/// The value a host's records are sent with.
pub type Opaque<H> = <<H as Host>::Replies as Replies>::Opaque;
/// A host's waiter for a flush or a close.
pub(crate) type Done<H> = <<H as Host>::Replies as Replies>::Done;
/// A host's waiter for a transactional operation.
type TxnWaiter<H> = <<H as Host>::Replies as Replies>::Transaction;
/// A host's waiter for a topic's partitions.
type PartsWaiter<H> = <<H as Host>::Replies as Replies>::Partitions;
/// A host's waiter for a `flush_within`.
type FlushedW<H> = <<H as Host>::Replies as Replies>::Flushed;
/// A host's waiter for a `close_within`.
type ClosedW<H> = <<H as Host>::Replies as Replies>::Closed;
/// The core as a host's loop drives it.
pub type CoreOf<H> = Producer<Tracked<Opaque<H>>>;
/// A host's commands.
pub(crate) type Cmd<H> = Command<<H as Host>::Replies>;

/// The value each record carries through the core: the caller's, the flush cohort it was
/// accepted in, and the number the interceptors gave it (`None` without interceptors: one
/// store per record, eight bytes).
pub struct Tracked<O> {
    cohort: Cohort,
    record_id: Option<RecordId>,
    opaque: O,
}

/// How many commands [`DriverLoop::take_commands`] handles at a time.
#[derive(Debug, Clone, Copy)]
pub struct Intake {
    /// Most commands handled per call.
    pub per_call: usize,
    /// Commands handled between two releases of the queue's held count (and two readings of
    /// the clocks).
    pub release_every: usize,
}

/// A record the core refused as full, held aside until reports free space (or a close's
/// deadline fails it): while it is here no command is handled. Its bytes stay counted in the
/// command queue's held bytes.
struct Stashed<O> {
    record: Record,
    opaque: Tracked<O>,
    bytes: usize,
}

/// The command layer around the core, shared by the drivers: see the crate documentation.
pub struct DriverLoop<H: Host> {
    host: H,
    /// Commands taken from the queue and not handled yet (still held in the queue's count).
    taken: VecDeque<Cmd<H>>,
    /// Commands handled since the queue's held count was last lowered, and their bytes.
    unreleased: usize,
    unreleased_bytes: usize,
    /// The one record the core refused as full; while it is here no command is handled, but
    /// the queue is still read for the deadlines of the timed commands (`deadlines.rs`).
    stash: Option<Stashed<Opaque<H>>>,
    /// Commands taken from the front of `taken` so far: `taken[i]` is command number
    /// `popped + i`.
    popped: u64,
    /// The timed commands (`flush_within`, `close_within`) in `taken`, by number, in order.
    behind: VecDeque<deadlines::Timed>,
    /// `behind` lists every timed command in `taken` (false once a refill added commands
    /// while no record was held aside: they are noted when one is).
    behind_noted: bool,
    /// Unreported records per flush cohort, and the flushes waiting for them.
    flushes: FlushTracker<Done<H>>,
    /// Flushes of a transactional producer, answered once every record is acknowledged.
    txn_flushes: Vec<Done<H>>,
    close_waiters: Vec<Done<H>>,
    /// The waiters of `flush_within` and `close_within`.
    timed: TimedWaiters<FlushedW<H>, ClosedW<H>>,
    /// Who waits for the transactional operation under way (the core runs one at a time).
    txn_waiter: Option<TxnWaiter<H>>,
    /// Who waits for a topic's partitions.
    partitions: PartitionWaiters<PartsWaiter<H>>,
    /// The loop asked the core to close.
    closing: bool,
    /// Every handle is gone and nothing is left to handle: no command will come again.
    senders_gone: bool,
    /// Metadata arrived while a flush is pending: flush the core again.
    reflush: bool,
    /// Records handed to the core so far (for [`InjectedPanics`]).
    handed: u64,
    injected: InjectedPanics,
    /// `injected.panic_at()`, compared with `handed` before every record.
    panic_at: u64,
    /// The message of a panic in the producer's own code: the loop is stopping because of it.
    panicked: Option<String>,
    /// Failing the records after that panic panicked too: the core is not touched again.
    core_broken: bool,
    /// The application's interceptors: each record before the core, each report before the
    /// host.
    interceptors: Interceptors,
}

/// Answers flushes that are done (on every report: inlined, as there is rarely any).
#[inline(always)]
pub(crate) fn answer<H: Host>(done: impl Iterator<Item = Done<H>>) {
    for waiter in done {
        H::Replies::done(waiter);
    }
}

impl<H: Host> DriverLoop<H> {
    /// A loop handing reports and events to `host`; `injected` panics for tests
    /// ([`InjectedPanics::default`] otherwise).
    pub fn new(host: H, injected: InjectedPanics) -> Self {
        DriverLoop {
            host,
            taken: VecDeque::new(),
            unreleased: 0,
            unreleased_bytes: 0,
            stash: None,
            popped: 0,
            behind: VecDeque::new(),
            behind_noted: true,
            flushes: FlushTracker::default(),
            txn_flushes: Vec::new(),
            close_waiters: Vec::new(),
            timed: TimedWaiters::default(),
            txn_waiter: None,
            partitions: PartitionWaiters::default(),
            closing: false,
            senders_gone: false,
            reflush: false,
            handed: 0,
            injected,
            panic_at: injected.panic_at(),
            panicked: None,
            core_broken: false,
            interceptors: Interceptors::default(),
        }
    }

    /// The loop with the application's `interceptors` (none by default): each record goes
    /// through their `on_send` as the loop takes it from the queue, right before the core's
    /// `send`, and each report through their `on_acknowledgement` before the host gets it.
    #[must_use]
    pub fn with_interceptors(mut self, interceptors: Interceptors) -> Self {
        self.interceptors = interceptors;
        self
    }

    /// The host.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// What the core charges for `record` against `buffer_memory`: what a handle counts it
    /// as in the command queue.
    #[inline]
    pub fn charge(record: &Record) -> usize {
        Producer::<Tracked<Opaque<H>>>::buffer_charge(record)
    }

    /// Whether the loop handles commands now: not while it holds a record aside (it only reads
    /// the queue for deadlines then: [`DriverLoop::scans_commands`]), nor once every handle is
    /// gone.
    pub fn reads_commands(&self) -> bool {
        self.stash.is_none() && !self.senders_gone
    }

    /// Whether the loop holds commands it took and has not handled yet (the next
    /// [`DriverLoop::take_commands`] handles them without waiting for the queue).
    pub fn holds_commands(&self) -> bool {
        self.stash.is_none() && !self.taken.is_empty()
    }

    /// Handles up to `intake.per_call` commands, taking the whole queue (one lock, a swap)
    /// when the previous take is used up, and again after the last one if it is. Stops at a
    /// record the core refused as full; while one is held, takes what is queued behind it
    /// without handling it, for the deadlines of `flush_within` and `close_within` (see
    /// `driver_loop/deadlines.rs`), and goes on only once a close's deadline ended the record
    /// held. `clock` reads the monotonic clock the core runs on
    /// (once per `intake.release_every` commands and after each flush and transactional
    /// operation); records without a timestamp get the wall clock, read as often. Starts
    /// closing once every handle is gone and nothing is left. Returns whether commands are
    /// left to handle at once.
    pub fn take_commands(
        &mut self,
        core: &mut CoreOf<H>,
        queue: &CommandQueue<Cmd<H>>,
        intake: Intake,
        clock: impl Fn() -> Instant,
    ) -> bool {
        if self.stash.is_some() && !self.watch_behind_stash(core, queue, clock()) {
            return false;
        }
        if self.taken.is_empty() {
            self.refill(core, queue, &clock);
        }
        let mut now = clock();
        let mut wall_ms = timestamp::wall_clock_ms();
        let mut handled = 0;
        while self.stash.is_none() && handled < intake.per_call {
            if self.handed == self.panic_at
                && matches!(self.taken.front(), Some(Command::Send { .. }))
            {
                InjectedPanics::before_record(self.handed);
            }
            let Some(command) = self.taken.pop_front() else {
                break;
            };
            self.popped += 1;
            handled += 1;
            self.unreleased += 1;
            if self.unreleased == intake.release_every {
                self.release(core, queue);
                now = clock();
                wall_ms = timestamp::wall_clock_ms();
            }
            match command {
                // With interceptors the record goes through them, out of line; without, the
                // arm below is the whole record path (one branch more than before them).
                command @ Command::Send { .. } if !self.interceptors.is_empty() => {
                    self.submit_intercepted(core, now, wall_ms, command);
                }
                Command::Send {
                    mut record,
                    opaque,
                    bytes,
                } => {
                    self.unreleased_bytes += bytes;
                    timestamp::fill_at(&mut record, wall_ms);
                    let tracked = Tracked {
                        cohort: self.flushes.accept(),
                        record_id: None,
                        opaque,
                    };
                    self.submit(core, now, record, tracked, bytes);
                }
                other => {
                    if self.apply(core, now, other) {
                        now = clock();
                    }
                }
            }
        }
        if let Some(s) = &self.stash {
            // Held aside: it stays counted until the core takes it.
            self.unreleased_bytes -= s.bytes;
        }
        self.forget_handled_timed();
        self.release(core, queue);
        if self.taken.is_empty() && self.stash.is_none() {
            self.refill(core, queue, &clock);
        }
        self.stash.is_none() && !self.taken.is_empty()
    }

    /// Applies a command other than a record to the core; whether the clock is to be read
    /// again (it may have taken a while).
    fn apply(&mut self, core: &mut CoreOf<H>, now: Instant, command: Cmd<H>) -> bool {
        match command {
            Command::Send {
                record,
                opaque,
                bytes,
            } => {
                // Not reached: `take_commands` hands records over itself.
                self.unreleased_bytes += bytes;
                let tracked = Tracked {
                    cohort: self.flushes.accept(),
                    record_id: None,
                    opaque,
                };
                self.submit(core, now, record, tracked, bytes);
            }
            Command::Flush(done) => {
                self.flush(core, now, done);
                return true;
            }
            Command::Close(done) => {
                self.close_waiters.push(done);
                self.close(core, now);
            }
            Command::Metrics(waiter) => H::Replies::metrics(waiter, core.metrics_at(now)),
            Command::Transaction(call, waiter) => {
                self.start_transaction(core, now, call, waiter);
                return true;
            }
            Command::Partitions(topic, w) => {
                self.partitions
                    .ask(core, now, topic, w, H::Replies::partitions);
            }
            Command::Purge(scope, in_flight, waiter) => {
                H::Replies::purged(waiter, core.purge(now, scope, in_flight));
            }
            Command::FlushWithin(deadline, waiter) => {
                self.timed.flush_within(core, now, deadline, waiter);
            }
            Command::CloseWithin(deadline, waiter) => {
                self.timed.close_within(waiter);
                self.closing = true;
                core.close_within(now, deadline);
            }
        }
        false
    }

    /// Takes everything queued into `taken`; wakes the waiting senders once there is room;
    /// starts closing when every handle is gone and nothing is left.
    fn refill(
        &mut self,
        core: &mut CoreOf<H>,
        queue: &CommandQueue<Cmd<H>>,
        clock: &impl Fn() -> Instant,
    ) {
        let refill = queue.refill(&mut self.taken, CoreLoad::of(core));
        // The time senders were held back in the queue counts in the core's metrics.
        refill.send_waits.note_in(core, clock);
        // Timed commands are noted only while a record is held aside (see `deadlines`).
        self.behind_noted = false;
        // Waiting senders are woken once half the capacity is free, not for every batch: a
        // sender that outpaces the loop then sleeps once per half queue, not per batch.
        if refill.wake_senders {
            self.host.wake_senders();
        }
        if refill.finished && !self.senders_gone {
            tracing::debug!("every producer handle dropped; closing");
            self.senders_gone = true;
            self.close(core, clock());
        }
    }

    /// Lowers the queue's held count by the commands handled since the last release (the
    /// records among them count in the core now).
    fn release(&mut self, core: &CoreOf<H>, queue: &CommandQueue<Cmd<H>>) {
        if self.unreleased == 0 && self.unreleased_bytes == 0 {
            return;
        }
        queue.release(self.unreleased, self.unreleased_bytes, CoreLoad::of(core));
        self.unreleased = 0;
        self.unreleased_bytes = 0;
    }

    /// A flush: the core sends everything buffered now. Answered once every record sent before
    /// it has its report; for a transactional producer, whose reports wait for the
    /// transaction's end, once every record is acknowledged (as the Java client's flush).
    fn flush(&mut self, core: &mut CoreOf<H>, now: Instant, done: Done<H>) {
        if core.config().transactional_id.is_some() {
            core.flush(now);
            self.txn_flushes.push(done);
        } else {
            answer::<H>(self.flushes.flush(done));
            core.flush(now);
        }
    }

    /// Starts closing the core (once): it stops taking records and reports every record it
    /// holds; [`producer_core::Producer::is_closed`] turns true at the end.
    pub fn close(&mut self, core: &mut CoreOf<H>, now: Instant) {
        if !self.closing {
            self.closing = true;
            tracing::info!("closing the producer");
            core.close(now);
        }
    }

    /// Hands a transactional operation to the core; its result is answered now when it was
    /// refused (or is local), else when the core reports it complete.
    fn start_transaction(
        &mut self,
        core: &mut CoreOf<H>,
        now: Instant,
        call: TransactionCall,
        waiter: TxnWaiter<H>,
    ) {
        let Some(mut txn) = core.transactions() else {
            H::Replies::transaction(waiter, Err(TransactionError::NotTransactional));
            return;
        };
        let started = match call {
            TransactionCall::Init => txn.init(now),
            TransactionCall::Begin => {
                // Local: done at once, no completion output follows.
                H::Replies::transaction(waiter, txn.begin(now));
                return;
            }
            TransactionCall::SendOffsets(offsets, group) => txn.send_offsets(now, offsets, group),
            TransactionCall::Commit => txn.commit(now),
            TransactionCall::Abort => txn.abort(now),
        };
        match started {
            // The core runs one operation at a time: at most one waiter.
            Ok(()) => self.txn_waiter = Some(waiter),
            Err(e) => H::Replies::transaction(waiter, Err(e)),
        }
    }

    /// Hands a record to the core (it counts `bytes` in the command queue until the core has
    /// it); `Full` keeps it aside, any other refusal fails it.
    fn submit(
        &mut self,
        core: &mut CoreOf<H>,
        now: Instant,
        record: Record,
        opaque: Tracked<Opaque<H>>,
        bytes: usize,
    ) {
        self.handed += 1;
        match core.send(now, record, opaque) {
            Ok(()) => {}
            Err(e) if e.reason == SendErrorReason::Full => {
                self.handed -= 1;
                self.stash = Some(Stashed {
                    record: e.record,
                    opaque: e.opaque,
                    bytes,
                });
                self.note_timed_behind_stash();
                self.host.core_full(true);
            }
            Err(e) => {
                let error = ProduceError::Refused(Box::new(e.reason));
                self.deliver(Delivery::failed(e.opaque, error, e.record));
            }
        }
    }

    /// Hands the record held aside to the core again; once the core took it, its bytes leave
    /// the command queue's count. If the core still refuses it, ends what the deadlines of the
    /// timed commands behind it that passed by `now` end ([`DriverLoop::next_deadline`]). Call
    /// it after reports may have freed space and at that deadline, before
    /// [`DriverLoop::take_commands`].
    pub fn retry_stash(
        &mut self,
        core: &mut CoreOf<H>,
        queue: &CommandQueue<Cmd<H>>,
        now: Instant,
    ) {
        if let Some(s) = self.stash.take() {
            self.host.core_full(false);
            let bytes = s.bytes;
            self.submit(core, now, s.record, s.opaque, bytes);
            if self.stash.is_none() {
                queue.release(0, bytes, CoreLoad::of(core));
            } else {
                self.expire(core, queue, now);
            }
        }
    }

    /// Acts on every output the core has: reports and transactional results here, the rest
    /// (connections, writes, token requests) by `io`; call [`DriverLoop::settle`] after.
    /// Events are logged. For a driver that polls the core's outputs itself.
    pub fn drain(
        &mut self,
        core: &mut CoreOf<H>,
        mut io: impl FnMut(&mut CoreOf<H>, Output<Tracked<Opaque<H>>>),
    ) {
        while let Some(out) = core.poll_output() {
            match out {
                Output::Delivery(d) => self.deliver(d),
                Output::Transaction(r) => self.transaction_done(r),
                Output::Event(e) => {
                    log_event(&e);
                    self.event(&e);
                }
                other => io(core, other),
            }
        }
    }

    /// After the core's outputs were acted on: lets the queue see the space reports freed
    /// (waking the senders waiting for it), and answers the flushes of a transactional
    /// producer once every record is acknowledged. Returns whether to flush the core again:
    /// metadata arrived while a flush is pending, so records that waited for it were just
    /// appended to batches that linger as usual (then call
    /// [`producer_core::Producer::flush`], act on the outputs and settle again).
    ///
    /// It also arms the core's timed flush again for the `flush_within`s still waiting after
    /// an earlier one timed out; the core then has outputs too, and this returns true.
    #[must_use = "a pending flush covers the records that waited for metadata: flush again"]
    pub fn settle(&mut self, core: &mut CoreOf<H>, queue: &CommandQueue<Cmd<H>>) -> bool {
        if queue.settle(CoreLoad::of(core)) {
            self.host.wake_senders();
        }
        if !self.txn_flushes.is_empty() && core.unacknowledged_records() == 0 {
            answer::<H>(self.txn_flushes.drain(..));
        }
        self.partitions.settle(core, H::Replies::partitions);
        let rearmed = self.timed.rearm(core);
        std::mem::take(&mut self.reflush) || rearmed
    }

    /// Hands one report from the core to the host, then counts it reported (answering the
    /// flushes it completes).
    #[inline]
    pub fn deliver(&mut self, delivery: Delivery<Tracked<Opaque<H>>>) {
        let cohort = delivery.opaque.cohort;
        let record_id = delivery.opaque.record_id;
        self.hand_over(record_id, delivery.map_opaque(|t| t.opaque));
        answer::<H>(self.flushes.reported(cohort));
    }

    /// A record through the interceptors' `on_send`, then to the core as
    /// [`DriverLoop::submit`] hands it; a panic in `on_send` is named by an event and the record
    /// fails, not sent. Out of line: the loop's record path without interceptors keeps one
    /// branch.
    #[inline(never)]
    fn submit_intercepted(
        &mut self,
        core: &mut CoreOf<H>,
        now: Instant,
        wall_ms: i64,
        command: Cmd<H>,
    ) {
        let Command::Send {
            mut record,
            opaque,
            bytes,
        } = command
        else {
            // Only records come here; any other command is applied as usual.
            self.apply(core, now, command);
            return;
        };
        self.unreleased_bytes += bytes;
        timestamp::fill_at(&mut record, wall_ms);
        let record_id = match self.interceptors.on_send(&mut record) {
            Ok(id) => id,
            Err(panicked) => return self.intercept_failed(panicked, opaque, record),
        };
        let tracked = Tracked {
            cohort: self.flushes.accept(),
            record_id: Some(record_id),
            opaque,
        };
        self.submit(core, now, record, tracked, bytes);
    }

    /// An interceptor's `on_send` panicked on `record`: the panic is named by an event and the
    /// record fails, not sent.
    #[cold]
    fn intercept_failed(&mut self, panicked: OnSendPanicked, opaque: Opaque<H>, record: Record) {
        self.emit(&panicked.event());
        let error = panicked.error();
        self.hand_over(Some(panicked.id), Delivery::failed(opaque, error, record));
    }

    /// Hands a report to the host, after the interceptors saw it (with the number they gave
    /// the record, when it went through them); a panic in either is named by an event, and the
    /// report counts as handed over.
    #[inline]
    fn hand_over(&mut self, record_id: Option<RecordId>, delivery: Delivery<Opaque<H>>) {
        if !self.interceptors.is_empty() {
            return self.hand_over_intercepted(record_id, delivery);
        }
        // Moved straight into the call: a report borrowed first would be copied again.
        let host = &mut self.host;
        if let Err(panicked) = call_user(Callback::Delivery, move || host.deliver(delivery)) {
            self.emit(&panicked);
        }
    }

    /// [`DriverLoop::hand_over`] with interceptors: they see the report first, and their panics
    /// are named by events. Out of line: the loop without interceptors keeps only the branch.
    #[inline(never)]
    fn hand_over_intercepted(
        &mut self,
        record_id: Option<RecordId>,
        delivery: Delivery<Opaque<H>>,
    ) {
        for panicked in self
            .interceptors
            .on_acknowledgement_with_id(record_id, Acknowledgement::of(&delivery))
        {
            self.emit(&panicked);
        }
        let host = &mut self.host;
        if let Err(panicked) = call_user(Callback::Delivery, move || host.deliver(delivery)) {
            self.emit(&panicked);
        }
    }

    /// An event the driver made itself (a callback's panic): logged, then as
    /// [`DriverLoop::event`].
    pub fn emit(&mut self, event: &Event) {
        log_event(event);
        self.event(event);
    }

    /// One of the core's events (logged already, as [`log_event`] does): shown to the host's
    /// event callback. A callback that panics is named by an event of its own, logged and
    /// shown to it once (a second panic is only logged).
    pub fn event(&mut self, event: &Event) {
        if *event == Event::MetadataUpdated && self.flushes.is_waiting() {
            self.reflush = true;
        }
        self.partitions.event(event, H::Replies::partitions);
        self.timed.event(event, H::Replies::flushed);
        let host = &mut self.host;
        if let Err(panicked) = call_user(Callback::Event, || host.show(event)) {
            log_event(&panicked);
            if let Err(again) = call_user(Callback::Event, || host.show(&panicked)) {
                log_event(&again);
            }
        }
    }

    /// A transactional operation the core completed: answers its waiter.
    pub fn transaction_done(&mut self, result: TransactionResult) {
        if let Some(w) = self.txn_waiter.take() {
            H::Replies::transaction(w, result.result);
        }
    }

    /// Whether the core may be called: false after a panic in failing its records.
    pub fn core_usable(&self) -> bool {
        !self.core_broken
    }
}

/// A driver's state, as the rule for a panic in the producer's own code needs it: the core,
/// its command layer, and how the driver acts on the core's outputs.
pub trait Driven {
    /// Where the driver's reports and events go.
    type Host: Host;

    /// The core and the command layer.
    fn parts(&mut self) -> (&mut CoreOf<Self::Host>, &mut DriverLoop<Self::Host>);

    /// Acts on every output the core has (connections, writes, reports, events), then
    /// [`DriverLoop::settle`]s.
    fn act_on_outputs(&mut self);
}

/// Runs one step of a driver's loop inside [`contain`]. A panic in it (the producer's own
/// code: the core's or the driver's) fails every record the core holds with the panic's
/// message and closes the core; if that panics too, the core is not touched again. Returns
/// `None` after a panic: the loop stops, then calls [`DriverLoop::shutdown`].
pub fn step<D: Driven, R>(driver: &mut D, f: impl FnOnce(&mut D) -> R) -> Option<R> {
    let message = match contain(|| f(driver)) {
        Ok(r) => return Some(r),
        Err(message) => message,
    };
    tracing::error!(
        %message,
        "the producer panicked in its own code; every record fails"
    );
    let layer = driver.parts().1;
    layer.panicked = Some(message.clone());
    let injected = layer.injected;
    let closed = contain(|| {
        injected.before_recovery();
        driver.parts().0.fail_after_panic(message);
        driver.act_on_outputs();
        driver.parts().0.is_closed()
    });
    if closed != Ok(true) {
        tracing::error!(
            "failing the records after the panic failed too; the records the core held get no \
             report"
        );
        driver.parts().1.core_broken = true;
    }
    None
}

#[cfg(test)]
mod tests;
