//! Checking a production run against what a consumer read back: exactly one report per record,
//! placement consistent with the record (explicit partition, murmur2 for keys), every success
//! report's offset holding its record, records reported "certainly not written" absent, each
//! record intact (key, value, headers, timestamp), and the delivery guarantee of [`Expect`]
//! (duplicates and per-partition send order).
//!
//! [`check_run`] takes the consumed records from anywhere (librdkafka, the Java consumer);
//! [`verify`] reads back with librdkafka first. Both return a [`Summary`] to print.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use producer_core::{Record, RecordMetadata};
use rdkafka::Timestamp;

use crate::drive::{Failure, Run};
use crate::readback::{read_back_all, read_back_topics, wait_for_log_size, Consumed};
use crate::workload::{headers_of, id_of, key_partition};

/// What is expected of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Every delivered record exactly once, in send order per partition.
    ExactlyOnce,
    /// Every record exactly once; send order may be broken by librdkafka's mock, which does
    /// not check idempotent sequence numbers: when a request fails with an injected error while
    /// a later request on the same connection (carrying later batches of the same partition)
    /// succeeds, a real broker refuses the later batch (OUT_OF_ORDER_SEQUENCE_NUMBER) and the
    /// producer resends both in order; the mock appends it. Inversions are counted and printed.
    ///
    /// The strict property for the same faults (retriable errors with five requests in flight)
    /// is asserted against Apache Kafka by `kafka_faults::{tokio,mio}_not_enough_replicas_then_recovery`,
    /// `kafka_faults::{tokio,mio}_broker_hung_past_request_timeout` and the random schedule
    /// `kafka_random::{tokio,mio}_random_fault_schedule`.
    ExactlyOnceMockReorders,
    /// Every record at least once, first occurrences in send order. Against the mock: it
    /// appended a retry again (it does not deduplicate non-transactional producers); duplicates
    /// are counted and printed, not failed. Against Apache Kafka: the guarantee of a
    /// non-idempotent producer.
    ///
    /// The strict property (idempotent, exactly once) for the same faults (connections dropped
    /// with five requests in flight, a broker down and up) is asserted against Apache Kafka by
    /// `kafka_faults::{tokio,mio}_every_connection_cut_with_five_in_flight`,
    /// `kafka_faults::{tokio,mio}_broker_killed_mid_stream_and_restarted` and
    /// `kafka_faults::{tokio,mio}_connection_reset_after_bytes`.
    AtLeastOnce,
    /// Every record at least once, duplicates and send-order inversions counted and printed:
    /// librdkafka's mock, when it closes a connection for an injected `_TRANSPORT` error with
    /// five requests in flight, has appended the requests before the failed one (their answers
    /// die: the producer resends them, the mock appends them again) and may append a pipelined
    /// request after it (a real broker refuses that batch with OUT_OF_ORDER_SEQUENCE_NUMBER and
    /// the producer resends both in order; the mock keeps it, ahead of the failed one).
    ///
    /// The strict property (exactly once, in send order) for the same fault is asserted against
    /// Apache Kafka by `kafka_faults::{tokio,mio}_every_connection_cut_with_five_in_flight`.
    AtLeastOnceMockReorders,
    /// acks=0 against the mock, see `e2e_matrix::acks_none_every_reported_record_reaches_the_log`:
    /// records may be missing (counted and printed); what arrives must be intact, once, in
    /// order.
    ///
    /// Against Apache Kafka, acks=0 is held to at-least-once (every record reported delivered
    /// is in the log) by the `kafka_matrix` suites (`acks 0` rows of every codec).
    AtMostOnce,
}

/// What [`check_run`] found.
#[derive(Debug, Default)]
pub struct Summary {
    /// Records consumed.
    pub consumed: usize,
    /// Records with a success report.
    pub delivered: usize,
    /// Records with a failure report.
    pub failed: usize,
    /// Failed records that were possibly written and are in the log.
    pub failed_but_written: usize,
    /// Extra copies in the log: `(id, copies)`.
    pub duplicates: Vec<(usize, usize)>,
    /// Per-partition send-order inversions tolerated by the `MockReorders` expectations.
    pub inversions: usize,
    /// Records missing from the log (only tolerated by [`Expect::AtMostOnce`]).
    pub missing: usize,
    /// Records whose report carries their batch's max timestamp: Apache Kafka's answer to a
    /// retried batch it had already appended (deduplicated).
    pub answered_as_duplicates: usize,
}

