//! Broker rules: ApiVersions, Metadata, InitProducerId, Produce (routing, validation,
//! idempotence), checked with kafka-protocol's client-side encoders.

mod support;

use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, InitProducerIdRequest, InitProducerIdResponse, MetadataResponse,
};
use kafka_protocol::records::Compression;
use producer_sim::{
    API_ADD_OFFSETS_TO_TXN, API_ADD_PARTITIONS_TO_TXN, API_API_VERSIONS, API_END_TXN,
    API_FIND_COORDINATOR, API_INIT_PRODUCER_ID, API_METADATA, API_PRODUCE, API_TXN_OFFSET_COMMIT,
};
use support::client::*;
use support::ErrorCode;

/// UNSUPPORTED_SASL_MECHANISM (33): not a code the producer names; any error works for an
/// injection into ApiVersions.
const UNSUPPORTED_SASL_MECHANISM: ErrorCode = ErrorCode(33);

#[test]
fn api_versions_every_version_lists_the_configured_ranges() {
    let mut c = cluster(1, 1);
    let conn = c.connect_to(1);
    for v in 0..=4 {
        let r: ApiVersionsResponse =
            c.roundtrip(conn, ApiKey::ApiVersions, v, &api_versions_request());
        assert_eq!(r.error_code, ErrorCode::NONE.0, "v{v}");
        let mut got: Vec<(i16, i16, i16)> = r
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (API_PRODUCE, 3, 13),
                (API_METADATA, 0, 13),
                (API_FIND_COORDINATOR, 0, 6),
                (API_API_VERSIONS, 0, 4),
                (API_INIT_PRODUCER_ID, 0, 5),
                (API_ADD_PARTITIONS_TO_TXN, 0, 5),
                (API_ADD_OFFSETS_TO_TXN, 0, 4),
                (API_END_TXN, 0, 5),
                (API_TXN_OFFSET_COMMIT, 0, 5),
            ],
            "v{v}"
        );
    }
    assert!(c.sim.violations().is_empty(), "{:?}", c.sim.violations());
}

#[test]
fn api_versions_too_new_gets_v0_unsupported_version_with_the_list() {
    // A broker of Kafka 3.x's ranges (ApiVersions 0-3), asked at v4.
    let mut cfg = producer_sim::SimConfig::with_brokers(1, 1);
    cfg.brokers[0].api_versions = Some(vec![
        (API_PRODUCE, 3, 11),
        (API_METADATA, 0, 12),
        (API_API_VERSIONS, 0, 3),
        (API_INIT_PRODUCER_ID, 0, 4),
    ]);
    let mut c = Client::new(cfg);
    let conn = c.connect_to(1);
    let corr = c.send(conn, ApiKey::ApiVersions, 4, &api_versions_request());
    let frame = c.recv_frame(conn).unwrap();
    // Header v0 and a v0 body whatever the request version.
    let (got_corr, r) = decode_response::<ApiVersionsResponse>(ApiKey::ApiVersions, 0, frame);
    assert_eq!(got_corr, corr);
    assert_eq!(r.error_code, ErrorCode::UNSUPPORTED_VERSION.0);
    assert_eq!(r.api_keys.len(), 4);
    assert!(r
        .api_keys
        .iter()
        .any(|k| k.api_key == API_API_VERSIONS && k.max_version == 3));
    assert_eq!(
        c.sim.request_log()[0].error_code,
        ErrorCode::UNSUPPORTED_VERSION.0
    );
}

#[test]
fn api_versions_v3_rejects_bad_software_name() {
    let mut c = cluster(1, 1);
    let conn = c.connect_to(1);
    let mut req = api_versions_request();
    req.client_software_name = "-bad name".into();
    let r: ApiVersionsResponse = c.roundtrip(conn, ApiKey::ApiVersions, 3, &req);
    assert_eq!(r.error_code, ErrorCode::INVALID_REQUEST.0);
}

#[test]
fn unsupported_api_version_closes_the_connection() {
    // A broker of Kafka 4.0's Produce range (3-12): v13 (topics by id) is not advertised.
    let mut cfg = producer_sim::SimConfig::with_brokers(1, 1);
    cfg.brokers[0].api_versions = Some(vec![
        (API_PRODUCE, 3, 12),
        (API_METADATA, 0, 13),
        (API_API_VERSIONS, 0, 4),
    ]);
    let mut c = Client::new(cfg);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let req = produce_request(-1, &[("t", 0, batch(B::plain(1)))]);
    c.send(conn, ApiKey::Produce, 13, &req);
    assert!(c.recv_frame(conn).is_none());
    assert!(c.closed.contains(&conn));
    assert!(c.sim.violations()[0].contains("outside the broker's advertised range"));
    assert!(c.sim.log("t", 0).is_empty());
}

