//! Apache Kafka itself in the tests: a pinned Kafka 4.x from Maven Central (see [`dist`]), a
//! launcher for a 1- or 3-node KRaft cluster of JVMs ([`cluster`]), the test suite's TCP fault
//! proxy in front of each broker ([`proxy`]), admin operations and the Java consumer through
//! one long-lived JVM per cluster ([`ctl`]), a decoder for every request the producer sends
//! ([`probe`]), and what a broker's KIP-714 receiver recorded of the client telemetry pushed
//! to it ([`telemetry`]).
//!
//! Suites get a cluster with [`shared_cluster`]: a pool of clusters per test binary (process),
//! each started on first use, lent to one test at a time and brought back to health between
//! tests. At most [`CLUSTER_SLOTS_ENV`] (2 by default) cluster-heavy tests of a process run at
//! once ([`cluster_slot`]), so a binary starts at most that many clusters; `1` runs its tests
//! one by one on one cluster. Each real-Kafka test starts with
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
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
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

/// The process's shared cluster, lent to one test. Dereferences to [`KafkaCluster`].
/// Dropping it (the test ends) prints the broker logs if the test is failing, brings the
/// cluster back to health and returns it to the process's pool for the next test.
pub struct TestCluster {
    cluster: &'static KafkaCluster,
    topics: Vec<String>,
    _slot: ClusterSlot,
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
        // Back to the pool before the slot is released (a field, dropped after this), so a
        // test that takes the slot finds the cluster idle rather than starting another.
        pool().idle.push(self.cluster);
    }
}

/// The shared clusters of this process: idle ones, how many were started, and why one could
/// not start (every later test then fails at once with it).
struct Pool {
    idle: Vec<&'static KafkaCluster>,
    started: usize,
    failed: Option<String>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    idle: Vec::new(),
    started: 0,
    failed: None,
});

fn pool() -> MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A shared cluster of this process, lent to the calling test; `None` when the tier is opted
/// out (see the module docs). The test first takes a [`cluster_slot`]; it then gets an idle
/// cluster, or, when every cluster started is lent, starts one more with `spec()`. Slots bound
/// the clusters a process starts; every test of a binary passes the same `spec`. Panics with a
/// clear message when Java or Maven is missing or a cluster cannot start.
pub fn shared_cluster(spec: fn() -> ClusterSpec) -> Option<TestCluster> {
    if skip_requested() {
        return None;
    }
    let slot = cluster_slot();
    let mut p = pool();
    if let Some(why) = &p.failed {
        let why = why.clone();
        drop(p);
        panic!("the real-Kafka tier cannot run: {why}");
    }
    let cluster = match p.idle.pop() {
        Some(c) => c,
        None => {
            p.started += 1;
            let n = p.started;
            drop(p);
            match KafkaCluster::start(spec()) {
                Ok(c) => {
                    println!(
                        "Kafka {} cluster #{n} of {} nodes started in {:?} (RSS KiB {:?})",
                        dist::kafka_version(),
                        c.node_ids().len(),
                        c.startup_time(),
                        c.rss_kib()
                    );
                    // Lives as long as the process (its JVMs die with it: see `process`).
                    &*Box::leak(Box::new(c))
                }
                Err(e) => {
                    let why = e.to_string();
                    pool().failed = Some(why.clone());
                    panic!("the real-Kafka tier cannot run: {why}");
                }
            }
        }
    };
    if let Err(e) = cluster.ensure_healthy(&[], HEAL_TIMEOUT) {
        pool().idle.push(cluster);
        panic!("the shared Kafka cluster is not healthy: {e}");
    }
    Some(TestCluster {
        cluster,
        topics: Vec::new(),
        _slot: slot,
    })
}

/// The environment variable setting how many cluster-heavy tests of one process run at once
/// ([`cluster_slot`]); 2 when unset.
pub const CLUSTER_SLOTS_ENV: &str = "KAFKA_TEST_CLUSTER_SLOTS";

fn slots_total() -> usize {
    static TOTAL: OnceLock<usize> = OnceLock::new();
    *TOTAL.get_or_init(|| {
        std::env::var(CLUSTER_SLOTS_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(2)
    })
}

static SLOTS_TAKEN: Mutex<usize> = Mutex::new(0);
static SLOT_FREED: Condvar = Condvar::new();

/// One of the process's slots for a cluster-heavy test, held for the whole test and released
/// on drop.
#[must_use = "the slot is released when dropped: hold it for the whole test"]
pub struct ClusterSlot(());

impl Drop for ClusterSlot {
    fn drop(&mut self) {
        *SLOTS_TAKEN.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        SLOT_FREED.notify_one();
    }
}

/// Waits for one of the process's slots for cluster-heavy tests ([`CLUSTER_SLOTS_ENV`], 2 by
/// default) and takes it: at most that many such tests of a process run at once, each on a
/// cluster of its own. Taken by [`shared_cluster`]; tests that start their own clusters take it
/// themselves, first.
pub fn cluster_slot() -> ClusterSlot {
    let mut taken = SLOTS_TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    while *taken >= slots_total() {
        taken = SLOT_FREED.wait(taken).unwrap_or_else(|e| e.into_inner());
    }
    *taken += 1;
    ClusterSlot(())
}

/// Starts a cluster of the test's own (take a [`cluster_slot`] first), not shared, unless the
/// tier is opted out; panics with the error (logs included) when it cannot start.
pub fn own_cluster(spec: ClusterSpec) -> Option<KafkaCluster> {
    if skip_requested() {
        return None;
    }
    Some(
        KafkaCluster::start(spec).unwrap_or_else(|e| panic!("the real-Kafka tier cannot run: {e}")),
    )
}
