//! The cluster launcher: one node, or three combined (broker + controller) KRaft nodes, on
//! 127.0.0.1 with free ports and fresh directories under `target/kafka/clusters/`, settings for
//! fast fail-over, a fault proxy in front of each broker's client listener, and KafkaCtl for
//! admin calls. [`KafkaCluster::start`] returns once a Metadata request to every node lists
//! every broker; dropping the cluster kills every JVM it started (and prints the broker logs
//! when the thread is panicking).
//!
//! Each node has three listeners: `INTERNAL` (inter-broker traffic, KafkaCtl, read-back),
//! `CONTROLLER` (the KRaft quorum) and `CLIENT`, whose advertised port is its proxy's, so a
//! producer bootstrapped on [`KafkaCluster::bootstrap`] reaches every broker through the
//! proxies while the brokers and the checks talk directly.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::ctl::{self, Ctl, PartitionInfo};
use super::dist::Dist;
use super::process::{log_tail, pid_alive, Jvm, Spawner};
use super::proxy::Proxy;
use super::telemetry::{self, TelemetryPush};
use super::wire::{api_versions, metadata, ClusterView};
use crate::readback::Consumed;
use crate::tls::TestPki;

/// How a cluster is made. [`ClusterSpec::single`] and [`ClusterSpec::three`] give the test
/// settings; the builder methods change them.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    nodes: usize,
    heap_mb: u32,
    proxied: bool,
    start_timeout: Duration,
    overrides: Vec<(String, String)>,
    first_ports: Vec<u16>,
    name: String,
    security: Option<Arc<TestPki>>,
    features: Vec<(String, i16)>,
    telemetry: bool,
    server_jvm: bool,
}

impl ClusterSpec {
    /// One combined node; every replication factor and min ISR 1.
    pub fn single() -> Self {
        ClusterSpec {
            nodes: 1,
            heap_mb: 384,
            proxied: true,
            start_timeout: Duration::from_secs(90),
            overrides: Vec::new(),
            first_ports: Vec::new(),
            name: "single".into(),
            security: None,
            features: Vec::new(),
            telemetry: false,
            server_jvm: false,
        }
    }

    /// Three combined nodes (a quorum of three controllers); default replication factor 3,
    /// min ISR 2.
    pub fn three() -> Self {
        ClusterSpec {
            nodes: 3,
            name: "three".into(),
            ..ClusterSpec::single()
        }
    }

    /// Each broker's JVM heap (`-Xms`/`-Xmx`), MiB.
    pub fn heap_mb(mut self, mb: u32) -> Self {
        self.heap_mb = mb;
        self
    }

    /// Runs the brokers' JVMs as a deployment would (G1 and both JIT compilers) instead of the
    /// test settings (the serial collector and the client compiler alone, which halve a test
    /// cluster's CPU at a few thousand records a second but cap its rate). For benchmarks,
    /// whose figures include the broker's own speed.
    pub fn server_jvm(mut self) -> Self {
        self.server_jvm = true;
        self
    }

    /// Clients connect to the brokers directly (no fault proxy).
    pub fn without_proxy(mut self) -> Self {
        self.proxied = false;
        self
    }

    /// How long start-up may take before it fails with the logs.
    pub fn start_timeout(mut self, d: Duration) -> Self {
        self.start_timeout = d;
        self
    }

    /// A broker setting (`server.properties` line) added after the test settings.
    pub fn broker_config(mut self, key: &str, value: &str) -> Self {
        self.overrides.push((key.into(), value.into()));
        self
    }

    /// The first start attempt gives node 1 these ports (internal, controller, client) before
    /// free ones: for the test that a port already taken is retried with another.
    pub fn try_ports_first(mut self, ports: &[u16]) -> Self {
        self.first_ports = ports.to_vec();
        self
    }

    /// Gives every node the secured client listeners of [`Listener`] too (TLS, mTLS, SASL
    /// over plaintext and TLS, OAUTHBEARER, two bad certificates), with `pki`'s certificates.
    pub fn secured(mut self, pki: Arc<TestPki>) -> Self {
        self.security = Some(pki);
        self
    }

