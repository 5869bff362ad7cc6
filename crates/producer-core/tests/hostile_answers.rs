//! Answers a hostile or broken broker may send, as crafted bytes, against the real
//! [`Producer`] driven by a scripted cluster (`script/`): each is refused for what it breaks
//! (a topic's entry, or the whole answer and its connection), the producer goes on, and every
//! record is reported once, delivered when a good answer comes or failed when its time runs out.
//! Also what shrinks: brokers that leave the cluster, topics that go idle, and throttles.

mod script;

use std::sync::Arc;
use std::time::Duration;

use producer_core::limits::{MAX_BROKERS, MAX_THROTTLE};
use producer_core::protocol::ApiKey;
use producer_core::{Event, ProduceError, Violation};
use script::{v1, Script};

const METADATA: i16 = 3;
const PRODUCE: i16 = 0;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The refusals the producer reported: (topic, violation).
fn refusals(s: &Script) -> Vec<(Option<Arc<str>>, Violation)> {
    s.events
        .iter()
        .filter_map(|e| match e {
            Event::AnswerRefused {
                api: ApiKey::Metadata,
                topic,
                violation,
                ..
            } => Some((topic.clone(), *violation)),
            _ => None,
        })
        .collect()
}

/// The topics a Metadata request asked for.
fn asked_topics(req: &script::Request) -> Vec<String> {
    use kafka_protocol::protocol::Decodable;
    let r = kafka_protocol::messages::MetadataRequest::decode(&mut req.body.clone(), req.version)
        .unwrap();
    r.topics
        .unwrap_or_default()
        .into_iter()
        .filter_map(|t| t.name.map(|n| n.0.to_string()))
        .collect()
}

/// A first Metadata answer whose entry for `bad` lists `partitions` ((index, leader) pairs)
/// while `good` is fine: `bad`'s entry is refused with `expected`, `good`'s records are
/// delivered, `bad`'s wait; the next Metadata request (after the retry backoff) gets the
/// cluster's good answer, and `bad`'s records are delivered too. Each record once.
fn refused_then_recovered(partitions: &[(i32, i32)], expected: Violation) {
    let mut s = Script::new(1, &[("good", 1), ("bad", 1)], |b| b);
    let body = v1::body(
        &[(1, "b1", 9092)],
        &[("good", &[(0, 1)]), ("bad", partitions)],
    );
    assert!(
        body.len() < 200,
        "a small crafted body: {} bytes",
        body.len()
    );
    s.crafted_metadata.push_back(body);
    for i in 0..10 {
        s.send(if i % 2 == 0 { "good" } else { "bad" }, "k", i);
    }
    s.run_until(secs(1), |s| s.outcomes().0.len() == 5);
    assert_eq!(
        refusals(&s),
        vec![(Some(Arc::from("bad")), expected)],
        "the bad topic's entry, and only it, was refused"
    );
    assert_eq!(s.producer.stats().answers_refused, 1);
    let (ok, failed) = s.outcomes();
    assert_eq!(
        ok,
        vec![0, 2, 4, 6, 8],
        "the good topic's records are delivered"
    );
    assert!(failed.is_empty(), "no record fails for a refused answer");
    assert!(s.run_until(secs(5), |s| s.outcomes().0.len() == 10));
    let (mut ok, failed) = s.outcomes();
    ok.sort_unstable();
    assert_eq!(ok, (0..10).collect::<Vec<_>>());
    assert!(failed.is_empty());
    // Asked again after the retry backoff (100 ms), not at once.
    let asked: Vec<_> = s
        .requests
        .iter()
        .filter(|r| r.api_key == METADATA)
        .collect();
    assert!(asked.len() >= 2);
    assert!(asked[1].at - asked[0].at >= Duration::from_millis(100));
    // Nothing was failed or dropped: every record reported exactly once.
    assert_eq!(s.deliveries.len(), 10);
}

#[test]
fn a_partition_index_of_ten_million_is_refused_for_its_topic_and_the_producer_goes_on() {
    refused_then_recovered(
        &[(10_000_000, 1)],
        Violation::PartitionOutOfRange {
            index: 10_000_000,
            count: 1,
        },
    );
}

#[test]
fn a_partition_index_of_i32_max_is_refused_for_its_topic() {
    refused_then_recovered(
        &[(i32::MAX, 1)],
        Violation::PartitionOutOfRange {
            index: i32::MAX,
            count: 1,
        },
    );
}

