//! The errors of the producer's API: why a record failed ([`ProduceError`]), a connection
//! failure it names ([`ConnectionError`]) and why `send` refused a record ([`SendErrorReason`]).
//! Re-exported from `crate::types` as well, where they used to live.

use crate::topic_name::InvalidTopicName;
use crate::ErrorCode;

/// Why a record failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProduceError {
    /// The broker answered with an error that is not retried.
    #[error("broker error {code}{}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default(),
        if *possibly_persisted { " (an earlier attempt may have been written)" } else { "" })]
    Broker {
        /// The error code.
        code: ErrorCode,
        /// The broker's message, if any.
        message: Option<String>,
        /// An earlier attempt of the same batch may have been written (it timed out, lost its
        /// connection, or was answered with an "unsure" error) before this error came.
        possibly_persisted: bool,
    },
    /// The broker rejected this record itself: it failed the record's batch with `code`
    /// (`INVALID_RECORD` for a record without a key on a compacted topic, `INVALID_TIMESTAMP`,
    /// ...) and named this record among the culprits in the response's record errors
    /// (KIP-467, Produce v8+). Nothing of the batch was written. Not retried: sent unchanged, the
    /// record would be rejected again.
    #[error("record {batch_index} of its batch rejected by the broker: {code}{}{}",
        message.as_deref().map(|m| format!(": {m}")).unwrap_or_default(),
        if *possibly_persisted { " (an earlier attempt may have been written)" } else { "" })]
    InvalidRecord {
        /// The partition's error code in the response when the broker named this record
        /// alone; `INVALID_RECORD` when it named several (Kafka answers one code for the
        /// batch, which cannot tell their reasons apart: `message` does), as Java's producer.
        code: ErrorCode,
        /// The record's index within the batch it was sent in.
        batch_index: i32,
        /// The broker's message for this record (or, when it gave none, for the partition).
        message: Option<String>,
        /// An earlier attempt of the same batch may have been written (see
        /// [`ProduceError::Broker`]).
        possibly_persisted: bool,
    },
    /// The broker rejected this record's batch because of *other* records in it, each reported
    /// with [`ProduceError::InvalidRecord`]; this one was not found invalid. Nothing of the batch
    /// was written, and the record is not retried on its own (the producer cannot take the
    /// invalid records out of a batch it sent): the failure report hands it back, so the
    /// application can send it again.
    #[error("batch rejected by the broker ({code}) because of {invalid_records} invalid record(s) in it; this record was not written and may be sent again{}",
        if *possibly_persisted { " (an earlier attempt may have been written)" } else { "" })]
    BatchRejected {
        /// The partition's error code in the response.
        code: ErrorCode,
        /// How many records of the batch the broker rejected themselves.
        invalid_records: u32,
        /// The broker's message for the partition, if any.
        message: Option<String>,
        /// An earlier attempt of the same batch may have been written (see
        /// [`ProduceError::Broker`]).
        possibly_persisted: bool,
    },
    /// `delivery_timeout` passed before the record was acknowledged (or, for a record waiting
    /// for its topic's metadata while no broker was ever reached, `max_block`).
    #[error("delivery timeout expired{}{}",
        if *possibly_persisted { " (the record may have been written)" } else { "" },
        last_connection_error.as_deref().map(|e| format!("; last connection error: {e}")).unwrap_or_default())]
    DeliveryTimeout {
        /// The record may have been written before the time ran out.
        possibly_persisted: bool,
        /// Why the network was the likely cause, when it was: the last failure of a connection
        /// to the partition's leader (or, for a record with no leader known, the latest failure
        /// of any connection while none was up), unless that broker connected successfully
        /// since. `None` when the connections were fine (a slow or throttling broker).
        last_connection_error: Option<Box<ConnectionError>>,
    },
    /// The topic's metadata did not arrive within `max_block`, or the broker says it does not exist.
    #[error("unknown topic")]
    UnknownTopic,
    /// The explicit partition does not exist in the topic.
    #[error("partition {partition} does not exist (the topic has {count})")]
    UnknownPartition {
        /// The partition asked for.
        partition: i32,
        /// The topic's partition count.
        count: i32,
    },
    /// A driver handed the record to the core after the caller's `send` had returned (a
    /// queued send), and the core refused it: too large for `max_request_size`, an explicit
    /// partition out of range, the producer closed or failed. The same reasons a direct
    /// [`crate::Producer::send`] returns in its [`crate::SendError`]. (A single record the *broker*
    /// finds too large fails as [`ProduceError::Broker`] with `MESSAGE_TOO_LARGE`.)
    #[error("record refused: {0}")]
    Refused(Box<SendErrorReason>),
    /// The producer could not authenticate to the cluster (wrong credentials, mechanism not
    /// enabled, the broker's SCRAM signature did not verify, no OAUTHBEARER token): the record
    /// failed at once instead of waiting for its delivery timeout.
    #[error("authentication failed: {error}{}", if *possibly_persisted { " (an earlier attempt may have been written)" } else { "" })]
    Authentication {
        /// Why authentication failed.
        error: crate::AuthError,
        /// An earlier attempt of the record's batch may have been written (it was sent before,
        /// on a connection that was then lost or timed out).
        possibly_persisted: bool,
    },
    /// The producer was closed before the record could be sent.
    #[error("producer closed")]
    Closed,
    /// The record's transaction was aborted (by `abort_transaction`, or by a close with the
    /// transaction open): it is not visible to `read_committed` consumers, even if it was
    /// written.
    #[error("the record's transaction was aborted")]
    TransactionAborted,
    /// The producer was closed while the record's transaction was being committed: the record
    /// was written, and the commit was asked for but not answered before the close stopped
    /// waiting (`max.block.ms`). The transaction may have committed (the record is then
    /// visible to `read_committed` consumers) or not (the coordinator then aborts it).
    #[error("the producer closed before its transaction's commit was answered: the record may be committed or aborted")]
    TransactionInDoubt,
    /// The batch could not be compressed (when it was closed, or when a batch too large for
    /// the broker was split and its halves re-encoded).
    #[error("compression failed: {0}")]
    Compression(String),
    /// A batch this producer encoded could not be decoded back when its records had to come
    /// out (to be handed back on failure, or split). Not expected: it means a bug. The record
    /// is still reported, with what could be recovered of it.
    #[error("a batch could not be decoded back: {0}")]
    BatchDecode(String),
    /// The application's [`crate::Partitioner`] did not route the record: it answered an
    /// error, a partition the topic does not have, or panicked. Only this record failed (it
    /// was never sent); the producer goes on, with the same partitioner.
    #[error("{0}")]
    Partitioner(crate::PartitionerError),
    /// An interceptor of the application's panicked in its `on_send` for this record (a
    /// driver's interceptors run before the record reaches the core): the record was not sent
    /// (never possibly persisted), and it is handed back as the interceptors left it. The
    /// producer goes on with the other records.
    #[error("an interceptor panicked on this record, which was not sent: {message}")]
    Interceptor {
        /// The panic's message.
        message: String,
    },
    /// The producer's own code (the core's, or its driver's) panicked: a bug. The producer
    /// closed, and every record it still held failed with this error (see
    /// [`crate::Producer::fail_after_panic`]).
    #[error("the producer stopped after a panic in its own code: {message}{}",
        if *possibly_persisted { " (the record may have been written)" } else { "" })]
    Panicked {
        /// The panic's message.
        message: String,
        /// The record may have been written: it was sent and not answered. False only when it
        /// surely never went out.
        possibly_persisted: bool,
    },
    /// [`crate::Producer::purge`] removed the record before it was acknowledged (or a
    /// [`crate::Producer::close_within`] at its deadline removed it before it was sent). The
    /// record is handed back. `possibly_persisted` is false for a record that was never in a
    /// sent request (certainly not written: sending it again cannot duplicate it), true for
    /// one whose batch was sent and abandoned ([`crate::InFlight::Abandon`]): its answer is
    /// ignored, and it may have been written.
    #[error("purged before it was acknowledged{}", if *possibly_persisted { " (it was sent and may have been written)" } else { " (never sent)" })]
    Purged {
        /// The record's batch was sent at least once, and may have been written.
        possibly_persisted: bool,
    },
    /// [`crate::Producer::close_within`] reached its deadline while the record's batch was in
    /// a sent request or waiting to be sent again after one: the producer stopped waiting for
    /// its answer. It may have been written (`possibly_persisted` is then true).
    #[error("the close's deadline passed before the record was acknowledged{}", if *possibly_persisted { " (it was sent and may have been written)" } else { "" })]
    CloseTimedOut {
        /// The record's batch was sent, and may have been written.
        possibly_persisted: bool,
    },
}

