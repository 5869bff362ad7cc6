//! `worker` mode: one producer under test in this process (ours: tokio and mio drivers), its
//! figures printed as a `RESULT` line.

use crate::open_loop::{
    run_mio_open_loop, run_rdkafka_open_loop, run_tokio_cb_open_loop, run_tokio_open_loop,
};
use crate::payloads::{sized, workload, Payloads, Workload};
use crate::rdkafka_worker::run_rdkafka;
use crate::send_times::SendTimes;
use crate::DEFAULT_BUFFER_MEMORY;
use crate::{arg, Error, TOPIC};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Command queue capacity of the threaded mio producer.
pub(crate) const MIO_QUEUE: usize = 16_384;

pub(crate) struct Outcome {
    pub(crate) ok: u64,
    pub(crate) failed: u64,
    pub(crate) secs: f64,
    /// The `latency` workload's p50, p99 and p99.9 delivery latency in µs.
    pub(crate) latency: Option<[u64; 3]>,
    /// The most bytes the producer held against `buffer_memory` (ours, sampled).
    pub(crate) peak_buffered: Option<usize>,
    /// Throughput workloads (ours): average and p99 µs from each send call to its report.
    pub(crate) accepted: Option<[u64; 2]>,
}

pub(crate) struct WorkerArgs {
    pub(crate) producer: String,
    pub(crate) workload: Workload,
    pub(crate) records: u64,
    pub(crate) bootstrap: String,
    pub(crate) batch_size: Option<usize>,
    /// Records per second of the `latency` workload.
    pub(crate) rate: Option<f64>,
    /// `buffer_memory` in bytes (`--buffer-memory` MiB; default 64 MiB).
    pub(crate) buffer_memory: usize,
    /// `buffer_max_records`: 1,000,000, or with `--buffer-memory` 100,000,000, so that the
    /// bytes decide how much is buffered whatever the record size.
    pub(crate) buffer_max_records: usize,
    /// `--topic NAME` (default `bench`) and `--topics N` (default 1): record `i` goes to the
    /// `i mod N`-th of [`crate::payloads::topic_names`]`(NAME, N)`.
    pub(crate) topic: String,
    pub(crate) topics: usize,
    /// `--instances N` (default 1): N producers in this process, each sending its share of
    /// the records from its own thread (our tokio rows on one shared runtime).
    pub(crate) instances: usize,
    /// `--max-request-size N`: `max_request_size` (librdkafka's `message.max.bytes`) for the
    /// 1 MB records of the scale sweep.
    pub(crate) max_request_size: Option<usize>,
    /// `--defaults`: the producer's shipped defaults instead of the bench's equal settings
    /// (batch size, linger, in-flight, buffer); acks, idempotence and codec stay the row's.
    pub(crate) defaults: bool,
    /// `--linger-ms N`: our `linger` instead of the bench's 5 ms (to fill batches of keyed
    /// records over many partitions: the flat-cost profile of issue 22).
    pub(crate) linger_ms: Option<u64>,
    /// `--queue-delay-ms N` (`NAME+qdN`): our producers' `queue.delay.target.ms`; the
    /// producer's default when absent.
    pub(crate) queue_delay_ms: Option<u64>,
    /// `--batch-grow-max N` (`NAME+growN`): our producers' `batch.grow.max.bytes`; the
    /// producer's default when absent.
    pub(crate) batch_grow_max: Option<usize>,
}

impl WorkerArgs {
    /// The same arguments for one of `--instances`: `records` of them.
    fn share(&self, records: u64) -> WorkerArgs {
        WorkerArgs {
            producer: self.producer.clone(),
            bootstrap: self.bootstrap.clone(),
            topic: self.topic.clone(),
            records,
            instances: 1,
            ..*self
        }
    }
}

/// The tokio runtime of our tokio rows (multi-thread, default worker count), built on first
/// use and shared by every producer of `--instances`.
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime, Error> {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    Ok(RUNTIME.get_or_init(|| rt))
}

