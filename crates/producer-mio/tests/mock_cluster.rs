//! Both drivers against librdkafka's mock cluster (3 brokers, 6 partitions), read back with
//! an independent consumer and compared record by record. No assertion reads the wall clock:
//! tests wait for events (reports, `close` returning), under a hang guard. How long the core
//! waits before failing a record is asserted in virtual time by producer-sim's scenarios.

mod support;

use std::sync::mpsc;
use std::time::Duration;

use mio::{Events, Poll, Token};
use producer_core::{Config, Delivery, ProduceError, Record, SendErrorReason};
use producer_mio::{BatchClosed, MioDriver, ThreadedProducer, TokenRange, TrySendError};

use support::{
    assert_burst_take, now_ms, record, verify_delivered, with_hang_guard, Cluster, Reports,
    HANG_GUARD, PARTITIONS,
};

/// The embeddable driver inside a test-owned `mio::Poll` loop.
#[test]
fn embedded_driver_produces_10k_records() {
    with_hang_guard(embedded_driver_run);
}

fn embedded_driver_run() {
    const N: usize = 10_000;
    let topic = "embedded";
    let cluster = Cluster::start(topic);
    // The first bootstrap server is given as "localhost": resolved on the helper thread.
    let config = Config::builder(cluster.servers(true))
        .buffer_max_records(2_000)
        .build()
        .unwrap();
    let records: Vec<Record> = (0..N).map(|i| record(topic, i)).collect();

    let mut poll = Poll::new().unwrap();
    let range = TokenRange::new(Token(100), 16);
    let mut driver = MioDriver::<usize>::new(config, poll.registry(), range).unwrap();
    let mut events = Events::with_capacity(256);
    let mut reports = Reports::new(N);
    let (mut next, mut fulls) = (0, 0);
    let start_ms = now_ms();
    while reports.received < N {
        while next < N {
            match driver.send(records[next].clone(), next) {
                Ok(()) => next += 1,
                Err(e) if e.reason == SendErrorReason::Full => {
                    assert_eq!(e.record.value, records[next].value);
                    assert_eq!(e.opaque, next);
                    fulls += 1;
                    break;
                }
                Err(e) => panic!("send refused record {next}: {:?}", e.reason),
            }
        }
        poll.poll(&mut events, driver.next_timeout()).unwrap();
        for event in events.iter() {
            assert!(
                driver.owns_token(event.token()),
                "unexpected token {:?}",
                event.token()
            );
            driver.handle_event(event);
        }
        driver.handle_timeout();
        while let Some(d) = driver.poll_delivery() {
            reports.take(d);
        }
    }
    assert!(fulls > 0, "buffer_max_records should have pushed back");
    driver.close();
    while !driver.is_closed() {
        poll.poll(&mut events, driver.next_timeout()).unwrap();
        for event in events.iter() {
            driver.handle_event(event);
        }
        driver.handle_timeout();
    }
    assert!(driver.poll_delivery().is_none());
    let reports = reports.all();
    verify_delivered(
        &cluster.bootstrap,
        topic,
        PARTITIONS,
        &records,
        &reports,
        (start_ms, now_ms()),
    );
}

/// The threaded producer: 20,000 records with backpressure, flush, close.
#[test]
fn threaded_producer_produces_20k_records() {
    const N: usize = 20_000;
    let topic = "threaded";
    let cluster = Cluster::start(topic);
    let config = Config::builder(cluster.servers(false)).build().unwrap();
    let records: Vec<Record> = (0..N).map(|i| record(topic, i)).collect();
    let (report_tx, report_rx) = mpsc::channel::<Delivery<usize>>();
    fn handle_is_shareable<H: Clone + Send + Sync + 'static>(_: &H) {}
    let producer = ThreadedProducer::<usize>::spawn(config, 512, move |d| {
        let _ = report_tx.send(d);
    })
    .unwrap();

    handle_is_shareable(&producer);
    let start_ms = now_ms();
    let mut reports = Reports::new(N);
    let mut next = 0;
    while next < N {
        match producer.send_with(records[next].clone(), next) {
            Ok(()) => next += 1,
            Err(TrySendError::Full(r, i)) => {
                assert_eq!(
                    (r.key, r.value, i),
                    (records[next].key.clone(), records[next].value.clone(), next)
                );
                // Backpressure: wait for a report (queued records guarantee one comes).
                let d = report_rx
                    .recv_timeout(HANG_GUARD)
                    .expect("a report while full");
                reports.take(d);
            }
            Err(e) => panic!("send failed: {e}"),
        }
    }
    producer.flush();
    // Every report was handed to the callback before flush returned.
    while let Ok(d) = report_rx.try_recv() {
        reports.take(d);
    }
    assert_eq!(reports.received, N, "flush returned before every report");
    producer.close();
    assert!(report_rx.try_recv().is_err(), "no report after close");
    let reports = reports.all();
    verify_delivered(
        &cluster.bootstrap,
        topic,
        PARTITIONS,
        &records,
        &reports,
        (start_ms, now_ms()),
    );
}

