//! The transaction tier's support: 3-node clusters formatted at a chosen `transaction.version`
//! (one per level per test process, shared by that level's tests, [`txn_cluster`]), the
//! partition ends a transaction moves (high watermark, last stable offset, [`PartitionEnds`]),
//! the coordinators of a transactional id and a group, and the consume side of a
//! consume-transform-produce loop with librdkafka: an input topic filled with
//! [`fill_topic`], read from a group's committed offsets by an [`InputConsumer`]
//! (`read_committed`, manual assignment: a "simple" group whose offsets are committed through
//! the producer's transaction with generation -1 and member ""), and the group's committed
//! offsets ([`committed_offsets`]). [`check_exactly_once`] sets a read-back beside what was
//! expected: every record exactly once, in order per partition.
//!
//! The read-back at an isolation level is [`crate::readback::read_back_isolated`].

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::cluster::{ClusterSpec, KafkaCluster, LaunchError};
use super::wire::{find_coordinator, list_offsets, CoordinatorType, OffsetSpec};
use super::{cluster_slot, dist, skip_requested, ClusterSlot};
use crate::readback::{is_data_error, Consumed};

/// How often the waits here ask the brokers again (offsets can only be asked, not awaited).
const POLL: Duration = Duration::from_millis(100);

/// How long [`TxnCluster`]'s drop waits for the cluster to be healthy again.
const HEAL_TIMEOUT: Duration = Duration::from_secs(120);

/// How often the broker looks for transactions past their timeout (default 10 s): the
/// timeout tests wait for its abort.
pub const ABORT_TIMED_OUT_CHECK_MS: u32 = 500;

/// The cluster of the transaction tests at `transaction.version` `tv`: three combined nodes
/// (replication factor 3, min ISR 2), the transaction state log in one partition (so one
/// broker coordinates every transactional id: a test can kill it), timed-out transactions
/// aborted within [`ABORT_TIMED_OUT_CHECK_MS`].
pub fn txn_spec(tv: i16) -> ClusterSpec {
    ClusterSpec::three()
        .name(&format!("txn-tv{tv}"))
        .transaction_version(tv)
        .broker_config("transaction.state.log.num.partitions", "1")
        .broker_config(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            &ABORT_TIMED_OUT_CHECK_MS.to_string(),
        )
}

/// Which cluster runs and who uses it (see [`txn_cluster`]).
#[derive(Default)]
struct Slot {
    current: Option<(i16, Arc<KafkaCluster>)>,
    busy: bool,
    /// Tests waiting, per level.
    waiting: BTreeMap<i16, usize>,
    /// Levels whose cluster could not start, with why.
    failed: BTreeMap<i16, String>,
}

static SLOT: Mutex<Option<Slot>> = Mutex::new(None);
static FREED: Condvar = Condvar::new();

fn slot() -> MutexGuard<'static, Option<Slot>> {
    SLOT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The transaction cluster at `transaction.version` `tv` ([`txn_spec`]), locked for the
