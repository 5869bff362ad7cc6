//! Produce codec tests: golden bytes for the request writer and the response parser at the
//! versions where the shape changes, and the errors for bad input.

use super::*;

#[test]
fn golden_request_v3() {
    let req = ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 30_000,
        topics: vec![TopicProduceData {
            name: "t",
            topic_id: [0; 16],
            partitions: vec![
                PartitionProduceData {
                    index: 0,
                    records: Some(&[1, 2, 3]),
                },
                PartitionProduceData {
                    index: 1,
                    records: None,
                },
            ],
        }],
    };
    let mut buf = Vec::new();
    req.encode(3, &mut buf);
    #[rustfmt::skip]
    let expected = [
        0xff, 0xff,                 // TransactionalId: null
        0xff, 0xff,                 // Acks -1
        0, 0, 0x75, 0x30,           // TimeoutMs 30000
        0, 0, 0, 1,                 // TopicData: ARRAY length 1
        0, 1, b't',                 //   Name "t"
        0, 0, 0, 2,                 //   PartitionData: ARRAY length 2
        0, 0, 0, 0,                 //     Index 0
        0, 0, 0, 3, 1, 2, 3,        //     Records: 3 bytes
        0, 0, 0, 1,                 //     Index 1
        0xff, 0xff, 0xff, 0xff,     //     Records: null
    ];
    assert_eq!(buf, expected);
}

#[test]
fn golden_request_v9() {
    let req = ProduceRequest {
        transactional_id: Some("tx"),
        acks: 1,
        timeout_ms: 1000,
        topics: vec![
            TopicProduceData {
                name: "a",
                topic_id: [0; 16],
                partitions: vec![PartitionProduceData {
                    index: 0,
                    records: Some(&[1, 2, 3]),
                }],
            },
            TopicProduceData {
                name: "b",
                topic_id: [0; 16],
                partitions: vec![],
            },
        ],
    };
    let mut buf = Vec::new();
    req.encode(9, &mut buf);
    #[rustfmt::skip]
    let expected = [
        3, b't', b'x',              // TransactionalId: COMPACT_NULLABLE_STRING "tx"
        0, 1,                       // Acks 1
        0, 0, 0x03, 0xe8,           // TimeoutMs 1000
        3,                          // TopicData: COMPACT_ARRAY 2 + 1
        2, b'a',                    //   Name "a"
        2,                          //   PartitionData: 1 + 1
        0, 0, 0, 0,                 //     Index 0
        4, 1, 2, 3,                 //     Records: COMPACT_RECORDS 3 + 1
        0,                          //     partition tagged fields
        0,                          //   topic tagged fields
        2, b'b',                    //   Name "b"
        1,                          //   PartitionData: empty
        0,                          //   topic tagged fields
        0,                          // tagged fields
    ];
    assert_eq!(buf, expected);
}

#[test]
fn golden_request_v11() {
    let req = ProduceRequest {
        transactional_id: None,
        acks: 0,
        timeout_ms: 5,
        topics: vec![TopicProduceData {
            name: "t",
            topic_id: [0; 16],
            partitions: vec![PartitionProduceData {
                index: 7,
                records: None,
            }],
        }],
    };
    let mut buf = Vec::new();
    req.encode(11, &mut buf);
    #[rustfmt::skip]
    let expected = [
        0,                          // TransactionalId: null
        0, 0,                       // Acks 0
        0, 0, 0, 5,                 // TimeoutMs 5
        2,                          // TopicData: 1 + 1
        2, b't',                    //   Name "t"
        2,                          //   PartitionData: 1 + 1
        0, 0, 0, 7,                 //     Index 7
        0,                          //     Records: null
        0,                          //     partition tagged fields
        0,                          //   topic tagged fields
        0,                          // tagged fields
    ];
    assert_eq!(buf, expected);
}

#[test]
fn partition_with_writes_the_same_bytes_as_partition() {
    for version in [3, 8, 9, 11] {
        let records: Vec<u8> = (0..200u8).collect();
        let mut a = Vec::new();
        let mut w = ProduceRequestWriter::begin(&mut a, version, Some("x"), -1, 10, 1);
        w.topic(&mut a, "topic", [0; 16], 2);
        w.partition(&mut a, 0, Some(&records));
        w.partition(&mut a, 1, Some(&[]));
        w.finish(&mut a);

        let mut b = Vec::new();
        let mut w = ProduceRequestWriter::begin(&mut b, version, Some("x"), -1, 10, 1);
        w.topic(&mut b, "topic", [0; 16], 2);
        w.partition_with(&mut b, 0, records.len(), |buf| {
            buf.extend_from_slice(&records)
        });
        w.partition_with(&mut b, 1, 0, |_| {});
        w.finish(&mut b);
        assert_eq!(a, b, "v{version}");
    }
}

