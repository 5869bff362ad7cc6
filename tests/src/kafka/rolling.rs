//! Transactions under rolling broker faults (issue 27): a seeded schedule that, every few
//! seconds, heals the last fault and hits a node chosen at random with SIGKILL, SIGTERM or
//! SIGSTOP ([`run_faults`]), the transactional loop run through it by our producer or by
//! Java's ([`Outcome`] per transaction, [`Calls`] for every blocking call), and the check of
//! a `read_committed` read-back against the outcomes ([`check_read_back`]).
//!
//! Records are `(key, value)` = `k<key>`, `<transaction>:<index>`: keys spread the records of
//! every transaction over the topic's partitions (Java's murmur2 places them, as it places
//! ours), and the value names the record, so the read-back says which transaction each came
//! from and in which order each key's records were written.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::KafkaCluster;
use crate::readback::Consumed;

/// xorshift64*, seeded: the schedule is a function of the seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is taken as 1).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One fault of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL; restarted at the next step.
    Kill,
    /// SIGTERM (a controlled shutdown: leaders move away first); restarted at the next step.
    Terminate,
    /// SIGSTOP (connections stay open, nothing is answered); SIGCONT at the next step.
    Pause,
}

/// The fault schedule: every `interval`, the last fault is healed (restart or SIGCONT) and a
/// new one hits a node drawn from `seed`, so at most one node of the three is down.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The seed of the draws.
    pub seed: u64,
    /// The time from one fault to the next (with `wait_rejoin`, the heal's wait comes on top).
    pub interval: Duration,
    /// Whether a heal waits until every live node lists the node again before the next fault
    /// (the cluster recovers between faults), or only starts it (a restarting node is not in
    /// sync yet when the next fault comes: partitions may lack their minimum in-sync replicas
    /// for a while).
    pub wait_rejoin: bool,
}

/// What the schedule did.
#[derive(Debug, Default, Clone)]
pub struct FaultTally {
    /// SIGKILLs.
    pub kills: usize,
    /// SIGTERMs.
    pub terminations: usize,
    /// SIGSTOPs.
    pub pauses: usize,
    /// Faults that hit the node coordinating the transactional id (as FindCoordinator
    /// answered just before).
    pub coordinator_hits: usize,
    /// Faults that hit a node leading at least one partition of the topic.
    pub leader_hits: usize,
    /// The longest heal (a restart until every node lists the node again).
    pub longest_heal: Duration,
    /// Each fault, with the time since the schedule started.
    pub log: Vec<String>,
}

impl FaultTally {
    /// Faults applied.
    pub fn faults(&self) -> usize {
        self.kills + self.terminations + self.pauses
    }
}

impl fmt::Display for FaultTally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} faults ({} SIGKILL, {} SIGTERM, {} SIGSTOP; {} on the transaction coordinator, \
             {} on a leader of the topic; longest heal {:.1} s)",
            self.faults(),
            self.kills,
            self.terminations,
            self.pauses,
            self.coordinator_hits,
            self.leader_hits,
            self.longest_heal.as_secs_f64()
        )
    }
}

/// Undoes `fault` on `node`; with `wait`, until every live node lists it again.
fn heal(k: &KafkaCluster, node: i32, fault: Fault, wait: bool) -> Result<Duration, String> {
    let started = Instant::now();
    match fault {
        Fault::Kill | Fault::Terminate => k
            .relaunch(node)
            .map_err(|e| format!("restart node {node}: {e}"))?,
        Fault::Pause => k
            .resume(node)
            .map_err(|e| format!("resume node {node}: {e}"))?,
    }
    if wait {
        k.wait_brokers_listed(&k.node_ids(), Duration::from_secs(120))
            .map_err(|e| format!("node {node} back after {fault:?}: {e}"))?;
    }
    Ok(started.elapsed())
}

