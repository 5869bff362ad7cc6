//! The transactional API of both mio producers, as views of a producer with a
//! `transactional.id` (a producer without one has no transactional call to make):
//! [`MioTransactions`] for the embeddable [`MioDriver`] (non-blocking, each result polled),
//! [`ThreadedTransactions`] for the [`ThreadedProducer`] (blocking).

use std::time::Instant;

use producer_core::{ConsumerGroupMetadata, OffsetToCommit, TransactionError};
use producer_driver::TransactionCall;

use crate::driver::MioDriver;
use crate::sink::DeliverySink;
use crate::threaded::ThreadedProducer;

impl<T, S: DeliverySink<T>> MioDriver<T, S> {
    /// The transactional operations, when the driver's config has a `transactional.id`
    /// (`Config::transactional_id`); `None` without one, so a producer that is not
    /// transactional cannot call them. Borrowed for a call or a few in a row (between two
    /// turns of the loop); see [`MioTransactions`] for the order of the calls and how their
    /// results come out.
    pub fn transactions(&mut self) -> Option<MioTransactions<'_, T, S>> {
        let transactional = self.core().config().transactional_id.is_some();
        transactional.then_some(MioTransactions { driver: self })
    }
}

/// The transactional operations of a [`MioDriver`] with a `transactional.id`, borrowed from
/// [`MioDriver::transactions`] (which answers `None` without one). Each one is
/// [`producer_core::Transactions`]' operation of the same name; none blocks.
///
/// An operation that is refused returns the error at once and changes nothing. One that is
/// accepted returns `Ok` and goes on while the loop runs: every operation but `begin`
/// completes later, its result coming out of [`MioDriver::poll_transaction`] (`begin` is done
/// when it returns).
///
/// The operations run one at a time, in this order:
///
/// 1. [`MioTransactions::init`], once.
/// 2. [`MioTransactions::begin`]: a transaction is open and [`MioDriver::send`] accepts
///    records, which belong to it (before, a transactional producer's records are refused
///    with `SendErrorReason::NoTransaction`).
/// 3. Records, and any number of [`MioTransactions::send_offsets`].
/// 4. [`MioTransactions::commit`], or [`MioTransactions::abort`] (also after an abortable
///    error); back to 2.
///
/// While one operation is under way the others are refused with
/// [`TransactionError::InProgress`]; a call out of order is refused with
/// [`TransactionError::InvalidState`]. After a fatal error every operation is refused with
/// it. Where the producer stands: `driver.core().transaction_state()`.
pub struct MioTransactions<'a, T, S: DeliverySink<T>> {
    driver: &'a mut MioDriver<T, S>,
}

impl<T, S: DeliverySink<T>> std::fmt::Debug for MioTransactions<'_, T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MioTransactions")
            .field("driver", &*self.driver)
            .finish()
    }
}

