//! The one retry table: what the producer does with an error code, for every request it sends
//! (Produce, Metadata, InitProducerId, FindCoordinator, the transaction APIs, SASL,
//! ApiVersions), in each producer mode (plain, idempotent, transactional); and when a retry
//! may go.
//!
//! Every decision of the producer about an error code is made here, and only here: the modules
//! that send requests ask [`decide`] and carry the [`Action`] out (the architecture test
//! `crates/producer-core/tests/architecture.rs` fails on a module that compares error codes
//! itself). The Produce rows, with the reason for each choice where the well-known clients
//! disagree, are the project's error table (the design notes' `reference/ERRORS.md`, summarised
//! in the README); every row has a unit test below.
//!
//! The timing rule is here too ([`RetriesAtOnce`]): every retry waits its backoff (exponential,
//! with jitter), except a Produce batch's one retry at once on a leader hint that names a new
//! leader.

use crate::ErrorCode;

/// The request whose answer carried the error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request {
    /// A partition's result in a Produce answer.
    Produce,
    /// The top-level error of a Metadata answer (v13+): the broker could not answer at all.
    Metadata,
    /// A topic's error in a Metadata answer.
    MetadataTopic,
    /// InitProducerId: the idempotent producer's id, or the transactional producer's from its
    /// coordinator.
    InitProducerId,
    /// FindCoordinator, for the transaction's or a consumer group's coordinator.
    FindCoordinator,
    /// AddPartitionsToTxn (transaction version 1).
    AddPartitionsToTxn,
    /// AddOffsetsToTxn.
    AddOffsetsToTxn,
    /// TxnOffsetCommit, to the group's coordinator.
    TxnOffsetCommit,
    /// EndTxn.
    EndTxn,
    /// SaslHandshake.
    SaslHandshake,
    /// SaslAuthenticate.
    SaslAuthenticate,
    /// ApiVersions.
    ApiVersions,
    /// GetTelemetrySubscriptions or PushTelemetry (KIP-714 client telemetry).
    Telemetry,
}

/// What the producer is: the table's rows differ by mode (a transactional producer's epoch is
/// its coordinator's, so it never resets sequences on its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Neither idempotent nor transactional.
    Plain,
    /// Idempotent (`enable.idempotence`), without a `transactional.id`.
    Idempotent,
    /// With a `transactional.id`.
    Transactional,
}

impl Mode {
    /// The mode of a producer with these settings.
    pub fn of(idempotent: bool, transactional: bool) -> Mode {
        match (idempotent, transactional) {
            (_, true) => Mode::Transactional,
            (true, false) => Mode::Idempotent,
            (false, false) => Mode::Plain,
        }
    }
}

