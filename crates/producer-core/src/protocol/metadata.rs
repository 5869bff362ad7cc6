//! Metadata (API key 3), versions 1-13: which brokers exist and which broker leads each
//! partition of the topics a producer writes to.
//!
//! Versions 9 and later are flexible (compact encodings, tagged fields). Field order and version
//! ranges follow Kafka's `MetadataRequest.json` / `MetadataResponse.json`; v13's response ends
//! with a top-level error code.

use super::primitives::{
    array, boolean, field, int16, int32, min_array_size, min_string_size, min_tags_size,
    nullable_string, skip_tags, string, uuid, PResult, Put,
};
use super::{ApiKey, DecodeError, Parsed};
use crate::ErrorCode;

/// A Metadata request body.
///
/// Use it to bootstrap the cluster view and to refresh it when a partition's leader is unknown
/// or has moved. Encode it with [`MetadataRequest::encode`] inside
/// [`encode_request`](super::encode_request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataRequest<'a> {
    /// The topics to describe; `None` asks for every topic in the cluster (a null array on the
    /// wire), `Some(&[])` for none (brokers only).
    pub topics: Option<&'a [&'a str]>,
    /// Whether the broker may auto-create requested topics that do not exist (if it is configured
    /// to). Sent from v4; brokers before v4 behave as if it were `true`.
    pub allow_auto_topic_creation: bool,
    /// Whether to return each topic's authorized-operations bitfield (sent from v8).
    pub include_topic_authorized_operations: bool,
}

impl MetadataRequest<'_> {
    /// Appends the request body for `version` to `buf`.
    ///
    /// From v10 each topic entry carries a topic id, written as the all-zero uuid (topics are
    /// looked up by name). `IncludeClusterAuthorizedOperations` (v8-10) is always written as
    /// `false`.
    ///
    /// `version` must be within [`ApiKey::supported_versions`] for [`ApiKey::Metadata`]; anything
    /// else is a caller bug (checked with `debug_assert!`).
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(ApiKey::Metadata, version).is_ok(),
            "Metadata v{version} is not supported"
        );
        let flexible = ApiKey::Metadata.is_flexible(version);
        match self.topics {
            None => buf.put_nullable_array_len(flexible, None),
            Some(topics) => {
                buf.put_array_len(flexible, topics.len());
                for name in topics {
                    if version >= 10 {
                        buf.put_uuid([0; 16]);
                    }
                    buf.put_string(flexible, name);
                    buf.put_empty_tags(flexible);
                }
            }
        }
        if version >= 4 {
            buf.put_bool(self.allow_auto_topic_creation);
        }
        if (8..=10).contains(&version) {
            buf.put_bool(false); // IncludeClusterAuthorizedOperations
        }
        if version >= 8 {
            buf.put_bool(self.include_topic_authorized_operations);
        }
        buf.put_empty_tags(flexible);
    }
}

/// A parsed Metadata response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResponse {
    /// How long the broker throttled the request for quota reasons (0 before v3).
    pub throttle_time_ms: i32,
    /// Every broker in the cluster.
    pub brokers: Vec<MetadataBroker>,
    /// The cluster id (`None` before v2, or when the broker has none).
    pub cluster_id: Option<String>,
    /// The controller's broker id (-1 when unknown).
    pub controller_id: i32,
    /// One entry per requested (or, for an all-topics request, existing) topic.
    pub topics: Vec<MetadataTopic>,
    /// Cluster authorized-operations bitfield (v8-10 only; `i32::MIN` otherwise).
    pub cluster_authorized_operations: i32,
    /// The top-level error code (v13+; [`ErrorCode::NONE`] before): a broker that cannot answer
    /// at all (REBOOTSTRAP_REQUIRED, KIP-1102) says so here, with no brokers or topics.
    pub error_code: ErrorCode,
}

/// One broker of a [`MetadataResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataBroker {
    /// The broker id.
    pub node_id: i32,
    /// The host to connect to.
    pub host: String,
    /// The port to connect to.
    pub port: i32,
    /// The broker's rack, if it has one.
    pub rack: Option<String>,
}

/// One topic of a [`MetadataResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataTopic {
    /// The topic-level error (for example `UNKNOWN_TOPIC_OR_PARTITION`), or `NONE`.
    pub error_code: ErrorCode,
    /// The topic name; only v12+ may send null (topics queried by id), never when
    /// `error_code` is `NONE`.
    pub name: Option<String>,
    /// The topic id (v10+; all zeros before, or for unknown topics).
    pub topic_id: [u8; 16],
    /// Whether the topic is internal (for example `__consumer_offsets`).
    pub is_internal: bool,
    /// The topic's partitions.
    pub partitions: Vec<MetadataPartition>,
    /// Topic authorized-operations bitfield (v8+; `i32::MIN` when absent or not requested).
    pub topic_authorized_operations: i32,
}

