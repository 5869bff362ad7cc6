//! The scripted broker: decodes each request the producer actually sent (with `kafka-protocol`,
//! independent of the producer's codec) and answers it at the request's version with a
//! structurally valid response whose field values come from the fuzz input. The sane values
//! describe one consistent cluster (three brokers, topics `t0` and `t1`); standing policies set
//! by the operations make the broker repeat a misbehaviour (the same error, the same leader
//! hint) answer after answer, as a broker with stale state does.

use std::collections::{BTreeSet, HashMap};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId,
    EndTxnRequest, EndTxnResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, ProducerId, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;

use super::input::Values;

/// The hosts the broker's answers name; connections to [`DOWN_HOST`] are always refused.
pub(crate) const HOSTS: [&str; 5] = ["b1", "b2", "b3", "b4", DOWN_HOST];
/// A host where no broker listens.
pub(crate) const DOWN_HOST: &str = "down";
/// Brokers in one hostile Metadata answer, at most.
pub(crate) const MAX_BROKERS_PER_ANSWER: usize = 6;
/// Partitions of one topic in one hostile Metadata answer, at most.
const MAX_PARTITIONS_PER_ANSWER: usize = 12;

/// The topics of the sane cluster: name, leaders of partitions 0..n-1, topic id.
const TOPICS: [(&str, &[i32], u128); 2] = [
    ("t0", &[1, 2, 3], 0x7430_0000_0000_4000_8000_0000_0000_0001),
    ("t1", &[2, 3], 0x7431_0000_0000_4000_8000_0000_0000_0002),
];

/// The sane producer id.
const PRODUCER_ID: i64 = 4242;

/// How the leader hint of a standing NOT_LEADER-style answer is made (KIP-951).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hint {
    /// No hint.
    None,
    /// The leader the producer already uses, same epoch.
    SameLeader,
    /// The same leader with a higher epoch each time.
    EpochBump,
    /// Another broker of the cluster.
    OtherLeader,
    /// A node id no Metadata named.
    UnknownNode,
}

/// A misbehaviour the broker repeats until told otherwise (or `left` answers ran out).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Standing {
    pub(crate) code: i16,
    pub(crate) left: u32,
}

impl Standing {
    fn take(slot: &mut Option<Standing>) -> Option<i16> {
        let s = slot.as_mut()?;
        let code = s.code;
        s.left = s.left.saturating_sub(1);
        if s.left == 0 {
            *slot = None;
        }
        Some(code)
    }
}

/// A standing distortion of Metadata answers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MetadataHack {
    /// Every topic answered with this error code.
    TopicError(i16),
    /// The last partition entry of every topic has this index.
    PartitionIndex(i32),
    /// Every partition is led by this node id.
    Leader(i32),
    /// The first broker listed has this node id.
    BrokerNode(i32),
    /// Every broker has a node id no earlier answer used (the cluster's brokers were replaced
    /// by new ones on the same hosts), and leads what its predecessor led.
    NewNodeIds,
}

/// The standing misbehaviours.
#[derive(Debug, Default)]
pub(crate) struct Policies {
    /// Every Produce partition (or only `produce_partition`) answered with this error (and
    /// `hint`).
    pub(crate) produce: Option<Standing>,
    pub(crate) produce_partition: Option<i32>,
    pub(crate) hint: Option<Hint>,
    /// Metadata answers distorted this way, for this many answers.
    pub(crate) metadata: Option<(MetadataHack, u32)>,
    /// Every answer of this API (by key) carries this error code.
    pub(crate) api: Option<(i16, Standing)>,
    /// Every answer carries this `throttle_time_ms` (KIP-219).
    pub(crate) throttle: Option<i32>,
}

impl Policies {
    /// The Metadata distortion for one more answer.
    fn metadata_hack(&mut self) -> Option<MetadataHack> {
        let (hack, left) = self.metadata.as_mut()?;
        let hack = *hack;
        *left = left.saturating_sub(1);
        if *left == 0 {
            self.metadata = None;
        }
        Some(hack)
    }
}

/// One batch a Produce request carried: where, and the records (by opaque id).
#[derive(Debug, Clone)]
pub(crate) struct SentBatch {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) ids: Vec<u64>,
}

/// What the broker said about one partition of a Produce request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Written (error 0).
    Written,
    /// DUPLICATE_SEQUENCE_NUMBER: written by an earlier attempt.
    Duplicate,
    /// An error: this attempt was not written.
    Rejected,
}

