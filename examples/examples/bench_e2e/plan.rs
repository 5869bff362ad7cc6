//! The coordinator's flags, checked before anything runs, as a [`Plan`].

use crate::cluster::{Broker, TopicSpec};
use crate::payloads::workload;
use crate::peers::peer;
use crate::tables::replace_marked;
use crate::{Error, ALL_PRODUCERS, ALL_WORKLOADS, BASELINE, OTHER_PRODUCERS};

/// The flags that take a value (`--help` lists them all).
pub(crate) const VALUE_FLAGS: &[&str] = &[
    "--runs",
    "--records",
    "--batch-size",
    "--broker",
    "--workloads",
    "--producers",
    "--rate",
    "--readme",
    "--buffer-memory",
    "--value-bytes",
    "--mock-rtt-ms",
    "--baseline-exe",
    "--partitions",
    "--topics",
    "--instances",
    "--plot",
    "--scale-points",
];

/// The flags that take no value.
const SWITCHES: &[&str] = &["--quick", "--defaults", "--scale", "--saturation"];

/// The value of `--name`, parsed; an error (not a panic) for a missing or bad value.
pub(crate) fn flag<T: std::str::FromStr>(args: &[String], name: &str) -> Result<Option<T>, Error>
where
    T::Err: std::fmt::Display,
{
    let Some(i) = args.iter().position(|a| a == name) else {
        return Ok(None);
    };
    let v = args
        .get(i + 1)
        .filter(|v| !v.starts_with("--"))
        .ok_or_else(|| format!("{name} needs a value"))?;
    v.parse()
        .map(Some)
        .map_err(|e| format!("{name} {v:?}: {e}").into())
}

/// What one coordinator invocation runs.
pub(crate) struct Plan {
    pub(crate) runs: usize,
    pub(crate) records: u64,
    pub(crate) batch_size: Option<usize>,
    pub(crate) brokers: Vec<Broker>,
    pub(crate) workloads: Vec<String>,
    pub(crate) producers: Vec<String>,
    /// `--rate`: the latency workload's rate instead of half of librdkafka's null100 rate.
    pub(crate) rate: Option<f64>,
    /// `--readme PATH`: the file whose marked tables this run rewrites.
    pub(crate) readme: Option<std::path::PathBuf>,
    /// `--buffer-memory MIB`.
    pub(crate) buffer_mib: Option<usize>,
    /// `--value-bytes N`.
    pub(crate) value_bytes: Option<usize>,
    /// `--mock-rtt-ms N`.
    pub(crate) mock_rtt_ms: Option<u64>,
    /// `--baseline-exe PATH`: the bench_e2e build whose workers run the `NAME@base` producers.
    pub(crate) baseline_exe: Option<std::path::PathBuf>,
    /// `--defaults`: every producer at its shipped defaults (the README's defaults tables).
    pub(crate) defaults: bool,
    /// `--partitions N`, `--topics N`: the topics of every run (one `bench` topic of 12
    /// partitions unless they say; N topics are `bench-0` .. `bench-(N-1)`, N partitions each).
    pub(crate) topics: TopicSpec,
    /// `--instances N`: producers per process.
    pub(crate) instances: usize,
    /// `--scale`: the scale sweep instead of the workloads (see [`crate::scale`]).
    pub(crate) scale: bool,
    /// `--scale-points a,b,...`: the sweep's points (all unless it says).
    pub(crate) scale_points: Vec<String>,
    /// `--plot PATH`: the sweep's SVG plot.
    pub(crate) plot: Option<std::path::PathBuf>,
    /// `--saturation`: the queue-delay limit on and off, unthrottled, and the latency at half
    /// the peak, instead of the workloads (see [`crate::saturation`]).
    pub(crate) saturation: bool,
}

impl Plan {
    /// The name in the README markers of `broker`'s tables: `mock`, `kafka`,
    /// `kafka-defaults` (with `--defaults`), `scale` (with `--scale`), `saturation-mock`,
    /// `saturation-kafka` (with `--saturation`).
    pub(crate) fn marker(&self, broker: Broker) -> String {
        marker(broker, self.mode())
    }

    /// What this invocation runs instead of the workloads, if anything.
    fn mode(&self) -> Mode {
        mode(self.scale, self.saturation, self.defaults)
    }
}

