//! The transactional producer's requests and their answers, each pair together:
//! FindCoordinator (the transaction's and the group's), InitProducerId with the transactional
//! id (and the KIP-360 epoch bump after an abort), AddPartitionsToTxn (TV1), AddOffsetsToTxn,
//! TxnOffsetCommit and EndTxn. [`Producer::drive_transaction`] picks the next one; one is in
//! flight at a time.
//!
//! Answers are classified as Kafka 4.1 does (KIP-1050): retriable codes retry after a backoff
//! (`NOT_COORDINATOR` and `COORDINATOR_NOT_AVAILABLE` look the coordinator up again first),
//! abortable ones make the open transaction abort-only, fatal ones stop the producer.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::connection::RequestKind;
use crate::protocol::add_offsets_to_txn::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use crate::protocol::add_partitions_to_txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
};
use crate::protocol::end_txn::{EndTxnRequest, EndTxnResponse};
use crate::protocol::find_coordinator::{
    CoordinatorType, FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::txn_offset_commit::{
    GroupMember, OffsetToCommit as WireOffset, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use crate::protocol::{ApiKey, TopicPartitionErrors};
use crate::timer::{backoff, TimerKind};
use crate::transaction::{
    TransactionError, TransactionOperation, TransactionResult, TransactionState,
};
use crate::types::{ConnId, Event, Output, ProduceError};
use crate::ErrorCode;

use super::super::identity::PidState;
use super::super::Producer;
use super::OffsetsStep;

/// The highest Produce version of a transactional producer on a TV1 cluster: v12 means the
/// partitions are added by the Produce itself (KIP-890), which a TV1 coordinator does not do.
const TV1_MAX_PRODUCE: i16 = 11;
/// The highest EndTxn version on a TV1 cluster (v5 is TV2's: it answers the next epoch).
const TV1_MAX_END_TXN: i16 = 4;
/// The highest TxnOffsetCommit version on a TV1 cluster (v5 says the producer runs TV2).
const TV1_MAX_TXN_OFFSET_COMMIT: i16 = 4;

/// A coordinator request in flight, with what its answer needs.
#[derive(Debug)]
pub(crate) enum TxnRequest {
    /// The transaction coordinator (`group` false) or the offsets' group coordinator.
    FindCoordinator { group: bool },
    /// The producer id; `bump` when it bumps the epoch after an abort (KIP-360). `tv2` is
    /// what the coordinator's connection said of the cluster.
    InitProducerId { bump: bool, tv2: bool },
    /// TV1: these partitions join the transaction.
    AddPartitions { partitions: Vec<(u32, u32)> },
    /// The offsets' group joins the transaction.
    AddOffsets,
    /// The offsets themselves, to the group coordinator.
    TxnOffsetCommit,
    /// The end of the transaction.
    EndTxn { commit: bool },
}

/// What to do with an error code of a coordinator answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Look the coordinator up again, then retry.
    FindAgain,
    /// Retry after a backoff.
    Retry,
    /// The open transaction can only be aborted.
    Abortable,
    /// The producer stops.
    Fatal,
}

/// KIP-1050's classes for the transactional APIs.
fn class(code: ErrorCode) -> Class {
    match code {
        ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE => Class::FindAgain,
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        | ErrorCode::CONCURRENT_TRANSACTIONS
        | ErrorCode::REQUEST_TIMED_OUT
        | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        | ErrorCode::NETWORK_EXCEPTION => Class::Retry,
        ErrorCode::PRODUCER_FENCED
        | ErrorCode::INVALID_PRODUCER_EPOCH
        | ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        | ErrorCode::INVALID_TXN_STATE
        | ErrorCode::INVALID_PRODUCER_ID_MAPPING
        | ErrorCode::CLUSTER_AUTHORIZATION_FAILED
        | ErrorCode::UNSUPPORTED_VERSION
        | ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT
        | ErrorCode::INVALID_TRANSACTION_TIMEOUT => Class::Fatal,
        _ => Class::Abortable,
    }
}

/// The next coordinator request the transaction needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    FindTransactionCoordinator,
    InitProducerId {
        bump: bool,
    },
    AddPartitions,
    AddOffsets,
    FindGroupCoordinator,
    CommitOffsets {
        coordinator: i32,
    },
    EndTxn {
        commit: bool,
    },
    /// Nothing of the transaction reached a broker: it ends here.
    EndLocally {
        commit: bool,
    },
}

