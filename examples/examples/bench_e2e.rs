//! End-to-end producer benchmark: our tokio driver, our threaded mio driver and librdkafka
//! (through the `rdkafka` crate's `BaseProducer`) against librdkafka's mock cluster, each in
//! its own process.
//!
//! ```text
//! cargo run --release --example bench_e2e                 # full: 1M records, 3 runs, medians
//! cargo run --release --example bench_e2e -- --quick      # smoke test: 100k records, 1 run
//! cargo run --release --example bench_e2e -- --runs 5 --records 2000000 \
//!     --workloads null100,key8 --producers tokio,rdkafka
//! ```
//!
//! # What runs where
//! * **The mock cluster** runs in its own process (this binary in `mock` mode, which calls
//!   [`producer_tests::MockKafka`]): three brokers, one topic `bench` of 12 partitions
//!   (replication 3). A **fresh mock process is started for every run** and killed after it. The
//!   mock keeps at most ~5 MiB per partition (older batches are dropped), so a run of 110 MB
//!   (1M x 100 B) or 1 GB (1M x 1000 B) overflows that retention within the run: the mock
//!   drops old batches as it goes, which costs the mock, not the producer, and costs the same
//!   for every producer. Restarting per run keeps the mock's memory and state identical at the
//!   start of every run. Nothing is read back here (the quickstart and the integration tests
//!   check contents).
//! * **The producer under test** runs in another process (this binary in `worker` mode), so
//!   `getrusage(RUSAGE_SELF)` at its end measures that producer only: user+sys CPU and peak
//!   RSS (`ru_maxrss`). The worker builds its payloads before it starts the clock.
//! * The coordinator (no mode argument) runs, for every workload, `--runs` rounds of every
//!   producer (interleaved, so drift hits all alike), takes medians and prints one table per
//!   workload with the ratio of each figure to librdkafka without idempotence.
//!
//! # Workloads (all: acks=all, linger 5 ms)
//! * `null100`: 100-byte values, null keys.
//! * `key8`: 100-byte values, 8-byte keys (65,536 distinct keys).
//! * `val1000`: 1000-byte values, null keys.
//! * `lz4`: 100-byte values, null keys, lz4 compression.
//!
//! Values are slices of a 1 MiB arena of pseudo-random words (compressible about like text),
//! keys slices of a 512 KiB arena. Our producers get them as `Bytes` slices (no copy:
//! `Record` carries `Bytes`); librdkafka gets borrowed slices and copies them into its queue
//! (`RD_KAFKA_MSG_F_COPY`, what `BaseProducer::send` does).
//!
//! # Producers (settings equal where both have them)
//! * `tokio`, `tokio-idem`: `producer_tokio::ProducerHandle` on a multi-thread runtime (default
//!   worker count). `send(record).await` per record; the delivery futures go in chunks of
//!   1024 to a collector task that awaits them (counting successes and failures).
//! * `tokio-cb`, `tokio-cb-idem`: the same producer, but records go through
//!   `ProducerHandle::send_detached(record, tag).await` and their reports to an
//!   `on_delivery` callback that counts (no future per record); `flush` at the end.
//! * `tokio-batch`, `tokio-batch-idem`: the same as `tokio-cb`, but records go in with
//!   `ProducerHandle::send_batch_detached(&mut burst).await` in bursts of 1024 (one queue lock
//!   and one wall-clock reading per chunk that fits in the command queue, waiting for room as
//!   `send_detached` does); the same counting callback and `flush` at the end.
//! * `mio`, `mio-idem`: `producer_mio::ThreadedProducer` with a 16,384-command queue; the
//!   sending thread sleeps 200 µs whenever the queue is full; the delivery callback counts.
//! * `mio-batch`, `mio-batch-idem`: the same, but records go in with
//!   `ThreadedProducer::send_batch` in bursts of 1024 (one queue lock and one wall-clock
//!   reading per burst, as librdkafka's `rd_kafka_produce_batch` offers).
//! * `rdkafka`, `rdkafka-idem`: `BaseProducer` with a context whose `delivery` counts;
//!   `poll(0)` every 1024 sends, `poll(1 ms)` when the queue is full, `flush` at the end.
//!
//! Common settings: acks=all, linger 5 ms, max in flight 5 per connection, a buffer of 64 MiB
//! and 1,000,000 records (`buffer_memory`/`buffer_max_records`;
//! `queue.buffering.max.kbytes`/`queue.buffering.max.messages`), no retries needed. Batch size
//! is each producer's default (ours 16 KiB like Java; librdkafka `batch.size` 1,000,000 bytes)
//! unless `--batch-size N` sets both. `-idem` turns idempotence on (`enable.idempotence`), the
//! plain ones turn it off.
//!
//! # Figures
//! records/s and MB/s (key+value bytes) over the time from creating the producer to the last
//! delivery report; CPU-seconds per million records (user+sys of the worker process, whole
//! life); peak RSS; failed deliveries. Each is the median over the runs.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

