//! Faults on Apache Kafka itself (a shared 3-node KRaft cluster, 4.1.1, a fault proxy in front
//! of each broker), one test each, through both drivers, while records stream in paced
//! chunks: a broker SIGKILLed mid-stream and restarted; a broker hung (SIGSTOP) past the
//! request timeout; a controlled shutdown (SIGTERM); leaders moved every 200 ms for 10 s;
//! every connection cut with 5 requests in flight; a black-holed broker; connections reset
//! after N bytes (mid-request and mid-response); round-trip delay; NOT_ENOUGH_REPLICAS while a
//! replica is down, then recovery; MESSAGE_TOO_LARGE from a topic limit (the batch is split
//! and delivered); a topic deleted mid-stream (typed failures, every record handed back); a
//! topic created after records for it were sent.
//!
//! Every test checks exactly one report per record and reads every topic back with librdkafka
//! (CRCs checked) past the proxies: idempotent runs must hold every record **exactly once, in
//! send order per partition**, at the offset its report names (this broker deduplicates: no
//! tolerance); non-idempotent runs at least once, first copies in order. A protocol probe on
//! the proxies decodes every request, and counts the error codes in the Produce answers, which
//! shows the fault produced the real broker error it is about.

use std::time::Duration;

use producer_core::{Config, ErrorCode, ProduceError};
use producer_tests::kafka::probe::{Probe, ProbeReport};
use producer_tests::kafka::suite::{
    self, expect_for, produce_with_faults, producer_config, read_back_and_check, rules, FaultTally,
    Progress,
};
use producer_tests::kafka::{shared_cluster, ClusterSpec, Direction, KafkaCluster, TestCluster};
use producer_tests::{workload, Driver, Failure, Keys, Pacing, Run, Summary};

/// 100 records every 50 ms: about 2,000 records/s, so faults land while records are buffered
/// and in flight.
const CHUNK: usize = 100;
const PAUSE: Duration = Duration::from_millis(50);

fn pacing() -> Pacing {
    Pacing::chunks(CHUNK, PAUSE)
}

/// Records for about `secs` seconds of paced production.
fn records_for(secs: usize) -> usize {
    secs * CHUNK * (1000 / PAUSE.as_millis() as usize)
}

/// The leader of partition 0 of `topic`: the broker whose fault hits the stream.
fn leader_of_first_partition(kafka: &TestCluster, topic: &str) -> i32 {
    kafka.leaders(topic).unwrap()[&0]
}

struct Outcome {
    run: Run,
    summary: Summary,
    probe: ProbeReport,
    tally: FaultTally,
}

/// Produces `n` records over `topics` (mixed keys) with `faults` beside, then checks the log.
fn run(
    kafka: &TestCluster,
    name: &str,
    driver: Driver,
    config: Config,
    topics: &[(&str, i32)],
    n: usize,
    faults: impl FnOnce(&mut Progress) -> FaultTally + Send,
) -> Outcome {
    let idempotent = config.idempotence;
    let records = workload(n, topics, Keys::Mixed, 100);
    let probe = Probe::attach(kafka);
    let (run, tally) = produce_with_faults(driver, config, &records, &pacing(), faults);
    let probe = probe.finish();
    assert!(probe.errors.is_empty(), "protocol probe:\n{probe}");
    let summary = read_back_and_check(
        kafka,
        &rules(topics, expect_for(idempotent)),
        &records,
        &run,
    );
    println!(
        "{name} {driver:?} (idempotent {idempotent}): {n} records sent in {:.1} s; faults: {tally}; \
         read back {} ({} delivered, {} failed, {} duplicates); {} requests decoded",
        run.elapsed.as_secs_f64(),
        summary.consumed,
        summary.delivered,
        summary.failed,
        summary.duplicates.len(),
        probe.requests
    );
    print!("{probe}");
    Outcome {
        run,
        summary,
        probe,
        tally,
    }
}

