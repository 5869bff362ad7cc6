//! `--saturation`: latency under saturation, what the queue-delay limit
//! (`queue.delay.target.ms`, on by default at 50 ms) buys a producer that outruns its cluster
//! (issue 22, item 4), one table per broker.
//!
//! What runs, on each broker of `--broker` (`mock`, the default, `kafka` or `both`): on the
//! mock a fresh cluster for every run as in the workloads; on Kafka one node for the whole
//! mode, and before the first measured run an uncounted warm-up run of the first producer
//! (as large as a measured one): a fresh node's first heavy load stalls it for a while (the
//! JIT, new log segments), and with a node per run every run paid that start, which was most
//! of the p99 from send and of the run-to-run spread (up to 2x) of 1,000,000-record runs.
//! * **Unthrottled**, `null100` (100-byte values, null keys, acks=all, linger 5 ms, 16 KiB
//!   batches, a 64 MiB buffer unless `--batch-size`, `--buffer-memory` say): every row NAME of
//!   ours ([`PRODUCERS`] unless `--producers` says) as shipped, the limit on, and `NAME+qd0`,
//!   the same producer with the limit off (its buffer fills to `buffer_memory`), the two
//!   interleaved in each of `--runs` rounds. Each run gives records/s, peak RSS, the most bytes
//!   the producer held against `buffer_memory` (a metrics snapshot every 2 ms), and the
//!   average and p99 time from just before a record's send call to its report, over one record
//!   in 64 (the "from send" figures, as `kafka-producer-perf-test` counts: see
//!   `send_times.rs`).
//! * **At half the peak rate**: the open-loop `latency` workload (record `i` due at
//!   `start + i / rate`, its latency from then to its report) at half of the higher of NAME's
//!   and `NAME+qd0`'s median records/s, the limit on, `--runs` runs. A batch row's open-loop
//!   sender hands its API a burst of 1,024 records each time the burst's first record is due,
//!   and times every record of it from then, its send call, as the unthrottled runs do.
//!   (Before `3e8cb9b` a batch row was timed here with the per-record sender of its driver, which
//!   left out the wait of a record behind the rest of its burst that its unthrottled runs
//!   count.)
//!
//! The targets, each a yes or no per row:
//! * **latency**: the average and the p99 from send, limit on, each at most twice the p99 at
//!   half the peak rate;
//! * **throughput**: records/s with the limit on at least 95% of those with it off (a full
//!   buffer).
//!
//! Figures are medians over the runs that gave them. With `--readme PATH` each broker's table
//! replaces what lies between `<!-- bench_e2e saturation-BROKER begin -->` and
//! `<!-- bench_e2e saturation-BROKER end -->` (`saturation-mock`, `saturation-kafka`), under a
//! line naming the command and commit.

use crate::cluster::{Broker, Mock, TopicSpec};
use crate::coordinator::{rows, run_one, Figures, Row, RunSpec, Sample};
use crate::payloads::workload;
use crate::peers::PeerPrograms;
use crate::plan::Plan;
use crate::tables::{commit_and_command, md_reason, replace_marked, thousands, utc_date};
use crate::{Error, BROKERS, DEFAULT_BATCH_SIZE, DEFAULT_BUFFER_MEMORY, PARTITIONS};
use std::collections::BTreeMap;
use std::time::Instant;

/// The rows unless `--producers` says: every API of ours, idempotent (as shipped).
pub(crate) const PRODUCERS: &[&str] = &[
    "tokio-idem",
    "tokio-cb-idem",
    "tokio-batch-idem",
    "mio-idem",
    "mio-batch-idem",
];

/// The Kafka topic's `compression.type`: the producers send uncompressed batches, so the node
/// recompresses each one, and its drain (about 20 MB/s of 100-byte records on this machine) is
/// below what one producer of ours offers.
const KAFKA_TOPIC_COMPRESSION: &str = "gzip";

/// The unthrottled workload.
const THROUGHPUT_WORKLOAD: &str = "null100";

/// The open-loop workload at half the peak rate.
const LATENCY_WORKLOAD: &str = "latency";

/// The latency target: from send (average and p99, limit on) at most this many times the p99
/// at half the peak rate.
const LATENCY_FACTOR: f64 = 2.0;

/// The throughput target: records/s with the limit on at least this share of those with it off.
const THROUGHPUT_SHARE: f64 = 0.95;

/// `NAME` with the queue-delay limit off (`queue.delay.target.ms` 0, the `+qd0` suffix).
fn limit_off(name: &str) -> String {
    format!("{name}+qd0")
}

