//! Rebootstrap (KIP-899 / KIP-1102, `metadata.recovery.strategy=rebootstrap`, the default) on
//! Apache Kafka: the producer's only bootstrap address is a stable TCP front (as a DNS name or a
//! load balancer would be) in front of cluster A. While records flow, every broker of A is
//! killed and a fresh cluster B (new ports, new cluster id, the topic created again with a new
//! topic id) is started; the front is pointed at B. The brokers the producer knew (A's) are all
//! unreachable, so it goes back to the bootstrap address, learns B's brokers from B's Metadata
//! and delivers every record: to A before the switch (gone with A), to B after it, each exactly
//! where its report says. Nothing but the bootstrap address leads to B.

use std::sync::Mutex;
use std::time::Duration;

use producer_core::{Config, MetadataRecovery, ProduceError};
use producer_tests::kafka::suite::{check_new_incarnation, produce_with_faults, FaultTally};
use producer_tests::kafka::{self, ClusterSpec, KafkaCluster, Proxy};
use producer_tests::{read_back_topics, workload, Driver, Failure, Keys, Pacing};

const CHUNK: usize = 100;
const TOPIC: &str = "rebooted";

fn cluster_replaced_behind_the_bootstrap_address(driver: Driver, name: &str) {
    let _serial = kafka::exclusive();
    let Some(a) = kafka::own_cluster(ClusterSpec::single().name(&format!("{name}-a"))) else {
        return;
    };
    a.create_topic(TOPIC, 3, 1, &[]).unwrap();
    let front = Proxy::start(0, a.client_addr(1)).expect("the bootstrap front");
    let config = Config::builder([("127.0.0.1".to_string(), front.addr().port())])
        .retry_backoff(Duration::from_millis(20))
        .retry_backoff_max(Duration::from_millis(500))
        .reconnect_backoff(Duration::from_millis(20))
        .reconnect_backoff_max(Duration::from_millis(500))
        .request_timeout(Duration::from_secs(5))
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let topics = [(TOPIC, 3)];
    // 1,000 records/s for 24 s: the switch (A killed after 1 s, then B's start, 5-15 s) lands
    // mid-stream.
    let records = workload(24_000, &topics, Keys::Mixed, 100);
    let pacing = Pacing::chunks(CHUNK, Duration::from_millis(100));
    let b_slot: Mutex<Option<KafkaCluster>> = Mutex::new(None);
    let switched_at = Mutex::new(0usize);
    let (b_ref, switched, front_ref) = (&b_slot, &switched_at, &front);
    let (run, tally) = produce_with_faults(driver, config, &records, &pacing, move |p| {
        p.wait_chunk(10);
        drop(a); // every broker of A killed, its directory removed
        let b = kafka::own_cluster(ClusterSpec::single().name(&format!("{name}-b")))
            .expect("the tier is on: A started");
        b.create_topic(TOPIC, 3, 1, &[]).unwrap();
        front_ref.set_upstream(b.client_addr(1));
        *switched.lock().unwrap() = (p.chunk() + 1) * CHUNK;
        *b_ref.lock().unwrap() = Some(b);
        FaultTally {
            kills: 1,
            creations: 1,
            ..FaultTally::default()
        }
    });
    let b = b_slot.into_inner().unwrap().expect("cluster B");
    let consumed = read_back_topics(&b.internal_bootstrap(), &topics, Duration::from_secs(120));
    let sent_after = switched_at.into_inner().unwrap();
    assert!(
        sent_after < records.len(),
        "B came up after the last record was sent: nothing was sent to the replaced cluster"
    );
    let s = check_new_incarnation(&records, &run, &consumed, sent_after);
    println!(
        "cluster replaced behind the bootstrap address, {driver:?}: {} records in {:.1} s, \
         faults: {tally}; {} delivered to A (gone), {} to B; records from #{sent_after} sent \
         after the switch; front: {:?}",
        records.len(),
        run.elapsed.as_secs_f64(),
        s.delivered_before,
        s.in_new,
        front.stats()
    );
    assert!(s.delivered_before > 0, "nothing reached A: {s:?}");
    assert!(
        s.in_new >= records.len() - sent_after,
        "B lacks records: {s:?}"
    );
}

