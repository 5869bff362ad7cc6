//! KIP-714 client telemetry on the broker side: what the test tier's receiver
//! (`tests/kafka/java/TelemetryReporter.java`, on a broker started with
//! [`ClusterSpec::telemetry_reporter`](super::ClusterSpec::telemetry_reporter)) recorded of the
//! pushes a broker accepted, read back from its file ([`read_pushes`],
//! [`KafkaCluster::telemetry_pushes`](super::KafkaCluster::telemetry_pushes)), and a bounded
//! wait for pushes ([`wait_for_pushes`]).
//!
//! The file has one line per push (the format is in the Java source's header): the client
//! instance id, whether it was the terminating push, the content type and the byte length of
//! the metrics as the broker hands them over (decompressed), the request's version and client
//! id, the payload decoded as OTLP `MetricsData` (one [`MetricPoint`] per data point, the
//! resource's attributes) and the raw payload.

use std::path::Path;
use std::time::{Duration, Instant};

use super::KafkaCluster;

/// How an OTLP metric aggregates (the point's `data` case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PointKind {
    /// A gauge: the value now.
    Gauge,
    /// A sum over the interval from the start time (delta) or since the client started
    /// (cumulative).
    Sum {
        /// `delta`, `cumulative` (or `unspecified`).
        temporality: String,
        /// Whether it only grows.
        monotonic: bool,
    },
    /// Another data case (histogram, summary, ...), named as OTLP's Java classes name it; no
    /// value recorded.
    Other(String),
}

/// One OTLP data point of a push.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricPoint {
    /// The metric's name (`org.apache.kafka.producer.record.queue.time.avg`).
    pub name: String,
    /// Gauge or sum.
    pub kind: PointKind,
    /// The value (NaN for [`PointKind::Other`]).
    pub value: f64,
    /// `start_time_unix_nano` (0 when unset).
    pub start_unix_nano: u64,
    /// `time_unix_nano`.
    pub time_unix_nano: u64,
    /// The point's attributes (`node.id`, `topic`, `partition`, ...), in the pushed order.
    pub attributes: Vec<(String, String)>,
}

/// One push a broker accepted and handed to the reporter.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryPush {
    /// The reporter's count of pushes on its node, from 1.
    pub seq: u64,
    /// The client instance id (Kafka's base64url `Uuid`).
    pub instance: String,
    /// Whether the client said this is its last push (on close).
    pub terminating: bool,
    /// The content type the broker reports (`application/x-protobuf` for OTLP).
    pub content_type: String,
    /// The PushTelemetry request's version.
    pub request_version: i16,
    /// The request header's client id.
    pub client_id: String,
    /// The authenticated principal (`User:ANONYMOUS` on plaintext).
    pub principal: String,
    /// The listener the push came in on.
    pub listener: String,
    /// The metrics' length in bytes, decompressed.
    pub bytes: usize,
    /// `None` when the payload decoded as OTLP `MetricsData`; otherwise why not.
    pub decode_error: Option<String>,
    /// The resource's attributes (`client_id`, `client_software_name`, ...).
    pub resource: Vec<(String, String)>,
    /// Every data point, in the pushed order.
    pub points: Vec<MetricPoint>,
    /// The metrics payload, decompressed (for a decoder of the test's own).
    pub payload: Vec<u8>,
}

impl TelemetryPush {
    /// The distinct metric names of the push, sorted.
    pub fn metric_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.points.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The points of metric `name`.
    pub fn points_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a MetricPoint> {
        self.points.iter().filter(move |p| p.name == name)
    }

    /// The value of resource attribute `key`.
    pub fn resource_attr(&self, key: &str) -> Option<&str> {
        self.resource
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the pushes recorded in `file` (none when it does not exist). A last line without its
/// newline (being written) is left out.
pub fn read_pushes(file: &Path) -> Result<Vec<TelemetryPush>, String> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("read {}: {e}", file.display())),
    };
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| parse_push(l).map_err(|e| format!("{} line {}: {e}", file.display(), i + 1)))
        .collect()
}

/// Polls node `node`'s pushes every 100 ms until `done` holds for them, or `timeout` passes;
/// returns the pushes that satisfied it, or an error with the last pushes seen (their metric
/// names) and the cluster's logs.
pub fn wait_for_pushes(
    cluster: &KafkaCluster,
    node: i32,
    timeout: Duration,
    what: &str,
    mut done: impl FnMut(&[TelemetryPush]) -> bool,
) -> Result<Vec<TelemetryPush>, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let pushes = cluster.telemetry_pushes(node)?;
        if done(&pushes) {
            return Ok(pushes);
        }
        if Instant::now() >= deadline {
            let seen: Vec<String> = pushes
                .iter()
                .map(|p| {
                    format!(
                        "#{} {} terminating={} {} bytes, {} points",
                        p.seq,
                        p.instance,
                        p.terminating,
                        p.bytes,
                        p.points.len()
                    )
                })
                .collect();
            return Err(format!(
                "node {node}'s telemetry reporter did not record {what} within {timeout:?}; \
                 it recorded {} pushes: {seen:#?}\nlogs:\n{}",
                pushes.len(),
                cluster.logs(40)
            ));
        }
        // The file is written by another process: it can only be polled.
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Percent-decodes a token's value (the Java side's `enc`).
fn unescape(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .ok_or_else(|| format!("truncated escape in {s:?}"))?;
            out.push(u8::from_str_radix(hex, 16).map_err(|e| format!("{s:?}: {e}"))?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|e| format!("{s:?}: {e}"))
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(s.get(i..i + 2).ok_or("odd hex")?, 16).map_err(|e| e.to_string())
        })
        .collect()
}