/// A row's peak records/s: the higher of its limit-on and limit-off medians, or the one it
/// has. The higher, because the peak is what the producer can reach: where a full buffer slows
/// the cluster (Kafka here, see the README) the limit-on rate is the higher one, and half of
/// the limit-off rate would time a lighter load than half the peak.
fn peak_rate(on: Option<f64>, off: Option<f64>) -> Option<f64> {
    match (on, off) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// One row's medians: limit on and off, and the open-loop run at half the peak (its rate and
/// row), `None` when neither side's runs gave a rate to take half of.
struct Measured {
    on: Row,
    off: Row,
    half: Option<(f64, Row)>,
}

/// Runs the saturation mode of `plan` on each of its brokers: prints each run and each table,
/// and rewrites the broker's table in `--readme`.
pub(crate) fn run(args: &[String], plan: &Plan, peers: &PeerPrograms) -> Result<(), Error> {
    let started = Instant::now();
    for &broker in &plan.brokers {
        println!(
            "\nbench_e2e --saturation on {}: {} records per run, {} run(s), producers {}",
            describe(broker),
            plan.records,
            plan.runs,
            plan.producers.join(",")
        );
        let measured = run_broker(plan, broker, peers)?;
        let table = markdown(&plan.producers, &measured);
        println!("\n== saturation, {} ==\n{table}", broker.name());
        if let Some(path) = &plan.readme {
            let body = format!("{}\n{table}", provenance(args, plan, broker));
            let marker = plan.marker(broker);
            let text = std::fs::read_to_string(path)?;
            std::fs::write(path, replace_marked(&text, &marker, &body)?)?;
            println!(
                "bench_e2e: rewrote the {marker} table of {}",
                path.display()
            );
        }
    }
    println!(
        "saturation time {:.1} min",
        started.elapsed().as_secs_f64() / 60.0
    );
    Ok(())
}

/// The broker as the table's line names it.
fn describe(broker: Broker) -> String {
    match broker {
        Broker::Mock => format!("the mock cluster ({BROKERS} brokers, {PARTITIONS} partitions)"),
        Broker::Kafka => format!("Apache Kafka 4.1.1 (one node, {PARTITIONS} partitions)"),
    }
}

/// The line above a broker's table: command, commit, date, what ran and the targets.
fn provenance(args: &[String], plan: &Plan, broker: Broker) -> String {
    let (commit, command) = commit_and_command(args);
    format!(
        "Generated by `{command}` on commit {commit}, {} (UTC), {} records per run, medians of \
         {} run(s), {}: `{THROUGHPUT_WORKLOAD}` unthrottled (100 B values, null keys, acks=all, \
         linger 5 ms, {} B batches, {} MiB buffer, idempotence), limit on = \
         `queue.delay.target.ms` and `queue.delay.min.ms` at their defaults ({}), off = \
         `queue.delay.target.ms` 0 (`NAME+qd0`); from send: one \
         record in 64, from just before its send call to its report; p99 at half the peak rate: \
         the open-loop `{LATENCY_WORKLOAD}` workload at half of the higher of the limit-on and \
         limit-off records/s, limit on (the batch rows in bursts of 1,024 records, each timed \
         from its burst's send call). Targets: latency = \
         from send avg and p99 (on) at most {LATENCY_FACTOR}x the p99 at half the peak rate; \
         throughput = records/s on at least {:.0}% of off.{}\n",
        utc_date(),
        thousands(plan.records as f64),
        plan.runs,
        describe(broker),
        thousands(plan.batch_size.unwrap_or(DEFAULT_BATCH_SIZE) as f64),
        plan.buffer_mib.unwrap_or(DEFAULT_BUFFER_MEMORY >> 20),
        shipped_limit(),
        THROUGHPUT_SHARE * 100.0,
        match (broker, plan.mock_rtt_ms) {
            (Broker::Mock, Some(ms)) => format!(" The mock answers {ms} ms late."),
            (Broker::Kafka, _) => format!(
                " The topic has `compression.type={KAFKA_TOPIC_COMPRESSION}` and the \
                 producers send uncompressed batches, so the node recompresses every batch: \
                 it absorbs less than is offered (about 20 MB/s here). One node for every run, \
                 after an uncounted warm-up run."
            ),
            _ => String::new(),
        }
    )
}

/// The queue-delay target and least depth our producers ship with (the core's defaults), as
/// `50 ms, 2 ms`.
fn shipped_limit() -> String {
    producer_core::Config::builder([("localhost", 9092)])
        .build()
        .map_or_else(
            |e| format!("unknown: {e}"),
            |c| {
                format!(
                    "{} ms, {} ms",
                    c.queue_delay_target.as_millis(),
                    c.queue_delay_min.as_millis()
                )
            },
        )
}

/// Every row's runs on `broker`: the unthrottled rounds (limit on and off interleaved), then
/// the open-loop rounds at half of each row's peak ([`peak_rate`]).
fn run_broker(
    plan: &Plan,
    broker: Broker,
    peers: &PeerPrograms,
) -> Result<BTreeMap<String, Measured>, Error> {
    let topics = match broker {
        // The node recompresses every batch: its drain is bound by its CPU, below what one
        // producer of ours offers, whatever else runs on the machine.
        Broker::Kafka => TopicSpec {
            configs: vec![(
                "compression.type".to_string(),
                KAFKA_TOPIC_COMPRESSION.to_string(),
            )],
            ..TopicSpec::bench()
        },
        Broker::Mock => TopicSpec::bench(),
    };
    // Kafka: one node for every run of the mode, warmed up first (see the module docs).
    let cluster = match broker {
        Broker::Kafka => Some(Mock::start(broker, None, &topics, None)?),
        Broker::Mock => None,
    };
    let spec = |wname: &'static str, run: usize, rate: Option<f64>| RunSpec {
        run,
        rate,
        batch_size: plan.batch_size,
        buffer_mib: plan.buffer_mib,
        mock_rtt_ms: plan.mock_rtt_ms,
        cluster: cluster.as_ref(),
        ..RunSpec::plain(wname, plan.records, broker, peers, &topics)
    };
    if let (Some(_), Some(first)) = (&cluster, plan.producers.first()) {
        // Not counted: a fresh node's first heavy load stalls it (JIT, new log segments).
        let warmup = RunSpec {
            point: Some("warmup"),
            ..spec(THROUGHPUT_WORKLOAD, 1, None)
        };
        if let Err(e) = run_one(first, &warmup) {
            eprintln!("  warm-up ({first}): {e}");
        }
    }
    let runs = plan.runs;
    let one = |label: &str, s: &RunSpec<'_>| -> Result<Sample, String> {
        let sample = run_one(label, s);
        match &sample {
            Ok(x) => eprintln!(
                "  {} run {}/{runs} {label:>22}: {:>9.0} rec/s  rss {:.0} MB{}  ok {} failed {}{}",
                s.workload,
                s.run,
                plan.records as f64 / x.secs,
                x.maxrss_kb as f64 / 1024.0,
                x.peak_buffered_kb.map_or(String::new(), |kb| format!(
                    " (buffered at most {:.1} MB)",
                    kb as f64 / 1024.0
                )),
                x.ok,
                x.failed,
                x.latency_us.map_or(String::new(), |[a, b, c]| format!(
                    "  p50 {a:.0} us p99 {b:.0} us p99.9 {c:.0} us"
                )) + &x.accepted_text()
            ),
            Err(e) => eprintln!("  {} run {}/{runs} {label:>22}: {e}", s.workload, s.run),
        }
        sample
    };

    // Unthrottled: NAME and NAME+qd0 in turn, every round.
    let off_names: Vec<String> = plan.producers.iter().map(|p| limit_off(p)).collect();
    let mut samples: BTreeMap<&str, Vec<Result<Sample, String>>> = BTreeMap::new();
    for run in 1..=runs {
        for (name, off) in plan.producers.iter().zip(&off_names) {
            for p in [name, off] {
                let s = one(p, &spec(THROUGHPUT_WORKLOAD, run, None));
                samples.entry(p.as_str()).or_default().push(s);
            }
        }
    }
    let mut throughput = rows(&samples, plan.records, workload(THROUGHPUT_WORKLOAD)?);

    // At half of each row's peak, the limit on.
    let half_rates: BTreeMap<&str, f64> = plan
        .producers
        .iter()
        .zip(&off_names)
        .filter_map(|(name, off)| {
            let rate = |p: &str| Some(throughput.get(p)?.figures.as_ref()?.rate);
            let peak = peak_rate(rate(name), rate(off))?;
            Some((name.as_str(), (peak / 2.0).round().max(1.0)))
        })
        .collect();
    let mut samples: BTreeMap<&str, Vec<Result<Sample, String>>> = BTreeMap::new();
    for run in 1..=runs {
        for (&name, &rate) in &half_rates {
            let s = one(name, &spec(LATENCY_WORKLOAD, run, Some(rate)));
            samples.entry(name).or_default().push(s);
        }
    }
    let mut half = rows(&samples, plan.records, workload(LATENCY_WORKLOAD)?);

    let mut out = BTreeMap::new();
    for (name, off) in plan.producers.iter().zip(&off_names) {
        let (Some(on_row), Some(off_row)) = (
            throughput.remove(name.as_str()),
            throughput.remove(off.as_str()),
        ) else {
            continue;
        };
        let half = half_rates
            .get(name.as_str())
            .and_then(|&rate| Some((rate, half.remove(name.as_str())?)));
        out.insert(
            name.clone(),
            Measured {
                on: on_row,
                off: off_row,
                half,
            },
        );
    }
    Ok(out)
}

