//! InitProducerId: new producer ids, epoch bumps for a producer id and epoch the broker
//! handed out, and the fencing errors; with a transactional id, the transaction
//! coordinator's initialisation (`transactions.rs`).

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};

use std::time::Instant;

use super::{code, fenced};
use crate::cluster::{CoordinatorKind, SimCluster};
use crate::API_INIT_PRODUCER_ID;

impl SimCluster {
    /// Answers InitProducerId. With a transactional id: the transaction coordinator's
    /// initialisation ([`txn_init`](SimCluster::txn_init)), NOT_COORDINATOR at another broker,
    /// PRODUCER_FENCED as INVALID_PRODUCER_EPOCH below v4. Without: a new producer id, or the
    /// KIP-360 bump of a producer id and epoch this cluster handed out.
    pub(super) fn init_producer_id(
        &mut self,
        broker_id: i32,
        at: Instant,
        version: i16,
        req: InitProducerIdRequest,
    ) -> InitProducerIdResponse {
        let mut resp = InitProducerIdResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        let fail = |resp: &mut InitProducerIdResponse, code: i16| {
            resp.error_code = code;
            resp.producer_id = (-1).into();
            resp.producer_epoch = -1;
        };
        if let Some(inj) = self.take_injection(API_INIT_PRODUCER_ID, |_| true) {
            fail(&mut resp, inj.error_code);
            return resp;
        }
        let pid = req.producer_id.0;
        let epoch = req.producer_epoch;
        if version >= 3 && (pid >= 0) != (epoch >= 0) {
            fail(&mut resp, code::INVALID_REQUEST);
            return resp;
        }
        if let Some(txn_id) = req.transactional_id.as_ref().map(|t| t.0.to_string()) {
            let coordinator = self.coordinates(broker_id, CoordinatorKind::Transaction, &txn_id);
            let expected = (version >= 3 && pid >= 0).then_some((pid, epoch));
            match self.txn_init(
                at,
                coordinator,
                &txn_id,
                req.transaction_timeout_ms,
                expected,
            ) {
                Ok((pid, epoch)) => {
                    resp.producer_id = pid.into();
                    resp.producer_epoch = epoch;
                }
                Err(e) => fail(&mut resp, fenced(e, version < 4)),
            }
            return resp;
        }
        if version >= 3 && pid >= 0 {
            match self.producer_ids.get(&pid).copied() {
                Some(cur) if cur == epoch => {
                    if epoch >= i16::MAX - 1 {
                        let new = self.allocate_pid();
                        resp.producer_id = new.into();
                        resp.producer_epoch = 0;
                    } else {
                        self.producer_ids.insert(pid, epoch + 1);
                        resp.producer_id = pid.into();
                        resp.producer_epoch = epoch + 1;
                    }
                }
                Some(_) => fail(
                    &mut resp,
                    if version >= 4 {
                        code::PRODUCER_FENCED
                    } else {
                        code::INVALID_PRODUCER_EPOCH
                    },
                ),
                None => fail(&mut resp, code::INVALID_PRODUCER_ID_MAPPING),
            }
            return resp;
        }
        let new = self.allocate_pid();
        resp.producer_id = new.into();
        resp.producer_epoch = 0;
        resp
    }

    pub(in crate::cluster) fn allocate_pid(&mut self) -> i64 {
        let pid = self.next_producer_id;
        self.next_producer_id += 1;
        self.producer_ids.insert(pid, 0);
        pid
    }
}
