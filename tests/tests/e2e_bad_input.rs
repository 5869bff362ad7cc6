//! Bad input through both drivers against librdkafka's mock cluster: each case gets a clear,
//! typed error with the record handed back, while good records around it are delivered and
//! read back intact.
//!
//! * a topic the cluster says does not exist (the mock auto-creates topics on Metadata, so it
//!   is made unknown with a topic-level UNKNOWN_TOPIC_OR_PARTITION), after `max_block`;
//! * a record larger than `max_request_size`;
//! * a partition the topic does not have;
//! * an unreachable bootstrap address (the core fails held records with `DeliveryTimeout`,
//!   certainly not written, when it never reached the cluster);
//! * sending after close.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use producer_core::{Config, Delivery, ProduceError, Record, SendErrorReason};
use producer_tests::drive::{core_report, tokio_report};
use producer_tests::{dead_port, produce, runtime, verify, Driver, Expect, Pacing, ID_HEADER};
use producer_tests::{errors, MockKafka};
use producer_tokio::{DeliveryError, SendError, TrySendError};

const GOOD: &str = "good";
const GHOST: &str = "ghost";

fn good(i: usize) -> Record {
    Record::new(GOOD, format!("good-{i}"))
        .with_key(format!("k{i}"))
        .with_timestamp(1_700_000_000_000 + i as i64)
        .with_header(ID_HEADER, Some(Bytes::from(i.to_string())))
}

fn bad(topic: &str, what: &str) -> Record {
    Record::new(topic, format!("bad-{what}"))
        .with_key("bad-key")
        .with_timestamp(1_700_000_000_000)
        .with_header("h", Some(Bytes::from_static(b"v")))
}

/// Runs `sends` (good records interleaved with one bad record each) through the tokio
/// driver; returns the bad records' errors in order and checks the good ones end to end.
fn tokio_case(mock: &MockKafka, config: Config, bads: Vec<Record>) -> Vec<(DeliveryError, Record)> {
    let goods: Vec<Record> = (0..bads.len() * 10 + 10).map(good).collect();
    let rt = runtime();
    let (errs, good_reports) = rt.block_on(async {
        let h = producer_tokio::ProducerHandle::start(config).unwrap();
        let mut good_f = Vec::new();
        let mut bad_f = Vec::new();
        for (i, g) in goods.iter().enumerate() {
            good_f.push(h.send(g.clone()).await.unwrap());
            if i % 10 == 5 && bad_f.len() < bads.len() {
                let b = bads[bad_f.len()].clone();
                bad_f.push((h.send(b.clone()).await.unwrap(), b));
            }
        }
        let mut errs = Vec::new();
        for (f, sent) in bad_f {
            match f.await {
                Ok(m) => panic!("bad record {sent:?} delivered at {m:?}"),
                Err(e) => errs.push((e, sent)),
            }
        }
        let mut reports = Vec::new();
        for f in good_f {
            reports.push(vec![tokio_report(f.await).0]);
        }
        h.close().await;
        (errs, reports)
    });
    check_goods(mock, &goods, good_reports);
    errs
}

/// The same through the threaded mio producer; returns the bad records' failures.
fn mio_case(
    mock: &MockKafka,
    config: Config,
    bads: Vec<Record>,
) -> Vec<(producer_core::DeliveryFailure, Record)> {
    let goods: Vec<Record> = (0..bads.len() * 10 + 10).map(good).collect();
    let (tx, rx) = mpsc::channel::<Delivery<(bool, usize)>>();
    let p = producer_mio::ThreadedProducer::<(bool, usize)>::spawn(config, 256, move |d| {
        let _ = tx.send(d);
    })
    .unwrap();
    let mut nbad = 0;
    for (i, g) in goods.iter().enumerate() {
        p.send_with(g.clone(), (true, i)).unwrap();
        if i % 10 == 5 && nbad < bads.len() {
            p.send_with(bads[nbad].clone(), (false, nbad)).unwrap();
            nbad += 1;
        }
    }
    let mut good_reports: producer_tests::Reports = vec![Vec::new(); goods.len()];
    let mut errs: Vec<Option<producer_core::DeliveryFailure>> = vec![None; bads.len()];
    let mut bad_left = bads.len();
    while bad_left > 0 || good_reports.iter().any(Vec::is_empty) {
        let d = rx.recv_timeout(Duration::from_secs(30)).expect("a report");
        match d.opaque {
            (true, i) => good_reports[i].push(core_report(d).1),
            (false, i) => {
                let e = d
                    .result
                    .err()
                    .unwrap_or_else(|| panic!("bad record {i} delivered"));
                assert!(
                    errs[i].replace(*e).is_none(),
                    "two reports for bad record {i}"
                );
                bad_left -= 1;
            }
        }
    }
    p.close();
    assert!(
        rx.try_recv().is_err(),
        "a report after every record had one"
    );
    check_goods(mock, &goods, good_reports);
    errs.into_iter()
        .zip(bads)
        .map(|(e, b)| (e.unwrap(), b))
        .collect()
}

