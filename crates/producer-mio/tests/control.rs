//! The embeddable driver's controls against librdkafka's mock cluster: `purge` hands the
//! lingering records back at once; `flush_within` and `close_within` end through the driver's
//! events (the deadlines are the core's, in `next_timeout`). The threaded producer's are in the
//! shared driver suite.

mod support;

use std::time::Duration;

use mio::{Events, Poll, Token};
use producer_core::{Config, Delivery, Event, InFlight, ProduceError, PurgeScope};
use producer_mio::{MioDriver, TokenRange};

use support::{record, with_hang_guard, Cluster};

/// One turn of the caller's loop: sockets, deadlines, then the reports and events so far.
fn turn(
    poll: &mut Poll,
    events: &mut Events,
    driver: &mut MioDriver<usize>,
    reports: &mut Vec<Delivery<usize>>,
    seen: &mut Vec<Event>,
) {
    poll.poll(events, driver.next_timeout()).unwrap();
    for event in events.iter() {
        driver.handle_event(event);
    }
    driver.handle_timeout();
    while let Some(d) = driver.poll_delivery() {
        reports.push(d);
    }
    while let Some(e) = driver.poll_event() {
        seen.push(e);
    }
}

#[test]
fn embedded_driver_purges_flushes_and_closes_within_deadlines() {
    with_hang_guard(run);
}

fn run() {
    let topic = "control";
    let cluster = Cluster::start(topic);
    let config = Config::builder(cluster.servers(false))
        .linger(Duration::from_secs(600))
        .build()
        .unwrap();
    let mut poll = Poll::new().unwrap();
    let mut driver =
        MioDriver::<usize>::new(config, poll.registry(), TokenRange::new(Token(10), 16)).unwrap();
    let mut events = Events::with_capacity(64);
    let (mut reports, mut seen) = (Vec::new(), Vec::new());

    // Lingering records are purged: reported at once, handed back, never sent.
    for i in 0..50 {
        driver.send(record(topic, i), i).unwrap();
    }
    assert_eq!(driver.purge(PurgeScope::All, InFlight::Wait), 50);
    while let Some(d) = driver.poll_delivery() {
        reports.push(d);
    }
    assert_eq!(
        reports.len(),
        50,
        "the reports are there when purge returns"
    );
    for d in reports.drain(..) {
        let f = d.result.expect_err("purged");
        assert_eq!(
            f.error,
            ProduceError::Purged {
                possibly_persisted: false
            }
        );
        assert_eq!(f.record.value, record(topic, d.opaque).value);
    }

    // A timed flush that completes.
    for i in 50..70 {
        driver.send(record(topic, i), i).unwrap();
    }
    driver.flush_within(Duration::from_secs(60));
    while !seen.contains(&Event::FlushCompleted) {
        turn(&mut poll, &mut events, &mut driver, &mut reports, &mut seen);
    }
    assert_eq!(reports.len(), 20, "the event comes after the reports");
    assert!(reports.drain(..).all(|d| d.result.is_ok()));

    // A close within a deadline with every broker down.
    for broker in 1..=3 {
        cluster.mock.broker_down(broker).unwrap();
    }
    for i in 70..80 {
        driver.send(record(topic, i), i).unwrap();
    }
    driver.close_within(Duration::from_millis(500));
    while !driver.is_closed() {
        turn(&mut poll, &mut events, &mut driver, &mut reports, &mut seen);
    }
    while let Some(d) = driver.poll_delivery() {
        reports.push(d);
    }
    while let Some(e) = driver.poll_event() {
        seen.push(e);
    }
    assert_eq!(reports.len(), 10, "one report per record");
    let (mut purged, mut timed_out) = (0, 0);
    for d in &reports {
        match &d.result.as_ref().expect_err("not delivered").error {
            ProduceError::Purged {
                possibly_persisted: false,
            } => purged += 1,
            ProduceError::CloseTimedOut {
                possibly_persisted: true,
            } => timed_out += 1,
            e => panic!("record {}: {e:?}", d.opaque),
        }
    }
    let at = seen
        .iter()
        .position(|e| *e == Event::CloseDeadlineReached { purged, timed_out })
        .expect("the deadline's event with the reports' counts");
    assert_eq!(seen.get(at + 1), Some(&Event::Closed));
}