const TOPIC: &str = "bench";
const PARTITIONS: i32 = 12;
const BROKERS: i32 = 3;
const VALUE_ARENA: usize = 1 << 20;
const KEYS: usize = 65_536;
/// Command queue capacity of the threaded mio producer.
const MIO_QUEUE: usize = 16_384;
const WORKER_TIMEOUT: Duration = Duration::from_secs(600);

const ALL_WORKLOADS: &[&str] = &["null100", "key8", "val1000", "lz4"];
const ALL_PRODUCERS: &[&str] = &[
    "rdkafka",
    "rdkafka-idem",
    "tokio",
    "tokio-idem",
    "tokio-cb",
    "tokio-cb-idem",
    "tokio-batch",
    "tokio-batch-idem",
    "mio",
    "mio-idem",
    "mio-batch",
    "mio-batch-idem",
];
/// The baseline of the ratio columns.
const BASELINE: &str = "rdkafka";

type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("mock") => mock_main(),
        Some("worker") => worker_main(&args[1..]),
        _ => coordinator_main(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_e2e: {e}");
            ExitCode::FAILURE
        }
    }
}

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

// ---------------------------------------------------------------------------------------------
// Mock mode
// ---------------------------------------------------------------------------------------------

/// Starts the mock cluster, prints `BOOTSTRAP host:port,...` and runs until stdin closes.
fn mock_main() -> Result<(), Error> {
    let mock = producer_tests::MockKafka::new(BROKERS, &[(TOPIC, PARTITIONS)])?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "BOOTSTRAP {}", mock.bootstrap_servers())?;
        out.flush()?;
    }
    let mut buf = [0u8; 256];
    let mut stdin = std::io::stdin().lock();
    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    drop(mock);
    Ok(())
}

struct Mock {
    child: Child,
    bootstrap: String,
}

