//! A scripted cluster for hand-driving a `Producer` with crafted answers: every request the
//! producer writes is decoded by `kafka-protocol` (an independent codec), handed to the test's
//! script with the node it went to, and the script's answer (a response built with
//! `kafka-protocol`, or raw bytes, or nothing) is fed back. Time is virtual: the test moves it.

#![allow(dead_code)]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, InitProducerIdResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use producer_core::{ConnId, Delivery, Event, Output, Producer};

/// A request the producer wrote, decoded.
#[derive(Debug)]
pub struct Request {
    /// The node it went to (its index in the cluster's broker list; the bootstrap address is
    /// node 0's).
    pub node: i32,
    pub api: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    /// The connection it came on.
    pub conn: ConnId,
    /// The request body, not yet decoded.
    pub body: Bytes,
    pub at: Instant,
}

impl Request {
    /// The Produce request, decoded.
    pub fn produce(&self) -> ProduceRequest {
        ProduceRequest::decode(&mut self.body.clone(), self.version).expect("a Produce request")
    }
}

/// Writes a response body at a version.
type Encoder = Box<dyn FnOnce(&mut BytesMut, i16)>;

/// What the script answers to a request.
pub enum Answer {
    /// This response (encoded by kafka-protocol at the request's version).
    Encode(Encoder),
    /// No answer (the request stays in flight).
    Nothing,
}

impl Answer {
    pub fn with<R: Encodable + 'static>(resp: R) -> Answer {
        Answer::Encode(Box::new(move |buf, v| {
            resp.encode(buf, v).expect("the script's response encodes")
        }))
    }
}

/// The API versions the scripted brokers offer: Produce up to v11 (leader hints, topics named
/// by name), Metadata up to v12, InitProducerId up to v4.
pub const VERSIONS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::InitProducerId, 0, 4),
];

/// A scripted cluster of `brokers` nodes (0..n) at `broker-<n>:9092`, each topic's partitions
/// led as `leaders` says.
pub struct Scripted {
    pub producer: Producer<u32>,
    pub now: Instant,
    pub brokers: i32,
    /// Topic -> leader of each partition.
    pub leaders: HashMap<String, Vec<i32>>,
    /// Topic -> the error code Metadata gives it (with its partitions still listed).
    pub topic_errors: HashMap<String, i16>,
    /// Open connections: which node each is to.
    conns: HashMap<ConnId, i32>,
    /// Every request written, in order.
    pub requests: Vec<Request>,
    pub deliveries: Vec<Delivery<u32>>,
    pub events: Vec<Event>,
    /// The versions each node offers (defaults to [`VERSIONS`]).
    pub versions: HashMap<i32, Vec<(ApiKey, i16, i16)>>,
    next_producer_id: i64,
}

impl Scripted {
    pub fn new(producer: Producer<u32>, now: Instant, brokers: i32) -> Scripted {
        Scripted {
            producer,
            now,
            brokers,
            leaders: HashMap::new(),
            topic_errors: HashMap::new(),
            conns: HashMap::new(),
            requests: Vec::new(),
            deliveries: Vec::new(),
            events: Vec::new(),
            versions: HashMap::new(),
            next_producer_id: 1000,
        }
    }

    /// The bootstrap list to configure the producer with.
    pub fn bootstrap() -> Vec<(String, u16)> {
        vec![("broker-0".to_string(), 9092)]
    }

    /// Drives the producer until it has nothing more to do at the current time, answering every
    /// request with `script` (which gets the default answer for ApiVersions, Metadata and
    /// InitProducerId when it returns `None`).
    pub fn run(&mut self, script: &mut dyn FnMut(&Request) -> Option<Answer>) {
        loop {
            let mut progressed = false;
            if self.producer.poll_timeout().is_some_and(|t| t <= self.now) {
                self.producer.handle_timeout(self.now);
                progressed = true;
            }
            while let Some(o) = self.producer.poll_output() {
                progressed = true;
                self.output(o, script);
            }
            if !progressed {
                return;
            }
        }
    }

    /// Moves time forward by `d` in steps no longer than `step`, running at each step.
    pub fn advance(
        &mut self,
        d: Duration,
        step: Duration,
        script: &mut dyn FnMut(&Request) -> Option<Answer>,
    ) {
        let end = self.now + d;
        while self.now < end {
            let next = self
                .producer
                .poll_timeout()
                .filter(|t| *t > self.now)
                .unwrap_or(self.now + step)
                .min(self.now + step)
                .min(end);
            self.now = next;
            self.run(script);
        }
    }

