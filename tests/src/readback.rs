//! Independent read-back with librdkafka's consumer (`check.crcs=true`): what a producer wrote,
//! as another client sees it. Used against the mock cluster and against Apache Kafka alike
//! (give it a bootstrap list; against Kafka, the unproxied internal listener).
//!
//! * [`read_back`]: one topic until a number of records arrived;
//! * [`read_back_all`]: one topic until every partition reports its end;
//! * [`read_back_topics`] / [`read_back_each`]: several topics with one consumer, every
//!   partition up to the high watermark asked first (for when production has finished);
//! * [`wait_for_log_size`]: waits until the logs hold a number of records (acks=0 runs);
//! * [`read_back_isolated`]: one topic at an [`Isolation`] level (transactions: committed
//!   records only, or aborted and open ones too), every partition to its end.
//!
//! The consumers of the other functions run at librdkafka's default isolation level,
//! `read_committed`.
//!
//! Corrupt data (CRC mismatch, bad compression, an invalid record) panics: a test must fail
//! loudly on it. Transient errors (a broker down, a leader moving) are left to librdkafka's own
//! retries.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, Timestamp, TopicPartitionList};

/// A record read back by an independent consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumed {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset in the partition log.
    pub offset: i64,
    /// Key (`None` for a null key).
    pub key: Option<Vec<u8>>,
    /// Value (`None` for a null value).
    pub value: Option<Vec<u8>>,
    /// Headers in record order: (name, value or `None` for a null value).
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Record timestamp as the consumer reports it (create time unless the topic uses
    /// log-append time).
    pub timestamp: Timestamp,
}

/// How long a consumer waits in one fetch when there is nothing new: short, because every read
/// back ends at the end of the log.
const FETCH_WAIT_MS: &str = "20";

fn consumer(bootstrap: &str, partition_eof: bool) -> BaseConsumer {
    consumer_at(bootstrap, partition_eof, Isolation::ReadCommitted)
}

/// The isolation level of a read-back (`isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Committed transactional records and non-transactional ones, up to the last stable
    /// offset; aborted records and control markers are skipped.
    ReadCommitted,
    /// Every record up to the high watermark, aborted and still-open transactions included
    /// (control markers skipped).
    ReadUncommitted,
}