/// The same replacement with `metadata.recovery.strategy=none`: the producer keeps to A's
/// broker, so nothing reaches B; every record sent after A died fails with a typed delivery
/// timeout and is handed back. (B is up behind the bootstrap address all the while.)
#[test]
fn with_strategy_none_a_replaced_cluster_is_not_found() {
    let _serial = kafka::exclusive();
    let Some(a) = kafka::own_cluster(ClusterSpec::single().name("reboot-none-a")) else {
        return;
    };
    a.create_topic(TOPIC, 3, 1, &[]).unwrap();
    let front = Proxy::start(0, a.client_addr(1)).expect("the bootstrap front");
    let config = Config::builder([("127.0.0.1".to_string(), front.addr().port())])
        .metadata_recovery(MetadataRecovery::None)
        .retry_backoff(Duration::from_millis(20))
        .retry_backoff_max(Duration::from_millis(500))
        .reconnect_backoff(Duration::from_millis(20))
        .reconnect_backoff_max(Duration::from_millis(500))
        .request_timeout(Duration::from_secs(5))
        .delivery_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let topics = [(TOPIC, 3)];
    let records = workload(4_000, &topics, Keys::Mixed, 100);
    let pacing = Pacing::chunks(CHUNK, Duration::from_millis(50));
    let b_slot: Mutex<Option<KafkaCluster>> = Mutex::new(None);
    let killed_at = Mutex::new(0usize);
    let (b_ref, killed, front_ref) = (&b_slot, &killed_at, &front);
    let (run, _) = produce_with_faults(Driver::MioThreaded, config, &records, &pacing, move |p| {
        p.wait_chunk(10);
        drop(a);
        *killed.lock().unwrap() = (p.chunk() + 1) * CHUNK;
        let b = kafka::own_cluster(ClusterSpec::single().name("reboot-none-b"))
            .expect("the tier is on: A started");
        b.create_topic(TOPIC, 3, 1, &[]).unwrap();
        front_ref.set_upstream(b.client_addr(1));
        *b_ref.lock().unwrap() = Some(b);
        FaultTally::default()
    });
    let b = b_slot.into_inner().unwrap().expect("cluster B");
    let consumed = read_back_topics(&b.internal_bootstrap(), &topics, Duration::from_secs(120));
    assert!(consumed.is_empty(), "{} records reached B", consumed.len());
    let killed_at = killed_at.into_inner().unwrap();
    let mut timed_out = 0;
    for (i, r) in run.reports.iter().enumerate() {
        match &r[0] {
            Ok(_) => assert!(
                i < killed_at,
                "record {i}, sent after A died, was delivered"
            ),
            Err(Failure::Produce(ProduceError::DeliveryTimeout { .. })) => {
                // Handed back as sent (the driver filled in the timestamp it was sent with).
                let back = run.returned[i].as_ref().expect("the record handed back");
                let sent = &records[i];
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
        "strategy none, cluster replaced: {} records, {timed_out} timed out (from #{killed_at} \
         on sent after A died), none reached B",
        records.len()
    );
    assert!(timed_out >= records.len() - killed_at);
}

#[test]
fn tokio_rebootstraps_to_a_cluster_replaced_behind_the_bootstrap_address() {
    cluster_replaced_behind_the_bootstrap_address(Driver::Tokio, "reboot-tokio");
}

#[test]
fn mio_rebootstraps_to_a_cluster_replaced_behind_the_bootstrap_address() {
    cluster_replaced_behind_the_bootstrap_address(Driver::MioThreaded, "reboot-mio");
}
