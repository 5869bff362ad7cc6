//! The transactional producer: its state machine (the operations the application calls, and
//! the rules on records while a transaction is open), and the reports it holds until the
//! transaction ends. The requests to the coordinators and their answers are in `requests`.
//!
//! One transaction at a time goes Ready -> InTransaction -> Committing/Aborting -> Ready.
//! Records are accepted in InTransaction only; their batches go out once their partition is
//! in the transaction (TV1: after AddPartitionsToTxn; TV2: Produce v12+ adds it), and their
//! success reports wait here until EndTxn commits (or turn into `TransactionAborted` failures
//! when it aborts). One coordinator request is in flight at a time.

mod contents;
mod ending;
pub(crate) mod in_flight;
mod requests;

use std::collections::{BTreeSet, HashSet};
use std::time::Instant;

use crate::batch::Pending;
use crate::record::SealedBatch;
use crate::timer::TimerKind;
use crate::transaction::{
    ConsumerGroupMetadata, OffsetToCommit, TransactionError, TransactionOperation,
    TransactionResult, TransactionState,
};
use crate::types::{Output, ProduceError};
use crate::{Config, ErrorCode};

use super::identity::PidState;
use super::Producer;

/// A batch acknowledged inside the open transaction: reported when the transaction ends.
#[derive(Debug)]
struct HeldBatch<T> {
    topic: u32,
    partition: u32,
    records: Vec<Pending<T>>,
    charged: usize,
    sealed: SealedBatch,
    base_offset: i64,
    append_time: i64,
}

/// Offsets sent to the open transaction, on their way: AddOffsetsToTxn to the transaction
/// coordinator, then FindCoordinator for the group, then TxnOffsetCommit to the group's
/// coordinator.
#[derive(Debug)]
struct PendingOffsets {
    offsets: Vec<OffsetToCommit>,
    group: ConsumerGroupMetadata,
    step: OffsetsStep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OffsetsStep {
    AddToTransaction,
    FindGroupCoordinator,
    Commit { coordinator: i32 },
}

/// The transactional state of a producer with a `transactional.id`.
#[derive(Debug)]
pub(super) struct TransactionBook<T> {
    id: String,
    timeout_ms: i32,
    state: TransactionState,
    /// The accepted operation under way: it completes with its [`TransactionResult`].
    pending: Option<TransactionOperation>,
    /// When the call waiting for `pending` gives up (`max.block.ms` after it), completing
    /// with [`TransactionError::OperationTimedOut`] while the operation goes on. `None` while
    /// no call waits: the call timed out, or a close began the abort under way.
    deadline: Option<Instant>,
    /// The result of an operation whose call timed out, completed since: the next call of the
    /// same operation gets it (see [`Producer::txn_call`]).
    unclaimed: Option<TransactionResult>,
    /// The offsets and group of the last `send_offsets_to_transaction` call: a call again
    /// after its timeout must carry the same.
    call_offsets: Option<(Vec<OffsetToCommit>, ConsumerGroupMetadata)>,
    /// A close is under way: from this instant (`max.block.ms` after `close`) it stops waiting
    /// for the transaction's end (see [`Producer::txn_abandon`]).
    close_deadline: Option<Instant>,
    /// EndTxn(commit) was sent for the open transaction: until it is answered, the commit may
    /// or may not have taken effect.
    commit_sent: bool,
    /// The transaction coordinator's node id, once found.
    coordinator: Option<i32>,
    /// A coordinator request is in flight (one at a time).
    in_flight: bool,
    /// No coordinator request before this instant (a retriable error's backoff).
    retry_at: Option<Instant>,
    /// Consecutive retriable errors, for the backoff.
    retries: u32,
    /// The cluster runs transaction version 2 (KIP-890 part 2), as the coordinator's
    /// connection reported when the producer id was obtained.
    tv2: bool,
    /// TV1: partitions added to the open transaction.
    added: HashSet<(u32, u32)>,
    /// TV1: partitions with a batch to send that wait for AddPartitionsToTxn.
    to_add: BTreeSet<(u32, u32)>,
    /// The open transaction has something on the brokers (a partition added, a Produce sent,
    /// offsets added): it ends with EndTxn. Otherwise it ends locally.
    started: bool,
    /// The coordinator confirmed the open transaction (TV1: a partition or the offsets' group
    /// added). An abort whose EndTxn the coordinator answers `INVALID_TXN_STATE` while this is
    /// false found nothing to abort (the requests that would have started it were lost), and
    /// ends here.
    confirmed: bool,
    offsets: Option<PendingOffsets>,
    /// Why the open transaction can only be aborted.
    abortable: Option<TransactionError>,
    /// A batch of the open transaction failed after being sent: with TV1 the epoch is bumped
    /// after the abort (InitProducerId with the current id and epoch, KIP-360), so the
    /// partitions' sequences start over.
    epoch_bump_needed: bool,
    /// The abort's EndTxn is done; the epoch bump (InitProducerId) comes before its result.
    bump_after_abort: bool,
    /// The open transaction ran past `transaction.timeout.ms`: the abort here is an
    /// InitProducerId with the current id and epoch (KIP-360) instead of an EndTxn. Reaching
    /// the coordinator before its timeout check, it aborts the transaction and bumps the epoch,
    /// and the producer goes on; after that check the coordinator has fenced the epoch (its
    /// fence keeps no last epoch), and the answer is the fatal PRODUCER_FENCED, as an EndTxn's
    /// would be.
    timed_out: bool,
    /// Batches acknowledged in the open transaction, in acknowledgement order.
    held: Vec<HeldBatch<T>>,
    /// When the open transaction began (its timeout counts from here).
    began_at: Option<Instant>,
    /// A purge aborted the last transaction (see [`Producer::txn_purge_abort`]): until the
    /// next `begin`, `commit` and `send_offsets` fail with [`TransactionError::Purged`] and
    /// `abort` joins that abort.
    purged: bool,
}

/// What a call of a transactional operation finds (see [`Producer::txn_call`]).
enum Call<'a, T> {
    /// Nothing under way: the operation starts.
    Start(&'a mut TransactionBook<T>),
    /// The same operation's earlier call timed out: this call waits for that operation.
    Rejoined,
}

impl<T> TransactionBook<T> {
    /// The transactional state for `config`, if it has a `transactional.id`.
    pub(super) fn new(config: &Config) -> Option<Self> {
        let id = config.transactional_id.clone()?;
        Some(TransactionBook {
            id,
            timeout_ms: config.transaction_timeout.as_millis().min(i32::MAX as u128) as i32,
            state: TransactionState::Uninitialized,
            pending: None,
            deadline: None,
            unclaimed: None,
            call_offsets: None,
            close_deadline: None,
            commit_sent: false,
            coordinator: None,
            in_flight: false,
            retry_at: None,
            retries: 0,
            tv2: false,
            added: HashSet::new(),
            to_add: BTreeSet::new(),
            started: false,
            confirmed: false,
            offsets: None,
            abortable: None,
            epoch_bump_needed: false,
            bump_after_abort: false,
            timed_out: false,
            held: Vec::new(),
            began_at: None,
            purged: false,
        })
    }

