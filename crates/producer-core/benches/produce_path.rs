//! Records per second through the whole core path: `send` -> batch encode -> Produce request
//! built -> Produce response parsed -> delivery reports, with no network.
//!
//! A real `Producer<u64>` runs against a tiny in-process fake broker that answers ApiVersions,
//! Metadata (1 broker, 1 topic, 12 partitions), InitProducerId (all encoded once with the
//! `kafka-protocol` crate) and Produce (success with increasing base offsets, encoded by hand:
//! it is on the measured path and must stay cheap). The handshake runs once, outside the measured
//! loop. Each iteration sends `RECORDS` records, flushes, answers every Produce request and
//! drains every delivery report.
//!
//! The matrix: values of 10, 100 and 1000 bytes; 8-byte keys or null keys; no compression or lz4.
//! Beside it, a floor per value size: copying the same key and value bytes into a `Vec` plus
//! CRC-32C over them. At the end the ratio of the core's cost per record to the floor's is
//! printed for each cell (from criterion's median estimates of this run).
//!
//! Profiling mode (no criterion): `PRODUCE_PATH_PROFILE=<value bytes>,<keyed|null>,
//! <none|lz4|floor>,<iterations>` runs the measured loop (or the floor) a fixed number of times,
//! e.g. under `valgrind --tool=callgrind`.

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey as KpApiKey, ApiVersionsResponse, BrokerId, InitProducerIdResponse, MetadataResponse,
    ProducerId, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use producer_core::{Compression, Config, ConnId, Output, Producer, Record};

/// Records per measured iteration.
const RECORDS: usize = 10_000;
const TOPIC: &str = "bench";
const PARTITIONS: i32 = 12;
const BROKER_ID: i32 = 1;
const VALUE_SIZES: [usize; 3] = [10, 100, 1000];
/// The Produce version the fake broker offers at most (non-flexible, simple to parse by hand).
const PRODUCE_MAX_VERSION: i16 = 8;

// ---------------------------------------------------------------------------------------------
// The fake broker
// ---------------------------------------------------------------------------------------------

/// Answers the four request kinds the producer sends. Responses to control requests are
/// encoded with `kafka-protocol`; Produce responses by hand.
struct FakeBroker {
    next_offset: [i64; PARTITIONS as usize],
    produce_requests: u64,
}

/// A big-endian reader over a request frame.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        s
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2).try_into().unwrap())
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }
    /// A nullable string or bytes field with an `len_bytes`-byte length prefix.
    fn nullable(&mut self, len_bytes: usize) -> Option<&'a [u8]> {
        let len = if len_bytes == 2 {
            self.i16() as i32
        } else {
            self.i32()
        };
        (len >= 0).then(|| self.take(len as usize))
    }
}

/// Frames a response: size prefix, then `f` writes header and body.
fn frame(out: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    f(out);
    let size = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
}

/// Encodes a `kafka-protocol` response with its header, framed.
fn kp_frame<R: Encodable>(out: &mut Vec<u8>, api: KpApiKey, version: i16, corr: i32, resp: &R) {
    let mut b = BytesMut::new();
    let mut header = ResponseHeader::default();
    header.correlation_id = corr;
    header
        .encode(&mut b, api.response_header_version(version))
        .unwrap();
    resp.encode(&mut b, version).unwrap();
    frame(out, |o| o.extend_from_slice(&b));
}

impl FakeBroker {
    fn new() -> Self {
        FakeBroker {
            next_offset: [0; PARTITIONS as usize],
            produce_requests: 0,
        }
    }

