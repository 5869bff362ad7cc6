//! The chain's rules, alone and through the command layer ([`crate::DriverLoop`]).

use std::sync::{Arc, Mutex};

use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use producer_core::{Config, Header, Producer, SendErrorReason};

use super::*;
use crate::panic::InjectedPanics;
use crate::{Answered, Channel, Command, CommandQueue, DriverLoop, Host, Intake};

/// What the interceptors of a test saw, in order.
type Log = Arc<Mutex<Vec<String>>>;

/// Appends its name to a header `seen` of each record, logs each call, and panics on the
/// record or report named in `panic_on` (its value / its topic).
struct Named {
    name: &'static str,
    log: Log,
    panic_on_send: Option<&'static str>,
    panic_on_ack: Option<&'static str>,
}

impl Named {
    fn new(name: &'static str, log: &Log) -> Self {
        Named {
            name,
            log: log.clone(),
            panic_on_send: None,
            panic_on_ack: None,
        }
    }
}

impl Interceptor for Named {
    fn on_send(&mut self, record: &mut Record) {
        let value = record.value.clone().unwrap_or_default();
        self.log.lock().unwrap().push(format!(
            "{} send {}",
            self.name,
            String::from_utf8_lossy(&value)
        ));
        record
            .headers
            .push(Header::new("seen", Some(self.name.into())));
        if self
            .panic_on_send
            .is_some_and(|v| v.as_bytes() == &value[..])
        {
            panic!("{} refuses {}", self.name, String::from_utf8_lossy(&value));
        }
    }

    fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
        let outcome = if ack.is_delivered() { "ok" } else { "failed" };
        self.log
            .lock()
            .unwrap()
            .push(format!("{} ack {} {outcome}", self.name, ack.topic()));
        if self.panic_on_ack == Some(ack.topic()) {
            panic!("{} cannot count {}", self.name, ack.topic());
        }
    }
}

