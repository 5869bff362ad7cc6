//! `--scale`: the scale sweep. One single-node Apache Kafka for the whole sweep (its open-file
//! limit raised, a 1 GiB heap); each point's topics are created once, when the point starts,
//! and reused by every producer and run of it. Every point sends 8-byte keys drawn from
//! 65,536 random ones (so every partition is busy) with values of the point's size, at acks=all
//! and the bench's equal settings. Before a point's runs, the first producer sends an uncounted
//! warm-up run as large as a measured one, so that no measured run pays for the broker creating
//! the new partitions' log segments and taking its first heavy load (a stall of seconds with
//! 1,000 partitions on one node).
//!
//! The points, on four axes around one baseline (`p12`: one topic of 12 partitions, 100-byte
//! values, one producer per process):
//! * partitions: `p12`, `p1000`, `p10000` (one topic; above 5,000 partitions it is created in
//!   steps, Kafka's controller refusing more than 10,000 records in one operation);
//! * topics: `p12` (one topic of 12 partitions), `t100`, `t1000` (topics of one partition
//!   each), records spread evenly (record `i` to topic `i mod N`);
//! * record size: `v10`, `p12` (100 B), `v10000`, `v1000000` (12 partitions; at 1,000,000 B
//!   the producers' `max.request.size` (librdkafka's `message.max.bytes`) and the topic's
//!   `max.message.bytes` are raised to 2 MiB);
//! * producers in one process: `p12`, `i4`, `i16` (each producer sends its share of the same
//!   records, so the total is the same).
//!
//! Per point and producer: records/s, CPU-s per million, peak RSS, the broker's CPU-s per
//! million (one run; three at `p10000` and `v1000000`; `--runs N` sets every point's), and
//! the p50 / p99 / p99.9 delivery latency of an open-loop run at half of `rdkafka-idem`'s
//! records/s at that point (every row at the same rate; `tokio-batch-idem`, whose API takes
//! bursts, is timed with the per-record sender of the same driver, `tokio-cb-idem`; the `i4`
//! and `i16` points have no open-loop run). A point sends `--records` records (1,000,000 by
//! default), at most 256 MiB of values (the 10 KB and 1 MB points send fewer) and, from 5,000
//! partitions, at most 10 records per partition (there every producer's rate is bound by the
//! broker's cost per batch); an open-loop run sends at most 10 s of records at its rate.
//!
//! With `--readme PATH` the table replaces what lies between `<!-- bench_e2e scale begin -->`
//! and `<!-- bench_e2e scale end -->`; with `--plot PATH.svg` the partitions axis is drawn
//! ([`crate::plot`]).

use crate::cluster::{Broker, Mock, TopicSpec};
use crate::coordinator::{rows, Figures, Row, RunSpec, Sample};
use crate::payloads::{sized, workload};
use crate::peers::{payload_files, PeerPrograms};
use crate::plan::{flag, Plan};
use crate::tables::{commit_and_command, replace_marked, thousands, utc_date};
use crate::Error;
use std::collections::BTreeMap;
use std::time::Instant;

/// Every point of the sweep, in the order they run.
pub(crate) const POINTS: &[&str] = &[
    "p12", "p1000", "p10000", "t100", "t1000", "v10", "v10000", "v1000000", "i4", "i16",
];

/// The rows of the sweep unless `--producers` says.
pub(crate) const PRODUCERS: &[&str] =
    &["tokio-batch-idem", "mio-idem", "rdkafka-idem", "java-idem"];

/// The row whose records/s sets each point's latency rate (half of it).
const RATE_BASELINE: &str = "rdkafka-idem";

/// The most value bytes one point sends.
const POINT_BYTES: u64 = 256 << 20;

/// Records per partition a point of 5,000 partitions or more sends: on one node there every
/// producer's rate is bound by the broker's cost per batch (a few thousand records/s; 1,202 for
/// `rdkafka-idem` at 10,000 partitions in a trial run), so a million records would take the
/// sweep's whole hour.
const LARGE_POINT_RECORDS_PER_PARTITION: u64 = 10;

/// The partitions from which a point is large ([`LARGE_POINT_RECORDS_PER_PARTITION`]).
const LARGE_POINT_PARTITIONS: i64 = 5_000;

/// Seconds an open-loop run lasts at most: it sends at most its rate times this.
const LATENCY_RUN_SECS: f64 = 10.0;

/// The heap of the sweep's Kafka: the 10,000-partition point's metadata and the 1 MB point's
/// requests.
const KAFKA_HEAP_MB: u32 = 1024;

