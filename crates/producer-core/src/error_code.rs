//! Kafka error codes.

use std::fmt;

/// A Kafka error code as it appears on the wire. Codes this crate does not name are still
/// representable (and are classified as permanent failures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub i16);

impl ErrorCode {
    /// `UNKNOWN_SERVER_ERROR` (-1).
    pub const UNKNOWN_SERVER_ERROR: ErrorCode = ErrorCode(-1);
    /// `NONE` (0).
    pub const NONE: ErrorCode = ErrorCode(0);
    /// `OFFSET_OUT_OF_RANGE` (1).
    pub const OFFSET_OUT_OF_RANGE: ErrorCode = ErrorCode(1);
    /// `CORRUPT_MESSAGE` (2).
    pub const CORRUPT_MESSAGE: ErrorCode = ErrorCode(2);
    /// `UNKNOWN_TOPIC_OR_PARTITION` (3).
    pub const UNKNOWN_TOPIC_OR_PARTITION: ErrorCode = ErrorCode(3);
    /// `INVALID_FETCH_SIZE` (4).
    pub const INVALID_FETCH_SIZE: ErrorCode = ErrorCode(4);
    /// `LEADER_NOT_AVAILABLE` (5).
    pub const LEADER_NOT_AVAILABLE: ErrorCode = ErrorCode(5);
    /// `NOT_LEADER_OR_FOLLOWER` (6).
    pub const NOT_LEADER_OR_FOLLOWER: ErrorCode = ErrorCode(6);
    /// `REQUEST_TIMED_OUT` (7).
    pub const REQUEST_TIMED_OUT: ErrorCode = ErrorCode(7);
    /// `BROKER_NOT_AVAILABLE` (8).
    pub const BROKER_NOT_AVAILABLE: ErrorCode = ErrorCode(8);
    /// `REPLICA_NOT_AVAILABLE` (9).
    pub const REPLICA_NOT_AVAILABLE: ErrorCode = ErrorCode(9);
    /// `MESSAGE_TOO_LARGE` (10).
    pub const MESSAGE_TOO_LARGE: ErrorCode = ErrorCode(10);
    /// `OFFSET_METADATA_TOO_LARGE` (12).
    pub const OFFSET_METADATA_TOO_LARGE: ErrorCode = ErrorCode(12);
    /// `NETWORK_EXCEPTION` (13).
    pub const NETWORK_EXCEPTION: ErrorCode = ErrorCode(13);
    /// `COORDINATOR_LOAD_IN_PROGRESS` (14).
    pub const COORDINATOR_LOAD_IN_PROGRESS: ErrorCode = ErrorCode(14);
    /// `COORDINATOR_NOT_AVAILABLE` (15).
    pub const COORDINATOR_NOT_AVAILABLE: ErrorCode = ErrorCode(15);
    /// `NOT_COORDINATOR` (16).
    pub const NOT_COORDINATOR: ErrorCode = ErrorCode(16);
    /// `INVALID_TOPIC_EXCEPTION` (17).
    pub const INVALID_TOPIC_EXCEPTION: ErrorCode = ErrorCode(17);
    /// `RECORD_LIST_TOO_LARGE` (18).
    pub const RECORD_LIST_TOO_LARGE: ErrorCode = ErrorCode(18);
    /// `NOT_ENOUGH_REPLICAS` (19).
    pub const NOT_ENOUGH_REPLICAS: ErrorCode = ErrorCode(19);
    /// `NOT_ENOUGH_REPLICAS_AFTER_APPEND` (20).
    pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode = ErrorCode(20);
    /// `INVALID_REQUIRED_ACKS` (21).
    pub const INVALID_REQUIRED_ACKS: ErrorCode = ErrorCode(21);
    /// `TOPIC_AUTHORIZATION_FAILED` (29).
    pub const TOPIC_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(29);
    /// `GROUP_AUTHORIZATION_FAILED` (30).
    pub const GROUP_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(30);
    /// `CLUSTER_AUTHORIZATION_FAILED` (31).
    pub const CLUSTER_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(31);
    /// `INVALID_TIMESTAMP` (32).
    pub const INVALID_TIMESTAMP: ErrorCode = ErrorCode(32);
    /// `UNSUPPORTED_SASL_MECHANISM` (33).
    pub const UNSUPPORTED_SASL_MECHANISM: ErrorCode = ErrorCode(33);
    /// `ILLEGAL_SASL_STATE` (34).
    pub const ILLEGAL_SASL_STATE: ErrorCode = ErrorCode(34);
    /// `UNSUPPORTED_VERSION` (35).
    pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode(35);
    /// `INVALID_REQUEST` (42).
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(42);
    /// `UNSUPPORTED_FOR_MESSAGE_FORMAT` (43).
    pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: ErrorCode = ErrorCode(43);
    /// `POLICY_VIOLATION` (44).
    pub const POLICY_VIOLATION: ErrorCode = ErrorCode(44);
    /// `OUT_OF_ORDER_SEQUENCE_NUMBER` (45).
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode = ErrorCode(45);
    /// `DUPLICATE_SEQUENCE_NUMBER` (46).
    pub const DUPLICATE_SEQUENCE_NUMBER: ErrorCode = ErrorCode(46);
    /// `INVALID_PRODUCER_EPOCH` (47).
    pub const INVALID_PRODUCER_EPOCH: ErrorCode = ErrorCode(47);
    /// `INVALID_TXN_STATE` (48).
    pub const INVALID_TXN_STATE: ErrorCode = ErrorCode(48);
    /// `INVALID_PRODUCER_ID_MAPPING` (49).
    pub const INVALID_PRODUCER_ID_MAPPING: ErrorCode = ErrorCode(49);
    /// `INVALID_TRANSACTION_TIMEOUT` (50).
    pub const INVALID_TRANSACTION_TIMEOUT: ErrorCode = ErrorCode(50);
    /// `CONCURRENT_TRANSACTIONS` (51).
    pub const CONCURRENT_TRANSACTIONS: ErrorCode = ErrorCode(51);
    /// `TRANSACTIONAL_ID_AUTHORIZATION_FAILED` (53).
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(53);
    /// `OPERATION_NOT_ATTEMPTED` (55): a partition of the request was left out because of
    /// another's error.
    pub const OPERATION_NOT_ATTEMPTED: ErrorCode = ErrorCode(55);
    /// `KAFKA_STORAGE_ERROR` (56).
    pub const KAFKA_STORAGE_ERROR: ErrorCode = ErrorCode(56);
    /// `SASL_AUTHENTICATION_FAILED` (58).
    pub const SASL_AUTHENTICATION_FAILED: ErrorCode = ErrorCode(58);
    /// `UNKNOWN_PRODUCER_ID` (59).
    pub const UNKNOWN_PRODUCER_ID: ErrorCode = ErrorCode(59);
    /// `FENCED_LEADER_EPOCH` (74).
    pub const FENCED_LEADER_EPOCH: ErrorCode = ErrorCode(74);
    /// `UNKNOWN_LEADER_EPOCH` (75).
    pub const UNKNOWN_LEADER_EPOCH: ErrorCode = ErrorCode(75);
    /// `UNSUPPORTED_COMPRESSION_TYPE` (76).
    pub const UNSUPPORTED_COMPRESSION_TYPE: ErrorCode = ErrorCode(76);
    /// `INVALID_RECORD` (87).
    pub const INVALID_RECORD: ErrorCode = ErrorCode(87);
    /// `THROTTLING_QUOTA_EXCEEDED` (89).
    pub const THROTTLING_QUOTA_EXCEEDED: ErrorCode = ErrorCode(89);
    /// `PRODUCER_FENCED` (90).
    pub const PRODUCER_FENCED: ErrorCode = ErrorCode(90);
    /// `UNKNOWN_TOPIC_ID` (100).
    pub const UNKNOWN_TOPIC_ID: ErrorCode = ErrorCode(100);
    /// `INCONSISTENT_TOPIC_ID` (103).
    pub const INCONSISTENT_TOPIC_ID: ErrorCode = ErrorCode(103);
    /// `UNKNOWN_SUBSCRIPTION_ID` (117): a PushTelemetry named a subscription the broker no
    /// longer has (it changed): get the subscription again (KIP-714).
    pub const UNKNOWN_SUBSCRIPTION_ID: ErrorCode = ErrorCode(117);
    /// `TELEMETRY_TOO_LARGE` (118): a PushTelemetry carried more than the subscription's
    /// `telemetry_max_bytes` (KIP-714).
    pub const TELEMETRY_TOO_LARGE: ErrorCode = ErrorCode(118);
    /// `TRANSACTION_ABORTABLE` (120).
    pub const TRANSACTION_ABORTABLE: ErrorCode = ErrorCode(120);
    /// `REBOOTSTRAP_REQUIRED` (129): Metadata v13's top-level answer telling the client to go
    /// back to its bootstrap list (KIP-1102).
    pub const REBOOTSTRAP_REQUIRED: ErrorCode = ErrorCode(129);