fn cluster() -> Option<TestCluster> {
    shared_cluster(ClusterSpec::three)
}

// ---- SIGKILL mid-stream, then restart ----

fn broker_killed_mid_stream_and_restarted(driver: Driver, idempotent: bool) {
    let Some(mut kafka) = cluster() else { return };
    let a = kafka.topic("kill-a", 6, 3, &[]);
    let b = kafka.topic("kill-b", 3, 3, &[]);
    let victim = leader_of_first_partition(&kafka, &a);
    let config = producer_config(&kafka)
        .enable_idempotence(idempotent)
        .build()
        .unwrap();
    let k = &kafka;
    let o = run(
        k,
        "broker SIGKILL + restart",
        driver,
        config,
        &[(&a, 6), (&b, 3)],
        records_for(14),
        |p| {
            let mut t = FaultTally::default();
            p.wait_chunk(20);
            k.kill(victim).unwrap();
            t.kills += 1;
            // Fenced after broker.session.timeout.ms; its partitions have new leaders then.
            let others: Vec<i32> = k.node_ids().into_iter().filter(|&n| n != victim).collect();
            k.wait_brokers_listed(&others, Duration::from_secs(30))
                .unwrap();
            let c = p.chunk();
            p.wait_chunk(c + 20);
            let took = k.restart(victim, Duration::from_secs(60)).unwrap();
            println!(
                "node {victim} restarted and listed again in {:.1} s",
                took.as_secs_f64()
            );
            t.restarts += 1;
            t
        },
    );
    assert_eq!((o.tally.kills, o.tally.restarts), (1, 1));
    assert_eq!(o.summary.failed, 0);
}

#[test]
fn tokio_broker_killed_mid_stream_and_restarted() {
    broker_killed_mid_stream_and_restarted(Driver::Tokio, true);
}

#[test]
fn mio_broker_killed_mid_stream_and_restarted() {
    broker_killed_mid_stream_and_restarted(Driver::MioThreaded, true);
}

#[test]
fn tokio_broker_killed_not_idempotent_at_least_once_in_order() {
    broker_killed_mid_stream_and_restarted(Driver::Tokio, false);
}

// ---- SIGSTOP past the request timeout ----

fn broker_hung_past_request_timeout(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let a = kafka.topic("hung", 6, 3, &[]);
    let victim = leader_of_first_partition(&kafka, &a);
    let request_timeout = Duration::from_secs(2);
    let config = producer_config(&kafka)
        .request_timeout(request_timeout)
        .build()
        .unwrap();
    let k = &kafka;
    let o = run(
        k,
        "broker hung (SIGSTOP)",
        driver,
        config,
        &[(&a, 6)],
        records_for(10),
        |p| {
            let mut t = FaultTally::default();
            p.wait_chunk(20);
            k.pause(victim).unwrap();
            t.stalls += 1;
            // Hung for twice the request timeout: requests to it time out, it gets fenced.
            p.hold(request_timeout * 2 + Duration::from_secs(1));
            k.resume(victim).unwrap();
            t
        },
    );
    assert_eq!(o.tally.stalls, 1);
    assert_eq!(o.summary.failed, 0);
}

#[test]
fn tokio_broker_hung_past_request_timeout() {
    broker_hung_past_request_timeout(Driver::Tokio);
}

#[test]
fn mio_broker_hung_past_request_timeout() {
    broker_hung_past_request_timeout(Driver::MioThreaded);
}

// ---- SIGTERM: controlled shutdown, then restart ----

fn controlled_shutdown_and_restart(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let a = kafka.topic("term", 6, 3, &[]);
    let victim = leader_of_first_partition(&kafka, &a);
    let config = producer_config(&kafka).build().unwrap();
    let k = &kafka;
    let o = run(
        k,
        "controlled shutdown (SIGTERM)",
        driver,
        config,
        &[(&a, 6)],
        records_for(12),
        |p| {
            let mut t = FaultTally::default();
            p.wait_chunk(20);
            let took = k.terminate(victim, Duration::from_secs(60)).unwrap();
            println!("node {victim} shut down in {:.1} s", took.as_secs_f64());
            t.shutdowns += 1;
            let c = p.chunk();
            p.wait_chunk(c + 20);
            k.restart(victim, Duration::from_secs(60)).unwrap();
            t.restarts += 1;
            t
        },
    );
    assert_eq!(o.tally.shutdowns, 1);
    assert_eq!(o.summary.failed, 0);
}