/// Runs `schedule` on `k` until `stop` is set, then heals the last fault. `txn_id` and
/// `topic` name what counts as the coordinator and the leaders. `watch` is called between
/// steps (every 100 ms): a test's watchdog.
pub fn run_faults(
    k: &KafkaCluster,
    schedule: &Schedule,
    txn_id: &str,
    topic: &str,
    stop: &AtomicBool,
    mut watch: impl FnMut(),
) -> Result<FaultTally, String> {
    let started = Instant::now();
    let mut rng = Rng::new(schedule.seed);
    let mut t = FaultTally::default();
    let mut last: Option<(i32, Fault)> = None;
    let wait = |stop: &AtomicBool, d: Duration, watch: &mut dyn FnMut()| {
        let until = Instant::now() + d;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            watch();
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait(stop, schedule.interval, &mut watch);
    while !stop.load(Ordering::Relaxed) {
        if let Some((node, fault)) = last.take() {
            let took = heal(k, node, fault, schedule.wait_rejoin)?;
            t.longest_heal = t.longest_heal.max(took);
        }
        let node = rng.below(3) as i32 + 1;
        let fault = match rng.below(3) {
            0 => Fault::Kill,
            1 => Fault::Terminate,
            _ => Fault::Pause,
        };
        let coordinator = k.transaction_coordinator(txn_id).ok();
        let leads = k
            .leaders(topic)
            .map(|l| l.values().any(|&n| n == node))
            .unwrap_or(false);
        t.coordinator_hits += usize::from(coordinator == Some(node));
        t.leader_hits += usize::from(leads);
        match fault {
            Fault::Kill => {
                k.kill(node).map_err(|e| format!("kill {node}: {e}"))?;
                t.kills += 1;
            }
            Fault::Terminate => {
                k.terminate(node, Duration::from_secs(60))
                    .map_err(|e| format!("terminate {node}: {e}"))?;
                t.terminations += 1;
            }
            Fault::Pause => {
                k.pause(node).map_err(|e| format!("pause {node}: {e}"))?;
                t.pauses += 1;
            }
        }
        t.log.push(format!(
            "{:7.1} s {fault:?} node {node}{}{}",
            started.elapsed().as_secs_f64(),
            if coordinator == Some(node) {
                " (coordinator)"
            } else {
                ""
            },
            if leads { " (leader)" } else { "" },
        ));
        last = Some((node, fault));
        wait(stop, schedule.interval, &mut watch);
    }
    if let Some((node, fault)) = last {
        heal(k, node, fault, true)?;
    }
    Ok(t)
}

/// The blocking transactional calls of a loop: how many, how many returned the typed timeout,
/// the longest, and the call under way (for a watchdog).
#[derive(Debug, Default)]
pub struct Calls {
    inner: Mutex<CallsInner>,
}

#[derive(Debug, Default)]
struct CallsInner {
    started: usize,
    returned: usize,
    timeouts: usize,
    longest: Option<(Duration, String)>,
    by_op: BTreeMap<String, (usize, usize)>,
    under_way: Option<(String, Instant)>,
}

/// A summary of [`Calls`].
#[derive(Debug, Clone, Default)]
pub struct CallSummary {
    /// Calls made.
    pub started: usize,
    /// Calls that returned (with success, the typed timeout or another error).
    pub returned: usize,
    /// Calls that returned the typed timeout (`max.block.ms`).
    pub timeouts: usize,
    /// The longest call, and which.
    pub longest: Option<(Duration, String)>,
    /// Per operation: calls, and those that timed out.
    pub by_op: BTreeMap<String, (usize, usize)>,
}

impl fmt::Display for CallSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} blocking calls, {} returned, {} with the typed timeout; longest {}; per operation \
             (calls, timeouts): {:?}",
            self.started,
            self.returned,
            self.timeouts,
            self.longest
                .as_ref()
                .map(|(d, op)| format!("{op} {:.1} s", d.as_secs_f64()))
                .unwrap_or_else(|| "none".into()),
            self.by_op
        )
    }
}

impl Calls {
    /// Runs `call` (the operation `op`), counting it; `timed_out` says whether its result is
    /// the typed timeout.
    pub fn run<R>(&self, op: &str, call: impl FnOnce() -> R, timed_out: impl Fn(&R) -> bool) -> R {
        let started = Instant::now();
        {
            let mut c = self.inner.lock().unwrap();
            c.started += 1;
            c.under_way = Some((op.to_string(), started));
        }
        let r = call();
        self.note(op, started.elapsed(), timed_out(&r));
        r
    }

    /// Counts a call made elsewhere (a Java program's): `op`, how long it took, and whether it
    /// returned the timeout.
    pub fn note(&self, op: &str, took: Duration, timed_out: bool) {
        let mut c = self.inner.lock().unwrap();
        if c.under_way.as_ref().is_some_and(|(o, _)| o == op) {
            c.under_way = None;
        } else {
            c.started += 1;
        }
        c.returned += 1;
        c.timeouts += usize::from(timed_out);
        let e = c.by_op.entry(op.to_string()).or_default();
        e.0 += 1;
        e.1 += usize::from(timed_out);
        if c.longest.as_ref().is_none_or(|(d, _)| took > *d) {
            c.longest = Some((took, op.to_string()));
        }
    }

