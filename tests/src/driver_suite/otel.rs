//! OpenTelemetry (`producer_driver::otel`, the builders' `opentelemetry`): a `Producer` span per
//! record, named and attributed after the messaging conventions, child of the sender's span,
//! ended by the record's report (error status on a failed record), its context in the record's
//! headers as an independent consumer (librdkafka) reads them back; the metrics as observable
//! instruments whose values are a snapshot's. Against librdkafka's mock cluster, with the
//! SDK's in-memory exporters. No sleeps: every wait is for a report or a call's return.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    SpanId, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use producer_core::metrics::SeriesValue;
use producer_core::{Config, MetricsSnapshot, ProduceError, Record};
use producer_driver::otel::{error_type, instrument_name, ProducerMetrics, TracingInterceptor};

use super::reports_of;
use crate::drive::{Driver, Failure};
use crate::running::{Options, Running};
use crate::MockKafka;

const TOPIC: &str = "otel";
const PARTITIONS: i32 = 4;

fn record(id: u64) -> Record {
    Record::new(TOPIC, format!("value-{id}")).with_key(format!("key-{id}"))
}

/// An attribute's value in `span`, if it has it.
fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

/// The exported spans by the id their record's key names (`key-{id}`).
pub fn spans_by_record(spans: Vec<SpanData>) -> HashMap<u64, SpanData> {
    let mut by_id = HashMap::new();
    for span in spans {
        let Some(Value::String(key)) = attribute(&span, "messaging.kafka.message.key") else {
            panic!("span {:?} without the record's key", span.name);
        };
        let id: u64 = key.as_str().strip_prefix("key-").unwrap().parse().unwrap();
        assert!(by_id.insert(id, span).is_none(), "one span per record");
    }
    by_id
}

/// The trace context a consumed record's headers carry, extracted by the SDK's propagator.
pub fn context_of(headers: &[(String, Option<Vec<u8>>)]) -> Context {
    let carrier: HashMap<String, String> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), String::from_utf8(v.clone()?).ok()?)))
        .collect();
    TraceContextPropagator::new().extract(&carrier)
}

