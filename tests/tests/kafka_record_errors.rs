//! Per-record errors (KIP-467) on Apache Kafka itself (a single KRaft node, 4.1.1), through
//! both drivers: a compacted topic rejects a batch holding records without a key with
//! INVALID_RECORD and one record error per such record. Each of those is reported with its own
//! `InvalidRecord` and Kafka's message, each keyed batch mate with `BatchRejected`, every record
//! handed back as sent. The same idempotent producer then resends the keyed records, which
//! Kafka accepts (the rejected batch left the partition's sequence as the broker expects it),
//! and a librdkafka consumer finds exactly those records, once each, in order.

use std::time::Duration;

use bytes::Bytes;
use producer_core::{ErrorCode, ProduceError, Record};
use producer_tests::kafka::suite::producer_config;
use producer_tests::kafka::{shared_cluster, ClusterSpec};
use producer_tests::{now_ms, produce_rounds, read_back_all, Driver, Failure};

/// Records of the mixed batch; these indexes have no key.
const RECORDS: usize = 8;
const KEYLESS: [usize; 2] = [2, 5];

/// A record's key, value and headers, as the consumer reads them.
type Contents = (
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

fn mixed_batch(topic: &str, tag: &str) -> Vec<Record> {
    let ts = now_ms();
    (0..RECORDS)
        .map(|i| {
            let mut r = Record::new(topic, format!("{tag}-value-{i}").into_bytes())
                .with_timestamp(ts + i as i64);
            if !KEYLESS.contains(&i) {
                r = r.with_key(format!("{tag}-key-{i}").into_bytes());
            }
            if i % 3 == 0 {
                r = r.with_header("n", Some(Bytes::from(i.to_string())));
            }
            r
        })
        .collect()
}

fn record_errors_on_kafka(driver: Driver) {
    let Some(mut kafka) = shared_cluster(ClusterSpec::single) else {
        return;
    };
    let topic = kafka.topic("record-errors", 1, 1, &[("cleanup.policy", "compact")]);
    // A long linger: the records wait for the flush, so they share one batch.
    let config = producer_config(&kafka)
        .linger(Duration::from_secs(10))
        .build()
        .unwrap();
    assert!(config.idempotence, "idempotence is the default");
    let sent = mixed_batch(&topic, &format!("{driver:?}"));
    let keyed: Vec<Record> = (0..RECORDS)
        .filter(|i| !KEYLESS.contains(i))
        .map(|i| sent[i].clone())
        .collect();

    let runs = produce_rounds(driver, config, &mut |runs| match runs.len() {
        0 => Some(sent.clone()),
        // The application resends the good records, as they were handed back.
        1 => Some(
            (0..RECORDS)
                .filter(|i| !KEYLESS.contains(i))
                .map(|i| runs[0].returned[i].clone().expect("handed back"))
                .collect(),
        ),
        _ => None,
    });

    let no_key =
        format!("Compacted topic cannot accept message without key in topic partition {topic}-0");
    let first = &runs[0];
    for (i, record) in sent.iter().enumerate() {
        let reports = &first.reports[i];
        assert_eq!(reports.len(), 1, "record {i}: {reports:?}");
        assert_eq!(
            first.returned[i].as_ref(),
            Some(record),
            "record {i} handed back as sent"
        );
        let error = match &reports[0] {
            Err(Failure::Produce(e)) => e,
            other => panic!("record {i}: {other:?}"),
        };
        if KEYLESS.contains(&i) {
            match error {
                ProduceError::InvalidRecord {
                    code: ErrorCode::INVALID_RECORD,
                    batch_index,
                    message: Some(m),
                    possibly_persisted: false,
                } => {
                    assert_eq!(*batch_index, i as i32, "record {i}");
                    assert!(m.starts_with(&no_key), "record {i}: {m}");
                }
                other => panic!("record {i}: {other:?}"),
            }
        } else {
            assert!(
                matches!(
                    error,
                    ProduceError::BatchRejected {
                        code: ErrorCode::INVALID_RECORD,
                        invalid_records: 2,
                        possibly_persisted: false,
                        ..
                    }
                ),
                "record {i}: {error:?}"
            );
        }
    }
    println!(
        "{driver:?}: {}",
        first.reports[KEYLESS[0]][0]
            .as_ref()
            .unwrap_err()
            .produce_error()
            .unwrap()
    );
    println!(
        "{driver:?}: {}",
        first.reports[0][0]
            .as_ref()
            .unwrap_err()
            .produce_error()
            .unwrap()
    );

    let second = &runs[1];
    for (i, r) in second.reports.iter().enumerate() {
        assert_eq!(r.len(), 1, "resent record {i}: {r:?}");
        let m = r[0]
            .as_ref()
            .unwrap_or_else(|e| panic!("resent record {i}: {e:?}"));
        assert_eq!(m.partition, 0);
    }

    let consumed = read_back_all(
        &kafka.internal_bootstrap(),
        &topic,
        1,
        Duration::from_secs(30),
    );
    let got: Vec<Contents> = consumed
        .iter()
        .map(|c| (c.key.clone(), c.value.clone(), c.headers.clone()))
        .collect();
    let want: Vec<Contents> = keyed
        .iter()
        .map(|r| {
            let headers = r
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
                .collect();
            (
                r.key.as_ref().map(|k| k.to_vec()),
                r.value.as_ref().map(|v| v.to_vec()),
                headers,
            )
        })
        .collect();
    assert_eq!(got, want, "exactly the resent records, once each, in order");
    for (c, r) in consumed.iter().zip(&second.reports) {
        assert_eq!(Some(c.offset), r[0].as_ref().ok().map(|m| m.offset));
    }
    println!(
        "{driver:?}: {} records rejected ({} invalid), {} resent and read back in {:.2} s + {:.2} s",
        RECORDS,
        KEYLESS.len(),
        consumed.len(),
        first.elapsed.as_secs_f64(),
        second.elapsed.as_secs_f64()
    );
}

#[test]
fn record_errors_tokio() {
    record_errors_on_kafka(Driver::Tokio);
}

#[test]
fn record_errors_mio_threaded() {
    record_errors_on_kafka(Driver::MioThreaded);
}