/// The request and message size limit of the 1 MB point.
const LARGE_REQUEST: usize = 2 << 20;

/// One point of the sweep.
#[derive(Debug, Clone)]
pub(crate) struct Point {
    pub(crate) name: String,
    /// The axes it lies on (the baseline lies on all four).
    pub(crate) axes: &'static [&'static str],
    pub(crate) partitions: i32,
    pub(crate) topics: usize,
    pub(crate) value_bytes: usize,
    pub(crate) instances: usize,
}

impl Point {
    /// The point's topics, named after it.
    fn topic_spec(&self) -> TopicSpec {
        TopicSpec {
            base: format!("scale-{}", self.name),
            count: self.topics,
            partitions: self.partitions,
            configs: if self.value_bytes > 100_000 {
                vec![("max.message.bytes".to_string(), LARGE_REQUEST.to_string())]
            } else {
                Vec::new()
            },
        }
    }

    /// The total partitions of its topics.
    pub(crate) fn total_partitions(&self) -> i64 {
        i64::from(self.partitions) * self.topics as i64
    }
}

/// The point called `name` (one of [`POINTS`]).
pub(crate) fn point(name: &str) -> Result<Point, Error> {
    const ALL: &[&str] = &["partitions", "topics", "record size", "producers"];
    let (axes, partitions, topics, value_bytes, instances): (&[&str], i32, usize, usize, usize) =
        match name {
            "p12" => (ALL, 12, 1, 100, 1),
            "p1000" => (&["partitions"], 1000, 1, 100, 1),
            "p10000" => (&["partitions"], 10_000, 1, 100, 1),
            "t100" => (&["topics"], 1, 100, 100, 1),
            "t1000" => (&["topics"], 1, 1000, 100, 1),
            "v10" => (&["record size"], 12, 1, 10, 1),
            "v10000" => (&["record size"], 12, 1, 10_000, 1),
            "v1000000" => (&["record size"], 12, 1, 1_000_000, 1),
            "i4" => (&["producers"], 12, 1, 100, 4),
            "i16" => (&["producers"], 12, 1, 100, 16),
            other => {
                return Err(format!(
                    "unknown scale point {other:?} (known: {})",
                    POINTS.join(",")
                )
                .into())
            }
        };
    Ok(Point {
        name: name.to_string(),
        axes,
        partitions,
        topics,
        value_bytes,
        instances,
    })
}

/// A point's throughput rows by producer, and its latency rate and rows (`None`: no
/// open-loop run).
pub(crate) type Measured = (BTreeMap<String, Row>, Option<(f64, BTreeMap<String, Row>)>);

/// What one point measured: its records per run, the throughput rows and the latency rows
/// (`None`: no open-loop run), or why the point could not run.
pub(crate) struct PointResult {
    pub(crate) point: Point,
    pub(crate) records: u64,
    pub(crate) runs: usize,
    pub(crate) outcome: Result<Measured, String>,
}

impl PointResult {
    /// The throughput figures of `producer`, if it gave any.
    pub(crate) fn figures(&self, producer: &str) -> Option<&Figures> {
        self.outcome
            .as_ref()
            .ok()
            .and_then(|(rows, _)| rows.get(producer))
            .and_then(|r| r.figures.as_ref())
    }
}