fn check_goods(mock: &MockKafka, goods: &[Record], reports: producer_tests::Reports) {
    let run = producer_tests::Run {
        returned: vec![None; reports.len()],
        reports,
        start_ms: 0,
        end_ms: 0,
        elapsed: Duration::ZERO,
    };
    verify(
        &mock.bootstrap_servers(),
        &[(GOOD, 3)],
        goods,
        &run,
        Expect::ExactlyOnce,
        false,
    );
}

fn mock() -> MockKafka {
    MockKafka::new(3, &[(GOOD, 3), ("small", 2)]).unwrap()
}

// ---- unknown topic ----

fn unknown_topic_config(mock: &MockKafka) -> Config {
    mock.producer_config()
        .max_block(Duration::from_millis(500))
        .build()
        .unwrap()
}

#[test]
fn tokio_unknown_topic_fails_after_max_block_with_the_record() {
    let mock = mock();
    mock.topic_error(GHOST, errors::UNKNOWN_TOPIC_OR_PARTITION)
        .unwrap();
    let sent = bad(GHOST, "unknown-topic");
    let errs = tokio_case(&mock, unknown_topic_config(&mock), vec![sent]);
    let (e, sent) = errs.into_iter().next().unwrap();
    match e {
        DeliveryError::Failed(f) => {
            assert_eq!(f.error, ProduceError::UnknownTopic, "{f:?}");
            assert_eq!(f.record, sent);
        }
        other => panic!("expected Failed(UnknownTopic), got {other:?}"),
    }
}

#[test]
fn mio_unknown_topic_fails_after_max_block_with_the_record() {
    let mock = mock();
    mock.topic_error(GHOST, errors::UNKNOWN_TOPIC_OR_PARTITION)
        .unwrap();
    let sent = bad(GHOST, "unknown-topic");
    let errs = mio_case(&mock, unknown_topic_config(&mock), vec![sent]);
    let (f, sent) = errs.into_iter().next().unwrap();
    assert_eq!(f.error, ProduceError::UnknownTopic, "{f:?}");
    assert_eq!(f.record, sent);
}

// ---- too large, and a partition that does not exist ----

fn too_large() -> Record {
    let mut r = bad(GOOD, "too-large");
    r.value = Some(Bytes::from(vec![b'x'; 20_000]));
    r
}

fn no_such_partition() -> Record {
    bad("small", "no-such-partition").with_partition(7)
}

fn small_requests(mock: &MockKafka) -> Config {
    mock.producer_config()
        .max_request_size(10_000)
        .build()
        .unwrap()
}

#[test]
fn tokio_too_large_and_missing_partition_come_back_typed() {
    let mock = mock();
    let errs = tokio_case(
        &mock,
        small_requests(&mock),
        vec![too_large(), no_such_partition()],
    );
    let mut errs = errs.into_iter();
    let (e, sent) = errs.next().unwrap();
    match e {
        DeliveryError::Failed(f) => match (&f.error, &f.record) {
            (ProduceError::Refused(reason), record) => {
                let SendErrorReason::RecordTooLarge { size, max } = **reason else {
                    panic!("expected Refused(RecordTooLarge), got {reason:?}")
                };
                assert!(size > 20_000 && max == 10_000, "{size} {max}");
                assert_eq!(*record, sent);
            }
            (other, _) => panic!("expected Refused(RecordTooLarge), got {other:?}"),
        },
        other => panic!("expected Refused(RecordTooLarge), got {other:?}"),
    }
    let (e, sent) = errs.next().unwrap();
    match e {
        DeliveryError::Failed(f) => {
            assert!(
                f.error
                    == ProduceError::UnknownPartition {
                        partition: 7,
                        count: 2
                    }
                    || f.error
                        == ProduceError::Refused(Box::new(SendErrorReason::InvalidPartition(7))),
                "expected UnknownPartition, got {:?}",
                f.error
            );
            assert_eq!(f.record, sent);
        }
        other => panic!("expected UnknownPartition, got {other:?}"),
    }
}