#[test]
fn custom_api_ranges_are_advertised_and_enforced() {
    let mut cfg = producer_sim::SimConfig::with_brokers(1, 3);
    cfg.brokers[0].api_versions = Some(vec![(API_API_VERSIONS, 0, 2), (API_METADATA, 1, 9)]);
    let mut c = Client::new(cfg);
    let conn = c.connect_to(1);
    let r: ApiVersionsResponse = c.roundtrip(conn, ApiKey::ApiVersions, 2, &api_versions_request());
    assert_eq!(r.api_keys.len(), 2);
    // v3 ApiVersions is above this broker's max 2: v0 UNSUPPORTED_VERSION.
    c.send(conn, ApiKey::ApiVersions, 3, &api_versions_request());
    let (_, r) =
        decode_response::<ApiVersionsResponse>(ApiKey::ApiVersions, 0, c.recv_frame(conn).unwrap());
    assert_eq!(r.error_code, ErrorCode::UNSUPPORTED_VERSION.0);
    // Metadata v0 is below min 1: closed.
    c.send(conn, ApiKey::Metadata, 0, &metadata_request(Some(&[])));
    assert!(c.recv_frame(conn).is_none());
    assert!(c.closed.contains(&conn));
}

#[test]
fn metadata_every_version() {
    let mut c = cluster(3, 7);
    c.sim.create_topic("a", 4).unwrap();
    c.sim.create_topic("b", 2).unwrap();
    c.sim.move_leader("a", 1, 3).unwrap();
    let conn = c.connect_to(2);
    for v in 0..=12 {
        let req = if v == 0 {
            metadata_request(Some(&[]))
        } else {
            metadata_request(None)
        };
        let r: MetadataResponse = c.roundtrip(conn, ApiKey::Metadata, v, &req);
        let ids: Vec<i32> = r.brokers.iter().map(|b| b.node_id.0).collect();
        assert_eq!(ids, vec![1, 2, 3], "v{v}");
        assert!(r
            .brokers
            .iter()
            .all(|b| b.port == 9092 && b.host.starts_with("broker-")));
        assert_eq!(r.topics.len(), 2, "v{v}: all topics");
        let a = r
            .topics
            .iter()
            .find(|t| t.name.as_ref().unwrap().0.as_str() == "a")
            .unwrap();
        assert_eq!(a.error_code, ErrorCode::NONE.0);
        let leaders: Vec<i32> = a.partitions.iter().map(|p| p.leader_id.0).collect();
        // round-robin 1,2,3,1 then partition 1 moved to 3
        assert_eq!(leaders, vec![1, 3, 3, 1], "v{v}");
        if v >= 7 {
            let epochs: Vec<i32> = a.partitions.iter().map(|p| p.leader_epoch).collect();
            assert_eq!(epochs, vec![0, 1, 0, 0], "v{v}");
        }
        if v >= 10 {
            assert_eq!(a.topic_id.as_u128(), c.sim.topic_id("a").unwrap());
        }
        if v >= 1 {
            assert_eq!(r.controller_id.0, 1);
        }
        if v >= 2 {
            assert_eq!(r.cluster_id.as_deref(), Some("sim-cluster"));
        }
    }
    assert!(c.sim.violations().is_empty(), "{:?}", c.sim.violations());
}

#[test]
fn metadata_unknown_topic_and_empty_list() {
    let mut c = cluster(1, 7);
    c.sim.create_topic("a", 1).unwrap();
    let conn = c.connect_to(1);
    let r: MetadataResponse = c.roundtrip(
        conn,
        ApiKey::Metadata,
        12,
        &metadata_request(Some(&["a", "nope"])),
    );
    assert_eq!(r.topics.len(), 2);
    assert_eq!(r.topics[0].error_code, ErrorCode::NONE.0);
    assert_eq!(
        r.topics[1].error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
    );
    assert!(r.topics[1].partitions.is_empty());
    // v1+: an empty list means no topics; the topic is not auto-created.
    let r: MetadataResponse = c.roundtrip(conn, ApiKey::Metadata, 4, &metadata_request(Some(&[])));
    assert!(r.topics.is_empty());
    assert!(c.sim.leader("nope", 0).is_none());
}