impl<T, S: DeliverySink<T>> MioTransactions<'_, T, S> {
    /// Starts the transactional producer: finds its coordinator and gets the producer id and
    /// epoch for its `transactional.id`, fencing any earlier producer with the same id. Call
    /// it once, before the first [`MioTransactions::begin`]; its result comes out of
    /// [`MioDriver::poll_transaction`] while the loop runs.
    ///
    /// Bounded by `max_block` (Java's `max.block.ms`), as every operation but `begin`: see
    /// [`MioTransactions::commit`] for [`TransactionError::OperationTimedOut`] and what may be
    /// called then.
    pub fn init(&mut self) -> Result<(), TransactionError> {
        self.call(|t, now| t.init(now))
    }

    /// Opens a transaction: from now on [`MioDriver::send`] accepts records, which belong to
    /// it. Local: done when it returns (no result to poll); the transaction's
    /// `transaction.timeout.ms` counts from here. Refused unless the producer is initialized
    /// and no transaction is open.
    pub fn begin(&mut self) -> Result<(), TransactionError> {
        self.call(|t, now| t.begin(now))
    }

    /// Adds a consumer group's offsets to the open transaction (consume-transform-produce):
    /// committed for the group if and only if the transaction commits. The result comes out of
    /// [`MioDriver::poll_transaction`]; records may be sent meanwhile. Refused, with nothing
    /// sent, with [`TransactionError::InvalidOffsets`] when a name or the metadata cannot go in
    /// its request. Bounded by `max_block` (see [`MioTransactions::commit`]).
    pub fn send_offsets(
        &mut self,
        offsets: Vec<OffsetToCommit>,
        group: ConsumerGroupMetadata,
    ) -> Result<(), TransactionError> {
        self.call(|t, now| t.send_offsets(now, offsets, group))
    }

    /// Commits the open transaction: flushes its records (ignoring `linger`), waits for each
    /// to be acknowledged, then ends it on the coordinator. The result comes out of
    /// [`MioDriver::poll_transaction`], right after the records' reports (with `committed`
    /// set). On [`TransactionError::Abortable`] (a record of the transaction failed) or
    /// [`TransactionError::TimedOut`], call [`MioTransactions::abort`].
    ///
    /// Bounded by `max_block`: when the commit has not completed `max_block` after this call
    /// (its records are still being retried, or the coordinator cannot be reached), its result
    /// is [`TransactionError::OperationTimedOut`], and the commit goes on. Until the commit is
    /// called again, every other operation is refused with [`TransactionError::InProgress`];
    /// the commit called again completes with the commit's result (at once when it completed
    /// meanwhile), or times out again `max_block` later. The same holds for
    /// [`MioTransactions::init`], [`MioTransactions::send_offsets`] (called again with the
    /// same offsets and group) and [`MioTransactions::abort`], as for Java's producer.
    pub fn commit(&mut self) -> Result<(), TransactionError> {
        self.call(|t, now| t.commit(now))
    }

    /// Aborts the open transaction (also after an abortable error): its records fail with
    /// `ProduceError::TransactionAborted`, each handed back in its report. The result comes
    /// out of [`MioDriver::poll_transaction`]; the producer is then ready for
    /// [`MioTransactions::begin`] again. Bounded by `max_block` (see
    /// [`MioTransactions::commit`]).
    pub fn abort(&mut self) -> Result<(), TransactionError> {
        self.call(|t, now| t.abort(now))
    }

    /// Runs a transactional operation on the core, then acts on the core's outputs.
    fn call(
        &mut self,
        op: impl FnOnce(
            &mut producer_core::Transactions<'_, T>,
            Instant,
        ) -> Result<(), TransactionError>,
    ) -> Result<(), TransactionError> {
        let now = Instant::now();
        let (core, _) = self.driver.parts_mut();
        let r = match core.transactions() {
            Some(mut t) => op(&mut t, now),
            // Not reached: the view exists only for a transactional producer.
            None => Err(TransactionError::NotTransactional),
        };
        self.driver.drive(now);
        r
    }
}

impl<T: Send + 'static> ThreadedProducer<T> {
    /// The transactional operations, when the producer was spawned with a `transactional.id`
    /// (`Config::transactional_id`); `None` without one, so a producer that is not
    /// transactional cannot call them. Borrowed for a call or a few in a row; records may be
    /// sent through the same handle meanwhile. See [`ThreadedTransactions`] for the order of
    /// the calls.
    pub fn transactions(&self) -> Option<ThreadedTransactions<'_, T>> {
        self.is_transactional()
            .then_some(ThreadedTransactions { producer: self })
    }
}

/// The transactional operations of a [`ThreadedProducer`] with a `transactional.id`, borrowed
/// from [`ThreadedProducer::transactions`] (which answers `None` without one). Each one is
/// [`producer_core::Transactions`]' operation of the same name, run by the producer thread;
/// each call blocks until its operation completes. From the delivery or event callback (the
/// producer thread) a call cannot wait: it is refused with [`TransactionError::InProgress`].
///
/// The operations run one at a time, in this order:
///
/// 1. [`ThreadedTransactions::init`], once.
/// 2. [`ThreadedTransactions::begin`]: a transaction is open and
///    [`ThreadedProducer::send_with`] (and the other sends) take records, which belong to it
///    (before, a transactional producer's records fail with `SendErrorReason::NoTransaction`).
/// 3. Records, and any number of [`ThreadedTransactions::send_offsets`].
/// 4. [`ThreadedTransactions::commit`], or [`ThreadedTransactions::abort`] (also after an
///    abortable error); back to 2.
///
/// While one operation is under way (from another thread, or one that timed out) the others
/// are refused with [`TransactionError::InProgress`]; a call out of order is refused with
/// [`TransactionError::InvalidState`] and changes nothing. After a fatal error every operation
/// is refused with it; once the producer thread ended, with its fatal error or
/// [`TransactionError::Closed`].
pub struct ThreadedTransactions<'a, T> {
    producer: &'a ThreadedProducer<T>,
}