/// One partition of a [`MetadataTopic`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataPartition {
    /// The partition-level error (for example `LEADER_NOT_AVAILABLE`), or `NONE`.
    pub error_code: ErrorCode,
    /// The partition index.
    pub partition_index: i32,
    /// The leader's broker id (-1 when there is none).
    pub leader_id: i32,
    /// The leader epoch (v7+; -1 before).
    pub leader_epoch: i32,
    /// All replicas of the partition.
    pub replica_nodes: Vec<i32>,
    /// The in-sync replicas.
    pub isr_nodes: Vec<i32>,
    /// Offline replicas (v5+; empty before).
    pub offline_replicas: Vec<i32>,
}

impl MetadataResponse {
    /// Parses a Metadata response body (everything after the response header) at `version`.
    ///
    /// Unknown tagged fields are skipped; bytes after the body are counted in
    /// [`Parsed::trailing`], not rejected.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        DecodeError::check_version(ApiKey::Metadata, version)?;
        let (rest, body) = parse_response(body, version)
            .map_err(|e| DecodeError::from_nom(ApiKey::Metadata, version, e))?;
        Ok(Parsed {
            body,
            trailing: rest.len(),
        })
    }
}

fn parse_response(i: &[u8], version: i16) -> PResult<'_, MetadataResponse> {
    let flexible = ApiKey::Metadata.is_flexible(version);
    let (i, throttle_time_ms) = if version >= 3 {
        field("ThrottleTimeMs", int32)(i)?
    } else {
        (i, 0)
    };
    let (i, brokers) = field(
        "Brokers",
        array(flexible, min_broker_size(flexible), |i| {
            parse_broker(i, flexible)
        }),
    )(i)?;
    let (i, cluster_id) = if version >= 2 {
        field("ClusterId", nullable_string(flexible))(i)?
    } else {
        (i, None)
    };
    let (i, controller_id) = field("ControllerId", int32)(i)?;
    let (i, topics) = field(
        "Topics",
        array(flexible, min_topic_size(version), |i| {
            parse_topic(i, version)
        }),
    )(i)?;
    let (i, cluster_authorized_operations) = if (8..=10).contains(&version) {
        field("ClusterAuthorizedOperations", int32)(i)?
    } else {
        (i, i32::MIN)
    };
    let (i, error_code) = if version >= 13 {
        field("ErrorCode", int16)(i)?
    } else {
        (i, 0)
    };
    let (i, ()) = field("MetadataResponse tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        MetadataResponse {
            throttle_time_ms,
            brokers,
            cluster_id,
            controller_id,
            topics,
            cluster_authorized_operations,
            error_code: ErrorCode(error_code),
        },
    ))
}

/// The fewest bytes a broker entry takes: NodeId, Host, Port, Rack, tagged fields.
fn min_broker_size(flexible: bool) -> usize {
    4 + min_string_size(flexible) + 4 + min_string_size(flexible) + min_tags_size(flexible)
}

/// The fewest bytes a topic entry takes at `version`: ErrorCode, Name, TopicId (v10+),
/// IsInternal, Partitions, TopicAuthorizedOperations (v8+), tagged fields.
fn min_topic_size(version: i16) -> usize {
    let flexible = ApiKey::Metadata.is_flexible(version);
    2 + min_string_size(flexible)
        + if version >= 10 { 16 } else { 0 }
        + 1
        + min_array_size(flexible)
        + if version >= 8 { 4 } else { 0 }
        + min_tags_size(flexible)
}

/// The fewest bytes a partition entry takes at `version`: ErrorCode, PartitionIndex, LeaderId,
/// LeaderEpoch (v7+), ReplicaNodes, IsrNodes, OfflineReplicas (v5+), tagged fields.
fn min_partition_size(version: i16) -> usize {
    let flexible = ApiKey::Metadata.is_flexible(version);
    let arrays = if version >= 5 { 3 } else { 2 };
    2 + 4
        + 4
        + if version >= 7 { 4 } else { 0 }
        + arrays * min_array_size(flexible)
        + min_tags_size(flexible)
}

fn parse_broker(i: &[u8], flexible: bool) -> PResult<'_, MetadataBroker> {
    let (i, node_id) = field("NodeId", int32)(i)?;
    let (i, host) = field("Host", string(flexible))(i)?;
    let (i, port) = field("Port", int32)(i)?;
    let (i, rack) = field("Rack", nullable_string(flexible))(i)?;
    let (i, ()) = field("MetadataResponseBroker tagged fields", |i| {
        skip_tags(i, flexible)
    })(i)?;
    Ok((
        i,
        MetadataBroker {
            node_id,
            host,
            port,
            rack,
        },
    ))
}

