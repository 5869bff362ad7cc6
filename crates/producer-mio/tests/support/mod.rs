//! What the mio drivers' tests share: a 3-broker mock cluster, a varied record workload; the
//! hang guard and the record-by-record comparison against what an independent consumer reads
//! back are `producer-tests`' (shared with the tokio driver's tests).
#![allow(dead_code)]

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use producer_core::{Delivery, Record, RecordMetadata};
use producer_tests::MockKafka;

#[allow(unused_imports)]
pub use producer_tests::running::{with_hang_guard, HANG_GUARD};
#[allow(unused_imports)]
pub use producer_tests::verify::{assert_burst_take, verify_delivered};

pub const PARTITIONS: i32 = 6;
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

/// Logs to the test output (shown for failing tests) when `RUST_LOG` is set.
pub fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_test_writer()
            .try_init();
    }
}