    /// Handles the request frames in `bytes`, appending the response frames to `out`.
    fn handle(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let len = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            self.request(&rest[4..4 + len], out);
            rest = &rest[4 + len..];
        }
    }

    fn request(&mut self, req: &[u8], out: &mut Vec<u8>) {
        let mut r = Reader { buf: req, pos: 0 };
        let api = r.i16();
        let version = r.i16();
        let corr = r.i32();
        match api {
            0 => self.produce(version, corr, r, out),
            3 => kp_frame(out, KpApiKey::Metadata, version, corr, &metadata()),
            18 => kp_frame(out, KpApiKey::ApiVersions, version, corr, &api_versions()),
            22 => kp_frame(out, KpApiKey::InitProducerId, version, corr, &init_pid()),
            other => panic!("fake broker: unexpected api key {other}"),
        }
    }

    /// Parses a Produce request (v3-v8, header v1) and answers success for every partition,
    /// assigning offsets as a broker would.
    fn produce(&mut self, version: i16, corr: i32, mut r: Reader<'_>, out: &mut Vec<u8>) {
        assert!((3..=PRODUCE_MAX_VERSION).contains(&version));
        self.produce_requests += 1;
        r.nullable(2); // client id
        r.nullable(2); // transactional id
        let acks = r.i16();
        assert_ne!(acks, 0, "the bench expects responses");
        r.i32(); // timeout
        let topics = r.i32();
        frame(out, |o| {
            o.put_i32(corr);
            o.put_i32(topics);
            for _ in 0..topics {
                let name = r.nullable(2).unwrap();
                o.put_i16(name.len() as i16);
                o.extend_from_slice(name);
                let partitions = r.i32();
                o.put_i32(partitions);
                for _ in 0..partitions {
                    let index = r.i32();
                    let records = r.nullable(4).unwrap();
                    let count = i32::from_be_bytes(records[57..61].try_into().unwrap());
                    let base = self.next_offset[index as usize];
                    self.next_offset[index as usize] += count as i64;
                    o.put_i32(index);
                    o.put_i16(0); // error code
                    o.put_i64(base);
                    o.put_i64(-1); // log append time
                    if version >= 5 {
                        o.put_i64(0); // log start offset
                    }
                    if version >= 8 {
                        o.put_i32(0); // record errors
                        o.put_i16(-1); // error message
                    }
                }
            }
            o.put_i32(0); // throttle time
        });
    }
}

fn api_versions() -> ApiVersionsResponse {
    let mut resp = ApiVersionsResponse::default();
    for (key, max) in [(0, PRODUCE_MAX_VERSION), (3, 8), (18, 3), (22, 1)] {
        let mut v = ApiVersion::default();
        v.api_key = key;
        v.min_version = 0;
        v.max_version = max;
        resp.api_keys.push(v);
    }
    resp
}

fn metadata() -> MetadataResponse {
    let mut resp = MetadataResponse::default();
    let mut b = MetadataResponseBroker::default();
    b.node_id = BrokerId(BROKER_ID);
    b.host = StrBytes::from_static_str("broker");
    b.port = 9092;
    resp.brokers.push(b);
    resp.controller_id = BrokerId(BROKER_ID);
    let mut t = MetadataResponseTopic::default();
    t.name = Some(TopicName(StrBytes::from_static_str(TOPIC)));
    for i in 0..PARTITIONS {
        let mut p = MetadataResponsePartition::default();
        p.partition_index = i;
        p.leader_id = BrokerId(BROKER_ID);
        p.leader_epoch = 0;
        p.replica_nodes = vec![BrokerId(BROKER_ID)];
        p.isr_nodes = vec![BrokerId(BROKER_ID)];
        t.partitions.push(p);
    }
    resp.topics.push(t);
    resp
}

fn init_pid() -> InitProducerIdResponse {
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(1000);
    resp.producer_epoch = 0;
    resp
}

// ---------------------------------------------------------------------------------------------
// The driver
// ---------------------------------------------------------------------------------------------

/// One benchmark cell's setup.
#[derive(Clone, Copy)]
struct Cell {
    value_len: usize,
    keyed: bool,
    compression: Compression,
}

impl Cell {
    fn name(&self) -> String {
        let key = if self.keyed { "keyed" } else { "null" };
        let codec = match self.compression {
            Compression::None => "none",
            _ => "lz4",
        };
        format!("core_{key}_{codec}")
    }
}

