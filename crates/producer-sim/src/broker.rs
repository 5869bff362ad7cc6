//! Broker-side request handling: decode with `kafka-protocol`, apply the rules, encode the
//! response with `kafka-protocol`.

use crate::wire::{self, BATCH_HEADER_LEN};
use crate::{
    later, BatchMeta, ConnId, LoggedRecord, ProducePartitionRecord, ProducerEntry, RequestRecord,
    SimCluster, API_API_VERSIONS, API_INIT_PRODUCER_ID, API_METADATA, API_PRODUCE,
    SIM_CAPABILITIES,
};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, InitProducerIdRequest, InitProducerIdResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, RequestHeader,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

const NONE: i16 = 0;
const CORRUPT_MESSAGE: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const INVALID_REQUIRED_ACKS: i16 = 21;
const UNSUPPORTED_VERSION: i16 = 35;
const INVALID_REQUEST: i16 = 42;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
const PRODUCER_FENCED: i16 = 90;
const UNKNOWN_TOPIC_ID: i16 = 100;

/// Number of batches whose metadata the broker keeps per producer (Kafka's
/// `NUM_BATCHES_TO_RETAIN`).
const BATCHES_TO_RETAIN: usize = 5;

/// What the broker does after handling a request.
enum Reply {
    /// Send this response frame.
    Respond(Vec<u8>),
    /// Send nothing (acks=0 without error).
    Silent,
    /// Close the connection without a response; the reason was recorded as a violation (or is
    /// Kafka's normal behaviour, like acks=0 errors).
    Close,
}

/// Result of one Produce partition.
/// Produce errors that depend on a batch's contents or sequence, which a broker never returns
/// for an exact retry of a batch it already appended (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
/// RECORD_LIST_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_RECORD).
const CONTENT_ERRORS: [i16; 6] = [2, 10, 18, 45, 59, 87];

struct PartOutcome {
    code: i16,
    base_offset: i64,
    message: Option<String>,
    leader_hint: Option<(i32, i32)>,
    appended: bool,
}

impl PartOutcome {
    fn err(code: i16, message: impl Into<String>) -> Self {
        PartOutcome {
            code,
            base_offset: -1,
            message: Some(message.into()),
            leader_hint: None,
            appended: false,
        }
    }
}

fn kafka_software_name_ok(s: &str) -> bool {
    // [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

fn encode_frame<R: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    resp: &R,
) -> Result<Vec<u8>, String> {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0, 0, 0, 0]);
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    header
        .encode(&mut buf, api.response_header_version(version))
        .map_err(|e| format!("sim bug: cannot encode {api:?} v{version} response header: {e}"))?;
    resp.encode(&mut buf, version)
        .map_err(|e| format!("sim bug: cannot encode {api:?} v{version} response: {e}"))?;
    let size = i32::try_from(buf.len() - 4).map_err(|_| "response too large".to_string())?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.to_vec())
}

