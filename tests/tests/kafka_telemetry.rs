//! KIP-714 client telemetry of our producer against Apache Kafka (issue 23, item 4): a single
//! node with the test tier's telemetry receiver (`tests/kafka/java/TelemetryReporter.java`, a
//! metrics reporter implementing `ClientTelemetry` and `ClientTelemetryReceiver`; Kafka 4.2
//! deprecates them for `ClientTelemetryExporterProvider`, to move to with the pinned Kafka), a
//! client-metrics subscription (`org.apache.kafka.producer.`, every 1000 ms), and our producer
//! through the tokio and the threaded mio drivers. The broker's receiver decodes every push it
//! accepted as OTLP; the test checks the names (KIP-714's producer set), the temporality the
//! broker asked for, the values against the producer's own metrics snapshot, and that the
//! close's push is the one terminating push, the last.

use std::time::{Duration, Instant};

use producer_core::{Config, Record};
use producer_tests::drive::{produce_then_snapshot, Driver, Pacing};
use producer_tests::kafka::telemetry::{wait_for_pushes, PointKind, TelemetryPush};
use producer_tests::kafka::wire::get_telemetry_subscriptions;
use producer_tests::kafka::{self, ClusterSpec};

/// Every client id of ours starts so; the subscription matches on it.
const CLIENT_PREFIX: &str = "telemetry-ours-";
const PRODUCER_PREFIX: &str = "org.apache.kafka.producer.";
const INTERVAL_MS: i32 = 1_000;
const RECORDS: usize = 300;

/// KIP-714's producer metrics this producer has (the standard set's names).
const STANDARD: &[&str] = &[
    "org.apache.kafka.producer.record.queue.time.avg",
    "org.apache.kafka.producer.record.queue.time.max",
    "org.apache.kafka.producer.node.request.latency.avg",
    "org.apache.kafka.producer.node.request.latency.max",
    "org.apache.kafka.producer.produce.throttle.time.avg",
    "org.apache.kafka.producer.produce.throttle.time.max",
    "org.apache.kafka.producer.connection.creation.total",
    "org.apache.kafka.producer.connection.creation.rate",
];