    fn output(&mut self, o: Output<u32>, script: &mut dyn FnMut(&Request) -> Option<Answer>) {
        match o {
            Output::Connect { conn, host, port } => {
                assert_eq!(port, 9092);
                let node: i32 = host
                    .strip_prefix("broker-")
                    .and_then(|n| n.parse().ok())
                    .expect("a scripted broker's name");
                self.conns.insert(conn, node);
                self.producer.handle_connected(self.now, conn);
            }
            Output::Transmit { conn, bytes } => {
                let node = self.conns[&conn];
                let all = bytes.to_contiguous();
                let mut frames = &all[..];
                while frames.len() >= 4 {
                    let size = i32::from_be_bytes(frames[..4].try_into().unwrap()) as usize;
                    let frame = Bytes::copy_from_slice(&frames[4..4 + size]);
                    frames = &frames[4 + size..];
                    self.request(conn, node, frame, script);
                }
            }
            Output::Disconnect { conn } => {
                self.conns.remove(&conn);
            }
            Output::Delivery(d) => self.deliveries.push(d),
            Output::Event(e) => self.events.push(e),
            Output::TokenRequest | Output::Transaction(_) => {}
        }
    }

    fn request(
        &mut self,
        conn: ConnId,
        node: i32,
        frame: Bytes,
        script: &mut dyn FnMut(&Request) -> Option<Answer>,
    ) {
        let key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let api = ApiKey::try_from(key).expect("a known api key");
        let mut buf = frame.clone();
        let header = RequestHeader::decode(&mut buf, api.request_header_version(version))
            .expect("a request header");
        let req = Request {
            node,
            api,
            version,
            correlation_id: header.correlation_id,
            conn,
            body: buf,
            at: self.now,
        };
        let answer = match script(&req) {
            Some(a) => a,
            None => self.default_answer(&req),
        };
        let (api, version, correlation_id) = (req.api, req.version, req.correlation_id);
        self.requests.push(req);
        self.reply(conn, api, version, correlation_id, answer);
    }

    /// Feeds `answer` to the request `correlation_id` (of `api` at `version`) on `conn`: for a
    /// script that answered [`Answer::Nothing`] and answers later.
    pub fn reply(
        &mut self,
        conn: ConnId,
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        answer: Answer,
    ) {
        let Answer::Encode(encode) = answer else {
            return;
        };
        let mut out = BytesMut::new();
        out.extend_from_slice(&[0; 4]);
        let mut rh = ResponseHeader::default();
        rh.correlation_id = correlation_id;
        rh.encode(&mut out, api.response_header_version(version))
            .unwrap();
        encode(&mut out, version);
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        self.producer.handle_read(self.now, conn, &out);
    }

    /// ApiVersions, Metadata (the brokers and `leaders`) and InitProducerId answered as a
    /// healthy cluster would; anything else gets no answer.
    pub fn default_answer(&mut self, req: &Request) -> Answer {
        match req.api {
            ApiKey::ApiVersions => {
                let mut resp = ApiVersionsResponse::default();
                let versions = self
                    .versions
                    .get(&req.node)
                    .cloned()
                    .unwrap_or_else(|| VERSIONS.to_vec());
                for (k, lo, hi) in versions {
                    let mut v = ApiVersion::default();
                    v.api_key = k as i16;
                    v.min_version = lo;
                    v.max_version = hi;
                    resp.api_keys.push(v);
                }
                Answer::with(resp)
            }
            ApiKey::Metadata => {
                let asked = MetadataRequest::decode(&mut req.body.clone(), req.version).unwrap();
                Answer::with(self.metadata(asked))
            }
            ApiKey::InitProducerId => {
                let mut resp = InitProducerIdResponse::default();
                resp.producer_id = self.next_producer_id.into();
                resp.producer_epoch = 0;
                self.next_producer_id += 1;
                Answer::with(resp)
            }
            _ => Answer::Nothing,
        }
    }

    /// The cluster's metadata: every broker, and the topics asked for.
    pub fn metadata(&self, asked: MetadataRequest) -> MetadataResponse {
        let mut resp = MetadataResponse::default();
        for n in 0..self.brokers {
            let mut b = MetadataResponseBroker::default();
            b.node_id = n.into();
            b.host = StrBytes::from_string(format!("broker-{n}"));
            b.port = 9092;
            resp.brokers.push(b);
        }
        for t in asked.topics.unwrap_or_default() {
            let name = t.name.unwrap().0.to_string();
            let mut mt = MetadataResponseTopic::default();
            mt.name = Some(TopicName(StrBytes::from_string(name.clone())));
            match self.leaders.get(&name) {
                Some(leaders) => {
                    for (i, &l) in leaders.iter().enumerate() {
                        let mut mp = MetadataResponsePartition::default();
                        mp.partition_index = i as i32;
                        mp.leader_id = l.into();
                        mp.leader_epoch = 0;
                        mt.partitions.push(mp);
                    }
                }
                None => mt.error_code = producer_core::ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
            }
            if let Some(&code) = self.topic_errors.get(&name) {
                mt.error_code = code;
            }
            resp.topics.push(mt);
        }
        resp
    }

    /// The Produce requests written so far.
    pub fn produce_requests(&self) -> impl Iterator<Item = &Request> {
        self.requests.iter().filter(|r| r.api == ApiKey::Produce)
    }
}