/// A producer wired to the fake broker, with the records of one iteration prepared.
struct Harness {
    producer: Producer<u64>,
    broker: FakeBroker,
    now: Instant,
    /// Response bytes per connection, fed back after the outputs are drained.
    replies: Vec<(ConnId, Vec<u8>)>,
    delivered: usize,
    topic: std::sync::Arc<str>,
    keys: Vec<Bytes>,
    value: Bytes,
}

impl Harness {
    fn new(cell: Cell) -> Self {
        let config = Config::builder([("bootstrap", 9092u16)])
            .compression(cell.compression)
            .build()
            .unwrap();
        let now = Instant::now();
        let keys = if cell.keyed {
            let all = Bytes::from(
                (0..RECORDS as u64)
                    .flat_map(|i| i.to_be_bytes())
                    .collect::<Vec<u8>>(),
            );
            (0..RECORDS).map(|i| all.slice(i * 8..i * 8 + 8)).collect()
        } else {
            Vec::new()
        };
        // Values that compress like real data somewhat: not all one byte.
        let value: Vec<u8> = (0..cell.value_len)
            .map(|i| (i as u8).wrapping_mul(31) ^ 0x5a)
            .collect();
        let mut h = Harness {
            producer: Producer::new(config, now),
            broker: FakeBroker::new(),
            now,
            replies: Vec::new(),
            delivered: 0,
            topic: TOPIC.into(),
            keys,
            value: Bytes::from(value),
        };
        h.handshake();
        h
    }

    /// Connects, negotiates, gets metadata and a producer id, by sending one record.
    fn handshake(&mut self) {
        let r = Record::new(self.topic.clone(), self.value.clone());
        self.producer.send(self.now, r, 0).unwrap();
        // The record waits for metadata first; flush again once it sits in a batch.
        for _ in 0..10 {
            self.producer.flush(self.now);
            self.run_until_idle();
            if self.delivered == 1 {
                break;
            }
        }
        assert_eq!(self.delivered, 1, "handshake record not delivered");
        assert!(self.producer.producer_id().is_some());
        self.delivered = 0;
    }

    /// Drains outputs and feeds responses back until nothing is left to do.
    fn run_until_idle(&mut self) {
        loop {
            self.drain_outputs();
            if self.replies.is_empty() {
                break;
            }
            for (conn, bytes) in std::mem::take(&mut self.replies) {
                self.producer.handle_read(self.now, conn, &bytes);
            }
        }
        if self
            .producer
            .poll_timeout()
            .is_some_and(|at| at <= self.now)
        {
            self.producer.handle_timeout(self.now);
            self.drain_outputs();
        }
    }

    fn drain_outputs(&mut self) {
        while let Some(out) = self.producer.poll_output() {
            match out {
                Output::Connect { conn, .. } => self.producer.handle_connected(self.now, conn),
                Output::Transmit { conn, bytes } => {
                    let mut reply = Vec::new();
                    self.broker.handle(&bytes.to_contiguous(), &mut reply);
                    self.replies.push((conn, reply));
                }
                Output::Delivery(d) => {
                    assert!(d.result.is_ok(), "delivery failed: {:?}", d.result.err());
                    black_box(d.opaque);
                    self.delivered += 1;
                }
                Output::Disconnect { .. }
                | Output::Event(_)
                | Output::Transaction(_)
                | Output::TokenRequest => {}
            }
        }
    }

    /// The measured work: `RECORDS` records sent, flushed, acknowledged and reported.
    fn iteration(&mut self) {
        // Virtual time moves on a little, as it would between bursts, so linger timers fire.
        self.now += Duration::from_millis(1);
        for i in 0..RECORDS {
            let mut r = Record::new(self.topic.clone(), self.value.clone());
            if let Some(k) = self.keys.get(i) {
                r.key = Some(k.clone());
            }
            self.producer.send(self.now, r, i as u64).unwrap();
        }
        self.producer.flush(self.now);
        self.run_until_idle();
        assert_eq!(self.delivered, RECORDS);
        assert_eq!(self.producer.buffered_records(), 0);
        self.delivered = 0;
    }
}