pub(crate) fn worker_main(args: &[String]) -> Result<(), Error> {
    let w = WorkerArgs {
        producer: arg(args, "--producer").ok_or("--producer")?.to_string(),
        workload: sized(
            workload(arg(args, "--workload").ok_or("--workload")?)?,
            arg(args, "--value-bytes").map(str::parse).transpose()?,
        ),
        records: arg(args, "--records").ok_or("--records")?.parse()?,
        bootstrap: arg(args, "--bootstrap").ok_or("--bootstrap")?.to_string(),
        batch_size: arg(args, "--batch-size").map(str::parse).transpose()?,
        rate: arg(args, "--rate").map(str::parse).transpose()?,
        buffer_memory: arg(args, "--buffer-memory")
            .map(str::parse::<usize>)
            .transpose()?
            .map_or(DEFAULT_BUFFER_MEMORY, |mib| mib << 20),
        buffer_max_records: if arg(args, "--buffer-memory").is_some() {
            100_000_000
        } else {
            1_000_000
        },
        topic: arg(args, "--topic").unwrap_or(TOPIC).to_string(),
        topics: arg(args, "--topics")
            .map(str::parse)
            .transpose()?
            .unwrap_or(1),
        instances: arg(args, "--instances")
            .map(str::parse)
            .transpose()?
            .unwrap_or(1),
        max_request_size: arg(args, "--max-request-size")
            .map(str::parse)
            .transpose()?,
        defaults: args.iter().any(|a| a == "--defaults"),
        linger_ms: arg(args, "--linger-ms").map(str::parse).transpose()?,
        queue_delay_ms: arg(args, "--queue-delay-ms").map(str::parse).transpose()?,
        batch_grow_max: arg(args, "--batch-grow-max").map(str::parse).transpose()?,
    };
    let payloads = Payloads::new(w.workload).with_topics(&w.topic, w.topics);
    let outcome = if w.instances > 1 {
        if w.workload.open_loop {
            return Err("--instances has no open-loop sender".into());
        }
        run_instances(&w, &payloads)?
    } else {
        run_producer(&w, &payloads)?
    };
    report(&outcome);
    Ok(())
}

/// `--instances N`: N producers of `w.producer`, each in its own thread sending its share of
/// the records (the first ones one more when N does not divide them). The outcome: the
/// reports summed, the time of the slowest, the buffered peaks summed; from the send call:
/// the average weighted by each instance's reports and the highest p99 (an upper bound).
fn run_instances(w: &WorkerArgs, p: &Payloads) -> Result<Outcome, Error> {
    let n = w.instances as u64;
    let outcomes: Vec<Result<Outcome, String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..n)
            .map(|k| {
                let share = w.share(w.records / n + u64::from(k < w.records % n));
                scope.spawn(move || run_producer(&share, p).map_err(|e| e.to_string()))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("instance panicked".into())))
            .collect()
    });
    let mut total = Outcome {
        ok: 0,
        failed: 0,
        secs: 0.0,
        latency: None,
        peak_buffered: None,
        accepted: None,
    };
    // Per instance: its reports and its send-to-report average and p99.
    let mut accepted: Vec<(u64, [u64; 2])> = Vec::new();
    for o in outcomes {
        let o = o?;
        total.ok += o.ok;
        total.failed += o.failed;
        total.secs = total.secs.max(o.secs);
        total.peak_buffered = match (total.peak_buffered, o.peak_buffered) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        if let Some(a) = o.accepted {
            accepted.push((o.ok + o.failed, a));
        }
    }
    let reports: u64 = accepted.iter().map(|(n, _)| n).sum();
    let weighted: u64 = accepted.iter().map(|(n, [avg, _])| n * avg).sum();
    if let (Some(avg), Some(p99)) = (
        weighted.checked_div(reports),
        accepted.iter().map(|(_, [_, p99])| *p99).max(),
    ) {
        total.accepted = Some([avg, p99]);
    }
    Ok(total)
}

