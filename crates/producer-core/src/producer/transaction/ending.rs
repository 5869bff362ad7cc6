//! The end of a transaction: its held reports go out (delivered after a commit, failed after
//! an abort), and a close that waits for the transaction's end, or gives up on it.

use crate::batch::Unreported;
use crate::timer::TimerKind;
use crate::transaction::{TransactionError, TransactionState};
use crate::types::ProduceError;

use super::super::Producer;
use super::{fatal_transaction_error, HeldBatch};

impl<T> Producer<T> {
    /// Records acknowledged in the open transaction and held for its end.
    pub(in crate::producer) fn txn_held_records(&self) -> usize {
        self.txn.as_ref().map_or(0, |t| t.held_records())
    }

    /// Whether every record of the closing transaction has been answered (acknowledged and
    /// held, or failed and reported).
    pub(super) fn txn_records_settled(&self) -> bool {
        let held = self.txn.as_ref().map_or(0, |t| t.held_records());
        // A Produce request a purge abandoned may still be written: the transaction ends
        // after it is answered (or its connection lost), never before.
        self.buffered.records() == held && !self.brokers.any_produce_in_flight()
    }

    /// The transaction ended (EndTxn answered, or nothing was on the brokers): its held
    /// reports go out, delivered after a commit, failed with their records after an abort.
    pub(super) fn txn_ended(&mut self, committed: bool) {
        let Some(txn) = self.txn.as_mut() else { return };
        let held = std::mem::take(&mut txn.held);
        txn.state = TransactionState::Ready;
        match committed {
            true => self.stats.transactions_committed += 1,
            false => self.stats.transactions_aborted += 1,
        }
        txn.began_at = None;
        txn.clear_transaction_progress();
        txn.offsets = None;
        txn.timed_out = false;
        txn.retries = 0;
        for h in held {
            if committed {
                self.report_held_committed(h);
            } else {
                self.fail_held(h, ProduceError::TransactionAborted);
            }
        }
        // No operation for an abort that a close began: nobody waits for its result.
        self.complete_operation(Ok(()));
        for slot in 0..self.brokers.len() {
            self.mark_broker_dirty(slot);
        }
        self.check_closed();
    }

    /// Reports a held batch delivered and committed, and frees its space.
    pub(super) fn report_held_committed(&mut self, h: HeldBatch<T>) {
        self.buffered.end_acknowledged_hold(h.charged);
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
    pub(super) fn fail_held(&mut self, h: HeldBatch<T>, error: ProduceError) {
        self.buffered.end_acknowledged_hold(h.charged);
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
    pub(in crate::producer) fn txn_fatal(&mut self, error: &ProduceError) {
        let Some(txn) = self.txn.as_mut() else { return };
        txn.state = TransactionState::FatalError;
        let held = std::mem::take(&mut txn.held);
        // Acknowledged, so in the log, but their transaction never commits.
        let written = error.clone().with_possibly_persisted(true);
        for h in held {
            self.fail_held(h, written.clone());
        }
        self.complete_operation(Err(fatal_transaction_error(error)));
    }

    /// A close with a transaction open aborts it first (as the Java client does), failing
    /// offsets on their way; a close before `init_transactions` completed fails that operation.
    /// A commit or an abort under way goes on. The close waits for the transaction's end until
    /// `max.block.ms` from now at most (see [`Producer::txn_abandon`]).
    pub(in crate::producer) fn txn_close(&mut self) {
        let deadline = self.now + self.config.max_block;
        let Some(txn) = self.txn.as_mut() else { return };
        txn.close_deadline = Some(deadline);
        self.timers.arm(deadline, TimerKind::Transaction);
        match txn.state {
            TransactionState::InTransaction | TransactionState::AbortableError => {
                // Offsets on their way are not committed: their call fails.
                self.complete_operation(Err(TransactionError::Closed));
                self.begin_txn_abort()
            }
            TransactionState::Initializing => {
                txn.state = TransactionState::Uninitialized;
                self.complete_operation(Err(TransactionError::Closed));
            }
            _ => {}
        }
    }

    /// Whether a close must still wait for the transaction (its abort or commit under way).
    pub(in crate::producer) fn txn_blocks_close(&self) -> bool {
        self.txn.as_ref().is_some_and(|t| {
            matches!(
                t.state,
                TransactionState::Committing | TransactionState::Aborting
            ) && self.lifecycle.fatal.is_none()
        })
    }

    /// Whether a close gives up on the transaction's end now: `max.block.ms` has passed since
    /// `close`, every record of the transaction has been answered (within its delivery
    /// timeout), and no coordinator request is in flight (within the request timeout).
    pub(in crate::producer) fn txn_close_expired(&self) -> bool {
        self.txn.as_ref().is_some_and(|t| {
            t.close_deadline.is_some_and(|at| self.now >= at)
                && !t.in_flight
                && matches!(
                    t.state,
                    TransactionState::Committing | TransactionState::Aborting
                )
        }) && self.txn_records_settled()
    }

    /// A close stops waiting for the transaction's end (see
    /// [`Producer::txn_close_expired`]): the coordinator could not be reached or kept
    /// answering retriable errors. The records held fail: with
    /// [`ProduceError::TransactionInDoubt`] when EndTxn(commit) went out unanswered (the
    /// commit may have taken effect), else with [`ProduceError::TransactionAborted`] (no
    /// commit was asked for: the coordinator aborts the transaction at its timeout). The
    /// operation under way fails with [`TransactionError::Closed`].
    pub(in crate::producer) fn txn_abandon(&mut self) {
        let Some(txn) = self.txn.as_mut() else { return };
        let error = match txn.state == TransactionState::Committing && txn.commit_sent {
            true => ProduceError::TransactionInDoubt,
            false => ProduceError::TransactionAborted,
        };
        let held = std::mem::take(&mut txn.held);
        txn.state = TransactionState::Ready;
        txn.began_at = None;
        txn.offsets = None;
        txn.to_add.clear();
        txn.bump_after_abort = false;
        for h in held {
            self.fail_held(h, error.clone());
        }
        self.complete_operation(Err(TransactionError::Closed));
        self.check_closed();
    }
}
