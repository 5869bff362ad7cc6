//! The `latency` workload: open-loop senders at a fixed rate and each record's delivery
//! latency from when it was due.

use crate::payloads::Payloads;
use crate::rdkafka_worker::{drain, rdkafka_config};
use crate::send_times::{nearest_rank, sorted_micros, store_micros};
use crate::worker::{
    bursts, our_config, runtime, send_mio_waiting, send_tokio_detached, Counting, Outcome,
    WorkerArgs, BURST, MIO_QUEUE,
};
use crate::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The tag (opaque) of the warm-up record each open-loop run delivers before its clock starts.
pub(crate) const WARMUP_TAG: u64 = u64::MAX;

/// The open-loop schedule of the `latency` workload and each record's delivery latency.
/// Record `i` is due at `start + i / rate`; its latency is from then to its report, so a
/// producer that stalls its sender is charged for every record that waited (no coordinated
/// omission). A burst sender (the batch APIs) hands records over `burst` at a time, each burst
/// when its first record is due; every record of a burst is timed from then, its send call.
pub(crate) struct Latencies {
    /// When record 0 was due: set once the warm-up record is delivered.
    pub(crate) start: std::sync::OnceLock<Instant>,
    /// Nanoseconds between two records' due times (10^9 / rate).
    pub(crate) interval_ns: f64,
    /// Records per send call: 1, or the batch senders' [`BURST`].
    burst: u64,
    /// Per record: 1 + its latency in µs once delivered, 0 before (and if it failed).
    pub(crate) micros: Vec<std::sync::atomic::AtomicU32>,
}

impl Latencies {
    pub(crate) fn new(records: u64, rate: f64, burst: u64) -> Latencies {
        Latencies {
            start: std::sync::OnceLock::new(),
            interval_ns: 1e9 / rate,
            burst: burst.max(1),
            micros: (0..records).map(|_| Default::default()).collect(),
        }
    }

    /// Starts the schedule now (record 0 is due now).
    pub(crate) fn begin(&self) -> Instant {
        *self.start.get_or_init(Instant::now)
    }

    pub(crate) fn due(&self, i: u64) -> Instant {
        let start = *self.start.get().expect("the schedule has begun");
        start + Duration::from_nanos((i as f64 * self.interval_ns) as u64)
    }

    /// How long until record `i` is due; zero once it is (the sender then catches up).
    pub(crate) fn until_due(&self, i: u64) -> Duration {
        self.due(i).saturating_duration_since(Instant::now())
    }

    /// Blocks the sending thread until record `i` is due: the pacing of the workload.
    pub(crate) fn pace(&self, i: u64) {
        let wait = self.until_due(i);
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }

    pub(crate) fn delivered(&self, i: u64, at: Instant) {
        if let Some(slot) = self.micros.get(i as usize) {
            let sent = self.due(i - i % self.burst);
            let us = at.saturating_duration_since(sent).as_micros();
            store_micros(slot, u64::try_from(us).unwrap_or(u64::MAX));
        }
    }

    /// p50, p99 and p99.9 in µs (nearest rank) over the delivered records; `None` if none.
    pub(crate) fn percentiles(&self) -> Option<[u64; 3]> {
        let v = sorted_micros(&self.micros)?;
        Some([0.50, 0.99, 0.999].map(|q| nearest_rank(&v, q)))
    }
}

/// The reports of an open-loop run: counted, and each delivered record's latency kept.
pub(crate) struct Timed {
    pub(crate) counts: Counting,
    pub(crate) latencies: Latencies,
}

impl Timed {
    pub(crate) fn new(records: u64, rate: f64, burst: u64) -> Timed {
        Timed {
            counts: Counting::default(),
            latencies: Latencies::new(records, rate, burst),
        }
    }

    /// The report of record `i` (the warm-up record's is not counted).
    pub(crate) fn report<T, E: std::fmt::Display>(&self, i: u64, result: Result<T, E>) {
        let at = Instant::now();
        if i == WARMUP_TAG {
            return;
        }
        if result.is_ok() {
            self.latencies.delivered(i, at);
        }
        self.counts.count(result);
    }

    pub(crate) fn outcome(&self, secs: f64) -> Outcome {
        Outcome {
            latency: self.latencies.percentiles(),
            ..self.counts.outcome(secs)
        }
    }
}

impl rdkafka::ClientContext for Timed {}

impl rdkafka::producer::ProducerContext for Timed {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, i: usize) {
        self.report(i as u64, result.as_ref().map_err(|(e, _)| e));
    }
}

/// `tokio` / `tokio-idem` open loop: `send(record).await` per due record; each delivery future
/// goes at once to a collector task that polls all of them unordered and takes each one's
/// time as it resolves.
pub(crate) fn run_tokio_open_loop(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    rate: f64,
) -> Result<Outcome, Error> {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    use producer_tokio::{DeliveryFuture, ProducerHandle};
    let config = our_config(w, idempotence)?;
    let rt = runtime()?;
    let records = w.records;
    let timed = Arc::new(Timed::new(records, rate, 1));
    rt.block_on(async move {
        let handle = ProducerHandle::start(config)?;
        let warmup = handle
            .send(p.record(0))
            .await
            .map_err(|e| format!("send refused: {e}"))?;
        warmup
            .await
            .map_err(|e| format!("warm-up record failed: {e}"))?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, DeliveryFuture)>();
        let collector = {
            let timed = timed.clone();
            tokio::spawn(async move {
                let mut pending = FuturesUnordered::new();
                let mut open = true;
                loop {
                    tokio::select! {
                        next = rx.recv(), if open => match next {
                            Some((i, f)) => pending.push(async move { (i, f.await) }),
                            None => open = false,
                        },
                        Some((i, result)) = pending.next(), if !pending.is_empty() => {
                            timed.report(i, result);
                        }
                        else => break,
                    }
                }
            })
        };
        let started = timed.latencies.begin();
        for i in 0..records {
            timed.latencies.pace(i);
            let f = handle
                .send(p.record(i))
                .await
                .map_err(|e| format!("send refused: {e}"))?;
            tx.send((i, f)).map_err(|_| "collector gone")?;
        }
        drop(tx);
        collector.await?;
        let secs = started.elapsed().as_secs_f64();
        handle.close().await;
        Ok(timed.outcome(secs))
    })
}