/// A Produce request as the broker saw it and answered it.
#[derive(Debug, Clone)]
pub(crate) struct ProduceExchange {
    pub(crate) batches: Vec<SentBatch>,
    /// Outcome per batch (same order), when the answer names the batch's partition exactly
    /// once (under the topic name or id the request gave it), without contradicting itself
    /// (success with record errors): only then can the producer know what happened to it.
    pub(crate) outcomes: Vec<Option<Outcome>>,
    /// Batches whose partition some entry of the answer (well-formed or not) called written.
    pub(crate) ok_seen: Vec<bool>,
    /// acks=0: no answer is expected.
    pub(crate) acks_zero: bool,
}

/// A request decoded and its answer.
#[derive(Debug)]
pub(crate) struct Answered {
    pub(crate) api: ApiKey,
    /// The answer's frame (size prefix included), or `None` for no answer (acks=0).
    pub(crate) frame: Option<Vec<u8>>,
    /// The frame answers the request with the right correlation id.
    pub(crate) matches: bool,
    pub(crate) produce: Option<ProduceExchange>,
}

/// The broker's state: the cluster it describes and what its answers said.
#[derive(Debug)]
pub(crate) struct Broker {
    pub(crate) policies: Policies,
    /// Transaction version 2 finalized in ApiVersions (KIP-890): Produce adds partitions.
    tv2: bool,
    /// The mechanism SaslHandshake enables.
    mechanism: Option<&'static str>,
    offsets: HashMap<(String, i32), i64>,
    epoch: i16,
    leader_epoch: i32,
    /// Every topic id an answer named, with every name an answer gave it (a hostile answer may
    /// give one id to two topics; the producer keeps the first it took, which depends on which
    /// of its checks each entry passed, so the broker does not guess which).
    topic_ids: HashMap<[u8; 16], Vec<String>>,
    /// The topic each record was sent to, by its opaque id: how a Produce request naming topics
    /// by id (v13+) is read, when the id was given to more than one name.
    record_topics: HashMap<u64, String>,
    /// Per topic, the largest n of an answer that listed its partitions as exactly 0..n-1.
    pub(crate) listed: HashMap<String, i32>,
    /// Requests decoded, by API key.
    pub(crate) requests: HashMap<i16, u64>,
    /// What [`MetadataHack::NewNodeIds`] adds to the sane node ids.
    renumbered: i32,
}

impl Broker {
    /// How many times [`MetadataHack::NewNodeIds`] renumbered the nodes: a host under a new
    /// number is a new node to the producer, which connects to it anew.
    pub(crate) fn naming(&self) -> i32 {
        self.renumbered
    }

    pub(crate) fn new(tv2: bool, mechanism: Option<&'static str>) -> Self {
        let mut topic_ids = HashMap::new();
        for (name, _, id) in TOPICS {
            topic_ids.insert(id.to_be_bytes(), vec![name.to_string()]);
        }
        Broker {
            policies: Policies::default(),
            tv2,
            mechanism,
            offsets: HashMap::new(),
            epoch: -1,
            leader_epoch: 0,
            topic_ids,
            record_topics: HashMap::new(),
            listed: HashMap::new(),
            requests: HashMap::new(),
            renumbered: 0,
        }
    }

    /// The producer accepted record `id` for `topic`: call for each record `send` accepted.
    pub(crate) fn note_record(&mut self, id: u64, topic: &str) {
        self.record_topics.insert(id, topic.to_string());
    }

    /// The topic a Produce request (v13+) names by `id`, for a batch carrying the records `ids`:
    /// the records' topic when some answer gave `id` to it, else a label no answer listed (the
    /// producer sent records under an id never given to their topic: `unlisted-partition`).
    /// A batch with no records reads as the first name given to `id`.
    fn name_of_id(&self, id: [u8; 16], ids: &[u64]) -> String {
        let names = self.topic_ids.get(&id).map(Vec::as_slice).unwrap_or(&[]);
        let uuid = uuid::Uuid::from_bytes(id);
        match ids.first().and_then(|r| self.record_topics.get(r)) {
            Some(topic) if names.contains(topic) => topic.clone(),
            Some(topic) => format!("<id {uuid}, given to {names:?}, carrying records of {topic}>"),
            None => names
                .first()
                .cloned()
                .unwrap_or_else(|| format!("<id {uuid}>")),
        }
    }