impl Isolation {
    /// librdkafka's `isolation.level` value.
    pub fn as_config(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

fn consumer_at(bootstrap: &str, partition_eof: bool, isolation: Isolation) -> BaseConsumer {
    ClientConfig::new()
        .set("isolation.level", isolation.as_config())
        .set("bootstrap.servers", bootstrap)
        // `assign` needs no group, but librdkafka wants a group id for a consumer handle.
        .set("group.id", "producer-tests-read-back")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("check.crcs", "true")
        .set("fetch.wait.max.ms", FETCH_WAIT_MS)
        .set(
            "enable.partition.eof",
            if partition_eof { "true" } else { "false" },
        )
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create()
        .expect("create read-back consumer")
}

fn assign_from_start(c: &BaseConsumer, topics: &[(&str, i32)]) {
    let mut tpl = TopicPartitionList::new();
    for &(topic, partitions) in topics {
        for p in 0..partitions {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .expect("add partition");
        }
    }
    c.assign(&tpl).expect("assign partitions");
}

pub(crate) fn to_consumed<M: Message>(m: &M) -> Consumed {
    let headers = m
        .headers()
        .map(|h| {
            h.iter()
                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                .collect()
        })
        .unwrap_or_default();
    Consumed {
        topic: m.topic().to_string(),
        partition: m.partition(),
        offset: m.offset(),
        key: m.key().map(<[u8]>::to_vec),
        value: m.payload().map(<[u8]>::to_vec),
        headers,
        timestamp: m.timestamp(),
    }
}

/// Errors that mean the data on the broker is bad: reading back must fail loudly on them.
pub fn is_data_error(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::BadMessage
            | RDKafkaErrorCode::BadCompression
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::UnsupportedForMessageFormat
    )
}

/// Panics on corrupt data; returns the partition of an end-of-partition event.
fn handle_error(e: KafkaError) -> Option<i32> {
    match e {
        KafkaError::PartitionEOF(p) => Some(p),
        KafkaError::MessageConsumption(code) | KafkaError::Global(code) if is_data_error(code) => {
            panic!("read back: broker data rejected by the consumer: {code:?}")
        }
        // Transient (broker down, leader moved, ...): librdkafka retries by itself.
        _ => None,
    }
}

/// Reads `topic` (partitions `0..partitions`, each from its beginning) until `expected`
/// records were read or `timeout` passed, and returns them sorted by `(partition, offset)`.
/// It stops as soon as `expected` records are in: to also see extra records (duplicates), use
/// [`read_back_all`].
pub fn read_back(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: usize,
    timeout: Duration,
) -> Vec<Consumed> {
    let c = consumer(bootstrap, false);
    assign_from_start(&c, &[(topic, partitions)]);
    let deadline = Instant::now() + timeout;
    let mut out = Vec::with_capacity(expected);
    while out.len() < expected {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match c.poll(left.min(Duration::from_millis(100))) {
            Some(Ok(m)) => out.push(to_consumed(&m)),
            Some(Err(e)) => {
                handle_error(e);
            }
            None => {}
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    out
}

/// Reads all of `topic` (partitions `0..partitions`) from the beginning until every partition
/// has reached its end, or `timeout` passed; returns the records sorted by `(partition, offset)`.
/// Use it to assert exact contents (no duplicates, no extras).
pub fn read_back_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Vec<Consumed> {
    let c = consumer(bootstrap, true);
    assign_from_start(&c, &[(topic, partitions)]);
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut at_end = BTreeSet::new();
    while (at_end.len() as i32) < partitions {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match c.poll(left.min(Duration::from_millis(100))) {
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                out.push(to_consumed(&m));
            }
            Some(Err(e)) => {
                if let Some(p) = handle_error(e) {
                    at_end.insert(p);
                }
            }
            None => {}
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    out
}

/// Reads every partition of `topics` from its beginning up to its high watermark (asked first:
/// call it when nothing is being produced any more) with one consumer, and returns the records
/// sorted by `(topic, partition, offset)`. Panics when `timeout` passes first.
pub fn read_back_topics(
    bootstrap: &str,
    topics: &[(&str, i32)],
    timeout: Duration,
) -> Vec<Consumed> {
    let mut out = Vec::new();
    read_back_each(bootstrap, topics, timeout, |c| out.push(c));
    out.sort_by(|a, b| (&a.topic, a.partition, a.offset).cmp(&(&b.topic, b.partition, b.offset)));
    out
}

/// [`read_back_topics`] without keeping the records: hands each to `f`, in offset order per
/// partition.
pub fn read_back_each(
    bootstrap: &str,
    topics: &[(&str, i32)],
    timeout: Duration,
    mut f: impl FnMut(Consumed),
) {
    let c = consumer(bootstrap, false);
    let deadline = Instant::now() + timeout;
    // (topic, partition) -> the offset to reach.
    let mut todo: HashMap<(String, i32), i64> = HashMap::new();
    for &(t, n) in topics {
        for p in 0..n {
            let (lo, hi) = watermarks(&c, t, p, deadline);
            if hi > lo {
                todo.insert((t.to_owned(), p), hi);
            }
        }
    }
    assign_from_start(&c, topics);
    // (topic, partition) -> the offset after the last record read.
    let mut reached: HashMap<(String, i32), i64> = HashMap::new();
    loop {
        while !todo.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "read back timed out; partitions not at their end: {todo:?}"
            );
            match c.poll(left.min(Duration::from_millis(100))) {
                Some(Ok(m)) => {
                    let key = (m.topic().to_owned(), m.partition());
                    reached.insert(key.clone(), m.offset() + 1);
                    if todo.get(&key).is_some_and(|&hi| m.offset() + 1 >= hi) {
                        todo.remove(&key);
                    }
                    f(to_consumed(&m));
                }
                Some(Err(e)) => {
                    handle_error(e);
                }
                None => {}
            }
        }
        // A leader elected meanwhile may have answered a high watermark behind the old
        // leader's until its followers caught up: read on while the watermark moved.
        for &(t, n) in topics {
            for p in 0..n {
                let (lo, hi) = watermarks(&c, t, p, deadline);
                if hi
                    > reached
                        .get(&(t.to_owned(), p))
                        .copied()
                        .unwrap_or(0)
                        .max(lo)
                {
                    todo.insert((t.to_owned(), p), hi);
                }
            }
        }
        if todo.is_empty() {
            return;
        }
    }
}

/// The low and high watermarks of `topic`-`partition`, asked again until `deadline` while the
/// broker cannot answer yet: a leader elected moments ago answers OFFSET_NOT_AVAILABLE until
/// its high watermark has caught up (a read-back after the leader moves of
/// `reauthentication_under_leader_moves_loses_and_reorders_nothing` failed on it), and one
/// being elected, NOT_LEADER or LEADER_NOT_AVAILABLE. Panics with the last error after it.
fn watermarks(c: &BaseConsumer, topic: &str, partition: i32, deadline: Instant) -> (i64, i64) {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match c.fetch_watermarks(topic, partition, left.min(Duration::from_secs(10))) {
            Ok(w) => return w,
            Err(e) if !left.is_zero() => {
                eprintln!("read back: watermarks of {topic}-{partition}: {e}; asking again");
                // A poll interval, not a stand-in for an event: the broker's readiness cannot
                // be waited on.
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("read back: watermarks of {topic}-{partition}: {e}"),
        }
    }
}

/// The number of records the partitions of `topics` hold (high minus low watermark), as one
/// consumer sees it now.
pub fn log_size(bootstrap: &str, topics: &[(&str, i32)]) -> i64 {
    let c = consumer(bootstrap, false);
    let mut total = 0;
    for &(t, n) in topics {
        for p in 0..n {
            if let Ok((lo, hi)) = c.fetch_watermarks(t, p, Duration::from_secs(5)) {
                total += hi - lo;
            }
        }
    }
    total
}

/// Polls the partitions' watermarks until they hold at least `expected` records in total, or
/// `timeout` passes (then it returns, and the caller's comparison reports what is missing).
pub fn wait_for_log_size(
    bootstrap: &str,
    topics: &[(&str, i32)],
    expected: i64,
    timeout: Duration,
) {
    let c = consumer(bootstrap, false);
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let mut total = 0;
        for &(t, n) in topics {
            for p in 0..n {
                if let Ok((lo, hi)) = c.fetch_watermarks(t, p, Duration::from_secs(5)) {
                    total += hi - lo;
                }
            }
        }
        if total >= expected {
            return;
        }
        // A poll interval, not a stand-in for an event: watermarks cannot be waited on.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Why [`read_back_isolated`] returned no read-back.
#[derive(Debug)]
pub enum ReadBackError {
    /// Not every partition reached its end in time.
    Timeout {
        /// The timeout.
        timeout: Duration,
        /// Partitions that did not report their end.
        not_at_end: Vec<i32>,
        /// Records read until then.
        read: usize,
    },
    /// librdkafka could not be set up (assignment refused).
    Kafka(KafkaError),
}

impl std::fmt::Display for ReadBackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadBackError::Timeout {
                timeout,
                not_at_end,
                read,
            } => write!(
                f,
                "read back timed out ({timeout:?}) with {read} records; partitions not at their end: {not_at_end:?}"
            ),
            ReadBackError::Kafka(e) => write!(f, "read back: {e}"),
        }
    }
}