    /// Every code this crate names.
    pub const NAMED: &'static [ErrorCode] = &[
        ErrorCode::UNKNOWN_SERVER_ERROR,
        ErrorCode::NONE,
        ErrorCode::OFFSET_OUT_OF_RANGE,
        ErrorCode::CORRUPT_MESSAGE,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode::INVALID_FETCH_SIZE,
        ErrorCode::LEADER_NOT_AVAILABLE,
        ErrorCode::NOT_LEADER_OR_FOLLOWER,
        ErrorCode::REQUEST_TIMED_OUT,
        ErrorCode::BROKER_NOT_AVAILABLE,
        ErrorCode::REPLICA_NOT_AVAILABLE,
        ErrorCode::MESSAGE_TOO_LARGE,
        ErrorCode::OFFSET_METADATA_TOO_LARGE,
        ErrorCode::NETWORK_EXCEPTION,
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode::COORDINATOR_NOT_AVAILABLE,
        ErrorCode::NOT_COORDINATOR,
        ErrorCode::INVALID_TOPIC_EXCEPTION,
        ErrorCode::RECORD_LIST_TOO_LARGE,
        ErrorCode::NOT_ENOUGH_REPLICAS,
        ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode::INVALID_REQUIRED_ACKS,
        ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode::INVALID_TIMESTAMP,
        ErrorCode::UNSUPPORTED_SASL_MECHANISM,
        ErrorCode::ILLEGAL_SASL_STATE,
        ErrorCode::UNSUPPORTED_VERSION,
        ErrorCode::INVALID_REQUEST,
        ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT,
        ErrorCode::POLICY_VIOLATION,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode::DUPLICATE_SEQUENCE_NUMBER,
        ErrorCode::INVALID_PRODUCER_EPOCH,
        ErrorCode::INVALID_TXN_STATE,
        ErrorCode::INVALID_PRODUCER_ID_MAPPING,
        ErrorCode::INVALID_TRANSACTION_TIMEOUT,
        ErrorCode::CONCURRENT_TRANSACTIONS,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode::OPERATION_NOT_ATTEMPTED,
        ErrorCode::GROUP_AUTHORIZATION_FAILED,
        ErrorCode::KAFKA_STORAGE_ERROR,
        ErrorCode::SASL_AUTHENTICATION_FAILED,
        ErrorCode::UNKNOWN_PRODUCER_ID,
        ErrorCode::FENCED_LEADER_EPOCH,
        ErrorCode::UNKNOWN_LEADER_EPOCH,
        ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
        ErrorCode::INVALID_RECORD,
        ErrorCode::THROTTLING_QUOTA_EXCEEDED,
        ErrorCode::PRODUCER_FENCED,
        ErrorCode::UNKNOWN_TOPIC_ID,
        ErrorCode::INCONSISTENT_TOPIC_ID,
        ErrorCode::UNKNOWN_SUBSCRIPTION_ID,
        ErrorCode::TELEMETRY_TOO_LARGE,
        ErrorCode::TRANSACTION_ABORTABLE,
        ErrorCode::REBOOTSTRAP_REQUIRED,
    ];

    /// Kafka's name for the code, or `None` for a code this crate does not know.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            -1 => "UNKNOWN_SERVER_ERROR",
            0 => "NONE",
            1 => "OFFSET_OUT_OF_RANGE",
            2 => "CORRUPT_MESSAGE",
            3 => "UNKNOWN_TOPIC_OR_PARTITION",
            4 => "INVALID_FETCH_SIZE",
            5 => "LEADER_NOT_AVAILABLE",
            6 => "NOT_LEADER_OR_FOLLOWER",
            7 => "REQUEST_TIMED_OUT",
            8 => "BROKER_NOT_AVAILABLE",
            9 => "REPLICA_NOT_AVAILABLE",
            10 => "MESSAGE_TOO_LARGE",
            12 => "OFFSET_METADATA_TOO_LARGE",
            13 => "NETWORK_EXCEPTION",
            14 => "COORDINATOR_LOAD_IN_PROGRESS",
            15 => "COORDINATOR_NOT_AVAILABLE",
            16 => "NOT_COORDINATOR",
            17 => "INVALID_TOPIC_EXCEPTION",
            18 => "RECORD_LIST_TOO_LARGE",
            19 => "NOT_ENOUGH_REPLICAS",
            20 => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            21 => "INVALID_REQUIRED_ACKS",
            29 => "TOPIC_AUTHORIZATION_FAILED",
            31 => "CLUSTER_AUTHORIZATION_FAILED",
            32 => "INVALID_TIMESTAMP",
            33 => "UNSUPPORTED_SASL_MECHANISM",
            34 => "ILLEGAL_SASL_STATE",
            35 => "UNSUPPORTED_VERSION",
            42 => "INVALID_REQUEST",
            43 => "UNSUPPORTED_FOR_MESSAGE_FORMAT",
            44 => "POLICY_VIOLATION",
            45 => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            46 => "DUPLICATE_SEQUENCE_NUMBER",
            47 => "INVALID_PRODUCER_EPOCH",
            48 => "INVALID_TXN_STATE",
            49 => "INVALID_PRODUCER_ID_MAPPING",
            50 => "INVALID_TRANSACTION_TIMEOUT",
            51 => "CONCURRENT_TRANSACTIONS",
            53 => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
            55 => "OPERATION_NOT_ATTEMPTED",
            30 => "GROUP_AUTHORIZATION_FAILED",
            56 => "KAFKA_STORAGE_ERROR",
            58 => "SASL_AUTHENTICATION_FAILED",
            59 => "UNKNOWN_PRODUCER_ID",
            74 => "FENCED_LEADER_EPOCH",
            75 => "UNKNOWN_LEADER_EPOCH",
            76 => "UNSUPPORTED_COMPRESSION_TYPE",
            87 => "INVALID_RECORD",
            89 => "THROTTLING_QUOTA_EXCEEDED",
            90 => "PRODUCER_FENCED",
            100 => "UNKNOWN_TOPIC_ID",
            103 => "INCONSISTENT_TOPIC_ID",
            117 => "UNKNOWN_SUBSCRIPTION_ID",
            118 => "TELEMETRY_TOO_LARGE",
            120 => "TRANSACTION_ABORTABLE",
            129 => "REBOOTSTRAP_REQUIRED",
            _ => return None,
        })
    }

    /// Whether this is the success code (0).
    pub const fn is_ok(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({})", self.0),
            None => write!(f, "unknown error code {}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(ErrorCode::NOT_LEADER_OR_FOLLOWER, ErrorCode(6));
        assert_eq!(ErrorCode(45).name(), Some("OUT_OF_ORDER_SEQUENCE_NUMBER"));
        assert_eq!(ErrorCode(-1).to_string(), "UNKNOWN_SERVER_ERROR (-1)");
        assert_eq!(ErrorCode(9999).to_string(), "unknown error code 9999");
        for c in ErrorCode::NAMED {
            assert!(c.name().is_some());
        }
    }
}