/// calling test; `None` when the real-Kafka tier is opted out. One cluster runs at a time in a
/// process: a test asking for the other level waits until no test of the running level is
/// waiting, then the running cluster is stopped and the other started. libtest starts tests
/// in name order, so name them by level (`tv1_*`, `tv2_*`): each level's cluster starts once.
/// Dropping the guard prints the logs when the test failed and brings the cluster back to
/// health. Panics when the cluster cannot start (and at once for the next tests of that
/// level).
pub fn txn_cluster(tv: i16) -> Option<TxnCluster> {
    if skip_requested() {
        return None;
    }
    let mut s = slot();
    let st = s.get_or_insert_with(Slot::default);
    *st.waiting.entry(tv).or_default() += 1;
    loop {
        let st = s.as_mut().expect("slot");
        let free = !st.busy
            && match &st.current {
                None => true,
                Some((cur, _)) => *cur == tv || st.waiting.get(cur).copied().unwrap_or(0) == 0,
            };
        if free {
            break;
        }
        s = FREED.wait(s).unwrap_or_else(|e| e.into_inner());
    }
    let st = s.as_mut().expect("slot");
    *st.waiting.get_mut(&tv).expect("counted") -= 1;
    if let Some(why) = st.failed.get(&tv) {
        let why = why.clone();
        drop(s);
        panic!("the transaction cluster at TV{tv} could not start: {why}");
    }
    st.busy = true;
    let running = match &st.current {
        Some((cur, c)) if *cur == tv => Some(c.clone()),
        _ => None,
    };
    let cluster = match running {
        Some(c) => c,
        None => {
            // Stop the other level's cluster first: one transaction cluster per process (the
            // cluster slot this test takes may let another test's cluster run beside it).
            let old = st.current.take();
            drop(s);
            if let Some((old_tv, old)) = old {
                println!("stopping the TV{old_tv} transaction cluster");
                drop(old);
            }
            match KafkaCluster::start(txn_spec(tv)) {
                Ok(c) => {
                    println!(
                        "Kafka {} transaction cluster TV{tv} ({} nodes) started in {:?} \
                         (finalized transaction.version {:?})",
                        dist::kafka_version(),
                        c.node_ids().len(),
                        c.startup_time(),
                        c.transaction_version()
                    );
                    let c = Arc::new(c);
                    let mut s = slot();
                    s.as_mut().expect("slot").current = Some((tv, c.clone()));
                    c
                }
                Err(e) => {
                    let why = e.to_string();
                    let mut s = slot();
                    let st = s.as_mut().expect("slot");
                    st.failed.insert(tv, why.clone());
                    st.busy = false;
                    FREED.notify_all();
                    drop(s);
                    panic!("the real-Kafka tier cannot run: {why}");
                }
            }
        }
    };
    if let Err(e) = cluster.ensure_healthy(&[], HEAL_TIMEOUT) {
        release();
        panic!("the TV{tv} transaction cluster is not healthy: {e}");
    }
    Some(TxnCluster {
        cluster,
        tv,
        topics: Vec::new(),
        _slot: cluster_slot(),
    })
}

fn release() {
    let mut s = slot();
    if let Some(st) = s.as_mut() {
        st.busy = false;
    }
    FREED.notify_all();
}

/// A transaction cluster locked for one test (see [`txn_cluster`]). Dereferences to
/// [`KafkaCluster`].
pub struct TxnCluster {
    cluster: Arc<KafkaCluster>,
    tv: i16,
    topics: Vec<String>,
    _slot: ClusterSlot,
}

impl TxnCluster {
    /// The `transaction.version` the cluster was formatted at (and reports finalized).
    pub fn tv(&self) -> i16 {
        self.tv
    }

    /// Creates a topic (see [`KafkaCluster::create_topic`]) that the health check after the
    /// test waits on; panics with the logs if it fails.
    pub fn topic(
        &mut self,
        prefix: &str,
        partitions: i32,
        rf: i16,
        configs: &[(&str, &str)],
    ) -> String {
        let name = super::unique_topic(&format!("{prefix}-tv{}", self.tv));
        self.cluster
            .create_topic(&name, partitions, rf, configs)
            .unwrap_or_else(|e| panic!("create topic {name}: {e}"));
        self.topics.push(name.clone());
        name
    }
}

impl Deref for TxnCluster {
    type Target = KafkaCluster;
    fn deref(&self) -> &KafkaCluster {
        &self.cluster
    }
}

impl Drop for TxnCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- the test failed; Kafka cluster {} (TV{}) logs:\n{}",
                self.cluster.dir().display(),
                self.tv,
                self.cluster.logs(60)
            );
        }
        let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
        if let Err(e) = self.cluster.ensure_healthy(&topics, HEAL_TIMEOUT) {
            eprintln!("---- the Kafka cluster did not recover after the test: {e}");
        }
        release();
    }
}

// ---- partition ends and coordinators ----

/// The ends of one partition, as its leader reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionEnds {
    /// The partition.
    pub partition: i32,
    /// The log start offset.
    pub log_start: i64,
    /// The high watermark (the end `read_uncommitted` reads to).
    pub high_watermark: i64,
    /// The last stable offset (the end `read_committed` reads to): below the high watermark
    /// while a transaction is open on the partition.
    pub last_stable: i64,
}

impl PartitionEnds {
    /// No transaction open: the last stable offset has reached the high watermark.
    pub fn stable(&self) -> bool {
        self.last_stable == self.high_watermark
    }
}