    /// Decodes one request frame (without its size prefix) and answers it. `Err` means the
    /// producer sent bytes that are not a valid request: a bug of the producer's encoder.
    pub(crate) fn answer(&mut self, v: &mut Values, frame: &[u8]) -> Result<Answered, String> {
        let (Some(k), Some(ver)) = (frame.get(0..2), frame.get(2..4)) else {
            return Err("request frame shorter than its header".into());
        };
        let key = i16::from_be_bytes([k[0], k[1]]);
        let version = i16::from_be_bytes([ver[0], ver[1]]);
        let api = ApiKey::try_from(key).map_err(|_| format!("unknown api key {key}"))?;
        let mut buf = Bytes::copy_from_slice(frame);
        let header = RequestHeader::decode(&mut buf, api.request_header_version(version))
            .map_err(|e| format!("{api:?} v{version}: bad request header: {e}"))?;
        *self.requests.entry(key).or_default() += 1;
        let correlation = header.correlation_id;
        let body = buf;
        macro_rules! decode {
            ($t:ty) => {{
                let mut b = body.clone();
                let req = <$t>::decode(&mut b, version)
                    .map_err(|e| format!("{api:?} v{version}: undecodable request: {e}"))?;
                if !b.is_empty() {
                    return Err(format!(
                        "{api:?} v{version}: {} bytes after the body",
                        b.len()
                    ));
                }
                req
            }};
        }
        let mut produce = None;
        let frame = match api {
            ApiKey::ApiVersions => {
                let req = decode!(ApiVersionsRequest);
                let resp = self.api_versions(v, version, &req);
                // A refusal (UNSUPPORTED_VERSION) is encoded at v0, as Kafka does.
                let at = if resp.error_code == 35 { 0 } else { version };
                Some(encode(v, api, at, correlation, &resp)?)
            }
            ApiKey::Metadata => {
                let req = decode!(MetadataRequest);
                let resp = self.metadata(v, version, &req);
                Some(encode(v, api, version, correlation, &resp)?)
            }
            ApiKey::Produce => {
                let req = decode!(ProduceRequest);
                let (resp, exchange) = self.produce(v, version, &req)?;
                let frame = match resp {
                    Some(resp) => Some(encode(v, api, version, correlation, &resp)?),
                    None => None,
                };
                produce = Some(exchange);
                frame
            }
            ApiKey::InitProducerId => {
                let req = decode!(InitProducerIdRequest);
                let resp = self.init_producer_id(v, version, &req);
                Some(encode(v, api, version, correlation, &resp)?)
            }
            ApiKey::FindCoordinator => {
                let req = decode!(FindCoordinatorRequest);
                let resp = self.find_coordinator(v, version, &req);
                Some(encode(v, api, version, correlation, &resp)?)
            }
            ApiKey::AddPartitionsToTxn => {
                let req = decode!(AddPartitionsToTxnRequest);
                let resp = self.add_partitions(v, version, &req);
                Some(encode(v, api, version, correlation, &resp)?)
            }
            ApiKey::AddOffsetsToTxn => {
                let _req = decode!(AddOffsetsToTxnRequest);
                let mut resp = AddOffsetsToTxnResponse::default();
                resp.throttle_time_ms = self.throttle(v);
                resp.error_code = self.error(v, key, 0);
                Some(encode(v, api, version, correlation, &resp)?)
            }
            ApiKey::TxnOffsetCommit => {
                let req = decode!(TxnOffsetCommitRequest);
                let resp = self.txn_offset_commit(v, key, &req);
                Some(encode(v, api, version, correlation, &resp)?)
            }
            ApiKey::EndTxn => {
                let req = decode!(EndTxnRequest);
                let mut resp = EndTxnResponse::default();
                resp.throttle_time_ms = self.throttle(v);
                resp.error_code = self.error(v, key, 0);
                if version >= 5 {
                    resp.producer_id = ProducerId(v.i64(req.producer_id.0));
                    resp.producer_epoch = v.i16(req.producer_epoch.wrapping_add(1));
                }
                Some(encode(v, api, version, correlation, &resp)?)
            }
            ApiKey::SaslHandshake => {
                let _req = decode!(SaslHandshakeRequest);
                let mut resp = SaslHandshakeResponse::default();
                resp.error_code = self.error(v, key, 0);
                let sane = self.mechanism.unwrap_or("PLAIN");
                let n = v.count(1, 4);
                resp.mechanisms = (0..n)
                    .map(|_| StrBytes::from_string(v.string(sane)))
                    .collect();
                Some(encode(v, api, version, correlation, &resp)?)
            }
            ApiKey::SaslAuthenticate => {
                let _req = decode!(SaslAuthenticateRequest);
                let mut resp = SaslAuthenticateResponse::default();
                resp.error_code = self.error(v, key, 0);
                if v.flag(false) {
                    resp.error_message = Some(StrBytes::from_string(v.string("refused")));
                }
                if v.flag(false) {
                    let n = usize::from(v.raw_u8());
                    resp.auth_bytes = Bytes::copy_from_slice(v.raw_bytes(n));
                }
                if version >= 1 {
                    resp.session_lifetime_ms = v.i64(0);
                }
                Some(encode(v, api, version, correlation, &resp)?)
            }
            other => {
                return Err(format!(
                    "the producer sent {other:?}, which it never should"
                ))
            }
        };
        // The correlation id stays intact unless `encode` made it hostile; `encode` reports
        // it through the frame itself, read back here.
        let matches = frame
            .as_ref()
            .is_none_or(|f| f.get(4..8) == Some(&correlation.to_be_bytes()[..]));
        Ok(Answered {
            api,
            frame,
            matches,
            produce,
        })
    }

