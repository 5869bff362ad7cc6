//! OpenTelemetry (feature `opentelemetry`): the W3C trace context in each record's headers, a
//! producer span per record, and the producer's metrics as observable instruments. The core
//! stays I/O-free and knows nothing of it: it only carries the headers.
//!
//! # Traces
//! [`TracingInterceptor`] is an [`crate::Interceptor`]. For each record it starts a span of
//! kind `Producer` named and attributed after OpenTelemetry's messaging semantic conventions
//! for Kafka, semconv **1.42.0** (`opentelemetry-semantic-conventions` 0.33, whose attribute
//! names it uses):
//!
//! - name `send {topic}` (`{messaging.operation.name} {messaging.destination.name}`);
//! - at the start: `messaging.system = "kafka"`, `messaging.destination.name` (the topic),
//!   `messaging.operation.type = "send"`, `messaging.operation.name = "send"`,
//!   `messaging.kafka.message.key` when the key is UTF-8, `messaging.kafka.message.tombstone =
//!   true` for a null value, `messaging.message.body.size` (the value's bytes), and
//!   `messaging.destination.partition.id` when the record names its partition;
//! - on success: `messaging.destination.partition.id` and `messaging.kafka.offset` (when the
//!   broker gave one: not with `acks=0`); the status stays unset, as the conventions ask;
//! - on failure: `error.type` ([`error_type`]: the Kafka error's name for a broker error,
//!   else the kind of failure) and status `Error` with the error's message.
//!
//! It then replaces the record's `traceparent` and `tracestate` headers with **the span's own
//! context** (through the SDK's [`TraceContextPropagator`], never by hand; it writes
//! `tracestate` even when empty), so a consumer that
//! extracts them makes its span a child of the produce span. The span ends when the record's
//! report arrives (`on_acknowledgement`): the chain numbers each record ([`crate::RecordId`])
//! and the drivers' loop hands the number back with the report.
//!
//! ## The parent: the sender's context, carried in the record's headers
//! The span's parent is the context current where the application called `send`. Interceptors
//! run on the producer's task (tokio) or thread (`ThreadedProducer`), where the caller's
//! context is not current, so the context has to travel with the record. It travels in the
//! record's own headers: the drivers' send calls (`ProducerHandle::send*`,
//! `ThreadedProducer::send*`), when the producer was built with its `opentelemetry` builder
//! method, stamp the caller's [`Context::current`] as a `traceparent` header
//! ([`inject_current_context`]) before queueing the record; [`TracingInterceptor`] takes its
//! parent from that header and overwrites it with its span's context. Why the headers rather
//! than a context carried next to the record in the command queue: they are the carrier the
//! trace context ends in anyway, the queue and the core stay as they are (a producer without
//! the feature, or without tracing, pays nothing; with it, a flag test and one header per
//! record), and a record that already carries a trace context (one forwarded from a consumer,
//! stamped by the application) keeps it as its parent when no span is current at `send`.
//!
//! The rule, in one place ([`TracingInterceptor`]'s `on_send`): the parent is the context in
//! the record's `traceparent`/`tracestate` headers when they hold a valid one, else the context
//! current where `on_send` runs (the caller's own with the embeddable `MioDriver`, whose `send`
//! runs the interceptors on the caller's thread), else none (a root span).
//!
//! ## Bounds
//! A span is open from `on_send` to the record's report. The interceptor keeps at most
//! [`TracingInterceptor::DEFAULT_MAX_OPEN_SPANS`] (or [`TracingInterceptor::max_open_spans`])
//! open: past that the oldest is ended at once with `error.type = "_OTHER"` and an `Error`
//! status saying its report was not seen, so a record whose report never comes (there is none:
//! every record is reported, but the table does not rely on it) cannot hold memory. A report
//! without a number (a record failed before the interceptors, or the embeddable `MioDriver`'s
//! successes, see [`crate::Interceptor`]) ends no span; with the embeddable `MioDriver` the
//! spans of delivered records end through that cap or when the interceptor is dropped.
//!
//! # Metrics
//! [`ProducerMetrics`] registers observable instruments on a [`opentelemetry::metrics::Meter`]
//! that read the producer's [`producer_core::MetricsSnapshot`] when the meter provider
//! collects: the series under Java's names ([`producer_core::MetricsSnapshot::java_named`]),
//! named as KIP-714 names them (`org.apache.kafka.producer.` and the Java name with dots:
//! `record_send_total` is `org.apache.kafka.producer.record.send.total`,
//! `topic_byte_total` is `org.apache.kafka.producer.topic.byte.total`), counters as
//! monotonic `u64` sums, the rest as `f64` gauges, labels as attributes (`topic`; `broker` and
//! `node_id`). The drivers give it their snapshot (`producer_tokio::otel::register_metrics`,
//! `producer_mio::otel::register_metrics`).

mod headers;
mod metrics;
mod tracing;

pub use headers::{
    extract_context, inject_context, inject_current_context, HeadersMut, HeadersRef,
};
pub use metrics::{instrument_name, ProducerMetrics, SNAPSHOT_MAX_AGE};
pub use tracing::{error_type, TracingInterceptor};

pub use opentelemetry::Context;
pub use opentelemetry_sdk::propagation::TraceContextPropagator;

/// The W3C header that carries the trace and span ids.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header that carries vendor trace state.
pub const TRACESTATE: &str = "tracestate";

#[cfg(test)]
mod tests;
