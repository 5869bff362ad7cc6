//! Requests of the launcher's own (encoded and decoded by the `kafka-protocol` crate, on a plain
//! blocking socket), for readiness checks: Metadata (which brokers a node lists, the leader and
//! in-sync replicas of every partition, as that node sees them now, no client cache in
//! between), and ListOffsets (whether a leader serves its partitions yet: a broker lists itself
//! leader in Metadata a moment before it accepts requests for the partition). For the
//! transaction tests too: ApiVersions (the finalized `transaction.version`), ListOffsets at
//! either isolation level (the last stable offset beside the high watermark), and
//! FindCoordinator (which broker coordinates a transactional id or a group). For the telemetry
//! tests: GetTelemetrySubscriptions (what subscription a broker hands a new client).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The Metadata version asked (Kafka 4 serves 0-13; 12 is the newest the producer speaks).
const METADATA_VERSION: i16 = 12;

/// One partition as a node reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    /// The partition's error code (0 = none).
    pub error: i16,
    /// The leader's node id, -1 when none.
    pub leader: i32,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// Replica node ids, preferred first.
    pub replicas: Vec<i32>,
    /// In-sync replica node ids.
    pub isr: Vec<i32>,
}

/// A node's view of the cluster.
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    /// Live brokers: node id -> (host, port) on the listener the request came in on.
    pub brokers: BTreeMap<i32, (String, u16)>,
    /// The active controller's id as brokers report it.
    pub controller: i32,
    /// Asked topics: name -> (topic error code, partitions by index).
    pub topics: BTreeMap<String, (i16, BTreeMap<i32, PartitionView>)>,
}

impl ClusterView {
    /// Whether every asked topic exists with `partitions` partitions (when given), each with a
    /// leader among the live brokers.
    pub fn all_led(&self, topics: &[&str]) -> bool {
        topics.iter().all(|t| {
            self.topics.get(*t).is_some_and(|(err, parts)| {
                *err == 0
                    && !parts.is_empty()
                    && parts
                        .values()
                        .all(|p| p.error == 0 && self.brokers.contains_key(&p.leader))
            })
        })
    }

    /// Whether every partition of the asked topics has all its replicas in sync.
    pub fn all_in_sync(&self, topics: &[&str]) -> bool {
        self.all_led(topics)
            && topics.iter().all(|t| {
                self.topics[*t].1.values().all(|p| {
                    let mut a = p.replicas.clone();
                    let mut b = p.isr.clone();
                    a.sort_unstable();
                    b.sort_unstable();
                    a == b
                })
            })
    }
}

/// The ListOffsets version asked (flexible; Kafka 4 serves 1-10).
const LIST_OFFSETS_VERSION: i16 = 7;

/// Sends one request and returns the decoded answer (nothing may follow it).
fn call<Req: Encodable, Resp: Decodable>(
    addr: SocketAddr,
    api: ApiKey,
    version: i16,
    request: &Req,
    timeout: Duration,
) -> Result<Resp, String> {
    call_as(addr, "kafka-launcher", api, version, request, timeout)
}

/// [`call`] with the request header's client id `client_id`.
fn call_as<Req: Encodable, Resp: Decodable>(
    addr: SocketAddr,
    client_id: &str,
    api: ApiKey,
    version: i16,
    request: &Req,
    timeout: Duration,
) -> Result<Resp, String> {
    let mut s =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, api.request_header_version(version))
        .map_err(|e| e.to_string())?;
    request
        .encode(&mut body, version)
        .map_err(|e| e.to_string())?;
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    s.write_all(&frame)
        .map_err(|e| format!("write to {addr}: {e}"))?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len)
        .map_err(|e| format!("read from {addr}: {e}"))?;
    let mut resp = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut resp)
        .map_err(|e| format!("read from {addr}: {e}"))?;
    let mut resp = Bytes::from(resp);
    kafka_protocol::messages::ResponseHeader::decode(
        &mut resp,
        api.response_header_version(version),
    )
    .map_err(|e| e.to_string())?;
    let r = Resp::decode(&mut resp, version).map_err(|e| e.to_string())?;
    if resp.has_remaining() {
        return Err(format!(
            "{} bytes after the {api:?} response",
            resp.remaining()
        ));
    }
    Ok(r)
}

