//! Panics contained (`producer_driver::panic`): a panicking delivery callback, event callback
//! or token provider leaves the producer running and is named by an event; a panic in the
//! producer's own code (injected into the driver's loop) fails every record it can account
//! for with a typed error and makes every waiting call return. Against librdkafka's mock
//! cluster (and the OAUTHBEARER broker for the token provider). No sleeps: every wait is for a
//! report or a call's return.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use producer_core::{
    AuthError, Callback, Config, Event, ProduceError, Record, SaslConfig, SecurityProtocol,
    TransactionError,
};
use producer_driver::panic::InjectedPanics;

use super::reports_of;
use crate::drive::{Driver, Failure};
use crate::oauth_broker::OAuthBroker;
use crate::running::{Options, Reported, Running, TryRefused};
use crate::MockKafka;

const TOPIC: &str = "panics";

fn cluster() -> MockKafka {
    MockKafka::new(3, &[(TOPIC, 6)]).expect("mock cluster")
}

fn record(id: u64) -> Record {
    Record::new(TOPIC, format!("value-{id}")).with_key(format!("key-{}", id % 7))
}

/// Record `id` came back as it was sent (the driver may have given it a timestamp).
fn assert_handed_back(back: Option<Record>, id: u64) {
    let mut back = back.unwrap_or_else(|| panic!("record {id} not handed back"));
    back.timestamp = None;
    assert_eq!(back, record(id), "record {id} handed back");
}

/// The panics named by events, as `(callback, message)`.
fn panics_named(events: &[Event]) -> Vec<(Callback, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::CallbackPanicked { callback, message } => Some((*callback, message.clone())),
            _ => None,
        })
        .collect()
}

/// A delivery callback that panics on every tenth report: each report still reaches it once,
/// each panic is named by an event, and the producer goes on delivering, flushing and closing.
pub fn a_panicking_delivery_callback_is_contained(driver: Driver) {
    let mock = cluster();
    let mut options = Options::new(Config::builder(mock.bootstrap()).build().unwrap());
    options.on_report = Some(Arc::new(|id: &u64| {
        if id % 10 == 3 {
            panic!("delivery callback bug on record {id}");
        }
    }));
    let p = Running::start(driver, options);
    for id in 0..200 {
        p.send(record(id), id).expect("open");
    }
    p.flush();
    let reports = reports_of(&p, 0..200);
    assert!(reports.values().all(|r| r.result.is_ok()), "all delivered");
    // The producer goes on after the panics.
    for id in 200..220 {
        p.send(record(id), id).expect("still open");
    }
    p.flush();
    let later = reports_of(&p, 200..220);
    assert!(later.values().all(|r| r.result.is_ok()));
    p.close();
    assert!(p.reports().is_empty(), "no report twice");
    let panics = panics_named(&p.events());
    assert_eq!(panics.len(), 22, "one event per panic: {panics:?}");
    for (callback, message) in panics {
        assert_eq!(callback, Callback::Delivery);
        assert!(message.starts_with("delivery callback bug"), "{message}");
    }
}

/// An event callback that panics on every event but the ones naming a panic: the producer
/// goes on, and the callback is told of each of its panics.
pub fn a_panicking_event_callback_is_contained(driver: Driver) {
    let mock = cluster();
    let mut options = Options::new(Config::builder(mock.bootstrap()).build().unwrap());
    options.on_event = Some(Arc::new(|e: &Event| {
        if !matches!(e, Event::CallbackPanicked { .. }) {
            panic!("event callback bug");
        }
    }));
    let p = Running::start(driver, options);
    for id in 0..100 {
        p.send(record(id), id).expect("open");
    }
    p.flush();
    let reports = reports_of(&p, 0..100);
    assert!(reports.values().all(|r| r.result.is_ok()), "all delivered");
    p.close();
    let events = p.events();
    let others = events
        .iter()
        .filter(|e| !matches!(e, Event::CallbackPanicked { .. }))
        .count();
    let panics = panics_named(&events);
    assert!(others > 0, "the producer had events: {events:?}");
    assert_eq!(
        panics.len(),
        others,
        "one panic named per event: {events:?}"
    );
    assert!(panics
        .iter()
        .all(|(c, m)| *c == Callback::Event && m == "event callback bug"));
}