impl Mock {
    fn start() -> Result<Mock, Error> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("mock")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("mock has no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let bootstrap = line
            .trim()
            .strip_prefix("BOOTSTRAP ")
            .ok_or_else(|| format!("mock cluster said {line:?}"))?
            .to_string();
        Ok(Mock { child, bootstrap })
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads and payloads
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Workload {
    value_bytes: usize,
    keyed: bool,
    lz4: bool,
}

fn workload(name: &str) -> Result<Workload, Error> {
    Ok(match name {
        "null100" => Workload {
            value_bytes: 100,
            keyed: false,
            lz4: false,
        },
        "key8" => Workload {
            value_bytes: 100,
            keyed: true,
            lz4: false,
        },
        "val1000" => Workload {
            value_bytes: 1000,
            keyed: false,
            lz4: false,
        },
        "lz4" => Workload {
            value_bytes: 100,
            keyed: false,
            lz4: true,
        },
        other => return Err(format!("unknown workload {other:?}").into()),
    })
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The payload arenas every producer takes its keys and values from.
struct Payloads {
    values: Bytes,
    keys: Bytes,
    value_bytes: usize,
    keyed: bool,
}

impl Payloads {
    fn new(w: Workload) -> Payloads {
        const WORDS: &[&str] = &[
            "kafka",
            "producer",
            "record",
            "batch",
            "partition",
            "offset",
            "leader",
            "broker",
            "topic",
            "sequence",
            "epoch",
            "linger",
            "acks",
            "retry",
            "buffer",
            "request",
            "response",
            "metadata",
            "latency",
            "throughput",
            "event",
            "order",
            "user",
            "id",
            "status",
            "ok",
            "error",
            "timeout",
            "payload",
            "value",
            "key",
            "header",
        ];
        let mut rng = 42u64;
        let mut values = Vec::with_capacity(VALUE_ARENA + w.value_bytes + 16);
        while values.len() < VALUE_ARENA + w.value_bytes {
            let r = splitmix(&mut rng);
            values.extend_from_slice(WORDS[(r % WORDS.len() as u64) as usize].as_bytes());
            values.push(if r & 0x100 == 0 { b' ' } else { b',' });
            if r & 0xf000 == 0 {
                values.extend_from_slice(format!("{}", r >> 40).as_bytes());
            }
        }
        let mut keys = Vec::with_capacity(KEYS * 8);
        for _ in 0..KEYS {
            keys.extend_from_slice(&splitmix(&mut rng).to_be_bytes());
        }
        Payloads {
            values: Bytes::from(values),
            keys: Bytes::from(keys),
            value_bytes: w.value_bytes,
            keyed: w.keyed,
        }
    }

    fn value_range(&self, i: u64) -> std::ops::Range<usize> {
        // 7919 is prime: consecutive records start at scattered offsets.
        let start = (i as usize).wrapping_mul(7919) % VALUE_ARENA;
        start..start + self.value_bytes
    }

    fn key_range(&self, i: u64) -> Option<std::ops::Range<usize>> {
        let k = (i as usize % KEYS) * 8;
        self.keyed.then_some(k..k + 8)
    }

    /// A record for our producers: `Bytes` slices of the arenas, no copy.
    fn record(&self, topic: &Arc<str>, i: u64) -> producer_core::Record {
        let r = producer_core::Record::new(topic.clone(), self.values.slice(self.value_range(i)));
        match self.key_range(i) {
            Some(k) => r.with_key(self.keys.slice(k)),
            None => r,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Worker mode
// ---------------------------------------------------------------------------------------------

struct Outcome {
    ok: u64,
    failed: u64,
    secs: f64,
}

struct WorkerArgs {
    producer: String,
    workload: Workload,
    records: u64,
    bootstrap: String,
    batch_size: Option<usize>,
}

fn worker_main(args: &[String]) -> Result<(), Error> {
    let w = WorkerArgs {
        producer: arg(args, "--producer").ok_or("--producer")?.to_string(),
        workload: workload(arg(args, "--workload").ok_or("--workload")?)?,
        records: arg(args, "--records").ok_or("--records")?.parse()?,
        bootstrap: arg(args, "--bootstrap").ok_or("--bootstrap")?.to_string(),
        batch_size: arg(args, "--batch-size").map(str::parse).transpose()?,
    };
    let payloads = Payloads::new(w.workload);
    let outcome = match w.producer.as_str() {
        "tokio" => run_tokio(&w, &payloads, false)?,
        "tokio-idem" => run_tokio(&w, &payloads, true)?,
        "tokio-cb" => run_tokio_detached(&w, &payloads, false, false)?,
        "tokio-cb-idem" => run_tokio_detached(&w, &payloads, true, false)?,
        "tokio-batch" => run_tokio_detached(&w, &payloads, false, true)?,
        "tokio-batch-idem" => run_tokio_detached(&w, &payloads, true, true)?,
        "mio" => run_mio(&w, &payloads, false, false)?,
        "mio-idem" => run_mio(&w, &payloads, true, false)?,
        "mio-batch" => run_mio(&w, &payloads, false, true)?,
        "mio-batch-idem" => run_mio(&w, &payloads, true, true)?,
        "rdkafka" => run_rdkafka(&w, &payloads, false)?,
        "rdkafka-idem" => run_rdkafka(&w, &payloads, true)?,
        other => return Err(format!("unknown producer {other:?}").into()),
    };
    // SAFETY: getrusage writes into the struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    println!(
        "RESULT ok={} failed={} secs={:.6} user={:.6} sys={:.6} maxrss_kb={}",
        outcome.ok,
        outcome.failed,
        outcome.secs,
        tv(ru.ru_utime),
        tv(ru.ru_stime),
        ru.ru_maxrss
    );
    Ok(())
}

fn our_config(w: &WorkerArgs, idempotence: bool) -> Result<producer_core::Config, Error> {
    let bootstrap = producer_tests::parse_bootstrap(&w.bootstrap);
    let mut b = producer_core::Config::builder(bootstrap)
        .acks(producer_core::Acks::All)
        .enable_idempotence(idempotence)
        .linger(Duration::from_millis(5))
        .max_in_flight(5)
        .buffer_memory(64 << 20)
        .buffer_max_records(1_000_000)
        .compression(if w.workload.lz4 {
            producer_core::Compression::Lz4
        } else {
            producer_core::Compression::None
        });
    if let Some(n) = w.batch_size {
        b = b.batch_size(n);
    }
    Ok(b.build()?)
}

fn run_tokio(w: &WorkerArgs, p: &Payloads, idempotence: bool) -> Result<Outcome, Error> {
    use producer_tokio::{DeliveryFuture, ProducerHandle};
    let config = our_config(w, idempotence)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let records = w.records;
    rt.block_on(async move {
        let started = Instant::now();
        let handle = ProducerHandle::start(config)?;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<DeliveryFuture>>(4096);
        let collector = tokio::spawn(async move {
            let counts = Counting::default();
            while let Some(chunk) = rx.recv().await {
                for f in chunk {
                    counts.count(f.await);
                }
            }
            counts
        });
        let topic: Arc<str> = Arc::from(TOPIC);
        let mut chunk = Vec::with_capacity(1024);
        for i in 0..records {
            let f = handle
                .send(p.record(&topic, i))
                .await
                .map_err(|e| format!("send refused: {e}"))?;
            chunk.push(f);
            if chunk.len() == 1024 {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(1024));
                tx.send(full).await.map_err(|_| "collector gone")?;
            }
        }
        tx.send(chunk).await.map_err(|_| "collector gone")?;
        drop(tx);
        let counts = collector.await?;
        let secs = started.elapsed().as_secs_f64();
        handle.close().await;
        Ok(counts.outcome(secs))
    })
}

/// `tokio-cb` (`send_detached` per record) or, with `batched`, `tokio-batch`
/// (`send_batch_detached` in bursts of [`BURST`]); reports go to a counting callback.
fn run_tokio_detached(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    batched: bool,
) -> Result<Outcome, Error> {
    use producer_tokio::ProducerHandle;
    let config = our_config(w, idempotence)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let records = w.records;
    let counts = Arc::new(Counting::default());
    rt.block_on(async move {
        let started = Instant::now();
        let handle = {
            let counts = counts.clone();
            ProducerHandle::builder(config)
                .on_delivery(move |report| counts.count(report.result))
                .start()?
        };
        let topic: Arc<str> = Arc::from(TOPIC);
        let mut burst = Vec::with_capacity(BURST as usize);
        for (start, end) in bursts(records, if batched { BURST } else { 1 }) {
            let sent = if batched {
                burst.extend((start..end).map(|i| (p.record(&topic, i), i)));
                handle
                    .send_batch_detached(&mut burst)
                    .await
                    .map_err(|e| e.to_string())
            } else {
                let record = p.record(&topic, start);
                handle
                    .send_detached(record, start)
                    .await
                    .map_err(|e| e.to_string())
            };
            sent.map_err(|e| format!("send refused: {e}"))?;
        }
        handle.flush().await;
        let secs = started.elapsed().as_secs_f64();
        handle.close().await;
        Ok(counts.outcome(secs))
    })
}

/// `mio` (`ThreadedProducer::send` per record) or, with `batched`, `mio-batch` (`send_batch`
/// in bursts of [`BURST`]); the sender sleeps 200 µs whenever the queue is full.
fn run_mio(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    batched: bool,
) -> Result<Outcome, Error> {
    use producer_mio::{SendError, ThreadedProducer};
    let config = our_config(w, idempotence)?;
    let counts = Arc::new(Counting::default());
    let started = Instant::now();
    let producer = {
        let counts = counts.clone();
        ThreadedProducer::<()>::spawn(config, MIO_QUEUE, move |d| {
            counts.count(d.result.map_err(|f| f.error))
        })?
    };
    let full = || std::thread::sleep(Duration::from_micros(200));
    let topic: Arc<str> = Arc::from(TOPIC);
    let mut burst = Vec::with_capacity(BURST as usize);
    for (start, end) in bursts(w.records, if batched { BURST } else { 1 }) {
        if batched {
            burst.extend((start..end).map(|i| (p.record(&topic, i), ())));
            while !burst.is_empty() {
                let taken = producer
                    .send_batch(&mut burst)
                    .map_err(|e| format!("send refused: {e}"))?;
                if taken == 0 {
                    full();
                }
            }
        } else {
            let mut record = p.record(&topic, start);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err(SendError::Full(r, ())) => {
                        record = r;
                        full();
                    }
                    Err(e) => return Err(format!("send refused: {e}").into()),
                }
            }
        }
    }
    producer.flush();
    let secs = started.elapsed().as_secs_f64();
    producer.close();
    Ok(counts.outcome(secs))
}

/// Records per burst for the batched producers.
const BURST: u64 = 1024;

/// `[start, end)` ranges of `size` records covering `0..records`.
fn bursts(records: u64, size: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..records)
        .step_by(size as usize)
        .map(move |start| (start, (start + size).min(records)))
}

/// Delivery counts of one producer under test (also librdkafka's delivery context).
#[derive(Default)]
struct Counting {
    ok: AtomicU64,
    failed: AtomicU64,
}

impl Counting {
    /// Counts one report; the first few failures are printed.
    fn count<T, E: std::fmt::Display>(&self, result: Result<T, E>) {
        match result {
            Ok(_) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                if self.failed.fetch_add(1, Ordering::Relaxed) < 3 {
                    eprintln!("worker: delivery failed: {e}");
                }
            }
        }
    }

