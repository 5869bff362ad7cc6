//! A deterministic, seeded, virtual-time simulated Kafka cluster, plus the network between one
//! client and its brokers.
//!
//! Use it to test a Kafka producer (or any Kafka client speaking ApiVersions, Metadata,
//! InitProducerId and Produce) without sockets, threads or wall-clock time: the client writes
//! request bytes into a [`SimCluster`], the simulated brokers decode them with the independent
//! [`kafka-protocol`](https://docs.rs/kafka-protocol) codec, apply the broker's real rules
//! (leadership, CRC-32C, the five-batch idempotence window, sequence and epoch checks) and send
//! response bytes back, each direction delayed by a seeded random latency.
//!
//! # Time
//! Every method that can change state takes `now: Instant`. The simulator never reads the clock:
//! the caller decides how time moves (typically by jumping straight to
//! [`SimCluster::next_event_time`]). A `now` earlier than one already seen is treated as the
//! latest time seen. With the same [`SimConfig::seed`] and the same sequence of calls, the
//! simulator produces exactly the same events.
//!
//! # Network model
//! * [`SimCluster::connect`] completes (or fails) one one-way latency later.
//! * Bytes written by the client arrive at the broker after a latency; per connection and
//!   direction arrival times never decrease (TCP: in order, no loss, no duplication).
//! * A broker handles a request at the instant its last byte arrives; the response leaves at that
//!   instant and arrives one latency later (plus any [`SimCluster::delay_responses`] delay).
//!   Responses on one connection arrive in request order.
//! * [`SimCluster::poll_event`] processes everything due (broker side first) and returns the next
//!   client-side event due at or before `now`, in time order.
//!
//! # Broker rules
//! See [`SimCluster`] for the list. Requests for an API or version the broker does not advertise
//! (other than ApiVersions) make the broker close the connection, as a real Kafka broker does; the
//! reason is recorded in [`SimCluster::violations`].
//!
//! # Example
//! ```
//! use producer_sim::{NetEvent, SimCluster, SimConfig};
//! use std::time::Instant;
//!
//! let t0 = Instant::now();
//! let mut sim = SimCluster::new(SimConfig::with_brokers(3, 42), t0);
//! sim.create_topic("events", 6).unwrap();
//! let (host, port) = sim.bootstrap()[0].clone();
//! let conn = sim.connect(t0, &host, port);
//! let t1 = sim.next_event_time().unwrap();
//! assert_eq!(sim.poll_event(t1), Some(NetEvent::Connected(conn)));
//! ```

#![warn(missing_docs)]

mod broker;
pub mod drive;
mod rng;
mod wire;

use bytes::Bytes;
use rng::Rng;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// API key of Produce.
pub const API_PRODUCE: i16 = 0;
/// API key of Metadata.
pub const API_METADATA: i16 = 3;
/// API key of ApiVersions.
pub const API_API_VERSIONS: i16 = 18;
/// API key of InitProducerId.
pub const API_INIT_PRODUCER_ID: i16 = 22;

/// The API ranges a broker advertises when [`BrokerSpec::api_versions`] is `None`:
/// `(api_key, min_version, max_version)`.
pub const DEFAULT_API_VERSIONS: &[(i16, i16, i16)] = &[
    (API_PRODUCE, 3, 11),
    (API_METADATA, 0, 12),
    (API_API_VERSIONS, 0, 3),
    (API_INIT_PRODUCER_ID, 0, 4),
];

/// The versions the simulator itself can serve, per API: `(api_key, min, max)`. A broker may be
/// configured to advertise more; a request beyond these closes the connection and records a
/// violation.
pub const SIM_CAPABILITIES: &[(i16, i16, i16)] = &[
    (API_PRODUCE, 3, 13),
    (API_METADATA, 0, 13),
    (API_API_VERSIONS, 0, 4),
    (API_INIT_PRODUCER_ID, 0, 5),
];

/// Identifies one simulated client connection. Opaque: compare it, hash it, print it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(u64);

impl ConnId {
    /// The raw number behind this id (unique within one [`SimCluster`]).
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

/// A client-side network event, returned by [`SimCluster::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetEvent {
    /// The connection started by [`SimCluster::connect`] is established; writes may follow.
    Connected(ConnId),
    /// The connection could not be established: no broker listens on that address, or it is
    /// stopped (or was stopped before the connection completed). The id is dead.
    ConnectFailed(ConnId),
    /// Bytes from the broker, in order. Response frames may be split across several `Data`
    /// events when [`SimConfig::fragment_responses`] is set.
    Data(ConnId, Bytes),
    /// The broker side closed the connection (fault injection, broker stop, malformed request,
    /// acks=0 error, random drop). Bytes still in flight were lost. The id is dead.
    Closed(ConnId),
}