fn seen(record: &Record) -> Vec<String> {
    record
        .headers
        .iter()
        .map(|h| String::from_utf8_lossy(h.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

/// The interceptors run in the order they were added, each seeing the record as the ones
/// before left it; an empty chain does nothing.
#[test]
fn the_chain_runs_in_the_order_added() {
    let mut empty = Interceptors::default();
    assert!(empty.is_empty());
    let mut record = Record::new("t", "v");
    assert_eq!(empty.on_send(&mut record), Ok(RecordId::FIRST));
    assert_eq!(
        record,
        Record::new("t", "v"),
        "an empty chain changes nothing"
    );

    let log = Log::default();
    let mut chain = Interceptors::default();
    chain.push(Named::new("a", &log));
    chain.push(Named::new("b", &log));
    chain.push_boxed(Box::new(Named::new("c", &log)));
    assert_eq!(chain.len(), 3);
    assert!(chain.on_send(&mut record).is_ok());
    assert_eq!(seen(&record), ["a", "b", "c"]);

    let metadata = RecordMetadata::new("t".into(), 0, 7, 1_000);
    let ok = Delivery::succeeded((), metadata);
    assert!(chain
        .on_acknowledgement(Acknowledgement::of(&ok))
        .is_empty());
    let failed = Delivery::failed((), ProduceError::UnknownTopic, Record::new("u", "w"));
    let ack = Acknowledgement::of(&failed);
    assert!(!ack.is_delivered());
    assert_eq!(ack.error(), Some(&ProduceError::UnknownTopic));
    assert!(ack.metadata().is_none());
    assert_eq!(
        Acknowledgement::of(&ok).metadata().map(|m| m.offset),
        Some(7)
    );
    assert!(Acknowledgement::of(&ok).error().is_none());
    assert_eq!(ack.timestamp(), None);
    assert!(chain.on_acknowledgement(ack).is_empty());
    assert_eq!(
        *log.lock().unwrap(),
        [
            "a send v",
            "b send v",
            "c send v",
            "a ack t ok",
            "b ack t ok",
            "c ack t ok",
            "a ack u failed",
            "b ack u failed",
            "c ack u failed",
        ]
    );
    assert_eq!(Acknowledgement::of(&ok).timestamp(), Some(1_000));
}

/// A panicking `on_send` stops the chain for that record with the typed error and the
/// event naming the interceptor; the next record goes through the whole chain again.
#[test]
fn a_panic_in_on_send_fails_that_record_only() {
    let log = Log::default();
    let mut chain = Interceptors::default();
    chain.push(Named::new("a", &log));
    chain.push(Named {
        panic_on_send: Some("bad"),
        ..Named::new("b", &log)
    });
    chain.push(Named::new("c", &log));

    let mut bad = Record::new("t", "bad");
    let panicked = chain.on_send(&mut bad).unwrap_err();
    assert_eq!(panicked.message, "b refuses bad");
    assert_eq!(
        panicked.error(),
        ProduceError::Interceptor {
            message: "b refuses bad".into()
        }
    );
    assert!(!panicked.error().possibly_persisted());
    assert_eq!(
        panicked.event(),
        Event::CallbackPanicked {
            callback: Callback::Interceptor,
            message: "b refuses bad".into()
        }
    );
    assert_eq!(
        seen(&bad),
        ["a", "b"],
        "left as the chain changed it; c never ran"
    );

    let mut good = Record::new("t", "good");
    assert!(chain.on_send(&mut good).is_ok());
    assert_eq!(seen(&good), ["a", "b", "c"]);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "a send bad",
            "b send bad",
            "a send good",
            "b send good",
            "c send good"
        ]
    );
}

/// A panicking `on_acknowledgement` is named by one event per panic, and every interceptor
/// still sees every report.
#[test]
fn a_panic_in_on_acknowledgement_is_named_and_the_chain_goes_on() {
    let log = Log::default();
    let mut chain = Interceptors::default();
    chain.push(Named {
        panic_on_ack: Some("x"),
        ..Named::new("a", &log)
    });
    chain.push(Named {
        panic_on_ack: Some("x"),
        ..Named::new("b", &log)
    });
    let x = Delivery::succeeded((), RecordMetadata::new("x".into(), 1, 2, 3));
    let panics = chain.on_acknowledgement(Acknowledgement::of(&x));
    assert_eq!(
        panics,
        [
            Event::CallbackPanicked {
                callback: Callback::Interceptor,
                message: "a cannot count x".into()
            },
            Event::CallbackPanicked {
                callback: Callback::Interceptor,
                message: "b cannot count x".into()
            },
        ]
    );
    let y = Delivery::succeeded((), RecordMetadata::new("y".into(), 1, 2, 3));
    assert!(chain.on_acknowledgement(Acknowledgement::of(&y)).is_empty());
    assert_eq!(
        *log.lock().unwrap(),
        ["a ack x ok", "b ack x ok", "a ack y ok", "b ack y ok"]
    );
}

/// `sync_channel(1)`, as the threaded mio producer answers.
struct Blocking;
impl Channel for Blocking {
    type Sender<V> = SyncSender<V>;
    fn send<V>(sender: SyncSender<V>, value: V) {
        let _ = sender.try_send(value);
    }
}

/// Keeps every report, the acknowledgements seen before it, and every event.
struct Recorder {
    acked: Arc<Mutex<Vec<String>>>,
    reports: Vec<(Delivery<u32>, usize)>,
    events: Vec<Event>,
}
impl Host for Recorder {
    type Replies = Answered<u32, Blocking>;
    fn deliver(&mut self, delivery: Delivery<u32>) {
        let seen = self.acked.lock().unwrap().len();
        self.reports.push((delivery, seen));
    }
    fn show(&mut self, event: &Event) {
        self.events.push(event.clone());
    }
}

/// Stamps a header, grows "big" past `max.request.size`, panics on "boom".
struct Stamper(Log);
impl Interceptor for Stamper {
    fn on_send(&mut self, record: &mut Record) {
        record
            .headers
            .push(Header::new("stamp", Some("yes".into())));
        match record.value.as_deref() {
            Some(b"big") => record.value = Some(vec![0u8; 4096].into()),
            Some(b"boom") => panic!("stamper bug"),
            _ => {}
        }
    }
    fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
        let value = match ack {
            Acknowledgement::Failed { record, .. } => record.value.clone(),
            Acknowledgement::Delivered(_) => None,
        };
        let value = value.unwrap_or_default();
        self.0
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(&value[..value.len().min(8)]).into_owned());
    }
}