    /// Formats the cluster with feature `name` finalized at `level` (StorageTool `format
    /// --feature name=level`) instead of the release's default; [`KafkaCluster::start`] then
    /// waits until every node's ApiVersions answer reports that level finalized, and fails
    /// when one reports another.
    pub fn feature(mut self, name: &str, level: i16) -> Self {
        self.features.retain(|(n, _)| n != name);
        self.features.push((name.into(), level));
        self
    }

    /// [`feature`](Self::feature) `transaction.version`: 1 (classic transactions,
    /// AddPartitionsToTxn) or 2 (KIP-890: partitions added by Produce v12, EndTxn v5 bumps
    /// the epoch). Kafka 4.1 formats at 2 by default.
    pub fn transaction_version(self, level: i16) -> Self {
        self.feature(TRANSACTION_VERSION, level)
    }

    /// The feature levels [`feature`](Self::feature) asked for.
    pub fn features(&self) -> &[(String, i16)] {
        &self.features
    }

    /// Gives every node the test tier's KIP-714 receiver (`tests/kafka/java/TelemetryReporter.java`,
    /// a metrics reporter implementing `ClientTelemetry`): the brokers then offer
    /// GetTelemetrySubscriptions and PushTelemetry, and each node writes the pushes it accepts
    /// to [`KafkaCluster::telemetry_file`] (read them with [`KafkaCluster::telemetry_pushes`]).
    /// Clients push only what a client-metrics subscription asks for
    /// ([`Ctl::client_metrics`](super::ctl::Ctl::client_metrics)).
    pub fn telemetry_reporter(mut self) -> Self {
        self.telemetry = true;
        self
    }

    /// A name for the cluster's directory and threads.
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.into();
        self
    }
}

/// The telemetry reporter's class (`tests/kafka/java/TelemetryReporter.java`).
pub const TELEMETRY_REPORTER_CLASS: &str = "TelemetryReporter";

/// The broker setting naming the telemetry reporter's file.
const TELEMETRY_FILE_CONFIG: &str = "telemetry.reporter.file";

/// The feature name of the transaction protocol level (KIP-890, KIP-1022).
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// Why a cluster did not start, or an operation on it failed.
#[derive(Debug)]
pub enum LaunchError {
    /// The Kafka distribution is not available (tools missing, Maven failed).
    Dist(String),
    /// A node exited during start-up; its log says why.
    NodeExited {
        /// Node id.
        node: i32,
        /// Its exit status.
        status: String,
        /// The end of its log.
        log: String,
    },
    /// Start-up did not finish in time.
    Timeout {
        /// What was awaited.
        waiting_for: String,
        /// The end of every node's log.
        logs: String,
    },
    /// Every attempt found a port taken.
    PortsTaken {
        /// Attempts made.
        attempts: usize,
    },
    /// Something else (I/O, KafkaCtl).
    Other(String),
}

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchError::Dist(e) => write!(f, "{e}"),
            LaunchError::NodeExited { node, status, log } => {
                write!(
                    f,
                    "Kafka node {node} exited during start-up ({status}); its log:\n{log}"
                )
            }
            LaunchError::Timeout { waiting_for, logs } => {
                write!(f, "timed out waiting for {waiting_for}; node logs:\n{logs}")
            }
            LaunchError::PortsTaken { attempts } => {
                write!(f, "a port was taken in each of {attempts} start attempts")
            }
            LaunchError::Other(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LaunchError {}

fn other(e: impl std::fmt::Display) -> LaunchError {
    LaunchError::Other(e.to_string())
}

/// A node's ports.
#[derive(Debug, Clone, Copy)]
struct Ports {
    internal: u16,
    controller: u16,
    client: u16,
    /// The secured listeners', indexed like [`Listener::ALL`] (unused when not secured).
    secured: [u16; SECURED_PORTS],
}

struct Node {
    id: i32,
    ports: Ports,
    props: PathBuf,
    log: PathBuf,
    jvm: Mutex<Option<Jvm>>,
    /// SIGSTOPped by `pause`.
    paused: std::sync::atomic::AtomicBool,
}

/// A running cluster. See the module docs.
pub struct KafkaCluster {
    spec: ClusterSpec,
    dir: PathBuf,
    dist: &'static Dist,
    nodes: Vec<Node>,
    proxies: Vec<Proxy>,
    ctl: Option<Ctl>,
    spawner: Spawner,
    startup: Duration,
    attempts: usize,
}

/// A KRaft cluster id: 16 random bytes, base64url without padding (as `random-uuid` prints).
fn cluster_id() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        ^ ((std::process::id() as u64) << 32);
    let mut bytes = [0u8; 16];
    for b in &mut bytes {
        // splitmix64
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        *b = (z ^ (z >> 31)) as u8;
    }
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut out = String::new();
    for b in bytes {
        bits = (bits << 8) | b as u32;
        nbits += 8;
        while nbits >= 6 {
            nbits -= 6;
            out.push(ALPHABET[((bits >> nbits) & 63) as usize] as char);
        }
    }
    if nbits > 0 {
        out.push(ALPHABET[((bits << (6 - nbits)) & 63) as usize] as char);
    }
    // Kafka refuses ids starting with '-' on the command line.
    if out.starts_with('-') {
        out.replace_range(0..1, "A");
    }
    out
}