/// Groups `(topic name, partition)` pairs by topic, in name order.
fn by_topic<V>(items: impl IntoIterator<Item = (Arc<str>, V)>) -> Vec<(Arc<str>, Vec<V>)> {
    let mut m: BTreeMap<Arc<str>, Vec<V>> = BTreeMap::new();
    for (t, v) in items {
        m.entry(t).or_default().push(v);
    }
    m.into_iter().collect()
}

impl<T> Producer<T> {
    /// Sends the transaction's next coordinator request when one is due, none is in flight and
    /// its backoff is over (connecting to the coordinator first if needed), or ends a
    /// transaction that never reached a broker. Called from every `poll_output` with work.
    pub(in crate::producer) fn drive_transaction(&mut self) {
        let now = self.now;
        let Some(txn) = self.txn.as_ref() else { return };
        if txn.in_flight || self.lifecycle.fatal.is_some() {
            return;
        }
        if let Some(at) = txn.retry_at {
            if now < at {
                self.timers.arm(at, TimerKind::Transaction);
                return;
            }
        }
        let Some(step) = self.next_txn_step() else {
            return;
        };
        let needs_txn_coordinator = !matches!(
            step,
            Step::FindTransactionCoordinator
                | Step::FindGroupCoordinator
                | Step::CommitOffsets { .. }
                | Step::EndLocally { .. }
        );
        let txn = self.txn.as_ref().expect("checked above");
        let step = match (needs_txn_coordinator, txn.coordinator) {
            (true, None) => Step::FindTransactionCoordinator,
            _ => step,
        };
        match step {
            Step::EndLocally { commit } => self.end_after_endtxn(commit),
            Step::FindTransactionCoordinator => self.send_find_coordinator(false),
            Step::FindGroupCoordinator => self.send_find_coordinator(true),
            Step::InitProducerId { bump } => self.send_txn_init_producer_id(bump),
            Step::AddPartitions => self.send_add_partitions(),
            Step::AddOffsets => self.send_add_offsets(),
            Step::CommitOffsets { coordinator } => self.send_txn_offset_commit(coordinator),
            Step::EndTxn { commit } => self.send_end_txn(commit),
        }
    }

    /// What the transaction needs next, if anything.
    fn next_txn_step(&self) -> Option<Step> {
        let txn = self.txn.as_ref()?;
        match txn.state {
            TransactionState::Initializing => Some(Step::InitProducerId { bump: false }),
            TransactionState::InTransaction | TransactionState::Committing => {
                if let Some(o) = &txn.offsets {
                    return Some(match o.step {
                        OffsetsStep::AddToTransaction => Step::AddOffsets,
                        OffsetsStep::FindGroupCoordinator => Step::FindGroupCoordinator,
                        OffsetsStep::Commit { coordinator } => Step::CommitOffsets { coordinator },
                    });
                }
                if !txn.to_add.is_empty() {
                    return Some(Step::AddPartitions);
                }
                if txn.state == TransactionState::Committing && self.txn_records_settled() {
                    return Some(match txn.started {
                        true => Step::EndTxn { commit: true },
                        false => Step::EndLocally { commit: true },
                    });
                }
                None
            }
            TransactionState::Aborting if txn.bump_after_abort => {
                Some(Step::InitProducerId { bump: true })
            }
            // Past its timeout the transaction ends with the bump from the current epoch
            // (KIP-360), which aborts it if the coordinator has not yet (see `timed_out`).
            TransactionState::Aborting if txn.timed_out && self.txn_records_settled() => {
                Some(Step::InitProducerId { bump: true })
            }
            TransactionState::Aborting if self.txn_records_settled() => Some(match txn.started {
                true => Step::EndTxn { commit: false },
                false => Step::EndLocally { commit: false },
            }),
            _ => None,
        }
    }