/// A token provider that panics: the connections waiting for its token fail their records
/// (the token is unavailable, the reason naming the panic), the panic is named by an event,
/// and the producer closes.
pub fn a_panicking_token_provider_is_named_by_an_event(driver: Driver) {
    let broker = OAuthBroker::start().expect("broker");
    let config = Config::builder(broker.bootstrap())
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::oauthbearer())
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let mut options = Options::new(config);
    options.tokens = Some(Arc::new(|| panic!("token provider bug")));
    let p = Running::start(driver, options);
    for id in 0..5 {
        p.send(record(id), id).expect("open");
    }
    for (_, r) in reports_of(&p, 0..5) {
        match r.result {
            Err(Failure::Produce(ProduceError::Authentication {
                error: AuthError::TokenUnavailable(reason),
                ..
            })) => assert!(
                reason.contains("panicked") && reason.contains("token provider bug"),
                "{reason}"
            ),
            other => panic!("expected no token, got {other:?}"),
        }
    }
    p.close();
    let panics = panics_named(&p.events());
    assert!(!panics.is_empty());
    assert!(panics
        .iter()
        .all(|(c, m)| *c == Callback::TokenProvider && m == "token provider bug"));
}

/// Records 0..20 are delivered; then the driver's loop panics once 30 records were handed to
/// the core (records 20..30 lingering in its batches, never sent), before it handles record
/// 30. Checks what every case shares: each of the first 20 has its success, each record from
/// 30 on that was accepted fails with the panic and is not persisted (or was refused at
/// `send`: the producer had stopped), and every waiting call returns (flush, close, metrics,
/// sends refused as closed; the producer is not transactional, so it has no transactional call
/// to make, stopped or not). Returns the producer and the reports of
/// records 20..30 (the ones the core held), which `core_reports` says come.
fn panic_in_the_loop(
    driver: Driver,
    in_recovery: bool,
    futures: bool,
    core_reports: bool,
) -> (Running, HashMap<u64, Reported>) {
    let mock = cluster();
    // A long linger: nothing leaves but what a flush sends.
    let config = Config::builder(mock.bootstrap())
        .linger(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut options = Options::new(config);
    options.injected = InjectedPanics {
        after_records: Some(30),
        in_recovery,
    };
    options.futures = futures;
    let p = Running::start(driver, options);
    for id in 0..20 {
        p.send(record(id), id).expect("open");
    }
    p.flush();
    for (_, r) in reports_of(&p, 0..20) {
        assert!(
            r.result.is_ok(),
            "delivered before the panic: {:?}",
            r.result
        );
    }
    let mut accepted = Vec::new();
    for id in 20..60 {
        if p.send(record(id), id).is_ok() {
            accepted.push(id);
        }
    }
    assert!(
        accepted.starts_with(&(20..31).collect::<Vec<_>>()),
        "the loop takes records until it panics: {accepted:?}"
    );
    // Every waiting call returns, with what the producer had or a typed refusal.
    p.flush();
    p.close();
    assert!(p.is_closed());
    assert_calls_return_after_the_panic(&p, !in_recovery);
    assert!(
        p.transactions().is_none(),
        "not transactional: no transactional call to make"
    );
    let from_queue: Vec<u64> = accepted.iter().copied().filter(|&id| id >= 30).collect();
    let from_core = if core_reports { 20..30 } else { 20..20 };
    let mut reports = reports_of(&p, from_queue.iter().copied().chain(from_core));
    for id in from_queue {
        let r = reports.remove(&id).expect("reported");
        match r.result {
            Err(Failure::Produce(ProduceError::Panicked {
                message,
                possibly_persisted: false,
            })) => assert!(message.contains("injected panic"), "{message}"),
            other => panic!("record {id}: expected the panic's failure, got {other:?}"),
        }
        assert_handed_back(r.record, id);
    }
    assert!(p.reports().is_empty(), "no other report");
    (p, reports)
}

/// After a panic in the loop stopped the producer: metrics still answer (with the core's last
/// snapshot, when `core_trusted`), and a send is refused as closed, its record handed back
/// (never `Full`, which would have the caller retry forever).
fn assert_calls_return_after_the_panic(p: &Running, core_trusted: bool) {
    let metrics = p.metrics();
    if core_trusted {
        assert!(metrics.is_some(), "the last snapshot is kept");
    }
    match p.try_send(record(99), 99) {
        Err(TryRefused::Closed(back)) => assert_handed_back(Some(back), 99),
        Err(TryRefused::Full(_)) => panic!("a send after the panic was refused as full"),
        Ok(()) => panic!("a send after the panic was accepted"),
    }
    match p.send(record(98), 98) {
        Err(refused) => assert_handed_back(Some(refused.0), 98),
        Ok(()) => panic!("a send after the panic was accepted"),
    }
}

/// A panic in the driver's own loop closes the producer: the records the core held fail with
/// the panic's message, not persisted (they lingered, never sent), and come back; so does
/// every record still queued; every waiting call returns.
pub fn a_panic_in_the_loop_fails_every_record(driver: Driver) {
    // tokio: through delivery futures (the other tests use its callback).
    let futures = driver == Driver::Tokio;
    let (p, reports) = panic_in_the_loop(driver, false, futures, true);
    for (id, r) in reports {
        match r.result {
            Err(Failure::Produce(ProduceError::Panicked {
                possibly_persisted: false,
                ..
            })) => assert_handed_back(r.record, id),
            other => panic!("record {id}: expected the panic's failure, got {other:?}"),
        }
    }
    let events = p.events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Fatal(ProduceError::Panicked { .. }))),
        "the fatal error is an event: {events:?}"
    );
}