    /// The transactional id.
    pub(super) fn id(&self) -> &str {
        &self.id
    }

    /// Whether records are accepted now.
    pub(super) fn accepts_records(&self) -> bool {
        self.state == TransactionState::InTransaction
    }

    /// Whether the cluster runs transaction version 2.
    pub(super) fn is_tv2(&self) -> bool {
        self.tv2
    }

    /// Forgets what the last transaction did on the brokers (partitions added or waiting to
    /// be, whether it started or was confirmed, its commit sent, why it could only be aborted):
    /// call when a transaction begins and when one ends.
    fn clear_transaction_progress(&mut self) {
        self.started = false;
        self.confirmed = false;
        self.commit_sent = false;
        self.added.clear();
        self.to_add.clear();
        self.abortable = None;
    }

    /// Records held in acknowledged batches, awaiting the transaction's end.
    fn held_records(&self) -> usize {
        self.held.iter().map(|h| h.records.len()).sum()
    }
}

/// The [`TransactionError::Fatal`] for the error that stopped the producer.
pub(super) fn fatal_transaction_error(error: &ProduceError) -> TransactionError {
    match error {
        ProduceError::Broker { code, message, .. } => TransactionError::Fatal {
            code: *code,
            message: message.clone(),
        },
        e => TransactionError::Fatal {
            code: ErrorCode::UNKNOWN_SERVER_ERROR,
            message: Some(e.to_string()),
        },
    }
}

impl<T> Producer<T> {
    // ---------------------------------------------------------------------------------------
    // The operations
    // ---------------------------------------------------------------------------------------

