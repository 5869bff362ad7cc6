//! Backpressure in the driver: senders held back in the driver's command queue (by
//! `buffer.memory` or by the queue-delay limit) count in the core's wait metrics, the
//! diagnosis names the cause, and a wait for the queue-delay limit holds the queue at the
//! cluster's drain for as long as it runs, against a slow mock cluster.

use std::time::Duration;

use producer_core::{BackpressureCause, Config, ConfigBuilder, MetricsSnapshot, Record, Verdict};

use crate::drive::Driver;
use crate::driver_suite::reports_of;
use crate::running::{Options, Running};
use crate::MockKafka;

const TOPIC: &str = "backpressure";
/// The sample window of the diagnosis (two of them): shorter than the run, so that the
/// snapshot taken as the last record is queued covers the held-back part of it.
const WINDOW: Duration = Duration::from_millis(200);

/// Queues `record` with `id`, waiting for room in the driver: tokio's `send` and mio's
/// `send_timeout` each wait there until the driver says there is room (no polling).
fn send_waiting(p: &Running, record: Record, id: u64) {
    if let Err(refused) = p.send_waiting(record, id) {
        panic!("record {id} refused ({:?})", refused.0);
    }
}

/// The backpressure verdicts of the diagnosis of `m`.
fn backpressure_causes(m: &MetricsSnapshot) -> Vec<BackpressureCause> {
    m.diagnose()
        .brokers
        .iter()
        .filter_map(|b| match b.verdict {
            Verdict::Backpressure { cause } => Some(cause),
            _ => None,
        })
        .collect()
}

/// A mock broker answering after 20 ms, and a producer config for it with the queue-delay
/// limit on (a 50 ms target), one request in flight of one 16 KiB batch (about 0.8 MB/s) and
/// `buffer_memory`. Keep the cluster for as long as the producer runs.
fn one_slot_behind_20_ms(buffer_memory: usize) -> (MockKafka, ConfigBuilder) {
    let mock = MockKafka::new(1, &[(TOPIC, 3)]).expect("mock cluster");
    mock.set_rtt(-1, Duration::from_millis(20)).unwrap();
    let config = mock
        .producer_config()
        .max_in_flight(1)
        .max_request_size(16 * 1024)
        .batch_size(16 * 1024)
        .queue_delay_target(Duration::from_millis(50))
        // The depth at the target, not learned: here a deeper queue does not drain more (a
        // request holds 16 KiB whatever the batches), so the learning keeps the least depth,
        // which holds the queue below the one slot's full batches; the verdict below is of
        // the target's limit. (The learning climbed here only by chance, a drain sample's
        // noise passing for a deeper queue's gain, until trials had to pass that noise.)
        .queue_delay_min(Duration::from_millis(50))
        .buffer_memory(buffer_memory);
    (mock, config)
}

/// Sends `n` records of `value` bytes waiting for room, and returns the metrics snapshot
/// taken right after the last was queued (while the producer still works through them),
/// after which every record is reported delivered.
fn send_all(p: &Running, n: u64, value: usize) -> MetricsSnapshot {
    let value = bytes::Bytes::from(vec![b'v'; value]);
    for id in 0..n {
        let r = Record::new(TOPIC, value.clone()).with_key(format!("k{}", id % 6));
        send_waiting(p, r, id);
    }
    let m = p.metrics().expect("a snapshot while the producer runs");
    println!(
        "buffer wait {} ns (+{:?} running), queue-delay wait {} ns (+{:?} running) in {:?}; \
         limit {:?}, unacknowledged {}",
        m.counters.buffer_wait_ns,
        m.buffer_wait_running,
        m.counters.queue_delay_wait_ns,
        m.queue_delay_wait_running,
        m.windowed.elapsed,
        m.queue_delay_limit_bytes,
        m.unacknowledged_bytes
    );
    p.flush();
    for r in reports_of(p, 0..n).values() {
        assert!(r.result.is_ok(), "record {}: {:?}", r.id, r.result);
    }
    m
}

/// A `buffer.memory` of 32 KiB against a broker that answers after 20 ms, and 1 MB to send:
/// senders are held back in the driver's queue by the byte budget most of the run. That wait
/// counts in the buffer-wait total (`bufferpool-wait-time-ns-total`, ended waits or the one
/// running) and its window, and the diagnosis names backpressure by `buffer.memory`.
pub fn a_wait_for_buffer_memory_in_the_driver_is_counted_and_diagnosed(driver: Driver) {
    const BUDGET: usize = 32 * 1024;
    let mock = MockKafka::new(1, &[(TOPIC, 3)]).expect("mock cluster");
    mock.set_rtt(-1, Duration::from_millis(20)).unwrap();
    let config: Config = mock
        .producer_config()
        .buffer_memory(BUDGET)
        // Batches never fill (the budget is smaller): not the in-flight cap.
        .batch_size(BUDGET)
        .max_request_size(BUDGET)
        .queue_delay_target(Duration::ZERO)
        .metrics_sample_window(WINDOW)
        .build()
        .unwrap();
    let p = Running::start(driver, Options::new(config));
    let m = send_all(&p, 1_000, 1_000);
    let waited = Duration::from_nanos(m.counters.buffer_wait_ns) + m.buffer_wait_running;
    assert!(waited > Duration::ZERO, "no buffer wait counted");
    assert!(
        m.windowed.growth.buffer_wait_ns > 0 || !m.buffer_wait_running.is_zero(),
        "in the window too"
    );
    let causes = backpressure_causes(&m);
    assert!(
        matches!(
            causes.as_slice(),
            [BackpressureCause::BufferMemory {
                buffer_memory: BUDGET,
                ..
            }]
        ),
        "backpressure by buffer.memory: {}",
        m.diagnose()
    );
    p.close();
}

