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
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer as RdThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

use producer_core::{
    Config, ConsumerGroupMetadata, Delivery, ErrorCode, OffsetToCommit, ProduceError, Record,
    TransactionError,
};
use producer_mio::ThreadedProducer;
use producer_tests::kafka::probe::Probe;
use producer_tests::kafka::suite::{producer_config, FaultTally};
use producer_tests::kafka::txn::{
    check_exactly_once, committed_offsets, fill_topic, txn_cluster, InputConsumer,
    PartitionContents, TxnCluster,
};
use producer_tests::kafka::TRANSACTION_VERSION;
use producer_tests::readback::{read_back_isolated, Consumed, Isolation};
use producer_tokio::{DeliveryError, DeliveryFuture, ProducerHandle};

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
fn rdkafka_txn_producer(
    kafka: &TxnCluster,
    id: &str,
) -> RdThreadedProducer<DefaultProducerContext> {
    let p: RdThreadedProducer<DefaultProducerContext> = ClientConfig::new()
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
            // librdkafka's abort purges the records it has not sent yet; flushing first
            // writes them all, so read_uncommitted can count every aborted record.
            producer.flush(WAIT).expect("flush before the abort");
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

// ---- our producers ----

/// A multi-threaded runtime: the loops call librdkafka's blocking consumer inside it
/// (`block_in_place`) while the producer task runs.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn txn_config(kafka: &TxnCluster, id: &str, timeout: Duration) -> Config {
    producer_config(kafka)
        .transactional_id(id)
        .transaction_timeout(timeout)
        .build()
        .expect("transactional config")
}

/// Starts a producer-tokio producer with `transactional.id` `id` and runs its `init`.
async fn tokio_txn_producer(config: Config) -> ProducerHandle {
    let p = ProducerHandle::start(config).expect("start the producer");
    txn_of(&p).init().await.expect("init");
    p
}

/// The transactional API of a producer started with a `transactional.id`.
fn txn_of(p: &ProducerHandle) -> producer_tokio::Transactions<'_> {
    p.transactions().expect("a transactional.id")
}

fn out_record(topic: &str, r: &Consumed) -> Record {
    Record::new(topic, transform(r.value.as_deref().unwrap_or_default()))
        .with_key(r.key.clone().unwrap_or_default())
        .with_partition(r.partition)
}

fn offsets_of(consumer: &InputConsumer) -> Vec<OffsetToCommit> {
    consumer
        .next_offsets()
        .iter()
        .map(|(&p, &o)| OffsetToCommit::new(consumer.topic(), p, o))
        .collect()
}

/// Awaits the delivery futures of a committed transaction: each must be delivered with
/// `committed` set.
async fn expect_committed(futures: Vec<DeliveryFuture>) -> usize {
    let n = futures.len();
    for (i, f) in futures.into_iter().enumerate() {
        match f.await {
            Ok(md) => assert!(
                md.committed,
                "record {i}: delivered without committed: {md:?}"
            ),
            Err(e) => panic!("record {i} of a committed transaction failed: {e}"),
        }
    }
    n
}

/// Awaits the delivery futures of a transaction that did not commit: each must fail with its
/// record handed back (the one sent); returns the errors seen, by kind.
async fn expect_failed(
    futures: Vec<(Record, DeliveryFuture)>,
    bound: Duration,
) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for (i, (sent, f)) in futures.into_iter().enumerate() {
        let r = tokio::time::timeout(bound, f)
            .await
            .unwrap_or_else(|_| panic!("record {i}: no report within {bound:?}"));
        match r {
            Ok(md) => panic!("record {i} of an uncommitted transaction was delivered: {md:?}"),
            Err(DeliveryError::Failed(f)) => {
                assert_eq!(f.record.key, sent.key, "record {i} handed back (key)");
                assert_eq!(f.record.value, sent.value, "record {i} handed back (value)");
                let kind = format!("{:?}", f.error);
                let kind = kind
                    .split(['(', ' ', '{'])
                    .next()
                    .unwrap_or_default()
                    .to_string();
                *kinds.entry(kind).or_default() += 1;
            }
            Err(e) => panic!("record {i}: {e}"),
        }
    }
    kinds
}

