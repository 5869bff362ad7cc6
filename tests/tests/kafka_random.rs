//! A seeded random fault schedule on Apache Kafka itself (a shared 3-node KRaft cluster,
//! 4.1.1, behind the fault proxies), mixing every fault of `kafka_faults`: SIGKILL and restart,
//! SIGSTOP past the request timeout, controlled shutdown and restart, leader moves, every
//! connection cut, round-trip delay, a black-holed broker, a connection reset after N bytes,
//! NOT_ENOUGH_REPLICAS (min ISR raised while a broker is down), MESSAGE_TOO_LARGE (a topic's
//! limit lowered for a while), and one topic deleted mid-stream. Records stream at a steady
//! pace through one driver; at most one broker is down at a time (three combined nodes keep
//! their quorum).
//!
//! The two kept topics must hold every record **exactly once, in send order per partition**, at
//! the offsets their reports name; the deleted topic's records each get one report, failures
//! typed with the record handed back.
//!
//! CI mode: 30 s per driver (60 s in all). Long mode, opt-in:
//! `KAFKA_RANDOM_SECS=600 cargo test --release -p producer-tests --test kafka_random -- --nocapture`
//! (`KAFKA_RANDOM_SEED=n` replays a schedule; the seed of each run is printed).

use std::time::{Duration, Instant};

use producer_core::ProduceError;
use producer_tests::kafka::probe::Probe;
use producer_tests::kafka::suite::{
    produce_with_faults, producer_config, read_back_and_check, rules, FaultTally, Progress,
};
use producer_tests::kafka::{shared_cluster, ClusterSpec, Direction, KafkaCluster};
use producer_tests::{workload, Driver, Expect, Failure, Keys, Pacing};

/// Records per chunk and the pause between chunks: 2,000 records/s.
const CHUNK: usize = 100;
const PAUSE: Duration = Duration::from_millis(50);

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64*, seeded: the schedule is a function of the seed.
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

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

/// Kinds of fault (see `one_fault`); the deletion of the third topic comes once, half way.
const FAULT_KINDS: u64 = 10;

/// Fault kinds in a random order, each once per round: every kind comes up within any
/// `FAULT_KINDS` consecutive faults.
struct Bag {
    left: Vec<u64>,
}

impl Bag {
    fn draw(&mut self, rng: &mut Rng) -> u64 {
        if self.left.is_empty() {
            self.left = (0..FAULT_KINDS).collect();
        }
        let i = rng.below(self.left.len() as u64) as usize;
        self.left.swap_remove(i)
    }
}

/// One fault of `kind`, with random parameters, applied and undone before it returns.
fn one_fault(
    k: &KafkaCluster,
    kind: u64,
    rng: &mut Rng,
    p: &mut Progress,
    topics: (&str, &str),
    request_timeout: Duration,
    t: &mut FaultTally,
) {
    let (a, b) = topics;
    let node = rng.below(3) as i32 + 1;
    let restart = |k: &KafkaCluster, node: i32| k.restart(node, Duration::from_secs(90)).unwrap();
    match kind {
        0 => {
            k.kill(node).unwrap();
            t.kills += 1;
            p.hold(rng.millis(1_000, 5_000));
            restart(k, node);
            t.restarts += 1;
        }
        1 => {
            k.pause(node).unwrap();
            t.stalls += 1;
            p.hold(request_timeout + rng.millis(500, 3_000));
            k.resume(node).unwrap();
        }
        2 => {
            k.terminate(node, Duration::from_secs(60)).unwrap();
            t.shutdowns += 1;
            p.hold(rng.millis(500, 3_000));
            restart(k, node);
            t.restarts += 1;
        }
        3 => {
            for _ in 0..1 + rng.below(3) {
                let (topic, n) = if rng.below(2) == 0 { (a, 6) } else { (b, 3) };
                let partition = rng.below(n) as i32;
                let to = rng.below(3) as i32 + 1;
                k.move_leader(topic, partition, to).unwrap();
                t.moves += 1;
            }
        }
        4 => {
            t.cuts += if rng.below(2) == 0 {
                k.proxies().iter().map(|px| px.cut_all()).sum()
            } else {
                k.proxy(node).cut_all()
            };
        }
        5 => {
            k.proxy(node).set_delay(rng.millis(20, 400));
            t.delays += 1;
            p.hold(rng.millis(500, 3_000));
            k.proxy(node).set_delay(Duration::ZERO);
        }
        6 => {
            k.proxy(node).set_black_hole(true);
            t.black_holes += 1;
            p.hold(rng.millis(500, 2 * request_timeout.as_millis() as u64));
            k.proxy(node).set_black_hole(false);
        }
        7 => {
            let dir = if rng.below(2) == 0 {
                Direction::ToBroker
            } else {
                Direction::ToClient
            };
            let px = k.proxy(node);
            px.reset_after(dir, 1 + rng.below(20_000));
            let until = Instant::now() + Duration::from_secs(3);
            while px.reset_armed() && Instant::now() < until && p.hold(Duration::from_millis(20)) {}
            if !px.reset_armed() {
                t.resets += 1;
            }
            px.heal();
        }
        8 => {
            // NOT_ENOUGH_REPLICAS: min ISR 3 on `b` while a broker is down.
            k.alter_topic_config(b, &[("min.insync.replicas", "3")])
                .unwrap();
            t.config_changes += 1;
            k.kill(node).unwrap();
            t.kills += 1;
            p.hold(rng.millis(3_500, 6_000));
            restart(k, node);
            t.restarts += 1;
            k.wait_in_sync(&[b], Duration::from_secs(60)).unwrap();
            k.alter_topic_config(b, &[("min.insync.replicas", "")])
                .unwrap();
        }
        _ => {
            // MESSAGE_TOO_LARGE: `a`'s batches limited to 4 KiB for a while.
            k.alter_topic_config(a, &[("max.message.bytes", "4096")])
                .unwrap();
            t.config_changes += 1;
            p.hold(rng.millis(1_000, 3_000));
            k.alter_topic_config(a, &[("max.message.bytes", "")])
                .unwrap();
        }
    }
}