/// What to do with an answer's error code. Each request kind uses the actions that apply to it
/// (listed per action); [`decide`] gives no other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Success.
    Ok,
    /// Success; the broker had the batch already (offset may be unknown). Produce.
    OkDuplicate,
    /// Retry after a metadata refresh. Produce: at once with a leader hint naming a new
    /// leader (see [`RetriesAtOnce`]), else after a backoff. Metadata (top level), and a
    /// Metadata topic that is not ready (an election under way): ask again after a backoff.
    Refresh,
    /// The topic does not exist (yet): a topic in use lost its leaders (deleted, perhaps to be
    /// created again); a new one keeps waiting for its creation. Metadata topics.
    Missing,
    /// Retry after a backoff, same broker. Every request kind.
    Backoff,
    /// Retry after a backoff; the batch may already be written (it keeps its sequence
    /// numbers). Produce.
    Unsure,
    /// The batch was too large for the broker: split it and retry; a single record fails.
    /// Produce.
    Split,
    /// The broker lost or rejected our sequence state: bump the epoch, restart sequences, retry
    /// after a backoff. Produce, idempotent mode.
    Reset,
    /// The coordinator moved the transactional producer's epoch on (it aborted the
    /// transaction past its timeout, KIP-588, or another producer fenced this one): the batch's
    /// records fail, and the transaction can only be aborted, with the KIP-360 epoch bump from
    /// the current epoch, which the coordinator answers with a new epoch after its own abort
    /// and with the fatal `PRODUCER_FENCED` after a fence (Java's `InvalidProducerEpoch`
    /// class: abortable, not fatal). Produce, transactional mode.
    EpochMovedOn,
    /// The coordinator moved: look it up again, then retry after a backoff. The transaction
    /// APIs.
    FindCoordinator,
    /// The open transaction can only be aborted. The transaction APIs.
    Abortable,
    /// This request's records, topic or operation fail; the producer goes on. Produce (the
    /// batch's records), Metadata topics (the topic's records), SASL (the connection fails to
    /// authenticate), ApiVersions (the connection is unusable).
    Fail,
    /// The batch's records fail, and the broker certainly appended nothing of it: its record
    /// validation (`LogValidator`) refused it before the sequence checks and the append, so
    /// the hole it leaves in the sequence is certain. Produce.
    Reject,
    /// The batch's records fail, and so do the topic's later records, at `send` (the producer
    /// may not write the topic). Produce.
    FailTopic,
    /// The producer cannot go on: every record fails, `send` refuses new ones.
    Fatal,
    /// Go back to the bootstrap list for metadata (KIP-1102). Metadata.
    Rebootstrap,
    /// Ask again at a lower version. ApiVersions.
    Downgrade,
    /// The subscription changed: get it again at once. Telemetry.
    Resubscribe,
    /// The broker refused the push's compression type: get the subscription again at once,
    /// and compress no more with that codec. Telemetry.
    RefusedCodec,
    /// Retrying cannot help: client telemetry stops for the producer's life. Telemetry.
    DisableTelemetry,
}

/// The one table: what to do with `code` in the answer to `request`, for a producer in `mode`.
pub fn decide(request: Request, code: ErrorCode, mode: Mode) -> Action {
    if code == ErrorCode::NONE {
        return Action::Ok;
    }
    match request {
        Request::Produce => produce(code, mode),
        Request::Metadata => match code {
            ErrorCode::REBOOTSTRAP_REQUIRED => Action::Rebootstrap,
            _ => Action::Refresh,
        },
        Request::MetadataTopic => match code {
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION | ErrorCode::LEADER_NOT_AVAILABLE => {
                Action::Missing
            }
            // Transient for a topic as for a partition (an election, a storage error).
            code if produce(code, Mode::Idempotent) == Action::Refresh => Action::Refresh,
            _ => Action::Fail,
        },
        Request::InitProducerId if mode != Mode::Transactional => match code {
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED
            | ErrorCode::UNSUPPORTED_VERSION
            | ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            | ErrorCode::PRODUCER_FENCED => Action::Fatal,
            _ => Action::Backoff,
        },
        // No transaction is open while the transactional producer gets its id: an abortable
        // answer cannot be aborted, so it ends the producer too.
        Request::InitProducerId => match coordinator(code) {
            Action::Abortable => Action::Fatal,
            action => action,
        },
        // A lookup that finds no coordinator (yet) is retried like any lookup.
        Request::FindCoordinator => match coordinator(code) {
            Action::FindCoordinator => Action::Backoff,
            action => action,
        },
        Request::AddPartitionsToTxn
        | Request::AddOffsetsToTxn
        | Request::TxnOffsetCommit
        | Request::EndTxn => coordinator(code),
        // A failed authentication fails its connection, whose reconnect backs off.
        Request::SaslHandshake | Request::SaslAuthenticate => Action::Fail,
        Request::ApiVersions => match code {
            ErrorCode::UNSUPPORTED_VERSION => Action::Downgrade,
            _ => Action::Fail,
        },
        // Java's rule (`ClientTelemetryUtils.maybeFetchErrorIntervalMs`): a request the broker
        // cannot take disables telemetry, a changed subscription or a refused codec asks
        // again at once, a push too large or throttled asks again after the push interval
        // (`Backoff`), and a code it does not map disables telemetry.
        Request::Telemetry => match code {
            ErrorCode::UNKNOWN_SUBSCRIPTION_ID => Action::Resubscribe,
            ErrorCode::UNSUPPORTED_COMPRESSION_TYPE => Action::RefusedCodec,
            ErrorCode::TELEMETRY_TOO_LARGE | ErrorCode::THROTTLING_QUOTA_EXCEEDED => {
                Action::Backoff
            }
            _ => Action::DisableTelemetry,
        },
    }
}