    fn throttle(&mut self, v: &mut Values) -> i32 {
        match self.policies.throttle {
            Some(ms) => ms,
            None => v.i32(0),
        }
    }

    /// An answer's error code: the standing policy for this API, else from the input.
    fn error(&mut self, v: &mut Values, key: i16, sane: i16) -> i16 {
        if let Some((api, _)) = self.policies.api {
            if api == key {
                let mut slot = self.policies.api.map(|(_, s)| s);
                let code = Standing::take(&mut slot);
                self.policies.api = slot.map(|s| (key, s));
                if let Some(code) = code {
                    return code;
                }
            }
        }
        v.error(sane)
    }

    fn api_versions(
        &mut self,
        v: &mut Values,
        version: i16,
        _req: &ApiVersionsRequest,
    ) -> ApiVersionsResponse {
        let mut resp = ApiVersionsResponse::default();
        resp.error_code = self.error(v, ApiKey::ApiVersions as i16, 0);
        let apis = [
            (
                ApiKey::Produce,
                kafka_protocol::messages::ProduceRequest::VERSIONS,
            ),
            (ApiKey::Metadata, MetadataRequest::VERSIONS),
            (ApiKey::ApiVersions, ApiVersionsRequest::VERSIONS),
            (ApiKey::InitProducerId, InitProducerIdRequest::VERSIONS),
            (ApiKey::SaslHandshake, SaslHandshakeRequest::VERSIONS),
            (ApiKey::SaslAuthenticate, SaslAuthenticateRequest::VERSIONS),
            (ApiKey::FindCoordinator, FindCoordinatorRequest::VERSIONS),
            (
                ApiKey::AddPartitionsToTxn,
                AddPartitionsToTxnRequest::VERSIONS,
            ),
            (ApiKey::AddOffsetsToTxn, AddOffsetsToTxnRequest::VERSIONS),
            (ApiKey::EndTxn, EndTxnRequest::VERSIONS),
            (ApiKey::TxnOffsetCommit, TxnOffsetCommitRequest::VERSIONS),
        ];
        for (api, range) in apis {
            if v.flag(true) {
                let mut a = ApiVersion::default();
                a.api_key = api as i16;
                a.min_version = v.i16(range.min);
                a.max_version = v.i16(range.max);
                resp.api_keys.push(a);
            }
        }
        if version >= 1 {
            resp.throttle_time_ms = self.throttle(v);
        }
        if version >= 3 {
            let name = StrBytes::from_static_str("transaction.version");
            if version >= 4 {
                let mut f = SupportedFeatureKey::default();
                f.name = name.clone();
                f.min_version = v.i16(0);
                f.max_version = v.i16(2);
                resp.supported_features.push(f);
            }
            resp.finalized_features_epoch = v.i64(1);
            let level = v.i16(if self.tv2 { 2 } else { 0 });
            if level != 0 {
                let mut f = FinalizedFeatureKey::default();
                f.name = name;
                f.max_version_level = level;
                f.min_version_level = v.i16(level);
                resp.finalized_features.push(f);
            }
        }
        resp
    }

    fn broker_entry(v: &mut Values, node: i32) -> (i32, String, i32) {
        let sane_host = HOSTS[(node as usize).wrapping_sub(1) % 3];
        let node_id = v.i32(node);
        let host = match v.hostile() {
            None => sane_host.to_string(),
            Some(k) if (k as usize) < HOSTS.len() => HOSTS[k as usize].to_string(),
            Some(_) => v.string(sane_host),
        };
        (node_id, host, v.i32(9092))
    }

