//! The adaptive sticky partitioner (KIP-794) against one slow broker, on Apache Kafka.
//!
//! A 3-node Kafka cluster from the test tier (`producer_tests::kafka`, Kafka from Maven), a
//! topic of 6 partitions (each broker leads 2, replication factor 3). The fault proxy in front of
//! one broker holds every chunk for `--delay-ms` each way, so that broker acknowledges slowly.
//! The producer (tokio, one future per record, 100-byte values, null keys, acks=all, linger
//! 5 ms, batch 16 KiB, a `--buffer-mib` buffer) sends `--records` records as fast as it may, with
//! `partitioner.adaptive.partitioning.enable` true and then false, alternating for `--runs`
//! runs each on a fresh topic. Printed per run and as medians: records/s, and the share of the
//! records that went to the slow broker's partitions (a third would be an even spread).
//!
//! The partitioner weighs partitions by the batches queued for them when it chooses, so it acts
//! on a sustained stream, where the buffer is full and records enter as fast as the brokers take
//! them: the buffer is 4 MiB by default, well below the run's records. (A buffer that holds the
//! whole run fills every partition's queue alike before any broker answers, and the choice is
//! about uniform; so it is in Java.)
//!
//! `cargo run --release --example bench_partitioner` (`-- --records 200000 --runs 3
//! --delay-ms 50`). Needs Java 17+ and Maven Central (or `target/kafka` already prepared).

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Parser;
use producer_core::Config;
use producer_tests::kafka::{ClusterSpec, KafkaCluster};
use producer_tests::{produce, workload, Driver, Keys, Pacing};

#[derive(Parser)]
struct Args {
    /// Records per run.
    #[arg(long, default_value_t = 200_000)]
    records: usize,
    /// Runs per setting (medians are printed).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Delay of the slow broker's proxy, each way (ms).
    #[arg(long, default_value_t = 50)]
    delay_ms: u64,
    /// `buffer.memory` in MiB.
    #[arg(long, default_value_t = 4)]
    buffer_mib: usize,
}

struct RunFigures {
    records_per_s: f64,
    slow_share: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn one_run(
    cluster: &KafkaCluster,
    topic: &str,
    slow: i32,
    adaptive: bool,
    args: &Args,
) -> RunFigures {
    let records = args.records;
    cluster.create_topic(topic, 6, 3, &[]).expect("topic");
    let leaders: BTreeMap<i32, i32> = cluster.leaders(topic).expect("leaders");
    let config = Config::builder(cluster.bootstrap())
        .adaptive_partitioning(adaptive)
        .buffer_memory(args.buffer_mib << 20)
        .build()
        .expect("config");
    let recs = workload(records, &[(topic, 6)], Keys::Null, 100);
    let run = produce(Driver::Tokio, config, &recs, &Pacing::burst(), &mut |_| {});
    let mut per_partition = [0usize; 6];
    for r in &run.reports {
        match &r[0] {
            Ok(m) => per_partition[m.partition as usize] += 1,
            Err(f) => panic!("a record failed: {f:?}"),
        }
    }
    let slow_records: usize = leaders
        .iter()
        .filter(|(_, &l)| l == slow)
        .map(|(&p, _)| per_partition[p as usize])
        .sum();
    let f = RunFigures {
        records_per_s: records as f64 / run.elapsed.as_secs_f64(),
        slow_share: slow_records as f64 / records as f64,
    };
    println!(
        "  adaptive {adaptive:5}: {:>9.0} records/s, {:.1}% to the slow broker; per partition {per_partition:?} (leaders {leaders:?})",
        f.records_per_s,
        100.0 * f.slow_share
    );
    f
}

fn main() {
    let args = Args::parse();
    let cluster = KafkaCluster::start(ClusterSpec::three().name("bench-partitioner").server_jvm())
        .unwrap_or_else(|e| panic!("Kafka cluster: {e}"));
    let slow = 1;
    cluster
        .proxy(slow)
        .set_delay(Duration::from_millis(args.delay_ms));
    println!(
        "Kafka {}, 3 brokers, broker {slow} delayed {} ms each way; {} records of 100 B, null keys, per run; buffer {} MiB",
        producer_tests::kafka::dist::kafka_version(),
        args.delay_ms,
        args.records,
        args.buffer_mib
    );
    let mut on = (Vec::new(), Vec::new());
    let mut off = (Vec::new(), Vec::new());
    for run in 0..args.runs {
        for adaptive in [true, false] {
            let topic = format!("bench-adaptive-{adaptive}-{run}");
            let f = one_run(&cluster, &topic, slow, adaptive, &args);
            let into = if adaptive { &mut on } else { &mut off };
            into.0.push(f.records_per_s);
            into.1.push(f.slow_share);
        }
    }
    let (on_rate, off_rate) = (median(on.0), median(off.0));
    println!(
        "| partitioner | records/s (median of {}) | to the slow broker | ratio |",
        args.runs
    );
    println!("|---|---|---|---|");
    println!(
        "| adaptive (default) | {on_rate:.0} | {:.1}% | {:.2}x |",
        100.0 * median(on.1),
        on_rate / off_rate
    );
    println!(
        "| uniform sticky (adaptive off) | {off_rate:.0} | {:.1}% | 1.00x |",
        100.0 * median(off.1)
    );
}
