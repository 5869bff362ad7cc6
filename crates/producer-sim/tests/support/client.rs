//! A tiny hand-rolled client driving the simulator with kafka-protocol's client-side encoders.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, InitProducerIdRequest, MetadataRequest, ProduceRequest,
    ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use producer_core::ErrorCode;
use producer_sim::{ConnId, NetEvent, SimCluster, SimConfig};
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// The newest Produce version the default broker advertises (it advertises 3-11).
pub const NEWEST_PRODUCE: i16 = 11;
/// The first flexible Produce version (compact strings and arrays, tagged fields).
pub const FIRST_FLEXIBLE_PRODUCE: i16 = 9;

/// The client: owns the sim and virtual time.
pub struct Client {
    pub sim: SimCluster,
    pub t0: Instant,
    pub now: Instant,
    bufs: HashMap<ConnId, Vec<u8>>,
    frames: HashMap<ConnId, VecDeque<Bytes>>,
    pub connected: HashSet<ConnId>,
    pub failed: HashSet<ConnId>,
    pub closed: HashSet<ConnId>,
    /// Every event seen, with its time relative to t0.
    pub trace: Vec<(Duration, String)>,
    next_corr: i32,
}

impl Client {
    pub fn new(cfg: SimConfig) -> Client {
        let t0 = Instant::now();
        Client {
            sim: SimCluster::new(cfg, t0),
            t0,
            now: t0,
            bufs: HashMap::new(),
            frames: HashMap::new(),
            connected: HashSet::new(),
            failed: HashSet::new(),
            closed: HashSet::new(),
            trace: Vec::new(),
            next_corr: 1,
        }
    }

    /// Handles one event; jumps time forward when nothing is due. False when idle.
    pub fn step(&mut self) -> bool {
        if let Some(ev) = self.sim.poll_event(self.now) {
            self.handle(ev);
            return true;
        }
        match self.sim.next_event_time() {
            Some(t) => {
                assert!(
                    t > self.now,
                    "next_event_time {t:?} not after now with nothing due"
                );
                self.now = t;
                true
            }
            None => false,
        }
    }

    /// Handles events up to (and including) time `t`, then sets now = t.
    pub fn run_until_time(&mut self, t: Instant) {
        loop {
            if let Some(ev) = self.sim.poll_event(self.now) {
                self.handle(ev);
                continue;
            }
            match self.sim.next_event_time() {
                Some(n) if n <= t => self.now = n,
                _ => break,
            }
        }
        self.now = self.now.max(t);
    }

    pub fn run_idle(&mut self) {
        for _ in 0..1_000_000 {
            if !self.step() {
                return;
            }
        }
        panic!("simulation never went idle");
    }

    fn handle(&mut self, ev: NetEvent) {
        let at = self.now - self.t0;
        match ev {
            NetEvent::Connected(c) => {
                self.trace.push((at, format!("connected {c}")));
                self.connected.insert(c);
            }
            NetEvent::ConnectFailed(c) => {
                self.trace.push((at, format!("connect failed {c}")));
                self.failed.insert(c);
            }
            NetEvent::Closed(c) => {
                self.trace.push((at, format!("closed {c}")));
                self.closed.insert(c);
            }
            NetEvent::Data(c, b) => {
                self.trace.push((at, format!("data {c} {:?}", &b[..])));
                let buf = self.bufs.entry(c).or_default();
                buf.extend_from_slice(&b);
                while buf.len() >= 4 {
                    let n = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                    if buf.len() < 4 + n {
                        break;
                    }
                    let frame: Vec<u8> = buf.drain(..4 + n).skip(4).collect();
                    self.frames
                        .entry(c)
                        .or_default()
                        .push_back(Bytes::from(frame));
                }
            }
            other => panic!("unexpected event {other:?}"),
        }
    }

