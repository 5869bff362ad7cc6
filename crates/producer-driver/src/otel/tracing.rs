//! [`TracingInterceptor`]: a producer span per record, its context injected into the record's
//! headers, ended by the record's report (see the module [`crate::otel`] for the conventions).

use std::borrow::Cow;
use std::collections::BTreeMap;

use opentelemetry::trace::{Span, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_semantic_conventions::attribute::{
    ERROR_TYPE, MESSAGING_DESTINATION_NAME, MESSAGING_DESTINATION_PARTITION_ID,
    MESSAGING_KAFKA_MESSAGE_KEY, MESSAGING_KAFKA_MESSAGE_TOMBSTONE, MESSAGING_KAFKA_OFFSET,
    MESSAGING_MESSAGE_BODY_SIZE, MESSAGING_OPERATION_NAME, MESSAGING_OPERATION_TYPE,
    MESSAGING_SYSTEM,
};
use producer_core::{ProduceError, Record};

use super::headers::{extract_context, inject_context};
use crate::{Acknowledgement, Interceptor, RecordId};

/// The value of `error.type` the conventions reserve for "none of the known ones".
const OTHER_ERROR: &str = "_OTHER";

/// Starts a `Producer` span per record, puts its context in the record's `traceparent` and
/// `tracestate` headers, and ends it when the record's report arrives (see [`crate::otel`] for
/// the names, attributes and the parent rule).
///
/// Add it with the drivers' `opentelemetry` builder method (producer-tokio's
/// `ProducerBuilder::opentelemetry`, producer-mio's `ThreadedBuilder::opentelemetry`), which also
/// makes the send calls carry the sender's context; added as a plain interceptor it still
/// traces, with the parent the records' own trace headers name.
///
/// ```
/// use opentelemetry::trace::TracerProvider as _;
/// use producer_driver::otel::TracingInterceptor;
///
/// let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
/// let tracing = TracingInterceptor::new(provider.tracer("billing"));
/// assert_eq!(tracing.open_spans(), 0);
/// ```
pub struct TracingInterceptor<T: Tracer> {
    tracer: T,
    /// The spans whose reports have not come yet, by the records' numbers (oldest first).
    open: BTreeMap<RecordId, T::Span>,
    /// Most spans in `open`.
    max_open: usize,
}

impl<T: Tracer> std::fmt::Debug for TracingInterceptor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracingInterceptor")
            .field("open_spans", &self.open.len())
            .field("max_open_spans", &self.max_open)
            .finish_non_exhaustive()
    }
}

impl<T> TracingInterceptor<T>
where
    T: Tracer + Send + 'static,
    T::Span: Send + 'static,
{
    /// Most spans open at once by default: a producer holds at most `buffer.max.records`
    /// (1,000,000 by default) records, but one with that many unreported records would keep
    /// that many spans; past the cap the oldest is ended as unreported.
    pub const DEFAULT_MAX_OPEN_SPANS: usize = 100_000;

    /// An interceptor starting its spans with `tracer`.
    #[must_use]
    pub fn new(tracer: T) -> Self {
        TracingInterceptor {
            tracer,
            open: BTreeMap::new(),
            max_open: Self::DEFAULT_MAX_OPEN_SPANS,
        }
    }

    /// Keeps at most `max` spans open (at least 1): past that, starting a span ends the oldest
    /// as unreported (`error.type = "_OTHER"`, status `Error`).
    #[must_use]
    pub fn max_open_spans(mut self, max: usize) -> Self {
        self.max_open = max.max(1);
        self
    }

    /// How many spans wait for their records' reports.
    #[must_use]
    pub fn open_spans(&self) -> usize {
        self.open.len()
    }

    /// Starts the span of `record`: the attributes known before it is sent, the parent the rule
    /// of [`crate::otel`] names.
    fn start(&self, record: &Record) -> T::Span {
        let carried = extract_context(&record.headers);
        let parent = if carried.span().span_context().is_valid() {
            carried
        } else {
            Context::current()
        };
        let mut attributes = Vec::with_capacity(8);
        attributes.push(KeyValue::new(MESSAGING_SYSTEM, "kafka"));
        attributes.push(KeyValue::new(
            MESSAGING_DESTINATION_NAME,
            record.topic.to_string(),
        ));
        attributes.push(KeyValue::new(MESSAGING_OPERATION_TYPE, "send"));
        attributes.push(KeyValue::new(MESSAGING_OPERATION_NAME, "send"));
        if let Some(key) = record
            .key
            .as_deref()
            .and_then(|k| std::str::from_utf8(k).ok())
        {
            attributes.push(KeyValue::new(MESSAGING_KAFKA_MESSAGE_KEY, key.to_string()));
        }
        match &record.value {
            None => attributes.push(KeyValue::new(MESSAGING_KAFKA_MESSAGE_TOMBSTONE, true)),
            Some(v) => attributes.push(KeyValue::new(
                MESSAGING_MESSAGE_BODY_SIZE,
                i64::try_from(v.len()).unwrap_or(i64::MAX),
            )),
        }
        if let Some(p) = record.partition {
            attributes.push(KeyValue::new(
                MESSAGING_DESTINATION_PARTITION_ID,
                p.to_string(),
            ));
        }
        let builder = self
            .tracer
            .span_builder(format!("send {}", record.topic))
            .with_kind(SpanKind::Producer)
            .with_attributes(attributes);
        self.tracer.build_with_context(builder, &parent)
    }

    /// Makes room for one more open span: ends the oldest ones as unreported.
    fn make_room(&mut self) {
        while self.open.len() >= self.max_open {
            let Some((_, mut oldest)) = self.open.pop_first() else {
                return;
            };
            oldest.set_attribute(KeyValue::new(ERROR_TYPE, OTHER_ERROR));
            oldest.set_status(Status::error(
                "the record's report was not seen: more spans open than the interceptor keeps",
            ));
            oldest.end();
        }
    }
}