// ---------------------------------------------------------------------------------------------
// The floor
// ---------------------------------------------------------------------------------------------

/// Copies every record's key and value into `dst` and computes CRC-32C over it.
fn floor(dst: &mut Vec<u8>, keys: &[Bytes], value: &[u8]) -> u32 {
    dst.clear();
    for i in 0..RECORDS {
        if let Some(k) = keys.get(i) {
            dst.extend_from_slice(k);
        }
        dst.extend_from_slice(black_box(value));
    }
    crc32c::crc32c(dst)
}

/// The API floor: what any producer with this API must do per record, and nothing else. The
/// caller builds an owned [`Record`] (topic `Arc` and value `Bytes` refcounts, as the core
/// bench does), the producer copies its key and value out and drops it, and one success
/// report per record comes back (with the topic `Arc`, as [`RecordMetadata`] carries it) and
/// is dropped by the caller; CRC-32C over the copied bytes. No routing, batching, encoding or
/// request: the per-record ownership and report traffic the floor above does not include.
fn api_floor(
    dst: &mut Vec<u8>,
    reports: &mut Vec<producer_core::Delivery<u64>>,
    topic: &std::sync::Arc<str>,
    keys: &[Bytes],
    value: &Bytes,
) -> u32 {
    dst.clear();
    for i in 0..RECORDS {
        let mut r = Record::new(topic.clone(), value.clone());
        if let Some(k) = keys.get(i) {
            r.key = Some(k.clone());
        }
        let r = black_box(r);
        if let Some(k) = &r.key {
            dst.extend_from_slice(k);
        }
        dst.extend_from_slice(r.value.as_deref().unwrap_or_default());
        drop(r);
        reports.push(producer_core::Delivery::succeeded(
            i as u64,
            producer_core::RecordMetadata::new(topic.clone(), 0, i as i64, -1),
        ));
    }
    let crc = crc32c::crc32c(dst);
    for d in reports.drain(..) {
        black_box(d.opaque);
    }
    crc
}

// ---------------------------------------------------------------------------------------------
// Criterion and the summary
// ---------------------------------------------------------------------------------------------

fn cells() -> Vec<Cell> {
    let mut v = Vec::new();
    for value_len in VALUE_SIZES {
        for keyed in [false, true] {
            for compression in [Compression::None, Compression::Lz4] {
                v.push(Cell {
                    value_len,
                    keyed,
                    compression,
                });
            }
        }
    }
    v
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("produce_path");
    g.throughput(Throughput::Elements(RECORDS as u64));
    for value_len in VALUE_SIZES {
        for keyed in [false, true] {
            let name = if keyed { "floor_keyed" } else { "floor_null" };
            let h = Harness::new(Cell {
                value_len,
                keyed,
                compression: Compression::None,
            });
            let mut dst = Vec::with_capacity(RECORDS * (value_len + 8));
            g.bench_function(BenchmarkId::new(name, value_len), |b| {
                b.iter(|| floor(&mut dst, &h.keys, &h.value))
            });
            let api_name = if keyed {
                "api_floor_keyed"
            } else {
                "api_floor_null"
            };
            let mut reports = Vec::with_capacity(RECORDS);
            g.bench_function(BenchmarkId::new(api_name, value_len), |b| {
                b.iter(|| api_floor(&mut dst, &mut reports, &h.topic, &h.keys, &h.value))
            });
        }
    }
    for cell in cells() {
        let mut h = Harness::new(cell);
        g.bench_function(BenchmarkId::new(cell.name(), cell.value_len), |b| {
            b.iter(|| h.iteration())
        });
    }
    g.finish();
}

