//! Proves the test-support layer: the mock cluster takes real librdkafka production, the fault
//! injection calls take effect, and `read_back` returns exactly what was written.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use producer_tests::rdkafka::config::ClientConfig;
use producer_tests::rdkafka::error::KafkaError;
use producer_tests::rdkafka::message::{Header, Message, OwnedHeaders};
use producer_tests::rdkafka::producer::{
    BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext,
};
use producer_tests::rdkafka::types::RDKafkaErrorCode;
use producer_tests::rdkafka::{ClientContext, Timestamp};
use producer_tests::{api, errors, parse_bootstrap, read_back, read_back_all, MockKafka};

/// What the producer's delivery callback saw for record number `id`.
#[derive(Debug, Clone, PartialEq)]
enum Report {
    Ok { partition: i32, offset: i64 },
    Err(RDKafkaErrorCode),
}

/// Delivery reports by record id, and how many times librdkafka said it could not reach a
/// broker (its error callback: transport failure, all brokers down).
#[derive(Default)]
struct Reports(Mutex<HashMap<usize, Report>>, AtomicUsize);

impl ClientContext for Reports {
    fn error(&self, error: KafkaError, reason: &str) {
        let unreachable = matches!(
            error.rdkafka_error_code(),
            Some(RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::AllBrokersDown)
        );
        if unreachable {
            self.1.fetch_add(1, Ordering::Relaxed);
        } else {
            eprintln!("librdkafka error: {error} ({reason})");
        }
    }
}

impl ProducerContext for Reports {
    type DeliveryOpaque = usize;
    fn delivery(&self, r: &DeliveryResult<'_>, id: usize) {
        let rep = match r {
            Ok(m) => Report::Ok {
                partition: m.partition(),
                offset: m.offset(),
            },
            Err((e, _)) => Report::Err(e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail)),
        };
        assert!(
            self.0.lock().unwrap().insert(id, rep).is_none(),
            "two delivery reports for record {id}"
        );
    }
}

fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> BaseProducer<Reports> {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("retry.backoff.ms", "20")
        .set("message.timeout.ms", "20000");
    for (k, v) in extra {
        cfg.set(*k, *v);
    }
    cfg.create_with_context(Reports::default())
        .expect("create producer")
}

/// A record as the test generates it.
struct Sent {
    topic: &'static str,
    key: Vec<u8>,
    value: Vec<u8>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp: i64,
}

const BASE_TS: i64 = 1_700_000_000_000;

/// A broker id the 2-broker mock does not have.
const NO_SUCH_BROKER: i32 = 9;

fn make(id: usize, topic: &'static str) -> Sent {
    Sent {
        topic,
        key: format!("key-{}", id % 97).into_bytes(),
        value: format!("value-{id}-{}", "x".repeat(id % 50)).into_bytes(),
        headers: vec![
            ("id".to_string(), Some(id.to_be_bytes().to_vec())),
            ("empty".to_string(), Some(Vec::new())),
            ("null".to_string(), None),
        ],
        timestamp: BASE_TS + id as i64,
    }
}

fn send(p: &BaseProducer<Reports>, id: usize, s: &Sent) {
    let mut h = OwnedHeaders::new();
    for (k, v) in &s.headers {
        h = h.insert(Header {
            key: k,
            value: v.as_deref(),
        });
    }
    let rec = BaseRecord::with_opaque_to(s.topic, id)
        .key(&s.key[..])
        .payload(&s.value[..])
        .headers(h)
        .timestamp(s.timestamp);
    if let Err((e, _)) = p.send(rec) {
        panic!("send {id}: {e}");
    }
    p.poll(Duration::ZERO);
}

/// Checks that every record was delivered exactly once and that `read` (one topic) holds, at the
/// reported partition and offset, exactly the fields that were sent.
fn assert_read_back_matches(
    sent: &[Sent],
    reports: &HashMap<usize, Report>,
    topic: &str,
    read: &[producer_tests::Consumed],
) {
    let by_pos: HashMap<(i32, i64), &producer_tests::Consumed> =
        read.iter().map(|c| ((c.partition, c.offset), c)).collect();
    assert_eq!(by_pos.len(), read.len(), "duplicate offsets in read back");
    let mut matched = 0;
    for (id, s) in sent.iter().enumerate().filter(|(_, s)| s.topic == topic) {
        let Some(Report::Ok { partition, offset }) = reports.get(&id) else {
            panic!("record {id} not delivered: {:?}", reports.get(&id));
        };
        let c = by_pos
            .get(&(*partition, *offset))
            .unwrap_or_else(|| panic!("record {id} at {partition}/{offset} not read back"));
        assert_eq!(c.topic, topic);
        assert_eq!(c.key.as_deref(), Some(&s.key[..]), "key of {id}");
        assert_eq!(c.value.as_deref(), Some(&s.value[..]), "value of {id}");
        assert_eq!(c.headers, s.headers, "headers of {id}");
        assert_eq!(
            c.timestamp,
            Timestamp::CreateTime(s.timestamp),
            "ts of {id}"
        );
        matched += 1;
    }
    assert_eq!(
        matched,
        read.len(),
        "read back has records that were not sent"
    );
}