    /// What a call of `op` finds (with `offsets`, the arguments of a
    /// `send_offsets_to_transaction` call): an operation may start ([`Call::Start`]), or the
    /// call waits for the same operation, whose earlier call timed out ([`Call::Rejoined`]:
    /// its result comes when it completes, at once when it completed meanwhile, or another
    /// timeout `max.block.ms` from now), or why it cannot (the producer failed or is closing,
    /// or another operation is under way or timed out and was not called again).
    fn txn_call(
        &mut self,
        op: TransactionOperation,
        offsets: Option<(&[OffsetToCommit], &ConsumerGroupMetadata)>,
    ) -> Result<Call<'_, T>, TransactionError> {
        if let Some(fatal) = &self.lifecycle.fatal {
            // The error that stopped the producer, for every operation after it.
            return match self.txn.as_ref() {
                None => Err(TransactionError::NotTransactional),
                Some(_) => Err(fatal_transaction_error(fatal)),
            };
        }
        if self.lifecycle.closing {
            return Err(TransactionError::Closed);
        }
        let deadline = self.now + self.config.max_block;
        let txn = self
            .txn
            .as_mut()
            .ok_or(TransactionError::NotTransactional)?;
        let same_call = |txn: &TransactionBook<T>, earlier: TransactionOperation| {
            earlier == op
                && (op != TransactionOperation::SendOffsets
                    || txn
                        .call_offsets
                        .as_ref()
                        .zip(offsets)
                        .is_some_and(|((o, g), (o2, g2))| o.as_slice() == o2 && g == g2))
        };
        if let Some(operation) = txn.pending {
            if txn.deadline.is_some() || !same_call(txn, operation) {
                return Err(TransactionError::InProgress { operation });
            }
            txn.deadline = Some(deadline);
            self.timers.arm(deadline, TimerKind::Transaction);
            return Ok(Call::Rejoined);
        }
        if let Some(r) = txn.unclaimed.take() {
            if !same_call(txn, r.operation) {
                let operation = r.operation;
                txn.unclaimed = Some(r);
                return Err(TransactionError::InProgress { operation });
            }
            self.outputs.push_back(Output::Transaction(r));
            return Ok(Call::Rejoined);
        }
        Ok(Call::Start(txn))
    }

    /// `op` starts: it is under way until it completes, and its call waits `max.block.ms` at
    /// most.
    fn begin_operation(&mut self, op: TransactionOperation) {
        let deadline = self.now + self.config.max_block;
        if let Some(txn) = self.txn.as_mut() {
            txn.pending = Some(op);
            txn.deadline = Some(deadline);
            self.timers.arm(deadline, TimerKind::Transaction);
        }
    }

    /// The operation under way completed with `result`: the call waiting for it gets it; when
    /// that call timed out, the same operation's next call gets it. Nothing when no operation
    /// is under way (an abort a close began).
    pub(super) fn complete_operation(&mut self, result: Result<(), TransactionError>) {
        let Some(txn) = self.txn.as_mut() else { return };
        let Some(operation) = txn.pending.take() else {
            return;
        };
        let r = TransactionResult { operation, result };
        match txn.deadline.take() {
            Some(_) => self.outputs.push_back(Output::Transaction(r)),
            None => txn.unclaimed = Some(r),
        }
    }

    /// [`crate::Transactions::init`].
    pub(super) fn start_init_transactions(&mut self) -> Result<(), TransactionError> {
        let op = TransactionOperation::Init;
        let Call::Start(txn) = self.txn_call(op, None)? else {
            return Ok(());
        };
        if txn.state != TransactionState::Uninitialized {
            return Err(TransactionError::InvalidState {
                operation: op,
                state: txn.state,
            });
        }
        txn.state = TransactionState::Initializing;
        self.begin_operation(op);
        self.pid = PidState::Needed { retry_at: None };
        Ok(())
    }

    /// [`crate::Transactions::begin`].
    pub(super) fn start_transaction(&mut self) -> Result<(), TransactionError> {
        let op = TransactionOperation::Begin;
        let now = self.now;
        let timeout = self.config.transaction_timeout;
        let Call::Start(txn) = self.txn_call(op, None)? else {
            return Ok(());
        };
        if txn.state != TransactionState::Ready {
            return Err(TransactionError::InvalidState {
                operation: op,
                state: txn.state,
            });
        }
        txn.state = TransactionState::InTransaction;
        txn.purged = false;
        txn.began_at = Some(now);
        txn.clear_transaction_progress();
        self.timers.arm(now + timeout, TimerKind::Transaction);
        Ok(())
    }

