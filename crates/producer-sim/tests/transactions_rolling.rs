//! Transactions under rolling broker faults (issue 27), as a seeded property of the simulated
//! cluster: three brokers, one fault every few seconds on a broker drawn at random (a crash
//! whose leaderships and coordinators move once the controller notices, a controlled shutdown
//! that moves them first, or a stall that answers nothing), each healed at the next step, so
//! the transaction coordinator and the partition leaders are hit alike; meanwhile a
//! transactional loop of 100 transactions (every tenth aborted on purpose, a failed commit
//! aborted). Every blocking call returns: with success, its typed timeout of `max.block.ms`
//! (then the same call again waits for the same operation), or an error the loop handles;
//! no operation stays unfinished for good. The read_committed view then holds every record of
//! a committed transaction exactly once and in order per key, and none of an aborted one;
//! each record has one report.
//!
//! Cases per run: `PROPTEST_CASES` (default 1000; this property runs a fiftieth of them, each
//! a hundred transactions).

mod support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use producer_core::{TransactionError, TransactionOperation, TransactionResult};
use producer_sim::drive::Harness;
use producer_sim::SimConfig;
use proptest::prelude::*;
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("a", 3), ("b", 2)];
const BROKERS: i32 = 3;
const TRANSACTIONS: u64 = 100;
const ABORT_EVERY: u64 = 10;
const MAX_BLOCK: Duration = Duration::from_secs(10);
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the controller takes to notice a crashed or stalled broker (Kafka's
/// `broker.session.timeout.ms` in the test clusters).
const SESSION_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// SIGKILL: the broker stops; its leaderships move after the session timeout.
    Kill,
    /// SIGTERM: its leaderships move, then it stops.
    Terminate,
    /// SIGSTOP: nothing it answers arrives; its leaderships move after the session timeout.
    Pause,
}

/// One step of the schedule: the fault, its broker, the time to the next step, and whether
/// the healed broker takes its leaderships back (a preferred leader election).
#[derive(Debug, Clone)]
struct Step {
    fault: Fault,
    broker: i32,
    gap_ms: u64,
    lead_again: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop_oneof![
            Just(Fault::Kill),
            Just(Fault::Terminate),
            Just(Fault::Pause)
        ],
        1..=BROKERS,
        2_000..8_000u64,
        any::<bool>(),
    )
        .prop_map(|(fault, broker, gap_ms, lead_again)| Step {
            fault,
            broker,
            gap_ms,
            lead_again,
        })
}

/// The schedule under way: the steps in turn (round and round), the fault in force.
struct Schedule {
    steps: Vec<Step>,
    next: usize,
    next_at: std::time::Instant,
    /// The broker down, its fault, when, and whether the controller moved its leaderships.
    down: Option<(Step, std::time::Instant, bool)>,
    faults: usize,
    coordinator_hits: usize,
}

impl Schedule {
    /// Applies what is due at the harness's time.
    fn tick(&mut self, h: &mut Harness<u64>) {
        let now = h.now;
        if let Some((s, at, false)) = &self.down {
            if s.fault != Fault::Terminate && now >= *at + SESSION_TIMEOUT {
                h.cluster.fail_over(s.broker).unwrap();
                let (s, at) = (s.clone(), *at);
                self.down = Some((s, at, true));
            }
        }
        if now < self.next_at {
            return;
        }
        if let Some((s, _, _)) = self.down.take() {
            match s.fault {
                Fault::Kill | Fault::Terminate => h.cluster.start_broker(s.broker).unwrap(),
                Fault::Pause => h.cluster.unstall_connections_to(s.broker, now).unwrap(),
            }
            if s.lead_again {
                for &(t, n) in TOPICS {
                    for p in (0..n).filter(|p| (*p % BROKERS) + 1 == s.broker) {
                        h.cluster.move_leader(t, p, s.broker).unwrap();
                    }
                }
            }
        }
        let s = self.steps[self.next % self.steps.len()].clone();
        self.next += 1;
        self.next_at = now + Duration::from_millis(s.gap_ms);
        let coordinator = h
            .cluster
            .coordinator(producer_sim::CoordinatorKind::Transaction, "rolling");
        self.coordinator_hits += usize::from(coordinator == Some(s.broker));
        self.faults += 1;
        match s.fault {
            Fault::Kill => h.cluster.stop_broker(s.broker, now).unwrap(),
            Fault::Terminate => {
                h.cluster.fail_over(s.broker).unwrap();
                h.cluster.stop_broker(s.broker, now).unwrap();
            }
            Fault::Pause => h.cluster.stall_connections_to(s.broker, None).unwrap(),
        }
        let moved = s.fault == Fault::Terminate;
        self.down = Some((s, now, moved));
    }

    /// Heals the fault in force.
    fn heal(&mut self, h: &mut Harness<u64>) {
        if let Some((s, _, _)) = self.down.take() {
            h.cluster.start_broker(s.broker).unwrap();
            h.cluster.unstall_connections_to(s.broker, h.now).unwrap();
        }
    }
}