    /// A ready connection to broker `node`, or `None` after starting one (or arming a timer for
    /// its reconnect backoff). An unknown node is looked up again.
    fn coordinator_connection(&mut self, node: i32) -> Option<ConnId> {
        let now = self.now;
        let Some(slot) = self.brokers.slot_of_node(node) else {
            if let Some(txn) = self.txn.as_mut() {
                txn.coordinator = None;
            }
            self.work_pending = true;
            return None;
        };
        let b = self.brokers.slot(slot);
        match &b.conn {
            Some(c) if b.is_ready() => Some(c.id),
            Some(_) => None, // connecting: its readiness marks the broker dirty
            None => {
                match b.reconnect_at {
                    Some(at) if at > now => self.timers.arm(at, TimerKind::Transaction),
                    _ => self.connect(slot),
                }
                None
            }
        }
    }

    /// A ready connection to the transaction coordinator and its transaction API versions, or
    /// `None` after starting what is missing (see [`Producer::coordinator_connection`]).
    fn transaction_coordinator_ready(
        &mut self,
    ) -> Option<(ConnId, crate::connection::TxnVersions)> {
        let node = self.txn.as_ref().and_then(|t| t.coordinator)?;
        let conn = self.coordinator_connection(node)?;
        let v = self.txn_versions(conn)?;
        Some((conn, v))
    }

    /// The transaction APIs' versions on `conn`, or the producer fails: the broker does not
    /// speak them.
    fn txn_versions(&mut self, conn: ConnId) -> Option<crate::connection::TxnVersions> {
        let v = self.brokers.conn(conn).and_then(|c| c.versions)?;
        match v.txn {
            Some(t) => Some(t),
            None => {
                self.go_fatal(ProduceError::Broker {
                    code: ErrorCode::UNSUPPORTED_VERSION,
                    message: Some("the broker does not offer the transaction APIs".into()),
                    possibly_persisted: false,
                });
                None
            }
        }
    }

    /// Sends one coordinator request and notes it in flight.
    fn send_txn_request(
        &mut self,
        conn: ConnId,
        api: ApiKey,
        version: i16,
        req: TxnRequest,
        body: impl FnOnce(&mut Vec<u8>),
    ) {
        self.send_control_request(conn, api, version, RequestKind::Transaction(req), body);
        if let Some(txn) = self.txn.as_mut() {
            txn.in_flight = true;
        }
    }

    /// A retriable error: the next request waits for a backoff (and, for `find_again`, looks
    /// the transaction coordinator up first).
    fn txn_retry_later(&mut self, find_again: bool) {
        let now = self.now;
        let (base, max) = (self.config.retry_backoff, self.config.retry_backoff_max);
        let Some(txn) = self.txn.as_mut() else { return };
        txn.retries += 1;
        let attempts = txn.retries - 1;
        if find_again {
            txn.coordinator = None;
        }
        let at = now + backoff(&mut self.rng, base, max, attempts);
        if let Some(txn) = self.txn.as_mut() {
            txn.retry_at = Some(at);
        }
        self.timers.arm(at, TimerKind::Transaction);
        self.work_pending = true;
    }

    /// A coordinator answer without error: the retry count starts over.
    fn txn_answered(&mut self) {
        if let Some(txn) = self.txn.as_mut() {
            txn.retries = 0;
            txn.retry_at = None;
        }
        self.work_pending = true;
    }

    /// Applies an error `code` of `api`'s answer by its class; `find_again` is what a
    /// coordinator error means for this request (the group's coordinator for offsets).
    fn txn_error(&mut self, api: &str, code: ErrorCode, message: Option<String>) {
        match class(code) {
            Class::FindAgain => self.txn_retry_later(true),
            Class::Retry => self.txn_retry_later(false),
            Class::Abortable => self.txn_becomes_abortable(TransactionError::Abortable {
                code,
                message: Some(message.unwrap_or_else(|| api.to_owned())),
            }),
            Class::Fatal => self.go_fatal(ProduceError::Broker {
                code,
                message: Some(message.unwrap_or_else(|| api.to_owned())),
                possibly_persisted: false,
            }),
        }
    }

    // ---- FindCoordinator -------------------------------------------------------------------

