//! `kafka-produce` against librdkafka's mock cluster, run as a user runs it (the built
//! binary, its exit code, stderr and `--failed`), every record read back by an independent
//! consumer (librdkafka, CRCs checked).

mod support;

use std::time::Duration;

use producer_tests::readback::read_back_topics;
use producer_tests::{api, errors, MockKafka};
use support::*;

const PARTITIONS: i32 = 12;

/// An address nothing listens at: port 1, privileged, that no test (or mock, whose ports are
/// ephemeral) can take, unlike a port freed by a listener just closed.
const NOTHING_LISTENS: &str = "127.0.0.1:1";

fn mock(topic: &str) -> MockKafka {
    MockKafka::new(3, &[(topic, PARTITIONS)]).expect("the mock cluster starts")
}

/// 100,000 lines with keys and two headers, from a file, come back identically: every key and
/// value once, each record with both headers, nothing in `--failed`, exit code 0.
#[test]
fn a_file_of_100000_keyed_lines_with_headers_is_read_back_identically() {
    let m = mock("lines");
    let dir = TempDir::new("lines");
    let input = keyed_lines(100_000);
    let file = dir.path("in.txt");
    std::fs::write(&file, &input).unwrap();
    let failed = dir.path("failed.txt");
    let run = kafka_produce(
        &[
            "-b",
            &m.bootstrap_servers(),
            "-t",
            "lines",
            "-K",
            ":",
            "-H",
            "source=cli-test",
            "-H",
            "batch=7",
            "-X",
            "linger.ms=10",
            "--failed",
            failed.to_str().unwrap(),
            file.to_str().unwrap(),
        ],
        b"",
    );
    run.expect_code(0)
        .expect_stderr("read 100000 records: delivered 100000, failed 0");
    assert!(failed_lines(&failed).is_empty());
    let back = read_back_topics(
        &m.bootstrap_servers(),
        &[("lines", PARTITIONS)],
        Duration::from_secs(120),
    );
    assert_eq!(back.len(), 100_000);
    assert_read_back_as_keyed_lines(&back, &input, &[("source", b"cli-test"), ("batch", b"7")]);
}

/// A topic per line (-T) and an explicit partition (-p): each record lands in its line's
/// topic, in that partition; a line without the topic delimiter is not dropped: it is in
/// `--failed` with why, and the exit code is 1.
#[test]
fn topic_per_line_and_partition_and_a_malformed_line_in_failed() {
    let m = MockKafka::new(3, &[("left", 4), ("right", 4)]).unwrap();
    let dir = TempDir::new("topics");
    let failed = dir.path("failed.txt");
    let input = b"left|k1=one\nright|k2=two\nno delimiter here\nleft|three\n";
    let run = kafka_produce(
        &[
            "-b",
            &m.bootstrap_servers(),
            "-T",
            "|",
            "-K",
            "=",
            "-p",
            "2",
            "--failed",
            failed.to_str().unwrap(),
        ],
        input,
    );
    run.expect_code(1)
        .expect_stderr("delivered 3, failed 1")
        .expect_stderr("1 of 4 records failed");
    assert_eq!(
        failed_lines(&failed),
        vec![(
            "the line has no topic delimiter (-T)".to_string(),
            b"no delimiter here".to_vec()
        )]
    );
    let back = read_back_topics(
        &m.bootstrap_servers(),
        &[("left", 4), ("right", 4)],
        Duration::from_secs(60),
    );
    /// Topic, partition, key, value.
    type Placed<'a> = (&'a str, i32, Option<&'a [u8]>, Option<&'a [u8]>);
    let got: Vec<Placed> = back
        .iter()
        .map(|c| {
            (
                c.topic.as_str(),
                c.partition,
                c.key.as_deref(),
                c.value.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("left", 2, Some(&b"k1"[..]), Some(&b"one"[..])),
            ("left", 2, None, Some(&b"three"[..])),
            ("right", 2, Some(&b"k2"[..]), Some(&b"two"[..])),
        ]
    );
}

/// Perf mode prints kafka-producer-perf-test's summary and the counts; every generated record
/// is in the log.
#[test]
fn perf_mode_prints_rate_and_latency_and_produces_every_record() {
    let m = mock("perf");
    let run = kafka_produce(
        &[
            "-b",
            &m.bootstrap_servers(),
            "-t",
            "perf",
            "--num-records",
            "200000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
        ],
        b"",
    );
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("delivered 200000, failed 0 of 200000 sent"),
        "{run:#?}"
    );
    assert!(run.stdout.contains("ms 99.9th."), "{run:#?}");
    println!("perf mode on the mock: {}", run.stdout.trim());
    assert!(perf_rate(&run.stdout) > 0.0);
    let back = read_back_topics(
        &m.bootstrap_servers(),
        &[("perf", PARTITIONS)],
        Duration::from_secs(120),
    );
    assert_eq!(back.len(), 200_000);
    assert!(back
        .iter()
        .all(|c| c.value.as_ref().is_some_and(|v| v.len() == 100)));
}

