//! Produce v13 names topics by id (KIP-516): the producer uses it when the broker offers it and
//! every topic of a request has an id, falls back to v12 otherwise, and a topic deleted and
//! created again under its name (a new id) is followed: batches still to be written go to the
//! new incarnation, as Java's producer does (its `Sender` names each request's topics by the
//! ids current when the request is built, kafka-clients 4.1.1 `Sender.sendProduceRequest` /
//! `topicIdsForBatches`), after the broker answered the old id with `UNKNOWN_TOPIC_ID`.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use producer_core::ErrorCode;
use producer_sim::{SimConfig, API_API_VERSIONS, API_INIT_PRODUCER_ID, API_METADATA, API_PRODUCE};
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("orders", 3)];

/// The Produce versions the brokers were asked at, each once.
fn produce_versions(h: &producer_sim::drive::Harness<u64>) -> BTreeSet<i16> {
    h.cluster
        .request_log()
        .iter()
        .filter(|r| r.api_key == API_PRODUCE)
        .map(|r| r.api_version)
        .collect()
}

#[test]
fn produce_v13_is_used_when_offered() {
    let mut h = harness(cluster(2, TOPICS, 13), |b| b);
    let sent = send_many(&mut h, &["orders"], 0, 300, false);
    assert!(h.flush(secs(30)));
    check_run(&h, &sent, TOPICS, true);
    assert_eq!(produce_versions(&h), BTreeSet::from([13]));
}

#[test]
fn without_topic_ids_in_metadata_produce_stays_at_v12() {
    // Metadata v9 carries no topic ids: Produce v13 could not name the topic.
    let mut cfg = SimConfig::with_brokers(2, 14);
    for b in &mut cfg.brokers {
        b.api_versions = Some(vec![
            (API_PRODUCE, 3, 13),
            (API_METADATA, 0, 9),
            (API_API_VERSIONS, 0, 4),
            (API_INIT_PRODUCER_ID, 0, 5),
        ]);
    }
    let mut h = harness(cluster_with(cfg, TOPICS), |b| b);
    let sent = send_many(&mut h, &["orders"], 0, 300, false);
    assert!(h.flush(secs(30)));
    check_run(&h, &sent, TOPICS, true);
    assert_eq!(produce_versions(&h), BTreeSet::from([12]));
}

#[test]
fn a_topic_created_again_gets_the_records_sent_after() {
    let mut h = harness(cluster(2, TOPICS, 15), |b| b);
    let first = send_many(&mut h, &["orders"], 0, 200, false);
    assert!(h.flush(secs(30)));
    check_run(&h, &first, TOPICS, true);
    let old_id = h.cluster.topic_id("orders").unwrap();

    // Deleted and created again while the producer still knows the old id.
    assert_eq!(h.cluster.delete_topic("orders").unwrap(), 200);
    h.cluster.create_topic("orders", 3).unwrap();
    assert_ne!(h.cluster.topic_id("orders").unwrap(), old_id);
    let before = h.cluster.request_log().len();
    let second = send_many(&mut h, &["orders"], 200, 300, false);
    assert!(h.flush(secs(30)));

    // The old id was refused and nothing was written under it.
    let unknown_id = h.cluster.request_log()[before..]
        .iter()
        .flat_map(|r| &r.produce)
        .filter(|p| p.error_code == ErrorCode::UNKNOWN_TOPIC_ID.0)
        .inspect(|p| assert!(!p.appended))
        .count();
    assert!(unknown_id > 0, "the old topic id was never refused");
    assert_eq!(h.producer.stats().topics_recreated, 1);

    // Every record sent after the recreation is in the new incarnation exactly once, where its
    // report says, and none sent before is.
    let reports = reports(&h);
    let mut found = BTreeMap::new();
    for p in 0..3 {
        for r in h.cluster.log("orders", p) {
            let id = id_of(r.value.as_deref().unwrap());
            assert!(
                id >= 200,
                "record {id} of the old incarnation is in the new one"
            );
            assert!(
                found.insert(id, (p, r.offset)).is_none(),
                "record {id} twice"
            );
        }
    }
    for s in &second {
        let at = found.get(&s.id).copied();
        assert_eq!(reports[&s.id].as_ref().ok().copied(), at, "record {}", s.id);
    }
    assert_eq!(found.len(), second.len());
    assert_eq!(produce_versions(&h), BTreeSet::from([13]));
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );
}

/// Records buffered and in flight while the topic is deleted, more sent while it is gone, the
/// topic created again: every record is delivered, each to one incarnation.
#[test]
fn a_topic_deleted_and_created_again_while_producing() {
    let mut h = harness(cluster(3, TOPICS, 16), |b| b);
    let mut sent = Vec::new();
    let mut old_log = BTreeMap::new();
    for chunk in 0..30u64 {
        sent.extend(send_many(
            &mut h,
            &["orders"],
            chunk * 20,
            20,
            chunk % 2 == 0,
        ));
        h.run_for(std::time::Duration::from_millis(7));
        if chunk == 8 {
            for p in 0..3 {
                for r in h.cluster.log("orders", p) {
                    old_log.insert(id_of(r.value.as_deref().unwrap()), (p, r.offset));
                }
            }
            h.cluster.delete_topic("orders").unwrap();
        }
        if chunk == 10 {
            // Gone for a while: the producer's refreshes find no such topic.
            h.run_for(secs(3));
        }
        if chunk == 14 {
            h.cluster.create_topic("orders", 3).unwrap();
        }
    }
    assert!(h.flush(secs(120)), "not every record was reported");
    let reports = reports(&h);
    let mut new_log = BTreeMap::new();
    for p in 0..3 {
        for r in h.cluster.log("orders", p) {
            let id = id_of(r.value.as_deref().unwrap());
            assert!(
                new_log.insert(id, (p, r.offset)).is_none(),
                "record {id} twice"
            );
        }
    }
    for s in &sent {
        match &reports[&s.id] {
            Ok(at) => assert!(
                new_log.get(&s.id) == Some(at)
                    || (old_log.get(&s.id) == Some(at) && !new_log.contains_key(&s.id)),
                "record {} reported at {at:?}: new {:?} old {:?}",
                s.id,
                new_log.get(&s.id),
                old_log.get(&s.id)
            ),
            Err(e) => panic!("record {} failed: {e:?}", s.id),
        }
    }
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );
}