#[test]
fn records_spliced_in_at_the_offsets_give_the_bytes_of_partition() {
    for version in [3, 8, 9, 11, 12, 13] {
        let sets: [Vec<u8>; 3] = [(0..200u8).collect(), vec![], (7..9u8).collect()];
        let id = [3; 16];
        let mut a = Vec::new();
        let mut w = ProduceRequestWriter::begin(&mut a, version, None, -1, 10, 2);
        w.topic(&mut a, "one", id, 2);
        w.partition(&mut a, 0, Some(&sets[0]));
        w.partition(&mut a, 1, Some(&sets[1]));
        w.topic(&mut a, "two", id, 1);
        w.partition(&mut a, 5, Some(&sets[2]));
        w.finish(&mut a);

        let mut b = Vec::new();
        let mut w = ProduceRequestWriter::begin(&mut b, version, None, -1, 10, 2);
        w.topic(&mut b, "one", id, 2);
        let at0 = w.partition_spliced(&mut b, 0, sets[0].len());
        let at1 = w.partition_spliced(&mut b, 1, sets[1].len());
        w.topic(&mut b, "two", id, 1);
        let at2 = w.partition_spliced(&mut b, 5, sets[2].len());
        w.finish(&mut b);
        assert!(at0 <= at1 && at1 <= at2 && at2 <= b.len());
        let mut joined = Vec::new();
        let mut from = 0;
        for (at, set) in [(at0, &sets[0]), (at1, &sets[1]), (at2, &sets[2])] {
            joined.extend_from_slice(&b[from..at]);
            joined.extend_from_slice(set);
            from = at;
        }
        joined.extend_from_slice(&b[from..]);
        assert_eq!(joined, a, "v{version}");
    }
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "previous topic is missing 1 partitions")]
fn writer_catches_missing_partitions() {
    let mut buf = Vec::new();
    let mut w = ProduceRequestWriter::begin(&mut buf, 9, None, 1, 10, 2);
    w.topic(&mut buf, "a", [0; 16], 1);
    w.topic(&mut buf, "b", [0; 16], 0);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "announced topics were not written")]
fn writer_catches_missing_topics() {
    let mut buf = Vec::new();
    let w = ProduceRequestWriter::begin(&mut buf, 9, None, 1, 10, 1);
    w.finish(&mut buf);
}

#[test]
fn golden_response_v3() {
    #[rustfmt::skip]
    let body = [
        0, 0, 0, 1,                 // Responses: ARRAY length 1
        0, 1, b't',                 //   Name "t"
        0, 0, 0, 1,                 //   PartitionResponses: ARRAY length 1
        0, 0, 0, 0,                 //     Index 0
        0, 0,                       //     ErrorCode 0
        0, 0, 0, 0, 0, 0, 0, 42,    //     BaseOffset 42
        0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff,     //     LogAppendTimeMs -1 (no LogStartOffset before v5)
        0, 0, 0, 0,                 // ThrottleTimeMs 0
    ];
    let parsed = ProduceResponse::parse(3, &body).unwrap();
    assert_eq!(parsed.trailing, 0);
    assert_eq!(
        parsed.body,
        ProduceResponse {
            topics: vec![TopicProduceResponse {
                name: "t".into(),
                topic_id: [0; 16],
                partitions: vec![PartitionProduceResponse {
                    index: 0,
                    error_code: ErrorCode::NONE,
                    base_offset: 42,
                    log_append_time_ms: -1,
                    log_start_offset: -1,
                    record_errors: vec![],
                    error_message: None,
                    current_leader: None,
                }],
            }],
            throttle_time_ms: 0,
            node_endpoints: vec![],
        }
    );
}