#[test]
fn metadata_lists_only_running_brokers_but_keeps_stopped_leader() {
    let mut c = cluster(3, 7);
    c.sim.create_topic("a", 3).unwrap();
    c.sim.stop_broker(2, c.now).unwrap();
    let conn = c.connect_to(1);
    let r: MetadataResponse = c.roundtrip(conn, ApiKey::Metadata, 9, &metadata_request(None));
    let ids: Vec<i32> = r.brokers.iter().map(|b| b.node_id.0).collect();
    assert_eq!(ids, vec![1, 3]);
    assert_eq!(r.topics[0].partitions[1].leader_id.0, 2);
}

#[test]
fn metadata_injected_errors() {
    let mut c = cluster(1, 7);
    c.sim.create_topic("a", 2).unwrap();
    c.sim.inject_error(producer_sim::InjectedError {
        api_key: API_METADATA,
        topic: Some("a".into()),
        partition: Some(1),
        error_code: ErrorCode::LEADER_NOT_AVAILABLE.0,
        count: 1,
        persist: false,
    });
    c.sim.inject_error(producer_sim::InjectedError {
        api_key: API_METADATA,
        topic: None,
        partition: None,
        error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
        count: 1,
        persist: false,
    });
    let conn = c.connect_to(1);
    let r: MetadataResponse = c.roundtrip(conn, ApiKey::Metadata, 12, &metadata_request(None));
    assert_eq!(
        r.topics[0].error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
        "topic-level injection first"
    );
    let r: MetadataResponse = c.roundtrip(conn, ApiKey::Metadata, 12, &metadata_request(None));
    assert_eq!(r.topics[0].error_code, ErrorCode::NONE.0);
    assert_eq!(r.topics[0].partitions[0].error_code, ErrorCode::NONE.0);
    assert_eq!(
        r.topics[0].partitions[1].error_code,
        ErrorCode::LEADER_NOT_AVAILABLE.0
    );
    let r: MetadataResponse = c.roundtrip(conn, ApiKey::Metadata, 12, &metadata_request(None));
    assert_eq!(
        r.topics[0].partitions[1].error_code,
        ErrorCode::NONE.0,
        "count exhausted"
    );
}

#[test]
fn init_producer_id_allocates_and_bumps() {
    let mut c = cluster(1, 1);
    let conn = c.connect_to(1);
    assert_eq!(c.init_pid(conn, 0), (1000, 0));
    assert_eq!(c.init_pid(conn, 4), (1001, 0));
    // v3+ bump with the current epoch: same id, epoch + 1.
    let bump = |pid: i64, epoch: i16| {
        let mut r = InitProducerIdRequest::default();
        r.transactional_id = None;
        r.transaction_timeout_ms = i32::MAX;
        r.producer_id = pid.into();
        r.producer_epoch = epoch;
        r
    };
    let r: InitProducerIdResponse = c.roundtrip(conn, ApiKey::InitProducerId, 4, &bump(1000, 0));
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (ErrorCode::NONE.0, 1000, 1)
    );
    let r: InitProducerIdResponse = c.roundtrip(conn, ApiKey::InitProducerId, 3, &bump(1000, 1));
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (ErrorCode::NONE.0, 1000, 2)
    );
    // Stale epoch: fenced at v4, INVALID_PRODUCER_EPOCH at v3.
    let r: InitProducerIdResponse = c.roundtrip(conn, ApiKey::InitProducerId, 4, &bump(1000, 0));
    assert_eq!(r.error_code, ErrorCode::PRODUCER_FENCED.0);
    let r: InitProducerIdResponse = c.roundtrip(conn, ApiKey::InitProducerId, 3, &bump(1000, 0));
    assert_eq!(r.error_code, ErrorCode::INVALID_PRODUCER_EPOCH.0);
    // Unknown id.
    let r: InitProducerIdResponse = c.roundtrip(conn, ApiKey::InitProducerId, 4, &bump(7, 0));
    assert_eq!(r.error_code, ErrorCode::INVALID_PRODUCER_ID_MAPPING.0);
    // Only one of id/epoch set.
    let r: InitProducerIdResponse = c.roundtrip(conn, ApiKey::InitProducerId, 4, &bump(1000, -1));
    assert_eq!(r.error_code, ErrorCode::INVALID_REQUEST.0);
    assert_eq!(c.init_pid(conn, 2), (1002, 0));
}

