//! What a transaction holds and how it ends, each request with its answer: AddPartitionsToTxn
//! (TV1: a partition joins before its first batch), AddOffsetsToTxn and TxnOffsetCommit (a
//! consumer group's offsets, committed with the transaction), and EndTxn (with TV2, the next
//! producer id and epoch come back). `requests` picks which is due and dispatches the answers.

use std::sync::Arc;

use crate::classify::Request;
use crate::protocol::add_offsets_to_txn::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use crate::protocol::add_partitions_to_txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
};
use crate::protocol::end_txn::{EndTxnRequest, EndTxnResponse};
use crate::protocol::txn_offset_commit::{
    GroupMember, TxnOffsetCommitPartition as WireOffset, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use crate::protocol::ApiKey;
use crate::transaction::{TransactionOperation, TransactionState};
use crate::ErrorCode;

use super::super::identity::PidState;
use super::super::Producer;
use super::in_flight::TxnRequest;
use super::requests::{by_topic, class, worst_error, Class};
use super::OffsetsStep;

/// The highest EndTxn version on a TV1 cluster (v5 is TV2's: it answers the next epoch).
const TV1_MAX_END_TXN: i16 = 4;
/// The highest TxnOffsetCommit version on a TV1 cluster (v5 says the producer runs TV2).
const TV1_MAX_TXN_OFFSET_COMMIT: i16 = 4;

impl<T> Producer<T> {
    // ---- AddPartitionsToTxn (TV1) ----------------------------------------------------------

    pub(super) fn send_add_partitions(&mut self) {
        let Some((conn, v)) = self.transaction_coordinator_ready() else {
            return;
        };
        let Some((producer_id, producer_epoch)) = self.pid.assigned() else {
            return;
        };
        let txn = self.txn.as_mut().expect("transactional");
        let partitions: Vec<(u32, u32)> = std::mem::take(&mut txn.to_add).into_iter().collect();
        txn.started = true;
        let grouped = by_topic(
            partitions
                .iter()
                .map(|&(t, p)| (self.topics.name(t), p as i32)),
        );
        let topics: Vec<(&str, &[i32])> = grouped
            .iter()
            .map(|(t, ps)| (&**t, ps.as_slice()))
            .collect();
        let txn = self.txn.as_ref().expect("transactional");
        let version = v.add_partitions;
        let req = AddPartitionsToTxnRequest {
            transactional_id: txn.id(),
            producer_id,
            producer_epoch,
            topics: &topics,
        };
        let mut body = Vec::new();
        req.encode(version, &mut body);
        self.send_txn_request(
            conn,
            ApiKey::AddPartitionsToTxn,
            version,
            TxnRequest::AddPartitions { partitions },
            |b| b.extend_from_slice(&body),
        );
    }

    pub(super) fn on_add_partitions(
        &mut self,
        partitions: Vec<(u32, u32)>,
        version: i16,
        body: &[u8],
    ) -> bool {
        let Ok(parsed) = AddPartitionsToTxnResponse::parse(version, body) else {
            self.txn_partitions_back(partitions);
            return false;
        };
        let worst = worst_error(Request::AddPartitionsToTxn, &parsed.body.topics);
        match worst {
            None => {
                self.txn_answered();
                let txn = self.txn.as_mut().expect("transactional");
                txn.confirmed = true;
                txn.added.extend(partitions.iter().copied());
                for (t, p) in partitions {
                    self.mark_partition_dirty(t, p);
                }
            }
            Some(code) => {
                self.txn_partitions_back(partitions);
                self.txn_error(Request::AddPartitionsToTxn, code, None);
            }
        }
        true
    }

    /// Partitions whose AddPartitionsToTxn did not succeed wait to be added again (unless the
    /// transaction moved on to an abort).
    pub(super) fn txn_partitions_back(&mut self, partitions: Vec<(u32, u32)>) {
        let Some(txn) = self.txn.as_mut() else { return };
        if matches!(
            txn.state,
            TransactionState::InTransaction | TransactionState::Committing
        ) {
            txn.to_add.extend(partitions);
        }
    }

    // ---- AddOffsetsToTxn -------------------------------------------------------------------

    pub(super) fn send_add_offsets(&mut self) {
        let Some((conn, v)) = self.transaction_coordinator_ready() else {
            return;
        };
        let Some((producer_id, producer_epoch)) = self.pid.assigned() else {
            return;
        };
        let txn = self.txn.as_mut().expect("transactional");
        txn.started = true;
        let Some(o) = txn.offsets.as_ref() else {
            return;
        };
        let version = v.add_offsets;
        let req = AddOffsetsToTxnRequest {
            transactional_id: txn.id(),
            producer_id,
            producer_epoch,
            group_id: &o.group.group_id,
        };
        let mut body = Vec::new();
        req.encode(version, &mut body);
        self.send_txn_request(
            conn,
            ApiKey::AddOffsetsToTxn,
            version,
            TxnRequest::AddOffsets,
            |b| b.extend_from_slice(&body),
        );
    }

    pub(super) fn on_add_offsets(&mut self, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = AddOffsetsToTxnResponse::parse(version, body) else {
            return false;
        };
        let code = parsed.body.error_code;
        if code != ErrorCode::NONE {
            self.txn_error(Request::AddOffsetsToTxn, code, None);
            return true;
        }
        self.txn_answered();
        if let Some(txn) = self.txn.as_mut() {
            txn.confirmed = true;
            if let Some(o) = txn.offsets.as_mut() {
                o.step = OffsetsStep::FindGroupCoordinator;
            }
        }
        true
    }

    // ---- TxnOffsetCommit -------------------------------------------------------------------

    pub(super) fn send_txn_offset_commit(&mut self, coordinator: i32) {
        let Some(conn) = self.coordinator_connection(coordinator, true) else {
            return;
        };
        let Some(v) = self.txn_versions(conn) else {
            return;
        };
        let Some((producer_id, producer_epoch)) = self.pid.assigned() else {
            return;
        };
        let txn = self.txn.as_ref().expect("transactional");
        let Some(o) = txn.offsets.as_ref() else {
            return;
        };
        let grouped = by_topic(o.offsets.iter().map(|x| {
            (
                Arc::<str>::from(x.topic.as_str()),
                WireOffset {
                    partition: x.partition,
                    offset: x.offset,
                    leader_epoch: -1,
                    metadata: x.metadata.as_deref(),
                },
            )
        }));
        let topics: Vec<(&str, &[WireOffset<'_>])> = grouped
            .iter()
            .map(|(t, os)| (&**t, os.as_slice()))
            .collect();
        let version = match txn.tv2 {
            true => v.txn_offset_commit,
            false => v.txn_offset_commit.min(TV1_MAX_TXN_OFFSET_COMMIT),
        };
        let req = TxnOffsetCommitRequest {
            transactional_id: txn.id(),
            group_id: &o.group.group_id,
            producer_id,
            producer_epoch,
            member: GroupMember {
                generation_id: o.group.generation_id,
                member_id: &o.group.member_id,
                group_instance_id: o.group.group_instance_id.as_deref(),
            },
            topics: &topics,
        };
        let mut body = Vec::new();
        req.encode(version, &mut body);
        self.send_txn_request(
            conn,
            ApiKey::TxnOffsetCommit,
            version,
            TxnRequest::TxnOffsetCommit,
            |b| b.extend_from_slice(&body),
        );
    }

    pub(super) fn on_txn_offset_commit(&mut self, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = TxnOffsetCommitResponse::parse(version, body) else {
            return false;
        };
        match worst_error(Request::TxnOffsetCommit, &parsed.body.topics) {
            None => {
                self.txn_answered();
                let txn = self.txn.as_mut().expect("transactional");
                txn.offsets = None;
                if txn.pending == Some(TransactionOperation::SendOffsets) {
                    self.complete_operation(Ok(()));
                }
            }
            Some(code) if class(Request::TxnOffsetCommit, code) == Class::FindAgain => {
                // The group's coordinator moved: look it up again.
                if let Some(o) = self.txn.as_mut().and_then(|t| t.offsets.as_mut()) {
                    o.step = OffsetsStep::FindGroupCoordinator;
                }
                self.txn_retry_later(false);
            }
            Some(code) => self.txn_error(Request::TxnOffsetCommit, code, None),
        }
        true
    }

    // ---- EndTxn ----------------------------------------------------------------------------

    pub(super) fn send_end_txn(&mut self, commit: bool) {
        let Some((conn, v)) = self.transaction_coordinator_ready() else {
            return;
        };
        let Some((producer_id, producer_epoch)) = self.pid.assigned() else {
            return;
        };
        let txn = self.txn.as_ref().expect("transactional");
        let version = if txn.tv2 {
            v.end_txn
        } else {
            v.end_txn.min(TV1_MAX_END_TXN)
        };
        let req = EndTxnRequest {
            transactional_id: txn.id(),
            producer_id,
            producer_epoch,
            committed: commit,
        };
        let mut body = Vec::new();
        req.encode(version, &mut body);
        if let Some(txn) = self.txn.as_mut() {
            txn.commit_sent |= commit;
        }
        self.send_txn_request(
            conn,
            ApiKey::EndTxn,
            version,
            TxnRequest::EndTxn { commit },
            |b| b.extend_from_slice(&body),
        );
    }

    pub(super) fn on_end_txn(&mut self, commit: bool, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = EndTxnResponse::parse(version, body) else {
            return false;
        };
        let resp = parsed.body;
        let unconfirmed = self.txn.as_ref().is_some_and(|t| !t.confirmed);
        // An abort of a transaction the coordinator never confirmed may find none there.
        let nothing_there = crate::classify::unconfirmed_abort_found_nothing(resp.error_code);
        if !commit && unconfirmed && nothing_there {
            self.txn_answered();
            self.end_after_endtxn(false);
            return true;
        }
        if resp.error_code != ErrorCode::NONE {
            self.txn_error(Request::EndTxn, resp.error_code, None);
            return true;
        }
        self.txn_answered();
        // TV2 (v5): every end bumps the epoch, and the answer says the id and epoch to use.
        if version >= 5 && resp.producer_id >= 0 {
            self.pid = PidState::Ready {
                producer_id: resp.producer_id,
                epoch: resp.producer_epoch,
            };
        }
        self.end_after_endtxn(commit);
        true
    }

    /// The transaction ended on the coordinator (or had nothing there): after an abort on a
    /// TV1 cluster where a batch failed, the epoch is bumped first; otherwise the reports go out.
    pub(super) fn end_after_endtxn(&mut self, commit: bool) {
        let Some(txn) = self.txn.as_mut() else { return };
        if !commit && !txn.tv2 && txn.epoch_bump_needed {
            txn.bump_after_abort = true;
            self.work_pending = true;
            return;
        }
        if txn.tv2 {
            txn.epoch_bump_needed = false;
        }
        self.txn_ended(commit);
    }
}