    fn metadata(
        &mut self,
        v: &mut Values,
        version: i16,
        req: &MetadataRequest,
    ) -> MetadataResponse {
        let mut resp = MetadataResponse::default();
        if version >= 3 {
            resp.throttle_time_ms = self.throttle(v);
        }
        if version >= 13 {
            resp.error_code = self.error(v, ApiKey::Metadata as i16, 0);
        }
        let hack = self.policies.metadata_hack();
        if let Some(MetadataHack::NewNodeIds) = hack {
            self.renumbered = self.renumbered.saturating_add(10);
        }
        let brokers = v.count(3, MAX_BROKERS_PER_ANSWER);
        for i in 0..brokers {
            let (mut node, host, port) = Self::broker_entry(v, i as i32 + 1);
            if let (0, Some(MetadataHack::BrokerNode(id))) = (i, hack) {
                node = id;
            }
            node = node.saturating_add(self.renumbered);
            let mut b = MetadataResponseBroker::default();
            b.node_id = BrokerId(node);
            b.host = StrBytes::from_string(host);
            b.port = port;
            resp.brokers.push(b);
        }
        if version >= 2 {
            resp.cluster_id = Some(StrBytes::from_string(v.string("fuzz-cluster")));
        }
        resp.controller_id = BrokerId(v.i32(1));
        // The topics asked for (by name, or by id at v10+), or every topic.
        let wanted: Vec<(Option<String>, [u8; 16])> = match &req.topics {
            None => TOPICS
                .iter()
                .map(|(n, _, id)| (Some(n.to_string()), id.to_be_bytes()))
                .collect(),
            Some(ts) => {
                ts.iter()
                    .map(|t| {
                        let id = *t.topic_id.as_bytes();
                        let name =
                            t.name.as_ref().map(|n| n.0.to_string()).or_else(|| {
                                self.topic_ids.get(&id).and_then(|n| n.first()).cloned()
                            });
                        (name, id)
                    })
                    .collect()
            }
        };
        let extra = usize::from(v.flag(false));
        for (i, (name, asked_id)) in wanted
            .iter()
            .cloned()
            .chain((0..extra).map(|_| (Some("t9".to_string()), [9; 16])))
            .enumerate()
        {
            let known = name
                .as_deref()
                .and_then(|n| TOPICS.iter().find(|(t, _, _)| *t == n));
            let mut t = MetadataResponseTopic::default();
            let sane_error = if known.is_some() { 0 } else { 3 };
            t.error_code = match hack {
                Some(MetadataHack::TopicError(code)) => code,
                _ => v.error(sane_error),
            };
            let sane_name = name.clone().unwrap_or_default();
            let name_out = v.string(&sane_name);
            t.name = (!name_out.is_empty() || name.is_some())
                .then(|| TopicName(StrBytes::from_string(name_out.clone())));
            let sane_id = known.map_or(asked_id, |(_, _, id)| id.to_be_bytes());
            let id = if v.flag(false) {
                let mut id = [0; 16];
                id.copy_from_slice(&{
                    let mut b = v.raw_bytes(16).to_vec();
                    b.resize(16, i as u8);
                    b
                });
                id
            } else {
                sane_id
            };
            if version >= 10 {
                t.topic_id = uuid::Uuid::from_bytes(id);
                let names = self.topic_ids.entry(id).or_default();
                if !name_out.is_empty() && !names.contains(&name_out) {
                    names.push(name_out.clone());
                }
            }
            let leaders: &[i32] = known.map_or(&[], |(_, l, _)| l);
            let n = v.count(leaders.len(), MAX_PARTITIONS_PER_ANSWER);
            let mut indices = BTreeSet::new();
            let mut all_distinct = true;
            for p in 0..n {
                let mut mp = MetadataResponsePartition::default();
                let sane_leader = leaders.get(p).copied().unwrap_or(1);
                mp.error_code = v.error(0);
                mp.partition_index = v.i32(p as i32);
                if let (true, Some(MetadataHack::PartitionIndex(i))) = (p + 1 == n, hack) {
                    mp.partition_index = i;
                }
                all_distinct &= indices.insert(mp.partition_index);
                mp.leader_id = BrokerId(v.i32(sane_leader).saturating_add(self.renumbered));
                if let Some(MetadataHack::Leader(id)) = hack {
                    mp.leader_id = BrokerId(id);
                }
                if version >= 7 {
                    mp.leader_epoch = v.i32(self.leader_epoch);
                }
                let replicas = v.count(1, 3);
                mp.replica_nodes = (0..replicas)
                    .map(|_| BrokerId(v.i32(sane_leader)))
                    .collect();
                mp.isr_nodes = mp.replica_nodes.clone();
                if version >= 5 && v.flag(false) {
                    mp.offline_replicas = vec![BrokerId(v.i32(sane_leader))];
                }
                t.partitions.push(mp);
            }
            // A listing the producer may take: the indices are exactly 0..n-1.
            let exact = all_distinct && indices.iter().copied().eq(0..n as i32);
            if exact && !name_out.is_empty() {
                let e = self.listed.entry(name_out).or_default();
                *e = (*e).max(n as i32);
            }
            resp.topics.push(t);
        }
        resp
    }

