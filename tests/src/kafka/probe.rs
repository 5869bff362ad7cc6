//! The protocol probe: decodes every request frame a producer sends through the fault proxies
//! with the `kafka-protocol` crate (an independent codec), at the version its header names,
//! and fails on any decode error or byte left over; the record batches of Produce requests are
//! decoded too (CRC-32C checked). The ApiVersions answers of the broker are decoded as well, so
//! the negotiated version of each API can be set beside what the broker offers.
//!
//! Use: [`Probe::attach`] to the cluster's proxies before the producer starts, produce,
//! [`Probe::finish`] to detach and get the [`ProbeReport`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::mpsc;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, ProduceResponse, RequestKind, ResponseHeader,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable};
use kafka_protocol::records::RecordBatchDecoder;

use super::proxy::{Direction, TappedFrame};
use super::KafkaCluster;

/// One decoded request.
#[derive(Debug, Clone)]
pub struct DecodedRequest {
    /// Its API.
    pub api: ApiKey,
    /// The version its header names.
    pub version: i16,
    /// Its correlation id.
    pub correlation_id: i32,
    /// Records in its record batches (Produce).
    pub records: usize,
}

/// Decodes one request frame (length prefix included): header, body at the header's version,
/// and for Produce every record batch. Fails on any decode error and on trailing bytes.
pub fn decode_request(frame: &Bytes) -> Result<DecodedRequest, String> {
    let mut b = frame.clone();
    if b.remaining() < 4 {
        return Err("frame shorter than its length prefix".into());
    }
    let len = b.get_u32() as usize;
    if len != b.remaining() {
        return Err(format!(
            "length prefix {len}, {} bytes follow",
            b.remaining()
        ));
    }
    let header =
        decode_request_header_from_buffer(&mut b).map_err(|e| format!("request header: {e}"))?;
    let api = ApiKey::try_from(header.request_api_key)
        .map_err(|_| format!("unknown API key {}", header.request_api_key))?;
    let version = header.request_api_version;
    let body = RequestKind::decode(api, &mut b, version)
        .map_err(|e| format!("{api:?} v{version} body: {e}"))?;
    if b.has_remaining() {
        return Err(format!(
            "{api:?} v{version}: {} bytes after the body",
            b.remaining()
        ));
    }
    let mut records = 0;
    if let RequestKind::Produce(p) = &body {
        for t in &p.topic_data {
            for part in &t.partition_data {
                let mut rb = part.records.clone().unwrap_or_default();
                let sets = RecordBatchDecoder::decode_all(&mut rb).map_err(|e| {
                    format!(
                        "Produce v{version} {}-{}: record batch: {e}",
                        t.name.0, part.index
                    )
                })?;
                records += sets.iter().map(|s| s.records.len()).sum::<usize>();
            }
        }
    }
    Ok(DecodedRequest {
        api,
        version,
        correlation_id: header.correlation_id,
        records,
    })
}

/// What the probe saw.
#[derive(Debug, Default)]
pub struct ProbeReport {
    /// Requests decoded, per API: the versions used and how many.
    pub versions: BTreeMap<String, BTreeMap<i16, usize>>,
    /// Requests decoded.
    pub requests: usize,
    /// Records in the Produce requests (retries counted again).
    pub produce_records: usize,
    /// Decode failures: (node, connection, error).
    pub errors: Vec<(i32, u64, String)>,
    /// The broker's ApiVersions ranges (api name -> (min, max)), from its first answer.
    pub broker_ranges: BTreeMap<String, (i16, i16)>,
    /// Partition error codes in the brokers' Produce answers (code -> count; 0 = success):
    /// which real broker errors a fault produced.
    pub produce_errors: BTreeMap<i16, usize>,
}

