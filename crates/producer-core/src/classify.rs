//! What the producer does with each error code a Produce response can carry.
//!
//! One row per code, with the reason for each choice where the well-known clients disagree, in
//! the project's error table (the design notes' `reference/ERRORS.md`, summarised in the
//! README); every row has a unit test below.

use crate::ErrorCode;

/// The action for one partition's result in a Produce response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Success.
    Ok,
    /// Success; the broker had the batch already (offset may be unknown).
    OkDuplicate,
    /// Retry after a metadata refresh (or at once with a leader hint from the response).
    Refresh,
    /// Retry after exponential backoff, same leader.
    Backoff,
    /// Retry; the batch may already be written (it keeps its sequence numbers).
    Unsure,
    /// The batch was too large for the broker: split it and retry; a single record fails.
    Split,
    /// The broker lost or rejected our sequence state: bump the epoch, restart sequences, retry.
    Reset,
    /// The records of this batch fail with the error.
    Fail,
    /// The producer cannot go on: every buffered record fails.
    Fatal,
}

/// Classifies a partition-level error code of a Produce response.
pub fn classify(code: ErrorCode) -> Action {
    use Action::*;
    match code {
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
        ErrorCode::TOPIC_AUTHORIZATION_FAILED => Fail,
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED => Fatal,
        ErrorCode::INVALID_TIMESTAMP => Fail,
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
        ErrorCode::INVALID_RECORD => Fail,
        ErrorCode::THROTTLING_QUOTA_EXCEEDED => Backoff,
        ErrorCode::PRODUCER_FENCED => Fatal,
        ErrorCode::UNKNOWN_TOPIC_ID | ErrorCode::INCONSISTENT_TOPIC_ID => Refresh,
        ErrorCode::TRANSACTION_ABORTABLE => Fail,
        // Codes this table does not name are not retried blindly.
        _ => Fail,
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
        topic_authorization_failed_fails,
        ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        Fail
    );
    row!(
        cluster_authorization_failed_is_fatal,
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
        Fatal
    );
    row!(invalid_timestamp_fails, ErrorCode::INVALID_TIMESTAMP, Fail);
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
    row!(invalid_record_fails, ErrorCode::INVALID_RECORD, Fail);
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
}
