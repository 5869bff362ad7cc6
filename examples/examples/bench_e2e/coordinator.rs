//! The coordinator (no mode argument): runs every producer of every workload in its own
//! process against a fresh cluster, collects each run's figures and takes the medians.

use crate::cluster::{tree_cpu_secs, Broker, Mock, TopicSpec};
use crate::payloads::{sized, workload, Workload};
use crate::peers::{build_peers, payload_files, peer, peer_command, Peer, PeerPrograms};
use crate::plan::{grow_suffix, plan, queue_delay_suffix, usage, Plan};
use crate::tables::{
    markdown_latency, markdown_throughput, print_latency_table, print_table, provenance,
    replace_marked,
};
use crate::{Error, BASELINE, BROKERS, WORKER_TIMEOUT};
use crate::{DEFAULT_BATCH_SIZE, DEFAULT_BUFFER_MEMORY};
use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sample {
    pub(crate) ok: u64,
    pub(crate) failed: u64,
    pub(crate) secs: f64,
    pub(crate) cpu: f64,
    pub(crate) maxrss_kb: u64,
    /// The `latency` workload's p50, p99 and p99.9 in µs.
    pub(crate) latency_us: Option<[f64; 3]>,
    /// CPU seconds the cluster's processes (the mock, or Kafka's JVM) used while the producer
    /// ran: shows when the broker, not the producer, is what bounds the rate.
    pub(crate) broker_cpu: f64,
    /// The most KiB our producer held against `buffer_memory` (sampled; ours only).
    pub(crate) peak_buffered_kb: Option<u64>,
    /// Ours, throughput workloads: average and p99 µs from each send call to its report.
    pub(crate) accepted_us: Option<[f64; 2]>,
}

impl Sample {
    /// `  from send: avg A ms p99 B ms` for a run's line, or nothing when the run has no such
    /// figures (peers, librdkafka, the latency workload).
    pub(crate) fn accepted_text(&self) -> String {
        self.accepted_us.map_or(String::new(), |[avg, p99]| {
            format!(
                "  from send: avg {:.1} ms p99 {:.1} ms",
                avg / 1000.0,
                p99 / 1000.0
            )
        })
    }
}

/// What one run needs beyond the producer's name.
pub(crate) struct RunSpec<'a> {
    pub(crate) workload: &'a str,
    pub(crate) records: u64,
    pub(crate) batch_size: Option<usize>,
    pub(crate) broker: Broker,
    pub(crate) peers: &'a PeerPrograms,
    pub(crate) payload_files: Option<&'a (String, Option<String>)>,
    pub(crate) run: usize,
    /// Records per second of the `latency` workload (`None` for the others).
    pub(crate) rate: Option<f64>,
    /// `--buffer-memory MIB`, `--value-bytes N`.
    pub(crate) buffer_mib: Option<usize>,
    pub(crate) value_bytes: Option<usize>,
    /// `--mock-rtt-ms N`.
    pub(crate) mock_rtt_ms: Option<u64>,
    /// `--baseline-exe PATH`: runs the workers of the `NAME@base` producers.
    pub(crate) baseline_exe: Option<&'a std::path::Path>,
    /// The topics records go to (the bench topic; the scale sweep's point's).
    pub(crate) topics: &'a TopicSpec,
    /// Producers in the one process (the scale sweep's producers axis; 1 otherwise).
    pub(crate) instances: usize,
    /// `max.request.size` for the 1 MB point of the scale sweep.
    pub(crate) max_request_size: Option<usize>,
    /// `--defaults`: every producer at its shipped defaults.
    pub(crate) defaults: bool,
    /// A running cluster to produce to (the scale sweep's, its topics created once) instead
    /// of a fresh one started for the run.
    pub(crate) cluster: Option<&'a Mock>,
    /// The scale sweep's point, in the log file's name.
    pub(crate) point: Option<&'a str>,
}

impl<'a> RunSpec<'a> {
    /// A run of `workload` with the bench's topic, one producer per process, a fresh cluster:
    /// the other fields as their flags say.
    pub(crate) fn plain(
        workload: &'a str,
        records: u64,
        broker: Broker,
        peers: &'a PeerPrograms,
        topics: &'a TopicSpec,
    ) -> RunSpec<'a> {
        RunSpec {
            workload,
            records,
            batch_size: None,
            broker,
            peers,
            payload_files: None,
            run: 1,
            rate: None,
            buffer_mib: None,
            value_bytes: None,
            mock_rtt_ms: None,
            baseline_exe: None,
            topics,
            instances: 1,
            max_request_size: None,
            defaults: false,
            cluster: None,
            point: None,
        }
    }
}