/// `send_batch` takes records from the front while the queue has room (never more than its
/// capacity), leaves the rest with the caller, and every record arrives once, in order per
/// partition, with its content; after close it takes nothing and the records stay.
#[test]
fn threaded_producer_send_batch() {
    const N: usize = 6_000;
    const CAPACITY: usize = 64;
    let topic = "batched";
    let cluster = Cluster::start(topic);
    let config = Config::builder(cluster.servers(false)).build().unwrap();
    let records: Vec<Record> = (0..N).map(|i| record(topic, i)).collect();
    let (report_tx, report_rx) = mpsc::channel::<Delivery<usize>>();
    let producer = ThreadedProducer::<usize>::spawn(config, CAPACITY, move |d| {
        let _ = report_tx.send(d);
    })
    .unwrap();
    let start_ms = now_ms();
    let mut reports = Reports::new(N);
    let mut next = 0;
    let mut partial_takes = 0;
    while next < N {
        let end = (next + 500).min(N);
        let mut burst: Vec<(Record, usize)> =
            (next..end).map(|i| (records[i].clone(), i)).collect();
        while !burst.is_empty() {
            let before = burst.len();
            let first = burst[0].1;
            let taken = producer.send_batch(&mut burst).expect("open");
            let front = burst.first().map(|(_, i)| *i as u64);
            assert_burst_take(before, first as u64, taken, CAPACITY, burst.len(), front);
            if taken == 0 {
                // Full: wait for a report (queued records guarantee one comes).
                reports.take(report_rx.recv_timeout(HANG_GUARD).expect("a report"));
            } else if !burst.is_empty() {
                partial_takes += 1;
            }
        }
        next = end;
    }
    assert!(
        partial_takes > 0,
        "bursts larger than the queue were taken in parts"
    );
    producer.flush();
    for d in report_rx.try_iter() {
        reports.take(d);
    }
    let reports = reports.all();
    verify_delivered(
        &cluster.bootstrap,
        topic,
        PARTITIONS,
        &records,
        &reports,
        (start_ms, now_ms()),
    );

    producer.close();
    let mut late = vec![(record(topic, 1), 1)];
    assert_eq!(producer.send_batch(&mut late), Err(BatchClosed));
    assert_eq!(late.len(), 1, "nothing is taken after close");
}

