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
        }
    }
}

impl Default for SimConfig {
    /// One broker (`broker-1:9092`), seed 0.
    fn default() -> Self {
        SimConfig::with_brokers(1, 0)
    }
}