/// Through the command layer, without a broker: `on_send` runs before the core's `send`,
/// so the core's size check sees the record as the interceptor grew it; a panicking
/// `on_send` fails that record only, with the typed error and an event; every report
/// (refused, failed by the interceptor, timed out in the core) is acknowledged once before
/// the host gets it, and the record the core held comes back with the stamped header.
#[test]
fn the_command_layer_runs_the_chain_around_the_core() {
    let config = Config::builder([("127.0.0.1", 9)])
        .max_request_size(1024)
        .build()
        .unwrap();
    let t0 = Instant::now();
    let mut core = Producer::new(config, t0);
    let queue = CommandQueue::new(64, 1 << 20);
    let acked = Log::default();
    let mut chain = Interceptors::default();
    chain.push(Stamper(acked.clone()));
    let host = Recorder {
        acked: acked.clone(),
        reports: Vec::new(),
        events: Vec::new(),
    };
    let mut layer = DriverLoop::new(host, InjectedPanics::default()).with_interceptors(chain);
    for (value, opaque) in [("small", 1), ("big", 2), ("boom", 3)] {
        let record = Record::new("t", value);
        let bytes = DriverLoop::<Recorder>::charge(&record);
        let command = Command::Send {
            record,
            opaque,
            bytes,
        };
        queue
            .push(command, bytes, crate::OnFull::Return, |c| c)
            .ok()
            .unwrap();
    }
    let intake = Intake {
        per_call: 16,
        release_every: 4,
    };
    assert!(!layer.take_commands(&mut core, &queue, intake, || t0));
    assert_eq!(core.buffered_records(), 1, "the core took the small record");
    {
        let host = layer.host();
        assert_eq!(host.reports.len(), 2, "big refused, boom failed");
        let (big, seen) = &host.reports[0];
        assert_eq!((big.opaque, *seen), (2, 1), "acknowledged before the host");
        let failure = big.result.as_ref().unwrap_err();
        let ProduceError::Refused(reason) = &failure.error else {
            panic!("refused by the core, got {:?}", failure.error)
        };
        assert!(matches!(**reason, SendErrorReason::RecordTooLarge { .. }));
        assert_eq!(
            failure.record.value.as_ref().map(|v| v.len()),
            Some(4096),
            "the core checked the record as the interceptor grew it"
        );
        let (boom, seen) = &host.reports[1];
        assert_eq!((boom.opaque, *seen), (3, 2));
        let failure = boom.result.as_ref().unwrap_err();
        assert_eq!(
            failure.error,
            ProduceError::Interceptor {
                message: "stamper bug".into()
            }
        );
        assert_eq!(failure.record.value.as_deref(), Some(&b"boom"[..]));
        assert_eq!(
            host.events,
            [Event::CallbackPanicked {
                callback: Callback::Interceptor,
                message: "stamper bug".into()
            }]
        );
    }

    // No broker: the core fails the small record at its delivery timeout.
    let mut t = t0;
    core.close(t0);
    while !core.is_closed() {
        t += Duration::from_secs(1);
        assert!(t < t0 + Duration::from_secs(600), "the core never closed");
        if core.poll_timeout().is_some_and(|d| d <= t) {
            core.handle_timeout(t);
        }
        layer.drain(&mut core, |_, _| {});
        let _ = layer.settle(&mut core, &queue);
    }
    let host = layer.host();
    assert_eq!(host.reports.len(), 3);
    let (small, seen) = &host.reports[2];
    assert_eq!((small.opaque, *seen), (1, 3));
    let record = &small.result.as_ref().unwrap_err().record;
    assert_eq!(seen_headers(record), ["stamp"], "the core sent it stamped");
    assert_eq!(
        *acked.lock().unwrap(),
        ["\0\0\0\0\0\0\0\0", "boom", "small"]
    );
}

fn seen_headers(record: &Record) -> Vec<&str> {
    record.headers.iter().map(|h| h.key.as_str()).collect()
}