/// One broker of the simulated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerSpec {
    /// The broker's node id.
    pub node_id: i32,
    /// Host name clients connect to (matched exactly by [`SimCluster::connect`]).
    pub host: String,
    /// Port clients connect to.
    pub port: u16,
    /// Advertised `(api_key, min_version, max_version)` ranges; `None` means
    /// [`DEFAULT_API_VERSIONS`].
    pub api_versions: Option<Vec<(i16, i16, i16)>>,
}

impl BrokerSpec {
    /// A broker with the default API ranges.
    pub fn new(node_id: i32, host: impl Into<String>, port: u16) -> Self {
        BrokerSpec {
            node_id,
            host: host.into(),
            port,
            api_versions: None,
        }
    }
}

/// Configuration of a [`SimCluster`].
///
/// Build one with [`SimConfig::with_brokers`] (or `Default`) and adjust the public fields.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Seed of every random choice (latencies, random drops, response fragmentation, topic ids).
    pub seed: u64,
    /// The brokers. Node ids must be unique (later duplicates are ignored).
    pub brokers: Vec<BrokerSpec>,
    /// `(min, max)` one-way network latency; each transfer draws uniformly in between.
    pub latency: (Duration, Duration),
    /// Probability, per request a broker receives, that the connection is reset. Half of the
    /// resets happen after the request was processed (its effects persist, the response is lost),
    /// half before. 0 disables it.
    pub drop_probability: f64,
    /// Largest request frame a broker accepts (Kafka's `socket.request.max.bytes`, 100 MiB by
    /// default). A larger size prefix closes the connection.
    pub max_frame_size: usize,
    /// Largest size a compressed batch may decompress to; above it the batch is CORRUPT_MESSAGE.
    pub max_decompressed_size: usize,
    /// When true, every response frame is delivered as 1 to 3 `Data` events split at random
    /// points, to exercise the client's frame reassembly.
    pub fragment_responses: bool,
    /// The cluster id reported by Metadata v2+.
    pub cluster_id: String,
}

impl SimConfig {
    /// `n` brokers with node ids `1..=n`, hosts `broker-<id>`, port 9092, default API ranges,
    /// latency 1-5 ms, no random drops.
    pub fn with_brokers(n: usize, seed: u64) -> Self {
        let brokers = (1..=n)
            .map(|i| {
                let id = i32::try_from(i).unwrap_or(i32::MAX);
                BrokerSpec::new(id, format!("broker-{id}"), 9092)
            })
            .collect();
        SimConfig {
            seed,
            brokers,
            latency: (Duration::from_millis(1), Duration::from_millis(5)),
            drop_probability: 0.0,
            max_frame_size: 100 * 1024 * 1024,
            max_decompressed_size: 128 * 1024 * 1024,
            fragment_responses: false,
            cluster_id: "sim-cluster".to_string(),
        }
    }
}

impl Default for SimConfig {
    /// One broker (`broker-1:9092`), seed 0.
    fn default() -> Self {
        SimConfig::with_brokers(1, 0)
    }
}

/// An error response to inject, see [`SimCluster::inject_error`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedError {
    /// The API whose responses are affected ([`API_PRODUCE`], [`API_METADATA`],
    /// [`API_INIT_PRODUCER_ID`], [`API_API_VERSIONS`]).
    pub api_key: i16,
    /// Only this topic (Produce, Metadata); `None` matches every topic.
    pub topic: Option<String>,
    /// Only this partition (Produce, Metadata); `None` matches every partition.
    pub partition: Option<i32>,
    /// The error code to answer with.
    pub error_code: i16,
    /// How many matches to affect: Produce partitions, Metadata topics (or partitions when
    /// `partition` is set), or whole responses for the other APIs.
    pub count: u32,
    /// Produce only: when true the batch is still appended (if it passes every check) before
    /// the error is returned, modelling NOT_ENOUGH_REPLICAS_AFTER_APPEND or a REQUEST_TIMED_OUT
    /// after the write. When false nothing is appended and no producer state changes.
    pub persist: bool,
}

/// One record in a partition log, see [`SimCluster::log`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRecord {
    /// Offset in the partition (0, 1, 2, ... per partition).
    pub offset: i64,
    /// Record key.
    pub key: Option<Bytes>,
    /// Record value.
    pub value: Option<Bytes>,
    /// Record headers, in wire order (duplicates kept).
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Record timestamp (batch base timestamp + delta).
    pub timestamp: i64,
    /// Producer id of the batch (-1 when not idempotent).
    pub producer_id: i64,
    /// Producer epoch of the batch.
    pub producer_epoch: i16,
    /// Sequence number of this record (base sequence + index, wrapping at `i32::MAX` to 0);
    /// -1 when not idempotent.
    pub sequence: i32,
    /// Offset of the first record of the batch this record came in.
    pub batch_base_offset: i64,
}

