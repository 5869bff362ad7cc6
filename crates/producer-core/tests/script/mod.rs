//! A scripted cluster that drives a [`Producer`] by hand, in virtual time, for tests that need
//! to put exact bytes in a broker's answer.
//!
//! Every connection the producer asks for connects at once (to the node whose address it
//! names). Requests are decoded with the independent `kafka-protocol` codec and answered: a
//! Metadata request from the cluster model (brokers, topics with their partition counts,
//! partition p led by the (p mod n)-th broker), or with crafted bodies the test queued; a
//! Produce request with every partition appended at the next offsets, checking each
//! idempotent batch's epoch and sequence as a broker does; ApiVersions and InitProducerId with
//! fixed answers. Answers go back through `handle_read` in the order requests were written.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey as KpApiKey, ApiVersionsResponse, BrokerId, InitProducerIdResponse, MetadataRequest,
    MetadataResponse, ProduceRequest, ProduceResponse, ProducerId, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use producer_core::{ConnId, Delivery, Event, Output, Producer};

/// The API versions the scripted brokers offer: Metadata v1 (so crafted bodies are plain
/// big-endian fields), Produce up to v12 (topics by name), InitProducerId up to v4.
const OFFERED: &[(i16, i16, i16)] = &[(0, 3, 12), (3, 1, 1), (18, 0, 3), (22, 0, 4)];

/// OUT_OF_ORDER_SEQUENCE_NUMBER and INVALID_PRODUCER_EPOCH, as a broker answers them.
pub const OUT_OF_ORDER_SEQUENCE: i16 = 45;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;

/// One request the producer wrote.
#[derive(Debug, Clone)]
pub struct Request {
    pub conn: ConnId,
    pub node_id: i32,
    pub api_key: i16,
    pub version: i16,
    pub correlation_id: i32,
    pub body: Bytes,
    pub at: Instant,
}

/// One batch a scripted broker appended (or refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub topic: String,
    pub partition: i32,
    pub records: i32,
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
    /// The error code it was answered with (0: appended).
    pub error: i16,
}

/// An answer in its connection's order: the correlation id, and the frame once there is one.
type Answer = (i32, Option<Vec<u8>>);

/// One idempotent producer's state in one partition: its epoch and next sequence.
#[derive(Debug, Clone, Copy)]
struct ProducerState {
    epoch: i16,
    next_sequence: i32,
}

/// The scripted cluster with its producer.
pub struct Script {
    pub producer: Producer<u64>,
    pub now: Instant,
    /// Node id, host, port of every broker the cluster lists.
    pub brokers: Vec<(i32, String, u16)>,
    /// Topic name -> partition count.
    pub topics: BTreeMap<String, i32>,
    /// Crafted Metadata v1 bodies, answered before the model is.
    pub crafted_metadata: VecDeque<Vec<u8>>,
    /// `throttle_time_ms` of the next Produce answers.
    pub produce_throttle: VecDeque<i32>,
    /// Metadata requests are held instead of answered (see [`Script::answer`]).
    pub hold_metadata: bool,
    /// Produce requests to this node are held (never answered, nothing appended).
    hold_produce: Option<i32>,
    pub held: Vec<Request>,
    pub requests: Vec<Request>,
    pub appended: Vec<Appended>,
    pub deliveries: Vec<Delivery<u64>>,
    pub events: Vec<Event>,
    /// Connections the producer closed.
    pub disconnected: Vec<ConnId>,
    conns: HashMap<ConnId, i32>,
    /// Per connection, the answers in request order (`None`: a held request not yet
    /// answered, which the answers after it wait for, as a broker answers in order).
    pending: HashMap<ConnId, VecDeque<Answer>>,
    offsets: HashMap<(String, i32), i64>,
    producers: HashMap<(String, i32, i64), ProducerState>,
}

