//! The values of the transactional API: what [`crate::Transactions::send_offsets`]
//! takes, what each operation answers with ([`TransactionResult`] in
//! [`crate::Output::Transaction`]), and why an operation fails ([`TransactionError`]).
//!
//! A transactional producer (one with [`crate::ConfigBuilder::transactional_id`]) runs
//! `init_transactions` once, then, for each transaction, `begin_transaction`, `send` records
//! (and `send_offsets_to_transaction` for a consume-transform-produce loop), and
//! `commit_transaction` or `abort_transaction`. Records are reported only when their
//! transaction ends: delivered ([`crate::RecordMetadata::committed`]) after the commit, failed
//! with [`crate::ProduceError::TransactionAborted`] (record handed back) after an abort.
//!
//! Every operation that completes with a [`TransactionResult`] is bounded by `max.block.ms`
//! ([`crate::Config::max_block`]): past it, it completes with
//! [`TransactionError::OperationTimedOut`] and goes on; the same operation called again waits
//! for it. What may be called in each state:
//!
//! | after | allowed |
//! | --- | --- |
//! | an operation's call, until its result | nothing else ([`TransactionError::InProgress`]) |
//! | its [`TransactionError::OperationTimedOut`] | the same operation again (send offsets: with the same offsets and group), which gets the result; every other: `InProgress` |
//! | the result, claimed | what the [`TransactionState`] allows |

use crate::ErrorCode;

/// A consumer group's state as the offsets of a transaction are committed for it (KIP-447):
/// the group coordinator checks the generation and member, so a consumer that lost its
/// partitions cannot commit offsets for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMetadata {
    /// The group id.
    pub group_id: String,
    /// The group's generation, or -1 for a group without members (offsets committed by a
    /// consumer that assigns its partitions itself).
    pub generation_id: i32,
    /// The member id within the generation ("" with generation -1).
    pub member_id: String,
    /// The static member's instance id, if any.
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// The metadata of a group without members (generation -1, member ""): the coordinator
    /// then checks nothing but the transaction.
    #[must_use]
    pub fn new(group_id: impl Into<String>) -> Self {
        ConsumerGroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// One partition's offset to commit with a transaction: the offset of the next record to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetToCommit {
    /// The topic read.
    pub topic: String,
    /// The partition read.
    pub partition: i32,
    /// The next offset to read (the last record processed, plus one).
    pub offset: i64,
    /// Metadata stored with the offset.
    pub metadata: Option<String>,
}

impl OffsetToCommit {
    /// The offset `offset` of `topic`/`partition`, without metadata.
    #[must_use]
    pub fn new(topic: impl Into<String>, partition: i32, offset: i64) -> Self {
        OffsetToCommit {
            topic: topic.into(),
            partition,
            offset,
            metadata: None,
        }
    }
}

/// A transactional operation, as named in its [`TransactionResult`] and errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransactionOperation {
    /// [`crate::Transactions::init`].
    Init,
    /// [`crate::Transactions::begin`].
    Begin,
    /// [`crate::Transactions::send_offsets`].
    SendOffsets,
    /// [`crate::Transactions::commit`].
    Commit,
    /// [`crate::Transactions::abort`].
    Abort,
}

impl std::fmt::Display for TransactionOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TransactionOperation::Init => "init_transactions",
            TransactionOperation::Begin => "begin_transaction",
            TransactionOperation::SendOffsets => "send_offsets_to_transaction",
            TransactionOperation::Commit => "commit_transaction",
            TransactionOperation::Abort => "abort_transaction",
        })
    }
}

/// Where a transactional producer stands ([`crate::Producer::transaction_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransactionState {
    /// `init_transactions` not called yet (or the producer is not transactional).
    Uninitialized,
    /// `init_transactions` under way: finding the coordinator, getting the producer id.
    Initializing,
    /// Initialized, no transaction open: `begin_transaction` may be called.
    Ready,
    /// A transaction is open: records and offsets may be sent.
    InTransaction,
    /// `commit_transaction` under way.
    Committing,
    /// `abort_transaction` under way.
    Aborting,
    /// The open transaction failed (a record failed, a broker answered an abortable error):
    /// only `abort_transaction` is allowed.
    AbortableError,
    /// The producer failed for good (fenced, not authorized, ...): nothing more is allowed.
    FatalError,
}

