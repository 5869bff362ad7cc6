//! KIP-714 client telemetry, the broker side (issue 23, item 4 groundwork): a single Apache
//! Kafka node with the test tier's receiver (`tests/kafka/java/TelemetryReporter.java`), a
//! client-metrics subscription made through the Admin API, and Kafka's Java producer (an
//! independent client, `enable.metrics.push` on by default) pushing its metrics to it. Proves
//! that the broker offers telemetry, hands out the subscription, and that the reporter records
//! every push that producer made (its OTLP payload decoded), ending with the terminating push
//! of its close. A broker without a receiver hides both APIs from ApiVersions. Our producer
//! pushes to the same reporter in `kafka_telemetry`.

use std::time::{Duration, Instant};

use producer_tests::kafka::telemetry::{wait_for_pushes, PointKind, TelemetryPush};
use producer_tests::kafka::wire::{api_versions, get_telemetry_subscriptions};
use producer_tests::kafka::{self, ClusterSpec};

/// The client id of Java's producer; the subscription matches on it, so KafkaCtl's own admin
/// client and consumer get no subscription and push nothing.
const CLIENT_ID: &str = "telemetry-java";
/// The prefix KIP-714 gives every producer metric.
const PRODUCER_PREFIX: &str = "org.apache.kafka.producer.";
/// The push interval the subscription asks (the smallest Kafka accepts is 100 ms).
const INTERVAL_MS: i32 = 1_000;
const RECORDS: u32 = 400;
/// How long Java's producer sends: a few push intervals.
const PRODUCE_FOR: Duration = Duration::from_millis(3_500);