#[test]
fn bootstrap_lists_every_broker_and_accepts_connections() {
    let mock = MockKafka::new(3, &[("t", 2)]).unwrap();
    let b = mock.bootstrap();
    assert_eq!(b.len(), 3, "{b:?}");
    assert_eq!(parse_bootstrap(&mock.bootstrap_servers()), b);
    let mut ports: Vec<u16> = b.iter().map(|(_, p)| *p).collect();
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 3, "ports must be distinct: {b:?}");
    for (h, p) in &b {
        assert_eq!(h, "127.0.0.1");
        TcpStream::connect((h.as_str(), *p)).expect("connect to mock broker");
    }
    // The topic exists already: creating it again fails.
    assert!(mock.create_topic("t", 2).is_err());
    assert_eq!(
        parse_bootstrap("a:1, b:2,bad,c:x"),
        vec![("a".to_string(), 1), ("b".to_string(), 2)]
    );
}

#[test]
fn thousand_keyed_records_with_headers_round_trip_on_two_topics() {
    let mock = MockKafka::new(3, &[("alpha", 6), ("beta", 3)]).unwrap();
    let bs = mock.bootstrap_servers();
    let p = producer(&bs, &[]);
    let sent: Vec<Sent> = (0..1000)
        .map(|i| make(i, if i % 3 == 0 { "beta" } else { "alpha" }))
        .collect();
    for (id, s) in sent.iter().enumerate() {
        send(&p, id, s);
    }
    p.flush(Duration::from_secs(20)).expect("flush");
    let reports = p.context().0.lock().unwrap().clone();
    assert_eq!(reports.len(), 1000);

    let n_beta = sent.iter().filter(|s| s.topic == "beta").count();
    let alpha = read_back(&bs, "alpha", 6, 1000 - n_beta, Duration::from_secs(20));
    let beta = read_back(&bs, "beta", 3, n_beta, Duration::from_secs(20));
    assert_eq!(alpha.len(), 1000 - n_beta);
    assert_eq!(beta.len(), n_beta);
    assert_read_back_matches(&sent, &reports, "alpha", &alpha);
    assert_read_back_matches(&sent, &reports, "beta", &beta);
    // Records were spread over all partitions (keys hash to several).
    let parts: std::collections::BTreeSet<i32> = alpha.iter().map(|c| c.partition).collect();
    assert_eq!(parts.len(), 6, "{parts:?}");

    // read_back_all sees the same set and nothing more.
    let all = read_back_all(&bs, "beta", 3, Duration::from_secs(20));
    assert_eq!(all, beta);
}

#[test]
fn leader_moves_broker_outage_and_rtt_mid_stream_lose_nothing() {
    let mock = MockKafka::new(3, &[("moves", 4)]).unwrap();
    let bs = mock.bootstrap_servers();
    mock.start_request_tracking();
    let p = producer(&bs, &[("enable.idempotence", "true")]);
    let sent: Vec<Sent> = (0..900).map(|i| make(i, "moves")).collect();
    let deliver = |range: std::ops::Range<usize>| {
        for id in range {
            send(&p, id, &sent[id]);
        }
    };

    deliver(0..300);
    p.flush(Duration::from_secs(10)).expect("flush 1");
    // Move every partition's leadership to broker 3, then slow broker 3 down.
    for part in 0..4 {
        mock.set_leader("moves", part, Some(3)).unwrap();
    }
    mock.set_rtt(3, Duration::from_millis(30)).unwrap();
    deliver(300..600);
    p.flush(Duration::from_secs(10)).expect("flush 2");
    mock.set_rtt(-1, Duration::ZERO).unwrap();

    // Take the leader down while records are queued, then bring it back. While the only
    // leader is down nothing of the new records can be delivered: serve librdkafka's events for
    // a while (its connection attempts and their refusals), then check none was.
    mock.broker_down(3).unwrap();
    deliver(600..900);
    for _ in 0..20 {
        p.poll(Duration::from_millis(50));
    }
    let pending = p.in_flight_count();
    assert_eq!(
        pending, 300,
        "with the only leader down nothing can be delivered"
    );
    mock.broker_up(3).unwrap();
    p.flush(Duration::from_secs(15)).expect("flush 3");

    let reports = p.context().0.lock().unwrap().clone();
    assert_eq!(reports.len(), 900);
    let read = read_back_all(&bs, "moves", 4, Duration::from_secs(20));
    assert_eq!(read.len(), 900, "exactly the records sent, no duplicates");
    assert_read_back_matches(&sent, &reports, "moves", &read);
    // Per partition, offsets are dense from 0.
    for part in 0..4 {
        let offs: Vec<i64> = read
            .iter()
            .filter(|c| c.partition == part)
            .map(|c| c.offset)
            .collect();
        assert_eq!(offs, (0..offs.len() as i64).collect::<Vec<_>>());
    }
    // After the move every Produce went to broker 3; request tracking saw that.
    let reqs = mock.requests();
    let produce_brokers: std::collections::BTreeSet<i32> = reqs
        .iter()
        .filter(|r| r.api_key == api::PRODUCE)
        .map(|r| r.broker_id)
        .collect();
    assert!(produce_brokers.contains(&3), "{produce_brokers:?}");
    assert!(reqs.iter().any(|r| r.api_key == api::INIT_PRODUCER_ID));
    mock.clear_requests();
    mock.stop_request_tracking();
}