#[test]
fn our_producer_pushes_its_metrics_to_kafka() {
    let _slot = kafka::cluster_slot();
    let Some(cluster) = kafka::own_cluster(
        ClusterSpec::single()
            .name("telemetry-ours")
            .without_proxy()
            .telemetry_reporter(),
    ) else {
        return;
    };
    let node = cluster.internal_addr(1);
    cluster
        .ctl()
        .client_metrics(
            "ours",
            &[
                ("metrics", PRODUCER_PREFIX),
                ("interval.ms", &INTERVAL_MS.to_string()),
                ("match", &format!("client_id={CLIENT_PREFIX}.*")),
            ],
        )
        .expect("create the client-metrics subscription");
    let probe_id = format!("{CLIENT_PREFIX}probe");
    let deadline = Instant::now() + Duration::from_secs(30);
    let subscription = loop {
        let s = get_telemetry_subscriptions(node, &probe_id, Duration::from_secs(5))
            .expect("GetTelemetrySubscriptions");
        if s.requested_metrics == [PRODUCER_PREFIX] && s.push_interval_ms == INTERVAL_MS {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the broker does not hand out the subscription: {s:?}"
        );
        // The broker learns of the subscription from its metadata log: it can only be asked.
        std::thread::sleep(Duration::from_millis(100));
    };
    println!("subscription: {subscription:?}");

    let topic = kafka::unique_topic("telemetry-ours");
    cluster
        .create_topic(&topic, 3, 1, &[])
        .expect("create the topic");
    for driver in [Driver::Tokio, Driver::MioThreaded] {
        let client_id = format!("{CLIENT_PREFIX}{driver:?}").to_lowercase();
        let config = Config::builder(cluster.bootstrap())
            .client_id(client_id.clone())
            .linger(Duration::from_millis(10))
            .build()
            .unwrap();
        let records: Vec<Record> = (0..RECORDS)
            .map(|i| Record::new(topic.as_str(), format!("value-{i}")).with_key(format!("k{i}")))
            .collect();
        // 50 records every 700 ms: about 3.5 s, a few push intervals.
        let (run, snapshot) = produce_then_snapshot(
            driver,
            config,
            &records,
            &Pacing::chunks(50, Duration::from_millis(700)),
        );
        assert!(
            run.reports.iter().all(|r| r.len() == 1 && r[0].is_ok()),
            "{driver:?}: every record delivered"
        );
        assert_eq!(snapshot.counters.records_sent, RECORDS as u64, "{driver:?}");

        // The close pushed last and waited for the answer: the line is there, or comes at once.
        let pushes = wait_for_pushes(
            &cluster,
            1,
            Duration::from_secs(15),
            &format!("the terminating push of {client_id}"),
            |p| p.iter().any(|x| x.client_id == client_id && x.terminating),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mine: Vec<&TelemetryPush> =
            pushes.iter().filter(|p| p.client_id == client_id).collect();
        for p in &mine {
            println!(
                "{driver:?} push #{} terminating={} version={} {} bytes, {} points, resource {:?}",
                p.seq,
                p.terminating,
                p.request_version,
                p.bytes,
                p.points.len(),
                p.resource
            );
        }
        check_pushes(
            driver,
            &mine,
            &snapshot,
            subscription.delta_temporality,
            &client_id,
        );
    }
}

/// The pushes of one producer: well-formed OTLP, one instance, KIP-714 names only, the
/// standard producer set among them, sums of the asked temporality, `record.send.total`
/// adding up to the snapshot's, and one terminating push, the last.
fn check_pushes(
    driver: Driver,
    mine: &[&TelemetryPush],
    snapshot: &producer_core::MetricsSnapshot,
    delta: bool,
    client_id: &str,
) {
    assert!(
        mine.len() >= 2,
        "{driver:?}: periodic pushes and the terminating one: {} pushes",
        mine.len()
    );
    let instance = &mine[0].instance;
    assert!(mine.iter().all(|p| &p.instance == instance), "{driver:?}");
    let terminating: Vec<u64> = mine
        .iter()
        .filter(|p| p.terminating)
        .map(|p| p.seq)
        .collect();
    assert_eq!(
        terminating,
        [mine.last().unwrap().seq],
        "{driver:?}: one terminating push, the last"
    );
    for p in mine {
        assert_eq!(p.content_type, "OTLP", "{driver:?} push #{}", p.seq);
        assert_eq!(p.decode_error, None, "{driver:?} push #{}", p.seq);
        assert_eq!(p.request_version, 0);
        assert!(!p.points.is_empty(), "{driver:?} push #{}", p.seq);
        // As Java's producer: no resource attributes (the broker knows the client by the
        // request's header), and the per-broker series named by `node_id` as `node-<id>`.
        assert!(p.resource.is_empty(), "{driver:?}: {:?}", p.resource);
        assert_eq!(p.client_id, client_id);
        for pt in p.points_named("org.apache.kafka.producer.node.request.latency.avg") {
            assert_eq!(pt.attributes.len(), 1, "{pt:?}");
            assert_eq!(pt.attributes[0].0, "node_id", "{pt:?}");
            assert!(pt.attributes[0].1.starts_with("node-"), "{pt:?}");
        }
        for name in p.metric_names() {
            assert!(name.starts_with(PRODUCER_PREFIX), "{driver:?}: {name}");
        }
    }
    let names: Vec<&str> = mine.iter().flat_map(|p| p.metric_names()).collect();
    for expected in STANDARD {
        assert!(
            names.contains(expected),
            "{driver:?}: {expected} never pushed; pushed {names:?}"
        );
    }
    let temporalities: Vec<(&str, bool)> = mine
        .iter()
        .flat_map(|p| &p.points)
        .filter_map(|pt| match &pt.kind {
            PointKind::Sum {
                temporality,
                monotonic,
            } => Some((temporality.as_str(), *monotonic)),
            _ => None,
        })
        .collect();
    assert!(!temporalities.is_empty(), "{driver:?}: no sum pushed");
    let want = if delta { "delta" } else { "cumulative" };
    assert!(
        temporalities.iter().all(|&(t, m)| t == want && m),
        "{driver:?}: {temporalities:?}"
    );
    let send_total: Vec<f64> = mine
        .iter()
        .flat_map(|p| p.points_named("org.apache.kafka.producer.record.send.total"))
        .map(|pt| pt.value)
        .collect();
    let pushed = if delta {
        send_total.iter().sum::<f64>()
    } else {
        send_total.last().copied().unwrap_or(0.0)
    };
    println!("{driver:?}: record.send.total pushed {send_total:?} -> {pushed}");
    assert_eq!(pushed, snapshot.counters.records_sent as f64, "{driver:?}");
    let bytes: f64 = mine
        .iter()
        .flat_map(|p| p.points_named("org.apache.kafka.producer.outgoing.byte.total"))
        .map(|pt| pt.value)
        .sum();
    if delta {
        assert_eq!(bytes, snapshot.counters.bytes_sent as f64, "{driver:?}");
    }
}
