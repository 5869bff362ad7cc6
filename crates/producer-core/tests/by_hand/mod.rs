//! A producer driven by hand against scripted answers, each request decoded and each answer
//! encoded by the independent `kafka-protocol` codec: what the producer puts on the wire is
//! read as a broker would read it, and nothing it is told comes from its own encoder.

#![allow(dead_code)] // each test file uses part of it

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, MetadataRequest, MetadataResponse, RequestHeader,
    ResponseHeader, SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use producer_core::{ConnId, Delivery, Event, Output, Producer};

/// One request the producer wrote: its connection, its header as kafka-protocol reads it, and
/// its body (undecoded: the test decodes it at `header.request_api_version`).
#[derive(Debug, Clone)]
pub struct Request {
    pub conn: ConnId,
    pub api: ApiKey,
    pub header: RequestHeader,
    pub body: Bytes,
}

/// The producer and what it said.
pub struct Scripted {
    pub producer: Producer<u32>,
    pub now: Instant,
    /// Connections asked for, with the host they were for, in order.
    pub connects: Vec<(ConnId, String)>,
    /// Every request written, in order.
    pub requests: Vec<Request>,
    pub events: Vec<Event>,
    pub deliveries: Vec<Delivery<u32>>,
    /// How many `TokenRequest`s were emitted.
    pub token_requests: usize,
    /// The `Debug` text of every output, as a driver that logs them would print it.
    pub debug_log: Vec<String>,
}

impl Scripted {
    pub fn new(producer: Producer<u32>, now: Instant) -> Self {
        Scripted {
            producer,
            now,
            connects: Vec::new(),
            requests: Vec::new(),
            events: Vec::new(),
            deliveries: Vec::new(),
            token_requests: 0,
            debug_log: Vec::new(),
        }
    }

    /// Drains the producer's outputs: connections are reported connected at once, requests
    /// are decoded and kept, events and reports kept.
    pub fn pump(&mut self) {
        while let Some(out) = self.producer.poll_output() {
            self.debug_log.push(format!("{out:?}"));
            match out {
                Output::Connect { conn, host, .. } => {
                    self.connects.push((conn, host));
                    self.producer.handle_connected(self.now, conn);
                }
                Output::Transmit { conn, bytes } => {
                    let mut all = bytes.to_contiguous();
                    while !all.is_empty() {
                        let size = i32::from_be_bytes(all[..4].try_into().unwrap()) as usize;
                        let mut frame = all.slice(4..4 + size);
                        all = all.slice(4 + size..);
                        let key = i16::from_be_bytes([frame[0], frame[1]]);
                        let version = i16::from_be_bytes([frame[2], frame[3]]);
                        let api = ApiKey::try_from(key).expect("a known api key");
                        let header =
                            RequestHeader::decode(&mut frame, api.request_header_version(version))
                                .expect("kafka-protocol reads the request header");
                        self.requests.push(Request {
                            conn,
                            api,
                            header,
                            body: frame,
                        });
                    }
                }
                Output::Disconnect { .. } | Output::Transaction(_) => {}
                Output::TokenRequest => self.token_requests += 1,
                Output::Delivery(d) => self.deliveries.push(d),
                Output::Event(e) => self.events.push(e),
            }
        }
    }

    /// The first request of `api` not answered yet (taken out of the list).
    pub fn take(&mut self, api: ApiKey) -> Request {
        let i = self
            .requests
            .iter()
            .position(|r| r.api == api)
            .unwrap_or_else(|| panic!("no {api:?} request among {:?}", self.apis()));
        self.requests.remove(i)
    }

    /// The api keys of the requests not answered yet.
    pub fn apis(&self) -> Vec<ApiKey> {
        self.requests.iter().map(|r| r.api).collect()
    }

    /// Answers `req` with `body` (encoded by kafka-protocol at the request's version), then
    /// drains the outputs.
    pub fn answer(&mut self, req: &Request, body: &impl Encodable) {
        self.answer_undrained(req, body);
        self.pump();
    }

    /// Answers `req` with `body`, leaving the outputs it causes in the producer's queue.
    pub fn answer_undrained(&mut self, req: &Request, body: &impl Encodable) {
        let version = req.header.request_api_version;
        let mut head = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(req.header.correlation_id)
            .encode(&mut head, req.api.response_header_version(version))
            .unwrap();
        let mut payload = BytesMut::new();
        body.encode(&mut payload, version).unwrap();
        let mut frame = ((head.len() + payload.len()) as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&head);
        frame.extend_from_slice(&payload);
        self.producer.handle_read(self.now, req.conn, &frame);
    }

    /// Answers the next ApiVersions with the versions a Kafka 4 broker offers (SASL included).
    pub fn answer_api_versions(&mut self) {
        let req = self.take(ApiKey::ApiVersions);
        let keys = [
            (ApiKey::Produce, 3, 11),
            (ApiKey::Metadata, 1, 12),
            (ApiKey::ApiVersions, 0, 3),
            (ApiKey::InitProducerId, 0, 4),
            (ApiKey::SaslHandshake, 0, 1),
            (ApiKey::SaslAuthenticate, 0, 2),
        ];
        let body = ApiVersionsResponse::default().with_api_keys(
            keys.iter()
                .map(|&(k, min, max)| {
                    ApiVersion::default()
                        .with_api_key(k as i16)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        );
        self.answer(&req, &body);
    }

    /// Answers the next SaslHandshake: the broker enables `mechanism`.
    pub fn answer_handshake(&mut self, mechanism: &'static str) {
        let req = self.take(ApiKey::SaslHandshake);
        let body = SaslHandshakeResponse::default()
            .with_mechanisms(vec![StrBytes::from_static_str(mechanism)]);
        self.answer(&req, &body);
    }

    /// Answers the next Metadata: one broker (node 0 at `host`:9092) leads every partition of
    /// each topic asked for, which has `partitions` partitions.
    pub fn answer_metadata(&mut self, host: &str, partitions: i32) {
        let req = self.take(ApiKey::Metadata);
        let version = req.header.request_api_version;
        let asked = MetadataRequest::decode(&mut req.body.clone(), version)
            .expect("kafka-protocol reads the Metadata request");
        let topics = asked
            .topics
            .unwrap_or_default()
            .into_iter()
            .filter_map(|t| t.name)
            .map(|name| {
                MetadataResponseTopic::default()
                    .with_name(Some(name))
                    .with_partitions(
                        (0..partitions)
                            .map(|p| {
                                MetadataResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_leader_id(BrokerId(0))
                                    .with_replica_nodes(vec![BrokerId(0)])
                                    .with_isr_nodes(vec![BrokerId(0)])
                            })
                            .collect(),
                    )
            })
            .collect();
        let body = MetadataResponse::default()
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(0))
                .with_host(StrBytes::from_string(host.to_string()))
                .with_port(9092)])
            .with_topics(topics);
        self.answer(&req, &body);
    }

    /// The topics named by every Metadata request not answered yet.
    pub fn metadata_topics_asked(&self) -> Vec<String> {
        self.requests
            .iter()
            .filter(|r| r.api == ApiKey::Metadata)
            .flat_map(|r| {
                let asked =
                    MetadataRequest::decode(&mut r.body.clone(), r.header.request_api_version)
                        .expect("kafka-protocol reads the Metadata request");
                asked
                    .topics
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|t| t.name.map(|n: TopicName| n.0.to_string()))
            })
            .collect()
    }
}