/// A record the full core refused is held aside and handed over again once reports free
/// space, without going through `on_send` a second time: each record is stamped once and
/// acknowledged once, before the host gets its report.
#[test]
fn a_record_held_aside_goes_through_on_send_once() {
    let config = Config::builder([("127.0.0.1", 9)])
        .buffer_max_records(1)
        .build()
        .unwrap();
    let t0 = Instant::now();
    let mut core = Producer::new(config, t0);
    let queue = CommandQueue::new(64, 1 << 20);
    let acked = Log::default();
    let mut chain = Interceptors::default();
    chain.push(Stamper(acked.clone()));
    let host = Recorder {
        acked: acked.clone(),
        reports: Vec::new(),
        events: Vec::new(),
    };
    let mut layer = DriverLoop::new(host, InjectedPanics::default()).with_interceptors(chain);
    for (value, opaque) in [("first", 1), ("second", 2)] {
        let record = Record::new("t", value);
        let bytes = DriverLoop::<Recorder>::charge(&record);
        let command = Command::Send {
            record,
            opaque,
            bytes,
        };
        queue
            .push(command, bytes, crate::OnFull::Return, |c| c)
            .ok()
            .unwrap();
    }
    let intake = Intake {
        per_call: 16,
        release_every: 4,
    };
    assert!(!layer.take_commands(&mut core, &queue, intake, || t0));
    assert!(!layer.reads_commands(), "the second record is held aside");
    assert_eq!(core.buffered_records(), 1);

    // No broker: the core fails the first record at its deadline, which frees the space the
    // second one waits for; it fails in turn.
    let mut t = t0;
    while layer.host().reports.len() < 2 {
        t += Duration::from_secs(1);
        assert!(
            t < t0 + Duration::from_secs(900),
            "the records were never reported"
        );
        if core.poll_timeout().is_some_and(|d| d <= t) {
            core.handle_timeout(t);
        }
        layer.drain(&mut core, |_, _| {});
        let _ = layer.settle(&mut core, &queue);
        layer.retry_stash(&mut core, &queue, t);
    }
    let host = layer.host();
    for (k, (report, seen)) in host.reports.iter().enumerate() {
        assert_eq!(report.opaque, k as u32 + 1, "reported in order");
        assert_eq!(*seen, k + 1, "acknowledged before the host got it");
        let failure = report.result.as_ref().unwrap_err();
        assert_eq!(
            seen_headers(&failure.record),
            ["stamp"],
            "record {} stamped once",
            report.opaque
        );
    }
    assert_eq!(*acked.lock().unwrap(), ["first", "second"]);
    assert!(
        !host
            .events
            .iter()
            .any(|e| matches!(e, Event::CallbackPanicked { .. })),
        "nothing panicked: {:?}",
        host.events
    );
}

/// Notes the number each record got in `on_send_with_id` and the number each report came with.
struct Numbers(Arc<Mutex<Vec<String>>>);
impl Interceptor for Numbers {
    fn on_send_with_id(&mut self, id: RecordId, record: &mut Record) {
        let value = String::from_utf8_lossy(record.value.as_deref().unwrap_or_default());
        self.0
            .lock()
            .unwrap()
            .push(format!("send {value} {}", id.get()));
    }
    fn on_acknowledgement_with_id(&mut self, id: Option<RecordId>, ack: Acknowledgement<'_>) {
        let value = match ack {
            Acknowledgement::Failed { record, .. } => record.value.clone().unwrap_or_default(),
            Acknowledgement::Delivered(_) => Default::default(),
        };
        let value = String::from_utf8_lossy(&value[..value.len().min(5)]).into_owned();
        let id = id.map_or(0, RecordId::get);
        self.0.lock().unwrap().push(format!("ack {value} {id}"));
    }
}

/// Through the command layer: each record's report comes with the number the chain gave it in
/// `on_send`, whichever way it ends (refused by the core, failed by a panicking interceptor
/// after this one, failed in the core at close); numbers are consecutive from 1.
#[test]
fn each_report_comes_with_its_records_number() {
    let config = Config::builder([("127.0.0.1", 9)])
        .max_request_size(1024)
        .build()
        .unwrap();
    let t0 = Instant::now();
    let mut core = Producer::new(config, t0);
    let queue = CommandQueue::new(64, 1 << 20);
    let numbers = Arc::new(Mutex::new(Vec::new()));
    let mut chain = Interceptors::default();
    chain.push(Numbers(numbers.clone()));
    chain.push(Stamper(Log::default()));
    let host = Recorder {
        acked: Log::default(),
        reports: Vec::new(),
        events: Vec::new(),
    };
    let mut layer = DriverLoop::new(host, InjectedPanics::default()).with_interceptors(chain);
    for (value, opaque) in [("small", 1), ("big", 2), ("boom", 3)] {
        let record = Record::new("t", value);
        let bytes = DriverLoop::<Recorder>::charge(&record);
        let command = Command::Send {
            record,
            opaque,
            bytes,
        };
        queue
            .push(command, bytes, crate::OnFull::Return, |c| c)
            .ok()
            .unwrap();
    }
    let intake = Intake {
        per_call: 16,
        release_every: 4,
    };
    assert!(!layer.take_commands(&mut core, &queue, intake, || t0));
    let mut t = t0;
    core.close(t0);
    while !core.is_closed() {
        t += Duration::from_secs(1);
        assert!(t < t0 + Duration::from_secs(600), "the core never closed");
        if core.poll_timeout().is_some_and(|d| d <= t) {
            core.handle_timeout(t);
        }
        layer.drain(&mut core, |_, _| {});
        let _ = layer.settle(&mut core, &queue);
    }
    assert_eq!(
        *numbers.lock().unwrap(),
        [
            "send small 1",
            "send big 2",
            "ack \0\0\0\0\0 2",
            "send boom 3",
            "ack boom 3",
            "ack small 1"
        ]
    );
}
