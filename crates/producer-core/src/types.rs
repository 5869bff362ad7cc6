//! The values that cross the producer's API: records in, outputs and delivery reports out.

use std::sync::Arc;

use bytes::Bytes;

use crate::record::Header;
use crate::topic_name::InvalidTopicName;
use crate::ErrorCode;

/// The bytes of one [`Output::Transmit`]: complete frames, in one or more pieces that go on
/// the connection one after the other. A Produce request is its header, its record batches
/// as the core holds them (shared, not copied) and the bytes between them; other requests
/// are one piece. Hand the pieces to a vectored write, or queue them one by one.
///
/// `Debug` shows the length and the number of pieces, never the bytes: a SaslAuthenticate
/// frame carries a PLAIN password or a bearer token. A frame that carries a credential is
/// also wiped when the last [`Bytes`] of it is dropped.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct WireBytes {
    pieces: Vec<Bytes>,
    len: usize,
}

impl std::fmt::Debug for WireBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireBytes")
            .field("len", &self.len)
            .field("pieces", &self.pieces.len())
            .finish()
    }
}

impl WireBytes {
    /// Pieces written in this order (empty ones are left out).
    pub fn from_pieces(pieces: impl IntoIterator<Item = Bytes>) -> Self {
        let pieces: Vec<Bytes> = pieces.into_iter().filter(|p| !p.is_empty()).collect();
        let len = pieces.iter().map(Bytes::len).sum();
        WireBytes { pieces, len }
    }

    /// One piece that holds a credential: its buffer is overwritten with zeros when the last
    /// [`Bytes`] sharing it is dropped (the driver's, once written). Give it a buffer that was
    /// never reallocated, or the earlier copies stay behind unwiped.
    pub(crate) fn wiped_on_drop(bytes: Vec<u8>) -> Self {
        WireBytes::from_pieces([Bytes::from_owner(zeroize::Zeroizing::new(bytes))])
    }

    /// The bytes in all pieces.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pieces, in the order they go on the connection.
    pub fn pieces(&self) -> &[Bytes] {
        &self.pieces
    }

    /// The pieces, in the order they go on the connection.
    pub fn into_pieces(self) -> Vec<Bytes> {
        self.pieces
    }

    /// All the bytes in one buffer: the piece itself when there is one, else a copy of them
    /// all. For code that wants the frames contiguous (tests, a simulated network); a driver
    /// writes [`WireBytes::pieces`] instead.
    pub fn to_contiguous(&self) -> Bytes {
        match self.pieces.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => {
                let mut all = Vec::with_capacity(self.len);
                for p in many {
                    all.extend_from_slice(p);
                }
                Bytes::from(all)
            }
        }
    }
}

impl From<Bytes> for WireBytes {
    fn from(bytes: Bytes) -> Self {
        WireBytes::from_pieces([bytes])
    }
}

impl From<Vec<u8>> for WireBytes {
    fn from(bytes: Vec<u8>) -> Self {
        WireBytes::from(Bytes::from(bytes))
    }
}

impl IntoIterator for WireBytes {
    type Item = Bytes;
    type IntoIter = std::vec::IntoIter<Bytes>;

    fn into_iter(self) -> Self::IntoIter {
        self.pieces.into_iter()
    }
}

/// One record to produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The topic. An `Arc<str>` so callers sending many records to one topic share one name.
    pub topic: Arc<str>,
    /// An explicit partition, or `None` to let the partitioner choose (murmur2 of the key,
    /// the adaptive sticky partition for null keys).
    pub partition: Option<i32>,
    /// The key, or null.
    pub key: Option<Bytes>,
    /// The value, or null.
    pub value: Option<Bytes>,
    /// Record headers.
    pub headers: Vec<Header>,
    /// The timestamp in milliseconds since the Unix epoch. The core never reads the clock: a
    /// record without one is written with -1 (no timestamp). The drivers fill in the wall clock.
    pub timestamp: Option<i64>,
}

impl Record {
    /// A record with a value and nothing else set.
    #[must_use]
    pub fn new(topic: impl Into<Arc<str>>, value: impl Into<Bytes>) -> Self {
        Record {
            topic: topic.into(),
            partition: None,
            key: None,
            value: Some(value.into()),
            headers: Vec::new(),
            timestamp: None,
        }
    }

