//! Scenario tests: one per situation users of asynchronous producers run into, each checked
//! against the simulated cluster's broker rules.

mod support;

use std::time::Duration;

use producer_core::{
    Acks, Compression, Config, Event, ProduceError, Producer, Record, SendErrorReason,
};
use producer_sim::drive::Harness;
use producer_sim::{InjectedError, SimConfig, API_PRODUCE};
use support::run::*;
use support::ErrorCode;

const TOPICS: &[(&str, i32)] = &[("orders", 4), ("clicks", 3)];
const NAMES: &[&str] = &["orders", "clicks"];

fn inject(
    code: ErrorCode,
    topic: Option<&str>,
    partition: Option<i32>,
    count: u32,
    persist: bool,
) -> InjectedError {
    InjectedError {
        api_key: API_PRODUCE,
        topic: topic.map(str::to_string),
        partition,
        error_code: code.0,
        count,
        persist,
    }
}

#[test]
fn happy_path_keyed_and_null_keys_every_compression() {
    for (i, compression) in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .enumerate()
    {
        let mut h = harness(cluster(3, TOPICS, i as u64), |b| b.compression(compression));
        let mut sent = send_many(&mut h, NAMES, 0, 2000, true);
        sent.extend(send_many(&mut h, NAMES, 2000, 2000, false));
        assert!(
            h.flush(secs(30)),
            "{compression:?}: not everything was reported"
        );
        check_run(&h, &sent, TOPICS, true);
        assert!(
            reports(&h).values().all(|r| r.is_ok()),
            "{compression:?}: failures on a healthy cluster"
        );
    }
}

#[test]
fn keyed_records_land_on_the_java_partition() {
    let mut h = harness(cluster(3, TOPICS, 1), |b| b);
    let sent = send_many(&mut h, &["orders"], 0, 200, true);
    assert!(h.flush(secs(30)));
    for d in &h.deliveries {
        let m = d.result.as_ref().unwrap();
        let key = sent[d.opaque as usize].key.clone().unwrap();
        assert_eq!(
            m.partition,
            producer_core::partitioner::partition_for_key(&key, 4)
        );
    }
}

#[test]
fn one_request_per_broker_spans_topics_and_partitions() {
    // One broker leads everything: all ready partitions of both topics must travel together.
    let mut h = harness(cluster(1, TOPICS, 2), |b| {
        b.linger(Duration::from_millis(20))
    });
    // Warm up (metadata, producer id) so the burst below is batched in one go.
    let warm = send_many(&mut h, NAMES, 0, 2, false);
    assert!(h.flush(secs(10)));
    let before = h.cluster.request_log().len();
    let mut sent = warm;
    for p in 0..4 {
        for id in 0..5u64 {
            let id = 100 + p * 10 + id;
            h.send(record(id, "orders", false).with_partition(p as i32), id)
                .unwrap();
            sent.push(Sent {
                id,
                topic: "orders".into(),
                key: None,
            });
        }
    }
    for p in 0..3 {
        let id = 200 + p;
        h.send(record(id, "clicks", false).with_partition(p as i32), id)
            .unwrap();
        sent.push(Sent {
            id,
            topic: "clicks".into(),
            key: None,
        });
    }
    assert!(h.flush(secs(10)));
    check_run(&h, &sent, TOPICS, true);
    let produce: Vec<_> = h.cluster.request_log()[before..]
        .iter()
        .filter(|r| r.api_key == API_PRODUCE)
        .collect();
    assert_eq!(
        produce.len(),
        1,
        "expected one Produce request, got {produce:#?}"
    );
    let parts = &produce[0].produce;
    assert_eq!(parts.len(), 7, "all 7 partitions in the one request");
    assert!(parts.iter().any(|p| p.topic == "orders") && parts.iter().any(|p| p.topic == "clicks"));
}

#[test]
fn requests_only_go_to_the_leader_and_carry_only_its_partitions() {
    let mut h = harness(cluster(3, TOPICS, 3), |b| b);
    let sent = send_many(&mut h, NAMES, 0, 3000, true);
    assert!(h.flush(secs(30)));
    check_run(&h, &sent, TOPICS, true);
    for r in h
        .cluster
        .request_log()
        .iter()
        .filter(|r| r.api_key == API_PRODUCE)
    {
        for p in &r.produce {
            assert_eq!(
                p.error_code,
                ErrorCode::NONE.0,
                "a request went to a non-leader: {r:?}"
            );
        }
    }
}

#[test]
fn leader_moves_mid_stream_and_batches_follow() {
    let mut h = harness(cluster(3, TOPICS, 4), |b| b);
    let mut sent = send_many(&mut h, NAMES, 0, 500, true);
    h.run_for(Duration::from_millis(30));
    let (old, _) = h.cluster.leader("orders", 0).unwrap();
    let new = if old == 3 { 1 } else { old + 1 };
    h.cluster.move_leader("orders", 0, new).unwrap();
    h.cluster.move_leader("clicks", 1, new).unwrap();
    sent.extend(send_many(&mut h, NAMES, 500, 1500, true));
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, TOPICS, true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
    let to_new = h.cluster.request_log().iter().filter(|r| {
        r.broker_id == new
            && r.produce.iter().any(|p| {
                p.topic == "orders" && p.partition == 0 && p.error_code == ErrorCode::NONE.0
            })
    });
    assert!(to_new.count() > 0, "orders-0 batches followed the leader");
}