/// What one partition of a Produce request carried and how it was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartitionRecord {
    /// Topic name (empty when a v13 topic id was unknown).
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// RecordsCount from the batch header (0 when it could not be read).
    pub record_count: i32,
    /// ProducerId from the batch header (-1 when it could not be read).
    pub producer_id: i64,
    /// ProducerEpoch from the batch header (-1 when it could not be read).
    pub producer_epoch: i16,
    /// BaseSequence from the batch header (-1 when it could not be read).
    pub base_sequence: i32,
    /// Error code returned for this partition (0 = success).
    pub error_code: i16,
    /// Base offset returned (-1 on error); for a duplicate, the original offset.
    pub base_offset: i64,
    /// True when the batch was appended to the log by this request.
    pub appended: bool,
}

/// One request a broker received, see [`SimCluster::request_log`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// When the broker handled it.
    pub at: Instant,
    /// Broker that received it.
    pub broker_id: i32,
    /// Connection it came on.
    pub conn: ConnId,
    /// API key from the request header.
    pub api_key: i16,
    /// API version from the request header.
    pub api_version: i16,
    /// Correlation id from the request header.
    pub correlation_id: i32,
    /// Produce only: the acks field.
    pub acks: Option<i16>,
    /// Produce only: the partitions carried, in request order.
    pub produce: Vec<ProducePartitionRecord>,
    /// Top-level error code of the response (ApiVersions, InitProducerId; 0 otherwise).
    pub error_code: i16,
    /// True when a response was queued towards the client (false for acks=0, dropped
    /// connections and malformed requests).
    pub responded: bool,
}

/// Errors of the fault-injection and setup methods (misuse by the test, never by the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The topic does not exist (returned by methods that take a topic name).
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),
    /// The topic exists but has no such partition.
    #[error("topic {topic:?} has no partition {partition}")]
    UnknownPartition {
        /// Topic name.
        topic: String,
        /// Partition index asked for.
        partition: i32,
    },
    /// No broker has this node id.
    #[error("unknown broker {0}")]
    UnknownBroker(i32),
    /// [`SimCluster::create_topic`] was called for an existing topic.
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    /// [`SimCluster::create_topic`] was called with a partition count below 1, or the cluster
    /// has no broker.
    #[error("cannot create a topic with {0} partitions on this cluster")]
    InvalidPartitionCount(i32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stall {
    None,
    Until(Instant),
    Indefinite,
}

#[derive(Debug)]
struct Broker {
    spec: BrokerSpec,
    api_versions: Vec<(i16, i16, i16)>,
    running: bool,
    stall: Stall,
    delay: Option<(Duration, u32)>,
    throttle: Option<(i32, u32)>,
}

#[derive(Debug, Clone)]
struct BatchMeta {
    first_seq: i32,
    last_seq: i32,
    base_offset: i64,
    #[allow(dead_code)]
    timestamp: i64,
}

#[derive(Debug, Clone)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
}

#[derive(Debug)]
struct Partition {
    leader: i32,
    leader_epoch: i32,
    log: Vec<LoggedRecord>,
    producers: BTreeMap<i64, ProducerEntry>,
}