    /// [`crate::Transactions::send_offsets`].
    pub(super) fn start_send_offsets(
        &mut self,
        offsets: Vec<OffsetToCommit>,
        group: ConsumerGroupMetadata,
    ) -> Result<(), TransactionError> {
        let op = TransactionOperation::SendOffsets;
        let Call::Start(txn) = self.txn_call(op, Some((&offsets, &group)))? else {
            return Ok(());
        };
        if txn.purged {
            return Err(TransactionError::Purged);
        }
        if txn.state != TransactionState::InTransaction {
            return Err(match (&txn.abortable, txn.state) {
                (Some(e), TransactionState::AbortableError) => e.clone(),
                (_, state) => TransactionError::InvalidState {
                    operation: op,
                    state,
                },
            });
        }
        if offsets.is_empty() {
            // Nothing to commit: done at once, as the Java client does.
            self.outputs
                .push_back(Output::Transaction(TransactionResult {
                    operation: op,
                    result: Ok(()),
                }));
            return Ok(());
        }
        txn.call_offsets = Some((offsets.clone(), group.clone()));
        txn.offsets = Some(PendingOffsets {
            offsets,
            group,
            step: OffsetsStep::AddToTransaction,
        });
        self.begin_operation(op);
        self.work_pending = true;
        Ok(())
    }

    /// [`crate::Transactions::commit`]: flushes, then commits once every record of the
    /// transaction is acknowledged.
    pub(super) fn start_commit(&mut self) -> Result<(), TransactionError> {
        let op = TransactionOperation::Commit;
        let Call::Start(txn) = self.txn_call(op, None)? else {
            return Ok(());
        };
        if txn.purged {
            return Err(TransactionError::Purged);
        }
        match txn.state {
            TransactionState::InTransaction => {}
            TransactionState::AbortableError => {
                return Err(txn
                    .abortable
                    .clone()
                    .unwrap_or(TransactionError::InvalidState {
                        operation: op,
                        state: txn.state,
                    }))
            }
            state => {
                return Err(TransactionError::InvalidState {
                    operation: op,
                    state,
                })
            }
        }
        txn.state = TransactionState::Committing;
        self.begin_operation(op);
        self.close_all_open_batches();
        self.work_pending = true;
        Ok(())
    }

    /// [`crate::Transactions::abort`]: records not sent yet fail at once; once the batches in
    /// flight are answered, the transaction is aborted.
    pub(super) fn start_abort(&mut self) -> Result<(), TransactionError> {
        let op = TransactionOperation::Abort;
        let Call::Start(txn) = self.txn_call(op, None)? else {
            return Ok(());
        };
        if txn.purged {
            // A purge aborted the transaction: this call waits for that abort.
            match txn.state {
                TransactionState::Aborting => self.begin_operation(op),
                _ => self
                    .outputs
                    .push_back(Output::Transaction(TransactionResult {
                        operation: op,
                        result: Ok(()),
                    })),
            }
            return Ok(());
        }
        match txn.state {
            TransactionState::InTransaction | TransactionState::AbortableError => {}
            state => {
                return Err(TransactionError::InvalidState {
                    operation: op,
                    state,
                })
            }
        }
        self.begin_operation(op);
        self.begin_txn_abort();
        Ok(())
    }

    /// Whether no transaction holds on to any topic: none is open or ending, and no
    /// acknowledged batch waits for a transaction's end. Always true without a
    /// `transactional.id`. (Topics are forgotten only then.)
    pub(super) fn txn_quiet(&self) -> bool {
        self.txn.as_ref().is_none_or(|t| {
            matches!(
                t.state,
                TransactionState::Ready | TransactionState::Uninitialized
            ) && t.held.is_empty()
                && t.added.is_empty()
                && t.to_add.is_empty()
        })
    }

    /// A purge removed records of the open transaction ([`Producer::purge`]): the transaction
    /// is aborted as [`crate::Transactions::abort`] would abort it, with no call waiting for
    /// the abort; a commit or `send_offsets` under way fails with
    /// [`TransactionError::Purged`], and so do later calls of either until the next `begin`.
    /// Nothing when no transaction is open (or one is being aborted already).
    pub(super) fn txn_purge_abort(&mut self) {
        let Some(txn) = self.txn.as_mut() else { return };
        if !matches!(
            txn.state,
            TransactionState::InTransaction
                | TransactionState::Committing
                | TransactionState::AbortableError
        ) {
            return;
        }
        txn.purged = true;
        if matches!(
            txn.pending,
            Some(TransactionOperation::Commit | TransactionOperation::SendOffsets)
        ) {
            self.complete_operation(Err(TransactionError::Purged));
        }
        self.begin_txn_abort();
    }

