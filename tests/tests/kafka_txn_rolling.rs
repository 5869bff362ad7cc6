//! Transactions under rolling broker faults on Apache Kafka (issue 27): the transaction tier's
//! 3-node cluster at transaction version 2 (Kafka 4.1's default), one fault every few seconds
//! on a node drawn at random (SIGKILL, SIGTERM or SIGSTOP; healed at the next step, so one
//! node at most is down), hitting the transaction coordinator and the partition leaders
//! alike, while a transactional loop runs: begin, send, commit (every tenth transaction aborted
//! on purpose; a commit that fails is aborted). Every blocking call must return, with success,
//! the typed timeout of `max.block.ms` (then the same call again waits for the same operation)
//! or an error the loop handles; the calls are counted, not timed against a bound of the
//! test's. An independent consumer (librdkafka, `read_committed`) then reads every record of a
//! committed transaction exactly once and in order per key, and none of an aborted one.
//!
//! CI: `rolling_faults_mio`, 100 transactions. Longer:
//! `KAFKA_TXN_ROLLING_TXNS=1000 KAFKA_TXN_ROLLING_RECORDS=200 cargo test --release -p
//! producer-tests --test kafka_txn_rolling -- --nocapture` (`KAFKA_TXN_ROLLING_SEED`,
//! `KAFKA_TXN_ROLLING_INTERVAL_MS`, `KAFKA_TXN_ROLLING_MAX_BLOCK_MS` vary it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use producer_core::{Delivery, ProduceError, Record, TransactionError, TransactionOperation};
use producer_mio::ThreadedProducer;
use producer_tests::kafka::probe::Probe;
use producer_tests::kafka::rolling::{
    check_read_back, count, record_of, run_faults, CallSummary, Calls, FaultTally, Outcome,
    Schedule,
};
use producer_tests::kafka::suite::producer_config;
use producer_tests::kafka::txn::{txn_cluster, TxnCluster};
use producer_tests::readback::{read_back_isolated, Isolation};

/// Generous bound for one read-back or admin wait (a failure, never a pass condition).
const WAIT: Duration = Duration::from_secs(120);

/// Partitions of the topic.
const PARTITIONS: i32 = 6;

/// Keys the records of a transaction take in turn.
const KEYS: usize = 24;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The loop's parameters.
#[derive(Debug, Clone)]
struct Spec {
    transactions: usize,
    records: usize,
    /// Every `abort_every`-th transaction is aborted on purpose.
    abort_every: usize,
    max_block: Duration,
    schedule: Schedule,
}

impl Spec {
    fn from_env() -> Spec {
        Spec {
            transactions: env_u64("KAFKA_TXN_ROLLING_TXNS", 100) as usize,
            records: env_u64("KAFKA_TXN_ROLLING_RECORDS", 20) as usize,
            abort_every: 10,
            max_block: Duration::from_millis(env_u64("KAFKA_TXN_ROLLING_MAX_BLOCK_MS", 10_000)),
            schedule: Schedule {
                seed: env_u64("KAFKA_TXN_ROLLING_SEED", 0x2727),
                interval: Duration::from_millis(env_u64("KAFKA_TXN_ROLLING_INTERVAL_MS", 3_000)),
            },
        }
    }

    fn aborts_on_purpose(&self, t: usize) -> bool {
        t % self.abort_every == self.abort_every - 1
    }
}

/// The operations named as the calls count them.
fn op_name(op: TransactionOperation) -> String {
    op.to_string()
}

/// Whether a call's result is the typed timeout of `op`.
fn is_timeout(r: &Result<(), TransactionError>, op: TransactionOperation) -> bool {
    matches!(r, Err(TransactionError::OperationTimedOut { operation, .. }) if *operation == op)
}

/// What the loop ran into that it cannot go on from.
#[derive(Debug)]
struct Stuck(String);

/// Calls `op` until it returns something other than its typed timeout; more than
/// `max_repeats` timeouts in a row means the operation is stuck.
fn call_until_done(
    calls: &Calls,
    op: TransactionOperation,
    max_repeats: usize,
    call: impl Fn() -> Result<(), TransactionError>,
) -> Result<Result<(), TransactionError>, Stuck> {
    for _ in 0..=max_repeats {
        let r = calls.run(&op_name(op), &call, |r| is_timeout(r, op));
        if !is_timeout(&r, op) {
            return Ok(r);
        }
    }
    Err(Stuck(format!(
        "{op} returned its timeout {} times in a row",
        max_repeats + 1
    )))
}