    /// Sets the key.
    #[must_use = "the record is returned, not changed in place"]
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets an explicit partition.
    #[must_use = "the record is returned, not changed in place"]
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the timestamp (ms since the Unix epoch).
    #[must_use = "the record is returned, not changed in place"]
    pub fn with_timestamp(mut self, ms: i64) -> Self {
        self.timestamp = Some(ms);
        self
    }

    /// Adds a header.
    #[must_use = "the record is returned, not changed in place"]
    pub fn with_header(mut self, key: impl Into<String>, value: Option<Bytes>) -> Self {
        self.headers.push(Header {
            key: key.into(),
            value,
        });
        self
    }
}

/// Identifies one connection the core asked the driver to open. It carries a generation, so
/// events the driver reports for a connection that the core has since closed are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
}

impl ConnId {
    /// A number unique to this connection, for the driver's maps and tokens.
    pub fn as_u64(self) -> u64 {
        ((self.slot as u64) << 32) | self.generation as u64
    }
}

/// What the driver must do next, or a report for the application; see [`crate::Producer::poll_output`].
///
/// Exhaustive on purpose: a driver matches every variant, so an output added in a later
/// version (a SASL token request, a transaction result) is a compile error in the driver, not
/// an output silently dropped by a `_ => {}` arm. [`Event`], which is informational, stays
/// `#[non_exhaustive]`.
#[derive(Debug)]
pub enum Output<T> {
    /// Open a TCP connection to `host:port` and report the outcome with `handle_connected` or
    /// `handle_connect_failed`. Name resolution is the driver's job.
    Connect {
        /// The connection's handle.
        conn: ConnId,
        /// Host name or address.
        host: String,
        /// Port.
        port: u16,
    },
    /// Write these bytes, whole and in order, on the connection. They are complete frames,
    /// in one or more pieces (a Produce request's record batches are pieces of their own,
    /// not copied into the request).
    Transmit {
        /// The connection.
        conn: ConnId,
        /// The bytes to write.
        bytes: WireBytes,
    },
    /// Close the connection; no `handle_disconnected` is needed for it.
    Disconnect {
        /// The connection.
        conn: ConnId,
    },
    /// SASL OAUTHBEARER needs a token: get one from the application's token provider (it may
    /// block or await: the producer goes on meanwhile) and hand it over with
    /// [`crate::Producer::handle_token`]. Asked once at a time; connections wait for it, for
    /// `token_timeout` (`sasl.login.read.timeout.ms`) at most: then they fail to authenticate
    /// and back off, and the next connection that needs a token asks again, even while the
    /// driver still waits for the provider's first answer. Hand over every answer when it
    /// comes, late ones included: a late token is taken for the connections after it.
    TokenRequest,
    /// One record's delivery report.
    Delivery(Delivery<T>),
    /// A transactional operation (`init_transactions`, `send_offsets_to_transaction`,
    /// `commit_transaction`, `abort_transaction`) completed or failed: hand it to whoever
    /// waits for it.
    Transaction(crate::TransactionResult),
    /// Something an operator may want to know.
    Event(Event),
}