/// Sends `records` in the open transaction, keeping each beside its future.
async fn send_all(p: &ProducerHandle, records: Vec<Record>) -> Vec<(Record, DeliveryFuture)> {
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        let f = p.send(r.clone()).await.expect("send");
        out.push((r, f));
    }
    out
}

fn numbered(topic: &str, prefix: &str, n: usize, partitions: i32) -> Vec<Record> {
    (0..n)
        .map(|i| {
            Record::new(topic, format!("{prefix}-v{i}").into_bytes())
                .with_key(format!("{prefix}-{i}").into_bytes())
                .with_partition((i % partitions as usize) as i32)
        })
        .collect()
}

fn contents_of(records: &[Record]) -> PartitionContents {
    let mut c = PartitionContents::new();
    for r in records {
        c.entry(r.partition.unwrap()).or_default().push((
            r.key.as_deref().unwrap_or_default().to_vec(),
            r.value.as_deref().unwrap_or_default().to_vec(),
        ));
    }
    c
}

fn read_both(kafka: &TxnCluster, topic: &str, partitions: i32) -> (Vec<Consumed>, Vec<Consumed>) {
    kafka.wait_stable(topic, WAIT).expect("partitions stable");
    let boot = kafka.internal_bootstrap();
    (
        read_back_isolated(&boot, topic, partitions, Isolation::ReadCommitted, WAIT)
            .expect("read_committed"),
        read_back_isolated(&boot, topic, partitions, Isolation::ReadUncommitted, WAIT)
            .expect("read_uncommitted"),
    )
}

