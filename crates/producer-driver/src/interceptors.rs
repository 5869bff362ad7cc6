//! Interceptors: the application's hooks on every record a driver takes and on every report
//! it gives (Java's `ProducerInterceptor`, librdkafka's interceptors, franz-go's hooks), for
//! auditing, header stamping, metrics and tracing.
//!
//! An [`Interceptor`] is added to a driver's builder (`ProducerBuilder::interceptor` of
//! producer-tokio, `ThreadedBuilder::interceptor` and `MioDriver::add_interceptor` of
//! producer-mio); the driver keeps them in one [`Interceptors`] chain and calls it:
//!
//! - [`Interceptors::on_send`] for each record the application sends, on the producer's
//!   thread or task, right before the record is handed to the core (after the driver filled in
//!   a missing timestamp): the core's size checks, its partitioner and `buffer.memory` see the
//!   record as the interceptors changed it;
//! - [`Interceptors::on_acknowledgement`] for each report, before it reaches the
//!   application's future or callback.
//!
//! Panics follow the rule for the application's code ([`crate::panic`]): each call is made
//! inside [`call_user`]. A panicking `on_send` fails that record with
//! [`ProduceError::Interceptor`] (it was not sent; the later interceptors do not see it) and
//! is named by an [`Event::CallbackPanicked`] with [`Callback::Interceptor`]; a panicking
//! `on_acknowledgement` is named by such an event, the later interceptors still see the
//! report, and the report still reaches the application. The producer goes on either way.
//!
//! An empty chain costs one branch per record and per report ([`Interceptors::is_empty`]).
//!
//! # Matching a report to its record
//! A success report names where the record landed, not the record: an interceptor that keeps
//! state per record (a span, a timer) needs to know which record a report is for. The chain
//! gives each record a [`RecordId`] as it goes through `on_send` (one counter per chain,
//! consecutive), and the loop of the ready-made producers (producer-tokio's, producer-mio's
//! `ThreadedProducer`) carries it with the record through the core and hands it back with the
//! report: [`Interceptor::on_send_with_id`] and [`Interceptor::on_acknowledgement_with_id`]
//! see it. It is `None` on the reports of records that never went through `on_send` (failed
//! before reaching the interceptors) and on the success reports of the embeddable
//! `MioDriver`, which hands the core the caller's own value and has nowhere to carry it.

use std::num::NonZeroU64;

use producer_core::{
    Callback, Delivery, DeliveryFailure, Event, ProduceError, Record, RecordMetadata,
};

use crate::call_user;

/// A hook on every record the producer takes and every report it gives: stamp headers, audit,
/// count, trace. Both methods do nothing by default; implement the ones you need.
///
/// # When and where it runs
/// - [`Interceptor::on_send`]: once per record the application sends, **on the producer's
///   thread (mio) or task (tokio)**, in the order the records were sent, right before the
///   record goes to the core; it may change the record (add headers, change the key or the
///   value). The core's checks (`max.request.size`, an explicit partition), its partitioner
///   (which runs after `on_send`: the partition of a record without an explicit one is not
///   known yet) and `buffer.memory` see the changed record.
/// - [`Interceptor::on_acknowledgement`]: once per report, on the same thread or task, before
///   the report reaches the application's future or callback: a success (where the record
///   landed) or a failure (the error, and the record as it will be handed back).
///
/// Every record that went through `on_send` is acknowledged exactly once. A record can also be
/// acknowledged without having gone through `on_send`: one that failed before reaching the
/// interceptors (the producer closed, or stopped after a panic, with the record still queued).
/// Several interceptors run in the order they were added, each seeing the record as the ones
/// before it left it.
///
/// # Rules
/// - **Never block**: the producer waits for the hook, and so does every other record. Count,
///   stamp, or hand the work to a channel.
/// - **Panics**: a panic in `on_send` fails that record with [`ProduceError::Interceptor`] (not
///   sent, never possibly persisted; the record comes back in its failure report as the
///   interceptors left it) and the later interceptors do not see it; a panic in
///   `on_acknowledgement` does not stop the report, nor the later interceptors. Each panic is
///   named by [`Event::CallbackPanicked`] with [`Callback::Interceptor`], and the producer goes
///   on.
/// - A record that the embeddable `MioDriver::send` refuses after the interceptors ran (the
///   core is full, or the record is too large) is acknowledged as failed
///   ([`ProduceError::Refused`]) and comes back to the caller as the interceptors changed it:
///   sent again, it goes through `on_send` again (stamp headers by replacing, not appending,
///   when that matters).
///
/// # Tracing and metrics
/// The hooks are what a tracing integration and a metrics plugin need (the feature
/// `opentelemetry` has one: `otel::TracingInterceptor`): `on_send_with_id` can inject a trace
/// context as a `traceparent` header (W3C Trace Context) and start a producer span kept under the
/// record's [`RecordId`], and `on_acknowledgement_with_id` ends it; a report sees each outcome with
/// [`Acknowledgement::timestamp`], the record's create time (the driver fills it in with the
/// wall clock right before `on_send` when the application gave none), from which the delivery
/// latency follows, as well as the topic, partition and offset, or the error.
///
/// # Example
/// ```
/// use producer_core::Record;
/// use producer_driver::{Acknowledgement, Interceptor};
///
/// /// Stamps every record with the service that sent it, and counts the failures.
/// struct Stamp {
///     failed: u64,
/// }
///
/// impl Interceptor for Stamp {
///     fn on_send(&mut self, record: &mut Record) {
///         record.headers.retain(|h| h.key != "origin");
///         record
///             .headers
///             .push(producer_core::Header::new("origin", Some("billing".into())));
///     }
///
///     fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
///         if !ack.is_delivered() {
///             self.failed += 1;
///         }
///     }
/// }
/// ```
pub trait Interceptor: Send + 'static {
    /// Sees (and may change) a record before the core takes it. Does nothing by default.
    fn on_send(&mut self, record: &mut Record) {
        let _ = record;
    }

    /// Sees a record's report before the application does. Does nothing by default.
    fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
        let _ = ack;
    }

    /// [`Interceptor::on_send`] with the number the chain gave the record: the same
    /// [`RecordId`] comes with its report ([`Interceptor::on_acknowledgement_with_id`]). For an
    /// interceptor that keeps state per record. Calls `on_send` by default; the drivers call
    /// this one.
    fn on_send_with_id(&mut self, id: RecordId, record: &mut Record) {
        let _ = id;
        self.on_send(record);
    }

    /// [`Interceptor::on_acknowledgement`] with the number the record got in
    /// [`Interceptor::on_send_with_id`]; `None` when the driver has none for this report (see
    /// the module's documentation). Calls `on_acknowledgement` by default; the drivers call
    /// this one.
    fn on_acknowledgement_with_id(&mut self, id: Option<RecordId>, ack: Acknowledgement<'_>) {
        let _ = id;
        self.on_acknowledgement(ack);
    }
}