fn parse_topic(i: &[u8], version: i16) -> PResult<'_, MetadataTopic> {
    let flexible = ApiKey::Metadata.is_flexible(version);
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    let (i, name) = if version >= 12 {
        field("Name", nullable_string(flexible))(i)?
    } else {
        let (i, name) = field("Name", string(flexible))(i)?;
        (i, Some(name))
    };
    let (i, topic_id) = if version >= 10 {
        field("TopicId", uuid)(i)?
    } else {
        (i, [0; 16])
    };
    let (i, is_internal) = field("IsInternal", boolean)(i)?;
    let (i, partitions) = field(
        "Partitions",
        array(flexible, min_partition_size(version), |i| {
            parse_partition(i, version)
        }),
    )(i)?;
    let (i, topic_authorized_operations) = if version >= 8 {
        field("TopicAuthorizedOperations", int32)(i)?
    } else {
        (i, i32::MIN)
    };
    let (i, ()) = field("MetadataResponseTopic tagged fields", |i| {
        skip_tags(i, flexible)
    })(i)?;
    Ok((
        i,
        MetadataTopic {
            error_code: ErrorCode(error_code),
            name,
            topic_id,
            is_internal,
            partitions,
            topic_authorized_operations,
        },
    ))
}

fn parse_partition(i: &[u8], version: i16) -> PResult<'_, MetadataPartition> {
    let flexible = ApiKey::Metadata.is_flexible(version);
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    let (i, partition_index) = field("PartitionIndex", int32)(i)?;
    let (i, leader_id) = field("LeaderId", int32)(i)?;
    let (i, leader_epoch) = if version >= 7 {
        field("LeaderEpoch", int32)(i)?
    } else {
        (i, -1)
    };
    let (i, replica_nodes) = field("ReplicaNodes", array(flexible, 4, int32))(i)?;
    let (i, isr_nodes) = field("IsrNodes", array(flexible, 4, int32))(i)?;
    let (i, offline_replicas) = if version >= 5 {
        field("OfflineReplicas", array(flexible, 4, int32))(i)?
    } else {
        (i, Vec::new())
    };
    let (i, ()) = field("MetadataResponsePartition tagged fields", |i| {
        skip_tags(i, flexible)
    })(i)?;
    Ok((
        i,
        MetadataPartition {
            error_code: ErrorCode(error_code),
            partition_index,
            leader_id,
            leader_epoch,
            replica_nodes,
            isr_nodes,
            offline_replicas,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_request_v1() {
        let mut buf = Vec::new();
        let topics = ["ab"];
        MetadataRequest {
            topics: Some(&topics),
            allow_auto_topic_creation: false,
            include_topic_authorized_operations: true,
        }
        .encode(1, &mut buf);
        #[rustfmt::skip]
        let expected = [
            0, 0, 0, 1,        // Topics: ARRAY length 1
            0, 2, b'a', b'b',  //   Name: STRING "ab"
            // AllowAutoTopicCreation (v4+), Include*AuthorizedOperations (v8+): absent
        ];
        assert_eq!(buf, expected);

        buf.clear();
        MetadataRequest {
            topics: None,
            allow_auto_topic_creation: true,
            include_topic_authorized_operations: false,
        }
        .encode(1, &mut buf);
        assert_eq!(
            buf,
            [0xff, 0xff, 0xff, 0xff],
            "null Topics array = all topics"
        );
    }

    #[test]
    fn golden_request_v9() {
        let mut buf = Vec::new();
        let topics = ["ab"];
        MetadataRequest {
            topics: Some(&topics),
            allow_auto_topic_creation: true,
            include_topic_authorized_operations: true,
        }
        .encode(9, &mut buf);
        #[rustfmt::skip]
        let expected = [
            2,                 // Topics: COMPACT_ARRAY, 1 + 1
            3, b'a', b'b',     //   Name: COMPACT_STRING "ab"
            0,                 //   topic tagged fields: none
            1,                 // AllowAutoTopicCreation: true
            0,                 // IncludeClusterAuthorizedOperations (v8-10): false
            1,                 // IncludeTopicAuthorizedOperations: true
            0,                 // tagged fields: none
        ];
        assert_eq!(buf, expected);
    }

    #[test]
    fn golden_request_v12() {
        let mut buf = Vec::new();
        let topics = ["ab"];
        MetadataRequest {
            topics: Some(&topics),
            allow_auto_topic_creation: false,
            include_topic_authorized_operations: false,
        }
        .encode(12, &mut buf);
        #[rustfmt::skip]
        let expected = [
            2,                                              // Topics: COMPACT_ARRAY, 1 + 1
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //   TopicId (v10+): zero uuid
            3, b'a', b'b',                                  //   Name: COMPACT_NULLABLE_STRING "ab"
            0,                                              //   topic tagged fields
            0,                                              // AllowAutoTopicCreation: false
            // IncludeClusterAuthorizedOperations: gone after v10
            0,                                              // IncludeTopicAuthorizedOperations: false
            0,                                              // tagged fields
        ];
        assert_eq!(buf, expected);

        buf.clear();
        MetadataRequest {
            topics: None,
            allow_auto_topic_creation: true,
            include_topic_authorized_operations: false,
        }
        .encode(12, &mut buf);
        assert_eq!(
            buf,
            [0, 1, 0, 0],
            "compact null Topics, auto-create, no ops, no tags"
        );
    }

    #[test]
    fn golden_response_v1() {
        #[rustfmt::skip]
        let body = [
            0, 0, 0, 1,                 // Brokers: ARRAY length 1
            0, 0, 0, 1,                 //   NodeId 1
            0, 1, b'h',                 //   Host "h"
            0, 0, 0x23, 0x84,           //   Port 9092
            0xff, 0xff,                 //   Rack: null
            0, 0, 0, 1,                 // ControllerId 1 (no ClusterId before v2)
            0, 0, 0, 1,                 // Topics: ARRAY length 1
            0, 0,                       //   ErrorCode 0
            0, 1, b't',                 //   Name "t"
            0,                          //   IsInternal false
            0, 0, 0, 1,                 //   Partitions: ARRAY length 1
            0, 0,                       //     ErrorCode 0
            0, 0, 0, 0,                 //     PartitionIndex 0
            0, 0, 0, 1,                 //     LeaderId 1 (no LeaderEpoch before v7)
            0, 0, 0, 1, 0, 0, 0, 1,     //     ReplicaNodes [1]
            0, 0, 0, 1, 0, 0, 0, 1,     //     IsrNodes [1] (no OfflineReplicas before v5)
        ];
        let parsed = MetadataResponse::parse(1, &body).unwrap();
        assert_eq!(parsed.trailing, 0);
        assert_eq!(
            parsed.body,
            MetadataResponse {
                throttle_time_ms: 0,
                brokers: vec![MetadataBroker {
                    node_id: 1,
                    host: "h".into(),
                    port: 9092,
                    rack: None
                }],
                cluster_id: None,
                controller_id: 1,
                topics: vec![MetadataTopic {
                    error_code: ErrorCode::NONE,
                    name: Some("t".into()),
                    topic_id: [0; 16],
                    is_internal: false,
                    partitions: vec![MetadataPartition {
                        error_code: ErrorCode::NONE,
                        partition_index: 0,
                        leader_id: 1,
                        leader_epoch: -1,
                        replica_nodes: vec![1],
                        isr_nodes: vec![1],
                        offline_replicas: vec![],
                    }],
                    topic_authorized_operations: i32::MIN,
                }],
                cluster_authorized_operations: i32::MIN,
                error_code: ErrorCode::NONE,
            }
        );
    }

    #[test]
    fn golden_response_v9_with_unknown_tag_and_trailing_byte() {
        #[rustfmt::skip]
        let body = [
            0, 0, 0, 7,                 // ThrottleTimeMs 7
            2,                          // Brokers: COMPACT_ARRAY 1 + 1
            0, 0, 0, 1,                 //   NodeId 1
            2, b'h',                    //   Host "h"
            0, 0, 0x23, 0x84,           //   Port 9092
            3, b'r', b'1',              //   Rack "r1"
            0,                          //   tagged fields
            3, b'c', b'x',              // ClusterId "cx"
            0, 0, 0, 1,                 // ControllerId 1
            2,                          // Topics: 1 + 1
            0, 0,                       //   ErrorCode 0
            2, b't',                    //   Name "t"
            1,                          //   IsInternal true
            2,                          //   Partitions: 1 + 1
            0, 3,                       //     ErrorCode 3
            0, 0, 0, 2,                 //     PartitionIndex 2
            0, 0, 0, 1,                 //     LeaderId 1
            0, 0, 0, 5,                 //     LeaderEpoch 5
            2, 0, 0, 0, 1,              //     ReplicaNodes [1]
            1,                          //     IsrNodes []
            2, 0, 0, 0, 3,              //     OfflineReplicas [3]
            1, 5, 1, 0xff,              //     tagged fields: 1 unknown (tag 5, 1 byte)
            0, 0, 0, 8,                 //   TopicAuthorizedOperations 8
            0,                          //   tagged fields
            0, 0, 0, 0x10,              // ClusterAuthorizedOperations 16 (v8-10)
            0,                          // tagged fields
            0,                          // stray byte (librdkafka's mock appends one)
        ];
        let parsed = MetadataResponse::parse(9, &body).unwrap();
        assert_eq!(parsed.trailing, 1);
        let r = parsed.body;
        assert_eq!(r.throttle_time_ms, 7);
        assert_eq!(
            r.brokers,
            vec![MetadataBroker {
                node_id: 1,
                host: "h".into(),
                port: 9092,
                rack: Some("r1".into())
            }]
        );
        assert_eq!(r.cluster_id.as_deref(), Some("cx"));
        assert_eq!(r.controller_id, 1);
        assert_eq!(r.cluster_authorized_operations, 16);
        assert_eq!(
            r.topics,
            vec![MetadataTopic {
                error_code: ErrorCode::NONE,
                name: Some("t".into()),
                topic_id: [0; 16],
                is_internal: true,
                partitions: vec![MetadataPartition {
                    error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    partition_index: 2,
                    leader_id: 1,
                    leader_epoch: 5,
                    replica_nodes: vec![1],
                    isr_nodes: vec![],
                    offline_replicas: vec![3],
                }],
                topic_authorized_operations: 8,
            }]
        );
    }

    #[test]
    fn golden_response_v12_null_topic_name() {
        #[rustfmt::skip]
        let body = [
            0, 0, 0, 0,                 // ThrottleTimeMs 0
            1,                          // Brokers: empty
            0,                          // ClusterId: null
            0xff, 0xff, 0xff, 0xff,     // ControllerId -1
            2,                          // Topics: 1 + 1
            0, 3,                       //   ErrorCode UNKNOWN_TOPIC_OR_PARTITION
            0,                          //   Name: null (allowed from v12)
            0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
            0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, //   TopicId
            0,                          //   IsInternal false
            1,                          //   Partitions: empty
            0x80, 0, 0, 0,              //   TopicAuthorizedOperations i32::MIN
            0,                          //   tagged fields
            // no ClusterAuthorizedOperations after v10
            0,                          // tagged fields
        ];
        let parsed = MetadataResponse::parse(12, &body).unwrap();
        assert_eq!(parsed.trailing, 0);
        assert_eq!(
            parsed.body,
            MetadataResponse {
                throttle_time_ms: 0,
                brokers: vec![],
                cluster_id: None,
                controller_id: -1,
                topics: vec![MetadataTopic {
                    error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    name: None,
                    topic_id: [0x11; 16],
                    is_internal: false,
                    partitions: vec![],
                    topic_authorized_operations: i32::MIN,
                }],
                cluster_authorized_operations: i32::MIN,
                error_code: ErrorCode::NONE,
            }
        );
    }

    #[test]
    fn null_topic_name_before_v12_is_an_error() {
        // v11: Name is a non-nullable COMPACT_STRING.
        let mut body = vec![0, 0, 0, 0, 1, 0, 0xff, 0xff, 0xff, 0xff, 2, 0, 3, 0];
        body.extend_from_slice(&[0; 16]);
        body.extend_from_slice(&[0, 1, 0x80, 0, 0, 0, 0, 0]);
        let err = MetadataResponse::parse(11, &body).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::Malformed {
                    field: "Name",
                    kind: super::super::primitives::WireErrorKind::UnexpectedNull,
                    ..
                }
            ),
            "{err:?}"
        );
        // The same bytes are valid at v12.
        assert!(MetadataResponse::parse(12, &body).is_ok());
    }

    #[test]
    fn unsupported_versions_are_rejected() {
        for v in [-1, 0, 14] {
            assert_eq!(
                MetadataResponse::parse(v, &[]),
                Err(DecodeError::UnsupportedVersion {
                    api: ApiKey::Metadata,
                    version: v
                })
            );
        }
    }

    #[test]
    fn truncation_names_the_field() {
        // v1 body cut inside the first broker's Host (20 bytes announced, 11 left; the one
        // broker the array claims fits in the bytes left at its minimum size of 12).
        let mut body = vec![0, 0, 0, 1, 0, 0, 0, 1, 0, 20, b'h'];
        body.extend_from_slice(&[0; 10]);
        match MetadataResponse::parse(1, &body) {
            Err(DecodeError::Malformed { field, .. }) => assert_eq!(field, "Host"),
            other => panic!("{other:?}"),
        }
    }
}
