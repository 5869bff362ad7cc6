//! A librdkafka mock cluster in its own process, for benchmarks.
//!
//! ```text
//! mock_cluster --brokers 3 --topic bench:12 [--topic name:partitions ...] [--rtt-ms N] [--forever]
//! ```
//!
//! Starts the cluster, creates the topics, prints exactly one line
//! `BOOTSTRAP host:port,host:port,...` to stdout (flushed), then runs until its stdin reaches
//! end-of-file (the parent closed the pipe or exited) or it is killed. With `--forever` it ignores
//! stdin and runs until killed. Exit status 2 on bad arguments, 1 if the cluster cannot start.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use producer_tests::MockKafka;

const USAGE: &str = "usage: mock_cluster --brokers N --topic name:partitions [--topic ...] \
                     [--rtt-ms N] [--forever]";

struct Args {
    brokers: i32,
    topics: Vec<(String, i32)>,
    rtt_ms: Option<u64>,
    forever: bool,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        brokers: 3,
        topics: Vec::new(),
        rtt_ms: None,
        forever: false,
    };
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--brokers" => {
                let v = value("--brokers")?;
                args.brokers = v
                    .parse()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or(format!("bad --brokers {v:?}"))?;
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
            "--rtt-ms" => {
                let v = value("--rtt-ms")?;
                args.rtt_ms = Some(v.parse().map_err(|_| format!("bad --rtt-ms {v:?}"))?);
            }
            "--forever" => args.forever = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("mock_cluster: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let topics: Vec<(&str, i32)> = args.topics.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    let mock = match MockKafka::new(args.brokers, &topics) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("mock_cluster: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(ms) = args.rtt_ms {
        if let Err(e) = mock.set_rtt(-1, Duration::from_millis(ms)) {
            eprintln!("mock_cluster: {e}");
            return ExitCode::from(1);
        }
    }
    {
        let mut out = std::io::stdout().lock();
        if writeln!(out, "BOOTSTRAP {}", mock.bootstrap_servers())
            .and_then(|_| out.flush())
            .is_err()
        {
            return ExitCode::from(1);
        }
    }
    if args.forever {
        loop {
            std::thread::park();
        }
    }
    // Run until stdin closes: read and discard whatever comes.
    let mut buf = [0u8; 4096];
    let mut stdin = std::io::stdin().lock();
    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    drop(mock);
    ExitCode::SUCCESS
}