fn next_seq(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

fn seq_add(base: i32, n: i64) -> i32 {
    // Sequence arithmetic wraps at i32::MAX to 0 (2^31 values).
    let m = i64::from(i32::MAX) + 1;
    ((i64::from(base) + n).rem_euclid(m)) as i32
}

impl SimCluster {
    /// Handles one complete request frame (without its size prefix) at `at`.
    pub(crate) fn handle_frame(&mut self, id: u64, at: Instant, frame: Bytes) {
        let Some(broker_id) = self.conns.get(&id).and_then(|c| c.broker) else {
            return;
        };
        let mut rec = RequestRecord {
            at,
            broker_id,
            conn: ConnId(id),
            api_key: -1,
            api_version: -1,
            correlation_id: -1,
            acks: None,
            produce: Vec::new(),
            error_code: NONE,
            responded: false,
        };
        let (Some(k), Some(v), Some(c)) = (frame.get(0..2), frame.get(2..4), frame.get(4..8))
        else {
            self.violation(
                Some(broker_id),
                id,
                "request frame shorter than 8 bytes".into(),
            );
            self.request_log.push(rec);
            self.broker_close(id, at);
            return;
        };
        rec.api_key = i16::from_be_bytes([k[0], k[1]]);
        rec.api_version = i16::from_be_bytes([v[0], v[1]]);
        rec.correlation_id = i32::from_be_bytes([c[0], c[1], c[2], c[3]]);

        // Random connection reset, before or after processing.
        let (drop, process_first) = if self.cfg.drop_probability > 0.0 {
            let d = self.rng.next_f64() < self.cfg.drop_probability;
            (d, d && self.rng.next_f64() < 0.5)
        } else {
            (false, false)
        };
        if drop && !process_first {
            self.request_log.push(rec);
            let lat = self.latency();
            self.reset_conn(id, later(at, lat));
            return;
        }

        let reply = match self.dispatch(broker_id, id, &frame, &mut rec) {
            Ok(r) => r,
            Err(msg) => {
                self.violation(
                    Some(broker_id),
                    id,
                    format!(
                        "api {} v{} correlation {}: {msg}; connection closed",
                        rec.api_key, rec.api_version, rec.correlation_id
                    ),
                );
                Reply::Close
            }
        };
        if drop {
            self.request_log.push(rec);
            let lat = self.latency();
            self.reset_conn(id, later(at, lat));
            return;
        }
        match reply {
            Reply::Respond(bytes) => {
                rec.responded = true;
                self.request_log.push(rec);
                self.send_response(id, at, bytes);
            }
            Reply::Silent => self.request_log.push(rec),
            Reply::Close => {
                self.request_log.push(rec);
                self.broker_close(id, at);
            }
        }
    }

    /// Decodes and handles the request; `Err` is a protocol violation that closes the
    /// connection.
    fn dispatch(
        &mut self,
        broker_id: i32,
        conn: u64,
        frame: &Bytes,
        rec: &mut RequestRecord,
    ) -> Result<Reply, String> {
        let (key, version, correlation_id) = (rec.api_key, rec.api_version, rec.correlation_id);
        let api = ApiKey::try_from(key).map_err(|_| format!("unknown api key {key}"))?;
        let advertised = self
            .brokers
            .get(&broker_id)
            .and_then(|b| b.api_versions.iter().find(|(k, _, _)| *k == key).copied());

        // ApiVersions with a version above the broker's max: v0 UNSUPPORTED_VERSION with the list.
        if key == API_API_VERSIONS {
            let max = advertised.map_or(-1, |(_, _, max)| max).min(4);
            if version > max || version < 0 {
                let mut resp = ApiVersionsResponse::default();
                resp.error_code = UNSUPPORTED_VERSION;
                resp.api_keys = self.api_version_list(broker_id);
                rec.error_code = UNSUPPORTED_VERSION;
                return encode_frame(api, 0, correlation_id, &resp).map(Reply::Respond);
            }
        }
        match advertised {
            Some((_, min, max)) if (min..=max).contains(&version) => {}
            Some((_, min, max)) => {
                return Err(format!(
                    "{api:?} v{version} is outside the broker's advertised range {min}-{max}"
                ))
            }
            None => return Err(format!("{api:?} is not advertised by this broker")),
        }
        let cap = SIM_CAPABILITIES.iter().find(|(k, _, _)| *k == key);
        match cap {
            Some((_, min, max)) if (*min..=*max).contains(&version) => {}
            _ => return Err(format!("the simulator cannot serve {api:?} v{version}")),
        }

        let mut buf = frame.clone();
        let header = RequestHeader::decode(&mut buf, api.request_header_version(version))
            .map_err(|e| format!("malformed request header: {e}"))?;
        let _ = header;
        let body = buf;
        match key {
            API_API_VERSIONS => {
                let mut b = body.clone();
                let req = ApiVersionsRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed ApiVersions request: {e}"))?;
                self.trailing(broker_id, conn, "ApiVersions", b.len());
                self.api_versions(broker_id, version, correlation_id, req, rec)
                    .map(Reply::Respond)
            }
            API_METADATA => {
                wire::precheck_metadata(&body, version)
                    .map_err(|e| format!("malformed Metadata request: {e}"))?;
                let mut b = body.clone();
                let req = MetadataRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed Metadata request: {e}"))?;
                self.trailing(broker_id, conn, "Metadata", b.len());
                let resp = self.metadata(broker_id, version, req);
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_INIT_PRODUCER_ID => {
                let mut b = body.clone();
                let req = InitProducerIdRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed InitProducerId request: {e}"))?;
                self.trailing(broker_id, conn, "InitProducerId", b.len());
                let resp = self.init_producer_id(broker_id, version, req);
                rec.error_code = resp.error_code;
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_PRODUCE => {
                wire::precheck_produce(&body, version)
                    .map_err(|e| format!("malformed Produce request: {e}"))?;
                let mut b = body.clone();
                let req = ProduceRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed Produce request: {e}"))?;
                self.trailing(broker_id, conn, "Produce", b.len());
                let acks = req.acks;
                let (resp, any_error) = self.produce(broker_id, conn, version, req, rec);
                if acks == 0 {
                    // Kafka closes the connection on any partition error with acks=0.
                    return Ok(if any_error {
                        Reply::Close
                    } else {
                        Reply::Silent
                    });
                }
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            _ => Err(format!("the simulator cannot serve {api:?}")),
        }
    }

    fn trailing(&mut self, broker_id: i32, conn: u64, what: &str, n: usize) {
        if n > 0 {
            self.violation(
                Some(broker_id),
                conn,
                format!("{n} trailing bytes after the {what} request body"),
            );
        }
    }

    fn api_version_list(&self, broker_id: i32) -> Vec<ApiVersion> {
        self.brokers
            .get(&broker_id)
            .map(|b| {
                b.api_versions
                    .iter()
                    .map(|(k, min, max)| {
                        let mut v = ApiVersion::default();
                        v.api_key = *k;
                        v.min_version = *min;
                        v.max_version = *max;
                        v
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn api_versions(
        &mut self,
        broker_id: i32,
        version: i16,
        correlation_id: i32,
        req: ApiVersionsRequest,
        rec: &mut RequestRecord,
    ) -> Result<Vec<u8>, String> {
        let mut resp = ApiVersionsResponse::default();
        resp.api_keys = self.api_version_list(broker_id);
        if version >= 1 {
            resp.throttle_time_ms = self.take_throttle(broker_id);
        }
        if version >= 3
            && (!kafka_software_name_ok(&req.client_software_name)
                || !kafka_software_name_ok(&req.client_software_version))
        {
            resp.error_code = INVALID_REQUEST;
        }
        if let Some(inj) = self.take_injection(API_API_VERSIONS, |_| true) {
            resp.error_code = inj.error_code;
        }
        rec.error_code = resp.error_code;
        encode_frame(ApiKey::ApiVersions, version, correlation_id, &resp)
    }

    fn metadata(&mut self, broker_id: i32, version: i16, req: MetadataRequest) -> MetadataResponse {
        let mut resp = MetadataResponse::default();
        if version >= 3 {
            resp.throttle_time_ms = self.take_throttle(broker_id);
        }
        resp.brokers = self
            .brokers
            .values()
            .filter(|b| b.running)
            .map(|b| {
                let mut mb = MetadataResponseBroker::default();
                mb.node_id = b.spec.node_id.into();
                mb.host = StrBytes::from_string(b.spec.host.clone());
                mb.port = i32::from(b.spec.port);
                mb
            })
            .collect();
        if version >= 2 {
            resp.cluster_id = Some(StrBytes::from_string(self.cfg.cluster_id.clone()));
        }
        if version >= 1 {
            let controller = self
                .brokers
                .values()
                .find(|b| b.running)
                .map_or(-1, |b| b.spec.node_id);
            resp.controller_id = controller.into();
        }
        // Which topics: (name, Option<id asked>).
        let wanted: Vec<(Option<String>, Option<uuid::Uuid>)> = match req.topics {
            None => self
                .topics
                .keys()
                .map(|n| (Some(n.clone()), None))
                .collect(),
            Some(ts) if ts.is_empty() && version == 0 => self
                .topics
                .keys()
                .map(|n| (Some(n.clone()), None))
                .collect(),
            Some(ts) => ts
                .into_iter()
                .map(|t| {
                    let name = t.name.map(|n| n.0.to_string());
                    let id = (!t.topic_id.is_nil()).then_some(t.topic_id);
                    (name, id)
                })
                .collect(),
        };
        for (name, id) in wanted {
            let mut mt = MetadataResponseTopic::default();
            let found = match (&name, id) {
                (Some(n), _) => self.topics.get_key_value(n.as_str()),
                (None, Some(id)) => self.topics.iter().find(|(_, t)| t.id == id),
                (None, None) => None,
            };
            let Some((tname, topic)) = found else {
                mt.error_code = if name.is_none() && id.is_some() {
                    UNKNOWN_TOPIC_ID
                } else {
                    UNKNOWN_TOPIC_OR_PARTITION
                };
                mt.name = name.map(|n| TopicName(StrBytes::from_string(n)));
                if version >= 10 {
                    mt.topic_id = id.unwrap_or_default();
                }
                resp.topics.push(mt);
                continue;
            };
            mt.name = Some(TopicName(StrBytes::from_string(tname.clone())));
            if version >= 10 {
                mt.topic_id = topic.id;
            }
            for (i, p) in topic.partitions.iter().enumerate() {
                let mut mp = MetadataResponsePartition::default();
                mp.partition_index = i as i32;
                mp.leader_id = p.leader.into();
                if version >= 7 {
                    mp.leader_epoch = p.leader_epoch;
                }
                mp.replica_nodes = vec![p.leader.into()];
                mp.isr_nodes = vec![p.leader.into()];
                mt.partitions.push(mp);
            }
            resp.topics.push(mt);
        }
        // Injected errors: topic-level (no partition filter) or partition-level.
        for mt in &mut resp.topics {
            let tname = mt.name.as_ref().map(|n| n.0.to_string());
            if mt.error_code == NONE {
                let t = tname.clone();
                if let Some(inj) = self.take_injection(API_METADATA, move |i| {
                    i.partition.is_none() && i.topic.as_ref().is_none_or(|x| Some(x) == t.as_ref())
                }) {
                    mt.error_code = inj.error_code;
                    mt.partitions.clear();
                    continue;
                }
            }
            for mp in &mut mt.partitions {
                let t = tname.clone();
                let p = mp.partition_index;
                if let Some(inj) = self.take_injection(API_METADATA, move |i| {
                    i.partition == Some(p) && i.topic.as_ref().is_none_or(|x| Some(x) == t.as_ref())
                }) {
                    mp.error_code = inj.error_code;
                }
            }
        }
        resp
    }

    fn init_producer_id(
        &mut self,
        broker_id: i32,
        version: i16,
        req: InitProducerIdRequest,
    ) -> InitProducerIdResponse {
        let mut resp = InitProducerIdResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        let fail = |resp: &mut InitProducerIdResponse, code: i16| {
            resp.error_code = code;
            resp.producer_id = (-1).into();
            resp.producer_epoch = -1;
        };
        if let Some(inj) = self.take_injection(API_INIT_PRODUCER_ID, |_| true) {
            fail(&mut resp, inj.error_code);
            return resp;
        }
        let pid = req.producer_id.0;
        let epoch = req.producer_epoch;
        if version >= 3 && (pid >= 0) != (epoch >= 0) {
            fail(&mut resp, INVALID_REQUEST);
            return resp;
        }
        if version >= 3 && pid >= 0 {
            match self.producer_ids.get(&pid).copied() {
                Some(cur) if cur == epoch => {
                    if epoch >= i16::MAX - 1 {
                        let new = self.allocate_pid();
                        resp.producer_id = new.into();
                        resp.producer_epoch = 0;
                    } else {
                        self.producer_ids.insert(pid, epoch + 1);
                        resp.producer_id = pid.into();
                        resp.producer_epoch = epoch + 1;
                    }
                }
                Some(_) => fail(
                    &mut resp,
                    if version >= 4 {
                        PRODUCER_FENCED
                    } else {
                        INVALID_PRODUCER_EPOCH
                    },
                ),
                None => fail(&mut resp, INVALID_PRODUCER_ID_MAPPING),
            }
            return resp;
        }
        let new = self.allocate_pid();
        resp.producer_id = new.into();
        resp.producer_epoch = 0;
        resp
    }

    fn allocate_pid(&mut self) -> i64 {
        let pid = self.next_producer_id;
        self.next_producer_id += 1;
        self.producer_ids.insert(pid, 0);
        pid
    }

    /// Handles a Produce request; returns the response and whether any partition failed.
    fn produce(
        &mut self,
        broker_id: i32,
        conn: u64,
        version: i16,
        req: ProduceRequest,
        rec: &mut RequestRecord,
    ) -> (ProduceResponse, bool) {
        rec.acks = Some(req.acks);
        let mut resp = ProduceResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        let mut any_error = false;
        let mut seen = BTreeSet::new();
        let mut endpoints: BTreeMap<i32, NodeEndpoint> = BTreeMap::new();
        if req.transactional_id.is_some() {
            self.violation(
                Some(broker_id),
                conn,
                "Produce with a TransactionalId: transactions are not simulated".into(),
            );
        }
        for td in req.topic_data {
            let (name, id_unknown) = if version >= 13 {
                match self.topics.iter().find(|(_, t)| t.id == td.topic_id) {
                    Some((n, _)) => (Some(n.clone()), false),
                    None => (None, true),
                }
            } else {
                (Some(td.name.0.to_string()), false)
            };
            let mut tr = TopicProduceResponse::default();
            if version >= 13 {
                tr.topic_id = td.topic_id;
            } else {
                tr.name = td.name.clone();
            }
            for pd in td.partition_data {
                let hdr = pd
                    .records
                    .as_ref()
                    .and_then(|r| r.get(..BATCH_HEADER_LEN))
                    .and_then(|b| wire::parse_batch_header(b).ok());
                let dup = !seen.insert((name.clone(), td.topic_id, pd.index));
                let out = if id_unknown {
                    PartOutcome::err(UNKNOWN_TOPIC_ID, "unknown topic id")
                } else if dup {
                    self.violation(
                        Some(broker_id),
                        conn,
                        format!(
                            "Produce carries partition {:?}/{} twice",
                            name.as_deref().unwrap_or(""),
                            pd.index
                        ),
                    );
                    PartOutcome::err(INVALID_REQUEST, "duplicate partition in request")
                } else {
                    self.produce_partition(
                        broker_id,
                        conn,
                        version,
                        req.acks,
                        req.transactional_id.is_some(),
                        name.as_deref().unwrap_or(""),
                        pd.index,
                        pd.records.as_ref(),
                    )
                };
                if out.code != NONE {
                    any_error = true;
                }
                if let Some((leader, _)) = out.leader_hint {
                    if let Some(b) = self.brokers.get(&leader) {
                        let mut ne = NodeEndpoint::default();
                        ne.node_id = leader.into();
                        ne.host = StrBytes::from_string(b.spec.host.clone());
                        ne.port = i32::from(b.spec.port);
                        endpoints.insert(leader, ne);
                    }
                }
                let mut pr = PartitionProduceResponse::default();
                pr.index = pd.index;
                pr.error_code = out.code;
                pr.base_offset = out.base_offset;
                if version >= 5 {
                    pr.log_start_offset = if out.code == NONE { 0 } else { -1 };
                }
                if version >= 8 && out.code != NONE {
                    pr.error_message = out.message.clone().map(StrBytes::from_string);
                }
                if version >= 10 {
                    if let Some((leader, epoch)) = out.leader_hint {
                        let mut l = LeaderIdAndEpoch::default();
                        l.leader_id = leader.into();
                        l.leader_epoch = epoch;
                        pr.current_leader = l;
                    }
                }
                tr.partition_responses.push(pr);
                rec.produce.push(ProducePartitionRecord {
                    topic: name.clone().unwrap_or_default(),
                    partition: pd.index,
                    record_count: hdr.map_or(0, |h| h.record_count),
                    producer_id: hdr.map_or(-1, |h| h.producer_id),
                    producer_epoch: hdr.map_or(-1, |h| h.producer_epoch),
                    base_sequence: hdr.map_or(-1, |h| h.base_sequence),
                    error_code: out.code,
                    base_offset: out.base_offset,
                    appended: out.appended,
                });
            }
            resp.responses.push(tr);
        }
        if version >= 10 {
            resp.node_endpoints = endpoints.into_values().collect();
        }
        (resp, any_error)
    }

    #[allow(clippy::too_many_arguments)]
    fn produce_partition(
        &mut self,
        broker_id: i32,
        conn: u64,
        version: i16,
        acks: i16,
        txn: bool,
        topic: &str,
        index: i32,
        records: Option<&Bytes>,
    ) -> PartOutcome {
        if !matches!(acks, -1..=1) {
            return PartOutcome::err(INVALID_REQUIRED_ACKS, format!("acks {acks}"));
        }
        let Some(t) = self.topics.get(topic) else {
            return PartOutcome::err(UNKNOWN_TOPIC_OR_PARTITION, "unknown topic");
        };
        let Some(p) = usize::try_from(index)
            .ok()
            .and_then(|i| t.partitions.get(i))
        else {
            return PartOutcome::err(UNKNOWN_TOPIC_OR_PARTITION, "unknown partition");
        };
        if p.leader != broker_id {
            let mut o = PartOutcome::err(NOT_LEADER_OR_FOLLOWER, "not the leader");
            o.leader_hint = (version >= 10).then_some((p.leader, p.leader_epoch));
            return o;
        }
        let topic_owned = topic.to_string();
        // A real broker answers an exact retry of a batch it already appended with the original
        // offsets before any check that looks at the batch's contents or sequence could fail
        // (those bytes were accepted once). So errors of that kind are not injected into such a
        // retry; the injection waits for the next batch.
        let duplicate = self.is_cached_duplicate(topic, index, records);
        let injected = self.take_injection(API_PRODUCE, |i| {
            i.topic.as_ref().is_none_or(|x| *x == topic_owned)
                && i.partition.is_none_or(|x| x == index)
                && !(duplicate && CONTENT_ERRORS.contains(&i.error_code))
        });
        if let Some(inj) = &injected {
            if !inj.persist {
                return PartOutcome::err(inj.error_code, "injected error");
            }
        }
        let out = self.append_batch(broker_id, conn, version, txn, topic, index, records);
        match injected {
            Some(inj) if out.code == NONE => PartOutcome {
                appended: out.appended,
                ..PartOutcome::err(inj.error_code, "injected error (after append)")
            },
            _ => out,
        }
    }

    /// Whether `records` is an idempotent batch whose (producer id, epoch, first and last
    /// sequence) match one the partition already appended.
    fn is_cached_duplicate(&self, topic: &str, index: i32, records: Option<&Bytes>) -> bool {
        let Some(h) = records
            .and_then(|raw| raw.get(..BATCH_HEADER_LEN))
            .and_then(|b| wire::parse_batch_header(b).ok())
        else {
            return false;
        };
        if h.producer_id < 0 {
            return false;
        }
        let last = seq_add(h.base_sequence, i64::from(h.record_count) - 1);
        self.topics
            .get(topic)
            .and_then(|t| t.partitions.get(usize::try_from(index).ok()?))
            .and_then(|p| p.producers.get(&h.producer_id))
            .is_some_and(|e| {
                e.epoch == h.producer_epoch
                    && e.batches
                        .iter()
                        .any(|b| b.first_seq == h.base_sequence && b.last_seq == last)
            })
    }

    #[allow(clippy::too_many_arguments)]
    fn append_batch(
        &mut self,
        broker_id: i32,
        conn: u64,
        version: i16,
        txn: bool,
        topic: &str,
        index: i32,
        records: Option<&Bytes>,
    ) -> PartOutcome {
        let where_ = format!("Produce v{version} {topic}/{index}");
        let corrupt = |this: &mut Self, msg: String| {
            this.violation(Some(broker_id), conn, format!("{where_}: {msg}"));
            PartOutcome::err(CORRUPT_MESSAGE, msg)
        };
        let Some(raw) = records else {
            return corrupt(self, "null Records".into());
        };
        let Some(h) = raw
            .get(..BATCH_HEADER_LEN)
            .and_then(|b| wire::parse_batch_header(b).ok())
        else {
            return corrupt(
                self,
                format!(
                    "{} bytes of records: shorter than a RecordBatch header",
                    raw.len()
                ),
            );
        };
        if let Err(e) = wire::validate_batch_frame(raw, &h) {
            return corrupt(self, e);
        }
        if h.is_control() {
            return corrupt(self, "control batch in a Produce request".into());
        }
        if txn || h.is_transactional() {
            return PartOutcome::err(INVALID_TXN_STATE, "transactions are not simulated");
        }
        if h.compression() == 4 && version < 7 {
            return PartOutcome::err(UNSUPPORTED_COMPRESSION_TYPE, "zstd requires Produce v7+");
        }
        let idempotent = h.producer_id >= 0;
        if idempotent && (h.producer_epoch < 0 || h.base_sequence < 0) {
            return corrupt(
                self,
                format!(
                    "idempotent batch (producer id {}) with epoch {} and base sequence {}",
                    h.producer_id, h.producer_epoch, h.base_sequence
                ),
            );
        }
        if !idempotent && h.base_sequence != -1 {
            self.violation(
                Some(broker_id),
                conn,
                format!(
                    "{where_}: non-idempotent batch with base sequence {}",
                    h.base_sequence
                ),
            );
        }
        let Some(section) = raw.get(BATCH_HEADER_LEN..) else {
            return corrupt(self, "missing records section".into());
        };
        let data = match wire::decompress(h.compression(), section, self.cfg.max_decompressed_size)
        {
            Ok(d) => d,
            Err(e) => return corrupt(self, e),
        };
        let walked = match wire::walk_records(&data, &h) {
            Ok(w) => w,
            Err(e) => return corrupt(self, e),
        };
        // Independent decode with kafka-protocol; it must agree with the walker.
        let decoded = {
            let mut b = raw.clone();
            let d = data.clone();
            RecordBatchDecoder::decode_with_custom_compression(
                &mut b,
                Some(move |_: &mut Bytes, _: Compression| Ok(d.clone())),
            )
        };
        let set = match decoded {
            Ok(s) => s,
            Err(e) => return corrupt(self, format!("kafka-protocol rejects the batch: {e}")),
        };
        if set.records.len() != walked.len()
            || set
                .records
                .iter()
                .zip(&walked)
                .any(|(r, w)| r.timestamp != w.timestamp)
        {
            return corrupt(
                self,
                "kafka-protocol and the sim disagree on the records".into(),
            );
        }
        let max_ts = walked
            .iter()
            .map(|w| w.timestamp)
            .max()
            .unwrap_or(h.base_timestamp);
        if max_ts != h.max_timestamp {
            self.violation(
                Some(broker_id),
                conn,
                format!(
                    "{where_}: MaxTimestamp {} but the records' largest timestamp is {max_ts}",
                    h.max_timestamp
                ),
            );
        }
        if idempotent && !self.producer_ids.contains_key(&h.producer_id) {
            self.violation(
                Some(broker_id),
                conn,
                format!(
                    "{where_}: producer id {} was never allocated by InitProducerId",
                    h.producer_id
                ),
            );
        }

        // Idempotence.
        let count = i64::from(h.record_count);
        let first = h.base_sequence;
        let last = seq_add(first, count - 1);
        let Some(part) = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(usize::try_from(index).ok()?))
        else {
            return PartOutcome::err(UNKNOWN_TOPIC_OR_PARTITION, "unknown partition");
        };
        let mut reset_window = false;
        if idempotent {
            if let Some(e) = part.producers.get(&h.producer_id) {
                if h.producer_epoch < e.epoch {
                    return PartOutcome::err(
                        INVALID_PRODUCER_EPOCH,
                        format!("epoch {} < current {}", h.producer_epoch, e.epoch),
                    );
                } else if h.producer_epoch > e.epoch {
                    if first != 0 {
                        return PartOutcome::err(
                            OUT_OF_ORDER_SEQUENCE_NUMBER,
                            format!(
                                "new epoch {} must start at sequence 0, got {first}",
                                h.producer_epoch
                            ),
                        );
                    }
                    reset_window = true;
                } else if let Some(d) = e
                    .batches
                    .iter()
                    .find(|b| b.first_seq == first && b.last_seq == last)
                {
                    return PartOutcome {
                        code: NONE,
                        base_offset: d.base_offset,
                        message: None,
                        leader_hint: None,
                        appended: false,
                    };
                } else {
                    let expected = e.batches.back().map(|b| next_seq(b.last_seq));
                    if expected != Some(first) {
                        return PartOutcome::err(
                            OUT_OF_ORDER_SEQUENCE_NUMBER,
                            format!("expected sequence {expected:?}, got {first}"),
                        );
                    }
                }
            } else {
                reset_window = true;
            }
        }

        // Append.
        let base = part.log.len() as i64;
        for (i, (r, w)) in set.records.into_iter().zip(walked).enumerate() {
            part.log.push(LoggedRecord {
                offset: base + i as i64,
                key: r.key,
                value: r.value,
                headers: w.headers,
                timestamp: w.timestamp,
                producer_id: h.producer_id,
                producer_epoch: h.producer_epoch,
                sequence: if idempotent {
                    seq_add(first, i as i64)
                } else {
                    -1
                },
                batch_base_offset: base,
            });
        }
        if idempotent {
            let meta = BatchMeta {
                first_seq: first,
                last_seq: last,
                base_offset: base,
                timestamp: h.base_timestamp,
            };
            let entry = part
                .producers
                .entry(h.producer_id)
                .or_insert_with(|| ProducerEntry {
                    epoch: h.producer_epoch,
                    batches: Default::default(),
                });
            if reset_window {
                entry.epoch = h.producer_epoch;
                entry.batches.clear();
            }
            entry.batches.push_back(meta);
            while entry.batches.len() > BATCHES_TO_RETAIN {
                entry.batches.pop_front();
            }
        }
        PartOutcome {
            code: NONE,
            base_offset: base,
            message: None,
            leader_hint: None,
            appended: true,
        }
    }
}