/// Asks `addr` (a partition's leader) for the end offset of each partition of `topic` in
/// `partitions`; returns the partitions it answered with an error for (empty: it serves them
/// all).
pub fn unserved_partitions(
    addr: SocketAddr,
    topic: &str,
    partitions: &[i32],
    timeout: Duration,
) -> Result<Vec<(i32, i16)>, String> {
    let offsets = list_offsets(addr, topic, partitions, OffsetSpec::HighWatermark, timeout)?;
    Ok(offsets
        .into_iter()
        .filter_map(|(p, r)| r.err().map(|code| (p, code)))
        .collect())
}

/// Sends one Metadata request for `topics` (none: no topics, just the brokers) to `addr` and
/// returns the answer, or why there is none.
pub fn metadata(
    addr: SocketAddr,
    topics: &[&str],
    timeout: Duration,
) -> Result<ClusterView, String> {
    let request = MetadataRequest::default()
        .with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(t.to_string()))))
                })
                .collect(),
        ))
        .with_allow_auto_topic_creation(false);
    let m: MetadataResponse = call(addr, ApiKey::Metadata, METADATA_VERSION, &request, timeout)?;
    let mut view = ClusterView {
        controller: m.controller_id.0,
        ..ClusterView::default()
    };
    for b in &m.brokers {
        view.brokers
            .insert(b.node_id.0, (b.host.to_string(), b.port as u16));
    }
    for t in &m.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        let parts = t
            .partitions
            .iter()
            .map(|p| {
                (
                    p.partition_index,
                    PartitionView {
                        error: p.error_code,
                        leader: p.leader_id.0,
                        leader_epoch: p.leader_epoch,
                        replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                        isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                    },
                )
            })
            .collect();
        view.topics.insert(name, (t.error_code, parts));
    }
    Ok(view)
}

/// Whether the broker at `addr` (an unauthenticated listener: the internal one) has both SCRAM
/// credentials (SCRAM-SHA-256 and SCRAM-SHA-512) of `user` in its metadata image: asked with
/// DescribeUserScramCredentials v0, which a KRaft broker answers from that image.
pub fn scram_credentials_known(
    addr: SocketAddr,
    user: &str,
    timeout: Duration,
) -> Result<bool, String> {
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::{
        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
    };
    let request = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
        UserName::default().with_name(StrBytes::from_string(user.to_string())),
    ]));
    let r: DescribeUserScramCredentialsResponse = call(
        addr,
        ApiKey::DescribeUserScramCredentials,
        0,
        &request,
        timeout,
    )?;
    Ok(r.results
        .iter()
        .any(|u| u.user.as_str() == user && u.error_code == 0 && u.credential_infos.len() == 2))
}

/// What a node's ApiVersions answer says.
#[derive(Debug, Clone, Default)]
pub struct ApiVersionsView {
    /// API key -> (min, max version) the broker serves.
    pub ranges: BTreeMap<i16, (i16, i16)>,
    /// Finalized features: name -> (min, max level). A feature at level 0 is not listed.
    pub finalized: BTreeMap<String, (i16, i16)>,
    /// The epoch of the finalized features (-1: the broker has none yet).
    pub finalized_epoch: i64,
    /// Supported features: name -> (min, max level).
    pub supported: BTreeMap<String, (i16, i16)>,
}

/// The ApiVersions version asked (v3: flexible, with the feature fields).
const API_VERSIONS_VERSION: i16 = 3;

/// Asks `addr` ApiVersions (v3) and returns the API ranges and the features it reports.
pub fn api_versions(addr: SocketAddr, timeout: Duration) -> Result<ApiVersionsView, String> {
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("kafka-launcher"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    let r: ApiVersionsResponse = call(
        addr,
        ApiKey::ApiVersions,
        API_VERSIONS_VERSION,
        &request,
        timeout,
    )?;
    if r.error_code != 0 {
        return Err(format!("ApiVersions error {}", r.error_code));
    }
    Ok(ApiVersionsView {
        ranges: r
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect(),
        finalized: r
            .finalized_features
            .iter()
            .map(|f| {
                (
                    f.name.to_string(),
                    (f.min_version_level, f.max_version_level),
                )
            })
            .collect(),
        finalized_epoch: r.finalized_features_epoch,
        supported: r
            .supported_features
            .iter()
            .map(|f| (f.name.to_string(), (f.min_version, f.max_version)))
            .collect(),
    })
}

/// A GetTelemetrySubscriptions answer (KIP-714), as a broker gives it to a new client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetrySubscriptionView {
    /// The answer's error code (0 = none).
    pub error: i16,
    /// The client instance id the broker gave (base64url, as Kafka prints a `Uuid`).
    pub instance: String,
    /// The subscription id.
    pub subscription_id: i32,
    /// The metric name prefixes asked for (`*`: all; empty: none, do not push).
    pub requested_metrics: Vec<String>,
    /// The push interval.
    pub push_interval_ms: i32,
    /// Compression ids the broker accepts, preferred first.
    pub accepted_compression: Vec<i8>,
    /// The most bytes one push may carry.
    pub telemetry_max_bytes: i32,
    /// Whether sums are asked as deltas (else cumulative).
    pub delta_temporality: bool,
}