#[test]
fn produce_every_version_appends_with_offsets_and_fields() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let mut next = 0;
    for v in 3..=11 {
        let (code, base) = c.produce1(conn, v, "t", 0, batch(B::plain(3)));
        assert_eq!((code, base), (ErrorCode::NONE, next), "v{v}");
        next += 3;
    }
    let log = c.sim.log("t", 0);
    assert_eq!(log.len(), 27);
    for (i, r) in log.iter().enumerate() {
        assert_eq!(r.offset, i as i64);
        assert_eq!(r.batch_base_offset, (i as i64 / 3) * 3);
        let j = i % 3;
        assert_eq!(r.key.as_deref(), Some(format!("k{j}").as_bytes()));
        assert_eq!(r.value.as_deref(), Some(format!("v{j}").as_bytes()));
        assert_eq!(
            r.headers,
            vec![("h".to_string(), Some(j.to_string().into()))]
        );
        assert_eq!(r.timestamp, 1_700_000_000_000 + j as i64);
        assert_eq!((r.producer_id, r.sequence), (-1, -1));
    }
    let rl = c.sim.request_log();
    assert_eq!(rl.len(), 9);
    assert!(rl
        .iter()
        .all(|r| r.api_key == API_PRODUCE && r.acks == Some(-1) && r.responded));
    assert_eq!(rl[0].produce[0].record_count, 3);
    assert!(c.sim.violations().is_empty(), "{:?}", c.sim.violations());
}

#[test]
fn produce_multi_partition_request_and_unknowns() {
    let mut c = cluster(2, 1);
    c.sim.create_topic("t", 2).unwrap();
    let conn = c.connect_to(1);
    let r = c
        .produce(
            conn,
            9,
            -1,
            &[
                ("t", 0, batch(B::plain(2))),
                ("t", 1, batch(B::plain(1))),
                ("t", 5, batch(B::plain(1))),
                ("zz", 0, batch(B::plain(1))),
            ],
        )
        .unwrap();
    let t = &r.responses[0].partition_responses;
    assert_eq!(
        (t[0].index, t[0].error_code, t[0].base_offset),
        (0, ErrorCode::NONE.0, 0)
    );
    assert_eq!(
        (t[1].index, t[1].error_code),
        (1, ErrorCode::NOT_LEADER_OR_FOLLOWER.0),
        "partition 1 is led by broker 2"
    );
    assert_eq!(
        (t[2].index, t[2].error_code),
        (5, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0)
    );
    assert_eq!(
        r.responses[1].partition_responses[0].error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
    );
    assert_eq!(c.sim.log("t", 0).len(), 2);
    assert!(c.sim.log("t", 1).is_empty());
}

#[test]
fn not_leader_hints_only_from_v10() {
    let mut c = cluster(2, 1);
    c.sim.create_topic("t", 1).unwrap();
    c.sim.move_leader("t", 0, 2).unwrap();
    c.sim.move_leader("t", 0, 2).unwrap();
    let conn = c.connect_to(1);
    let r = c
        .produce(conn, 10, -1, &[("t", 0, batch(B::plain(1)))])
        .unwrap();
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ErrorCode::NOT_LEADER_OR_FOLLOWER.0);
    assert_eq!(
        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
        (2, 2)
    );
    assert_eq!(r.node_endpoints.len(), 1);
    assert_eq!(r.node_endpoints[0].node_id.0, 2);
    assert_eq!(r.node_endpoints[0].host.as_str(), "broker-2");
    assert_eq!(r.node_endpoints[0].port, 9092);
    let r = c
        .produce(conn, 9, -1, &[("t", 0, batch(B::plain(1)))])
        .unwrap();
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ErrorCode::NOT_LEADER_OR_FOLLOWER.0);
    assert_eq!(p.current_leader.leader_id.0, -1);
    assert!(r.node_endpoints.is_empty());
}

