//! The transactional producer's coordinator requests: [`Producer::drive_transaction`] picks
//! the next one due (one is in flight at a time), the connection to the coordinator, the
//! error classes and retries, the dispatch of answers and lost requests; and, each with its
//! answer, FindCoordinator (the transaction's and the group's) and InitProducerId with the
//! transactional id (and the KIP-360 epoch bump after an abort). What the transaction holds
//! and its end are in `contents`.
//!
//! Answers are classified as Kafka 4.1 does (KIP-1050): retriable codes retry after a backoff
//! (`NOT_COORDINATOR` and `COORDINATOR_NOT_AVAILABLE` look the coordinator up again first),
//! abortable ones make the open transaction abort-only, fatal ones stop the producer.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::classify::{decide, Action, Mode, Request};
use crate::connection::RequestKind;
use crate::protocol::find_coordinator::{
    CoordinatorType, FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::{ApiKey, TopicPartitionErrors};
use crate::timer::{backoff, TimerKind};
use crate::transaction::{TransactionError, TransactionState};
use crate::types::{ConnId, Event, Output, ProduceError};
use crate::ErrorCode;

use super::super::identity::PidState;
use super::super::Producer;
use super::in_flight::TxnRequest;
use super::OffsetsStep;

/// The highest Produce version of a transactional producer on a TV1 cluster: v12 means the
/// partitions are added by the Produce itself (KIP-890), which a TV1 coordinator does not do.
const TV1_MAX_PRODUCE: i16 = 11;

/// What to do with an error code of a coordinator answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// Look the coordinator up again, then retry.
    FindAgain,
    /// Retry after a backoff.
    Retry,
    /// The open transaction can only be aborted.
    Abortable,
    /// The producer stops.
    Fatal,
}