/// Asks `addr` GetTelemetrySubscriptions (v0) as a new client (instance id zero) whose request
/// header says `client_id` (subscriptions may match on it). Fails when the broker does not
/// offer the API (it has no telemetry receiver: the request is refused and the connection
/// closed).
pub fn get_telemetry_subscriptions(
    addr: SocketAddr,
    client_id: &str,
    timeout: Duration,
) -> Result<TelemetrySubscriptionView, String> {
    use kafka_protocol::messages::{
        GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
    };
    let r: GetTelemetrySubscriptionsResponse = call_as(
        addr,
        client_id,
        ApiKey::GetTelemetrySubscriptions,
        0,
        &GetTelemetrySubscriptionsRequest::default(),
        timeout,
    )?;
    Ok(TelemetrySubscriptionView {
        error: r.error_code,
        instance: base64url(r.client_instance_id.as_bytes()),
        subscription_id: r.subscription_id,
        requested_metrics: r.requested_metrics.iter().map(|m| m.to_string()).collect(),
        push_interval_ms: r.push_interval_ms,
        accepted_compression: r.accepted_compression_types,
        telemetry_max_bytes: r.telemetry_max_bytes,
        delta_temporality: r.delta_temporality,
    })
}

/// Base64url without padding, as Kafka's `Uuid::toString` prints 16 bytes.
fn base64url(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// Which end of a partition ListOffsets is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset (timestamp -2).
    Earliest,
    /// The high watermark (timestamp -1, isolation READ_UNCOMMITTED).
    HighWatermark,
    /// The last stable offset (timestamp -1, isolation READ_COMMITTED): the first offset of
    /// the oldest open transaction, the high watermark when none is open.
    LastStable,
}

/// Asks `addr` (the partitions' leader) for an offset of each partition of `topic` in
/// `partitions`: partition -> `Ok(offset)` or `Err(error code)`.
pub fn list_offsets(
    addr: SocketAddr,
    topic: &str,
    partitions: &[i32],
    spec: OffsetSpec,
    timeout: Duration,
) -> Result<BTreeMap<i32, Result<i64, i16>>, String> {
    let (timestamp, isolation) = match spec {
        OffsetSpec::Earliest => (-2, 0),
        OffsetSpec::HighWatermark => (-1, 0),
        OffsetSpec::LastStable => (-1, 1),
    };
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_current_leader_epoch(-1)
                            .with_timestamp(timestamp)
                    })
                    .collect(),
            )]);
    let r: ListOffsetsResponse = call(
        addr,
        ApiKey::ListOffsets,
        LIST_OFFSETS_VERSION,
        &request,
        timeout,
    )?;
    Ok(r.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            let v = if p.error_code == 0 {
                Ok(p.offset)
            } else {
                Err(p.error_code)
            };
            (p.partition_index, v)
        })
        .collect())
}

/// The coordinator key types of FindCoordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorType {
    /// A consumer group's coordinator (key type 0).
    Group,
    /// A transactional id's coordinator (key type 1).
    Transaction,
}

/// Asks `addr` which node coordinates `key` (FindCoordinator v4, one batched key): its node
/// id, or the error code and message.
pub fn find_coordinator(
    addr: SocketAddr,
    key: &str,
    kind: CoordinatorType,
    timeout: Duration,
) -> Result<Result<i32, (i16, String)>, String> {
    use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
    let request = FindCoordinatorRequest::default()
        .with_key_type(match kind {
            CoordinatorType::Group => 0,
            CoordinatorType::Transaction => 1,
        })
        .with_coordinator_keys(vec![StrBytes::from_string(key.to_string())]);
    let r: FindCoordinatorResponse = call(addr, ApiKey::FindCoordinator, 4, &request, timeout)?;
    let c = r
        .coordinators
        .first()
        .ok_or("FindCoordinator answered no coordinator")?;
    Ok(if c.error_code == 0 {
        Ok(c.node_id.0)
    } else {
        Err((
            c.error_code,
            c.error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        ))
    })
}