/// Our transactional loop, through producer-mio's ThreadedProducer. Returns each
/// transaction's outcome, and how many times the producer was started.
fn our_loop(
    kafka: &TxnCluster,
    spec: &Spec,
    topic: &str,
    txn_id: &str,
    calls: &Calls,
) -> Result<(Vec<Outcome>, usize), Stuck> {
    let delivery_timeout = Duration::from_millis(env_u64("KAFKA_TXN_ROLLING_DELIVERY_MS", 60_000));
    let request_timeout = Duration::from_millis(env_u64("KAFKA_TXN_ROLLING_REQUEST_MS", 5_000));
    let config = || {
        producer_config(kafka)
            .transactional_id(txn_id)
            .transaction_timeout(Duration::from_secs(60))
            .request_timeout(request_timeout)
            .delivery_timeout(delivery_timeout)
            .max_block(spec.max_block)
            .linger(Duration::from_millis(5))
            .build()
            .expect("transactional config")
    };
    // An operation may wait for its records (the delivery timeout) and then for the
    // coordinator: past that many timeouts in a row, it is stuck.
    let max_repeats =
        (2 * delivery_timeout.as_millis() / spec.max_block.as_millis().max(1)) as usize + 6;
    let (tx, rx) = mpsc::channel::<Delivery<(usize, usize)>>();
    let start = |tx: mpsc::Sender<Delivery<(usize, usize)>>| {
        let p = ThreadedProducer::<(usize, usize)>::spawn(config(), 4096, move |d| {
            let _ = tx.send(d);
        })
        .expect("spawn the producer");
        let r = call_until_done(calls, TransactionOperation::Init, max_repeats, || {
            p.init_transactions()
        })?;
        r.map_err(|e| Stuck(format!("init_transactions: {e}")))?;
        Ok::<_, Stuck>(p)
    };
    let mut producer = start(tx.clone())?;
    let mut starts = 1;
    let mut outcomes = Vec::with_capacity(spec.transactions);
    for t in 0..spec.transactions {
        producer
            .begin_transaction()
            .map_err(|e| Stuck(format!("begin {t}: {e}")))?;
        for i in 0..spec.records {
            let (key, value) = record_of(t, i, KEYS);
            let mut r = (Record::new(topic, value).with_key(key), (t, i));
            loop {
                match producer.send_with(r.0, r.1) {
                    Ok(()) => break,
                    Err(producer_mio::SendError::Full(rec, o)) => {
                        r = (rec, o);
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(e) => return Err(Stuck(format!("send {t}:{i}: {e:?}"))),
                }
            }
        }
        let mut outcome = if spec.aborts_on_purpose(t) {
            Outcome::Aborted
        } else {
            match call_until_done(calls, TransactionOperation::Commit, max_repeats, || {
                producer.commit_transaction()
            })? {
                Ok(()) => Outcome::Committed,
                Err(TransactionError::Abortable { .. } | TransactionError::TimedOut { .. }) => {
                    Outcome::Failed
                }
                Err(TransactionError::Fatal { .. }) => Outcome::InDoubt,
                Err(e) => return Err(Stuck(format!("commit {t}: {e}"))),
            }
        };
        if matches!(outcome, Outcome::Aborted | Outcome::Failed) {
            match call_until_done(calls, TransactionOperation::Abort, max_repeats, || {
                producer.abort_transaction()
            })? {
                Ok(()) => {}
                // Fenced: the transaction was aborted by the coordinator anyway.
                Err(TransactionError::Fatal { .. }) => outcome = Outcome::InDoubt,
                Err(e) => return Err(Stuck(format!("abort {t}: {e}"))),
            }
        }
        // Every record has its report once its transaction's call returned.
        let reports: Vec<_> = rx.try_iter().collect();
        let mine = reports.iter().filter(|d| d.opaque.0 == t).count();
        if outcome != Outcome::InDoubt && mine != spec.records {
            return Err(Stuck(format!(
                "transaction {t} ({outcome:?}): {mine} of {} reports when its call returned",
                spec.records
            )));
        }
        for d in &reports {
            match (&d.result, outcome) {
                (Ok(md), Outcome::Committed) => assert!(md.committed, "{t}: {md:?}"),
                (Err(f), Outcome::Aborted | Outcome::Failed | Outcome::InDoubt) => {
                    let (key, value) = record_of(d.opaque.0, d.opaque.1, KEYS);
                    assert_eq!(f.record.key.as_deref(), Some(key.as_slice()));
                    assert_eq!(f.record.value.as_deref(), Some(value.as_slice()));
                    if outcome != Outcome::InDoubt {
                        assert_eq!(
                            f.error,
                            ProduceError::TransactionAborted,
                            "{t}: {:?}",
                            d.opaque
                        );
                    }
                }
                (r, o) => panic!("transaction {t} {o:?}: report {:?} {r:?}", d.opaque),
            }
        }
        outcomes.push(outcome);
        if outcome == Outcome::InDoubt {
            // The producer failed for good: a new one takes over the transactional id.
            producer.close();
            producer = start(tx.clone())?;
            starts += 1;
        }
    }
    producer.close();
    Ok((outcomes, starts))
}

fn print_summary(
    who: &str,
    spec: &Spec,
    outcomes: &[Outcome],
    calls: &CallSummary,
    faults: &FaultTally,
    took: Duration,
) {
    println!(
        "{who}: {} transactions of {} records in {:.1} s: {} committed, {} aborted on purpose, \
         {} failed and aborted, {} in doubt; {calls}; faults every {:?}: {faults}",
        outcomes.len(),
        spec.records,
        took.as_secs_f64(),
        count(outcomes, Outcome::Committed),
        count(outcomes, Outcome::Aborted),
        count(outcomes, Outcome::Failed),
        count(outcomes, Outcome::InDoubt),
        spec.schedule.interval,
    );
}

#[test]
fn rolling_faults_mio() {
    let Some(mut kafka) = txn_cluster(2) else {
        return;
    };
    let spec = Spec::from_env();
    let topic = kafka.topic("rolling", PARTITIONS, 3, &[]);
    let txn_id = format!("{topic}-txn");
    let calls = Calls::default();
    let stop = AtomicBool::new(false);
    let probe = Probe::attach(&kafka);
    let started = Instant::now();
    // A call blocked far past max.block.ms: the producer broke its bound (a failure, never
    // a pass condition; without it a hang would hang the test).
    let hang = spec.max_block * 10 + Duration::from_secs(60);
    let k: &TxnCluster = &kafka;
    let (result, faults) = std::thread::scope(|s| {
        let faults = s.spawn(|| {
            run_faults(k, &spec.schedule, &txn_id, &topic, &stop, || {
                if let Some((op, blocked)) = calls.under_way() {
                    if blocked > hang {
                        eprintln!(
                            "**** {op} has blocked for {blocked:?} (max.block.ms {:?}); logs:\n{}",
                            spec.max_block,
                            k.logs(40)
                        );
                        std::process::abort();
                    }
                }
            })
        });
        let result = our_loop(k, &spec, &topic, &txn_id, &calls);
        stop.store(true, Ordering::Relaxed);
        (result, faults.join().expect("the fault thread"))
    });
    let took = started.elapsed();
    let probe = probe.finish();
    let faults = faults.unwrap_or_else(|e| panic!("the fault schedule failed: {e}"));
    let summary = calls.summary();
    let (outcomes, starts) = match result {
        Ok(r) => r,
        Err(Stuck(why)) => panic!(
            "{why}\n{summary}\nfaults: {faults}\n{}\nwire (last requests):\n{}",
            faults.log.join("\n"),
            probe.txn.timeline_tail(60)
        ),
    };
    print_summary("producer-mio", &spec, &outcomes, &summary, &faults, took);
    println!(
        "producers started: {starts}; faults:\n{}",
        faults.log.join("\n")
    );
    // Every call returned: with success, its typed timeout (then called again), or an error
    // the loop handled.
    assert_eq!(summary.started, summary.returned, "{summary}");
    assert!(faults.faults() > 0, "no fault was applied");
    assert!(
        count(&outcomes, Outcome::Committed) > 0,
        "nothing committed"
    );
    kafka.wait_stable(&topic, WAIT).expect("partitions stable");
    let read = read_back_isolated(
        &kafka.internal_bootstrap(),
        &topic,
        PARTITIONS,
        Isolation::ReadCommitted,
        WAIT,
    )
    .expect("read_committed read-back");
    let r = check_read_back(&outcomes, spec.records, KEYS, &read)
        .unwrap_or_else(|e| panic!("read_committed: {e}"));
    println!(
        "read_committed: {} records, {} transactions whole ({} in doubt found committed), each \
         record once and in order per key; none of the {} aborted",
        r.records,
        r.transactions,
        r.in_doubt_committed,
        count(&outcomes, Outcome::Aborted) + count(&outcomes, Outcome::Failed)
    );
    print!("{probe}");
}
