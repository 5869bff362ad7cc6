//! Metadata v1-13 cross-checked against the independent `kafka-protocol` codec.
//!
//! Requests: ours encodes, kafka-protocol decodes. Responses: kafka-protocol encodes (with
//! unknown tagged fields at flexible versions), ours parses. Plus truncation and garbage.

mod kp;

use std::collections::BTreeMap;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{metadata_request, metadata_response, BrokerId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable};
use kp::{kp_uuid, sb};
use producer_core::protocol::metadata::{
    MetadataBroker, MetadataPartition, MetadataRequest, MetadataResponse, MetadataTopic,
};
use producer_core::protocol::{ApiKey, DecodeError};
use producer_core::ErrorCode;
use proptest::prelude::*;

const VERSIONS: std::ops::RangeInclusive<i16> = 1..=13;

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn request_crosscheck(
        topics in proptest::option::of(proptest::collection::vec("[a-zA-Z0-9._-]{0,30}|.{0,10}", 0..6)),
        allow in any::<bool>(),
        include_topic_ops in any::<bool>(),
    ) {
        let names: Option<Vec<&str>> = topics.as_ref().map(|t| t.iter().map(String::as_str).collect());
        let req = MetadataRequest {
            topics: names.as_deref(),
            allow_auto_topic_creation: allow,
            include_topic_authorized_operations: include_topic_ops,
        };
        for version in VERSIONS {
            let mut buf = Vec::new();
            req.encode(version, &mut buf);
            let mut bytes = Bytes::from(buf);
            let kp = metadata_request::MetadataRequest::decode(&mut bytes, version)
                .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert_eq!(bytes.remaining(), 0, "v{} left bytes", version);

            match (&topics, &kp.topics) {
                (None, None) => {}
                (Some(ours), Some(theirs)) => {
                    prop_assert_eq!(ours.len(), theirs.len());
                    for (o, t) in ours.iter().zip(theirs) {
                        prop_assert_eq!(t.name.as_deref().map(|n| n.as_str()), Some(o.as_str()));
                        prop_assert_eq!(t.topic_id.as_bytes(), &[0u8; 16]);
                        prop_assert!(t.unknown_tagged_fields.is_empty());
                    }
                }
                (o, t) => prop_assert!(false, "v{}: topics {:?} decoded as {:?}", version, o, t),
            }
            // Before v4 the field is absent and reads as its default (true).
            prop_assert_eq!(kp.allow_auto_topic_creation, if version >= 4 { allow } else { true });
            prop_assert!(!kp.include_cluster_authorized_operations);
            prop_assert_eq!(kp.include_topic_authorized_operations, version >= 8 && include_topic_ops);
            prop_assert!(kp.unknown_tagged_fields.is_empty());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

fn broker() -> impl Strategy<Value = MetadataBroker> {
    (
        any::<i32>(),
        ".{0,12}",
        any::<i32>(),
        proptest::option::of("[a-z0-9-]{0,8}"),
    )
        .prop_map(|(node_id, host, port, rack)| MetadataBroker {
            node_id,
            host,
            port,
            rack,
        })
}

fn partition() -> impl Strategy<Value = MetadataPartition> {
    let ids = || proptest::collection::vec(any::<i32>(), 0..5);
    (
        any::<i16>(),
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        ids(),
        ids(),
        ids(),
    )
        .prop_map(
            |(
                e,
                partition_index,
                leader_id,
                leader_epoch,
                replica_nodes,
                isr_nodes,
                offline_replicas,
            )| MetadataPartition {
                error_code: ErrorCode(e),
                partition_index,
                leader_id,
                leader_epoch,
                replica_nodes,
                isr_nodes,
                offline_replicas,
            },
        )
}

fn topic() -> impl Strategy<Value = MetadataTopic> {
    (
        any::<i16>(),
        proptest::option::of("[a-zA-Z0-9._-]{0,20}"),
        any::<[u8; 16]>(),
        any::<bool>(),
        proptest::collection::vec(partition(), 0..4),
        any::<i32>(),
    )
        .prop_map(
            |(e, name, topic_id, is_internal, partitions, ops)| MetadataTopic {
                error_code: ErrorCode(e),
                name,
                topic_id,
                is_internal,
                partitions,
                topic_authorized_operations: ops,
            },
        )
}

fn response() -> impl Strategy<Value = MetadataResponse> {
    (
        any::<i32>(),
        proptest::collection::vec(broker(), 0..4),
        proptest::option::of(".{0,10}"),
        any::<i32>(),
        proptest::collection::vec(topic(), 0..4),
        any::<i32>(),
        any::<i16>(),
    )
        .prop_map(
            |(throttle_time_ms, brokers, cluster_id, controller_id, topics, ops, error)| {
                MetadataResponse {
                    throttle_time_ms,
                    brokers,
                    cluster_id,
                    controller_id,
                    topics,
                    cluster_authorized_operations: ops,
                    error_code: ErrorCode(error),
                }
            },
        )
}

fn unknown_tags() -> impl Strategy<Value = BTreeMap<i32, Bytes>> {
    proptest::collection::btree_map(
        0i32..40,
        proptest::collection::vec(any::<u8>(), 0..6).prop_map(Bytes::from),
        0..3,
    )
}

/// What a response holding `full`'s values looks like at `version`: fields the version does not
/// carry take their JSON defaults.
fn project(full: &MetadataResponse, version: i16) -> MetadataResponse {
    MetadataResponse {
        throttle_time_ms: if version >= 3 {
            full.throttle_time_ms
        } else {
            0
        },
        brokers: full.brokers.clone(),
        cluster_id: if version >= 2 {
            full.cluster_id.clone()
        } else {
            None
        },
        controller_id: full.controller_id,
        topics: full
            .topics
            .iter()
            .map(|t| MetadataTopic {
                error_code: t.error_code,
                name: if version >= 12 {
                    t.name.clone()
                } else {
                    Some(t.name.clone().unwrap_or_default())
                },
                topic_id: if version >= 10 { t.topic_id } else { [0; 16] },
                is_internal: t.is_internal,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| MetadataPartition {
                        leader_epoch: if version >= 7 { p.leader_epoch } else { -1 },
                        offline_replicas: if version >= 5 {
                            p.offline_replicas.clone()
                        } else {
                            vec![]
                        },
                        ..p.clone()
                    })
                    .collect(),
                topic_authorized_operations: if version >= 8 {
                    t.topic_authorized_operations
                } else {
                    i32::MIN
                },
            })
            .collect(),
        cluster_authorized_operations: if (8..=10).contains(&version) {
            full.cluster_authorized_operations
        } else {
            i32::MIN
        },
        error_code: if version >= 13 {
            full.error_code
        } else {
            ErrorCode::NONE
        },
    }
}

/// Builds kafka-protocol's response from ours (already projected to `version`), adding `tags` as
/// unknown tagged fields of every struct at flexible versions.
fn to_kp(
    r: &MetadataResponse,
    version: i16,
    tags: &BTreeMap<i32, Bytes>,
) -> metadata_response::MetadataResponse {
    let tags = if version >= 9 {
        tags.clone()
    } else {
        BTreeMap::new()
    };
    let mut kp = metadata_response::MetadataResponse::default();
    kp.throttle_time_ms = r.throttle_time_ms;
    kp.brokers = r
        .brokers
        .iter()
        .map(|b| {
            let mut kb = metadata_response::MetadataResponseBroker::default();
            kb.node_id = BrokerId(b.node_id);
            kb.host = sb(&b.host);
            kb.port = b.port;
            kb.rack = b.rack.as_deref().map(sb);
            kb.unknown_tagged_fields = tags.clone();
            kb
        })
        .collect();
    kp.cluster_id = r.cluster_id.as_deref().map(sb);
    kp.controller_id = BrokerId(r.controller_id);
    kp.topics = r
        .topics
        .iter()
        .map(|t| {
            let mut kt = metadata_response::MetadataResponseTopic::default();
            kt.error_code = t.error_code.0;
            kt.name = t.name.as_deref().map(|n| TopicName(sb(n)));
            kt.topic_id = kp_uuid!(t.topic_id);
            kt.is_internal = t.is_internal;
            kt.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut kpp = metadata_response::MetadataResponsePartition::default();
                    kpp.error_code = p.error_code.0;
                    kpp.partition_index = p.partition_index;
                    kpp.leader_id = BrokerId(p.leader_id);
                    kpp.leader_epoch = p.leader_epoch;
                    kpp.replica_nodes = p.replica_nodes.iter().copied().map(BrokerId).collect();
                    kpp.isr_nodes = p.isr_nodes.iter().copied().map(BrokerId).collect();
                    kpp.offline_replicas =
                        p.offline_replicas.iter().copied().map(BrokerId).collect();
                    kpp.unknown_tagged_fields = tags.clone();
                    kpp
                })
                .collect();
            kt.topic_authorized_operations = t.topic_authorized_operations;
            kt.unknown_tagged_fields = tags.clone();
            kt
        })
        .collect();
    kp.cluster_authorized_operations = r.cluster_authorized_operations;
    kp.error_code = r.error_code.0;
    kp.unknown_tagged_fields = tags;
    kp
}