/// A partition's result in a Produce answer: the project's error table (`reference/ERRORS.md`),
/// then what changes with the mode.
fn produce(code: ErrorCode, mode: Mode) -> Action {
    use Action::*;
    let action = match code {
        ErrorCode::NONE => Ok,
        ErrorCode::UNKNOWN_SERVER_ERROR => Fail,
        ErrorCode::CORRUPT_MESSAGE => Fail,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        | ErrorCode::LEADER_NOT_AVAILABLE
        | ErrorCode::NOT_LEADER_OR_FOLLOWER
        | ErrorCode::BROKER_NOT_AVAILABLE
        | ErrorCode::REPLICA_NOT_AVAILABLE
        | ErrorCode::NETWORK_EXCEPTION => Refresh,
        ErrorCode::REQUEST_TIMED_OUT => Unsure,
        ErrorCode::MESSAGE_TOO_LARGE => Split,
        ErrorCode::RECORD_LIST_TOO_LARGE => Fail,
        ErrorCode::NOT_ENOUGH_REPLICAS => Backoff,
        ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND => Unsure,
        ErrorCode::INVALID_REQUIRED_ACKS => Fail,
        ErrorCode::TOPIC_AUTHORIZATION_FAILED => FailTopic,
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED => Fatal,
        ErrorCode::INVALID_TIMESTAMP => Reject,
        ErrorCode::UNSUPPORTED_VERSION => Fatal,
        ErrorCode::INVALID_REQUEST
        | ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT
        | ErrorCode::POLICY_VIOLATION => Fail,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER => Reset,
        ErrorCode::DUPLICATE_SEQUENCE_NUMBER => OkDuplicate,
        ErrorCode::INVALID_PRODUCER_EPOCH => Reset,
        ErrorCode::INVALID_PRODUCER_ID_MAPPING => Fatal,
        ErrorCode::CONCURRENT_TRANSACTIONS => Backoff,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => Fatal,
        ErrorCode::KAFKA_STORAGE_ERROR => Refresh,
        ErrorCode::UNKNOWN_PRODUCER_ID => Reset,
        ErrorCode::FENCED_LEADER_EPOCH | ErrorCode::UNKNOWN_LEADER_EPOCH => Refresh,
        ErrorCode::UNSUPPORTED_COMPRESSION_TYPE => Fail,
        ErrorCode::INVALID_RECORD => Reject,
        ErrorCode::THROTTLING_QUOTA_EXCEEDED => Backoff,
        ErrorCode::PRODUCER_FENCED => Fatal,
        ErrorCode::UNKNOWN_TOPIC_ID | ErrorCode::INCONSISTENT_TOPIC_ID => Refresh,
        ErrorCode::TRANSACTION_ABORTABLE => Fail,
        // Codes this table does not name are not retried blindly.
        _ => Fail,
    };
    match (mode, action) {
        // A transactional producer's epoch is the coordinator's: fenced, or out of step with
        // it, it stops (KIP-1050's fatal class).
        (Mode::Transactional, _)
            if matches!(
                code,
                ErrorCode::PRODUCER_FENCED
                    | ErrorCode::INVALID_TXN_STATE
                    | ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            ) =>
        {
            Fatal
        }
        // An older epoch than the partition's: the coordinator bumped it, most often by
        // aborting the transaction past its timeout (a commit stalled by broker faults). The
        // abort's epoch bump tells that from a fence; Java aborts too.
        (Mode::Transactional, _) if code == ErrorCode::INVALID_PRODUCER_EPOCH => EpochMovedOn,
        // No sequence restart inside a transaction: the batch fails, the transaction aborts,
        // and the epoch bump after it restarts the sequences.
        (Mode::Transactional, Reset) => Fail,
        // Without a producer id there are no sequences to reset: a broker that says otherwise
        // is retried after a backoff, until the delivery timeout.
        (Mode::Plain, Reset) => Backoff,
        (_, action) => action,
    }
}