#[test]
fn mio_too_large_and_missing_partition_come_back_typed() {
    let mock = mock();
    let errs = mio_case(
        &mock,
        small_requests(&mock),
        vec![too_large(), no_such_partition()],
    );
    let mut errs = errs.into_iter();
    let (f, sent) = errs.next().unwrap();
    assert!(
        matches!(&f.error, ProduceError::Refused(r)
            if matches!(&**r, SendErrorReason::RecordTooLarge { size, .. } if *size > 20_000)),
        "{:?}",
        f.error
    );
    assert_eq!(f.record, sent);
    let (f, sent) = errs.next().unwrap();
    assert!(
        match &f.error {
            // Refused when the driver handed it over (metadata known by then) ...
            ProduceError::Refused(r) => matches!(&**r, SendErrorReason::InvalidPartition(7)),
            // ... or failed when its topic's metadata arrived.
            ProduceError::UnknownPartition { partition, .. } => *partition == 7,
            _ => false,
        },
        "{:?}",
        f.error
    );
    assert_eq!(f.record, sent);
}

#[test]
fn mio_embedded_too_large_is_refused_at_send() {
    let mock = mock();
    let mut poll = mio::Poll::new().unwrap();
    let mut d = producer_mio::MioDriver::<u32>::new(
        small_requests(&mock),
        poll.registry(),
        producer_mio::TokenRange::new(mio::Token(0), 8),
    )
    .unwrap();
    let sent = too_large();
    let e = d.send(sent.clone(), 7).unwrap_err();
    assert!(
        matches!(
            e.reason,
            SendErrorReason::RecordTooLarge { max: 10_000, .. }
        ),
        "{:?}",
        e.reason
    );
    assert_eq!((e.record, e.opaque), (sent, 7));
    d.close();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut events = mio::Events::with_capacity(16);
    while !d.is_closed() {
        assert!(Instant::now() < deadline);
        poll.poll(&mut events, d.next_timeout()).unwrap();
        for ev in events.iter() {
            d.handle_event(ev);
        }
        d.handle_timeout();
    }
    // Sending after close: the record comes back.
    let sent = good(0);
    let e = d.send(sent.clone(), 8).unwrap_err();
    assert_eq!(e.reason, SendErrorReason::Closed);
    assert_eq!((e.record, e.opaque), (sent, 8));
}

// ---- unreachable bootstrap ----

fn unreachable_config() -> Config {
    Config::builder([("127.0.0.1", dead_port())])
        .max_block(Duration::from_secs(1))
        .request_timeout(Duration::from_millis(500))
        .delivery_timeout(Duration::from_secs(3))
        .reconnect_backoff(Duration::from_millis(20))
        .build()
        .unwrap()
}

/// The records of a producer that never reached its cluster fail with a delivery timeout that
/// says they were certainly not written, and names the refused connection (the bootstrap
/// address and the OS error). (When they fail, `min(max_block, delivery_timeout)`, is the
/// core's business: `producer-core`'s own tests check it in virtual time; a wall-clock bound
/// here would only measure the machine's load.)
fn assert_never_reached(error: &ProduceError) {
    let ProduceError::DeliveryTimeout {
        possibly_persisted: false,
        last_connection_error: Some(cause),
    } = error
    else {
        panic!("expected a delivery timeout naming the connection error, got {error:?}");
    };
    assert_eq!(cause.kind, std::io::ErrorKind::ConnectionRefused, "{cause}");
    assert_eq!(cause.node_id, -1, "{cause}");
    assert!(!cause.established, "{cause}");
    assert!(cause.address.starts_with("127.0.0.1:"), "{cause}");
    let shown = error.to_string();
    assert!(
        shown.contains(&cause.address) && shown.contains("refused"),
        "the message names the address and the refusal: {shown}"
    );
}

