//! The simulated cluster: its state, and the calls that set it up and inspect it. The
//! network, the faults, the records kept for tests and the brokers' request handling are its
//! submodules (each an `impl SimCluster` of its own).

mod broker;
mod faults;
mod logs;
mod network;
mod state;
mod transactions;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::config::{SimConfig, DEFAULT_API_VERSIONS, SASL_API_VERSIONS};
use crate::rng::Rng;
use crate::SimError;

pub use broker::SimTelemetryPush;
pub use faults::InjectedError;
pub use logs::{ControlMarker, LoggedRecord, ProducePartitionRecord, RequestRecord};
pub use network::{ConnId, NetEvent};
pub use transactions::{CommittedOffset, CoordinatorKind, TransactionState, TransactionView};

/// Kafka's default `max.message.bytes` of a topic (`message.max.bytes` of the broker): 1 MiB
/// and the 12 bytes of a batch's log overhead.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1_048_588;

use network::{Conn, Stall};
use state::{Broker, Partition, Topic};

/// The simulated cluster and network. See the crate documentation for the model.
///
/// Broker rules enforced:
/// * **ApiVersions** (v0-4 within the configured range): the configured ranges; a version above
///   the broker's max gets a v0-encoded UNSUPPORTED_VERSION (35) response carrying the ranges.
///   v3+ client software name/version must match Kafka's pattern, else INVALID_REQUEST (42).
///   The response header is always v0.
/// * **Any other API/version** outside the configured ranges (or outside [`SIM_CAPABILITIES`](crate::SIM_CAPABILITIES)):
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
///   `NodeEndpoints` at v10+; zstd below v7 UNSUPPORTED_COMPRESSION_TYPE (76); then exactly one
///   RecordBatch, magic 2, CRC-32C over `[21..]`, a known codec, `LastOffsetDelta ==
///   RecordsCount - 1`, no control batch, an idempotent batch with epoch and sequence >= 0, and
///   records that decode exactly (sizes, offset deltas 0..n-1, headers) through both a strict
///   walker and kafka-protocol's `RecordBatchDecoder`; any failure is CORRUPT_MESSAGE (2).
///   A batch larger than its topic's `max.message.bytes` (as the request carries it; Kafka's
///   default 1,048,588, set per topic at creation) is MESSAGE_TOO_LARGE (10), nothing appended.
///   On a topic created with `cleanup.policy=compact`, a batch with records without a key is
///   INVALID_RECORD (87) with one v8+ `RecordErrors` entry per such record and Kafka's messages,
///   checked before the idempotence window (which it leaves as it was).
///   Idempotence per (partition, producer id): current epoch plus the last 5 batches;
///   epoch < current 47; epoch > current requires first sequence 0 (else
///   OUT_OF_ORDER_SEQUENCE_NUMBER 45) and resets the window; no state accepts any sequence; same
///   epoch: an exact (first, last) match is a duplicate answered with the original base offset and
///   not appended, `first == last + 1` (wrapping at `i32::MAX`) appends, anything else is 45.
///   acks=0: nothing is sent back, and any partition error makes the broker close the
///   connection (Kafka's behaviour).
/// * **Transactional Produce**: transactional batches need the request's TransactionalId
///   (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED 53 for every partition) and one producer
///   (else INVALID_PRODUCER_ID_MAPPING 49). After the record checks, the first batch of a
///   transaction in a partition is verified with the coordinator (KIP-890 part 1): unknown
///   transactional id or another producer id 49, a stale epoch 47, an end completing or the
///   coordinator stopped NOT_ENOUGH_REPLICAS (19); a partition not in the transaction is added
///   by Produce v12+ (transaction version 2: a violation on a cluster whose
///   `transaction.version` is below 2), else TRANSACTION_ABORTABLE (120) at v11 and
///   INVALID_TXN_STATE (48) below. A plain idempotent batch of a producer with an
///   open transaction in the partition is 48. A transaction marker with a newer epoch empties
///   the producer's idempotence window: its next batch starts at sequence 0.
/// * **Transaction coordinator** (FindCoordinator, InitProducerId with a transactional id,
///   AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn): see
///   [`SimCluster::coordinator`], [`TransactionState`] and the `transactions_broker` tests.
///   Keys hash as Kafka's (`abs(hashCode) % 50`) to an internal partition led like a topic's;
///   a request at another broker is NOT_COORDINATOR (16), a stopped coordinator is
///   COORDINATOR_NOT_AVAILABLE (15) in FindCoordinator. InitProducerId: a timeout above
///   [`SimConfig::transaction_max_timeout`] or not positive INVALID_TRANSACTION_TIMEOUT (50);
///   a new id epoch 0, a known one bumped (an open transaction is aborted first and answered
///   CONCURRENT_TRANSACTIONS 51); KIP-360 id/epoch checked (PRODUCER_FENCED 90, 47 below v4).
///   Fencing errors are PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH where Kafka translates it
///   for old versions (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn below v2). EndTxn writes
///   a commit or abort marker into every partition of the transaction and applies or drops
///   its staged offsets; v5 (transaction version 2) bumps the epoch and answers the new one. A transaction open past its timeout is aborted with its producer fenced.
///   Reads: [`SimCluster::read_committed`], [`SimCluster::read_uncommitted`],
///   [`SimCluster::last_stable_offset`], [`SimCluster::committed_offsets`].
/// * **Client telemetry** (GetTelemetrySubscriptions, PushTelemetry, KIP-714): advertised only
///   with [`SimConfig::telemetry_receiver`]; the subscription is the test's
///   ([`SimCluster::set_telemetry_subscription`]), a push is checked as Kafka's
///   `ClientMetricsManager` does (subscription id 117, terminated 42, pushed sooner than the
///   interval 89, codec not accepted 76, larger than `max_bytes` 118) and recorded
///   ([`SimCluster::telemetry_pushes`]); see the `telemetry` tests.
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
    /// How many times each topic name was deleted ([`SimCluster::delete_topic`]).
    deleted_topics: BTreeMap<String, u64>,
    conns: BTreeMap<u64, Conn>,
    injections: Vec<InjectedError>,
    /// `(error code, responses left)`: Metadata v13+ answers carrying only a top-level error.
    metadata_top_level_error: Option<(i16, u32)>,
    request_log: Vec<RequestRecord>,
    violations: Vec<String>,
    /// SCRAM stored and server keys per (hash, user), derived once from the configured
    /// passwords.
    scram_credentials: BTreeMap<(broker::ScramHash, String), (Vec<u8>, Vec<u8>)>,
    /// The transaction coordinator's metadata per transactional id.
    transactions: BTreeMap<String, transactions::TxnMeta>,
    /// The committed offsets per consumer group: (topic, partition) -> offset.
    committed_offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    /// Internal partitions whose leader [`SimCluster::move_coordinator`] moved.
    coordinator_moves: BTreeMap<(CoordinatorKind, i32), i32>,
    /// The telemetry receiver: the subscription, the clients and the pushes accepted.
    telemetry: broker::TelemetryReceiver,
}