/// Why [`KafkaCluster::wait_ends`] gave up.
#[derive(Debug)]
pub enum EndsError {
    /// The cluster could not be asked (no leader known, no live broker).
    Cluster(LaunchError),
    /// The condition did not hold within the timeout; the last ends seen.
    Timeout {
        /// What was awaited.
        what: String,
        /// The timeout.
        timeout: Duration,
        /// The ends last seen (empty when none could be read).
        last: Vec<PartitionEnds>,
        /// The last error, when the last attempt failed.
        error: Option<String>,
    },
}

impl fmt::Display for EndsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndsError::Cluster(e) => write!(f, "{e}"),
            EndsError::Timeout {
                what,
                timeout,
                last,
                error,
            } => write!(
                f,
                "timed out ({timeout:?}) waiting for {what}; last ends {last:?}, last error {error:?}"
            ),
        }
    }
}

impl std::error::Error for EndsError {}

impl KafkaCluster {
    /// The log start, high watermark and last stable offset of every partition of `topic`,
    /// asked of each partition's leader (ListOffsets at both isolation levels, on the internal
    /// listener). Fails when a leader is unknown or answers an error.
    pub fn partition_ends(&self, topic: &str) -> Result<Vec<PartitionEnds>, String> {
        let leaders = self.leaders(topic).map_err(|e| e.to_string())?;
        if leaders.is_empty() {
            return Err(format!("no partitions of {topic} known"));
        }
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for (p, l) in leaders {
            by_leader.entry(l).or_default().push(p);
        }
        let mut out = Vec::new();
        let t = Duration::from_secs(2);
        for (leader, parts) in by_leader {
            if !self.node_ids().contains(&leader) {
                return Err(format!("partitions {parts:?} of {topic} have no leader"));
            }
            let a = self.internal_addr(leader);
            let start = list_offsets(a, topic, &parts, OffsetSpec::Earliest, t)?;
            let hw = list_offsets(a, topic, &parts, OffsetSpec::HighWatermark, t)?;
            let ls = list_offsets(a, topic, &parts, OffsetSpec::LastStable, t)?;
            for p in parts {
                let get = |m: &BTreeMap<i32, Result<i64, i16>>, what: &str| match m.get(&p) {
                    Some(Ok(o)) => Ok(*o),
                    Some(Err(code)) => Err(format!(
                        "leader {leader} answered error {code} for the {what} of {topic}-{p}"
                    )),
                    None => Err(format!("leader {leader} left {topic}-{p} out")),
                };
                out.push(PartitionEnds {
                    partition: p,
                    log_start: get(&start, "start")?,
                    high_watermark: get(&hw, "high watermark")?,
                    last_stable: get(&ls, "last stable offset")?,
                });
            }
        }
        out.sort_by_key(|e| e.partition);
        Ok(out)
    }