/// With --throughput the schedule is open-loop at that rate: the rate achieved cannot exceed
/// it (each record waits for its planned instant; this bound holds however loaded the machine).
#[test]
fn perf_mode_throughput_is_never_exceeded() {
    let m = mock("paced");
    let run = kafka_produce(
        &[
            "-b",
            &m.bootstrap_servers(),
            "-t",
            "paced",
            "--num-records",
            "3000",
            "--record-size",
            "10",
            "--throughput",
            "2000",
        ],
        b"",
    );
    run.expect_code(0);
    let rate = perf_rate(&run.stdout);
    // 3000 records planned over 1.5 s: the first at 0, the last at 1.4995 s.
    assert!(rate <= 2000.0 * 3000.0 / 2999.0 + 1.0, "{rate}: {run:#?}");
}

/// The diagnosis lines of a run's stderr.
fn diagnosis_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("diagnose: node "))
        .collect()
}

/// Every run ends with the diagnosis on stderr, one line per broker of the mock (3), each with
/// its verdict and what to change, and none of the fault verdicts for the healthy mock; with
/// `--diagnose`, it is printed every 5 s as well: a 7 s run (7,000 records at 1,000/s) prints
/// it at 5 s and at the end.
#[test]
fn the_diagnosis_ends_every_run_and_diagnose_prints_it_while_producing() {
    let m = mock("diagnosed");
    let perf = |records: &str, extra: &[&str]| {
        let mut args = vec![
            "-b".to_string(),
            m.bootstrap_servers(),
            "-t".into(),
            "diagnosed".into(),
            "-q".into(),
            "--num-records".into(),
            records.into(),
            "--throughput".into(),
            "1000".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kafka_produce(&args, b"")
    };
    let run = perf("500", &[]);
    run.expect_code(0);
    let lines = diagnosis_lines(&run.stderr);
    assert_eq!(lines.len(), 3, "one line per broker at the end: {run:#?}");
    for node in 1..=3 {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("diagnose: node {node} ("))),
            "node {node}: {run:#?}"
        );
    }
    for l in &lines {
        assert!(l.contains(" -> "), "what to change: {l}");
        for fault in [
            "the connection is not up",
            "the broker throttles",
            "retries dominate",
            "the broker is slow",
        ] {
            assert!(!l.contains(fault), "{fault} for a healthy mock: {l}");
        }
    }
    let run = perf("7000", &["--diagnose"]);
    run.expect_code(0);
    let lines = diagnosis_lines(&run.stderr);
    assert!(
        lines.len() >= 6,
        "printed while producing and at the end: {run:#?}"
    );
    assert_eq!(lines.len() % 3, 0, "whole diagnoses: {run:#?}");
}

/// Bad inputs: each gets the documented exit code and a message naming the problem, before
/// anything is produced.
#[test]
fn usage_and_configuration_errors_exit_2_with_the_reason() {
    let dir = TempDir::new("usage");
    let missing = dir.path("missing.txt");
    let bootstrap = NOTHING_LISTENS.to_string();
    for (args, message) in [
        (
            vec!["-b", &bootstrap, "-t", "x", missing.to_str().unwrap()],
            format!(
                "cannot read {}: No such file or directory",
                missing.display()
            ),
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", dir.path("").to_str().unwrap()],
            "it is a directory".to_string(),
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", "-X", "linger.msx=5"],
            "unknown setting \"linger.msx\" (did you mean \"linger.ms\"?)".to_string(),
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", "-X", "linger.ms=soon"],
            "setting \"linger.ms\": expected milliseconds".to_string(),
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", "-X", "acks"],
            "-X acks: expected name=value".to_string(),
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", "-X", "partitioner.class=Foo"],
            "is not supported".to_string(),
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", "-X", "transactional.id=t1"],
            "kafka-produce does not run transactions".to_string(),
        ),
        (
            vec!["-t", "x"],
            "no bootstrap servers: give -b host:port".to_string(),
        ),
        (
            vec!["-b", &bootstrap],
            "no topic: give -t TOPIC".to_string(),
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", "-H", "novalue"],
            "-H novalue: expected name=value".to_string(),
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", "-F", missing.to_str().unwrap()],
            "cannot read -F".to_string(),
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", "--no-such-flag"],
            "unexpected argument '--no-such-flag'".to_string(),
        ),
    ] {
        let run = kafka_produce(&args, b"never read\n");
        run.expect_code(2).expect_stderr(&message);
    }
}

