//! What the producer does with each error code a Produce response can carry.
//!
//! The table is `reference/ERRORS.md` of the design notes; every row has a unit test below.

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
    match code.0 {
        0 => Ok,
        -1 => Fail,
        2 => Fail,
        3 | 5 | 6 | 8 | 9 | 13 => Refresh,
        7 => Unsure,
        10 => Split,
        18 => Fail,
        19 => Backoff,
        20 => Unsure,
        21 => Fail,
        29 => Fail,
        31 => Fatal,
        32 => Fail,
        35 => Fatal,
        42..=44 => Fail,
        45 => Reset,
        46 => OkDuplicate,
        47 => Reset,
        49 => Fatal,
        51 => Backoff,
        53 => Fatal,
        56 => Refresh,
        59 => Reset,
        74 | 75 => Refresh,
        76 => Fail,
        87 => Fail,
        89 => Backoff,
        90 => Fatal,
        100 | 103 => Refresh,
        120 => Fail,
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
                assert_eq!(classify(ErrorCode($code)), $action);
            }
        };
    }

    row!(none_is_ok, 0, Ok);
    row!(unknown_server_error_fails, -1, Fail);
    row!(corrupt_message_fails, 2, Fail);
    row!(unknown_topic_or_partition_refreshes, 3, Refresh);
    row!(leader_not_available_refreshes, 5, Refresh);
    row!(not_leader_or_follower_refreshes, 6, Refresh);
    row!(request_timed_out_is_unsure, 7, Unsure);
    row!(broker_not_available_refreshes, 8, Refresh);
    row!(replica_not_available_refreshes, 9, Refresh);
    row!(message_too_large_splits, 10, Split);
    row!(network_exception_refreshes, 13, Refresh);
    row!(record_list_too_large_fails, 18, Fail);
    row!(not_enough_replicas_backs_off, 19, Backoff);
    row!(not_enough_replicas_after_append_is_unsure, 20, Unsure);
    row!(invalid_required_acks_fails, 21, Fail);
    row!(topic_authorization_failed_fails, 29, Fail);
    row!(cluster_authorization_failed_is_fatal, 31, Fatal);
    row!(invalid_timestamp_fails, 32, Fail);
    row!(unsupported_version_is_fatal, 35, Fatal);
    row!(invalid_request_fails, 42, Fail);
    row!(unsupported_for_message_format_fails, 43, Fail);
    row!(policy_violation_fails, 44, Fail);
    row!(out_of_order_sequence_resets, 45, Reset);
    row!(duplicate_sequence_is_ok_duplicate, 46, OkDuplicate);
    row!(invalid_producer_epoch_resets, 47, Reset);
    row!(invalid_producer_id_mapping_is_fatal, 49, Fatal);
    row!(concurrent_transactions_backs_off, 51, Backoff);
    row!(transactional_id_authorization_failed_is_fatal, 53, Fatal);
    row!(kafka_storage_error_refreshes, 56, Refresh);
    row!(unknown_producer_id_resets, 59, Reset);
    row!(fenced_leader_epoch_refreshes, 74, Refresh);
    row!(unknown_leader_epoch_refreshes, 75, Refresh);
    row!(unsupported_compression_type_fails, 76, Fail);
    row!(invalid_record_fails, 87, Fail);
    row!(throttling_quota_exceeded_backs_off, 89, Backoff);
    row!(producer_fenced_is_fatal, 90, Fatal);
    row!(unknown_topic_id_refreshes, 100, Refresh);
    row!(inconsistent_topic_id_refreshes, 103, Refresh);
    row!(transaction_abortable_fails, 120, Fail);
    row!(unknown_codes_fail, 12345, Fail);
}
