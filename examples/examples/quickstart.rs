//! Quickstart: produce a million records through the tokio driver and read them back.
//!
//! ```text
//! cargo run --release --example quickstart                         # embedded mock cluster
//! cargo run --release --example quickstart -- --brokers host:9092  # a real cluster
//! cargo run --release --example quickstart -- --records 100000     # fewer records
//! cargo run --release --example quickstart -- --brokers host:9093 \
//!     -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 \
//!     -X sasl.username=u -X sasl.password=p -X ssl.ca.location=ca.pem   # a secured cluster
//! ```
//!
//! `-X name=value` sets any producer setting by its Kafka name (Java's or librdkafka's
//! spelling, through `ConfigBuilder::set`), as many times as needed. The read-back consumer
//! (librdkafka here is built without TLS and SASL) only reaches PLAINTEXT clusters: with
//! another `security.protocol` the quickstart produces and reports, and skips the read-back.
//!
//! With no `--brokers` it starts librdkafka's mock cluster (three brokers) in this process,
//! with the topic `quickstart` of 48 partitions. It shows a progress bar, then prints
//! delivered / failed counts, records per second and delivery latency percentiles, and finally
//! reads every record back with an independent consumer (librdkafka, CRC checks on) to confirm
//! they all arrived. Each run's values start with the process id, so the read-back counts this
//! run's records only.
//!
//! With `--brokers`, the topic (`--topic`, default `quickstart`) must exist (or be
//! auto-created) with `--partitions` partitions (default 48), which the read-back reads.
//!

use std::collections::HashSet;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use producer_tokio::{Config, ProducerHandle, Record};

const TOPIC: &str = "quickstart";
/// 1M x ~110 bytes over 48 partitions stays under the mock's ~5 MiB per partition retention,
/// so the read-back can see every record.
const PARTITIONS: i32 = 48;
const RECORDS: u64 = 1_000_000;
const VALUE_BYTES: usize = 100;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quickstart: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let records: u64 = arg(&args, "--records").map_or(Ok(RECORDS), str::parse)?;
    let partitions: i32 = arg(&args, "--partitions").map_or(Ok(PARTITIONS), str::parse)?;
    let topic_name = arg(&args, "--topic").unwrap_or(TOPIC).to_string();
    let mock = match arg(&args, "--brokers") {
        Some(_) => None,
        None => Some(producer_tests::MockKafka::new(
            3,
            &[(topic_name.as_str(), partitions)],
        )?),
    };
    let bootstrap = match (&mock, arg(&args, "--brokers")) {
        (Some(m), _) => m.bootstrap(),
        (None, Some(list)) => producer_tests::parse_bootstrap(list),
        (None, None) => unreachable!("either a mock or --brokers"),
    };
    if bootstrap.is_empty() {
        return Err("no usable host:port in --brokers".into());
    }
    let servers = bootstrap
        .iter()
        .map(|(h, p)| format!("{h}:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    println!(
        "producing {records} records of {VALUE_BYTES} bytes to {topic_name} ({}) at {servers}",
        if mock.is_some() {
            "embedded mock cluster, 3 brokers"
        } else {
            "real cluster"
        }
    );

    let mut builder = Config::builder(bootstrap);
    for setting in settings(&args)? {
        let (name, value) = setting
            .split_once('=')
            .ok_or_else(|| format!("-X {setting}: expected name=value"))?;
        builder = builder.set(name, value)?;
    }
    let config = builder.build()?;
    let secured = config.security_protocol != producer_core::SecurityProtocol::Plaintext;
    if secured {
        println!("security.protocol={}", config.security_protocol);
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (failed, latencies, elapsed) = rt.block_on(produce(config, &topic_name, records))?;
    // Stop the runtime (and its worker threads) before the read-back.
    drop(rt);

    let mut latencies = latencies;
    latencies.sort_unstable();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies.get(i).copied().unwrap_or(0) as f64 / 1000.0
    };
    let secs = elapsed.as_secs_f64();
    println!("delivered {}, failed {failed}", records - failed);
    println!(
        "{:.0} records/s ({:.1} MB/s of values) in {:.2} s",
        records as f64 / secs,
        (records as usize * VALUE_BYTES) as f64 / secs / 1e6,
        secs
    );
    println!(
        "delivery latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(0.999),
        pct(1.0)
    );

    if secured {
        println!("read-back skipped: its consumer reaches PLAINTEXT listeners only");
        return if failed == 0 {
            Ok(())
        } else {
            Err(format!("{failed} records failed").into())
        };
    }
    // Read everything back with an independent consumer and count this run's records.
    let started = Instant::now();
    let back =
        producer_tests::read_back_all(&servers, &topic_name, partitions, Duration::from_secs(60));
    let prefix = format!("{}:", std::process::id());
    let mine: HashSet<&[u8]> = back
        .iter()
        .filter_map(|c| c.value.as_deref())
        .filter(|v| v.starts_with(prefix.as_bytes()))
        .collect();
    println!(
        "read back {} of {} delivered records ({} distinct, {:.1} s)",
        back.iter()
            .filter(|c| c
                .value
                .as_deref()
                .is_some_and(|v| v.starts_with(prefix.as_bytes())))
            .count(),
        records - failed,
        mine.len(),
        started.elapsed().as_secs_f64()
    );
    let ok = mine.len() as u64 == records - failed;
    drop(back);
    // The mock goes last: the read-back consumer has been dropped already.
    drop(mock);
    if !ok {
        return Err("some delivered records were not read back".into());
    }
    Ok(())
}