/// What an invocation runs, as far as its README markers go.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Workloads,
    Defaults,
    Scale,
    Saturation,
}

/// The mode of the `--scale`, `--saturation` and `--defaults` switches (at most one of the
/// first two, neither with `--defaults`: checked in [`plan`]).
fn mode(scale: bool, saturation: bool, defaults: bool) -> Mode {
    match (scale, saturation, defaults) {
        (true, _, _) => Mode::Scale,
        (false, true, _) => Mode::Saturation,
        (false, false, true) => Mode::Defaults,
        (false, false, false) => Mode::Workloads,
    }
}

/// See [`Plan::marker`].
fn marker(broker: Broker, mode: Mode) -> String {
    match mode {
        Mode::Scale => "scale".to_string(),
        Mode::Saturation => format!("saturation-{}", broker.name()),
        Mode::Defaults => format!("{}-defaults", broker.name()),
        Mode::Workloads => broker.name().to_string(),
    }
}

pub(crate) fn usage() -> String {
    format!(
        "usage: bench_e2e [--quick] [--runs N] [--records N] [--batch-size BYTES]\n\
         \x20                [--broker mock|kafka|both] [--rate RECORDS_PER_S] [--readme PATH]\n\
         \x20                [--buffer-memory MIB] [--value-bytes N] [--mock-rtt-ms N]\n\
         \x20                [--baseline-exe PATH (then NAME@base producers)]\n\
         \x20                (NAME+qdN: our producer NAME with queue.delay.target.ms N)\n\
         \x20                (NAME+growN: our producer NAME with batch.grow.max.bytes N)\n\
         \x20                [--defaults] [--partitions N] [--topics N] [--instances N]\n\
         \x20                [--scale [--scale-points {}] [--plot PATH.svg]]\n\
         \x20                [--saturation (the queue-delay limit on and off, unthrottled, and\n\
         \x20                 the p99 at half the peak rate; with --broker, --runs, --records,\n\
         \x20                 --producers, --readme, --batch-size, --buffer-memory, --mock-rtt-ms)]\n\
         \x20                [--workloads {}]\n\
         \x20                [--producers {}]\n\
         \x20                (also: {})",
        crate::scale::POINTS.join(","),
        ALL_WORKLOADS.join(","),
        ALL_PRODUCERS.join(","),
        OTHER_PRODUCERS.join(",")
    )
}