#[test]
fn leader_move_keeps_the_log() {
    let mut c = cluster(2, 1);
    c.sim.create_topic("t", 1).unwrap();
    let c1 = c.connect_to(1);
    let c2 = c.connect_to(2);
    let (pid, epoch) = c.init_pid(c1, 4);
    assert_eq!(
        c.produce1(c1, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, epoch, 0, 2))),
        (ErrorCode::NONE, 0)
    );
    c.sim.move_leader("t", 0, 2).unwrap();
    assert_eq!(
        c.produce1(c1, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, epoch, 2, 2)))
            .0,
        ErrorCode::NOT_LEADER_OR_FOLLOWER
    );
    // The new leader has the log and the producer state: a retry of batch 0 is a duplicate.
    assert_eq!(
        c.produce1(c2, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, epoch, 0, 2))),
        (ErrorCode::NONE, 0)
    );
    assert_eq!(
        c.produce1(c2, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, epoch, 2, 2))),
        (ErrorCode::NONE, 2)
    );
    assert_eq!(c.sim.log("t", 0).len(), 4);
    assert_eq!(c.sim.leader("t", 0), Some((2, 1)));
}

#[test]
fn idempotent_duplicate_returns_original_offset_without_append() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let (pid, e) = c.init_pid(conn, 4);
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 0, 3))),
        (ErrorCode::NONE, 0)
    );
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 3, 2))),
        (ErrorCode::NONE, 3)
    );
    // Retries of both batches: original offsets, nothing appended.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 0, 3))),
        (ErrorCode::NONE, 0)
    );
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 3, 2))),
        (ErrorCode::NONE, 3)
    );
    assert_eq!(c.sim.log("t", 0).len(), 5);
    let seqs: Vec<i32> = c.sim.log("t", 0).iter().map(|r| r.sequence).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
    let last = c.sim.request_log().last().unwrap();
    assert!(!last.produce[0].appended);
    // Same first seq, different boundaries: not a duplicate -> out of order.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 0, 2)))
            .0,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
}

#[test]
fn idempotent_window_is_five_batches() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let (pid, e) = c.init_pid(conn, 4);
    for i in 0..6 {
        assert_eq!(
            c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, i, 1))),
            (ErrorCode::NONE, i as i64)
        );
    }
    // Batch 0 fell out of the window; batch 1 is still there.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 0, 1)))
            .0,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 1, 1))),
        (ErrorCode::NONE, 1)
    );
    assert_eq!(c.sim.log("t", 0).len(), 6);
}

#[test]
fn idempotent_gap_and_epochs() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let (pid, _) = c.init_pid(conn, 4);
    // No state: any sequence is accepted.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, 3, 17, 2))),
        (ErrorCode::NONE, 0)
    );
    // Gap.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, 3, 20, 1)))
            .0,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    // Old epoch.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, 2, 19, 1)))
            .0,
        ErrorCode::INVALID_PRODUCER_EPOCH
    );
    // New epoch must start at 0.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, 4, 19, 1)))
            .0,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, 4, 0, 1))),
        (ErrorCode::NONE, 2)
    );
    // The window was reset: the epoch-3 batch is no longer a duplicate, it is an old epoch.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, 3, 17, 2)))
            .0,
        ErrorCode::INVALID_PRODUCER_EPOCH
    );
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, 4, 1, 1))),
        (ErrorCode::NONE, 3)
    );
    assert_eq!(c.sim.log("t", 0).len(), 4);
    // Another producer id has its own state on the same partition.
    let (pid2, e2) = c.init_pid(conn, 4);
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid2, e2, 0, 1))),
        (ErrorCode::NONE, 4)
    );
    // pid 999 was never allocated: accepted (no state) but recorded as a violation.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(999, 0, 0, 1))),
        (ErrorCode::NONE, 5)
    );
    assert!(c
        .sim
        .violations()
        .iter()
        .any(|v| v.contains("never allocated")));
}

#[test]
fn idempotent_sequence_wraps_at_i32_max() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let (pid, e) = c.init_pid(conn, 4);
    assert_eq!(
        c.produce1(
            conn,
            NEWEST_PRODUCE,
            "t",
            0,
            batch(B::idem(pid, e, i32::MAX - 1, 2))
        )
        .0,
        ErrorCode::NONE
    );
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 0, 1))),
        (ErrorCode::NONE, 2)
    );
    let seqs: Vec<i32> = c.sim.log("t", 0).iter().map(|r| r.sequence).collect();
    assert_eq!(seqs, vec![i32::MAX - 1, i32::MAX, 0]);
}

