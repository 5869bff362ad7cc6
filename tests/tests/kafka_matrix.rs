//! The producer against Apache Kafka itself (a shared 3-node KRaft cluster, 4.1.1, through the
//! fault proxies, no faults), through both drivers: every compression codec x null keys /
//! keys / explicit partitions x acks 0 / 1 / all without idempotence / all with idempotence
//! (the full product: 12 runs per codec and driver, each to a topic of its own); large records
//! (up to ~900 KiB); many headers; topics of 1 to 100 partitions and several topics in one
//! producer.
//!
//! Every run is read back with librdkafka (CRCs checked) past the proxies and compared record by
//! record (key, value, headers, timestamp, partition, the reported offset): idempotent runs
//! exactly once in send order per partition, the others at least once with first copies in
//! order (acks=0: every record must reach the log too). Once per codec, one topic is also read
//! back by Kafka's Java consumer (KafkaCtl), and compared the same way, as Java sees it.

use std::time::Duration;

use bytes::Bytes;
use producer_core::{Acks, Compression, Record};
use producer_tests::kafka::suite::{expect_for, producer_config, rules};
use producer_tests::kafka::{shared_cluster, ClusterSpec, TestCluster};
use producer_tests::readback::{read_back_topics, wait_for_log_size};
use producer_tests::{
    check_run, produce, workload, Consumed, Driver, Expect, Keys, Pacing, ID_HEADER,
};

const PARTITIONS: i32 = 6;
const RECORDS_PER_RUN: usize = 600;

#[derive(Debug, Clone, Copy)]
enum AckMode {
    None,
    Leader,
    AllNotIdempotent,
    AllIdempotent,
}

impl AckMode {
    const ALL: [AckMode; 4] = [
        AckMode::None,
        AckMode::Leader,
        AckMode::AllNotIdempotent,
        AckMode::AllIdempotent,
    ];

    fn acks(self) -> Acks {
        match self {
            AckMode::None => Acks::None,
            AckMode::Leader => Acks::Leader,
            _ => Acks::All,
        }
    }

    fn idempotent(self) -> bool {
        matches!(self, AckMode::AllIdempotent)
    }
}

fn cluster() -> Option<TestCluster> {
    shared_cluster(ClusterSpec::three)
}

/// Splits read-back records by topic.
fn by_topic(consumed: Vec<Consumed>) -> std::collections::HashMap<String, Vec<Consumed>> {
    let mut m = std::collections::HashMap::<String, Vec<Consumed>>::new();
    for c in consumed {
        m.entry(c.topic.clone()).or_default().push(c);
    }
    m
}

/// The 12 runs of one codec through one driver; the keyed idempotent topic is also read back
/// by the Java consumer when `java` is set.
fn codec_matrix(driver: Driver, compression: Compression, java: bool) {
    let Some(mut kafka) = cluster() else { return };
    let mut runs = Vec::new();
    for keys in [Keys::Null, Keys::All, Keys::Explicit] {
        for mode in AckMode::ALL {
            let name = format!("m-{compression:?}-{keys:?}-{mode:?}").to_lowercase();
            let topic = kafka.topic(&name, PARTITIONS, 3, &[]);
            let config = producer_config(&kafka)
                .compression(compression)
                .acks(mode.acks())
                .enable_idempotence(mode.idempotent())
                .build()
                .unwrap();
            assert_eq!(config.idempotence, mode.idempotent());
            let topics = [(topic.as_str(), PARTITIONS)];
            let records = workload(RECORDS_PER_RUN, &topics, keys, 100);
            let run = produce(driver, config, &records, &Pacing::burst(), &mut |_| {});
            runs.push((topic, keys, mode, records, run));
        }
    }
    let all: Vec<(&str, i32)> = runs.iter().map(|r| (r.0.as_str(), PARTITIONS)).collect();
    // acks=0: delivered means written to the socket; wait for the brokers to append it all.
    let expected = (runs.len() * RECORDS_PER_RUN) as i64;
    wait_for_log_size(
        &kafka.internal_bootstrap(),
        &all,
        expected,
        Duration::from_secs(30),
    );
    let mut logs = by_topic(read_back_topics(
        &kafka.internal_bootstrap(),
        &all,
        Duration::from_secs(120),
    ));
    for (topic, keys, mode, records, run) in &runs {
        let topics = [(topic.as_str(), PARTITIONS)];
        let mut r = rules(&topics, expect_for(mode.idempotent()));
        r.acks0 = matches!(mode, AckMode::None);
        let consumed = logs.remove(topic).unwrap_or_default();
        let s = check_run(&r, records, run, &consumed);
        assert_eq!(s.missing, 0);
        println!(
            "{driver:?} {compression:?} {keys:?} {mode:?}: {} records in {:.2} s, read back {} ({} duplicates)",
            records.len(),
            run.elapsed.as_secs_f64(),
            s.consumed,
            s.duplicates.len()
        );
        if java && matches!((keys, mode), (Keys::All, AckMode::AllIdempotent)) {
            let seen = kafka.ctl().java_read_back(topic, PARTITIONS).unwrap();
            let s = check_run(&r, records, run, &seen);
            assert_eq!(s.consumed, records.len());
            println!(
                "  Java consumer read {topic} back: {} records, each as sent",
                s.consumed
            );
        }
    }
}