fn kp_encode(kp: &metadata_response::MetadataResponse, version: i16) -> Vec<u8> {
    let mut buf = Vec::new();
    kp.encode(&mut buf, version)
        .expect("kafka-protocol encodes");
    buf
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn response_crosscheck(full in response(), tags in unknown_tags()) {
        for version in VERSIONS {
            let expected = project(&full, version);
            let bytes = kp_encode(&to_kp(&expected, version, &tags), version);
            let parsed = MetadataResponse::parse(version, &bytes)
                .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert_eq!(parsed.trailing, 0);
            prop_assert_eq!(&parsed.body, &expected, "v{}", version);

            // Extra bytes after the body are counted, not rejected.
            let mut longer = bytes.clone();
            longer.extend_from_slice(&[0, 1, 2]);
            prop_assert_eq!(MetadataResponse::parse(version, &longer).map(|p| p.trailing), Ok(3));

            // Every strict prefix is an error naming a field (never a panic).
            for cut in 0..bytes.len() {
                match MetadataResponse::parse(version, &bytes[..cut]) {
                    Err(DecodeError::Malformed { api: ApiKey::Metadata, version: v, field, .. }) => {
                        prop_assert_eq!(v, version);
                        prop_assert!(!field.is_empty());
                    }
                    other => prop_assert!(false, "v{} cut at {}: {:?}", version, cut, other),
                }
            }
        }
    }

    #[test]
    fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        for version in VERSIONS {
            let _ = MetadataResponse::parse(version, &data);
        }
    }

    #[test]
    fn corrupted_responses_never_panic(
        full in response(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        for version in VERSIONS {
            let mut bytes = kp_encode(&to_kp(&project(&full, version), version, &BTreeMap::new()), version);
            if bytes.is_empty() {
                continue;
            }
            for (idx, b) in &flips {
                let i = idx.index(bytes.len());
                bytes[i] = *b;
            }
            let _ = MetadataResponse::parse(version, &bytes);
        }
    }
}

#[test]
fn huge_array_count_is_rejected_without_allocating() {
    // v1: Brokers array claims i32::MAX entries, with 4 bytes left.
    let body = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
    assert!(matches!(
        MetadataResponse::parse(1, &body),
        Err(DecodeError::Malformed {
            field: "Brokers",
            ..
        })
    ));
    // v9: compact length near u32::MAX.
    let body = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f];
    assert!(matches!(
        MetadataResponse::parse(9, &body),
        Err(DecodeError::Malformed {
            field: "Brokers",
            ..
        })
    ));
}