    fn produce(
        &mut self,
        v: &mut Values,
        version: i16,
        req: &ProduceRequest,
    ) -> Result<(Option<ProduceResponse>, ProduceExchange), String> {
        let acks_zero = req.acks == 0;
        let mut batches = Vec::new();
        // Each batch's topic as the request names it (its id from v13, else its name).
        let mut batch_topics: Vec<Vec<u8>> = Vec::new();
        for t in &req.topic_data {
            for p in &t.partition_data {
                let ids = match &p.records {
                    Some(records) => record_ids(records)?,
                    None => Vec::new(),
                };
                let topic = if version >= 13 {
                    self.name_of_id(*t.topic_id.as_bytes(), &ids)
                } else {
                    t.name.0.to_string()
                };
                batches.push(SentBatch {
                    topic,
                    partition: p.index,
                    ids,
                });
                batch_topics.push(if version >= 13 {
                    t.topic_id.as_bytes().to_vec()
                } else {
                    t.name.0.as_bytes().to_vec()
                });
            }
        }
        let mut exchange = ProduceExchange {
            ok_seen: vec![false; batches.len()],
            outcomes: vec![None; batches.len()],
            batches,
            acks_zero,
        };
        // acks=0: no answer (a hostile broker may send one anyway).
        if acks_zero && !v.flag(false) {
            return Ok((None, exchange));
        }
        let mut resp = ProduceResponse::default();
        resp.throttle_time_ms = self.throttle(v);
        let standing = Standing::take(&mut self.policies.produce);
        for t in &req.topic_data {
            let mut tr = TopicProduceResponse::default();
            if version >= 13 {
                tr.topic_id = if v.flag(false) {
                    uuid::Uuid::from_bytes([7; 16])
                } else {
                    t.topic_id
                };
            } else {
                tr.name = TopicName(StrBytes::from_string(v.string(&t.name.0)));
            }
            for p in &t.partition_data {
                let copies = match v.hostile() {
                    None => 1,
                    Some(k) => usize::from(k % 3), // dropped, once, or twice
                };
                let standing = standing.filter(|_| {
                    self.policies
                        .produce_partition
                        .is_none_or(|only| only == p.index)
                });
                for _ in 0..copies {
                    let pr = self.partition_answer(v, version, p.index, standing, &t.name.0)?;
                    tr.partition_responses.push(pr);
                }
            }
            if v.flag(false) {
                let mut pr = PartitionProduceResponse::default();
                pr.index = v.i32(99);
                pr.error_code = v.error(0);
                pr.base_offset = v.i64(0);
                pr.log_append_time_ms = -1;
                tr.partition_responses.push(pr);
            }
            resp.responses.push(tr);
        }
        if version >= 10 && v.flag(false) {
            let n = v.count(1, 3);
            for i in 0..n {
                let (node, host, port) = Self::broker_entry(v, i as i32 + 1);
                let mut e = NodeEndpoint::default();
                e.node_id = BrokerId(node);
                e.host = StrBytes::from_string(host);
                e.port = port;
                resp.node_endpoints.push(e);
            }
        }
        // What the producer can know, batch by batch: the entries naming its partition under
        // the topic its request named (renamed topics, stray partitions and copies land where
        // the producer would look them up), exactly one, and not a success with record errors.
        let mut per_batch: Vec<Vec<(i16, bool)>> = vec![Vec::new(); exchange.batches.len()];
        for tr in &resp.responses {
            let topic: &[u8] = if version >= 13 {
                tr.topic_id.as_bytes()
            } else {
                tr.name.0.as_bytes()
            };
            for pr in &tr.partition_responses {
                let batch = (0..exchange.batches.len()).find(|&j| {
                    batch_topics[j] == topic && exchange.batches[j].partition == pr.index
                });
                if let Some(j) = batch {
                    let contradicted = pr.error_code == 0 && !pr.record_errors.is_empty();
                    per_batch[j].push((pr.error_code, contradicted));
                }
            }
        }
        if super::tracing() {
            eprintln!(
                "  Produce answer per batch (code, success with record errors): {per_batch:?}"
            );
        }
        for (j, entries) in per_batch.iter().enumerate() {
            exchange.ok_seen[j] = entries.iter().any(|&(c, _)| c == 0 || c == 46);
            exchange.outcomes[j] = match entries.as_slice() {
                [(0, false)] => Some(Outcome::Written),
                [(0, true)] => None,
                [(46, _)] => Some(Outcome::Duplicate),
                [_] => Some(Outcome::Rejected),
                _ => None,
            };
        }
        for (b, o) in exchange.batches.iter().zip(&exchange.outcomes) {
            if *o == Some(Outcome::Written) {
                *self
                    .offsets
                    .entry((b.topic.clone(), b.partition))
                    .or_default() += b.ids.len() as i64;
            }
        }
        Ok((Some(resp), exchange))
    }