#[test]
fn a_gap_in_the_partition_indexes_is_refused_for_its_topic() {
    refused_then_recovered(
        &[(0, 1), (2, 1)],
        Violation::PartitionOutOfRange { index: 2, count: 2 },
    );
}

#[test]
fn a_partition_listed_twice_is_refused_for_its_topic() {
    refused_then_recovered(&[(0, 1), (0, 1)], Violation::DuplicatePartition(0));
}

#[test]
fn a_negative_partition_index_is_refused_for_its_topic() {
    refused_then_recovered(
        &[(-1, 1)],
        Violation::PartitionOutOfRange {
            index: -1,
            count: 1,
        },
    );
}

#[test]
fn a_leader_below_minus_one_is_refused_for_its_topic() {
    refused_then_recovered(
        &[(0, -7)],
        Violation::InvalidLeader {
            partition: 0,
            leader: -7,
        },
    );
}

/// A topic whose every answer is refused: its records wait for their topic's metadata as long
/// as `max.block.ms` allows, then fail (none before); the good topic's records are delivered;
/// and the refused answers bring at most one Metadata request per retry backoff.
#[test]
fn a_topic_whose_answers_stay_refused_times_out_honestly() {
    let mut s = Script::new(1, &[("good", 1), ("bad", 1)], |b| b.max_block(secs(5)));
    for _ in 0..200 {
        s.crafted_metadata.push_back(v1::body(
            &[(1, "b1", 9092)],
            &[("good", &[(0, 1)]), ("bad", &[(0, 1), (5, 1)])],
        ));
    }
    for i in 0..10 {
        s.send(if i % 2 == 0 { "good" } else { "bad" }, "k", i);
    }
    s.run_for(Duration::from_millis(4900));
    let (ok, failed) = s.outcomes();
    assert_eq!(ok, vec![0, 2, 4, 6, 8]);
    assert!(failed.is_empty(), "nothing fails before max.block.ms");
    s.run_for(secs(1));
    let (ok, mut failed) = s.outcomes();
    assert_eq!(ok.len(), 5);
    failed.sort_unstable();
    assert_eq!(failed, vec![1, 3, 5, 7, 9]);
    for d in &s.deliveries {
        if let Err(f) = &d.result {
            assert!(
                matches!(f.error, ProduceError::UnknownTopic),
                "{:?}",
                f.error
            );
        }
    }
    // One request per retry backoff (100 ms) at most: no hot loop.
    let asked = s.count(METADATA);
    assert!(
        (20..=60).contains(&asked),
        "{asked} Metadata requests in 5.9 s"
    );
}

/// A topic known and in use, then an answer whose entry for it is refused: the topic keeps its
/// partitions and leaders, and its records go on being delivered.
#[test]
fn a_refused_entry_leaves_what_was_known_of_its_topic() {
    let mut s = Script::new(2, &[("t", 2)], |b| b.metadata_max_age(secs(1)));
    for i in 0..10 {
        s.send("t", &format!("k{i}"), i);
    }
    assert!(s.run_until(secs(2), |s| s.outcomes().0.len() == 10));
    s.crafted_metadata.push_back(v1::body(
        &[(1, "b1", 9092), (2, "b2", 9092)],
        &[("t", &[(0, 1), (1, 2), (1, 2)])],
    ));
    let before = s.count(METADATA);
    assert!(s.run_until(secs(3), |s| s.count(METADATA) > before));
    s.drain();
    assert_eq!(
        refusals(&s),
        vec![(Some(Arc::from("t")), Violation::DuplicatePartition(1))]
    );
    for i in 10..20 {
        s.send("t", &format!("k{i}"), i);
    }
    assert!(s.run_until(secs(2), |s| s.outcomes().0.len() == 20));
    assert!(s.outcomes().1.is_empty());
    let partitions: std::collections::BTreeSet<i32> =
        s.appended.iter().map(|a| a.partition).collect();
    assert_eq!(partitions, [0, 1].into());
}

/// A whole answer refused: a broker with a negative node id, or more brokers than
/// `MAX_BROKERS`. The connection it came on is closed, metadata is asked for again, and the
/// records are delivered once a good answer comes.
fn refused_whole(body: Vec<u8>, expected: Violation) {
    let mut s = Script::new(1, &[("t", 1)], |b| b);
    s.crafted_metadata.push_back(body);
    for i in 0..5 {
        s.send("t", "k", i);
    }
    assert!(s.run_until(secs(5), |s| s.outcomes().0.len() == 5));
    assert_eq!(refusals(&s), vec![(None, expected)]);
    // The first connection (the bootstrap one that carried the answer) was closed.
    let first = s.requests[0].conn;
    assert!(
        s.disconnected.contains(&first),
        "the answer's connection was closed"
    );
    assert!(s.count(METADATA) >= 2);
    assert!(s.outcomes().1.is_empty());
    assert_eq!(s.deliveries.len(), 5);
}

