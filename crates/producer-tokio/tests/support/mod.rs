//! What the tokio driver's tests share: a mock cluster with one topic, record workloads, and
//! reading back with an independent consumer (`producer-tests`' read-back, librdkafka with CRC
//! checks; its comparison of reports with what is read back is shared with the mio driver's
//! tests).
#![allow(dead_code)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use producer_tests::{read_back_all, Consumed, MockKafka};

#[allow(unused_imports)]
pub use producer_tests::verify::{assert_burst_take, verify_delivered, MOCK_LOG_APPEND_TIME};
use producer_tokio::{
    Config, ConfigBuilder, DeliveryError, DeliveryFuture, ProduceError, Record, RecordMetadata,
};

pub const TOPIC: &str = "driver-test";
pub const PARTITIONS: i32 = 6;
/// How long reading back may take before the read-back gives up (and the count check fails).
const READ_BACK_LIMIT: Duration = Duration::from_secs(60);

/// A mock cluster of 3 brokers with [`TOPIC`].
pub fn cluster() -> MockKafka {
    init_tracing();
    MockKafka::new(3, &[(TOPIC, PARTITIONS)]).expect("mock cluster")
}

/// `RUST_LOG=producer_tokio=debug cargo test -- --nocapture` shows the driver's events.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A config builder for the mock cluster.
pub fn builder(mock: &MockKafka) -> ConfigBuilder {
    Config::builder(mock.bootstrap())
}

/// A port on localhost with nothing listening (connections are refused).
pub fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The wall clock in ms, to bound the timestamps the driver fills in.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Polls a delivery future once: whether it has already resolved.
pub fn ready_now(f: &mut DeliveryFuture) -> Option<Result<RecordMetadata, DeliveryError>> {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(f).poll(&mut cx) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    }
}

/// Record `i` of the varied workload: keyed and null-keyed, some explicitly partitioned, half
/// with their own timestamp, headers (null and empty ones too), sizes varying.
pub fn test_record(i: usize, base_ts: i64) -> Record {
    let mut r = Record::new(TOPIC, format!("value-{i}-{}", "x".repeat(i % 50)));
    if i % 3 != 0 {
        r = r.with_key(format!("key-{}", i % 97));
    }
    if i % 11 == 0 {
        r = r.with_partition((i % PARTITIONS as usize) as i32);
    }
    if i % 2 == 0 {
        r = r.with_timestamp(base_ts + i as i64);
    }
    r = r.with_header("index", Some(Bytes::from(i.to_string())));
    if i % 5 == 0 {
        r = r.with_header("null-header", None);
        r = r.with_header("empty", Some(Bytes::new()));
    }
    r
}

/// `n` small records, every other one keyed, each with a header.
pub fn records(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let r = Record::new(TOPIC, format!("v{i}"))
                .with_header("h", Some(Bytes::from_static(b"x")));
            if i % 2 == 0 {
                r.with_key(format!("k{i}"))
            } else {
                r
            }
        })
        .collect()
}

/// The record index a value of [`test_record`] (or `v-<i>`) carries.
pub fn index_of(value: &[u8]) -> usize {
    let s = std::str::from_utf8(value).unwrap();
    s.split('-').nth(1).unwrap().parse().unwrap()
}

/// Asserts a failure hands back the sent record (the driver filled its timestamp); its error.
pub fn assert_handed_back(e: DeliveryError, sent: &Record) -> ProduceError {
    let DeliveryError::Failed(f) = e else {
        panic!("expected a delivery failure, got {e:?}")
    };
    assert_eq!(f.record.value, sent.value);
    assert_eq!(f.record.key, sent.key);
    assert_eq!(f.record.headers, sent.headers);
    assert_eq!(f.record.partition, sent.partition);
    assert!(f.record.timestamp.is_some());
    f.error
}

/// Everything in [`TOPIC`], read back to the end of every partition; exactly `expected`
/// records (none missing, none extra), sorted by partition and offset.
pub fn consume_all(mock: &MockKafka, expected: usize) -> Vec<Consumed> {
    let consumed = read_back_all(
        &mock.bootstrap_servers(),
        TOPIC,
        PARTITIONS,
        READ_BACK_LIMIT,
    );
    assert_eq!(
        consumed.len(),
        expected,
        "read back {} records, {expected} were produced",
        consumed.len()
    );
    consumed
}

/// The record's headers as the consumer gives them.
pub fn headers_of(r: &Record) -> Vec<(String, Option<Vec<u8>>)> {
    r.headers
        .iter()
        .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
        .collect()
}

/// The timestamp a consumer read: the record's own, or one the driver filled within
/// `ts_window` (wall-clock ms around the sends).
pub fn assert_timestamp(c: &Consumed, sent: &Record, ts_window: (i64, i64), i: usize) -> i64 {
    let ts = c.timestamp.to_millis().expect("timestamp");
    match sent.timestamp {
        Some(t) => assert_eq!(ts, t, "timestamp of {i}"),
        None => assert!(
            (ts_window.0..=ts_window.1).contains(&ts),
            "filled timestamp of {i}: {ts} not in {ts_window:?}"
        ),
    }
    ts
}

/// Checks the reports against what a consumer reads back (see
/// [`producer_tests::verify::verify_delivered`]).
pub fn verify(
    mock: &MockKafka,
    sent: &[Record],
    reports: &[RecordMetadata],
    ts_window: (i64, i64),
) {
    verify_delivered(
        &mock.bootstrap_servers(),
        TOPIC,
        PARTITIONS,
        sent,
        reports,
        ts_window,
    );
}
