//! Rebootstrap (KIP-899 / KIP-1102, `metadata.recovery.strategy=rebootstrap`, the default) on
//! Apache Kafka: the producer's only bootstrap address is a stable TCP front (as a DNS name or a
//! load balancer would be) in front of cluster A. While records flow, every broker of A is
//! killed and a fresh cluster B (new ports, new cluster id, the topic created again with a new
//! topic id) is started; the front is pointed at B. The brokers the producer knew (A's) are all
//! unreachable, so it goes back to the bootstrap address, learns B's brokers from B's Metadata
//! and delivers every record: to A before the switch (gone with A), to B after it, each exactly
//! where its report says. Nothing but the bootstrap address leads to B; with
//! `metadata.recovery.strategy=none` nothing reaches B.

use std::sync::Mutex;
use std::time::Duration;

use producer_core::{Config, MetadataRecovery, ProduceError, Record};
use producer_tests::kafka::suite::{
    check_new_incarnation, produce_with_faults, producer_config_for, FaultTally,
};
use producer_tests::kafka::{self, ClusterSpec, KafkaCluster, Proxy, ProxyStats};
use producer_tests::{read_back_topics, workload, Consumed, Driver, Failure, Keys, Pacing, Run};

const CHUNK: usize = 100;
const TOPIC: &str = "rebooted";

/// What a run with the cluster replaced left to check.
struct Replaced {
    records: Vec<Record>,
    run: Run,
    /// Cluster B's log, read back.
    in_b: Vec<Consumed>,
    /// Records from this index on were sent once A was dead.
    sent_after_kill: usize,
    /// Records from this index on were sent once the front led to B.
    sent_after_switch: usize,
    front: ProxyStats,
}

/// Produces `n` records at 1,000 records/s through the front while A is killed after 1,000
/// records and B takes its place (`config` with the front as its bootstrap list); returns
/// `None` when the real-Kafka tier is opted out.
fn replace_cluster_while_producing(
    driver: Driver,
    name: &str,
    n: usize,
    config: impl FnOnce(Vec<(String, u16)>) -> Config,
) -> Option<Replaced> {
    let _slot = kafka::cluster_slot();
    let a = kafka::own_cluster(ClusterSpec::single().name(&format!("{name}-a")))?;
    a.create_topic(TOPIC, 3, 1, &[]).unwrap();
    let front = Proxy::start(0, a.client_addr(1)).expect("the bootstrap front");
    let config = config(vec![("127.0.0.1".to_string(), front.addr().port())]);
    let records = workload(n, &[(TOPIC, 3)], Keys::Mixed, 100);
    let pacing = Pacing::chunks(CHUNK, Duration::from_millis(100));
    let b_slot: Mutex<Option<KafkaCluster>> = Mutex::new(None);
    let marks = Mutex::new((0usize, 0usize));
    let (b_ref, marks_ref, front_ref) = (&b_slot, &marks, &front);
    let (run, tally) = produce_with_faults(driver, config, &records, &pacing, move |p| {
        p.wait_chunk(10);
        drop(a); // every broker of A killed, its directory removed
        let killed = (p.chunk() + 1) * CHUNK;
        let b = kafka::own_cluster(ClusterSpec::single().name(&format!("{name}-b")))
            .expect("the tier is on: A started");
        b.create_topic(TOPIC, 3, 1, &[]).unwrap();
        front_ref.set_upstream(b.client_addr(1));
        *marks_ref.lock().unwrap() = (killed, (p.chunk() + 1) * CHUNK);
        *b_ref.lock().unwrap() = Some(b);
        FaultTally {
            kills: 1,
            creations: 1,
            ..FaultTally::default()
        }
    });
    let b = b_slot.into_inner().unwrap().expect("cluster B");
    let in_b = read_back_topics(
        &b.internal_bootstrap(),
        &[(TOPIC, 3)],
        Duration::from_secs(120),
    );
    let (sent_after_kill, sent_after_switch) = marks.into_inner().unwrap();
    println!(
        "{name} {driver:?}: {n} records in {:.1} s, faults: {tally}; A killed once #{sent_after_kill} \
         was sent, B behind the front once #{sent_after_switch} was; {} records in B",
        run.elapsed.as_secs_f64(),
        in_b.len()
    );
    Some(Replaced {
        records,
        run,
        in_b,
        sent_after_kill,
        sent_after_switch,
        front: front.stats(),
    })
}

fn rebootstraps_to_a_replaced_cluster(driver: Driver, name: &str) {
    let Some(r) = replace_cluster_while_producing(driver, name, 24_000, |bootstrap| {
        producer_config_for(bootstrap).build().unwrap()
    }) else {
        return;
    };
    assert!(
        r.sent_after_switch < r.records.len(),
        "B came up after the last record was sent: nothing was sent to the replaced cluster"
    );
    let s = check_new_incarnation(&r.records, &r.run, &r.in_b, r.sent_after_switch);
    println!(
        "  {} delivered to A (gone), {} to B; front: {:?}",
        s.delivered_before, s.in_new, r.front
    );
    assert!(s.delivered_before > 0, "nothing reached A: {s:?}");
    assert!(
        s.in_new >= r.records.len() - r.sent_after_switch,
        "B lacks records: {s:?}"
    );
}

#[test]
fn tokio_rebootstraps_to_a_cluster_replaced_behind_the_bootstrap_address() {
    rebootstraps_to_a_replaced_cluster(Driver::Tokio, "reboot-tokio");
}

#[test]
fn mio_rebootstraps_to_a_cluster_replaced_behind_the_bootstrap_address() {
    rebootstraps_to_a_replaced_cluster(Driver::MioThreaded, "reboot-mio");
}

/// The same replacement with `metadata.recovery.strategy=none`: the producer keeps to A's
/// broker, so nothing reaches B; every record sent after A died fails with a typed delivery
/// timeout and is handed back as sent. (B is up behind the bootstrap address all the while.)
#[test]
fn with_strategy_none_a_replaced_cluster_is_not_found() {
    let Some(r) =
        replace_cluster_while_producing(Driver::MioThreaded, "reboot-none", 4_000, |bootstrap| {
            producer_config_for(bootstrap)
                .metadata_recovery(MetadataRecovery::None)
                .delivery_timeout(Duration::from_secs(30))
                .build()
                .unwrap()
        })
    else {
        return;
    };
    assert!(r.in_b.is_empty(), "{} records reached B", r.in_b.len());
    let mut timed_out = 0;
    for (i, reports) in r.run.reports.iter().enumerate() {
        match &reports[0] {
            Ok(_) => assert!(
                i < r.sent_after_kill,
                "record {i}, sent after A died, was delivered"
            ),
            Err(Failure::Produce(ProduceError::DeliveryTimeout { .. })) => {
                // Handed back as sent (the driver filled in the timestamp it was sent with).
                let back = r.run.returned[i].as_ref().expect("the record handed back");
                let sent = &r.records[i];
                assert_eq!(
                    (&back.topic, &back.key, &back.value, &back.headers),
                    (&sent.topic, &sent.key, &sent.value, &sent.headers),
                    "record {i} handed back"
                );
                timed_out += 1;
            }
            Err(f) => panic!("record {i}: {f:?}"),
        }
    }
    println!(
        "  strategy none: {timed_out} timed out, none reached B; front: {:?}",
        r.front
    );
    assert!(timed_out >= r.records.len() - r.sent_after_kill);
}
