//! How a simulated cluster is set up: its brokers, the network's latency and faults, the API
//! versions the brokers advertise.

use std::time::Duration;

/// API key of Produce.
pub const API_PRODUCE: i16 = 0;
/// API key of Metadata.
pub const API_METADATA: i16 = 3;
/// API key of ApiVersions.
pub const API_API_VERSIONS: i16 = 18;
/// API key of InitProducerId.
pub const API_INIT_PRODUCER_ID: i16 = 22;
/// API key of SaslHandshake.
pub const API_SASL_HANDSHAKE: i16 = 17;
/// API key of SaslAuthenticate.
pub const API_SASL_AUTHENTICATE: i16 = 36;
/// API key of FindCoordinator.
pub const API_FIND_COORDINATOR: i16 = 10;
/// API key of AddPartitionsToTxn.
pub const API_ADD_PARTITIONS_TO_TXN: i16 = 24;
/// API key of AddOffsetsToTxn.
pub const API_ADD_OFFSETS_TO_TXN: i16 = 25;
/// API key of EndTxn.
pub const API_END_TXN: i16 = 26;
/// API key of TxnOffsetCommit.
pub const API_TXN_OFFSET_COMMIT: i16 = 28;
/// GetTelemetrySubscriptions (KIP-714).
pub const API_GET_TELEMETRY_SUBSCRIPTIONS: i16 = 71;
/// PushTelemetry (KIP-714).
pub const API_PUSH_TELEMETRY: i16 = 72;

/// What a broker advertises besides [`DEFAULT_API_VERSIONS`] when the cluster has a telemetry
/// receiver ([`SimConfig::telemetry_receiver`]): Kafka lists keys 71 and 72 only then.
pub const TELEMETRY_API_VERSIONS: &[(i16, i16, i16)] = &[
    (API_GET_TELEMETRY_SUBSCRIPTIONS, 0, 0),
    (API_PUSH_TELEMETRY, 0, 0),
];

/// The API ranges a broker advertises when [`BrokerSpec::api_versions`] is `None`:
/// `(api_key, min_version, max_version)`, Kafka 4.1's ranges for these APIs.
pub const DEFAULT_API_VERSIONS: &[(i16, i16, i16)] = &[
    (API_PRODUCE, 3, 13),
    (API_METADATA, 0, 13),
    (API_API_VERSIONS, 0, 4),
    (API_INIT_PRODUCER_ID, 0, 5),
    (API_FIND_COORDINATOR, 0, 6),
    (API_ADD_PARTITIONS_TO_TXN, 0, 5),
    (API_ADD_OFFSETS_TO_TXN, 0, 4),
    (API_END_TXN, 0, 5),
    (API_TXN_OFFSET_COMMIT, 0, 5),
];

/// What a broker advertises besides [`DEFAULT_API_VERSIONS`] when the cluster has SASL
/// ([`SimConfig::sasl`]) and the broker's ranges are not configured.
pub const SASL_API_VERSIONS: &[(i16, i16, i16)] =
    &[(API_SASL_HANDSHAKE, 0, 1), (API_SASL_AUTHENTICATE, 0, 2)];

/// The versions the simulator itself can serve, per API: `(api_key, min, max)`. A broker may be
/// configured to advertise more; a request beyond these closes the connection and records a
/// violation.
pub const SIM_CAPABILITIES: &[(i16, i16, i16)] = &[
    (API_PRODUCE, 3, 13),
    (API_METADATA, 0, 13),
    (API_API_VERSIONS, 0, 4),
    (API_INIT_PRODUCER_ID, 0, 5),
    (API_FIND_COORDINATOR, 0, 6),
    (API_ADD_PARTITIONS_TO_TXN, 0, 5),
    (API_ADD_OFFSETS_TO_TXN, 0, 4),
    (API_END_TXN, 0, 5),
    (API_TXN_OFFSET_COMMIT, 0, 5),
    // v0 handshakes are followed by unframed tokens, which the simulator does not read.
    (API_SASL_HANDSHAKE, 1, 1),
    (API_SASL_AUTHENTICATE, 0, 2),
    (API_GET_TELEMETRY_SUBSCRIPTIONS, 0, 0),
    (API_PUSH_TELEMETRY, 0, 0),
];

/// A client-metrics subscription (KIP-714), as `kafka-client-metrics.sh` makes one: which
/// metrics (name prefixes; a lone `*` for all), how often, and what the brokers accept of a
/// push. Set with [`SimCluster::set_telemetry_subscription`](crate::SimCluster::set_telemetry_subscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimSubscription {
    /// The metric name prefixes asked for (empty: none).
    pub metrics: Vec<String>,
    /// `interval.ms`.
    pub push_interval: Duration,
    /// Whether sums go as deltas (Kafka's `telemetry.max.bytes`'s sibling, the broker's
    /// `ClientTelemetry` receiver decides; Kafka's default is delta).
    pub delta_temporality: bool,
    /// The compression type ids a push may use, in the broker's order of preference (Kafka's:
    /// zstd 4, lz4 3, gzip 1, snappy 2).
    pub accepted_compression: Vec<i8>,
    /// The largest push accepted, compressed (Kafka's `telemetry.max.bytes`, 1 MiB).
    pub max_bytes: i32,
}