/// `a / b` of a figure of the two rows, or the reason one has none.
fn pair(on: &Row, off: &Row, cell: impl Fn(&Figures) -> Option<String>) -> String {
    let side = |r: &Row| match r.figures.as_ref() {
        None => md_reason(r),
        Some(f) => cell(f).unwrap_or_else(|| "-".to_string()),
    };
    format!("{} / {}", side(on), side(off))
}

/// A target's cell: `yes`, `no`, or why it cannot be judged.
fn verdict(met: Option<bool>, missing: &str) -> String {
    match met {
        Some(true) => "yes".to_string(),
        Some(false) => "no".to_string(),
        None => format!("not measured ({missing})"),
    }
}

/// A broker's table: one row per producer in `producers` order, then a note per row whose
/// runs failed or lost records or gave no figures.
fn markdown(producers: &[String], measured: &BTreeMap<String, Measured>) -> String {
    let mut out = String::from(
        "| producer | records/s limit on | records/s limit off | on/off ratio | from send avg \
         ms on / off | from send p99 ms on / off | p99 ms at half the peak rate (records/s) | \
         peak RSS MB on / off | most MB buffered on / off | latency target met | throughput \
         target met |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut notes = Vec::new();
    for name in producers {
        let Some(m) = measured.get(name) else {
            continue;
        };
        let (on, off) = (m.on.figures.as_ref(), m.off.figures.as_ref());
        let rate = |r: &Row| {
            r.figures
                .as_ref()
                .map_or_else(|| md_reason(r), |f| thousands(f.rate))
        };
        let ratio = match (on, off) {
            (Some(a), Some(b)) => format!("{:.2}", a.rate / b.rate),
            _ => "-".to_string(),
        };
        let half_p99 = m
            .half
            .as_ref()
            .and_then(|(_, r)| r.figures.as_ref().and_then(|f| f.latency_ms).map(|l| l[1]));
        let half_cell = match &m.half {
            None => "not run (no peak rate)".to_string(),
            Some((rate, row)) => match half_p99 {
                Some(p99) => format!("{p99:.1} ({})", thousands(*rate)),
                None if row.figures.is_none() => md_reason(row),
                None => "-".to_string(),
            },
        };
        let accepted = on.and_then(|f| f.accepted_ms);
        let latency_met = accepted
            .zip(half_p99)
            .map(|([avg, p99], half)| avg <= LATENCY_FACTOR * half && p99 <= LATENCY_FACTOR * half);
        let throughput_met = on
            .zip(off)
            .map(|(a, b)| a.rate >= THROUGHPUT_SHARE * b.rate);
        out += &format!(
            "| {name} | {} | {} | {ratio} | {} | {} | {half_cell} | {} | {} | {} | {} |\n",
            rate(&m.on),
            rate(&m.off),
            pair(&m.on, &m.off, |f| f
                .accepted_ms
                .map(|a| format!("{:.1}", a[0]))),
            pair(&m.on, &m.off, |f| f
                .accepted_ms
                .map(|a| format!("{:.1}", a[1]))),
            pair(&m.on, &m.off, |f| Some(format!("{:.1}", f.rss_mb))),
            pair(&m.on, &m.off, |f| f
                .peak_buffered_mb
                .map(|b| format!("{b:.1}"))),
            verdict(
                latency_met,
                if accepted.is_none() {
                    "no from-send figures"
                } else {
                    "no p99 at half the peak"
                }
            ),
            verdict(throughput_met, "a side gave no figures"),
        );
        let half_row = m.half.as_ref().map(|(_, r)| r);
        for (what, row) in [("limit on", Some(&m.on)), ("limit off", Some(&m.off))]
            .into_iter()
            .chain([("half the peak rate", half_row)])
        {
            let Some(row) = row else { continue };
            if let Some(f) = &row.figures {
                if f.failed > 0.0 || f.lost > 0.0 {
                    notes.push(format!(
                        "{name}, {what}: median {:.0} failed and {:.0} lost records per run",
                        f.failed, f.lost
                    ));
                }
            }
            if !row.errors.is_empty() {
                notes.push(format!(
                    "{name}, {what}: {} of {} run(s) gave no figures: {}",
                    row.errors.len(),
                    row.runs,
                    row.errors[0].replace('\n', " ")
                ));
            }
        }
    }
    for n in notes {
        out += &format!("\nNote: {n}\n");
    }
    out
}