/// KIP-1050's classes for the transactional APIs: `request`'s row of the one retry table
/// ([`crate::classify::decide`]), read as the transaction applies it. Every coordinator answer
/// is classed here, by its own request's row; no call site amends the table's answer.
pub(super) fn class(request: Request, code: ErrorCode) -> Class {
    match decide(request, code, Mode::Transactional) {
        Action::FindCoordinator => Class::FindAgain,
        Action::Backoff => Class::Retry,
        Action::Abortable => Class::Abortable,
        _ => Class::Fatal,
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
pub(super) fn by_topic<V>(
    items: impl IntoIterator<Item = (Arc<str>, V)>,
) -> Vec<(Arc<str>, Vec<V>)> {
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
        if self.txn_close_expired() {
            self.txn_abandon();
            return;
        }
        let Some(txn) = self.txn.as_ref() else { return };
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

    /// A ready connection to the coordinator `node` (the transaction's, or with `group` the
    /// offsets' group's), or `None` after starting one. A node that is unknown, or backing off
    /// after a failed connection (killed, or no longer the coordinator), is looked up again
    /// after a retry backoff: FindCoordinator names the new one once Kafka moved the
    /// coordinator.
    pub(super) fn coordinator_connection(&mut self, node: i32, group: bool) -> Option<ConnId> {
        let now = self.now;
        let slot = self.brokers.slot_of_node(node);
        let b = slot.map(|s| self.brokers.slot(s));
        match b.map(|b| (&b.conn, b.is_ready(), b.reconnect_at)) {
            Some((Some(c), true, _)) => return Some(c.id),
            Some((Some(_), false, _)) => return None, // connecting: readiness marks it dirty
            Some((None, _, at)) if at.is_none_or(|at| at <= now) => {
                self.connect(slot.expect("a known node"));
                return None;
            }
            _ => {}
        }
        // Unknown, or its last connection failed: look the coordinator up again.
        match group {
            true => {
                if let Some(o) = self.txn.as_mut().and_then(|t| t.offsets.as_mut()) {
                    o.step = OffsetsStep::FindGroupCoordinator;
                }
            }
            false => {
                if let Some(txn) = self.txn.as_mut() {
                    txn.coordinator = None;
                }
            }
        }
        self.txn_retry_later(false);
        None
    }

    /// A ready connection to the transaction coordinator and its transaction API versions, or
    /// `None` after starting what is missing (see [`Producer::coordinator_connection`]).
    pub(super) fn transaction_coordinator_ready(
        &mut self,
    ) -> Option<(ConnId, crate::connection::TxnVersions)> {
        let node = self.txn.as_ref().and_then(|t| t.coordinator)?;
        let conn = self.coordinator_connection(node, false)?;
        let v = self.txn_versions(conn)?;
        Some((conn, v))
    }

    /// The transaction APIs' versions on `conn`, or the producer fails: the broker does not
    /// speak them.
    pub(super) fn txn_versions(&mut self, conn: ConnId) -> Option<crate::connection::TxnVersions> {
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
    pub(super) fn send_txn_request(
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
    pub(super) fn txn_retry_later(&mut self, find_again: bool) {
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
    pub(super) fn txn_answered(&mut self) {
        if let Some(txn) = self.txn.as_mut() {
            txn.retries = 0;
            txn.retry_at = None;
        }
        self.work_pending = true;
    }

    /// Applies an error `code` of the answer to `request` by its class in the retry table.
    /// Call it for any error code of a coordinator answer (a TxnOffsetCommit's lookup of the
    /// group's coordinator excepted, which moves the offsets' own step first).
    pub(super) fn txn_error(&mut self, request: Request, code: ErrorCode, message: Option<String>) {
        let api = || format!("{request:?}");
        // Only an open transaction (or one committing) can become abortable.
        let open = self.txn.as_ref().is_some_and(|t| {
            matches!(
                t.state,
                TransactionState::InTransaction | TransactionState::Committing
            )
        });
        match class(request, code) {
            Class::FindAgain => self.txn_retry_later(true),
            Class::Retry => self.txn_retry_later(false),
            // An abort cannot become more abortable, nor can an init or a transaction already
            // abortable: the request is asked again after a backoff (without it, the same
            // request went again at once, for as long as the coordinator answered so: an
            // abort that never completed, a FindCoordinator storm during init).
            Class::Abortable if !open => self.txn_retry_later(false),
            Class::Abortable => self.txn_becomes_abortable(TransactionError::Abortable {
                code,
                message: Some(message.unwrap_or_else(api)),
            }),
            Class::Fatal => self.go_fatal(ProduceError::Broker {
                code,
                message: Some(message.unwrap_or_else(api)),
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
            // A lookup that finds no coordinator (yet) is retried like any lookup: the table's
            // FindCoordinator row.
            self.txn_error(Request::FindCoordinator, c.error_code, c.error_message);
            return true;
        }
        // The retry count keeps growing until the coordinator itself answers: while Kafka
        // still names a dead coordinator, the lookups back off exponentially.
        if let Some(txn) = self.txn.as_mut() {
            txn.retry_at = None;
        }
        self.work_pending = true;
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
        let tv2 = v.transaction_version >= 2
            && v.end_txn >= 5
            && versions.produce.is_some_and(|p| p >= 12);
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
            // An abortable code here cannot be aborted (no transaction is open): the table's
            // InitProducerId row makes it fatal.
            self.txn_error(Request::InitProducerId, resp.error_code, None);
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
        self.complete_operation(Ok(()));
        true
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
pub(super) fn worst_error(request: Request, topics: &[TopicPartitionErrors]) -> Option<ErrorCode> {
    let rank = |code: ErrorCode| match class(request, code) {
        Class::Fatal => 0,
        Class::Abortable => 1,
        Class::FindAgain => 2,
        Class::Retry => 3,
    };
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&(_, c)| c))
        .filter(|c| *c != ErrorCode::NONE)
        .min_by_key(|&c| rank(c))
}
