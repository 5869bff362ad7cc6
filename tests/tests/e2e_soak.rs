//! Soak: steady production through the tokio driver for minutes, with periodic faults from the
//! mock cluster, then the same end-to-end checks as the other suites. Opt-in:
//!
//! ```text
//! SOAK=1 cargo test -p producer-tests --test e2e_soak -- --nocapture
//! ```
//!
//! Knobs (environment): `SOAK_SECS` (default 600), `SOAK_RATE` records/s (default 1000),
//! `SOAK_PARTITIONS` per topic, two topics (default 24), `SOAK_FAULT_SECS` between faults
//! (default 5), `SOAK_REPORT_SECS` between progress lines (default 60).
//!
//! Volume: records of ~100-300 bytes at 1000/s over 48 partitions stay near 3 MiB per
//! partition in 10 minutes, under the mock's ~5 MiB per-partition retention.
//!
//! Faults, in rotation: leader moves of a few partitions; a broker down for 1.5 s; Produce
//! answered with NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS; connections
//! dropped (`_TRANSPORT`); one broker's round trip at 100 ms for 2 s; delayed per-broker errors.
//!
//! Checked at the end: every record has exactly one report and it is a success; every record
//! is in the log, intact (key, value, headers, timestamp; CRCs checked by the consumer), in
//! the partition its report names (murmur2 for keyed records); each reported offset holds its
//! record. Duplicates (broker down, dropped connections: the mock appends retries again) and
//! send-order inversions (injected errors with five requests in flight: the mock does not check
//! sequence numbers) are the mock's and are counted, not failed; see `e2e_faults.rs`. The strict
//! property (exactly once, in send order, no tolerance) under a long mixed fault schedule is
//! asserted against Apache Kafka by `kafka_random::{tokio,mio}_random_fault_schedule`, whose
//! long mode (`KAFKA_RANDOM_SECS=600`) is this soak's counterpart.
//! Printed: RSS every `SOAK_REPORT_SECS`, and the peak (VmHWM) before and after the read back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use producer_tests::{api, errors, MockKafka};
use producer_tests::{check_consumed, id_of, key_partition, make_record_at, now_ms, rss_kib, Keys};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_line(label: &str) -> String {
    let (rss, hwm) = rss_kib();
    format!(
        "{label}: RSS {:.1} MiB, peak {:.1} MiB",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    )
}