    /// Asks [`partition_ends`](Self::partition_ends) every 100 ms until `done` holds for
    /// them (a leader moving or down counts as not yet), and returns the ends that satisfied
    /// it.
    pub fn wait_ends(
        &self,
        topic: &str,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&[PartitionEnds]) -> bool,
    ) -> Result<Vec<PartitionEnds>, EndsError> {
        let deadline = Instant::now() + timeout;
        let mut last = Vec::new();
        let mut error;
        loop {
            match self.partition_ends(topic) {
                Ok(ends) => {
                    if done(&ends) {
                        return Ok(ends);
                    }
                    last = ends;
                    error = None;
                }
                Err(e) => error = Some(e),
            }
            if Instant::now() > deadline {
                return Err(EndsError::Timeout {
                    what: format!("{what} on {topic}"),
                    timeout,
                    last,
                    error,
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits until no transaction is open on any partition of `topic` (every last stable
    /// offset at its high watermark: the commit or abort markers written), and returns the
    /// ends. A transaction's EndTxn is answered before its markers reach the partitions; wait
    /// on this before a `read_committed` read-back that must see the commit.
    pub fn wait_stable(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<Vec<PartitionEnds>, EndsError> {
        self.wait_ends(topic, "every partition stable (LSO = HW)", timeout, |e| {
            e.iter().all(PartitionEnds::stable)
        })
    }

    /// The node coordinating transactional id `id` (FindCoordinator, asked of each live node
    /// in turn until one answers without an error).
    pub fn transaction_coordinator(&self, id: &str) -> Result<i32, String> {
        self.coordinator(id, CoordinatorType::Transaction)
    }

    /// The node coordinating consumer group `group`.
    pub fn group_coordinator(&self, group: &str) -> Result<i32, String> {
        self.coordinator(group, CoordinatorType::Group)
    }

    fn coordinator(&self, key: &str, kind: CoordinatorType) -> Result<i32, String> {
        let mut last = String::from("no live node");
        for n in self.live_nodes() {
            match find_coordinator(self.internal_addr(n), key, kind, Duration::from_secs(5)) {
                Ok(Ok(id)) => return Ok(id),
                Ok(Err((code, msg))) => last = format!("node {n}: error {code} {msg}"),
                Err(e) => last = format!("node {n}: {e}"),
            }
        }
        Err(format!("no coordinator for {kind:?} {key}: {last}"))
    }
}

// ---- filling an input topic ----

/// Counts librdkafka's delivery reports.
#[derive(Default)]
struct Deliveries {
    ok: AtomicUsize,
    failed: AtomicUsize,
    first_error: Mutex<Option<KafkaError>>,
}

struct FillContext(Arc<Deliveries>);

impl ClientContext for FillContext {}

impl ProducerContext for FillContext {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        match r {
            Ok(_) => {
                self.0.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.0.failed.fetch_add(1, Ordering::Relaxed);
                self.0
                    .first_error
                    .lock()
                    .unwrap()
                    .get_or_insert_with(|| e.clone());
            }
        }
    }
}

/// One input record: its partition, key and value.
pub type InputRecord = (i32, Vec<u8>, Vec<u8>);

/// What [`fill_topic`] wrote: per partition, the (key, value) pairs in log order.
pub type PartitionContents = BTreeMap<i32, Vec<(Vec<u8>, Vec<u8>)>>;

/// Writes `n` records to `topic` with librdkafka's idempotent producer (acks=all; order per
/// partition kept), record `i` being `record(i)` (partition, key, value), and returns what
/// each partition holds afterwards, in order. Fails with librdkafka's first delivery error.
pub fn fill_topic(
    bootstrap: &str,
    topic: &str,
    n: usize,
    record: impl Fn(usize) -> InputRecord,
    timeout: Duration,
) -> Result<PartitionContents, KafkaError> {
    let counts = Arc::new(Deliveries::default());
    let p: BaseProducer<FillContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("compression.type", "lz4")
        .create_with_context(FillContext(counts.clone()))?;
    let mut contents = PartitionContents::new();
    for i in 0..n {
        let (partition, key, value) = record(i);
        let mut rec = BaseRecord::to(topic)
            .partition(partition)
            .key(&key)
            .payload(&value);
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((
                    KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                    r,
                )) => {
                    rec = r;
                    p.poll(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(e),
            }
        }
        contents.entry(partition).or_default().push((key, value));
    }
    p.flush(timeout)?;
    p.poll(Duration::ZERO);
    if let Some(e) = counts.first_error.lock().unwrap().take() {
        return Err(e);
    }
    let ok = counts.ok.load(Ordering::Relaxed);
    if ok != n {
        return Err(KafkaError::Flush(
            rdkafka::types::RDKafkaErrorCode::OperationTimedOut,
        ));
    }
    Ok(contents)
}

// ---- the consume side ----

fn group_consumer(bootstrap: &str, group: &str) -> Result<BaseConsumer, KafkaError> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "earliest")
        .set("check.crcs", "true")
        .set("fetch.wait.max.ms", "20")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create()
}

/// The offsets `group` has committed for partitions `0..partitions` of `topic` (partition ->
/// next offset to read; `None`: nothing committed), as librdkafka's OffsetFetch reports them
/// with `require_stable` (it waits while a transaction holding offsets for the group is
/// open).
pub fn committed_offsets(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<BTreeMap<i32, Option<i64>>, KafkaError> {
    let c = group_consumer(bootstrap, group)?;
    committed_with(&c, topic, partitions, timeout)
}

fn committed_with(
    c: &BaseConsumer,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<BTreeMap<i32, Option<i64>>, KafkaError> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    // librdkafka hands coordinator errors back (a new cluster creates the offsets topic on
    // the first FindCoordinator): ask again until the deadline.
    let deadline = Instant::now() + timeout;
    let got = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match c.committed_offsets(tpl.clone(), left.max(Duration::from_millis(100))) {
            Ok(got) => break got,
            Err(e) if retriable(&e) && !left.is_zero() => std::thread::sleep(POLL),
            Err(e) => return Err(e),
        }
    };
    let mut out = BTreeMap::new();
    for e in got.elements() {
        e.error()?;
        let o = match e.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        };
        out.insert(e.partition(), o);
    }
    Ok(out)
}

/// Coordinator and transport errors of an offset fetch: worth asking again.
fn retriable(e: &KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode as C;
    let code = match e {
        KafkaError::MetadataFetch(c) | KafkaError::OffsetFetch(c) | KafkaError::Global(c) => *c,
        _ => return false,
    };
    matches!(
        code,
        C::NotCoordinator
            | C::CoordinatorNotAvailable
            | C::CoordinatorLoadInProgress
            | C::UnstableOffsetCommit
            | C::RequestTimedOut
            | C::OperationTimedOut
            | C::AllBrokersDown
            | C::BrokerTransportFailure
    )
}

/// The consume side of a consume-transform-produce loop: librdkafka's consumer on an input
/// topic (`read_committed`, CRCs checked), each partition assigned by hand at the offset the
/// group has committed (from the beginning where it has none). It joins no group: the
/// group's offsets are committed through a producer's transaction, as a "simple" group
/// (generation -1, member "").
pub struct InputConsumer {
    bootstrap: String,
    group: String,
    topic: String,
    partitions: i32,
    consumer: BaseConsumer,
    /// Partition -> the next offset to read, for the partitions read since the last
    /// (re)start.
    next: BTreeMap<i32, i64>,
    /// Where each partition started at the last (re)start (`None`: nothing committed).
    started_at: BTreeMap<i32, Option<i64>>,
}

impl InputConsumer {
    /// Assigns every partition of `topic` at `group`'s committed offset.
    pub fn open(
        bootstrap: &str,
        group: &str,
        topic: &str,
        partitions: i32,
        timeout: Duration,
    ) -> Result<InputConsumer, KafkaError> {
        let consumer = group_consumer(bootstrap, group)?;
        let started_at = committed_with(&consumer, topic, partitions, timeout)?;
        let mut tpl = TopicPartitionList::new();
        for (&p, o) in &started_at {
            let at = o.map_or(Offset::Beginning, Offset::Offset);
            tpl.add_partition_offset(topic, p, at)?;
        }
        consumer.assign(&tpl)?;
        Ok(InputConsumer {
            bootstrap: bootstrap.to_string(),
            group: group.to_string(),
            topic: topic.to_string(),
            partitions,
            consumer,
            next: BTreeMap::new(),
            started_at,
        })
    }

    /// Up to `max` records: waits up to `wait` for the first, then takes what arrives
    /// without waiting more than 20 ms between two. Empty when nothing came in `wait`.
    /// Corrupt data panics (as in [`crate::readback`]); transient errors are left to
    /// librdkafka.
    pub fn poll_batch(&mut self, max: usize, wait: Duration) -> Vec<Consumed> {
        let mut out = Vec::new();
        let deadline = Instant::now() + wait;
        while out.len() < max {
            let left = if out.is_empty() {
                deadline.saturating_duration_since(Instant::now())
            } else {
                Duration::from_millis(20)
            };
            if left.is_zero() {
                break;
            }
            match self.consumer.poll(left) {
                Some(Ok(m)) => {
                    self.next.insert(m.partition(), m.offset() + 1);
                    out.push(crate::readback::to_consumed(&m));
                }
                Some(Err(KafkaError::MessageConsumption(code) | KafkaError::Global(code)))
                    if is_data_error(code) =>
                {
                    panic!("input consumer: broker data rejected: {code:?}")
                }
                Some(Err(_)) => {}
                None if !out.is_empty() => break,
                None => {}
            }
        }
        out
    }

    /// The offsets to commit for what has been read since the last (re)start: partition ->
    /// next offset to read.
    pub fn next_offsets(&self) -> &BTreeMap<i32, i64> {
        &self.next
    }

    /// Where each partition started at the last (re)start: the group's committed offsets
    /// then.
    pub fn started_at(&self) -> &BTreeMap<i32, Option<i64>> {
        &self.started_at
    }

    /// Starts over from the group's committed offsets (after an abort, or a producer
    /// restart): a fresh consumer, so nothing read before is delivered again from its queue.
    pub fn rewind(&mut self, timeout: Duration) -> Result<(), KafkaError> {
        *self = InputConsumer::open(
            &self.bootstrap,
            &self.group,
            &self.topic,
            self.partitions,
            timeout,
        )?;
        Ok(())
    }

    /// The group's committed offsets now (see [`committed_offsets`]).
    pub fn committed(&self, timeout: Duration) -> Result<BTreeMap<i32, Option<i64>>, KafkaError> {
        committed_with(&self.consumer, &self.topic, self.partitions, timeout)
    }

    /// librdkafka's group metadata of this consumer (generation -1, member "": it joined
    /// nothing), for librdkafka's own `send_offsets_to_transaction`.
    pub fn group_metadata(&self) -> Option<rdkafka::consumer::ConsumerGroupMetadata> {
        self.consumer.group_metadata()
    }

    /// The group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The input topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }
}

// ---- checks ----

/// Why a read-back is not "every record exactly once, in order per partition".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExactlyOnceError {
    /// A partition holds a different number of records than expected.
    Count {
        /// The partition.
        partition: i32,
        /// Records expected.
        expected: usize,
        /// Records read.
        got: usize,
        /// The first index where they differ (when one does within both).
        first_difference: Option<usize>,
    },
    /// Record `index` of a partition is not the one expected there.
    Differs {
        /// The partition.
        partition: i32,
        /// Its index among the partition's records read.
        index: usize,
        /// Its offset.
        offset: i64,
        /// The key expected there.
        expected_key: Vec<u8>,
        /// The key read.
        got_key: Option<Vec<u8>>,
    },
    /// Records were read from a partition nothing was expected on.
    Unexpected {
        /// The partition.
        partition: i32,
        /// Records read.
        got: usize,
    },
}

impl fmt::Display for ExactlyOnceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
        match self {
            ExactlyOnceError::Count {
                partition,
                expected,
                got,
                first_difference,
            } => write!(
                f,
                "partition {partition}: {got} records read, {expected} expected (first difference at index {first_difference:?})"
            ),
            ExactlyOnceError::Differs {
                partition,
                index,
                offset,
                expected_key,
                got_key,
            } => write!(
                f,
                "partition {partition} record {index} (offset {offset}): key {:?}, expected {:?}",
                got_key.as_deref().map(s),
                s(expected_key)
            ),
            ExactlyOnceError::Unexpected { partition, got } => {
                write!(f, "partition {partition}: {got} records read, none expected")
            }
        }
    }
}

