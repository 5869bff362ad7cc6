//! What an idle producer costs per `poll_output` + `poll_timeout` call, with few and with many
//! partitions: both must be O(1) (or O(log n)) when nothing is due, so the two figures should be
//! about equal.
//!
//! `cargo bench -p producer-sim --bench idle`

use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use producer_core::{Config, Producer, Record};
use producer_sim::drive::Harness;
use producer_sim::{SimCluster, SimConfig};

fn settled(partitions: i32) -> Harness<u32> {
    let mut cluster = SimCluster::new(SimConfig::with_brokers(3, 1), std::time::Instant::now());
    cluster.create_topic("t", partitions).expect("topic");
    let now = cluster.now();
    let config = Config::builder(cluster.bootstrap())
        .build()
        .expect("config");
    let mut h = Harness::new(Producer::new(config, now), cluster, now);
    for p in 0..partitions {
        h.send(Record::new("t", "v").with_partition(p), p as u32)
            .expect("send");
    }
    assert!(h.flush(Duration::from_secs(60)), "all delivered");
    assert_eq!(h.deliveries.len(), partitions as usize);
    h
}

fn idle(c: &mut Criterion) {
    let mut group = c.benchmark_group("idle_poll");
    for partitions in [12, 6000] {
        let mut h = settled(partitions);
        group.bench_function(format!("{partitions}_partitions"), |b| {
            b.iter(|| {
                assert!(h.producer.poll_output().is_none());
                black_box(h.producer.poll_timeout())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, idle);
criterion_main!(benches);
