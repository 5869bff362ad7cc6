//! The transactional API: a view of a [`ProducerHandle`] whose producer has a
//! `transactional.id`, so a handle without one has no transactional call to make.

use producer_core::{ConsumerGroupMetadata, OffsetToCommit, TransactionError};
use producer_driver::{Command, TransactionCall};
use tokio::sync::oneshot;

use crate::handle::ProducerHandle;

impl ProducerHandle {
    /// The transactional operations, when the producer was started with a `transactional.id`
    /// (`Config::transactional_id`); `None` without one, so a producer that is not
    /// transactional cannot call them. Borrowed for a call or a few in a row; the handle may
    /// send records meanwhile. See [`Transactions`] for the order of the calls.
    pub fn transactions(&self) -> Option<Transactions<'_>> {
        self.shared()
            .transactional
            .then_some(Transactions { handle: self })
    }
}

/// The transactional operations of a producer with a `transactional.id`, borrowed from
/// [`ProducerHandle::transactions`] (which answers `None` without one). Each one is
/// [`producer_core::Transactions`]' operation of the same name, run by the producer task; it
/// resolves when the operation completes.
///
/// The operations run one at a time, in this order:
///
/// 1. [`Transactions::init`], once.
/// 2. [`Transactions::begin`]: a transaction is open and [`ProducerHandle::send`] (and the
///    other sends) take records, which belong to it (before, a transactional producer's
///    records fail with `SendErrorReason::NoTransaction`).
/// 3. Records, and any number of [`Transactions::send_offsets`].
/// 4. [`Transactions::commit`], or [`Transactions::abort`] (also after an abortable error);
///    back to 2.
///
/// While one operation is under way (from another task, or one that timed out) the others are
/// refused with [`TransactionError::InProgress`]; a call out of order is refused with
/// [`TransactionError::InvalidState`] and changes nothing. After a fatal error every operation
/// is refused with it; once the producer task stopped, with its fatal error or
/// [`TransactionError::Closed`].
#[derive(Debug, Clone, Copy)]
pub struct Transactions<'a> {
    handle: &'a ProducerHandle,
}

impl Transactions<'_> {
    /// Starts the transactional producer: finds its coordinator and gets the producer id and
    /// epoch for its `transactional.id`, fencing any earlier producer with the same id (whose
    /// open transaction the coordinator aborts). Call it once, before the first
    /// [`Transactions::begin`]; resolves when that is done.
    ///
    /// Bounded by `max_block` (Java's `max.block.ms`), as every operation but `begin`: see
    /// [`Transactions::commit`] for [`TransactionError::OperationTimedOut`] and what may be
    /// called then.
    pub async fn init(&self) -> Result<(), TransactionError> {
        self.call(TransactionCall::Init).await
    }

    /// Opens a transaction: records sent from now on belong to it. Local to the producer (the
    /// coordinator learns of it with its first partition or offsets); its
    /// `transaction.timeout.ms` counts from here. Refused unless the producer is initialized
    /// and no transaction is open.
    pub async fn begin(&self) -> Result<(), TransactionError> {
        self.call(TransactionCall::Begin).await
    }

    /// Adds a consumer group's offsets to the open transaction (consume-transform-produce):
    /// committed for the group if and only if the transaction commits. Resolves when the
    /// group's coordinator has them; records may be sent meanwhile. Refused, with nothing
    /// sent, with [`TransactionError::InvalidOffsets`] when a name or the metadata cannot go in
    /// its request. Bounded by `max_block` (see [`Transactions::commit`]).
    pub async fn send_offsets(
        &self,
        offsets: Vec<OffsetToCommit>,
        group: ConsumerGroupMetadata,
    ) -> Result<(), TransactionError> {
        self.call(TransactionCall::SendOffsets(offsets, group))
            .await
    }

    /// Commits the open transaction: flushes its records (ignoring `linger`), waits for each
    /// to be acknowledged, then ends it on the coordinator. The records' reports (their
    /// [`crate::DeliveryFuture`]s, or the delivery callback), with `committed` set, come just
    /// before this resolves. On [`TransactionError::Abortable`] (a record of the transaction
    /// failed) or [`TransactionError::TimedOut`], call [`Transactions::abort`].
    ///
    /// Bounded by `max_block`: when the commit has not completed `max_block` after this call
    /// (its records are still being retried, or the coordinator cannot be reached), it resolves
    /// with [`TransactionError::OperationTimedOut`], and the commit goes on. Until the commit
    /// is called again, every other operation is refused with [`TransactionError::InProgress`];
    /// the commit called again resolves with the commit's result (at once when it completed
    /// meanwhile), or times out again `max_block` later. The same holds for
    /// [`Transactions::init`], [`Transactions::send_offsets`] (called again with the same
    /// offsets and group) and [`Transactions::abort`], as for Java's producer.
    pub async fn commit(&self) -> Result<(), TransactionError> {
        self.call(TransactionCall::Commit).await
    }

    /// Aborts the open transaction (also after an abortable error): its records fail with
    /// [`producer_core::ProduceError::TransactionAborted`], each handed back in its report.
    /// Resolves when the abort is complete; the producer is then ready for
    /// [`Transactions::begin`] again. Bounded by `max_block` (see [`Transactions::commit`]).
    pub async fn abort(&self) -> Result<(), TransactionError> {
        self.call(TransactionCall::Abort).await
    }

    /// Queues a transactional operation for the producer task and waits for its result.
    async fn call(&self, call: TransactionCall) -> Result<(), TransactionError> {
        let shared = self.handle.shared();
        let (reply, rx) = oneshot::channel();
        if !shared.push_control(Command::Transaction(call, reply)) {
            return Err(shared.last_words.transaction_error());
        }
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(shared.last_words.transaction_error()),
        }
    }
}