#[test]
fn tokio_uncompressed_keys_x_acks_x_idempotence() {
    codec_matrix(Driver::Tokio, Compression::None, true);
}

#[test]
fn tokio_gzip_keys_x_acks_x_idempotence() {
    codec_matrix(Driver::Tokio, Compression::Gzip, true);
}

#[test]
fn tokio_snappy_keys_x_acks_x_idempotence() {
    codec_matrix(Driver::Tokio, Compression::Snappy, true);
}

#[test]
fn tokio_lz4_keys_x_acks_x_idempotence() {
    codec_matrix(Driver::Tokio, Compression::Lz4, true);
}

#[test]
fn tokio_zstd_keys_x_acks_x_idempotence() {
    codec_matrix(Driver::Tokio, Compression::Zstd, true);
}

#[test]
fn mio_uncompressed_keys_x_acks_x_idempotence() {
    codec_matrix(Driver::MioThreaded, Compression::None, false);
}

#[test]
fn mio_gzip_keys_x_acks_x_idempotence() {
    codec_matrix(Driver::MioThreaded, Compression::Gzip, false);
}

#[test]
fn mio_snappy_keys_x_acks_x_idempotence() {
    codec_matrix(Driver::MioThreaded, Compression::Snappy, false);
}

#[test]
fn mio_lz4_keys_x_acks_x_idempotence() {
    codec_matrix(Driver::MioThreaded, Compression::Lz4, false);
}

#[test]
fn mio_zstd_keys_x_acks_x_idempotence() {
    codec_matrix(Driver::MioThreaded, Compression::Zstd, false);
}

// ---- large records, many headers ----

/// Record `i` of ~`size` bytes with `headers` headers (the first is the id).
fn big_record(topic: &str, i: usize, size: usize, headers: usize) -> Record {
    let fill = char::from(b'a' + (i % 26) as u8);
    let mut r = Record::new(topic, format!("{i}-{}", fill.to_string().repeat(size)))
        .with_key(format!("big-{i}"))
        .with_timestamp(1_700_000_000_000 + i as i64)
        .with_header(ID_HEADER, Some(Bytes::from(i.to_string())));
    for h in 1..headers {
        let value = match h % 3 {
            0 => None,
            1 => Some(Bytes::new()),
            _ => Some(Bytes::from(format!("header-{h}-of-{i}").repeat(h % 7 + 1))),
        };
        r = r.with_header(format!("h{}", h % 13), value);
    }
    r
}

fn large_records_and_headers(driver: Driver, compression: Compression) {
    let Some(mut kafka) = cluster() else { return };
    let topic = kafka.topic("large", 3, 3, &[]);
    let topics = [(topic.as_str(), 3)];
    // Up to ~900 KiB: just under max.request.size (1 MiB) and the broker's message.max.bytes.
    let sizes = [
        900 * 1024,
        1,
        300 * 1024,
        64 * 1024,
        700 * 1024,
        17,
        128 * 1024,
    ];
    let records: Vec<Record> = (0..70)
        .map(|i| big_record(&topic, i, sizes[i % sizes.len()], 1 + (i * 7) % 40))
        .collect();
    let config = producer_config(&kafka)
        .compression(compression)
        .build()
        .unwrap();
    let run = produce(driver, config, &records, &Pacing::burst(), &mut |_| {});
    let consumed = read_back_topics(
        &kafka.internal_bootstrap(),
        &topics,
        Duration::from_secs(120),
    );
    let s = check_run(
        &rules(&topics, Expect::ExactlyOnce),
        &records,
        &run,
        &consumed,
    );
    let java = kafka.ctl().java_read_back(&topic, 3).unwrap();
    check_run(&rules(&topics, Expect::ExactlyOnce), &records, &run, &java);
    println!(
        "{driver:?} {compression:?}: {} records of up to 900 KiB with up to 40 headers, read back {} (librdkafka and Java)",
        records.len(),
        s.consumed
    );
}

#[test]
fn tokio_large_records_and_many_headers() {
    large_records_and_headers(Driver::Tokio, Compression::None);
}

#[test]
fn mio_large_records_and_many_headers_zstd() {
    large_records_and_headers(Driver::MioThreaded, Compression::Zstd);
}

// ---- 1 to 100 partitions, several topics in one producer ----