/// A leader is killed for good, and its partitions get new leaders only some seconds later
/// (Kafka's controller notices a dead broker after its session timeout): metadata asked right
/// after the loss still names the dead broker. Each failed reconnect asks again, so the records
/// move to the new leader as soon as Metadata names it, well within their delivery timeout.
#[test]
fn a_leader_killed_for_good_is_replaced_when_metadata_names_the_new_one() {
    let mut h = harness(cluster(3, TOPICS, 4), |b| {
        b.delivery_timeout(secs(30)).request_timeout(secs(5))
    });
    let mut sent = send_many(&mut h, NAMES, 0, 200, true);
    h.run_for(Duration::from_millis(50));
    let (dead, _) = h.cluster.leader("orders", 0).unwrap();
    h.cluster.stop_broker(dead, h.now).unwrap();
    sent.extend(send_many(&mut h, NAMES, 200, 200, true));
    // The controller has not noticed yet.
    h.run_for(secs(3));
    let new = if dead == 3 { 1 } else { dead + 1 };
    let moved_at = h.now;
    for &(t, n) in TOPICS {
        for p in 0..n {
            if h.cluster.leader(t, p).map(|(l, _)| l) == Some(dead) {
                h.cluster.move_leader(t, p, new).unwrap();
            }
        }
    }
    assert!(
        h.run_until(secs(10), |h| h.producer.buffered_records() == 0),
        "records still wait {:?} after the new leaders were elected",
        h.now - moved_at
    );
    check_run(&h, &sent, TOPICS, true);
    assert!(
        reports(&h).values().all(|r| r.is_ok()),
        "every record delivered"
    );
}

#[test]
fn not_leader_refreshes_metadata_before_retrying_without_hints() {
    // Brokers speaking at most Produce v9 send no leader hints: the producer must refresh metadata.
    let mut cfg = SimConfig::with_brokers(2, 5);
    for b in &mut cfg.brokers {
        b.api_versions = Some(vec![(0, 3, 9), (3, 0, 12), (18, 0, 3), (22, 0, 4)]);
    }
    let mut h = harness(cluster_with(cfg, &[("t", 1)]), |b| b);
    let mut sent = send_many(&mut h, &["t"], 0, 10, false);
    assert!(h.flush(secs(10)));
    let (old, _) = h.cluster.leader("t", 0).unwrap();
    let new = if old == 1 { 2 } else { 1 };
    h.cluster.move_leader("t", 0, new).unwrap();
    let mark = h.cluster.request_log().len();
    sent.extend(send_many(&mut h, &["t"], 10, 10, false));
    assert!(h.flush(secs(10)));
    check_run(&h, &sent, &[("t", 1)], true);
    let log = &h.cluster.request_log()[mark..];
    let failed = log
        .iter()
        .position(|r| {
            r.produce
                .iter()
                .any(|p| p.error_code == ErrorCode::NOT_LEADER_OR_FOLLOWER.0)
        })
        .expect("a NOT_LEADER answer");
    let metadata = log
        .iter()
        .skip(failed)
        .position(|r| r.api_key == 3)
        .map(|i| i + failed)
        .expect("a metadata refresh");
    let retry = log
        .iter()
        .skip(failed + 1)
        .position(|r| r.broker_id == new && !r.produce.is_empty())
        .map(|i| i + failed + 1)
        .expect("a retry to the new leader");
    assert!(metadata < retry, "metadata refreshed before the retry");
}

