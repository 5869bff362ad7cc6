//! Interceptors (`producer_driver::Interceptor`, the builders' `interceptor`): `on_send` runs
//! on the producer's thread or task and its changes reach the log (stamped headers read back
//! by an independent consumer); every report is acknowledged once, before the application gets
//! it; a panicking `on_send` fails exactly that record with `ProduceError::Interceptor` and the
//! others are delivered; a panicking `on_acknowledgement` is named by an event and the report
//! still arrives. Against librdkafka's mock cluster. No sleeps: every wait is for a report or a
//! call's return.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use producer_core::{Callback, Config, Event, Header, ProduceError, Record};
use producer_driver::{Acknowledgement, Interceptor};

use super::reports_of;
use crate::drive::{Driver, Failure};
use crate::running::{Options, Running};
use crate::MockKafka;

const TOPIC: &str = "interceptors";
const PARTITIONS: i32 = 6;

fn record(id: u64) -> Record {
    Record::new(TOPIC, format!("value-{id}")).with_key(format!("key-{}", id % 7))
}

/// What an interceptor saw, shared with the test.
#[derive(Default)]
struct Seen {
    /// Threads `on_send` ran on.
    send_threads: Mutex<HashSet<ThreadId>>,
    /// `(partition, offset)` of each success acknowledged, and how many failures.
    delivered: Mutex<Vec<(i32, i64)>>,
    failed: AtomicUsize,
    /// Acknowledgements so far.
    acked: AtomicUsize,
}

/// Stamps `stamp: <value>` (replacing any), panics in `on_send` on the values in
/// `refuse`, and in `on_acknowledgement` on every `ack_panic_every`-th acknowledgement.
struct Stamper {
    seen: Arc<Seen>,
    refuse: BTreeSet<Vec<u8>>,
    ack_panic_every: Option<usize>,
}

impl Stamper {
    fn new(seen: &Arc<Seen>) -> Self {
        Stamper {
            seen: seen.clone(),
            refuse: BTreeSet::new(),
            ack_panic_every: None,
        }
    }
}

impl Interceptor for Stamper {
    fn on_send(&mut self, record: &mut Record) {
        let current = std::thread::current().id();
        self.seen.send_threads.lock().unwrap().insert(current);
        let value = record.value.clone().unwrap_or_default();
        if self.refuse.contains(&value[..]) {
            panic!("interceptor refuses {}", String::from_utf8_lossy(&value));
        }
        record.headers.retain(|h| h.key != "stamp");
        record.headers.push(Header::new("stamp", Some(value)));
    }

    fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
        match ack {
            Acknowledgement::Delivered(m) => {
                let at = (m.partition, m.offset);
                self.seen.delivered.lock().unwrap().push(at);
            }
            _ => {
                self.seen.failed.fetch_add(1, Ordering::SeqCst);
            }
        }
        let n = self.seen.acked.fetch_add(1, Ordering::SeqCst) + 1;
        if self
            .ack_panic_every
            .is_some_and(|every| n.is_multiple_of(every))
        {
            panic!("interceptor cannot count acknowledgement {n}");
        }
    }
}

/// Counts the acknowledgements only: a second interceptor, after the stamper.
struct Counter(Arc<AtomicUsize>);

