//! Transactions on Apache Kafka (4.1.1, 3-node KRaft clusters formatted at `transaction.version`
//! 1 and 2, one cluster per level, shared by that level's tests; see
//! `producer_tests::kafka::txn`).
//!
//! The `harness_*` tests check the harness itself with an independent party, librdkafka's own
//! transactional producer: a consume-transform-produce loop whose output read with
//! `read_committed` holds every input record exactly once in order per partition, whose
//! aborted transactions are invisible to `read_committed` and visible to
//! `read_uncommitted`, and whose group offsets (committed through the transactions, as a
//! simple group) end at the input's end; an open transaction holds the last stable offset
//! back until its abort; the protocol probe counts the transaction APIs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use rdkafka::config::ClientConfig;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

use producer_tests::kafka::probe::Probe;
use producer_tests::kafka::txn::{
    check_exactly_once, committed_offsets, fill_topic, txn_cluster, InputConsumer,
    PartitionContents, TxnCluster,
};
use producer_tests::kafka::TRANSACTION_VERSION;
use producer_tests::readback::{read_back_isolated, Consumed, Isolation};

/// Generous bound for one read-back or admin wait (a failure, never a pass condition).
const WAIT: Duration = Duration::from_secs(60);

/// Input partitions of the consume-transform-produce loops.
const PARTITIONS: i32 = 6;

fn input_record(i: usize) -> (i32, Vec<u8>, Vec<u8>) {
    (
        (i % PARTITIONS as usize) as i32,
        format!("k-{i}").into_bytes(),
        format!("v-{i}").into_bytes(),
    )
}

/// The transformation of the loops: same partition, same key, value prefixed.
fn transform(value: &[u8]) -> Vec<u8> {
    let mut v = b"t:".to_vec();
    v.extend_from_slice(value);
    v
}

fn transformed(input: &PartitionContents) -> PartitionContents {
    input
        .iter()
        .map(|(&p, recs)| {
            (
                p,
                recs.iter()
                    .map(|(k, v)| (k.clone(), transform(v)))
                    .collect(),
            )
        })
        .collect()
}

/// librdkafka's transactional producer on the cluster's proxies (so the probe sees it), with
/// its own polling thread (its abort waits for the delivery reports).
fn rdkafka_txn_producer(kafka: &TxnCluster, id: &str) -> ThreadedProducer<DefaultProducerContext> {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap_servers())
        .set("transactional.id", id)
        .set("transaction.timeout.ms", "30000")
        .set("linger.ms", "5")
        .create()
        .expect("librdkafka producer");
    p.init_transactions(WAIT).expect("init_transactions");
    p
}

fn assert_tv(kafka: &TxnCluster) {
    let tv = kafka.transaction_version().expect("finalized features");
    assert_eq!(
        tv,
        kafka.tv(),
        "the cluster's finalized {TRANSACTION_VERSION}"
    );
}

