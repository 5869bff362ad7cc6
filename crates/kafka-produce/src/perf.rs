//! Perf mode, as kafka-producer-perf-test: `--num-records` generated records of
//! `--record-size` bytes, paced open-loop at `--throughput` records/s (or unthrottled).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use producer_core::Record;
use producer_tokio::ProducerHandle;

use crate::args::Args;
use crate::progress::{Counts, Display, Progress};
use crate::tally::Tally;
use crate::{runtime, Failure};

/// Records handed to the producer at a time, at most.
const CHUNK: usize = 1024;

/// A payload of `size` bytes of uppercase letters (as kafka-producer-perf-test's), the same
/// for every record.
fn payload(size: usize) -> Bytes {
    let mut x: u32 = 0x9E37_79B9;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            b'A' + (x % 26) as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    let total = args.num_records.expect("perf mode has --num-records");
    let topic: Arc<str> = args
        .topic
        .as_deref()
        .ok_or_else(|| Failure::Usage("perf mode needs -t TOPIC".into()))?
        .into();
    if !(args.throughput == -1.0 || args.throughput > 0.0) || !args.throughput.is_finite() {
        return Err(Failure::Usage(format!(
            "--throughput {}: records per second above 0, or -1 for no limit",
            args.throughput
        )));
    }
    let format = args.line_format()?;
    let config = args.config()?;
    let counts = Arc::new(Counts::default());
    let display = if args.quiet {
        Display::Off
    } else {
        Display::auto(Duration::from_secs(5))
    };
    let progress = Progress::start(display, Some(total), counts.clone());
    let tally = Tally::new(
        args.failed.as_deref(),
        progress.printer(),
        None,
        counts.clone(),
    )?;
    let value = payload(args.record_size);
    let template = Record {
        topic,
        partition: format.partition,
        key: None,
        value: Some(value),
        headers: format
            .headers
            .iter()
            .map(|(k, v)| producer_core::Header::new(k.clone(), Some(v.clone())))
            .collect(),
        timestamp: None,
    };
    let rate = (args.throughput > 0.0).then_some(args.throughput);
    let rt = runtime()?;
    let outcome = rt.block_on(async {
        let producer = tally.start_producer(config)?;
        let printing = crate::diagnose::start(args.diagnose, &producer, progress.printer());
        let sending = send_paced(&producer, &template, total, rate, &tally);
        let stopped = tokio::select! {
            () = sending => tokio::select! {
                () = crate::close(&producer, args.timeout) => None,
                cause = tally.unreachable() => Some(cause),
            },
            cause = tally.unreachable() => Some(cause),
        };
        let diagnosis = crate::diagnose::stop(printing, &producer).await;
        Ok::<_, Failure>((stopped, diagnosis))
    })?;
    let (outcome, diagnosis) = outcome;
    rt.shutdown_background();
    let elapsed = tally.started().elapsed();
    let unsent = total - counts.read().0;
    let stopped = outcome.map(|cause| {
        let n = tally.stop_early(&cause, &[]);
        (cause, n)
    });
    let latencies = tally.finish();
    progress.finish();
    let latencies = latencies?;
    let (sent, delivered, failed) = counts.read();
    let secs = elapsed.as_secs_f64().max(1e-9);
    let done = delivered + failed;
    // kafka-producer-perf-test's summary line, then the counts apart.
    println!(
        "{done} records sent, {:.1} records/sec ({:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, {:.2} ms 50th, {:.2} ms 95th, {:.2} ms 99th, {:.2} ms 99.9th.",
        done as f64 / secs,
        (done as usize * args.record_size) as f64 / secs / 1e6,
        latencies.mean_ms(),
        latencies.max_ms(),
        latencies.quantile_ms(0.5),
        latencies.quantile_ms(0.95),
        latencies.quantile_ms(0.99),
        latencies.quantile_ms(0.999),
    );
    println!("delivered {delivered}, failed {failed} of {sent} sent in {secs:.2} s");
    eprint!("{diagnosis}");
    if let Some((cause, n)) = stopped {
        return Err(Failure::Partial(format!(
            "no bootstrap broker could be reached: {cause}; stopped early ({n} records not delivered, {unsent} not generated)"
        )));
    }
    if failed > 0 {
        return Err(Failure::Partial(format!(
            "{failed} of {sent} records failed (their reasons are in the failed records)"
        )));
    }
    Ok(())
}

/// Sends `total` copies of `template`, each planned at `start + i / rate` (no plan: as fast
/// as the producer takes them). A record planned in the past goes at once (open loop: the
/// schedule does not slip when the producer falls behind, and latencies count from the
/// plan).
async fn send_paced(
    producer: &ProducerHandle,
    template: &Record,
    total: u64,
    rate: Option<f64>,
    tally: &Tally,
) {
    // Nothing goes to the producer before the cluster is reached: a run that stops early
    // because it is not then has no record in the producer (see `Tally::reached`).
    tally.reached().await;
    let start = tally.started();
    let planned = |i: u64| rate.map(|r| start + Duration::from_secs_f64(i as f64 / r));
    let mut i = 0u64;
    let mut chunk = Vec::with_capacity(CHUNK);
    while i < total {
        let now = Instant::now();
        if let Some(at) = planned(i) {
            if at > now {
                tokio::time::sleep_until(at.into()).await;
                continue;
            }
        }
        while i < total && chunk.len() < CHUNK {
            let at = match planned(i) {
                Some(at) if at > now => break,
                Some(at) => at,
                None => now,
            };
            chunk.push((template.clone(), tally.tag(i, at)));
            i += 1;
        }
        tally.sending(chunk.len());
        if producer.send_batch_detached(&mut chunk).await.is_err() {
            // The producer closed under the sender (not expected: only this run closes it).
            tally.not_taken(&chunk);
            return;
        }
    }
}
