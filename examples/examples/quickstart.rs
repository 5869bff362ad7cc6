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
//! with the topic `quickstart` of 48 partitions. It shows progress (a bar on a terminal, the
//! same `indicatif` display as `kafka-produce`; a line every 5 s otherwise) with delivered and
//! failed apart, then prints delivered / failed counts, records per second and delivery
//! latency percentiles, and finally
//! reads every record back with an independent consumer (librdkafka, CRC checks on) to confirm
//! they all arrived. Each run's values start with the process id, so the read-back counts this
//! run's records only.
//!
//! With `--brokers`, the topic (`--topic`, default `quickstart`) must exist (or be
//! auto-created) with `--partitions` partitions (default 48), which the read-back reads.
//! When no bootstrap broker can be reached (a wrong address, a closed port), it stops at the
//! first failed connection and says which address failed and why
//! ([`producer_core::Event::AllBrokersDown`]), instead of waiting out the records' timeouts.
//! `--help` prints the options.
//!

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use kafka_produce::latency::Latencies;
use kafka_produce::progress::{Counts, Display, Progress};
use producer_core::{ConnectionError, Event};
use producer_tokio::{Config, ProducerHandle, Record, Report};
use std::sync::atomic::Ordering;

/// 1M x ~110 bytes over 48 partitions stays under the mock's ~5 MiB per partition retention,
/// so the read-back can see every record.
const VALUE_BYTES: usize = 100;

/// Produce records through the tokio driver (to an embedded mock cluster, or to --brokers),
/// with progress and latency percentiles, then read them back with an independent consumer.
#[derive(Debug, Parser)]
#[command(name = "quickstart")]
struct Args {
    /// A real cluster's bootstrap brokers, host:port[,host:port...] (default: an embedded mock
    /// cluster of three brokers).
    #[arg(long)]
    brokers: Option<String>,
    /// How many records (of 100 bytes) to produce.
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// The topic.
    #[arg(long, default_value = "quickstart")]
    topic: String,
    /// The topic's partitions (the mock creates them; with --brokers the read-back reads them).
    #[arg(long, default_value_t = 48)]
    partitions: i32,
    /// A producer setting by its Kafka name, name=value (repeatable), e.g.
    /// -X security.protocol=SASL_SSL.
    #[arg(short = 'X', value_name = "NAME=VALUE")]
    settings: Vec<String>,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quickstart: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let records = args.records;
    let partitions = args.partitions;
    let topic_name = args.topic.clone();
    let mock = match &args.brokers {
        Some(_) => None,
        None => Some(producer_tests::MockKafka::new(
            3,
            &[(topic_name.as_str(), partitions)],
        )?),
    };
    let bootstrap = match (&mock, &args.brokers) {
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
    for setting in &args.settings {
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
    let outcome = rt.block_on(produce(config, &topic_name, records))?;
    // Stop the runtime (and its worker threads) before the read-back; a producer still
    // waiting out its timeouts after an early stop is not waited for.
    rt.shutdown_background();

    let Outcome {
        sent,
        delivered,
        failed,
        latencies,
        elapsed,
        unreachable,
    } = outcome;
    let secs = elapsed.as_secs_f64();
    println!("delivered {delivered}, failed {failed}");
    if let Some(cause) = unreachable {
        return Err(format!(
            "no bootstrap broker could be reached: {cause}\n\
             stopped early, after sending {sent} records ({delivered} delivered); check \
             --brokers (and -X security.protocol) and that the cluster is up"
        )
        .into());
    }
    println!(
        "{:.0} records/s ({:.1} MB/s of values) in {:.2} s",
        delivered as f64 / secs,
        (delivered as usize * VALUE_BYTES) as f64 / secs / 1e6,
        secs
    );
    println!("delivery latency ms: {}", latencies.summary());

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
        "read back {} of {delivered} delivered records ({} distinct, {:.1} s)",
        back.iter()
            .filter(|c| c
                .value
                .as_deref()
                .is_some_and(|v| v.starts_with(prefix.as_bytes())))
            .count(),
        mine.len(),
        started.elapsed().as_secs_f64()
    );
    let ok = mine.len() as u64 == delivered;
    drop(back);
    // The mock goes last: the read-back consumer has been dropped already.
    drop(mock);
    if !ok {
        return Err("some delivered records were not read back".into());
    }
    if failed > 0 {
        return Err(format!("{failed} records failed").into());
    }
    Ok(())
}

/// What a produce run gave.
struct Outcome {
    sent: u64,
    delivered: u64,
    failed: u64,
    latencies: Latencies,
    elapsed: Duration,
    /// Set when no bootstrap broker could be reached: the run stopped early.
    unreachable: Option<ConnectionError>,
}

/// Produces `records` records with `send_detached`: each report goes to the `on_delivery`
/// callback with the record's tag (here: when it was sent, in µs since the start), which counts
/// it and its latency. The `on_event` callback watches for the cluster being unreachable.
async fn produce(
    config: Config,
    topic: &str,
    records: u64,
) -> Result<Outcome, Box<dyn std::error::Error>> {
    let counts = Arc::new(Counts::default());
    let progress = Progress::start(
        Display::auto(Duration::from_secs(5)),
        Some(records),
        counts.clone(),
    );
    let printer = progress.printer();
    let started = Instant::now();
    let latencies = Arc::new(Mutex::new(Latencies::new()));
    let (down_tx, mut down_rx) = tokio::sync::watch::channel(None::<ConnectionError>);
    let on_report = {
        let (counts, latencies) = (counts.clone(), latencies.clone());
        move |report: Report| {
            let sent_at = Duration::from_micros(report.tag);
            let latency = started.elapsed().saturating_sub(sent_at);
            latencies.lock().unwrap().record(latency);
            match report.result {
                Ok(_) => counts.delivered.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    if counts.failed.fetch_add(1, Ordering::Relaxed) < 5 {
                        printer.suspend(|| eprintln!("a record failed: {e}"));
                    }
                    0
                }
            };
        }
    };
    let on_event = move |e: &Event| {
        if let Event::AllBrokersDown {
            last_error,
            cluster_reached: false,
        } = e
        {
            down_tx.send_if_modified(|cause| cause.replace(last_error.clone()).is_none());
        }
    };
    let producer = ProducerHandle::builder(config)
        .on_delivery(on_report)
        .on_event(on_event)
        .start()?;
    let run_id = std::process::id();
    let topic: Arc<str> = Arc::from(topic);
    let sending = async {
        for i in 0..records {
            let mut value = format!("{run_id}:{i:010}:").into_bytes();
            value.resize(VALUE_BYTES, b'x');
            let tag = started.elapsed().as_micros() as u64;
            producer
                .send_detached(Record::new(topic.clone(), value), tag)
                .await
                .map_err(|e| format!("send refused: {e}"))?;
            counts.sent.fetch_add(1, Ordering::Relaxed);
        }
        producer.close().await;
        Ok::<_, String>(())
    };
    let unreachable = tokio::select! {
        sent = sending => {
            sent?;
            None
        }
        cause = async {
            match down_rx.wait_for(Option::is_some).await {
                Ok(cause) => cause.clone(),
                // The producer ended (closed) without it: the sending branch finishes.
                Err(_) => std::future::pending().await,
            }
        } => cause,
    };
    let elapsed = started.elapsed();
    progress.finish();
    let (sent, delivered, failed) = counts.read();
    let latencies = latencies.lock().unwrap().clone();
    Ok(Outcome {
        sent,
        delivered,
        failed,
        latencies,
        elapsed,
        unreachable,
    })
}