impl SimSubscription {
    /// `metrics` every `push_interval`, with Kafka's defaults for the rest (delta, every codec,
    /// 1 MiB).
    pub fn new<'a>(metrics: impl IntoIterator<Item = &'a str>, push_interval: Duration) -> Self {
        SimSubscription {
            metrics: metrics.into_iter().map(str::to_string).collect(),
            push_interval,
            delta_temporality: true,
            accepted_compression: vec![4, 3, 1, 2],
            max_bytes: 1024 * 1024,
        }
    }
}

/// SASL on every broker of the cluster (a `SASL_PLAINTEXT` listener): which mechanisms are
/// enabled, the credential store, and the session lifetime (`connections.max.reauth.ms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimSasl {
    /// The enabled mechanisms, as Kafka names them (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`,
    /// `OAUTHBEARER`).
    pub mechanisms: Vec<String>,
    /// `(user, password)` pairs: PLAIN checks them as given; SCRAM keeps only the salted keys
    /// derived from them, as Kafka's credential store does.
    pub users: Vec<(String, String)>,
    /// The SCRAM iteration count of every credential (Kafka accepts 4096-16384).
    pub scram_iterations: u32,
    /// OAUTHBEARER tokens the brokers accept (the token is the principal).
    pub oauth_tokens: Vec<String>,
    /// `connections.max.reauth.ms`: each session's lifetime; requests after it ends (other than
    /// re-authentication) close the connection. `None`: sessions never end.
    pub session_lifetime: Option<Duration>,
}

impl SimSasl {
    /// Every mechanism enabled for one user, no session lifetime.
    pub fn for_user(user: &str, password: &str) -> Self {
        SimSasl {
            mechanisms: ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
                .map(String::from)
                .to_vec(),
            users: vec![(user.to_string(), password.to_string())],
            scram_iterations: 4096,
            oauth_tokens: Vec::new(),
            session_lifetime: None,
        }
    }
}

/// One broker of the simulated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerSpec {
    /// The broker's node id.
    pub node_id: i32,
    /// Host name clients connect to (matched exactly by [`SimCluster::connect`](crate::SimCluster::connect)).
    pub host: String,
    /// Port clients connect to.
    pub port: u16,
    /// Advertised `(api_key, min_version, max_version)` ranges; `None` means
    /// [`DEFAULT_API_VERSIONS`].
    pub api_versions: Option<Vec<(i16, i16, i16)>>,
}

impl BrokerSpec {
    /// A broker with the default API ranges.
    #[must_use]
    pub fn new(node_id: i32, host: impl Into<String>, port: u16) -> Self {
        BrokerSpec {
            node_id,
            host: host.into(),
            port,
            api_versions: None,
        }
    }
}

/// Configuration of a [`SimCluster`](crate::SimCluster).
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
    /// SASL on every broker: a client must authenticate before any request but ApiVersions,
    /// SaslHandshake and SaslAuthenticate. `None`: a plaintext listener, where SaslHandshake is
    /// refused with ILLEGAL_SASL_STATE.
    pub sasl: Option<SimSasl>,
    /// The cluster's finalized `transaction.version` feature, reported by ApiVersions v3+:
    /// 2 (KIP-890 part 2, the default of a fresh Kafka 4.x cluster: Produce v12+ adds a
    /// partition to its transaction, every transaction end bumps the epoch), 1 (the classic
    /// protocol, reported as finalized) or 0 (the classic protocol, the feature not reported at
    /// all, like a cluster that never finalized it). Clients choose the protocol from it; the
    /// brokers, like Kafka's, apply the transaction-version-2 rules to TV2 request versions
    /// (Produce v12+, EndTxn v5, TxnOffsetCommit v5). Such a version on a cluster below 2 is
    /// recorded as a violation (the client must cap its versions there, as Java's does). The
    /// coordinator's own aborts (fencing, timeouts) follow this level: at 2 they bump the
    /// epoch once more, as Kafka's do.
    pub transaction_version: i16,
    /// `transaction.max.timeout.ms`: InitProducerId with a larger (or non-positive)
    /// transaction timeout is INVALID_TRANSACTION_TIMEOUT. Kafka's default: 15 minutes.
    pub transaction_max_timeout: Duration,
    /// How long the coordinator takes from EndTxn (or an abort it starts itself) to the
    /// markers being written: meanwhile the transaction is PrepareCommit / PrepareAbort, its
    /// partitions' last stable offset stays held back and the coordinator answers
    /// CONCURRENT_TRANSACTIONS to InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and a
    /// repeated EndTxn (Produce verification: NOT_ENOUGH_REPLICAS). Zero (the default): the
    /// markers are written at once.
    pub transaction_marker_delay: Duration,
    /// A telemetry receiver on every broker (KIP-714): the brokers list
    /// GetTelemetrySubscriptions and PushTelemetry ([`TELEMETRY_API_VERSIONS`]), hand out the
    /// subscription the test sets, and record every push they accept
    /// ([`SimCluster::telemetry_pushes`](crate::SimCluster::telemetry_pushes)). False (the
    /// default): both APIs are hidden, as on a Kafka broker without a receiver.
    pub telemetry_receiver: bool,
}

impl SimConfig {
    /// `n` brokers with node ids `1..=n`, hosts `broker-<id>`, port 9092, default API ranges,
    /// latency 1-5 ms, no random drops.
    #[must_use]
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
            sasl: None,
            transaction_version: 2,
            transaction_max_timeout: Duration::from_secs(15 * 60),
            transaction_marker_delay: Duration::ZERO,
            telemetry_receiver: false,
        }
    }
}

impl Default for SimConfig {
    /// One broker (`broker-1:9092`), seed 0.
    fn default() -> Self {
        SimConfig::with_brokers(1, 0)
    }
}
