//! Cross-checks the transaction APIs (FindCoordinator v0-6, AddPartitionsToTxn v0-3,
//! AddOffsetsToTxn v0-4, EndTxn v0-5, TxnOffsetCommit v0-5) against the independent
//! `kafka-protocol` codec: every request we encode decodes there to the same fields with no byte
//! left over, every response it encodes parses here to the same fields, and every strict prefix
//! of a response is an error.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult as KpTopicResult,
};
use kafka_protocol::messages::find_coordinator_response::Coordinator as KpCoordinator;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest as KpAddOffsetsRequest, AddOffsetsToTxnResponse as KpAddOffsetsResponse,
    AddPartitionsToTxnRequest as KpAddPartitionsRequest,
    AddPartitionsToTxnResponse as KpAddPartitionsResponse, BrokerId,
    EndTxnRequest as KpEndTxnRequest, EndTxnResponse as KpEndTxnResponse,
    FindCoordinatorRequest as KpFindRequest, FindCoordinatorResponse as KpFindResponse, ProducerId,
    TopicName, TxnOffsetCommitRequest as KpTxnOffsetRequest,
    TxnOffsetCommitResponse as KpTxnOffsetResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use producer_core::protocol::add_offsets_to_txn::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
};
use producer_core::protocol::add_partitions_to_txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, AddPartitionsToTxnTopicResult,
};
use producer_core::protocol::end_txn::{EndTxnRequest, EndTxnResponse};
use producer_core::protocol::find_coordinator::{
    Coordinator, CoordinatorType, FindCoordinatorRequest, FindCoordinatorResponse,
};
use producer_core::protocol::txn_offset_commit::{
    GroupMember, TxnOffsetCommitPartition, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    TxnOffsetCommitTopicResult,
};
use producer_core::protocol::Parsed;
use producer_core::ErrorCode;
use proptest::prelude::*;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn kp_decode<T: Decodable>(buf: Vec<u8>, version: i16) -> Result<T, TestCaseError> {
    let mut bytes = Bytes::from(buf);
    let decoded = T::decode(&mut bytes, version)
        .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
    prop_assert!(bytes.is_empty(), "v{} left {} bytes", version, bytes.len());
    Ok(decoded)
}

fn kp_encode<T: Encodable>(value: &T, version: i16) -> BytesMut {
    let mut buf = BytesMut::new();
    value.encode(&mut buf, version).unwrap();
    buf
}

/// Parses `buf` with `parse`, requires nothing left over and every strict prefix to fail.
fn parse_whole<R>(
    version: i16,
    buf: &[u8],
    parse: impl Fn(i16, &[u8]) -> Result<Parsed<R>, producer_core::protocol::DecodeError>,
) -> Result<R, TestCaseError> {
    let parsed =
        parse(version, buf).map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
    prop_assert_eq!(parsed.trailing, 0);
    for cut in 0..buf.len() {
        prop_assert!(
            parse(version, &buf[..cut]).is_err(),
            "v{} prefix {} parsed",
            version,
            cut
        );
    }
    Ok(parsed.body)
}