/// The consume-transform-produce loop over 100,000 records through producer-tokio, with a
/// broker (a leader of output partitions, neither coordinator) SIGKILLed mid-transaction a
/// third of the way (restarted at half way) and, at two thirds, the producer dropped mid-transaction and a new one started with
/// the same transactional id, continuing from the group's committed offsets.
fn ctp_100k_kill_and_restart_tokio(tv: i16) {
    let Some(mut kafka) = txn_cluster(tv) else {
        return;
    };
    const N: usize = 100_000;
    const BATCH: usize = 2_000;
    let input = kafka.topic("ctp100k-in", PARTITIONS, 3, &[]);
    let output = kafka.topic("ctp100k-out", PARTITIONS, 3, &[]);
    let group = format!("{input}-group");
    let txn_id = format!("{input}-txn");
    let boot = kafka.internal_bootstrap();
    let started = Instant::now();
    let filled = fill_topic(&boot, &input, N, input_record, WAIT).expect("fill the input");
    let filled_in = started.elapsed();
    let probe = Probe::attach(&kafka);
    let config = txn_config(&kafka, &txn_id, Duration::from_secs(60));
    let mut tally = FaultTally::default();
    let (mut txns, mut done, mut dropped_records, mut producers) = (0, 0, 0, 1);
    let mut killed: Option<i32> = None;
    let mut dropped_kinds = BTreeMap::new();
    let rt = runtime();
    let t0 = Instant::now();
    let outcome: Result<(), String> = rt.block_on(async {
        let at = |what: &str, txns: usize, done: usize, e: &dyn std::fmt::Debug| {
            format!(
                "{:.1} s into the loop, transaction {txns} ({done} records done): {what}: {e:?}",
                t0.elapsed().as_secs_f64()
            )
        };
        let mut producer = tokio_txn_producer(config.clone()).await;
        let mut consumer =
            InputConsumer::open(&boot, &group, &input, PARTITIONS, WAIT).expect("input consumer");
        while done < N {
            let recs = tokio::task::block_in_place(|| consumer.poll_batch(BATCH, WAIT));
            assert!(
                !recs.is_empty(),
                "no input within {WAIT:?} ({done} of {N} done)"
            );
            txn_of(&producer)
                .begin()
                .await
                .map_err(|e| at("begin", txns, done, &e))?;
            let out: Vec<Record> = recs.iter().map(|r| out_record(&output, r)).collect();
            let sent = send_all(&producer, out).await;
            if killed.is_none() && done >= N / 3 {
                // A partition leader that coordinates nothing of this loop (the coordinators'
                // own failover is `coordinator_kill_tokio`'s).
                let txn_c = kafka.transaction_coordinator(&txn_id).unwrap();
                let group_c = kafka.group_coordinator(&group).unwrap();
                let victim = kafka
                    .node_ids()
                    .into_iter()
                    .find(|&n| n != txn_c && n != group_c)
                    .expect("three brokers, two coordinators");
                let leads: Vec<i32> = kafka
                    .leaders(&output)
                    .unwrap()
                    .into_iter()
                    .filter(|&(_, l)| l == victim)
                    .map(|(p, _)| p)
                    .collect();
                tokio::task::block_in_place(|| kafka.kill(victim)).unwrap();
                tally.kills += 1;
                killed = Some(victim);
                println!(
                    "  {:.1} s: SIGKILLed broker {victim} (leader of output partitions \
                     {leads:?}; coordinators: transaction {txn_c}, group {group_c}) \
                     mid-transaction at {done} records",
                    t0.elapsed().as_secs_f64()
                );
            }
            if producers == 1 && done >= 2 * N / 3 {
                // The producer goes away mid-transaction; a new one takes its id over.
                drop(producer);
                producer = tokio_txn_producer(config.clone()).await;
                producers += 1;
                dropped_records += sent.len();
                dropped_kinds = expect_failed(sent, WAIT).await;
                tokio::task::block_in_place(|| consumer.rewind(WAIT)).expect("rewind");
                println!(
                    "  {:.1} s: producer dropped mid-transaction at {done} records ({} records \
                     in it), a new one initialised; the old records failed: {dropped_kinds:?}",
                    t0.elapsed().as_secs_f64(),
                    recs.len()
                );
                continue;
            }
            txn_of(&producer)
                .send_offsets(offsets_of(&consumer), ConsumerGroupMetadata::new(&group))
                .await
                .map_err(|e| at("send offsets", txns, done, &e))?;
            txn_of(&producer)
                .commit()
                .await
                .map_err(|e| at("commit", txns, done, &e))?;
            let futures = sent.into_iter().map(|(_, f)| f).collect();
            done += expect_committed(futures).await;
            txns += 1;
            if let Some(id) = killed.filter(|_| tally.restarts == 0 && done >= N / 2) {
                let took = tokio::task::block_in_place(|| kafka.restart(id, WAIT)).unwrap();
                tally.restarts += 1;
                println!(
                    "  {:.1} s: broker {id} restarted at {done} records ({took:?})",
                    t0.elapsed().as_secs_f64()
                );
            }
        }
        producer.close().await;
        Ok(())
    });
    let loop_time = started.elapsed() - filled_in;
    let probe = probe.finish();
    if let Err(e) = outcome {
        panic!(
            "the loop failed at {e}; faults {tally}; the probe:\n{probe}\nthe last 80 \
             requests (and answers):\n{}",
            probe.txn.timeline_tail(80)
        );
    }
    assert!(probe.errors.is_empty(), "protocol probe:\n{probe}");
    let (committed, uncommitted) = read_both(&kafka, &output, PARTITIONS);
    let checked = check_exactly_once(&transformed(&filled), &committed)
        .unwrap_or_else(|e| panic!("read_committed: {e}"));
    assert_eq!(checked, N);
    assert!(
        uncommitted.len() >= N && uncommitted.len() <= N + dropped_records,
        "read_uncommitted {} records: the committed {N} and at most the {dropped_records} of the dropped transaction",
        uncommitted.len()
    );
    let group_offsets = committed_offsets(&boot, &group, &input, PARTITIONS, WAIT).unwrap();
    let ends: BTreeMap<i32, Option<i64>> = filled
        .iter()
        .map(|(&p, v)| (p, Some(v.len() as i64)))
        .collect();
    assert_eq!(group_offsets, ends, "the group's committed offsets");
    probe
        .check_transaction_version(tv)
        .unwrap_or_else(|e| panic!("TV{tv} wire rules: {e}"));
    assert!(
        probe.txn.committed() >= txns,
        "EndTxn commits answered\n{probe}"
    );
    if tv >= 2 {
        assert!(
            !probe.txn.end_txn_epochs.is_empty(),
            "EndTxn v5 hands back the epoch\n{probe}"
        );
    }
    assert_eq!(tally.kills, 1);
    assert_eq!(producers, 2);
    println!(
        "TV{tv} producer-tokio consume-transform-produce: {N} records over {PARTITIONS} partitions, \
         {txns} transactions committed (up to {BATCH} records each), faults: {tally}, 1 producer \
         restart ({dropped_records} records of the dropped transaction failed: {dropped_kinds:?}); \
         read_committed {} (exactly once, in order per partition), read_uncommitted {}; group \
         offsets at the input's end; fill {:.1} s, loop {:.1} s",
        committed.len(),
        uncommitted.len(),
        filled_in.as_secs_f64(),
        loop_time.as_secs_f64()
    );
    println!(
        "  wire: Produce {:?}, EndTxn {:?}, AddPartitionsToTxn {}, epochs from EndTxn {}; {}",
        probe.versions_of(ApiKey::Produce),
        probe.versions_of(ApiKey::EndTxn),
        probe.count(ApiKey::AddPartitionsToTxn),
        probe.txn.end_txn_epochs.len(),
        probe.txn
    );
}