#[test]
fn a_broker_with_a_negative_node_id_refuses_the_whole_answer() {
    refused_whole(
        v1::body(&[(1, "b1", 9092), (-3, "evil", 9092)], &[("t", &[(0, 1)])]),
        Violation::NegativeNodeId(-3),
    );
}

#[test]
fn more_brokers_than_the_cap_refuse_the_whole_answer() {
    let hosts: Vec<(i32, String)> = (1..=MAX_BROKERS as i32 + 1)
        .map(|i| (i, format!("b{i}")))
        .collect();
    let brokers: Vec<(i32, &str, i32)> =
        hosts.iter().map(|(i, h)| (*i, h.as_str(), 9092)).collect();
    refused_whole(
        v1::body(&brokers, &[("t", &[(0, 1)])]),
        Violation::TooManyBrokers {
            count: MAX_BROKERS + 1,
            max: MAX_BROKERS,
        },
    );
}

/// A broker the cluster no longer lists is dropped: its connection is closed, the batch in
/// flight on it goes to the partition's new leader (once: reported once), its slot is gone
/// from the metrics; when it comes back it gets a new connection.
#[test]
fn a_broker_that_leaves_the_metadata_is_dropped_and_its_connection_closed() {
    let mut s = Script::new(3, &[("t", 3)], |b| b.metadata_max_age(secs(1)));
    for i in 0..30 {
        s.send("t", &format!("k{i}"), i);
    }
    assert!(s.run_until(secs(2), |s| s.outcomes().0.len() == 30));
    let conn3 = s
        .requests
        .iter()
        .find(|r| r.node_id == 3)
        .map(|r| r.conn)
        .expect("a connection to node 3");
    let m = s.producer.metrics();
    assert!(m.brokers.iter().any(|b| b.node_id == 3));
    // Node 3 leaves: partition 2 moves to node 1 (p mod 2 brokers = 0: node 1).
    s.brokers.retain(|b| b.0 != 3);
    assert!(s.run_until(secs(3), |s| s.disconnected.contains(&conn3)));
    assert_eq!(s.producer.stats().brokers_dropped, 1);
    let m = s.producer.metrics();
    assert!(m.brokers.iter().all(|b| b.node_id != 3), "{:?}", m.brokers);
    for i in 30..60 {
        s.send("t", &format!("k{i}"), i);
    }
    assert!(s.run_until(secs(2), |s| s.outcomes().0.len() == 60));
    // Node 3 comes back: a new connection (never the old handle), and it leads partition 2
    // again.
    s.brokers.push((3, "b3".into(), 9092));
    let asked = s.count(METADATA);
    assert!(s.run_until(secs(3), |s| s.count(METADATA) > asked));
    s.drain();
    for i in 60..90 {
        s.send("t", &format!("k{i}"), i);
    }
    assert!(s.run_until(secs(2), |s| s.outcomes().0.len() == 90));
    let new3: Vec<_> = s
        .requests
        .iter()
        .filter(|r| r.node_id == 3 && r.conn != conn3)
        .map(|r| r.conn)
        .collect();
    assert!(!new3.is_empty(), "node 3 reconnected under a new handle");
    assert!(s
        .requests
        .iter()
        .any(|r| r.conn == new3[0] && r.api_key == PRODUCE));
    assert!(s.outcomes().1.is_empty());
    assert_eq!(s.deliveries.len(), 90);
}

/// The Produce request in flight on a broker that leaves: the batch goes back to its partition
/// as for a lost connection and is delivered by the new leader, reported once.
#[test]
fn a_request_in_flight_on_a_dropped_broker_goes_back_to_its_partition() {
    let mut s = Script::new(2, &[("t", 2)], |b| b.metadata_max_age(secs(1)));
    s.send("t", "warm-up", 0);
    assert!(s.run_until(secs(2), |s| s.outcomes().0.len() == 1));
    // Node 2 leads partition 1; its next Produce gets no answer, and it leaves meanwhile.
    s.hold_produce_for(2);
    for i in 1..21 {
        s.send("t", &format!("k{i}"), i);
    }
    s.run_for(Duration::from_millis(10)); // past linger.ms
    assert!(!s.held.is_empty(), "a Produce request held on node 2");
    s.brokers.retain(|b| b.0 != 2);
    assert!(s.run_until(secs(5), |s| s.outcomes().0.len() == 21));
    assert_eq!(s.producer.stats().brokers_dropped, 1);
    assert!(s.outcomes().1.is_empty());
    assert_eq!(s.deliveries.len(), 21, "every record reported once");
}