/// Produces one record with `retries` after injecting `error` once; returns its delivery report.
fn produce_one_with_error(error: i32, retries: &str) -> (Report, usize) {
    let mock = MockKafka::new(1, &[("err", 1)]).unwrap();
    let bs = mock.bootstrap_servers();
    mock.push_request_errors(api::PRODUCE, &[error]);
    let p = producer(&bs, &[("retries", retries)]);
    send(&p, 0, &make(0, "err"));
    p.flush(Duration::from_secs(10)).expect("flush");
    let report = p.context().0.lock().unwrap()[&0].clone();
    let stored = read_back_all(&bs, "err", 1, Duration::from_secs(10)).len();
    (report, stored)
}

#[test]
fn injected_produce_error_reaches_the_delivery_callback() {
    // A permanent error fails the record at once.
    assert_eq!(
        produce_one_with_error(errors::MESSAGE_TOO_LARGE, "5"),
        (Report::Err(RDKafkaErrorCode::MessageSizeTooLarge), 0)
    );
    // A retriable one fails it when no retries are allowed.
    assert_eq!(
        produce_one_with_error(errors::NOT_ENOUGH_REPLICAS, "0"),
        (Report::Err(RDKafkaErrorCode::NotEnoughReplicas), 0)
    );
    // NOT_LEADER_OR_FOLLOWER is not counted against `retries` by librdkafka (it refreshes
    // metadata and requeues): even with retries=0 the record is delivered.
    assert_eq!(
        produce_one_with_error(errors::NOT_LEADER_OR_FOLLOWER, "0"),
        (
            Report::Ok {
                partition: 0,
                offset: 0
            },
            1
        )
    );
}

#[test]
fn injected_produce_errors_are_retried_by_the_producer() {
    let mock = MockKafka::new(1, &[("retry", 1)]).unwrap();
    let bs = mock.bootstrap_servers();
    mock.start_request_tracking();
    mock.push_request_errors(
        api::PRODUCE,
        &[errors::NOT_LEADER_OR_FOLLOWER, errors::NOT_ENOUGH_REPLICAS],
    );
    let p = producer(&bs, &[]);
    let s = make(7, "retry");
    send(&p, 0, &s);
    p.flush(Duration::from_secs(10)).expect("flush");
    let reports = p.context().0.lock().unwrap().clone();
    assert_eq!(
        reports.get(&0),
        Some(&Report::Ok {
            partition: 0,
            offset: 0
        })
    );
    let produces = mock
        .requests()
        .iter()
        .filter(|r| r.api_key == api::PRODUCE)
        .count();
    assert_eq!(produces, 3, "two failed attempts, then the successful one");
    let read = read_back(&bs, "retry", 1, 1, Duration::from_secs(10));
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].value.as_deref(), Some(&s.value[..]));
}