#[test]
fn idempotent_batch_spanning_the_wrap() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let (pid, e) = c.init_pid(conn, 4);
    assert_eq!(
        c.produce1(
            conn,
            NEWEST_PRODUCE,
            "t",
            0,
            batch(B::idem(pid, e, i32::MAX, 3))
        )
        .0,
        ErrorCode::NONE
    );
    let seqs: Vec<i32> = c.sim.log("t", 0).iter().map(|r| r.sequence).collect();
    assert_eq!(seqs, vec![i32::MAX, 0, 1]);
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 2, 1))),
        (ErrorCode::NONE, 3)
    );
    // Duplicate of the wrapping batch.
    assert_eq!(
        c.produce1(
            conn,
            NEWEST_PRODUCE,
            "t",
            0,
            batch(B::idem(pid, e, i32::MAX, 3))
        ),
        (ErrorCode::NONE, 0)
    );
}

fn corrupt_case(mutate: impl FnOnce(&mut Vec<u8>)) -> (ErrorCode, Vec<String>) {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let mut b = batch(B::plain(2)).to_vec();
    mutate(&mut b);
    let r = c.produce(conn, 8, -1, &[("t", 0, b.into())]).unwrap();
    let p = &r.responses[0].partition_responses[0];
    assert!(c.sim.log("t", 0).is_empty());
    if p.error_code != ErrorCode::NONE.0 {
        assert!(p.error_message.is_some(), "v8 carries an error message");
    }
    (ErrorCode(p.error_code), c.sim.violations().to_vec())
}

fn fix_crc(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn bad_crc_is_corrupt_message() {
    let (code, v) = corrupt_case(|b| {
        let n = b.len();
        b[n - 2] ^= 0xff;
    });
    assert_eq!(code, ErrorCode::CORRUPT_MESSAGE);
    assert!(v[0].contains("CRC"), "{v:?}");
}

#[test]
fn structural_batch_errors_are_corrupt_message() {
    // Two batches in one partition.
    let (code, v) = corrupt_case(|b| {
        let copy = b.clone();
        b.extend_from_slice(&copy);
    });
    assert_eq!(code, ErrorCode::CORRUPT_MESSAGE);
    assert!(v[0].contains("exactly one RecordBatch"), "{v:?}");
    // Magic 1.
    let (code, _) = corrupt_case(|b| b[16] = 1);
    assert_eq!(code, ErrorCode::CORRUPT_MESSAGE);
    // Record count lies (CRC fixed up).
    let (code, v) = corrupt_case(|b| {
        b[60] = 3;
        fix_crc(b);
    });
    assert_eq!(code, ErrorCode::CORRUPT_MESSAGE);
    assert!(v[0].contains("LastOffsetDelta"), "{v:?}");
    // Both count and last offset delta lie consistently.
    let (code, v) = corrupt_case(|b| {
        b[60] = 3;
        b[26] = 2;
        fix_crc(b);
    });
    assert_eq!(code, ErrorCode::CORRUPT_MESSAGE);
    assert!(!v.is_empty());
    // Truncated.
    let (code, _) = corrupt_case(|b| b.truncate(40));
    assert_eq!(code, ErrorCode::CORRUPT_MESSAGE);
    // Empty.
    let (code, _) = corrupt_case(|b| b.clear());
    assert_eq!(code, ErrorCode::CORRUPT_MESSAGE);
    // Huge record count: rejected without allocation.
    let (code, _) = corrupt_case(|b| {
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        fix_crc(b);
    });
    assert_eq!(code, ErrorCode::CORRUPT_MESSAGE);
    // Unknown codec 6.
    let (code, _) = corrupt_case(|b| {
        b[22] |= 6;
        fix_crc(b);
    });
    assert_eq!(code, ErrorCode::CORRUPT_MESSAGE);
}

#[test]
fn compressed_batches_decode() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let mut expect = 0;
    for comp in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let (code, base) = c.produce1(
            conn,
            FIRST_FLEXIBLE_PRODUCE,
            "t",
            0,
            batch(B::plain(50).compressed(comp)),
        );
        assert_eq!((code, base), (ErrorCode::NONE, expect), "{comp:?}");
        expect += 50;
    }
    let log = c.sim.log("t", 0);
    assert_eq!(log.len(), 200);
    assert_eq!(log[199].value.as_deref(), Some(&b"v49"[..]));
    assert_eq!(log[150].headers[0].1.as_deref(), Some(&b"0"[..]));
    // zstd below v7 is refused.
    let (code, _) = c.produce1(
        conn,
        6,
        "t",
        0,
        batch(B::plain(1).compressed(Compression::Zstd)),
    );
    assert_eq!(code, ErrorCode::UNSUPPORTED_COMPRESSION_TYPE);
    assert!(c.sim.violations().is_empty(), "{:?}", c.sim.violations());
}

