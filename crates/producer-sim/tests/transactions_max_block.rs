//! Every blocking transactional call is bounded by `max.block.ms` (issue 27): at the deadline
//! the call completes with `TransactionError::OperationTimedOut` naming the operation, the
//! operation goes on, the same call again waits for it (getting its result at once when it
//! completed meanwhile), and every other operation is refused until then. A close stops
//! waiting for the transaction's end `max.block.ms` after it. All in virtual time against the
//! simulated coordinator, which keeps answering a retriable error for as long as a test says.

mod support;

use std::time::Duration;

use producer_core::{
    ConsumerGroupMetadata, Event, OffsetToCommit, ProduceError, TransactionError,
    TransactionOperation, TransactionResult, TransactionState,
};
use producer_sim::drive::Harness;
use producer_sim::{
    CoordinatorKind, InjectedError, SimConfig, API_ADD_OFFSETS_TO_TXN, API_END_TXN,
    API_FIND_COORDINATOR,
};
use support::run::*;
use support::ErrorCode;

const TOPICS: &[(&str, i32)] = &[("a", 3)];
const MAX_BLOCK: Duration = Duration::from_secs(5);

/// A transactional producer (`max.block.ms` 5 s) on 3 brokers at transaction version `tv`.
fn producer(seed: u64, tv: i16) -> Harness<u64> {
    let mut cfg = SimConfig::with_brokers(3, seed);
    cfg.transaction_version = tv;
    let cluster = cluster_with(cfg, TOPICS);
    harness(cluster, |b| {
        b.transactional_id("bounded")
            .max_block(MAX_BLOCK)
            .request_timeout(Duration::from_millis(1500))
            .retry_backoff(Duration::from_millis(100))
            .retry_backoff_max(Duration::from_secs(1))
            .seed(seed)
    })
}

/// The coordinator answers the next `count` requests of `api` with `code`.
fn inject(h: &mut Harness<u64>, api: i16, code: ErrorCode, count: u32) {
    h.cluster.inject_error(InjectedError {
        api_key: api,
        topic: None,
        partition: None,
        error_code: code.0,
        count,
        persist: false,
    });
}

/// Runs until the next transactional result (at most 10 minutes of virtual time).
fn next_result(h: &mut Harness<u64>) -> TransactionResult {
    let before = h.transactions.len();
    assert!(
        h.run_until(Duration::from_secs(600), |h| h.transactions.len() > before),
        "no result"
    );
    assert_eq!(h.transactions.len(), before + 1, "one result at a time");
    h.transactions[before].clone()
}

fn timed_out(op: TransactionOperation) -> Result<(), TransactionError> {
    Err(TransactionError::OperationTimedOut {
        operation: op,
        max_block_ms: MAX_BLOCK.as_millis() as u64,
    })
}

fn init(h: &mut Harness<u64>) {
    h.producer.transactions().unwrap().init(h.now).unwrap();
    assert_eq!(next_result(h).result, Ok(()));
}

/// Sends `n` records (ids from `first`) in a new transaction and lets them be acknowledged.
fn begin_and_send(h: &mut Harness<u64>, first: u64, n: u64) -> Vec<u64> {
    h.producer.transactions().unwrap().begin(h.now).unwrap();
    let ids: Vec<u64> = (first..first + n).collect();
    for &id in &ids {
        h.send(record(id, "a", true), id).unwrap();
    }
    h.producer.flush(h.now);
    let held = h.run_until(Duration::from_secs(60), |h| {
        h.producer.unacknowledged_records() == 0
    });
    assert!(held, "the records were acknowledged");
    ids
}

/// How many of `ids` a read_committed consumer sees.
fn visible(h: &Harness<u64>, ids: &[u64]) -> usize {
    let mut n = 0;
    for &(t, parts) in TOPICS {
        for p in 0..parts {
            n += h
                .cluster
                .read_committed(t, p)
                .iter()
                .filter(|r| ids.contains(&id_of(r.value.as_deref().unwrap())))
                .count();
        }
    }
    n
}