/// Why a transactional operation was refused or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransactionError {
    /// The producer has no `transactional.id`.
    #[error("the producer is not transactional (no transactional.id)")]
    NotTransactional,
    /// The operation is not allowed in the producer's state (a commit with no transaction
    /// open, a second `init_transactions`, a commit after an abortable error).
    #[error("{operation} is not allowed while the transaction state is {state:?}")]
    InvalidState {
        /// The operation refused.
        operation: TransactionOperation,
        /// The state it found.
        state: TransactionState,
    },
    /// Another operation has not completed yet (each completes with its
    /// [`TransactionResult`]), or its call timed out
    /// ([`TransactionError::OperationTimedOut`]) and it has not been called again since.
    #[error("{operation} is still under way")]
    InProgress {
        /// The operation under way.
        operation: TransactionOperation,
    },
    /// The open transaction cannot be committed: a record of it failed, or a broker answered
    /// an abortable error. Abort it (its records then fail with
    /// [`crate::ProduceError::TransactionAborted`]) and begin the next.
    #[error("the transaction must be aborted: {code}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Abortable {
        /// The error that made the transaction abortable (`TRANSACTION_ABORTABLE`, a
        /// record's failure code, `REQUEST_TIMED_OUT` for a delivery timeout, ...).
        code: ErrorCode,
        /// What failed.
        message: Option<String>,
    },
    /// The transaction ran past `transaction.timeout.ms` before its commit began: the
    /// coordinator aborts it. Abort it here too.
    #[error("the transaction ran past transaction.timeout.ms ({timeout_ms} ms)")]
    TimedOut {
        /// The configured timeout.
        timeout_ms: u64,
    },
    /// The producer failed for good: another producer with the same transactional id fenced
    /// it (`PRODUCER_FENCED`, `INVALID_PRODUCER_EPOCH`), it is not authorized
    /// (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`), or the coordinator found the transaction in
    /// an impossible state (`INVALID_TXN_STATE`). Every record is handed back; close the
    /// producer.
    #[error("the producer failed for good: {code}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Fatal {
        /// The broker's error code.
        code: ErrorCode,
        /// Which request got it, or the broker's message.
        message: Option<String>,
    },
    /// The producer was closed before the operation completed.
    #[error("producer closed")]
    Closed,
    /// [`crate::Producer::purge`] removed records of the open transaction and so aborted it:
    /// a commit or `send_offsets` under way then fails with this, and so does every later
    /// `commit` or `send_offsets` call until the next `begin`. Its records fail with
    /// [`crate::ProduceError::Purged`] (those removed) or
    /// [`crate::ProduceError::TransactionAborted`] (the rest). Call `abort` (it completes when
    /// the purge's abort does) or `begin` the next transaction once it has.
    #[error("the transaction was aborted by a purge")]
    Purged,
    /// The operation did not complete within `max.block.ms` of its call (Java's
    /// `TimeoutException`). It was not cancelled: the producer goes on with it. Call the same
    /// operation again to wait for it once more: that call completes with the operation's
    /// result (at once when it completed meanwhile), or with this error again after another
    /// `max.block.ms`. Until then every other operation is refused with
    /// [`TransactionError::InProgress`] naming this one (for
    /// [`crate::Transactions::send_offsets`], the call again must carry the same
    /// offsets and group). See [`crate::Transactions::commit`].
    #[error("{operation} did not complete within max.block.ms ({max_block_ms} ms) and goes on: call it again to wait for its result")]
    OperationTimedOut {
        /// The operation that goes on.
        operation: TransactionOperation,
        /// The configured `max.block.ms`.
        max_block_ms: u64,
    },
    /// `send_offsets_to_transaction` was given something its requests cannot carry: a group
    /// id, member id, group instance id or offset metadata longer than
    /// [`crate::Config::MAX_ID_LEN`] bytes (they go as INT16-length strings), or a topic name
    /// outside Kafka's rules. Nothing was sent; the transaction goes on.
    #[error("send_offsets_to_transaction: {0}")]
    InvalidOffsets(InvalidOffsets),
}

/// What [`TransactionError::InvalidOffsets`] found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidOffsets {
    /// A string longer than its INT16 length can say.
    #[error("{field} is {len} bytes long: at most {max} are taken", max = crate::Config::MAX_ID_LEN)]
    TooLong {
        /// `group_id`, `member_id`, `group_instance_id` or `metadata`.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// A topic name outside Kafka's rules.
    #[error("{0}")]
    Topic(crate::topic_name::InvalidTopicName),
}

impl InvalidOffsets {
    /// Checks what [`crate::Transactions::send_offsets`] was given, before anything
    /// of it is sent.
    pub(crate) fn check(
        offsets: &[OffsetToCommit],
        group: &ConsumerGroupMetadata,
    ) -> Result<(), InvalidOffsets> {
        let strings = [
            ("group_id", Some(&group.group_id)),
            ("member_id", Some(&group.member_id)),
            ("group_instance_id", group.group_instance_id.as_ref()),
        ]
        .into_iter()
        .chain(offsets.iter().map(|o| ("metadata", o.metadata.as_ref())));
        for (field, s) in strings {
            if let Some(len) = s
                .map(String::len)
                .filter(|&l| l > crate::Config::MAX_ID_LEN)
            {
                return Err(InvalidOffsets::TooLong { field, len });
            }
        }
        for o in offsets {
            crate::topic_name::check_topic_name(&o.topic).map_err(InvalidOffsets::Topic)?;
        }
        Ok(())
    }
}

/// The completion of a transactional operation that was accepted: emitted as
/// [`crate::Output::Transaction`] once, when it succeeded or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "the application waits for this result"]
pub struct TransactionResult {
    /// The operation that completed.
    pub operation: TransactionOperation,
    /// Its outcome.
    pub result: Result<(), TransactionError>,
}