/// The loop with librdkafka: each transaction reads up to `batch` input records, writes them
/// transformed to the same partition of the output, sends the offsets, and commits; every
/// third one aborts instead and the consumer goes back to the group's offsets.
fn harness_ctp(tv: i16) {
    let Some(mut kafka) = txn_cluster(tv) else {
        return;
    };
    assert_tv(&kafka);
    const N: usize = 3_000;
    let batch = 250;
    let input = kafka.topic("ctp-in", PARTITIONS, 3, &[]);
    let output = kafka.topic("ctp-out", PARTITIONS, 3, &[]);
    let group = format!("{input}-group");
    let started = Instant::now();
    let filled = fill_topic(&kafka.internal_bootstrap(), &input, N, input_record, WAIT)
        .expect("fill the input topic");
    let probe = Probe::attach(&kafka);
    let producer = rdkafka_txn_producer(&kafka, &format!("{input}-txn"));
    let mut consumer = InputConsumer::open(
        &kafka.internal_bootstrap(),
        &group,
        &input,
        PARTITIONS,
        WAIT,
    )
    .expect("input consumer");
    let (mut commits, mut aborts, mut aborted_records, mut done) = (0, 0, 0, 0);
    while done < N {
        let recs = consumer.poll_batch(batch, WAIT);
        assert!(
            !recs.is_empty(),
            "no input within {WAIT:?} ({done} of {N} done)"
        );
        producer.begin_transaction().expect("begin");
        for r in &recs {
            let value = transform(r.value.as_deref().unwrap_or_default());
            producer
                .send(
                    BaseRecord::to(&output)
                        .partition(r.partition)
                        .key(r.key.as_deref().unwrap_or_default())
                        .payload(&value),
                )
                .map_err(|(e, _)| e)
                .expect("send");
        }
        let mut offsets = TopicPartitionList::new();
        for (&p, &o) in consumer.next_offsets() {
            offsets
                .add_partition_offset(&input, p, Offset::Offset(o))
                .unwrap();
        }
        let meta = consumer.group_metadata().expect("group metadata");
        producer
            .send_offsets_to_transaction(&offsets, &meta, WAIT)
            .expect("send offsets");
        if (commits + aborts) % 3 == 2 {
            producer.abort_transaction(WAIT).expect("abort");
            aborts += 1;
            aborted_records += recs.len();
            consumer.rewind(WAIT).expect("rewind");
        } else {
            producer.commit_transaction(WAIT).expect("commit");
            commits += 1;
            done += recs.len();
        }
    }
    drop(producer);
    let probe = probe.finish();
    assert!(probe.errors.is_empty(), "protocol probe:\n{probe}");
    let ends = kafka.wait_stable(&output, WAIT).expect("output stable");
    let boot = kafka.internal_bootstrap();
    let committed = read_back_isolated(&boot, &output, PARTITIONS, Isolation::ReadCommitted, WAIT)
        .expect("read_committed");
    let uncommitted =
        read_back_isolated(&boot, &output, PARTITIONS, Isolation::ReadUncommitted, WAIT)
            .expect("read_uncommitted");
    let checked = check_exactly_once(&transformed(&filled), &committed)
        .unwrap_or_else(|e| panic!("read_committed: {e}"));
    assert_eq!(checked, N);
    assert_eq!(
        uncommitted.len(),
        N + aborted_records,
        "read_uncommitted: every committed and every aborted record"
    );
    let committed_at: std::collections::BTreeSet<(i32, i64)> =
        committed.iter().map(|c| (c.partition, c.offset)).collect();
    let aborted_seen = uncommitted
        .iter()
        .filter(|c| !committed_at.contains(&(c.partition, c.offset)))
        .count();
    assert_eq!(
        aborted_seen, aborted_records,
        "aborted records seen by read_uncommitted"
    );
    // Markers: each transaction writes one per partition it touched, so the log is longer than
    // the records it holds.
    let log: i64 = ends.iter().map(|e| e.high_watermark - e.log_start).sum();
    assert!(
        log > uncommitted.len() as i64,
        "control markers in the log ({log} offsets)"
    );
    let group_offsets = committed_offsets(&boot, &group, &input, PARTITIONS, WAIT).unwrap();
    let expect_offsets: BTreeMap<i32, Option<i64>> = filled
        .iter()
        .map(|(&p, v)| (p, Some(v.len() as i64)))
        .collect();
    assert_eq!(
        group_offsets, expect_offsets,
        "the group's committed offsets"
    );

    let t = &probe.txn;
    assert!(
        t.coordinator_keys.get(&1).copied().unwrap_or(0) > 0,
        "FindCoordinator (txn)\n{probe}"
    );
    assert!(
        t.coordinator_keys.get(&0).copied().unwrap_or(0) > 0,
        "FindCoordinator (group)\n{probe}"
    );
    // Retried while the new transaction state log loads: one answer without an error.
    assert_eq!(
        t.answer_count(ApiKey::InitProducerId, 0),
        1,
        "InitProducerId\n{probe}"
    );
    // Requests may be retried (CONCURRENT_TRANSACTIONS while the last one's markers are
    // written): the answers without an error count the transactions.
    assert_eq!(t.committed(), commits, "EndTxn commits\n{probe}");
    assert_eq!(t.aborted(), aborts, "EndTxn aborts\n{probe}");
    assert_eq!(
        t.answer_count(ApiKey::AddOffsetsToTxn, 0),
        commits + aborts,
        "AddOffsetsToTxn\n{probe}"
    );
    let simple: usize = t
        .offset_commits_ok
        .iter()
        .filter(|((g, gen, member), _)| g == &group && *gen == -1 && member.is_empty())
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        simple,
        commits + aborts,
        "TxnOffsetCommit as a simple group\n{probe}"
    );
    assert!(
        t.transactional_batches > 0,
        "transactional batches\n{probe}"
    );
    assert_eq!(
        probe.broker_finalized.get(TRANSACTION_VERSION).map(|v| v.1),
        Some(tv),
        "finalized features in ApiVersions\n{probe}"
    );
    // librdkafka 2.12 speaks the TV1 protocol on either cluster (the broker accepts it at
    // TV2): a control for the probe's rules, which must pass it as TV1 and refuse it as TV2.
    assert!(
        t.add_partitions > 0,
        "librdkafka: AddPartitionsToTxn\n{probe}"
    );
    probe
        .check_transaction_version(1)
        .unwrap_or_else(|e| panic!("librdkafka against the TV1 rules: {e}"));
    let refused = probe
        .check_transaction_version(2)
        .expect_err("librdkafka's TV1 protocol passed the TV2 rules");
    assert!(
        refused.contains("AddPartitionsToTxn") && refused.contains("EndTxn v1"),
        "the TV2 rules' complaint: {refused}"
    );
    let range = |api: &str| probe.broker_ranges.get(api).copied();
    println!(
        "harness TV{tv} librdkafka consume-transform-produce: {N} input records over {PARTITIONS} \
         partitions, {commits} transactions committed, {aborts} aborted ({aborted_records} \
         records); read_committed {} (exactly once, in order), read_uncommitted {}, {log} log \
         offsets; group offsets {group_offsets:?}; {:.1} s",
        committed.len(),
        uncommitted.len(),
        started.elapsed().as_secs_f64()
    );
    println!(
        "  broker offers Produce {:?} EndTxn {:?} AddPartitionsToTxn {:?}; librdkafka used \
         Produce {:?} EndTxn {:?}; the TV2 rules refuse it: {refused}",
        range("Produce"),
        range("EndTxn"),
        range("AddPartitionsToTxn"),
        probe.versions_of(ApiKey::Produce),
        probe.versions_of(ApiKey::EndTxn),
    );
    println!("  {}", probe.txn);
}