/// The queue-delay limit on (a 50 ms target), one request in flight to a broker that answers
/// after 20 ms, and 2 MB to send: once a drain rate is measured the limit holds senders back in
/// the driver's queue far below `buffer.memory`. That wait counts as the queue-delay wait (not
/// as a wait for buffer space), in the total and in the window.
///
/// What the diagnosis names is the in-flight cap, by its rule (every slot busy half the window
/// or more and half the batches sealed full come before backpressure: `diagnosis`'s
/// `the_limit_nearest_the_broker_wins`): each request carries one 16 KiB batch, and the limit,
/// which leaves the pipeline its round trip's worth of bytes and as much again, keeps the one
/// slot busy with full batches, so a second slot or bigger batches would drain more here.
/// (While the limit counted the round trip once, it held the queue so short that most batches
/// left under full, and the verdict was the limit. `producer-sim`'s
/// `backpressure_from_the_queue_delay_limit_is_named` gets that verdict with requests that
/// carry batches not full.)
pub fn a_wait_for_the_queue_delay_limit_in_the_driver_is_counted_and_diagnosed(driver: Driver) {
    // 256 KiB: the limit's floor (an eighth of it, or a batch per partition) and the limit the
    // drain gives (0.8 MB/s x 95 ms) stay below it, and the 2 MB sent pass it.
    let (_mock, config) = one_slot_behind_20_ms(256 << 10);
    let config: Config = config.metrics_sample_window(WINDOW).build().unwrap();
    let buffer_memory = config.buffer_memory;
    let p = Running::start(driver, Options::new(config));
    // The limit starts at its floor, an eighth of `buffer.memory`.
    assert_eq!(
        p.metrics().expect("a snapshot").queue_delay_limit_bytes,
        Some(buffer_memory / 8)
    );
    let m = send_all(&p, 20_000, 100);
    let held = Duration::from_nanos(m.counters.queue_delay_wait_ns) + m.queue_delay_wait_running;
    assert!(held > Duration::ZERO, "no queue-delay wait counted");
    assert!(
        m.windowed.growth.queue_delay_wait_ns > 0 || !m.queue_delay_wait_running.is_zero(),
        "in the window too"
    );
    assert_eq!(
        Duration::from_nanos(m.counters.buffer_wait_ns) + m.buffer_wait_running,
        Duration::ZERO,
        "no wait for buffer space: the limit held senders back below buffer.memory"
    );
    let limit = m.queue_delay_limit_bytes.expect("the limit is on");
    assert!(limit < buffer_memory, "limit {limit} of {buffer_memory}");
    let diagnosis = m.diagnose();
    assert!(
        matches!(
            diagnosis.brokers.as_slice(),
            [b] if matches!(b.verdict, Verdict::InFlightCap { max_in_flight: 1, .. })
        ),
        "the one slot bounds the drain: {diagnosis}"
    );
    p.close();
}

/// The queue-delay limit on (a 50 ms target), one request in flight to a broker that answers
/// after 20 ms (about 0.8 MB/s), an 8 MiB `buffer.memory` (the limit's burst floor, an eighth
/// of it, is 1 MiB, more than a second of that drain), and 2 MB sent by senders that wait in
/// the driver's queue, with no metrics read until the last is queued. The driver tells the
/// core that its senders wait when it takes its queue, which they do not fill while they wait:
/// the limit keeps counting the wait it was told of until it is told it is over, so it stays
/// at the drain (the target's worth and two round trips, about 100 kB), and so do the
/// unacknowledged bytes. (When the wait counted only in the sample in which the driver
/// reported it, the next sample brought the burst floor back, the senders filled it, and the
/// queue stood near 1 MiB: on a Kafka node, the tokio driver's senders waited 190 ms from
/// `send` to report instead of 70.) The unacknowledged bytes are what is asserted, not the
/// limit: the wait ends with the last record queued, after which two samples bring the burst
/// floor back, but the records already queued cannot fill it.
pub fn a_flood_held_back_in_the_driver_keeps_the_queue_at_the_drain(driver: Driver) {
    const BUFFER: usize = 8 << 20;
    let (_mock, config) = one_slot_behind_20_ms(BUFFER);
    let p = Running::start(driver, Options::new(config.build().unwrap()));
    let m = send_all(&p, 15_000, 100);
    assert!(
        m.unacknowledged_bytes < BUFFER / 8 / 2,
        "the queue stays at the drain, far below the burst floor: {} unacknowledged",
        m.unacknowledged_bytes
    );
    p.close();
}