/// Criterion's median estimate (ns per iteration) of a benchmark of this group, if it ran.
fn median_ns(function: &str, value_len: usize) -> Option<f64> {
    let dir = std::env::var("CRITERION_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|_| {
            std::env::var("CARGO_TARGET_DIR").map(|t| std::path::Path::new(&t).join("criterion"))
        })
        .unwrap_or_else(|_| {
            // The bench runs in the package directory; criterion writes under the target
            // directory, three levels above this executable (target/release/deps/).
            std::env::current_exe()
                .ok()
                .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.join("criterion")))
                .unwrap_or_else(|| "target/criterion".into())
        });
    let path = dir
        .join("produce_path")
        .join(function)
        .join(value_len.to_string())
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let median = &text[text.find("\"median\"")?..];
    let est = &median[median.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    est[..est.find([',', '}'])?].trim().parse().ok()
}

fn summary() {
    println!("\nproduce_path summary: records/s and cost per record relative to the floors");
    println!(
        "(floor = copy key+value into a Vec + CRC-32C; api floor = the same plus building the"
    );
    println!(" owned Record and one success report per record; {RECORDS} records per iteration)");
    println!(
        "{:<18} {:>6} {:>14} {:>10} {:>8} {:>12}",
        "cell", "value", "records/s", "ns/record", "x floor", "x api floor"
    );
    for cell in cells() {
        let key = if cell.keyed { "keyed" } else { "null" };
        let (Some(core), Some(floor)) = (
            median_ns(&cell.name(), cell.value_len),
            median_ns(&format!("floor_{key}"), cell.value_len),
        ) else {
            continue;
        };
        let api = median_ns(&format!("api_floor_{key}"), cell.value_len)
            .map_or("-".to_string(), |api| format!("{:.2}", core / api));
        let per_record = core / RECORDS as f64;
        println!(
            "{:<18} {:>6} {:>14.0} {:>10.1} {:>8.2} {:>12}",
            cell.name(),
            cell.value_len,
            1e9 / per_record,
            per_record,
            core / floor,
            api
        );
    }
    for value_len in VALUE_SIZES {
        for key in ["null", "keyed"] {
            if let (Some(floor), Some(api)) = (
                median_ns(&format!("floor_{key}"), value_len),
                median_ns(&format!("api_floor_{key}"), value_len),
            ) {
                println!(
                    "api floor {key:<5} {value_len:>6}: {:.1} ns/record = {:.2}x the copy+CRC floor",
                    api / RECORDS as f64,
                    api / floor
                );
            }
        }
    }
}

/// `PRODUCE_PATH_PROFILE=<value bytes>,<keyed|null>,<none|lz4|floor>,<iterations>`.
fn profile(spec: &str) {
    let parts: Vec<&str> = spec.split(',').collect();
    let cell = Cell {
        value_len: parts[0].parse().expect("value size"),
        keyed: parts[1] == "keyed",
        compression: if parts[2] == "lz4" {
            Compression::Lz4
        } else {
            Compression::None
        },
    };
    let iterations: usize = parts[3].parse().expect("iterations");
    if parts[2] == "floor" {
        let h = Harness::new(Cell {
            compression: Compression::None,
            ..cell
        });
        let mut dst = Vec::with_capacity(RECORDS * (cell.value_len + 8));
        for _ in 0..iterations {
            black_box(floor(&mut dst, &h.keys, &h.value));
        }
        return;
    }
    let mut h = Harness::new(cell);
    let start = Instant::now();
    for _ in 0..iterations {
        h.iteration();
    }
    let per_record = start.elapsed().as_nanos() as f64 / (iterations * RECORDS) as f64;
    println!(
        "{} {}B: {iterations} x {RECORDS} records, {per_record:.1} ns/record, {} produce requests",
        cell.name(),
        cell.value_len,
        h.broker.produce_requests
    );
}

fn main() {
    if let Ok(spec) = std::env::var("PRODUCE_PATH_PROFILE") {
        profile(&spec);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    summary();
}