/// A topic nothing was sent to for `metadata.max.idle.ms` (virtual time) is forgotten: the
/// Metadata requests after that no longer name it. A record sent to it later is handled as for
/// a new topic (its metadata asked for, then delivered), and with idempotence its partition
/// starts under a new epoch, which the broker accepts from sequence 0.
#[test]
fn an_idle_topic_is_forgotten_after_metadata_max_idle_and_comes_back_as_new() {
    let mut s = Script::new(1, &[("idle", 1), ("busy", 1)], |b| {
        b.metadata_max_idle(secs(60)).metadata_max_age(secs(10))
    });
    s.send("idle", "k", 0);
    s.send("busy", "k", 1);
    assert!(s.run_until(secs(1), |s| s.outcomes().0.len() == 2));
    let mut n = 2;
    for _ in 0..20 {
        s.run_for(secs(5));
        s.send("busy", "k", n);
        n += 1;
    }
    assert!(s.run_until(secs(1), |s| s.outcomes().0.len() == n as usize));
    assert_eq!(s.producer.stats().topics_forgotten, 1);
    let last = s
        .requests
        .iter()
        .rev()
        .find(|r| r.api_key == METADATA)
        .unwrap();
    assert_eq!(asked_topics(last), vec!["busy".to_string()]);
    // The idle topic's earlier metadata requests named it.
    let first = s.requests.iter().find(|r| r.api_key == METADATA).unwrap();
    assert!(asked_topics(first).contains(&"idle".to_string()));
    // Back: asked for again, delivered; the broker's sequence check passes.
    s.send("idle", "k", n);
    assert!(s.run_until(secs(2), |s| s.outcomes().0.len() == n as usize + 1));
    let again = s
        .requests
        .iter()
        .rev()
        .find(|r| r.api_key == METADATA)
        .unwrap();
    assert!(asked_topics(again).contains(&"idle".to_string()));
    let idle: Vec<_> = s.appended.iter().filter(|a| a.topic == "idle").collect();
    assert_eq!(idle.len(), 2);
    assert!(idle.iter().all(|a| a.error == 0), "{idle:?}");
    assert_eq!(idle[1].base_sequence, 0);
    assert!(idle[1].epoch > idle[0].epoch, "{idle:?}");
    assert!(s.outcomes().1.is_empty());
}

/// Without idempotence a forgotten topic comes back the same way (no epochs involved).
#[test]
fn an_idle_topic_of_a_plain_producer_comes_back_as_new() {
    let mut s = Script::new(1, &[("idle", 2)], |b| {
        b.enable_idempotence(false)
            .metadata_max_idle(secs(30))
            .metadata_max_age(secs(10))
    });
    s.send("idle", "k", 0);
    assert!(s.run_until(secs(1), |s| s.outcomes().0.len() == 1));
    s.run_for(secs(45));
    assert_eq!(s.producer.stats().topics_forgotten, 1);
    for i in 1..5 {
        s.send("idle", &format!("k{i}"), i);
    }
    assert!(s.run_until(secs(2), |s| s.outcomes().0.len() == 5));
    assert!(s.outcomes().1.is_empty());
}

/// A throttle of `i32::MAX` ms (24 days) in a Produce answer holds the broker back
/// `MAX_THROTTLE` at most: the next record is sent once that passes and is delivered within
/// its delivery timeout.
#[test]
fn a_throttle_of_i32_max_ms_is_capped() {
    let mut s = Script::new(1, &[("t", 1)], |b| b);
    s.produce_throttle.push_back(i32::MAX);
    s.send("t", "k", 0);
    assert!(s.run_until(secs(1), |s| s.outcomes().0.len() == 1));
    let answered = s.now;
    s.send("t", "k", 1);
    assert!(s.run_until(secs(100), |s| s.outcomes().0.len() == 2));
    let produce: Vec<_> = s.requests.iter().filter(|r| r.api_key == PRODUCE).collect();
    assert_eq!(produce.len(), 2);
    let waited = produce[1].at - answered;
    assert!(
        waited >= MAX_THROTTLE && waited < MAX_THROTTLE + secs(1),
        "{waited:?}"
    );
}
