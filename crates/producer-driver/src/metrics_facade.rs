//! Publishing [`MetricsSnapshot`]s through the [`metrics`] facade (feature `metrics`), so any
//! recorder the application installed (a Prometheus exporter, StatsD, ...) gets them.
//!
//! Call [`publish`] whenever the recorder should be brought up to date (on a timer, or before
//! each scrape): it sets every counter to the snapshot's total (`Counter::absolute`) and every
//! gauge to its value, under the names of [`producer_core::metrics`]. The core keeps its
//! histograms bucketed (it never sees single samples after the fact), so each histogram is
//! published in Prometheus' own shape: a counter `<name>_bucket` per bucket with its `le` label
//! (cumulative), a counter `<name>_count` and a gauge `<name>_sum` (seconds or bytes).
//! `kafka_producer_connection_state` has one gauge per broker and state, 1 for the current
//! state and 0 for the others, so a state left is reset. The series under Java's names
//! ([`MetricsSnapshot::java_named`], `docs/metrics.md`) follow, with the per-broker latency
//! histograms (`kafka_producer_node_request_latency_seconds`, labels `broker` and `node_id`).

use metrics::{counter, gauge};
use producer_core::metrics::{ConnectionState, Histogram, SeriesKind, SeriesValue, PREFIX};
use producer_core::MetricsSnapshot;

/// Brings the installed `metrics` recorder up to date with `snapshot`.
pub fn publish(snapshot: &MetricsSnapshot) {
    let c = &snapshot.counters;
    for (name, v) in [
        ("records_sent_total", c.records_sent),
        ("bytes_sent_total", c.bytes_sent),
        ("records_delivered_total", c.records_delivered),
        ("records_failed_total", c.records_failed),
        ("invalid_records_total", c.records_invalid),
        ("produce_requests_total", c.produce_requests),
        ("batches_sent_total", c.batches_sent),
        ("retries_total", c.retries),
        ("disconnects_total", c.disconnects),
        ("metadata_refreshes_total", c.metadata_refreshes),
        ("topics_recreated_total", c.topics_recreated),
        ("rebootstraps_total", c.rebootstraps),
        ("transactions_committed_total", c.transactions_committed),
        ("transactions_aborted_total", c.transactions_aborted),
        ("malformed_responses_total", c.malformed_responses),
        ("ignored_responses_total", c.ignored_responses),
    ] {
        counter!(format!("{PREFIX}{name}")).absolute(v);
    }
    for &(code, n) in &snapshot.errors {
        let labels = [
            ("code", code.0.to_string()),
            ("name", code.name().unwrap_or("UNKNOWN").to_string()),
        ];
        counter!(format!("{PREFIX}errors_total"), &labels).absolute(n);
    }
    gauge!(format!("{PREFIX}buffered_records")).set(snapshot.buffered_records as f64);
    gauge!(format!("{PREFIX}buffered_bytes")).set(snapshot.buffered_bytes as f64);
    for b in &snapshot.brokers {
        let broker = format!("{}:{}", b.host, b.port);
        let node_id = b.node_id.to_string();
        let labels = [("broker", broker.clone()), ("node_id", node_id.clone())];
        gauge!(format!("{PREFIX}in_flight_requests"), &labels).set(b.in_flight_requests as f64);
        for s in ConnectionState::ALL {
            let labels = [
                ("broker", broker.clone()),
                ("node_id", node_id.clone()),
                ("state", s.as_str().to_string()),
            ];
            let v = if b.state == s { 1.0 } else { 0.0 };
            gauge!(format!("{PREFIX}connection_state"), &labels).set(v);
        }
    }
    if let Some((id, epoch)) = snapshot.producer_id {
        gauge!(format!("{PREFIX}producer_id")).set(id as f64);
        gauge!(format!("{PREFIX}producer_epoch")).set(f64::from(epoch));
    }
    histogram("request_latency_seconds", &snapshot.request_latency, 1e6);
    histogram("delivery_latency_seconds", &snapshot.delivery_latency, 1e6);
    histogram("batch_size_bytes", &snapshot.batch_size, 1.0);
    for s in snapshot.java_named() {
        let name = format!("{PREFIX}{}", s.name);
        match (s.kind, s.value) {
            (SeriesKind::Counter, SeriesValue::Count(n)) => counter!(name, &s.labels).absolute(n),
            (_, v) => gauge!(name, &s.labels).set(v.as_f64()),
        }
    }
    for b in &snapshot.brokers {
        let labels = [
            ("broker", format!("{}:{}", b.host, b.port)),
            ("node_id", b.node_id.to_string()),
        ];
        labelled_histogram(
            "node_request_latency_seconds",
            &b.request_latency,
            1e6,
            &labels,
        );
    }
}

fn histogram(name: &str, h: &Histogram, per_unit: f64) {
    labelled_histogram(name, h, per_unit, &[]);
}

fn labelled_histogram(name: &str, h: &Histogram, per_unit: f64, labels: &[(&'static str, String)]) {
    for (bound, n) in h.buckets() {
        let le = match bound {
            Some(b) => (b as f64 / per_unit).to_string(),
            None => "+Inf".to_string(),
        };
        let mut l = labels.to_vec();
        l.push(("le", le));
        counter!(format!("{PREFIX}{name}_bucket"), &l).absolute(n);
    }
    counter!(format!("{PREFIX}{name}_count"), labels).absolute(h.count());
    gauge!(format!("{PREFIX}{name}_sum"), labels).set(h.sum() as f64 / per_unit);
}
