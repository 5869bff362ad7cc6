//! EndTxn: commits or aborts the open transaction: the coordinator writes the markers into
//! every partition of it and applies (or drops) its staged offsets.

use std::time::Instant;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use super::{code, fenced};
use crate::cluster::{CoordinatorKind, SimCluster};
use crate::API_END_TXN;

impl SimCluster {
    /// Answers EndTxn at the transaction coordinator (else NOT_COORDINATOR). v5 (transaction
    /// version 2; a violation on a cluster below it) bumps the epoch (a new producer id once
    /// it is exhausted) and answers the producer id and epoch to go on with; below, the epoch
    /// stays. A retry
    /// of a completed end with the same outcome is NONE, the other outcome INVALID_TXN_STATE,
    /// an end with no transaction open INVALID_TXN_STATE, a stale epoch PRODUCER_FENCED
    /// (INVALID_PRODUCER_EPOCH below v2), an unknown id or a producer id not the
    /// transactional id's INVALID_PRODUCER_ID_MAPPING.
    pub(super) fn end_txn(
        &mut self,
        broker_id: i32,
        conn: u64,
        at: Instant,
        version: i16,
        req: EndTxnRequest,
    ) -> EndTxnResponse {
        let mut resp = EndTxnResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        resp.producer_id = (-1).into();
        resp.producer_epoch = -1;
        let txn_id = req.transactional_id.0.to_string();
        if let Some(inj) = self.take_injection(API_END_TXN, |_| true) {
            resp.error_code = inj.error_code;
            return resp;
        }
        if txn_id.is_empty() {
            resp.error_code = code::INVALID_REQUEST;
            return resp;
        }
        if !self.coordinates(broker_id, CoordinatorKind::Transaction, &txn_id) {
            resp.error_code = code::NOT_COORDINATOR;
            return resp;
        }
        let tv2 = self.txn_v2(broker_id, conn, version >= 5, "EndTxn v5");
        match self.txn_end(
            at,
            &txn_id,
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
            tv2,
        ) {
            Ok((pid, epoch)) => {
                resp.producer_id = pid.into();
                resp.producer_epoch = epoch;
            }
            Err(e) => resp.error_code = fenced(e, version < 2),
        }
        resp
    }
}
