//! Shared by the end-to-end suites (`e2e_*.rs`): a workload of records that identify
//! themselves, one function that produces them through any driver (with a fault hook between
//! chunks), and one function that reads everything back with librdkafka (CRCs checked) and
//! compares it record by record with what was sent and what was reported.
#![allow(dead_code)]
// `is_multiple_of` is newer than the workspace MSRV (1.85).
#![allow(unknown_lints, clippy::manual_is_multiple_of)]

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use producer_core::{Config, Delivery, Record, RecordMetadata, SendErrorReason};
use producer_tests::rdkafka::config::ClientConfig;
use producer_tests::rdkafka::consumer::{BaseConsumer, Consumer};
use producer_tests::rdkafka::error::KafkaError;
use producer_tests::rdkafka::message::{Headers, Message};
use producer_tests::rdkafka::types::RDKafkaErrorCode;
use producer_tests::rdkafka::{Offset, TopicPartitionList};
use producer_tests::{Consumed, MockKafka};

/// The timestamp librdkafka's mock puts in every Produce response (`LogAppendTimeMs` 1234),
/// although its topics keep CreateTime: a report may carry it instead of the record's own.
pub const MOCK_LOG_APPEND_TIME: i64 = 1234;

/// Name of the header that carries a record's index in the workload (always the first header).
pub const ID_HEADER: &str = "id";

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A port on localhost with nothing listening (connections are refused).
pub fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Which driver produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `producer_tokio::ProducerHandle` (`send().await` then the delivery future).
    Tokio,
    /// `producer_mio::ThreadedProducer` (non-blocking `send_with`, callback reports).
    MioThreaded,
    /// `producer_mio::MioDriver` in a loop owned by the test.
    MioEmbedded,
}

/// How keys are chosen in a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Every record has a key (97 distinct keys).
    All,
    /// No record has a key (sticky partitioner).
    Null,
    /// Two thirds keyed, one third null; every 11th record has an explicit partition.
    Mixed,
}

