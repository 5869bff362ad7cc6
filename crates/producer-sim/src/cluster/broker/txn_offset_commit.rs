//! TxnOffsetCommit: stages a consumer group's offsets in the producer's transaction, at the
//! group's coordinator; they become the group's committed offsets with the commit marker.

use std::time::Instant;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::code;
use crate::cluster::transactions::{partition_for, OFFSETS_TOPIC};
use crate::cluster::{CommittedOffset, CoordinatorKind, SimCluster};
use crate::API_TXN_OFFSET_COMMIT;

impl SimCluster {
    /// Answers TxnOffsetCommit. Not the group's coordinator: NOT_COORDINATOR for every
    /// partition. Unknown partitions: UNKNOWN_TOPIC_OR_PARTITION. The others share one answer:
    /// (only when one is known) the transaction is verified with its coordinator (Kafka's KIP-890 part 1 verification)
    /// — its coordinator stopped: COORDINATOR_NOT_AVAILABLE; unknown id or producer id:
    /// INVALID_PRODUCER_ID_MAPPING; stale epoch: INVALID_PRODUCER_EPOCH; an end completing:
    /// CONCURRENT_TRANSACTIONS; the group's offsets partition not added (AddOffsetsToTxn):
    /// TRANSACTION_ABORTABLE from v4, INVALID_TXN_STATE before — except that v5 (transaction
    /// version 2) adds it. Then the group: members are not simulated, so a
    /// generation id >= 0, a member id or a group instance id is UNKNOWN_MEMBER_ID (a simple
    /// group, generation -1, is accepted). Accepted offsets are staged in the transaction.
    pub(super) fn txn_offset_commit(
        &mut self,
        broker_id: i32,
        conn: u64,
        at: Instant,
        version: i16,
        req: TxnOffsetCommitRequest,
    ) -> TxnOffsetCommitResponse {
        let mut resp = TxnOffsetCommitResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        let group = req.group_id.0.to_string();
        let txn_id = req.transactional_id.0.to_string();
        let any_known = req.topics.iter().any(|t| {
            t.partitions.iter().any(|p| {
                self.partition(t.name.0.as_str(), p.partition_index)
                    .is_some()
            })
        });
        let injected = self.take_injection(API_TXN_OFFSET_COMMIT, |_| true);
        let shared = if let Some(inj) = &injected {
            inj.error_code
        } else if !any_known {
            code::NONE
        } else if !self.coordinates(broker_id, CoordinatorKind::Group, &group) {
            code::NOT_COORDINATOR
        } else {
            self.verify_offsets_txn(broker_id, conn, at, version, &req, &txn_id, &group)
        };
        let mut staged = Vec::new();
        for t in &req.topics {
            let name = t.name.0.to_string();
            let mut tr = TxnOffsetCommitResponseTopic::default();
            tr.name = t.name.clone();
            for p in &t.partitions {
                let known = self.partition(&name, p.partition_index).is_some();
                let error = match &injected {
                    Some(inj) => inj.error_code,
                    None if !known => code::UNKNOWN_TOPIC_OR_PARTITION,
                    None => shared,
                };
                if error == code::NONE {
                    staged.push((
                        (name.clone(), p.partition_index),
                        CommittedOffset {
                            offset: p.committed_offset,
                            leader_epoch: if version >= 2 {
                                p.committed_leader_epoch
                            } else {
                                -1
                            },
                            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                        },
                    ));
                }
                let mut pr = TxnOffsetCommitResponsePartition::default();
                pr.partition_index = p.partition_index;
                pr.error_code = error;
                tr.partitions.push(pr);
            }
            resp.topics.push(tr);
        }
        if !staged.is_empty() {
            self.txn_stage_offsets(&txn_id, &group, staged);
        }
        resp
    }

    /// The transaction and group checks shared by every known partition of the request.
    #[allow(clippy::too_many_arguments)]
    fn verify_offsets_txn(
        &mut self,
        broker_id: i32,
        conn: u64,
        at: Instant,
        version: i16,
        req: &TxnOffsetCommitRequest,
        txn_id: &str,
        group: &str,
    ) -> i16 {
        let txn_coordinator = self.coordinator(CoordinatorKind::Transaction, txn_id);
        if !txn_coordinator
            .and_then(|n| self.brokers.get(&n))
            .is_some_and(|b| b.running)
        {
            return code::COORDINATOR_NOT_AVAILABLE;
        }
        let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
        let offsets_partition = (OFFSETS_TOPIC.to_string(), partition_for(group));
        let tv2 = self.txn_v2(broker_id, conn, version >= 5, "TxnOffsetCommit v5");
        let verified = if tv2 {
            self.txn_add_partitions(at, txn_id, pid, epoch, &[offsets_partition])
        } else {
            match self.txn_verify(txn_id, pid, epoch, &[offsets_partition]) {
                Ok(ins) if ins.iter().all(|i| *i) => Ok(()),
                Ok(_) if version >= 4 => Err(code::TRANSACTION_ABORTABLE),
                Ok(_) => Err(code::INVALID_TXN_STATE),
                Err(e) => Err(e),
            }
        };
        if let Err(e) = verified {
            return if e == code::PRODUCER_FENCED {
                code::INVALID_PRODUCER_EPOCH
            } else {
                e
            };
        }
        let member = version >= 3
            && (req.generation_id >= 0
                || !req.member_id.is_empty()
                || req.group_instance_id.is_some());
        if member {
            return code::UNKNOWN_MEMBER_ID;
        }
        code::NONE
    }
}
