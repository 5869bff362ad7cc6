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
    ConsumerGroupMetadata, OffsetToCommit, TransactionError, TransactionOperation,
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
    /// Another producer with the same transactional id starts: this one is a zombie.
    Fence,
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
        1 => Just(Op::Fence),
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
    h.producer.transactions().unwrap().init(h.now).unwrap();
    let r = wait_result(h, TransactionOperation::Init);
    assert_eq!(r.result, Ok(()));
    h.producer.transactions().unwrap().begin(h.now).unwrap();
}

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Committed,
    Aborted,
    /// The producer was fenced (or failed otherwise for good).
    Fatal,
}

/// Ends the open transaction (committing when `commit`, and aborting after a failed commit),
/// then begins the next unless the producer failed for good.
fn end(h: &mut Harness<u64>, commit: bool) -> Ended {
    let fatal = |r: &Result<(), TransactionError>| matches!(r, Err(TransactionError::Fatal { .. }));
    if commit {
        match h.producer.transactions().unwrap().commit(h.now) {
            Ok(()) => {
                let r = wait_result(h, TransactionOperation::Commit).result;
                if r.is_ok() {
                    h.producer.transactions().unwrap().begin(h.now).unwrap();
                    return Ended::Committed;
                }
                if fatal(&r) {
                    return Ended::Fatal;
                }
            }
            Err(TransactionError::Abortable { .. } | TransactionError::TimedOut { .. }) => {}
            Err(TransactionError::Fatal { .. }) => return Ended::Fatal,
            Err(e) => panic!("commit refused: {e}"),
        }
    }
    match h.producer.transactions().unwrap().abort(h.now) {
        Ok(()) => {}
        Err(TransactionError::Fatal { .. }) => return Ended::Fatal,
        Err(e) => panic!("abort refused: {e}"),
    }
    let r = wait_result(h, TransactionOperation::Abort).result;
    if fatal(&r) {
        return Ended::Fatal;
    }
    assert_eq!(r, Ok(()), "abort failed");
    h.producer.transactions().unwrap().begin(h.now).unwrap();
    Ended::Aborted
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

fn start_every_broker(h: &mut Harness<u64>) {
    for b in 1..=BROKERS {
        h.cluster.start_broker(b).unwrap();
    }
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
    let mut fenced = false;
    // Records of the zombie: open when it was fenced, or sent after.
    let mut zombie: HashSet<u64> = HashSet::new();
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
                        Ok(()) => {
                            open.push(id);
                            if fenced {
                                zombie.insert(id);
                            }
                        }
                        // An abortable error refuses records until the abort: they come back.
                        Err(e) => assert_eq!(e.opaque, id),
                    }
                }
            }
            Op::Advance(ms) => h.run_for(Duration::from_millis(ms as u64)),
            Op::Flush => h.producer.flush(h.now),
            Op::SendOffsets { offset } => {
                // The coordinators must be up for the operation to complete.
                start_every_broker(&mut h);
                // The offsets of an input topic the cluster has (TxnOffsetCommit checks it).
                let offsets = vec![OffsetToCommit::new("a", 0, offset as i64)];
                let group = ConsumerGroupMetadata::new(GROUP);
                if h.producer
                    .transactions()
                    .unwrap()
                    .send_offsets(h.now, offsets, group)
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
                start_every_broker(&mut h);
                match end(&mut h, commit) {
                    Ended::Committed => {
                        committed_ids.extend(open.drain(..));
                        offsets_committed = offsets_open.take().or(offsets_committed);
                    }
                    Ended::Aborted => {
                        aborted_ids.extend(open.drain(..));
                        offsets_open = None;
                    }
                    Ended::Fatal => {
                        assert!(fenced, "a producer nobody fenced failed for good");
                        aborted_ids.extend(open.drain(..));
                        break;
                    }
                }
            }
            Op::Fence => {
                h.cluster.fence_transactional_id(h.now, "prop-txn").unwrap();
                fenced = true;
                zombie.extend(open.iter().copied());
                // The zombie's open transaction was aborted by the coordinator.
                offsets_open = None;
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
    start_every_broker(&mut h);
    // The last transaction ends committed, unless the producer was fenced.
    if h.producer.transaction_state() != producer_core::TransactionState::FatalError {
        match end(&mut h, true) {
            Ended::Committed => {
                committed_ids.extend(open.drain(..));
                offsets_committed = offsets_open.take().or(offsets_committed);
            }
            Ended::Aborted => aborted_ids.extend(open.drain(..)),
            Ended::Fatal => {
                assert!(fenced, "a producer nobody fenced failed for good");
                aborted_ids.extend(open.drain(..));
            }
        }
    } else {
        assert!(fenced, "a producer nobody fenced failed for good");
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
    // A fenced producer commits nothing more.
    for id in &zombie {
        assert!(
            !view.contains_key(id),
            "the zombie's record {id} is visible"
        );
        assert_eq!(
            reports.get(id),
            Some(&false),
            "the zombie's record {id} not failed"
        );
    }
    // The group's offsets: the last committed transaction's.
    let offsets = h.cluster.committed_offsets(GROUP);
    assert_eq!(
        offsets.get(&("a".to_string(), 0)).map(|o| o.offset),
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

// ---- One test per row of the error table (KIP-1050's classes), and the timeout ----------

const ALL: &[(&str, i32)] = TOPICS;

fn inject(h: &mut Harness<u64>, api_key: i16, code: ErrorCode, count: u32) {
    h.cluster.inject_error(InjectedError {
        api_key,
        topic: None,
        partition: None,
        error_code: code.0,
        count,
        persist: false,
    });
}

/// How many requests of `api_key` the cluster received.
fn requests(h: &Harness<u64>, api_key: i16) -> usize {
    h.cluster
        .request_log()
        .iter()
        .filter(|r| r.api_key == api_key)
        .count()
}

/// Sends `n` records (ids from `first`) to topic "a" in the open transaction, with the
/// group's offsets when `offsets`, and commits; the commit's result and the ids.
fn commit_one(
    h: &mut Harness<u64>,
    first: u64,
    n: u64,
    offsets: bool,
) -> (TransactionResult, Vec<u64>) {
    let ids: Vec<u64> = (first..first + n).collect();
    for &id in &ids {
        h.send(record(id, "a", true), id).unwrap();
    }
    if offsets {
        let o = vec![OffsetToCommit::new("a", 0, first as i64)];
        h.producer
            .transactions()
            .unwrap()
            .send_offsets(h.now, o, ConsumerGroupMetadata::new(GROUP))
            .unwrap();
        let r = wait_result(h, TransactionOperation::SendOffsets);
        if r.result.is_err() {
            return (r, ids);
        }
    }
    let r = match h.producer.transactions().unwrap().commit(h.now) {
        Ok(()) => wait_result(h, TransactionOperation::Commit),
        Err(e) => TransactionResult {
            operation: TransactionOperation::Commit,
            result: Err(e),
        },
    };
    (r, ids)
}

/// The report of record `id`.
fn report(
    h: &Harness<u64>,
    id: u64,
) -> &Result<producer_core::RecordMetadata, Box<producer_core::DeliveryFailure>> {
    &h.deliveries
        .iter()
        .find(|d| d.opaque == id)
        .unwrap_or_else(|| panic!("no report for {id}"))
        .result
}

fn visible(h: &Harness<u64>, ids: &[u64]) -> usize {
    let view = committed_view(h);
    let _ = ALL;
    ids.iter().filter(|id| view.contains_key(id)).count()
}

#[test]
fn retriable_coordinator_errors_are_retried_and_the_transaction_commits() {
    use producer_sim::{
        API_ADD_OFFSETS_TO_TXN, API_ADD_PARTITIONS_TO_TXN, API_END_TXN, API_FIND_COORDINATOR,
        API_INIT_PRODUCER_ID, API_TXN_OFFSET_COMMIT,
    };
    // (api, code, before init): each answered once with the error, then as usual.
    let rows: &[(i16, ErrorCode, bool, i16)] = &[
        (
            API_FIND_COORDINATOR,
            ErrorCode::COORDINATOR_NOT_AVAILABLE,
            true,
            2,
        ),
        (
            API_INIT_PRODUCER_ID,
            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
            true,
            2,
        ),
        (
            API_INIT_PRODUCER_ID,
            ErrorCode::CONCURRENT_TRANSACTIONS,
            true,
            2,
        ),
        (API_INIT_PRODUCER_ID, ErrorCode::NOT_COORDINATOR, true, 2),
        (
            API_ADD_PARTITIONS_TO_TXN,
            ErrorCode::CONCURRENT_TRANSACTIONS,
            false,
            1,
        ),
        (
            API_ADD_PARTITIONS_TO_TXN,
            ErrorCode::COORDINATOR_NOT_AVAILABLE,
            false,
            1,
        ),
        (
            API_ADD_OFFSETS_TO_TXN,
            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
            false,
            2,
        ),
        (API_ADD_OFFSETS_TO_TXN, ErrorCode::NOT_COORDINATOR, false, 2),
        (API_TXN_OFFSET_COMMIT, ErrorCode::NOT_COORDINATOR, false, 2),
        (
            API_TXN_OFFSET_COMMIT,
            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
            false,
            1,
        ),
        (API_END_TXN, ErrorCode::CONCURRENT_TRANSACTIONS, false, 2),
        (API_END_TXN, ErrorCode::NOT_COORDINATOR, false, 1),
        (API_END_TXN, ErrorCode::COORDINATOR_NOT_AVAILABLE, false, 2),
    ];
    for (k, &(api, code, before_init, tv)) in rows.iter().enumerate() {
        let mut h = transactional(k as u64, tv, "retriable");
        if before_init {
            inject(&mut h, api, code, 1);
            init_and_begin(&mut h);
        } else {
            init_and_begin(&mut h);
            inject(&mut h, api, code, 1);
        }
        let finds = requests(&h, API_FIND_COORDINATOR);
        let (r, ids) = commit_one(&mut h, 0, 5, true);
        assert_eq!(r.result, Ok(()), "{api}/{code}: the transaction commits");
        assert!(
            requests(&h, api) >= 2,
            "{api}/{code}: the request was repeated"
        );
        if matches!(
            code,
            ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE
        ) && !before_init
        {
            assert!(
                requests(&h, API_FIND_COORDINATOR) > finds,
                "{api}/{code}: the coordinator was looked up again"
            );
        }
        assert_eq!(visible(&h, &ids), 5, "{api}/{code}: every record committed");
        assert!(ids
            .iter()
            .all(|&id| matches!(report(&h, id), Ok(m) if m.committed)));
    }
}

#[test]
fn abortable_errors_refuse_the_commit_and_allow_the_abort() {
    use producer_sim::{
        API_ADD_OFFSETS_TO_TXN, API_ADD_PARTITIONS_TO_TXN, API_END_TXN, API_TXN_OFFSET_COMMIT,
    };
    let rows: &[(i16, ErrorCode, i16)] = &[
        (API_END_TXN, ErrorCode::TRANSACTION_ABORTABLE, 2),
        (API_PRODUCE, ErrorCode::CORRUPT_MESSAGE, 2),
        (API_PRODUCE, ErrorCode::TRANSACTION_ABORTABLE, 2),
        (
            API_TXN_OFFSET_COMMIT,
            ErrorCode::GROUP_AUTHORIZATION_FAILED,
            2,
        ),
        (API_ADD_OFFSETS_TO_TXN, ErrorCode::TRANSACTION_ABORTABLE, 2),
        (
            API_ADD_PARTITIONS_TO_TXN,
            ErrorCode::TOPIC_AUTHORIZATION_FAILED,
            1,
        ),
    ];
    for (k, &(api, code, tv)) in rows.iter().enumerate() {
        let mut h = transactional(k as u64, tv, "abortable");
        init_and_begin(&mut h);
        inject(&mut h, api, code, 1);
        let (r, ids) = commit_one(&mut h, 0, 5, true);
        match &r.result {
            Err(TransactionError::Abortable { code: c, .. }) => {
                // The failed record's own code, or the coordinator's.
                assert!(*c == code || api == API_PRODUCE, "{api}/{code}: {c}")
            }
            other => panic!("{api}/{code}: {other:?}"),
        }
        assert_eq!(
            h.producer.transaction_state(),
            producer_core::TransactionState::AbortableError
        );
        assert!(matches!(
            h.producer.transactions().unwrap().commit(h.now),
            Err(TransactionError::Abortable { .. })
        ));
        assert_eq!(
            h.send(record(99, "a", true), 99).unwrap_err().reason,
            producer_core::SendErrorReason::NoTransaction,
            "{api}/{code}: no record joins a failed transaction"
        );
        h.producer.transactions().unwrap().abort(h.now).unwrap();
        assert_eq!(
            wait_result(&mut h, TransactionOperation::Abort).result,
            Ok(())
        );
        assert_eq!(visible(&h, &ids), 0, "{api}/{code}: nothing visible");
        for &id in &ids {
            assert!(report(&h, id).is_err(), "{api}/{code}: record {id} failed");
        }
        // The producer goes on.
        h.producer.transactions().unwrap().begin(h.now).unwrap();
        let (r, ids) = commit_one(&mut h, 100, 3, false);
        assert_eq!(
            r.result,
            Ok(()),
            "{api}/{code}: the next transaction commits"
        );
        assert_eq!(visible(&h, &ids), 3);
    }
}

#[test]
fn fatal_errors_stop_the_producer_and_hand_every_record_back() {
    use producer_sim::{
        API_ADD_PARTITIONS_TO_TXN, API_END_TXN, API_INIT_PRODUCER_ID, API_TXN_OFFSET_COMMIT,
    };
    // Init refused.
    let mut h = transactional(1, 2, "fatal-init");
    inject(
        &mut h,
        API_INIT_PRODUCER_ID,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        1,
    );
    h.producer.transactions().unwrap().init(h.now).unwrap();
    let r = wait_result(&mut h, TransactionOperation::Init);
    assert!(matches!(
        r.result,
        Err(TransactionError::Fatal {
            code: ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            ..
        })
    ));
    assert_eq!(
        h.producer.transaction_state(),
        producer_core::TransactionState::FatalError
    );

    let rows: &[(i16, ErrorCode, i16)] = &[
        (API_END_TXN, ErrorCode::PRODUCER_FENCED, 2),
        (API_END_TXN, ErrorCode::INVALID_TXN_STATE, 1),
        (API_PRODUCE, ErrorCode::PRODUCER_FENCED, 1),
        (API_ADD_PARTITIONS_TO_TXN, ErrorCode::INVALID_TXN_STATE, 1),
        (API_TXN_OFFSET_COMMIT, ErrorCode::PRODUCER_FENCED, 2),
        (
            API_END_TXN,
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            2,
        ),
    ];
    for (k, &(api, code, tv)) in rows.iter().enumerate() {
        let mut h = transactional(k as u64, tv, "fatal");
        init_and_begin(&mut h);
        inject(&mut h, api, code, 1);
        let (r, ids) = commit_one(&mut h, 0, 5, true);
        match &r.result {
            Err(TransactionError::Fatal { code: c, .. }) => assert_eq!(*c, code, "{api}"),
            other => panic!("{api}/{code}: {other:?}"),
        }
        assert_eq!(
            h.producer.transaction_state(),
            producer_core::TransactionState::FatalError
        );
        assert!(
            matches!(h.producer.transactions().unwrap().failure(), Some(TransactionError::Fatal { code: c, .. }) if c == code),
            "{api}/{code}: the failure a driver hands on"
        );
        for &id in &ids {
            match report(&h, id) {
                Err(f) => assert_eq!(id_of(f.record.value.as_deref().unwrap()), id),
                Ok(_) => panic!("{api}/{code}: record {id} reported delivered"),
            }
        }
        assert_eq!(
            visible(&h, &ids),
            0,
            "{api}/{code}: a fenced producer commits nothing"
        );
        assert!(matches!(
            h.producer.transactions().unwrap().begin(h.now),
            Err(TransactionError::Fatal { code: c, .. }) if c == code
        ));
        assert!(h.send(record(99, "a", true), 99).is_err());
    }
}

/// An abort whose EndTxn the coordinator answers with a code of the abortable class (one the
/// retry table neither retries nor makes fatal: UNKNOWN_SERVER_ERROR here) cannot make the
/// transaction more abortable than it is: the EndTxn is asked again after a backoff each time,
/// and the abort completes once the coordinator takes it. (It went again at once before, for
/// as long as the coordinator answered so: a request loop, and an abort that never returned.)
#[test]
fn an_abort_refused_with_an_abortable_code_is_asked_again_after_a_backoff() {
    use producer_sim::API_END_TXN;
    let mut h = transactional(5, 2, "abort-refused");
    init_and_begin(&mut h);
    for id in 0..3 {
        h.send(record(id, "a", true), id).unwrap();
    }
    h.producer.flush(h.now);
    h.run_for(Duration::from_secs(1));
    inject(&mut h, API_END_TXN, ErrorCode::UNKNOWN_SERVER_ERROR, 8);
    let before = h.cluster.request_log().len();
    h.producer.transactions().unwrap().abort(h.now).unwrap();
    let r = wait_result(&mut h, TransactionOperation::Abort);
    assert_eq!(r.result, Ok(()));
    let ends: Vec<_> = h.cluster.request_log()[before..]
        .iter()
        .filter(|r| r.api_key == API_END_TXN)
        .map(|r| r.at)
        .collect();
    assert_eq!(ends.len(), 9, "8 refused, then the abort");
    // retry.backoff.ms (100 ms, with jitter) at least between two of them.
    for w in ends.windows(2) {
        assert!(
            w[1] - w[0] >= Duration::from_millis(50),
            "{:?}",
            w[1] - w[0]
        );
    }
    for id in 0..3 {
        assert!(report(&h, id).is_err(), "record {id} failed with the abort");
    }
    assert_eq!(visible(&h, &[0, 1, 2]), 0);
}

/// A Produce answered `INVALID_PRODUCER_EPOCH` (the coordinator moved the epoch on, as when it
/// aborted the transaction past its timeout while a commit stalled): as in Java, the record
/// fails and the transaction can only be aborted. The abort is a KIP-360 bump from the current
/// epoch (an InitProducerId, not an EndTxn). With TV2 the coordinator answers it with a new
/// epoch and the next transaction commits; with TV1 its abort fences the epoch and the bump is
/// answered with the fatal `PRODUCER_FENCED` (as a transaction past its timeout is, below).
#[test]
fn a_produce_answered_invalid_producer_epoch_aborts_the_transaction_not_the_producer() {
    use producer_sim::{API_END_TXN, API_INIT_PRODUCER_ID};
    for tv in [2, 1] {
        let mut h = transactional(u64::from(tv as u16), tv, "epoch-moved");
        init_and_begin(&mut h);
        inject(&mut h, API_PRODUCE, ErrorCode::INVALID_PRODUCER_EPOCH, 1);
        let (r, ids) = commit_one(&mut h, 0, 5, false);
        assert!(
            matches!(
                r.result,
                Err(TransactionError::Abortable {
                    code: ErrorCode::INVALID_PRODUCER_EPOCH,
                    ..
                })
            ),
            "TV{tv}: {:?}",
            r.result
        );
        let (inits, ends) = (
            requests(&h, API_INIT_PRODUCER_ID),
            requests(&h, API_END_TXN),
        );
        h.producer.transactions().unwrap().abort(h.now).unwrap();
        let r = wait_result(&mut h, TransactionOperation::Abort);
        match tv {
            2 => assert_eq!(r.result, Ok(()), "TV2: the abort"),
            _ => assert!(
                matches!(
                    r.result,
                    Err(TransactionError::Fatal {
                        code: ErrorCode::PRODUCER_FENCED,
                        ..
                    })
                ),
                "TV1: the abort: {:?}",
                r.result
            ),
        }
        assert!(
            requests(&h, API_INIT_PRODUCER_ID) > inits,
            "TV{tv}: the abort bumps the epoch"
        );
        assert_eq!(requests(&h, API_END_TXN), ends, "TV{tv}: no EndTxn");
        for &id in &ids {
            assert!(report(&h, id).is_err(), "TV{tv}: record {id} failed");
        }
        assert_eq!(visible(&h, &ids), 0);
        if tv == 1 {
            continue;
        }
        h.producer.transactions().unwrap().begin(h.now).unwrap();
        let (r, ids) = commit_one(&mut h, 10, 3, false);
        assert_eq!(r.result, Ok(()), "TV2: the next transaction");
        assert_eq!(visible(&h, &ids), 3);
    }
}

/// A transaction left open past `transaction.timeout.ms`: the coordinator aborts it (fencing
/// the epoch), and the producer's commit fails with `TimedOut`; its abort is a KIP-360 bump
/// from its epoch. With TV2 Kafka 4.1.1 keeps that epoch as the last one and answers the bump
/// with the new epoch: the producer goes on. With TV1 the fence keeps no last epoch: the abort
/// fails with the fatal `PRODUCER_FENCED`. Either way every record comes back and nothing is
/// visible. (Both as Apache Kafka answered in `tests/tests/kafka_transactions.rs`.)
#[test]
fn a_transaction_past_its_timeout_is_aborted_by_the_coordinator() {
    for tv in [2, 1] {
        let mut cfg = SimConfig::with_brokers(BROKERS as usize, 7);
        cfg.transaction_version = tv;
        let cluster = cluster_with(cfg, TOPICS);
        let mut h = harness(cluster, |b| {
            b.transactional_id("slow")
                .transaction_timeout(Duration::from_secs(2))
        });
        init_and_begin(&mut h);
        for id in 0..4 {
            h.send(record(id, "a", true), id).unwrap();
        }
        h.producer.flush(h.now);
        // Until the coordinator has aborted it (the sim's clock runs the timeout).
        let aborted = h.run_until(Duration::from_secs(120), |h| {
            h.cluster
                .transaction("slow")
                .is_some_and(|t| t.state == producer_sim::TransactionState::CompleteAbort)
        });
        assert!(aborted, "TV{tv}: the coordinator aborted the transaction");
        assert!(matches!(
            h.producer.transactions().unwrap().commit(h.now),
            Err(TransactionError::TimedOut { timeout_ms: 2000 })
        ));
        h.producer.transactions().unwrap().abort(h.now).unwrap();
        let r = wait_result(&mut h, TransactionOperation::Abort);
        for id in 0..4 {
            assert!(report(&h, id).is_err(), "TV{tv}: record {id} failed");
        }
        assert_eq!(visible(&h, &[0, 1, 2, 3]), 0);
        if tv == 2 {
            assert_eq!(r.result, Ok(()), "TV2: the abort goes on");
            h.producer.transactions().unwrap().begin(h.now).unwrap();
            let (r, ids) = commit_one(&mut h, 10, 3, false);
            assert_eq!(r.result, Ok(()));
            assert_eq!(visible(&h, &ids), 3);
        } else {
            assert!(
                matches!(
                    r.result,
                    Err(TransactionError::Fatal {
                        code: ErrorCode::PRODUCER_FENCED,
                        ..
                    })
                ),
                "TV1: {r:?}"
            );
        }
    }
}

/// The transaction coordinator's broker dies mid-transaction and Kafka moves the coordinator
/// (here: `move_coordinator`, as the controller would once it noticed): the producer, whose
/// connection to the old coordinator fails, looks the coordinator up again and commits.
#[test]
fn a_dead_transaction_coordinator_is_looked_up_again() {
    use producer_sim::CoordinatorKind;
    for tv in [1, 2] {
        let mut h = transactional(3, tv, "moving");
        init_and_begin(&mut h);
        for id in 0..5 {
            h.send(record(id, "a", true), id).unwrap();
        }
        h.run_for(Duration::from_millis(200));
        let old = h
            .cluster
            .coordinator(CoordinatorKind::Transaction, "moving")
            .unwrap();
        h.cluster.stop_broker(old, h.now).unwrap();
        let new = (1..=BROKERS).find(|&b| b != old).unwrap();
        // Its partitions get new leaders at once; the coordinator only later.
        for &(t, n) in TOPICS {
            for p in 0..n {
                if h.cluster.leader(t, p).map(|(l, _)| l) == Some(old) {
                    h.cluster.move_leader(t, p, new).unwrap();
                }
            }
        }
        // The commit needs the coordinator, which FindCoordinator still names for a while
        // (Kafka's controller has not noticed).
        let finds = requests(&h, producer_sim::API_FIND_COORDINATOR);
        h.producer.transactions().unwrap().commit(h.now).unwrap();
        h.run_for(Duration::from_secs(4));
        // Each lookup that names the dead broker backs off further (100 ms doubling, at most
        // 1 s): a handful of lookups, not one every retry.backoff.ms.
        let during = requests(&h, producer_sim::API_FIND_COORDINATOR) - finds;
        assert!(
            (2..=8).contains(&during),
            "TV{tv}: {during} lookups in the 4 s outage"
        );
        assert!(
            h.transactions.len() == 1,
            "TV{tv}: the commit waits for a coordinator"
        );
        h.cluster
            .move_coordinator(CoordinatorKind::Transaction, "moving", new)
            .unwrap();
        let r = wait_result(&mut h, TransactionOperation::Commit);
        assert_eq!(
            r.result,
            Ok(()),
            "TV{tv}: committed through the new coordinator"
        );
        assert_eq!(visible(&h, &(0..5).collect::<Vec<_>>()), 5);
    }
}

/// TV2: a transaction whose batch was sent but refused before it reached the coordinator
/// (NOT_ENOUGH_REPLICAS twice), then aborted: the coordinator aborts it as a transaction with
/// no partition and bumps the epoch (Kafka 4.1.1), and the producer moves to that epoch. The
/// sequences the refused batch took leave no hole in the next transaction, whose batches would
/// otherwise be refused with OUT_OF_ORDER_SEQUENCE_NUMBER and the transaction fail (found by
/// the rolling-fault property, `transactions_rolling.rs`).
#[test]
fn tv2_an_abort_of_a_batch_that_never_landed_moves_to_the_new_epoch() {
    let mut h = transactional(21, 2, "never-landed");
    init_and_begin(&mut h);
    h.cluster.inject_error(InjectedError {
        api_key: API_PRODUCE,
        topic: Some("a".into()),
        partition: Some(0),
        error_code: ErrorCode::NOT_ENOUGH_REPLICAS.0,
        count: 2,
        persist: false,
    });
    let refused = |h: &Harness<u64>| {
        h.cluster
            .request_log()
            .iter()
            .flat_map(|r| &r.produce)
            .filter(|p| p.error_code == ErrorCode::NOT_ENOUGH_REPLICAS.0)
            .count()
    };
    for id in 0..3 {
        h.send(record(id, "a", false).with_partition(0), id)
            .unwrap();
    }
    h.producer.flush(h.now);
    assert!(h.run_until(Duration::from_secs(10), |h| refused(h) == 2));
    let epoch = h
        .cluster
        .transaction("never-landed")
        .unwrap()
        .producer_epoch;
    // Aborted while the batch waits to be retried: it fails, never having landed.
    h.producer.transactions().unwrap().abort(h.now).unwrap();
    assert_eq!(
        wait_result(&mut h, TransactionOperation::Abort).result,
        Ok(())
    );
    assert_eq!(
        h.cluster
            .transaction("never-landed")
            .unwrap()
            .producer_epoch,
        epoch + 1,
        "the abort bumped the epoch"
    );
    h.producer.transactions().unwrap().begin(h.now).unwrap();
    for id in 10..13 {
        h.send(record(id, "a", false).with_partition(0), id)
            .unwrap();
    }
    h.producer.transactions().unwrap().commit(h.now).unwrap();
    assert_eq!(
        wait_result(&mut h, TransactionOperation::Commit).result,
        Ok(()),
        "the next transaction commits"
    );
    assert_eq!(visible(&h, &[10, 11, 12]), 3);
    assert_eq!(visible(&h, &[0, 1, 2]), 0);
}