/// Produces `records` records and returns (failed, latencies in µs, elapsed).
async fn produce(
    config: Config,
    topic: &str,
    records: u64,
) -> Result<(u64, Vec<u32>, Duration), Box<dyn std::error::Error>> {
    let producer = ProducerHandle::start(config)?;
    let run_id = std::process::id();
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let (lat_tx, mut lat_rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
    let progress = tokio::spawn(progress_bar(done.clone(), records));
    let topic: Arc<str> = Arc::from(topic);

    let started = Instant::now();
    for i in 0..records {
        let mut value = format!("{run_id}:{i:010}:").into_bytes();
        value.resize(VALUE_BYTES, b'x');
        let sent_at = Instant::now();
        let delivery = producer
            .send(Record::new(topic.clone(), value))
            .await
            .map_err(|e| format!("send refused: {e}"))?;
        let (done, failed, lat_tx) = (done.clone(), failed.clone(), lat_tx.clone());
        tokio::spawn(async move {
            if let Err(e) = delivery.await {
                if failed.fetch_add(1, Ordering::Relaxed) < 5 {
                    eprintln!("\nrecord {i} failed: {e}");
                }
            }
            let _ = lat_tx.send(sent_at.elapsed().as_micros().min(u32::MAX as u128) as u32);
            done.fetch_add(1, Ordering::Relaxed);
        });
    }
    drop(lat_tx);
    let mut latencies = Vec::with_capacity(records as usize);
    while let Some(l) = lat_rx.recv().await {
        latencies.push(l);
    }
    let elapsed = started.elapsed();
    producer.close().await;
    progress.await?;
    Ok((failed.load(Ordering::Relaxed), latencies, elapsed))
}

/// Every `-X name=value` argument's `name=value`.
fn settings(args: &[String]) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-X" {
            let v = it.next().ok_or("-X needs a name=value after it")?;
            out.push(v.as_str());
        }
    }
    Ok(out)
}

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// Redraws a progress bar on stderr until every record has its report.
async fn progress_bar(done: Arc<AtomicU64>, total: u64) {
    let started = Instant::now();
    loop {
        let n = done.load(Ordering::Relaxed);
        let width = 40u64;
        let filled = (n * width / total.max(1)) as usize;
        let rate = n as f64 / started.elapsed().as_secs_f64().max(1e-9);
        eprint!(
            "\r[{}{}] {n}/{total} delivered ({rate:.0}/s)",
            "#".repeat(filled),
            " ".repeat(width as usize - filled)
        );
        let _ = std::io::stderr().flush();
        if n >= total {
            eprintln!();
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