/// The coordinator's flags, checked before anything runs.
pub(crate) fn plan(args: &[String]) -> Result<Plan, Error> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if VALUE_FLAGS.contains(&a) {
            i += 2;
            continue;
        }
        if !SWITCHES.contains(&a) {
            return Err(format!("unknown argument {a:?}\n{}", usage()).into());
        }
        i += 1;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let runs: usize = flag(args, "--runs")?.unwrap_or(if quick { 1 } else { 3 });
    let records: u64 = flag(args, "--records")?.unwrap_or(if quick { 100_000 } else { 1_000_000 });
    if runs == 0 || records == 0 {
        return Err("--runs and --records must be at least 1".into());
    }
    let batch_size: Option<usize> = flag(args, "--batch-size")?;
    let brokers = match flag::<String>(args, "--broker")?
        .as_deref()
        .unwrap_or("mock")
    {
        "mock" => vec![Broker::Mock],
        "kafka" => vec![Broker::Kafka],
        "both" => vec![Broker::Mock, Broker::Kafka],
        other => return Err(format!("unknown --broker {other:?} (mock, kafka or both)").into()),
    };
    let list = |name: &str, all: &[&str]| -> Result<Vec<String>, Error> {
        Ok(flag::<String>(args, name)?.map_or_else(
            || all.iter().map(|s| s.to_string()).collect(),
            |s| s.split(',').map(str::to_string).collect(),
        ))
    };
    let workloads = list("--workloads", ALL_WORKLOADS)?;
    let scale = args.iter().any(|a| a == "--scale");
    let saturation = args.iter().any(|a| a == "--saturation");
    let producers = list(
        "--producers",
        if scale {
            crate::scale::PRODUCERS
        } else if saturation {
            crate::saturation::PRODUCERS
        } else {
            ALL_PRODUCERS
        },
    )?;
    if saturation {
        saturation_flags(args, &producers)?;
    }
    for w in &workloads {
        workload(w)?;
    }
    let baseline_exe = flag::<String>(args, "--baseline-exe")?.map(std::path::PathBuf::from);
    if let Some(exe) = &baseline_exe {
        if !exe.is_file() {
            return Err(format!("--baseline-exe {}: not a file", exe.display()).into());
        }
    }
    for p in &producers {
        let (p, grow) = grow_suffix(p);
        let (p, queue_delay) = queue_delay_suffix(p);
        let ours = p.strip_suffix("@base").unwrap_or(p);
        // Our drivers only: librdkafka's worker and the peers have no such setting.
        let our_driver = ours.starts_with("tokio") || ours.starts_with("mio");
        if queue_delay.is_some() && !(our_driver && ALL_PRODUCERS.contains(&ours)) {
            return Err(format!(
                "{p:?}: NAME+qdN needs one of our producers (tokio*, mio*) as NAME"
            )
            .into());
        }
        if grow.is_some() && !(our_driver && ALL_PRODUCERS.contains(&ours)) {
            return Err(format!(
                "{p:?}: NAME+growN needs one of our producers (tokio*, mio*) as NAME"
            )
            .into());
        }
        if let Some(ours) = p.strip_suffix("@base") {
            if baseline_exe.is_none() || peer(ours).is_some() || !ALL_PRODUCERS.contains(&ours) {
                return Err(format!(
                    "{p:?}: NAME@base needs --baseline-exe and one of our producers as NAME"
                )
                .into());
            }
            continue;
        }
        if peer(p).is_none() && !ALL_PRODUCERS.contains(&p) && !OTHER_PRODUCERS.contains(&p) {
            return Err(format!("unknown producer {p:?}\n{}", usage()).into());
        }
    }
    let rate: Option<f64> = flag(args, "--rate")?;
    if rate.is_some_and(|r| !(r >= 1.0 && r.is_finite())) {
        return Err("--rate must be at least 1 record per second".into());
    }
    // The sweep takes its latency rate from each point's own runs, `--saturation` from each
    // row's.
    let latency_at = workloads
        .iter()
        .position(|w| w == "latency")
        .filter(|_| !scale && !saturation);
    if let Some(at) = latency_at {
        let measured = workloads[..at].iter().any(|w| w == "null100")
            && producers.iter().any(|p| p == BASELINE);
        if rate.is_none() && !measured {
            return Err(format!(
                "the latency workload runs at half of {BASELINE}'s null100 rate: give --rate N, \
                 or run null100 before latency with {BASELINE} among the producers"
            )
            .into());
        }
    }
    let buffer_mib: Option<usize> = flag(args, "--buffer-memory")?;
    // Our producers refuse a buffer smaller than one request (max.request.size, 1 MiB).
    if buffer_mib.is_some_and(|m| !(1..=64 << 10).contains(&m)) {
        return Err("--buffer-memory must be 1 to 65536 MiB".into());
    }
    let value_bytes: Option<usize> = flag(args, "--value-bytes")?;
    // A record must fit in one request (max.request.size, 1 MiB, with its overheads).
    if value_bytes.is_some_and(|v| !(1..=1_000_000).contains(&v)) {
        return Err("--value-bytes must be 1 to 1000000".into());
    }
    let mock_rtt_ms: Option<u64> = flag(args, "--mock-rtt-ms")?;
    if mock_rtt_ms.is_some_and(|ms| ms > 10_000) {
        return Err("--mock-rtt-ms must be at most 10000".into());
    }
    let defaults = args.iter().any(|a| a == "--defaults");
    let mut topics = TopicSpec::bench();
    if let Some(n) = flag::<i32>(args, "--partitions")? {
        if !(1..=100_000).contains(&n) {
            return Err("--partitions must be 1 to 100000".into());
        }
        topics.partitions = n;
    }
    if let Some(n) = flag::<usize>(args, "--topics")? {
        if !(1..=10_000).contains(&n) {
            return Err("--topics must be 1 to 10000".into());
        }
        topics.count = n;
    }
    let instances = flag::<usize>(args, "--instances")?.unwrap_or(1);
    if !(1..=64).contains(&instances) {
        return Err("--instances must be 1 to 64".into());
    }
    if instances > 1 && workloads.iter().any(|w| w == "latency") {
        return Err("--instances has no open-loop sender: leave out the latency workload".into());
    }
    let scale_points: Vec<String> = match flag::<String>(args, "--scale-points")? {
        None => crate::scale::POINTS.iter().map(|p| p.to_string()).collect(),
        Some(list) => list.split(',').map(str::to_string).collect(),
    };
    for p in &scale_points {
        crate::scale::point(p)?;
    }
    let plot = flag::<String>(args, "--plot")?.map(std::path::PathBuf::from);
    if scale && (defaults || instances > 1 || topics != TopicSpec::bench()) {
        return Err(
            "--scale sets the axes itself: no --defaults, --partitions, --topics or \
                    --instances with it"
                .into(),
        );
    }
    // The sweep runs on Apache Kafka only.
    let brokers = if scale { vec![Broker::Kafka] } else { brokers };
    let readme = flag::<String>(args, "--readme")?.map(std::path::PathBuf::from);
    if let Some(path) = &readme {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--readme {}: {e}", path.display()))?;
        for &b in &brokers {
            replace_marked(&text, &marker(b, mode(scale, saturation, defaults)), "")
                .map_err(|e| format!("--readme {}: {e}", path.display()))?;
        }
    }
    Ok(Plan {
        runs,
        records,
        batch_size,
        brokers,
        workloads,
        producers,
        rate,
        readme,
        buffer_mib,
        value_bytes,
        mock_rtt_ms,
        baseline_exe,
        defaults,
        topics,
        instances,
        scale,
        scale_points,
        plot,
        saturation,
    })
}