/// How a run is judged.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// The topics produced to, with their partition counts.
    pub topics: &'a [(&'a str, i32)],
    /// The delivery guarantee.
    pub expect: Expect,
    /// acks=0: success reports carry offset -1.
    pub acks0: bool,
    /// Whether failure reports are acceptable (fault runs); when false every record must be
    /// delivered.
    pub failures_allowed: bool,
    /// A timestamp the broker may report instead of the record's own (librdkafka's mock
    /// reports a fixed log-append time although its topics keep CreateTime).
    pub broker_reported_timestamp: Option<i64>,
    /// Topics that were not read back (deleted): their records' reports are checked, their
    /// presence in the log is not.
    pub unread_topics: &'a [&'a str],
}

/// The timestamp librdkafka's mock puts in every Produce response (`LogAppendTimeMs` 1234),
/// although its topics keep CreateTime: a report may carry it instead of the record's own.
pub const MOCK_LOG_APPEND_TIME: i64 = 1234;

/// Compares a consumed record with record `i` as sent: topic, key, value, headers, and the
/// timestamp (the record's own, or for one the driver filled, within `filled`).
pub fn check_consumed(c: &Consumed, i: usize, r: &Record, filled: (i64, i64)) {
    assert_eq!(c.topic, &*r.topic, "topic of {i}");
    assert_eq!(c.key.as_deref(), r.key.as_deref(), "key of {i}");
    assert_eq!(c.value.as_deref(), r.value.as_deref(), "value of {i}");
    assert_eq!(c.headers, headers_of(r), "headers of {i}");
    let ts = c.timestamp.to_millis().expect("timestamp");
    match r.timestamp {
        Some(t) => assert_eq!(ts, t, "timestamp of {i}"),
        None => assert!(
            (filled.0..=filled.1).contains(&ts),
            "filled timestamp of {i}: {ts} not in {filled:?}"
        ),
    }
}

/// Checks one success report against its record: topic, partition (explicit, or murmur2 for a
/// key), offset, timestamp.
fn check_success(i: usize, r: &Record, m: &RecordMetadata, partitions: i32, rules: &Rules<'_>) {
    assert_eq!(m.topic, r.topic, "record {i} topic");
    assert!(
        (0..partitions).contains(&m.partition),
        "record {i} partition {}",
        m.partition
    );
    if let Some(p) = r.partition {
        assert_eq!(m.partition, p, "record {i}: explicit partition");
    } else if let Some(k) = &r.key {
        assert_eq!(
            m.partition,
            key_partition(k, partitions),
            "record {i}: murmur2 partition"
        );
    }
    if rules.acks0 {
        assert_eq!(m.offset, -1, "record {i}: acks=0 reports no offset");
    } else {
        assert!(m.offset >= 0, "record {i}: offset {}", m.offset);
    }
    if let Some(t) = r.timestamp {
        // Kafka answers a batch it already has (a retry it deduplicated) with the batch's
        // max timestamp as "log append time": checked against the log in `check_timestamps`.
        assert!(
            m.timestamp >= t || Some(m.timestamp) == rules.broker_reported_timestamp,
            "record {i}: reported timestamp {} (sent {t})",
            m.timestamp
        );
    }
}