/// Java's murmur2 (Kafka's `Utils.murmur2`), written here independently of the core's
/// partitioner so that keyed placement is checked against Kafka's definition.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: i32 = 0x5bd1_e995;
    let len = data.len() as i32;
    let mut h: i32 = (0x9747_b28c_u32 as i32) ^ len;
    for c in data.chunks_exact(4) {
        let mut k = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= ((k as u32) >> 24) as i32;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = &data[data.len() & !3..];
    if tail.len() >= 3 {
        h ^= (tail[2] as i32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as i32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as i32;
        h = h.wrapping_mul(M);
    }
    h ^= ((h as u32) >> 13) as i32;
    h = h.wrapping_mul(M);
    h ^= ((h as u32) >> 15) as i32;
    h
}

/// The partition Kafka's default partitioner gives a key.
pub fn key_partition(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions
}

/// Record `i` of a workload over `topics` (round robin over the topics). Its first header is
/// `id = i`; values vary in size (`value_len` bytes on average) and content; a few values are
/// null; headers include a null value, an empty value and a repeated key; most records carry
/// an explicit timestamp, some are left for the driver to fill with the wall clock.
pub fn make_record(i: usize, topics: &[(&str, i32)], keys: Keys, value_len: usize) -> Record {
    make_record_at(i, topics, keys, value_len, now_ms() - 3_600_000)
}

/// [`make_record`] with explicit timestamps spread over `base_ms..base_ms + 1000 s`: the same
/// arguments give the same record (the soak test regenerates records instead of keeping them).
pub fn make_record_at(
    i: usize,
    topics: &[(&str, i32)],
    keys: Keys,
    value_len: usize,
    base_ms: i64,
) -> Record {
    let (topic, partitions) = topics[i % topics.len()];
    let fill = (i * 7919) % (value_len.max(1) * 2);
    let body: String =
        std::iter::repeat_n(char::from(b'a' + (i % 26) as u8), fill.min(value_len * 2)).collect();
    let mut r = Record::new(topic, format!("value-{i}-{body}"));
    if i % 101 == 50 {
        r.value = None;
    }
    let keyed = match keys {
        Keys::All => true,
        Keys::Null => false,
        Keys::Mixed => i % 3 != 0,
    };
    if keyed {
        r = r.with_key(format!("key-{}", i % 97));
    }
    if keys == Keys::Mixed && i % 11 == 0 {
        r = r.with_partition((i / 11 % partitions as usize) as i32);
    }
    if i % 4 != 3 {
        // Spread over the past few hours, not monotonic within a partition.
        r = r.with_timestamp(base_ms + ((i * 104_729) % 1_000_000) as i64);
    }
    r = r.with_header(ID_HEADER, Some(Bytes::from(i.to_string())));
    if i % 5 == 0 {
        r = r
            .with_header("null", None)
            .with_header("empty", Some(Bytes::new()))
            .with_header("dup", Some(Bytes::from_static(b"1")))
            .with_header("dup", Some(Bytes::from_static(b"2")));
    }
    r
}

pub fn workload(n: usize, topics: &[(&str, i32)], keys: Keys, value_len: usize) -> Vec<Record> {
    (0..n)
        .map(|i| make_record(i, topics, keys, value_len))
        .collect()
}

/// How the workload is paced: the hook runs before chunk `k` (records `k*chunk..`), after a
/// pause, so faults land while earlier records are buffered or in flight.
pub struct Pacing {
    pub chunk: usize,
    pub pause: Duration,
}

impl Pacing {
    /// No pauses; the hook runs once, before the first record.
    pub fn burst() -> Self {
        Pacing {
            chunk: usize::MAX,
            pause: Duration::ZERO,
        }
    }

    /// The hook runs before every `chunk` records, after a `pause`.
    pub fn chunks(chunk: usize, pause: Duration) -> Self {
        Pacing { chunk, pause }
    }
}

/// Every report each record got (exactly one is expected), as `Ok(metadata)` or the error
/// rendered to a string.
pub type Reports = Vec<Vec<Result<RecordMetadata, String>>>;

/// What a production run returns.
pub struct Run {
    pub reports: Reports,
    /// Wall clock before the first send and after the last report (for filled timestamps).
    pub start_ms: i64,
    pub end_ms: i64,
    pub elapsed: Duration,
}

/// Produces `records` in order through `driver`, calling `hook(k)` before chunk `k`, then
/// flushes and closes the producer and returns every report.
pub fn produce(
    driver: Driver,
    config: Config,
    records: &[Record],
    pacing: &Pacing,
    hook: &mut dyn FnMut(usize),
) -> Run {
    let start = Instant::now();
    let start_ms = now_ms();
    let reports = match driver {
        Driver::Tokio => produce_tokio(config, records, pacing, hook),
        Driver::MioThreaded => produce_mio_threaded(config, records, pacing, hook),
        Driver::MioEmbedded => produce_mio_embedded(config, records, pacing, hook),
    };
    Run {
        reports,
        start_ms,
        end_ms: now_ms(),
        elapsed: start.elapsed(),
    }
}

fn pace(i: usize, pacing: &Pacing, hook: &mut dyn FnMut(usize)) {
    if pacing.chunk != usize::MAX && i % pacing.chunk == 0 {
        if i > 0 && !pacing.pause.is_zero() {
            std::thread::sleep(pacing.pause);
        }
        hook(i / pacing.chunk);
    } else if pacing.chunk == usize::MAX && i == 0 {
        hook(0);
    }
}

/// A multi-threaded runtime with two workers; the test body runs in `block_on` on the calling
/// thread, so its pauses and (short, blocking) mock calls never stall the producer task.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn produce_tokio(
    config: Config,
    records: &[Record],
    pacing: &Pacing,
    hook: &mut dyn FnMut(usize),
) -> Reports {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let rt = runtime();
    rt.block_on(async {
        let handle = producer_tokio::ProducerHandle::start(config).unwrap();
        let mut futures = Vec::with_capacity(records.len());
        for (i, r) in records.iter().enumerate() {
            pace(i, pacing, hook);
            let f = handle
                .send(r.clone())
                .await
                .unwrap_or_else(|e| panic!("send of record {i} refused: {e}"));
            futures.push(f);
        }
        handle.flush().await;
        let mut reports: Reports = vec![Vec::new(); records.len()];
        for (i, f) in futures.into_iter().enumerate() {
            // After flush every future has resolved: awaiting cannot hang.
            reports[i].push(f.await.map_err(|e| format!("{e:?}")));
        }
        handle.close().await;
        reports
    })
}

