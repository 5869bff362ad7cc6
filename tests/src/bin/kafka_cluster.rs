//! A local Apache Kafka (the version pinned in tests/kafka/pom.xml, fetched by Maven on first
//! use) for the examples and for trying the producer by hand.
//!
//! ```text
//! kafka_cluster [--nodes 1|3] [--topic name:partitions ...] [--proxy] [--forever]
//! ```
//!
//! Starts a KRaft cluster of `--nodes` combined nodes (default 3) on 127.0.0.1, creates the
//! topics (default `quickstart:48`; other topics are auto-created with 6 partitions), prints
//! `BOOTSTRAP host:port,...` and `PIDS pid ...` (the JVMs) to stdout, then runs until its stdin
//! reaches end-of-file (Ctrl-D, or the parent closed the pipe) or it is killed (Ctrl-C):
//! either way every JVM dies with it. `--proxy` puts the test suite's fault proxy in front of
//! each broker (the bootstrap list then names the proxies). Exit status 2 on bad arguments, 1
//! if the cluster cannot start (with the reason: Java or Maven missing, a broker's log).

use std::io::{Read, Write};
use std::process::ExitCode;

use producer_tests::kafka::{ClusterSpec, KafkaCluster};

const USAGE: &str =
    "usage: kafka_cluster [--nodes 1|3] [--topic name:partitions ...] [--proxy] [--forever]";

struct Args {
    nodes: usize,
    topics: Vec<(String, i32)>,
    proxy: bool,
    forever: bool,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        nodes: 3,
        topics: Vec::new(),
        proxy: false,
        forever: false,
    };
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--nodes" => {
                let v = value("--nodes")?;
                args.nodes = match v.as_str() {
                    "1" => 1,
                    "3" => 3,
                    _ => return Err(format!("--nodes is 1 or 3, got {v:?}")),
                };
            }
            "--topic" => {
                let v = value("--topic")?;
                let (name, parts) = v
                    .rsplit_once(':')
                    .ok_or(format!("--topic wants name:partitions, got {v:?}"))?;
                let parts: i32 = parts
                    .parse()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or(format!("bad partition count in {v:?}"))?;
                if name.is_empty() {
                    return Err(format!("empty topic name in {v:?}"));
                }
                args.topics.push((name.to_string(), parts));
            }
            "--proxy" => args.proxy = true,
            "--forever" => args.forever = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.topics.is_empty() {
        args.topics.push(("quickstart".into(), 48));
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("kafka_cluster: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut spec = if args.nodes == 1 {
        ClusterSpec::single()
    } else {
        ClusterSpec::three()
    }
    .name("cli")
    // Benchmarks and trying the producer by hand: a deployment's JVM, not the test tier's.
    .server_jvm()
    .broker_config("auto.create.topics.enable", "true")
    .broker_config("num.partitions", "6");
    if !args.proxy {
        spec = spec.without_proxy();
    }
    let cluster = match KafkaCluster::start(spec) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kafka_cluster: {e}");
            return ExitCode::from(1);
        }
    };
    let rf = args.nodes.min(3) as i16;
    for (name, parts) in &args.topics {
        if let Err(e) = cluster.create_topic(name, *parts, rf, &[]) {
            eprintln!("kafka_cluster: create topic {name}: {e}");
            return ExitCode::from(1);
        }
    }
    eprintln!(
        "kafka_cluster: Kafka {} with {} node(s) started in {:.1} s; topics {:?}; data and logs in {}",
        producer_tests::kafka::dist::kafka_version(),
        args.nodes,
        cluster.startup_time().as_secs_f64(),
        args.topics,
        cluster.dir().display()
    );
    let pids: Vec<String> = cluster.pids().iter().map(u32::to_string).collect();
    let mut out = std::io::stdout();
    let printed = writeln!(out, "BOOTSTRAP {}", cluster.bootstrap_servers())
        .and_then(|_| writeln!(out, "PIDS {}", pids.join(" ")))
        .and_then(|_| out.flush());
    if printed.is_err() {
        return ExitCode::from(1);
    }
    if args.forever {
        loop {
            std::thread::park();
        }
    }
    // Run until stdin closes; the cluster (and every JVM) goes with `cluster`.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(cluster);
    ExitCode::SUCCESS
}
