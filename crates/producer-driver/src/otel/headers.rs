//! A record's headers as the trace context's carrier: the propagator's [`Injector`] and
//! [`Extractor`] over them, and the calls that put a context in and take it out.

use bytes::Bytes;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use producer_core::{Header, Record};

use super::{TRACEPARENT, TRACESTATE};

/// A record's headers read by a propagator: a key is matched ignoring ASCII case (the first
/// header of that name wins), a value that is null or not UTF-8 reads as absent.
#[derive(Debug, Clone, Copy)]
pub struct HeadersRef<'a>(pub &'a [Header]);

impl Extractor for HeadersRef<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|h| h.key.eq_ignore_ascii_case(key))
            .and_then(|h| h.value.as_deref())
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|h| h.key.as_str()).collect()
    }
}

/// A record's headers written by a propagator: each field is appended as a header (call
/// [`inject_context`], which first removes the old trace headers, rather than this alone).
#[derive(Debug)]
pub struct HeadersMut<'a>(pub &'a mut Vec<Header>);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.push(Header::new(key, Some(Bytes::from(value))));
    }
}

/// The trace context `record`'s headers carry (`traceparent`, `tracestate`), as a context with
/// a remote span; a context without a span when they carry none or an invalid one.
#[must_use]
pub fn extract_context(headers: &[Header]) -> Context {
    TraceContextPropagator::new().extract(&HeadersRef(headers))
}

/// Replaces `record`'s `traceparent` and `tracestate` headers with `cx`'s span context. Does
/// nothing, and returns false, when `cx` holds no valid span context (the record keeps the
/// trace headers it had).
pub fn inject_context(record: &mut Record, cx: &Context) -> bool {
    if !cx.span().span_context().is_valid() {
        return false;
    }
    record.headers.retain(|h| {
        !h.key.eq_ignore_ascii_case(TRACEPARENT) && !h.key.eq_ignore_ascii_case(TRACESTATE)
    });
    TraceContextPropagator::new().inject_context(cx, &mut HeadersMut(&mut record.headers));
    true
}

/// Stamps `record` with the calling thread's [`Context::current`] ([`inject_context`]): what the
/// drivers' send calls do when the producer traces, so that the span the interceptor starts on
/// the producer's task is a child of the sender's. Returns whether a context was stamped (none
/// when no span is current: the record keeps its headers).
pub fn inject_current_context(record: &mut Record) -> bool {
    inject_context(record, &Context::current())
}
