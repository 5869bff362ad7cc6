//! The clusters a run produces to: librdkafka's mock (`mock` mode) or a single-node Apache
//! Kafka (`kafka` mode), each in a process of its own, and the CPU their process tree used.

use crate::{arg, Error, BROKERS, PARTITIONS, TOPIC};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts the mock cluster (with `--rtt-ms N`, every broker answering N ms late), prints
/// `BOOTSTRAP host:port,...` and runs until stdin closes.
pub(crate) fn mock_main(args: &[String]) -> Result<(), Error> {
    let mock = producer_tests::MockKafka::new(BROKERS, &[(TOPIC, PARTITIONS)])?;
    if let Some(ms) = arg(args, "--rtt-ms") {
        mock.set_rtt(-1, Duration::from_millis(ms.parse()?))?;
    }
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

pub(crate) struct Mock {
    pub(crate) child: Child,
    pub(crate) bootstrap: String,
}

impl Mock {
    pub(crate) fn start(broker: Broker, rtt_ms: Option<u64>) -> Result<Mock, Error> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg(match broker {
                Broker::Mock => "mock",
                Broker::Kafka => "kafka",
            })
            .args(
                rtt_ms
                    .map(|ms| ["--rtt-ms".to_string(), ms.to_string()])
                    .into_iter()
                    .flatten(),
            )
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
        // Closing stdin lets the cluster process shut down on its own (Kafka's cluster then
        // stops its broker and removes its directory); killed if it takes more than 20 s.
        drop(self.child.stdin.take());
        let started = Instant::now();
        while matches!(self.child.try_wait(), Ok(None))
            && started.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU seconds (user and system) used so far by process `pid` and every process below it,
/// from `/proc` (0 for what cannot be read).
pub(crate) fn tree_cpu_secs(pid: u32) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut total = 0.0;
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            // Fields after the command name (which may hold spaces) closed by ')'.
            if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
                for i in [11, 12] {
                    total += f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / ticks;
                }
            }
        }
        // Each thread lists the children it started (Kafka's JVM is started from one that is
        // not the main thread).
        let tasks = std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten();
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                todo.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    total
}

/// Where the brokers of one run come from (`--broker`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Broker {
    /// librdkafka's mock cluster, a fresh process per run.
    Mock,
    /// A single-node Apache Kafka from the test tier, a fresh process per run.
    Kafka,
}

/// `kafka` mode: starts a single-node Apache Kafka, creates the bench topic, prints
/// `BOOTSTRAP host:port` and runs until stdin closes.
pub(crate) fn kafka_main() -> Result<(), Error> {
    use producer_tests::kafka::cluster::{ClusterSpec, KafkaCluster};
    let cluster = KafkaCluster::start(ClusterSpec::single()).map_err(|e| e.to_string())?;
    cluster.ctl().create_topic(TOPIC, PARTITIONS, 1, &[])?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "BOOTSTRAP {}", cluster.bootstrap_servers())?;
        out.flush()?;
    }
    let mut buf = [0u8; 256];
    let mut stdin = std::io::stdin().lock();
    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    drop(cluster);
    Ok(())
}

impl Broker {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Broker::Mock => "mock",
            Broker::Kafka => "kafka",
        }
    }
}