/// Runs the sweep of `plan`; prints each point's figures, rewrites the README's table and
/// draws the plot if asked.
pub(crate) fn run_sweep(args: &[String], plan: &Plan, peers: &PeerPrograms) -> Result<(), Error> {
    let started = Instant::now();
    let runs_flag: Option<usize> = flag(args, "--runs")?;
    println!(
        "bench_e2e --scale: points {}, producers {}, on one single-node Apache Kafka",
        plan.scale_points.join(","),
        plan.producers.join(",")
    );
    let mut cluster = Mock::start(
        Broker::Kafka,
        None,
        &TopicSpec {
            count: 0,
            ..TopicSpec::bench()
        },
        Some(KAFKA_HEAP_MB),
    )?;
    let mut results = Vec::new();
    for name in &plan.scale_points {
        let point = point(name)?;
        let mut records = plan.records.min(POINT_BYTES / point.value_bytes as u64);
        if point.total_partitions() >= LARGE_POINT_PARTITIONS {
            records =
                records.min(LARGE_POINT_RECORDS_PER_PARTITION * point.total_partitions() as u64);
        }
        let records = records.max(1);
        let runs = runs_flag.unwrap_or(if name == "p10000" || name == "v1000000" {
            3
        } else {
            1
        });
        let topics = point.topic_spec();
        let created = Instant::now();
        let outcome = match cluster.create_topics(&topics) {
            Err(e) => Err(format!("topic creation failed: {e}")),
            Ok(()) => {
                println!(
                    "\n== {name}: {} topic(s) of {} partition(s) created in {:.1} s, {} B values, \
                     {} producer(s) per process, {records} records, {runs} run(s) ==",
                    point.topics,
                    point.partitions,
                    created.elapsed().as_secs_f64(),
                    point.value_bytes,
                    point.instances
                );
                Ok(run_point(
                    &point, &topics, records, runs, plan, peers, &cluster,
                )?)
            }
        };
        if let Err(e) = &outcome {
            println!("\n== {name}: {e} ==");
        }
        results.push(PointResult {
            point,
            records,
            runs,
            outcome,
        });
    }
    drop(cluster);
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let table = markdown(&results, &plan.producers);
    println!("\n{table}\nsweep time {minutes:.1} min");
    if let Some(path) = &plan.plot {
        crate::plot::draw(path, &results, &plan.producers)?;
        println!("bench_e2e: drew {}", path.display());
    }
    if let Some(path) = &plan.readme {
        let (commit, command) = commit_and_command(args);
        let body = format!(
            "Generated by `{command}` on commit {commit}, {} (UTC), in {minutes:.0} min: Apache \
             Kafka 4.1.1 (one node), 8-byte keys, acks=all, linger 5 ms, 16 KiB batches, \
             idempotence on; runs and records per point in the table; latency at half of \
             `{RATE_BASELINE}`'s records/s at each point.\n\n{table}",
            utc_date()
        );
        let text = std::fs::read_to_string(path)?;
        std::fs::write(path, replace_marked(&text, "scale", &body)?)?;
        println!("bench_e2e: rewrote the scale table of {}", path.display());
    }
    Ok(())
}

/// The records of an open-loop run at `rate`: the point's, at most [`LATENCY_RUN_SECS`] of them.
fn latency_records(records: u64, rate: f64) -> u64 {
    records.min((rate * LATENCY_RUN_SECS) as u64).max(1)
}

/// The throughput runs of every producer at `point`, then (one producer per process) the
/// open-loop runs at half of [`RATE_BASELINE`]'s records/s.
fn run_point(
    point: &Point,
    topics: &TopicSpec,
    records: u64,
    runs: usize,
    plan: &Plan,
    peers: &PeerPrograms,
    cluster: &Mock,
) -> Result<Measured, Error> {
    let wname = "key8";
    let value_bytes = Some(point.value_bytes);
    let w = sized(workload(wname)?, value_bytes);
    let files = payload_files(wname, value_bytes)?;
    let spec = |rate: Option<f64>, run: usize| RunSpec {
        workload: if rate.is_some() {
            "key8-latency"
        } else {
            wname
        },
        payload_files: Some(&files),
        run,
        rate,
        value_bytes,
        instances: point.instances,
        max_request_size: (point.value_bytes > 100_000).then_some(LARGE_REQUEST),
        cluster: Some(cluster),
        point: Some(&point.name),
        ..RunSpec::plain(
            wname,
            rate.map_or(records, |r| latency_records(records, r)),
            Broker::Kafka,
            peers,
            topics,
        )
    };
    let sweep = |rate: Option<f64>, names: &[(String, String)]| {
        let records = rate.map_or(records, |r| latency_records(records, r));
        let mut samples: BTreeMap<&str, Vec<Result<Sample, String>>> = BTreeMap::new();
        for run in 1..=runs {
            for (row, runner) in names {
                let s = crate::coordinator::run_one(runner, &spec(rate, run));
                match &s {
                    Ok(s) => eprintln!(
                        "  {} run {run}/{runs} {row:>16}: {:>9.0} rec/s  cpu {:.2} s  rss {:.0} MB  \
                         broker cpu {:.2} s{}",
                        point.name,
                        records as f64 / s.secs,
                        s.cpu,
                        s.maxrss_kb as f64 / 1024.0,
                        s.broker_cpu,
                        s.latency_us.map_or(String::new(), |[a, b, c]| format!(
                            "  p50 {a:.0} us p99 {b:.0} us p99.9 {c:.0} us"
                        )) + &s.accepted_text()
                    ),
                    Err(e) => eprintln!("  {} run {run}/{runs} {row:>16}: {e}", point.name),
                }
                samples.entry(row.as_str()).or_default().push(s);
            }
        }
        rows(&samples, records, w)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<BTreeMap<String, Row>>()
    };
    // A warm-up run, not counted, as large as a measured one: the first writes to a new
    // topic's partitions create their log segments in the broker, and its first heavy load
    // stalls it for seconds (1,000 partitions on one node: after 20 records per partition,
    // the next 1,000,000-record run took 6.7 s with a p99 of 4.8 s, the one after it 1.1 s,
    // whichever producer came first), which the first measured producer would otherwise pay.
    if let Some(first) = plan.producers.first() {
        let warmup = RunSpec {
            records,
            point: Some("warmup"),
            ..spec(None, 1)
        };
        if let Err(e) = crate::coordinator::run_one(first, &warmup) {
            eprintln!("  {} warm-up ({first}): {e}", point.name);
        }
    }
    let same: Vec<(String, String)> = plan
        .producers
        .iter()
        .map(|p| (p.clone(), p.clone()))
        .collect();
    let throughput = sweep(None, &same);
    if point.instances > 1 {
        return Ok((throughput, None));
    }
    let base = throughput
        .get(RATE_BASELINE)
        .or_else(|| throughput.values().find(|r| r.figures.is_some()))
        .and_then(|r| r.figures.as_ref())
        .map(|f| (f.rate / 2.0).round().max(1.0));
    let Some(rate) = base else {
        return Ok((throughput, None));
    };
    // The batch rows' latency comes from the per-record sender of the same driver.
    let open_loop: Vec<(String, String)> = plan
        .producers
        .iter()
        .map(|p| (p.clone(), per_record_sender(p)))
        .collect();
    let latency = sweep(Some(rate), &open_loop);
    Ok((throughput, Some((rate, latency))))
}