    fn reported(&self) -> u64 {
        self.ok.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed)
    }

    fn outcome(&self, secs: f64) -> Outcome {
        Outcome {
            ok: self.ok.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            secs,
        }
    }
}

impl rdkafka::ClientContext for Counting {}

impl rdkafka::producer::ProducerContext for Counting {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        self.count(result.as_ref().map_err(|(e, _)| e));
    }
}

fn run_rdkafka(w: &WorkerArgs, p: &Payloads, idempotence: bool) -> Result<Outcome, Error> {
    use rdkafka::error::KafkaError;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::types::RDKafkaErrorCode;

    let started = Instant::now();
    let mut cfg = rdkafka::ClientConfig::new();
    cfg.set("bootstrap.servers", &w.bootstrap)
        .set("acks", "all")
        .set(
            "enable.idempotence",
            if idempotence { "true" } else { "false" },
        )
        .set("linger.ms", "5")
        .set("max.in.flight.requests.per.connection", "5")
        .set("queue.buffering.max.kbytes", "65536")
        .set("queue.buffering.max.messages", "1000000")
        .set(
            "compression.codec",
            if w.workload.lz4 { "lz4" } else { "none" },
        );
    if let Some(n) = w.batch_size {
        cfg.set("batch.size", n.to_string());
    }
    let producer: BaseProducer<Counting> = cfg.create_with_context(Counting::default())?;
    for i in 0..w.records {
        let value = &p.values[p.value_range(i)];
        let key = p.key_range(i).map(|k| &p.keys[k]);
        let mut record = BaseRecord::<[u8], [u8]>::to(TOPIC).payload(value);
        if let Some(k) = key {
            record = record.key(k);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(format!("send refused: {e}").into()),
            }
        }
        if i % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(300))?;
    let ctx = producer.context();
    while ctx.reported() < w.records {
        producer.poll(Duration::from_millis(10));
        if started.elapsed() > WORKER_TIMEOUT {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let outcome = ctx.outcome(secs);
    drop(producer);
    Ok(outcome)
}

// ---------------------------------------------------------------------------------------------
// Coordinator
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    ok: u64,
    failed: u64,
    secs: f64,
    cpu: f64,
    maxrss_kb: u64,
}

