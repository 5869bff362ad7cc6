//! Tables that grow from the network shrink again, against the simulated cluster's broker
//! rules: brokers that leave the cluster (stopped: Metadata no longer lists them) are dropped
//! and come back under new connections when they rejoin, topics nothing was sent to for
//! `metadata.max.idle.ms` are forgotten and come back as new, and through all of it every
//! record is reported exactly once, in order per partition, never written twice (the
//! idempotent producer's sequences survive a forgotten topic).

mod support;

use producer_core::Event;
use producer_sim::drive::Harness;
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("busy", 8), ("other", 4), ("idle", 3)];

/// Moves every partition `from` leads to the next broker in `to`, round-robin.
fn move_leaders_off(h: &mut Harness<u64>, from: i32, to: &[i32]) {
    let mut k = 0;
    for &(t, n) in TOPICS {
        for p in 0..n {
            if h.cluster.leader(t, p).map(|l| l.0) == Some(from) {
                h.cluster.move_leader(t, p, to[k % to.len()]).unwrap();
                k += 1;
            }
        }
    }
}

fn live_nodes(h: &Harness<u64>) -> Vec<i32> {
    let mut nodes: Vec<i32> = h
        .producer
        .metrics()
        .brokers
        .iter()
        .map(|b| b.node_id)
        .filter(|&n| n >= 0)
        .collect();
    nodes.sort_unstable();
    nodes
}

/// One run: broker 4 is down at the start and joins at 5 s (taking two partitions), broker 2
/// leaves at 15 s (its partitions moved to others first, its connections reset) and rejoins
/// at 25 s, and the topic `idle` gets records only at 0 s and 40 s (forgotten in between).
fn churn(seed: u64, idempotent: bool) {
    let mut h = harness(cluster(4, TOPICS, seed), |b| {
        b.enable_idempotence(idempotent)
            .metadata_max_age(secs(1))
            .metadata_max_idle(secs(15))
    });
    let start = h.now;
    h.cluster.stop_broker(4, start).unwrap();
    move_leaders_off(&mut h, 4, &[1, 2, 3]);
    let mut sent = send_many(&mut h, &["busy", "other", "idle"], 0, 30, true);
    let mut next = 30;
    for second in 1..=60u64 {
        h.run_for(secs(1));
        match second {
            5 => {
                h.cluster.start_broker(4).unwrap();
                h.cluster.move_leader("busy", 3, 4).unwrap();
                h.cluster.move_leader("other", 1, 4).unwrap();
            }
            15 => {
                move_leaders_off(&mut h, 2, &[1, 3, 4]);
                let now = h.now;
                h.cluster.stop_broker(2, now).unwrap();
            }
            25 => {
                h.cluster.start_broker(2).unwrap();
                h.cluster.move_leader("busy", 0, 2).unwrap();
            }
            _ => {}
        }
        if second == 12 {
            assert!(live_nodes(&h).contains(&4), "broker 4 joined");
        }
        if second == 20 {
            assert!(!live_nodes(&h).contains(&2), "broker 2 was dropped");
            assert_eq!(h.producer.stats().topics_forgotten, 1, "idle was forgotten");
        }
        if second == 30 {
            assert!(live_nodes(&h).contains(&2), "broker 2 rejoined");
        }
        let topics: &[&str] = if second == 40 {
            &["busy", "other", "idle"]
        } else {
            &["busy", "other"]
        };
        sent.extend(send_many(&mut h, topics, next, 12, true));
        next += 12;
    }
    assert!(h.flush(secs(60)), "every record reported");
    check_run(&h, &sent, TOPICS, idempotent);
    let stats = h.producer.stats();
    assert!(stats.brokers_dropped >= 1, "{stats:?}");
    assert!(stats.topics_forgotten >= 1, "{stats:?}");
    assert_eq!(stats.records_failed, 0, "{stats:?}");
    assert_eq!(stats.records_delivered, sent.len() as u64);
    assert_eq!(live_nodes(&h), vec![1, 2, 3, 4]);
    assert!(
        !h.events
            .iter()
            .any(|e| matches!(e, Event::AnswerRefused { .. })),
        "the simulated cluster's answers are all good"
    );
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );
    // The forgotten topic's partitions came back under a new epoch: the broker never saw a
    // sequence start over under an old one, so nothing had to be reset.
    let resets: Vec<_> = h
        .events
        .iter()
        .filter(|e| matches!(e, Event::SequenceReset { .. }))
        .collect();
    assert!(resets.is_empty(), "{resets:?}");
}

#[test]
fn brokers_leave_and_join_and_topics_go_idle_with_every_record_reported_once() {
    for seed in [301, 302, 303] {
        churn(seed, true);
    }
}

#[test]
fn the_same_churn_without_idempotence_reports_every_record_once() {
    churn(304, false);
}