/// One producer of `w.producer` sending `w.records` records.
fn run_producer(w: &WorkerArgs, payloads: &Payloads) -> Result<Outcome, Error> {
    let outcome = if w.workload.open_loop {
        let rate = w.rate.ok_or("the latency workload needs --rate")?;
        let p = payloads;
        match w.producer.as_str() {
            "tokio" => run_tokio_open_loop(w, p, false, rate)?,
            "tokio-idem" => run_tokio_open_loop(w, p, true, rate)?,
            "tokio-cb" => run_tokio_cb_open_loop(w, p, false, rate, false)?,
            "tokio-cb-idem" => run_tokio_cb_open_loop(w, p, true, rate, false)?,
            "tokio-batch" => run_tokio_cb_open_loop(w, p, false, rate, true)?,
            "tokio-batch-idem" => run_tokio_cb_open_loop(w, p, true, rate, true)?,
            "mio" => run_mio_open_loop(w, p, false, rate, false)?,
            "mio-idem" => run_mio_open_loop(w, p, true, rate, false)?,
            "mio-batch" => run_mio_open_loop(w, p, false, rate, true)?,
            "mio-batch-idem" => run_mio_open_loop(w, p, true, rate, true)?,
            "rdkafka" => run_rdkafka_open_loop(w, p, false, rate)?,
            "rdkafka-idem" => run_rdkafka_open_loop(w, p, true, rate)?,
            other => return Err(format!("{other:?} has no open-loop sender").into()),
        }
    } else {
        match w.producer.as_str() {
            "tokio" => run_tokio(w, payloads, false)?,
            "tokio-idem" => run_tokio(w, payloads, true)?,
            "tokio-cb" => run_tokio_detached(w, payloads, false, false)?,
            "tokio-cb-idem" => run_tokio_detached(w, payloads, true, false)?,
            "tokio-batch" => run_tokio_detached(w, payloads, false, true)?,
            "tokio-batch-idem" => run_tokio_detached(w, payloads, true, true)?,
            "mio" => run_mio(w, payloads, false, false)?,
            "mio-idem" => run_mio(w, payloads, true, false)?,
            "mio-batch" => run_mio(w, payloads, false, true)?,
            "mio-batch-idem" => run_mio(w, payloads, true, true)?,
            "rdkafka" => run_rdkafka(w, payloads, false)?,
            "rdkafka-idem" => run_rdkafka(w, payloads, true)?,
            other => return Err(format!("unknown producer {other:?}").into()),
        }
    };
    Ok(outcome)
}

/// Prints the `RESULT` line the coordinator reads: the outcome and this process's CPU and
/// peak RSS.
fn report(outcome: &Outcome) {
    // SAFETY: getrusage writes into the struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let latency = outcome.latency.map_or(String::new(), |[p50, p99, p999]| {
        format!(" p50_us={p50} p99_us={p99} p999_us={p999}")
    });
    let buffered = outcome
        .peak_buffered
        .map_or(String::new(), |b| format!(" peak_buffered_kb={}", b / 1024));
    let accepted = outcome.accepted.map_or(String::new(), |[avg, p99]| {
        format!(" acc_avg_us={avg} acc_p99_us={p99}")
    });
    println!(
        "RESULT ok={} failed={} secs={:.6} user={:.6} sys={:.6} maxrss_kb={}{latency}{buffered}{accepted}",
        outcome.ok,
        outcome.failed,
        outcome.secs,
        tv(ru.ru_utime),
        tv(ru.ru_stime),
        ru.ru_maxrss
    );
}

pub(crate) fn our_config(
    w: &WorkerArgs,
    idempotence: bool,
) -> Result<producer_core::Config, Error> {
    let bootstrap = producer_tests::parse_bootstrap(&w.bootstrap);
    let mut b = producer_core::Config::builder(bootstrap)
        .acks(producer_core::Acks::All)
        .enable_idempotence(idempotence)
        .compression(w.workload.codec.ours());
    if !w.defaults {
        b = b
            .linger(Duration::from_millis(w.linger_ms.unwrap_or(5)))
            .max_in_flight(5)
            .buffer_memory(w.buffer_memory)
            .buffer_max_records(w.buffer_max_records);
        if let Some(n) = w.batch_size {
            b = b.batch_size(n);
        }
    }
    if let Some(ms) = w.queue_delay_ms {
        b = b.queue_delay_target(Duration::from_millis(ms));
    }
    if let Some(n) = w.batch_grow_max {
        b = b.batch_grow_max(n);
    }
    if let Some(n) = w.max_request_size {
        b = b.max_request_size(n);
        if !w.defaults {
            b = b.buffer_memory(w.buffer_memory.max(n));
        }
    }
    Ok(b.build()?)
}

