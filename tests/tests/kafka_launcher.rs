//! The real-Kafka launcher itself (tests/src/kafka/): start-up of one and three nodes (times
//! and broker RSS printed), readiness, stopping every JVM by pid on drop and on panic, no JVM
//! outliving a killed test process, a port already taken retried with another, a broker that
//! fails to start ending with its log, Maven unreachable and Java missing failing with clear
//! messages. Each test starts its own cluster, one at a time.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use producer_tests::kafka::dist::{broker_artifact, Dist, DistError};
use producer_tests::kafka::process::pid_alive;
use producer_tests::kafka::{self, ClusterSpec, KafkaCluster, LaunchError};
use producer_tests::{
    check_run, produce, read_back_topics, workload, Driver, Expect, Keys, Pacing, Rules,
};

/// Waits until none of `pids` runs; fails naming the survivors.
fn assert_all_gone(pids: &[u32], within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|&p| pid_alive(p)).collect();
        if alive.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: JVMs {alive:?} still run"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn mib(kib: &std::collections::BTreeMap<i32, u64>) -> Vec<u64> {
    kib.values().map(|k| k / 1024).collect()
}

/// Produces a few records through the proxies and reads them back directly: the cluster
/// serves.
fn serves(cluster: &KafkaCluster, topic: &str, partitions: i32) {
    let topics = [(topic, partitions)];
    let records = workload(500, &topics, Keys::Mixed, 50);
    let config = producer_core::Config::builder(cluster.bootstrap())
        .build()
        .unwrap();
    let run = produce(
        Driver::Tokio,
        config,
        &records,
        &Pacing::burst(),
        &mut |_| {},
    );
    let consumed = read_back_topics(
        &cluster.internal_bootstrap(),
        &topics,
        Duration::from_secs(30),
    );
    let rules = Rules {
        topics: &topics,
        expect: Expect::ExactlyOnce,
        acks0: false,
        failures_allowed: false,
        broker_reported_timestamp: None,
        unread_topics: &[],
    };
    let s = check_run(&rules, &records, &run, &consumed);
    assert_eq!(s.consumed, records.len());
}

#[test]
fn single_node_starts_serves_and_its_jvms_stop_on_drop() {
    let _slot = kafka::cluster_slot();
    let Some(cluster) = kafka::own_cluster(ClusterSpec::single().name("launch-1")) else {
        return;
    };
    println!(
        "1 node: started in {:.1} s (attempts {}), broker RSS MiB {:?}",
        cluster.startup_time().as_secs_f64(),
        cluster.start_attempts(),
        mib(&cluster.rss_kib())
    );
    let view = cluster.view(&[]).unwrap();
    assert_eq!(view.brokers.keys().copied().collect::<Vec<_>>(), vec![1]);
    cluster.create_topic("one", 3, 1, &[]).unwrap();
    serves(&cluster, "one", 3);
    println!(
        "1 node after producing: broker RSS MiB {:?}",
        mib(&cluster.rss_kib())
    );
    let pids = cluster.pids();
    assert_eq!(pids.len(), 2, "the broker and KafkaCtl");
    let dir = cluster.dir().to_path_buf();
    drop(cluster);
    // Drop reaps them: gone at once.
    assert_all_gone(&pids, Duration::ZERO, "after drop");
    assert!(!dir.exists(), "the cluster directory is removed");
}

#[test]
fn three_nodes_start_list_every_broker_and_serve() {
    let _slot = kafka::cluster_slot();
    let Some(cluster) = kafka::own_cluster(ClusterSpec::three().name("launch-3")) else {
        return;
    };
    println!(
        "3 nodes: started in {:.1} s (attempts {}), broker RSS MiB {:?}",
        cluster.startup_time().as_secs_f64(),
        cluster.start_attempts(),
        mib(&cluster.rss_kib())
    );
    for id in cluster.node_ids() {
        let v = producer_tests::kafka::wire::metadata(
            cluster.client_addr(id),
            &[],
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(v.brokers.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3]);
        // Through the proxy, every broker is advertised at its proxy's port.
        for (b, (_, port)) in &v.brokers {
            assert_eq!(*port, cluster.client_addr(*b).port());
        }
    }
    cluster.create_topic("three", 6, 3, &[]).unwrap();
    let parts = cluster.ctl().describe("three").unwrap();
    assert_eq!(parts.len(), 6);
    assert!(parts
        .iter()
        .all(|p| p.replicas.len() == 3 && p.isr.len() == 3));
    serves(&cluster, "three", 6);
    println!(
        "3 nodes after producing: broker RSS MiB {:?}",
        mib(&cluster.rss_kib())
    );
}