/// A bad value of a secret setting, by -X or in a -F file, is a usage error that names the
/// setting and never shows the value (nor the text of a line that is not `name=value`).
#[test]
fn a_bad_sasl_password_value_is_not_echoed() {
    const SECRET: &str = "hunter2-cli-secret";
    let dir = TempDir::new("secrets");
    let props = dir.path("client.properties");
    let bootstrap = NOTHING_LISTENS.to_string();
    let jaas = format!("sasl.jaas.config=NotALoginModule required password=\"{SECRET}\";");
    let colon = format!("sasl.password:{SECRET}");
    let blank = format!("sasl.password {SECRET}");
    std::fs::write(&props, format!("{blank}\n")).unwrap();
    for (args, message) in [
        (
            vec!["-b", &bootstrap, "-t", "x", "-X", &jaas],
            "setting \"sasl.jaas.config\": expected a JAAS line",
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", "-X", &colon],
            "-X: expected name=value",
        ),
        (
            vec!["-b", &bootstrap, "-t", "x", "-F", props.to_str().unwrap()],
            "line 1: not a name=value setting",
        ),
    ] {
        let run = kafka_produce(&args, b"never read\n");
        run.expect_code(2).expect_stderr(message);
        assert!(!run.stderr.contains(SECRET), "{run:#?}");
        assert!(!run.stdout.contains(SECRET), "{run:#?}");
    }
    // A password -X takes is not echoed when a later setting fails either.
    let password = format!("sasl.password={SECRET}");
    let run = kafka_produce(
        &[
            "-b",
            &bootstrap,
            "-t",
            "x",
            "-X",
            &password,
            "-X",
            "acks=most",
        ],
        b"never read\n",
    );
    run.expect_code(2)
        .expect_stderr("setting \"acks\": expected all, -1, 0 or 1");
    assert!(!run.stderr.contains(SECRET), "{run:#?}");
}

/// A .properties file (-F) configures the producer; a bad line in it is a usage error that
/// names the line.
#[test]
fn a_properties_file_configures_the_producer_and_its_errors_name_the_line() {
    let m = mock("props");
    let dir = TempDir::new("props");
    let props = dir.path("client.properties");
    std::fs::write(
        &props,
        format!(
            "# a client file\nbootstrap.servers={}\nlinger.ms=1\ncompression.type=lz4\n",
            m.bootstrap_servers()
        ),
    )
    .unwrap();
    let run = kafka_produce(&["-F", props.to_str().unwrap(), "-t", "props"], b"a\nb\n");
    run.expect_code(0).expect_stderr("delivered 2, failed 0");
    std::fs::write(&props, "linger.ms=1\nthis is not a setting\n").unwrap();
    let run = kafka_produce(&["-F", props.to_str().unwrap(), "-t", "props"], b"a\n");
    run.expect_code(2)
        .expect_stderr("line 2: not a name=value setting");
}