pub(crate) fn run_tokio(w: &WorkerArgs, p: &Payloads, idempotence: bool) -> Result<Outcome, Error> {
    use producer_tokio::{DeliveryFuture, ProducerHandle};
    let config = our_config(w, idempotence)?;
    let rt = runtime()?;
    let records = w.records;
    rt.block_on(async move {
        let started = Instant::now();
        let handle = ProducerHandle::start(config)?;
        let times = SendTimes::new(records);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<(u64, DeliveryFuture)>>(4096);
        let collector = {
            let times = times.clone();
            tokio::spawn(async move {
                let counts = Counting::default();
                while let Some(chunk) = rx.recv().await {
                    for (i, f) in chunk {
                        let r = f.await;
                        times.reported(i);
                        counts.count(r);
                    }
                }
                counts
            })
        };
        let peak = Arc::new(AtomicU64::new(0));
        let sampler = sample_buffered(&handle, &peak);
        let mut chunk = Vec::with_capacity(1024);
        for i in 0..records {
            times.sending(i, i + 1);
            let f = handle
                .send(p.record(i))
                .await
                .map_err(|e| format!("send refused: {e}"))?;
            chunk.push((i, f));
            if chunk.len() == 1024 {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(1024));
                tx.send(full).await.map_err(|_| "collector gone")?;
            }
        }
        tx.send(chunk).await.map_err(|_| "collector gone")?;
        drop(tx);
        let counts = collector.await?;
        let secs = started.elapsed().as_secs_f64();
        sampler.abort();
        print_requests(&handle.metrics().await.counters);
        handle.close().await;
        Ok(Outcome {
            peak_buffered: Some(peak.load(Ordering::Relaxed) as usize),
            accepted: times.summary(),
            ..counts.outcome(secs)
        })
    })
}

/// `tokio-cb` (`send_detached` per record) or, with `batched`, `tokio-batch`
/// (`send_batch_detached` in bursts of [`BURST`]); reports go to a counting callback.
pub(crate) fn run_tokio_detached(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    batched: bool,
) -> Result<Outcome, Error> {
    use producer_tokio::ProducerHandle;
    let config = our_config(w, idempotence)?;
    let rt = runtime()?;
    let records = w.records;
    let counts = Arc::new(Counting::default());
    let times = SendTimes::new(records);
    rt.block_on(async move {
        let started = Instant::now();
        let handle = {
            let (counts, times) = (counts.clone(), times.clone());
            ProducerHandle::builder(config)
                .on_delivery(move |report| {
                    times.reported(report.tag);
                    counts.count(report.result)
                })
                .start()?
        };
        let peak = Arc::new(AtomicU64::new(0));
        let sampler = sample_buffered(&handle, &peak);
        let mut burst = Vec::with_capacity(BURST as usize);
        for (start, end) in bursts(records, if batched { BURST } else { 1 }) {
            times.sending(start, end);
            send_tokio_detached(&handle, p, start..end, batched, &mut burst).await?;
        }
        handle.flush().await;
        let secs = started.elapsed().as_secs_f64();
        sampler.abort();
        print_requests(&handle.metrics().await.counters);
        handle.close().await;
        Ok(Outcome {
            peak_buffered: Some(peak.load(Ordering::Relaxed) as usize),
            accepted: times.summary(),
            ..counts.outcome(secs)
        })
    })
}