/// KIP-1050's classes for the answers of a transaction's coordinators, as Kafka 4.1 classifies
/// them: look the coordinator up again, retry after a backoff, abort the transaction, or stop.
fn coordinator(code: ErrorCode) -> Action {
    match code {
        ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE => {
            Action::FindCoordinator
        }
        // OPERATION_NOT_ATTEMPTED: a partition left out because of another's error; it is
        // tried again with the rest once that error is handled.
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        | ErrorCode::CONCURRENT_TRANSACTIONS
        | ErrorCode::REQUEST_TIMED_OUT
        | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        | ErrorCode::NETWORK_EXCEPTION
        | ErrorCode::OPERATION_NOT_ATTEMPTED => Action::Backoff,
        ErrorCode::PRODUCER_FENCED
        | ErrorCode::INVALID_PRODUCER_EPOCH
        | ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        | ErrorCode::INVALID_TXN_STATE
        | ErrorCode::INVALID_PRODUCER_ID_MAPPING
        | ErrorCode::CLUSTER_AUTHORIZATION_FAILED
        | ErrorCode::UNSUPPORTED_VERSION
        | ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT
        | ErrorCode::INVALID_TRANSACTION_TIMEOUT => Action::Fatal,
        _ => Action::Abortable,
    }
}

/// Whether an EndTxn that aborts a transaction the coordinator never confirmed, answered with
/// `code`, found nothing to abort (so the abort is complete): the requests that would have
/// started the transaction (transaction version 1) were lost. Kafka then answers
/// INVALID_TXN_STATE, and the epoch bump after the abort closes any sequence hole. A version 2
/// coordinator aborts such a transaction as an empty one and bumps the epoch (Kafka 4.1.1), so
/// none of its answers ends the abort here: ending it would keep the epoch and leave the holes
/// of the batches sent, and the next transaction's batches would be refused with
/// OUT_OF_ORDER_SEQUENCE_NUMBER; its PRODUCER_FENCED is a fence.
pub fn unconfirmed_abort_found_nothing(code: ErrorCode) -> bool {
    code == ErrorCode::INVALID_TXN_STATE
}

/// Whether a Produce answer says the batch was too large for the broker: MESSAGE_TOO_LARGE
/// (past the topic's `max.message.bytes`) or RECORD_LIST_TOO_LARGE (past its segment size).
/// A batch that grew past `batch.size` while its leader was busy (`batch.grow.max.bytes`) and
/// holds more than one record is split and resent on either, never failed: its size was the
/// producer's choice, not the application's; and its topic's growth limit comes down. Every
/// other batch goes by the table (MESSAGE_TOO_LARGE splits, RECORD_LIST_TOO_LARGE fails).
pub(crate) fn batch_too_large(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::MESSAGE_TOO_LARGE | ErrorCode::RECORD_LIST_TOO_LARGE
    )
}

/// Classifies a partition-level error code of a Produce answer for an idempotent producer:
/// `decide(Request::Produce, code, Mode::Idempotent)`.
pub fn classify(code: ErrorCode) -> Action {
    decide(Request::Produce, code, Mode::Idempotent)
}

/// A leader named by a Produce answer's KIP-951 hint (`CurrentLeader`), by node id and leader
/// epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderHint {
    /// The node the broker says leads the partition.
    pub leader_id: i32,
    /// Its leader epoch.
    pub leader_epoch: i32,
}