impl ProduceError {
    /// Whether a record that failed with this error may have been written anyway (an attempt
    /// of its batch timed out, lost its connection, was answered "unsure", or was in flight
    /// when the producer failed for good). `false` means certainly not written: sending it
    /// again cannot duplicate it.
    pub fn possibly_persisted(&self) -> bool {
        match self {
            ProduceError::Broker {
                possibly_persisted, ..
            }
            | ProduceError::InvalidRecord {
                possibly_persisted, ..
            }
            | ProduceError::BatchRejected {
                possibly_persisted, ..
            }
            | ProduceError::DeliveryTimeout {
                possibly_persisted, ..
            }
            | ProduceError::Authentication {
                possibly_persisted, ..
            }
            | ProduceError::Panicked {
                possibly_persisted, ..
            }
            | ProduceError::Purged { possibly_persisted }
            | ProduceError::CloseTimedOut { possibly_persisted } => *possibly_persisted,
            // Written, and its transaction's commit asked for: it may be committed.
            ProduceError::TransactionInDoubt => true,
            _ => false,
        }
    }

    /// This error, saying whether the record may have been written, for the variants that say
    /// it ([`ProduceError::possibly_persisted`]); the others come back unchanged.
    #[must_use]
    pub fn with_possibly_persisted(mut self, possibly: bool) -> Self {
        match &mut self {
            ProduceError::Broker {
                possibly_persisted, ..
            }
            | ProduceError::InvalidRecord {
                possibly_persisted, ..
            }
            | ProduceError::BatchRejected {
                possibly_persisted, ..
            }
            | ProduceError::DeliveryTimeout {
                possibly_persisted, ..
            }
            | ProduceError::Authentication {
                possibly_persisted, ..
            }
            | ProduceError::Panicked {
                possibly_persisted, ..
            }
            | ProduceError::Purged { possibly_persisted }
            | ProduceError::CloseTimedOut { possibly_persisted } => *possibly_persisted = possibly,
            _ => {}
        }
        self
    }
}