/// The transaction coordinator SIGKILLed with a transaction open (records sent, offsets not
/// yet): the producer finds the new coordinator, and the transaction commits (offsets
/// included); the next one too. Exactly once in read_committed.
fn coordinator_kill_tokio(tv: i16) {
    let Some(mut kafka) = txn_cluster(tv) else {
        return;
    };
    let topic = kafka.topic("coordkill", 3, 3, &[]);
    let txn_id = format!("{topic}-txn");
    let group = format!("{topic}-group");
    let probe = Probe::attach(&kafka);
    let config = txn_config(&kafka, &txn_id, Duration::from_secs(60));
    let first = numbered(&topic, "before", 300, 3);
    let second = numbered(&topic, "after", 300, 3);
    let mut victim = None;
    let t0 = Instant::now();
    let outcome: Result<(), String> = runtime().block_on(async {
        let at = |what: &str, e: &dyn std::fmt::Debug| {
            format!("{:.1} s: {what}: {e:?}", t0.elapsed().as_secs_f64())
        };
        let p = tokio_txn_producer(config).await;
        for (i, recs) in [&first, &second].into_iter().enumerate() {
            txn_of(&p).begin().await.map_err(|e| at("begin", &e))?;
            let sent = send_all(&p, recs.clone()).await;
            if i == 0 {
                let c = kafka.transaction_coordinator(&txn_id).unwrap();
                tokio::task::block_in_place(|| kafka.kill(c)).unwrap();
                victim = Some(c);
                println!(
                    "  {:.1} s: SIGKILLed broker {c} (the transaction coordinator; group \
                     coordinator {:?}) mid-transaction",
                    t0.elapsed().as_secs_f64(),
                    kafka.group_coordinator(&group)
                );
            }
            let offsets = vec![OffsetToCommit::new(&topic, 0, (i as i64 + 1) * 10)];
            txn_of(&p)
                .send_offsets(offsets, ConsumerGroupMetadata::new(&group))
                .await
                .map_err(|e| at("send offsets", &e))?;
            txn_of(&p).commit().await.map_err(|e| at("commit", &e))?;
            expect_committed(sent.into_iter().map(|(_, f)| f).collect()).await;
            println!(
                "  {:.1} s: transaction {i} committed",
                t0.elapsed().as_secs_f64()
            );
        }
        p.close().await;
        Ok(())
    });
    let probe = probe.finish();
    if let Err(e) = outcome {
        panic!(
            "after the coordinator's SIGKILL: {e}\n{probe}\nthe last 60 requests (and \
             answers):\n{}",
            probe.txn.timeline_tail(60)
        );
    }
    let (rc, _) = read_both(&kafka, &topic, 3);
    let all: Vec<Record> = first.iter().chain(&second).cloned().collect();
    check_exactly_once(&contents_of(&all), &rc).unwrap_or_else(|e| panic!("read_committed: {e}"));
    let offsets = committed_offsets(&kafka.internal_bootstrap(), &group, &topic, 1, WAIT).unwrap();
    assert_eq!(
        offsets.get(&0),
        Some(&Some(20)),
        "the group's offset from the second commit"
    );
    probe
        .check_transaction_version(tv)
        .unwrap_or_else(|e| panic!("TV{tv} wire rules: {e}"));
    println!(
        "TV{tv} producer-tokio coordinator SIGKILL: broker {victim:?} killed with a transaction \
         open; both transactions committed ({} records, read_committed exactly once); \
         FindCoordinator answers {:?}",
        rc.len(),
        probe
            .txn
            .answer_codes
            .iter()
            .filter(|((api, _), _)| api == "FindCoordinator")
            .collect::<Vec<_>>()
    );
}