fn run_one(
    producer: &str,
    workload: &str,
    records: u64,
    batch_size: Option<usize>,
) -> Result<Sample, Error> {
    let mock = Mock::start()?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["worker", "--producer", producer, "--workload", workload])
        .args(["--records", &records.to_string()])
        .args(["--bootstrap", &mock.bootstrap])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(n) = batch_size {
        cmd.args(["--batch-size", &n.to_string()]);
    }
    let mut child = cmd.spawn()?;
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if started.elapsed() > WORKER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{producer}/{workload}: worker timed out").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .ok_or("worker has no stdout")?
        .read_to_string(&mut out)?;
    drop(mock);
    if !status.success() {
        return Err(format!("{producer}/{workload}: worker failed ({status})").into());
    }
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .ok_or_else(|| format!("{producer}/{workload}: no RESULT in {out:?}"))?;
    let fields: BTreeMap<&str, &str> = line.split(' ').filter_map(|f| f.split_once('=')).collect();
    let get = |k: &str| -> Result<f64, Error> {
        Ok(fields
            .get(k)
            .ok_or_else(|| format!("RESULT lacks {k}"))?
            .parse()?)
    };
    Ok(Sample {
        ok: get("ok")? as u64,
        failed: get("failed")? as u64,
        secs: get("secs")?,
        cpu: get("user")? + get("sys")?,
        maxrss_kb: get("maxrss_kb")? as u64,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

struct Figures {
    rate: f64,
    mbps: f64,
    cpu_per_m: f64,
    rss_mb: f64,
    failed: f64,
    lost: f64,
}

fn coordinator_main(args: &[String]) -> Result<(), Error> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!(
            "usage: bench_e2e [--quick] [--runs N] [--records N] [--batch-size BYTES]\n\
             \x20                [--workloads {}] [--producers {}]",
            ALL_WORKLOADS.join(","),
            ALL_PRODUCERS.join(",")
        );
        return Ok(());
    }
    let quick = args.iter().any(|a| a == "--quick");
    let runs: usize = arg(args, "--runs").map_or(Ok(if quick { 1 } else { 3 }), str::parse)?;
    let records: u64 =
        arg(args, "--records").map_or(Ok(if quick { 100_000 } else { 1_000_000 }), str::parse)?;
    let batch_size: Option<usize> = arg(args, "--batch-size").map(str::parse).transpose()?;
    let list = |name: &str, all: &[&str]| -> Vec<String> {
        arg(args, name).map_or_else(
            || all.iter().map(|s| s.to_string()).collect(),
            |s| s.split(',').map(str::to_string).collect(),
        )
    };
    let workloads = list("--workloads", ALL_WORKLOADS);
    let producers = list("--producers", ALL_PRODUCERS);
    for w in &workloads {
        workload(w)?;
    }
    println!(
        "bench_e2e: {records} records per run, {runs} run(s), mock cluster of {BROKERS} brokers \
         / {PARTITIONS} partitions in its own process (restarted per run), acks=all, linger 5 ms, \
         batch size {}",
        batch_size.map_or("per producer default".to_string(), |n| n.to_string())
    );
    let total_started = Instant::now();
    for wname in &workloads {
        let w = workload(wname)?;
        let bytes = (w.value_bytes + if w.keyed { 8 } else { 0 }) as f64;
        let mut samples: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
        for run in 0..runs {
            for p in &producers {
                let s = run_one(p, wname, records, batch_size)?;
                eprintln!(
                    "  {wname} run {}/{runs} {p:>12}: {:>9.0} rec/s  cpu {:.2} s  rss {:.0} MB  \
                     ok {} failed {}",
                    run + 1,
                    records as f64 / s.secs,
                    s.cpu,
                    s.maxrss_kb as f64 / 1024.0,
                    s.ok,
                    s.failed
                );
                samples.entry(p.as_str()).or_default().push(s);
            }
        }
        let figures: BTreeMap<&str, Figures> = samples
            .iter()
            .map(|(p, v)| {
                let m = |f: &dyn Fn(&Sample) -> f64| median(v.iter().map(f).collect());
                let rate = m(&|s| records as f64 / s.secs);
                (
                    *p,
                    Figures {
                        rate,
                        mbps: rate * bytes / 1e6,
                        cpu_per_m: m(&|s| s.cpu / (records as f64 / 1e6)),
                        rss_mb: m(&|s| s.maxrss_kb as f64 / 1024.0),
                        failed: m(&|s| s.failed as f64),
                        lost: m(&|s| (records - s.ok - s.failed) as f64),
                    },
                )
            })
            .collect();
        print_table(wname, w, &producers, &figures);
    }
    println!(
        "total bench time {:.0} s",
        total_started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn print_table(name: &str, w: Workload, producers: &[String], f: &BTreeMap<&str, Figures>) {
    println!();
    println!(
        "== {name}: {} B values, {} keys{} ==",
        w.value_bytes,
        if w.keyed { "8-byte" } else { "null" },
        if w.lz4 { ", lz4" } else { "" }
    );
    println!(
        "{:<16} {:>10} {:>8} {:>11} {:>9} {:>7} {:>6} | {:>7} {:>7} {:>7} {:>7}",
        "producer",
        "records/s",
        "MB/s",
        "CPU-s/M",
        "RSS MB",
        "failed",
        "lost",
        "x rate",
        "x MB/s",
        "x CPU",
        "x RSS"
    );
    let base = f.get(BASELINE);
    for p in producers {
        let Some(x) = f.get(p.as_str()) else { continue };
        let ratio = |get: fn(&Figures) -> f64| {
            base.map_or("-".to_string(), |b| format!("{:.2}", get(x) / get(b)))
        };
        println!(
            "{:<16} {:>10.0} {:>8.1} {:>11.3} {:>9.1} {:>7.0} {:>6.0} | {:>7} {:>7} {:>7} {:>7}",
            p,
            x.rate,
            x.mbps,
            x.cpu_per_m,
            x.rss_mb,
            x.failed,
            x.lost,
            ratio(|f| f.rate),
            ratio(|f| f.mbps),
            ratio(|f| f.cpu_per_m),
            ratio(|f| f.rss_mb)
        );
    }
}