/// A bootstrap address where nothing listens: the command stops at the first refused
/// connection, names the address and the OS error, and writes every record it read to
/// `--failed` with that reason (nothing read is lost); exit code 1. (It does not wait out
/// `max.block.ms`, set high here: the test would take ten minutes if it did.)
#[test]
fn an_unreachable_bootstrap_stops_early_naming_the_refused_address() {
    let dir = TempDir::new("unreachable");
    let failed = dir.path("failed.txt");
    let bootstrap = NOTHING_LISTENS.to_string();
    let input = keyed_lines(50);
    let run = kafka_produce(
        &[
            "-b",
            &bootstrap,
            "-t",
            "x",
            "-K",
            ":",
            "-X",
            "max.block.ms=600000",
            "-X",
            "delivery.timeout.ms=600000",
            "--failed",
            failed.to_str().unwrap(),
        ],
        &input,
    );
    run.expect_code(1)
        .expect_stderr(&format!(
            "no bootstrap broker could be reached: cannot connect to {bootstrap} (bootstrap): Connection refused"
        ));
    let failed = failed_lines(&failed);
    let read: u64 = run
        .stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("read ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .expect("the summary says how many records were read");
    assert_eq!(
        failed.len() as u64,
        read,
        "every record read is in --failed"
    );
    // How many lines were read before the refusal stopped the run is a race (none at all when
    // the refusal comes before the reader's first chunk); each one read must be in --failed.
    let lines: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    for (i, (reason, line)) in failed.iter().enumerate() {
        assert!(
            reason.contains(&bootstrap) && reason.contains("Connection refused"),
            "{reason}"
        );
        assert_eq!(line.as_slice(), lines[i], "the record as read, in order");
    }
}

/// The broker rejects a record (MESSAGE_TOO_LARGE, injected: the mock has no size limit of
/// its own; the real-Kafka tier hits a topic's real limit): the record is in `--failed` with
/// the broker's error, exit code 1.
#[test]
fn a_record_the_broker_rejects_is_in_failed_with_the_broker_error() {
    let m = mock("rejects");
    m.push_request_errors(api::PRODUCE, &[errors::MESSAGE_TOO_LARGE; 20]);
    let dir = TempDir::new("rejects");
    let failed = dir.path("failed.txt");
    let run = kafka_produce(
        &[
            "-b",
            &m.bootstrap_servers(),
            "-t",
            "rejects",
            "--failed",
            failed.to_str().unwrap(),
        ],
        b"too large for this broker\n",
    );
    run.expect_code(1).expect_stderr("delivered 0, failed 1");
    let failed = failed_lines(&failed);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].0.contains("MESSAGE_TOO_LARGE"), "{:?}", failed[0]);
    assert_eq!(failed[0].1, b"too large for this broker");
}

/// `--help` prints usage with the exit codes and produces nothing.
#[test]
fn help_prints_usage_and_the_exit_codes() {
    let run = kafka_produce(&["--help"], b"");
    run.expect_code(0);
    for text in [
        "Usage: kafka-produce",
        "EXIT CODES",
        "--failed",
        "--num-records",
        "-X",
    ] {
        assert!(run.stdout.contains(text), "{text}: {run:#?}");
    }
}

/// Records fail in two ways at once: a topic the cluster does not have (its Metadata says
/// UNKNOWN_TOPIC_OR_PARTITION, so its records fail after `max.block.ms`) and Produce requests
/// answered CORRUPT_MESSAGE (injected) for the other one. No copy of a record is kept by the
/// command: each failed line is written from the record the producer hands back. Every line
/// read comes back exactly once: delivered (read back by librdkafka) or in `--failed` with its
/// reason, never both, never twice, never lost.
#[test]
fn every_line_not_delivered_is_in_failed_exactly_once() {
    let m = mock("good");
    m.topic_error("ghost", errors::UNKNOWN_TOPIC_OR_PARTITION)
        .unwrap();
    m.push_request_errors(api::PRODUCE, &[errors::CORRUPT_MESSAGE; 3]);
    let dir = TempDir::new("exactly-once");
    let failed = dir.path("failed.txt");
    let mut input = Vec::new();
    for i in 0..20_000 {
        let topic = if i % 5 == 0 { "ghost" } else { "good" };
        input.extend_from_slice(format!("{topic}|key-{i}:value-{i}\n").as_bytes());
    }
    let run = kafka_produce(
        &[
            "-b",
            &m.bootstrap_servers(),
            "-T",
            "|",
            "-K",
            ":",
            "-X",
            "linger.ms=5",
            "-X",
            "max.block.ms=1000",
            "--failed",
            failed.to_str().unwrap(),
        ],
        &input,
    );
    run.expect_code(1).expect_stderr("read 20000 records");
    let failed = failed_lines(&failed);
    let back = read_back_topics(
        &m.bootstrap_servers(),
        &[("good", PARTITIONS)],
        Duration::from_secs(120),
    );
    let mut seen: Vec<Vec<u8>> = failed.iter().map(|(_, line)| line.clone()).collect();
    seen.extend(back.iter().map(|c| {
        let mut line = format!("{}|", c.topic).into_bytes();
        line.extend_from_slice(c.key.as_deref().unwrap());
        line.push(b':');
        line.extend_from_slice(c.value.as_deref().unwrap());
        line
    }));
    seen.sort();
    let mut expected: Vec<Vec<u8>> = input
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    expected.sort();
    assert_eq!(
        seen.len(),
        expected.len(),
        "each line once: {} failed, {} delivered",
        failed.len(),
        back.len()
    );
    assert!(
        seen == expected,
        "delivered and failed lines are the input, each once"
    );
    let ghost: Vec<_> = failed
        .iter()
        .filter(|(_, line)| line.starts_with(b"ghost|"))
        .collect();
    assert_eq!(ghost.len(), 4_000, "every line of the unknown topic failed");
    assert!(
        ghost
            .iter()
            .all(|(reason, _)| reason.contains("unknown topic")),
        "{:?}",
        ghost[0]
    );
    let corrupt = failed
        .iter()
        .filter(|(reason, _)| reason.contains("CORRUPT_MESSAGE"))
        .count();
    assert!(corrupt > 0, "the injected Produce errors failed records");
    assert_eq!(corrupt + ghost.len(), failed.len());
    run.expect_stderr(&format!(
        "delivered {}, failed {}",
        back.len(),
        failed.len()
    ));
}