/// An aborted transaction between two committed ones: its delivery futures fail with
/// TransactionAborted and hand the records back; read_committed sees the two committed ones
/// exactly once in order, read_uncommitted the aborted ones too.
fn abort_tokio(tv: i16) {
    let Some(mut kafka) = txn_cluster(tv) else {
        return;
    };
    let topic = kafka.topic("abort", 3, 3, &[]);
    let probe = Probe::attach(&kafka);
    let config = txn_config(&kafka, &format!("{topic}-txn"), Duration::from_secs(60));
    let first = numbered(&topic, "c1", 30, 3);
    let aborted = numbered(&topic, "ab", 60, 3);
    let second = numbered(&topic, "c2", 30, 3);
    runtime().block_on(async {
        let p = tokio_txn_producer(config).await;
        for (recs, commit) in [(&first, true), (&aborted, false), (&second, true)] {
            txn_of(&p).begin().await.expect("begin");
            let sent = send_all(&p, recs.clone()).await;
            if commit {
                txn_of(&p).commit().await.expect("commit");
                expect_committed(sent.into_iter().map(|(_, f)| f).collect()).await;
            } else {
                // Written first (acknowledged), so read_uncommitted has them.
                p.flush().await;
                txn_of(&p).abort().await.expect("abort");
                let kinds = expect_failed(sent, WAIT).await;
                assert_eq!(
                    kinds.get("TransactionAborted"),
                    Some(&recs.len()),
                    "every aborted record fails with TransactionAborted: {kinds:?}"
                );
            }
        }
        p.close().await;
    });
    let probe = probe.finish();
    assert!(probe.errors.is_empty(), "protocol probe:\n{probe}");
    let (rc, ru) = read_both(&kafka, &topic, 3);
    let mut want = first.clone();
    want.extend(second.iter().cloned());
    check_exactly_once(&contents_of(&want), &rc).unwrap_or_else(|e| panic!("read_committed: {e}"));
    let all: Vec<Record> = first
        .iter()
        .chain(&aborted)
        .chain(&second)
        .cloned()
        .collect();
    check_exactly_once(&contents_of(&all), &ru).unwrap_or_else(|e| panic!("read_uncommitted: {e}"));
    assert_eq!(
        (probe.txn.committed(), probe.txn.aborted()),
        (2, 1),
        "EndTxn\n{probe}"
    );
    probe
        .check_transaction_version(tv)
        .unwrap_or_else(|e| panic!("TV{tv} wire rules: {e}"));
    println!(
        "TV{tv} producer-tokio abort: {} committed + {} aborted records (each failed with \
         TransactionAborted, record handed back); read_committed {}, read_uncommitted {}; \
         Produce {:?} EndTxn {:?}",
        want.len(),
        aborted.len(),
        rc.len(),
        ru.len(),
        probe.versions_of(ApiKey::Produce),
        probe.versions_of(ApiKey::EndTxn)
    );
}

