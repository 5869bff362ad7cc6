//! The transactional producer against the simulated cluster's transaction coordinator
//! (Kafka's state machine, control markers, the last stable offset, the read_committed view):
//! random workloads of transactions amid faults, with both transaction versions, and one test
//! per rule the property cannot reach (fencing, the timeout, each error class).
//!
//! Cases per run: `PROPTEST_CASES` (default 1000; the property runs a quarter of them).

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use producer_core::{
    ConsumerGroupMetadata, OffsetToCommit, ProduceError, TransactionError, TransactionOperation,
    TransactionResult,
};
use producer_sim::drive::Harness;
use producer_sim::{InjectedError, SimConfig, API_PRODUCE};
use proptest::prelude::*;
use support::run::*;
use support::ErrorCode;

const TOPICS: &[(&str, i32)] = &[("a", 3), ("b", 2)];
const BROKERS: i32 = 3;
const GROUP: &str = "pipeline";

/// Produce errors a broker answers inside a transaction, and whether the batch was appended.
const FAULTS: &[(ErrorCode, bool)] = &[
    (ErrorCode::NOT_LEADER_OR_FOLLOWER, false),
    (ErrorCode::REQUEST_TIMED_OUT, true),
    (ErrorCode::NOT_ENOUGH_REPLICAS, false),
    (ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND, true),
    (ErrorCode::CORRUPT_MESSAGE, false),
    (ErrorCode::NETWORK_EXCEPTION, false),
];

#[derive(Debug, Clone)]
enum Op {
    Send {
        topic: usize,
        keyed: bool,
        count: u8,
    },
    Advance(u16),
    Flush,
    SendOffsets {
        offset: u16,
    },
    End {
        commit: bool,
    },
    MoveLeader {
        topic: usize,
        partition: i32,
        broker: i32,
    },
    StopBroker(i32),
    StartBroker(i32),
    DropConnections(i32),
    Inject {
        fault: usize,
        topic: usize,
        partition: i32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..2usize, any::<bool>(), 1..15u8)
            .prop_map(|(topic, keyed, count)| Op::Send { topic, keyed, count }),
        3 => (0..300u16).prop_map(Op::Advance),
        1 => Just(Op::Flush),
        1 => (0..1000u16).prop_map(|offset| Op::SendOffsets { offset }),
        3 => any::<bool>().prop_map(|commit| Op::End { commit }),
        1 => (0..2usize, 0..2i32, 1..=BROKERS)
            .prop_map(|(topic, partition, broker)| Op::MoveLeader { topic, partition, broker }),
        1 => (1..=BROKERS).prop_map(Op::StopBroker),
        1 => (1..=BROKERS).prop_map(Op::StartBroker),
        1 => (1..=BROKERS).prop_map(Op::DropConnections),
        1 => (0..FAULTS.len(), 0..2usize, 0..2i32)
            .prop_map(|(fault, topic, partition)| Op::Inject { fault, topic, partition }),
    ]
}

/// A transactional producer on a fresh 3-broker cluster at transaction version `tv`.
fn transactional(seed: u64, tv: i16, id: &str) -> Harness<u64> {
    let mut cfg = SimConfig::with_brokers(BROKERS as usize, seed);
    cfg.transaction_version = tv;
    cfg.fragment_responses = seed % 2 == 0;
    let cluster = cluster_with(cfg, TOPICS);
    harness(cluster, |b| {
        b.transactional_id(id)
            .batch_size(2048)
            .request_timeout(Duration::from_millis(1500))
            .delivery_timeout(Duration::from_secs(20))
            .transaction_timeout(Duration::from_secs(60))
            .seed(seed)
    })
}

/// Runs until the operation under way completes; its result.
fn wait_result(h: &mut Harness<u64>, op: TransactionOperation) -> TransactionResult {
    let before = h.transactions.len();
    let done = h.run_until(Duration::from_secs(600), |h| h.transactions.len() > before);
    assert!(done, "{op} did not complete");
    let r = h.transactions[before].clone();
    assert_eq!(r.operation, op, "results come for the operation under way");
    r
}

