//! The producer core at scale, past what one machine's Kafka holds: the simulated cluster at
//! 50 brokers and 100,000 partitions (and, beside it, 3 brokers and 12 partitions), records with
//! uniformly random 8-byte keys (so every partition is busy) and 100-byte values, in virtual
//! time. Prints, per point, in Markdown:
//!
//! * **CPU-s per million records**: this process's user+sys CPU (`getrusage`, not wall time)
//!   from the first send to the last report, divided by the records. The process runs both
//!   the core and the simulated cluster (which decodes every batch and keeps every record), so
//!   this is an upper bound of the core's share; the 12-partition row shows the same split at
//!   the small end.
//! * **the core's heap**: the bytes the producer holds once every record is sent (the batches
//!   of the ones not yet delivered, its partition and metadata tables), measured by a counting
//!   allocator as the live heap freed when the producer is dropped at that moment (a second
//!   pass of the same run); and the process's peak live heap (the simulated cluster's logs
//!   included) and peak RSS.
//!
//! Default settings (`Config::builder(bootstrap).build()`: batch 16 KiB, linger 5 ms,
//! idempotence on, acks=all). Records go in at `SCALE_RATE` records per virtual second
//! (default 1,000,000), `SCALE_RECORDS` of them (default 1,000,000); a send refused as `Full`
//! waits one virtual millisecond. Nothing here is asserted but that every record is delivered.
//!
//! `cargo bench -p producer-sim --bench scale` (`SCALE_RECORDS=200000` for a smoke run).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use producer_core::{Config, Producer, Record, SendErrorReason};
use producer_sim::drive::Harness;
use producer_sim::{SimCluster, SimConfig};

/// The system allocator, counting the live heap and its peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grown = new_size - layout.size();
                let live = LIVE.fetch_add(grown, Ordering::Relaxed) + grown;
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// This process's user+sys CPU seconds and peak RSS in KiB so far.
fn rusage() -> (f64, u64) {
    // SAFETY: getrusage writes into the struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime) + tv(ru.ru_stime), ru.ru_maxrss as u64)
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One point's figures.
struct Point {
    cpu_per_million: f64,
    virtual_secs: f64,
    delivered: usize,
    core_heap: usize,
    peak_heap: usize,
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace(['_', ','], "").parse().ok())
        .unwrap_or(default)
}

/// The cluster, topic and producer of one point, before any record.
fn harness(brokers: usize, partitions: i32) -> Harness<()> {
    let mut cluster = SimCluster::new(SimConfig::with_brokers(brokers, 7), Instant::now());
    cluster.create_topic("t", partitions).expect("topic");
    let now = cluster.now();
    let config = Config::builder(cluster.bootstrap())
        .build()
        .expect("config");
    Harness::new(Producer::new(config, now), cluster, now)
}

/// Sends `records` keyed records at `rate` per virtual second. Returns the reports' count.
fn send_all(h: &mut Harness<()>, records: u64, rate: u64) -> usize {
    let values = Bytes::from(
        (0..1 << 20)
            .map(|i: u32| b'a' + (i % 26) as u8)
            .collect::<Vec<u8>>(),
    );
    let per_ms = (rate / 1000).max(1);
    let topic: std::sync::Arc<str> = "t".into();
    let mut rng = 42u64;
    let mut delivered = 0;
    let mut sent = 0u64;
    while sent < records {
        let slice_end = (sent + per_ms).min(records);
        while sent < slice_end {
            let start = (sent as usize * 7919) % ((1 << 20) - 100);
            let key = Bytes::copy_from_slice(&splitmix(&mut rng).to_be_bytes());
            let record = Record::new(topic.clone(), values.slice(start..start + 100)).with_key(key);
            match h.send(record, ()) {
                Ok(()) => sent += 1,
                Err(e) if matches!(e.reason, SendErrorReason::Full) => break,
                Err(e) => panic!("send refused: {}", e.reason),
            }
        }
        h.run_for(Duration::from_millis(1));
        delivered += count_reports(h);
    }
    delivered
}

/// Counts and drops the reports so far (a failure is fatal: the point would mean nothing).
fn count_reports(h: &mut Harness<()>) -> usize {
    let n = h.deliveries.len();
    if let Some(failed) = h.deliveries.iter().find_map(|d| d.result.as_ref().err()) {
        panic!("delivery failed: {}", failed.error);
    }
    h.deliveries.clear();
    n
}

fn point(brokers: usize, partitions: i32, records: u64, rate: u64) -> Point {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    // Pass 1: CPU from the first send to the last report.
    let mut h = harness(brokers, partitions);
    // Let the producer fetch metadata and connect before the clock starts.
    h.run_for(Duration::from_millis(50));
    let (cpu_before, _) = rusage();
    let started = h.now;
    let mut delivered = send_all(&mut h, records, rate);
    assert!(h.flush(Duration::from_secs(600)), "every record reported");
    delivered += count_reports(&mut h);
    let (cpu_after, _) = rusage();
    let virtual_secs = (h.now - started).as_secs_f64();
    assert_eq!(delivered as u64, records, "every record delivered");
    drop(h);
    // Pass 2: the producer's heap once every record is sent (before flush).
    let mut h = harness(brokers, partitions);
    h.run_for(Duration::from_millis(50));
    send_all(&mut h, records, rate);
    let live = LIVE.load(Ordering::Relaxed);
    let now = h.now;
    let config = Config::builder(h.cluster.bootstrap())
        .build()
        .expect("config");
    drop(std::mem::replace(
        &mut h.producer,
        Producer::new(config, now),
    ));
    let core_heap = live.saturating_sub(LIVE.load(Ordering::Relaxed));
    Point {
        cpu_per_million: (cpu_after - cpu_before) / (records as f64 / 1e6),
        virtual_secs,
        delivered,
        core_heap,
        peak_heap: PEAK.load(Ordering::Relaxed),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let records = env("SCALE_RECORDS", 1_000_000);
    let rate = env("SCALE_RATE", 1_000_000);
    println!(
        "{records} records of 100 B with random 8-byte keys at {rate} records per virtual second, \
         default settings (batch 16 KiB, linger 5 ms, idempotence), the simulated cluster:\n"
    );
    println!(
        "| brokers | partitions | delivered | virtual s | process CPU-s per million | core heap \
         MB (all sent) | process peak heap MB | process peak RSS MB |\n|---|---|---|---|---|---|---|---|"
    );
    for (brokers, partitions) in [(3, 12), (50, 100_000)] {
        let p = point(brokers, partitions, records, rate);
        let (_, rss_kb) = rusage();
        println!(
            "| {brokers} | {partitions} | {} | {:.2} | {:.3} | {:.1} | {:.1} | {:.1} |",
            p.delivered,
            p.virtual_secs,
            p.cpu_per_million,
            p.core_heap as f64 / 1e6,
            p.peak_heap as f64 / 1e6,
            rss_kb as f64 / 1024.0
        );
    }
}
