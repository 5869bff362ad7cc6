//! Rust peers of bench_e2e: `rust-peers krafka|confluent --bootstrap ... --records N
//! --values FILE [--keys FILE] --value-bytes N --batch-size N [--idempotence]
//! [--compression none|lz4|zstd] [--rate N]`.
//! Prints `RESULT ok=N failed=N secs=S`; the coordinator measures CPU and peak RSS of this
//! process itself (wait4). Payloads are the coordinator's arena files, sliced as in the bench.
//!
//! With `--rate N` (the latency workload) the sender is open loop: after one warm-up record
//! (delivered, not counted) record `i` is due at `start + i / N`; the sender sends every due
//! record (catching up when it fell behind) and each record's latency runs from when it was
//! due to its report (krafka: its delivery handle resolving, polled unordered; Confluent's
//! client: its callback); the RESULT line adds `p50_us`, `p99_us` and `p999_us`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

const VALUE_ARENA: usize = 1 << 20;
const KEYS: usize = 65_536;
const CHUNK: usize = 1024;

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    bootstrap: String,
    topic: String,
    records: u64,
    values: Bytes,
    keys: Option<Bytes>,
    value_bytes: usize,
    batch_size: usize,
    idempotence: bool,
    compression: String,
    rate: Option<f64>,
}

impl Args {
    fn value(&self, i: u64) -> std::ops::Range<usize> {
        let start = (i as usize).wrapping_mul(7919) % VALUE_ARENA;
        start..start + self.value_bytes
    }

    fn key(&self, i: u64) -> Option<std::ops::Range<usize>> {
        let k = (i as usize % KEYS) * 8;
        self.keys.as_ref().map(|_| k..k + 8)
    }
}

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    failed: AtomicU64,
}

/// The open-loop schedule of `--rate` and each delivered record's latency.
struct Schedule {
    start: Instant,
    /// Nanoseconds between two records' due times.
    interval_ns: f64,
    /// Per record: 1 + its latency in µs once delivered, 0 before (and if it failed).
    micros: Vec<AtomicU32>,
}