/// Reads how much `handle`'s producer holds against `buffer_memory` every [`SAMPLE_EVERY`],
/// keeping the most in `peak`, until the returned task is aborted.
fn sample_buffered(
    handle: &producer_tokio::ProducerHandle,
    peak: &Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    let (handle, peak) = (handle.clone(), peak.clone());
    tokio::spawn(async move {
        loop {
            let buffered = handle.metrics().await.buffered_bytes as u64;
            peak.fetch_max(buffered, Ordering::Relaxed);
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
    })
}

/// How often our workers read how much their producer holds against `buffer_memory`.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(2);

/// `mio` (`ThreadedProducer::send` per record) or, with `batched`, `mio-batch` (`send_batch`
/// in bursts of [`BURST`]); the per-record sender waits in `send_timeout`, the batch sender
/// in `send_batch_timeout`.
pub(crate) fn run_mio(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    batched: bool,
) -> Result<Outcome, Error> {
    use producer_mio::ThreadedProducer;
    let config = our_config(w, idempotence)?;
    let counts = Arc::new(Counting::default());
    let times = SendTimes::new(w.records);
    let started = Instant::now();
    let producer = {
        let (counts, times) = (counts.clone(), times.clone());
        ThreadedProducer::<u64>::spawn(config, MIO_QUEUE, move |d| {
            times.reported(d.opaque);
            counts.count(d.result.map_err(|f| f.error))
        })?
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let peak = AtomicU64::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if let Some(m) = producer.metrics() {
                    peak.fetch_max(m.buffered_bytes as u64, Ordering::Relaxed);
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        let sent = send_mio(&producer, w, p, batched, &times);
        if sent.is_ok() {
            producer.flush();
        }
        done.store(true, Ordering::Relaxed);
        sent
    })?;
    let secs = started.elapsed().as_secs_f64();
    if let Some(m) = producer.metrics() {
        print_requests(&m.counters);
    }
    producer.close();
    Ok(Outcome {
        peak_buffered: Some(peak.load(Ordering::Relaxed) as usize),
        accepted: times.summary(),
        ..counts.outcome(secs)
    })
}

/// The sending loop of [`run_mio`].
pub(crate) fn send_mio(
    producer: &producer_mio::ThreadedProducer<u64>,
    w: &WorkerArgs,
    p: &Payloads,
    batched: bool,
    times: &SendTimes,
) -> Result<(), Error> {
    let mut burst = Vec::with_capacity(BURST as usize);
    for (start, end) in bursts(w.records, if batched { BURST } else { 1 }) {
        times.sending(start, end);
        send_mio_waiting(producer, p, start..end, batched, &mut burst)?;
    }
    Ok(())
}

/// Sends records `range` (tagged with their indexes) through `handle`: with `batched` one
/// `send_batch_detached` call (through `burst`, left empty), else `send_detached` of the
/// range's one record. Each waits for room. The send step of the `tokio-cb*` and
/// `tokio-batch*` loops, throughput and open-loop alike.
pub(crate) async fn send_tokio_detached(
    handle: &producer_tokio::ProducerHandle,
    p: &Payloads,
    range: std::ops::Range<u64>,
    batched: bool,
    burst: &mut Vec<(producer_core::Record, u64)>,
) -> Result<(), Error> {
    let sent = if batched {
        burst.extend(range.map(|i| (p.record(i), i)));
        handle
            .send_batch_detached(burst)
            .await
            .map_err(|e| e.to_string())
    } else {
        let start = range.start;
        handle
            .send_detached(p.record(start), start)
            .await
            .map_err(|e| e.to_string())
    };
    Ok(sent.map_err(|e| format!("send refused: {e}"))?)
}

/// Sends records `range` (tagged with their indexes) through `producer`: with `batched` one
/// `send_batch_timeout` call (through `burst`), else `send_timeout` of the range's one record,
/// each waiting in the producer for room (no polling). The send step of the `mio*` and
/// `mio-batch*` loops, throughput and open-loop alike.
pub(crate) fn send_mio_waiting(
    producer: &producer_mio::ThreadedProducer<u64>,
    p: &Payloads,
    range: std::ops::Range<u64>,
    batched: bool,
    burst: &mut Vec<(producer_core::Record, u64)>,
) -> Result<(), Error> {
    let sent = if batched {
        burst.extend(range.map(|i| (p.record(i), i)));
        producer
            .send_batch_timeout(burst, Duration::MAX)
            .map(drop)
            .map_err(|e| e.to_string())
    } else {
        let start = range.start;
        producer
            .send_timeout(p.record(start), start, Duration::MAX)
            .map_err(|e| e.to_string())
    };
    Ok(sent.map_err(|e| format!("send refused: {e}"))?)
}

/// Prints a `REQUESTS` line: Produce requests, batches and records sent, and records per
/// batch and per request (how the workload batched: keyed records over many partitions make
/// small batches unless linger is raised).
fn print_requests(c: &producer_core::Stats) {
    let per = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    println!(
        "REQUESTS requests={} batches={} records={} records_per_batch={:.2} \
         records_per_request={:.2}",
        c.produce_requests,
        c.batches_sent,
        c.records_sent,
        per(c.records_sent, c.batches_sent),
        per(c.records_sent, c.produce_requests)
    );
}

/// Records per burst for the batched producers.
pub(crate) const BURST: u64 = 1024;

/// `[start, end)` ranges of `size` records covering `0..records`.
pub(crate) fn bursts(records: u64, size: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..records)
        .step_by(size as usize)
        .map(move |start| (start, (start + size).min(records)))
}

/// Delivery counts of one producer under test (also librdkafka's delivery context).
#[derive(Default)]
pub(crate) struct Counting {
    pub(crate) ok: AtomicU64,
    pub(crate) failed: AtomicU64,
}

impl Counting {
    /// Counts one report; the first few failures are printed.
    pub(crate) fn count<T, E: std::fmt::Display>(&self, result: Result<T, E>) {
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

    pub(crate) fn reported(&self) -> u64 {
        self.ok.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed)
    }

    pub(crate) fn outcome(&self, secs: f64) -> Outcome {
        Outcome {
            ok: self.ok.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            secs,
            latency: None,
            peak_buffered: None,
            accepted: None,
        }
    }
}
