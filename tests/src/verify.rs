//! What both driver crates' end-to-end tests check after a run: the delivery reports against
//! what an independent consumer reads back, and how a burst send took records.

use std::collections::HashMap;
use std::time::Duration;

use producer_core::{Record, RecordMetadata};
use rdkafka::Timestamp;

use crate::read_back_all;

/// The LogAppendTime librdkafka's mock puts in every successful Produce response although its
/// topics keep CreateTime (rdkafka_mock_handlers.c); the core reports it faithfully.
pub const MOCK_LOG_APPEND_TIME: i64 = 1234;

/// How long the read-back may take before it gives up (and the count check fails).
const READ_BACK_LIMIT: Duration = Duration::from_secs(60);

/// Checks the reports of `records` (sent in this order to `topic`, partitions
/// `0..partitions`, on a cluster that had nothing else in it) against each other and against
/// what a consumer reads back to the end of every partition:
/// - every report names `topic` and an existing partition, the record's explicit one if it had
///   one, and an offset; its timestamp is the record's (or one the driver filled within
///   `ts_window`), unless it is the mock's log-append time;
/// - per partition, offsets follow the send order and are contiguous from 0; no two reports
///   share an offset;
/// - exactly these records are read back, each at the partition and offset of its report,
///   once, with its key, value, headers and create time (a filled one within `ts_window`).
pub fn verify_delivered(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    records: &[Record],
    reports: &[RecordMetadata],
    ts_window: (i64, i64),
) {
    assert_eq!(records.len(), reports.len(), "one report per record");
    let in_window = |ts: i64| (ts_window.0..=ts_window.1).contains(&ts);
    let mut at: HashMap<(i32, i64), usize> = HashMap::new();
    let mut last_offset: HashMap<i32, i64> = HashMap::new();
    for (i, (rec, meta)) in records.iter().zip(reports).enumerate() {
        assert_eq!(&*meta.topic, topic, "topic of record {i}");
        assert!(
            (0..partitions).contains(&meta.partition),
            "record {i} in partition {}",
            meta.partition
        );
        if let Some(p) = rec.partition {
            assert_eq!(
                meta.partition, p,
                "record {i} ignored its explicit partition"
            );
        }
        assert!(meta.offset >= 0, "record {i} has no offset");
        if meta.timestamp != MOCK_LOG_APPEND_TIME {
            match rec.timestamp {
                Some(ts) => assert_eq!(meta.timestamp, ts, "reported timestamp of record {i}"),
                None => assert!(
                    in_window(meta.timestamp),
                    "reported timestamp of record {i}"
                ),
            }
        }
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
            "two reports at {}-{}",
            meta.partition,
            meta.offset
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

    let consumed = read_back_all(bootstrap, topic, partitions, READ_BACK_LIMIT);
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
        assert!(
            !std::mem::replace(&mut seen[i], true),
            "record {i} read twice"
        );
        let rec = &records[i];
        assert_eq!(msg.key.as_deref(), rec.key.as_deref(), "key of record {i}");
        assert_eq!(
            msg.value.as_deref(),
            rec.value.as_deref(),
            "value of record {i}"
        );
        let headers: Vec<(String, Option<Vec<u8>>)> = rec
            .headers
            .iter()
            .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
            .collect();
        assert_eq!(msg.headers, headers, "headers of record {i}");
        let Timestamp::CreateTime(ts) = msg.timestamp else {
            panic!("record {i} has {:?}", msg.timestamp)
        };
        match rec.timestamp {
            Some(own) => assert_eq!(ts, own, "timestamp of record {i}"),
            None => assert!(
                in_window(ts),
                "record {i}: timestamp {ts} filled by the driver is outside {ts_window:?}"
            ),
        }
        let reported = reports[i].timestamp;
        assert!(
            reported == ts || reported == MOCK_LOG_APPEND_TIME,
            "reported timestamp of record {i}: {reported}"
        );
    }
}

/// Checks one call of a burst send (mio's `send_batch`, tokio's `try_send_batch_detached`):
/// it took `taken` items, at most `capacity`, from the front of a vector that held `before`
/// items starting with tag `first`; `left` is the vector's length after the call and
/// `front_after` the tag now at its front.
pub fn assert_burst_take(
    before: usize,
    first: u64,
    taken: usize,
    capacity: usize,
    left: usize,
    front_after: Option<u64>,
) {
    assert!(taken <= capacity, "took {taken} into a queue of {capacity}");
    assert_eq!(left, before - taken, "taken records leave the vec");
    if let Some(front) = front_after {
        assert_eq!(
            front,
            first + taken as u64,
            "taken from the front, in order"
        );
    }
}
