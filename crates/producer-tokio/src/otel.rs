//! OpenTelemetry for the tokio producer (feature `opentelemetry`; see [`producer_driver::otel`]
//! for the spans, the headers and the metric names): trace with
//! [`crate::ProducerBuilder::opentelemetry`], export the metrics with [`register_metrics`].

use std::sync::mpsc;
use std::time::Duration;

use opentelemetry::metrics::Meter;

use crate::ProducerHandle;

pub use producer_driver::otel::*;

/// How long a collection waits for the producer task's snapshot before observing nothing.
pub const METRICS_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Registers the producer's metrics on `meter` ([`ProducerMetrics`]): each collection asks the
/// producer task for a snapshot ([`ProducerHandle::metrics`]) on the runtime current when this
/// is called, and waits for it at most [`METRICS_FETCH_TIMEOUT`] on the collecting thread (the
/// SDK's periodic reader has its own; a collection from a thread of a current-thread runtime
/// that also runs the producer would otherwise wait forever: it observes nothing instead).
/// Call it from within the runtime the producer runs on (it panics outside one, as
/// `tokio::spawn` does).
#[must_use = "the instruments export only while the registration is kept"]
pub fn register_metrics(meter: Meter, handle: &ProducerHandle) -> ProducerMetrics {
    let runtime = tokio::runtime::Handle::current();
    let handle = handle.clone();
    ProducerMetrics::register(meter, move || {
        let (tx, rx) = mpsc::sync_channel(1);
        let handle = handle.clone();
        runtime.spawn(async move {
            let _ = tx.send(handle.metrics().await);
        });
        rx.recv_timeout(METRICS_FETCH_TIMEOUT).ok()
    })
}
