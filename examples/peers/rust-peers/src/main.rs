//! Rust peers of bench_e2e: `rust-peers krafka|confluent --bootstrap ... --records N
//! --values FILE [--keys FILE] --value-bytes N --batch-size N [--idempotence] [--lz4]`.
//! Prints `RESULT ok=N failed=N secs=S`; the coordinator measures CPU and peak RSS of this
//! process itself (wait4). Payloads are the coordinator's arena files, sliced as in the bench.

use std::sync::atomic::{AtomicU64, Ordering};
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
    lz4: bool,
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
        lz4: argv.iter().any(|a| a == "--lz4"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let counts = Arc::new(Counts::default());
    let secs = rt.block_on(async {
        let started = Instant::now();
        match client.as_str() {
            "krafka" => run_krafka(&args, &counts).await?,
            "confluent" => run_confluent(&args, &counts).await?,
            other => return Err(format!("unknown client {other:?}").into()),
        }
        Ok::<f64, Error>(started.elapsed().as_secs_f64())
    })?;
    println!(
        "RESULT ok={} failed={} secs={secs:.6}",
        counts.ok.load(Ordering::Relaxed),
        counts.failed.load(Ordering::Relaxed)
    );
    Ok(())
}

/// krafka: `Producer::enqueue(record).await` per record; the delivery handles go in chunks of
/// 1024 to a collector task that awaits them (as the bench's `tokio` row does).
async fn run_krafka(a: &Args, counts: &Arc<Counts>) -> Result<(), Error> {
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
        .compression(if a.lz4 {
            krafka::Compression::Lz4
        } else {
            krafka::Compression::None
        })
        .build()
        .await
        .map_err(|e| format!("cannot build the producer: {e}"))?;
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
        let mut record = krafka::Record::new(a.topic.clone(), a.values.slice(a.value(i)));
        if let (Some(keys), Some(k)) = (&a.keys, a.key(i)) {
            record = record.key(keys.slice(k));
        }
        let handle = producer
            .enqueue(record)
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
    Ok(())
}

/// Confluent's client: `KafkaProducer::send(record, Some(callback)).await` per record (the
/// byte-slice path, records copied into the batch), `flush` at the end.
async fn run_confluent(a: &Args, counts: &Arc<Counts>) -> Result<(), Error> {
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
        (
            "compression.type",
            if a.lz4 { "lz4" } else { "none" }.into(),
        ),
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
    for i in 0..a.records {
        let value = &a.values[a.value(i)];
        let key = a.key(i).map(|k| &a.keys.as_ref().expect("keys")[k]);
        let record = ProducerRecord::with_key(a.topic.clone(), key, Some(value));
        let counts = counts.clone();
        let cb = callback::new(move |_, e| counts.count(e.map(|e| e.to_string())));
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
    Ok(())
}