#[test]
fn no_jvm_outlives_a_panicking_test() {
    let _slot = kafka::cluster_slot();
    if kafka::skip_requested() {
        return;
    }
    let mut pids = Vec::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let cluster = KafkaCluster::start(ClusterSpec::single().name("panic")).unwrap();
        pids = cluster.pids();
        panic!("deliberate panic with a running cluster");
    }));
    assert!(r.is_err());
    assert_eq!(pids.len(), 2);
    assert_all_gone(&pids, Duration::ZERO, "after a panic");
}

/// Runs the `kafka_cluster` binary, reads its PIDS line, SIGKILLs it (no destructor runs):
/// the kernel must kill its JVMs (PR_SET_PDEATHSIG).
#[test]
fn no_jvm_outlives_a_killed_test_process() {
    let _slot = kafka::cluster_slot();
    if kafka::skip_requested() {
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_kafka_cluster"))
        .args(["--nodes", "1", "--topic", "t:1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let bootstrap = lines.next().expect("a BOOTSTRAP line").unwrap();
    assert!(bootstrap.starts_with("BOOTSTRAP 127.0.0.1:"), "{bootstrap}");
    let pids: Vec<u32> = lines
        .next()
        .expect("a PIDS line")
        .unwrap()
        .strip_prefix("PIDS ")
        .expect("PIDS")
        .split(' ')
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|&p| pid_alive(p)));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_all_gone(
        &pids,
        Duration::from_secs(10),
        "after SIGKILL of the process that started them",
    );
}

#[test]
fn a_port_already_taken_is_retried_with_another() {
    let _slot = kafka::cluster_slot();
    if kafka::skip_requested() {
        return;
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let cluster = KafkaCluster::start(ClusterSpec::single().name("port").try_ports_first(&[port]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        cluster.start_attempts(),
        2,
        "the first attempt found port {port} taken"
    );
    assert!(!cluster.internal_bootstrap().contains(&format!(":{port}")));
    drop(taken);
}

#[test]
fn a_broker_that_fails_to_start_ends_with_its_log() {
    let _slot = kafka::cluster_slot();
    if kafka::skip_requested() {
        return;
    }
    let started = Instant::now();
    let err = KafkaCluster::start(
        ClusterSpec::single()
            .name("bad")
            .broker_config("num.io.threads", "not-a-number"),
    )
    .err()
    .expect("a broker with a broken config must not start");
    println!(
        "failed after {:.1} s: {err}",
        started.elapsed().as_secs_f64()
    );
    match &err {
        LaunchError::NodeExited { node, log, .. } => {
            assert_eq!(*node, 1);
            assert!(log.contains("num.io.threads"), "the log says why: {log}");
        }
        other => panic!("expected the node to exit with its log, got {other}"),
    }
}

/// The storage is formatted (the format tool has its own heap); the broker JVM then runs out of
/// its 24 MiB heap while starting and exits: start-up ends with its log, not a hang.
#[test]
fn a_broker_jvm_that_dies_during_start_up_ends_with_its_log() {
    let _slot = kafka::cluster_slot();
    if kafka::skip_requested() {
        return;
    }
    let err = KafkaCluster::start(ClusterSpec::single().name("oom").heap_mb(24))
        .err()
        .expect("a broker in a 24 MiB heap must not start");
    match &err {
        LaunchError::NodeExited { node, log, .. } => {
            assert_eq!(*node, 1);
            assert!(log.contains("OutOfMemoryError"), "the log says why: {log}");
            assert!(
                log.contains("kafka.Kafka"),
                "the broker JVM (not the format tool) died: {log}"
            );
        }
        other => panic!("expected the node to exit with its log, got {other}"),
    }
}

#[test]
fn maven_unreachable_is_a_clear_error_naming_the_artifact() {
    if kafka::skip_requested() {
        return;
    }
    let home = std::env::temp_dir().join(format!("kafka-no-maven-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).unwrap();
    // Every repository mirrored to a port where nothing listens.
    let dead = producer_tests::dead_port();
    let settings = home.join("settings.xml");
    std::fs::write(
        &settings,
        format!(
            "<settings><mirrors><mirror><id>unreachable</id><mirrorOf>*</mirrorOf>\
             <url>http://127.0.0.1:{dead}/maven2</url></mirror></mirrors></settings>"
        ),
    )
    .unwrap();
    let err = Dist::prepare(&home, Some(&settings)).expect_err("no repository is reachable");
    let msg = err.to_string();
    println!("{msg}");
    assert!(matches!(err, DistError::Maven { .. }), "{msg}");
    assert!(
        msg.contains(&broker_artifact()),
        "names the artifact: {msg}"
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn java_or_maven_missing_fails_with_what_to_install() {
    if kafka::skip_requested() {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kafka_cluster"))
        .args(["--nodes", "1"])
        .env("PATH", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`java`, which is not installed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("apt-get install openjdk-17-jdk-headless maven"),
        "{stderr}"
    );
    assert!(stderr.contains("SKIP_KAFKA_TESTS=1"), "{stderr}");
}