/// A connection that failed: the broker it was for and why, as the driver reported it (an OS
/// error such as a refused connection, a name that did not resolve, the peer closing) or as the
/// producer decided it (no answer within `request_timeout`, bytes that are not Kafka's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {address} ({}): {reason}",
    if *established { "connection lost to" } else { "cannot connect to" },
    if *node_id < 0 { "bootstrap".to_string() } else { format!("broker {node_id}") })]
#[non_exhaustive]
pub struct ConnectionError {
    /// The broker's node id, or -1 for a bootstrap address.
    pub node_id: i32,
    /// `host:port` as the producer asked the driver to connect to it.
    pub address: String,
    /// What kind of failure: the OS error's kind (`ConnectionRefused`, `TimedOut`, ...), as the
    /// driver reported it; `TimedOut` when `request_timeout` ended it, `InvalidData` for bytes
    /// that could not be read as Kafka responses.
    pub kind: std::io::ErrorKind,
    /// The driver's message (for an OS error, with its number: "Connection refused (os error
    /// 111)"), or the producer's own.
    pub reason: String,
    /// Whether the connection had been established before it failed (false: the attempt to
    /// connect itself failed).
    pub established: bool,
}

impl ConnectionError {
    /// A connection error for `address`: for a driver or test double that reports one on the
    /// core's behalf.
    #[must_use]
    pub fn new(
        node_id: i32,
        address: impl Into<String>,
        kind: std::io::ErrorKind,
        reason: impl Into<String>,
        established: bool,
    ) -> Self {
        ConnectionError {
            node_id,
            address: address.into(),
            kind,
            reason: reason.into(),
            established,
        }
    }
}