impl SimCluster {
    /// Creates the cluster at virtual time `now`, every broker running, no topics.
    pub fn new(config: SimConfig, now: Instant) -> SimCluster {
        let mut brokers = BTreeMap::new();
        for spec in &config.brokers {
            let api_versions = spec.api_versions.clone().unwrap_or_else(|| {
                let mut v = DEFAULT_API_VERSIONS.to_vec();
                if config.sasl.is_some() {
                    v.extend_from_slice(SASL_API_VERSIONS);
                }
                if config.telemetry_receiver {
                    v.extend_from_slice(crate::TELEMETRY_API_VERSIONS);
                }
                v
            });
            brokers.entry(spec.node_id).or_insert(Broker {
                spec: spec.clone(),
                api_versions,
                running: true,
                stall: Stall::None,
                delay: None,
                throttle: None,
                service: None,
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
            deleted_topics: BTreeMap::new(),
            conns: BTreeMap::new(),
            injections: Vec::new(),
            metadata_top_level_error: None,
            request_log: Vec::new(),
            violations: Vec::new(),
            scram_credentials: BTreeMap::new(),
            transactions: BTreeMap::new(),
            committed_offsets: BTreeMap::new(),
            coordinator_moves: BTreeMap::new(),
            telemetry: broker::TelemetryReceiver::default(),
        }
    }

    /// Creates a topic with `partitions` partitions, leader epoch 0. Partition `p` is led by the
    /// `(p mod n)`-th broker in ascending node-id order.
    pub fn create_topic(&mut self, name: &str, partitions: i32) -> Result<(), SimError> {
        self.create_topic_with_config(name, partitions, &[])
    }

    /// [`SimCluster::create_topic`] with topic configs, as Kafka's CreateTopics takes them.
    /// Two are simulated:
    /// - `cleanup.policy` (`delete`, `compact`, or both comma-separated); with `compact`, a
    ///   Produce batch holding records without a key is rejected with INVALID_RECORD and one
    ///   record error per such record (Kafka's message), and nothing of it is appended;
    /// - `max.message.bytes` (a count of bytes, default [`DEFAULT_MAX_MESSAGE_BYTES`], Kafka's):
    ///   a batch larger than this, as the request carries it, is refused with
    ///   MESSAGE_TOO_LARGE and nothing of it is appended (Kafka's `RecordTooLargeException`).
    ///
    /// Any other key, or another value, is [`SimError::InvalidTopicConfig`].
    pub fn create_topic_with_config(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<(), SimError> {
        let mut compacted = false;
        let mut max_message_bytes = DEFAULT_MAX_MESSAGE_BYTES;
        for &(key, value) in configs {
            if key == "max.message.bytes" {
                max_message_bytes =
                    value
                        .parse::<usize>()
                        .map_err(|_| SimError::InvalidTopicConfig {
                            key: key.to_string(),
                            value: value.to_string(),
                        })?;
                continue;
            }
            let policies: Vec<&str> = value.split(',').map(str::trim).collect();
            let known = policies.iter().all(|p| matches!(*p, "compact" | "delete"));
            if key != "cleanup.policy" || !known {
                return Err(SimError::InvalidTopicConfig {
                    key: key.to_string(),
                    value: value.to_string(),
                });
            }
            compacted = policies.contains(&"compact");
        }
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
                open_txns: BTreeMap::new(),
                aborted: Vec::new(),
            })
            .collect();
        // Topic id: derived from the seed, the name and how often a topic of that name was
        // deleted (a new incarnation gets a new id), without disturbing the main RNG stream.
        let incarnation = self.deleted_topics.get(name).copied().unwrap_or(0);
        let mut r = Rng::new(
            self.cfg.seed ^ u64::from(crc32c::crc32c(name.as_bytes())) << 17 ^ incarnation << 49,
        );
        let id = uuid::Uuid::from_u64_pair(r.next_u64(), r.next_u64() | 1);
        self.topics.insert(
            name.to_string(),
            Topic {
                id,
                partitions: parts,
                compacted,
                max_message_bytes,
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

    fn partition(&self, topic: &str, partition: i32) -> Option<&Partition> {
        let t = self.topics.get(topic)?;
        t.partitions.get(usize::try_from(partition).ok()?)
    }

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
}

/// `t + d`, saturating instead of panicking when a configured duration is absurdly large.
fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .or_else(|| t.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(t)
}