    /// A `close_within`'s deadline passed: the close stops waiting for the transaction's end
    /// at once (see [`Producer::txn_abandon`]), whatever is in flight.
    pub(super) fn txn_deadline_passed(&mut self) {
        let ending = self.txn.as_ref().is_some_and(|t| {
            matches!(
                t.state,
                TransactionState::Committing | TransactionState::Aborting
            )
        });
        if ending && self.lifecycle.fatal.is_none() {
            self.txn_abandon();
        }
    }

    /// Moves the open transaction to Aborting: every record not in flight fails with
    /// [`ProduceError::TransactionAborted`]; EndTxn follows once nothing is in flight.
    pub(super) fn begin_txn_abort(&mut self) {
        let Some(txn) = self.txn.as_mut() else { return };
        txn.state = TransactionState::Aborting;
        txn.to_add.clear();
        txn.offsets = None;
        let mut sent_failed = false;
        for t in 0..self.topics.len() {
            let held = std::mem::take(&mut self.topics.get_mut(t).holding);
            for h in held {
                self.fail_unrouted(
                    t,
                    h.partition.unwrap_or(-1),
                    h.pending,
                    ProduceError::TransactionAborted,
                );
            }
            for p in 0..self.topics.partition_count(t) {
                let pq = self.topics.partition_mut(t, p);
                if pq.is_empty() {
                    continue;
                }
                let (failed, records) = pq.fail_unsent(ProduceError::TransactionAborted);
                sent_failed |= failed;
                if let Some(records) = records {
                    self.fail_records(t, p as i32, records, ProduceError::TransactionAborted);
                }
                self.emit_done(t, p);
            }
        }
        if let Some(txn) = self.txn.as_mut() {
            txn.epoch_bump_needed |= sent_failed;
        }
        self.work_pending = true;
    }

    /// The state for [`crate::Producer::transaction_state`].
    pub(super) fn current_transaction_state(&self) -> TransactionState {
        match &self.txn {
            None => TransactionState::Uninitialized,
            Some(_) if self.lifecycle.fatal.is_some() => TransactionState::FatalError,
            Some(t) => t.state,
        }
    }

    // ---------------------------------------------------------------------------------------
    // Records inside the transaction
    // ---------------------------------------------------------------------------------------

    /// Whether partition `(t, p)` may send a batch of the open transaction now. With TV1 a
    /// partition not yet in the transaction is queued for AddPartitionsToTxn and waits.
    pub(super) fn txn_may_send(&mut self, t: u32, p: u32) -> bool {
        let Some(txn) = self.txn.as_mut() else {
            return true;
        };
        match txn.state {
            // Batches in flight when an abort began may be retried until answered.
            TransactionState::InTransaction
            | TransactionState::Committing
            | TransactionState::Aborting => {}
            _ => return false,
        }
        if txn.tv2 || txn.added.contains(&(t, p)) {
            return true;
        }
        if txn.state != TransactionState::Aborting && txn.to_add.insert((t, p)) {
            self.work_pending = true;
        }
        false
    }

    /// A Produce request carrying batches of the open transaction was built.
    pub(super) fn txn_produce_sent(&mut self) {
        if let Some(txn) = self.txn.as_mut() {
            txn.started = true;
        }
    }