#[test]
fn per_broker_errors_stack_and_drain() {
    let mock = MockKafka::new(2, &[("pb", 2)]).unwrap();
    let bs = mock.bootstrap_servers();
    // Three errors with a small delay on broker 1, non-retriable last: so the record fails with
    // it if it is led by broker 1; first check the stack bookkeeping.
    mock.push_broker_request_errors(
        1,
        api::PRODUCE,
        &[
            (errors::NOT_LEADER_OR_FOLLOWER, Duration::from_millis(10)),
            (errors::REQUEST_TIMED_OUT, Duration::from_millis(10)),
        ],
    )
    .unwrap();
    assert_eq!(mock.broker_error_stack_len(1, api::PRODUCE).unwrap(), 2);
    assert_eq!(mock.broker_error_stack_len(2, api::PRODUCE).unwrap(), 0);
    assert!(mock
        .broker_error_stack_len(NO_SUCH_BROKER, api::PRODUCE)
        .is_err());
    assert!(mock
        .push_broker_request_errors(
            NO_SUCH_BROKER,
            api::PRODUCE,
            &[(errors::NOT_LEADER_OR_FOLLOWER, Duration::ZERO)]
        )
        .is_err());

    // Put both partitions on broker 1 and produce: the two errors are consumed by retries.
    mock.set_leader("pb", 0, Some(1)).unwrap();
    mock.set_leader("pb", 1, Some(1)).unwrap();
    let p = producer(&bs, &[]);
    let s = make(1, "pb");
    send(&p, 0, &s);
    p.flush(Duration::from_secs(10)).expect("flush");
    assert!(matches!(
        p.context().0.lock().unwrap().get(&0),
        Some(Report::Ok { .. })
    ));
    assert_eq!(mock.broker_error_stack_len(1, api::PRODUCE).unwrap(), 0);
}

#[test]
fn topic_error_and_api_version_limits_are_accepted() {
    let mock = MockKafka::new(1, &[("te", 1)]).unwrap();
    mock.topic_error("te", errors::LEADER_NOT_AVAILABLE)
        .unwrap();
    mock.topic_error("te", 0).unwrap();
    mock.set_api_version(api::PRODUCE, Some(3), Some(7))
        .unwrap();
    // Unknown API keys are refused.
    assert!(mock.set_api_version(999, Some(0), Some(1)).is_err());
    mock.clear_request_errors(api::PRODUCE);
}

#[test]
fn mock_cluster_binary_prints_bootstrap_and_exits_when_stdin_closes() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mock_cluster"))
        .args([
            "--brokers",
            "2",
            "--topic",
            "bench:12",
            "--topic",
            "other:1",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn mock_cluster");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let rest = line
        .trim_end()
        .strip_prefix("BOOTSTRAP ")
        .unwrap_or_else(|| panic!("bad first line {line:?}"));
    let brokers = parse_bootstrap(rest);
    assert_eq!(brokers.len(), 2, "{line:?}");

    // It is a working cluster: produce and read back through it.
    let p = producer(rest, &[]);
    let s = make(3, "bench");
    let rec = BaseRecord::with_opaque_to("bench", 0usize)
        .partition(11)
        .key(&s.key[..])
        .payload(&s.value[..]);
    p.send(rec).map_err(|(e, _)| e).unwrap();
    p.flush(Duration::from_secs(10)).unwrap();
    let read = read_back(rest, "bench", 12, 1, Duration::from_secs(10));
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].partition, 11);
    drop(p);

    // Closing stdin stops it.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"ignored\n").unwrap();
    drop(stdin);
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert!(st.success(), "{st}");
            break;
        }
        if t.elapsed() > Duration::from_secs(10) {
            child.kill().unwrap();
            panic!("mock_cluster did not exit after stdin closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn mock_cluster_binary_rejects_bad_arguments() {
    let out = Command::new(env!("CARGO_BIN_EXE_mock_cluster"))
        .args(["--topic", "nocount"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn partition_logs_keep_about_five_mib() {
    let mock = MockKafka::new(1, &[("big", 1)]).unwrap();
    let bs = mock.bootstrap_servers();
    let p = producer(&bs, &[("batch.size", "200000"), ("linger.ms", "0")]);
    let value = vec![7u8; 10 * 1024];
    for id in 0..700usize {
        let rec = BaseRecord::<(), [u8], usize>::with_opaque_to("big", id).payload(&value[..]);
        p.send(rec).map_err(|(e, _)| e).unwrap();
        p.poll(Duration::ZERO);
    }
    p.flush(Duration::from_secs(20)).unwrap();
    let read = read_back_all(&bs, "big", 1, Duration::from_secs(20));
    let kept: usize = read.iter().map(|c| c.value.as_ref().unwrap().len()).sum();
    assert!(!read.is_empty());
    assert!(
        read[0].offset > 0,
        "the log start moved: {}",
        read[0].offset
    );
    assert_eq!(read.last().unwrap().offset, 699);
    assert!(
        (4 << 20..=6 << 20).contains(&kept),
        "kept {kept} bytes of 7 MiB"
    );
}