#[test]
fn tokio_controlled_shutdown_and_restart() {
    controlled_shutdown_and_restart(Driver::Tokio);
}

#[test]
fn mio_controlled_shutdown_and_restart() {
    controlled_shutdown_and_restart(Driver::MioThreaded);
}

// ---- leader moves every 200 ms for 10 s ----

fn leader_moves_every_200ms_for_10s(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let a = kafka.topic("moves", 6, 3, &[]);
    let config = producer_config(&kafka).build().unwrap();
    let k = &kafka;
    let topic = a.clone();
    let o = run(
        k,
        "leader moves",
        driver,
        config,
        &[(&a, 6)],
        records_for(13),
        move |p| {
            let mut t = FaultTally::default();
            p.wait_chunk(10);
            // Partition -> the leader it was last moved to (the election is asked for; the
            // brokers learn of it while the next moves go on).
            let mut leader = k.leaders(&topic).unwrap();
            let start = std::time::Instant::now();
            let mut i = 0usize;
            while start.elapsed() < Duration::from_secs(10) {
                let due = start + Duration::from_millis(200) * i as u32;
                // The schedule of the moves (one every 200 ms), not a synchronisation.
                std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
                let partition = (i % 6) as i32;
                let to = leader[&partition] % 3 + 1;
                k.request_leader_move(&topic, partition, to).unwrap();
                leader.insert(partition, to);
                t.moves += 1;
                i += 1;
            }
            // Every move took effect before production ends.
            for (partition, to) in leader {
                k.wait_leader(&topic, partition, to).unwrap();
            }
            t
        },
    );
    assert!(o.tally.moves > 0);
    assert!(
        o.probe
            .produce_error_count(ErrorCode::NOT_LEADER_OR_FOLLOWER)
            > 0,
        "an old leader answered NOT_LEADER_OR_FOLLOWER:\n{}",
        o.probe
    );
    assert_eq!(o.summary.failed, 0);
}

#[test]
fn tokio_leader_moves_every_200ms_for_10s() {
    leader_moves_every_200ms_for_10s(Driver::Tokio);
}

#[test]
fn mio_leader_moves_every_200ms_for_10s() {
    leader_moves_every_200ms_for_10s(Driver::MioThreaded);
}

// ---- every connection cut with 5 requests in flight ----

fn every_connection_cut_with_five_in_flight(driver: Driver, idempotent: bool) {
    let Some(mut kafka) = cluster() else { return };
    let a = kafka.topic("cut", 6, 3, &[]);
    let config = producer_config(&kafka)
        .enable_idempotence(idempotent)
        .max_in_flight(5)
        .build()
        .unwrap();
    let k = &kafka;
    let o = run(
        k,
        "connections cut",
        driver,
        config,
        &[(&a, 6)],
        records_for(8),
        |p| {
            let mut t = FaultTally::default();
            p.wait_chunk(5);
            // Every chunk held back 400 ms each way: requests pile up on each connection.
            for px in k.proxies() {
                px.set_delay(Duration::from_millis(400));
            }
            t.delays += 1;
            // Without idempotence the core keeps one batch per partition in flight: a connection
            // carries one request per partition it leads at most.
            let wanted = if idempotent { 5 } else { 1 };
            for _ in 0..3 {
                // Watch every proxy at once (each in turn, briefly) until one connection has
                // the requests wanted in flight, or 10 s passed, or production ended.
                let watch_until = std::time::Instant::now() + Duration::from_secs(10);
                let mut seen = None;
                while seen.is_none() && std::time::Instant::now() < watch_until && !p.finished() {
                    seen = k
                        .proxies()
                        .iter()
                        .find_map(|px| px.wait_for_in_flight(wanted, Duration::from_millis(20)));
                }
                let Some(seen) = seen else {
                    if p.finished() {
                        break;
                    }
                    continue;
                };
                let cut: usize = k.proxies().iter().map(|px| px.cut_all()).sum();
                println!("cut {cut} connections with {seen} requests in flight on one");
                t.cuts += cut;
                let c = p.chunk();
                p.wait_chunk(c + 10);
            }
            k.heal_network();
            t
        },
    );
    assert!(
        o.tally.cuts > 0,
        "no connection had the requests in flight wanted"
    );
    assert_eq!(o.summary.failed, 0);
}