#[derive(Debug)]
struct Topic {
    id: uuid::Uuid,
    partitions: Vec<Partition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientView {
    Connecting,
    Open,
    Closed,
}

#[derive(Debug)]
struct Pending<T> {
    at: Instant,
    seq: u64,
    item: T,
}

#[derive(Debug)]
struct Conn {
    /// Broker node id, or `None` when the address matched no broker.
    broker: Option<i32>,
    view: ClientView,
    /// The broker still reads from / writes to this connection.
    broker_open: bool,
    /// The client called `close`.
    client_closed: bool,
    to_broker: VecDeque<Pending<Bytes>>,
    to_client: VecDeque<Pending<NetEvent>>,
    last_to_broker: Instant,
    last_to_client: Instant,
    inbuf: Vec<u8>,
}

/// The simulated cluster and network. See the crate documentation for the model.
///
/// Broker rules enforced:
/// * **ApiVersions** (v0-4 within the configured range): the configured ranges; a version above
///   the broker's max gets a v0-encoded UNSUPPORTED_VERSION (35) response carrying the ranges.
///   v3+ client software name/version must match Kafka's pattern, else INVALID_REQUEST (42).
///   The response header is always v0.
/// * **Any other API/version** outside the configured ranges (or outside [`SIM_CAPABILITIES`]):
///   the broker closes the connection (Kafka's behaviour) and records a violation.
/// * **Metadata**: running brokers, requested topics (all when null; v0: when empty),
///   UNKNOWN_TOPIC_OR_PARTITION (3) for unknown names (no auto-creation), UNKNOWN_TOPIC_ID (100)
///   for unknown ids, leader id and leader epoch per partition. A stopped leader stays leader
///   until [`SimCluster::move_leader`].
/// * **InitProducerId**: new ids 1000, 1001, ... with epoch 0. At v3+ with a producer id and
///   epoch it allocated and whose epoch is current: the same id with epoch + 1 (a new id when the
///   epoch would reach `i16::MAX`); a stale epoch gets PRODUCER_FENCED (90, v4+) or
///   INVALID_PRODUCER_EPOCH (47); an id it never allocated gets INVALID_PRODUCER_ID_MAPPING (49);
///   only one of id/epoch set gets INVALID_REQUEST (42). (A real broker hands a
///   non-transactional producer a fresh id instead; the bump models the transactional path.)
/// * **Produce** (v3-13): acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS 21 everywhere).
///   Per partition: unknown topic/partition 3 (unknown id 100 at v13); the same partition twice
///   in one request 42; not the leader NOT_LEADER_OR_FOLLOWER (6) with `CurrentLeader` and
///   `NodeEndpoints` at v10+; transactional id or transactional batch INVALID_TXN_STATE (48, no
///   transactions here); zstd below v7 UNSUPPORTED_COMPRESSION_TYPE (76); then exactly one
///   RecordBatch, magic 2, CRC-32C over `[21..]`, a known codec, `LastOffsetDelta ==
///   RecordsCount - 1`, no control batch, an idempotent batch with epoch and sequence >= 0, and
///   records that decode exactly (sizes, offset deltas 0..n-1, headers) through both a strict
///   walker and kafka-protocol's `RecordBatchDecoder`; any failure is CORRUPT_MESSAGE (2).
///   Idempotence per (partition, producer id): current epoch plus the last 5 batches;
///   epoch < current 47; epoch > current requires first sequence 0 (else
///   OUT_OF_ORDER_SEQUENCE_NUMBER 45) and resets the window; no state accepts any sequence; same
///   epoch: an exact (first, last) match is a duplicate answered with the original base offset and
///   not appended, `first == last + 1` (wrapping at `i32::MAX`) appends, anything else is 45.
///   acks=0: nothing is sent back, and any partition error makes the broker close the
///   connection (Kafka's behaviour).
#[derive(Debug)]
pub struct SimCluster {
    cfg: SimConfig,
    rng: Rng,
    now: Instant,
    next_seq: u64,
    next_conn: u64,
    next_producer_id: i64,
    /// Producer id -> latest epoch handed out.
    producer_ids: BTreeMap<i64, i16>,
    brokers: BTreeMap<i32, Broker>,
    topics: BTreeMap<String, Topic>,
    conns: BTreeMap<u64, Conn>,
    injections: Vec<InjectedError>,
    request_log: Vec<RequestRecord>,
    violations: Vec<String>,
}

impl SimCluster {
    /// Creates the cluster at virtual time `now`, every broker running, no topics.
    pub fn new(config: SimConfig, now: Instant) -> SimCluster {
        let mut brokers = BTreeMap::new();
        for spec in &config.brokers {
            let api_versions = spec
                .api_versions
                .clone()
                .unwrap_or_else(|| DEFAULT_API_VERSIONS.to_vec());
            brokers.entry(spec.node_id).or_insert(Broker {
                spec: spec.clone(),
                api_versions,
                running: true,
                stall: Stall::None,
                delay: None,
                throttle: None,
            });
        }
        SimCluster {
            rng: Rng::new(config.seed),
            cfg: config,
            now,
            next_seq: 0,
            next_conn: 1,
            next_producer_id: 1000,
            producer_ids: BTreeMap::new(),
            brokers,
            topics: BTreeMap::new(),
            conns: BTreeMap::new(),
            injections: Vec::new(),
            request_log: Vec::new(),
            violations: Vec::new(),
        }
    }

    // ----- setup and inspection -------------------------------------------------------------