impl std::error::Error for ReadBackError {}

/// Reads all of `topic` (partitions `0..partitions`) from the beginning at `isolation`, until
/// every partition reports its end with nothing read after it (librdkafka's end-of-partition
/// event: the high watermark for `ReadUncommitted`, the last stable offset for
/// `ReadCommitted`), and returns the records sorted by `(partition, offset)`, with their
/// offsets, keys and values (CRCs checked; control markers are never returned).
///
/// `read_committed` ends at the last stable offset: a transaction whose markers are not yet
/// written is not seen. EndTxn is answered before the markers are written; to read a commit
/// that just completed, wait for the partitions to be stable first
/// ([`crate::kafka::KafkaCluster::wait_stable`]).
pub fn read_back_isolated(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    isolation: Isolation,
    timeout: Duration,
) -> Result<Vec<Consumed>, ReadBackError> {
    let c = consumer_at(bootstrap, true, isolation);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .map_err(ReadBackError::Kafka)?;
    }
    c.assign(&tpl).map_err(ReadBackError::Kafka)?;
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut at_end = BTreeSet::new();
    while (at_end.len() as i32) < partitions {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadBackError::Timeout {
                timeout,
                not_at_end: (0..partitions).filter(|p| !at_end.contains(p)).collect(),
                read: out.len(),
            });
        }
        match c.poll(left.min(Duration::from_millis(100))) {
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                out.push(to_consumed(&m));
            }
            Some(Err(e)) => {
                if let Some(p) = handle_error(e) {
                    at_end.insert(p);
                }
            }
            None => {}
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    Ok(out)
}