    fn partition_answer(
        &mut self,
        v: &mut Values,
        version: i16,
        index: i32,
        standing: Option<i16>,
        topic: &str,
    ) -> Result<PartitionProduceResponse, String> {
        let mut pr = PartitionProduceResponse::default();
        pr.index = v.i32(index);
        pr.error_code = match standing {
            Some(code) => code,
            None => v.error(0),
        };
        let next = *self.offsets.get(&(topic.to_string(), index)).unwrap_or(&0);
        pr.base_offset = v.i64(next);
        pr.log_append_time_ms = v.i64(-1);
        if version >= 5 {
            pr.log_start_offset = v.i64(0);
        }
        if version >= 8 {
            let n = v.count(0, 4);
            for _ in 0..n {
                let mut e = BatchIndexAndErrorMessage::default();
                e.batch_index = v.i32(0);
                if v.flag(false) {
                    e.batch_index_error_message = Some(StrBytes::from_string(v.string("bad")));
                }
                pr.record_errors.push(e);
            }
            if v.flag(false) {
                pr.error_message = Some(StrBytes::from_string(v.string("error")));
            }
        }
        if version >= 10 {
            let leader = TOPICS
                .iter()
                .find(|(t, _, _)| *t == topic)
                .and_then(|(_, l, _)| l.get(index as usize).copied())
                .unwrap_or(1);
            let hint = match (standing, self.policies.hint) {
                (Some(_), Some(h)) => Some(h),
                _ => None,
            };
            let (id, epoch) = match hint {
                Some(Hint::None) | None => {
                    if v.flag(false) {
                        (v.i32(leader), v.i32(self.leader_epoch))
                    } else {
                        (-1, -1)
                    }
                }
                Some(Hint::SameLeader) => (leader, self.leader_epoch),
                Some(Hint::EpochBump) => {
                    self.leader_epoch = self.leader_epoch.saturating_add(1);
                    (leader, self.leader_epoch)
                }
                Some(Hint::OtherLeader) => (leader % 3 + 1, self.leader_epoch),
                Some(Hint::UnknownNode) => (77, self.leader_epoch),
            };
            if id != -1 || epoch != -1 {
                let mut l = LeaderIdAndEpoch::default();
                l.leader_id = BrokerId(id);
                l.leader_epoch = epoch;
                pr.current_leader = l;
            }
        }
        Ok(pr)
    }

    fn init_producer_id(
        &mut self,
        v: &mut Values,
        version: i16,
        req: &InitProducerIdRequest,
    ) -> InitProducerIdResponse {
        let mut resp = InitProducerIdResponse::default();
        resp.throttle_time_ms = self.throttle(v);
        resp.error_code = self.error(v, ApiKey::InitProducerId as i16, 0);
        self.epoch = if req.producer_epoch >= 0 {
            req.producer_epoch
                .wrapping_add(1)
                .max(self.epoch.wrapping_add(1))
        } else {
            self.epoch.wrapping_add(1)
        };
        if self.epoch < 0 {
            self.epoch = 0;
        }
        resp.producer_id = ProducerId(v.i64(PRODUCER_ID));
        resp.producer_epoch = v.i16(self.epoch);
        let _ = version;
        resp
    }