/// Starts the producer and opens the first transaction.
fn init_and_begin(h: &mut Harness<u64>) {
    h.producer.init_transactions(h.now).unwrap();
    let r = wait_result(h, TransactionOperation::Init);
    assert_eq!(r.result, Ok(()));
    h.producer.begin_transaction(h.now).unwrap();
}

/// Ends the open transaction (committing when `commit`, and aborting after a failed commit),
/// then begins the next; whether it committed.
fn end(h: &mut Harness<u64>, commit: bool) -> bool {
    let committed = commit
        && match h.producer.commit_transaction(h.now) {
            Ok(()) => wait_result(h, TransactionOperation::Commit).result.is_ok(),
            Err(TransactionError::Abortable { .. } | TransactionError::TimedOut { .. }) => false,
            Err(e) => panic!("commit refused: {e}"),
        };
    if !committed {
        h.producer.abort_transaction(h.now).unwrap();
        let r = wait_result(h, TransactionOperation::Abort);
        assert_eq!(r.result, Ok(()), "abort failed");
    }
    h.producer.begin_transaction(h.now).unwrap();
    committed
}

/// Every record in the read_committed view of the cluster, by id, with where it is.
fn committed_view(h: &Harness<u64>) -> HashMap<u64, Vec<(String, i32, i64)>> {
    let mut m: HashMap<u64, Vec<(String, i32, i64)>> = HashMap::new();
    for &(t, n) in TOPICS {
        for p in 0..n {
            for r in h.cluster.read_committed(t, p) {
                let id = id_of(r.value.as_deref().expect("a value"));
                m.entry(id).or_default().push((t.to_string(), p, r.offset));
            }
        }
    }
    m
}