/// A line longer than `max.request.size` cannot be a record: it is refused with a typed
/// reason and written whole to `--failed` (read and written in pieces: the command never holds
/// more of it than `max.request.size`), the lines around it are delivered, exit code 1.
#[test]
fn a_line_longer_than_max_request_size_is_in_failed_and_nothing_else_is_lost() {
    let m = mock("long");
    let dir = TempDir::new("long");
    let failed = dir.path("failed.txt");
    let mut long = b"big:".to_vec();
    long.extend(std::iter::repeat_n(b'x', 3 << 20));
    let mut input = b"before:1\n".to_vec();
    input.extend_from_slice(&long);
    input.extend_from_slice(b"\nafter:2\n");
    let run = kafka_produce(
        &[
            "-b",
            &m.bootstrap_servers(),
            "-t",
            "long",
            "-K",
            ":",
            "-X",
            "max.request.size=100000",
            "--failed",
            failed.to_str().unwrap(),
        ],
        &input,
    );
    run.expect_code(1)
        .expect_stderr("read 3 records: delivered 2, failed 1");
    let failed = failed_lines(&failed);
    assert_eq!(failed.len(), 1);
    assert_eq!(
        failed[0].0,
        "the line is longer than max.request.size (100000 bytes)"
    );
    assert!(failed[0].1 == long, "the line, whole");
    let back = read_back_topics(
        &m.bootstrap_servers(),
        &[("long", PARTITIONS)],
        Duration::from_secs(60),
    );
    let mut got: Vec<(&[u8], &[u8])> = back
        .iter()
        .map(|c| (c.key.as_deref().unwrap(), c.value.as_deref().unwrap()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![(&b"after"[..], &b"2"[..]), (&b"before"[..], &b"1"[..])]
    );
}

/// `--timeout`: every Produce is answered with a retriable error (NOT_ENOUGH_REPLICAS), so
/// nothing is delivered; at the end of the input the close ends at its deadline: every line is
/// in `--failed` once, with the reason the close gave it (never sent: purged; sent and waiting
/// for a retry: the close's deadline passed), and the exit code says records failed.
#[test]
fn timeout_bounds_the_close_and_what_is_left_goes_to_failed() {
    let m = mock("slow");
    m.push_request_errors(api::PRODUCE, &[errors::NOT_ENOUGH_REPLICAS; 100_000]);
    let dir = TempDir::new("timeout");
    let failed = dir.path("failed.txt");
    let input: Vec<u8> = (0..2000)
        .flat_map(|i| format!("value-{i}\n").into_bytes())
        .collect();
    let run = kafka_produce(
        &[
            "-b",
            &m.bootstrap_servers(),
            "-t",
            "slow",
            "-X",
            "batch.size=1024",
            "--timeout",
            "1.5",
            "--failed",
            failed.to_str().unwrap(),
        ],
        &input,
    );
    m.clear_request_errors(api::PRODUCE);
    run.expect_code(1)
        .expect_stderr("delivered 0, failed 2000")
        .expect_stderr("--timeout passed");
    let failed = failed_lines(&failed);
    assert_eq!(failed.len(), 2000, "every line once");
    let mut lines: Vec<Vec<u8>> = failed.iter().map(|(_, l)| l.clone()).collect();
    lines.sort();
    let mut expected: Vec<Vec<u8>> = (0..2000)
        .map(|i| format!("value-{i}").into_bytes())
        .collect();
    expected.sort();
    assert_eq!(lines, expected);
    let purged = failed.iter().filter(|(r, _)| r.contains("purged")).count();
    let timed_out = failed
        .iter()
        .filter(|(r, _)| r.contains("deadline passed"))
        .count();
    assert_eq!(purged + timed_out, 2000, "{:?}", failed[0]);
    assert!(timed_out > 0, "batches were sent and retried");
}