/// `K=V,K=V` with each part escaped.
fn parse_attrs(s: &str) -> Result<Vec<(String, String)>, String> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("bad attribute {kv:?}"))?;
            Ok((unescape(k)?, unescape(v)?))
        })
        .collect()
}

fn parse_point(s: &str) -> Result<MetricPoint, String> {
    let f: Vec<&str> = s.split('|').collect();
    if f.len() != 8 {
        return Err(format!("bad point {s:?}"));
    }
    let kind = match f[1] {
        "gauge" => PointKind::Gauge,
        "sum" => PointKind::Sum {
            temporality: f[2].to_string(),
            monotonic: f[3] == "1",
        },
        other => PointKind::Other(unescape(other)?),
    };
    let num = |x: &str| x.parse::<u64>().map_err(|e| format!("{s:?}: {e}"));
    Ok(MetricPoint {
        name: unescape(f[0])?,
        kind,
        value: f[4]
            .parse::<f64>()
            .map_err(|e| format!("value of {s:?}: {e}"))?,
        start_unix_nano: num(f[5])?,
        time_unix_nano: num(f[6])?,
        attributes: parse_attrs(f[7])?,
    })
}

/// Parses one line of the reporter's file.
pub fn parse_push(line: &str) -> Result<TelemetryPush, String> {
    let mut tokens = line.split(' ');
    if tokens.next() != Some("push") {
        return Err(format!("not a push line: {line:.80}"));
    }
    let mut push = TelemetryPush {
        seq: 0,
        instance: String::new(),
        terminating: false,
        content_type: String::new(),
        request_version: -1,
        client_id: String::new(),
        principal: String::new(),
        listener: String::new(),
        bytes: 0,
        decode_error: Some("no decode field".into()),
        resource: Vec::new(),
        points: Vec::new(),
        payload: Vec::new(),
    };
    for t in tokens {
        let (k, v) = t
            .split_once('=')
            .ok_or_else(|| format!("bad token {t:.80}"))?;
        let int = |x: &str| x.parse::<i64>().map_err(|e| format!("{k}={x}: {e}"));
        match k {
            "seq" => push.seq = int(v)? as u64,
            "instance" => push.instance = unescape(v)?,
            "terminating" => push.terminating = v == "true",
            "content_type" => push.content_type = unescape(v)?,
            "version" => push.request_version = int(v)? as i16,
            "client_id" => push.client_id = unescape(v)?,
            "principal" => push.principal = unescape(v)?,
            "listener" => push.listener = unescape(v)?,
            "bytes" => push.bytes = int(v)? as usize,
            "decode" => {
                let d = unescape(v)?;
                push.decode_error = (d != "ok").then_some(d);
            }
            "resource" => push.resource = parse_attrs(v)?,
            "point" => push.points.push(parse_point(v)?),
            "payload" => push.payload = unhex(v)?,
            // Fields a later reporter adds.
            _ => {}
        }
    }
    if push.payload.len() != push.bytes {
        return Err(format!(
            "push #{}: {} payload bytes, the line says {}",
            push.seq,
            push.payload.len(),
            push.bytes
        ));
    }
    Ok(push)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_push_line() {
        let line = "push seq=3 instance=AbC-_x terminating=true content_type=application/x-protobuf \
                    version=0 client_id=tel%20java principal=User:ANONYMOUS listener=INTERNAL \
                    bytes=2 decode=ok resource=client_id=tel%20java,client_software_name=apache-kafka-java \
                    point=org.apache.kafka.producer.record.queue.time.avg|gauge|-|0|1.5E-4|0|17|client_id=x \
                    point=org.apache.kafka.producer.record.send.total|sum|delta|1|12|10|17| \
                    payload=0aff";
        let p = parse_push(line).unwrap();
        assert_eq!(p.seq, 3);
        assert_eq!(p.instance, "AbC-_x");
        assert!(p.terminating);
        assert_eq!(p.client_id, "tel java");
        assert_eq!(p.resource_attr("client_id"), Some("tel java"));
        assert_eq!(p.decode_error, None);
        assert_eq!(p.payload, vec![0x0a, 0xff]);
        assert_eq!(p.points.len(), 2);
        assert_eq!(p.points[0].kind, PointKind::Gauge);
        assert_eq!(p.points[0].value, 1.5e-4);
        assert_eq!(
            p.points[0].attributes,
            vec![("client_id".into(), "x".into())]
        );
        assert_eq!(
            p.points[1].kind,
            PointKind::Sum {
                temporality: "delta".into(),
                monotonic: true
            }
        );
        assert_eq!(p.points[1].start_unix_nano, 10);
        assert!(p.points[1].attributes.is_empty());
        assert_eq!(
            p.metric_names(),
            vec![
                "org.apache.kafka.producer.record.queue.time.avg",
                "org.apache.kafka.producer.record.send.total"
            ]
        );
    }

    #[test]
    fn refuses_a_payload_of_another_length() {
        assert!(parse_push("push seq=1 bytes=3 decode=ok payload=00").is_err());
        assert!(parse_push("pull seq=1").is_err());
    }
}