impl std::error::Error for ExactlyOnceError {}

/// Checks that `got` (a read-back, any order) holds exactly `expected`: per partition, the
/// same (key, value) pairs in the same order, none missing, none twice, nothing else.
/// Returns the records checked.
pub fn check_exactly_once(
    expected: &PartitionContents,
    got: &[Consumed],
) -> Result<usize, ExactlyOnceError> {
    let mut read: BTreeMap<i32, Vec<&Consumed>> = BTreeMap::new();
    for c in got {
        read.entry(c.partition).or_default().push(c);
    }
    for v in read.values_mut() {
        v.sort_by_key(|c| c.offset);
    }
    for (&partition, recs) in &read {
        if !expected.contains_key(&partition) && !recs.is_empty() {
            return Err(ExactlyOnceError::Unexpected {
                partition,
                got: recs.len(),
            });
        }
    }
    let mut n = 0;
    for (&partition, want) in expected {
        let have = read.get(&partition).map(Vec::as_slice).unwrap_or_default();
        let same = |(k, v): &(Vec<u8>, Vec<u8>), c: &Consumed| {
            c.key.as_deref() == Some(k.as_slice()) && c.value.as_deref() == Some(v.as_slice())
        };
        let first_difference = want.iter().zip(have).position(|(w, c)| !same(w, c));
        if want.len() != have.len() {
            return Err(ExactlyOnceError::Count {
                partition,
                expected: want.len(),
                got: have.len(),
                first_difference,
            });
        }
        if let Some(index) = first_difference {
            return Err(ExactlyOnceError::Differs {
                partition,
                index,
                offset: have[index].offset,
                expected_key: want[index].0.clone(),
                got_key: have[index].key.clone(),
            });
        }
        n += want.len();
    }
    Ok(n)
}
