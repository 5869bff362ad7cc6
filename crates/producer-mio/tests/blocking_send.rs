//! `ThreadedProducer::send_timeout` against librdkafka's mock cluster: a sender that finds no
//! room waits for it (no polling) and gets its record back, intact, when none frees in time;
//! a sender waiting when `close` is called returns at once with `Closed`; the records queued
//! are delivered once the broker is back, and nothing is reported for those handed back. That it waits as long as room frees (the byte budget of
//! `buffer.memory`, the queue-delay limit) is the shared driver suite's `backpressure` tests,
//! whose mio sender is `send_timeout`.

use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use bytes::Bytes;
use producer_core::{Config, ConfigBuilder, Record};
use producer_mio::{ThreadedProducer, TrySendError};
use producer_tests::running::with_hang_guard;
use producer_tests::MockKafka;

const TOPIC: &str = "blocking";

#[test]
fn send_timeout_hands_the_record_back_when_no_room_frees_or_at_close_and_sends_the_rest() {
    with_hang_guard(run);
}

/// A mock cluster of one broker and a producer on it with a 32 KiB `buffer.memory` (as
/// `configure` leaves the rest), its reports `(opaque, delivered)` on the receiver.
fn small_buffer_producer(
    configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> (
    MockKafka,
    ThreadedProducer<u64>,
    mpsc::Receiver<(u64, bool)>,
) {
    let mock = MockKafka::new(1, &[(TOPIC, 3)]).expect("mock cluster");
    let config: Config = configure(
        mock.producer_config()
            .buffer_memory(32 * 1024)
            .batch_size(16 * 1024)
            .max_request_size(16 * 1024),
    )
    .build()
    .unwrap();
    let (tx, rx) = mpsc::channel();
    let producer = ThreadedProducer::<u64>::spawn(config, 1024, move |d| {
        let _ = tx.send((d.opaque, d.result.is_ok()));
    })
    .unwrap();
    (mock, producer, rx)
}

/// A record of 1 kB keyed by `id`.
fn record(id: u64) -> Record {
    Record::new(TOPIC, Bytes::from(vec![b'v'; 1_000])).with_key(format!("k{id}"))
}

fn run() {
    let (mock, producer, rx) = small_buffer_producer(|c| c.queue_delay_target(Duration::ZERO));

    // Connected and delivering first: then the broker goes away with the records unanswered.
    producer
        .send_timeout(record(0), 0, Duration::from_secs(60))
        .unwrap();
    producer.flush();
    assert_eq!(rx.recv().unwrap(), (0, true));
    mock.broker_down(-1).unwrap();

    // Nothing is acknowledged now: `buffer.memory` (32 KiB) fills with about 30 records, and
    // the next sender waits its 50 ms for room, then gets its record back as it gave it.
    let mut accepted = 1;
    let refused = loop {
        match producer.send_timeout(record(accepted), accepted, Duration::from_millis(50)) {
            Ok(()) => accepted += 1,
            Err(TrySendError::Full(back, id)) => break (back, id),
            Err(e) => panic!("record {accepted}: {e}"),
        }
        assert!(accepted < 1_000, "32 KiB took {accepted} records of 1 kB");
    };
    assert_eq!(refused.1, accepted, "the refused record's opaque value");
    assert_eq!(
        refused.0,
        record(accepted),
        "the record handed back as it was given"
    );
    let m = producer.metrics().unwrap();
    assert!(
        m.counters.buffer_wait_ns > 0 || !m.buffer_wait_running.is_zero(),
        "the wait for room counts as a wait for buffer space"
    );

    // A sender waiting for room when `close` is called returns at once with its record, as
    // `Closed` (the broker still down: no room frees before that).
    let barrier = Arc::new(Barrier::new(2));
    let waiter = {
        let (producer, barrier) = (producer.clone(), barrier.clone());
        let back = refused.0.clone();
        std::thread::spawn(move || {
            barrier.wait();
            match producer.send_timeout(back.clone(), 0, Duration::MAX) {
                Err(TrySendError::Closed(r, 0)) => assert_eq!(r, back, "handed back as given"),
                other => panic!("a waiting sender at close: {other:?}"),
            }
        })
    };
    barrier.wait();
    let closer = {
        let producer = producer.clone();
        std::thread::spawn(move || producer.close())
    };
    waiter.join().unwrap();

    // The broker back: every record queued is delivered, once; the ones handed back are not
    // reported (they are the caller's again).
    mock.broker_up(-1).unwrap();
    closer.join().unwrap();
    let mut reported: Vec<(u64, bool)> = rx.try_iter().collect();
    reported.sort_unstable();
    let expected: Vec<(u64, bool)> = (1..accepted).map(|id| (id, true)).collect();
    assert_eq!(reported, expected, "each record reported once, delivered");
    match producer.send_timeout(record(0), 0, Duration::from_secs(60)) {
        Err(TrySendError::Closed(back, 0)) => assert_eq!(back, record(0)),
        other => panic!("after close: {other:?}"),
    }
}

/// `ThreadedProducer::send_batch_timeout`: a batch four times `buffer.memory` is all taken,
/// the call waiting for room as deliveries free it; with the broker gone it returns when its
/// time is up, what it could not queue left in the caller's vector in order; a call waiting
/// when `close` is called returns at once as closed, its records kept; every record taken is
/// delivered once.
#[test]
fn send_batch_timeout_waits_for_room_and_leaves_what_it_could_not_queue() {
    with_hang_guard(run_batch);
}

fn run_batch() {
    let (mock, producer, rx) = small_buffer_producer(|c| c);
    let batch = |ids: std::ops::Range<u64>| ids.map(|i| (record(i), i)).collect::<Vec<_>>();

    let mut all = batch(0..128);
    let taken = producer
        .send_batch_timeout(&mut all, Duration::MAX)
        .expect("open");
    assert_eq!((taken, all.len()), (128, 0), "128 kB through 32 kB of room");
    producer.flush();
    let mut reported: Vec<(u64, bool)> = rx.try_iter().collect();
    reported.sort_unstable();
    assert_eq!(reported, (0..128).map(|id| (id, true)).collect::<Vec<_>>());

    // Nothing is acknowledged now: the call takes what `buffer.memory` holds, waits its
    // 50 ms, and leaves the rest, in order.
    mock.broker_down(-1).unwrap();
    let mut rest = batch(128..256);
    let taken = producer
        .send_batch_timeout(&mut rest, Duration::from_millis(50))
        .expect("open");
    assert!((1..128).contains(&taken), "{taken} of 128 taken");
    let left: Vec<u64> = rest.iter().map(|(_, id)| *id).collect();
    assert_eq!(
        left,
        (128 + taken as u64..256).collect::<Vec<_>>(),
        "the records not taken, as given"
    );

    // A call waiting for room when `close` is called returns at once, keeping its records.
    let barrier = Arc::new(Barrier::new(2));
    let waiter = {
        let (producer, barrier) = (producer.clone(), barrier.clone());
        std::thread::spawn(move || {
            barrier.wait();
            let result = producer.send_batch_timeout(&mut rest, Duration::MAX);
            (result, rest.len())
        })
    };
    barrier.wait();
    let closer = {
        let producer = producer.clone();
        std::thread::spawn(move || producer.close())
    };
    let (result, kept) = waiter.join().unwrap();
    assert!(result.is_err(), "closed while waiting: {result:?}");
    assert_eq!(kept, 128 - taken, "its records kept");

    mock.broker_up(-1).unwrap();
    closer.join().unwrap();
    let mut reported: Vec<(u64, bool)> = rx.try_iter().collect();
    reported.sort_unstable();
    let expected: Vec<(u64, bool)> = (128..128 + taken as u64).map(|id| (id, true)).collect();
    assert_eq!(
        reported, expected,
        "each record taken reported once, delivered"
    );
}