    fn send_find_coordinator(&mut self, group: bool) {
        let Some(conn) = self.control_connection(true) else {
            return;
        };
        let Some(v) = self.txn_versions(conn) else {
            return;
        };
        let txn = self.txn.as_ref().expect("transactional");
        let (key, key_type) = match (group, &txn.offsets) {
            (true, Some(o)) => (o.group.group_id.clone(), CoordinatorType::Group),
            (true, None) => return,
            (false, _) => (txn.id().to_owned(), CoordinatorType::Transaction),
        };
        let version = v.find_coordinator.max(1);
        let keys = [key.as_str()];
        let req = FindCoordinatorRequest {
            key_type,
            keys: &keys,
        };
        self.send_txn_request(
            conn,
            ApiKey::FindCoordinator,
            version,
            TxnRequest::FindCoordinator { group },
            |b| req.encode(version, b),
        );
    }

    fn on_find_coordinator(&mut self, group: bool, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = FindCoordinatorResponse::parse(version, body) else {
            return false;
        };
        let Some(c) = parsed.body.coordinators.into_iter().next() else {
            self.txn_retry_later(false);
            return true;
        };
        if c.error_code != ErrorCode::NONE {
            match (group, class(c.error_code)) {
                // The group's coordinator being unknown is retried like any lookup.
                (_, Class::FindAgain) => self.txn_retry_later(false),
                _ => self.txn_error("FindCoordinator", c.error_code, c.error_message),
            }
            return true;
        }
        self.txn_answered();
        self.brokers.node_slot(c.node_id, &c.host, c.port);
        let txn = self.txn.as_mut().expect("transactional");
        if group {
            if let Some(o) = txn.offsets.as_mut() {
                o.step = OffsetsStep::Commit {
                    coordinator: c.node_id,
                };
            }
        } else {
            txn.coordinator = Some(c.node_id);
        }
        true
    }

    // ---- InitProducerId --------------------------------------------------------------------

    fn send_txn_init_producer_id(&mut self, bump: bool) {
        let Some((conn, v)) = self.transaction_coordinator_ready() else {
            return;
        };
        let Some(versions) = self.brokers.conn(conn).and_then(|c| c.versions) else {
            return;
        };
        let Some(version) = versions.init_producer_id else {
            self.go_fatal(ProduceError::Broker {
                code: ErrorCode::UNSUPPORTED_VERSION,
                message: Some("the coordinator does not offer InitProducerId".into()),
                possibly_persisted: false,
            });
            return;
        };
        let tv2 = v.transaction_version >= 2 && v.end_txn >= 5 && versions.produce >= 12;
        let (producer_id, producer_epoch) = match (bump, self.pid.assigned()) {
            // KIP-360: the current id and epoch let the coordinator bump it (v3+).
            (true, Some(id)) if version >= 3 => id,
            _ => (-1, -1),
        };
        let txn = self.txn.as_ref().expect("transactional");
        let req = InitProducerIdRequest {
            transactional_id: Some(txn.id()),
            transaction_timeout_ms: txn.timeout_ms,
            producer_id,
            producer_epoch,
        };
        let mut body = Vec::new();
        req.encode(version, &mut body);
        self.send_txn_request(
            conn,
            ApiKey::InitProducerId,
            version,
            TxnRequest::InitProducerId { bump, tv2 },
            |b| b.extend_from_slice(&body),
        );
        if !bump {
            self.pid = PidState::Requesting;
        }
    }

    fn on_txn_init_producer_id(
        &mut self,
        bump: bool,
        tv2: bool,
        version: i16,
        body: &[u8],
    ) -> bool {
        let Ok(parsed) = InitProducerIdResponse::parse(version, body) else {
            return false;
        };
        let resp = parsed.body;
        if resp.error_code != ErrorCode::NONE {
            if !bump {
                self.pid = PidState::Needed { retry_at: None };
            }
            match class(resp.error_code) {
                // Not fatal only for lookups and retries; an abortable code here cannot be
                // aborted (no transaction is open), so it ends the producer too.
                Class::Abortable => self.go_fatal(ProduceError::Broker {
                    code: resp.error_code,
                    message: Some("InitProducerId".into()),
                    possibly_persisted: false,
                }),
                _ => self.txn_error("InitProducerId", resp.error_code, None),
            }
            return true;
        }
        self.txn_answered();
        self.pid = PidState::Ready {
            producer_id: resp.producer_id,
            epoch: resp.producer_epoch,
        };
        self.outputs.push_back(Output::Event(Event::ProducerId {
            producer_id: resp.producer_id,
            epoch: resp.producer_epoch,
        }));
        let txn = self.txn.as_mut().expect("transactional");
        txn.tv2 = tv2;
        if bump {
            txn.bump_after_abort = false;
            txn.epoch_bump_needed = false;
            self.txn_ended(false);
            return true;
        }
        txn.state = TransactionState::Ready;
        if let Some(operation) = txn.pending.take() {
            self.outputs
                .push_back(Output::Transaction(TransactionResult {
                    operation,
                    result: Ok(()),
                }));
        }
        true
    }