impl ProbeReport {
    /// How many Produce answers carried `code` for a partition.
    pub fn produce_error_count(&self, code: producer_core::ErrorCode) -> usize {
        self.produce_errors.get(&code.0).copied().unwrap_or(0)
    }
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} requests decoded, {} decode errors, {} records in Produce requests",
            self.requests,
            self.errors.len(),
            self.produce_records
        )?;
        writeln!(
            f,
            "{:<18} {:>10} {:>14} {:>10}",
            "API", "versions", "broker offers", "requests"
        )?;
        for (api, vs) in &self.versions {
            let used: Vec<String> = vs.keys().map(|v| format!("v{v}")).collect();
            let offer = self
                .broker_ranges
                .get(api)
                .map(|(a, b)| format!("v{a}-v{b}"))
                .unwrap_or_else(|| "?".into());
            writeln!(
                f,
                "{api:<18} {:>10} {offer:>14} {:>10}",
                used.join(","),
                vs.values().sum::<usize>()
            )?;
        }
        let codes: Vec<String> = self
            .produce_errors
            .iter()
            .map(|(c, n)| {
                let name = producer_core::ErrorCode(*c).name().unwrap_or("?");
                format!("{name}({c}) x{n}")
            })
            .collect();
        writeln!(f, "Produce answers, per partition: {}", codes.join(", "))?;
        for (node, conn, e) in self.errors.iter().take(10) {
            writeln!(f, "DECODE ERROR node {node} conn {conn}: {e}")?;
        }
        Ok(())
    }
}

/// Taps every proxy of a cluster; a thread of its own decodes the frames as they come.
pub struct Probe<'a> {
    cluster: &'a KafkaCluster,
    worker: std::thread::JoinHandle<ProbeReport>,
}

impl<'a> Probe<'a> {
    /// Starts tapping every proxy of `cluster`.
    pub fn attach(cluster: &'a KafkaCluster) -> Probe<'a> {
        let (tx, rx) = mpsc::channel();
        for p in cluster.proxies() {
            p.set_tap(Some(tx.clone()));
        }
        let worker = std::thread::spawn(move || decode_all(rx));
        Probe { cluster, worker }
    }

    /// Stops tapping and returns what was decoded.
    pub fn finish(self) -> ProbeReport {
        // Dropping the proxies' senders ends the worker's loop.
        for p in self.cluster.proxies() {
            p.set_tap(None);
        }
        self.worker.join().expect("the probe's decoder panicked")
    }
}

fn decode_all(rx: mpsc::Receiver<TappedFrame>) -> ProbeReport {
    let mut report = ProbeReport::default();
    // (node, conn, correlation id) -> (api, version), to decode the ApiVersions answers.
    let mut asked: HashMap<(i32, u64, i32), (ApiKey, i16)> = HashMap::new();
    let names = |k: i16| {
        ApiKey::try_from(k)
            .map(|a| format!("{a:?}"))
            .unwrap_or_else(|_| format!("api {k}"))
    };
    let mut seen_ranges = BTreeSet::new();
    for t in rx {
        match t.direction {
            Direction::ToBroker => match decode_request(&t.frame) {
                Ok(d) => {
                    report.requests += 1;
                    report.produce_records += d.records;
                    *report
                        .versions
                        .entry(format!("{:?}", d.api))
                        .or_default()
                        .entry(d.version)
                        .or_default() += 1;
                    asked.insert((t.node, t.conn, d.correlation_id), (d.api, d.version));
                }
                Err(e) => report.errors.push((t.node, t.conn, e)),
            },
            Direction::ToClient => {
                let mut b = t.frame.clone();
                if b.remaining() < 8 {
                    continue;
                }
                b.advance(4);
                let corr = (&b[..4]).get_i32();
                let Some((api, version)) = asked.remove(&(t.node, t.conn, corr)) else {
                    continue;
                };
                if api == ApiKey::Produce {
                    let decoded =
                        ResponseHeader::decode(&mut b, api.response_header_version(version))
                            .and_then(|_| ProduceResponse::decode(&mut b, version));
                    match decoded {
                        Ok(r) => {
                            for t in &r.responses {
                                for p in &t.partition_responses {
                                    *report.produce_errors.entry(p.error_code).or_default() += 1;
                                }
                            }
                        }
                        Err(e) => report.errors.push((
                            t.node,
                            t.conn,
                            format!("Produce v{version} answer: {e}"),
                        )),
                    }
                    continue;
                }
                if api != ApiKey::ApiVersions || !seen_ranges.insert(t.node) {
                    continue;
                }
                // ApiVersions answers always use response header v0.
                let decoded = ResponseHeader::decode(&mut b, 0)
                    .and_then(|_| ApiVersionsResponse::decode(&mut b, version));
                match decoded {
                    Ok(r) => {
                        for k in r.api_keys {
                            report
                                .broker_ranges
                                .insert(names(k.api_key), (k.min_version, k.max_version));
                        }
                    }
                    Err(e) => report.errors.push((
                        t.node,
                        t.conn,
                        format!("ApiVersions v{version} answer: {e}"),
                    )),
                }
            }
        }
    }
    report
}