const NAME: &str = "[a-zA-Z0-9._-]{0,12}";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn find_coordinator_requests_decode_in_kafka_protocol(
        keys in proptest::collection::vec(NAME, 1..4),
        transaction: bool,
    ) {
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        for version in 0..=6i16 {
            let key_type = if transaction && version >= 1 {
                CoordinatorType::Transaction
            } else {
                CoordinatorType::Group
            };
            let keys = if version < 4 { &key_refs[..1] } else { &key_refs[..] };
            let mut buf = Vec::new();
            FindCoordinatorRequest { key_type, keys }.encode(version, &mut buf);
            let kp: KpFindRequest = kp_decode(buf, version)?;
            if version >= 1 {
                prop_assert_eq!(kp.key_type, key_type.code());
            }
            if version < 4 {
                prop_assert_eq!(kp.key.as_str(), keys[0]);
            } else {
                let decoded: Vec<&str> = kp.coordinator_keys.iter().map(|k| k.as_str()).collect();
                prop_assert_eq!(decoded, keys.to_vec());
            }
        }
    }

    #[test]
    fn find_coordinator_responses_from_kafka_protocol_parse(
        entries in proptest::collection::vec((NAME, any::<i32>(), NAME, any::<i32>(), any::<i16>(), proptest::option::of(NAME)), 1..4),
        throttle: i32,
    ) {
        for version in 0..=6i16 {
            let entries = if version < 4 { &entries[..1] } else { &entries[..] };
            let mut kp = KpFindResponse::default();
            if version >= 1 {
                kp.throttle_time_ms = throttle;
            }
            if version < 4 {
                let (_, node, host, port, code, message) = &entries[0];
                kp.node_id = BrokerId(*node);
                kp.host = s(host);
                kp.port = *port;
                kp.error_code = *code;
                kp.error_message = if version >= 1 { message.as_deref().map(s) } else { None };
            } else {
                kp.coordinators = entries
                    .iter()
                    .map(|(key, node, host, port, code, message)| {
                        KpCoordinator::default()
                            .with_key(s(key))
                            .with_node_id(BrokerId(*node))
                            .with_host(s(host))
                            .with_port(*port)
                            .with_error_code(*code)
                            .with_error_message(message.as_deref().map(s))
                    })
                    .collect();
            }
            let buf = kp_encode(&kp, version);
            let parsed = parse_whole(version, &buf, FindCoordinatorResponse::parse)?;
            prop_assert_eq!(parsed.throttle_time_ms, if version >= 1 { throttle } else { 0 });
            let expected: Vec<Coordinator> = entries
                .iter()
                .map(|(key, node, host, port, code, message)| Coordinator {
                    key: (version >= 4).then(|| key.clone()),
                    node_id: *node,
                    host: host.clone(),
                    port: *port,
                    error_code: ErrorCode(*code),
                    error_message: if version >= 1 { message.clone() } else { None },
                })
                .collect();
            prop_assert_eq!(parsed.coordinators, expected);
        }
    }

    #[test]
    fn add_partitions_to_txn_round_trips_with_kafka_protocol(
        id in NAME,
        producer_id: i64,
        epoch: i16,
        topics in proptest::collection::vec((NAME, proptest::collection::vec(any::<i32>(), 0..4)), 0..3),
        codes in proptest::collection::vec(any::<i16>(), 0..4),
        throttle: i32,
    ) {
        let topic_refs: Vec<(&str, &[i32])> =
            topics.iter().map(|(t, p)| (t.as_str(), p.as_slice())).collect();
        for version in 0..=3i16 {
            let mut buf = Vec::new();
            AddPartitionsToTxnRequest {
                transactional_id: &id,
                producer_id,
                producer_epoch: epoch,
                topics: &topic_refs,
            }
            .encode(version, &mut buf);
            let kp: KpAddPartitionsRequest = kp_decode(buf, version)?;
            prop_assert_eq!(kp.v3_and_below_transactional_id.0.as_str(), id.as_str());
            prop_assert_eq!(kp.v3_and_below_producer_id.0, producer_id);
            prop_assert_eq!(kp.v3_and_below_producer_epoch, epoch);
            let decoded: Vec<(String, Vec<i32>)> = kp
                .v3_and_below_topics
                .iter()
                .map(|t| (t.name.0.to_string(), t.partitions.clone()))
                .collect();
            prop_assert_eq!(&decoded, &topics);

            let results: Vec<AddPartitionsToTxnTopicResult> = topics
                .iter()
                .map(|(t, _)| AddPartitionsToTxnTopicResult {
                    name: t.clone(),
                    partitions: codes.iter().enumerate().map(|(i, c)| (i as i32, ErrorCode(*c))).collect(),
                })
                .collect();
            let kp = KpAddPartitionsResponse::default()
                .with_throttle_time_ms(throttle)
                .with_results_by_topic_v3_and_below(
                    results
                        .iter()
                        .map(|r| {
                            KpTopicResult::default()
                                .with_name(TopicName(s(&r.name)))
                                .with_results_by_partition(
                                    r.partitions
                                        .iter()
                                        .map(|(p, c)| {
                                            AddPartitionsToTxnPartitionResult::default()
                                                .with_partition_index(*p)
                                                .with_partition_error_code(c.0)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let buf = kp_encode(&kp, version);
            let parsed = parse_whole(version, &buf, AddPartitionsToTxnResponse::parse)?;
            prop_assert_eq!(parsed.throttle_time_ms, throttle);
            prop_assert_eq!(&parsed.topics, &results);
        }
    }

    #[test]
    fn add_offsets_to_txn_round_trips_with_kafka_protocol(
        id in NAME, group in NAME, producer_id: i64, epoch: i16, code: i16, throttle: i32,
    ) {
        for version in 0..=4i16 {
            let mut buf = Vec::new();
            AddOffsetsToTxnRequest {
                transactional_id: &id,
                producer_id,
                producer_epoch: epoch,
                group_id: &group,
            }
            .encode(version, &mut buf);
            let kp: KpAddOffsetsRequest = kp_decode(buf, version)?;
            prop_assert_eq!(kp.transactional_id.0.as_str(), id.as_str());
            prop_assert_eq!(kp.group_id.0.as_str(), group.as_str());
            prop_assert_eq!((kp.producer_id.0, kp.producer_epoch), (producer_id, epoch));
            let kp = KpAddOffsetsResponse::default().with_throttle_time_ms(throttle).with_error_code(code);
            let buf = kp_encode(&kp, version);
            let parsed = parse_whole(version, &buf, AddOffsetsToTxnResponse::parse)?;
            prop_assert_eq!((parsed.throttle_time_ms, parsed.error_code), (throttle, ErrorCode(code)));
        }
    }

    #[test]
    fn end_txn_round_trips_with_kafka_protocol(
        id in NAME, producer_id: i64, epoch: i16, committed: bool, code: i16, throttle: i32,
        next_id: i64, next_epoch: i16,
    ) {
        for version in 0..=5i16 {
            let mut buf = Vec::new();
            EndTxnRequest { transactional_id: &id, producer_id, producer_epoch: epoch, committed }
                .encode(version, &mut buf);
            let kp: KpEndTxnRequest = kp_decode(buf, version)?;
            prop_assert_eq!(kp.transactional_id.0.as_str(), id.as_str());
            prop_assert_eq!((kp.producer_id.0, kp.producer_epoch, kp.committed), (producer_id, epoch, committed));
            let mut kp = KpEndTxnResponse::default().with_throttle_time_ms(throttle).with_error_code(code);
            if version >= 5 {
                kp = kp.with_producer_id(ProducerId(next_id)).with_producer_epoch(next_epoch);
            }
            let buf = kp_encode(&kp, version);
            let parsed = parse_whole(version, &buf, EndTxnResponse::parse)?;
            prop_assert_eq!((parsed.throttle_time_ms, parsed.error_code), (throttle, ErrorCode(code)));
            let expected = if version >= 5 { (next_id, next_epoch) } else { (-1, -1) };
            prop_assert_eq!((parsed.producer_id, parsed.producer_epoch), expected);
        }
    }

    #[test]
    fn txn_offset_commit_round_trips_with_kafka_protocol(
        id in NAME, group in NAME, producer_id: i64, epoch: i16,
        generation: i32, member in NAME, instance in proptest::option::of(NAME),
        topics in proptest::collection::vec(
            (NAME, proptest::collection::vec((any::<i32>(), any::<i64>(), any::<i32>(), proptest::option::of(NAME)), 0..3)),
            0..3),
        codes in proptest::collection::vec(any::<i16>(), 0..3),
        throttle: i32,
    ) {
        let offsets: Vec<Vec<TxnOffsetCommitPartition<'_>>> = topics
            .iter()
            .map(|(_, ps)| {
                ps.iter()
                    .map(|(p, o, e, m)| TxnOffsetCommitPartition {
                        partition: *p,
                        offset: *o,
                        leader_epoch: *e,
                        metadata: m.as_deref(),
                    })
                    .collect()
            })
            .collect();
        let topic_refs: Vec<(&str, &[TxnOffsetCommitPartition<'_>])> = topics
            .iter()
            .zip(&offsets)
            .map(|((t, _), o)| (t.as_str(), o.as_slice()))
            .collect();
        for version in 0..=5i16 {
            let mut buf = Vec::new();
            TxnOffsetCommitRequest {
                transactional_id: &id,
                group_id: &group,
                producer_id,
                producer_epoch: epoch,
                member: GroupMember {
                    generation_id: generation,
                    member_id: &member,
                    group_instance_id: instance.as_deref(),
                },
                topics: &topic_refs,
            }
            .encode(version, &mut buf);
            let kp: KpTxnOffsetRequest = kp_decode(buf, version)?;
            prop_assert_eq!(kp.transactional_id.0.as_str(), id.as_str());
            prop_assert_eq!(kp.group_id.0.as_str(), group.as_str());
            prop_assert_eq!((kp.producer_id.0, kp.producer_epoch), (producer_id, epoch));
            if version >= 3 {
                prop_assert_eq!(kp.generation_id, generation);
                prop_assert_eq!(kp.member_id.as_str(), member.as_str());
                prop_assert_eq!(kp.group_instance_id.as_ref().map(|i| i.as_str()), instance.as_deref());
            }
            prop_assert_eq!(kp.topics.len(), topics.len());
            for (kt, (t, ps)) in kp.topics.iter().zip(&topics) {
                prop_assert_eq!(kt.name.0.as_str(), t.as_str());
                let decoded: Vec<(i32, i64, i32, Option<String>)> = kt
                    .partitions
                    .iter()
                    .map(|p| (
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata.as_ref().map(|m| m.to_string()),
                    ))
                    .collect();
                let expected: Vec<(i32, i64, i32, Option<String>)> = ps
                    .iter()
                    .map(|(p, o, e, m)| (*p, *o, if version >= 2 { *e } else { -1 }, m.clone()))
                    .collect();
                prop_assert_eq!(decoded, expected);
            }

            let results: Vec<TxnOffsetCommitTopicResult> = topics
                .iter()
                .map(|(t, _)| TxnOffsetCommitTopicResult {
                    name: t.clone(),
                    partitions: codes.iter().enumerate().map(|(i, c)| (i as i32, ErrorCode(*c))).collect(),
                })
                .collect();
            let kp = KpTxnOffsetResponse::default().with_throttle_time_ms(throttle).with_topics(
                results
                    .iter()
                    .map(|r| {
                        TxnOffsetCommitResponseTopic::default()
                            .with_name(TopicName(s(&r.name)))
                            .with_partitions(
                                r.partitions
                                    .iter()
                                    .map(|(p, c)| {
                                        TxnOffsetCommitResponsePartition::default()
                                            .with_partition_index(*p)
                                            .with_error_code(c.0)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
            let buf = kp_encode(&kp, version);
            let parsed = parse_whole(version, &buf, TxnOffsetCommitResponse::parse)?;
            prop_assert_eq!(parsed.throttle_time_ms, throttle);
            prop_assert_eq!(&parsed.topics, &results);
        }
    }
}