fn produce_mio_threaded(
    config: Config,
    records: &[Record],
    pacing: &Pacing,
    hook: &mut dyn FnMut(usize),
) -> Reports {
    let (tx, rx) = mpsc::channel::<Delivery<usize>>();
    let producer = producer_mio::ThreadedProducer::<usize>::spawn(config, 1024, move |d| {
        let _ = tx.send(d);
    })
    .unwrap();
    let mut reports: Reports = vec![Vec::new(); records.len()];
    let take = |d: Delivery<usize>, reports: &mut Reports| {
        reports[d.opaque].push(d.result.map_err(|e| format!("{:?}", e.error)));
    };
    for (i, r) in records.iter().enumerate() {
        pace(i, pacing, hook);
        let mut r = r.clone();
        loop {
            match producer.send_with(r, i) {
                Ok(()) => break,
                Err(producer_mio::SendError::Full(back, _)) => {
                    r = back;
                    // Queued records guarantee a report comes (at the latest at their
                    // delivery timeout).
                    match rx.recv_timeout(Duration::from_millis(200)) {
                        Ok(d) => take(d, &mut reports),
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(e) => panic!("report channel: {e}"),
                    }
                }
                Err(e) => panic!("send of record {i} refused: {e}"),
            }
        }
    }
    producer.flush();
    producer.close();
    while let Ok(d) = rx.try_recv() {
        take(d, &mut reports);
    }
    reports
}

fn produce_mio_embedded(
    config: Config,
    records: &[Record],
    pacing: &Pacing,
    hook: &mut dyn FnMut(usize),
) -> Reports {
    use mio::{Events, Poll, Token};
    let mut poll = Poll::new().unwrap();
    let range = producer_mio::TokenRange::new(Token(1000), 32);
    let mut driver = producer_mio::MioDriver::<usize>::new(config, poll.registry(), range).unwrap();
    let mut events = Events::with_capacity(256);
    let mut reports: Reports = vec![Vec::new(); records.len()];
    let mut next = 0;
    let mut paced = None;
    let mut closing = false;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "embedded driver did not finish");
        while next < records.len() {
            if paced != Some(next) {
                paced = Some(next);
                pace(next, pacing, hook);
            }
            match driver.send(records[next].clone(), next) {
                Ok(()) => next += 1,
                Err(e) if e.reason == SendErrorReason::Full => break,
                Err(e) => panic!("send of record {next} refused: {:?}", e.reason),
            }
        }
        if next == records.len() && !closing {
            closing = true;
            driver.close();
        }
        if driver.is_closed() {
            break;
        }
        poll.poll(&mut events, driver.next_timeout()).unwrap();
        for event in events.iter() {
            assert!(driver.owns_token(event.token()));
            driver.handle_event(event);
        }
        driver.handle_timeout();
        while let Some(d) = driver.poll_delivery() {
            reports[d.opaque].push(d.result.map_err(|e| format!("{:?}", e.error)));
        }
    }
    while let Some(d) = driver.poll_delivery() {
        reports[d.opaque].push(d.result.map_err(|e| format!("{:?}", e.error)));
    }
    reports
}

/// What is expected of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Every record exactly once, in send order per partition.
    ExactlyOnce,
    /// Every record exactly once; send order may be broken by the mock, which does not check
    /// idempotent sequence numbers: when a request fails with an injected error while a later
    /// request on the same connection (carrying later batches of the same partition) succeeds,
    /// a real broker refuses the later batch (OUT_OF_ORDER_SEQUENCE_NUMBER) and the producer
    /// resends both in order; the mock appends it. Inversions are counted and printed.
    ExactlyOnceMockReorders,
    /// Every record at least once, first occurrences in send order: the mock appended a retry
    /// again (it does not deduplicate non-transactional producers). Duplicates are counted and
    /// printed, not failed.
    AtLeastOnce,
    /// acks=0 against the mock, see `e2e_matrix::acks_none_every_reported_record_reaches_the_log`:
    /// records may be missing (counted and printed); what arrives must be intact, once, in
    /// order.
    AtMostOnce,
}

/// What [`verify`] found.
#[derive(Debug, Default)]
pub struct Summary {
    pub consumed: usize,
    /// Extra copies in the log: `(id, copies)`.
    pub duplicates: Vec<(usize, usize)>,
    /// Per-partition send-order inversions tolerated by [`Expect::ExactlyOnceMockReorders`].
    pub inversions: usize,
    /// Records missing from the log (only tolerated by [`Expect::AtMostOnce`]).
    pub missing: usize,
}

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