#[test]
fn java_producer_pushes_its_metrics_to_the_test_reporter() {
    let _slot = kafka::cluster_slot();
    let Some(cluster) = kafka::own_cluster(
        ClusterSpec::single()
            .name("telemetry")
            .without_proxy()
            .telemetry_reporter(),
    ) else {
        return;
    };
    let node = cluster.internal_addr(1);

    // A broker with a ClientTelemetry reporter lists GetTelemetrySubscriptions (71) and
    // PushTelemetry (72).
    let versions = api_versions(node, Duration::from_secs(5)).expect("ApiVersions");
    for key in [71, 72] {
        assert!(
            versions.ranges.contains_key(&key),
            "API key {key} not listed: {:?}",
            versions.ranges
        );
    }

    // Before any subscription the broker answers, with nothing to push.
    let before = get_telemetry_subscriptions(node, CLIENT_ID, Duration::from_secs(5))
        .expect("GetTelemetrySubscriptions without a subscription");
    println!("without a subscription: {before:?}");
    assert_eq!(before.error, 0, "{before:?}");
    assert!(before.requested_metrics.is_empty(), "{before:?}");
    // Kafka's default interval (ClientMetricsConfigs.DEFAULT_INTERVAL_MS): ask again in 5 min.
    assert_eq!(before.push_interval_ms, 300_000, "{before:?}");

    cluster
        .ctl()
        .client_metrics(
            "producer-telemetry",
            &[
                ("metrics", PRODUCER_PREFIX),
                ("interval.ms", &INTERVAL_MS.to_string()),
                ("match", &format!("client_id={CLIENT_ID}")),
            ],
        )
        .expect("create the client-metrics subscription");
    // The broker learns of it from the metadata log: wait (bounded) until it hands it out.
    let deadline = Instant::now() + Duration::from_secs(30);
    let subscription = loop {
        let s = get_telemetry_subscriptions(node, CLIENT_ID, Duration::from_secs(5))
            .expect("GetTelemetrySubscriptions");
        if s.requested_metrics == [PRODUCER_PREFIX] && s.push_interval_ms == INTERVAL_MS {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the broker does not hand out the subscription: {s:?}"
        );
        // The broker's state can only be asked, not awaited.
        std::thread::sleep(Duration::from_millis(100));
    };
    println!("with the subscription: {subscription:?}");
    assert_eq!(subscription.error, 0);
    assert!(!subscription.accepted_compression.is_empty());
    // Another client id is not matched.
    let other = get_telemetry_subscriptions(node, "someone-else", Duration::from_secs(5))
        .expect("GetTelemetrySubscriptions");
    assert!(other.requested_metrics.is_empty(), "{other:?}");

    let topic = kafka::unique_topic("telemetry");
    cluster
        .create_topic(&topic, 3, 1, &[])
        .expect("create the topic");
    let produced = cluster
        .ctl()
        .java_produce(
            &topic,
            RECORDS,
            PRODUCE_FOR,
            // A linger that leaves the last records to the close: Java sends its terminating
            // push only while the close still has requests to send.
            &[("client.id", CLIENT_ID), ("linger.ms", "20")],
        )
        .expect("Java's producer");
    assert_eq!((produced.acked, produced.failed), (RECORDS as u64, 0));
    let instance = produced
        .instance_id
        .expect("Java's producer has a client instance id");

    // The close pushed last, marked terminating; the broker hands a push to the reporter before
    // answering it, and the close waited for the answer: the line is there, or comes at once.
    let pushes = wait_for_pushes(
        &cluster,
        1,
        Duration::from_secs(15),
        &format!("the terminating push of {instance}"),
        |p| p.iter().any(|x| x.instance == instance && x.terminating),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mine: Vec<&TelemetryPush> = pushes.iter().filter(|p| p.instance == instance).collect();
    // When each push took its numbers (its points' latest time), from the first's: the cadence.
    let taken = |p: &TelemetryPush| p.points.iter().map(|pt| pt.time_unix_nano).max();
    let first = mine.first().and_then(|p| taken(p)).unwrap_or(0);
    for p in &mine {
        println!(
            "push #{} at +{} ms terminating={} content_type={} version={} {} bytes, {} points, \
             resource {:?}",
            p.seq,
            taken(p).unwrap_or(0).saturating_sub(first) / 1_000_000,
            p.terminating,
            p.content_type,
            p.request_version,
            p.bytes,
            p.points.len(),
            p.resource
        );
    }
    if let Some(pt) = mine[0]
        .points
        .iter()
        .find(|pt| pt.start_unix_nano > 0 && pt.time_unix_nano >= pt.start_unix_nano)
    {
        println!(
            "the first push's sums cover {} ms",
            (pt.time_unix_nano - pt.start_unix_nano) / 1_000_000
        );
    }
    println!(
        "{} metric names, e.g. {:?}",
        mine[0].metric_names().len(),
        &mine[0].metric_names()[..8.min(mine[0].metric_names().len())]
    );
    assert!(
        pushes.iter().all(|p| p.client_id == CLIENT_ID),
        "only the matched client pushes: {:?}",
        pushes.iter().map(|p| &p.client_id).collect::<Vec<_>>()
    );
    assert!(
        mine.len() >= 2,
        "periodic pushes and the terminating one: {} pushes",
        mine.len()
    );
    let terminating: Vec<u64> = mine
        .iter()
        .filter(|p| p.terminating)
        .map(|p| p.seq)
        .collect();
    assert_eq!(
        terminating,
        [mine.last().unwrap().seq],
        "one terminating push, the last"
    );
    for p in &mine {
        // Kafka's PushTelemetryRequest.metricsContentType(): one format, named "OTLP".
        assert_eq!(p.content_type, "OTLP", "push #{}", p.seq);
        assert_eq!(p.decode_error, None, "push #{}", p.seq);
        assert!(p.bytes > 0 && !p.points.is_empty(), "push #{}", p.seq);
        assert!(
            p.metric_names()
                .iter()
                .all(|n| n.starts_with(PRODUCER_PREFIX)),
            "push #{} has metrics the subscription did not ask: {:?}",
            p.seq,
            p.metric_names()
        );
    }
    let names: Vec<&str> = mine.iter().flat_map(|p| p.metric_names()).collect();
    for expected in [
        "org.apache.kafka.producer.record.queue.time.avg",
        "org.apache.kafka.producer.node.request.latency.avg",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} never pushed; pushed {names:?}"
        );
    }
    // The records Java counted as sent, pushed as deltas: together no more than it sent, and
    // some (the last batches may go out after the terminating push took its numbers).
    let sent: f64 = mine
        .iter()
        .flat_map(|p| p.points_named("org.apache.kafka.producer.record.send.total"))
        .map(|pt| pt.value)
        .sum();
    println!("record.send.total deltas sum to {sent}");
    assert!(
        sent > 0.0 && sent <= RECORDS as f64,
        "record.send.total deltas sum to {sent}, {RECORDS} records sent"
    );
    // Sums are deltas, as the broker asked (delta_temporality), and monotonic.
    let sums: Vec<_> = mine
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
    assert!(!sums.is_empty(), "no sum pushed");
    if subscription.delta_temporality {
        assert!(sums.iter().all(|s| s.0 == "delta"), "{sums:?}");
    }
    assert!(sums.iter().all(|s| s.1), "{sums:?}");
}

#[test]
fn a_broker_without_a_receiver_hides_the_telemetry_apis() {
    let _slot = kafka::cluster_slot();
    let Some(cluster) =
        kafka::own_cluster(ClusterSpec::single().name("no-telemetry").without_proxy())
    else {
        return;
    };
    let node = cluster.internal_addr(1);
    let versions = api_versions(node, Duration::from_secs(5)).expect("ApiVersions");
    for key in [71, 72] {
        assert!(
            !versions.ranges.contains_key(&key),
            "API key {key} listed without a telemetry receiver: {:?}",
            versions.ranges.get(&key)
        );
    }
    // Asked anyway, Kafka 4.1.1 still answers, with nothing to push (seen, not documented): a
    // client that asks only when key 71 is listed never sees this.
    let asked = get_telemetry_subscriptions(node, CLIENT_ID, Duration::from_secs(5));
    println!("GetTelemetrySubscriptions without a receiver: {asked:?}");
    if let Ok(answer) = asked {
        assert!(answer.requested_metrics.is_empty(), "{answer:?}");
    }
}
