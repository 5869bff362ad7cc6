//! The adaptive sticky partitioner (KIP-794) against the simulated cluster: records without a
//! key under a steady load, one broker slow or black-holed. Counts of records per partition,
//! in virtual time (no sleeps, no wall clock).
//!
//! The cluster: 3 brokers, topic `spread` with 6 partitions, partition `p` led by broker
//! `p % 3 + 1`, so broker 1 leads partitions 0 and 3. Batches of 1024 bytes hold 8 records of
//! 100 bytes, so a partition keeps 16 records (two batches) before the next is chosen.

mod support;

use std::time::{Duration, Instant};

use producer_core::{ConfigBuilder, Record};
use producer_sim::drive::Harness;
use support::run::*;

const TOPIC: &str = "spread";
const PARTITIONS: usize = 6;
/// The partitions broker 1 leads.
const BROKER_1: [usize; 2] = [0, 3];
/// Records sent per millisecond of virtual time (about 600 batches a second).
const PER_MS: u64 = 10;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn producer(seed: u64, tune: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Harness<u64> {
    // A steady load whatever a slow or black-holed broker takes: without the queue-delay
    // limit, which would push back once its records queue (tests/queue_delay.rs).
    harness(cluster(3, &[(TOPIC, PARTITIONS as i32)], seed), |b| {
        tune(b.batch_size(1024).queue_delay_target(Duration::ZERO))
    })
}

/// Sends `PER_MS` null-key records of 100 bytes every millisecond for `duration`, noting
/// each record's send time (indexed by its id, the opaque value).
fn steady_load(h: &mut Harness<u64>, sent_at: &mut Vec<Instant>, duration: Duration) {
    let end = h.now + duration;
    while h.now < end {
        for _ in 0..PER_MS {
            let id = sent_at.len() as u64;
            h.send(Record::new(TOPIC, vec![b'x'; 100]), id)
                .unwrap_or_else(|e| panic!("send {id} refused: {:?}", e.reason));
            sent_at.push(h.now);
        }
        h.run_for(ms(1));
    }
}

/// Records per partition, from the delivery reports (every record must have succeeded).
fn per_partition(h: &Harness<u64>, from: Instant, sent_at: &[Instant]) -> [usize; PARTITIONS] {
    let mut counts = [0; PARTITIONS];
    for d in &h.deliveries {
        let m = d.result.as_ref().expect("every record delivered");
        if sent_at[d.opaque as usize] >= from {
            counts[m.partition as usize] += 1;
        }
    }
    counts
}

/// Broker 1 answers every response 300 ms late: it takes about 5 requests (10 batches) per
/// 300 ms while the load is about 600 batches a second.
fn slow_broker_run(adaptive: bool) -> [usize; PARTITIONS] {
    let mut h = producer(31, |b| b.adaptive_partitioning(adaptive));
    let mut sent_at = Vec::new();
    // Warm up at full speed (metadata, producer id, a connection to every broker), so the
    // slowness meets a producer that is already sending.
    steady_load(&mut h, &mut sent_at, ms(100));
    assert!(h.flush(Duration::from_secs(10)));
    h.cluster.delay_responses(1, ms(300), u32::MAX).unwrap();
    let start = h.now;
    steady_load(&mut h, &mut sent_at, ms(1500));
    assert!(h.flush(Duration::from_secs(120)), "every record reported");
    assert_eq!(h.deliveries.len(), sent_at.len());
    // The cluster's logs agree with the reports.
    let all = per_partition(&h, sent_at[0], &sent_at);
    for (p, &n) in all.iter().enumerate() {
        assert_eq!(h.cluster.log(TOPIC, p as i32).len(), n, "partition {p}");
    }
    per_partition(&h, start, &sent_at)
}

fn mean(counts: &[usize]) -> f64 {
    counts.iter().sum::<usize>() as f64 / counts.len() as f64
}

/// Java's adaptive partitioning (`RecordAccumulator.partitionReady` builds the queue sizes,
/// `BuiltInPartitioner.nextPartition` draws against them): the slow broker's partitions queue
/// batches and get chosen less.
#[test]
fn a_slow_brokers_partitions_get_fewer_records() {
    let counts = slow_broker_run(true);
    let m = mean(&counts);
    for p in BROKER_1 {
        assert!(
            (counts[p] as f64) < m / 2.0,
            "partition {p} of the slow broker: {counts:?} (mean {m})"
        );
    }
    for p in (0..PARTITIONS).filter(|p| !BROKER_1.contains(p)) {
        assert!(counts[p] as f64 > m, "partition {p}: {counts:?} (mean {m})");
    }
}

/// `partitioner.adaptive.partitioning.enable=false`: the next partition is drawn uniformly,
/// so the slow broker's partitions get about an even share (their records wait longer).
#[test]
fn without_adaptive_partitioning_every_partition_gets_an_even_share() {
    let counts = slow_broker_run(false);
    let m = mean(&counts);
    for (p, &n) in counts.iter().enumerate() {
        let off = (n as f64 - m).abs() / m;
        assert!(off < 0.2, "partition {p}: {counts:?} (mean {m})");
    }
}

/// Broker 1 stops answering (its connections stall: nothing comes back) for a second while
/// records keep coming, then answers again. Returns the records per partition sent in the
/// first `after` of the stall (`early`), in the rest of it (`during`), and from 100 ms after
/// it ended (`back`).
fn black_hole_run(
    tune: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    after: Duration,
) -> (
    [usize; PARTITIONS],
    [usize; PARTITIONS],
    [usize; PARTITIONS],
) {
    let mut h = producer(32, tune);
    let mut sent_at = Vec::new();
    steady_load(&mut h, &mut sent_at, ms(200));
    let stalled = h.now;
    h.cluster.stall_connections_to(1, None).unwrap();
    steady_load(&mut h, &mut sent_at, ms(1000));
    let unstalled = h.now;
    h.cluster.unstall_connections_to(1, unstalled).unwrap();
    steady_load(&mut h, &mut sent_at, ms(400));
    assert!(h.flush(Duration::from_secs(120)), "every record reported");
    assert_eq!(h.deliveries.len(), sent_at.len());
    let early = {
        let all = per_partition(&h, stalled, &sent_at);
        let late = per_partition(&h, stalled + after, &sent_at);
        let mut early = [0; PARTITIONS];
        for p in 0..PARTITIONS {
            early[p] = all[p] - late[p];
        }
        early
    };
    let during = {
        let from = per_partition(&h, stalled + after, &sent_at);
        let back = per_partition(&h, unstalled, &sent_at);
        let mut during = [0; PARTITIONS];
        for p in 0..PARTITIONS {
            during[p] = from[p] - back[p];
        }
        during
    };
    let back = per_partition(&h, unstalled + ms(100), &sent_at);
    (early, during, back)
}

/// `partitioner.availability.timeout.ms` = 100 ms: once broker 1 left batches waiting and
/// took none for longer than that, its partitions are out of the choice (Java:
/// `RecordAccumulator.partitionReady` drops a partition whose leader's
/// `readyTimeMs - drainTimeMs` exceeds the timeout); from twice the timeout after the stall
/// (the in-flight window filled, then the timeout passed) no record goes to them, until broker
/// 1 answers again.
#[test]
fn a_black_holed_brokers_partitions_get_no_records_after_the_availability_timeout() {
    let timeout = ms(100);
    let (early, during, back) =
        black_hole_run(|b| b.partitioner_availability_timeout(timeout), timeout * 2);
    for p in BROKER_1 {
        assert!(
            early[p] > 0,
            "broker 1 was still chosen before the timeout: {early:?}"
        );
        assert_eq!(during[p], 0, "partition {p} after the timeout: {during:?}");
        assert!(
            back[p] > 0,
            "broker 1 chosen again once it answers: {back:?}"
        );
    }
    assert!(
        during.iter().sum::<usize>() > 5_000,
        "the other partitions took the load: {during:?}"
    );
}

/// The same without the timeout: the stalled broker's partitions keep weight 1 (Java: the
/// deepest queue still weighs `max + 1 - max`), so they still get records.
#[test]
fn without_the_availability_timeout_a_black_holed_broker_is_still_chosen() {
    let (_, during, _) = black_hole_run(|b| b, ms(200));
    let to_broker_1: usize = BROKER_1.iter().map(|&p| during[p]).sum();
    assert!(to_broker_1 > 0, "{during:?}");
}