/// Records 0..N are sent under the caller's span, N..2N with no span current, and one too large
/// for `max.request.size` under the caller's span. One `send otel` span per record, kind
/// `Producer`, with the conventions' attributes; the first N are children of the caller's span,
/// the next N roots; the delivered ones carry the partition and offset their reports name; the
/// refused one has status `Error` and the `error.type` of its report's error. librdkafka reads
/// every record back with a `traceparent` that the propagator parses as exactly its span's
/// context.
pub fn spans_follow_the_conventions_and_reach_the_consumer(driver: Driver) {
    const N: u64 = 60;
    const TOO_LARGE: u64 = 2 * N;
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let config = Config::builder(mock.bootstrap())
        .max_request_size(64 * 1024)
        .build()
        .unwrap();
    let mut options = Options::new(config);
    options.tracing = Some(TracingInterceptor::new(provider.tracer("producer")));
    let p = Running::start(driver, options);

    let caller = provider.tracer("application").start("handle request");
    let caller_cx = Context::current_with_span(caller);
    let caller_span = caller_cx.span().span_context().clone();
    {
        let _current = caller_cx.clone().attach();
        for id in 0..N {
            p.send(record(id), id).expect("open");
        }
        let big = Record::new(TOPIC, vec![b'x'; 128 * 1024]).with_key(format!("key-{TOO_LARGE}"));
        p.send(big, TOO_LARGE).expect("open");
    }
    for id in N..2 * N {
        p.send(record(id), id).expect("open");
    }
    p.flush();
    let ids: Vec<u64> = (0..2 * N).chain([TOO_LARGE]).collect();
    let reports = reports_of(&p, ids.iter().copied());
    p.close();

    let spans = spans_by_record(exporter.get_finished_spans().unwrap());
    assert_eq!(spans.len(), ids.len(), "one span per record");
    for id in &ids {
        let span = &spans[id];
        assert_eq!(span.name, format!("send {TOPIC}"));
        assert_eq!(span.span_kind, SpanKind::Producer);
        for (key, value) in [
            ("messaging.system", "kafka"),
            ("messaging.destination.name", TOPIC),
            ("messaging.operation.type", "send"),
            ("messaging.operation.name", "send"),
        ] {
            assert_eq!(
                attribute(span, key),
                Some(&Value::from(value)),
                "record {id}: {key}"
            );
        }
        if *id < N || *id == TOO_LARGE {
            assert_eq!(span.parent_span_id, caller_span.span_id(), "record {id}");
            assert_eq!(span.span_context.trace_id(), caller_span.trace_id());
        } else {
            assert_eq!(span.parent_span_id, SpanId::INVALID, "record {id}: a root");
            assert_ne!(span.span_context.trace_id(), caller_span.trace_id());
        }
        match &reports[id].result {
            Ok(m) => {
                assert_eq!(span.status, Status::Unset, "record {id}");
                assert_eq!(
                    attribute(span, "messaging.destination.partition.id"),
                    Some(&Value::from(m.partition.to_string())),
                    "record {id}"
                );
                assert_eq!(
                    attribute(span, "messaging.kafka.offset"),
                    Some(&Value::I64(m.offset)),
                    "record {id}"
                );
            }
            Err(e) => {
                assert_eq!(*id, TOO_LARGE, "only the large record fails: {e:?}");
                assert!(
                    matches!(span.status, Status::Error { .. }),
                    "{:?}",
                    span.status
                );
                let error = match e {
                    Failure::Produce(error) => error.clone(),
                    Failure::Rejected(reason) => ProduceError::Refused(Box::new(reason.clone())),
                    other => panic!("record {id}: {other:?}"),
                };
                let expected = error_type(&error).into_owned();
                assert_eq!(attribute(span, "error.type"), Some(&Value::from(expected)));
                assert_eq!(attribute(span, "messaging.kafka.offset"), None);
            }
        }
    }
    assert!(
        reports[&TOO_LARGE].result.is_err(),
        "the large record is refused"
    );

    let read = crate::read_back_all(
        &mock.bootstrap_servers(),
        TOPIC,
        PARTITIONS,
        Duration::from_secs(60),
    );
    assert_eq!(
        read.len(),
        2 * N as usize,
        "every delivered record written once"
    );
    for c in &read {
        let value = String::from_utf8(c.value.clone().unwrap()).unwrap();
        let id: u64 = value.strip_prefix("value-").unwrap().parse().unwrap();
        let carried = context_of(&c.headers);
        let (carried, own) = (
            carried.span().span_context().clone(),
            &spans[&id].span_context,
        );
        assert!(carried.is_valid(), "record {id}: a traceparent read back");
        assert_eq!(
            (carried.trace_id(), carried.span_id(), carried.trace_flags()),
            (own.trace_id(), own.span_id(), own.trace_flags()),
            "record {id}: the consumer reads its span's own context"
        );
        assert_eq!(carried.trace_state(), own.trace_state());
    }
}

/// The observed value of each data point the exporter holds, by instrument name and sorted
/// attributes.
type Points = HashMap<(String, Vec<(String, String)>), SeriesValue>;

fn sorted(
    attributes: impl Iterator<Item = impl std::borrow::Borrow<KeyValue>>,
) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = attributes
        .map(|kv| {
            let kv = kv.borrow();
            (kv.key.to_string(), kv.value.to_string())
        })
        .collect();
    v.sort();
    v
}

fn collect(provider: &SdkMeterProvider, exporter: &InMemoryMetricExporter) -> Points {
    exporter.reset();
    provider.force_flush().expect("collect");
    let mut points = Points::new();
    let exported = exporter.get_finished_metrics().expect("exported");
    for scope in exported
        .iter()
        .flat_map(|collection| collection.scope_metrics())
    {
        for metric in scope.metrics() {
            let name = metric.name().to_string();
            match metric.data() {
                AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                    assert!(sum.is_monotonic(), "{name}: a counter");
                    for p in sum.data_points() {
                        let key = (name.clone(), sorted(p.attributes()));
                        points.insert(key, SeriesValue::Count(p.value()));
                    }
                }
                AggregatedMetrics::F64(MetricData::Gauge(gauge)) => {
                    for p in gauge.data_points() {
                        let key = (name.clone(), sorted(p.attributes()));
                        points.insert(key, SeriesValue::Float(p.value()));
                    }
                }
                _ => panic!("{name}: neither a u64 counter nor an f64 gauge"),
            }
        }
    }
    points
}