    fn find_coordinator(
        &mut self,
        v: &mut Values,
        version: i16,
        req: &FindCoordinatorRequest,
    ) -> FindCoordinatorResponse {
        let mut resp = FindCoordinatorResponse::default();
        if version >= 1 {
            resp.throttle_time_ms = self.throttle(v);
        }
        let key = ApiKey::FindCoordinator as i16;
        if version >= 4 {
            let keys = req.coordinator_keys.len();
            let n = v.count(keys, 3);
            for i in 0..n {
                let mut c = Coordinator::default();
                let sane_key = req
                    .coordinator_keys
                    .get(i)
                    .map(|k| k.to_string())
                    .unwrap_or_default();
                c.key = StrBytes::from_string(v.string(&sane_key));
                let (node, host, port) = Self::broker_entry(v, 1);
                c.node_id = BrokerId(node);
                c.host = StrBytes::from_string(host);
                c.port = port;
                c.error_code = self.error(v, key, 0);
                resp.coordinators.push(c);
            }
        } else {
            resp.error_code = self.error(v, key, 0);
            let (node, host, port) = Self::broker_entry(v, 1);
            resp.node_id = BrokerId(node);
            resp.host = StrBytes::from_string(host);
            resp.port = port;
        }
        resp
    }

    fn add_partitions(
        &mut self,
        v: &mut Values,
        version: i16,
        req: &AddPartitionsToTxnRequest,
    ) -> AddPartitionsToTxnResponse {
        let mut resp = AddPartitionsToTxnResponse::default();
        resp.throttle_time_ms = self.throttle(v);
        let key = ApiKey::AddPartitionsToTxn as i16;
        let _ = version;
        for t in &req.v3_and_below_topics {
            let mut tr = AddPartitionsToTxnTopicResult::default();
            tr.name = TopicName(StrBytes::from_string(v.string(&t.name.0)));
            let n = v.count(t.partitions.len(), 6);
            for i in 0..n {
                let mut pr = AddPartitionsToTxnPartitionResult::default();
                pr.partition_index = v.i32(t.partitions.get(i).copied().unwrap_or(0));
                pr.partition_error_code = self.error(v, key, 0);
                tr.results_by_partition.push(pr);
            }
            resp.results_by_topic_v3_and_below.push(tr);
        }
        resp
    }

    fn txn_offset_commit(
        &mut self,
        v: &mut Values,
        key: i16,
        req: &TxnOffsetCommitRequest,
    ) -> TxnOffsetCommitResponse {
        let mut resp = TxnOffsetCommitResponse::default();
        resp.throttle_time_ms = self.throttle(v);
        for t in &req.topics {
            let mut tr = TxnOffsetCommitResponseTopic::default();
            tr.name = TopicName(StrBytes::from_string(v.string(&t.name.0)));
            let n = v.count(t.partitions.len(), 6);
            for i in 0..n {
                let mut pr = TxnOffsetCommitResponsePartition::default();
                pr.partition_index = v.i32(t.partitions.get(i).map_or(0, |p| p.partition_index));
                pr.error_code = self.error(v, key, 0);
                tr.partitions.push(pr);
            }
            resp.topics.push(tr);
        }
        resp
    }
}

/// The opaque ids of the records of one batch (each record's value starts with its id), read
/// with `kafka-protocol`'s record decoder.
fn record_ids(records: &Bytes) -> Result<Vec<u64>, String> {
    let mut buf = records.clone();
    let sets = RecordBatchDecoder::decode_all(&mut buf)
        .map_err(|e| format!("undecodable record batch: {e}"))?;
    let mut ids = Vec::new();
    for set in sets {
        for r in set.records {
            let value = r.value.ok_or("a record without a value")?;
            let id = value.get(..8).ok_or("a record value shorter than its id")?;
            ids.push(u64::from_le_bytes(id.try_into().expect("8 bytes")));
        }
    }
    Ok(ids)
}

/// Frames a response: size prefix, header (with a correlation id that may be hostile), body.
fn encode<R: Encodable>(
    v: &mut Values,
    api: ApiKey,
    version: i16,
    correlation: i32,
    resp: &R,
) -> Result<Vec<u8>, String> {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0, 0, 0, 0]);
    let mut header = ResponseHeader::default();
    header.correlation_id = v.i32(correlation);
    header
        .encode(&mut buf, api.response_header_version(version))
        .map_err(|e| format!("harness bug: {api:?} v{version} response header: {e}"))?;
    resp.encode(&mut buf, version)
        .map_err(|e| format!("harness bug: {api:?} v{version} response: {e}"))?;
    let size = (buf.len() - 4) as u32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.to_vec())
}