    /// Creates a topic with `partitions` partitions, leader epoch 0. Partition `p` is led by the
    /// `(p mod n)`-th broker in ascending node-id order.
    pub fn create_topic(&mut self, name: &str, partitions: i32) -> Result<(), SimError> {
        if self.topics.contains_key(name) {
            return Err(SimError::TopicExists(name.to_string()));
        }
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        if partitions < 1 || ids.is_empty() {
            return Err(SimError::InvalidPartitionCount(partitions));
        }
        let parts = (0..partitions)
            .map(|p| Partition {
                leader: ids[(p as usize) % ids.len()],
                leader_epoch: 0,
                log: Vec::new(),
                producers: BTreeMap::new(),
            })
            .collect();
        // Topic id: derived from the seed and the name, without disturbing the main RNG stream.
        let mut r = Rng::new(self.cfg.seed ^ u64::from(crc32c::crc32c(name.as_bytes())) << 17);
        let id = uuid::Uuid::from_u64_pair(r.next_u64(), r.next_u64() | 1);
        self.topics.insert(
            name.to_string(),
            Topic {
                id,
                partitions: parts,
            },
        );
        Ok(())
    }

    /// `(host, port)` of every configured broker, in node-id order (running or not).
    pub fn bootstrap(&self) -> Vec<(String, u16)> {
        self.brokers
            .values()
            .map(|b| (b.spec.host.clone(), b.spec.port))
            .collect()
    }

    /// The records of a partition log (empty for an unknown topic or partition).
    pub fn log(&self, topic: &str, partition: i32) -> &[LoggedRecord] {
        self.partition(topic, partition)
            .map(|p| p.log.as_slice())
            .unwrap_or(&[])
    }

    /// Every request the brokers handled (or dropped), in handling order.
    pub fn request_log(&self) -> &[RequestRecord] {
        &self.request_log
    }

    /// Protocol violations the brokers saw: malformed frames, bad CRCs, corrupt batches,
    /// unsupported versions, producer ids never allocated, and so on. A correct client leaves
    /// this empty.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// `(leader id, leader epoch)` of a partition.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<(i32, i32)> {
        self.partition(topic, partition)
            .map(|p| (p.leader, p.leader_epoch))
    }

    /// The topic id reported by Metadata v10+ (and used by Produce v13), as a `u128`.
    pub fn topic_id(&self, topic: &str) -> Option<u128> {
        self.topics.get(topic).map(|t| t.id.as_u128())
    }

    /// The latest virtual time the simulator has seen.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Whether the broker is running (`None` for an unknown id).
    pub fn broker_running(&self, broker_id: i32) -> Option<bool> {
        self.brokers.get(&broker_id).map(|b| b.running)
    }

