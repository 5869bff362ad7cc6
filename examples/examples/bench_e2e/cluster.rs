//! The clusters a run produces to: librdkafka's mock (`mock` mode) or a single-node Apache
//! Kafka (`kafka` mode), each in a process of its own, and the CPU their process tree used.

use crate::payloads::topic_names;
use crate::{arg, Error, BROKERS, PARTITIONS, TOPIC};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The topics a cluster process creates: `count` topics named after `base`
/// ([`topic_names`]), each of `partitions` partitions with the topic `configs`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TopicSpec {
    pub(crate) base: String,
    pub(crate) count: usize,
    pub(crate) partitions: i32,
    pub(crate) configs: Vec<(String, String)>,
}

impl TopicSpec {
    /// The bench's topic: `bench`, 12 partitions.
    pub(crate) fn bench() -> TopicSpec {
        TopicSpec {
            base: TOPIC.to_string(),
            count: 1,
            partitions: PARTITIONS,
            configs: Vec::new(),
        }
    }

    /// The spec as the words of a cluster process's command line (and `create` line).
    fn words(&self) -> Vec<String> {
        let mut w = vec![
            "--topic".to_string(),
            self.base.clone(),
            "--topics".to_string(),
            self.count.to_string(),
            "--partitions".to_string(),
            self.partitions.to_string(),
        ];
        if !self.configs.is_empty() {
            w.push("--topic-config".to_string());
            w.push(
                self.configs
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        w
    }

    /// The spec from `words` (a cluster process's arguments), the bench's where absent.
    fn parse(words: &[String]) -> Result<TopicSpec, Error> {
        let bench = TopicSpec::bench();
        let configs = match arg(words, "--topic-config") {
            None => Vec::new(),
            Some(c) => c
                .split(',')
                .map(|kv| {
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .ok_or_else(|| format!("topic config {kv:?} is not k=v"))
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(TopicSpec {
            base: arg(words, "--topic").unwrap_or(&bench.base).to_string(),
            count: arg(words, "--topics")
                .map(str::parse)
                .transpose()?
                .unwrap_or(1),
            partitions: arg(words, "--partitions")
                .map(str::parse)
                .transpose()?
                .unwrap_or(PARTITIONS),
            configs,
        })
    }
}

/// Starts the mock cluster with the topics of the [`TopicSpec`] arguments (with `--rtt-ms N`,
/// every broker answering N ms late), prints `BOOTSTRAP host:port,...` and runs until stdin
/// closes.
pub(crate) fn mock_main(args: &[String]) -> Result<(), Error> {
    let spec = TopicSpec::parse(args)?;
    let names = topic_names(&spec.base, spec.count);
    let topics: Vec<(&str, i32)> = names
        .iter()
        .map(|n| (n.as_str(), spec.partitions))
        .collect();
    let mock = producer_tests::MockKafka::new(BROKERS, &topics)?;
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

/// A cluster process (`mock` or `kafka` mode) of the coordinator; stopped when dropped.
pub(crate) struct Mock {
    pub(crate) child: Child,
    pub(crate) bootstrap: String,
    /// The process's stdout after its `BOOTSTRAP` line: the answers to `create` lines.
    replies: BufReader<ChildStdout>,
}

impl Mock {
    /// Starts a cluster with the topics of `topics` (none if its count is 0); Kafka with a
    /// heap of `heap_mb` MiB if given (the test tier's 384 MiB otherwise).
    pub(crate) fn start(
        broker: Broker,
        rtt_ms: Option<u64>,
        topics: &TopicSpec,
        heap_mb: Option<u32>,
    ) -> Result<Mock, Error> {
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
            .args(topics.words())
            .args(
                heap_mb
                    .map(|mb| ["--heap-mb".to_string(), mb.to_string()])
                    .into_iter()
                    .flatten(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("mock has no stdout")?;
        let mut replies = BufReader::new(stdout);
        let mut line = String::new();
        replies.read_line(&mut line)?;
        let bootstrap = line
            .trim()
            .strip_prefix("BOOTSTRAP ")
            .ok_or_else(|| format!("mock cluster said {line:?}"))?
            .to_string();
        Ok(Mock {
            child,
            bootstrap,
            replies,
        })
    }

    /// Creates the topics of `topics` in a running `kafka`-mode cluster (the scale sweep's
    /// points, each created once and reused by every producer and run). Returns when the
    /// cluster has created them, or its error.
    pub(crate) fn create_topics(&mut self, topics: &TopicSpec) -> Result<(), Error> {
        let stdin = self.child.stdin.as_mut().ok_or("cluster has no stdin")?;
        writeln!(stdin, "create {}", topics.words().join(" "))?;
        stdin.flush()?;
        let mut line = String::new();
        self.replies.read_line(&mut line)?;
        match line.trim() {
            "OK" => Ok(()),
            other => Err(format!(
                "creating {} topic(s) {}: {other}",
                topics.count, topics.base
            )
            .into()),
        }
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

/// `kafka` mode: starts a single-node Apache Kafka (the open-file limit raised to its hard
/// limit first, for the 10,000-partition point; `--heap-mb N` for its heap), creates the topics
/// of the [`TopicSpec`] arguments (the bench topic by default; none with `--topics 0`), prints
/// `BOOTSTRAP host:port` and then serves `create SPEC` lines on stdin (each answered `OK` or
/// `ERR reason` on stdout) until stdin closes.
pub(crate) fn kafka_main(args: &[String]) -> Result<(), Error> {
    use producer_tests::kafka::cluster::{ClusterSpec, KafkaCluster};
    let nofile = raise_open_files();
    // A deployment's JVM, not the test tier's (whose client compiler alone caps the node).
    let mut spec = ClusterSpec::single().server_jvm();
    if let Some(mb) = arg(args, "--heap-mb") {
        spec = spec.heap_mb(mb.parse()?);
    }
    let cluster = KafkaCluster::start(spec).map_err(|e| e.to_string())?;
    eprintln!("bench_e2e: Kafka started (open-file limit {nofile})");
    let create = |spec: &TopicSpec| -> Result<(), String> {
        let configs: Vec<(&str, &str)> = spec
            .configs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        for name in topic_names(&spec.base, spec.count) {
            // A KRaft controller refuses one operation of more than 10,000 records (a topic
            // record and one per partition): a larger topic is created in steps.
            let first = spec.partitions.min(PARTITIONS_PER_STEP);
            cluster.ctl().create_topic(&name, first, 1, &configs)?;
            let mut total = first;
            while total < spec.partitions {
                total = (total + PARTITIONS_PER_STEP).min(spec.partitions);
                cluster.ctl().grow_topic(&name, total)?;
            }
            // Every partition led and served before a producer starts: a run should not pay
            // for (or retry through) the broker taking up new partitions.
            cluster
                .wait_led(&[name.as_str()], TOPIC_READY)
                .and_then(|()| cluster.wait_served(&name, TOPIC_READY))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    let initial = TopicSpec::parse(args)?;
    if initial.count > 0 {
        create(&initial)?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "BOOTSTRAP {}", cluster.bootstrap_servers())?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        let reply = match words.first().map(String::as_str) {
            Some("create") => match TopicSpec::parse(&words[1..]) {
                Ok(spec) => create(&spec).map_or_else(|e| format!("ERR {e}"), |()| "OK".into()),
                Err(e) => format!("ERR {e}"),
            },
            _ => format!("ERR unknown command {line:?}"),
        };
        writeln!(out, "{}", reply.replace('\n', " "))?;
        out.flush()?;
    }
    drop(cluster);
    Ok(())
}

/// How long a new topic's partitions may take to be led and served.
const TOPIC_READY: Duration = Duration::from_secs(300);

/// The most partitions one topic operation creates (Kafka's controller takes at most 10,000
/// records per operation).
const PARTITIONS_PER_STEP: i32 = 5_000;

/// Raises this process's soft open-file limit to its hard limit (Kafka's JVM, started from it,
/// inherits it: a partition holds a log segment and two index files open). Returns the limit.
fn raise_open_files() -> u64 {
    // SAFETY: getrlimit/setrlimit read and write the struct we pass.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur as u64
    }
}

impl Broker {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Broker::Mock => "mock",
            Broker::Kafka => "kafka",
        }
    }
}