impl Interceptor for Counter {
    fn on_acknowledgement(&mut self, _: Acknowledgement<'_>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A producer with `interceptors`, whose delivery callback notes, per record, how many
/// acknowledgements `seen` had counted when its report arrived.
fn start(
    driver: Driver,
    mock: &MockKafka,
    interceptors: Vec<Box<dyn Interceptor>>,
    seen: &Arc<Seen>,
) -> (Running, Arc<Mutex<HashMap<u64, usize>>>) {
    let mut options = Options::new(Config::builder(mock.bootstrap()).build().unwrap());
    options.interceptors = interceptors;
    let acked_at_report = Arc::new(Mutex::new(HashMap::new()));
    let (at, seen) = (acked_at_report.clone(), seen.clone());
    options.on_report = Some(Arc::new(move |id: &u64| {
        let acked = seen.acked.load(Ordering::SeqCst);
        at.lock().unwrap().insert(*id, acked);
    }));
    (Running::start(driver, options), acked_at_report)
}

/// The interceptor-related panics named by `events`.
fn interceptor_panics(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::CallbackPanicked {
                callback: Callback::Interceptor,
                message,
            } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Reads the topic back: every record written, with its stamp header equal to its value.
fn assert_read_back_stamped(mock: &MockKafka, expected: usize) {
    let read = crate::read_back_all(
        &mock.bootstrap_servers(),
        TOPIC,
        PARTITIONS,
        Duration::from_secs(60),
    );
    assert_eq!(read.len(), expected, "every record written once");
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

/// Two interceptors: the stamper's header is on every record read back; `on_send` ran on the
/// producer's thread or task, not the caller's; every report was acknowledged once by each
/// interceptor, before the delivery callback got it, and the successes acknowledged are
/// exactly where the reports say the records landed.
pub fn an_interceptor_stamps_every_record_and_sees_every_report(driver: Driver) {
    const N: u64 = 300;
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let seen = Arc::new(Seen::default());
    let counted = Arc::new(AtomicUsize::new(0));
    let interceptors: Vec<Box<dyn Interceptor>> = vec![
        Box::new(Stamper::new(&seen)),
        Box::new(Counter(counted.clone())),
    ];
    let (p, acked_at_report) = start(driver, &mock, interceptors, &seen);
    for id in 0..N {
        p.send(record(id), id).expect("open");
    }
    p.flush();
    let reports = reports_of(&p, 0..N);
    p.close();
    assert!(p.reports().is_empty(), "no report twice");

    let mut landed: Vec<(i32, i64)> = reports
        .values()
        .map(|r| {
            let m = r.result.as_ref().expect("every record delivered");
            (m.partition, m.offset)
        })
        .collect();
    landed.sort_unstable();
    let mut acknowledged = seen.delivered.lock().unwrap().clone();
    acknowledged.sort_unstable();
    assert_eq!(acknowledged, landed, "each success acknowledged once");
    assert_eq!(seen.failed.load(Ordering::SeqCst), 0);
    assert_eq!(seen.acked.load(Ordering::SeqCst), N as usize);
    assert_eq!(
        counted.load(Ordering::SeqCst),
        N as usize,
        "both interceptors ran"
    );
    let at = acked_at_report.lock().unwrap();
    assert_eq!(at.len(), N as usize);
    let mut order: Vec<usize> = at.values().copied().collect();
    order.sort_unstable();
    assert_eq!(
        order,
        (1..=N as usize).collect::<Vec<_>>(),
        "the k-th report reached the callback after exactly k acknowledgements"
    );
    let threads = seen.send_threads.lock().unwrap();
    assert!(
        !threads.contains(&std::thread::current().id()),
        "on_send ran on the producer's thread or task, not the caller's"
    );
    assert!(interceptor_panics(&p.events()).is_empty());
    assert_read_back_stamped(&mock, N as usize);
}

/// `on_send` panics on every tenth record: exactly those fail, with
/// `ProduceError::Interceptor` (not possibly persisted, the record handed back), each named by
/// an event; the others are delivered and read back stamped, and the producer goes on
/// flushing and closing. Every report, the failures included, is acknowledged once.
pub fn a_panicking_on_send_fails_exactly_that_record(driver: Driver) {
    const N: u64 = 200;
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let seen = Arc::new(Seen::default());
    let bad = |id: u64| id % 10 == 4;
    let mut stamper = Stamper::new(&seen);
    stamper.refuse = (0..N)
        .filter(|&id| bad(id))
        .map(|id| record(id).value.unwrap().to_vec())
        .collect();
    let (p, _) = start(driver, &mock, vec![Box::new(stamper)], &seen);
    for id in 0..N {
        p.send(record(id), id).expect("open");
    }
    p.flush();
    let reports = reports_of(&p, 0..N);
    // The producer goes on after the panics.
    p.send(record(N), N).expect("still open");
    p.flush();
    let later = reports_of(&p, [N]);
    assert!(later[&N].result.is_ok());
    p.close();

    for (id, r) in &reports {
        if !bad(*id) {
            assert!(r.result.is_ok(), "record {id}: {:?}", r.result);
            continue;
        }
        match &r.result {
            Err(Failure::Produce(e @ ProduceError::Interceptor { message })) => {
                let value = String::from_utf8(record(*id).value.unwrap().to_vec()).unwrap();
                assert_eq!(*message, format!("interceptor refuses {value}"));
                assert!(!e.possibly_persisted());
            }
            other => panic!("record {id}: want the interceptor's error, got {other:?}"),
        }
        let mut back = r.record.clone().expect("handed back");
        back.timestamp = None;
        assert_eq!(back, record(*id), "record {id} handed back unstamped");
    }
    let failed = (0..N).filter(|&id| bad(id)).count();
    let mut panics = interceptor_panics(&p.events());
    panics.sort();
    let mut want: Vec<String> = (0..N)
        .filter(|&id| bad(id))
        .map(|id| format!("interceptor refuses value-{id}"))
        .collect();
    want.sort();
    assert_eq!(panics, want, "one event per panic");
    assert_eq!(seen.failed.load(Ordering::SeqCst), failed);
    assert_eq!(seen.acked.load(Ordering::SeqCst), N as usize + 1);
    assert_read_back_stamped(&mock, N as usize + 1 - failed);
}

/// `on_acknowledgement` panics on every fourth report: each panic is named by an event, and
/// every report still reaches the application (once), every record delivered.
pub fn a_panicking_on_acknowledgement_is_named_and_the_report_arrives(driver: Driver) {
    const N: u64 = 100;
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let seen = Arc::new(Seen::default());
    let mut stamper = Stamper::new(&seen);
    stamper.ack_panic_every = Some(4);
    let (p, acked_at_report) = start(driver, &mock, vec![Box::new(stamper)], &seen);
    for id in 0..N {
        p.send(record(id), id).expect("open");
    }
    p.flush();
    let reports = reports_of(&p, 0..N);
    p.close();
    assert!(p.reports().is_empty(), "no report twice");
    assert!(reports.values().all(|r| r.result.is_ok()), "all delivered");
    assert_eq!(acked_at_report.lock().unwrap().len(), N as usize);
    let mut panics = interceptor_panics(&p.events());
    panics.sort();
    let mut want: Vec<String> = (1..=N as usize)
        .filter(|n| n % 4 == 0)
        .map(|n| format!("interceptor cannot count acknowledgement {n}"))
        .collect();
    want.sort();
    assert_eq!(panics, want, "one event per panic");
    assert_read_back_stamped(&mock, N as usize);
}