/// The flags `--saturation` takes no other of (it sets the workloads, rates, topics and
/// settings itself), and its producers: ours, without a suffix (it adds `+qd0` itself).
fn saturation_flags(args: &[String], producers: &[String]) -> Result<(), Error> {
    const NOT_WITH: &[&str] = &[
        "--scale",
        "--defaults",
        "--workloads",
        "--rate",
        "--value-bytes",
        "--baseline-exe",
        "--partitions",
        "--topics",
        "--instances",
        "--plot",
        "--scale-points",
    ];
    if let Some(f) = args.iter().find(|a| NOT_WITH.contains(&a.as_str())) {
        return Err(format!(
            "--saturation sets the workloads and settings itself: no {f} with it (it takes \
             --broker, --runs, --records, --producers, --readme, --batch-size, --buffer-memory, \
             --mock-rtt-ms)"
        )
        .into());
    }
    for p in producers {
        let ours = p.starts_with("tokio") || p.starts_with("mio");
        if !(ours && ALL_PRODUCERS.contains(&p.as_str())) {
            return Err(format!(
                "--saturation: {p:?} is not one of our producers (tokio*, mio*, without a \
                 +qdN or @base suffix: the mode runs each with the queue-delay limit on and off)"
            )
            .into());
        }
    }
    Ok(())
}

/// `NAME+growN`: our producer NAME with `batch.grow.max.bytes` N (`Some(N)`; `+grow0`: batches
/// never grow past `batch.size`); any other name as it is (`None`). The outermost suffix
/// (`mio-idem+qd50+grow0`). The coordinator runs NAME's worker with `--batch-grow-max N`.
pub(crate) fn grow_suffix(producer: &str) -> (&str, Option<usize>) {
    numeric_suffix(producer, "+grow")
}

/// `NAME+qdN`: our producer NAME with `queue.delay.target.ms` N (`Some(N)`); any other name
/// as it is (`None`). The coordinator runs NAME's worker with `--queue-delay-ms N`.
pub(crate) fn queue_delay_suffix(producer: &str) -> (&str, Option<u64>) {
    numeric_suffix(producer, "+qd")
}

/// `NAME{marker}N` split into NAME and N; a name without the marker, or whose N does not
/// parse, as it is.
fn numeric_suffix<'a, N: std::str::FromStr>(
    producer: &'a str,
    marker: &str,
) -> (&'a str, Option<N>) {
    match producer.rsplit_once(marker) {
        Some((name, n)) => match n.parse() {
            Ok(n) => (name, Some(n)),
            Err(_) => (producer, None),
        },
        None => (producer, None),
    }
}