#[test]
fn tokio_every_connection_cut_with_five_in_flight() {
    every_connection_cut_with_five_in_flight(Driver::Tokio, true);
}

#[test]
fn mio_every_connection_cut_with_five_in_flight() {
    every_connection_cut_with_five_in_flight(Driver::MioThreaded, true);
}

#[test]
fn mio_every_connection_cut_not_idempotent_at_least_once_in_order() {
    every_connection_cut_with_five_in_flight(Driver::MioThreaded, false);
}

// ---- a black-holed broker ----

fn black_holed_broker(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let a = kafka.topic("hole", 6, 3, &[]);
    let victim = leader_of_first_partition(&kafka, &a);
    let request_timeout = Duration::from_secs(2);
    let config = producer_config(&kafka)
        .request_timeout(request_timeout)
        .build()
        .unwrap();
    let k = &kafka;
    let o = run(
        k,
        "black-holed broker",
        driver,
        config,
        &[(&a, 6)],
        records_for(10),
        |p| {
            let mut t = FaultTally::default();
            p.wait_chunk(20);
            k.proxy(victim).set_black_hole(true);
            t.black_holes += 1;
            p.hold(request_timeout * 2 + Duration::from_secs(1));
            k.proxy(victim).set_black_hole(false);
            t
        },
    );
    let stats = kafka.proxy(victim).stats();
    println!("proxy {victim}: {stats:?}");
    assert!(
        stats.black_holed > 0,
        "the producer reconnected into the black hole"
    );
    assert_eq!(o.summary.failed, 0);
}

#[test]
fn tokio_black_holed_broker() {
    black_holed_broker(Driver::Tokio);
}

#[test]
fn mio_black_holed_broker() {
    black_holed_broker(Driver::MioThreaded);
}

// ---- connections reset after N bytes ----

fn connection_reset_after_bytes(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let a = kafka.topic("reset", 6, 3, &[]);
    let config = producer_config(&kafka).build().unwrap();
    let k = &kafka;
    let o = run(
        k,
        "connection reset after N bytes",
        driver,
        config,
        &[(&a, 6)],
        records_for(8),
        |p| {
            let mut t = FaultTally::default();
            let plan = [
                (Direction::ToBroker, 700),
                (Direction::ToClient, 90),
                (Direction::ToBroker, 5_000),
                (Direction::ToClient, 300),
                (Direction::ToBroker, 20_011),
                (Direction::ToClient, 1_001),
            ];
            for (i, (dir, bytes)) in plan.into_iter().enumerate() {
                if !p.wait_chunk(5 + 10 * i) {
                    break;
                }
                let px = k.proxy(i as i32 % 3 + 1);
                px.reset_after(dir, bytes);
                // Fires with the next bytes that pass; give it until production ends.
                while px.reset_armed() && !p.finished() {
                    p.hold(Duration::from_millis(20));
                }
                px.heal();
            }
            t.resets = k.proxies().iter().map(|px| px.stats().reset as usize).sum();
            t
        },
    );
    assert!(o.tally.resets >= 3, "{}", o.tally);
    assert_eq!(o.summary.failed, 0);
}