/// Every success report's timestamp is its record's own (as read back), or librdkafka's mock's
/// fixed one, or (Apache Kafka answering a retried batch it had already appended: it answers
/// with that batch's max timestamp as the log-append time) the largest timestamp of the run of
/// consecutive records, in the same partition, whose reports carry that same timestamp.
/// Returns how many records were reported that way.
fn check_timestamps(
    rules: &Rules<'_>,
    outcome: &[Result<&RecordMetadata, &Failure>],
    log: &BTreeMap<(String, i32), BTreeMap<i64, usize>>,
    stamp: &HashMap<(String, i32, i64), i64>,
) -> usize {
    let mut answered_as_duplicates = 0;
    for ((topic, p), offsets) in log {
        // Successes reported at the offset they are at: (offset, reported, own).
        let entries: Vec<(i64, i64, i64)> = offsets
            .iter()
            .filter_map(|(&o, &i)| match outcome[i] {
                Ok(m) if m.offset == o => Some((o, m.timestamp, stamp[&(topic.clone(), *p, o)])),
                _ => None,
            })
            .collect();
        let mut k = 0;
        while k < entries.len() {
            // The group: consecutive offsets reported with the same timestamp.
            let mut end = k;
            while end + 1 < entries.len()
                && entries[end + 1].0 == entries[end].0 + 1
                && entries[end + 1].1 == entries[k].1
            {
                end += 1;
            }
            let group = &entries[k..=end];
            let reported = group[0].1;
            let foreign = group
                .iter()
                .any(|&(_, rep, own)| rep != own && Some(rep) != rules.broker_reported_timestamp);
            if foreign {
                let max = group.iter().map(|e| e.2).max().unwrap_or(i64::MIN);
                assert_eq!(
                    reported, max,
                    "{topic}-{p}@{}..={}: reported timestamp {reported} is neither the records' own nor the max of their batch",
                    group[0].0,
                    group[group.len() - 1].0
                );
                answered_as_duplicates += group.len();
            }
            k = end + 1;
        }
    }
    answered_as_duplicates
}

