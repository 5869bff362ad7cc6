//! `kafka-produce` against Apache Kafka itself (one KRaft node, 4.1.1, through the suite's
//! proxy; see `producer_tests::kafka`): a file of 100,000 keyed lines with headers read back
//! identically, a record above the topic's real size limit rejected by the broker and written
//! to `--failed` while the records around it are delivered, and perf mode's figures.
//! `SKIP_KAFKA_TESTS=1` opts out.

mod support;

use std::time::Duration;

use producer_tests::kafka::{shared_cluster, ClusterSpec, TestCluster};
use producer_tests::readback::read_back_topics;
use support::*;

fn cluster() -> Option<TestCluster> {
    shared_cluster(ClusterSpec::single)
}

#[test]
fn kafka_a_file_of_100000_keyed_lines_with_headers_is_read_back_identically() {
    let Some(mut kafka) = cluster() else { return };
    let topic = kafka.topic("cli-lines", 6, 1, &[]);
    let dir = TempDir::new("kafka-lines");
    let input = keyed_lines(100_000);
    let file = dir.path("in.txt");
    std::fs::write(&file, &input).unwrap();
    let failed = dir.path("failed.txt");
    let run = kafka_produce(
        &[
            "-b",
            &kafka.bootstrap_servers(),
            "-t",
            &topic,
            "-K",
            ":",
            "-H",
            "source=cli-test",
            "--failed",
            failed.to_str().unwrap(),
            file.to_str().unwrap(),
        ],
        b"",
    );
    run.expect_code(0)
        .expect_stderr("read 100000 records: delivered 100000, failed 0");
    println!("{}", run.stderr.trim());
    assert!(failed_lines(&failed).is_empty());
    let back = read_back_topics(
        &kafka.bootstrap_servers(),
        &[(&topic, 6)],
        Duration::from_secs(120),
    );
    assert_eq!(back.len(), 100_000);
    assert_read_back_as_keyed_lines(&back, &input, &[("source", b"cli-test")]);
}

/// The topic accepts batches of at most 4 KiB (`max.message.bytes`): a 10,000-byte line is
/// rejected by the broker itself (MESSAGE_TOO_LARGE, after the producer split its batch down
/// to that one record), written to `--failed` with the broker's error; the lines around it
/// are delivered; exit code 1.
#[test]
fn kafka_a_record_above_the_topic_limit_is_rejected_and_in_failed() {
    let Some(mut kafka) = cluster() else { return };
    let topic = kafka.topic("cli-small", 1, 1, &[("max.message.bytes", "4096")]);
    let dir = TempDir::new("kafka-small");
    let failed = dir.path("failed.txt");
    let big = "B".repeat(10_000);
    let input = format!("before\n{big}\nafter\n");
    let run = kafka_produce(
        &[
            "-b",
            &kafka.bootstrap_servers(),
            "-t",
            &topic,
            "-X",
            "linger.ms=50",
            "--failed",
            failed.to_str().unwrap(),
        ],
        input.as_bytes(),
    );
    run.expect_code(1).expect_stderr("delivered 2, failed 1");
    let failed = failed_lines(&failed);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].0.contains("MESSAGE_TOO_LARGE"), "{}", failed[0].0);
    assert_eq!(failed[0].1, big.as_bytes());
    let back = read_back_topics(
        &kafka.bootstrap_servers(),
        &[(&topic, 1)],
        Duration::from_secs(60),
    );
    let values: Vec<&[u8]> = back.iter().filter_map(|c| c.value.as_deref()).collect();
    assert_eq!(values, vec![&b"before"[..], &b"after"[..]]);
}

/// Perf mode against Kafka: every record delivered and in the log; the figures printed.
#[test]
fn kafka_perf_mode_delivers_every_record_and_prints_the_figures() {
    let Some(mut kafka) = cluster() else { return };
    let topic = kafka.topic("cli-perf", 6, 1, &[]);
    let run = kafka_produce(
        &[
            "-b",
            &kafka.bootstrap_servers(),
            "-t",
            &topic,
            "--num-records",
            "200000",
            "--record-size",
            "100",
        ],
        b"",
    );
    run.expect_code(0);
    println!("perf mode on Kafka: {}", run.stdout.trim());
    assert!(
        run.stdout
            .contains("delivered 200000, failed 0 of 200000 sent"),
        "{run:#?}"
    );
    assert!(perf_rate(&run.stdout) > 0.0);
    let back = read_back_topics(
        &kafka.bootstrap_servers(),
        &[(&topic, 6)],
        Duration::from_secs(120),
    );
    assert_eq!(back.len(), 200_000);
}