#[test]
fn tokio_connection_reset_after_bytes() {
    connection_reset_after_bytes(Driver::Tokio);
}

#[test]
fn mio_connection_reset_after_bytes() {
    connection_reset_after_bytes(Driver::MioThreaded);
}

// ---- round-trip delay ----

fn round_trip_delay(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let a = kafka.topic("delay", 6, 3, &[]);
    let config = producer_config(&kafka).build().unwrap();
    let k = &kafka;
    let o = run(
        k,
        "round-trip delay",
        driver,
        config,
        &[(&a, 6)],
        records_for(6),
        |p| {
            let mut t = FaultTally::default();
            p.wait_chunk(10);
            for px in k.proxies() {
                px.set_delay(Duration::from_millis(80));
            }
            t.delays += 1;
            p.wait_chunk(40);
            k.proxy(2).set_delay(Duration::from_millis(400));
            t.delays += 1;
            p.wait_chunk(80);
            k.heal_network();
            t
        },
    );
    assert_eq!(o.summary.failed, 0);
}

#[test]
fn tokio_round_trip_delay() {
    round_trip_delay(Driver::Tokio);
}

#[test]
fn mio_round_trip_delay() {
    round_trip_delay(Driver::MioThreaded);
}

// ---- NOT_ENOUGH_REPLICAS while a replica is down, then recovery ----

fn not_enough_replicas_then_recovery(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let a = kafka.topic("ner", 6, 3, &[("min.insync.replicas", "3")]);
    let config = producer_config(&kafka).build().unwrap();
    let k = &kafka;
    let topic = a.clone();
    let o = run(
        k,
        "NOT_ENOUGH_REPLICAS",
        driver,
        config,
        &[(&a, 6)],
        records_for(14),
        move |p| {
            let mut t = FaultTally::default();
            p.wait_chunk(10);
            k.kill(3).unwrap();
            t.kills += 1;
            // Fenced: the ISR of every partition shrinks to two, below min.insync.replicas.
            k.wait_brokers_listed(&[1, 2], Duration::from_secs(30))
                .unwrap();
            wait_until_isr_shrinks(k, &topic);
            p.hold(Duration::from_secs(2));
            k.restart(3, Duration::from_secs(60)).unwrap();
            t.restarts += 1;
            t
        },
    );
    let ner = o.probe.produce_error_count(ErrorCode::NOT_ENOUGH_REPLICAS)
        + o.probe
            .produce_error_count(ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND);
    assert!(
        ner > 0,
        "the broker answered NOT_ENOUGH_REPLICAS:\n{}",
        o.probe
    );
    assert_eq!(o.summary.failed, 0);
}

/// Waits until some partition of `topic` has fewer in-sync replicas than replicas.
fn wait_until_isr_shrinks(kafka: &KafkaCluster, topic: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let v = kafka.view(&[topic]).unwrap();
        if v.topics[topic]
            .1
            .values()
            .any(|p| p.isr.len() < p.replicas.len())
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the ISR of {topic} never shrank"
        );
        // Metadata can only be asked: poll.
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn tokio_not_enough_replicas_then_recovery() {
    not_enough_replicas_then_recovery(Driver::Tokio);
}

#[test]
fn mio_not_enough_replicas_then_recovery() {
    not_enough_replicas_then_recovery(Driver::MioThreaded);
}

// ---- MESSAGE_TOO_LARGE from a topic limit: the batch is split and delivered ----

fn message_too_large_batches_are_split(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let small = kafka.topic("small-batches", 3, 3, &[("max.message.bytes", "4096")]);
    let b = kafka.topic("normal-batches", 3, 3, &[]);
    // Long linger and large batches: batches far above the topic's 4 KiB limit.
    let config = producer_config(&kafka)
        .linger(Duration::from_millis(100))
        .batch_size(64 * 1024)
        .build()
        .unwrap();
    // The fault is the topic's limit (max.message.bytes=4096), set at its creation.
    let o = run(
        &kafka,
        "MESSAGE_TOO_LARGE",
        driver,
        config,
        &[(&small, 3), (&b, 3)],
        records_for(3),
        |_| FaultTally::default(),
    );
    assert!(
        o.probe.produce_error_count(ErrorCode::MESSAGE_TOO_LARGE) > 0,
        "the broker refused a batch with MESSAGE_TOO_LARGE:\n{}",
        o.probe
    );
    assert_eq!(o.summary.failed, 0);
}

