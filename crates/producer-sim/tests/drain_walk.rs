//! How a Produce request picks its batches, against the simulated cluster's broker rules: it
//! walks the partitions its broker leads that have something to send (not every partition the
//! broker leads: issue 22, flat cost as partitions grow), round robin, so that when
//! `max_request_size` leaves partitions over, the next request starts with them and no
//! partition sends a second batch before every waiting partition sent its first; and a
//! partition whose leader moves away and back while its batches wait is in one request at most
//! once, every record delivered exactly once and in order.

mod support;

use std::collections::{HashMap, HashSet};

use producer_sim::drive::Harness;
use support::run::*;

/// API key of Produce.
const PRODUCE: i16 = 0;

/// The Produce requests the cluster received, each as the list of its (topic, partition).
fn produce_requests(h: &Harness<u64>) -> Vec<(i32, Vec<(String, i32)>)> {
    h.cluster
        .request_log()
        .iter()
        .filter(|r| r.api_key == PRODUCE)
        .map(|r| {
            let parts = r
                .produce
                .iter()
                .map(|p| (p.topic.clone(), p.partition))
                .collect();
            (r.broker_id, parts)
        })
        .collect()
}

/// 60 partitions on 3 brokers, each given several batches' worth of records before anything is
/// sent (a long linger, batches of a few records), requests that hold a few batches: on each
/// broker, every partition sends its first batch before any sends its second, its second
/// before any sends its third, and so on (the walk starts where the last request stopped).
#[test]
fn left_over_partitions_start_the_next_request() {
    const PARTITIONS: i32 = 60;
    let topics = [("wide", PARTITIONS)];
    let mut h = harness(cluster(3, &topics, 11), |b| {
        b.enable_idempotence(false)
            .linger(secs(3600))
            .batch_size(300)
            .max_request_size(1200)
            .max_in_flight(1)
    });
    let mut sent = Vec::new();
    let mut id = 0u64;
    for _round in 0..6 {
        for p in 0..PARTITIONS {
            let r = record(id, "wide", false).with_partition(p);
            h.send(r, id).expect("send");
            sent.push(Sent {
                id,
                topic: "wide".to_string(),
                key: None,
            });
            id += 1;
        }
    }
    h.producer.flush(h.now);
    let done = h.run_until(secs(60), |h| reports(h).len() == sent.len());
    assert!(done, "every record reported");
    check_run(&h, &sent, &topics, false);

    let requests = produce_requests(&h);
    let most = requests.iter().map(|(_, r)| r.len()).max().unwrap_or(0);
    assert!(
        (2..PARTITIONS as usize / 3).contains(&most),
        "requests are cut by max_request_size: at most {most} batches in one"
    );
    let mut by_broker: HashMap<i32, Vec<i32>> = HashMap::new();
    for (broker, parts) in &requests {
        let seq = by_broker.entry(*broker).or_default();
        for (_, p) in parts {
            seq.push(*p);
        }
    }
    for (broker, seq) in by_broker {
        let mut total: HashMap<i32, usize> = HashMap::new();
        for &p in &seq {
            *total.entry(p).or_default() += 1;
        }
        assert!(
            total.values().any(|&n| n >= 2),
            "broker {broker}: partitions with batches to spare: {seq:?}"
        );
        // When a partition sends its batch number k (from 0), every partition with at least
        // k batches has sent k of them.
        let mut seen: HashMap<i32, usize> = HashMap::new();
        for (at, &p) in seq.iter().enumerate() {
            let k = seen.get(&p).copied().unwrap_or(0);
            for (&q, &n) in &total {
                let sent = seen.get(&q).copied().unwrap_or(0);
                assert!(
                    sent >= k.min(n),
                    "broker {broker}: partition {p} sent batch {k} (request position {at}) \
                     before partition {q} sent {} of its {n}: {seq:?}",
                    k.min(n)
                );
            }
            *seen.entry(p).or_default() += 1;
        }
    }
}

/// Leaders move away and back (twice) while batches wait and flow: each Produce request
/// carries a partition at most once, and every record is delivered exactly once, in order.
#[test]
fn a_partition_moved_away_and_back_is_in_a_request_once() {
    let topics = [("moving", 12)];
    let mut h = harness(cluster(3, &topics, 5), |b| {
        b.enable_idempotence(true)
            .linger(std::time::Duration::from_millis(20))
            .metadata_max_age(std::time::Duration::from_millis(50))
    });
    let mut sent = Vec::new();
    let mut id = 0u64;
    for step in 0..40u64 {
        for _ in 0..24 {
            h.send(record(id, "moving", true), id).expect("send");
            sent.push(Sent {
                id,
                topic: "moving".to_string(),
                key: record(id, "moving", true).key,
            });
            id += 1;
        }
        // Every partition of broker 1 goes to broker 2; a third of broker 2's come back two
        // steps later.
        for p in 0..12 {
            let leader = h.cluster.leader("moving", p).map(|l| l.0);
            match (step % 4, leader) {
                (0, Some(1)) => h.cluster.move_leader("moving", p, 2).unwrap(),
                (2, Some(2)) if p % 3 == 0 => h.cluster.move_leader("moving", p, 1).unwrap(),
                _ => {}
            }
        }
        h.run_for(std::time::Duration::from_millis(15));
    }
    h.producer.flush(h.now);
    let done = h.run_until(secs(120), |h| reports(h).len() == sent.len());
    assert!(done, "every record reported");
    check_run(&h, &sent, &topics, true);
    let requests = produce_requests(&h);
    assert!(
        requests.len() > 10,
        "records flowed: {} requests",
        requests.len()
    );
    for (broker, parts) in requests {
        let distinct: HashSet<&(String, i32)> = parts.iter().collect();
        assert_eq!(
            distinct.len(),
            parts.len(),
            "broker {broker}: a partition twice in one request: {parts:?}"
        );
    }
    let ok = reports(&h).values().filter(|r| r.is_ok()).count();
    assert_eq!(ok, sent.len(), "every record delivered");
}