/// Zombie fencing: a second producer with the same transactional id initialises while the
/// first has a transaction open; the first's commit fails with the fatal fenced error and
/// its records come back; the second's transaction commits.
fn fencing_tokio(tv: i16) {
    let Some(mut kafka) = txn_cluster(tv) else {
        return;
    };
    let topic = kafka.topic("fence", 3, 3, &[]);
    let id = format!("{topic}-txn");
    let config = txn_config(&kafka, &id, Duration::from_secs(60));
    let zombie_recs = numbered(&topic, "zombie", 30, 3);
    let live_recs = numbered(&topic, "live", 30, 3);
    let (commit_err, kinds, begin_after) = runtime().block_on(async {
        let zombie = tokio_txn_producer(config.clone()).await;
        txn_of(&zombie).begin().await.expect("begin");
        let sent = send_all(&zombie, zombie_recs.clone()).await;
        zombie.flush().await;
        let live = tokio_txn_producer(config).await;
        let commit_err = txn_of(&zombie)
            .commit()
            .await
            .expect_err("the fenced producer's commit");
        let kinds = expect_failed(sent, WAIT).await;
        let begin_after = txn_of(&zombie).begin().await;
        txn_of(&live).begin().await.expect("begin");
        let sent = send_all(&live, live_recs.clone()).await;
        txn_of(&live).commit().await.expect("commit");
        expect_committed(sent.into_iter().map(|(_, f)| f).collect()).await;
        live.close().await;
        zombie.close().await;
        (commit_err, kinds, begin_after)
    });
    match &commit_err {
        TransactionError::Fatal { code, .. }
            if *code == ErrorCode::PRODUCER_FENCED
                || *code == ErrorCode::INVALID_PRODUCER_EPOCH => {}
        e => panic!("the fenced producer's commit: {e:?}, expected Fatal PRODUCER_FENCED"),
    }
    assert!(
        matches!(
            &begin_after,
            Err(TransactionError::Fatal { code, .. }) if *code == ErrorCode::PRODUCER_FENCED
        ),
        "a fenced producer begins nothing, and says why: {begin_after:?}"
    );
    let (rc, ru) = read_both(&kafka, &topic, 3);
    check_exactly_once(&contents_of(&live_recs), &rc)
        .unwrap_or_else(|e| panic!("read_committed: {e}"));
    assert_eq!(
        ru.len(),
        zombie_recs.len() + live_recs.len(),
        "read_uncommitted"
    );
    println!(
        "TV{tv} producer-tokio fencing: the zombie's commit failed with {commit_err}; its {} \
         records came back ({kinds:?}); begin afterwards: {begin_after:?}; the new producer \
         committed {}; read_committed {}, read_uncommitted {}",
        zombie_recs.len(),
        live_recs.len(),
        rc.len(),
        ru.len()
    );
}