/// The number an [`Interceptors`] chain gave a record as it went through `on_send`: consecutive
/// per chain from 1, handed back with the record's report. Eight bytes, and `Option<RecordId>`
/// too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordId(NonZeroU64);

impl RecordId {
    /// The first number a chain gives.
    pub const FIRST: RecordId = RecordId(NonZeroU64::MIN);

    /// The number.
    #[must_use]
    pub fn get(self) -> u64 {
        self.0.get()
    }

    /// The number after this one (wrapping past `u64::MAX` to 1, which no producer reaches).
    #[must_use]
    pub fn next(self) -> RecordId {
        RecordId(self.0.checked_add(1).unwrap_or(NonZeroU64::MIN))
    }
}

/// A boxed interceptor is one: for interceptors chosen at run time
/// (`builder.interceptor(boxed)`).
impl<I: Interceptor + ?Sized> Interceptor for Box<I> {
    fn on_send(&mut self, record: &mut Record) {
        (**self).on_send(record);
    }

    fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
        (**self).on_acknowledgement(ack);
    }

    fn on_send_with_id(&mut self, id: RecordId, record: &mut Record) {
        (**self).on_send_with_id(id, record);
    }

    fn on_acknowledgement_with_id(&mut self, id: Option<RecordId>, ack: Acknowledgement<'_>) {
        (**self).on_acknowledgement_with_id(id, ack);
    }
}

/// A report as an [`Interceptor`] sees it: borrowed from the report the application gets next.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Acknowledgement<'a> {
    /// The record was written (acknowledged as `acks` asks).
    Delivered(&'a RecordMetadata),
    /// The record failed; the report hands it back.
    Failed {
        /// Why.
        error: &'a ProduceError,
        /// The record, as the report hands it back.
        record: &'a Record,
    },
}

impl<'a> Acknowledgement<'a> {
    /// The report's outcome as an interceptor sees it.
    #[must_use]
    pub fn of<T>(delivery: &'a Delivery<T>) -> Self {
        Acknowledgement::of_result(&delivery.result)
    }

    /// A report's result as an interceptor sees it.
    #[must_use]
    pub fn of_result(result: &'a Result<RecordMetadata, Box<DeliveryFailure>>) -> Self {
        match result {
            Ok(metadata) => Acknowledgement::Delivered(metadata),
            Err(failure) => Acknowledgement::Failed {
                error: &failure.error,
                record: &failure.record,
            },
        }
    }

    /// Whether the record was written.
    #[must_use]
    pub fn is_delivered(&self) -> bool {
        matches!(self, Acknowledgement::Delivered(_))
    }

    /// Where the record landed, when it was written.
    #[must_use]
    pub fn metadata(&self) -> Option<&'a RecordMetadata> {
        match self {
            Acknowledgement::Delivered(m) => Some(m),
            Acknowledgement::Failed { .. } => None,
        }
    }

    /// Why the record failed, when it did.
    #[must_use]
    pub fn error(&self) -> Option<&'a ProduceError> {
        match self {
            Acknowledgement::Delivered(_) => None,
            Acknowledgement::Failed { error, .. } => Some(error),
        }
    }

    /// The record's topic.
    #[must_use]
    pub fn topic(&self) -> &'a str {
        match self {
            Acknowledgement::Delivered(m) => &m.topic,
            Acknowledgement::Failed { record, .. } => &record.topic,
        }
    }

    /// The record's timestamp in milliseconds since the Unix epoch: for a record written to a
    /// topic with log-append time the broker's, else the record's own (its create time, which
    /// the driver filled in with the wall clock before `on_send` when the application gave
    /// none). With create time, the wall clock now minus this is the record's delivery
    /// latency. `None` for a failed record without one.
    #[must_use]
    pub fn timestamp(&self) -> Option<i64> {
        match self {
            Acknowledgement::Delivered(m) => Some(m.timestamp),
            Acknowledgement::Failed { record, .. } => record.timestamp,
        }
    }
}

