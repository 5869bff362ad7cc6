//! The transactional API: a view of a [`Producer`] that has a `transactional.id`, so a
//! producer without one has no transactional call to make.

use std::time::Instant;

use super::{transaction, Producer};
use crate::transaction::{ConsumerGroupMetadata, InvalidOffsets, OffsetToCommit, TransactionError};

/// The transactional operations of a producer with a `transactional.id`, borrowed from
/// [`Producer::transactions`] (which answers `None` without one).
///
/// The operations run one at a time, in this order:
///
/// 1. [`Transactions::init`], once: the state goes from
///    [`crate::TransactionState::Uninitialized`] to [`crate::TransactionState::Ready`] when it
///    completes.
/// 2. [`Transactions::begin`]: a transaction is open
///    ([`crate::TransactionState::InTransaction`]) and [`Producer::send`] accepts records,
///    which belong to it (before, a transactional producer's records are refused with
///    `SendErrorReason::NoTransaction`).
/// 3. Records, and any number of [`Transactions::send_offsets`].
/// 4. [`Transactions::commit`], or [`Transactions::abort`] (also after an abortable error):
///    the state is Ready again once it completes; back to 2.
///
/// Every operation but `begin` completes later, with an [`crate::Output::Transaction`]; while
/// one is under way the others are refused with [`TransactionError::InProgress`]. A call out
/// of order is refused with [`TransactionError::InvalidState`] and changes nothing. After a
/// fatal error ([`Transactions::failure`]) every operation is refused with it. Where the
/// producer stands is [`Producer::transaction_state`] (a query that needs no mutable borrow).
#[derive(Debug)]
pub struct Transactions<'a, T> {
    pub(super) producer: &'a mut Producer<T>,
}

impl<T> Transactions<'_, T> {
    /// Starts the transactional producer: finds its transaction coordinator and gets the
    /// producer id and epoch for its `transactional.id`, fencing any earlier producer with the
    /// same id (whose open transaction the coordinator aborts). Call it once, before the first
    /// [`Transactions::begin`]. It completes with [`crate::Output::Transaction`]
    /// ([`crate::TransactionOperation::Init`]); the state is then
    /// [`crate::TransactionState::Ready`].
    ///
    /// Refused (and nothing changes) when called twice, or while another operation is under
    /// way.
    ///
    /// Like every operation that completes with [`crate::Output::Transaction`], it is bounded
    /// by `max_block` (Java's `max.block.ms`): past it, it completes with
    /// [`TransactionError::OperationTimedOut`] and goes on; see [`Transactions::commit`] for
    /// what may be called then.
    pub fn init(&mut self, now: Instant) -> Result<(), TransactionError> {
        self.producer.touch(now);
        self.producer.start_init_transactions()
    }

    /// Opens a transaction: from now on [`Producer::send`] accepts records, which belong to
    /// it. Local: it completes at once (no [`crate::Output::Transaction`]), and the
    /// coordinator learns of the transaction with its first partition or offsets. The
    /// transaction's `transaction.timeout.ms` counts from here.
    ///
    /// Refused unless the state is [`crate::TransactionState::Ready`].
    pub fn begin(&mut self, now: Instant) -> Result<(), TransactionError> {
        self.producer.touch(now);
        self.producer.start_transaction()
    }

    /// Adds a consumer group's offsets to the open transaction (consume-transform-produce):
    /// they are committed for `group` if and only if the transaction commits. Completes with
    /// [`crate::Output::Transaction`] ([`crate::TransactionOperation::SendOffsets`]); records
    /// may be sent meanwhile, but no other operation starts before it completes. Refused, with
    /// nothing sent, with [`TransactionError::InvalidOffsets`] when a name or the metadata
    /// cannot go in its request (too long, or a topic name outside Kafka's rules). Bounded by
    /// `max_block` (see [`Transactions::commit`]).
    pub fn send_offsets(
        &mut self,
        now: Instant,
        offsets: Vec<OffsetToCommit>,
        group: ConsumerGroupMetadata,
    ) -> Result<(), TransactionError> {
        self.producer.touch(now);
        InvalidOffsets::check(&offsets, &group).map_err(TransactionError::InvalidOffsets)?;
        self.producer.start_send_offsets(offsets, group)
    }

    /// Commits the open transaction: flushes its records (ignoring `linger`), waits until each
    /// is acknowledged, then ends the transaction on the coordinator. Completes with
    /// [`crate::Output::Transaction`] ([`crate::TransactionOperation::Commit`]); the records'
    /// success reports (with [`crate::RecordMetadata::committed`]) come just before it. If a
    /// record of the transaction failed, it completes with [`TransactionError::Abortable`] and
    /// the transaction must be aborted.
    ///
    /// Refused with the abortable error when the transaction already failed, with
    /// [`TransactionError::InvalidState`] when none is open, and with
    /// [`TransactionError::Purged`] when a [`Producer::purge`] aborted the transaction (until
    /// the next [`Transactions::begin`]; a commit under way when the purge came completes with
    /// it).
    ///
    /// Bounded by `max_block`: when the commit has not completed `max_block` after this call
    /// (its records are still being retried, or the coordinator cannot be reached), it
    /// completes with [`TransactionError::OperationTimedOut`], and the commit goes on. Until
    /// the commit is called again, every other operation (begin, send offsets, abort, init) is
    /// refused with [`TransactionError::InProgress`]; the commit called again completes with
    /// the commit's result (at once when it completed meanwhile), or times out again
    /// `max_block` later. The same holds for [`Transactions::init`],
    /// [`Transactions::send_offsets`] (called again with the same offsets and group) and
    /// [`Transactions::abort`], as for Java's producer.
    pub fn commit(&mut self, now: Instant) -> Result<(), TransactionError> {
        self.producer.touch(now);
        self.producer.start_commit()
    }

    /// Aborts the open transaction (also after an abortable error): records not sent yet fail
    /// at once with [`crate::ProduceError::TransactionAborted`] (each handed back), the
    /// batches in flight are answered first, then the coordinator writes the abort markers and
    /// every record of the transaction fails the same way. Completes with
    /// [`crate::Output::Transaction`] ([`crate::TransactionOperation::Abort`]); the state is
    /// then Ready again. Bounded by `max_block` (see [`Transactions::commit`]). After a
    /// [`Producer::purge`] aborted the transaction, this call waits for that abort (it
    /// completes at once when the abort already ended).
    pub fn abort(&mut self, now: Instant) -> Result<(), TransactionError> {
        self.producer.touch(now);
        self.producer.start_abort()
    }

    /// The fatal error the producer answers every operation with once it failed for good
    /// (fenced, not authorized, ...), or `None`. For a driver that outlives its core:
    /// operations queued after the core stopped get this instead of a bare "closed".
    pub fn failure(&self) -> Option<TransactionError> {
        self.producer
            .lifecycle
            .fatal
            .as_ref()
            .map(transaction::fatal_transaction_error)
    }
}
