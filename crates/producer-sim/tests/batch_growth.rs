//! Batches that grow past `batch.size` while every in-flight slot to their leader is busy
//! (`batch.grow.max.bytes`), checked against the simulated brokers: what each Produce request
//! carried (the broker's request log), what the logs hold (every record once, in send order),
//! the topic's `max.message.bytes` rule, and `buffer.memory`.

mod support;

use std::time::Duration;

use producer_core::{ConfigBuilder, SendErrorReason};
use producer_sim::drive::Harness;
use producer_sim::{InjectedError, ProducePartitionRecord, SimCluster, SimConfig, API_PRODUCE};
use support::run::*;
use support::ErrorCode;

const BATCH_SIZE: usize = 2048;
const GROW_MAX: usize = 32 * 1024;

/// A cluster of one broker, `latency` each way, with topic `t` of `partitions` partitions and
/// the given topic configs.
fn slow_cluster(latency: Duration, partitions: i32, configs: &[(&str, &str)]) -> SimCluster {
    let mut cfg = SimConfig::with_brokers(1, 22);
    cfg.latency = (latency, latency);
    let mut c = SimCluster::new(cfg, std::time::Instant::now());
    c.create_topic_with_config("t", partitions, configs)
        .unwrap();
    c
}

fn growing(b: ConfigBuilder) -> ConfigBuilder {
    b.batch_size(BATCH_SIZE)
        .batch_grow_max(GROW_MAX)
        .linger(Duration::from_millis(1))
        // The load is offered whatever the drain (growth is the subject): the queue-delay
        // limit, on by default, would refuse part of it as `Full` once a drain is measured.
        .queue_delay_target(Duration::ZERO)
}

/// Sends `rounds` bursts of `per_round` records (ids from `first`), `gap` of virtual time
/// apart; records refused as `Full` are left out of what it returns (they were handed back).
fn offer(
    h: &mut Harness<u64>,
    first: u64,
    rounds: u64,
    per_round: u64,
    gap: Duration,
) -> (Vec<Sent>, usize) {
    let mut sent = Vec::new();
    let mut refused = 0;
    for round in 0..rounds {
        for k in 0..per_round {
            let id = first + round * per_round + k;
            let r = record(id, "t", true);
            let key = r.key.clone();
            match h.send(r, id) {
                Ok(()) => sent.push(Sent {
                    id,
                    topic: "t".into(),
                    key,
                }),
                Err(e) => {
                    assert!(matches!(e.reason, SendErrorReason::Full), "{:?}", e.reason);
                    refused += 1;
                }
            }
        }
        h.run_for(gap);
    }
    (sent, refused)
}

/// Sends one record (id 0, so the load starts at id 1) and waits for its report: the connection is ready and
/// the producer id assigned before the load starts (records sent before that would be sealed
/// at `batch.size` and queue up, with no request in flight to grow behind).
fn warm_up(h: &mut Harness<u64>) -> Vec<Sent> {
    let (sent, _) = offer(h, 0, 1, 1, Duration::ZERO);
    assert!(h.flush(secs(10)));
    sent
}

/// Every Produce partition entry the broker handled, from request `from` of its log on.
fn produced(h: &Harness<u64>, from: usize) -> Vec<ProducePartitionRecord> {
    h.cluster.request_log()[from..]
        .iter()
        .flat_map(|r| r.produce.iter().cloned())
        .collect()
}

/// (a) A slow broker with all five in-flight slots busy: batches grow past `batch.size`, never
/// past the growth cap (as the broker received them), and every record is delivered once, in
/// send order per partition.
#[test]
fn batches_grow_past_batch_size_while_every_slot_is_busy() {
    let mut h = harness(slow_cluster(Duration::from_millis(20), 2, &[]), growing);
    // About 3 KiB per millisecond against a round trip of 40 ms: five requests of 2 KiB
    // batches could carry a tenth of it.
    let mut sent = warm_up(&mut h);
    let (more, refused) = offer(&mut h, 1, 300, 60, Duration::from_millis(1));
    sent.extend(more);
    assert_eq!(refused, 0);
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, &[("t", 2)], true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
    let batches = produced(&h, 0);
    let largest = batches.iter().map(|b| b.batch_bytes).max().unwrap();
    // A slot that frees takes what is open as it is: a grown batch, or one that only just
    // started (its linger passed); so most bytes, not most batches, go in grown batches.
    let total: usize = batches.iter().map(|b| b.batch_bytes).sum();
    let in_grown: usize = batches
        .iter()
        .filter(|b| b.batch_bytes > BATCH_SIZE)
        .map(|b| b.batch_bytes)
        .sum();
    assert!(
        in_grown > total * 3 / 4,
        "{in_grown} of {total} bytes went in batches past {BATCH_SIZE} bytes"
    );
    assert!(largest <= GROW_MAX, "the largest batch was {largest} bytes");
    assert!(
        largest > 4 * BATCH_SIZE,
        "batches grew well past batch.size: the largest was {largest} bytes"
    );
    assert!(h.producer.stats().batches_grown > 0);
}