fn many_partitions_and_topics(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let counts = [1, 2, 7, 32, 100];
    let names: Vec<String> = counts
        .iter()
        .map(|&n| kafka.topic(&format!("parts-{n}"), n, 3, &[]))
        .collect();
    let topics: Vec<(&str, i32)> = names.iter().map(String::as_str).zip(counts).collect();
    let records = workload(10_000, &topics, Keys::Mixed, 60);
    let config = producer_config(&kafka).build().unwrap();
    let run = produce(driver, config, &records, &Pacing::burst(), &mut |_| {});
    let consumed = read_back_topics(
        &kafka.internal_bootstrap(),
        &topics,
        Duration::from_secs(120),
    );
    let s = check_run(
        &rules(&topics, Expect::ExactlyOnce),
        &records,
        &run,
        &consumed,
    );
    // The 100-partition topic: records reach the partitions of their keys' murmur2 (97 keys),
    // their explicit partitions, and the sticky partitions of null keys.
    let used: std::collections::BTreeSet<i32> = consumed
        .iter()
        .filter(|c| c.topic == names[4])
        .map(|c| c.partition)
        .collect();
    let mut predicted = std::collections::BTreeSet::new();
    for r in records.iter().filter(|r| *r.topic == *names[4]) {
        if let Some(p) = r.partition {
            predicted.insert(p);
        } else if let Some(k) = &r.key {
            predicted.insert(producer_tests::key_partition(k, 100));
        }
    }
    assert!(
        predicted.is_subset(&used) && predicted.len() > 50,
        "partitions of {}: predicted {predicted:?}, used {used:?}",
        names[4]
    );
    println!(
        "{driver:?}: {} records over {} topics of {counts:?} partitions in one producer in {:.2} s, read back {}",
        records.len(),
        topics.len(),
        run.elapsed.as_secs_f64(),
        s.consumed
    );
}

#[test]
fn tokio_one_to_a_hundred_partitions_over_five_topics() {
    many_partitions_and_topics(Driver::Tokio);
}

#[test]
fn mio_one_to_a_hundred_partitions_over_five_topics() {
    many_partitions_and_topics(Driver::MioThreaded);
}

#[test]
fn mio_embedded_one_to_a_hundred_partitions_over_five_topics() {
    many_partitions_and_topics(Driver::MioEmbedded);
}

// ---- the protocol probe ----

/// Every request the producer sends to Kafka 4.1, decoded by the kafka-protocol crate at the
/// version of its header (no decode error, no trailing byte, record batches CRC-checked), for
/// an idempotent and a non-idempotent producer with each codec; prints the negotiated version
/// of every API beside what the broker offers.
fn protocol_probe(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let topic = kafka.topic("probe", 6, 3, &[]);
    let topics = [(topic.as_str(), 6)];
    let probe = producer_tests::kafka::probe::Probe::attach(&kafka);
    let mut sent = 0;
    for (i, compression) in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .enumerate()
    {
        for (acks, idempotent) in [
            (Acks::All, true),
            (Acks::Leader, false),
            (Acks::None, false),
        ] {
            let config = producer_config(&kafka)
                .compression(compression)
                .acks(acks)
                .enable_idempotence(idempotent)
                .client_id(format!("probe-{i}"))
                .build()
                .unwrap();
            let records = workload(300, &topics, Keys::Mixed, 100);
            let run = produce(driver, config, &records, &Pacing::burst(), &mut |_| {});
            assert!(run.reports.iter().all(|r| r.len() == 1 && r[0].is_ok()));
            sent += records.len();
        }
    }
    let report = probe.finish();
    println!(
        "protocol probe, {driver:?}, Kafka {}:\n{report}",
        producer_tests::kafka::dist::kafka_version()
    );
    assert!(report.errors.is_empty(), "decode errors:\n{report}");
    for api in ["ApiVersions", "Metadata", "InitProducerId", "Produce"] {
        assert!(
            report.versions.contains_key(api),
            "no {api} request seen:\n{report}"
        );
    }
    assert!(
        report.produce_records >= sent,
        "{} records decoded, {sent} sent",
        report.produce_records
    );
    // Always the highest version both sides support (on Kafka 4.1: ApiVersions v4, Metadata
    // v13, InitProducerId v5, Produce v13 by topic id).
    for (api, ours) in [
        ("ApiVersions", producer_core::protocol::ApiKey::ApiVersions),
        ("Metadata", producer_core::protocol::ApiKey::Metadata),
        (
            "InitProducerId",
            producer_core::protocol::ApiKey::InitProducerId,
        ),
        ("Produce", producer_core::protocol::ApiKey::Produce),
    ] {
        let (_, broker_max) = report.broker_ranges[api];
        let highest_used = report.versions[api].keys().max().copied();
        assert_eq!(
            highest_used,
            Some(broker_max.min(ours.supported_versions().1)),
            "{api}: not the highest version both support:\n{report}"
        );
    }
    // Every version used is one the broker offers.
    for (api, versions) in &report.versions {
        let (lo, hi) = report.broker_ranges[api];
        for v in versions.keys() {
            assert!(
                (lo..=hi).contains(v),
                "{api} v{v} outside the broker's v{lo}-v{hi}"
            );
        }
    }
}

#[test]
fn tokio_protocol_probe_decodes_every_request() {
    protocol_probe(Driver::Tokio);
}

#[test]
fn mio_protocol_probe_decodes_every_request() {
    protocol_probe(Driver::MioThreaded);
}
