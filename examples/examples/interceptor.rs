//! An interceptor: every record stamped with headers on its way in, every report seen on its
//! way out. Here it does what a tracing integration (OpenTelemetry) and a metrics plugin would:
//! `on_send` adds a W3C `traceparent` header (one span per record, in one trace per run) and an
//! `origin` header; `on_acknowledgement` counts the outcomes, keeps a gauge of the records in
//! flight (sent and not yet acknowledged), and measures each record's delivery latency from its
//! timestamp when that is the record's create time (the driver fills it in right before
//! `on_send`; a topic with log-append time reports the broker's time instead, and so does
//! librdkafka's mock cluster, which answers every write with the log-append time 1234 ms: the
//! example then says so instead of printing latencies). Then an independent consumer
//! (librdkafka) reads the records back and prints the headers it finds.
//!
//! ```text
//! cargo run --release --example interceptor                      # embedded mock cluster
//! cargo run --release --example interceptor -- --records 100000
//! ```
//!
//! It starts librdkafka's mock cluster (three brokers) in this process, with the topic
//! `traced` of 6 partitions, produces through the tokio driver, and fails (exit status 1)
//! unless every record is delivered and read back with the headers stamped for it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use producer_tokio::{Acknowledgement, Config, Header, Interceptor, ProducerHandle, Record};

const TOPIC: &str = "traced";
const PARTITIONS: i32 = 6;

/// What the interceptor saw of the reports.
#[derive(Debug, Default)]
struct Seen {
    delivered: u64,
    failed: u64,
    /// Delivery latencies (ms) of the records delivered with their create time.
    latencies_ms: Vec<i64>,
    /// Records delivered with a log-append time (no latency from it).
    log_append_time: u64,
    /// Records sent and not acknowledged yet, and the most at any time.
    in_flight: u64,
    max_in_flight: u64,
}

/// Stamps each record with the trace context and its origin, and watches every report.
///
/// It runs on the producer task, once per record and once per report, so it only stamps and
/// counts: nothing that blocks.
struct Tracing {
    trace_id: String,
    next_span: u64,
    /// The wall clock (ms) when the run started: a timestamp before it is not a create time
    /// of this run's records.
    started_ms: i64,
    seen: Arc<Mutex<Seen>>,
}

impl Interceptor for Tracing {
    fn on_send(&mut self, record: &mut Record) {
        self.next_span += 1;
        let traceparent = format!("00-{}-{:016x}-01", self.trace_id, self.next_span);
        // Replace, not append: a record the application sends again is stamped once.
        record
            .headers
            .retain(|h| h.key != "traceparent" && h.key != "origin");
        record.headers.push(Header::new(
            "traceparent",
            Some(traceparent.into_bytes().into()),
        ));
        record
            .headers
            .push(Header::new("origin", Some("interceptor-example".into())));
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.in_flight += 1;
        seen.max_in_flight = seen.max_in_flight.max(seen.in_flight);
    }

    fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.in_flight = seen.in_flight.saturating_sub(1);
        if ack.is_delivered() {
            seen.delivered += 1;
            match ack.timestamp() {
                Some(created) if created >= self.started_ms => {
                    seen.latencies_ms.push(wall_ms() - created)
                }
                _ => seen.log_append_time += 1,
            }
        } else {
            seen.failed += 1;
        }
    }
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let records: u64 = match args.iter().position(|a| a == "--records") {
        Some(i) => args.get(i + 1).ok_or("--records N")?.parse()?,
        None => 10_000,
    };
    let mock = producer_tests::MockKafka::new(3, &[(TOPIC, PARTITIONS)])?;
    let config = Config::builder(mock.bootstrap()).build()?;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let trace_id = format!("{:032x}", (u128::from(std::process::id()) << 64) | 0x5eed);

    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let producer = ProducerHandle::builder(config)
            .interceptor(Tracing {
                trace_id: trace_id.clone(),
                next_span: 0,
                started_ms: wall_ms(),
                seen: seen.clone(),
            })
            .start()?;
        let mut deliveries = Vec::with_capacity(records as usize);
        for i in 0..records {
            let record = Record::new(TOPIC, format!("event-{i}")).with_key(format!("k{}", i % 13));
            deliveries.push(producer.send(record).await?);
        }
        for delivery in deliveries {
            // Each future resolves after the interceptor saw its report.
            delivery.await?;
        }
        producer.close().await;
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;

    let mut seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    seen.latencies_ms.sort_unstable();
    let percentile = |p: usize| {
        seen.latencies_ms
            .get((seen.latencies_ms.len().saturating_sub(1)) * p / 100)
            .copied()
            .unwrap_or(0)
    };
    println!(
        "the interceptor saw {} delivered, {} failed; at most {} records in flight",
        seen.delivered, seen.failed, seen.max_in_flight
    );
    if !seen.latencies_ms.is_empty() {
        println!(
            "delivery latency ms (from the create time): p50 {} p99 {} max {}",
            percentile(50),
            percentile(99),
            percentile(100)
        );
    }
    if seen.log_append_time > 0 {
        println!(
            "{} records were acknowledged with a log-append time (the mock cluster's fixed \
             1234 ms), which says nothing of their latency",
            seen.log_append_time
        );
    }

    let back = producer_tests::read_back_all(
        &mock.bootstrap_servers(),
        TOPIC,
        PARTITIONS,
        Duration::from_secs(60),
    );
    println!(
        "read back {} records; the first few, with their headers:",
        back.len()
    );
    for c in back.iter().take(5) {
        let headers: Vec<String> = c
            .headers
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    String::from_utf8_lossy(v.as_deref().unwrap_or_default())
                )
            })
            .collect();
        println!(
            "  partition {} offset {}: {} [{}]",
            c.partition,
            c.offset,
            String::from_utf8_lossy(c.value.as_deref().unwrap_or_default()),
            headers.join(", ")
        );
    }
    let prefix = format!("00-{trace_id}-");
    let stamped = back
        .iter()
        .filter(|c| {
            c.headers.len() == 2
                && c.headers[0].0 == "traceparent"
                && c.headers[0]
                    .1
                    .as_deref()
                    .is_some_and(|v| v.starts_with(prefix.as_bytes()))
                && c.headers[1] == ("origin".to_owned(), Some(b"interceptor-example".to_vec()))
        })
        .count() as u64;
    println!("{stamped} of {records} records carry the interceptor's headers");
    drop(back);
    drop(mock);
    if stamped != records || seen.delivered != records || seen.failed != 0 {
        return Err("not every record was delivered and read back stamped".into());
    }
    Ok(())
}