impl<T> Clone for ThreadedTransactions<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ThreadedTransactions<'_, T> {}

impl<T> std::fmt::Debug for ThreadedTransactions<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedTransactions")
            .field("producer", self.producer)
            .finish()
    }
}

impl<T: Send + 'static> ThreadedTransactions<'_, T> {
    /// Starts the transactional producer: finds its coordinator and gets the producer id and
    /// epoch for its `transactional.id`, fencing any earlier producer with the same id (whose
    /// open transaction the coordinator aborts). Call it once, before the first
    /// [`ThreadedTransactions::begin`]; blocks until that is done.
    ///
    /// Bounded by `max_block` (Java's `max.block.ms`), as every operation but `begin`: see
    /// [`ThreadedTransactions::commit`] for [`TransactionError::OperationTimedOut`] and what
    /// may be called then.
    pub fn init(&self) -> Result<(), TransactionError> {
        self.producer.transaction_call(TransactionCall::Init)
    }

    /// Opens a transaction: records sent from now on belong to it. Local to the producer (the
    /// coordinator learns of it with its first partition or offsets); its
    /// `transaction.timeout.ms` counts from here. Refused unless the producer is initialized
    /// and no transaction is open.
    pub fn begin(&self) -> Result<(), TransactionError> {
        self.producer.transaction_call(TransactionCall::Begin)
    }

    /// Adds a consumer group's offsets to the open transaction (consume-transform-produce):
    /// committed for the group if and only if the transaction commits. Blocks until the
    /// group's coordinator has them; other threads may send records meanwhile. Refused, with
    /// nothing sent, with [`TransactionError::InvalidOffsets`] when a name or the metadata
    /// cannot go in its request. Bounded by `max_block` (see [`ThreadedTransactions::commit`]).
    pub fn send_offsets(
        &self,
        offsets: Vec<OffsetToCommit>,
        group: ConsumerGroupMetadata,
    ) -> Result<(), TransactionError> {
        self.producer
            .transaction_call(TransactionCall::SendOffsets(offsets, group))
    }

    /// Commits the open transaction: flushes its records (ignoring `linger`), waits for each
    /// to be acknowledged, then ends it on the coordinator; blocks until that is done. The
    /// records' reports (with `committed` set) reach the delivery callback before this
    /// returns. On [`TransactionError::Abortable`] (a record of the transaction failed) or
    /// [`TransactionError::TimedOut`], call [`ThreadedTransactions::abort`].
    ///
    /// Bounded by `max_block`: when the commit has not completed `max_block` after this call
    /// (its records are still being retried, or the coordinator cannot be reached), it returns
    /// [`TransactionError::OperationTimedOut`], and the commit goes on. Until the commit is
    /// called again, every other operation is refused with [`TransactionError::InProgress`];
    /// the commit called again returns the commit's result (at once when it completed
    /// meanwhile), or times out again `max_block` later. The same holds for
    /// [`ThreadedTransactions::init`], [`ThreadedTransactions::send_offsets`] (called again
    /// with the same offsets and group) and [`ThreadedTransactions::abort`], as for Java's
    /// producer.
    pub fn commit(&self) -> Result<(), TransactionError> {
        self.producer.transaction_call(TransactionCall::Commit)
    }

    /// Aborts the open transaction (also after an abortable error) and blocks until done: its
    /// records fail with `ProduceError::TransactionAborted`, each handed back in its report;
    /// the producer is then ready for [`ThreadedTransactions::begin`] again. Bounded by
    /// `max_block` (see [`ThreadedTransactions::commit`]).
    pub fn abort(&self) -> Result<(), TransactionError> {
        self.producer.transaction_call(TransactionCall::Abort)
    }
}