/// A batch's memory of its retries at once (the timing rule of [`Action::Refresh`]): every
/// retry waits its backoff, except one at once on a leader hint that names a *new* leader.
///
/// A retry may go at once only on a hint (already checked to name a node the producer knows)
/// that names a leader other than the node that just refused the batch, at a leader epoch no
/// older than the partition's, distinct from the hint of the batch's last retry at once, and
/// only when the batch's previous retry did not go at once. So a batch goes at once at most
/// once per distinct hint and never twice in a row: a broker that keeps naming itself, or a
/// new epoch each time, or two leaders in turn, gets at most one request per backoff.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetriesAtOnce {
    /// The hint of the last retry that went at once.
    last_hint: Option<LeaderHint>,
    /// The previous retry went at once.
    previous_at_once: bool,
}

impl RetriesAtOnce {
    /// Whether a retry on `hint`, after `answered_by` refused the batch, may go at once, for a
    /// partition whose known leader epoch is `known_epoch`. Call [`RetriesAtOnce::retried`]
    /// with the answer once the retry is decided.
    pub fn allows(&self, hint: Option<LeaderHint>, answered_by: i32, known_epoch: i32) -> bool {
        let Some(h) = hint else { return false };
        h.leader_id >= 0
            && h.leader_id != answered_by
            && h.leader_epoch >= known_epoch
            && self.last_hint != Some(h)
            && !self.previous_at_once
    }

