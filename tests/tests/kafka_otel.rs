//! OpenTelemetry on Apache Kafka itself (a single KRaft node), through both threaded drivers
//! built with `opentelemetry` (`producer_driver::otel::TracingInterceptor`): records sent under
//! the application's span, and records sent with none. Kafka's Java consumer (an independent
//! client) reads every record back; its `traceparent`/`tracestate` headers, parsed by the SDK's
//! W3C propagator, are exactly the context of the span the in-memory exporter holds for that
//! record, a child of the sender's span (or a root), ended with the partition and offset where
//! the report and the log say the record is.

use std::collections::{BTreeSet, HashMap};

use opentelemetry::trace::{SpanId, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use producer_core::Record;
use producer_driver::otel::TracingInterceptor;
use producer_tests::driver_suite::otel::{context_of, spans_by_record};
use producer_tests::driver_suite::reports_of;
use producer_tests::kafka::suite::producer_config;
use producer_tests::kafka::{shared_cluster, ClusterSpec};
use producer_tests::running::{Options, Running};
use producer_tests::Driver;

const RECORDS: u64 = 1_000;
const PARTITIONS: i32 = 3;

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn trace_context_read_back(driver: Driver) {
    let Some(mut kafka) = shared_cluster(ClusterSpec::single) else {
        return;
    };
    let topic = kafka.topic("otel", PARTITIONS, 1, &[]);
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let mut options = Options::new(producer_config(&kafka).build().unwrap());
    options.tracing = Some(TracingInterceptor::new(provider.tracer("producer")));
    let p = Running::start(driver, options);

    // The first half under the application's span, the second with none current.
    let caller = provider.tracer("application").start("import batch");
    let caller_cx = Context::current_with_span(caller);
    let caller_span = caller_cx.span().span_context().clone();
    let record =
        |id: u64| Record::new(topic.as_str(), format!("record-{id}")).with_key(format!("key-{id}"));
    {
        let _current = caller_cx.clone().attach();
        for id in 0..RECORDS / 2 {
            p.send(record(id), id).expect("open");
        }
    }
    for id in RECORDS / 2..RECORDS {
        p.send(record(id), id).expect("open");
    }
    p.flush();
    let reports = reports_of(&p, 0..RECORDS);
    p.close();

    let spans = spans_by_record(exporter.get_finished_spans().unwrap());
    assert_eq!(spans.len(), RECORDS as usize, "one span per record");
    let read = kafka
        .ctl()
        .java_read_back(&topic, PARTITIONS)
        .expect("the Java consumer reads the topic");
    assert_eq!(read.len(), RECORDS as usize, "every record in the log once");
    let at: HashMap<(i32, i64), u64> = reports
        .iter()
        .map(|(id, r)| {
            let m = r
                .result
                .as_ref()
                .unwrap_or_else(|e| panic!("record {id}: {e:?}"));
            ((m.partition, m.offset), *id)
        })
        .collect();
    let mut ids = BTreeSet::new();
    for c in &read {
        let value = String::from_utf8(c.value.clone().expect("a value")).unwrap();
        let id: u64 = value.strip_prefix("record-").unwrap().parse().unwrap();
        assert!(ids.insert(id), "record {id} read twice");
        assert_eq!(at.get(&(c.partition, c.offset)), Some(&id), "record {id}");
        let span = &spans[&id];
        let carried = context_of(&c.headers);
        let carried = carried.span().span_context().clone();
        let own = &span.span_context;
        assert!(
            carried.is_valid(),
            "record {id}: a traceparent Java read back"
        );
        assert_eq!(
            (carried.trace_id(), carried.span_id(), carried.trace_flags()),
            (own.trace_id(), own.span_id(), own.trace_flags()),
            "record {id}: Java reads back its span's own context"
        );
        assert_eq!(carried.trace_state(), own.trace_state());
        if id < RECORDS / 2 {
            assert_eq!(span.parent_span_id, caller_span.span_id(), "record {id}");
            assert_eq!(own.trace_id(), caller_span.trace_id(), "record {id}");
        } else {
            assert_eq!(span.parent_span_id, SpanId::INVALID, "record {id}: a root");
        }
        assert_eq!(
            attribute(span, "messaging.destination.partition.id"),
            Some(&Value::from(c.partition.to_string())),
            "record {id}: the partition it is in"
        );
        assert_eq!(
            attribute(span, "messaging.kafka.offset"),
            Some(&Value::I64(c.offset)),
            "record {id}: the offset it is at"
        );
        // The sender's stamp was replaced by the span's context, not appended to.
        let names: Vec<&str> = c.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            ["traceparent", "tracestate"],
            "record {id}: one of each"
        );
    }
    assert_eq!(ids.len(), RECORDS as usize);
    println!(
        "{driver:?}: {RECORDS} records traced; Kafka's Java consumer read back each one's \
         traceparent as its exported span's context ({} under the sender's span)",
        RECORDS / 2
    );
}

#[test]
fn trace_context_read_back_tokio() {
    trace_context_read_back(Driver::Tokio);
}

#[test]
fn trace_context_read_back_mio_threaded() {
    trace_context_read_back(Driver::MioThreaded);
}