/// Notable changes of the producer's state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Metadata was refreshed.
    MetadataUpdated,
    /// A connection authenticated with SASL (`reauthentication`: again, on the same
    /// connection, before its session ended). `session_lifetime_ms` is what the broker gave (0:
    /// no limit).
    Authenticated {
        /// The broker, or -1 for a bootstrap connection.
        node_id: i32,
        /// Whether this was a re-authentication (KIP-368).
        reauthentication: bool,
        /// The session's lifetime in milliseconds, 0 when unlimited.
        session_lifetime_ms: i64,
    },
    /// A connection failed to authenticate. It is closed and retried after the reconnect
    /// backoff; the records buffered and not in flight fail with
    /// [`ProduceError::Authentication`].
    AuthenticationFailed {
        /// The broker, or -1 for a bootstrap connection.
        node_id: i32,
        /// Why.
        error: crate::AuthError,
    },
    /// SASL credentials went over a connection without TLS (`security.protocol`
    /// `SASL_PLAINTEXT`): PLAIN sends the password itself and OAUTHBEARER the bearer token,
    /// which anyone on the path can read and reuse; a SCRAM exchange lets them guess the
    /// password offline. Emitted once per producer, when its first connection starts the
    /// exchange (every later one sends the same credentials the same way). Use `SASL_SSL`.
    CredentialsInPlaintext {
        /// The broker of that first connection, or -1 for a bootstrap connection.
        node_id: i32,
        /// The mechanism.
        mechanism: crate::Mechanism,
    },
    /// A broker connection is ready (after ApiVersions, and authentication with SASL).
    BrokerReady {
        /// The broker, or -1 for a bootstrap connection.
        node_id: i32,
    },
    /// InitProducerId assigned a producer id and epoch (at start, or after the epochs of the
    /// previous id ran out). Per-partition epoch bumps are [`Event::SequenceReset`].
    ProducerId {
        /// The producer id.
        producer_id: i64,
        /// The epoch.
        epoch: i16,
    },
    /// A partition bumped its producer epoch and restarted its sequence numbers at 0 (after
    /// OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH, or a batch
    /// that failed after it was sent, which leaves a hole in the sequence). Its unacknowledged
    /// batches are resent under the new epoch.
    SequenceReset {
        /// The topic.
        topic: Arc<str>,
        /// The partition.
        partition: i32,
        /// The producer id.
        producer_id: i64,
        /// The partition's new epoch.
        epoch: i16,
    },
    /// A batch is being retried.
    Retry {
        /// Its topic.
        topic: Arc<str>,
        /// Its partition.
        partition: i32,
        /// The error that caused it (0 for a lost connection or a timeout).
        error: ErrorCode,
    },
    /// The producer hit a fatal error; every record fails, `send` refuses new ones.
    Fatal(ProduceError),
    /// A connection failed before it became ready (refused, timed out, not resolved, closed
    /// or refused authentication during its setup) while no other connection was up or being
    /// set up: no broker can be reached at the moment (librdkafka's `ALL_BROKERS_DOWN`). (A
    /// ready connection that is lost, an idle one the broker closed, is not such a failure:
    /// the reconnect that follows may be.) Emitted once per such
    /// episode, again only after some connection has become ready in between. The producer
    /// goes on retrying with reconnect backoff and records keep their delivery timeout; an
    /// application may stop early instead, above all when `cluster_reached` is false (the
    /// bootstrap addresses are wrong, closed or firewalled).
    AllBrokersDown {
        /// The failure that made it so.
        last_error: ConnectionError,
        /// Whether any connection of this producer was ever ready (false: the cluster was
        /// never reached).
        cluster_reached: bool,
    },
    /// The producer goes back to its bootstrap list (`metadata.recovery.strategy=rebootstrap`,
    /// KIP-899 / KIP-1102): its next Metadata request goes to a bootstrap address, and the
    /// cluster found there replaces the brokers it knew. Emitted once per episode.
    Rebootstrapping {
        /// What made it go back.
        reason: RebootstrapReason,
    },
    /// A broker's answer broke a rule of the protocol or one of the caps in
    /// [`crate::limits`], and what it names was not used: nothing the producer holds was
    /// changed by it, and no record fails because of it (records keep their delivery timeout,
    /// or `max.block.ms` while their topic's metadata is unknown).
    ///
    /// With `topic` set, only that topic's entry was refused: the topic keeps what the producer
    /// knew of it, and metadata is asked for again after the retry backoff. Without, the whole
    /// answer was refused and its connection closed (its requests go back to be sent again, as
    /// for any lost connection, and the reconnect backs off).
    AnswerRefused {
        /// The broker that answered, or -1 for a bootstrap connection.
        node_id: i32,
        /// The request it answered.
        api: crate::protocol::ApiKey,
        /// The topic whose entry was refused, or `None` for the whole answer.
        topic: Option<Arc<str>>,
        /// What was wrong.
        violation: Violation,
    },
    /// `close` completed: every record was reported and every connection closed.
    Closed,
    /// The application's code that a driver runs panicked: the panic was caught around that
    /// one call and the producer goes on. A delivery callback's report counts as handed over
    /// (it is not retried); a token provider's panic answers the core as a provider's error
    /// would; an interceptor's panic in `on_send` fails that record with
    /// [`ProduceError::Interceptor`], in `on_acknowledgement` leaves the report going on to the
    /// application. Emitted by the drivers, never by the core.
    CallbackPanicked {
        /// Which callback.
        callback: Callback,
        /// The panic's message.
        message: String,
    },
}