impl Script {
    /// A cluster of `brokers` nodes (ids 1..=n, hosts `b1`, `b2`, ...), the producer
    /// bootstrapping from the first.
    pub fn new(
        brokers: i32,
        topics: &[(&str, i32)],
        config: impl FnOnce(producer_core::ConfigBuilder) -> producer_core::ConfigBuilder,
    ) -> Script {
        let now = Instant::now();
        let config = config(producer_core::Config::builder([("b1", 9092)]).seed(17))
            .build()
            .expect("a valid configuration");
        Script {
            producer: Producer::new(config, now),
            now,
            brokers: (1..=brokers).map(|i| (i, format!("b{i}"), 9092)).collect(),
            topics: topics.iter().map(|&(t, n)| (t.to_string(), n)).collect(),
            crafted_metadata: VecDeque::new(),
            produce_throttle: VecDeque::new(),
            hold_metadata: false,
            hold_produce: None,
            held: Vec::new(),
            requests: Vec::new(),
            appended: Vec::new(),
            deliveries: Vec::new(),
            events: Vec::new(),
            disconnected: Vec::new(),
            conns: HashMap::new(),
            pending: HashMap::new(),
            offsets: HashMap::new(),
            producers: HashMap::new(),
        }
    }

    /// Holds every Produce request to `node` from now on: no answer, nothing appended.
    pub fn hold_produce_for(&mut self, node: i32) {
        self.hold_produce = Some(node);
    }

    /// Sends a record with `opaque` at the current virtual time.
    pub fn send(&mut self, topic: &str, key: &str, opaque: u64) {
        let record =
            producer_core::Record::new(topic, format!("value {opaque}")).with_key(key.to_owned());
        if let Err(e) = self.producer.send(self.now, record, opaque) {
            panic!("send refused: {:?}", e.reason);
        }
    }

    /// Carries out every output, and reads every answer, until neither is left.
    pub fn drain(&mut self) {
        for _ in 0..1_000_000 {
            if let Some(out) = self.producer.poll_output() {
                self.execute(out);
                continue;
            }
            let ready = self
                .pending
                .iter()
                .find(|(_, q)| q.front().is_some_and(|(_, a)| a.is_some()))
                .map(|(&c, _)| c);
            let Some(conn) = ready else {
                return;
            };
            let (_, frame) = self.pending.get_mut(&conn).unwrap().pop_front().unwrap();
            if self.conns.contains_key(&conn) {
                self.producer.handle_read(self.now, conn, &frame.unwrap());
            } else {
                self.pending.remove(&conn);
            }
        }
        panic!("the producer did not settle");
    }

