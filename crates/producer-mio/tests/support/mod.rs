//! What the mio drivers' tests share: a 3-broker mock cluster, a varied record workload, a
//! hang guard, and a record-by-record comparison against what an independent consumer
//! (`producer-tests`' read-back: librdkafka, CRC checks on) reads back.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use producer_core::{Delivery, Record, RecordMetadata};
use producer_tests::rdkafka::Timestamp;
use producer_tests::{read_back_all, MockKafka};

pub const PARTITIONS: i32 = 6;
/// The LogAppendTime librdkafka's mock puts in every successful Produce response.
pub const MOCK_LOG_APPEND_TIME: i64 = 1234;
/// How long a test may go on before it counts as hung. Not a timing assertion: a test that
/// works finishes long before, whatever the machine's load.
pub const HANG_GUARD: Duration = Duration::from_secs(120);
/// How long reading back may take before the read-back gives up (and the count check fails).
const READ_BACK_LIMIT: Duration = Duration::from_secs(60);

/// Runs `test` on a thread of its own and waits for it to end: its panic is the test's, and a
/// test still running after [`HANG_GUARD`] fails as hung instead of hanging the suite.
pub fn with_hang_guard(test: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let runner = std::thread::spawn(move || {
        test();
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(HANG_GUARD) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = runner.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the test hung"),
    }
}

/// A running mock cluster with one topic of 6 partitions.
pub struct Cluster {
    pub mock: MockKafka,
    pub bootstrap: String,
}

impl Cluster {
    pub fn start(topic: &str) -> Cluster {
        init_tracing();
        let mock = MockKafka::new(3, &[(topic, PARTITIONS)]).expect("mock cluster");
        let bootstrap = mock.bootstrap_servers();
        Cluster { mock, bootstrap }
    }

    /// The bootstrap list as `(host, port)` pairs; with `localhost_first`, the first host is
    /// written `localhost` so the driver has to resolve it.
    pub fn servers(&self, localhost_first: bool) -> Vec<(String, u16)> {
        self.bootstrap
            .split(',')
            .enumerate()
            .map(|(i, s)| {
                let (host, port) = s.rsplit_once(':').expect("host:port");
                let host = if i == 0 && localhost_first {
                    "localhost".to_owned()
                } else {
                    host.to_owned()
                };
                (host, port.parse().expect("port"))
            })
            .collect()
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Record `i` of the workload: keyed, null-keyed and explicitly partitioned records, null
/// values, headers (some null), explicit and missing timestamps, varied sizes.
pub fn record(topic: &str, i: usize) -> Record {
    let mut r = Record::new(
        topic,
        Bytes::from(format!("value-{i}-{}", "x".repeat(i % 200))),
    );
    if i % 10 != 0 {
        r = r.with_key(Bytes::from(format!("key-{}", i % 97)));
    }
    if i % 7 == 0 {
        r = r.with_partition((i % PARTITIONS as usize) as i32);
    }
    if i % 50 == 1 {
        r.value = None;
    }
    if i % 3 != 0 {
        r = r.with_header("idx", Some(Bytes::from(i.to_string())));
        if i % 5 == 0 {
            r = r.with_header("null", None);
        }
        r = r.with_header("idx", Some(Bytes::from_static(b"dup")));
    }
    if i % 4 != 0 {
        r = r.with_timestamp(1_700_000_000_000 + i as i64);
    }
    r
}

/// The reports of `n` records sent with their index as opaque: each must be a success and
/// come once.
pub struct Reports {
    slots: Vec<Option<RecordMetadata>>,
    /// Reports taken so far.
    pub received: usize,
}

impl Reports {
    pub fn new(n: usize) -> Self {
        Reports {
            slots: vec![None; n],
            received: 0,
        }
    }

    /// Takes one report: panics on a failure or a second report for the same record.
    pub fn take(&mut self, d: Delivery<usize>) {
        let meta = d
            .result
            .unwrap_or_else(|e| panic!("record {} failed: {}", d.opaque, e.error));
        assert!(
            self.slots[d.opaque].replace(meta).is_none(),
            "two reports for record {}",
            d.opaque
        );
        self.received += 1;
    }

    /// Every record's report, in record order; panics if one is missing.
    pub fn all(self) -> Vec<RecordMetadata> {
        self.slots
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.unwrap_or_else(|| panic!("record {i} got no report")))
            .collect()
    }
}

/// Checks the reports against each other and against what a consumer reads back: every
/// record is at the partition and offset of its report, with the same key, value, headers and
/// timestamp; offsets per partition are contiguous from 0 and follow the send order.
/// `ts_window` bounds the timestamps the driver filled in.
pub fn verify(
    bootstrap: &str,
    topic: &str,
    records: &[Record],
    reports: &[RecordMetadata],
    ts_window: (i64, i64),
) {
    assert_eq!(records.len(), reports.len());
    let mut at: HashMap<(i32, i64), usize> = HashMap::new();
    let mut last_offset: HashMap<i32, i64> = HashMap::new();
    for (i, (rec, meta)) in records.iter().zip(reports).enumerate() {
        assert_eq!(&*meta.topic, topic);
        assert!((0..PARTITIONS).contains(&meta.partition));
        if let Some(p) = rec.partition {
            assert_eq!(
                meta.partition, p,
                "record {i} ignored its explicit partition"
            );
        }
        assert!(meta.offset >= 0, "record {i} has no offset");
        // The mock answers every Produce with LogAppendTime 1234 (a quirk of librdkafka's mock
        // handler), which the core faithfully reports; the record's own timestamp is checked
        // against what the consumer reads.
        if meta.timestamp != MOCK_LOG_APPEND_TIME {
            match rec.timestamp {
                Some(ts) => assert_eq!(meta.timestamp, ts, "record {i}"),
                None => assert!(
                    (ts_window.0..=ts_window.1).contains(&meta.timestamp),
                    "record {i}"
                ),
            }
        }
        // Per-partition order: later sends to one partition get higher offsets.
        if let Some(prev) = last_offset.insert(meta.partition, meta.offset) {
            assert!(
                meta.offset > prev,
                "record {i} at offset {} after {prev} in partition {}",
                meta.offset,
                meta.partition
            );
        }
        assert!(
            at.insert((meta.partition, meta.offset), i).is_none(),
            "two records at one offset"
        );
    }
    let mut per_partition: HashMap<i32, i64> = HashMap::new();
    for &(p, _) in at.keys() {
        *per_partition.entry(p).or_default() += 1;
    }
    for (&p, &count) in &per_partition {
        assert_eq!(
            last_offset[&p],
            count - 1,
            "offsets of partition {p} are not contiguous from 0"
        );
    }

    let consumed = read_back_all(bootstrap, topic, PARTITIONS, READ_BACK_LIMIT);
    assert_eq!(
        consumed.len(),
        records.len(),
        "read back {} records, {} were produced",
        consumed.len(),
        records.len()
    );
    let mut seen = vec![false; records.len()];
    for msg in consumed {
        let i = *at.get(&(msg.partition, msg.offset)).unwrap_or_else(|| {
            panic!(
                "unexpected record at partition {} offset {}",
                msg.partition, msg.offset
            )
        });
        assert!(!seen[i], "record {i} read twice");
        seen[i] = true;
        let rec = &records[i];
        assert_eq!(msg.key.as_deref(), rec.key.as_deref(), "key of record {i}");
        assert_eq!(
            msg.value.as_deref(),
            rec.value.as_deref(),
            "value of record {i}"
        );
        let expected: Vec<(String, Option<Vec<u8>>)> = rec
            .headers
            .iter()
            .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
            .collect();
        assert_eq!(msg.headers, expected, "headers of record {i}");
        let Timestamp::CreateTime(ts) = msg.timestamp else {
            panic!("record {i} has {:?}", msg.timestamp)
        };
        match rec.timestamp {
            Some(expected) => assert_eq!(ts, expected, "timestamp of record {i}"),
            None => assert!(
                (ts_window.0..=ts_window.1).contains(&ts),
                "record {i}: timestamp {ts} filled by the driver is outside {ts_window:?}"
            ),
        }
        if reports[i].timestamp != MOCK_LOG_APPEND_TIME {
            assert_eq!(ts, reports[i].timestamp, "reported timestamp of record {i}");
        }
    }
}

/// Logs to the test output (shown for failing tests) when `RUST_LOG` is set.
pub fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_test_writer()
            .try_init();
    }
}