/// The application's code that a driver runs on the producer's behalf, as
/// [`Event::CallbackPanicked`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Callback {
    /// The delivery report callback (or a driver's sink of reports).
    Delivery,
    /// The event callback.
    Event,
    /// The OAUTHBEARER token provider.
    TokenProvider,
    /// An interceptor of the application's (a driver's `on_send` or `on_acknowledgement`
    /// hook).
    Interceptor,
}

impl std::fmt::Display for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Callback::Delivery => "delivery callback",
            Callback::Event => "event callback",
            Callback::TokenProvider => "OAUTHBEARER token provider",
            Callback::Interceptor => "interceptor",
        })
    }
}

/// What was wrong with an answer [`Event::AnswerRefused`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    /// More brokers than [`crate::limits::MAX_BROKERS`].
    #[error("{count} brokers, more than the {max} allowed")]
    TooManyBrokers {
        /// How many the answer listed.
        count: usize,
        /// The cap.
        max: usize,
    },
    /// More topics than [`crate::limits::MAX_TOPICS`].
    #[error("{count} topics, more than the {max} allowed")]
    TooManyTopics {
        /// How many the answer listed.
        count: usize,
        /// The cap.
        max: usize,
    },
    /// More partitions in one topic than [`crate::limits::MAX_PARTITIONS`].
    #[error("{count} partitions, more than the {max} allowed")]
    TooManyPartitions {
        /// How many the topic's entry listed.
        count: usize,
        /// The cap.
        max: usize,
    },
    /// A broker listed with a negative node id (node ids are 0 or more).
    #[error("broker with negative node id {0}")]
    NegativeNodeId(i32),
    /// A partition's leader below -1 (-1 means no leader; node ids are 0 or more).
    #[error("partition {partition} with invalid leader id {leader}")]
    InvalidLeader {
        /// The partition.
        partition: i32,
        /// The leader id given.
        leader: i32,
    },
    /// A partition index outside 0..`count`, where `count` is how many partitions the topic's
    /// entry listed: negative, or leaving a gap (a topic's partitions are 0..n-1).
    #[error("partition index {index} outside 0..{count}")]
    PartitionOutOfRange {
        /// The index given.
        index: i32,
        /// How many partitions the entry listed.
        count: usize,
    },
    /// A partition listed twice in one topic's entry.
    #[error("partition {0} listed twice")]
    DuplicatePartition(i32),
    /// The topic's id is another topic's (now, or before that topic was created again): Kafka
    /// gives each topic its own id, and Produce v13 names topics by id alone.
    #[error("topic id already names another topic")]
    TopicIdTaken,
}

/// Why the producer went back to its bootstrap list ([`Event::Rebootstrapping`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RebootstrapReason {
    /// No broker Metadata named could be connected to (each is backing off after a failed
    /// attempt) and none is connected or connecting.
    NoBrokerReachable,
    /// A broker answered Metadata with `REBOOTSTRAP_REQUIRED`.
    RebootstrapRequired,
    /// A wanted metadata refresh went unanswered for `metadata.recovery.rebootstrap.trigger.ms`.
    MetadataUnanswered,
}

/// The report for one record: the opaque value it was sent with, and its fate.
#[derive(Debug)]
#[non_exhaustive]
pub struct Delivery<T> {
    /// The value the record was sent with.
    pub opaque: T,
    /// Where it landed, or why it failed (with the record, to retry or dead-letter). The
    /// failure is boxed: it is rare and large (it carries the whole record), and keeping it out
    /// of line makes every report, and every [`Output`], a third of the size.
    pub result: Result<RecordMetadata, Box<DeliveryFailure>>,
}