/// Runs the harness in slices of 100 ms with the schedule ticking, until `done` or `limit`.
fn run(
    h: &mut Harness<u64>,
    s: &mut Schedule,
    limit: Duration,
    done: impl Fn(&Harness<u64>) -> bool,
) -> bool {
    let end = h.now + limit;
    while h.now < end {
        s.tick(h);
        if h.run_until(Duration::from_millis(100), &done) {
            return true;
        }
    }
    false
}

/// What the loop saw of its calls.
#[derive(Debug, Default)]
struct Calls {
    calls: usize,
    timeouts: usize,
    /// The most timeouts one operation returned in a row.
    most_in_a_row: usize,
    longest: Duration,
}

/// Calls `op` (through `call`) until its result is not the typed timeout, and returns that
/// result. Each call must complete within `max.block.ms` (virtual time); an operation that
/// times out more often in a row than its records and the coordinator can take is stuck.
fn call(
    h: &mut Harness<u64>,
    s: &mut Schedule,
    calls: &mut Calls,
    op: TransactionOperation,
    call: impl Fn(&mut Harness<u64>) -> Result<(), TransactionError>,
) -> Result<(), TransactionError> {
    // The records' delivery timeout, then the coordinator through two fault periods.
    let max_in_a_row = (DELIVERY_TIMEOUT.as_secs() / MAX_BLOCK.as_secs()) as usize + 4;
    for in_a_row in 0.. {
        assert!(
            in_a_row <= max_in_a_row,
            "{op} timed out {in_a_row} times in a row: stuck"
        );
        calls.calls += 1;
        let before = h.transactions.len();
        let started = h.now;
        call(h)?;
        let answered = run(h, s, MAX_BLOCK + Duration::from_secs(1), |h| {
            h.transactions.len() > before
        });
        assert!(answered, "{op} did not complete within max.block.ms");
        let took = h.now - started;
        assert!(took <= MAX_BLOCK, "{op} took {took:?}");
        calls.longest = calls.longest.max(took);
        let TransactionResult { operation, result } = h.transactions[before].clone();
        assert_eq!(operation, op);
        match result {
            Err(TransactionError::OperationTimedOut { operation, .. }) => {
                assert_eq!(operation, op);
                calls.timeouts += 1;
                calls.most_in_a_row = calls.most_in_a_row.max(in_a_row + 1);
            }
            r => return r,
        }
    }
    unreachable!()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Committed,
    Aborted,
}