/// Sleeps up to `d`, in small steps, returning early once `stop` is set.
fn nap(d: Duration, stop: &AtomicBool) {
    let end = Instant::now() + d;
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The faults of the rotation: leader moves, broker down/up, mixed Produce errors, dropped
/// connections, round-trip delay, delayed per-broker errors.
const FAULT_KINDS: usize = 6;

/// Injects one fault every `every` until `stop`; returns how many of each kind.
fn fault_loop(
    mock: &MockKafka,
    topics: &[(&str, i32)],
    every: Duration,
    stop: &AtomicBool,
) -> [usize; FAULT_KINDS] {
    let mut counts = [0; FAULT_KINDS];
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut k = 0usize;
    loop {
        nap(every, stop);
        if stop.load(Ordering::Relaxed) {
            return counts;
        }
        let kind = k % FAULT_KINDS;
        k += 1;
        counts[kind] += 1;
        let broker = (next() % 3) as i32 + 1;
        match kind {
            0 => {
                for _ in 0..6 {
                    let (t, n) = topics[(next() % topics.len() as u64) as usize];
                    let p = (next() % n as u64) as i32;
                    let to = (next() % 3) as i32 + 1;
                    mock.set_leader(t, p, Some(to)).unwrap();
                }
            }
            1 => {
                mock.broker_down(broker).unwrap();
                // Always brought back, even when stopping.
                std::thread::sleep(Duration::from_millis(1500));
                mock.broker_up(broker).unwrap();
            }
            2 => mock.push_request_errors(
                api::PRODUCE,
                &[
                    errors::NOT_LEADER_OR_FOLLOWER,
                    errors::REQUEST_TIMED_OUT,
                    errors::NOT_ENOUGH_REPLICAS,
                ],
            ),
            3 => mock.push_request_errors(api::PRODUCE, &[errors::TRANSPORT; 2]),
            4 => {
                mock.set_rtt(broker, Duration::from_millis(100)).unwrap();
                std::thread::sleep(Duration::from_secs(2));
                mock.set_rtt(broker, Duration::ZERO).unwrap();
            }
            _ => mock
                .push_broker_request_errors(
                    broker,
                    api::PRODUCE,
                    &[
                        (errors::NOT_ENOUGH_REPLICAS, Duration::from_millis(50)),
                        (errors::REQUEST_TIMED_OUT, Duration::ZERO),
                    ],
                )
                .unwrap(),
        }
    }
}

/// A report, compactly: `(partition, offset)`; `(-2, _)` = none yet.
type Compact = (i32, i64);

struct Produced {
    reports: Vec<Compact>,
    failures: Vec<(usize, String)>,
    time: Duration,
    peak_kib: u64,
}

/// The producing side, run in a child process (see the test) so that its RSS is the
/// producer's alone: the mock, which keeps every partition log in memory, stays in the parent.
fn produce_child(bootstrap: &str, p: &Params) -> Produced {
    let config = producer_core::Config::builder(producer_tests::parse_bootstrap(bootstrap))
        .retry_backoff(Duration::from_millis(20))
        .retry_backoff_max(Duration::from_millis(200))
        .reconnect_backoff(Duration::from_millis(20))
        .reconnect_backoff_max(Duration::from_millis(200))
        .request_timeout(Duration::from_secs(5))
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let topics = &p.topics();
    println!("{}", rss_line("child started"));
    let rt = producer_tests::runtime();
    rt.block_on(async {
        let h = producer_tokio::ProducerHandle::start(config).unwrap();
        let reported = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) =
            tokio::sync::mpsc::unbounded_channel::<(usize, producer_tokio::DeliveryFuture)>();
        let counter = reported.clone();
        let collector = tokio::spawn(async move {
            let mut reports: Vec<Compact> = Vec::new();
            let mut failures = Vec::new();
            while let Some((i, f)) = rx.recv().await {
                if reports.len() <= i {
                    reports.resize(i + 1, (-2, 0));
                }
                match f.await {
                    Ok(m) => reports[i] = (m.partition, m.offset),
                    Err(e) => failures.push((i, format!("{e:?}"))),
                }
                counter.fetch_add(1, Ordering::Relaxed);
            }
            (reports, failures)
        });
        let started = Instant::now();
        let mut next_report = p.report_every;
        let mut sent = 0usize;
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        while started.elapsed() < p.duration {
            tick.tick().await;
            let target = (p.rate * started.elapsed().as_secs_f64()) as usize;
            while sent < target {
                let r = make_record_at(sent, topics, KEYS, VALUE_LEN, p.base_ms);
                let f = h.send(r).await.expect("send");
                tx.send((sent, f)).unwrap();
                sent += 1;
            }
            if started.elapsed() >= next_report {
                next_report += p.report_every;
                println!(
                    "{}",
                    rss_line(&format!(
                        "{:>4} s: {sent} sent, {} reported",
                        started.elapsed().as_secs(),
                        reported.load(Ordering::Relaxed)
                    ))
                );
            }
        }
        h.flush().await;
        drop(tx);
        let (reports, failures) = collector.await.unwrap();
        h.close().await;
        assert_eq!(reports.len(), sent);
        Produced {
            reports,
            failures,
            time: started.elapsed(),
            peak_kib: rss_kib().1,
        }
    })
}

const KEYS: Keys = Keys::Mixed;
const VALUE_LEN: usize = 100;

struct Params {
    duration: Duration,
    rate: f64,
    partitions: i32,
    fault_every: Duration,
    report_every: Duration,
    base_ms: i64,
}

impl Params {
    fn from_env() -> Self {
        Params {
            duration: Duration::from_secs(env_or("SOAK_SECS", 600)),
            rate: env_or("SOAK_RATE", 1000) as f64,
            partitions: env_or("SOAK_PARTITIONS", 24) as i32,
            fault_every: Duration::from_secs(env_or("SOAK_FAULT_SECS", 5)),
            report_every: Duration::from_secs(env_or("SOAK_REPORT_SECS", 60)),
            base_ms: env_or("SOAK_BASE_MS", (now_ms() - 3_600_000) as u64) as i64,
        }
    }