impl Schedule {
    fn new(records: u64, rate: f64) -> Schedule {
        Schedule {
            start: Instant::now(),
            interval_ns: 1e9 / rate,
            micros: (0..records).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    fn due(&self, i: u64) -> Instant {
        self.start + Duration::from_nanos((i as f64 * self.interval_ns) as u64)
    }

    /// Waits until record `i` is due (at once if it is late).
    async fn pace(&self, i: u64) {
        let wait = self.due(i).saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            // The sending task's thread sleeps: tokio's timer has 1 ms granularity.
            tokio::task::block_in_place(|| std::thread::sleep(wait));
        }
    }

    fn delivered(&self, i: u64, at: Instant) {
        let us = at.saturating_duration_since(self.due(i)).as_micros();
        self.micros[i as usize].store(
            us.min(u128::from(u32::MAX - 1)) as u32 + 1,
            Ordering::Relaxed,
        );
    }

    /// ` p50_us=A p99_us=B p999_us=C` (nearest rank) over the delivered records, or empty.
    fn percentiles(&self) -> String {
        let mut v: Vec<u32> = self
            .micros
            .iter()
            .map(|m| m.load(Ordering::Relaxed))
            .filter(|&m| m > 0)
            .map(|m| m - 1)
            .collect();
        if v.is_empty() {
            return String::new();
        }
        v.sort_unstable();
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        format!(
            " p50_us={} p99_us={} p999_us={}",
            rank(0.50),
            rank(0.99),
            rank(0.999)
        )
    }
}

impl Counts {
    fn count(&self, failure: Option<String>) {
        match failure {
            None => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Some(e) => {
                if self.failed.fetch_add(1, Ordering::Relaxed) < 3 {
                    eprintln!("rust-peers: delivery failed: {e}");
                }
            }
        }
    }
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("rust-peers: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<(), Error> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str| {
        argv.iter()
            .position(|a| a == name)
            .and_then(|i| argv.get(i + 1))
            .cloned()
    };
    let client = argv.first().cloned().ok_or("client name")?;
    let args = Args {
        bootstrap: get("--bootstrap").ok_or("--bootstrap")?,
        topic: get("--topic").unwrap_or_else(|| "bench".into()),
        records: get("--records").ok_or("--records")?.parse()?,
        values: Bytes::from(std::fs::read(get("--values").ok_or("--values")?)?),
        keys: get("--keys")
            .map(std::fs::read)
            .transpose()?
            .map(Bytes::from),
        value_bytes: get("--value-bytes").map_or(Ok(100), |s| s.parse())?,
        batch_size: get("--batch-size").map_or(Ok(16384), |s| s.parse())?,
        idempotence: argv.iter().any(|a| a == "--idempotence"),
        compression: get("--compression").unwrap_or_else(|| "none".into()),
        rate: get("--rate").map(|s| s.parse()).transpose()?,
    };
    if !["none", "lz4", "zstd"].contains(&args.compression.as_str()) {
        return Err(format!("unknown compression {:?}", args.compression).into());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let counts = Arc::new(Counts::default());
    let (secs, latency) = rt.block_on(async {
        let started = Instant::now();
        let schedule = match client.as_str() {
            "krafka" => run_krafka(&args, &counts).await?,
            "confluent" => run_confluent(&args, &counts).await?,
            other => return Err(format!("unknown client {other:?}").into()),
        };
        // An open-loop run is timed from its schedule's start (after the warm-up record).
        Ok::<_, Error>(match schedule {
            Some(s) => (s.start.elapsed().as_secs_f64(), s.percentiles()),
            None => (started.elapsed().as_secs_f64(), String::new()),
        })
    })?;
    println!(
        "RESULT ok={} failed={} secs={secs:.6}{latency}",
        counts.ok.load(Ordering::Relaxed),
        counts.failed.load(Ordering::Relaxed)
    );
    Ok(())
}

/// krafka: `Producer::enqueue(record).await` per record; the delivery handles go in chunks of
/// 1024 to a collector task that awaits them (as the bench's `tokio` row does). With `--rate`,
/// open loop (see the module docs); the returned schedule holds the latencies.
async fn run_krafka(a: &Args, counts: &Arc<Counts>) -> Result<Option<Arc<Schedule>>, Error> {
    use krafka::producer::Acks;
    let kafka = tokio::time::timeout(
        Duration::from_secs(30),
        krafka::Kafka::builder(a.bootstrap.clone()).connect(),
    )
    .await
    .map_err(|_| "cannot connect: no answer in 30 s")?
    .map_err(|e| format!("cannot connect: {e}"))?;
    let producer = kafka
        .producer()
        .acks(Acks::All)
        .linger(Duration::from_millis(5))
        .batch_size(a.batch_size)
        .idempotent(a.idempotence)
        .buffer_memory(64 << 20)
        .compression(match a.compression.as_str() {
            "lz4" => krafka::Compression::Lz4,
            "zstd" => krafka::Compression::Zstd,
            _ => krafka::Compression::None,
        })
        .build()
        .await
        .map_err(|e| format!("cannot build the producer: {e}"))?;
    let record = |i: u64| {
        let mut record = krafka::Record::new(a.topic.clone(), a.values.slice(a.value(i)));
        if let (Some(keys), Some(k)) = (&a.keys, a.key(i)) {
            record = record.key(keys.slice(k));
        }
        record
    };
    if let Some(rate) = a.rate {
        use futures_util::stream::{FuturesUnordered, StreamExt};
        let warmup = producer.enqueue(record(0)).await?;
        let _delivered = warmup
            .await
            .map_err(|e| format!("warm-up record failed: {e}"))?;
        let schedule = Arc::new(Schedule::new(a.records, rate));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let collector = {
            let (counts, schedule) = (counts.clone(), schedule.clone());
            tokio::spawn(async move {
                let mut pending = FuturesUnordered::new();
                let mut open = true;
                loop {
                    tokio::select! {
                        next = rx.recv(), if open => match next {
                            Some((i, handle)) => pending.push(async move {
                                let r: krafka::Result<_> = handle.await;
                                (i, r)
                            }),
                            None => open = false,
                        },
                        Some((i, r)) = pending.next(), if !pending.is_empty() => {
                            if r.is_ok() {
                                schedule.delivered(i, Instant::now());
                            }
                            counts.count(r.err().map(|e| e.to_string()));
                        }
                        else => break,
                    }
                }
            })
        };
        for i in 0..a.records {
            schedule.pace(i).await;
            let handle = producer
                .enqueue(record(i))
                .await
                .map_err(|e| format!("send refused: {e}"))?;
            tx.send((i, handle)).map_err(|_| "collector gone")?;
        }
        drop(tx);
        producer.flush().await?;
        collector.await?;
        producer.close().await?;
        return Ok(Some(schedule));
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<_>>(64);
    let collector = {
        let counts = counts.clone();
        tokio::spawn(async move {
            while let Some(chunk) = rx.recv().await {
                for handle in chunk {
                    let r: krafka::Result<_> = handle.await;
                    counts.count(r.err().map(|e| e.to_string()));
                }
            }
        })
    };
    let mut chunk = Vec::with_capacity(CHUNK);
    for i in 0..a.records {
        let handle = producer
            .enqueue(record(i))
            .await
            .map_err(|e| format!("send refused: {e}"))?;
        chunk.push(handle);
        if chunk.len() == CHUNK {
            tx.send(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK)))
                .await?;
        }
    }
    tx.send(chunk).await?;
    drop(tx);
    producer.flush().await?;
    collector.await?;
    producer.close().await?;
    Ok(None)
}

/// Confluent's client: `KafkaProducer::send(record, Some(callback)).await` per record (the
/// byte-slice path, records copied into the batch), `flush` at the end. With `--rate`, open
/// loop (see the module docs); the returned schedule holds the latencies.
async fn run_confluent(a: &Args, counts: &Arc<Counts>) -> Result<Option<Arc<Schedule>>, Error> {
    use confluent_kafka::common::serialization::ByteArraySerializer;
    use confluent_kafka::producer::{
        callback, KafkaProducer, Producer, ProducerConfig, ProducerRecord,
    };
    use std::collections::HashMap;
    let props: HashMap<String, String> = [
        ("bootstrap.servers", a.bootstrap.clone()),
        ("acks", "all".into()),
        ("linger.ms", "5".into()),
        ("batch.size", a.batch_size.to_string()),
        ("enable.idempotence", a.idempotence.to_string()),
        ("max.in.flight.requests.per.connection", "5".into()),
        ("buffer.memory", (64u64 << 20).to_string()),
        ("compression.type", a.compression.clone()),
        ("max.block.ms", "20000".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let config = ProducerConfig::new(&props).map_err(|e| format!("config: {e}"))?;
    let producer = KafkaProducer::<Vec<u8>, Vec<u8>>::new(
        config,
        ByteArraySerializer::default(),
        ByteArraySerializer::default(),
    )
    .map_err(|e| format!("cannot create the producer: {e}"))?;
    // A client that cannot talk to the cluster says so (after max.block.ms) instead of
    // failing every record.
    producer
        .partitions_for(&a.topic)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let mut schedule = None;
    if let Some(rate) = a.rate {
        let value = &a.values[a.value(0)];
        let warmup = ProducerRecord::with_key(a.topic.clone(), None, Some(value));
        let delivered = producer
            .send(warmup, None)
            .await
            .map_err(|e| format!("send refused: {e}"))?;
        producer.flush().await?;
        delivered
            .get()
            .await
            .map_err(|e| format!("warm-up record failed: {e}"))?;
        schedule = Some(Arc::new(Schedule::new(a.records, rate)));
    }
    for i in 0..a.records {
        if let Some(s) = &schedule {
            s.pace(i).await;
        }
        let value = &a.values[a.value(i)];
        let key = a.key(i).map(|k| &a.keys.as_ref().expect("keys")[k]);
        let record = ProducerRecord::with_key(a.topic.clone(), key, Some(value));
        let counts = counts.clone();
        let timed = schedule.clone();
        let cb = callback::new(move |_, e| {
            if let (Some(s), None) = (&timed, &e) {
                s.delivered(i, Instant::now());
            }
            counts.count(e.map(|e| e.to_string()))
        });
        let sent = tokio::time::timeout(
            Duration::from_secs(60),
            producer.send(record, Some(Box::new(cb))),
        )
        .await
        .map_err(|_| format!("cannot send: record {i} not accepted in 60 s"))?;
        // The future of the record's result is dropped: the callback counts.
        drop(sent.map_err(|e| format!("send refused: {e}"))?);
    }
    producer.flush().await?;
    producer.close().await?;
    Ok(schedule)
}