    /// Connections the client has not seen closed yet (connecting or open).
    pub fn open_connections(&self) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| c.view != ClientView::Closed && !c.client_closed)
            .map(|(id, _)| ConnId(*id))
            .collect()
    }

    fn partition(&self, topic: &str, partition: i32) -> Option<&Partition> {
        let t = self.topics.get(topic)?;
        t.partitions.get(usize::try_from(partition).ok()?)
    }

    // ----- client-facing network ------------------------------------------------------------

    /// Starts a connection to `host:port`. The outcome arrives one latency later as
    /// [`NetEvent::Connected`] or [`NetEvent::ConnectFailed`] (no broker at that address, or it is
    /// stopped).
    pub fn connect(&mut self, now: Instant, host: &str, port: u16) -> ConnId {
        let now = self.clock(now);
        let id = self.next_conn;
        self.next_conn += 1;
        let broker = self
            .brokers
            .values()
            .find(|b| b.spec.host == host && b.spec.port == port);
        let (broker_id, up) = match broker {
            Some(b) => (Some(b.spec.node_id), b.running),
            None => (None, false),
        };
        let lat = self.latency();
        self.conns.insert(
            id,
            Conn {
                broker: broker_id,
                view: ClientView::Connecting,
                broker_open: up,
                client_closed: false,
                to_broker: VecDeque::new(),
                to_client: VecDeque::new(),
                last_to_broker: now,
                last_to_client: now,
                inbuf: Vec::new(),
            },
        );
        let ev = if up {
            NetEvent::Connected(ConnId(id))
        } else {
            NetEvent::ConnectFailed(ConnId(id))
        };
        self.push_to_client(id, later(now, lat), ev);
        ConnId(id)
    }

    /// Sends client bytes to the broker (any chunking; the broker reassembles size-prefixed
    /// frames). Ignored on a connection that is closed (by either side) or failed.
    pub fn write(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        let now = self.clock(now);
        if bytes.is_empty() {
            return;
        }
        let lat = self.latency();
        let seq = self.seq();
        let Some(c) = self.conns.get_mut(&conn.0) else {
            return;
        };
        if !c.broker_open || c.client_closed || c.view == ClientView::Closed {
            return;
        }
        let at = later(now, lat).max(c.last_to_broker);
        c.last_to_broker = at;
        c.to_broker.push_back(Pending {
            at,
            seq,
            item: Bytes::copy_from_slice(bytes),
        });
    }

    /// The client closes the connection. Bytes it already wrote still reach the broker and are
    /// handled (their effects persist); nothing more is delivered to the client on this id.
    pub fn close(&mut self, now: Instant, conn: ConnId) {
        self.clock(now);
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.client_closed = true;
            c.view = ClientView::Closed;
            c.to_client.clear();
        }
    }

    /// Handles everything broker-side due at or before `now`, then returns the next client-side
    /// event due at or before `now` (the earliest first), or `None`.
    pub fn poll_event(&mut self, now: Instant) -> Option<NetEvent> {
        let now = self.clock(now);
        self.advance(now);
        let mut best: Option<(Instant, u64, u64)> = None;
        for (&id, c) in &self.conns {
            let Some(front) = c.to_client.front() else {
                continue;
            };
            let Some(at) = self.deliverable_at(c, front.at) else {
                continue;
            };
            if at > now {
                continue;
            }
            if best.is_none_or(|(bat, bseq, _)| (at, front.seq) < (bat, bseq)) {
                best = Some((at, front.seq, id));
            }
        }
        let (_, _, id) = best?;
        let c = self.conns.get_mut(&id)?;
        let ev = c.to_client.pop_front()?.item;
        match &ev {
            NetEvent::Connected(_) => c.view = ClientView::Open,
            NetEvent::ConnectFailed(_) | NetEvent::Closed(_) => {
                c.view = ClientView::Closed;
                c.to_client.clear();
            }
            NetEvent::Data(..) => {}
        }
        Some(ev)
    }

    /// When the next event is due: a client-side delivery (after stalls) or a broker-side
    /// arrival. `None` when nothing is scheduled (or everything left is stalled indefinitely).
    pub fn next_event_time(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Instant| {
            next = Some(next.map_or(t, |n: Instant| n.min(t)));
        };
        for c in self.conns.values() {
            if let Some(f) = c.to_broker.front() {
                consider(f.at);
            }
            if let Some(f) = c.to_client.front() {
                if let Some(at) = self.deliverable_at(c, f.at) {
                    consider(at);
                }
            }
        }
        next
    }

    /// Handles, broker-side, every arrival due at or before `now`, in time order (each at its
    /// own arrival instant, so the result does not depend on how often this is called).
    /// [`SimCluster::poll_event`] calls it; calling it directly is only needed to let brokers
    /// act without consuming client events.
    pub fn advance(&mut self, now: Instant) {
        let now = self.clock(now);
        loop {
            let mut best: Option<(Instant, u64, u64)> = None;
            for (&id, c) in &self.conns {
                if let Some(f) = c.to_broker.front() {
                    if f.at <= now && best.is_none_or(|(a, s, _)| (f.at, f.seq) < (a, s)) {
                        best = Some((f.at, f.seq, id));
                    }
                }
            }
            let Some((at, _, id)) = best else { break };
            let Some(chunk) = self
                .conns
                .get_mut(&id)
                .and_then(|c| c.to_broker.pop_front())
            else {
                break;
            };
            self.broker_receive(id, at, chunk.item);
        }
    }

    // ----- fault injection ------------------------------------------------------------------

    /// Moves a partition's leadership to `new_leader` and increments its leader epoch. The log
    /// and producer state stay with the partition (replicated log).
    pub fn move_leader(
        &mut self,
        topic: &str,
        partition: i32,
        new_leader: i32,
    ) -> Result<(), SimError> {
        if !self.brokers.contains_key(&new_leader) {
            return Err(SimError::UnknownBroker(new_leader));
        }
        let t = self
            .topics
            .get_mut(topic)
            .ok_or_else(|| SimError::UnknownTopic(topic.to_string()))?;
        let p = usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get_mut(i))
            .ok_or_else(|| SimError::UnknownPartition {
                topic: topic.to_string(),
                partition,
            })?;
        p.leader = new_leader;
        p.leader_epoch += 1;
        Ok(())
    }

    /// Stops a broker: its connections are reset (the client gets [`NetEvent::Closed`] at `now`,
    /// or [`NetEvent::ConnectFailed`] if the connection had not completed; bytes in flight are
    /// lost) and new connections to it fail until [`SimCluster::start_broker`].
    pub fn stop_broker(&mut self, broker_id: i32, now: Instant) -> Result<(), SimError> {
        let now = self.clock(now);
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.running = false;
        self.reset_conns(now, |c| c.broker == Some(broker_id));
        Ok(())
    }

    /// Restarts a stopped broker (its partitions' logs were never lost).
    pub fn start_broker(&mut self, broker_id: i32) -> Result<(), SimError> {
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.running = true;
        Ok(())
    }

    /// Resets one connection: the client gets [`NetEvent::Closed`] at `now` (subject to a stall),
    /// bytes in flight both ways are lost. Ignored for unknown or already closed connections.
    pub fn drop_connection(&mut self, now: Instant, conn: ConnId) {
        let now = self.clock(now);
        let target = conn.0;
        self.reset_conns_by_id(now, |id, _| id == target);
    }

    /// Resets every connection to a broker, like [`SimCluster::drop_connection`].
    pub fn drop_connections_to(&mut self, now: Instant, broker_id: i32) {
        let now = self.clock(now);
        self.reset_conns(now, |c| c.broker == Some(broker_id));
    }

    /// Holds everything the broker sends (responses, closes, connection completions): nothing is
    /// delivered to the client from it until `until` (`Some`), or until
    /// [`SimCluster::unstall_connections_to`] (`None`). The broker keeps handling requests
    /// meanwhile. Use it to exceed a client's request timeout.
    pub fn stall_connections_to(
        &mut self,
        broker_id: i32,
        until: Option<Instant>,
    ) -> Result<(), SimError> {
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.stall = match until {
            Some(t) => Stall::Until(t),
            None => Stall::Indefinite,
        };
        Ok(())
    }

    /// Ends a stall at `now`: held events become deliverable from `now` on, in order.
    pub fn unstall_connections_to(&mut self, broker_id: i32, now: Instant) -> Result<(), SimError> {
        let now = self.clock(now);
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.stall = match b.stall {
            Stall::None => Stall::None,
            Stall::Until(t) => Stall::Until(t.min(now)),
            Stall::Indefinite => Stall::Until(now),
        };
        Ok(())
    }

    /// Queues an error injection (see [`InjectedError`]). Several may be active; the first
    /// matching one with a count left applies.
    pub fn inject_error(&mut self, error: InjectedError) {
        if error.count > 0 {
            self.injections.push(error);
        }
    }

    /// Adds `extra` to the travel time of the next `count` responses of the broker (later
    /// responses on the same connection wait behind them: TCP order).
    pub fn delay_responses(
        &mut self,
        broker_id: i32,
        extra: Duration,
        count: u32,
    ) -> Result<(), SimError> {
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.delay = (count > 0).then_some((extra, count));
        Ok(())
    }

    /// Puts `throttle_time_ms = ms` in the next `count` responses of the broker that have the
    /// field. (The broker does not mute the channel afterwards.)
    pub fn set_throttle(&mut self, broker_id: i32, ms: i32, count: u32) -> Result<(), SimError> {
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.throttle = (count > 0).then_some((ms, count));
        Ok(())
    }

    // ----- internals ------------------------------------------------------------------------

    fn clock(&mut self, now: Instant) -> Instant {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    fn latency(&mut self) -> Duration {
        let (min, max) = self.cfg.latency;
        self.rng.duration(min, max)
    }

    /// When a client-side event queued at `at` can be delivered, given the broker's stall.
    fn deliverable_at(&self, c: &Conn, at: Instant) -> Option<Instant> {
        let stall = c
            .broker
            .and_then(|b| self.brokers.get(&b))
            .map_or(Stall::None, |b| b.stall);
        match stall {
            Stall::None => Some(at),
            Stall::Until(t) => Some(at.max(t)),
            Stall::Indefinite => None,
        }
    }

    fn push_to_client(&mut self, id: u64, at: Instant, ev: NetEvent) {
        let seq = self.seq();
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.client_closed || c.view == ClientView::Closed {
            return;
        }
        let at = at.max(c.last_to_client);
        c.last_to_client = at;
        c.to_client.push_back(Pending { at, seq, item: ev });
    }

    fn reset_conns(&mut self, now: Instant, pred: impl Fn(&Conn) -> bool) {
        self.reset_conns_by_id(now, |_, c| pred(c));
    }

    /// Connection reset seen by the client at `now`: everything in flight is lost.
    fn reset_conns_by_id(&mut self, now: Instant, pred: impl Fn(u64, &Conn) -> bool) {
        let ids: Vec<u64> = self
            .conns
            .iter()
            .filter(|(id, c)| pred(**id, c))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.reset_conn(id, now);
        }
    }

    fn reset_conn(&mut self, id: u64, at: Instant) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.view == ClientView::Closed || c.client_closed {
            c.broker_open = false;
            c.to_broker.clear();
            return;
        }
        let connecting = c.view == ClientView::Connecting
            && matches!(c.to_client.front(), Some(p) if matches!(p.item, NetEvent::Connected(_)));
        let was_open = c.broker_open;
        c.broker_open = false;
        c.to_broker.clear();
        c.inbuf.clear();
        if !was_open {
            // Already closed broker-side: a Closed/ConnectFailed is queued already.
            return;
        }
        c.to_client.clear();
        c.last_to_client = at;
        let ev = if connecting {
            NetEvent::ConnectFailed(ConnId(id))
        } else {
            NetEvent::Closed(ConnId(id))
        };
        self.push_to_client(id, at, ev);
    }

    /// Broker-initiated orderly close at `at`: responses already queued are delivered first,
    /// then `Closed` one latency later.
    fn broker_close(&mut self, id: u64, at: Instant) {
        let lat = self.latency();
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if !c.broker_open {
            return;
        }
        c.broker_open = false;
        c.to_broker.clear();
        c.inbuf.clear();
        self.push_to_client(id, later(at, lat), NetEvent::Closed(ConnId(id)));
    }

    fn violation(&mut self, broker: Option<i32>, conn: u64, msg: String) {
        let b = broker.map_or_else(|| "?".to_string(), |b| b.to_string());
        self.violations
            .push(format!("[broker {b} conn#{conn}] {msg}"));
    }

    /// Bytes arriving at the broker at `at`: reassemble frames, handle each.
    fn broker_receive(&mut self, id: u64, at: Instant, bytes: Bytes) {
        let max = self.cfg.max_frame_size;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if !c.broker_open {
            return;
        }
        let broker = c.broker;
        c.inbuf.extend_from_slice(&bytes);
        loop {
            let Some(c) = self.conns.get_mut(&id) else {
                return;
            };
            if !c.broker_open || c.inbuf.len() < 4 {
                return;
            }
            let size = i32::from_be_bytes([c.inbuf[0], c.inbuf[1], c.inbuf[2], c.inbuf[3]]);
            let usize_size = usize::try_from(size).ok().filter(|s| *s <= max && *s >= 8);
            let Some(len) = usize_size else {
                self.violation(
                    broker,
                    id,
                    format!("invalid frame size {size} (must be 8..={max}); connection closed"),
                );
                self.broker_close(id, at);
                return;
            };
            if c.inbuf.len() < 4 + len {
                return;
            }
            let frame: Vec<u8> = c.inbuf.drain(..4 + len).skip(4).collect();
            self.handle_frame(id, at, Bytes::from(frame));
        }
    }

    /// Queues a response frame (already size-prefixed) from the broker of `id` at `at`.
    fn send_response(&mut self, id: u64, at: Instant, frame: Vec<u8>) {
        let broker = self.conns.get(&id).and_then(|c| c.broker);
        let mut extra = Duration::ZERO;
        if let Some(b) = broker.and_then(|b| self.brokers.get_mut(&b)) {
            if let Some((d, n)) = b.delay {
                extra = d;
                b.delay = (n > 1).then_some((d, n - 1));
            }
        }
        let lat = self.latency();
        let arrival = later(later(at, lat), extra);
        if self.cfg.fragment_responses && frame.len() > 1 {
            let pieces = 1 + self.rng.below(3) as usize;
            let mut cuts: Vec<usize> = (1..pieces)
                .map(|_| 1 + self.rng.below(frame.len() as u64 - 1) as usize)
                .collect();
            cuts.sort_unstable();
            cuts.dedup();
            let frame = Bytes::from(frame);
            let mut start = 0;
            for cut in cuts.into_iter().chain(std::iter::once(frame.len())) {
                if cut > start {
                    self.push_to_client(
                        id,
                        arrival,
                        NetEvent::Data(ConnId(id), frame.slice(start..cut)),
                    );
                    start = cut;
                }
            }
        } else {
            self.push_to_client(id, arrival, NetEvent::Data(ConnId(id), Bytes::from(frame)));
        }
    }

    /// Takes one throttle value for a response of `broker`.
    fn take_throttle(&mut self, broker: i32) -> i32 {
        let Some(b) = self.brokers.get_mut(&broker) else {
            return 0;
        };
        match b.throttle {
            Some((ms, n)) => {
                b.throttle = (n > 1).then_some((ms, n - 1));
                ms
            }
            None => 0,
        }
    }

    /// Finds and consumes one injection for `api_key` that satisfies `pred`.
    fn take_injection(
        &mut self,
        api_key: i16,
        pred: impl Fn(&InjectedError) -> bool,
    ) -> Option<InjectedError> {
        let idx = self
            .injections
            .iter()
            .position(|inj| inj.api_key == api_key && inj.count > 0 && pred(inj))?;
        let inj = self.injections.get_mut(idx)?;
        inj.count -= 1;
        let out = inj.clone();
        if inj.count == 0 {
            self.injections.remove(idx);
        }
        Some(out)
    }
}

/// `t + d`, saturating instead of panicking when a configured duration is absurdly large.
fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .or_else(|| t.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(t)
}