    /// The call under way and how long it has blocked.
    pub fn under_way(&self) -> Option<(String, Duration)> {
        let c = self.inner.lock().unwrap();
        c.under_way
            .as_ref()
            .map(|(op, at)| (op.clone(), at.elapsed()))
    }

    /// The counts so far.
    pub fn summary(&self) -> CallSummary {
        let c = self.inner.lock().unwrap();
        CallSummary {
            started: c.started,
            returned: c.returned,
            timeouts: c.timeouts,
            longest: c.longest.clone(),
            by_op: c.by_op.clone(),
        }
    }
}

/// How a transaction of the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its commit succeeded: each of its records must be read back exactly once.
    Committed,
    /// Aborted on purpose: none of its records may be read back.
    Aborted,
    /// Its commit failed (an abortable error) and it was aborted: none may be read back.
    Failed,
    /// The producer failed for good during its commit (after the commit may have been asked
    /// for): all of its records or none.
    InDoubt,
}

/// The key and value of record `index` of transaction `txn`, with `keys` keys in turn.
pub fn record_of(txn: usize, index: usize, keys: usize) -> (Vec<u8>, Vec<u8>) {
    (
        format!("k{:03}", index % keys.max(1)).into_bytes(),
        format!("{txn:06}:{index:05}").into_bytes(),
    )
}

/// `(transaction, index)` of a value written by [`record_of`].
fn parse_value(v: &[u8]) -> Option<(usize, usize)> {
    let s = std::str::from_utf8(v).ok()?;
    let (t, i) = s.split_once(':')?;
    Some((t.parse().ok()?, i.parse().ok()?))
}

/// What a read-back held.
#[derive(Debug, Clone, Default)]
pub struct ReadBackSummary {
    /// Records read.
    pub records: usize,
    /// Transactions whose records were all read (the committed ones, and in-doubt ones that
    /// committed).
    pub transactions: usize,
    /// In-doubt transactions found committed.
    pub in_doubt_committed: usize,
}

/// Checks a `read_committed` read-back against the loop's outcomes (`outcomes[t]` for
/// transaction `t`, each of `records` records with `keys` keys): every record of a committed
/// transaction exactly once, none of an aborted or failed one, an in-doubt one whole or not
/// at all, nothing else; and per key, the records in the order they were sent (transaction,
/// then index).
pub fn check_read_back(
    outcomes: &[Outcome],
    records: usize,
    keys: usize,
    read: &[Consumed],
) -> Result<ReadBackSummary, String> {
    let mut seen: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    // Per key: (partition, offset, transaction, index) of each record read.
    type Placed = (i32, i64, usize, usize);
    let mut by_key: BTreeMap<Vec<u8>, Vec<Placed>> = BTreeMap::new();
    for c in read {
        let v = c.value.as_deref().unwrap_or_default();
        let Some((t, i)) = parse_value(v) else {
            return Err(format!(
                "record at {}@{} has a value the loop never wrote: {:?}",
                c.partition,
                c.offset,
                String::from_utf8_lossy(v)
            ));
        };
        let (key, value) = record_of(t, i, keys);
        if t >= outcomes.len() || i >= records || c.key.as_deref() != Some(key.as_slice()) {
            return Err(format!(
                "record {t}:{i} at {}@{} was never sent (key {:?})",
                c.partition, c.offset, c.key
            ));
        }
        debug_assert_eq!(value, v);
        *seen.entry((t, i)).or_default() += 1;
        by_key
            .entry(key)
            .or_default()
            .push((c.partition, c.offset, t, i));
    }
    if let Some(((t, i), n)) = seen.iter().find(|(_, n)| **n > 1) {
        return Err(format!("record {t}:{i} read {n} times"));
    }
    let mut summary = ReadBackSummary {
        records: read.len(),
        ..ReadBackSummary::default()
    };
    for (t, outcome) in outcomes.iter().enumerate() {
        let found = (0..records).filter(|i| seen.contains_key(&(t, *i))).count();
        match (outcome, found) {
            (Outcome::Committed, n) if n == records => summary.transactions += 1,
            (Outcome::InDoubt, n) if n == records => {
                summary.transactions += 1;
                summary.in_doubt_committed += 1;
            }
            (Outcome::Aborted | Outcome::Failed | Outcome::InDoubt, 0) => {}
            (o, n) => {
                return Err(format!(
                    "transaction {t} ({o:?}): {n} of its {records} records read back"
                ))
            }
        }
    }
    for (key, recs) in &mut by_key {
        let partitions: BTreeSet<i32> = recs.iter().map(|r| r.0).collect();
        if partitions.len() > 1 {
            return Err(format!(
                "key {} read from partitions {partitions:?}",
                String::from_utf8_lossy(key)
            ));
        }
        recs.sort_by_key(|r| r.1);
        if let Some(w) = recs
            .windows(2)
            .find(|w| (w[0].2, w[0].3) >= (w[1].2, w[1].3))
        {
            return Err(format!(
                "key {}: {}:{} at offset {} before {}:{} at offset {}",
                String::from_utf8_lossy(key),
                w[0].2,
                w[0].3,
                w[0].1,
                w[1].2,
                w[1].3,
                w[1].1
            ));
        }
    }
    Ok(summary)
}