pub fn id_of(c: &Consumed) -> usize {
    let (k, v) = c.headers.first().expect("a record without headers");
    assert_eq!(
        k, ID_HEADER,
        "first header of {}-{}@{}",
        c.topic, c.partition, c.offset
    );
    std::str::from_utf8(v.as_deref().expect("null id"))
        .unwrap()
        .parse()
        .unwrap()
}

fn headers_of(r: &Record) -> Vec<(String, Option<Vec<u8>>)> {
    r.headers
        .iter()
        .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
        .collect()
}

/// Checks the reports (exactly one per record, every one a success, placement consistent
/// with the record), then reads every topic back with librdkafka (CRCs checked) and compares
/// record by record: key, value, headers, timestamp, partition, per-partition send order,
/// reported offset = consumed offset. `acks0` allows offset -1 in reports.
pub fn verify(
    mock: &MockKafka,
    topics: &[(&str, i32)],
    records: &[Record],
    run: &Run,
    expect: Expect,
    acks0: bool,
) -> Summary {
    let reports = &run.reports;
    assert_eq!(reports.len(), records.len());
    let partitions: HashMap<&str, i32> = topics.iter().copied().collect();
    let mut meta = Vec::with_capacity(records.len());
    for (i, (r, rep)) in records.iter().zip(reports).enumerate() {
        assert_eq!(rep.len(), 1, "record {i}: {} reports: {rep:?}", rep.len());
        let m = rep[0]
            .as_ref()
            .unwrap_or_else(|e| panic!("record {i} failed: {e}"));
        assert_eq!(m.topic, r.topic, "record {i} topic");
        let n = partitions[&*r.topic];
        assert!(
            (0..n).contains(&m.partition),
            "record {i} partition {}",
            m.partition
        );
        if let Some(p) = r.partition {
            assert_eq!(m.partition, p, "record {i}: explicit partition");
        } else if let Some(k) = &r.key {
            assert_eq!(
                m.partition,
                key_partition(k, n),
                "record {i}: murmur2 partition"
            );
        }
        if acks0 {
            assert_eq!(m.offset, -1, "record {i}: acks=0 reports no offset");
        } else {
            assert!(m.offset >= 0, "record {i}: offset {}", m.offset);
        }
        if let Some(t) = r.timestamp {
            assert!(
                m.timestamp == t || m.timestamp == MOCK_LOG_APPEND_TIME,
                "record {i}: reported timestamp {} (sent {t})",
                m.timestamp
            );
        }
        meta.push(m);
    }

    if acks0 {
        // With acks=0 "delivered" means handed to the socket: the broker may still be
        // appending the last requests. Wait until the logs hold every record (or stop growing).
        wait_for_log_size(
            &mock.bootstrap_servers(),
            topics,
            records.len() as i64,
            Duration::from_secs(10),
        );
    }
    let consumed = read_back_topics(&mock.bootstrap_servers(), topics, Duration::from_secs(60));
    // (topic, partition) -> offset -> id
    let mut log: BTreeMap<(String, i32), BTreeMap<i64, usize>> = BTreeMap::new();
    let mut copies = vec![0usize; records.len()];
    for c in &consumed {
        let i = id_of(c);
        assert!(i < records.len(), "unknown id {i}");
        check_consumed(c, i, &records[i], (run.start_ms, run.end_ms));
        assert_eq!(
            c.partition, meta[i].partition,
            "partition of {i} vs its report"
        );
        copies[i] += 1;
        log.entry((c.topic.clone(), c.partition))
            .or_default()
            .insert(c.offset, i);
    }
    let missing: Vec<usize> = (0..records.len()).filter(|&i| copies[i] == 0).collect();
    if expect == Expect::AtMostOnce && !missing.is_empty() {
        println!(
            "LOST (acks=0 against the mock, known): {} records reported delivered are not in the log, first {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        );
    }
    assert!(
        missing.is_empty() || expect == Expect::AtMostOnce,
        "{} records missing from the log, first {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    let duplicates: Vec<(usize, usize)> = copies
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 1)
        .map(|(i, &n)| (i, n))
        .collect();
    if expect != Expect::AtLeastOnce {
        assert!(
            duplicates.is_empty(),
            "{} records duplicated, first {:?}",
            duplicates.len(),
            &duplicates[..duplicates.len().min(10)]
        );
    }
    // Per-partition order: first occurrences in offset order follow send order (ids increase).
    let mut inversions = 0;
    for ((topic, p), offsets) in &log {
        let mut seen = std::collections::HashSet::new();
        let mut last: Option<(i64, usize)> = None;
        for (&off, &i) in offsets {
            if !seen.insert(i) {
                continue;
            }
            if let Some((prev_off, prev)) = last {
                if prev > i {
                    assert_eq!(
                        expect,
                        Expect::ExactlyOnceMockReorders,
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
    // Reported offsets hold the reported record.
    if !acks0 {
        for (i, m) in meta.iter().enumerate() {
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
    if !duplicates.is_empty() {
        let extra: usize = duplicates.iter().map(|(_, n)| n - 1).sum();
        println!(
            "mock duplicates: {} records appended more than once ({extra} extra copies), first {:?}",
            duplicates.len(),
            &duplicates[..duplicates.len().min(8)]
        );
    }
    if inversions > 0 {
        println!("mock reorders: {inversions} inversions of send order");
    }
    Summary {
        consumed: consumed.len(),
        duplicates,
        inversions,
        missing: missing.len(),
    }
}

/// A config builder for the mock's brokers with short backoffs (tests stay fast).
pub fn config(mock: &MockKafka) -> producer_core::ConfigBuilder {
    Config::builder(mock.bootstrap())
        .retry_backoff(Duration::from_millis(20))
        .retry_backoff_max(Duration::from_millis(200))
        .reconnect_backoff(Duration::from_millis(20))
        .reconnect_backoff_max(Duration::from_millis(200))
}

/// Current and peak resident set size of this process, in KiB (`VmRSS`, `VmHWM`).
pub fn rss_kib() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Like `producer_tests::read_back_all`, for several topics with one consumer (each consumer
/// costs about a second to start against the mock): reads every partition of `topics` from
/// its beginning up to its high watermark (asked first: nothing is being produced any more)
/// with `check.crcs=true`, failing on corrupt data.
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
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "producer-tests-e2e")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("check.crcs", "true")
        .set("fetch.wait.max.ms", "20")
        .create()
        .expect("read-back consumer");
    let mut tpl = TopicPartitionList::new();
    // (topic, partition) -> the offset to reach.
    let mut todo: HashMap<(String, i32), i64> = HashMap::new();
    for &(t, n) in topics {
        for p in 0..n {
            tpl.add_partition_offset(t, p, Offset::Beginning).unwrap();
            let (lo, hi) = c
                .fetch_watermarks(t, p, Duration::from_secs(10))
                .expect("watermarks");
            if hi > lo {
                todo.insert((t.to_owned(), p), hi);
            }
        }
    }
    c.assign(&tpl).unwrap();
    let deadline = Instant::now() + timeout;
    while !todo.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "read back timed out; partitions not at their end: {todo:?}"
        );
        match c.poll(left.min(Duration::from_millis(100))) {
            Some(Ok(m)) => {
                let key = (m.topic().to_owned(), m.partition());
                if todo.get(&key).is_some_and(|&hi| m.offset() + 1 >= hi) {
                    todo.remove(&key);
                }
                let headers = m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default();
                f(Consumed {
                    topic: m.topic().to_owned(),
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers,
                    timestamp: m.timestamp(),
                });
            }
            Some(Err(KafkaError::MessageConsumption(code))) if is_data_error(code) => {
                panic!("read back: broker data rejected by the consumer: {code:?}")
            }
            // Transient: librdkafka retries by itself.
            Some(Err(_)) | None => {}
        }
    }
}

fn is_data_error(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::BadMessage
            | RDKafkaErrorCode::BadCompression
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::UnsupportedForMessageFormat
    )
}

/// Polls the partitions' watermarks until they hold at least `expected` records in total, or
/// `timeout` passes.
fn wait_for_log_size(bootstrap: &str, topics: &[(&str, i32)], expected: i64, timeout: Duration) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "producer-tests-watermarks")
        .create()
        .expect("watermark consumer");
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
        std::thread::sleep(Duration::from_millis(50));
    }
}
