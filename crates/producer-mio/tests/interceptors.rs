//! The embeddable `MioDriver`'s interceptors (`MioDriver::add_interceptor`), against
//! librdkafka's mock cluster: every record is stamped by `on_send` before the core takes it
//! (read back with the header by an independent consumer), a record the core refuses after
//! the interceptor grew it is acknowledged and comes back from `send`, a panicking `on_send`
//! fails that record alone with `ProduceError::Interceptor`, and every report is acknowledged
//! once before the sink gets it, panics in `on_acknowledgement` named by events. The threaded
//! producer's interceptors are the shared driver suite's (`driver_suite::interceptors`).

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mio::{Events, Poll, Token};
use producer_core::{
    Callback, Config, Delivery, Event, Header, ProduceError, Record, SendErrorReason,
};
use producer_mio::{Acknowledgement, DeliverySink, Interceptor, MioDriver, TokenRange};

use support::{with_hang_guard, Cluster, PARTITIONS};

/// Stamps each record with a header `stamp` holding its value (replacing any), grows the
/// record `grow` past `max.request.size`, panics on `boom`; counts the acknowledgements and
/// panics on every tenth.
struct Stamper {
    acked: Arc<AtomicUsize>,
}

impl Interceptor for Stamper {
    fn on_send(&mut self, record: &mut Record) {
        let value = record.value.clone().unwrap_or_default();
        match &value[..] {
            b"boom" => panic!("stamper refuses boom"),
            b"grow" => record.value = Some(vec![0u8; 2 << 20].into()),
            _ => {}
        }
        record.headers.retain(|h| h.key != "stamp");
        record.headers.push(Header::new("stamp", Some(value)));
    }

    fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
        assert_eq!(ack.topic(), TOPIC);
        let n = self.acked.fetch_add(1, Ordering::SeqCst) + 1;
        if n % 10 == 0 {
            panic!("stamper cannot count acknowledgement {n}");
        }
    }
}

/// Keeps each report with the acknowledgements counted when it arrived.
struct Sink {
    acked: Arc<AtomicUsize>,
    reports: Vec<(Delivery<usize>, usize)>,
}

impl DeliverySink<usize> for Sink {
    fn deliver(&mut self, d: Delivery<usize>) {
        let acked = self.acked.load(Ordering::SeqCst);
        self.reports.push((d, acked));
    }
}

const TOPIC: &str = "embedded-interceptors";
const N: usize = 30;
const BOOM: usize = 5;

#[test]
fn the_embedded_driver_runs_its_interceptors_around_send_and_the_sink() {
    with_hang_guard(run);
}

fn run() {
    let cluster = Cluster::start(TOPIC);
    let config = Config::builder(cluster.servers(false)).build().unwrap();
    let mut poll = Poll::new().unwrap();
    let acked = Arc::new(AtomicUsize::new(0));
    let sink = Sink {
        acked: acked.clone(),
        reports: Vec::new(),
    };
    let range = TokenRange::new(Token(100), 16);
    let mut driver =
        MioDriver::<usize, Sink>::with_sink(config, poll.registry(), range, None, sink).unwrap();
    driver.add_interceptor(Stamper {
        acked: acked.clone(),
    });

    // Grown past max.request.size by on_send: the core refuses it, on_acknowledgement sees the
    // refusal, and it comes back from send as the interceptor changed it.
    let refused = driver
        .send(Record::new(TOPIC, "grow"), usize::MAX)
        .expect_err("too large once grown");
    assert!(
        matches!(refused.reason, SendErrorReason::RecordTooLarge { .. }),
        "{:?}",
        refused.reason
    );
    assert_eq!(
        refused.record.value.as_ref().map(|v| v.len()),
        Some(2 << 20)
    );
    assert_eq!(
        acked.load(Ordering::SeqCst),
        1,
        "the refusal is acknowledged"
    );

    for i in 0..N {
        let value = if i == BOOM {
            "boom".to_owned()
        } else {
            format!("v{i}")
        };
        driver
            .send(Record::new(TOPIC, value), i)
            .expect("room for every record");
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

    let reports = &driver.sink().reports;
    assert_eq!(reports.len(), N, "one report per record");
    let mut ids: Vec<usize> = reports.iter().map(|(d, _)| d.opaque).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..N).collect::<Vec<_>>(), "each record reported once");
    for (k, (d, acked_then)) in reports.iter().enumerate() {
        assert_eq!(
            *acked_then,
            k + 2,
            "report {k} (record {}) acknowledged before the sink got it",
            d.opaque
        );
        match &d.result {
            Ok(_) => assert_ne!(d.opaque, BOOM),
            Err(f) => {
                assert_eq!(d.opaque, BOOM, "only boom fails: {:?}", f.error);
                assert_eq!(
                    f.error,
                    ProduceError::Interceptor {
                        message: "stamper refuses boom".into()
                    }
                );
                assert!(!f.error.possibly_persisted());
                assert_eq!(f.record.value.as_deref(), Some(&b"boom"[..]));
            }
        }
    }
    assert_eq!(acked.load(Ordering::SeqCst), N + 1);
    let interceptor_panics: Vec<&str> = seen
        .iter()
        .filter_map(|e| match e {
            Event::CallbackPanicked {
                callback: Callback::Interceptor,
                message,
            } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        interceptor_panics,
        [
            "stamper refuses boom",
            "stamper cannot count acknowledgement 10",
            "stamper cannot count acknowledgement 20",
            "stamper cannot count acknowledgement 30",
        ]
    );

    let read = producer_tests::read_back_all(
        &cluster.bootstrap,
        TOPIC,
        PARTITIONS,
        Duration::from_secs(60),
    );
    assert_eq!(read.len(), N - 1, "every record but boom was written once");
    for r in &read {
        let value = r.value.clone().expect("a value");
        assert_eq!(
            r.headers,
            [("stamp".to_owned(), Some(value.clone()))],
            "record {} stamped by on_send",
            String::from_utf8_lossy(&value)
        );
    }
}
