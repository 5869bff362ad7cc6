//! The handle's controls over what the producer holds: `purge`, and the timed `flush_within`
//! and `close_within` (their deadlines are the core's: the task wakes for them).

use std::sync::atomic::Ordering;
use std::time::Duration;

use producer_core::{InFlight, PurgeScope};
use producer_driver::{deadline_after, CloseOutcome, Command, FlushOutcome};
use tokio::sync::oneshot;

use crate::error::ProducerStopped;
use crate::handle::ProducerHandle;

/// The clock the task runs on (tokio's, so tests may pause time).
fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

impl ProducerHandle {
    /// Removes the records the producer holds in `scope` before they are acknowledged
    /// ([`producer_core::Producer::purge`]): each comes back in its own report (its delivery
    /// future, or the detached report) failed with [`crate::ProduceError::Purged`], and the
    /// count is returned. Every record sent before the call (through any handle) is covered;
    /// those sent after are produced as usual.
    ///
    /// Call it to drop what is buffered on shutdown or failover, or when the records went
    /// stale. Records never in a sent request say `possibly_persisted` false; with
    /// [`InFlight::Abandon`] those already sent are removed too (`possibly_persisted` true,
    /// their answers ignored, an idempotent producer's partition bumps its epoch before sending
    /// again); with [`InFlight::Wait`] they finish as usual. In a transaction, removing any
    /// record aborts the transaction: see [`producer_core::Producer::purge`] for what its
    /// operations answer then ([`crate::TransactionError::Purged`]).
    ///
    /// A record the task holds aside while the core's buffer is full is handed to the core
    /// before the purge is read, so a purge waits for room as a send does.
    ///
    /// # Errors
    /// [`ProducerStopped`] once the producer task has stopped (every record was reported).
    pub async fn purge(
        &self,
        scope: PurgeScope,
        in_flight: InFlight,
    ) -> Result<usize, ProducerStopped> {
        let (tx, rx) = oneshot::channel();
        if !self
            .shared()
            .push_control(Command::Purge(scope, in_flight, tx))
        {
            return Err(ProducerStopped);
        }
        rx.await.map_err(|_| ProducerStopped)
    }

    /// Sends everything buffered now (ignoring `linger`) and resolves when every record the
    /// producer holds is acknowledged, or when `timeout` has passed (counted from the call,
    /// also while the core's buffer is full and the records before it wait for room),
    /// whichever comes first: [`FlushOutcome::unreported`] is 0 in the
    /// first case, else how many records were not acknowledged at the deadline. Nothing is
    /// cancelled at the deadline: those records go on and are reported as usual.
    ///
    /// Unlike [`ProducerHandle::flush`] it waits for every record held, those sent after the
    /// call included (as the core counts them: [`producer_core::Producer::flush_within`]).
    /// Once the task has stopped it resolves at once with 0 (every record was reported).
    pub async fn flush_within(&self, timeout: Duration) -> FlushOutcome {
        let (tx, rx) = oneshot::channel();
        if !self
            .shared()
            .push_control(Command::FlushWithin(deadline_after(now(), timeout), tx))
        {
            return FlushOutcome::new(0);
        }
        rx.await.unwrap_or(FlushOutcome::new(0))
    }

    /// Closes the producer as [`ProducerHandle::close`] does, but within `timeout` (counted
    /// from the call): at the deadline every record still held is ended
    /// (never sent: [`crate::ProduceError::Purged`]; in a sent request or awaiting a retry:
    /// [`crate::ProduceError::CloseTimedOut`], `possibly_persisted` true), a transactional
    /// producer stops waiting for its coordinator, the connections are closed without waiting
    /// for answers and the task stops. Resolves then, with how many records the deadline
    /// ended ([`CloseOutcome::in_time`] when none); each record still has its own report.
    ///
    /// Call it to shut down within a bound (Java's `close(Duration)`). Later sends are refused.
    /// Called again, or after `close`, the earlier deadline counts. Once the task has stopped
    /// it resolves at once with nothing ended.
    ///
    /// The deadline holds while the core is full too (`buffer_memory` or `buffer_max_records`
    /// reached, a record held aside for room and the commands queued behind it waiting): the
    /// records sent before the call keep their chance until the deadline; at it, those the
    /// core never took fail as never sent ([`crate::ProduceError::Purged`], counted in
    /// [`CloseOutcome::purged`]).
    pub async fn close_within(&self, timeout: Duration) -> CloseOutcome {
        self.shared().closing.store(true, Ordering::Release);
        let (tx, rx) = oneshot::channel();
        if !self
            .shared()
            .push_control(Command::CloseWithin(deadline_after(now(), timeout), tx))
        {
            return CloseOutcome::default();
        }
        rx.await.unwrap_or_default()
    }
}
