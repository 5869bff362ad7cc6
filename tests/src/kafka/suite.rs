//! What the real-Kafka suites share: the producer configuration for the test clusters,
//! production with a fault thread running beside it ([`produce_with_faults`]), the tally of
//! faults applied, and the read-back check with the strict rules this broker allows
//! ([`read_back_and_check`]: no tolerance for duplicates or reorders when idempotent).

use std::fmt;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use producer_core::{Config, ConfigBuilder, Record};

use super::KafkaCluster;
use crate::drive::{produce, Driver, Pacing, Run};
use crate::readback::read_back_topics;
use crate::verify::{check_run, Expect, Rules, Summary};

/// A producer config for `cluster`'s proxies: short backoffs, a 5 s request timeout, a 120 s
/// delivery timeout (records outlive every fault of the suites).
pub fn producer_config(cluster: &KafkaCluster) -> ConfigBuilder {
    producer_config_for(cluster.bootstrap())
}

/// [`producer_config`] for another bootstrap list (a front in front of a cluster, say).
pub fn producer_config_for(bootstrap: Vec<(String, u16)>) -> ConfigBuilder {
    Config::builder(bootstrap)
        .retry_backoff(Duration::from_millis(20))
        .retry_backoff_max(Duration::from_millis(500))
        .reconnect_backoff(Duration::from_millis(20))
        .reconnect_backoff_max(Duration::from_millis(500))
        .request_timeout(Duration::from_secs(5))
        .delivery_timeout(Duration::from_secs(120))
}

/// The faults a test applied, for its printed summary.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FaultTally {
    /// Brokers SIGKILLed.
    pub kills: usize,
    /// Brokers started again.
    pub restarts: usize,
    /// Brokers SIGSTOPped (and continued).
    pub stalls: usize,
    /// Controlled shutdowns (SIGTERM).
    pub shutdowns: usize,
    /// Partition leaders moved.
    pub moves: usize,
    /// Connections cut by the proxies.
    pub cuts: usize,
    /// Brokers black-holed.
    pub black_holes: usize,
    /// Connections reset after a number of bytes.
    pub resets: usize,
    /// Delay periods.
    pub delays: usize,
    /// Topic config changes.
    pub config_changes: usize,
    /// Topics deleted.
    pub deletions: usize,
    /// Topics created while producing.
    pub creations: usize,
}

impl FaultTally {
    /// Adds `other`'s counts.
    pub fn add(&mut self, o: &FaultTally) {
        self.kills += o.kills;
        self.restarts += o.restarts;
        self.stalls += o.stalls;
        self.shutdowns += o.shutdowns;
        self.moves += o.moves;
        self.cuts += o.cuts;
        self.black_holes += o.black_holes;
        self.resets += o.resets;
        self.delays += o.delays;
        self.config_changes += o.config_changes;
        self.deletions += o.deletions;
        self.creations += o.creations;
    }
}

impl fmt::Display for FaultTally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all = [
            ("kills", self.kills),
            ("restarts", self.restarts),
            ("stalls", self.stalls),
            ("controlled shutdowns", self.shutdowns),
            ("leader moves", self.moves),
            ("connections cut", self.cuts),
            ("black holes", self.black_holes),
            ("resets after N bytes", self.resets),
            ("delay periods", self.delays),
            ("config changes", self.config_changes),
            ("topic deletions", self.deletions),
            ("topic creations", self.creations),
        ];
        let parts: Vec<String> = all
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        if parts.is_empty() {
            write!(f, "no faults")
        } else {
            write!(f, "{}", parts.join(", "))
        }
    }
}

/// The fault thread's view of production: which chunk the producing thread has reached.
pub struct Progress {
    rx: mpsc::Receiver<usize>,
    chunk: usize,
    finished: bool,
}

impl Progress {
    /// Blocks until production reached chunk `k` (true) or finished first (false).
    pub fn wait_chunk(&mut self, k: usize) -> bool {
        while self.chunk < k && !self.finished {
            match self.rx.recv() {
                Ok(c) => self.chunk = c,
                Err(_) => self.finished = true,
            }
        }
        self.chunk >= k
    }

    /// The chunk production has reached (without blocking).
    pub fn chunk(&mut self) -> usize {
        loop {
            match self.rx.try_recv() {
                Ok(c) => self.chunk = c,
                Err(mpsc::TryRecvError::Empty) => return self.chunk,
                Err(mpsc::TryRecvError::Disconnected) => {
                    self.finished = true;
                    return self.chunk;
                }
            }
        }
    }

    /// Whether every record has been sent and reported.
    pub fn finished(&mut self) -> bool {
        self.chunk();
        self.finished
    }