#[test]
fn tokio_message_too_large_batches_are_split_and_delivered() {
    message_too_large_batches_are_split(Driver::Tokio);
}

#[test]
fn mio_message_too_large_batches_are_split_and_delivered() {
    message_too_large_batches_are_split(Driver::MioThreaded);
}

// ---- a topic deleted mid-stream ----

fn topic_deleted_mid_stream(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let keep = kafka.topic("kept", 3, 3, &[]);
    let doomed = kafka.topic("doomed", 3, 3, &[]);
    let config = producer_config(&kafka)
        .max_block(Duration::from_secs(3))
        .delivery_timeout(Duration::from_secs(12))
        .build()
        .unwrap();
    let topics = [(keep.as_str(), 3), (doomed.as_str(), 3)];
    let records = workload(records_for(5), &topics, Keys::Mixed, 100);
    let k = &kafka;
    let gone = doomed.clone();
    let (run, tally) = produce_with_faults(driver, config, &records, &pacing(), move |p| {
        p.wait_chunk(20);
        k.delete_topic(&gone).unwrap();
        FaultTally {
            deletions: 1,
            ..FaultTally::default()
        }
    });
    let mut r = rules(&topics, expect_for(true));
    r.failures_allowed = true;
    let unread = [doomed.as_str()];
    r.unread_topics = &unread;
    let s = read_back_and_check(&kafka, &r, &records, &run);
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for (i, rep) in run.reports.iter().enumerate() {
        if let Err(f) = &rep[0] {
            assert_eq!(
                &*records[i].topic, doomed,
                "record {i} of the kept topic failed: {f:?}"
            );
            let kind = match f {
                Failure::Produce(ProduceError::UnknownTopic) => "UnknownTopic".to_string(),
                Failure::Produce(ProduceError::DeliveryTimeout { .. }) => {
                    "DeliveryTimeout".to_string()
                }
                Failure::Produce(ProduceError::Broker { code, .. }) => format!("Broker({code})"),
                other => panic!("record {i}: an untyped failure {other:?}"),
            };
            *kinds.entry(kind).or_default() += 1;
        }
    }
    println!(
        "topic deleted mid-stream {driver:?}: {} records, faults: {tally}; {} delivered, {} failed {kinds:?}; kept topic read back {}",
        records.len(),
        s.delivered,
        s.failed,
        s.consumed
    );
    assert!(s.failed > 0, "records sent after the deletion fail");
}

#[test]
fn tokio_topic_deleted_mid_stream_fails_typed_with_every_record() {
    topic_deleted_mid_stream(Driver::Tokio);
}

#[test]
fn mio_topic_deleted_mid_stream_fails_typed_with_every_record() {
    topic_deleted_mid_stream(Driver::MioThreaded);
}

// ---- a topic deleted and created again mid-stream (a new topic id) ----