#[test]
fn tokio_unreachable_bootstrap_fails_records_with_delivery_timeout() {
    let rt = runtime();
    rt.block_on(async {
        let h = producer_tokio::ProducerHandle::start(unreachable_config()).unwrap();
        let sent: Vec<Record> = (0..5).map(good).collect();
        let mut fs = Vec::new();
        for r in &sent {
            fs.push(h.send(r.clone()).await.unwrap());
        }
        for (f, r) in fs.into_iter().zip(&sent) {
            match f.await {
                Err(DeliveryError::Failed(fail)) => {
                    assert_never_reached(&fail.error);
                    assert_eq!(&fail.record, r);
                }
                other => panic!("expected Failed(DeliveryTimeout), got {other:?}"),
            }
        }
        h.close().await;
    });
}

#[test]
fn mio_unreachable_bootstrap_fails_records_with_delivery_timeout() {
    let (tx, rx) = mpsc::channel::<Delivery<usize>>();
    let p = producer_mio::ThreadedProducer::<usize>::spawn(unreachable_config(), 16, move |d| {
        let _ = tx.send(d);
    })
    .unwrap();
    let sent: Vec<Record> = (0..5).map(good).collect();
    for (i, r) in sent.iter().enumerate() {
        p.send_with(r.clone(), i).unwrap();
    }
    for _ in 0..sent.len() {
        let d = rx.recv_timeout(Duration::from_secs(10)).expect("a report");
        let f = d.result.expect_err("delivered to nowhere");
        assert_never_reached(&f.error);
        assert_eq!(f.record, sent[d.opaque]);
    }
    p.close();
    assert!(rx.try_recv().is_err());
}

// ---- sending after close ----

#[test]
fn tokio_send_after_close_hands_the_record_back() {
    let mock = mock();
    let goods: Vec<Record> = (0..100).map(good).collect();
    let rt = runtime();
    let reports = rt.block_on(async {
        let h =
            producer_tokio::ProducerHandle::start(mock.producer_config().build().unwrap()).unwrap();
        let other = h.clone();
        let mut fs = Vec::new();
        for r in &goods {
            fs.push(h.send(r.clone()).await.unwrap());
        }
        h.close().await;
        assert!(other.is_closed());
        let late = good(1000);
        match other.send(late.clone()).await {
            Err(SendError::Closed(r)) => assert_eq!(r, late),
            Err(e) => panic!("send after close: {e:?}"),
            Ok(_) => panic!("send after close accepted"),
        }
        match other.try_send(late.clone()) {
            Err(TrySendError::Closed(r)) => assert_eq!(r, late),
            other => panic!("try_send after close: {other:?}"),
        }
        let mut reports = Vec::new();
        for f in fs {
            reports.push(vec![tokio_report(f.await).0]);
        }
        reports
    });
    check_goods(&mock, &goods, reports);
}

#[test]
fn mio_send_after_close_hands_the_record_back() {
    let mock = mock();
    let goods: Vec<Record> = (0..100).map(good).collect();
    let run = produce(
        Driver::MioThreaded,
        mock.producer_config().build().unwrap(),
        &goods,
        &Pacing::burst(),
        &mut |_| {},
    );
    verify(
        &mock.bootstrap_servers(),
        &[(GOOD, 3)],
        &goods,
        &run,
        Expect::ExactlyOnce,
        false,
    );

    let p = producer_mio::ThreadedProducer::<u8>::spawn(
        mock.producer_config().build().unwrap(),
        4,
        |_| {},
    )
    .unwrap();
    let other = p.clone();
    p.close();
    assert!(other.is_closed());
    let late = good(1000);
    match other.send_with(late.clone(), 9) {
        Err(producer_mio::TrySendError::Closed(r, o)) => assert_eq!((r, o), (late, 9)),
        other => panic!("send after close: {other:?}"),
    }
}