fn run(seed: u64, tv: i16, ops: &[Op]) {
    let mut h = transactional(seed, tv, "prop-txn");
    init_and_begin(&mut h);
    let names = ["a", "b"];
    let mut next_id = 0u64;
    // Ids of the open transaction's records, and of every ended transaction's, by outcome.
    let mut open: Vec<u64> = Vec::new();
    let mut committed_ids: HashSet<u64> = HashSet::new();
    let mut aborted_ids: HashSet<u64> = HashSet::new();
    let mut offsets_open: Option<i64> = None;
    let mut offsets_committed: Option<i64> = None;
    let mut transactions = (0u32, 0u32);
    for op in ops {
        match *op {
            Op::Send {
                topic,
                keyed,
                count,
            } => {
                for _ in 0..count {
                    let id = next_id;
                    next_id += 1;
                    match h.send(record(id, names[topic], keyed), id) {
                        Ok(()) => open.push(id),
                        // An abortable error refuses records until the abort: they come back.
                        Err(e) => assert_eq!(e.opaque, id),
                    }
                }
            }
            Op::Advance(ms) => h.run_for(Duration::from_millis(ms as u64)),
            Op::Flush => h.producer.flush(h.now),
            Op::SendOffsets { offset } => {
                let offsets = vec![OffsetToCommit::new("input", 0, offset as i64)];
                let group = ConsumerGroupMetadata::new(GROUP);
                if h.producer
                    .send_offsets_to_transaction(h.now, offsets, group)
                    .is_ok()
                {
                    let r = wait_result(&mut h, TransactionOperation::SendOffsets);
                    if r.result.is_ok() {
                        offsets_open = Some(offset as i64);
                    }
                }
            }
            Op::End { commit } => {
                // Before the end: nothing of the open transaction is visible.
                let view = committed_view(&h);
                assert!(
                    open.iter().all(|id| !view.contains_key(id)),
                    "a record was visible before its transaction ended"
                );
                if end(&mut h, commit) {
                    committed_ids.extend(open.drain(..));
                    offsets_committed = offsets_open.take().or(offsets_committed);
                    transactions.0 += 1;
                } else {
                    aborted_ids.extend(open.drain(..));
                    offsets_open = None;
                    transactions.1 += 1;
                }
            }
            Op::MoveLeader {
                topic,
                partition,
                broker,
            } => h
                .cluster
                .move_leader(names[topic], partition, broker)
                .unwrap(),
            Op::StopBroker(b) => h.cluster.stop_broker(b, h.now).unwrap(),
            Op::StartBroker(b) => h.cluster.start_broker(b).unwrap(),
            Op::DropConnections(b) => {
                let now = h.now;
                h.cluster.drop_connections_to(now, b);
            }
            Op::Inject {
                fault,
                topic,
                partition,
            } => {
                let (code, persist) = FAULTS[fault];
                h.cluster.inject_error(InjectedError {
                    api_key: API_PRODUCE,
                    topic: Some(names[topic].to_string()),
                    partition: Some(partition),
                    error_code: code.0,
                    count: 1,
                    persist,
                });
            }
        }
        h.drain();
        assert!(
            h.contract_violations.is_empty(),
            "{:?}",
            h.contract_violations
        );
    }
    for b in 1..=BROKERS {
        h.cluster.start_broker(b).unwrap();
    }
    // The last transaction ends committed.
    if end(&mut h, true) {
        committed_ids.extend(open.drain(..));
        offsets_committed = offsets_open.take().or(offsets_committed);
    } else {
        aborted_ids.extend(open.drain(..));
    }
    h.producer.close(h.now);
    assert!(
        h.run_until(Duration::from_secs(600), |h| h.producer.is_closed()),
        "the producer did not close"
    );

    // One report per record: delivered and committed exactly for the committed transactions'.
    let mut reports: HashMap<u64, bool> = HashMap::new();
    for d in &h.deliveries {
        let ok = match &d.result {
            Ok(m) => {
                assert!(
                    m.committed,
                    "a transactional record reported without a commit"
                );
                true
            }
            Err(f) => {
                assert_eq!(
                    id_of(f.record.value.as_deref().unwrap()),
                    d.opaque,
                    "record back"
                );
                false
            }
        };
        assert!(
            reports.insert(d.opaque, ok).is_none(),
            "two reports for {}",
            d.opaque
        );
    }
    for id in &committed_ids {
        assert_eq!(
            reports.get(id),
            Some(&true),
            "committed record {id} not delivered"
        );
    }
    for id in &aborted_ids {
        assert_eq!(
            reports.get(id),
            Some(&false),
            "aborted record {id} not failed"
        );
    }
    // The read_committed view: committed records exactly once, aborted ones never, and each
    // partition's records in send order.
    let view = committed_view(&h);
    for id in &committed_ids {
        assert_eq!(
            view.get(id).map(Vec::len),
            Some(1),
            "committed record {id} not once"
        );
    }
    for id in &aborted_ids {
        assert!(
            !view.contains_key(id),
            "aborted record {id} visible to read_committed"
        );
    }
    let mut by_partition: BTreeMap<(String, i32), Vec<(i64, u64)>> = BTreeMap::new();
    for (id, places) in &view {
        let (t, p, o) = places[0].clone();
        by_partition.entry((t, p)).or_default().push((o, *id));
    }
    for ((t, p), mut recs) in by_partition {
        recs.sort();
        let ids: Vec<u64> = recs.iter().map(|&(_, id)| id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted, "{t}/{p} out of send order");
    }
    // The group's offsets: the last committed transaction's.
    let offsets = h.cluster.committed_offsets(GROUP);
    assert_eq!(
        offsets.get(&("input".to_string(), 0)).map(|o| o.offset),
        offsets_committed,
        "group offsets"
    );
    assert!(
        h.cluster.violations().is_empty(),
        "the sim saw protocol violations: {:?}",
        h.cluster.violations()
    );
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 4, max_shrink_iters: 1000, ..ProptestConfig::default() })]

    #[test]
    fn transactions_commit_exactly_once_and_abort_invisibly(
        seed: u64,
        tv2: bool,
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        run(seed, if tv2 { 2 } else { 1 }, &ops);
    }
}