impl RunSpec<'_> {
    /// The time the open-loop schedule itself takes (zero for the other workloads).
    pub(crate) fn schedule(&self) -> Duration {
        self.rate.map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(self.records as f64 / r)
        })
    }
}

/// One run of `producer`: a fresh cluster, the producer's process, its figures or why not.
pub(crate) fn run_one(producer: &str, spec: &RunSpec<'_>) -> Result<Sample, String> {
    let e2s = |e: Error| e.to_string();
    let mut fresh = None;
    let mock: &Mock = match spec.cluster {
        Some(running) => running,
        None => fresh.insert(
            Mock::start(spec.broker, spec.mock_rtt_ms, spec.topics, None)
                .map_err(|e| format!("cluster did not start: {e}"))?,
        ),
    };
    let peer = peer(producer);
    let (mut cmd, timeout) = match peer {
        None => {
            // NAME+growN: NAME's worker with `batch.grow.max.bytes` N.
            let (producer, grow) = grow_suffix(producer);
            // NAME+qdN: NAME's worker with `queue.delay.target.ms` N.
            let (producer, queue_delay) = queue_delay_suffix(producer);
            // NAME@base: the same worker, from the baseline build (`--baseline-exe`).
            let (exe, ours) = match (producer.strip_suffix("@base"), spec.baseline_exe) {
                (Some(ours), Some(exe)) => (exe.to_path_buf(), ours),
                _ => (
                    std::env::current_exe().map_err(|e| e.to_string())?,
                    producer,
                ),
            };
            let mut cmd = Command::new(exe);
            cmd.args(["worker", "--producer", ours, "--workload", spec.workload])
                .args(["--records", &spec.records.to_string()])
                .args(["--bootstrap", &mock.bootstrap]);
            if let Some(ms) = queue_delay {
                cmd.args(["--queue-delay-ms", &ms.to_string()]);
            }
            if let Some(bytes) = grow {
                cmd.args(["--batch-grow-max", &bytes.to_string()]);
            }
            if let Some(n) = spec.batch_size {
                cmd.args(["--batch-size", &n.to_string()]);
            }
            if let Some(rate) = spec.rate {
                cmd.args(["--rate", &format!("{rate:.0}")]);
            }
            if let Some(mib) = spec.buffer_mib {
                cmd.args(["--buffer-memory", &mib.to_string()]);
            }
            if let Some(n) = spec.value_bytes {
                cmd.args(["--value-bytes", &n.to_string()]);
            }
            if *spec.topics != TopicSpec::bench() {
                cmd.args(["--topic", &spec.topics.base])
                    .args(["--topics", &spec.topics.count.to_string()]);
            }
            if spec.instances > 1 {
                cmd.args(["--instances", &spec.instances.to_string()]);
            }
            if let Some(n) = spec.max_request_size {
                cmd.args(["--max-request-size", &n.to_string()]);
            }
            if spec.defaults {
                cmd.arg("--defaults");
            }
            (cmd, WORKER_TIMEOUT + spec.schedule())
        }
        Some((p, idem)) => {
            let program = spec.peers.get(&p).ok_or("peer not built")?;
            let program = program.as_ref().map_err(|e| format!("cannot build: {e}"))?;
            let cmd = peer_command(p, idem, program, spec, &mock.bootstrap)?;
            // A peer that cannot talk to the cluster should not hold the bench for 10 minutes;
            // on the scale sweep's cluster (which our rows reached) a point may take longer.
            let timeout = match spec.cluster {
                Some(_) => WORKER_TIMEOUT,
                None => Duration::from_secs(60 + spec.records / 20_000),
            };
            (cmd, timeout.min(WORKER_TIMEOUT) + spec.schedule())
        }
    };
    let logs = producer_tests::kafka::dist::target_dir()
        .join("bench_e2e")
        .join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let log = logs.join(format!(
        "{producer}-{}{}-run{}.stderr",
        spec.workload,
        spec.point.map_or(String::new(), |p| format!("-{p}")),
        spec.run
    ));
    let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file));
    let broker_cpu_before = tree_cpu_secs(mock.child.id());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let pid = child.id() as libc::pid_t;
    let started = Instant::now();
    // wait4: the exit status and the rusage of this child alone (CPU, peak RSS).
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 writes into the structs we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut timed_out = false;
    loop {
        // SAFETY: pid is our child, not yet reaped.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            break;
        }
        if r < 0 {
            return Err(format!("wait4: {}", std::io::Error::last_os_error()));
        }
        if !timed_out && started.elapsed() > timeout {
            timed_out = true;
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = reader.join().unwrap_or_default();
    let broker_cpu = tree_cpu_secs(mock.child.id()) - broker_cpu_before;
    drop(fresh);
    let last_err = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.chars().take(300).collect::<String>())
            .unwrap_or_default()
    };
    if timed_out {
        return Err(format!(
            "timed out after {} s (last words: {:?})",
            timeout.as_secs(),
            last_err()
        ));
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("exited with status {status:#x}: {}", last_err()));
    }
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .ok_or_else(|| format!("no RESULT in its output; last words: {}", last_err()))?;
    let fields: BTreeMap<&str, &str> = line.split(' ').filter_map(|f| f.split_once('=')).collect();
    let get = |k: &str| -> Result<f64, Error> {
        Ok(fields
            .get(k)
            .ok_or_else(|| format!("RESULT lacks {k}"))?
            .parse()?)
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Sample {
        ok: get("ok").map_err(e2s)? as u64,
        failed: get("failed").map_err(e2s)? as u64,
        secs: get("secs").map_err(e2s)?,
        cpu: match peer {
            // Our worker reports its own getrusage.
            None => get("user").map_err(e2s)? + get("sys").map_err(e2s)?,
            // The Java peer reports its timed phase's CPU.
            Some((Peer::Java, _)) => get("cpu").map_err(e2s)?,
            Some(_) => tv(ru.ru_utime) + tv(ru.ru_stime),
        },
        maxrss_kb: match peer {
            None => get("maxrss_kb").map_err(e2s)? as u64,
            Some(_) => ru.ru_maxrss as u64,
        },
        latency_us: match spec.rate {
            None => None,
            Some(_) => Some([
                get("p50_us").map_err(e2s)?,
                get("p99_us").map_err(e2s)?,
                get("p999_us").map_err(e2s)?,
            ]),
        },
        broker_cpu,
        peak_buffered_kb: fields.get("peak_buffered_kb").and_then(|v| v.parse().ok()),
        accepted_us: match (get("acc_avg_us"), get("acc_p99_us")) {
            (Ok(avg), Ok(p99)) => Some([avg, p99]),
            _ => None,
        },
    })
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub(crate) struct Figures {
    pub(crate) rate: f64,
    pub(crate) mbps: f64,
    pub(crate) cpu_per_m: f64,
    pub(crate) rss_mb: f64,
    pub(crate) failed: f64,
    pub(crate) lost: f64,
    /// The cluster's CPU seconds per million records while the producer ran.
    pub(crate) broker_cpu_per_m: f64,
    /// The `latency` workload: delivered records per second of the open-loop run and the
    /// p50, p99 and p99.9 latency in ms.
    pub(crate) achieved: f64,
    pub(crate) latency_ms: Option<[f64; 3]>,
    /// Ours, throughput workloads: the average and p99 ms from each send call to its report
    /// (each the median over the runs that gave it).
    pub(crate) accepted_ms: Option<[f64; 2]>,
    /// The most MB our producer held against `buffer_memory` (the median over the runs whose
    /// worker samples it).
    pub(crate) peak_buffered_mb: Option<f64>,
}

