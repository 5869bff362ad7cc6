//! AddPartitionsToTxn: adds partitions to the open transaction (v0-3, the client's path;
//! transaction version 1), or, from v4 on, does so for a batch of transactions, each possibly
//! only verifying that its partitions are in (the brokers' path).

use std::time::Instant;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{code, fenced};
use crate::cluster::{CoordinatorKind, SimCluster};
use crate::API_ADD_PARTITIONS_TO_TXN;

/// One transaction of a request: id, producer id, epoch, verify only, partitions.
struct TxnAdd {
    id: String,
    pid: i64,
    epoch: i16,
    verify_only: bool,
    partitions: Vec<(String, i32)>,
}

fn partitions_of(topics: Vec<AddPartitionsToTxnTopic>) -> Vec<(String, i32)> {
    topics
        .into_iter()
        .flat_map(|t| {
            let name = t.name.0.to_string();
            t.partitions.into_iter().map(move |p| (name.clone(), p))
        })
        .collect()
}

/// Groups `(partition, error)` answers by topic, in request order.
fn by_topic(answers: Vec<((String, i32), i16)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut out: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((topic, index), error) in answers {
        let mut pr = AddPartitionsToTxnPartitionResult::default();
        pr.partition_index = index;
        pr.partition_error_code = error;
        match out.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.results_by_partition.push(pr),
            None => {
                let mut tr = AddPartitionsToTxnTopicResult::default();
                tr.name = TopicName(StrBytes::from_string(topic));
                tr.results_by_partition.push(pr);
                out.push(tr);
            }
        }
    }
    out
}

impl SimCluster {
    /// Answers AddPartitionsToTxn. Per transaction: unknown partitions are
    /// UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED (nothing added);
    /// otherwise, at the transaction coordinator (else NOT_COORDINATOR), every partition gets
    /// the coordinator's answer: NONE (added; an Empty or completed transaction becomes
    /// Ongoing), INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below
    /// v2), CONCURRENT_TRANSACTIONS while an end completes. `verify_only` (v4+) adds nothing
    /// and answers TRANSACTION_ABORTABLE for each partition not in the transaction.
    pub(super) fn add_partitions_to_txn(
        &mut self,
        broker_id: i32,
        at: Instant,
        version: i16,
        req: AddPartitionsToTxnRequest,
    ) -> AddPartitionsToTxnResponse {
        let mut resp = AddPartitionsToTxnResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        let txns: Vec<TxnAdd> = if version >= 4 {
            req.transactions
                .into_iter()
                .map(|t| TxnAdd {
                    id: t.transactional_id.0.to_string(),
                    pid: t.producer_id.0,
                    epoch: t.producer_epoch,
                    verify_only: t.verify_only,
                    partitions: partitions_of(t.topics),
                })
                .collect()
        } else {
            vec![TxnAdd {
                id: req.v3_and_below_transactional_id.0.to_string(),
                pid: req.v3_and_below_producer_id.0,
                epoch: req.v3_and_below_producer_epoch,
                verify_only: false,
                partitions: partitions_of(req.v3_and_below_topics),
            }]
        };
        let mut results = Vec::new();
        for t in txns {
            let answers = self.add_one(broker_id, at, version, &t);
            let mut r = AddPartitionsToTxnResult::default();
            r.transactional_id = StrBytes::from_string(t.id).into();
            r.topic_results = by_topic(answers);
            results.push(r);
        }
        if version >= 4 {
            resp.results_by_transaction = results;
        } else if let Some(r) = results.into_iter().next() {
            resp.results_by_topic_v3_and_below = r.topic_results;
        }
        resp
    }

    fn add_one(
        &mut self,
        broker_id: i32,
        at: Instant,
        version: i16,
        t: &TxnAdd,
    ) -> Vec<((String, i32), i16)> {
        let all = |error: i16| -> Vec<((String, i32), i16)> {
            t.partitions.iter().map(|p| (p.clone(), error)).collect()
        };
        if let Some(inj) = self.take_injection(API_ADD_PARTITIONS_TO_TXN, |_| true) {
            return all(inj.error_code);
        }
        let known: Vec<bool> = t
            .partitions
            .iter()
            .map(|(topic, p)| self.partition(topic, *p).is_some())
            .collect();
        if known.iter().any(|k| !k) {
            return t
                .partitions
                .iter()
                .zip(known)
                .map(|(p, k)| {
                    let e = if k {
                        code::OPERATION_NOT_ATTEMPTED
                    } else {
                        code::UNKNOWN_TOPIC_OR_PARTITION
                    };
                    (p.clone(), e)
                })
                .collect();
        }
        if t.id.is_empty() {
            return all(code::INVALID_REQUEST);
        }
        if !self.coordinates(broker_id, CoordinatorKind::Transaction, &t.id) {
            return all(code::NOT_COORDINATOR);
        }
        if t.verify_only {
            return match self.txn_verify(&t.id, t.pid, t.epoch, &t.partitions) {
                Ok(ins) => t
                    .partitions
                    .iter()
                    .zip(ins)
                    .map(|(p, i)| {
                        let e = if i {
                            code::NONE
                        } else {
                            code::TRANSACTION_ABORTABLE
                        };
                        (p.clone(), e)
                    })
                    .collect(),
                Err(e) => all(e),
            };
        }
        match self.txn_add_partitions(at, &t.id, t.pid, t.epoch, &t.partitions) {
            Ok(()) => all(code::NONE),
            Err(e) => all(fenced(e, version < 2)),
        }
    }
}
