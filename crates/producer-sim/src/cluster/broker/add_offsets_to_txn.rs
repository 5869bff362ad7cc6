//! AddOffsetsToTxn: adds a consumer group's `__consumer_offsets` partition to the transaction,
//! so that TxnOffsetCommit may stage the group's offsets in it.

use std::time::Instant;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::{code, fenced};
use crate::cluster::transactions::{partition_for, OFFSETS_TOPIC};
use crate::cluster::{CoordinatorKind, SimCluster};
use crate::API_ADD_OFFSETS_TO_TXN;

impl SimCluster {
    /// Answers AddOffsetsToTxn at the transaction coordinator (else NOT_COORDINATOR): the
    /// group's offsets partition joins the transaction, opening one from Empty or a completed
    /// transaction. Errors as AddPartitionsToTxn's (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
    /// below v2).
    pub(super) fn add_offsets_to_txn(
        &mut self,
        broker_id: i32,
        at: Instant,
        version: i16,
        req: AddOffsetsToTxnRequest,
    ) -> AddOffsetsToTxnResponse {
        let mut resp = AddOffsetsToTxnResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        let txn_id = req.transactional_id.0.to_string();
        resp.error_code = if let Some(inj) = self.take_injection(API_ADD_OFFSETS_TO_TXN, |_| true) {
            inj.error_code
        } else if txn_id.is_empty() {
            code::INVALID_REQUEST
        } else if !self.coordinates(broker_id, CoordinatorKind::Transaction, &txn_id) {
            code::NOT_COORDINATOR
        } else {
            let partition = (
                OFFSETS_TOPIC.to_string(),
                partition_for(req.group_id.0.as_str()),
            );
            match self.txn_add_partitions(
                at,
                &txn_id,
                req.producer_id.0,
                req.producer_epoch,
                &[partition],
            ) {
                Ok(()) => code::NONE,
                Err(e) => fenced(e, version < 2),
            }
        };
        resp
    }
}