/// `n` listeners on free ports: their ports are distinct, and stay taken (by us) until the
/// listeners are dropped, just before the brokers bind them.
fn hold_free_ports(n: usize) -> std::io::Result<(Vec<TcpListener>, Vec<u16>)> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    let ports = listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect::<std::io::Result<_>>()?;
    Ok((listeners, ports))
}

/// Removes the directories of clusters whose test process is gone.
fn remove_stale_dirs(clusters: &Path) {
    let Ok(entries) = fs::read_dir(clusters) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| p != std::process::id() && !pid_alive(p)) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Poll interval of the readiness checks (a broker's state can only be asked, not awaited).
const POLL: Duration = Duration::from_millis(100);

impl KafkaCluster {
    /// Starts a cluster as `spec` says and waits until every node lists every broker. Start-up
    /// that fails (a node exits, the timeout passes) ends with the nodes' logs in the error; a
    /// port found taken is retried with fresh ports (three attempts).
    pub fn start(spec: ClusterSpec) -> Result<KafkaCluster, LaunchError> {
        let dist = Dist::shared().map_err(LaunchError::Dist)?;
        let clusters = dist.clusters_dir();
        remove_stale_dirs(&clusters);
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = clusters.join(format!(
            "{}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed),
            spec.name
        ));
        let started = Instant::now();
        let spawner = Spawner::new(&spec.name).map_err(other)?;
        let mut cluster = KafkaCluster {
            spec,
            dir,
            dist,
            nodes: Vec::new(),
            proxies: Vec::new(),
            ctl: None,
            spawner,
            startup: Duration::ZERO,
            attempts: 0,
        };
        const ATTEMPTS: usize = 3;
        loop {
            cluster.attempts += 1;
            match cluster.try_start() {
                Ok(()) => break,
                Err(StartFailure::PortTaken) if cluster.attempts < ATTEMPTS => {
                    cluster.stop_nodes();
                    continue;
                }
                Err(StartFailure::PortTaken) => {
                    return Err(LaunchError::PortsTaken {
                        attempts: cluster.attempts,
                    })
                }
                Err(StartFailure::Failed(e)) => return Err(e),
            }
        }
        let ctl_log = cluster.dir.join("kafkactl.log");
        let ctl = ctl::start(
            &cluster.spawner,
            dist,
            &cluster.internal_bootstrap(),
            &ctl_log,
        )
        .map_err(LaunchError::Other)?;
        cluster.ctl = Some(ctl);
        cluster.wait_features()?;
        cluster.startup = started.elapsed();
        Ok(cluster)
    }

    /// Waits until every node's ApiVersions answer reports each feature level the spec asked
    /// for finalized; fails at once when a node reports another level (the format did not
    /// take), or after the start timeout.
    fn wait_features(&self) -> Result<(), LaunchError> {
        if self.spec.features.is_empty() {
            return Ok(());
        }
        let mut wrong = None;
        let mut last = String::new();
        let done = self.wait_until(
            &format!("every node to report finalized features {:?}", self.spec.features),
            self.spec.start_timeout,
            None,
            || {
                self.nodes.iter().all(|n| match api_versions(addr(n.ports.internal), Duration::from_secs(2)) {
                    Ok(v) => self.spec.features.iter().all(|(name, level)| {
                        match v.finalized.get(name) {
                            Some(&(_, max)) if max == *level => true,
                            Some(&(_, max)) if v.finalized_epoch >= 0 => {
                                wrong = Some(format!(
                                    "node {} reports {name} finalized at {max}, the format asked {level}",
                                    n.id
                                ));
                                true
                            }
                            // Level 0 is not listed among the finalized features.
                            None if *level == 0 && v.finalized_epoch >= 0 => true,
                            _ => {
                                last = format!("node {}: finalized {:?}", n.id, v.finalized);
                                false
                            }
                        }
                    }),
                    Err(e) => {
                        last = e;
                        false
                    }
                })
            },
        );
        if let Some(w) = wrong {
            return Err(LaunchError::Other(w));
        }
        done.map_err(|e| match e {
            LaunchError::Timeout { waiting_for, logs } => LaunchError::Timeout {
                waiting_for: format!("{waiting_for}; last: {last}"),
                logs,
            },
            e => e,
        })
    }

    /// Node `id`'s finalized features (name -> (min, max level)) as its ApiVersions answer
    /// reports them now, through its internal listener.
    pub fn finalized_features(&self, id: i32) -> Result<BTreeMap<String, (i16, i16)>, LaunchError> {
        let addr = self.internal_addr(id);
        api_versions(addr, Duration::from_secs(5))
            .map(|v| v.finalized)
            .map_err(other)
    }

    /// The finalized `transaction.version` every running node reports (0 when none lists
    /// it); fails when the nodes disagree or none answers.
    pub fn transaction_version(&self) -> Result<i16, LaunchError> {
        let mut levels = BTreeMap::new();
        for id in self.live_nodes() {
            let f = self.finalized_features(id)?;
            levels.insert(id, f.get(TRANSACTION_VERSION).map_or(0, |&(_, max)| max));
        }
        let mut distinct: Vec<i16> = levels.values().copied().collect();
        distinct.dedup();
        match distinct.as_slice() {
            [one] => Ok(*one),
            [] => Err(other("no live node answers ApiVersions")),
            _ => Err(other(format!(
                "the nodes disagree on {TRANSACTION_VERSION}: {levels:?}"
            ))),
        }
    }

    fn try_start(&mut self) -> Result<(), StartFailure> {
        let _ = fs::remove_dir_all(&self.dir);
        fs::create_dir_all(&self.dir).map_err(|e| StartFailure::Failed(other(e)))?;
        let n = self.spec.nodes;
        let per_node = if self.spec.security.is_some() {
            3 + SECURED_PORTS
        } else {
            3
        };
        let (held, mut ports) =
            hold_free_ports(per_node * n).map_err(|e| StartFailure::Failed(other(e)))?;
        if self.attempts == 1 {
            for (i, p) in self.spec.first_ports.iter().enumerate().take(3) {
                ports[i] = *p;
            }
        }
        let ports: Vec<Ports> = (0..n)
            .map(|i| {
                let mine = &ports[per_node * i..per_node * (i + 1)];
                let mut secured = [0; SECURED_PORTS];
                if mine.len() > 3 {
                    secured.copy_from_slice(&mine[3..]);
                }
                Ports {
                    internal: mine[0],
                    controller: mine[1],
                    client: mine[2],
                    secured,
                }
            })
            .collect();
        self.proxies.clear();
        if self.spec.proxied {
            for (i, p) in ports.iter().enumerate() {
                let proxy = Proxy::start(i as i32 + 1, addr(p.client))
                    .map_err(|e| StartFailure::Failed(other(e)))?;
                self.proxies.push(proxy);
            }
        }
        // The proxies have their own ports now; free the brokers'.
        drop(held);
        self.nodes = (0..n)
            .map(|i| Node {
                id: i as i32 + 1,
                ports: ports[i],
                props: self.dir.join(format!("node-{}.properties", i + 1)),
                log: self.dir.join(format!("node-{}.log", i + 1)),
                jvm: Mutex::new(None),
                paused: Default::default(),
            })
            .collect();
        for node in &self.nodes {
            fs::write(&node.props, self.properties(node))
                .map_err(|e| StartFailure::Failed(other(e)))?;
        }
        self.format().map_err(StartFailure::Failed)?;
        for node in &self.nodes {
            let jvm = self.launch(node).map_err(StartFailure::Failed)?;
            *node.jvm.lock().unwrap() = Some(jvm);
        }
        let deadline = Instant::now() + self.spec.start_timeout;
        let all: Vec<i32> = self.node_ids();
        loop {
            for node in &self.nodes {
                self.check_alive(node)?;
            }
            if self.nodes.iter().all(|n| self.node_lists(n, &all)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(StartFailure::Failed(LaunchError::Timeout {
                    waiting_for: format!(
                        "every node to list brokers {all:?} in Metadata ({:?})",
                        self.spec.start_timeout
                    ),
                    logs: self.logs(60),
                }));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Fails with the node's log when it has exited (a port taken: retried by the caller).
    fn check_alive(&self, node: &Node) -> Result<(), StartFailure> {
        let mut jvm = node.jvm.lock().unwrap();
        let Some(status) = jvm.as_mut().and_then(Jvm::exited) else {
            return Ok(());
        };
        let log = log_tail(&node.log, 80);
        if log.contains("Address already in use") {
            return Err(StartFailure::PortTaken);
        }
        Err(StartFailure::Failed(LaunchError::NodeExited {
            node: node.id,
            status: status.to_string(),
            log,
        }))
    }

    /// Whether `node` answers Metadata on both its internal and its client address listing
    /// exactly `brokers`.
    fn node_lists(&self, node: &Node, brokers: &[i32]) -> bool {
        let lists = |a: SocketAddr| {
            metadata(a, &[], Duration::from_secs(2))
                .map(|v| v.brokers.keys().copied().collect::<Vec<_>>() == brokers)
                .unwrap_or(false)
        };
        lists(addr(node.ports.internal)) && lists(self.client_addr(node.id))
    }

    fn properties(&self, node: &Node) -> String {
        let n = self.spec.nodes;
        let voters: Vec<String> = self
            .nodes
            .iter()
            .map(|m| format!("{}@127.0.0.1:{}", m.id, m.ports.controller))
            .collect();
        let rf = n.min(3);
        let min_isr = if n >= 3 { 2 } else { 1 };
        let advertised_client = self.client_addr(node.id).port();
        let p = node.ports;
        let mut s = String::new();
        let mut set = |k: &str, v: &str| {
            let _ = writeln!(s, "{k}={v}");
        };
        set("process.roles", "broker,controller");
        set("node.id", &node.id.to_string());
        set("controller.quorum.voters", &voters.join(","));
        let mut listeners = vec![
            format!("INTERNAL://127.0.0.1:{}", p.internal),
            format!("CONTROLLER://127.0.0.1:{}", p.controller),
            format!("CLIENT://127.0.0.1:{}", p.client),
        ];
        let mut advertised = vec![
            format!("INTERNAL://127.0.0.1:{}", p.internal),
            format!("CLIENT://127.0.0.1:{advertised_client}"),
        ];
        let mut protocols = vec![
            "CONTROLLER:PLAINTEXT".to_string(),
            "INTERNAL:PLAINTEXT".to_string(),
            "CLIENT:PLAINTEXT".to_string(),
        ];
        if self.spec.security.is_some() {
            let (secured, map) = listeners::listener_entries(&p.secured);
            listeners.extend(secured.iter().cloned());
            advertised.extend(secured);
            protocols.extend(map);
        }
        set("listeners", &listeners.join(","));
        set("advertised.listeners", &advertised.join(","));
        set("controller.listener.names", "CONTROLLER");
        set("inter.broker.listener.name", "INTERNAL");
        set("listener.security.protocol.map", &protocols.join(","));
        set(
            "log.dirs",
            &self
                .dir
                .join(format!("node-{}-data", node.id))
                .display()
                .to_string(),
        );
        set("default.replication.factor", &rf.to_string());
        set("min.insync.replicas", &min_isr.to_string());
        set("offsets.topic.replication.factor", &rf.to_string());
        set("offsets.topic.num.partitions", "1");
        set("transaction.state.log.replication.factor", &rf.to_string());
        set("transaction.state.log.min.isr", &min_isr.to_string());
        set(
            "share.coordinator.state.topic.replication.factor",
            &rf.to_string(),
        );
        set(
            "share.coordinator.state.topic.min.isr",
            &min_isr.to_string(),
        );
        set("group.initial.rebalance.delay.ms", "0");
        // Tests create their topics; a producer's Metadata must not create them (the tests of a
        // topic created late and of a topic deleted mid-stream depend on it).
        set("auto.create.topics.enable", "false");
        // Deterministic leaders: only the tests move them.
        set("auto.leader.rebalance.enable", "false");
        // Fast fail-over: a killed broker is fenced (its partitions move) after 3 s, a stopped
        // follower leaves the ISR after 5 s.
        set("broker.heartbeat.interval.ms", "500");
        set("broker.session.timeout.ms", "3000");
        set("replica.lag.time.max.ms", "5000");
        set("controller.quorum.election.timeout.ms", "1000");
        set("controller.quorum.fetch.timeout.ms", "2000");
        set("num.network.threads", "2");
        set("num.io.threads", "4");
        set("num.partitions", "1");
        set("log.segment.bytes", "67108864");
        // Keep every record. Tests write records stamped in 2023 (timestamps that must read
        // back as written); under the default 7-day `log.retention.ms` a broker deletes them
        // at its first retention check, 30 s after it starts and every 5 minutes after, even
        // in the active segment, and a read-back after that tick finds them gone.
        set("log.retention.ms", "-1");
        if self.spec.telemetry {
            set("metric.reporters", TELEMETRY_REPORTER_CLASS);
            set(
                TELEMETRY_FILE_CONFIG,
                &self.telemetry_file(node.id).display().to_string(),
            );
        }
        for (k, v) in &self.spec.overrides {
            set(k, v);
        }
        if let Some(pki) = &self.spec.security {
            listeners::listener_settings(pki, &mut s);
        }
        s
    }

    fn java_args(&self, heap: &str, main: &[&str]) -> Vec<String> {
        let mut a = vec![format!("-Xms{heap}"), format!("-Xmx{heap}")];
        if self.spec.server_jvm {
            a.extend([
                "-XX:+UseG1GC".into(),
                "-XX:MaxGCPauseMillis=20".into(),
                "-XX:ParallelGCThreads=2".into(),
                "-XX:ConcGCThreads=1".into(),
            ]);
        } else {
            // The test brokers carry a few thousand records a second, start often (restarts
            // are a fault), and share two cores with another cluster (see `shared_cluster`):
            // the client compiler alone and the serial collector. `kafka_faults` one test at
            // a time took 548 CPU-s with G1 and both compilers, 294 with these.
            a.extend(["-XX:+UseSerialGC".into(), "-XX:TieredStopAtLevel=1".into()]);
        }
        a.extend([
            "-XX:+ExitOnOutOfMemoryError".into(),
            "-Djava.awt.headless=true".into(),
            format!("-Dlog4j2.configurationFile={}", self.dist.log4j.display()),
            "-cp".into(),
            if self.spec.telemetry {
                self.dist.plugin_classpath()
            } else {
                self.dist.classpath()
            },
        ]);
        a.extend(main.iter().map(|s| s.to_string()));
        a
    }

    /// Formats every node's storage with one cluster id (the StorageTool JVMs in parallel).
    fn format(&self) -> Result<(), LaunchError> {
        let id = cluster_id();
        let mut tools = Vec::new();
        for node in &self.nodes {
            let props = node.props.display().to_string();
            let mut main = vec![
                "kafka.tools.StorageTool".to_string(),
                "format".into(),
                "-t".into(),
                id.clone(),
                "-c".into(),
                props,
                "--ignore-formatted".into(),
            ];
            for (name, level) in &self.spec.features {
                main.push("--feature".into());
                main.push(format!("{name}={level}"));
            }
            let main: Vec<&str> = main.iter().map(String::as_str).collect();
            let args = self.java_args("128m", &main);
            let jvm = Jvm::start(
                &self.spawner,
                &format!("format node {}", node.id),
                &args,
                &node.log,
                false,
            )
            .map_err(other)?;
            tools.push((node, jvm));
        }
        for (node, mut jvm) in tools {
            match jvm.wait_exit(Duration::from_secs(60)) {
                Some(s) if s.success() => {}
                status => {
                    return Err(LaunchError::NodeExited {
                        node: node.id,
                        status: format!("storage format: {status:?}"),
                        log: log_tail(&node.log, 40),
                    })
                }
            }
        }
        Ok(())
    }

    fn launch(&self, node: &Node) -> Result<Jvm, LaunchError> {
        let heap = format!("{}m", self.spec.heap_mb);
        let args = self.java_args(&heap, &["kafka.Kafka", &node.props.display().to_string()]);
        Jvm::start(
            &self.spawner,
            &format!("node {}", node.id),
            &args,
            &node.log,
            false,
        )
        .map_err(other)
    }

    fn stop_nodes(&mut self) {
        for node in &self.nodes {
            if let Some(mut j) = node.jvm.lock().unwrap().take() {
                j.kill();
            }
        }
    }

    /// Node `id`, or an error naming the ids there are.
    fn try_node(&self, id: i32) -> Result<&Node, LaunchError> {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .ok_or_else(|| other(format!("no node {id} (nodes {:?})", self.node_ids())))
    }

    fn node(&self, id: i32) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id} (nodes {:?})", self.node_ids()))
    }

    // ---- addresses ----

    /// Node ids, `1..=n`.
    pub fn node_ids(&self) -> Vec<i32> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// Where clients reach node `id`: its proxy, or its client listener when unproxied.
    pub fn client_addr(&self, id: i32) -> SocketAddr {
        match self.proxies.get(id as usize - 1) {
            Some(p) => p.addr(),
            None => addr(self.node(id).ports.client),
        }
    }

    /// Node `id`'s internal listener (never proxied).
    pub fn internal_addr(&self, id: i32) -> SocketAddr {
        addr(self.node(id).ports.internal)
    }

    /// The producers' bootstrap list (through the proxies).
    pub fn bootstrap(&self) -> Vec<(String, u16)> {
        self.node_ids()
            .into_iter()
            .map(|id| ("127.0.0.1".to_string(), self.client_addr(id).port()))
            .collect()
    }

    /// [`bootstrap`](Self::bootstrap) as `host:port,...`.
    pub fn bootstrap_servers(&self) -> String {
        self.bootstrap()
            .iter()
            .map(|(h, p)| format!("{h}:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The internal listeners, `host:port,...`: for read-back and admin, never proxied.
    pub fn internal_bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.ports.internal))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The fault proxy in front of node `id` (panics when the cluster is unproxied).
    pub fn proxy(&self, id: i32) -> &Proxy {
        self.proxies
            .get(id as usize - 1)
            .expect("this cluster runs without proxies")
    }

    /// Every proxy.
    pub fn proxies(&self) -> &[Proxy] {
        &self.proxies
    }

    /// KafkaCtl (admin and Java read-back).
    pub fn ctl(&self) -> &Ctl {
        self.ctl
            .as_ref()
            .expect("KafkaCtl runs once the cluster started")
    }

    // ---- figures ----

    /// How long [`start`](Self::start) took (formatting, JVMs, readiness, KafkaCtl).
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// Start attempts made (more than 1 when a port was taken).
    pub fn start_attempts(&self) -> usize {
        self.attempts
    }

    /// Each running node's RSS in KiB.
    pub fn rss_kib(&self) -> BTreeMap<i32, u64> {
        self.nodes
            .iter()
            .filter_map(|n| Some((n.id, n.jvm.lock().unwrap().as_ref()?.rss_kib()?)))
            .collect()
    }

    /// The pids of every JVM running now (nodes and KafkaCtl).
    pub fn pids(&self) -> Vec<u32> {
        let mut p: Vec<u32> = self
            .nodes
            .iter()
            .filter_map(|n| n.jvm.lock().unwrap().as_ref().map(Jvm::pid))
            .collect();
        if let Some(c) = &self.ctl {
            p.push(c.pid());
        }
        p
    }

    /// The last `lines` lines of every node's log (and KafkaCtl's).
    pub fn logs(&self, lines: usize) -> String {
        let mut s = String::new();
        for n in &self.nodes {
            let _ = writeln!(
                s,
                "---- node {} ({}):\n{}",
                n.id,
                n.log.display(),
                log_tail(&n.log, lines)
            );
        }
        let ctl_log = self.dir.join("kafkactl.log");
        if ctl_log.exists() {
            let _ = writeln!(s, "---- KafkaCtl:\n{}", log_tail(&ctl_log, lines / 2));
        }
        s
    }

    /// The file node `id`'s telemetry reporter appends the pushes it accepts to (see
    /// [`ClusterSpec::telemetry_reporter`]; absent until the first push).
    pub fn telemetry_file(&self, id: i32) -> PathBuf {
        self.dir.join(format!("telemetry-node-{id}.log"))
    }

    /// The pushes node `id`'s telemetry reporter recorded so far, in the order it accepted them
    /// (none when nothing was pushed, or the cluster has no reporter).
    pub fn telemetry_pushes(&self, id: i32) -> Result<Vec<TelemetryPush>, String> {
        telemetry::read_pushes(&self.telemetry_file(id))
    }

    /// The cluster's directory (logs, data).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The certificates of a [`secured`](ClusterSpec::secured) cluster (its CA, the client
    /// certificate and key, a CA that signed nothing).
    pub fn pki(&self) -> Option<&TestPki> {
        self.spec.security.as_deref()
    }
}

enum StartFailure {
    PortTaken,
    Failed(LaunchError),
}

mod faults;
mod listeners;
mod topics;

use listeners::SECURED_PORTS;
pub use listeners::{Listener, PLAIN_USER};

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        if panicking {
            eprintln!(
                "Kafka cluster {} dropped during a panic; broker logs:\n{}",
                self.dir.display(),
                self.logs(60)
            );
        }
        if let Some(c) = &self.ctl {
            c.stop();
        }
        self.stop_nodes();
        self.proxies.clear();
        if !panicking {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Describes `topic` through the admin API (for messages and assertions).
pub fn describe(cluster: &KafkaCluster, topic: &str) -> Result<Vec<PartitionInfo>, String> {
    cluster.ctl().describe(topic)
}

/// The Java consumer's view of `topic` (see [`Ctl::java_read_back`]).
pub fn java_read_back(
    cluster: &KafkaCluster,
    topic: &str,
    partitions: i32,
) -> Result<Vec<Consumed>, String> {
    cluster.ctl().java_read_back(topic, partitions)
}

/// What every node says now, through its internal listener (nodes that do not answer are
/// left out).
pub(crate) fn views(cluster: &KafkaCluster, topics: &[&str]) -> Vec<(i32, ClusterView)> {
    cluster
        .nodes
        .iter()
        .filter_map(|n| {
            Some((
                n.id,
                metadata(addr(n.ports.internal), topics, Duration::from_secs(2)).ok()?,
            ))
        })
        .collect()
}