/// A transaction left open past `transaction.timeout.ms` (3 s): the coordinator aborts it
/// (awaited on the partitions: the abort markers make them stable with none of its records
/// visible to read_committed); the producer's commit then fails and its records come back;
/// after an abort the producer goes on with a transaction that commits (TV2; on TV1 the
/// coordinator fences the epoch and the abort may fail fatally with PRODUCER_FENCED).
fn timeout_tokio(tv: i16) {
    let Some(mut kafka) = txn_cluster(tv) else {
        return;
    };
    let topic = kafka.topic("timeout", 3, 3, &[]);
    let config = txn_config(&kafka, &format!("{topic}-txn"), Duration::from_secs(3));
    let late = numbered(&topic, "late", 30, 3);
    let after = numbered(&topic, "after", 30, 3);
    let (commit_err, abort_res, kinds, open_ends, aborted_ends) = runtime().block_on(async {
        let p = tokio_txn_producer(config).await;
        txn_of(&p).begin().await.expect("begin");
        let sent = send_all(&p, late.clone()).await;
        p.flush().await;
        let open_ends = tokio::task::block_in_place(|| kafka.partition_ends(&topic)).unwrap();
        // The coordinator's abort: every partition stable again, past the records and a marker.
        let n = late.len() as i64;
        let aborted_ends = tokio::task::block_in_place(|| {
            kafka.wait_ends(
                &topic,
                "the coordinator's abort of the timed-out transaction",
                WAIT,
                |e| {
                    e.iter().all(|e| e.stable())
                        && e.iter().map(|e| e.high_watermark).sum::<i64>() > n
                },
            )
        })
        .unwrap();
        let commit_err = txn_of(&p)
            .commit()
            .await
            .expect_err("commit past the timeout");
        let abort_res = match commit_err {
            TransactionError::Fatal { .. } => None,
            _ => Some(txn_of(&p).abort().await),
        };
        let kinds = expect_failed(sent, WAIT).await;
        if abort_res.as_ref().is_some_and(Result::is_ok) {
            txn_of(&p).begin().await.expect("begin after the timeout");
            let sent = send_all(&p, after.clone()).await;
            txn_of(&p).commit().await.expect("commit after the timeout");
            expect_committed(sent.into_iter().map(|(_, f)| f).collect()).await;
        }
        p.close().await;
        (commit_err, abort_res, kinds, open_ends, aborted_ends)
    });
    assert!(
        matches!(
            commit_err,
            TransactionError::TimedOut { .. }
                | TransactionError::Abortable { .. }
                | TransactionError::Fatal { .. }
        ),
        "commit past the timeout: {commit_err:?}"
    );
    let (rc, ru) = read_both(&kafka, &topic, 3);
    assert!(
        rc.iter()
            .all(|c| !c.key.as_deref().unwrap_or_default().starts_with(b"late")),
        "read_committed sees no record of the timed-out transaction"
    );
    assert_eq!(
        ru.iter()
            .filter(|c| c.key.as_deref().unwrap_or_default().starts_with(b"late"))
            .count(),
        late.len(),
        "read_uncommitted sees the timed-out transaction's records"
    );
    match (&abort_res, tv) {
        (Some(Ok(())), _) => check_exactly_once(&contents_of(&after), &rc)
            .map(drop)
            .unwrap_or_else(|e| panic!("read_committed after the timeout: {e}")),
        // Kafka's TV1 coordinator fences the epoch when it aborts a timed-out transaction
        // (seen on 4.1.1: the abort's epoch bump from the old epoch answered PRODUCER_FENCED):
        // the producer has stopped, and handed every record back (checked above).
        (Some(Err(TransactionError::Fatal { code, .. })), 1)
            if *code == ErrorCode::PRODUCER_FENCED =>
        {
            assert!(
                rc.is_empty(),
                "nothing committed after the fatal abort: {rc:?}"
            )
        }
        (other, _) => panic!(
            "after the timeout (commit: {commit_err:?}; records: {kinds:?}) the producer should \
             abort and go on; abort: {other:?}"
        ),
    }
    println!(
        "TV{tv} producer-tokio transaction timeout (3 s): ends while open {open_ends:?}, after \
         the coordinator's abort {aborted_ends:?}; commit: {commit_err}; abort: {abort_res:?}; \
         {} records failed ({kinds:?}); next transaction committed {}; read_committed {}, \
         read_uncommitted {}",
        late.len(),
        after.len(),
        rc.len(),
        ru.len()
    );
}