/// Every other operation is refused while `op` is under way (or its result unclaimed).
fn others_refused(h: &mut Harness<u64>, op: TransactionOperation) {
    let busy = Err(TransactionError::InProgress { operation: op });
    let now = h.now;
    let p = &mut h.producer;
    if op != TransactionOperation::Begin {
        assert_eq!(p.transactions().unwrap().begin(now), busy, "begin");
    }
    if op != TransactionOperation::Commit {
        assert_eq!(p.transactions().unwrap().commit(now), busy, "commit");
    }
    if op != TransactionOperation::Abort {
        assert_eq!(p.transactions().unwrap().abort(now), busy, "abort");
    }
    if op != TransactionOperation::Init {
        assert_eq!(p.transactions().unwrap().init(now), busy, "init");
    }
    if op != TransactionOperation::SendOffsets {
        let o = vec![OffsetToCommit::new("a", 0, 1)];
        let r = p
            .transactions()
            .unwrap()
            .send_offsets(now, o, ConsumerGroupMetadata::new("g"));
        assert_eq!(r, busy, "send offsets");
    }
}

/// A commit whose EndTxn keeps getting CONCURRENT_TRANSACTIONS: the call times out at
/// exactly `max.block.ms` (virtual time), the commit goes on, every other operation is
/// refused, and the commit called again waits for it (timing out again while the coordinator
/// still refuses) until it commits. The records are committed once.
#[test]
fn a_timed_out_commit_goes_on_and_the_call_again_waits_for_it() {
    for tv in [1, 2] {
        let mut h = producer(11, tv);
        init(&mut h);
        let ids = begin_and_send(&mut h, 0, 10);
        // About 25 s of retries (backoff up to 1 s): several max.block.ms periods.
        inject(&mut h, API_END_TXN, ErrorCode::CONCURRENT_TRANSACTIONS, 25);
        let called = h.now;
        h.producer.transactions().unwrap().commit(h.now).unwrap();
        let r = next_result(&mut h);
        assert_eq!(r.operation, TransactionOperation::Commit);
        assert_eq!(r.result, timed_out(TransactionOperation::Commit), "TV{tv}");
        assert_eq!(
            h.now,
            called + MAX_BLOCK,
            "TV{tv}: the call waited max.block.ms"
        );
        assert_eq!(
            h.producer.transaction_state(),
            TransactionState::Committing,
            "TV{tv}: the commit goes on"
        );
        others_refused(&mut h, TransactionOperation::Commit);
        let mut timeouts = 1;
        loop {
            let called = h.now;
            h.producer.transactions().unwrap().commit(h.now).unwrap();
            let r = next_result(&mut h);
            assert_eq!(r.operation, TransactionOperation::Commit);
            if r.result.is_ok() {
                break;
            }
            assert_eq!(r.result, timed_out(TransactionOperation::Commit), "TV{tv}");
            assert_eq!(h.now, called + MAX_BLOCK);
            timeouts += 1;
        }
        assert!(timeouts >= 2, "TV{tv}: {timeouts} timeouts");
        assert_eq!(h.producer.transaction_state(), TransactionState::Ready);
        assert_eq!(visible(&h, &ids), ids.len(), "TV{tv}: committed once");
        for d in &h.deliveries {
            assert!(matches!(&d.result, Ok(m) if m.committed), "TV{tv}: {d:?}");
        }
        // The producer goes on.
        let ids = begin_and_send(&mut h, 100, 3);
        h.producer.transactions().unwrap().commit(h.now).unwrap();
        assert_eq!(next_result(&mut h).result, Ok(()));
        assert_eq!(visible(&h, &ids), 3);
    }
}