#[test]
fn golden_response_v9_ignores_tag_0_before_v10() {
    #[rustfmt::skip]
    let body = [
        2,                          // Responses: 1 + 1
        2, b't',                    //   Name "t"
        2,                          //   PartitionResponses: 1 + 1
        0, 0, 0, 0,                 //     Index 0
        0, 0x12,                    //     ErrorCode 18 (RECORD_LIST_TOO_LARGE)
        0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff,     //     BaseOffset -1
        0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff,     //     LogAppendTimeMs -1
        0, 0, 0, 0, 0, 0, 0, 7,     //     LogStartOffset 7
        2,                          //     RecordErrors: 1 + 1
        0, 0, 0, 1,                 //       BatchIndex 1
        4, b'b', b'a', b'd',        //       BatchIndexErrorMessage "bad"
        0,                          //       tagged fields
        3, b'e', b'm',              //     ErrorMessage "em"
        1, 0, 1, 0xff,              //     tagged fields: tag 0 (unknown at v9), 1 byte
        0,                          //   tagged fields
        0, 0, 0, 100,               // ThrottleTimeMs 100
        0,                          // tagged fields
    ];
    let parsed = ProduceResponse::parse(9, &body).unwrap();
    assert_eq!(parsed.trailing, 0);
    let p = &parsed.body.topics[0].partitions[0];
    assert_eq!(
        *p,
        PartitionProduceResponse {
            index: 0,
            error_code: ErrorCode::RECORD_LIST_TOO_LARGE,
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: 7,
            record_errors: vec![RecordError {
                batch_index: 1,
                message: Some("bad".into())
            }],
            error_message: Some("em".into()),
            current_leader: None,
        }
    );
    assert_eq!(parsed.body.throttle_time_ms, 100);
    assert!(parsed.body.node_endpoints.is_empty());
}

#[test]
fn golden_response_v11_with_leader_hint_and_endpoints() {
    #[rustfmt::skip]
    let body = [
        2,                          // Responses: 1 + 1
        2, b't',                    //   Name "t"
        2,                          //   PartitionResponses: 1 + 1
        0, 0, 0, 1,                 //     Index 1
        0, 6,                       //     ErrorCode 6 (NOT_LEADER_OR_FOLLOWER)
        0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff,     //     BaseOffset -1
        0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff,     //     LogAppendTimeMs -1
        0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff,     //     LogStartOffset -1
        1,                          //     RecordErrors: empty
        0,                          //     ErrorMessage: null
        2,                          //     tagged fields: 2
        0, 9,                       //       tag 0 (CurrentLeader), 9 bytes
        0, 0, 0, 2,                 //         LeaderId 2
        0, 0, 0, 7,                 //         LeaderEpoch 7
        0,                          //         tagged fields
        3, 2, 0xab, 0xcd,           //       tag 3 (unknown), 2 bytes
        0,                          //   tagged fields
        0, 0, 0, 0,                 // ThrottleTimeMs 0
        1,                          // tagged fields: 1
        0, 13,                      //   tag 0 (NodeEndpoints), 13 bytes
        2,                          //     COMPACT_ARRAY 1 + 1
        0, 0, 0, 2,                 //       NodeId 2
        2, b'h',                    //       Host "h"
        0, 0, 0x23, 0x84,           //       Port 9092
        0,                          //       Rack: null
        0,                          //       tagged fields
    ];
    let parsed = ProduceResponse::parse(11, &body).unwrap();
    assert_eq!(parsed.trailing, 0);
    let p = &parsed.body.topics[0].partitions[0];
    assert_eq!(p.error_code, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    assert_eq!(
        p.current_leader,
        Some(LeaderIdAndEpoch {
            leader_id: 2,
            leader_epoch: 7
        })
    );
    assert_eq!(
        (p.base_offset, p.log_append_time_ms, p.log_start_offset),
        (-1, -1, -1)
    );
    assert!(p.record_errors.is_empty());
    assert_eq!(p.error_message, None);
    assert_eq!(
        parsed.body.node_endpoints,
        vec![NodeEndpoint {
            node_id: 2,
            host: "h".into(),
            port: 9092,
            rack: None
        }]
    );
}

#[test]
fn malformed_known_tag_is_an_error() {
    // v10 partition whose CurrentLeader tag holds 3 bytes instead of 9.
    #[rustfmt::skip]
    let body = [
        2, 2, b't', 2,
        0, 0, 0, 1, 0, 6,
        0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0,
        1, 0,
        1, 0, 3, 0, 0, 0,           // tag 0, 3 bytes
        0, 0, 0, 0, 0, 0,
    ];
    match ProduceResponse::parse(10, &body) {
        Err(DecodeError::Malformed { field, .. }) => assert_eq!(field, "LeaderId"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unsupported_versions_are_rejected() {
    for v in [2, 14] {
        assert_eq!(
            ProduceResponse::parse(v, &[]),
            Err(DecodeError::UnsupportedVersion {
                api: ApiKey::Produce,
                version: v
            })
        );
    }
}
