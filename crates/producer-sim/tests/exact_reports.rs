//! Reports say exactly what happened when the producer fails for good, against the simulated
//! cluster's broker rules: a fatal answer (CLUSTER_AUTHORIZATION_FAILED) for one partition of
//! a Produce response while the same response acknowledges others, with requests in flight on
//! the other brokers. Each record's report is checked against the brokers' logs: a record
//! reported delivered is in the log at its offset, one reported certainly not written
//! (`possibly_persisted = false`) is in no log, and every record has exactly one report.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use producer_core::{Config, ErrorCode, Event, Producer, Record};
use producer_sim::{drive::Harness, InjectedError, SimCluster, SimConfig, API_PRODUCE};

fn run(seed: u64) {
    let t0 = Instant::now();
    let mut sim = SimCluster::new(SimConfig::with_brokers(3, seed), t0);
    sim.create_topic("a", 6).unwrap();
    sim.create_topic("b", 6).unwrap();
    let config = Config::builder(sim.bootstrap())
        .set("linger.ms", "2")
        .unwrap()
        .build()
        .unwrap();
    let mut h = Harness::new(Producer::new(config, t0), sim, t0);
    let n = 3000u32;
    let mut sent = 0u32;
    // Records stream in; after a third of them, one partition of "b" is refused fatally.
    while sent < n {
        for _ in 0..50 {
            let topic = if sent % 2 == 0 { "a" } else { "b" };
            let record = Record::new(topic, format!("{sent}")).with_key(format!("k{}", sent % 97));
            if h.send(record, sent).is_err() {
                // Refused at send after the producer failed: reported by the error itself.
                h.deliveries.push(producer_core::Delivery::failed(
                    sent,
                    producer_core::ProduceError::Closed,
                    Record::new("b", "refused"),
                ));
            }
            sent += 1;
        }
        if sent == n / 3 {
            h.cluster.inject_error(InjectedError {
                api_key: API_PRODUCE,
                topic: Some("b".into()),
                partition: Some(0),
                error_code: ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0,
                count: 1,
                persist: false,
            });
        }
        h.run_for(Duration::from_millis(3));
    }
    assert!(
        h.run_until(Duration::from_secs(60), |h| h.producer.buffered_records()
            == 0),
        "every record reported (seed {seed})"
    );
    assert!(
        h.events.iter().any(|e| matches!(e, Event::Fatal(_))),
        "the producer failed for good (seed {seed})"
    );

    // Every record's value -> where it is in the logs.
    let mut logged: HashMap<u32, Vec<(String, i32, i64)>> = HashMap::new();
    for topic in ["a", "b"] {
        for p in 0..6 {
            for r in h.cluster.log(topic, p) {
                let v: u32 = std::str::from_utf8(r.value.as_deref().unwrap())
                    .unwrap()
                    .parse()
                    .unwrap();
                logged
                    .entry(v)
                    .or_default()
                    .push((topic.to_string(), p, r.offset));
            }
        }
    }
    let mut reports: HashMap<u32, usize> = HashMap::new();
    let (mut delivered, mut failed_written, mut failed_absent) = (0, 0, 0);
    for d in &h.deliveries {
        *reports.entry(d.opaque).or_default() += 1;
        let copies = logged.get(&d.opaque).map_or(0, Vec::len);
        assert!(copies <= 1, "record {} written {copies} times", d.opaque);
        match &d.result {
            Ok(m) => {
                let at = &logged[&d.opaque][0];
                assert_eq!(
                    (&*m.topic, m.partition, m.offset),
                    (at.0.as_str(), at.1, at.2),
                    "record {} reported delivered elsewhere than the log has it",
                    d.opaque
                );
                delivered += 1;
            }
            Err(f) if f.error.possibly_persisted() => {
                failed_written += usize::from(copies == 1);
            }
            Err(f) => {
                assert_eq!(
                    copies, 0,
                    "record {} reported certainly not written ({:?}) is in the log at {:?}",
                    d.opaque, f.error, logged[&d.opaque]
                );
                failed_absent += 1;
            }
        }
    }
    for i in 0..n {
        assert_eq!(reports.get(&i), Some(&1), "record {i}: reports");
    }
    // Nothing the brokers logged was reported certainly not written, and every logged record
    // was reported delivered or possibly written.
    let logged_total: usize = logged.values().map(Vec::len).sum();
    assert_eq!(logged_total, delivered + failed_written, "seed {seed}");
    assert!(
        delivered > 0 && failed_absent > 0,
        "seed {seed}: {delivered} / {failed_absent}"
    );
}

#[test]
fn a_fatal_partition_answer_leaves_every_other_report_exact() {
    for seed in 1..=8 {
        run(seed);
    }
}