/// A commit that completes after its call timed out: nothing is emitted then (nobody waits),
/// the state is Ready but every other operation is refused until the commit is called again,
/// which gets the result at once, without time passing.
#[test]
fn a_commit_completed_after_its_timeout_answers_the_call_again_at_once() {
    let mut h = producer(12, 2);
    init(&mut h);
    let ids = begin_and_send(&mut h, 0, 4);
    inject(&mut h, API_END_TXN, ErrorCode::CONCURRENT_TRANSACTIONS, 8);
    h.producer.transactions().unwrap().commit(h.now).unwrap();
    assert_eq!(
        next_result(&mut h).result,
        timed_out(TransactionOperation::Commit)
    );
    let results = h.transactions.len();
    let done = h.run_until(Duration::from_secs(60), |h| {
        h.producer.transaction_state() == TransactionState::Ready
    });
    assert!(done, "the commit completed");
    assert_eq!(
        h.transactions.len(),
        results,
        "no result while nobody waits"
    );
    assert_eq!(visible(&h, &ids), 4);
    others_refused(&mut h, TransactionOperation::Commit);
    let at = h.now;
    h.producer.transactions().unwrap().commit(h.now).unwrap();
    h.drain();
    assert_eq!(h.transactions.len(), results + 1, "answered at once");
    assert_eq!(h.transactions[results].result, Ok(()));
    assert_eq!(h.now, at);
    // Claimed: the next call is a new operation.
    assert_eq!(
        h.producer.transactions().unwrap().commit(h.now),
        Err(TransactionError::InvalidState {
            operation: TransactionOperation::Commit,
            state: TransactionState::Ready
        })
    );
    h.producer.transactions().unwrap().begin(h.now).unwrap();
}

/// An abort and an init time out and go on the same way; the abort's records fail once, with
/// `TransactionAborted`, when it completes.
#[test]
fn a_timed_out_abort_or_init_goes_on_and_the_call_again_waits_for_it() {
    for tv in [1, 2] {
        let mut h = producer(13, tv);
        // Init: no coordinator for a while.
        inject(
            &mut h,
            API_FIND_COORDINATOR,
            ErrorCode::COORDINATOR_NOT_AVAILABLE,
            12,
        );
        h.producer.transactions().unwrap().init(h.now).unwrap();
        assert_eq!(
            next_result(&mut h).result,
            timed_out(TransactionOperation::Init),
            "TV{tv}"
        );
        assert_eq!(
            h.producer.transaction_state(),
            TransactionState::Initializing
        );
        others_refused(&mut h, TransactionOperation::Init);
        loop {
            h.producer.transactions().unwrap().init(h.now).unwrap();
            match next_result(&mut h).result {
                Ok(()) => break,
                r => assert_eq!(r, timed_out(TransactionOperation::Init)),
            }
        }
        let ids = begin_and_send(&mut h, 0, 6);
        inject(
            &mut h,
            API_END_TXN,
            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
            25,
        );
        h.producer.transactions().unwrap().abort(h.now).unwrap();
        assert_eq!(
            next_result(&mut h).result,
            timed_out(TransactionOperation::Abort)
        );
        others_refused(&mut h, TransactionOperation::Abort);
        assert!(
            h.deliveries.is_empty(),
            "TV{tv}: reported before the abort ended"
        );
        loop {
            h.producer.transactions().unwrap().abort(h.now).unwrap();
            match next_result(&mut h).result {
                Ok(()) => break,
                r => assert_eq!(r, timed_out(TransactionOperation::Abort)),
            }
        }
        assert_eq!(h.deliveries.len(), ids.len(), "TV{tv}: one report each");
        for d in &h.deliveries {
            let f = d.result.as_ref().unwrap_err();
            assert_eq!(f.error, ProduceError::TransactionAborted, "TV{tv}");
            assert_eq!(id_of(f.record.value.as_deref().unwrap()), d.opaque);
        }
        assert_eq!(visible(&h, &ids), 0);
    }
}