/// (b) Under light load (a burst now and then, never five requests outstanding), batches are
/// sealed at `batch.size` as before: none grows past it.
#[test]
fn batches_stay_within_batch_size_under_light_load() {
    let mut h = harness(slow_cluster(Duration::from_millis(2), 2, &[]), growing);
    // 35 records (about 2 KiB) every 10 ms: a batch or two, each answered in 4 ms.
    let (sent, _) = offer(&mut h, 0, 200, 35, Duration::from_millis(10));
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, &[("t", 2)], true);
    let batches = produced(&h, 0);
    let largest = batches.iter().map(|b| b.batch_bytes).max().unwrap();
    assert!(
        largest <= BATCH_SIZE,
        "a batch of {largest} bytes passed batch.size"
    );
    assert!(
        largest > BATCH_SIZE * 3 / 4,
        "batches filled up to batch.size: the largest was {largest} bytes"
    );
    assert_eq!(h.producer.stats().batches_grown, 0);
}

/// (c) The topic's `max.message.bytes` is below the growth cap: grown batches the broker
/// refuses (MESSAGE_TOO_LARGE) are split and delivered, never failed; the topic's growth limit
/// comes down, so in a second busy period no batch is refused while batches still grow past
/// `batch.size`.
#[test]
fn a_topic_limit_below_the_cap_splits_and_is_learned() {
    const TOPIC_MAX: usize = 8000;
    let max = TOPIC_MAX.to_string();
    let cluster = slow_cluster(
        Duration::from_millis(20),
        1,
        &[("max.message.bytes", max.as_str())],
    );
    let mut h = harness(cluster, growing);
    let mut sent = warm_up(&mut h);
    let (more, _) = offer(&mut h, 1, 200, 60, Duration::from_millis(1));
    sent.extend(more);
    assert!(h.flush(secs(60)));
    let first_period = h.cluster.request_log().len();
    let refusals = |b: &ProducePartitionRecord| b.error_code == ErrorCode::MESSAGE_TOO_LARGE.0;
    let refused_first = produced(&h, 0).iter().filter(|b| refusals(b)).count();
    assert!(refused_first > 0, "grown batches met the topic's limit");
    let (more, _) = offer(&mut h, 100_000, 200, 60, Duration::from_millis(1));
    sent.extend(more);
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, &[("t", 1)], true);
    assert!(
        reports(&h).values().all(|r| r.is_ok()),
        "refused batches were split and delivered"
    );
    let later = produced(&h, first_period);
    assert!(
        !later.iter().any(refusals),
        "after the limit was learned no batch is refused"
    );
    let grown_later = later
        .iter()
        .filter(|b| b.appended && b.batch_bytes > BATCH_SIZE)
        .count();
    assert!(grown_later > 10, "batches still grow: {grown_later}");
    assert!(later.iter().all(|b| b.batch_bytes <= TOPIC_MAX));
}

/// (d) `buffer.memory` stays the hard cap while batches grow: `send` refuses records (`Full`)
/// once the buffer is used up, the bytes held never pass it, and every record accepted is
/// delivered.
#[test]
fn buffer_memory_stays_the_hard_cap_while_batches_grow() {
    const BUFFER: usize = 48 * 1024;
    let mut h = harness(slow_cluster(Duration::from_millis(20), 2, &[]), |b| {
        growing(b).max_request_size(GROW_MAX).buffer_memory(BUFFER)
    });
    let mut sent = warm_up(&mut h);
    let mut refused = 0;
    for round in 0..200 {
        let (s, r) = offer(&mut h, 1 + round * 60, 1, 60, Duration::from_millis(1));
        sent.extend(s);
        refused += r;
        assert!(
            h.producer.buffered_bytes() <= BUFFER,
            "{} bytes held",
            h.producer.buffered_bytes()
        );
    }
    assert!(refused > 0, "the buffer filled up");
    assert!(h.producer.stats().batches_grown > 0, "batches grew");
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, &[("t", 2)], true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
}

/// A grown batch answered RECORD_LIST_TOO_LARGE (which the retry table fails for a batch of
/// `batch.size`) is split and resent like one answered MESSAGE_TOO_LARGE: every record is
/// delivered once, in order.
#[test]
fn a_grown_batch_answered_record_list_too_large_is_split_not_failed() {
    let mut h = harness(slow_cluster(Duration::from_millis(20), 1, &[]), growing);
    let mut sent = warm_up(&mut h);
    // Busy first, so that the next batch the broker sees is a grown one.
    let (more, _) = offer(&mut h, 1, 100, 60, Duration::from_millis(1));
    sent.extend(more);
    h.cluster.inject_error(InjectedError {
        api_key: API_PRODUCE,
        topic: Some("t".into()),
        partition: Some(0),
        error_code: ErrorCode::RECORD_LIST_TOO_LARGE.0,
        count: 1,
        persist: false,
    });
    let (more, _) = offer(&mut h, 6001, 100, 60, Duration::from_millis(1));
    sent.extend(more);
    assert!(h.flush(secs(60)));
    let refused: Vec<ProducePartitionRecord> = produced(&h, 0)
        .into_iter()
        .filter(|b| b.error_code == ErrorCode::RECORD_LIST_TOO_LARGE.0)
        .collect();
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0].batch_bytes > BATCH_SIZE,
        "the refused batch had grown: {} bytes",
        refused[0].batch_bytes
    );
    check_run(&h, &sent, &[("t", 1)], true);
    assert!(
        reports(&h).values().all(|r| r.is_ok()),
        "the refused batch was split and delivered"
    );
}