    /// Runs for `d` of virtual time: drains, then moves to each deadline and fires it.
    pub fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        loop {
            self.drain();
            match self.producer.poll_timeout() {
                Some(at) if at <= limit => {
                    self.now = self.now.max(at);
                    self.producer.handle_timeout(self.now);
                }
                _ => break,
            }
        }
        self.now = limit;
        self.producer.handle_timeout(self.now);
        self.drain();
    }

    /// Runs until `done` holds, for at most `d` of virtual time; returns whether it held.
    pub fn run_until(&mut self, d: Duration, mut done: impl FnMut(&Script) -> bool) -> bool {
        let limit = self.now + d;
        loop {
            self.drain();
            if done(self) {
                return true;
            }
            match self.producer.poll_timeout() {
                Some(at) if at <= limit => {
                    self.now = self.now.max(at);
                    self.producer.handle_timeout(self.now);
                }
                _ => {
                    self.now = limit;
                    self.producer.handle_timeout(self.now);
                    self.drain();
                    return done(self);
                }
            }
        }
    }

    /// Answers a held request with `body` (its response header is added).
    pub fn answer(&mut self, req: &Request, body: &[u8]) {
        let frame = frame(req, body);
        self.queue(req, Some(frame));
    }

    /// A held request the test answered itself, through `handle_read`: the answers after it
    /// on its connection no longer wait for it.
    pub fn answered_directly(&mut self, req: &Request) {
        if let Some(q) = self.pending.get_mut(&req.conn) {
            q.retain(|(c, _)| *c != req.correlation_id);
        }
    }

    /// Puts an answer (or, `None`, a place for a held one) in its connection's order.
    fn queue(&mut self, req: &Request, frame: Option<Vec<u8>>) {
        let q = self.pending.entry(req.conn).or_default();
        match q.iter_mut().find(|(c, _)| *c == req.correlation_id) {
            Some(slot) => slot.1 = frame,
            None => q.push_back((req.correlation_id, frame)),
        }
    }

    /// The opaque values reported delivered, and those reported failed.
    pub fn outcomes(&self) -> (Vec<u64>, Vec<u64>) {
        let mut ok = Vec::new();
        let mut failed = Vec::new();
        for d in &self.deliveries {
            match &d.result {
                Ok(_) => ok.push(d.opaque),
                Err(_) => failed.push(d.opaque),
            }
        }
        (ok, failed)
    }

    /// The node id a connection goes to.
    pub fn node_of(&self, conn: ConnId) -> Option<i32> {
        self.conns.get(&conn).copied()
    }

    /// Requests of API `api_key` written so far.
    pub fn count(&self, api_key: i16) -> usize {
        self.requests
            .iter()
            .filter(|r| r.api_key == api_key)
            .count()
    }

    fn execute(&mut self, out: Output<u64>) {
        match out {
            Output::Connect { conn, host, port } => {
                match self
                    .brokers
                    .iter()
                    .find(|(_, h, p)| *h == host && *p == port)
                {
                    Some(&(node, _, _)) => {
                        self.conns.insert(conn, node);
                        self.producer.handle_connected(self.now, conn);
                    }
                    None => self.producer.handle_connect_failed(
                        self.now,
                        conn,
                        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "no broker"),
                    ),
                }
            }
            Output::Transmit { conn, bytes } => {
                let bytes = Bytes::from(bytes.to_contiguous().to_vec());
                self.on_bytes(conn, bytes);
            }
            Output::Disconnect { conn } => {
                self.conns.remove(&conn);
                self.pending.remove(&conn);
                self.disconnected.push(conn);
            }
            Output::Delivery(d) => self.deliveries.push(d),
            Output::Event(e) => self.events.push(e),
            Output::TokenRequest | Output::Transaction(_) => {}
        }
    }

    fn on_bytes(&mut self, conn: ConnId, mut bytes: Bytes) {
        let node_id = self.conns.get(&conn).copied().unwrap_or(-1);
        while bytes.remaining() >= 4 {
            let size = bytes.get_i32() as usize;
            let mut frame = bytes.split_to(size);
            let api_key = i16::from_be_bytes([frame[0], frame[1]]);
            let version = i16::from_be_bytes([frame[2], frame[3]]);
            let kp_key = KpApiKey::try_from(api_key).expect("a known API");
            let header = RequestHeader::decode(&mut frame, kp_key.request_header_version(version))
                .expect("a valid request header");
            let req = Request {
                conn,
                node_id,
                api_key,
                version,
                correlation_id: header.correlation_id,
                body: frame,
                at: self.now,
            };
            self.requests.push(req.clone());
            self.on_request(req);
        }
    }

    fn on_request(&mut self, req: Request) {
        let body = match req.api_key {
            18 => encode(
                &ApiVersionsResponse::default().with_api_keys(
                    OFFERED
                        .iter()
                        .map(|&(k, lo, hi)| {
                            ApiVersion::default()
                                .with_api_key(k)
                                .with_min_version(lo)
                                .with_max_version(hi)
                        })
                        .collect(),
                ),
                req.version,
            ),
            22 => encode(
                &InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(1000))
                    .with_producer_epoch(0),
                req.version,
            ),
            3 => {
                if self.hold_metadata {
                    self.queue(&req, None);
                    self.held.push(req);
                    return;
                }
                match self.crafted_metadata.pop_front() {
                    Some(body) => body,
                    None => self.metadata(&req),
                }
            }
            0 if self.hold_produce == Some(req.node_id) => {
                self.queue(&req, None);
                self.held.push(req);
                return;
            }
            0 => match self.produce(&req) {
                Some(body) => body,
                None => return, // acks=0
            },
            other => panic!("unexpected request {other}"),
        };
        let frame = frame(&req, &body);
        self.queue(&req, Some(frame));
    }

    /// The model's answer to a Metadata request.
    fn metadata(&self, req: &Request) -> Vec<u8> {
        let asked = MetadataRequest::decode(&mut req.body.clone(), req.version)
            .expect("a valid Metadata request");
        let names: Vec<String> = match asked.topics {
            Some(ts) => ts
                .into_iter()
                .filter_map(|t| t.name.map(|n| n.0.to_string()))
                .collect(),
            None => self.topics.keys().cloned().collect(),
        };
        let brokers = self
            .brokers
            .iter()
            .map(|(id, host, port)| {
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(*id))
                    .with_host(StrBytes::from_string(host.clone()))
                    .with_port(i32::from(*port))
            })
            .collect();
        let topics = names
            .into_iter()
            .map(|name| {
                let topic = MetadataResponseTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(name.clone()))));
                match self.topics.get(&name) {
                    None => topic.with_error_code(3), // UNKNOWN_TOPIC_OR_PARTITION
                    Some(&n) => topic.with_partitions(
                        (0..n)
                            .map(|p| {
                                let leader = self.leader(p);
                                MetadataResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_leader_id(BrokerId(leader))
                                    .with_replica_nodes(vec![BrokerId(leader)])
                                    .with_isr_nodes(vec![BrokerId(leader)])
                            })
                            .collect(),
                    ),
                }
            })
            .collect();
        encode(
            &MetadataResponse::default()
                .with_brokers(brokers)
                .with_controller_id(BrokerId(self.brokers.first().map_or(-1, |b| b.0)))
                .with_topics(topics),
            req.version,
        )
    }

    /// The leader of partition `p` in the model.
    pub fn leader(&self, p: i32) -> i32 {
        self.brokers[p as usize % self.brokers.len()].0
    }

    /// Appends a Produce request's batches and builds its answer (`None` for acks=0).
    fn produce(&mut self, req: &Request) -> Option<Vec<u8>> {
        let produce = ProduceRequest::decode(&mut req.body.clone(), req.version)
            .expect("a valid Produce request");
        if produce.acks == 0 {
            return None;
        }
        let mut resp = ProduceResponse::default()
            .with_throttle_time_ms(self.produce_throttle.pop_front().unwrap_or(0));
        for t in produce.topic_data {
            let name = t.name.0.to_string();
            let mut partitions = Vec::new();
            for p in t.partition_data {
                let records = p.records.expect("a batch");
                let count = i32::from_be_bytes(records[57..61].try_into().unwrap());
                let producer_id = i64::from_be_bytes(records[43..51].try_into().unwrap());
                let epoch = i16::from_be_bytes(records[51..53].try_into().unwrap());
                let base_sequence = i32::from_be_bytes(records[53..57].try_into().unwrap());
                let error = self.check_sequence(&name, p.index, producer_id, epoch, base_sequence);
                let offset = self.offsets.entry((name.clone(), p.index)).or_insert(0);
                let base = *offset;
                if error == 0 {
                    *offset += i64::from(count);
                    if producer_id >= 0 {
                        self.producers.insert(
                            (name.clone(), p.index, producer_id),
                            ProducerState {
                                epoch,
                                next_sequence: base_sequence + count,
                            },
                        );
                    }
                }
                self.appended.push(Appended {
                    topic: name.clone(),
                    partition: p.index,
                    records: count,
                    producer_id,
                    epoch,
                    base_sequence,
                    error,
                });
                partitions.push(
                    PartitionProduceResponse::default()
                        .with_index(p.index)
                        .with_error_code(error)
                        .with_base_offset(if error == 0 { base } else { -1 }),
                );
            }
            resp.responses.push(
                TopicProduceResponse::default()
                    .with_name(TopicName(StrBytes::from_string(name)))
                    .with_partition_responses(partitions),
            );
        }
        Some(encode(&resp, req.version))
    }

    /// A broker's idempotence check of one batch: 0, or the error it is answered with.
    fn check_sequence(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
    ) -> i16 {
        if producer_id < 0 {
            return 0;
        }
        match self
            .producers
            .get(&(topic.to_string(), partition, producer_id))
        {
            None => 0,
            Some(s) if epoch < s.epoch => INVALID_PRODUCER_EPOCH,
            Some(s) if epoch > s.epoch => {
                if base_sequence == 0 {
                    0
                } else {
                    OUT_OF_ORDER_SEQUENCE
                }
            }
            Some(s) if base_sequence == s.next_sequence => 0,
            Some(_) => OUT_OF_ORDER_SEQUENCE,
        }
    }
}