    fn topics(&self) -> [(&'static str, i32); 2] {
        [("soak-a", self.partitions), ("soak-b", self.partitions)]
    }
}

const TEST_NAME: &str = "soak_tokio_with_periodic_faults";

#[test]
fn soak_tokio_with_periodic_faults() {
    if let Ok(bootstrap) = std::env::var("SOAK_CHILD_BOOTSTRAP") {
        // Child mode: produce, then hand the reports to the parent through a file.
        let p = Params::from_env();
        let out = produce_child(&bootstrap, &p);
        let mut text = String::with_capacity(out.reports.len() * 12);
        use std::fmt::Write;
        writeln!(
            text,
            "{} {} {}",
            out.reports.len(),
            out.time.as_millis(),
            out.peak_kib
        )
        .unwrap();
        for (pa, off) in &out.reports {
            writeln!(text, "{pa} {off}").unwrap();
        }
        for (i, e) in &out.failures {
            writeln!(text, "FAIL {i} {e}").unwrap();
        }
        std::fs::write(std::env::var("SOAK_CHILD_REPORTS").unwrap(), text).unwrap();
        return;
    }
    if std::env::var("SOAK").as_deref() != Ok("1") {
        eprintln!("soak test skipped: set SOAK=1 (and SOAK_SECS) to run it");
        return;
    }
    let p = Params::from_env();
    let topics_arr = p.topics();
    let topics: &[(&str, i32)] = &topics_arr;

    let mock = MockKafka::new(3, topics).unwrap();
    let start_ms = now_ms();
    let reports_path = std::env::temp_dir().join(format!("soak-reports-{}", std::process::id()));
    let stop = AtomicBool::new(false);
    let faults = std::thread::scope(|scope| {
        let faults = scope.spawn(|| fault_loop(&mock, topics, p.fault_every, &stop));
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST_NAME, "--nocapture", "--test-threads", "1"])
            .env("SOAK_CHILD_BOOTSTRAP", mock.bootstrap_servers())
            .env("SOAK_CHILD_REPORTS", &reports_path)
            .env("SOAK_BASE_MS", p.base_ms.to_string())
            .status()
            .expect("spawn the producing child");
        stop.store(true, Ordering::Relaxed);
        assert!(status.success(), "producing child failed: {status}");
        faults.join().unwrap()
    });
    let end_ms = now_ms();
    let text = std::fs::read_to_string(&reports_path).unwrap();
    let _ = std::fs::remove_file(&reports_path);
    let mut lines = text.lines();
    let head: Vec<u64> = lines
        .next()
        .unwrap()
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    let (n, produce_ms, child_peak_kib) = (head[0] as usize, head[1], head[2]);
    let mut reports: Vec<Compact> = Vec::with_capacity(n);
    let mut failures = Vec::new();
    for l in lines {
        if let Some(f) = l.strip_prefix("FAIL ") {
            failures.push(f.to_owned());
        } else {
            let (a, b) = l.split_once(' ').unwrap();
            reports.push((a.parse().unwrap(), b.parse().unwrap()));
        }
    }
    assert_eq!(reports.len(), n);
    println!(
        "produced {n} records in {:.1} s; producer process peak RSS (VmHWM) {:.1} MiB; faults: \
         {} leader moves, {} broker outages, {} error bursts, {} connection drops, {} delays, \
         {} delayed broker errors",
        produce_ms as f64 / 1000.0,
        child_peak_kib as f64 / 1024.0,
        faults[0],
        faults[1],
        faults[2],
        faults[3],
        faults[4],
        faults[5]
    );
    println!("{}", rss_line("test process (mock cluster inside)"));
    assert!(
        failures.is_empty(),
        "{} records failed, first {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(reports.iter().all(|r| r.0 >= 0), "records without a report");

    // Read back, checking each record against its regenerated original.
    let t0 = Instant::now();
    let mut copies = vec![0u8; n];
    let mut offset_matches = vec![false; n];
    let mut last_first: HashMap<(String, i32), usize> = HashMap::new();
    let mut inversions = 0usize;
    let mut consumed = 0usize;
    let counts: HashMap<&str, i32> = topics.iter().copied().collect();
    producer_tests::read_back_each(
        &mock.bootstrap_servers(),
        topics,
        Duration::from_secs(600),
        |c| {
            consumed += 1;
            let i = id_of(&c);
            assert!(i < n, "unknown id {i}");
            let r = make_record_at(i, topics, KEYS, VALUE_LEN, p.base_ms);
            check_consumed(&c, i, &r, (start_ms, end_ms));
            let (p, off) = reports[i];
            assert_eq!(c.partition, p, "partition of {i} vs its report");
            if let Some(want) = r.partition {
                assert_eq!(p, want, "explicit partition of {i}");
            } else if let Some(k) = &r.key {
                assert_eq!(
                    p,
                    key_partition(k, counts[&*r.topic]),
                    "murmur2 partition of {i}"
                );
            }
            if off == c.offset {
                offset_matches[i] = true;
            }
            copies[i] = copies[i].saturating_add(1);
            if copies[i] == 1 {
                let last = last_first
                    .entry((c.topic.clone(), c.partition))
                    .or_insert(0);
                if *last > i {
                    inversions += 1;
                }
                *last = (*last).max(i);
            }
        },
    );
    let missing = copies.iter().filter(|&&c| c == 0).count();
    let duplicated = copies.iter().filter(|&&c| c > 1).count();
    let bad_offsets = offset_matches.iter().filter(|&&m| !m).count();
    println!(
        "read back {consumed} records in {:?}: {missing} missing, {duplicated} duplicated by the \
         mock, {inversions} send-order inversions by the mock, {bad_offsets} reports not \
         matching the log",
        t0.elapsed()
    );
    assert_eq!(
        missing, 0,
        "records missing from the log (over ~5 MiB per partition the mock drops the oldest: \
         lower SOAK_RATE or raise SOAK_PARTITIONS)"
    );
    assert_eq!(
        bad_offsets, 0,
        "reported offsets that do not hold their record"
    );
}