#[test]
fn raw_snappy_is_accepted_too() {
    // librdkafka and franz-go write raw (not xerial-framed) snappy.
    let plain = batch(B::plain(3));
    let records = &plain[61..];
    let compressed = snap::raw::Encoder::new().compress_vec(records).unwrap();
    let mut b = plain[..61].to_vec();
    b.extend_from_slice(&compressed);
    b[22] |= 2;
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    fix_crc(&mut b);
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    assert_eq!(
        c.produce1(conn, FIRST_FLEXIBLE_PRODUCE, "t", 0, b.into()),
        (ErrorCode::NONE, 0)
    );
    assert_eq!(c.sim.log("t", 0).len(), 3);
}

#[test]
fn invalid_acks_and_duplicate_partitions() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let r = c
        .produce(conn, 9, 2, &[("t", 0, batch(B::plain(1)))])
        .unwrap();
    assert_eq!(
        r.responses[0].partition_responses[0].error_code,
        ErrorCode::INVALID_REQUIRED_ACKS.0
    );
    let r = c
        .produce(
            conn,
            9,
            -1,
            &[("t", 0, batch(B::plain(1))), ("t", 0, batch(B::plain(1)))],
        )
        .unwrap();
    let p = &r.responses[0].partition_responses;
    assert_eq!(
        (p[0].error_code, p[1].error_code),
        (ErrorCode::NONE.0, ErrorCode::INVALID_REQUEST.0)
    );
    assert_eq!(c.sim.log("t", 0).len(), 1);
}

#[test]
fn acks_zero_sends_no_response_but_appends() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    c.produce(conn, 9, 0, &[("t", 0, batch(B::plain(2)))]);
    c.produce(conn, 9, 0, &[("t", 0, batch(B::plain(2)))]);
    c.run_idle();
    assert_eq!(c.pending_frames(conn), 0, "no response for acks=0");
    assert_eq!(c.sim.log("t", 0).len(), 4);
    assert!(!c.closed.contains(&conn));
    assert!(c.sim.request_log().iter().all(|r| !r.responded));
    // A later acks=1 request is answered normally.
    assert_eq!(
        c.produce1(conn, FIRST_FLEXIBLE_PRODUCE, "t", 0, batch(B::plain(1))),
        (ErrorCode::NONE, 4)
    );
    // acks=0 with a partition error: the broker closes the connection.
    c.produce(conn, 9, 0, &[("nope", 0, batch(B::plain(2)))]);
    c.run_idle();
    assert!(c.closed.contains(&conn));
    assert_eq!(c.pending_frames(conn), 0);
}

#[test]
fn injected_errors_persist_or_not() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 2).unwrap();
    let conn = c.connect_to(1);
    let (pid, e) = c.init_pid(conn, 4);
    c.sim.inject_error(producer_sim::InjectedError {
        api_key: API_PRODUCE,
        topic: Some("t".into()),
        partition: Some(0),
        error_code: ErrorCode::NOT_ENOUGH_REPLICAS.0, // NOT_ENOUGH_REPLICAS: not appended
        count: 1,
        persist: false,
    });
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 1, batch(B::idem(pid, e, 0, 1))),
        (ErrorCode::NONE, 0),
        "other partition unaffected"
    );
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 0, 2))),
        (ErrorCode::NOT_ENOUGH_REPLICAS, -1)
    );
    assert!(c.sim.log("t", 0).is_empty());
    // The retry succeeds: no producer state was created by the failed attempt.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 0, 2))),
        (ErrorCode::NONE, 0)
    );

    c.sim.inject_error(producer_sim::InjectedError {
        api_key: API_PRODUCE,
        topic: None,
        partition: None,
        error_code: ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND.0, // NOT_ENOUGH_REPLICAS_AFTER_APPEND: appended
        count: 1,
        persist: true,
    });
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 2, 2))),
        (ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND, -1)
    );
    assert_eq!(c.sim.log("t", 0).len(), 4, "persisted");
    // The retry is a duplicate: original offset, no second copy.
    assert_eq!(
        c.produce1(conn, NEWEST_PRODUCE, "t", 0, batch(B::idem(pid, e, 2, 2))),
        (ErrorCode::NONE, 2)
    );
    assert_eq!(c.sim.log("t", 0).len(), 4);
    let rl = c.sim.request_log();
    let inj = rl
        .iter()
        .filter(|r| {
            r.produce
                .iter()
                .any(|p| p.error_code == ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND.0)
        })
        .count();
    assert_eq!(inj, 1);
}

