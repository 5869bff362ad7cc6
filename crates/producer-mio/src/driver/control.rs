//! Control over what the producer holds, for both mio drivers: `purge`, and the timed
//! `flush_within` and `close_within`. The deadlines are the core's (its one timer): the
//! embeddable [`MioDriver`] reports their end through its events, the [`ThreadedProducer`]
//! blocks until it.

use std::time::{Duration, Instant};

use producer_core::{InFlight, PurgeScope};
use producer_driver::{deadline_after, CloseOutcome, Command, FlushOutcome};

use crate::sink::DeliverySink;
use crate::{MioDriver, ThreadedProducer};

fn deadline(now: Instant, timeout: Duration) -> Instant {
    deadline_after(now, timeout)
}

impl<T, S: DeliverySink<T>> MioDriver<T, S> {
    /// Removes the records in `scope` before they are acknowledged
    /// ([`producer_core::Producer::purge`]) and returns how many it removed; each one's report
    /// (failed with [`producer_core::ProduceError::Purged`], the record handed back) is in the
    /// sink when this returns. Call it to drop what is buffered (on shutdown, failover, stale
    /// content); the driver goes on, and later records are produced as usual. Records never
    /// sent say `possibly_persisted` false; with [`InFlight::Abandon`] those already sent are
    /// removed too (`possibly_persisted` true, their answers ignored); in a transaction a purge
    /// that removes any record aborts the transaction.
    pub fn purge(&mut self, scope: PurgeScope, in_flight: InFlight) -> usize {
        let now = Instant::now();
        let n = self.core.purge(now, scope, in_flight);
        self.drive(now);
        n
    }

    /// Sends everything buffered now (as [`MioDriver::flush`]) and has the producer report
    /// the flush's end as an event ([`MioDriver::poll_event`], and the sink's
    /// [`DeliverySink::event`]): [`producer_core::Event::FlushCompleted`] once every record is
    /// acknowledged, or [`producer_core::Event::FlushTimedOut`] with the count left when
    /// `timeout` passes first (nothing is cancelled then). Keep running the loop: the deadline
    /// is in [`MioDriver::next_timeout`]. A second call while one is pending replaces its
    /// deadline (one event answers both).
    pub fn flush_within(&mut self, timeout: Duration) {
        let now = Instant::now();
        self.core.flush_within(now, deadline(now, timeout));
        self.drive(now);
    }

    /// Closes as [`MioDriver::close`] does, but within `timeout`: if the close has not
    /// completed by then, every record still held is ended at the deadline (never sent:
    /// [`producer_core::ProduceError::Purged`]; in a sent request or awaiting a retry:
    /// [`producer_core::ProduceError::CloseTimedOut`], `possibly_persisted` true), the event
    /// [`producer_core::Event::CloseDeadlineReached`] says how many of each, the connections
    /// are closed without waiting for answers and [`MioDriver::is_closed`] turns true. Keep
    /// running the loop until then (the deadline is in [`MioDriver::next_timeout`]).
    pub fn close_within(&mut self, timeout: Duration) {
        let now = Instant::now();
        self.core.close_within(now, deadline(now, timeout));
        self.drive(now);
    }
}

impl<T: Send + 'static> ThreadedProducer<T> {
    /// Removes the records the producer holds in `scope` before they are acknowledged
    /// ([`producer_core::Producer::purge`]), blocking until the producer thread did it; how
    /// many it removed. Each comes back through the delivery callback, failed with
    /// [`producer_core::ProduceError::Purged`] (the record handed back). Every record sent
    /// before the call is covered; those sent after are produced as usual.
    ///
    /// Records never sent say `possibly_persisted` false; with [`InFlight::Abandon`] those
    /// already sent are removed too (`possibly_persisted` true, their answers ignored, an
    /// idempotent producer's partition bumps its epoch before sending again); with
    /// [`InFlight::Wait`] they finish as usual. In a transaction, removing any record aborts
    /// the transaction (its `commit` then fails with
    /// [`producer_core::TransactionError::Purged`]).
    ///
    /// `None` when called from the delivery callback (the purge happens once the callback
    /// returns; the thread cannot wait for itself) or once the thread has stopped. A record
    /// held aside while the core's buffer is full goes in before the purge is read.
    pub fn purge(&self, scope: PurgeScope, in_flight: InFlight) -> Option<usize> {
        self.ask(false, |tx| Command::Purge(scope, in_flight, tx))
    }

    /// Sends everything queued now (ignoring `linger`) and blocks until every record the
    /// producer holds is acknowledged (those sent meanwhile included), or until `timeout` has
    /// passed (counted from the call, also while the core's buffer is full and the records
    /// before it wait for room): [`FlushOutcome::unreported`] is
    /// 0 in the first case, else the count not acknowledged at the deadline (nothing is
    /// cancelled: those records go on and are reported as usual). [`ThreadedProducer::flush`]
    /// is the untimed flush of the records sent before it.
    ///
    /// `None` when called from the delivery callback (the flush starts once the callback
    /// returns, nobody waits) or once the thread has stopped (every record was reported).
    pub fn flush_within(&self, timeout: Duration) -> Option<FlushOutcome> {
        self.ask(false, |tx| {
            Command::FlushWithin(deadline(Instant::now(), timeout), tx)
        })
    }

    /// Closes as [`ThreadedProducer::close`] does (later sends are refused), but within
    /// `timeout` (counted from the call): at the deadline every record
    /// still held is ended (never sent: [`producer_core::ProduceError::Purged`]; in a sent
    /// request or awaiting a retry: [`producer_core::ProduceError::CloseTimedOut`],
    /// `possibly_persisted` true), each through the delivery callback, a transactional producer
    /// stops waiting for its coordinator, the connections are closed without waiting for
    /// answers and the thread exits. Blocks until then; the outcome counts the records the
    /// deadline ended ([`CloseOutcome::in_time`] when none).
    ///
    /// `None` when called from the delivery callback (the close starts, nobody waits) or when
    /// the thread had already stopped.
    ///
    /// The deadline holds while the core is full too (`buffer_memory` or `buffer_max_records`
    /// reached, a record held aside for room and the commands queued behind it waiting): the
    /// records sent before the call keep their chance until the deadline; at it, those the
    /// core never took fail as never sent ([`producer_core::ProduceError::Purged`], counted in
    /// [`CloseOutcome::purged`]).
    pub fn close_within(&self, timeout: Duration) -> Option<CloseOutcome> {
        let outcome = self.ask(true, |tx| {
            Command::CloseWithin(deadline(Instant::now(), timeout), tx)
        });
        if outcome.is_some() {
            self.join();
        }
        outcome
    }
}