/// Why `send` refused a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendErrorReason {
    /// The buffer limits (`buffer_memory` or `buffer_max_records`) are reached; try again after
    /// deliveries have drained.
    #[error("buffer full")]
    Full,
    /// The record is larger than `max_request_size`; it can never be sent.
    #[error("record of {size} bytes exceeds max_request_size {max}")]
    RecordTooLarge {
        /// Its encoded size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// `close` was called.
    #[error("producer is closed")]
    Closed,
    /// A transactional producer takes records only inside an open transaction
    /// (`begin_transaction` called, and the transaction not failed: after an abortable error
    /// only `abort_transaction` is allowed).
    #[error("no open transaction (begin_transaction first, or abort the failed one)")]
    NoTransaction,
    /// The producer hit a fatal error.
    #[error("producer failed: {0}")]
    Fatal(ProduceError),
    /// An explicit partition that is negative, or not below the topic's partition count (when
    /// the topic's metadata is known; otherwise the record waits for it and, if the partition
    /// does not exist, fails with [`ProduceError::UnknownPartition`]).
    #[error("invalid partition {0}")]
    InvalidPartition(i32),
    /// The topic's name breaks Kafka's rules (see [`crate::check_topic_name`]): no broker would
    /// take it, and it is never asked for in Metadata.
    #[error("{0}")]
    InvalidTopic(InvalidTopicName),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `possibly_persisted` and `with_possibly_persisted` list the variants that say whether
    /// a record may have been written twice (once by `&`, once by `&mut`): a variant added to
    /// one list and not the other would make a report lie. The match below names every variant
    /// (no wildcard), so a new one does not compile until it is said here whether it carries
    /// the flag, and the two methods are then checked against that.
    #[test]
    fn every_error_that_says_possibly_persisted_reads_and_writes_the_same_flag() {
        let errors = [
            ProduceError::Broker {
                code: ErrorCode::NOT_ENOUGH_REPLICAS,
                message: None,
                possibly_persisted: false,
            },
            ProduceError::InvalidRecord {
                code: ErrorCode::INVALID_RECORD,
                batch_index: 0,
                message: None,
                possibly_persisted: false,
            },
            ProduceError::BatchRejected {
                code: ErrorCode::INVALID_RECORD,
                invalid_records: 1,
                message: None,
                possibly_persisted: false,
            },
            ProduceError::DeliveryTimeout {
                possibly_persisted: false,
                last_connection_error: None,
            },
            ProduceError::UnknownTopic,
            ProduceError::UnknownPartition {
                partition: 3,
                count: 1,
            },
            ProduceError::Refused(Box::new(SendErrorReason::Closed)),
            ProduceError::Authentication {
                error: crate::AuthError::BadServerSignature,
                possibly_persisted: false,
            },
            ProduceError::Closed,
            ProduceError::TransactionAborted,
            ProduceError::TransactionInDoubt,
            ProduceError::Compression("c".into()),
            ProduceError::BatchDecode("d".into()),
            ProduceError::Interceptor {
                message: "i".into(),
            },
            ProduceError::Partitioner(crate::PartitionerError::Failed("f".into())),
            ProduceError::Panicked {
                message: "p".into(),
                possibly_persisted: false,
            },
            ProduceError::Purged {
                possibly_persisted: false,
            },
            ProduceError::CloseTimedOut {
                possibly_persisted: false,
            },
        ];
        for e in errors {
            // `Ok`: the variant carries the flag; `Err(always)`: it does not, and always says that.
            let carries: Result<(), bool> = match &e {
                ProduceError::Broker { .. }
                | ProduceError::InvalidRecord { .. }
                | ProduceError::BatchRejected { .. }
                | ProduceError::DeliveryTimeout { .. }
                | ProduceError::Authentication { .. }
                | ProduceError::Panicked { .. }
                | ProduceError::Purged { .. }
                | ProduceError::CloseTimedOut { .. } => Ok(()),
                ProduceError::TransactionInDoubt => Err(true),
                ProduceError::UnknownTopic
                | ProduceError::UnknownPartition { .. }
                | ProduceError::Refused(_)
                | ProduceError::Closed
                | ProduceError::TransactionAborted
                | ProduceError::Compression(_)
                | ProduceError::BatchDecode(_)
                | ProduceError::Interceptor { .. }
                | ProduceError::Partitioner(_) => Err(false),
            };
            match carries {
                Ok(()) => {
                    assert!(!e.possibly_persisted(), "{e:?}");
                    let written = e.clone().with_possibly_persisted(true);
                    assert!(
                        written.possibly_persisted(),
                        "{e:?} keeps the flag it is given"
                    );
                    assert_eq!(written.with_possibly_persisted(false), e);
                }
                Err(always) => {
                    assert_eq!(e.possibly_persisted(), always, "{e:?}");
                    assert_eq!(e.clone().with_possibly_persisted(!always), e, "{e:?}");
                }
            }
        }
    }
}