#[test]
fn injected_errors_for_init_producer_id_and_api_versions() {
    let mut c = cluster(1, 1);
    let conn = c.connect_to(1);
    c.sim.inject_error(producer_sim::InjectedError {
        api_key: API_INIT_PRODUCER_ID,
        topic: None,
        partition: None,
        error_code: ErrorCode::COORDINATOR_NOT_AVAILABLE.0,
        count: 1,
        persist: false,
    });
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = -1;
    let r: InitProducerIdResponse = c.roundtrip(conn, ApiKey::InitProducerId, 4, &req);
    assert_eq!(
        (r.error_code, r.producer_id.0),
        (ErrorCode::COORDINATOR_NOT_AVAILABLE.0, -1)
    );
    assert_eq!(
        c.init_pid(conn, 4),
        (1000, 0),
        "no id consumed by the failure"
    );
    c.sim.inject_error(producer_sim::InjectedError {
        api_key: API_API_VERSIONS,
        topic: None,
        partition: None,
        error_code: UNSUPPORTED_SASL_MECHANISM.0,
        count: 1,
        persist: false,
    });
    let r: ApiVersionsResponse = c.roundtrip(conn, ApiKey::ApiVersions, 3, &api_versions_request());
    assert_eq!(r.error_code, UNSUPPORTED_SASL_MECHANISM.0);
}

#[test]
fn throttle_is_reported() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    c.sim.set_throttle(1, 250, 2).unwrap();
    let r = c
        .produce(conn, 9, -1, &[("t", 0, batch(B::plain(1)))])
        .unwrap();
    assert_eq!(r.throttle_time_ms, 250);
    let r: MetadataResponse = c.roundtrip(conn, ApiKey::Metadata, 9, &metadata_request(None));
    assert_eq!(r.throttle_time_ms, 250);
    let r = c
        .produce(conn, 9, -1, &[("t", 0, batch(B::plain(1)))])
        .unwrap();
    assert_eq!(r.throttle_time_ms, 0);
}

#[test]
fn produce_v13_addresses_topics_by_id() {
    let mut cfg = producer_sim::SimConfig::with_brokers(1, 3);
    cfg.brokers[0].api_versions = Some(vec![
        (API_PRODUCE, 3, 13),
        (API_METADATA, 0, 12),
        (API_API_VERSIONS, 0, 3),
        (API_INIT_PRODUCER_ID, 0, 4),
    ]);
    let mut c = Client::new(cfg);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let mut req = produce_request(-1, &[("t", 0, batch(B::plain(2)))]);
    req.topic_data[0].topic_id = uuid::Uuid::from_u128(c.sim.topic_id("t").unwrap());
    let r: kafka_protocol::messages::ProduceResponse = c.roundtrip(conn, ApiKey::Produce, 13, &req);
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (ErrorCode::NONE.0, 0));
    assert_eq!(r.responses[0].topic_id, req.topic_data[0].topic_id);
    req.topic_data[0].topic_id = uuid::Uuid::from_u128(12345);
    let r: kafka_protocol::messages::ProduceResponse = c.roundtrip(conn, ApiKey::Produce, 13, &req);
    assert_eq!(
        r.responses[0].partition_responses[0].error_code,
        ErrorCode::UNKNOWN_TOPIC_ID.0
    );
    assert_eq!(c.sim.log("t", 0).len(), 2);
}

#[test]
fn mutated_batches_never_panic_and_never_half_append() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let mut rng = 0x9e37_79b9_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let comps = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    let mut accepted = 0;
    for i in 0..400 {
        let mut b = batch(B::plain(3).compressed(comps[i % 5])).to_vec();
        for _ in 0..(1 + next() % 3) {
            let pos = 12 + next() as usize % (b.len() - 12);
            b[pos] = next() as u8;
        }
        if i % 2 == 0 {
            fix_crc(&mut b);
        }
        let before = c.sim.log("t", 0).len();
        let (code, base) = c.produce1(conn, FIRST_FLEXIBLE_PRODUCE, "t", 0, b.into());
        let after = c.sim.log("t", 0).len();
        if code == ErrorCode::NONE {
            accepted += 1;
            assert_eq!(base as usize, before);
            assert!(after > before);
        } else {
            assert_eq!(after, before, "a rejected batch appends nothing");
        }
    }
    assert!(accepted < 400);
    assert!(c.sim.violations().len() >= 400 - accepted);
}