/// What `snapshot`'s series should read as: counters exactly, the rest as floats; a NaN (an
/// average of nothing) is not observed.
fn expected(snapshot: &MetricsSnapshot) -> Points {
    snapshot
        .java_named()
        .into_iter()
        .filter(|s| !s.value.as_f64().is_nan())
        .map(|s| {
            let attributes = sorted(s.labels.iter().map(|(k, v)| KeyValue::new(*k, v.clone())));
            let value = match s.value {
                SeriesValue::Count(n) if s.kind == producer_core::metrics::SeriesKind::Counter => {
                    SeriesValue::Count(n)
                }
                v => SeriesValue::Float(v.as_f64()),
            };
            ((instrument_name(s.name), attributes), value)
        })
        .collect()
}

/// After a run, a meter with the producer's instruments exports exactly the series of the
/// snapshot the collection fetched (every name, label set and value); through the driver's own
/// `register_metrics`, the counters equal a snapshot taken after the collection (the producer is
/// idle: its counters stand still).
pub fn the_metrics_are_exported_through_opentelemetry(driver: Driver) {
    const N: u64 = 200;
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let p = Running::start(
        driver,
        Options::new(Config::builder(mock.bootstrap()).build().unwrap()),
    );
    for id in 0..N {
        p.send(record(id), id).expect("open");
    }
    p.flush();
    let reports = reports_of(&p, 0..N);
    assert!(reports.values().all(|r| r.result.is_ok()));

    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let served: Arc<Mutex<Option<MetricsSnapshot>>> = Arc::default();
    let fetch = p.metrics_fetcher();
    let keep = served.clone();
    // One snapshot serves the whole collection however long it takes.
    let metrics = ProducerMetrics::register_with_max_age(
        provider.meter("exact"),
        Duration::from_secs(24 * 3600),
        move || {
            let snapshot = fetch()?;
            *keep.lock().unwrap() = Some(snapshot.clone());
            Some(snapshot)
        },
    );
    let points = collect(&provider, &exporter);
    let snapshot = served.lock().unwrap().clone().expect("a snapshot served");
    let want = expected(&snapshot);
    assert!(want
        .keys()
        .any(|(n, _)| n.starts_with("org.apache.kafka.producer.topic.")));
    assert!(want
        .keys()
        .any(|(n, _)| n.starts_with("org.apache.kafka.producer.node.")));
    let missing: Vec<_> = want.keys().filter(|k| !points.contains_key(*k)).collect();
    let extra: Vec<_> = points.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?}"
    );
    for (key, value) in &want {
        let got = points
            .get(key)
            .unwrap_or_else(|| panic!("{key:?} not exported"));
        assert_eq!(got, value, "{key:?}: exported, and in the snapshot");
    }
    let sent = &(
        instrument_name("record_send_total"),
        Vec::<(String, String)>::new(),
    );
    assert_eq!(
        points[sent],
        SeriesValue::Count(N),
        "every record sent once"
    );
    drop(metrics);
    assert_eq!(
        Arc::strong_count(&served),
        1,
        "the dropped registration let its fetch function go"
    );
    assert!(
        collect(&provider, &exporter).is_empty(),
        "a dropped registration observes nothing"
    );

    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let registered = p.register_otel_metrics(provider.meter("driver"));
    assert!(
        registered.instruments()
            >= want
                .keys()
                .map(|(n, _)| n)
                .collect::<std::collections::HashSet<_>>()
                .len()
    );
    let points = collect(&provider, &exporter);
    let after = p.metrics().expect("a snapshot");
    let mut counters = 0;
    for (key, value) in expected(&after) {
        if let SeriesValue::Count(n) = value {
            assert_eq!(points.get(&key), Some(&SeriesValue::Count(n)), "{key:?}");
            counters += 1;
        }
    }
    assert!(counters > 0);
    p.close();
}