/// Java's producer names each request's topics by the ids current when the request is built
/// (kafka-clients 4.1.1 `Sender.sendProduceRequest` / `topicIdsForBatches`), so batches not yet
/// written when a topic is deleted are retried, after `UNKNOWN_TOPIC_ID` and a metadata refresh,
/// into the new incarnation. So are ours: every record is delivered, each either to the old
/// incarnation (gone with it) or to the new one exactly where its report says, never both.
fn topic_created_again_mid_stream(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let topic = kafka.topic("reborn", 3, 3, &[]);
    let config = producer_config(&kafka)
        .delivery_timeout(Duration::from_secs(40))
        .build()
        .unwrap();
    let topics = [(topic.as_str(), 3)];
    let records = workload(records_for(6), &topics, Keys::Mixed, 100);
    let probe = Probe::attach(&kafka);
    let k = &kafka;
    let name = topic.clone();
    let switched_at = std::sync::Mutex::new(0usize);
    let switched = &switched_at;
    let (run, tally) = produce_with_faults(driver, config, &records, &pacing(), move |p| {
        p.wait_chunk(15);
        k.delete_topic(&name).unwrap();
        // Kafka may still be finishing the deletion: create again until it takes it.
        let mut attempts = 0;
        while let Err(e) = k.create_topic(&name, 3, 3, &[]) {
            attempts += 1;
            assert!(attempts < 50, "the topic cannot be created again: {e}");
            p.hold(Duration::from_millis(200));
        }
        *switched.lock().unwrap() = (p.chunk() + 1) * CHUNK;
        FaultTally {
            deletions: 1,
            creations: 1,
            ..FaultTally::default()
        }
    });
    let probe = probe.finish();
    assert!(probe.errors.is_empty(), "protocol probe:\n{probe}");
    let consumed = producer_tests::read_back_topics(
        &kafka.internal_bootstrap(),
        &topics,
        Duration::from_secs(120),
    );
    let sent_after = *switched_at.lock().unwrap();
    let failed: Vec<usize> = (0..records.len())
        .filter(|&i| run.reports[i].iter().any(|r| r.is_err()))
        .collect();
    println!(
        "{driver:?}: created again once #{sent_after} was sent; {} failed (first {:?}, last {:?})",
        failed.len(),
        failed.first(),
        failed.last()
    );
    let s = suite::check_new_incarnation(&records, &run, &consumed, sent_after);
    println!(
        "topic created again mid-stream {driver:?}: {} records, faults: {tally}; {} in the new \
         incarnation, {} delivered to the old one; UNKNOWN_TOPIC_ID answers {}; Produce versions {:?}",
        records.len(),
        s.in_new,
        s.delivered_before,
        probe.produce_error_count(ErrorCode::UNKNOWN_TOPIC_ID),
        probe.versions.get("Produce")
    );
    assert!(s.in_new > 0 && s.delivered_before > 0, "{s:?}");
    let produce_versions = &probe.versions["Produce"];
    assert_eq!(
        produce_versions.keys().copied().collect::<Vec<_>>(),
        vec![13],
        "Produce by topic id throughout"
    );
}

#[test]
fn tokio_topic_created_again_mid_stream_lands_each_record_in_one_incarnation() {
    topic_created_again_mid_stream(Driver::Tokio);
}

#[test]
fn mio_topic_created_again_mid_stream_lands_each_record_in_one_incarnation() {
    topic_created_again_mid_stream(Driver::MioThreaded);
}

// ---- a topic created after records for it were sent ----

fn topic_created_after_records_were_sent(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let existing = kafka.topic("early", 3, 3, &[]);
    let late = producer_tests::kafka::unique_topic("late");
    let config = producer_config(&kafka).build().unwrap();
    let k = &kafka;
    let name = late.clone();
    let o = run(
        k,
        "topic created late",
        driver,
        config,
        &[(&existing, 3), (&late, 4)],
        records_for(4),
        move |p| {
            // Records for the missing topic are held (up to max_block) while the rest flow.
            p.wait_chunk(10);
            k.create_topic(&name, 4, 3, &[]).unwrap();
            FaultTally {
                creations: 1,
                ..FaultTally::default()
            }
        },
    );
    assert_eq!(o.summary.failed, 0);
    assert_eq!(o.summary.consumed, o.run.reports.len());
}

#[test]
fn tokio_topic_created_after_records_for_it_were_sent() {
    topic_created_after_records_were_sent(Driver::Tokio);
}

#[test]
fn mio_topic_created_after_records_for_it_were_sent() {
    topic_created_after_records_were_sent(Driver::MioThreaded);
}