    // ---- AddPartitionsToTxn (TV1) ----------------------------------------------------------

    fn send_add_partitions(&mut self) {
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

    fn on_add_partitions(
        &mut self,
        partitions: Vec<(u32, u32)>,
        version: i16,
        body: &[u8],
    ) -> bool {
        let Ok(parsed) = AddPartitionsToTxnResponse::parse(version, body) else {
            self.txn_partitions_back(partitions);
            return false;
        };
        let worst = worst_error(&parsed.body.topics);
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
                self.txn_error("AddPartitionsToTxn", code, None);
            }
        }
        true
    }

    /// Partitions whose AddPartitionsToTxn did not succeed wait to be added again (unless the
    /// transaction moved on to an abort).
    fn txn_partitions_back(&mut self, partitions: Vec<(u32, u32)>) {
        let Some(txn) = self.txn.as_mut() else { return };
        if matches!(
            txn.state,
            TransactionState::InTransaction | TransactionState::Committing
        ) {
            txn.to_add.extend(partitions);
        }
    }

    // ---- AddOffsetsToTxn -------------------------------------------------------------------

    fn send_add_offsets(&mut self) {
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

    fn on_add_offsets(&mut self, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = AddOffsetsToTxnResponse::parse(version, body) else {
            return false;
        };
        let code = parsed.body.error_code;
        if code != ErrorCode::NONE {
            self.txn_error("AddOffsetsToTxn", code, None);
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

    fn send_txn_offset_commit(&mut self, coordinator: i32) {
        let Some(conn) = self.coordinator_connection(coordinator) else {
            if self.brokers.slot_of_node(coordinator).is_none() {
                if let Some(o) = self.txn.as_mut().and_then(|t| t.offsets.as_mut()) {
                    o.step = OffsetsStep::FindGroupCoordinator;
                }
            }
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

    fn on_txn_offset_commit(&mut self, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = TxnOffsetCommitResponse::parse(version, body) else {
            return false;
        };
        match worst_error(&parsed.body.topics) {
            None => {
                self.txn_answered();
                let txn = self.txn.as_mut().expect("transactional");
                txn.offsets = None;
                if txn.pending == Some(TransactionOperation::SendOffsets) {
                    txn.pending = None;
                    self.outputs
                        .push_back(Output::Transaction(TransactionResult {
                            operation: TransactionOperation::SendOffsets,
                            result: Ok(()),
                        }));
                }
            }
            Some(code) if class(code) == Class::FindAgain => {
                // The group's coordinator moved: look it up again.
                if let Some(o) = self.txn.as_mut().and_then(|t| t.offsets.as_mut()) {
                    o.step = OffsetsStep::FindGroupCoordinator;
                }
                self.txn_retry_later(false);
            }
            Some(code) => self.txn_error("TxnOffsetCommit", code, None),
        }
        true
    }

    // ---- EndTxn ----------------------------------------------------------------------------

    fn send_end_txn(&mut self, commit: bool) {
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
        self.send_txn_request(
            conn,
            ApiKey::EndTxn,
            version,
            TxnRequest::EndTxn { commit },
            |b| b.extend_from_slice(&body),
        );
    }

    fn on_end_txn(&mut self, commit: bool, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = EndTxnResponse::parse(version, body) else {
            return false;
        };
        let resp = parsed.body;
        let (unconfirmed, tv2) = self
            .txn
            .as_ref()
            .map_or((false, false), |t| (!t.confirmed, t.tv2));
        // An abort of a transaction the coordinator never confirmed may find none there: the
        // requests that would have started it were lost, or (TV2) its Produce requests failed
        // before adding a partition. Kafka answers INVALID_TXN_STATE (nothing since the init)
        // or, with TV2, PRODUCER_FENCED (the last transaction ended and its epoch bump is
        // the current epoch: a new end would need a newer one). Either way there is nothing
        // to abort; a real fence shows at the next request.
        let nothing_there = resp.error_code == ErrorCode::INVALID_TXN_STATE
            || (tv2 && resp.error_code == ErrorCode::PRODUCER_FENCED);
        if !commit && unconfirmed && nothing_there {
            self.txn_answered();
            self.end_after_endtxn(false);
            return true;
        }
        if resp.error_code != ErrorCode::NONE {
            self.txn_error("EndTxn", resp.error_code, None);
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
    fn end_after_endtxn(&mut self, commit: bool) {
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

    // ---- Dispatch --------------------------------------------------------------------------

    /// The answer to a coordinator request. Returns false when it could not be parsed (the
    /// connection is then closed, and the request redone as if lost).
    pub(in crate::producer) fn on_txn_response(
        &mut self,
        req: TxnRequest,
        version: i16,
        body: &[u8],
    ) -> bool {
        if let Some(txn) = self.txn.as_mut() {
            txn.in_flight = false;
        }
        self.work_pending = true;
        let ok = match req {
            TxnRequest::FindCoordinator { group } => self.on_find_coordinator(group, version, body),
            TxnRequest::InitProducerId { bump, tv2 } => {
                self.on_txn_init_producer_id(bump, tv2, version, body)
            }
            TxnRequest::AddPartitions { partitions } => {
                self.on_add_partitions(partitions, version, body)
            }
            TxnRequest::AddOffsets => self.on_add_offsets(version, body),
            TxnRequest::TxnOffsetCommit => self.on_txn_offset_commit(version, body),
            TxnRequest::EndTxn { commit } => self.on_end_txn(commit, version, body),
        };
        if !ok {
            if let Some(txn) = self.txn.as_mut() {
                txn.coordinator = None;
            }
        }
        ok
    }

    /// A coordinator request was lost with its connection: it is redone, after looking the
    /// coordinator up again.
    pub(in crate::producer) fn txn_request_lost(&mut self, req: TxnRequest) {
        if let Some(txn) = self.txn.as_mut() {
            txn.in_flight = false;
            txn.coordinator = None;
        }
        match req {
            TxnRequest::AddPartitions { partitions } => self.txn_partitions_back(partitions),
            TxnRequest::InitProducerId { bump: false, .. } => {
                self.pid = PidState::Needed { retry_at: None };
            }
            TxnRequest::FindCoordinator { group: true } => {}
            _ => {}
        }
        self.work_pending = true;
    }

    /// The highest Produce version a transactional producer may use with `negotiated`.
    pub(in crate::producer) fn txn_produce_version(&self, negotiated: i16) -> i16 {
        match &self.txn {
            Some(t) if !t.is_tv2() => negotiated.min(TV1_MAX_PRODUCE),
            _ => negotiated,
        }
    }
}

/// The first error of a per-partition answer, by severity: fatal, then abortable, then a
/// coordinator lookup, then a retry; `None` when every partition succeeded.
/// `OPERATION_NOT_ATTEMPTED` (a partition left out because of another's error) counts as a
/// retry.
fn worst_error(topics: &[TopicPartitionErrors]) -> Option<ErrorCode> {
    let rank = |code: ErrorCode| match class(code) {
        Class::Fatal => 0,
        Class::Abortable if code == ErrorCode::OPERATION_NOT_ATTEMPTED => 3,
        Class::Abortable => 1,
        Class::FindAgain => 2,
        Class::Retry => 3,
    };
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&(_, c)| c))
        .filter(|c| *c != ErrorCode::NONE)
        .min_by_key(|&c| rank(c))
        .map(|c| match c {
            ErrorCode::OPERATION_NOT_ATTEMPTED => ErrorCode::CONCURRENT_TRANSACTIONS,
            c => c,
        })
}