impl<T> Delivery<T> {
    /// The same report carrying another opaque value: for a driver that wraps the caller's
    /// value in its own (a flush generation, a reply channel) and unwraps it before the
    /// report reaches the application.
    #[must_use]
    pub fn map_opaque<U>(self, f: impl FnOnce(T) -> U) -> Delivery<U> {
        Delivery {
            opaque: f(self.opaque),
            result: self.result,
        }
    }

    /// A success report: for a driver or a test double that reports a record on the core's
    /// behalf.
    #[must_use]
    pub fn succeeded(opaque: T, metadata: RecordMetadata) -> Self {
        Delivery {
            opaque,
            result: Ok(metadata),
        }
    }

    /// A failure report for `record`: for a driver that has to refuse a record the core never
    /// saw (its queue closed, the core refused it when the driver handed it over), so the
    /// application gets its one report with the record back.
    #[must_use]
    pub fn failed(opaque: T, error: ProduceError, record: Record) -> Self {
        Delivery {
            opaque,
            result: Err(Box::new(DeliveryFailure { error, record })),
        }
    }
}

/// Where a record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordMetadata {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The offset, or -1 when unknown (acks=0, or a duplicate the broker had already).
    pub offset: i64,
    /// The timestamp: the log-append time when the topic uses it, else the record's own.
    pub timestamp: i64,
    /// The record was written in a transaction, and the transaction committed (a
    /// transactional producer reports its records only once their transaction ended).
    pub committed: bool,
}

impl DeliveryFailure {
    /// A failure with the record handed back: for a driver that reports a record the core
    /// refused or never saw.
    #[must_use]
    pub fn new(error: ProduceError, record: Record) -> Box<Self> {
        Box::new(DeliveryFailure { error, record })
    }
}

impl RecordMetadata {
    /// Where a record landed: `offset` -1 when unknown, `timestamp` the log-append time or the
    /// record's own.
    #[must_use]
    pub fn new(topic: Arc<str>, partition: i32, offset: i64, timestamp: i64) -> Self {
        RecordMetadata {
            topic,
            partition,
            offset,
            timestamp,
            committed: false,
        }
    }
}

/// A record that could not be delivered, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeliveryFailure {
    /// Why.
    pub error: ProduceError,
    /// The record, handed back.
    pub record: Record,
}

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
    /// [`crate::Producer::send`] returns in its [`SendError`]. (A single record the *broker*
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
            } => *possibly_persisted,
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
            } => *possibly_persisted = possibly,
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

/// `send` refused a record; the record and its opaque value come back.
#[derive(Debug)]
pub struct SendError<T> {
    /// Why.
    pub reason: SendErrorReason,
    /// The record, handed back.
    pub record: Record,
    /// The opaque value, handed back.
    pub opaque: T,
}

impl<T> std::fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "record for topic {:?} refused: {}",
            self.record.topic, self.reason
        )
    }
}

impl<T: std::fmt::Debug> std::error::Error for SendError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.reason)
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
            ProduceError::Panicked {
                message: "p".into(),
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
                | ProduceError::Panicked { .. } => Ok(()),
                ProduceError::TransactionInDoubt => Err(true),
                ProduceError::UnknownTopic
                | ProduceError::UnknownPartition { .. }
                | ProduceError::Refused(_)
                | ProduceError::Closed
                | ProduceError::TransactionAborted
                | ProduceError::Compression(_)
                | ProduceError::BatchDecode(_)
                | ProduceError::Interceptor { .. } => Err(false),
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

    #[test]
    fn wire_bytes_keep_their_pieces_in_order_without_the_empty_ones() {
        let w = WireBytes::from_pieces([
            Bytes::from_static(b"ab"),
            Bytes::new(),
            Bytes::from_static(b"cde"),
        ]);
        assert_eq!(w.len(), 5);
        assert_eq!(w.pieces().len(), 2);
        assert_eq!(&w.to_contiguous()[..], b"abcde");
        let one = Bytes::from_static(b"xyz");
        let w = WireBytes::from(one.clone());
        assert_eq!(
            w.to_contiguous().as_ptr(),
            one.as_ptr(),
            "one piece is not copied"
        );
        assert!(WireBytes::from(Vec::new()).is_empty());
        assert_eq!(w.into_iter().collect::<Vec<_>>(), [one]);
    }
}