/// An interceptor's `on_send` panicked ([`Interceptors::on_send`]): the record fails with
/// [`OnSendPanicked::error`], and [`OnSendPanicked::event`] names the panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnSendPanicked {
    /// The panic's message.
    pub message: String,
    /// The number the record got: the interceptors before the one that panicked saw it, and
    /// see it again with the record's failure report.
    pub id: RecordId,
}

impl OnSendPanicked {
    /// The record's error: [`ProduceError::Interceptor`].
    #[must_use]
    pub fn error(&self) -> ProduceError {
        ProduceError::Interceptor {
            message: self.message.clone(),
        }
    }

    /// The event that names the panic: [`Event::CallbackPanicked`] with
    /// [`Callback::Interceptor`].
    #[must_use]
    pub fn event(&self) -> Event {
        Event::CallbackPanicked {
            callback: Callback::Interceptor,
            message: self.message.clone(),
        }
    }
}

/// A driver's interceptors, in the order they were added, with the rule for their panics (see
/// the module's documentation). Empty by default.
pub struct Interceptors {
    chain: Vec<Box<dyn Interceptor>>,
    /// The number the next record gets.
    next_id: RecordId,
}

impl Default for Interceptors {
    fn default() -> Self {
        Interceptors {
            chain: Vec::new(),
            next_id: RecordId::FIRST,
        }
    }
}

impl std::fmt::Debug for Interceptors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interceptors")
            .field("len", &self.chain.len())
            .finish()
    }
}

impl Interceptors {
    /// Adds `interceptor` at the end of the chain: it runs after those added before.
    pub fn push(&mut self, interceptor: impl Interceptor) {
        self.chain.push(Box::new(interceptor));
    }

    /// Adds an interceptor already boxed at the end of the chain.
    pub fn push_boxed(&mut self, interceptor: Box<dyn Interceptor>) {
        self.chain.push(interceptor);
    }

    /// Whether there are none: a driver checks this before calling the chain, so that a
    /// producer without interceptors pays one branch per record and per report.
    #[inline]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.chain.is_empty()
    }

    /// How many interceptors there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.chain.len()
    }

    /// Gives `record` the next [`RecordId`] and runs each interceptor's `on_send_with_id` on
    /// it, in order, each inside [`call_user`]; returns the id, for the driver to hand back
    /// with the record's report ([`Interceptors::on_acknowledgement_with_id`]). The first panic
    /// stops the chain: the record must then fail with [`OnSendPanicked::error`] (not handed
    /// to the core; its report carries [`OnSendPanicked::id`]), and the driver emits
    /// [`OnSendPanicked::event`]. The record is left as the interceptors changed it, the
    /// panicking one included.
    pub fn on_send(&mut self, record: &mut Record) -> Result<RecordId, OnSendPanicked> {
        let id = self.next_id;
        self.next_id = id.next();
        for interceptor in &mut self.chain {
            call_user(Callback::Interceptor, || {
                interceptor.on_send_with_id(id, record)
            })
            .map_err(|e| OnSendPanicked {
                message: panicked_message(e),
                id,
            })?;
        }
        Ok(id)
    }

    /// Runs each interceptor's `on_acknowledgement` on `ack`, in order, each inside
    /// [`call_user`]; returns the events naming the panics, one per interceptor that panicked
    /// (empty, without allocating, when none did). Every interceptor sees the report whatever
    /// the others did; the driver then hands the report to the application.
    #[must_use = "the events name the panics: emit them"]
    pub fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) -> Vec<Event> {
        self.on_acknowledgement_with_id(None, ack)
    }

    /// [`Interceptors::on_acknowledgement`] for the report of the record [`Interceptors::on_send`]
    /// numbered `id` (`None`: a record that did not go through `on_send`, or a driver that
    /// cannot tell).
    #[must_use = "the events name the panics: emit them"]
    pub fn on_acknowledgement_with_id(
        &mut self,
        id: Option<RecordId>,
        ack: Acknowledgement<'_>,
    ) -> Vec<Event> {
        let mut panics = Vec::new();
        for interceptor in &mut self.chain {
            if let Err(e) = call_user(Callback::Interceptor, || {
                interceptor.on_acknowledgement_with_id(id, ack)
            }) {
                panics.push(e);
            }
        }
        panics
    }
}

/// The message of the event [`call_user`] made of a panic.
fn panicked_message(event: Event) -> String {
    match event {
        Event::CallbackPanicked { message, .. } => message,
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests;