/// Offsets whose AddOffsetsToTxn keeps being refused: the call times out; called again with
/// other offsets it is refused (they would be dropped), with the same ones it waits for the
/// first; the offsets are committed with the transaction.
#[test]
fn a_timed_out_send_offsets_is_joined_by_the_same_call_only() {
    let mut h = producer(14, 2);
    init(&mut h);
    let ids = begin_and_send(&mut h, 0, 3);
    inject(
        &mut h,
        API_ADD_OFFSETS_TO_TXN,
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
        15,
    );
    let offsets = vec![OffsetToCommit::new("a", 0, 42)];
    let group = ConsumerGroupMetadata::new("grp");
    h.producer
        .transactions()
        .unwrap()
        .send_offsets(h.now, offsets.clone(), group.clone())
        .unwrap();
    assert_eq!(
        next_result(&mut h).result,
        timed_out(TransactionOperation::SendOffsets)
    );
    others_refused(&mut h, TransactionOperation::SendOffsets);
    let busy = Err(TransactionError::InProgress {
        operation: TransactionOperation::SendOffsets,
    });
    let other = vec![OffsetToCommit::new("a", 0, 43)];
    let r = h
        .producer
        .transactions()
        .unwrap()
        .send_offsets(h.now, other, group.clone());
    assert_eq!(r, busy, "other offsets");
    let r = h.producer.transactions().unwrap().send_offsets(
        h.now,
        offsets.clone(),
        ConsumerGroupMetadata::new("other-group"),
    );
    assert_eq!(r, busy, "another group");
    loop {
        h.producer
            .transactions()
            .unwrap()
            .send_offsets(h.now, offsets.clone(), group.clone())
            .unwrap();
        match next_result(&mut h).result {
            Ok(()) => break,
            r => assert_eq!(r, timed_out(TransactionOperation::SendOffsets)),
        }
    }
    h.producer.transactions().unwrap().commit(h.now).unwrap();
    assert_eq!(next_result(&mut h).result, Ok(()));
    assert_eq!(visible(&h, &ids), 3);
    let committed = h.cluster.committed_offsets("grp");
    assert_eq!(committed[&("a".to_string(), 0)].offset, 42);
}

/// A close while the coordinator never answers EndTxn (its broker stalls every answer): the
/// close stops waiting for the transaction's end `max.block.ms` after it (once no coordinator
/// request is in flight: within the request timeout), and the producer closes. A commit
/// asked and unanswered leaves its records in doubt (`TransactionInDoubt`); an abort, or a
/// commit whose EndTxn never went out, leaves them aborted. Each record gets one report.
#[test]
fn a_close_stops_waiting_for_an_unanswered_end_after_max_block() {
    for (commit, stall_before_end) in [(true, false), (false, false), (true, true)] {
        let what = format!("commit {commit}, stalled before the end {stall_before_end}");
        let mut h = producer(15, 2);
        init(&mut h);
        let ids = begin_and_send(&mut h, 0, 5);
        let coordinator = h
            .cluster
            .coordinator(CoordinatorKind::Transaction, "bounded")
            .unwrap();
        if stall_before_end {
            // No coordinator at all: FindCoordinator is refused, so EndTxn never goes out.
            inject(
                &mut h,
                API_FIND_COORDINATOR,
                ErrorCode::COORDINATOR_NOT_AVAILABLE,
                u32::MAX,
            );
            h.cluster.stop_broker(coordinator, h.now).unwrap();
            // The producer sees its connection to the coordinator go.
            h.run_for(Duration::from_millis(50));
        } else {
            h.cluster.stall_connections_to(coordinator, None).unwrap();
        }
        match commit {
            true => h.producer.transactions().unwrap().commit(h.now).unwrap(),
            false => h.producer.transactions().unwrap().abort(h.now).unwrap(),
        }
        // The call times out; the application closes.
        let r = next_result(&mut h);
        assert!(
            matches!(r.result, Err(TransactionError::OperationTimedOut { .. })),
            "{what}: {r:?}"
        );
        let closed_at = h.now;
        h.producer.close(h.now);
        let closed = h.run_until(Duration::from_secs(600), |h| h.producer.is_closed());
        assert!(closed, "{what}: the close ended");
        let waited = h.now - closed_at;
        assert!(
            waited >= MAX_BLOCK && waited <= MAX_BLOCK + Duration::from_millis(1500),
            "{what}: closed {waited:?} after the call (max.block.ms 5 s, request.timeout.ms 1.5 s)"
        );
        assert!(h.events.iter().any(|e| matches!(e, Event::Closed)));
        let expected = match (commit, stall_before_end) {
            (true, false) => ProduceError::TransactionInDoubt,
            _ => ProduceError::TransactionAborted,
        };
        assert_eq!(h.deliveries.len(), ids.len(), "{what}: one report each");
        for d in &h.deliveries {
            let f = d.result.as_ref().unwrap_err();
            assert_eq!(f.error, expected, "{what}");
            assert_eq!(id_of(f.record.value.as_deref().unwrap()), d.opaque);
        }
        assert_eq!(
            h.transactions.len(),
            2,
            "{what}: nothing more after the timeout"
        );
        assert!(
            h.contract_violations.is_empty(),
            "{:?}",
            h.contract_violations
        );
    }
}
