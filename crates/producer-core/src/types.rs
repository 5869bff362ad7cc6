//! The values that cross the producer's API: records in, outputs and delivery reports out.

use std::sync::Arc;

use bytes::Bytes;

pub use crate::errors::{ConnectionError, ProduceError, SendErrorReason};
use crate::record::Header;
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
    /// An explicit partition, or `None` to let the partitioner choose (the application's
    /// [`crate::Partitioner`] when one is set; else murmur2 of the key, the adaptive sticky
    /// partition for null keys).
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
    /// The partitions of a topic asked for with [`crate::Producer::request_partitions`] are
    /// known (at once when they were): [`crate::Producer::partitions`] gives them now.
    /// Emitted once per request that was waiting.
    PartitionsKnown {
        /// The topic.
        topic: Arc<str>,
        /// Its partition count.
        count: u32,
    },
    /// The partitions of a topic asked for with [`crate::Producer::request_partitions`] are
    /// not to be had: the cluster says the topic may not be used (`error` is
    /// [`ProduceError::Broker`] with the topic's error code), or `max_block` passed without
    /// its metadata ([`ProduceError::UnknownTopic`] when the cluster answered without it,
    /// [`ProduceError::DeliveryTimeout`] when no broker was reached), or the producer is
    /// closing or failed ([`ProduceError::Closed`], the fatal error).
    PartitionsUnavailable {
        /// The topic.
        topic: Arc<str>,
        /// Why.
        error: ProduceError,
    },
    /// `close` completed: every record was reported and every connection closed.
    Closed,
    /// The flush that [`crate::Producer::flush_within`] started completed: every record
    /// accepted is acknowledged (reported, or, in a transaction, held for its end). Emitted
    /// once per pending `flush_within`, after the reports that completed it.
    FlushCompleted,
    /// [`crate::Producer::flush_within`]'s deadline passed before every record was
    /// acknowledged. Nothing was cancelled: the records go on (they keep their delivery
    /// timeout) and are reported as usual.
    FlushTimedOut {
        /// Records accepted and not acknowledged at the deadline
        /// ([`crate::Producer::unacknowledged_records`]).
        unacknowledged: usize,
    },
    /// [`crate::Producer::close_within`]'s deadline passed before the close completed: the
    /// records still held were ended then (their reports come before this event), and
    /// [`Event::Closed`] follows at once. Not emitted when the close completed in time.
    CloseDeadlineReached {
        /// Records never sent, reported with [`ProduceError::Purged`] (`possibly_persisted`
        /// false).
        purged: usize,
        /// Records in a sent request or waiting to be sent again, reported with
        /// [`ProduceError::CloseTimedOut`] (`possibly_persisted` true).
        timed_out: usize,
    },
    /// The application's code that a driver runs panicked: the panic was caught around that
    /// one call and the producer goes on. A delivery callback's report counts as handed over
    /// (it is not retried); a token provider's panic answers the core as a provider's error
    /// would; an interceptor's panic in `on_send` fails that record with
    /// [`ProduceError::Interceptor`], in `on_acknowledgement` leaves the report going on to the
    /// application. Emitted by the drivers, and by the core for the application's
    /// [`crate::Partitioner`] (which runs inside it: the record it routed fails with
    /// [`ProduceError::Partitioner`]).
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
    /// The application's [`crate::Partitioner`] (run by the core: the record it was routing
    /// fails with [`ProduceError::Partitioner`]).
    Partitioner,
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
            Callback::Partitioner => "partitioner",
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

#[cfg(test)]
mod tests {
    use super::*;

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