    /// A batch of the open transaction was acknowledged: its reports wait for the commit.
    /// Returns the batch's parts back when the producer is not transactional.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn txn_hold(
        &mut self,
        topic: u32,
        partition: u32,
        records: Vec<Pending<T>>,
        charged: usize,
        sealed: SealedBatch,
        base_offset: i64,
        append_time: i64,
    ) {
        self.buffered.hold_acknowledged(charged);
        let txn = self
            .txn
            .as_mut()
            .expect("held only by a transactional producer");
        txn.held.push(HeldBatch {
            topic,
            partition,
            records,
            charged,
            sealed,
            base_offset,
            append_time,
        });
    }

    /// A record of the open transaction failed with `error` (in a batch that was `attempted`,
    /// sent at least once): the transaction can only be aborted now (unless it is being
    /// aborted already). A sent batch leaves a hole in its partition's sequence, which the
    /// epoch bump after the abort closes.
    pub(super) fn txn_record_failed(&mut self, error: &ProduceError, attempted: bool) {
        let Some(txn) = self.txn.as_mut() else { return };
        if matches!(error, ProduceError::TransactionAborted) {
            return;
        }
        txn.epoch_bump_needed |= attempted;
        if matches!(
            txn.state,
            TransactionState::InTransaction | TransactionState::Committing
        ) {
            let code = match error {
                ProduceError::Broker { code, .. }
                | ProduceError::InvalidRecord { code, .. }
                | ProduceError::BatchRejected { code, .. } => *code,
                ProduceError::DeliveryTimeout { .. } => ErrorCode::REQUEST_TIMED_OUT,
                _ => ErrorCode::UNKNOWN_SERVER_ERROR,
            };
            let err = TransactionError::Abortable {
                code,
                message: Some(format!("a record of the transaction failed: {error}")),
            };
            self.txn_becomes_abortable(err);
        }
    }

    /// The open transaction can only be aborted now, for `error`; a commit waiting for its
    /// records fails with it.
    pub(super) fn txn_becomes_abortable(&mut self, error: TransactionError) {
        let Some(txn) = self.txn.as_mut() else { return };
        if !matches!(
            txn.state,
            TransactionState::InTransaction | TransactionState::Committing
        ) {
            return;
        }
        txn.state = TransactionState::AbortableError;
        txn.to_add.clear();
        txn.abortable = Some(error.clone());
        let closing = txn.close_deadline.is_some();
        if matches!(
            txn.pending,
            Some(TransactionOperation::Commit | TransactionOperation::SendOffsets)
        ) {
            txn.offsets = None;
            self.complete_operation(Err(error));
        }
        // A close under way aborts a transaction that can no longer commit, as it aborts one
        // it finds open (see `txn_close`): the close's bound then covers the abort (a close
        // that found a commit under way waited for ever once that commit failed).
        if closing {
            self.begin_txn_abort();
        }
    }

    /// A Produce of the open transaction was answered `INVALID_PRODUCER_EPOCH`: the
    /// coordinator moved the epoch on, aborting the transaction past its timeout (or another
    /// producer fenced this one). The transaction is then ended as one past its timeout is
    /// (see `timed_out`): its abort is the KIP-360 bump from the current epoch, which the
    /// coordinator answers with the new epoch after its own timeout abort (KIP-588), and with
    /// the fatal `PRODUCER_FENCED` after a real fence. The failing batch makes it abortable.
    pub(in crate::producer) fn txn_epoch_moved_on(&mut self) {
        if let Some(txn) = self.txn.as_mut() {
            if matches!(
                txn.state,
                TransactionState::InTransaction
                    | TransactionState::Committing
                    | TransactionState::AbortableError
                    | TransactionState::Aborting
            ) {
                txn.timed_out = true;
            }
        }
    }

    /// [`TimerKind::Transaction`]: the open transaction may have run past its timeout, the
    /// call waiting for the operation under way may give up (`max.block.ms`), a close may stop
    /// waiting for the transaction's end, or a coordinator request's backoff ended.
    pub(super) fn txn_timer_fired(&mut self) {
        self.work_pending = true;
        let now = self.now;
        let timeout = self.config.transaction_timeout;
        let max_block_ms = self.config.max_block.as_millis().min(u64::MAX as u128) as u64;
        let Some(txn) = self.txn.as_mut() else { return };
        if let (Some(operation), Some(at)) = (txn.pending, txn.deadline) {
            if now >= at {
                // The call gives up; the operation goes on, and its result waits for the
                // same operation's next call.
                txn.deadline = None;
                self.outputs
                    .push_back(Output::Transaction(TransactionResult {
                        operation,
                        result: Err(TransactionError::OperationTimedOut {
                            operation,
                            max_block_ms,
                        }),
                    }));
            }
        }
        let Some(txn) = self.txn.as_ref() else { return };
        let expired = txn.began_at.is_some_and(|at| now >= at + timeout);
        if expired && txn.state == TransactionState::InTransaction {
            if let Some(txn) = self.txn.as_mut() {
                txn.timed_out = true;
            }
            self.txn_becomes_abortable(TransactionError::TimedOut {
                timeout_ms: timeout.as_millis() as u64,
            });
        }
    }
}