#[test]
fn leader_hint_moves_the_partition_at_once() {
    let mut h = harness(cluster(2, &[("t", 1)], 6), |b| b);
    let mut sent = send_many(&mut h, &["t"], 0, 10, false);
    assert!(h.flush(secs(10)));
    let (old, _) = h.cluster.leader("t", 0).unwrap();
    let new = if old == 1 { 2 } else { 1 };
    h.cluster.move_leader("t", 0, new).unwrap();
    // From now on metadata cannot tell the producer where the leader went: only the leader
    // hint of the NOT_LEADER_OR_FOLLOWER answer (Produce v10+) can.
    h.cluster.inject_error(InjectedError {
        api_key: producer_sim::API_METADATA,
        topic: Some("t".into()),
        partition: None,
        error_code: ErrorCode::LEADER_NOT_AVAILABLE.0,
        count: 1000,
        persist: false,
    });
    sent.extend(send_many(&mut h, &["t"], 10, 10, false));
    assert!(h.flush(secs(10)));
    check_run(&h, &sent, &[("t", 1)], true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
    let hinted = h.cluster.request_log().iter().any(|r| {
        r.broker_id == old
            && r.produce
                .iter()
                .any(|p| p.error_code == ErrorCode::NOT_LEADER_OR_FOLLOWER.0)
    });
    assert!(hinted, "the old leader answered NOT_LEADER_OR_FOLLOWER");
}

#[test]
fn message_too_large_splits_the_batch() {
    let mut h = harness(cluster(1, &[("t", 1)], 7), |b| {
        b.linger(Duration::from_millis(50))
    });
    h.cluster.inject_error(inject(
        ErrorCode::MESSAGE_TOO_LARGE,
        Some("t"),
        Some(0),
        1,
        false,
    ));
    let sent = send_many(&mut h, &["t"], 0, 40, false);
    assert!(h.flush(secs(10)));
    check_run(&h, &sent, &[("t", 1)], true);
    assert!(
        reports(&h).values().all(|r| r.is_ok()),
        "split halves delivered"
    );
    let counts: Vec<i32> = h
        .cluster
        .request_log()
        .iter()
        .flat_map(|r| r.produce.iter())
        .map(|p| p.record_count)
        .collect();
    assert_eq!(counts[0], 40, "first attempt carried the whole batch");
    assert!(
        counts[1..].iter().all(|&c| c < 40),
        "retries carry split batches: {counts:?}"
    );
    assert_eq!(counts[1..].iter().sum::<i32>(), 40);
}

#[test]
fn single_record_too_large_for_the_broker_fails_with_the_record() {
    let mut h = harness(cluster(1, &[("t", 1)], 8), |b| b);
    h.cluster.inject_error(inject(
        ErrorCode::MESSAGE_TOO_LARGE,
        Some("t"),
        Some(0),
        1,
        false,
    ));
    let sent = send_many(&mut h, &["t"], 0, 1, false);
    assert!(h.flush(secs(10)));
    check_run(&h, &sent, &[("t", 1)], true);
    let d = &h.deliveries[0];
    let f = d.result.as_ref().unwrap_err();
    assert!(
        matches!(f.error, ProduceError::Broker { code, .. } if code == ErrorCode::MESSAGE_TOO_LARGE)
    );
    assert_eq!(id_of(f.record.value.as_deref().unwrap()), 0);
}

#[test]
fn corrupt_message_is_not_retried() {
    let mut h = harness(cluster(1, &[("t", 2)], 9), |b| b);
    h.cluster.inject_error(inject(
        ErrorCode::CORRUPT_MESSAGE,
        Some("t"),
        Some(0),
        1,
        false,
    ));
    let sent = send_many(&mut h, &["t"], 0, 1, false)
        .into_iter()
        .chain(std::iter::empty())
        .collect::<Vec<_>>();
    let mut sent = sent;
    h.send(record(1, "t", false).with_partition(0), 1).unwrap();
    sent.push(Sent {
        id: 1,
        topic: "t".into(),
        key: None,
    });
    assert!(h.flush(secs(10)));
    check_run(&h, &sent, &[("t", 2)], true);
    let attempts = h
        .cluster
        .request_log()
        .iter()
        .flat_map(|r| r.produce.iter())
        .filter(|p| p.error_code == ErrorCode::CORRUPT_MESSAGE.0)
        .count();
    assert_eq!(attempts, 1, "CORRUPT_MESSAGE answered once, never retried");
    assert!(reports(&h)
        .values()
        .any(|r| matches!(r, Err(ProduceError::Broker { code, .. }) if *code == ErrorCode::CORRUPT_MESSAGE)));
}

#[test]
fn only_the_failed_partitions_are_resent() {
    let mut h = harness(cluster(1, &[("t", 3)], 10), |b| {
        b.linger(Duration::from_millis(20))
    });
    let warm = send_many(&mut h, &["t"], 0, 1, false);
    assert!(h.flush(secs(10)));
    h.cluster.inject_error(inject(
        ErrorCode::NOT_ENOUGH_REPLICAS,
        Some("t"),
        Some(1),
        1,
        false,
    ));
    let mut sent = warm;
    for p in 0..3 {
        let id = 10 + p as u64;
        h.send(record(id, "t", false).with_partition(p), id)
            .unwrap();
        sent.push(Sent {
            id,
            topic: "t".into(),
            key: None,
        });
    }
    let mark = h.cluster.request_log().len();
    assert!(h.flush(secs(10)));
    check_run(&h, &sent, &[("t", 3)], true);
    let produce: Vec<_> = h.cluster.request_log()[mark..]
        .iter()
        .filter(|r| r.api_key == API_PRODUCE)
        .collect();
    assert_eq!(produce[0].produce.len(), 3);
    let retry = produce
        .iter()
        .find(|r| {
            r.produce.iter().all(|p| p.error_code == ErrorCode::NONE.0)
                && r.produce.iter().any(|p| p.partition == 1)
        })
        .unwrap();
    assert_eq!(
        retry.produce.len(),
        1,
        "the retry carries only partition 1: {retry:?}"
    );
}

#[test]
fn unsure_errors_are_retried_and_deduplicated() {
    let mut h = harness(cluster(1, &[("t", 1)], 11), |b| b);
    h.cluster.inject_error(inject(
        ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Some("t"),
        Some(0),
        1,
        true,
    ));
    h.cluster.inject_error(inject(
        ErrorCode::REQUEST_TIMED_OUT,
        Some("t"),
        Some(0),
        1,
        true,
    ));
    let sent = send_many(&mut h, &["t"], 0, 50, false);
    assert!(h.flush(secs(10)));
    check_run(&h, &sent, &[("t", 1)], true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
}

#[test]
fn out_of_order_and_unknown_producer_id_bump_the_epoch() {
    for code in [
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode::UNKNOWN_PRODUCER_ID,
        ErrorCode::INVALID_PRODUCER_EPOCH,
    ] {
        let mut h = harness(cluster(1, &[("t", 1)], 12), |b| b);
        let mut sent = send_many(&mut h, &["t"], 0, 5, false);
        assert!(h.flush(secs(10)));
        h.cluster
            .inject_error(inject(code, Some("t"), Some(0), 1, false));
        sent.extend(send_many(&mut h, &["t"], 5, 5, false));
        assert!(h.flush(secs(10)), "code {code}");
        check_run(&h, &sent, &[("t", 1)], true);
        assert!(reports(&h).values().all(|r| r.is_ok()), "code {code}");
        let epochs: Vec<i16> = h
            .cluster
            .log("t", 0)
            .iter()
            .map(|r| r.producer_epoch)
            .collect();
        assert!(
            epochs.last() > epochs.first(),
            "code {code}: the epoch was bumped: {epochs:?}"
        );
    }
}

#[test]
fn request_timeout_closes_the_connection_and_retries_without_duplicates() {
    let mut h = harness(cluster(1, &[("t", 1)], 13), |b| {
        b.request_timeout(Duration::from_millis(500))
            .delivery_timeout(secs(30))
    });
    let mut sent = send_many(&mut h, &["t"], 0, 5, false);
    assert!(h.flush(secs(10)));
    let until = h.now + Duration::from_secs(2);
    h.cluster.stall_connections_to(1, Some(until)).unwrap();
    sent.extend(send_many(&mut h, &["t"], 5, 20, false));
    assert!(h.flush(secs(20)));
    check_run(&h, &sent, &[("t", 1)], true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
    assert!(
        h.producer.stats().disconnects >= 1,
        "the timed-out connection was closed"
    );
}

#[test]
fn broker_down_and_back() {
    let mut h = harness(cluster(2, TOPICS, 14), |b| b);
    let mut sent = send_many(&mut h, NAMES, 0, 300, true);
    // Mid-stream: broker 2 stops once the producer is sending to it.
    let producing_to_2 = |h: &Harness<u64>| {
        h.cluster
            .request_log()
            .iter()
            .any(|r| r.broker_id == 2 && r.api_key == API_PRODUCE)
    };
    assert!(h.run_until(secs(5), producing_to_2));
    let disconnects = h.producer.stats().disconnects;
    h.cluster.stop_broker(2, h.now).unwrap();
    sent.extend(send_many(&mut h, NAMES, 300, 300, true));
    h.run_for(Duration::from_millis(500));
    // The stop took effect: the producer lost its connection to broker 2, and the records of
    // the partitions broker 2 leads (it stays their leader) wait for it.
    assert!(
        h.producer.stats().disconnects > disconnects,
        "the connection to the stopped broker was lost"
    );
    assert!(
        h.producer.buffered_records() > 0,
        "records for the stopped broker's partitions wait for it"
    );
    assert_eq!(h.cluster.broker_running(2), Some(false));
    let restarted_at = h.now;
    h.cluster.start_broker(2).unwrap();
    sent.extend(send_many(&mut h, NAMES, 600, 300, true));
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, TOPICS, true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
    assert!(
        h.cluster.request_log().iter().any(|r| r.broker_id == 2
            && r.at >= restarted_at
            && r.api_key == API_PRODUCE
            && r.produce.iter().any(|p| p.appended)),
        "broker 2 took the waiting records after its restart"
    );
}

#[test]
fn slow_broker_fills_the_buffer_and_send_returns_full() {
    let mut h = harness(cluster(1, &[("t", 2)], 15), |b| {
        b.buffer_memory(1 << 20)
            .max_request_size(64 * 1024)
            .buffer_max_records(500)
    });
    let warm = send_many(&mut h, &["t"], 0, 1, false);
    assert!(h.flush(secs(10)));
    h.cluster
        .stall_connections_to(1, Some(h.now + Duration::from_secs(5)))
        .unwrap();
    let mut sent = warm;
    let mut full = 0;
    for id in 1..2000u64 {
        match h.send(record(id, "t", true), id) {
            Ok(()) => sent.push(Sent {
                id,
                topic: "t".into(),
                key: None,
            }),
            Err(e) => {
                assert_eq!(e.reason, SendErrorReason::Full);
                assert_eq!(e.opaque, id, "the opaque comes back");
                assert_eq!(
                    id_of(e.record.value.as_deref().unwrap()),
                    id,
                    "the record comes back"
                );
                full += 1;
            }
        }
        assert!(h.producer.buffered_records() <= 500);
        assert!(h.producer.buffered_bytes() <= 1 << 20);
        if id % 50 == 0 {
            h.run_for(Duration::from_millis(1));
        }
    }
    assert!(full > 0, "the buffer filled");
    assert!(h.flush(secs(30)));
    check_run(&h, &sent, &[("t", 2)], true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
}

#[test]
fn delivery_timeout_fails_records_with_the_record_when_no_broker_is_reachable() {
    let mut h = harness(cluster(1, &[("t", 1)], 16), |b| {
        b.delivery_timeout(Duration::from_millis(2000))
            .request_timeout(Duration::from_millis(1000))
    });
    let mut sent = send_many(&mut h, &["t"], 0, 3, false);
    assert!(h.flush(secs(10)));
    h.cluster.stop_broker(1, h.now).unwrap();
    sent.extend(send_many(&mut h, &["t"], 3, 10, false));
    // Not before the delivery timeout (virtual time)...
    let reported = h.deliveries.len();
    let just_before = Duration::from_millis(2000 - 1);
    assert!(!h.run_until(just_before, |h| h.deliveries.len() > reported));
    // ...and once it has passed.
    assert!(h.run_until(secs(10), |h| h.producer.buffered_records() == 0));
    check_run(&h, &sent, &[("t", 1)], true);
    let r = reports(&h);
    for id in 3..13 {
        assert!(
            matches!(r[&id], Err(ProduceError::DeliveryTimeout { .. })),
            "record {id}: {:?}",
            r[&id]
        );
    }
}

#[test]
fn unknown_topic_fails_after_max_block() {
    let max_block = Duration::from_millis(800);
    let mut h = harness(cluster(1, &[("t", 1)], 17), |b| b.max_block(max_block));
    h.send(record(0, "missing", false), 0).unwrap();
    // Not before `max_block` (virtual time)...
    let just_before = max_block - Duration::from_millis(1);
    assert!(!h.run_until(just_before, |h| !h.deliveries.is_empty()));
    // ...and once it has passed.
    assert!(h.run_until(secs(10), |h| h.producer.buffered_records() == 0));
    let f = h.deliveries[0].result.as_ref().unwrap_err();
    assert_eq!(f.error, ProduceError::UnknownTopic);
    assert_eq!(&*f.record.topic, "missing");
}

#[test]
fn oversized_record_is_refused_at_send() {
    let mut h = harness(cluster(1, &[("t", 1)], 18), |b| b.max_request_size(4096));
    let r = Record::new("t", vec![0u8; 5000]);
    let e = h.send(r, 7).unwrap_err();
    assert!(matches!(e.reason, SendErrorReason::RecordTooLarge { .. }));
    assert_eq!(e.record.value.as_ref().unwrap().len(), 5000);
    assert_eq!(e.opaque, 7);
}

#[test]
fn acks_zero_and_one_without_idempotence() {
    for acks in [Acks::None, Acks::Leader] {
        let mut h = harness(cluster(2, TOPICS, 19), |b| b.acks(acks));
        let sent = send_many(&mut h, NAMES, 0, 1000, true);
        // With acks=0, `close` completes only once an answered request on every connection
        // proves the brokers handled every earlier request: the logs are complete then.
        h.producer.close(h.now);
        assert!(h.run_until(secs(30), |h| h.producer.is_closed()));
        check_run(&h, &sent, TOPICS, false);
        let r = reports(&h);
        assert!(r.values().all(|r| r.is_ok()));
        if acks == Acks::None {
            assert!(
                r.values().all(|r| matches!(r, Ok((_, -1)))),
                "acks=0 reports offset -1"
            );
        }
        assert!(
            h.cluster
                .log("orders", 0)
                .iter()
                .all(|r| r.producer_id == -1),
            "no producer id without idempotence"
        );
    }
}

#[test]
fn throttle_time_holds_the_broker() {
    let mut h = harness(cluster(1, &[("t", 1)], 20), |b| b);
    let sent = send_many(&mut h, &["t"], 0, 1, false);
    assert!(h.flush(secs(10)));
    h.cluster.set_throttle(1, 300, 1).unwrap();
    let mut sent = sent;
    sent.extend(send_many(&mut h, &["t"], 1, 1, false));
    assert!(h.flush(secs(10)));
    let throttled_at = h.now;
    sent.extend(send_many(&mut h, &["t"], 2, 1, false));
    assert!(h.flush(secs(10)));
    check_run(&h, &sent, &[("t", 1)], true);
    let last = h
        .cluster
        .request_log()
        .iter()
        .rfind(|r| r.api_key == API_PRODUCE)
        .unwrap();
    assert!(
        last.at >= throttled_at + Duration::from_millis(250),
        "the next request waited for the throttle"
    );
}

#[test]
fn failures_only_mode_reports_only_failures() {
    let mut h = harness(cluster(1, &[("t", 1)], 21), |b| b.report_successes(false));
    h.cluster.inject_error(inject(
        ErrorCode::CORRUPT_MESSAGE,
        Some("t"),
        Some(0),
        1,
        false,
    ));
    let _ = send_many(&mut h, &["t"], 0, 1, false);
    assert!(h.flush(secs(10)));
    let _ = send_many(&mut h, &["t"], 1, 20, false);
    assert!(h.flush(secs(10)));
    assert_eq!(h.deliveries.len(), 1, "only the failure is reported");
    assert!(h.deliveries[0].result.is_err());
    assert_eq!(h.cluster.log("t", 0).len(), 20);
}

#[test]
fn close_delivers_everything_then_refuses() {
    let mut h = harness(cluster(2, TOPICS, 22), |b| b);
    let sent = send_many(&mut h, NAMES, 0, 100, false);
    h.producer.close(h.now);
    assert!(h.run_until(secs(10), |h| h.producer.is_closed()));
    check_run(&h, &sent, TOPICS, true);
    let e = h.send(record(1000, "orders", false), 1000).unwrap_err();
    assert_eq!(e.reason, SendErrorReason::Closed);
}

#[test]
fn random_connection_drops_never_duplicate_or_reorder() {
    let mut cfg = SimConfig::with_brokers(3, 23);
    cfg.drop_probability = 0.05;
    cfg.fragment_responses = true;
    let mut h = harness(cluster_with(cfg, TOPICS), |b| b);
    let sent = send_many(&mut h, NAMES, 0, 5000, true);
    assert!(h.flush(secs(120)));
    check_run(&h, &sent, TOPICS, true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
}

#[test]
fn flush_covers_records_still_waiting_for_metadata() {
    let mut h = harness(cluster(1, &[("t", 2)], 24), |b| {
        b.linger(Duration::from_secs(60))
    });
    let sent = send_many(&mut h, &["t"], 0, 10, false);
    // Flushed before the topic's metadata arrived: the records must not wait out the linger.
    assert!(h.flush(secs(5)), "flush did not cover held records");
    check_run(&h, &sent, &[("t", 2)], true);
}

#[test]
fn a_connection_attempt_that_never_completes_times_out() {
    let mut h = harness(cluster(1, &[("t", 1)], 25), |b| {
        b.request_timeout(Duration::from_millis(500))
    });
    // The broker answers nothing, not even the connection, for 3 s.
    let until = h.now + Duration::from_secs(3);
    h.cluster.stall_connections_to(1, Some(until)).unwrap();
    let sent = send_many(&mut h, &["t"], 0, 5, false);
    h.run_for(Duration::from_secs(2));
    assert!(
        h.producer.stats().disconnects >= 2,
        "stuck connection attempts were abandoned and retried"
    );
    assert!(h.flush(secs(20)));
    check_run(&h, &sent, &[("t", 1)], true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
}

#[test]
fn records_for_an_unreachable_cluster_fail_with_the_delivery_timeout() {
    let mut h = harness(cluster(1, &[("t", 1)], 26), |b| {
        b.delivery_timeout(Duration::from_millis(1500))
            .request_timeout(Duration::from_millis(1000))
    });
    h.cluster.stop_broker(1, h.now).unwrap();
    let sent = send_many(&mut h, &["t"], 0, 5, false);
    assert!(h.run_until(secs(10), |h| h.producer.buffered_records() == 0));
    check_run(&h, &sent, &[("t", 1)], true);
    for r in reports(&h).values() {
        // The broker's address was refused on every attempt: the timeout names that.
        match r {
            Err(ProduceError::DeliveryTimeout {
                possibly_persisted: false,
                last_connection_error: Some(e),
            }) => assert_eq!(e.kind, std::io::ErrorKind::ConnectionRefused, "{e}"),
            other => {
                panic!("expected a delivery timeout naming the refused connection, got {other:?}")
            }
        }
    }
}

/// Nothing listens at the bootstrap address (the mio driver's `unreachable` tests on real
/// sockets): the topic's metadata never arrives, so every record fails once `max_block` has
/// passed, not before, with the record back.
#[test]
fn records_for_a_bootstrap_nobody_listens_at_fail_after_max_block() {
    let max_block = Duration::from_secs(2);
    let cluster = cluster(1, &[("t", 1)], 27);
    let now = cluster.now();
    let config = Config::builder([("nobody-listens", 9092)])
        .request_timeout(Duration::from_secs(1))
        .delivery_timeout(Duration::from_secs(2))
        .max_block(max_block)
        .build()
        .unwrap();
    let mut h = Harness::new(Producer::new(config, now), cluster, now);
    let sent = send_many(&mut h, &["t"], 0, 20, false);
    let just_before = max_block - Duration::from_millis(1);
    assert!(!h.run_until(just_before, |h| !h.deliveries.is_empty()));
    assert!(h.run_until(secs(10), |h| h.producer.buffered_records() == 0));
    check_run(&h, &sent, &[("t", 1)], true);
    for (id, r) in reports(&h) {
        assert!(
            matches!(
                r,
                Err(ProduceError::DeliveryTimeout { .. } | ProduceError::UnknownTopic)
            ),
            "record {id}: {r:?}"
        );
    }
}

/// Records that travel in a batch are kept only as the batch's bytes (plus the opaque value):
/// a failure decodes them back out, and a split re-encodes them. Both must hand back exactly
/// what was sent, in every codec: key, value, every header, timestamp (or none), partition
/// (as chosen, or none).
#[test]
fn failed_and_split_batches_hand_back_records_exactly_every_compression() {
    fn rich_record(id: u64) -> Record {
        let mut r = Record::new("t", value_of(id));
        if id % 3 != 0 {
            r = r.with_key(format!("key-{id}"));
        }
        if id % 4 != 0 {
            r = r.with_timestamp(1_700_000_000_000 + (id as i64 % 7) * 1000 - 3000);
        }
        if id % 5 == 0 {
            r = r.with_partition(0);
        }
        for h in 0..(id % 3) {
            let value = (h % 2 == 0).then(|| bytes::Bytes::from(format!("v{h}-{id}")));
            r.headers
                .push(producer_core::Header::new(format!("h{h}"), value));
        }
        r
    }
    for (i, compression) in Compression::ALL.into_iter().enumerate() {
        // A batch answered MESSAGE_TOO_LARGE once is split and delivered: the logged records
        // equal the sent ones.
        let mut h = harness(cluster(1, &[("t", 1)], 40 + i as u64), |b| {
            b.linger(Duration::from_millis(50)).compression(compression)
        });
        h.cluster.inject_error(inject(
            ErrorCode::MESSAGE_TOO_LARGE,
            Some("t"),
            Some(0),
            1,
            false,
        ));
        let sent: Vec<Record> = (0..40).map(rich_record).collect();
        for (id, r) in sent.iter().enumerate() {
            h.send(r.clone(), id as u64).unwrap();
        }
        assert!(h.flush(secs(10)), "{compression:?}");
        assert!(reports(&h).values().all(|r| r.is_ok()), "{compression:?}");
        let log = h.cluster.log("t", 0);
        assert_eq!(log.len(), sent.len(), "{compression:?}");
        for (l, r) in log.iter().zip(&sent) {
            assert_eq!(l.key, r.key, "{compression:?}");
            assert_eq!(l.value, r.value, "{compression:?}");
            let headers: Vec<_> = r
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.clone()))
                .collect();
            assert_eq!(l.headers, headers, "{compression:?}");
            assert_eq!(l.timestamp, r.timestamp.unwrap_or(-1), "{compression:?}");
        }

        // A batch failed for good hands every record back as sent.
        let mut h = harness(cluster(1, &[("t", 1)], 50 + i as u64), |b| {
            b.linger(Duration::from_millis(50)).compression(compression)
        });
        h.cluster.inject_error(inject(
            ErrorCode::CORRUPT_MESSAGE,
            Some("t"),
            Some(0),
            1,
            false,
        ));
        for (id, r) in sent.iter().enumerate() {
            h.send(r.clone(), id as u64).unwrap();
        }
        assert!(h.flush(secs(10)), "{compression:?}");
        assert_eq!(h.deliveries.len(), sent.len());
        for d in &h.deliveries {
            let f = d
                .result
                .as_ref()
                .expect_err("CORRUPT_MESSAGE fails the batch");
            assert_eq!(f.record, sent[d.opaque as usize], "{compression:?}");
        }
        assert_eq!(
            h.producer.buffered_bytes(),
            0,
            "{compression:?}: space released"
        );
    }
}

/// Records sent before their topic's metadata arrives wait whole (every part of the record) in
/// a holding queue: they count that cost against `buffer_memory`, not only their encoded size,
/// so a fast sender at start-up gets `Full` instead of queueing several times the buffer. When
/// the metadata arrives the extra is released, and every record is delivered.
#[test]
fn records_held_for_metadata_count_their_whole_cost() {
    const BUFFER: usize = 1 << 20;
    let mut h = harness(cluster(1, &[("t", 3)], 61), |b| b.buffer_memory(BUFFER));
    // 100-byte values, no key: about 110 bytes encoded, 126 charged once in a batch.
    let value = bytes::Bytes::from(vec![b'v'; 100]);
    let mut accepted = 0u64;
    loop {
        match h.send(Record::new("t", value.clone()), accepted) {
            Ok(()) => accepted += 1,
            Err(e) => {
                assert_eq!(e.reason, SendErrorReason::Full);
                break;
            }
        }
    }
    let held_bytes = h.producer.buffered_bytes();
    assert!(held_bytes <= BUFFER, "{held_bytes} bytes held");
    // Each held record keeps its whole `Record` (128 bytes) besides its encoded size.
    assert!(
        accepted as usize * (110 + 128) <= BUFFER,
        "{accepted} records held in a {BUFFER}-byte buffer: counted below their real cost"
    );
    assert!(h.flush(secs(10)));
    assert_eq!(h.deliveries.len() as u64, accepted);
    assert!(h.deliveries.iter().all(|d| d.result.is_ok()));
    assert_eq!(h.producer.buffered_bytes(), 0);
}

/// The events a harness collected that say every broker is down.
fn all_brokers_down(h: &Harness<u64>) -> Vec<(producer_core::ConnectionError, bool)> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::AllBrokersDown {
                last_error,
                cluster_reached,
            } => Some((last_error.clone(), *cluster_reached)),
            _ => None,
        })
        .collect()
}

/// A bootstrap address where nothing listens: the first refused attempt is reported at once
/// as every broker being down, with the cluster never reached and the refusal named (once,
/// although the producer goes on retrying), and every record's delivery timeout names the
/// refused address instead of only saying that time ran out.
#[test]
fn a_refused_bootstrap_is_reported_as_all_brokers_down_and_named_by_every_timeout() {
    let cluster = cluster(1, &[("t", 1)], 28);
    let now = cluster.now();
    let config = Config::builder([("nobody-listens", 9092)])
        .request_timeout(Duration::from_secs(1))
        .delivery_timeout(Duration::from_secs(2))
        .max_block(Duration::from_secs(2))
        .reconnect_backoff(Duration::from_millis(50))
        .reconnect_backoff_max(Duration::from_millis(200))
        .build()
        .unwrap();
    let mut h = Harness::new(Producer::new(config, now), cluster, now);
    let sent = send_many(&mut h, &["t"], 0, 20, false);
    assert!(h.run_until(secs(1), |h| !all_brokers_down(h).is_empty()));
    assert!(
        h.deliveries.is_empty(),
        "the event comes before any record fails: an application can stop early on it"
    );
    assert!(h.run_until(secs(10), |h| h.producer.buffered_records() == 0));
    check_run(&h, &sent, &[("t", 1)], true);
    let down = all_brokers_down(&h);
    assert!(
        h.producer.stats().disconnects > 2,
        "the producer went on retrying"
    );
    assert_eq!(down.len(), 1, "one report per episode: {down:?}");
    let (cause, cluster_reached) = &down[0];
    assert!(!cluster_reached);
    assert_eq!(
        (
            cause.node_id,
            cause.address.as_str(),
            cause.kind,
            cause.established
        ),
        (
            -1,
            "nobody-listens:9092",
            std::io::ErrorKind::ConnectionRefused,
            false
        )
    );
    assert_eq!(
        cause.to_string(),
        "cannot connect to nobody-listens:9092 (bootstrap): connection refused (simulated: no broker listening)"
    );
    for (id, r) in reports(&h) {
        let Err(ProduceError::DeliveryTimeout {
            possibly_persisted: false,
            last_connection_error: Some(e),
        }) = &r
        else {
            panic!("record {id}: expected a timeout naming the refused connection, got {r:?}");
        };
        assert_eq!(**e, *cause, "record {id}");
        let shown = r.unwrap_err().to_string();
        assert!(
            shown.starts_with("delivery timeout expired; last connection error: cannot connect to nobody-listens:9092"),
            "{shown}"
        );
    }
}

/// A cluster that was reached and then went down: every broker being down is reported with
/// `cluster_reached` (the application should usually wait: brokers come back), the records
/// that time out name the leader's lost connection, and once the broker is back and a
/// connection is ready, a new outage is a new episode.
#[test]
fn all_brokers_down_after_the_cluster_was_reached_is_one_episode_per_outage() {
    let mut h = harness(cluster(1, &[("t", 1)], 29), |b| {
        b.delivery_timeout(Duration::from_millis(1500))
            .request_timeout(Duration::from_millis(1000))
            .reconnect_backoff(Duration::from_millis(50))
            .reconnect_backoff_max(Duration::from_millis(200))
    });
    let first = send_many(&mut h, &["t"], 0, 5, false);
    assert!(h.run_until(secs(5), |h| h.deliveries.len() == 5));
    assert!(
        all_brokers_down(&h).is_empty(),
        "a healthy cluster is not down"
    );
    h.cluster.stop_broker(1, h.now).unwrap();
    let second = send_many(&mut h, &["t"], 5, 5, false);
    assert!(h.run_until(secs(10), |h| h.producer.buffered_records() == 0));
    let down = all_brokers_down(&h);
    assert_eq!(down.len(), 1, "{down:?}");
    assert!(down[0].1, "the cluster had been reached");
    assert_eq!(down[0].0.kind, std::io::ErrorKind::ConnectionRefused);
    let r = reports(&h);
    for s in &second {
        match &r[&s.id] {
            Err(ProduceError::DeliveryTimeout {
                last_connection_error: Some(e),
                ..
            }) => assert_eq!(e.node_id, 1, "the leader's connection is named: {e}"),
            other => panic!("record {}: {other:?}", s.id),
        }
    }
    for s in &first {
        assert!(r[&s.id].is_ok());
    }
    // Back, reached again, down again: a second episode.
    h.cluster.start_broker(1).unwrap();
    let third = send_many(&mut h, &["t"], 10, 1, false);
    assert!(h.run_until(secs(10), |h| h.deliveries.len() == 11));
    assert!(reports(&h)[&third[0].id].is_ok());
    h.cluster.stop_broker(1, h.now).unwrap();
    send_many(&mut h, &["t"], 11, 1, false);
    assert!(h.run_until(secs(10), |h| h.producer.buffered_records() == 0));
    assert_eq!(all_brokers_down(&h).len(), 2);
}

/// What a driver charges a queued record against `buffer_memory`
/// (`Producer::buffer_charge`) is exactly what `send` charges the record when it takes it, for
/// every shape of record (varint lengths at each boundary, many headers, null fields): the
/// drivers' command queues and the core share one budget.
#[test]
fn buffer_charge_is_what_send_charges() {
    let mut h = harness(cluster(1, &[("t", 3)], 71), |b| {
        b.linger(Duration::from_secs(60))
            .max_request_size(1 << 20)
            // Every shape is sent at once, records of 1 MB among them: the queue-delay limit
            // (a few batches after one record's drain) would refuse some as `Full`.
            .queue_delay_target(Duration::ZERO)
    });
    // The topic's metadata first: records of a known topic are charged their batch entry.
    h.send(record(0, "t", false), 0).unwrap();
    assert!(h.flush(secs(10)));
    let many_headers = (0..70).fold(Record::new("t", "v"), |r, i| {
        r.with_header(format!("h{i}"), Some(bytes::Bytes::from(vec![1u8; i])))
    });
    let mut shapes = vec![
        Record::new("t", "v")
            .with_header("h", Some(bytes::Bytes::from_static(b"header value")))
            .with_header("null", None),
        many_headers,
        Record::new("t", bytes::Bytes::new()).with_partition(2),
        {
            let mut r = Record::new("t", "v").with_key("k");
            r.value = None;
            r
        },
    ];
    // Values and keys around each varint boundary (lengths 63/64, 8191/8192, ... after
    // zigzag encoding), and records whose length prefix crosses one.
    for len in [
        0, 1, 60, 63, 64, 65, 120, 8_185, 8_191, 8_192, 300_000, 1_048_000,
    ] {
        shapes.push(Record::new("t", vec![7u8; len]));
        shapes.push(Record::new("t", vec![7u8; len.min(9000)]).with_key(vec![1u8; len % 200]));
    }
    for (i, r) in shapes.into_iter().enumerate() {
        let charge = Producer::<u64>::buffer_charge(&r);
        let before = h.producer.buffered_bytes();
        h.send(r, i as u64 + 1).unwrap();
        assert_eq!(
            h.producer.buffered_bytes() - before,
            charge,
            "record shape {i}"
        );
    }
}

/// After a panic in a driver's (or the core's) own code, `fail_after_panic` ends the
/// producer: records already delivered stay delivered, every record it still holds fails with
/// the panic's message and comes back (not persisted: none was sent), the producer closes
/// without waiting for anything, and later sends are refused as after a fatal error.
#[test]
fn fail_after_panic_fails_every_record_and_closes() {
    let mut h = harness(cluster(1, &[("t", 3)], 72), |b| {
        b.linger(Duration::from_secs(60))
    });
    let delivered = send_many(&mut h, &["t"], 0, 10, true);
    assert!(h.flush(secs(10)));
    assert_eq!(h.deliveries.len(), delivered.len());
    let held: Vec<Record> = (10..30).map(|id| record(id, "t", id % 2 == 0)).collect();
    for (id, r) in (10..).zip(&held) {
        h.send(r.clone(), id).unwrap();
    }
    h.drain();
    assert_eq!(h.deliveries.len(), 10, "the others linger");

    h.producer.fail_after_panic("boom".into());
    h.drain();
    assert!(h.producer.is_closed());
    assert_eq!(h.producer.buffered_records(), 0);
    assert_eq!(h.deliveries.len(), 30, "every record has its report");
    for d in &h.deliveries[..10] {
        assert!(d.result.is_ok(), "delivered before the panic");
    }
    for d in &h.deliveries[10..] {
        let f = d
            .result
            .as_ref()
            .expect_err("held when the producer panicked");
        assert_eq!(
            f.error,
            ProduceError::Panicked {
                message: "boom".into(),
                possibly_persisted: false
            }
        );
        assert_eq!(f.record, held[(d.opaque - 10) as usize], "handed back");
    }
    assert!(h
        .events
        .iter()
        .any(|e| matches!(e, Event::Fatal(ProduceError::Panicked { .. }))));
    assert_eq!(h.events.last(), Some(&Event::Closed));
    let refused = h.send(record(99, "t", false), 99).expect_err("closed");
    assert!(
        matches!(refused.reason, SendErrorReason::Fatal(_)),
        "{:?}",
        refused.reason
    );
}