fn encode<T: Encodable>(value: &T, version: i16) -> Vec<u8> {
    let mut buf = bytes::BytesMut::new();
    value
        .encode(&mut buf, version)
        .expect("kafka-protocol encodes");
    buf.to_vec()
}

/// `body` as the answer to `req`: size, correlation id, and the tagged-field byte of a
/// flexible response header.
pub fn frame(req: &Request, body: &[u8]) -> Vec<u8> {
    let kp_key = KpApiKey::try_from(req.api_key).expect("a known API");
    let flexible_header = kp_key.response_header_version(req.version) >= 1;
    let header_len = 4 + usize::from(flexible_header);
    let mut out = Vec::with_capacity(4 + header_len + body.len());
    out.extend_from_slice(&((header_len + body.len()) as i32).to_be_bytes());
    out.extend_from_slice(&req.correlation_id.to_be_bytes());
    if flexible_header {
        out.push(0);
    }
    out.extend_from_slice(body);
    out
}

/// Crafted Metadata v1 bodies, field by field.
pub mod v1 {
    /// A broker entry: node id, host, port, no rack.
    pub fn broker(out: &mut Vec<u8>, node_id: i32, host: &str, port: i32) {
        out.extend_from_slice(&node_id.to_be_bytes());
        string(out, host);
        out.extend_from_slice(&port.to_be_bytes());
        out.extend_from_slice(&(-1i16).to_be_bytes());
    }

    /// A topic entry with no error: name, not internal, and its partitions given as
    /// (index, leader), each replicated on its leader only.
    pub fn topic(out: &mut Vec<u8>, name: &str, partitions: &[(i32, i32)]) {
        out.extend_from_slice(&0i16.to_be_bytes());
        string(out, name);
        out.push(0);
        out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        for &(index, leader) in partitions {
            out.extend_from_slice(&0i16.to_be_bytes());
            out.extend_from_slice(&index.to_be_bytes());
            out.extend_from_slice(&leader.to_be_bytes());
            for _ in 0..2 {
                out.extend_from_slice(&1i32.to_be_bytes());
                out.extend_from_slice(&leader.to_be_bytes());
            }
        }
    }

    /// A whole body: brokers, controller, topics.
    pub fn body(brokers: &[(i32, &str, i32)], topics: &[(&str, &[(i32, i32)])]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(brokers.len() as i32).to_be_bytes());
        for &(id, host, port) in brokers {
            broker(&mut out, id, host, port);
        }
        out.extend_from_slice(&brokers.first().map_or(-1, |b| b.0).to_be_bytes());
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for &(name, partitions) in topics {
            topic(&mut out, name, partitions);
        }
        out
    }

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as i16).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    }
}