/// `tokio-cb` / `tokio-cb-idem` open loop: `send_detached(record, i).await` per due record,
/// or with `batched` (`tokio-batch*`) `send_batch_detached` per due burst of [`BURST`]; the
/// `on_delivery` callback takes each report's time.
pub(crate) fn run_tokio_cb_open_loop(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    rate: f64,
    batched: bool,
) -> Result<Outcome, Error> {
    use producer_tokio::ProducerHandle;
    let config = our_config(w, idempotence)?;
    let rt = runtime()?;
    let records = w.records;
    let size = if batched { BURST } else { 1 };
    let timed = Arc::new(Timed::new(records, rate, size));
    rt.block_on(async move {
        let handle = {
            let timed = timed.clone();
            ProducerHandle::builder(config)
                .on_delivery(move |report| timed.report(report.tag, report.result))
                .start()?
        };
        handle
            .send_detached(p.record(0), WARMUP_TAG)
            .await
            .map_err(|e| format!("send refused: {e}"))?;
        handle.flush().await;
        let started = timed.latencies.begin();
        let mut burst = Vec::with_capacity(size as usize);
        for (start, end) in bursts(records, size) {
            timed.latencies.pace(start);
            send_tokio_detached(&handle, p, start..end, batched, &mut burst).await?;
        }
        handle.flush().await;
        let secs = started.elapsed().as_secs_f64();
        handle.close().await;
        Ok(timed.outcome(secs))
    })
}

/// `mio` / `mio-idem` open loop: `ThreadedProducer::send_timeout(record, i, Duration::MAX)` per
/// due record, or with `batched` (`mio-batch*`) `send_batch_timeout` per due burst of
/// [`BURST`] (waiting in the producer while its queue is full); the delivery callback takes
/// each report's time.
pub(crate) fn run_mio_open_loop(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    rate: f64,
    batched: bool,
) -> Result<Outcome, Error> {
    use producer_mio::ThreadedProducer;
    let config = our_config(w, idempotence)?;
    let size = if batched { BURST } else { 1 };
    let timed = Arc::new(Timed::new(w.records, rate, size));
    let producer = {
        let timed = timed.clone();
        ThreadedProducer::<u64>::spawn(config, MIO_QUEUE, move |d| {
            timed.report(d.opaque, d.result.map_err(|f| f.error))
        })?
    };
    producer
        .send_timeout(p.record(0), WARMUP_TAG, Duration::MAX)
        .map_err(|e| format!("send refused: {e}"))?;
    producer.flush();
    let started = timed.latencies.begin();
    let mut burst = Vec::with_capacity(size as usize);
    for (start, end) in bursts(w.records, size) {
        timed.latencies.pace(start);
        send_mio_waiting(&producer, p, start..end, batched, &mut burst)?;
    }
    producer.flush();
    let secs = started.elapsed().as_secs_f64();
    producer.close();
    Ok(timed.outcome(secs))
}

/// `rdkafka` / `rdkafka-idem` open loop: `BaseProducer::send` per due record with the index as
/// its opaque; the sender serves the delivery callbacks with `poll` after every send and
/// while it waits for the next record to be due.
pub(crate) fn run_rdkafka_open_loop(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    rate: f64,
) -> Result<Outcome, Error> {
    use rdkafka::error::KafkaError;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::types::RDKafkaErrorCode;

    let producer: BaseProducer<Timed> =
        rdkafka_config(w, idempotence).create_with_context(Timed::new(w.records, rate, 1))?;
    let send = |i: u64, opaque: usize| -> Result<(), Error> {
        let mut record = BaseRecord::<[u8], [u8], usize>::with_opaque_to(p.topic(i), opaque)
            .payload(&p.values[p.value_range(i)]);
        if let Some(k) = p.key_range(i) {
            record = record.key(&p.keys[k]);
        }
        loop {
            match producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(format!("send refused: {e}").into()),
            }
        }
    };
    send(0, WARMUP_TAG as usize)?;
    producer.flush(Duration::from_secs(60))?;
    let timed = producer.context();
    let started = timed.latencies.begin();
    for i in 0..w.records {
        // Serve the callbacks until the record is due (poll's timeout is whole milliseconds).
        loop {
            let wait = timed.latencies.until_due(i);
            if wait >= Duration::from_millis(1) {
                producer.poll(Duration::from_millis(wait.as_millis() as u64));
            } else {
                producer.poll(Duration::ZERO);
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
                break;
            }
        }
        send(i, i as usize)?;
        producer.poll(Duration::ZERO);
    }
    drain(&producer, |t| t.counts.reported() >= w.records, started);
    let secs = started.elapsed().as_secs_f64();
    let outcome = timed.outcome(secs);
    drop(producer);
    Ok(outcome)
}