    /// The batch was put back to be retried, at once on `hint` or (`None`) after its backoff.
    pub fn retried(&mut self, at_once_on: Option<LeaderHint>) {
        self.previous_at_once = at_once_on.is_some();
        if at_once_on.is_some() {
            self.last_hint = at_once_on;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Action::*;
    use super::*;

    macro_rules! row {
        ($name:ident, $code:expr, $action:expr) => {
            #[test]
            fn $name() {
                assert_eq!(classify($code), $action);
            }
        };
    }

    row!(none_is_ok, ErrorCode::NONE, Ok);
    row!(
        unknown_server_error_fails,
        ErrorCode::UNKNOWN_SERVER_ERROR,
        Fail
    );
    row!(corrupt_message_fails, ErrorCode::CORRUPT_MESSAGE, Fail);
    row!(
        unknown_topic_or_partition_refreshes,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        Refresh
    );
    row!(
        leader_not_available_refreshes,
        ErrorCode::LEADER_NOT_AVAILABLE,
        Refresh
    );
    row!(
        not_leader_or_follower_refreshes,
        ErrorCode::NOT_LEADER_OR_FOLLOWER,
        Refresh
    );
    row!(
        request_timed_out_is_unsure,
        ErrorCode::REQUEST_TIMED_OUT,
        Unsure
    );
    row!(
        broker_not_available_refreshes,
        ErrorCode::BROKER_NOT_AVAILABLE,
        Refresh
    );
    row!(
        replica_not_available_refreshes,
        ErrorCode::REPLICA_NOT_AVAILABLE,
        Refresh
    );
    row!(
        message_too_large_splits,
        ErrorCode::MESSAGE_TOO_LARGE,
        Split
    );
    row!(
        network_exception_refreshes,
        ErrorCode::NETWORK_EXCEPTION,
        Refresh
    );
    row!(
        record_list_too_large_fails,
        ErrorCode::RECORD_LIST_TOO_LARGE,
        Fail
    );
    row!(
        not_enough_replicas_backs_off,
        ErrorCode::NOT_ENOUGH_REPLICAS,
        Backoff
    );
    row!(
        not_enough_replicas_after_append_is_unsure,
        ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Unsure
    );
    row!(
        invalid_required_acks_fails,
        ErrorCode::INVALID_REQUIRED_ACKS,
        Fail
    );
    row!(
        topic_authorization_failed_fails_the_topic,
        ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        FailTopic
    );
    row!(
        cluster_authorization_failed_is_fatal,
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
        Fatal
    );
    row!(
        invalid_timestamp_is_rejected,
        ErrorCode::INVALID_TIMESTAMP,
        Reject
    );
    row!(
        unsupported_version_is_fatal,
        ErrorCode::UNSUPPORTED_VERSION,
        Fatal
    );
    row!(invalid_request_fails, ErrorCode::INVALID_REQUEST, Fail);
    row!(
        unsupported_for_message_format_fails,
        ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT,
        Fail
    );
    row!(policy_violation_fails, ErrorCode::POLICY_VIOLATION, Fail);
    row!(
        out_of_order_sequence_resets,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
        Reset
    );
    row!(
        duplicate_sequence_is_ok_duplicate,
        ErrorCode::DUPLICATE_SEQUENCE_NUMBER,
        OkDuplicate
    );
    row!(
        invalid_producer_epoch_resets,
        ErrorCode::INVALID_PRODUCER_EPOCH,
        Reset
    );
    row!(
        invalid_producer_id_mapping_is_fatal,
        ErrorCode::INVALID_PRODUCER_ID_MAPPING,
        Fatal
    );
    row!(
        concurrent_transactions_backs_off,
        ErrorCode::CONCURRENT_TRANSACTIONS,
        Backoff
    );
    row!(
        transactional_id_authorization_failed_is_fatal,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        Fatal
    );
    row!(
        kafka_storage_error_refreshes,
        ErrorCode::KAFKA_STORAGE_ERROR,
        Refresh
    );
    row!(
        unknown_producer_id_resets,
        ErrorCode::UNKNOWN_PRODUCER_ID,
        Reset
    );
    row!(
        fenced_leader_epoch_refreshes,
        ErrorCode::FENCED_LEADER_EPOCH,
        Refresh
    );
    row!(
        unknown_leader_epoch_refreshes,
        ErrorCode::UNKNOWN_LEADER_EPOCH,
        Refresh
    );
    row!(
        unsupported_compression_type_fails,
        ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
        Fail
    );
    row!(
        invalid_record_is_rejected,
        ErrorCode::INVALID_RECORD,
        Reject
    );
    row!(
        throttling_quota_exceeded_backs_off,
        ErrorCode::THROTTLING_QUOTA_EXCEEDED,
        Backoff
    );
    row!(producer_fenced_is_fatal, ErrorCode::PRODUCER_FENCED, Fatal);
    row!(
        unknown_topic_id_refreshes,
        ErrorCode::UNKNOWN_TOPIC_ID,
        Refresh
    );
    row!(
        inconsistent_topic_id_refreshes,
        ErrorCode::INCONSISTENT_TOPIC_ID,
        Refresh
    );
    row!(
        transaction_abortable_fails,
        ErrorCode::TRANSACTION_ABORTABLE,
        Fail
    );
    row!(unknown_codes_fail, ErrorCode(12345), Fail);

    fn txn(request: Request, code: ErrorCode) -> Action {
        decide(request, code, Mode::Transactional)
    }

    #[test]
    fn a_transactional_producers_epoch_errors_are_fatal_not_resets() {
        for code in [
            ErrorCode::PRODUCER_FENCED,
            ErrorCode::INVALID_TXN_STATE,
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ] {
            assert_eq!(txn(Request::Produce, code), Fatal, "{code}");
        }
        // An epoch the coordinator moved on: the transaction aborts, with the epoch bump that
        // tells a timeout's abort from a fence.
        assert_eq!(
            txn(Request::Produce, ErrorCode::INVALID_PRODUCER_EPOCH),
            EpochMovedOn
        );
        // Its sequences restart with the epoch bump after the abort, not within a transaction.
        assert_eq!(
            txn(Request::Produce, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER),
            Fail
        );
        assert_eq!(txn(Request::Produce, ErrorCode::UNKNOWN_PRODUCER_ID), Fail);
        // The rest is the idempotent row.
        assert_eq!(
            txn(Request::Produce, ErrorCode::NOT_LEADER_OR_FOLLOWER),
            Refresh
        );
    }

    #[test]
    fn a_plain_producer_has_no_sequences_to_reset() {
        for code in [
            ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
            ErrorCode::UNKNOWN_PRODUCER_ID,
            ErrorCode::INVALID_PRODUCER_EPOCH,
        ] {
            assert_eq!(decide(Request::Produce, code, Mode::Plain), Backoff);
        }
    }

    #[test]
    fn metadata_rows() {
        let m = |code| decide(Request::Metadata, code, Mode::Idempotent);
        assert_eq!(m(ErrorCode::REBOOTSTRAP_REQUIRED), Rebootstrap);
        assert_eq!(m(ErrorCode::UNKNOWN_SERVER_ERROR), Refresh);
        let t = |code| decide(Request::MetadataTopic, code, Mode::Plain);
        assert_eq!(t(ErrorCode::NONE), Ok);
        assert_eq!(t(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION), Missing);
        assert_eq!(t(ErrorCode::LEADER_NOT_AVAILABLE), Missing);
        assert_eq!(t(ErrorCode::KAFKA_STORAGE_ERROR), Refresh);
        assert_eq!(t(ErrorCode::NOT_LEADER_OR_FOLLOWER), Refresh);
        assert_eq!(t(ErrorCode::TOPIC_AUTHORIZATION_FAILED), Fail);
        assert_eq!(t(ErrorCode::INVALID_TOPIC_EXCEPTION), Fail);
    }

    #[test]
    fn init_producer_id_rows() {
        let idem = |code| decide(Request::InitProducerId, code, Mode::Idempotent);
        assert_eq!(idem(ErrorCode::CLUSTER_AUTHORIZATION_FAILED), Fatal);
        assert_eq!(idem(ErrorCode::UNSUPPORTED_VERSION), Fatal);
        assert_eq!(idem(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS), Backoff);
        assert_eq!(idem(ErrorCode::UNKNOWN_SERVER_ERROR), Backoff);
        let t = |code| txn(Request::InitProducerId, code);
        assert_eq!(t(ErrorCode::NOT_COORDINATOR), FindCoordinator);
        assert_eq!(t(ErrorCode::CONCURRENT_TRANSACTIONS), Backoff);
        assert_eq!(t(ErrorCode::PRODUCER_FENCED), Fatal);
        // Nothing to abort while the id is being fetched.
        assert_eq!(t(ErrorCode::UNKNOWN_SERVER_ERROR), Fatal);
    }

    #[test]
    fn coordinator_rows() {
        for request in [
            Request::AddPartitionsToTxn,
            Request::AddOffsetsToTxn,
            Request::TxnOffsetCommit,
            Request::EndTxn,
        ] {
            assert_eq!(txn(request, ErrorCode::NOT_COORDINATOR), FindCoordinator);
            assert_eq!(
                txn(request, ErrorCode::COORDINATOR_NOT_AVAILABLE),
                FindCoordinator
            );
            assert_eq!(txn(request, ErrorCode::CONCURRENT_TRANSACTIONS), Backoff);
            assert_eq!(
                txn(request, ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
                Backoff
            );
            assert_eq!(txn(request, ErrorCode::INVALID_TXN_STATE), Fatal);
            assert_eq!(
                txn(request, ErrorCode::TOPIC_AUTHORIZATION_FAILED),
                Abortable
            );
            assert_eq!(txn(request, ErrorCode(12345)), Abortable);
            assert_eq!(txn(request, ErrorCode::OPERATION_NOT_ATTEMPTED), Backoff);
        }
        assert!(unconfirmed_abort_found_nothing(
            ErrorCode::INVALID_TXN_STATE
        ));
        // Transaction version 2 aborts an unconfirmed transaction as an empty one (with an epoch
        // bump): PRODUCER_FENCED then is a fence, not an abort found empty.
        assert!(!unconfirmed_abort_found_nothing(ErrorCode::PRODUCER_FENCED));
        assert!(!unconfirmed_abort_found_nothing(ErrorCode::NOT_COORDINATOR));
        // A lookup that finds no coordinator yet is retried like any lookup.
        assert_eq!(
            txn(Request::FindCoordinator, ErrorCode::NOT_COORDINATOR),
            Backoff
        );
        assert_eq!(
            txn(
                Request::FindCoordinator,
                ErrorCode::COORDINATOR_NOT_AVAILABLE
            ),
            Backoff
        );
        assert_eq!(
            txn(
                Request::FindCoordinator,
                ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            ),
            Fatal
        );
    }

    /// The two answers that say a batch was too large, and no other, make a grown batch split.
    #[test]
    fn too_large_answers_are_the_two_size_codes() {
        assert!(batch_too_large(ErrorCode::MESSAGE_TOO_LARGE));
        assert!(batch_too_large(ErrorCode::RECORD_LIST_TOO_LARGE));
        for code in [
            ErrorCode::NONE,
            ErrorCode::CORRUPT_MESSAGE,
            ErrorCode::INVALID_RECORD,
            ErrorCode::REQUEST_TIMED_OUT,
        ] {
            assert!(!batch_too_large(code), "{code:?}");
        }
    }

    #[test]
    fn telemetry_rows() {
        let t = |code| decide(Request::Telemetry, code, Mode::Idempotent);
        assert_eq!(t(ErrorCode::NONE), Ok);
        assert_eq!(t(ErrorCode::UNKNOWN_SUBSCRIPTION_ID), Resubscribe);
        assert_eq!(t(ErrorCode::UNSUPPORTED_COMPRESSION_TYPE), RefusedCodec);
        assert_eq!(t(ErrorCode::TELEMETRY_TOO_LARGE), Backoff);
        assert_eq!(t(ErrorCode::THROTTLING_QUOTA_EXCEEDED), Backoff);
        for code in [
            ErrorCode::INVALID_REQUEST,
            ErrorCode::INVALID_RECORD,
            ErrorCode::UNSUPPORTED_VERSION,
            ErrorCode::UNKNOWN_SERVER_ERROR,
            ErrorCode(9999),
        ] {
            assert_eq!(t(code), DisableTelemetry, "{code}");
        }
    }

    #[test]
    fn connection_setup_rows() {
        for request in [Request::SaslHandshake, Request::SaslAuthenticate] {
            assert_eq!(
                decide(request, ErrorCode::UNSUPPORTED_SASL_MECHANISM, Mode::Plain),
                Fail
            );
            assert_eq!(decide(request, ErrorCode::NONE, Mode::Plain), Ok);
        }
        let a = |code| decide(Request::ApiVersions, code, Mode::Idempotent);
        assert_eq!(a(ErrorCode::UNSUPPORTED_VERSION), Downgrade);
        assert_eq!(a(ErrorCode::UNKNOWN_SERVER_ERROR), Fail);
    }

    #[test]
    fn a_retry_goes_at_once_only_on_a_new_leader_and_never_twice_in_a_row() {
        let hint = |leader_id, leader_epoch| {
            Some(LeaderHint {
                leader_id,
                leader_epoch,
            })
        };
        let fresh = RetriesAtOnce::default();
        // A new leader, at a current epoch: at once.
        assert!(fresh.allows(hint(2, 5), 1, 5));
        assert!(fresh.allows(hint(2, 6), 1, 5));
        // The broker that refused names itself: a stale broker, back off.
        assert!(!fresh.allows(hint(1, 5), 1, 5));
        assert!(!fresh.allows(hint(1, 9), 1, 5));
        // An older epoch than the one known: stale, back off.
        assert!(!fresh.allows(hint(2, 4), 1, 5));
        // No hint, or no leader.
        assert!(!fresh.allows(None, 1, 5));
        assert!(!fresh.allows(hint(-1, 5), 1, 5));

        // The previous retry went at once: this one waits, whatever the hint.
        let mut r = fresh;
        r.retried(hint(2, 6));
        assert!(!r.allows(hint(3, 7), 2, 6));
        // After a retry that waited, a new hint may go at once again; the same one may not.
        r.retried(None);
        assert!(r.allows(hint(3, 7), 2, 6));
        assert!(!r.allows(hint(2, 6), 3, 6));
    }
}