/// When failing the records after a panic panics too, the core is not trusted again: the
/// records it held get no report from it (with tokio's delivery futures: each resolves as
/// lost when the core is dropped), the records still queued fail with the panic, and every
/// waiting call still returns.
pub fn a_panic_while_failing_the_records_still_returns_every_call(driver: Driver) {
    let futures = driver == Driver::Tokio;
    let (_p, reports) = panic_in_the_loop(driver, true, futures, futures);
    for (id, r) in reports {
        assert!(
            matches!(r.result, Err(Failure::Lost)),
            "record {id}: {:?}",
            r.result
        );
    }
}

/// A panic in the loop of a transactional producer in the middle of a transaction: the
/// records the broker acknowledged (the transaction's flush waited for that) fail with the
/// panic marked `possibly_persisted` (they are in the log, their transaction never commits),
/// the record never handed over fails not persisted, and `commit` and every later
/// transactional call return the producer's fatal error, naming the panic.
pub fn a_panic_in_a_transaction_fails_its_records_honestly(driver: Driver) {
    let mock = cluster();
    let config = mock
        .producer_config()
        .transactional_id(format!("panics-{driver:?}"))
        .build()
        .unwrap();
    let mut options = Options::new(config);
    options.injected = InjectedPanics {
        after_records: Some(10),
        in_recovery: false,
    };
    let p = Running::start(driver, options);
    let txn = p.transactions().expect("transactional");
    txn.init().expect("init");
    txn.begin().expect("begin");
    for id in 0..10 {
        p.send(record(id), id).expect("open");
    }
    // A transactional flush returns once every record is acknowledged (reports wait for the
    // transaction's end).
    p.flush();
    assert!(p.reports().is_empty(), "reports wait for the transaction");
    // The loop panics as it is about to hand record 10 to the core.
    p.send(record(10), 10).expect("queued before the panic");
    let reports = reports_of(&p, 0..11);
    for (id, r) in &reports {
        let written = *id < 10;
        match &r.result {
            Err(Failure::Produce(ProduceError::Panicked {
                message,
                possibly_persisted,
            })) => {
                assert!(message.contains("injected panic"), "{message}");
                assert_eq!(
                    *possibly_persisted, written,
                    "record {id}: acknowledged records may be in the log, the last never went out"
                );
            }
            other => panic!("record {id}: expected the panic's failure, got {other:?}"),
        }
        assert_handed_back(r.record.clone(), *id);
    }
    let fatal = |r: Result<(), TransactionError>| match r {
        Err(TransactionError::Fatal { message, .. }) => {
            let message = message.unwrap_or_default();
            assert!(message.contains("injected panic"), "{message}");
        }
        other => panic!("expected the fatal error that names the panic, got {other:?}"),
    };
    fatal(txn.commit());
    fatal(txn.begin());
    p.flush();
    p.close();
    assert!(p.is_closed());
    assert_calls_return_after_the_panic(&p, true);
    assert!(p.reports().is_empty(), "no other report");
}