/// The consume-transform-produce loop through producer-mio's ThreadedProducer (blocking
/// transaction calls, reports on the callback): 20,000 records, every fourth transaction
/// aborted and redone from the group's offsets.
fn ctp_mio(tv: i16) {
    let Some(mut kafka) = txn_cluster(tv) else {
        return;
    };
    const N: usize = 20_000;
    const BATCH: usize = 1_000;
    let input = kafka.topic("ctpmio-in", PARTITIONS, 3, &[]);
    let output = kafka.topic("ctpmio-out", PARTITIONS, 3, &[]);
    let group = format!("{input}-group");
    let boot = kafka.internal_bootstrap();
    let started = Instant::now();
    let filled = fill_topic(&boot, &input, N, input_record, WAIT).expect("fill the input");
    let probe = Probe::attach(&kafka);
    let config = txn_config(&kafka, &format!("{input}-txn"), Duration::from_secs(60));
    let (tx, rx) = std::sync::mpsc::channel();
    let producer = ThreadedProducer::<usize>::spawn(config, 4096, move |d| {
        let _ = tx.send(d);
    })
    .expect("spawn");
    let txn = producer.transactions().expect("a transactional.id");
    txn.init().expect("init");
    let mut consumer =
        InputConsumer::open(&boot, &group, &input, PARTITIONS, WAIT).expect("input consumer");
    let (mut done, mut commits, mut aborts, mut aborted_records) = (0, 0, 0, 0);
    while done < N {
        let recs = consumer.poll_batch(BATCH, WAIT);
        assert!(
            !recs.is_empty(),
            "no input within {WAIT:?} ({done} of {N} done)"
        );
        txn.begin().expect("begin");
        for (i, r) in recs.iter().enumerate() {
            producer
                .send_with(out_record(&output, r), i)
                .map_err(|e| format!("{e:?}"))
                .expect("send");
        }
        txn.send_offsets(offsets_of(&consumer), ConsumerGroupMetadata::new(&group))
            .expect("send offsets");
        let abort = (commits + aborts) % 4 == 3;
        if abort {
            txn.abort().expect("abort");
        } else {
            txn.commit().expect("commit");
        }
        // The reports reach the callback before the call returns.
        let reports: Vec<Delivery<usize>> = rx.try_iter().collect();
        assert_eq!(
            reports.len(),
            recs.len(),
            "one report per record before the call returned"
        );
        for d in &reports {
            match (&d.result, abort) {
                (Ok(md), false) => assert!(md.committed, "{md:?}"),
                (Err(f), true) => {
                    assert_eq!(f.error, ProduceError::TransactionAborted);
                    let r = &recs[d.opaque];
                    assert_eq!(
                        f.record.key.as_deref(),
                        r.key.as_deref(),
                        "record handed back"
                    );
                }
                (r, _) => panic!("abort {abort}: report {r:?}"),
            }
        }
        if abort {
            aborts += 1;
            aborted_records += recs.len();
            consumer.rewind(WAIT).expect("rewind");
        } else {
            commits += 1;
            done += recs.len();
        }
    }
    producer.close();
    let probe = probe.finish();
    assert!(probe.errors.is_empty(), "protocol probe:\n{probe}");
    let (committed, uncommitted) = read_both(&kafka, &output, PARTITIONS);
    check_exactly_once(&transformed(&filled), &committed)
        .unwrap_or_else(|e| panic!("read_committed: {e}"));
    // An abort may drop records not sent yet: at most every aborted record is in the log.
    assert!(
        uncommitted.len() >= N && uncommitted.len() <= N + aborted_records,
        "read_uncommitted {} records: the {N} committed and at most the {aborted_records} aborted",
        uncommitted.len()
    );
    let group_offsets = committed_offsets(&boot, &group, &input, PARTITIONS, WAIT).unwrap();
    assert!(
        group_offsets
            .iter()
            .all(|(p, o)| *o == Some(filled[p].len() as i64)),
        "the group's offsets at the input's end: {group_offsets:?}"
    );
    probe
        .check_transaction_version(tv)
        .unwrap_or_else(|e| panic!("TV{tv} wire rules: {e}"));
    assert_eq!(
        (probe.txn.committed(), probe.txn.aborted()),
        (commits, aborts),
        "EndTxn\n{probe}"
    );
    println!(
        "TV{tv} producer-mio ThreadedProducer consume-transform-produce: {N} records, {commits} \
         transactions committed, {aborts} aborted ({aborted_records} records, each failed with \
         TransactionAborted); read_committed {} (exactly once, in order), read_uncommitted {}; \
         Produce {:?} EndTxn {:?}; {:.1} s",
        committed.len(),
        uncommitted.len(),
        probe.versions_of(ApiKey::Produce),
        probe.versions_of(ApiKey::EndTxn),
        started.elapsed().as_secs_f64()
    );
}

macro_rules! per_level {
    ($tv:literal) => {
        #[test]
        fn abort_tokio() {
            super::abort_tokio($tv);
        }

        #[test]
        fn ctp_100k_kill_and_restart_tokio() {
            super::ctp_100k_kill_and_restart_tokio($tv);
        }

        #[test]
        fn coordinator_kill_tokio() {
            super::coordinator_kill_tokio($tv);
        }

        #[test]
        fn ctp_mio() {
            super::ctp_mio($tv);
        }

        #[test]
        fn fencing_tokio() {
            super::fencing_tokio($tv);
        }

        #[test]
        fn harness_ctp_librdkafka() {
            super::harness_ctp($tv);
        }

        #[test]
        fn harness_open_then_abort_librdkafka() {
            super::harness_open_then_abort($tv);
        }

        #[test]
        fn timeout_tokio() {
            super::timeout_tokio($tv);
        }
    };
}

/// The tests on the TV1 cluster (libtest runs them before tv2's: one cluster switch).
mod tv1 {
    per_level!(1);
}

/// The tests on the TV2 cluster.
mod tv2 {
    per_level!(2);
}