/// A row of a table: the medians of the runs that gave figures, and why the others did not.
pub(crate) struct Row {
    pub(crate) figures: Option<Figures>,
    pub(crate) errors: Vec<String>,
    pub(crate) runs: usize,
}

pub(crate) fn coordinator_main(args: &[String]) -> Result<(), Error> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{}", usage());
        return Ok(());
    }
    let plan = plan(args)?;
    let peers = build_peers(&plan.producers);
    if plan.scale {
        return crate::scale::run_sweep(args, &plan, &peers);
    }
    if plan.saturation {
        return crate::saturation::run(args, &plan, &peers);
    }
    let total_started = Instant::now();
    for &broker in &plan.brokers {
        let markdown = run_broker(&plan, broker, &peers)?;
        if let Some(path) = &plan.readme {
            let text = std::fs::read_to_string(path)?;
            let body = format!("{}\n{markdown}", provenance(args, &plan, broker));
            let marker = plan.marker(broker);
            std::fs::write(path, replace_marked(&text, &marker, &body)?)?;
            println!(
                "bench_e2e: rewrote the {marker} tables of {}",
                path.display()
            );
        }
    }
    println!(
        "total bench time {:.0} s",
        total_started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Every workload of `plan` on `broker`: prints its tables and returns them in Markdown.
pub(crate) fn run_broker(
    plan: &Plan,
    broker: Broker,
    peers: &PeerPrograms,
) -> Result<String, Error> {
    let (runs, records) = (plan.runs, plan.records);
    println!(
        "bench_e2e: {records} records per run, {runs} run(s), {} in its own process (restarted \
         per run), acks=all, {}{}",
        match broker {
            Broker::Mock => format!(
                "mock cluster of {BROKERS} brokers / {} topic(s) of {} partitions",
                plan.topics.count, plan.topics.partitions
            ),
            Broker::Kafka => format!(
                "Apache Kafka, one node / {} topic(s) of {} partitions",
                plan.topics.count, plan.topics.partitions
            ),
        },
        if plan.defaults {
            "every producer at its shipped defaults".to_string()
        } else {
            format!(
                "linger 5 ms, batch size {}, buffer {} MiB",
                plan.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
                plan.buffer_mib.unwrap_or(DEFAULT_BUFFER_MEMORY >> 20)
            )
        },
        plan.value_bytes.map_or(String::new(), |n| format!(
            ", {n}-byte values in every workload"
        ))
    );
    let mut throughput_md = String::new();
    let mut latency_md = String::new();
    // librdkafka's median null100 rate in this invocation: half of it is the latency rate.
    let mut baseline_rate: Option<f64> = None;
    // Peers that cannot connect to the mock, with the reason (not run again).
    let mut unreachable: BTreeMap<String, String> = BTreeMap::new();
    for wname in &plan.workloads {
        let w = sized(workload(wname)?, plan.value_bytes);
        let rate = match (w.open_loop, plan.rate) {
            (false, _) => None,
            (true, Some(r)) => Some(r),
            (true, None) => match baseline_rate {
                Some(r) => Some((r / 2.0).round().max(1.0)),
                None => {
                    println!(
                        "\n== {wname}: not run: {BASELINE} gave no null100 figures to take the \
                         rate from (give --rate N) =="
                    );
                    latency_md = format!(
                        "Latency not measured: {BASELINE} gave no null100 figures to take the \
                         rate from.\n"
                    );
                    continue;
                }
            },
        };
        let files = if peers.is_empty() {
            None
        } else {
            Some(payload_files(wname, plan.value_bytes)?)
        };
        let mut samples: BTreeMap<&str, Vec<Result<Sample, String>>> = BTreeMap::new();
        for run in 0..runs {
            for p in &plan.producers {
                // A peer that could not talk to this broker once will not the next time (the
                // mock's answers are the same every run): its reason stands for the rest.
                if let Some(why) = unreachable.get(p.as_str()) {
                    samples
                        .entry(p.as_str())
                        .or_default()
                        .push(Err(why.clone()));
                    continue;
                }
                let spec = RunSpec {
                    workload: wname,
                    records,
                    batch_size: plan.batch_size,
                    broker,
                    peers,
                    payload_files: files.as_ref(),
                    run: run + 1,
                    rate,
                    buffer_mib: plan.buffer_mib,
                    value_bytes: plan.value_bytes,
                    mock_rtt_ms: plan.mock_rtt_ms,
                    baseline_exe: plan.baseline_exe.as_deref(),
                    defaults: plan.defaults,
                    instances: plan.instances,
                    ..RunSpec::plain(wname, records, broker, peers, &plan.topics)
                };
                let s = run_one(p, &spec);
                match &s {
                    Ok(s) => eprintln!(
                        "  {wname} run {}/{runs} {p:>16}: {:>9.0} rec/s  cpu {:.2} s  rss {:.0} MB{}  \
                         ok {} failed {}{}",
                        run + 1,
                        records as f64 / s.secs,
                        s.cpu,
                        s.maxrss_kb as f64 / 1024.0,
                        s.peak_buffered_kb.map_or(String::new(), |kb| format!(
                            " (buffered at most {:.1} MB)",
                            kb as f64 / 1024.0
                        )),
                        s.ok,
                        s.failed,
                        s.latency_us.map_or(String::new(), |[a, b, c]| format!(
                            "  p50 {a:.0} us p99 {b:.0} us p99.9 {c:.0} us"
                        )) + &s.accepted_text()
                    ),
                    Err(e) => {
                        eprintln!("  {wname} run {}/{runs} {p:>16}: {e}", run + 1);
                        if broker == Broker::Mock && e.contains("cannot connect") {
                            unreachable.insert(p.clone(), e.clone());
                        }
                    }
                }
                samples.entry(p.as_str()).or_default().push(s);
            }
        }
        let rows = rows(&samples, records, w);
        if wname == "null100" {
            baseline_rate = rows
                .get(BASELINE)
                .and_then(|r| r.figures.as_ref())
                .map(|f| f.rate);
        }
        match rate {
            Some(rate) => {
                print_latency_table(wname, rate, &plan.producers, &rows);
                latency_md = markdown_latency(rate, &plan.producers, &rows);
            }
            None => {
                print_table(wname, w, &plan.producers, &rows);
                throughput_md += &markdown_throughput(w, &plan.producers, &rows);
            }
        }
    }
    let mut md = String::new();
    if !throughput_md.is_empty() {
        md +=
            "| workload | producer | records/s (x) | MB/s (x) | CPU-s per million (x) | peak RSS \
               MB (x) | failed | lost | broker CPU-s per million |\n|---|---|---|---|---|---|---|---|---|\n";
        md += &throughput_md;
    }
    if !latency_md.is_empty() {
        if !md.is_empty() {
            md.push('\n');
        }
        md += &latency_md;
    }
    Ok(md)
}

/// The rows of one workload: the medians of each producer's runs that gave figures.
pub(crate) fn rows<'a>(
    samples: &BTreeMap<&'a str, Vec<Result<Sample, String>>>,
    records: u64,
    w: Workload,
) -> BTreeMap<&'a str, Row> {
    let bytes = (w.value_bytes + if w.keyed { 8 } else { 0 }) as f64;
    samples
        .iter()
        .map(|(p, all)| {
            let v: Vec<Sample> = all
                .iter()
                .filter_map(|s| s.as_ref().ok().copied())
                .collect();
            let errors: Vec<String> = all
                .iter()
                .filter_map(|s| s.as_ref().err().cloned())
                .collect();
            let m = |f: &dyn Fn(&Sample) -> f64| median(v.iter().map(f).collect());
            // The median over the runs that have the figure, `None` if none has.
            let some = |f: &dyn Fn(&Sample) -> Option<f64>| {
                let present: Vec<f64> = v.iter().filter_map(f).collect();
                (!present.is_empty()).then(|| median(present))
            };
            let figures = (!v.is_empty()).then(|| {
                let rate = m(&|s| records as f64 / s.secs);
                Figures {
                    rate,
                    mbps: rate * bytes / 1e6,
                    cpu_per_m: m(&|s| s.cpu / (records as f64 / 1e6)),
                    rss_mb: m(&|s| s.maxrss_kb as f64 / 1024.0),
                    failed: m(&|s| s.failed as f64),
                    lost: m(&|s| records.saturating_sub(s.ok + s.failed) as f64),
                    broker_cpu_per_m: m(&|s| s.broker_cpu / (records as f64 / 1e6)),
                    achieved: m(&|s| s.ok as f64 / s.secs),
                    latency_ms: v[0].latency_us.is_some().then(|| {
                        [0, 1, 2].map(|q| m(&|s| s.latency_us.map_or(f64::NAN, |l| l[q])) / 1e3)
                    }),
                    accepted_ms: some(&|s| s.accepted_us.map(|a| a[0]))
                        .zip(some(&|s| s.accepted_us.map(|a| a[1])))
                        .map(|(avg, p99)| [avg / 1e3, p99 / 1e3]),
                    peak_buffered_mb: some(&|s| s.peak_buffered_kb.map(|kb| kb as f64 / 1024.0)),
                }
            });
            (
                *p,
                Row {
                    figures,
                    errors,
                    runs: all.len(),
                },
            )
        })
        .collect()
}
