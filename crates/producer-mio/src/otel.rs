//! OpenTelemetry for the mio producers (feature `opentelemetry`; see [`producer_driver::otel`]
//! for the spans, the headers and the metric names): trace a [`crate::ThreadedProducer`] with
//! [`crate::ThreadedBuilder::opentelemetry`] and export its metrics with [`register_metrics`].
//!
//! The embeddable [`crate::MioDriver`] runs its interceptors in its own `send`, on the
//! caller's thread: a [`TracingInterceptor`] added with [`crate::MioDriver::add_interceptor`]
//! takes the caller's current context there. Its core carries the caller's own value, so its
//! success reports come without a [`producer_driver::RecordId`] and end no span: the spans of
//! its delivered records end through the interceptor's cap on open spans, or when it is
//! dropped. Trace with a `ThreadedProducer` (or the tokio driver) to get spans that end with
//! their reports.

use opentelemetry::metrics::Meter;

use crate::ThreadedProducer;

pub use producer_driver::otel::*;

/// Registers the producer's metrics on `meter` ([`ProducerMetrics`]): each collection takes a
/// snapshot with [`ThreadedProducer::metrics`] on the collecting thread (it waits while the
/// producer thread takes it between two runs of commands; none, so nothing observed, when the
/// collection runs inside the delivery callback).
#[must_use = "the instruments export only while the registration is kept"]
pub fn register_metrics<T: Send + 'static>(
    meter: Meter,
    producer: &ThreadedProducer<T>,
) -> ProducerMetrics {
    let producer = producer.clone();
    ProducerMetrics::register(meter, move || producer.metrics())
}
