//! Apache Kafka itself in the tests: a pinned Kafka 4.x from Maven Central (see [`dist`]), a
//! launcher for a 1- or 3-node KRaft cluster of JVMs ([`cluster`]), the test suite's TCP fault
//! proxy in front of each broker ([`proxy`]), admin operations and the Java consumer through
//! one long-lived JVM per cluster ([`ctl`]), a decoder for every request the producer sends
//! ([`probe`]), and what a broker's KIP-714 receiver recorded of the client telemetry pushed
//! to it ([`telemetry`]).
//!
//! Suites get a cluster with [`shared_cluster`]: one cluster per test binary (process),
//! started on first use, handed to one test at a time (tests of a binary run on parallel
//! threads; two cores cannot carry several clusters), and brought back to health between
//! tests. Each real-Kafka test starts with
//!
//! ```ignore
//! let Some(kafka) = producer_tests::kafka::shared_cluster(ClusterSpec::three) else { return };
//! ```
//!
//! which returns `None` only when [`SKIP_ENV`] (`SKIP_KAFKA_TESTS=1`) opts out, after printing
//! that the tier was skipped. Without the opt-out, a missing Java or Maven fails the test with
//! what to install.

pub mod cluster;
pub mod ctl;
pub mod dist;
pub mod probe;
pub mod process;
pub mod proxy;
pub mod rolling;
pub mod suite;
pub mod telemetry;
pub mod txn;
pub mod wire;

use std::io::Write;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

pub use cluster::{
    ClusterSpec, KafkaCluster, LaunchError, Listener, PLAIN_USER, TRANSACTION_VERSION,
};
pub use dist::{Dist, SKIP_ENV};
pub use proxy::{Direction, Proxy, ProxyStats};

/// Whether the real-Kafka tier is opted out (`SKIP_KAFKA_TESTS` set to anything but `0` or
/// empty). When it is, prints so on the test process's stderr, past libtest's output capture,
/// once per process.
pub fn skip_requested() -> bool {
    let skip = std::env::var(SKIP_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
    if skip {
        static SAID: OnceLock<()> = OnceLock::new();
        SAID.get_or_init(|| {
            let exe = std::env::current_exe()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_default();
            let _ = writeln!(
                std::io::stderr(),
                "\n**** SKIPPED: the real-Kafka tests of {exe} did not run ({SKIP_ENV} is set) ****\n"
            );
        });
    }
    skip
}

/// A unique topic name in this process (`{prefix}-{n}`).
pub fn unique_topic(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// How long [`shared_cluster`] waits for the cluster to be healthy between tests.
const HEAL_TIMEOUT: Duration = Duration::from_secs(120);

/// The process's shared cluster, locked for one test. Dereferences to [`KafkaCluster`].
/// Dropping it (the test ends) prints the broker logs if the test is failing, and brings the
/// cluster back to health for the next test.
pub struct TestCluster {
    cluster: &'static KafkaCluster,
    topics: Vec<String>,
    _lock: MutexGuard<'static, ()>,
}

impl TestCluster {
    /// Creates a topic (see [`KafkaCluster::create_topic`]) that the health check between
    /// tests waits on; panics with the logs if it fails.
    pub fn topic(
        &mut self,
        prefix: &str,
        partitions: i32,
        rf: i16,
        configs: &[(&str, &str)],
    ) -> String {
        let name = unique_topic(prefix);
        self.cluster
            .create_topic(&name, partitions, rf, configs)
            .unwrap_or_else(|e| panic!("create topic {name}: {e}"));
        self.topics.push(name.clone());
        name
    }
}

impl Deref for TestCluster {
    type Target = KafkaCluster;
    fn deref(&self) -> &KafkaCluster {
        self.cluster
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- the test failed; Kafka cluster {} logs:\n{}",
                self.cluster.dir().display(),
                self.cluster.logs(60)
            );
        }
        let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
        if let Err(e) = self.cluster.ensure_healthy(&topics, HEAL_TIMEOUT) {
            eprintln!("---- the Kafka cluster did not recover after the test: {e}");
        }
    }
}

/// The cluster shared by the tests of this process, locked for the calling test; `None` when
/// the tier is opted out (see the module docs). The first call starts it with `spec()`; later
/// calls reuse it (whatever their `spec`). Panics with a clear message when Java or Maven is
/// missing or the cluster cannot start.
pub fn shared_cluster(spec: fn() -> ClusterSpec) -> Option<TestCluster> {
    if skip_requested() {
        return None;
    }
    static CLUSTER: OnceLock<Result<KafkaCluster, String>> = OnceLock::new();
    // A test that panicked poisons the lock; the next one heals the cluster and goes on.
    let lock = exclusive();
    let cluster = CLUSTER
        .get_or_init(|| {
            let c = KafkaCluster::start(spec()).map_err(|e| e.to_string())?;
            println!(
                "Kafka {} cluster of {} nodes started in {:?} (RSS KiB {:?})",
                dist::kafka_version(),
                c.node_ids().len(),
                c.startup_time(),
                c.rss_kib()
            );
            Ok(c)
        })
        .as_ref()
        .unwrap_or_else(|e| panic!("the real-Kafka tier cannot run: {e}"));
    cluster
        .ensure_healthy(&[], HEAL_TIMEOUT)
        .unwrap_or_else(|e| panic!("the shared Kafka cluster is not healthy: {e}"));
    Some(TestCluster {
        cluster,
        topics: Vec::new(),
        _lock: lock,
    })
}

static LOCK: Mutex<()> = Mutex::new(());

/// Serialises the cluster-heavy tests of a process: hold the guard for the whole test. (Taken
/// by [`shared_cluster`]; tests that start their own clusters take it themselves.)
pub fn exclusive() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts a cluster of the test's own (hold [`exclusive`] first) (not shared) unless the tier is opted out; panics with
/// the error (logs included) when it cannot start.
pub fn own_cluster(spec: ClusterSpec) -> Option<KafkaCluster> {
    if skip_requested() {
        return None;
    }
    Some(
        KafkaCluster::start(spec).unwrap_or_else(|e| panic!("the real-Kafka tier cannot run: {e}")),
    )
}