    pub fn connect_to(&mut self, node_id: i32) -> ConnId {
        let (host, port) = (format!("broker-{node_id}"), 9092);
        let c = self.sim.connect(self.now, &host, port);
        while !self.connected.contains(&c) && !self.failed.contains(&c) {
            assert!(self.step(), "connect never completed");
        }
        c
    }

    pub fn send<R: Encodable>(&mut self, conn: ConnId, api: ApiKey, version: i16, req: &R) -> i32 {
        let corr = self.next_corr;
        self.next_corr += 1;
        let frame = encode_request(api, version, corr, req);
        self.sim.write(self.now, conn, &frame);
        corr
    }

    /// Waits for the next response frame on `conn`; None if the connection closed first or the
    /// simulation went idle.
    pub fn recv_frame(&mut self, conn: ConnId) -> Option<Bytes> {
        loop {
            if let Some(f) = self.frames.get_mut(&conn).and_then(|q| q.pop_front()) {
                return Some(f);
            }
            if self.closed.contains(&conn) || !self.step() {
                return None;
            }
        }
    }

    /// Waits for and decodes the next response on `conn`, checking the correlation id.
    pub fn recv<T: Decodable>(&mut self, conn: ConnId, api: ApiKey, version: i16, corr: i32) -> T {
        let frame = self.recv_frame(conn).expect("no response");
        let (c, body) = decode_response::<T>(api, version, frame);
        assert_eq!(c, corr, "correlation id");
        body
    }

    pub fn roundtrip<R: Encodable, T: Decodable>(
        &mut self,
        conn: ConnId,
        api: ApiKey,
        version: i16,
        req: &R,
    ) -> T {
        let corr = self.send(conn, api, version, req);
        self.recv(conn, api, version, corr)
    }

    pub fn pending_frames(&self, conn: ConnId) -> usize {
        self.frames.get(&conn).map_or(0, |q| q.len())
    }

    pub fn init_pid(&mut self, conn: ConnId, version: i16) -> (i64, i16) {
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = None;
        req.transaction_timeout_ms = i32::MAX;
        let r: kafka_protocol::messages::InitProducerIdResponse =
            self.roundtrip(conn, ApiKey::InitProducerId, version, &req);
        assert_eq!(r.error_code, ErrorCode::NONE.0);
        (r.producer_id.0, r.producer_epoch)
    }

    /// Sends one Produce with one batch per (topic, partition) and waits for the response.
    pub fn produce(
        &mut self,
        conn: ConnId,
        version: i16,
        acks: i16,
        parts: &[(&str, i32, Bytes)],
    ) -> Option<ProduceResponse> {
        let req = produce_request(acks, parts);
        let corr = self.send(conn, ApiKey::Produce, version, &req);
        if acks == 0 {
            return None;
        }
        Some(self.recv(conn, ApiKey::Produce, version, corr))
    }

    /// Produce a single partition; returns (error code, base offset).
    pub fn produce1(
        &mut self,
        conn: ConnId,
        version: i16,
        topic: &str,
        partition: i32,
        batch: Bytes,
    ) -> (ErrorCode, i64) {
        let r = self
            .produce(conn, version, -1, &[(topic, partition, batch)])
            .expect("response");
        let p = &r.responses[0].partition_responses[0];
        (ErrorCode(p.error_code), p.base_offset)
    }
}

pub fn encode_request<R: Encodable>(api: ApiKey, version: i16, corr: i32, req: &R) -> Vec<u8> {
    let mut header = RequestHeader::default();
    header.request_api_key = api as i16;
    header.request_api_version = version;
    header.correlation_id = corr;
    header.client_id = Some(StrBytes::from_static_str("sim-test"));
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0, 0, 0, 0]);
    header
        .encode(&mut buf, api.request_header_version(version))
        .unwrap();
    req.encode(&mut buf, version).unwrap();
    let n = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&n.to_be_bytes());
    buf.to_vec()
}

