//! The queue-delay limit (`queue.delay.target.ms`) against a simulated cluster slower than
//! the caller: a broker that answers each Produce request 5 ms late, one request in flight,
//! at most 8 KiB per request, while the test offers records every millisecond until `send`
//! says `Full`. With the limit, the unacknowledged bytes settle near what the cluster drains
//! in the target delay, far below `buffer.memory`, and `send` pushes back there; without it,
//! the buffer fills to `buffer.memory`. Either way every record offered and accepted is
//! delivered once, in order per partition; `buffer.memory` stays the hard cap. Against
//! brokers that serve requests in turn, one whose work is per byte and one whose work is per
//! request, the limit learns how deep a queue pays (`queue.delay.min.ms`).

mod support;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use producer_core::{ConfigBuilder, Producer, SendErrorReason, SendWaitCause};
use producer_sim::drive::Harness;
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("orders", 4)];
const TARGET: Duration = Duration::from_millis(50);
/// 512 KiB: the limit's floor (an eighth of it, 64 KiB) near what the drain gives.
const BUFFER: usize = 512 << 10;

/// One broker answering every Produce request 5 ms late, one request in flight, 8 KiB at
/// most per request: it drains about 1.5 MB/s whatever the caller offers.
fn slow_cluster(tune: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Harness<u64> {
    let mut h = harness(cluster(1, TOPICS, 5), |b| {
        tune(
            b.linger(Duration::from_millis(2))
                .batch_size(4096)
                .max_request_size(8192)
                .max_in_flight(1)
                .buffer_memory(BUFFER),
        )
    });
    h.cluster
        .delay_responses(1, Duration::from_millis(5), u32::MAX)
        .unwrap();
    h
}

/// What a saturating run saw.
#[derive(Debug, Default)]
struct Saturated {
    sent: Vec<Sent>,
    /// Unacknowledged bytes at the first `Full`.
    at_first_full: Option<usize>,
    /// The most unacknowledged bytes seen after a send, over the run's second half.
    max_late: usize,
    /// Their average, sampled each millisecond over the second half.
    avg_late: f64,
    /// Bytes (as `buffer.memory` counts them) delivered over the second half, per second.
    drain_late: f64,
    /// Sends refused as `Full`.
    refused: u64,
    /// Mean virtual time from acceptance to report, over the second half, in ms.
    latency_ms: f64,
}

/// Offers records every millisecond of `run` (virtual time) until `send` refuses one as
/// `Full`, checking after every accepted record that the unacknowledged bytes are within the
/// limit (when it is on) and `buffer.memory`; then stops offering and flushes.
fn saturate(h: &mut Harness<u64>, run: Duration) -> Saturated {
    let mut s = Saturated::default();
    // A record a millisecond for 100 ms, so that a drain is measured: until then the limit
    // is `buffer.memory`, which a caller sending in no time would fill at once.
    let mut id = 0u64;
    while id < 100 {
        h.send(record(id, "orders", false), id).unwrap();
        s.sent.push(Sent {
            id,
            topic: "orders".into(),
            key: None,
        });
        id += 1;
        h.run_for(Duration::from_millis(1));
    }
    assert!(h.run_until(secs(10), |h| h.deliveries.len() == id as usize));
    let mut reported = id as usize;
    let t0 = h.now;
    let half = t0 + run / 2;
    let mut accepted_at: VecDeque<(u64, Instant, usize)> = VecDeque::new();
    let (mut samples, mut sum) = (0u64, 0f64);
    let (mut drained, mut latency_sum, mut latency_n) = (0usize, 0f64, 0u64);
    while h.now < t0 + run {
        loop {
            let r = record(id, "orders", false);
            let charge = Producer::<u64>::buffer_charge(&r);
            match h.send(r, id) {
                Ok(()) => {
                    let unacked = h.producer.unacknowledged_bytes();
                    if let Some(limit) = h.producer.queue_delay_limit() {
                        assert!(
                            unacked - charge < limit,
                            "accepted with {} unacknowledged bytes, at the limit {limit}",
                            unacked - charge
                        );
                    }
                    assert!(h.producer.buffered_bytes() <= h.producer.config().buffer_memory);
                    if h.now >= half {
                        s.max_late = s.max_late.max(unacked);
                    }
                    accepted_at.push_back((id, h.now, charge));
                    s.sent.push(Sent {
                        id,
                        topic: "orders".into(),
                        key: None,
                    });
                    id += 1;
                }
                Err(e) => {
                    assert_eq!(e.reason, SendErrorReason::Full);
                    assert_eq!(e.opaque, id, "the refused record comes back");
                    s.refused += 1;
                    s.at_first_full
                        .get_or_insert(h.producer.unacknowledged_bytes());
                    break;
                }
            }
        }
        h.run_for(Duration::from_millis(1));
        // Reports come in send order here (one partition leader, one request in flight,
        // sticky batches): match them to their acceptance.
        while reported < h.deliveries.len() {
            let d = &h.deliveries[reported];
            reported += 1;
            assert!(
                d.result.is_ok(),
                "record {} failed: {:?}",
                d.opaque,
                d.result
            );
            let pos = accepted_at.iter().position(|&(i, _, _)| i == d.opaque);
            let (_, at, charge) = accepted_at.remove(pos.unwrap()).unwrap();
            if h.now >= half {
                drained += charge;
                latency_sum += (h.now - at).as_secs_f64() * 1000.0;
                latency_n += 1;
            }
        }
        if h.now >= half {
            samples += 1;
            sum += h.producer.unacknowledged_bytes() as f64;
        }
    }
    s.avg_late = sum / samples as f64;
    s.drain_late = drained as f64 / (run / 2).as_secs_f64();
    s.latency_ms = latency_sum / latency_n.max(1) as f64;
    assert!(h.flush(secs(60)), "every record reported");
    check_run(h, &s.sent, TOPICS, true);
    assert!(
        h.deliveries.iter().all(|d| d.result.is_ok()),
        "none dropped: every record delivered"
    );
    s
}

/// With the cluster slower than the caller, the unacknowledged bytes settle near what the
/// cluster drains in the target delay (well below `buffer.memory`), `send` pushes back there
/// (`Full` long before `buffer.memory`), the time held back is counted apart from the buffer
/// wait, and every record accepted is delivered once, in order.
#[test]
fn a_saturated_producer_keeps_about_the_target_delay_queued() {
    let mut h = slow_cluster(|b| b.queue_delay_target(TARGET));
    let s = saturate(&mut h, secs(3));
    // The target, and what a record spends in any case: its linger and the round trip
    // (5 ms of the broker's delay and up to 5 ms of network each way).
    let expected = s.drain_late * (TARGET + Duration::from_millis(2 + 5 + 2)).as_secs_f64();
    println!(
        "limit on: drain {:.0} B/s, expected depth {expected:.0}, average {:.0}, max {}, \
         first Full at {:?}, {} refusals, latency {:.1} ms",
        s.drain_late, s.avg_late, s.max_late, s.at_first_full, s.refused, s.latency_ms
    );
    assert!(s.drain_late > 100_000.0, "the cluster drained: {s:?}");
    let first_full = s.at_first_full.expect("send pushed back");
    assert!(
        first_full < BUFFER / 4,
        "pushed back at {first_full} bytes, far below buffer.memory"
    );
    assert!(
        s.avg_late < 2.0 * expected && s.avg_late > 0.25 * expected,
        "the queue settles near drain x target: average {} for {expected}",
        s.avg_late
    );
    assert!(s.max_late < BUFFER / 4, "max {}", s.max_late);
    let limit = h.producer.queue_delay_limit().unwrap();
    assert!(
        (limit as f64) < 2.0 * expected.max(8192.0) && limit >= 2 * 4096,
        "the limit {limit} follows the drain: {expected}"
    );
    let m = h.producer.metrics();
    assert!(m.counters.queue_delay_wait_ns > 0, "held back, counted");
    assert_eq!(m.counters.buffer_wait_ns, 0, "buffer.memory never reached");
    assert_eq!(m.queue_delay_limit_bytes, Some(limit));
    let text = m.to_string();
    assert!(text.contains(&format!("kafka_producer_queue_delay_limit_bytes {limit}\n")));
    assert!(text.contains(&format!(
        "kafka_producer_queue_delay_wait_time_ns_total {}\n",
        m.counters.queue_delay_wait_ns
    )));
}

/// With the limit off (`queue.delay.target.ms=0`) the old behaviour holds: the buffer fills
/// to `buffer.memory` before `send` says `Full`, and that wait counts as the buffer wait.
#[test]
fn with_the_limit_off_the_buffer_fills_to_buffer_memory() {
    let mut h = slow_cluster(|b| b.queue_delay_target(Duration::ZERO));
    assert_eq!(h.producer.queue_delay_limit(), None);
    let s = saturate(&mut h, Duration::from_millis(600));
    println!(
        "limit off: drain {:.0} B/s, average {:.0}, max {}, first Full at {:?}, latency {:.1} ms",
        s.drain_late, s.avg_late, s.max_late, s.at_first_full, s.latency_ms
    );
    let first_full = s.at_first_full.expect("full at last");
    assert!(
        first_full > BUFFER - 1024,
        "Full only at buffer.memory: {first_full}"
    );
    let m = h.producer.metrics();
    assert_eq!(m.counters.queue_delay_wait_ns, 0);
    assert!(m.counters.buffer_wait_ns > 0);
    assert_eq!(m.queue_delay_limit_bytes, None);
}

/// `buffer.memory` stays the hard cap: with a buffer smaller than what the cluster drains in
/// the target delay (the depth at the target: `queue.delay.min.ms` at it), the limit stops at
/// it and the buffer never holds more.
#[test]
fn buffer_memory_stays_the_hard_cap() {
    let small = 48 * 1024;
    let mut h = slow_cluster(|b| {
        b.queue_delay_target(Duration::from_secs(2))
            .queue_delay_min(Duration::from_secs(2))
            .buffer_memory(small)
    });
    let s = saturate(&mut h, secs(1));
    assert!(s.max_late <= small, "{} over buffer.memory", s.max_late);
    assert_eq!(h.producer.queue_delay_limit(), Some(small), "capped");
    assert!(
        h.producer.metrics().counters.buffer_wait_ns > 0,
        "Full at buffer.memory"
    );
}

/// A driver holds its senders back in its own queue, in front of the core, while the core
/// has no queue-delay room, and learns of that wait only when it takes its queue, which its
/// held senders do not fill: it reports the wait running once
/// (`Producer::note_send_wait_running`), and over once a sender goes again. Against the slow
/// cluster (about 1.5 MB/s) with an 8 MiB buffer, whose eighth (the limit's burst floor,
/// 1 MiB) is 0.7 s of that drain: over 4 s of saturation by such a sender, once the burst
/// sent at the start has drained, the limit follows the drain (the target's worth and the
/// round trips, about 0.1 MB) for every sample of each wait, and the unacknowledged bytes stay
/// near it. When the wait counted only in the sample its report came in, the next sample
/// brought the burst floor back and the sender filled it: 1 MiB queued, 0.7 s, every other
/// sample (the tokio driver's senders, unscraped, on a Kafka node: 190 ms from `send` to
/// report instead of 70). Every record is delivered once, in order.
#[test]
fn a_wait_a_driver_reports_once_holds_the_limit_at_the_drain_until_it_is_over() {
    const BIG: usize = 8 << 20;
    let mut h = slow_cluster(|b| b.queue_delay_target(TARGET).buffer_memory(BIG));
    let burst_floor = BIG / 8;
    assert_eq!(h.producer.queue_delay_limit(), Some(burst_floor));
    let t0 = h.now;
    let (mut id, mut sent) = (0u64, Vec::new());
    let mut held_since: Option<Instant> = None;
    let (mut waits, mut max_unacked, mut max_limit) = (0u32, 0usize, 0usize);
    while h.now < t0 + secs(4) {
        // The driver's rule: a record goes while the core has queue-delay room.
        while h.producer.queue_delay_room() > 0 {
            if let Some(since) = held_since.take() {
                let now = h.now;
                h.producer
                    .note_send_wait(now, now - since, SendWaitCause::QueueDelay);
                h.producer.note_send_wait_running(None);
            }
            h.send(record(id, "orders", false), id)
                .expect("the core takes what the driver lets through");
            sent.push(Sent {
                id,
                topic: "orders".into(),
                key: None,
            });
            id += 1;
        }
        if held_since.is_none() {
            let now = h.now;
            held_since = Some(now);
            waits += 1;
            h.producer
                .note_send_wait_running(Some((now, SendWaitCause::QueueDelay)));
        }
        if h.now >= t0 + secs(1) {
            max_unacked = max_unacked.max(h.producer.unacknowledged_bytes());
            max_limit = max_limit.max(h.producer.queue_delay_limit().unwrap());
        }
        h.run_for(Duration::from_millis(1));
    }
    println!(
        "{id} records, {waits} waits; from 1 s: limit at most {max_limit}, \
         unacknowledged at most {max_unacked}"
    );
    assert!(
        waits > 10,
        "the sender was held back again and again: {waits} waits"
    );
    assert!(
        max_limit < burst_floor / 4,
        "the limit followed the drain: at most {max_limit} (burst floor {burst_floor})"
    );
    assert!(
        max_unacked < burst_floor / 4,
        "queued near the drain: at most {max_unacked} unacknowledged"
    );
    assert!(h.flush(secs(60)), "every record reported");
    check_run(&h, &sent, TOPICS, true);
    assert!(
        h.deliveries.iter().all(|d| d.result.is_ok()),
        "none dropped: every record delivered"
    );
}

/// On a cluster that parks requests (the broker answers each Produce request 100 ms late,
/// five requests in flight on the connection, as Kafka parks acks=all requests waiting for
/// replicas; a producer far from its cluster), every request's round trip is as long sent
/// alone as pipelined, and the pipeline the cluster needs (`rate x 100 ms`) is twice the
/// 50 ms target: the limit, which counts the round trip of requests sent alone (twice: the
/// pipeline and as much headroom) and probes for it once an interval passes without one,
/// keeps that pipeline. Over 10 s of saturation the producer delivers about what it delivers
/// with the limit off (0.94x here; counting the round trip once gave 0.70x, and a round trip
/// undercounted, say the spacing of pipelined answers, spirals lower), every record accepted
/// once.
#[test]
fn on_a_cluster_that_parks_requests_the_limit_keeps_the_rate_of_the_limit_off() {
    let run = |target: Duration| {
        let mut h = slow_cluster(|b| {
            b.max_in_flight(5)
                .linger(Duration::ZERO)
                .queue_delay_target(target)
        });
        h.cluster
            .delay_responses(1, Duration::from_millis(100), u32::MAX)
            .unwrap();
        let t0 = h.now;
        let mut id = 0u64;
        while h.now < t0 + secs(10) {
            loop {
                match h.send(record(id, "orders", false), id) {
                    Ok(()) => id += 1,
                    Err(e) => {
                        assert_eq!(e.reason, SendErrorReason::Full);
                        break;
                    }
                }
            }
            h.run_for(Duration::from_millis(1));
        }
        let in_run = h.deliveries.len();
        assert!(h.run_until(secs(30), |h| h.deliveries.len() == id as usize));
        in_run
    };
    let on = run(TARGET);
    let off = run(Duration::ZERO);
    assert!(
        on as f64 >= 0.9 * off as f64,
        "{on} records delivered in 10 s with the limit on, {off} with it off"
    );
}

/// When a probe interval (a second) passes without a Produce request sent alone, the limit
/// probes for the round trip without queueing: the connection's next Produce request waits
/// until nothing is in flight, and carries one batch, however much is queued (a probe that
/// took all that was queued measured the broker serving it, and the limit counted that
/// twice). Against the broker's log: 120,000 records queued at once (below the limit's burst
/// floor, so the limit holds nothing back) over four partitions, five requests in flight,
/// each parked 20 ms: the requests carry a batch of each partition (but the last few, as the
/// records run out), and one, about a second in, carries one batch. With the limit off none
/// does. Every record is delivered once, in order.
#[test]
fn a_probe_sends_one_batch_alone() {
    const RECORDS: u64 = 120_000;
    let run = |target: Duration| {
        let mut h = slow_cluster(|b| {
            b.max_in_flight(5)
                .linger(Duration::ZERO)
                .max_request_size(64 << 10)
                .batch_grow_max(0)
                .buffer_memory(256 << 20)
                .queue_delay_target(target)
        });
        h.cluster
            .delay_responses(1, Duration::from_millis(20), u32::MAX)
            .unwrap();
        let mut sent = Vec::new();
        for id in 0..RECORDS {
            let r = record(id, "orders", false).with_partition((id % 4) as i32);
            h.send(r, id).expect("below the limit");
            sent.push(Sent {
                id,
                topic: "orders".to_string(),
                key: None,
            });
        }
        assert!(h.run_until(secs(60), |h| reports(h).len() == RECORDS as usize));
        check_run(&h, &sent, TOPICS, true);
        h.cluster
            .request_log()
            .iter()
            .filter(|r| r.api_key == 0)
            .map(|r| r.produce.len())
            .collect::<Vec<_>>()
    };
    // Batches per request before the records run out (the last dozen requests carry less).
    let single = |log: &[usize]| {
        assert!(log.len() > 100, "{} requests", log.len());
        let before_the_end = &log[..log.len() - 12];
        assert!(
            before_the_end.iter().all(|&n| n == 4 || n == 1),
            "batches per request: {log:?}"
        );
        before_the_end.iter().filter(|&&n| n == 1).count()
    };
    let on = run(TARGET);
    assert_eq!(single(&on), 1, "one probe, with one batch");
    assert_eq!(single(&run(Duration::ZERO)), 0, "limit off: no probe");
}

/// One broker that serves Produce requests in turn, each for `per_request` plus its size at
/// `bytes_per_second` (a Kafka node bound by its CPU), five requests in flight, 4 KiB batches
/// that grow while every in-flight slot is busy, a 4 MiB buffer.
fn in_turn_cluster(
    per_request: Duration,
    bytes_per_second: u64,
    tune: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> Harness<u64> {
    let mut h = harness(cluster(1, TOPICS, 5), |b| {
        tune(
            b.linger(Duration::from_millis(2))
                .batch_size(4096)
                .max_in_flight(5)
                .buffer_memory(4 << 20),
        )
    });
    let now = h.now;
    h.cluster
        .serve_produce_in_turn(1, per_request, bytes_per_second, now)
        .unwrap();
    h
}

/// Saturates `in_turn_cluster(per_request, bytes_per_second)` for 8 s twice: with the depth
/// learned from 2 ms, and at the target alone (`queue.delay.min.ms` at it); prints both.
fn learned_and_target(per_request: Duration, bytes_per_second: u64) -> (Saturated, Saturated) {
    let run = |min: Duration| {
        let mut h = in_turn_cluster(per_request, bytes_per_second, |b| {
            b.queue_delay_target(TARGET).queue_delay_min(min)
        });
        saturate(&mut h, secs(8))
    };
    let (learned, target) = (run(Duration::from_millis(2)), run(TARGET));
    for (name, s) in [("learned", &learned), ("target", &target)] {
        println!(
            "{name}: {:.1} ms, {:.0} B/s, {:.0} B queued",
            s.latency_ms, s.drain_late, s.avg_late
        );
    }
    (learned, target)
}

/// A broker whose work is per byte (0.05 ms a request, 2 MB/s): a deeper queue does not
/// drain more (at fixed depths of 2 to 50 ms it drained 2.86-2.89 MB/s), so with
/// `queue.delay.min.ms` below the target (its default) the limit learns a shallow queue:
/// records wait far less than at the target alone (`queue.delay.min.ms` at it), at the same
/// drain (23 ms against 83, 0.99x the drain, over the second half of 8 s).
#[test]
fn where_depth_does_not_pay_the_limit_learns_a_shallow_queue() {
    let (learned, target) = learned_and_target(Duration::from_micros(50), 2_000_000);
    assert!(
        learned.latency_ms < target.latency_ms / 2.0,
        "{:.1} ms learned against {:.1} ms at the target",
        learned.latency_ms,
        target.latency_ms
    );
    assert!(learned.drain_late >= 0.95 * target.drain_late);
}

/// A broker whose work is per request (10 ms a request, 20 MB/s): a deeper queue grows the
/// batches (they grow while every in-flight slot is busy) and drains far more (at a fixed
/// 16 ms depth 3.4 MB/s, at 50 ms 13.2), so the limit learns the target's depth from the
/// least within a few seconds. Over the second half of 8 s it drained 0.97x what the target
/// alone drains (0.90x while a sample that held nobody back left a trial running to its
/// phase's end): a trial of a shallower queue drains about half as much for the four samples
/// it runs, 0.4-0.5 s here where a sample spans the 100 ms round trip.
#[test]
fn where_depth_pays_the_limit_learns_a_deep_queue() {
    let (learned, target) = learned_and_target(Duration::from_millis(10), 20_000_000);
    assert!(
        learned.drain_late >= 0.9 * target.drain_late,
        "learned {:.0} B/s against {:.0} at the target",
        learned.drain_late,
        target.drain_late
    );
}