/// Checks the reports of `run` and the records `consumed` from the topics of `rules` against
/// `records` as sent. Panics with a description of the first violation.
pub fn check_run(
    rules: &Rules<'_>,
    records: &[Record],
    run: &Run,
    consumed: &[Consumed],
) -> Summary {
    let reports = &run.reports;
    assert_eq!(reports.len(), records.len());
    let partitions: HashMap<&str, i32> = rules.topics.iter().copied().collect();
    let mut outcome: Vec<Result<&RecordMetadata, &Failure>> = Vec::with_capacity(records.len());
    let mut summary = Summary::default();
    for (i, (r, rep)) in records.iter().zip(reports).enumerate() {
        assert_eq!(rep.len(), 1, "record {i}: {} reports: {rep:?}", rep.len());
        match &rep[0] {
            Ok(m) => {
                check_success(i, r, m, partitions[&*r.topic], rules);
                summary.delivered += 1;
                outcome.push(Ok(m));
            }
            Err(f) => {
                assert!(rules.failures_allowed, "record {i} failed: {f:?}");
                if let Failure::Produce(_) = f {
                    let back = run.returned[i]
                        .as_ref()
                        .unwrap_or_else(|| panic!("record {i} failed without its record"));
                    assert_eq!(
                        (&back.topic, &back.key, &back.value, &back.headers),
                        (&r.topic, &r.key, &r.value, &r.headers),
                        "record {i}: the failure handed back another record"
                    );
                }
                summary.failed += 1;
                outcome.push(Err(f));
            }
        }
    }

    // (topic, partition) -> offset -> id
    let mut log: BTreeMap<(String, i32), BTreeMap<i64, usize>> = BTreeMap::new();
    // (topic, partition, offset) -> timestamp as read back
    let mut stamp: HashMap<(String, i32, i64), i64> = HashMap::new();
    let mut copies = vec![0usize; records.len()];
    for c in consumed {
        let i = id_of(c);
        assert!(i < records.len(), "unknown id {i}");
        check_consumed(c, i, &records[i], (run.start_ms, run.end_ms));
        match outcome[i] {
            Ok(m) => assert_eq!(c.partition, m.partition, "partition of {i} vs its report"),
            Err(f) => {
                assert!(
                    f.possibly_persisted(),
                    "record {i} was reported certainly not written ({f:?}) but is in the log at {}-{}@{}",
                    c.topic,
                    c.partition,
                    c.offset
                );
                if copies[i] == 0 {
                    summary.failed_but_written += 1;
                }
            }
        }
        copies[i] += 1;
        stamp.insert(
            (c.topic.clone(), c.partition, c.offset),
            c.timestamp.to_millis().unwrap_or(-1),
        );
        log.entry((c.topic.clone(), c.partition))
            .or_default()
            .insert(c.offset, i);
    }
    summary.consumed = consumed.len();
    let unread = |i: usize| rules.unread_topics.contains(&&*records[i].topic);
    let missing: Vec<usize> = (0..records.len())
        .filter(|&i| copies[i] == 0 && outcome[i].is_ok() && !unread(i))
        .collect();
    if rules.expect == Expect::AtMostOnce && !missing.is_empty() {
        println!(
            "LOST (acks=0 against the mock, known): {} records reported delivered are not in the log, first {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        );
    }
    assert!(
        missing.is_empty() || rules.expect == Expect::AtMostOnce,
        "{} records reported delivered are missing from the log, first {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    summary.missing = missing.len();
    summary.duplicates = copies
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 1)
        .map(|(i, &n)| (i, n))
        .collect();
    if !matches!(
        rules.expect,
        Expect::AtLeastOnce | Expect::AtLeastOnceMockReorders
    ) {
        assert!(
            summary.duplicates.is_empty(),
            "{} records duplicated, first {:?}",
            summary.duplicates.len(),
            &summary.duplicates[..summary.duplicates.len().min(10)]
        );
    }
    summary.inversions = check_order(&log, rules.expect);
    // Reported offsets hold the reported record.
    if !rules.acks0 {
        for (i, o) in outcome.iter().enumerate() {
            if let (Ok(m), false) = (o, unread(i)) {
                let at = log
                    .get(&(m.topic.to_string(), m.partition))
                    .and_then(|o| o.get(&m.offset));
                assert_eq!(
                    at,
                    Some(&i),
                    "record {i} reported at {}-{}@{}",
                    m.topic,
                    m.partition,
                    m.offset
                );
            }
        }
    }
    if !rules.acks0 {
        summary.answered_as_duplicates = check_timestamps(rules, &outcome, &log, &stamp);
    }
    if !summary.duplicates.is_empty() {
        let extra: usize = summary.duplicates.iter().map(|(_, n)| n - 1).sum();
        println!(
            "duplicates: {} records appended more than once ({extra} extra copies), first {:?}",
            summary.duplicates.len(),
            &summary.duplicates[..summary.duplicates.len().min(8)]
        );
    }
    if summary.inversions > 0 {
        println!(
            "mock reorders: {} inversions of send order",
            summary.inversions
        );
    }
    summary
}

/// Per-partition order: first occurrences in offset order follow send order (ids increase).
/// Returns the inversions tolerated by [`Expect::ExactlyOnceMockReorders`]; panics on any
/// other.
fn check_order(log: &BTreeMap<(String, i32), BTreeMap<i64, usize>>, expect: Expect) -> usize {
    let mut inversions = 0;
    for ((topic, p), offsets) in log {
        let mut seen = HashSet::new();
        let mut last: Option<(i64, usize)> = None;
        for (&off, &i) in offsets {
            if !seen.insert(i) {
                continue;
            }
            if let Some((prev_off, prev)) = last {
                if prev > i {
                    assert!(
                        matches!(
                            expect,
                            Expect::ExactlyOnceMockReorders | Expect::AtLeastOnceMockReorders
                        ),
                        "{topic}-{p}: record {prev}@{prev_off} before {i}@{off} (send order broken)"
                    );
                    if inversions < 5 {
                        println!(
                            "mock reorder: {topic}-{p}: record {prev}@{prev_off} before {i}@{off}"
                        );
                    }
                    inversions += 1;
                }
            }
            last = Some((off, i));
        }
    }
    inversions
}

/// Against librdkafka's mock cluster at `bootstrap`: every record must have been delivered
/// (one success report each); reads every topic back with librdkafka (CRCs checked) and
/// compares record by record (see [`check_run`]). `acks0` allows offset -1 in reports and waits
/// for the log to fill first.
pub fn verify(
    bootstrap: &str,
    topics: &[(&str, i32)],
    records: &[Record],
    run: &Run,
    expect: Expect,
    acks0: bool,
) -> Summary {
    if acks0 {
        // With acks=0 "delivered" means handed to the socket: the broker may still be
        // appending the last requests. Wait until the logs hold every record (or stop growing).
        wait_for_log_size(
            bootstrap,
            topics,
            records.len() as i64,
            Duration::from_secs(10),
        );
    }
    let consumed = read_back_topics(bootstrap, topics, Duration::from_secs(60));
    let rules = Rules {
        topics,
        expect,
        acks0,
        failures_allowed: false,
        broker_reported_timestamp: Some(MOCK_LOG_APPEND_TIME),
        unread_topics: &[],
    };
    check_run(&rules, records, run, &consumed)
}

// ---------------------------------------------------------------------------------------------
// The driver crates' own end-to-end checks (one topic, reports against the read-back)
// ---------------------------------------------------------------------------------------------

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
