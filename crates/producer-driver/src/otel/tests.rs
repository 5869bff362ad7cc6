use bytes::Bytes;
use opentelemetry::trace::{SpanId, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use producer_core::{Header, ProduceError, Record, RecordMetadata};

use super::*;
use crate::{Acknowledgement, Interceptor, RecordId};

fn tracing() -> (
    SdkTracerProvider,
    InMemorySpanExporter,
    TracingInterceptor<opentelemetry_sdk::trace::SdkTracer>,
) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let interceptor = TracingInterceptor::new(provider.tracer("test"));
    (provider, exporter, interceptor)
}

fn id(n: u64) -> RecordId {
    (1..n).fold(RecordId::FIRST, |id, _| id.next())
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn trace_headers(record: &Record) -> Vec<&str> {
    record
        .headers
        .iter()
        .map(|h| h.key.as_str())
        .filter(|k| *k == TRACEPARENT || *k == TRACESTATE)
        .collect()
}

/// Past the cap the oldest open span is ended as unreported (error status, `_OTHER`); its late
/// report ends nothing; the others end with their reports.
#[test]
fn the_open_spans_are_capped_oldest_first() {
    let (_provider, exporter, tracing) = tracing();
    let mut tracing = tracing.max_open_spans(2);
    for n in 1..=3 {
        let mut record = Record::new("t", "v").with_key(format!("k{n}"));
        tracing.on_send_with_id(id(n), &mut record);
    }
    assert_eq!(tracing.open_spans(), 2);
    let spans = exporter.get_finished_spans().unwrap();
    assert_eq!(spans.len(), 1, "the oldest ended");
    assert_eq!(
        attribute(&spans[0], "messaging.kafka.message.key"),
        Some(&Value::from("k1"))
    );
    assert_eq!(
        attribute(&spans[0], "error.type"),
        Some(&Value::from("_OTHER"))
    );
    assert!(matches!(spans[0].status, Status::Error { .. }));

    let metadata = RecordMetadata::new("t".into(), 4, 17, 0);
    tracing.on_acknowledgement_with_id(Some(id(1)), Acknowledgement::Delivered(&metadata));
    assert_eq!(
        exporter.get_finished_spans().unwrap().len(),
        1,
        "a late report ends nothing"
    );
    tracing.on_acknowledgement_with_id(Some(id(3)), Acknowledgement::Delivered(&metadata));
    let failed = Record::new("t", "v");
    let error = ProduceError::DeliveryTimeout {
        possibly_persisted: false,
        last_connection_error: None,
    };
    tracing.on_acknowledgement_with_id(
        Some(id(2)),
        Acknowledgement::Failed {
            error: &error,
            record: &failed,
        },
    );
    assert_eq!(tracing.open_spans(), 0);
    let spans = exporter.get_finished_spans().unwrap();
    assert_eq!(spans.len(), 3);
    let (delivered, timed_out) = (&spans[1], &spans[2]);
    assert_eq!(
        attribute(delivered, "messaging.kafka.message.key"),
        Some(&Value::from("k3"))
    );
    assert_eq!(
        attribute(delivered, "messaging.destination.partition.id"),
        Some(&Value::from("4"))
    );
    assert_eq!(
        attribute(delivered, "messaging.kafka.offset"),
        Some(&Value::I64(17))
    );
    assert_eq!(delivered.status, Status::Unset);
    assert_eq!(
        attribute(timed_out, "error.type"),
        Some(&Value::from("delivery_timeout"))
    );
    assert_eq!(timed_out.status, Status::error(error.to_string()));
}

/// The parent is the context the record's headers carry; without one, the context current where
/// `on_send` runs. Either way the record leaves with exactly one `traceparent`, the span's own.
#[test]
fn the_parent_is_the_carried_context_else_the_current_one() {
    let (provider, exporter, mut tracing) = tracing();
    let app = provider.tracer("app");

    let sender = Context::current_with_span(app.start("sender"));
    let sender_span = sender.span().span_context().clone();
    let mut carried = Record::new("t", "v").with_key("carried");
    assert!(inject_context(&mut carried, &sender));
    let current = Context::current_with_span(app.start("current"));
    let current_span = current.span().span_context().clone();
    let mut plain = Record::new("t", "v").with_key("plain");
    {
        let _attached = current.clone().attach();
        tracing.on_send_with_id(id(1), &mut carried);
        tracing.on_send_with_id(id(2), &mut plain);
    }
    let mut root = Record::new("t", "v").with_key("root");
    tracing.on_send_with_id(id(3), &mut root);
    let metadata = RecordMetadata::new("t".into(), 0, 0, 0);
    for n in 1..=3 {
        tracing.on_acknowledgement_with_id(Some(id(n)), Acknowledgement::Delivered(&metadata));
    }
    let spans = exporter.get_finished_spans().unwrap();
    assert_eq!(spans.len(), 3);
    assert_eq!(spans[0].parent_span_id, sender_span.span_id());
    assert_eq!(spans[1].parent_span_id, current_span.span_id());
    assert_eq!(spans[2].parent_span_id, SpanId::INVALID);
    for (record, span) in [
        (&carried, &spans[0]),
        (&plain, &spans[1]),
        (&root, &spans[2]),
    ] {
        assert_eq!(trace_headers(record), [TRACEPARENT, TRACESTATE]);
        let read = extract_context(&record.headers);
        assert_eq!(
            read.span().span_context().span_id(),
            span.span_context.span_id()
        );
        assert_eq!(
            read.span().span_context().trace_id(),
            span.span_context.trace_id()
        );
    }
}

/// Without a span current, stamping leaves the record's headers as they were; with one, it
/// replaces the trace headers (whatever their case) and keeps the others.
#[test]
fn stamping_replaces_only_the_trace_headers() {
    let mut record = Record::new("t", "v");
    record
        .headers
        .push(Header::new("TraceParent", Some(Bytes::from("junk"))));
    record
        .headers
        .push(Header::new("origin", Some(Bytes::from("billing"))));
    let before = record.clone();
    assert!(!inject_current_context(&mut record));
    assert_eq!(record, before);

    let (provider, _exporter, _) = tracing();
    let cx = Context::current_with_span(provider.tracer("app").start("sender"));
    let _attached = cx.clone().attach();
    assert!(inject_current_context(&mut record));
    let keys: Vec<&str> = record.headers.iter().map(|h| h.key.as_str()).collect();
    assert_eq!(keys, ["origin", TRACEPARENT, TRACESTATE]);
    assert_eq!(
        extract_context(&record.headers)
            .span()
            .span_context()
            .span_id(),
        cx.span().span_context().span_id()
    );
}
