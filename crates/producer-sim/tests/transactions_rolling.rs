//! Experiment: rolling faults during a transactional loop.

mod support;

use std::time::{Duration, Instant};

use producer_core::{TransactionError, TransactionOperation, TransactionState};
use producer_sim::drive::Harness;
use producer_sim::{SimConfig, TransactionState as CoordState};
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("a", 3), ("b", 2)];
const BROKERS: i32 = 3;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Kill,
    Term,
    Pause,
}

struct Schedule {
    rng: Rng,
    every: Duration,
    next_at: Instant,
    down: Option<(i32, Fault, Instant, bool)>,
    log: Vec<String>,
}

impl Schedule {
    fn tick(&mut self, h: &mut Harness<u64>) {
        let now = h.now;
        if let Some((b, f, since, failed_over)) = self.down {
            if !failed_over && now >= since + Duration::from_secs(3) {
                h.cluster.fail_over(b).unwrap();
                self.down = Some((b, f, since, true));
                self.log.push(format!("{:?} fail over {b}", now));
            }
        }
        if now < self.next_at {
            return;
        }
        self.next_at = now + self.every;
        if let Some((b, f, _, _)) = self.down.take() {
            match f {
                Fault::Kill | Fault::Term => h.cluster.start_broker(b).unwrap(),
                Fault::Pause => h.cluster.unstall_connections_to(b, now).unwrap(),
            }
            self.log.push(format!("{:?} heal {b}", now));
        }
        let b = 1 + self.rng.below(BROKERS as u64) as i32;
        let f = match self.rng.below(3) {
            0 => Fault::Kill,
            1 => Fault::Term,
            _ => Fault::Pause,
        };
        let failed_over = match f {
            Fault::Kill => {
                h.cluster.stop_broker(b, now).unwrap();
                false
            }
            Fault::Term => {
                h.cluster.fail_over(b).unwrap();
                h.cluster.stop_broker(b, now).unwrap();
                true
            }
            Fault::Pause => {
                h.cluster.stall_connections_to(b, None).unwrap();
                false
            }
        };
        self.log.push(format!("{:?} {f:?} {b}", now));
        self.down = Some((b, f, now, failed_over));
    }
}

fn run_slices(
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

fn wait_op(
    h: &mut Harness<u64>,
    s: &mut Schedule,
    op: TransactionOperation,
) -> Option<Result<(), TransactionError>> {
    let before = h.transactions.len();
    let started = h.now;
    if !run_slices(h, s, Duration::from_secs(600), |h| {
        h.transactions.len() > before
    }) {
        return None;
    }
    let r = h.transactions[before].clone();
    assert_eq!(r.operation, op);
    println!("  {op} took {:?}: {:?}", h.now - started, r.result);
    Some(r.result)
}

#[test]
fn rolling_experiment() {
    let seed: u64 = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let tv: i16 = std::env::var("TV")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let mut cfg = SimConfig::with_brokers(BROKERS as usize, seed);
    cfg.transaction_version = tv;
    let cluster = cluster_with(cfg, TOPICS);
    let mut h = harness(cluster, |b| {
        b.transactional_id("rolling")
            .seed(seed)
            .linger(Duration::from_millis(5))
    });
    let mut s = Schedule {
        rng: Rng(seed | 1),
        every: Duration::from_secs(5),
        next_at: h.now + Duration::from_secs(5),
        down: None,
        log: Vec::new(),
    };
    h.producer.init_transactions(h.now).unwrap();
    assert_eq!(
        wait_op(&mut h, &mut s, TransactionOperation::Init),
        Some(Ok(()))
    );
    let mut id = 0u64;
    let (mut committed, mut aborted) = (0, 0);
    for n in 0..60 {
        h.producer.begin_transaction(h.now).unwrap();
        for _ in 0..10 {
            for _ in 0..50 {
                let topic = TOPICS[(id % 2) as usize].0;
                let _ = h.send(record(id, topic, true), id);
                id += 1;
            }
            run_slices(&mut h, &mut s, Duration::from_millis(100), |_| false);
        }
        let commit = n % 7 != 3;
        let mut need_abort = !commit;
        if commit {
            match h.producer.commit_transaction(h.now) {
                Ok(()) => match wait_op(&mut h, &mut s, TransactionOperation::Commit) {
                    Some(Ok(())) => committed += 1,
                    Some(Err(_)) => need_abort = true,
                    None => {
                        println!("{}", s.log.join("\n"));
                        println!("{:?}", h.cluster.transaction("rolling"));
                        panic!(
                            "txn {n}: commit hangs; state {:?}",
                            h.producer.transaction_state()
                        );
                    }
                },
                Err(e) => {
                    println!("commit refused {e}");
                    need_abort = true
                }
            }
        }
        if need_abort {
            h.producer.abort_transaction(h.now).unwrap();
            match wait_op(&mut h, &mut s, TransactionOperation::Abort) {
                Some(Ok(())) => aborted += 1,
                Some(Err(e)) => panic!("txn {n}: abort failed {e}"),
                None => {
                    println!("{}", s.log.join("\n"));
                    println!("{:?}", h.cluster.transaction("rolling"));
                    panic!(
                        "txn {n}: abort hangs; state {:?}",
                        h.producer.transaction_state()
                    )
                }
            }
        }
        let _ = (TransactionState::Ready, CoordState::Empty);
    }
    println!("committed {committed} aborted {aborted}");
}