/// An open transaction holds the last stable offset back: `read_committed` sees none of its
/// records, `read_uncommitted` all; after the abort the partitions are stable and
/// `read_committed` still sees none.
fn harness_open_then_abort(tv: i16) {
    let Some(mut kafka) = txn_cluster(tv) else {
        return;
    };
    let topic = kafka.topic("open", 3, 3, &[]);
    let producer = rdkafka_txn_producer(&kafka, &format!("{topic}-txn"));
    let boot = kafka.internal_bootstrap();
    // A committed record first, so read_committed has something to see.
    producer.begin_transaction().unwrap();
    let send = |p: i32, i: usize| {
        producer
            .send(
                BaseRecord::to(&topic)
                    .partition(p)
                    .key(&format!("k-{i}"))
                    .payload(&format!("v-{i}")),
            )
            .map_err(|(e, _)| e)
            .unwrap()
    };
    send(0, 0);
    producer.commit_transaction(WAIT).unwrap();
    producer.begin_transaction().unwrap();
    const OPEN: usize = 30;
    for i in 1..=OPEN {
        send((i % 3) as i32, i);
    }
    producer.flush(WAIT).unwrap();
    // Acknowledged (acks=all): the high watermark covers them, the LSO does not.
    let open = kafka
        .wait_ends(
            &topic,
            "the open transaction's records below the HW",
            WAIT,
            |e| e.iter().map(|e| e.high_watermark).sum::<i64>() >= 1 + 1 + OPEN as i64,
        )
        .unwrap();
    assert!(
        open.iter().all(|e| !e.stable()),
        "each partition has an open transaction: {open:?}"
    );
    let rc = read_back_isolated(&boot, &topic, 3, Isolation::ReadCommitted, WAIT).unwrap();
    let ru = read_back_isolated(&boot, &topic, 3, Isolation::ReadUncommitted, WAIT).unwrap();
    let keys = |v: &[Consumed]| v.len();
    assert_eq!(keys(&rc), 1, "read_committed while open: {rc:?}");
    assert_eq!(keys(&ru), 1 + OPEN, "read_uncommitted while open");
    producer.abort_transaction(WAIT).unwrap();
    let after = kafka.wait_stable(&topic, WAIT).unwrap();
    let rc2 = read_back_isolated(&boot, &topic, 3, Isolation::ReadCommitted, WAIT).unwrap();
    let ru2 = read_back_isolated(&boot, &topic, 3, Isolation::ReadUncommitted, WAIT).unwrap();
    assert_eq!(rc2, rc, "read_committed after the abort");
    assert_eq!(ru2, ru, "read_uncommitted after the abort");
    println!(
        "harness TV{tv} librdkafka open transaction: {OPEN} records open, ends while open \
         {open:?}, after the abort {after:?}; read_committed {} / read_uncommitted {}",
        rc2.len(),
        ru2.len()
    );
}

mod tv1 {
    #[test]
    fn harness_ctp_librdkafka() {
        super::harness_ctp(1);
    }

    #[test]
    fn harness_open_then_abort_librdkafka() {
        super::harness_open_then_abort(1);
    }
}

mod tv2 {
    #[test]
    fn harness_ctp_librdkafka() {
        super::harness_ctp(2);
    }

    #[test]
    fn harness_open_then_abort_librdkafka() {
        super::harness_open_then_abort(2);
    }
}
