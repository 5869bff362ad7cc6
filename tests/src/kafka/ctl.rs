//! Admin operations and the Java read-back, through KafkaCtl (`tests/kafka/java/KafkaCtl.java`):
//! one JVM per cluster, started with the cluster, connected to the brokers' internal listeners
//! (never through the fault proxies), answering one line per command. An admin call costs a
//! round trip to the controller, not a JVM start.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, ChildStdout};
use std::sync::Mutex;

use rdkafka::Timestamp;

use super::dist::Dist;
use super::process::{log_tail, Jvm, Spawner};
use crate::readback::Consumed;

/// One partition as the admin API describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Partition index.
    pub partition: i32,
    /// Leader node id (-1: none).
    pub leader: i32,
    /// Replicas, preferred first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
}

/// What [`Ctl::java_produce`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaProduced {
    /// The producer's KIP-714 client instance id (`KafkaProducer::clientInstanceId`), `None`
    /// when it has none (`enable.metrics.push=false`, or no broker offers telemetry).
    pub instance_id: Option<String>,
    /// Records acknowledged.
    pub acked: u64,
    /// Records failed.
    pub failed: u64,
}

struct Pipes {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The running KafkaCtl of a cluster.
pub struct Ctl {
    jvm: Mutex<Jvm>,
    pipes: Mutex<Pipes>,
}

/// Starts KafkaCtl against `bootstrap` and waits for its `ready` line.
pub(crate) fn start(
    spawner: &Spawner,
    dist: &Dist,
    bootstrap: &str,
    log: &Path,
) -> Result<Ctl, String> {
    let args = vec![
        "-Xmx256m".to_string(),
        "-XX:+UseSerialGC".to_string(),
        "-XX:TieredStopAtLevel=1".to_string(),
        format!("-Dlog4j2.configurationFile={}", dist.log4j.display()),
        "-cp".to_string(),
        dist.ctl_classpath(),
        "KafkaCtl".to_string(),
        bootstrap.to_string(),
    ];
    let mut jvm = Jvm::start(spawner, "KafkaCtl", &args, log, true)
        .map_err(|e| format!("start KafkaCtl: {e}"))?;
    let child = jvm.child_mut();
    let stdin = child.stdin.take().expect("piped stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .map_err(|e| format!("read KafkaCtl: {e}"))?;
    if line.trim() != "ready" {
        return Err(format!(
            "KafkaCtl did not start (said {line:?}); its log:\n{}",
            log_tail(log, 40)
        ));
    }
    Ok(Ctl {
        jvm: Mutex::new(jvm),
        pipes: Mutex::new(Pipes { stdin, stdout }),
    })
}

fn unhex(s: &str) -> Result<Option<Vec<u8>>, String> {
    match s {
        "-" => Ok(None),
        "_" => Ok(Some(Vec::new())),
        _ => (0..s.len())
            .step_by(2)
            .map(|i| {
                u8::from_str_radix(s.get(i..i + 2).ok_or("odd hex")?, 16).map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<u8>, String>>()
            .map(Some),
    }
}

fn parse_record(topic: &str, line: &str) -> Result<Consumed, String> {
    let f: Vec<&str> = line.split(' ').collect();
    if f.len() != 8 || f[0] != "rec" {
        return Err(format!("bad record line {line:?}"));
    }
    let num = |s: &str| s.parse::<i64>().map_err(|e| format!("{s:?}: {e}"));
    let ts = num(f[3])?;
    let timestamp = match f[4] {
        "0" => Timestamp::CreateTime(ts),
        "1" => Timestamp::LogAppendTime(ts),
        _ => Timestamp::NotAvailable,
    };
    let mut headers = Vec::new();
    if f[7] != "-" {
        for h in f[7].split(',') {
            let (k, v) = h
                .split_once('=')
                .ok_or_else(|| format!("bad header {h:?}"))?;
            let key =
                String::from_utf8(unhex(k)?.unwrap_or_default()).map_err(|e| e.to_string())?;
            headers.push((key, unhex(v)?));
        }
    }
    Ok(Consumed {
        topic: topic.to_string(),
        partition: num(f[1])? as i32,
        offset: num(f[2])?,
        key: unhex(f[5])?,
        value: unhex(f[6])?,
        headers,
        timestamp,
    })
}

impl Ctl {
    /// Sends one command line; returns the text after `ok`, or the error (`err ...`, or the
    /// JVM gone with its log). `on_record` receives the `rec` lines that come first.
    fn call(
        &self,
        command: &str,
        mut on_record: impl FnMut(&str) -> Result<(), String>,
    ) -> Result<String, String> {
        let mut p = self.pipes.lock().unwrap_or_else(|e| e.into_inner());
        let gone = |what: &str, e: String| {
            let jvm = self.jvm.lock().unwrap_or_else(|e| e.into_inner());
            format!("KafkaCtl {what}: {e}; its log:\n{}", log_tail(&jvm.log, 40))
        };
        writeln!(p.stdin, "{command}")
            .and_then(|_| p.stdin.flush())
            .map_err(|e| gone("write", e.to_string()))?;
        let mut line = String::new();
        loop {
            line.clear();
            let n = p
                .stdout
                .read_line(&mut line)
                .map_err(|e| gone("read", e.to_string()))?;
            if n == 0 {
                return Err(gone("read", "it exited".into()));
            }
            let l = line.trim_end();
            if l.starts_with("rec ") {
                on_record(l)?;
            } else if let Some(rest) = l.strip_prefix("ok") {
                return Ok(rest.trim().to_string());
            } else if let Some(rest) = l.strip_prefix("err ") {
                return Err(format!("{command}: {rest}"));
            } else {
                return Err(format!("{command}: unexpected answer {l:?}"));
            }
        }
    }

    /// Creates `topic` with `partitions` partitions, replication factor `rf` and topic
    /// `configs`. Returns once the controller accepted it (brokers may learn of it a moment
    /// later: the cluster's `create_topic` waits for that).
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        rf: i16,
        configs: &[(&str, &str)],
    ) -> Result<(), String> {
        let mut cmd = format!("create {topic} {partitions} {rf}");
        for (k, v) in configs {
            cmd.push_str(&format!(" {k}={v}"));
        }
        self.call(&cmd, |_| Ok(())).map(drop)
    }

    /// Raises `topic`'s partition count to `total` (CreatePartitions). A KRaft controller
    /// takes at most 10,000 records in one operation, so a topic of more partitions is created
    /// smaller and grown in steps.
    pub fn grow_topic(&self, topic: &str, total: i32) -> Result<(), String> {
        self.call(&format!("grow {topic} {total}"), |_| Ok(()))
            .map(drop)
    }

    /// Sets topic configs (an empty value deletes the setting, back to the broker default).
    pub fn alter_topic_config(&self, topic: &str, configs: &[(&str, &str)]) -> Result<(), String> {
        let mut cmd = format!("alter {topic}");
        for (k, v) in configs {
            cmd.push_str(&format!(" {k}={v}"));
        }
        self.call(&cmd, |_| Ok(())).map(drop)
    }

    /// Denies `principal` (`User:ANONYMOUS` for a plaintext client) WRITE on `topic` from any
    /// host (an ACL; the cluster needs an authorizer), and waits until the ACL is listed.
    pub fn deny_write(&self, topic: &str, principal: &str) -> Result<(), String> {
        self.call(&format!("deny-write {topic} {principal}"), |_| Ok(()))
            .map(drop)
    }

    /// Deletes `topic` and waits until the controller no longer lists it.
    pub fn delete_topic(&self, topic: &str) -> Result<(), String> {
        self.call(&format!("delete {topic}"), |_| Ok(())).map(drop)
    }

    /// The partitions of `topic` as the admin API describes them.
    pub fn describe(&self, topic: &str) -> Result<Vec<PartitionInfo>, String> {
        let s = self.call(&format!("describe {topic}"), |_| Ok(()))?;
        let ids = |s: &str| -> Result<Vec<i32>, String> {
            s.split(',')
                .filter(|x| !x.is_empty())
                .map(|x| x.parse().map_err(|e| format!("{x:?}: {e}")))
                .collect()
        };
        s.split(' ')
            .filter(|x| !x.is_empty())
            .map(|p| {
                let f: Vec<&str> = p.split('/').collect();
                if f.len() != 4 {
                    return Err(format!("bad partition {p:?}"));
                }
                Ok(PartitionInfo {
                    partition: f[0].parse().map_err(|e| format!("{p:?}: {e}"))?,
                    leader: f[1].parse().map_err(|e| format!("{p:?}: {e}"))?,
                    replicas: ids(f[2])?,
                    isr: ids(f[3])?,
                })
            })
            .collect()
    }

    /// Makes `broker` the leader of `topic`/`partition`: a reassignment that puts it first
    /// among the same replicas (no data moves), then a preferred-leader election. Returns the
    /// leader the admin API reports afterwards.
    pub fn move_leader(&self, topic: &str, partition: i32, broker: i32) -> Result<i32, String> {
        let s = self.call(&format!("move {topic} {partition} {broker}"), |_| Ok(()))?;
        s.parse().map_err(|e| format!("move answer {s:?}: {e}"))
    }

    /// Reads every partition of `topic` from its start to its end offset (taken first) with
    /// Kafka's Java consumer (CRCs checked), and returns the records as Java sees them, sorted
    /// by `(partition, offset)`.
    pub fn java_read_back(&self, topic: &str, partitions: i32) -> Result<Vec<Consumed>, String> {
        let mut out = Vec::new();
        let n = self.call(&format!("consume {topic} {partitions}"), |l| {
            out.push(parse_record(topic, l)?);
            Ok(())
        })?;
        if n.parse::<usize>().ok() != Some(out.len()) {
            return Err(format!(
                "KafkaCtl counted {n} records, {} parsed",
                out.len()
            ));
        }
        out.sort_by_key(|c| (c.partition, c.offset));
        Ok(out)
    }

    /// Sets the configs of KIP-714 client-metrics subscription `name` (`metrics`: a
    /// comma-separated list of name prefixes or `*`; `interval.ms`; `match`: `KEY=REGEX` pairs,
    /// comma-separated, on `client_id`, `client_software_name`, ...), as
    /// `kafka-client-metrics.sh --alter` does (an admin `incrementalAlterConfigs` on a
    /// `CLIENT_METRICS` resource). An empty value deletes that setting; deleting them all
    /// removes the subscription. Brokers learn of it from the metadata log a moment after this
    /// returns: [`super::wire::get_telemetry_subscriptions`] shows when one has.
    pub fn client_metrics(&self, name: &str, configs: &[(&str, &str)]) -> Result<(), String> {
        let mut cmd = format!("client-metrics {name}");
        for (k, v) in configs {
            cmd.push_str(&format!(" {k}={v}"));
        }
        self.call(&cmd, |_| Ok(())).map(drop)
    }

    /// Java's producer, in KafkaCtl's JVM: sends `records` records (key `k%05d`, value
    /// `v%05d` of the record's index) to `topic`, spread evenly over `over`, with the producer
    /// `configs` (Java's names), then flushes and closes it (a KIP-714 client pushes its last
    /// metrics on close, marked terminating).
    pub fn java_produce(
        &self,
        topic: &str,
        records: u32,
        over: std::time::Duration,
        configs: &[(&str, &str)],
    ) -> Result<JavaProduced, String> {
        let mut cmd = format!("produce {topic} {records} {}", over.as_millis());
        for (k, v) in configs {
            cmd.push_str(&format!(" {k}={v}"));
        }
        let s = self.call(&cmd, |_| Ok(()))?;
        let f: Vec<&str> = s.split(' ').collect();
        let num = |x: &str| {
            x.parse::<u64>()
                .map_err(|e| format!("produce answer {s:?}: {e}"))
        };
        match f.as_slice() {
            [instance, acked, failed] => Ok(JavaProduced {
                instance_id: (*instance != "-").then(|| instance.to_string()),
                acked: num(acked)?,
                failed: num(failed)?,
            }),
            _ => Err(format!("produce answer {s:?}")),
        }
    }

    /// KafkaCtl's process id.
    pub fn pid(&self) -> u32 {
        self.jvm.lock().unwrap_or_else(|e| e.into_inner()).pid()
    }

    /// Ends KafkaCtl (it is killed if it does not quit at once).
    pub(crate) fn stop(&self) {
        if let Ok(mut p) = self.pipes.lock() {
            let _ = writeln!(p.stdin, "quit");
            let _ = p.stdin.flush();
        }
        self.jvm.lock().unwrap_or_else(|e| e.into_inner()).kill();
    }
}
