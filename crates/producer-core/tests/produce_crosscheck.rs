//! Produce v3-13 cross-checked against the independent `kafka-protocol` codec.
//!
//! Requests: ours encodes (the streaming writer the producer uses), kafka-protocol decodes;
//! topics by name before v13 and by topic id from v13. Responses: kafka-protocol encodes, ours
//! parses, at every version, topic ids included. Plus every truncation of a v13 response.

mod kp;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{produce_request, produce_response, BrokerId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable};
use kp::{kp_uuid, sb};
use producer_core::protocol::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
    FIRST_VERSION_BY_TOPIC_ID,
};
use producer_core::protocol::{ApiKey, DecodeError};
use producer_core::ErrorCode;
use proptest::prelude::*;

const VERSIONS: std::ops::RangeInclusive<i16> = 3..=13;

/// A topic to produce to: name, id, and (partition index, records) pairs.
type Topic = (String, [u8; 16], Vec<(i32, Option<Vec<u8>>)>);

fn topics() -> impl Strategy<Value = Vec<Topic>> {
    let partition = (
        any::<i32>(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
    );
    let topic = (
        "[a-zA-Z0-9._-]{1,30}",
        any::<[u8; 16]>().prop_filter("a topic id is not all zeros", |id| *id != [0; 16]),
        proptest::collection::vec(partition, 0..4),
    );
    proptest::collection::vec(topic, 0..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn request_crosscheck(
        topics in topics(),
        transactional_id in proptest::option::of("[a-z]{1,12}"),
        acks in prop_oneof![Just(-1i16), Just(0), Just(1)],
        timeout_ms in any::<i32>(),
    ) {
        let req = ProduceRequest {
            transactional_id: transactional_id.as_deref(),
            acks,
            timeout_ms,
            topics: topics
                .iter()
                .map(|(name, id, parts)| TopicProduceData {
                    name,
                    topic_id: *id,
                    partitions: parts
                        .iter()
                        .map(|(index, records)| PartitionProduceData {
                            index: *index,
                            records: records.as_deref(),
                        })
                        .collect(),
                })
                .collect(),
        };
        for version in VERSIONS {
            let mut buf = Vec::new();
            req.encode(version, &mut buf);
            let mut bytes = Bytes::from(buf);
            let kp = produce_request::ProduceRequest::decode(&mut bytes, version)
                .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert_eq!(bytes.remaining(), 0, "v{} left bytes", version);
            prop_assert_eq!(kp.transactional_id.as_deref().map(|s| s.as_str()), transactional_id.as_deref());
            prop_assert_eq!(kp.acks, acks);
            prop_assert_eq!(kp.timeout_ms, timeout_ms);
            prop_assert_eq!(kp.topic_data.len(), topics.len());
            for (t, (name, id, parts)) in kp.topic_data.iter().zip(&topics) {
                if version >= FIRST_VERSION_BY_TOPIC_ID {
                    prop_assert_eq!(t.topic_id.as_bytes(), id, "v{}", version);
                    prop_assert_eq!(t.name.as_str(), "", "v{} names no topic", version);
                } else {
                    prop_assert_eq!(t.name.as_str(), name.as_str(), "v{}", version);
                    prop_assert_eq!(t.topic_id.as_bytes(), &[0u8; 16], "v{} sends no id", version);
                }
                prop_assert_eq!(t.partition_data.len(), parts.len());
                for (p, (index, records)) in t.partition_data.iter().zip(parts) {
                    prop_assert_eq!(p.index, *index);
                    prop_assert_eq!(p.records.as_deref(), records.as_deref());
                }
            }
        }
    }

    #[test]
    fn response_crosscheck(
        topics in topics(),
        codes in proptest::collection::vec(any::<i16>(), 16),
        throttle in any::<i32>(),
        leader in (any::<i32>(), any::<i32>()),
    ) {
        for version in VERSIONS {
            let mut kp = produce_response::ProduceResponse::default();
            kp.throttle_time_ms = throttle;
            for (k, (name, id, parts)) in topics.iter().enumerate() {
                let mut t = produce_response::TopicProduceResponse::default();
                if version >= FIRST_VERSION_BY_TOPIC_ID {
                    t.topic_id = kp_uuid!(id);
                } else {
                    t.name = TopicName(sb(name));
                }
                for (j, (index, _)) in parts.iter().enumerate() {
                    let mut p = produce_response::PartitionProduceResponse::default();
                    p.index = *index;
                    p.error_code = codes[(k * 4 + j) % codes.len()];
                    p.base_offset = i64::from(*index) * 7;
                    p.log_append_time_ms = -1;
                    p.log_start_offset = 3;
                    if version >= 8 {
                        let mut e = produce_response::BatchIndexAndErrorMessage::default();
                        e.batch_index = j as i32;
                        e.batch_index_error_message = Some(sb("bad record"));
                        p.record_errors.push(e);
                        p.error_message = Some(sb("batch dropped"));
                    }
                    if version >= 10 {
                        p.current_leader.leader_id = BrokerId(leader.0);
                        p.current_leader.leader_epoch = leader.1;
                    }
                    t.partition_responses.push(p);
                }
                kp.responses.push(t);
            }
            if version >= 10 {
                let mut n = produce_response::NodeEndpoint::default();
                n.node_id = BrokerId(leader.0);
                n.host = sb("broker.example");
                n.port = 9092;
                kp.node_endpoints.push(n);
            }
            let mut buf = BytesMut::new();
            kp.encode(&mut buf, version).map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            let parsed = ProduceResponse::parse(version, &buf)
                .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert_eq!(parsed.trailing, 0);
            let ours = parsed.body;
            prop_assert_eq!(ours.throttle_time_ms, throttle);
            prop_assert_eq!(ours.topics.len(), topics.len());
            for (k, (t, (name, id, parts))) in ours.topics.iter().zip(&topics).enumerate() {
                if version >= FIRST_VERSION_BY_TOPIC_ID {
                    prop_assert_eq!(&t.topic_id, id);
                    prop_assert_eq!(t.name.as_str(), "");
                } else {
                    prop_assert_eq!(t.name.as_str(), name.as_str());
                    prop_assert_eq!(t.topic_id, [0u8; 16]);
                }
                prop_assert_eq!(t.partitions.len(), parts.len());
                for (j, (p, (index, _))) in t.partitions.iter().zip(parts).enumerate() {
                    prop_assert_eq!(p.index, *index);
                    prop_assert_eq!(p.error_code, ErrorCode(codes[(k * 4 + j) % codes.len()]));
                    prop_assert_eq!(p.base_offset, i64::from(*index) * 7);
                    prop_assert_eq!(p.log_start_offset, if version >= 5 { 3 } else { -1 });
                    if version >= 8 {
                        prop_assert_eq!(p.record_errors.len(), 1);
                        prop_assert_eq!(p.record_errors[0].batch_index, j as i32);
                        prop_assert_eq!(p.record_errors[0].message.as_deref(), Some("bad record"));
                        prop_assert_eq!(p.error_message.as_deref(), Some("batch dropped"));
                    } else {
                        prop_assert!(p.record_errors.is_empty());
                    }
                    if version >= 10 {
                        let l = p.current_leader.expect("a leader hint");
                        prop_assert_eq!((l.leader_id, l.leader_epoch), leader);
                    }
                }
            }
            if version >= 10 {
                prop_assert_eq!(ours.node_endpoints.len(), 1);
                prop_assert_eq!(ours.node_endpoints[0].host.as_str(), "broker.example");
            }
        }
    }
}

/// A v13 answer cut anywhere is a typed error naming Produce v13, never a panic.
#[test]
fn every_truncation_of_a_v13_response_is_an_error() {
    let mut kp = produce_response::ProduceResponse::default();
    let mut t = produce_response::TopicProduceResponse::default();
    t.topic_id = kp_uuid!([7u8; 16]);
    let mut p = produce_response::PartitionProduceResponse::default();
    p.error_code = ErrorCode::UNKNOWN_TOPIC_ID.0;
    t.partition_responses.push(p);
    kp.responses.push(t);
    let mut buf = BytesMut::new();
    kp.encode(&mut buf, 13).unwrap();
    let full = ProduceResponse::parse(13, &buf).unwrap().body;
    assert_eq!(full.topics[0].topic_id, [7; 16]);
    assert_eq!(
        full.topics[0].partitions[0].error_code,
        ErrorCode::UNKNOWN_TOPIC_ID
    );
    for cut in 0..buf.len() {
        match ProduceResponse::parse(13, &buf[..cut]) {
            Err(DecodeError::Malformed { api, version, .. }) => {
                assert_eq!((api, version), (ApiKey::Produce, 13), "cut at {cut}");
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}
