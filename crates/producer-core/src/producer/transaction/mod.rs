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
pub(crate) mod in_flight;
mod requests;

use std::collections::{BTreeSet, HashSet};
use std::time::Instant;

use crate::batch::{Pending, Unreported};
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
    /// The accepted operation awaiting its [`TransactionResult`].
    pending: Option<TransactionOperation>,
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
    /// The coordinator confirmed the open transaction (a partition or the offsets' group
    /// added, or, with TV2, a batch acknowledged). An abort whose EndTxn the coordinator
    /// answers `INVALID_TXN_STATE` while this is false found nothing to abort (the requests
    /// that would have started it were lost), and ends here.
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

    /// The transactional state, or why an operation cannot start at all.
    fn txn_for(&mut self) -> Result<&mut TransactionBook<T>, TransactionError> {
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
        let txn = self
            .txn
            .as_mut()
            .ok_or(TransactionError::NotTransactional)?;
        if let Some(operation) = txn.pending {
            return Err(TransactionError::InProgress { operation });
        }
        Ok(txn)
    }

    /// [`crate::Transactions::init`].
    pub(super) fn start_init_transactions(&mut self) -> Result<(), TransactionError> {
        let op = TransactionOperation::Init;
        let txn = self.txn_for()?;
        if txn.state != TransactionState::Uninitialized {
            return Err(TransactionError::InvalidState {
                operation: op,
                state: txn.state,
            });
        }
        txn.state = TransactionState::Initializing;
        txn.pending = Some(op);
        self.pid = PidState::Needed { retry_at: None };
        Ok(())
    }

    /// [`crate::Transactions::begin`].
    pub(super) fn start_transaction(&mut self) -> Result<(), TransactionError> {
        let op = TransactionOperation::Begin;
        let now = self.now;
        let timeout = self.config.transaction_timeout;
        let txn = self.txn_for()?;
        if txn.state != TransactionState::Ready {
            return Err(TransactionError::InvalidState {
                operation: op,
                state: txn.state,
            });
        }
        txn.state = TransactionState::InTransaction;
        txn.began_at = Some(now);
        txn.started = false;
        txn.confirmed = false;
        txn.added.clear();
        txn.to_add.clear();
        txn.abortable = None;
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
        let txn = self.txn_for()?;
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
        txn.pending = Some(op);
        txn.offsets = Some(PendingOffsets {
            offsets,
            group,
            step: OffsetsStep::AddToTransaction,
        });
        self.work_pending = true;
        Ok(())
    }

    /// [`crate::Transactions::commit`]: flushes, then commits once every record of the
    /// transaction is acknowledged.
    pub(super) fn start_commit(&mut self) -> Result<(), TransactionError> {
        let op = TransactionOperation::Commit;
        let txn = self.txn_for()?;
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
        txn.pending = Some(op);
        self.close_all_open_batches();
        self.work_pending = true;
        Ok(())
    }

    /// [`crate::Transactions::abort`]: records not sent yet fail at once; once the batches in
    /// flight are answered, the transaction is aborted.
    pub(super) fn start_abort(&mut self) -> Result<(), TransactionError> {
        let op = TransactionOperation::Abort;
        let txn = self.txn_for()?;
        match txn.state {
            TransactionState::InTransaction | TransactionState::AbortableError => {}
            state => {
                return Err(TransactionError::InvalidState {
                    operation: op,
                    state,
                })
            }
        }
        txn.pending = Some(op);
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

    /// The state for [`crate::Transactions::state`].
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
        let failed = match txn.pending {
            Some(op @ (TransactionOperation::Commit | TransactionOperation::SendOffsets)) => {
                txn.pending = None;
                txn.offsets = None;
                Some(op)
            }
            _ => None,
        };
        if let Some(operation) = failed {
            self.outputs
                .push_back(Output::Transaction(TransactionResult {
                    operation,
                    result: Err(error),
                }));
        }
    }

    /// [`TimerKind::Transaction`]: the open transaction may have run past its timeout, or a
    /// coordinator request's backoff ended.
    pub(super) fn txn_timer_fired(&mut self) {
        self.work_pending = true;
        let now = self.now;
        let timeout = self.config.transaction_timeout;
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

    // ---------------------------------------------------------------------------------------
    // The end of a transaction
    // ---------------------------------------------------------------------------------------

    /// Records acknowledged in the open transaction and held for its end.
    pub(super) fn txn_held_records(&self) -> usize {
        self.txn.as_ref().map_or(0, |t| t.held_records())
    }

    /// Whether every record of the closing transaction has been answered (acknowledged and
    /// held, or failed and reported).
    fn txn_records_settled(&self) -> bool {
        let held = self.txn.as_ref().map_or(0, |t| t.held_records());
        self.buffered.records() == held
    }

    /// The transaction ended (EndTxn answered, or nothing was on the brokers): its held
    /// reports go out, delivered after a commit, failed with their records after an abort.
    fn txn_ended(&mut self, committed: bool) {
        let Some(txn) = self.txn.as_mut() else { return };
        let held = std::mem::take(&mut txn.held);
        txn.state = TransactionState::Ready;
        match committed {
            true => self.stats.transactions_committed += 1,
            false => self.stats.transactions_aborted += 1,
        }
        txn.began_at = None;
        txn.started = false;
        txn.confirmed = false;
        txn.added.clear();
        txn.to_add.clear();
        txn.offsets = None;
        txn.abortable = None;
        txn.timed_out = false;
        txn.retries = 0;
        // `None` for an abort that a close began: nobody waits for its result.
        let operation = txn.pending.take();
        for h in held {
            if committed {
                self.report_held_committed(h);
            } else {
                self.fail_held(h, ProduceError::TransactionAborted);
            }
        }
        if let Some(operation) = operation {
            self.outputs
                .push_back(Output::Transaction(TransactionResult {
                    operation,
                    result: Ok(()),
                }));
        }
        for slot in 0..self.brokers.len() {
            self.mark_broker_dirty(slot);
        }
        self.check_closed();
    }

    /// Reports a held batch delivered and committed, and frees its space.
    fn report_held_committed(&mut self, h: HeldBatch<T>) {
        self.buffers
            .give(h.sealed.into_buffer(), self.config.batch_size);
        self.buffered.release(h.charged, h.records.len());
        self.stats.records_delivered += h.records.len() as u64;
        if self.config.report_successes {
            let name = self.topics.name(h.topic);
            let base = if h.base_offset >= 0 {
                h.base_offset
            } else {
                -1
            };
            let run = crate::outputs::SuccessRun::new(
                h.records,
                name,
                h.partition as i32,
                base,
                h.append_time,
            )
            .committed();
            self.outputs.push_successes(run);
        }
    }

    /// Fails every record of a held batch with `error`, handing each back.
    fn fail_held(&mut self, h: HeldBatch<T>, error: ProduceError) {
        let decoded = h.sealed.into_records().map_err(|e| e.to_string());
        let unreported = Unreported {
            records: h.records,
            decoded,
            charged: h.charged,
        };
        self.fail_records(h.topic, h.partition as i32, unreported, error);
    }

    /// The producer failed for good: the operation under way fails with the fatal error and
    /// the held reports fail with it (records handed back).
    pub(super) fn txn_fatal(&mut self, error: &ProduceError) {
        let Some(txn) = self.txn.as_mut() else { return };
        txn.state = TransactionState::FatalError;
        let held = std::mem::take(&mut txn.held);
        let pending = txn.pending.take();
        // Acknowledged, so in the log, but their transaction never commits.
        let written = error.clone().with_possibly_persisted(true);
        for h in held {
            self.fail_held(h, written.clone());
        }
        if let Some(operation) = pending {
            self.outputs
                .push_back(Output::Transaction(TransactionResult {
                    operation,
                    result: Err(fatal_transaction_error(error)),
                }));
        }
    }

    /// A close with a transaction open aborts it first (as the Java client does); a close
    /// before `init_transactions` completed fails that operation.
    pub(super) fn txn_close(&mut self) {
        let Some(txn) = self.txn.as_mut() else { return };
        match txn.state {
            TransactionState::InTransaction | TransactionState::AbortableError => {
                self.begin_txn_abort()
            }
            TransactionState::Initializing => {
                txn.state = TransactionState::Uninitialized;
                if let Some(operation) = txn.pending.take() {
                    self.outputs
                        .push_back(Output::Transaction(TransactionResult {
                            operation,
                            result: Err(TransactionError::Closed),
                        }));
                }
            }
            _ => {}
        }
    }

    /// Whether a close must still wait for the transaction (its abort or commit under way).
    pub(super) fn txn_blocks_close(&self) -> bool {
        self.txn.as_ref().is_some_and(|t| {
            matches!(
                t.state,
                TransactionState::Committing | TransactionState::Aborting
            ) && self.lifecycle.fatal.is_none()
        })
    }
}