/// Counts outcomes.
pub fn count(outcomes: &[Outcome], which: Outcome) -> usize {
    outcomes.iter().filter(|o| **o == which).count()
}

/// The loop's parameters, as Java's program takes them.
#[derive(Debug, Clone)]
pub struct JavaLoop {
    /// The brokers (the proxies, as for our producer).
    pub bootstrap: String,
    /// The topic.
    pub topic: String,
    /// The transactional id.
    pub transactional_id: String,
    /// Transactions.
    pub transactions: usize,
    /// Records per transaction.
    pub records: usize,
    /// Keys the records take in turn.
    pub keys: usize,
    /// Every `abort_every`-th transaction is aborted on purpose.
    pub abort_every: usize,
    /// `max.block.ms`.
    pub max_block: Duration,
    /// `delivery.timeout.ms`.
    pub delivery_timeout: Duration,
    /// `request.timeout.ms`.
    pub request_timeout: Duration,
    /// `transaction.timeout.ms`.
    pub transaction_timeout: Duration,
    /// Records per second at most (0: as fast as it goes).
    pub rate: u64,
}

/// Kills the Java program if the test ends before it.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs Java's producer through the loop (`tests/kafka/java/TxnLoop.java`), counting each of
/// its blocking calls in `calls` as it reports them. Returns each transaction's outcome and
/// how many producers it started.
pub fn run_java_loop(spec: &JavaLoop, calls: &Calls) -> Result<(Vec<Outcome>, usize), String> {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dist = super::Dist::shared()?;
    let ms = |d: Duration| d.as_millis().to_string();
    let child = Command::new("java")
        .args(["-Xmx256m", "-XX:+UseSerialGC"])
        .arg(format!(
            "-Dlog4j2.configurationFile={}",
            dist.log4j.display()
        ))
        .arg("-cp")
        .arg(dist.ctl_classpath())
        .arg("TxnLoop")
        .args([
            spec.bootstrap.clone(),
            spec.topic.clone(),
            spec.transactional_id.clone(),
            spec.transactions.to_string(),
            spec.records.to_string(),
            spec.keys.to_string(),
            spec.abort_every.to_string(),
            ms(spec.max_block),
            ms(spec.delivery_timeout),
            ms(spec.request_timeout),
            ms(spec.transaction_timeout),
            spec.rate.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("start java TxnLoop: {e}"))?;
    let mut child = KillOnDrop(child);
    let stdout = child.0.stdout.take().expect("piped stdout");
    let mut outcomes = Vec::new();
    let mut starts = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("read TxnLoop: {e}"))?;
        let w: Vec<&str> = line.split(' ').collect();
        match w.as_slice() {
            ["CALL", op, millis, result] => {
                let took = Duration::from_millis(millis.parse().unwrap_or(0));
                calls.note(op, took, *result == "timeout");
            }
            ["TXN", t, outcome] => {
                let o = match *outcome {
                    "Committed" => Outcome::Committed,
                    "Aborted" => Outcome::Aborted,
                    "Failed" => Outcome::Failed,
                    _ => Outcome::InDoubt,
                };
                if t.parse::<usize>().ok() != Some(outcomes.len()) {
                    return Err(format!("TxnLoop: out of order: {line}"));
                }
                outcomes.push(o);
            }
            ["DONE", n] => starts = n.parse().ok(),
            ["ONWIRE", n] => println!(
                "java: {n} of the transactions aborted on purpose had their records on the wire \
                 first"
            ),
            _ => {}
        }
    }
    let status = child.0.wait().map_err(|e| format!("wait TxnLoop: {e}"))?;
    match (status.success(), starts) {
        (true, Some(n)) => Ok((outcomes, n)),
        _ => Err(format!(
            "TxnLoop ended with {status} after {} transactions",
            outcomes.len()
        )),
    }
}