impl<T> Interceptor for TracingInterceptor<T>
where
    T: Tracer + Send + 'static,
    T::Span: Send + 'static,
{
    /// Without a number the span could not be ended by the report: the drivers call
    /// [`Interceptor::on_send_with_id`]. A record that comes here is left as it is.
    fn on_send(&mut self, record: &mut Record) {
        let _ = record;
    }

    fn on_send_with_id(&mut self, id: RecordId, record: &mut Record) {
        let span = self.start(record);
        let own = Context::new().with_remote_span_context(span.span_context().clone());
        inject_context(record, &own);
        self.make_room();
        if let Some(mut stale) = self.open.insert(id, span) {
            // A chain numbers its records once each: not reached.
            stale.end();
        }
    }

    fn on_acknowledgement_with_id(&mut self, id: Option<RecordId>, ack: Acknowledgement<'_>) {
        let Some(mut span) = id.and_then(|id| self.open.remove(&id)) else {
            return;
        };
        match ack {
            Acknowledgement::Delivered(m) => {
                span.set_attribute(KeyValue::new(
                    MESSAGING_DESTINATION_PARTITION_ID,
                    m.partition.to_string(),
                ));
                if m.offset >= 0 {
                    span.set_attribute(KeyValue::new(MESSAGING_KAFKA_OFFSET, m.offset));
                }
            }
            Acknowledgement::Failed { error, .. } => {
                span.set_attribute(KeyValue::new(ERROR_TYPE, error_type(error)));
                span.set_status(Status::error(error.to_string()));
            }
        }
        span.end();
    }
}

/// The `error.type` of a failed record: the Kafka error's name for a broker error (its number
/// when unknown), else the kind of failure in snake case (`delivery_timeout`, `closed`,
/// `refused`, ...), `_OTHER` for a kind this version does not know. Few values, as the
/// conventions ask.
#[must_use]
pub fn error_type(error: &ProduceError) -> Cow<'static, str> {
    let kind = match error {
        ProduceError::Broker { code, .. } => {
            return match code.name() {
                Some(name) => Cow::Borrowed(name),
                None => Cow::Owned(code.0.to_string()),
            }
        }
        ProduceError::InvalidRecord { .. } => "invalid_record",
        ProduceError::BatchRejected { .. } => "batch_rejected",
        ProduceError::DeliveryTimeout { .. } => "delivery_timeout",
        ProduceError::UnknownTopic => "unknown_topic",
        ProduceError::UnknownPartition { .. } => "unknown_partition",
        ProduceError::Refused(_) => "refused",
        ProduceError::Authentication { .. } => "authentication",
        ProduceError::Closed => "closed",
        ProduceError::TransactionAborted => "transaction_aborted",
        ProduceError::TransactionInDoubt => "transaction_in_doubt",
        ProduceError::Compression(_) => "compression",
        ProduceError::BatchDecode(_) => "batch_decode",
        ProduceError::Partitioner(_) => "partitioner",
        ProduceError::Interceptor { .. } => "interceptor",
        ProduceError::Panicked { .. } => "panicked",
        _ => OTHER_ERROR,
    };
    Cow::Borrowed(kind)
}