pub fn decode_response<T: Decodable>(api: ApiKey, version: i16, frame: Bytes) -> (i32, T) {
    let mut b = frame;
    let h = ResponseHeader::decode(&mut b, api.response_header_version(version)).unwrap();
    let body = T::decode(&mut b, version).unwrap();
    assert!(b.is_empty(), "{} trailing bytes in the response", b.len());
    (h.correlation_id, body)
}

/// Describes a batch to encode.
#[derive(Clone, Copy)]
pub struct B {
    pub pid: i64,
    pub epoch: i16,
    pub seq: i32,
    pub n: usize,
    pub compression: Compression,
    pub ts: i64,
}

impl B {
    pub fn plain(n: usize) -> B {
        B {
            pid: -1,
            epoch: -1,
            seq: -1,
            n,
            compression: Compression::None,
            ts: 1_700_000_000_000,
        }
    }
    pub fn idem(pid: i64, epoch: i16, seq: i32, n: usize) -> B {
        B {
            pid,
            epoch,
            seq,
            ..B::plain(n)
        }
    }
    pub fn compressed(mut self, c: Compression) -> B {
        self.compression = c;
        self
    }
}

/// Encodes a RecordBatch with kafka-protocol: keys `k<i>`, values `v<seq+i>` (or `v<i>`), one
/// header `h=<i>` and timestamps ts+i.
pub fn batch(b: B) -> Bytes {
    let records: Vec<Record> = (0..b.n)
        .map(|i| {
            let mut headers = IndexMap::new();
            headers.insert(
                StrBytes::from_string("h".to_string()),
                Some(Bytes::from(i.to_string())),
            );
            let label = if b.seq >= 0 {
                i64::from(b.seq) + i as i64
            } else {
                i as i64
            };
            Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: b.pid,
                producer_epoch: b.epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // kafka-protocol groups records into one batch while `offset - sequence` stays
                // constant, and writes the first record's sequence as the base sequence.
                sequence: b.seq.wrapping_add(i as i32),
                timestamp: b.ts + i as i64,
                key: Some(Bytes::from(format!("k{i}"))),
                value: Some(Bytes::from(format!("v{label}"))),
                headers,
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: b.compression,
        },
    )
    .unwrap();
    buf.freeze()
}

pub fn produce_request(acks: i16, parts: &[(&str, i32, Bytes)]) -> ProduceRequest {
    let mut req = ProduceRequest::default();
    req.acks = acks;
    req.timeout_ms = 30_000;
    for (topic, partition, records) in parts {
        let mut pd = PartitionProduceData::default();
        pd.index = *partition;
        pd.records = Some(records.clone());
        let existing = req
            .topic_data
            .iter_mut()
            .find(|t| t.name.0.as_str() == *topic);
        match existing {
            Some(t) => t.partition_data.push(pd),
            None => {
                let mut td = TopicProduceData::default();
                td.name = TopicName(StrBytes::from_string(topic.to_string()));
                td.partition_data.push(pd);
                req.topic_data.push(td);
            }
        }
    }
    req
}

pub fn metadata_request(topics: Option<&[&str]>) -> MetadataRequest {
    let mut req = MetadataRequest::default();
    req.topics = topics.map(|ts| {
        ts.iter()
            .map(|t| {
                let mut mt =
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default();
                mt.name = Some(TopicName(StrBytes::from_string(t.to_string())));
                mt
            })
            .collect()
    });
    req
}

pub fn api_versions_request() -> ApiVersionsRequest {
    let mut req = ApiVersionsRequest::default();
    req.client_software_name = StrBytes::from_static_str("sim-test");
    req.client_software_version = StrBytes::from_static_str("0.1.0");
    req
}

/// A cluster of `n` brokers with a fixed 1 ms latency.
pub fn cluster(n: usize, seed: u64) -> Client {
    let mut cfg = SimConfig::with_brokers(n, seed);
    cfg.latency = (Duration::from_millis(1), Duration::from_millis(1));
    Client::new(cfg)
}