/// The per-record sender of `name`'s driver, which times a batch row's latency here (the
/// table's rows at one rate, one record at a time): `tokio-batch*` -> `tokio-cb*`,
/// `mio-batch*` -> `mio*`, any other row itself.
fn per_record_sender(name: &str) -> String {
    if let Some(rest) = name.strip_prefix("tokio-batch") {
        format!("tokio-cb{rest}")
    } else if let Some(rest) = name.strip_prefix("mio-batch") {
        format!("mio{rest}")
    } else {
        name.to_string()
    }
}

/// The README's scale table: per axis, its points (the baseline on every axis), a row per
/// producer.
pub(crate) fn markdown(results: &[PointResult], producers: &[String]) -> String {
    let mut out = String::from(
        "| axis | point | records x runs | producer | records/s | CPU-s per million | peak RSS MB \
         | latency p50 / p99 / p99.9 ms (at records/s) | broker CPU-s per million |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for axis in ["partitions", "topics", "record size", "producers"] {
        for r in results.iter().filter(|r| r.point.axes.contains(&axis)) {
            let p = &r.point;
            let label = match axis {
                "partitions" => format!("{} partitions", thousands(p.partitions as f64)),
                "topics" => format!(
                    "{} topic(s) x {} partition(s)",
                    thousands(p.topics as f64),
                    p.partitions
                ),
                "record size" => format!("{} B values", thousands(p.value_bytes as f64)),
                _ => format!("{} per process", p.instances),
            };
            let head = format!(
                "| {axis} | {label} | {} x {} |",
                thousands(r.records as f64),
                r.runs
            );
            let (rows, latency) = match &r.outcome {
                Ok(x) => x,
                Err(e) => {
                    out += &format!("{head} all | {} | | | | |\n", e.replace('|', "/"));
                    continue;
                }
            };
            for producer in producers {
                let Some(row) = rows.get(producer) else {
                    continue;
                };
                let Some(f) = row.figures.as_ref() else {
                    let why = row.errors.first().map_or("", String::as_str);
                    out += &format!(
                        "{head} {producer} | no figures: {} | | | | |\n",
                        why.replace('|', "/").replace('\n', " ")
                    );
                    continue;
                };
                let lat = match latency {
                    None => "-".to_string(),
                    Some((rate, rows)) => match rows
                        .get(producer)
                        .and_then(|r| r.figures.as_ref())
                        .and_then(|f| f.latency_ms)
                    {
                        Some([a, b, c]) => format!(
                            "{a:.1} / {b:.1} / {c:.1} ({}{})",
                            thousands(*rate),
                            if producer.contains("-batch") {
                                ", per-record sender"
                            } else {
                                ""
                            }
                        ),
                        None => "no figures".to_string(),
                    },
                };
                out += &format!(
                    "{head} {producer} | {} | {:.3} | {:.1} | {lat} | {:.3} |\n",
                    thousands(f.rate),
                    f.cpu_per_m,
                    f.rss_mb,
                    f.broker_cpu_per_m
                );
            }
        }
    }
    out
}