    /// Keeps a fault in place for `d` (the fault's duration, not a synchronisation), or until
    /// production finished; returns false in the second case.
    pub fn hold(&mut self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            match self.rx.recv_timeout(left) {
                Ok(c) => self.chunk = c,
                Err(mpsc::RecvTimeoutError::Timeout) => return true,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.finished = true;
                    return false;
                }
            }
        }
    }
}

/// Produces `records` through `driver` while `faults` runs on a thread of its own, told of
/// each chunk the producer starts (see [`Pacing`]); returns the run and the fault tally once
/// both ended.
pub fn produce_with_faults(
    driver: Driver,
    config: Config,
    records: &[Record],
    pacing: &Pacing,
    faults: impl FnOnce(&mut Progress) -> FaultTally + Send,
) -> (Run, FaultTally) {
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        let fault_thread = s.spawn(move || {
            let mut progress = Progress {
                rx,
                chunk: 0,
                finished: false,
            };
            faults(&mut progress)
        });
        let run = produce(driver, config, records, pacing, &mut |k| {
            let _ = tx.send(k);
        });
        drop(tx);
        let tally = fault_thread.join().expect("the fault thread panicked");
        (run, tally)
    })
}

/// The delivery guarantee of a producer config against this broker: exactly once and in order
/// when idempotent, else at least once with first occurrences in order.
pub fn expect_for(config_idempotent: bool) -> Expect {
    if config_idempotent {
        Expect::ExactlyOnce
    } else {
        Expect::AtLeastOnce
    }
}

/// Reads every topic of `rules` except its unread ones back with librdkafka through the
/// internal listeners (past the proxies), and checks the run against it (see
/// [`crate::verify::check_run`]).
pub fn read_back_and_check(
    cluster: &KafkaCluster,
    rules: &Rules<'_>,
    records: &[Record],
    run: &Run,
) -> Summary {
    let readable: Vec<(&str, i32)> = rules
        .topics
        .iter()
        .copied()
        .filter(|(t, _)| !rules.unread_topics.contains(t))
        .collect();
    let consumed = read_back_topics(
        &cluster.internal_bootstrap(),
        &readable,
        Duration::from_secs(120),
    );
    check_run(rules, records, run, &consumed)
}

/// The rules for a run against Apache Kafka: the broker reports the record's own timestamp.
pub fn rules<'a>(topics: &'a [(&'a str, i32)], expect: Expect) -> Rules<'a> {
    Rules {
        topics,
        expect,
        acks0: false,
        failures_allowed: false,
        broker_reported_timestamp: None,
        unread_topics: &[],
    }
}

/// What [`check_new_incarnation`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IncarnationSummary {
    /// Records in the new incarnation's log.
    pub in_new: usize,
    /// Records reported delivered that are not in it (written to the old incarnation, gone
    /// with it).
    pub delivered_before: usize,
}

/// Checks a run whose topic was replaced by a new incarnation (deleted and created again, or
/// the whole cluster replaced) while producing, against `consumed`, the new incarnation's
/// log read back: every record in it was reported delivered at exactly that partition and
/// offset, once (nothing lands there unreported or twice); every record was reported delivered
/// (the producer retries into the new incarnation, as Java's does); and every record from index
/// `sent_after_switch` on (sent once the new incarnation was in place) is in it where its report
/// says.
pub fn check_new_incarnation(
    records: &[Record],
    run: &Run,
    consumed: &[crate::readback::Consumed],
    sent_after_switch: usize,
) -> IncarnationSummary {
    let mut at = std::collections::HashMap::new();
    for c in consumed {
        let i = crate::workload::id_of(c);
        assert!(
            at.insert(i, (c.partition, c.offset)).is_none(),
            "record {i} is twice in the new incarnation"
        );
        let r = run.reports[i]
            .first()
            .unwrap_or_else(|| panic!("record {i} in the log was never reported"));
        match r {
            Ok(m) => assert_eq!(
                (m.partition, m.offset),
                (c.partition, c.offset),
                "record {i} is not where its report says"
            ),
            Err(f) => panic!("record {i} is in the new incarnation but was reported failed: {f:?}"),
        }
    }
    let mut delivered_before = 0;
    for (i, reports) in run.reports.iter().enumerate() {
        assert_eq!(reports.len(), 1, "record {i}: {} reports", reports.len());
        if let Err(f) = &reports[0] {
            panic!("record {i} ({}) failed: {f:?}", records[i].topic);
        }
        if !at.contains_key(&i) {
            assert!(
                i < sent_after_switch,
                "record {i}, sent after the switch, is not in the new incarnation"
            );
            delivered_before += 1;
        }
    }
    IncarnationSummary {
        in_new: at.len(),
        delivered_before,
    }
}