fn random_fault_schedule(driver: Driver, default_seed: u64) {
    let Some(mut kafka) = shared_cluster(ClusterSpec::three) else {
        return;
    };
    let secs = env_u64("KAFKA_RANDOM_SECS", 30);
    let seed = env_u64("KAFKA_RANDOM_SEED", default_seed);
    let a = kafka.topic("rand-a", 6, 3, &[]);
    let b = kafka.topic("rand-b", 3, 3, &[]);
    let doomed = kafka.topic("rand-doomed", 3, 3, &[]);
    let request_timeout = Duration::from_secs(3);
    let config = producer_config(&kafka)
        .request_timeout(request_timeout)
        .max_block(Duration::from_secs(5))
        // The deleted topic's records are retried until they time out, filling the buffer
        // meanwhile: 30 s keeps that (and so the back-pressure on the rest) bounded, and still
        // outlasts every fault of the schedule.
        .delivery_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let topics = [(a.as_str(), 6), (b.as_str(), 3), (doomed.as_str(), 3)];
    let n = secs as usize * CHUNK * (1000 / PAUSE.as_millis() as usize);
    let records = workload(n, &topics, Keys::Mixed, 100);
    let k = &kafka;
    let names = (a.as_str(), b.as_str());
    let gone = doomed.as_str();
    let half_way = n / CHUNK / 2;
    let probe = Probe::attach(k);
    let started = Instant::now();
    let (run, tally) = produce_with_faults(
        driver,
        config,
        &records,
        &Pacing::chunks(CHUNK, PAUSE),
        |p| {
            let mut rng = Rng(seed.max(1));
            let mut bag = Bag { left: Vec::new() };
            let mut t = FaultTally::default();
            let mut deleted = false;
            p.wait_chunk(10);
            while !p.finished() {
                if !deleted && p.chunk() >= half_way {
                    // A topic deleted mid-stream: its later records fail, typed.
                    k.delete_topic(gone).unwrap();
                    deleted = true;
                    t.deletions += 1;
                }
                let kind = bag.draw(&mut rng);
                one_fault(k, kind, &mut rng, p, names, request_timeout, &mut t);
                // Recovered before the next fault: every replica back in sync (so one broker at
                // most is ever down, and leaders can be moved to any broker).
                let mut live = vec![names.0, names.1];
                if !deleted {
                    live.push(gone);
                }
                k.wait_in_sync(&live, Duration::from_secs(90)).unwrap();
                // The pause between faults, drawn from the seed.
                if !p.hold(rng.millis(300, 2_000)) {
                    break;
                }
            }
            t
        },
    );
    let probe = probe.finish();
    assert!(probe.errors.is_empty(), "protocol probe:\n{probe}");
    let mut r = rules(&topics, Expect::ExactlyOnce);
    r.failures_allowed = true;
    let unread = [doomed.as_str()];
    if tally.deletions > 0 {
        r.unread_topics = &unread;
    }
    let s = read_back_and_check(&kafka, &r, &records, &run);
    for (i, rep) in run.reports.iter().enumerate() {
        if let Err(f) = &rep[0] {
            assert_eq!(
                &*records[i].topic, doomed,
                "record {i} of a kept topic failed: {f:?}"
            );
            assert!(
                matches!(
                    f,
                    Failure::Produce(
                        ProduceError::UnknownTopic
                            | ProduceError::DeliveryTimeout { .. }
                            | ProduceError::Broker { .. }
                    )
                ),
                "record {i}: {f:?}"
            );
        }
    }
    println!(
        "random schedule {driver:?} seed {seed}, {secs} s: {} records sent in {:.1} s; faults: {tally}; \
         {} delivered, {} failed (all of the deleted topic), kept topics read back {} records, \
         each exactly once in send order ({} reports carried a deduplicated batch's timestamp)",
        records.len(),
        run.elapsed.as_secs_f64(),
        s.delivered,
        s.failed,
        s.consumed,
        s.answered_as_duplicates
    );
    print!("{probe}");
    println!("whole test {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn tokio_random_fault_schedule() {
    random_fault_schedule(Driver::Tokio, 0x7031);
}

#[test]
fn mio_random_fault_schedule() {
    random_fault_schedule(Driver::MioThreaded, 0x6d69);
}