fn transaction_loop(seed: u64, tv: i16, records: u64, steps: Vec<Step>) {
    let mut cfg = SimConfig::with_brokers(BROKERS as usize, seed);
    cfg.transaction_version = tv;
    cfg.transaction_marker_delay = Duration::from_millis(seed % 40);
    let cluster = cluster_with(cfg, TOPICS);
    let mut h = harness(cluster, |b| {
        b.transactional_id("rolling")
            .seed(seed)
            .linger(Duration::from_millis(5))
            .max_block(MAX_BLOCK)
            .request_timeout(Duration::from_secs(2))
            .delivery_timeout(DELIVERY_TIMEOUT)
            .transaction_timeout(Duration::from_secs(60))
    });
    let mut s = Schedule {
        steps,
        next: 0,
        next_at: h.now + Duration::from_secs(1),
        down: None,
        faults: 0,
        coordinator_hits: 0,
    };
    let mut calls = Calls::default();
    let r = call(
        &mut h,
        &mut s,
        &mut calls,
        TransactionOperation::Init,
        |h| h.producer.transactions().unwrap().init(h.now),
    );
    assert_eq!(r, Ok(()), "init_transactions");
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut id = 0u64;
    let mut by_txn: HashMap<u64, u64> = HashMap::new();
    for t in 0..TRANSACTIONS {
        h.producer.transactions().unwrap().begin(h.now).unwrap();
        let names = ["a", "b"];
        for k in 0..records {
            let r = record(id, names[(k % 2) as usize], true);
            match h.send(r, id) {
                Ok(()) => {}
                // A record of the transaction failed: it can only be aborted (the commit
                // says so); this record comes back.
                Err(e) if e.reason == producer_core::SendErrorReason::NoTransaction => break,
                Err(e) => panic!("send {id}: {:?}", e.reason),
            }
            by_txn.insert(id, t);
            id += 1;
            if k % 10 == 9 {
                run(&mut h, &mut s, Duration::from_millis(20), |_| false);
            }
        }
        let mut outcome = Outcome::Aborted;
        if t % ABORT_EVERY != ABORT_EVERY - 1 {
            match call(
                &mut h,
                &mut s,
                &mut calls,
                TransactionOperation::Commit,
                |h| h.producer.transactions().unwrap().commit(h.now),
            ) {
                Ok(()) => outcome = Outcome::Committed,
                Err(TransactionError::Abortable { .. } | TransactionError::TimedOut { .. }) => {}
                Err(e) => panic!("transaction {t}: commit: {e}"),
            }
        }
        if outcome == Outcome::Aborted {
            let r = call(
                &mut h,
                &mut s,
                &mut calls,
                TransactionOperation::Abort,
                |h| h.producer.transactions().unwrap().abort(h.now),
            );
            assert_eq!(r, Ok(()), "transaction {t}: abort");
        }
        outcomes.push(outcome);
    }
    s.heal(&mut h);
    h.producer.close(h.now);
    assert!(
        h.run_until(Duration::from_secs(600), |h| h.producer.is_closed()),
        "the producer closed"
    );
    // The coordinator writes the last transaction's markers (`transaction_marker_delay`).
    h.run_for(Duration::from_secs(1));
    assert!(
        h.contract_violations.is_empty(),
        "{:?}",
        h.contract_violations
    );
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );
    // One report per record: delivered and committed exactly for the committed transactions.
    let mut reports: HashMap<u64, bool> = HashMap::new();
    let mut aborted_by: BTreeMap<String, usize> = BTreeMap::new();
    for d in &h.deliveries {
        if let Err(f) = &d.result {
            let kind = format!("{:?}", f.error);
            if std::env::var("ROLLING_VERBOSE").is_ok() && !aborted_by.contains_key(&kind) {
                println!("record {} failed: {kind}", d.opaque);
                if kind.contains("ErrorCode(45)") && std::env::var("ROLLING_TRACE").is_ok() {
                    let t0 = h.cluster.request_log()[0].at;
                    for r in h.cluster.request_log() {
                        for pp in &r.produce {
                            println!(
                                "{:>10.3} b{} c{} corr{} {}/{} ep{} seq{} n{} err{} app{} off{}",
                                (r.at - t0).as_secs_f64(),
                                r.broker_id,
                                r.conn.as_u64(),
                                r.correlation_id,
                                pp.topic,
                                pp.partition,
                                pp.producer_epoch,
                                pp.base_sequence,
                                pp.record_count,
                                pp.error_code,
                                pp.appended,
                                pp.base_offset
                            );
                        }
                        if r.api_key != 0 {
                            println!(
                                "{:>10.3} b{} c{} api{} err{}",
                                (r.at - t0).as_secs_f64(),
                                r.broker_id,
                                r.conn.as_u64(),
                                r.api_key,
                                r.error_code
                            );
                        }
                    }
                    panic!("traced");
                }
            }
            let kind = kind.chars().take(48).collect::<String>();
            *aborted_by.entry(kind).or_default() += 1;
        }
        let ok = match &d.result {
            Ok(m) => m.committed,
            Err(f) => {
                assert_eq!(id_of(f.record.value.as_deref().unwrap()), d.opaque);
                false
            }
        };
        assert!(
            reports.insert(d.opaque, ok).is_none(),
            "two reports for {}",
            d.opaque
        );
    }
    assert_eq!(reports.len(), by_txn.len(), "a report for every record");
    for (rid, ok) in &reports {
        let committed = outcomes[by_txn[rid] as usize] == Outcome::Committed;
        assert_eq!(
            *ok, committed,
            "record {rid} of transaction {}",
            by_txn[rid]
        );
    }
    // read_committed: every record of a committed transaction once, none of an aborted one,
    // each partition (so each key) in send order.
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for &(topic, n) in TOPICS {
        for p in 0..n {
            let ids: Vec<u64> = h
                .cluster
                .read_committed(topic, p)
                .iter()
                .map(|r| id_of(r.value.as_deref().unwrap()))
                .collect();
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "{topic}/{p} out of send order"
            );
            for i in ids {
                *seen.entry(i).or_default() += 1;
            }
        }
    }
    for &rid in by_txn.keys() {
        let want = usize::from(outcomes[by_txn[&rid] as usize] == Outcome::Committed);
        assert_eq!(
            seen.get(&rid).copied().unwrap_or(0),
            want,
            "record {rid} of transaction {} ({:?})",
            by_txn[&rid],
            outcomes[by_txn[&rid] as usize]
        );
    }
    assert!(s.faults > 0);
    let committed = outcomes
        .iter()
        .filter(|o| **o == Outcome::Committed)
        .count();
    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    tally.insert("committed", committed);
    tally.insert("aborted", outcomes.len() - committed);
    tally.insert("faults", s.faults);
    tally.insert("coordinator hits", s.coordinator_hits);
    tally.insert("calls", calls.calls);
    tally.insert("timeouts", calls.timeouts);
    tally.insert("most timeouts in a row", calls.most_in_a_row);
    if std::env::var("ROLLING_VERBOSE").is_ok() {
        println!(
            "seed {seed} TV{tv}: {tally:?}, longest call {:?}, records failed by {aborted_by:?}",
            calls.longest
        );
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: (cases() / 50).max(1),
        max_shrink_iters: 50,
        ..ProptestConfig::default()
    })]

    #[test]
    fn transactions_survive_rolling_faults(
        seed: u64,
        tv2: bool,
        records in 1..60u64,
        steps in proptest::collection::vec(step(), 4..16),
    ) {
        transaction_loop(seed, if tv2 { 2 } else { 1 }, records, steps);
    }
}