/// A full queue hands the record back at once; after close, send hands it back too.
#[test]
fn threaded_producer_full_and_closed() {
    let topic = "full";
    let cluster = Cluster::start(topic);
    let config = Config::builder(cluster.servers(false))
        .linger(Duration::ZERO)
        .build()
        .unwrap();
    let (blocked_tx, blocked_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (report_tx, report_rx) = mpsc::channel::<Delivery<usize>>();
    let mut first = true;
    // The first report blocks the producer thread until the test says go: meanwhile nothing
    // takes commands, so the tiny queue must fill.
    let producer = ThreadedProducer::<usize>::spawn(config, 4, move |d| {
        if first {
            first = false;
            let _ = blocked_tx.send(());
            let _ = go_rx.recv();
        }
        let _ = report_tx.send(d);
    })
    .unwrap();
    producer.send_with(record(topic, 0), 0).unwrap();
    blocked_rx.recv_timeout(HANG_GUARD).expect("first report");
    let mut sent = 1;
    let full = loop {
        let r = record(topic, sent);
        match producer.send_with(r, sent) {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        assert!(
            sent <= 5,
            "a queue of 4 accepted more than 4 records while the thread was blocked"
        );
    };
    let TrySendError::Full(r, i) = full else {
        panic!("expected Full, got {full:?}")
    };
    assert_eq!(i, sent);
    let expected = record(topic, sent);
    assert_eq!(
        (r.key, r.value, r.headers),
        (expected.key, expected.value, expected.headers)
    );
    go_tx.send(()).unwrap();
    producer.flush();
    let reports: Vec<_> = report_rx.try_iter().collect();
    assert_eq!(reports.len(), sent);
    assert!(reports.iter().all(|d| d.result.is_ok()));

    let clone = producer.clone();
    producer.close();
    assert!(clone.is_closed());
    match clone.send_with(record(topic, 99), 99) {
        Err(TrySendError::Closed(r, 99)) => assert_eq!(r.value, record(topic, 99).value),
        other => panic!("expected Closed, got {other:?}"),
    }
    clone.flush(); // returns at once
    clone.close(); // idempotent
}

/// Dropping every handle without `close` closes the producer in the background: every
/// record sent before is still delivered, then the thread ends (dropping the callback).
#[test]
fn threaded_producer_closes_when_handles_drop() {
    const N: usize = 3_000;
    let topic = "dropped";
    let cluster = Cluster::start(topic);
    let config = Config::builder(cluster.servers(false)).build().unwrap();
    let (report_tx, report_rx) = mpsc::channel::<Delivery<usize>>();
    let producer = ThreadedProducer::<usize>::spawn(config, 8192, move |d| {
        let _ = report_tx.send(d);
    })
    .unwrap();
    let clone = producer.clone();
    for i in 0..N {
        clone.send_with(record(topic, i), i).unwrap();
    }
    drop(clone);
    drop(producer);
    let mut seen = vec![false; N];
    // The sender side of the channel lives in the callback: `recv` fails once the thread has
    // ended, which must happen after the last report.
    while let Ok(d) = report_rx.recv_timeout(HANG_GUARD) {
        assert!(d.result.is_ok(), "record {} failed", d.opaque);
        assert!(
            !std::mem::replace(&mut seen[d.opaque], true),
            "two reports for {}",
            d.opaque
        );
    }
    assert!(
        matches!(report_rx.try_recv(), Err(mpsc::TryRecvError::Disconnected)),
        "the producer thread did not end"
    );
    assert!(seen.iter().all(|s| *s), "a record got no report");
}

/// Nothing listens at the bootstrap address: the topic's metadata never arrives, so every
/// record fails when `max_block` runs out (the core reports `UnknownTopic` for records still
/// waiting for metadata; `DeliveryTimeout` is accepted too), and comes back in its report
/// before `close` returns. (That the core waits out `max_block` and `delivery_timeout`, no
/// less, is asserted in virtual time by producer-sim's scenarios.)
fn unreachable(host: &'static str) {
    with_hang_guard(move || unreachable_run(host));
}

fn unreachable_run(host: &str) {
    support::init_tracing();
    let config = Config::builder([(host, 1u16)])
        .request_timeout(Duration::from_secs(1))
        .delivery_timeout(Duration::from_secs(2))
        .max_block(Duration::from_secs(2))
        .build()
        .unwrap();
    let (report_tx, report_rx) = mpsc::channel::<Delivery<usize>>();
    let producer = ThreadedProducer::<usize>::spawn(config, 64, move |d| {
        let _ = report_tx.send(d);
    })
    .unwrap();
    let records: Vec<Record> = (0..20)
        .map(|i| record("nowhere", i).with_timestamp(i as i64))
        .collect();
    for (i, r) in records.iter().enumerate() {
        producer.send_with(r.clone(), i).unwrap();
    }
    producer.close();
    let reports: Vec<_> = report_rx.try_iter().collect();
    assert_eq!(
        reports.len(),
        records.len(),
        "every report came before close returned"
    );
    for d in reports {
        let failure = d.result.expect_err("nothing can be delivered");
        assert!(
            matches!(
                failure.error,
                ProduceError::DeliveryTimeout { .. } | ProduceError::UnknownTopic
            ),
            "unexpected error {:?}",
            failure.error
        );
        eprintln!("{host}: {}", failure.error);
        if let ProduceError::DeliveryTimeout {
            last_connection_error,
            ..
        } = &failure.error
        {
            // Refused, timed out or not resolved: the timeout says which, and where.
            let cause = last_connection_error
                .as_ref()
                .expect("a timeout of a cluster never reached names the connection error");
            assert_eq!(cause.address, format!("{host}:1"), "{cause}");
        }
        assert_eq!(
            failure.record, records[d.opaque],
            "the record comes back unchanged"
        );
    }
}

#[test]
fn unreachable_refused() {
    unreachable("127.0.0.1");
}

/// TEST-NET-1: connecting hangs (or fails at once where there is no route); the core gives
/// up on the attempt after `request_timeout` and the driver drops the socket.
#[test]
fn unreachable_blackhole() {
    unreachable("192.0.2.1");
}

#[test]
fn unresolvable_host() {
    unreachable("no-such-host.invalid");
}

/// The cluster goes away after the metadata is known: records fail with the delivery timeout
/// and come back in their reports before `close` returns.
#[test]
fn cluster_down_records_time_out() {
    with_hang_guard(cluster_down_run);
}

fn cluster_down_run() {
    let topic = "down";
    let cluster = Cluster::start(topic);
    let config = Config::builder(cluster.servers(false))
        .request_timeout(Duration::from_secs(1))
        .delivery_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let (report_tx, report_rx) = mpsc::channel::<Delivery<usize>>();
    let producer = ThreadedProducer::<usize>::spawn(config, 64, move |d| {
        let _ = report_tx.send(d);
    })
    .unwrap();
    producer.send_with(record(topic, 0), 0).unwrap();
    producer.flush();
    assert!(report_rx.try_recv().expect("first report").result.is_ok());
    for broker in 1..=3 {
        cluster.mock.broker_down(broker).unwrap();
    }
    let records: Vec<Record> = (1..21)
        .map(|i| record(topic, i).with_timestamp(i as i64))
        .collect();
    for (i, r) in records.iter().enumerate() {
        producer.send_with(r.clone(), i).unwrap();
    }
    producer.close();
    let reports: Vec<_> = report_rx.try_iter().collect();
    assert_eq!(
        reports.len(),
        records.len(),
        "every report came before close returned"
    );
    for d in reports {
        let failure = d.result.expect_err("the cluster is down");
        assert!(
            matches!(failure.error, ProduceError::DeliveryTimeout { .. }),
            "unexpected error {:?}",
            failure.error
        );
        assert_eq!(
            failure.record, records[d.opaque],
            "the record comes back unchanged"
        );
    }
}

/// A sink of the application's that panics on every fourth report and on every event the
/// driver shows it: the embedded driver goes on (every record reaches the sink once and is
/// delivered), and each panic is named by an event from `poll_event`.
#[test]
fn embedded_driver_contains_a_panicking_sink() {
    with_hang_guard(embedded_panicking_sink_run);
}

fn embedded_panicking_sink_run() {
    use producer_core::{Callback, Event};
    use producer_mio::DeliverySink;

    /// Records each report, then panics on every fourth; panics on every event but the ones
    /// naming a panic.
    struct Panicking {
        delivered: Vec<(usize, bool)>,
    }
    impl DeliverySink<usize> for Panicking {
        fn deliver(&mut self, d: Delivery<usize>) {
            let id = d.opaque;
            self.delivered.push((id, d.result.is_ok()));
            if id % 4 == 0 {
                panic!("sink bug on record {id}");
            }
        }
        fn event(&mut self, e: &Event) {
            if !matches!(e, Event::CallbackPanicked { .. }) {
                panic!("sink event bug");
            }
        }
    }

    const N: usize = 40;
    let topic = "embedded-panics";
    let cluster = Cluster::start(topic);
    let config = Config::builder(cluster.servers(false)).build().unwrap();
    let mut poll = Poll::new().unwrap();
    let range = TokenRange::new(Token(100), 16);
    let sink = Panicking {
        delivered: Vec::new(),
    };
    let mut driver =
        MioDriver::<usize, Panicking>::with_sink(config, poll.registry(), range, None, sink)
            .unwrap();
    for i in 0..N {
        driver
            .send(record(topic, i), i)
            .expect("room for 40 records");
    }
    driver.close();
    let mut events = Events::with_capacity(256);
    let mut seen = Vec::new();
    while !driver.is_closed() {
        poll.poll(&mut events, driver.next_timeout()).unwrap();
        for event in events.iter() {
            driver.handle_event(event);
        }
        driver.handle_timeout();
        seen.extend(std::iter::from_fn(|| driver.poll_event()));
    }
    seen.extend(std::iter::from_fn(|| driver.poll_event()));
    let mut delivered = driver.sink().delivered.clone();
    delivered.sort_unstable();
    assert_eq!(
        delivered,
        (0..N).map(|i| (i, true)).collect::<Vec<_>>(),
        "every record delivered and handed to the sink once"
    );
    let named = |callback: Callback| {
        seen.iter()
            .filter(|e| matches!(e, Event::CallbackPanicked { callback: c, .. } if *c == callback))
            .count()
    };
    assert_eq!(
        named(Callback::Delivery),
        N / 4,
        "one event per panicking report"
    );
    let others = seen
        .iter()
        .filter(|e| !matches!(e, Event::CallbackPanicked { .. }))
        .count();
    assert!(others > 0, "the producer had events: {seen:?}");
    assert_eq!(
        named(Callback::Event),
        others,
        "one panic named per event shown to the sink: {seen:?}"
    );
}
