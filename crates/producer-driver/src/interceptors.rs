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
///   record goes to the core; it may change the record (add headers, change the value). The
///   core's checks (`max.request.size`, the partition) and `buffer.memory` see the changed
///   record.
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
/// The hooks are what a tracing integration (OpenTelemetry) and a metrics plugin need:
/// `on_send` can inject the current trace context as a `traceparent` header (W3C Trace
/// Context) and start a producer span, and `on_acknowledgement` sees each outcome with
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
#[derive(Default)]
pub struct Interceptors {
    chain: Vec<Box<dyn Interceptor>>,
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

    /// Runs each interceptor's `on_send` on `record`, in order, each inside [`call_user`]. The
    /// first panic stops the chain: the record must then fail with [`OnSendPanicked::error`]
    /// (not handed to the core), and the driver emits [`OnSendPanicked::event`]. The record
    /// is left as the interceptors changed it, the panicking one included.
    pub fn on_send(&mut self, record: &mut Record) -> Result<(), OnSendPanicked> {
        for interceptor in &mut self.chain {
            call_user(Callback::Interceptor, || interceptor.on_send(record)).map_err(|e| {
                OnSendPanicked {
                    message: panicked_message(e),
                }
            })?;
        }
        Ok(())
    }

    /// Runs each interceptor's `on_acknowledgement` on `ack`, in order, each inside
    /// [`call_user`]; returns the events naming the panics, one per interceptor that panicked
    /// (empty, without allocating, when none did). Every interceptor sees the report whatever
    /// the others did; the driver then hands the report to the application.
    #[must_use = "the events name the panics: emit them"]
    pub fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) -> Vec<Event> {
        let mut panics = Vec::new();
        for interceptor in &mut self.chain {
            if let Err(e) = call_user(Callback::Interceptor, || {
                interceptor.on_acknowledgement(ack)
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
mod tests {
    use std::sync::{Arc, Mutex};

    use producer_core::Header;

    use super::*;

    /// What the interceptors of a test saw, in order.
    type Log = Arc<Mutex<Vec<String>>>;

    /// Appends its name to a header `seen` of each record, logs each call, and panics on the
    /// record or report named in `panic_on` (its value / its topic).
    struct Named {
        name: &'static str,
        log: Log,
        panic_on_send: Option<&'static str>,
        panic_on_ack: Option<&'static str>,
    }

    impl Named {
        fn new(name: &'static str, log: &Log) -> Self {
            Named {
                name,
                log: log.clone(),
                panic_on_send: None,
                panic_on_ack: None,
            }
        }
    }

    impl Interceptor for Named {
        fn on_send(&mut self, record: &mut Record) {
            let value = record.value.clone().unwrap_or_default();
            self.log.lock().unwrap().push(format!(
                "{} send {}",
                self.name,
                String::from_utf8_lossy(&value)
            ));
            record
                .headers
                .push(Header::new("seen", Some(self.name.into())));
            if self
                .panic_on_send
                .is_some_and(|v| v.as_bytes() == &value[..])
            {
                panic!("{} refuses {}", self.name, String::from_utf8_lossy(&value));
            }
        }

        fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
            let outcome = if ack.is_delivered() { "ok" } else { "failed" };
            self.log
                .lock()
                .unwrap()
                .push(format!("{} ack {} {outcome}", self.name, ack.topic()));
            if self.panic_on_ack == Some(ack.topic()) {
                panic!("{} cannot count {}", self.name, ack.topic());
            }
        }
    }

    fn seen(record: &Record) -> Vec<String> {
        record
            .headers
            .iter()
            .map(|h| String::from_utf8_lossy(h.value.as_deref().unwrap_or_default()).into_owned())
            .collect()
    }

    /// The interceptors run in the order they were added, each seeing the record as the ones
    /// before left it; an empty chain does nothing.
    #[test]
    fn the_chain_runs_in_the_order_added() {
        let mut empty = Interceptors::default();
        assert!(empty.is_empty());
        let mut record = Record::new("t", "v");
        assert_eq!(empty.on_send(&mut record), Ok(()));
        assert_eq!(
            record,
            Record::new("t", "v"),
            "an empty chain changes nothing"
        );

        let log = Log::default();
        let mut chain = Interceptors::default();
        chain.push(Named::new("a", &log));
        chain.push(Named::new("b", &log));
        chain.push_boxed(Box::new(Named::new("c", &log)));
        assert_eq!(chain.len(), 3);
        assert_eq!(chain.on_send(&mut record), Ok(()));
        assert_eq!(seen(&record), ["a", "b", "c"]);

        let metadata = RecordMetadata::new("t".into(), 0, 7, 1_000);
        let ok = Delivery::succeeded((), metadata);
        assert!(chain
            .on_acknowledgement(Acknowledgement::of(&ok))
            .is_empty());
        let failed = Delivery::failed((), ProduceError::UnknownTopic, Record::new("u", "w"));
        let ack = Acknowledgement::of(&failed);
        assert!(!ack.is_delivered());
        assert_eq!(ack.timestamp(), None);
        assert!(chain.on_acknowledgement(ack).is_empty());
        assert_eq!(
            *log.lock().unwrap(),
            [
                "a send v",
                "b send v",
                "c send v",
                "a ack t ok",
                "b ack t ok",
                "c ack t ok",
                "a ack u failed",
                "b ack u failed",
                "c ack u failed",
            ]
        );
        assert_eq!(Acknowledgement::of(&ok).timestamp(), Some(1_000));
    }

    /// A panicking `on_send` stops the chain for that record with the typed error and the
    /// event naming the interceptor; the next record goes through the whole chain again.
    #[test]
    fn a_panic_in_on_send_fails_that_record_only() {
        let log = Log::default();
        let mut chain = Interceptors::default();
        chain.push(Named::new("a", &log));
        chain.push(Named {
            panic_on_send: Some("bad"),
            ..Named::new("b", &log)
        });
        chain.push(Named::new("c", &log));

        let mut bad = Record::new("t", "bad");
        let panicked = chain.on_send(&mut bad).unwrap_err();
        assert_eq!(panicked.message, "b refuses bad");
        assert_eq!(
            panicked.error(),
            ProduceError::Interceptor {
                message: "b refuses bad".into()
            }
        );
        assert!(!panicked.error().possibly_persisted());
        assert_eq!(
            panicked.event(),
            Event::CallbackPanicked {
                callback: Callback::Interceptor,
                message: "b refuses bad".into()
            }
        );
        assert_eq!(
            seen(&bad),
            ["a", "b"],
            "left as the chain changed it; c never ran"
        );

        let mut good = Record::new("t", "good");
        assert_eq!(chain.on_send(&mut good), Ok(()));
        assert_eq!(seen(&good), ["a", "b", "c"]);
        assert_eq!(
            *log.lock().unwrap(),
            [
                "a send bad",
                "b send bad",
                "a send good",
                "b send good",
                "c send good"
            ]
        );
    }

    /// A panicking `on_acknowledgement` is named by one event per panic, and every interceptor
    /// still sees every report.
    #[test]
    fn a_panic_in_on_acknowledgement_is_named_and_the_chain_goes_on() {
        let log = Log::default();
        let mut chain = Interceptors::default();
        chain.push(Named {
            panic_on_ack: Some("x"),
            ..Named::new("a", &log)
        });
        chain.push(Named {
            panic_on_ack: Some("x"),
            ..Named::new("b", &log)
        });
        let x = Delivery::succeeded((), RecordMetadata::new("x".into(), 1, 2, 3));
        let panics = chain.on_acknowledgement(Acknowledgement::of(&x));
        assert_eq!(
            panics,
            [
                Event::CallbackPanicked {
                    callback: Callback::Interceptor,
                    message: "a cannot count x".into()
                },
                Event::CallbackPanicked {
                    callback: Callback::Interceptor,
                    message: "b cannot count x".into()
                },
            ]
        );
        let y = Delivery::succeeded((), RecordMetadata::new("y".into(), 1, 2, 3));
        assert!(chain.on_acknowledgement(Acknowledgement::of(&y)).is_empty());
        assert_eq!(
            *log.lock().unwrap(),
            ["a ack x ok", "b ack x ok", "a ack y ok", "b ack y ok"]
        );
    }

    /// Through the command layer, without a broker: `on_send` runs before the core's `send`,
    /// so the core's size check sees the record as the interceptor grew it; a panicking
    /// `on_send` fails that record only, with the typed error and an event; every report
    /// (refused, failed by the interceptor, timed out in the core) is acknowledged once before
    /// the host gets it, and the record the core held comes back with the stamped header.
    #[test]
    fn the_command_layer_runs_the_chain_around_the_core() {
        use std::sync::mpsc::SyncSender;
        use std::time::{Duration, Instant};

        use producer_core::{Config, Producer, SendErrorReason};

        use crate::panic::InjectedPanics;
        use crate::{Answered, Channel, Command, CommandQueue, DriverLoop, Host, Intake};

        struct Blocking;
        impl Channel for Blocking {
            type Sender<V> = SyncSender<V>;
            fn send<V>(sender: SyncSender<V>, value: V) {
                let _ = sender.try_send(value);
            }
        }

        /// Keeps every report, the acknowledgements seen before it, and every event.
        struct Recorder {
            acked: Arc<Mutex<Vec<String>>>,
            reports: Vec<(Delivery<u32>, usize)>,
            events: Vec<Event>,
        }
        impl Host for Recorder {
            type Replies = Answered<u32, Blocking>;
            fn deliver(&mut self, delivery: Delivery<u32>) {
                let seen = self.acked.lock().unwrap().len();
                self.reports.push((delivery, seen));
            }
            fn show(&mut self, event: &Event) {
                self.events.push(event.clone());
            }
        }

        /// Stamps a header, grows "big" past `max.request.size`, panics on "boom".
        struct Stamper(Log);
        impl Interceptor for Stamper {
            fn on_send(&mut self, record: &mut Record) {
                record
                    .headers
                    .push(Header::new("stamp", Some("yes".into())));
                match record.value.as_deref() {
                    Some(b"big") => record.value = Some(vec![0u8; 4096].into()),
                    Some(b"boom") => panic!("stamper bug"),
                    _ => {}
                }
            }
            fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
                let value = match ack {
                    Acknowledgement::Failed { record, .. } => record.value.clone(),
                    Acknowledgement::Delivered(_) => None,
                };
                let value = value.unwrap_or_default();
                self.0
                    .lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&value[..value.len().min(8)]).into_owned());
            }
        }

        let config = Config::builder([("127.0.0.1", 9)])
            .max_request_size(1024)
            .build()
            .unwrap();
        let t0 = Instant::now();
        let mut core = Producer::new(config, t0);
        let queue = CommandQueue::new(64, 1 << 20);
        let acked = Log::default();
        let mut chain = Interceptors::default();
        chain.push(Stamper(acked.clone()));
        let host = Recorder {
            acked: acked.clone(),
            reports: Vec::new(),
            events: Vec::new(),
        };
        let mut layer = DriverLoop::new(host, InjectedPanics::default()).with_interceptors(chain);
        for (value, opaque) in [("small", 1), ("big", 2), ("boom", 3)] {
            let record = Record::new("t", value);
            let bytes = DriverLoop::<Recorder>::charge(&record);
            let command = Command::Send {
                record,
                opaque,
                bytes,
            };
            queue.push(command, bytes, false, |c| c).ok().unwrap();
        }
        let intake = Intake {
            per_call: 16,
            release_every: 4,
        };
        assert!(!layer.take_commands(&mut core, &queue, intake, || t0));
        assert_eq!(core.buffered_records(), 1, "the core took the small record");
        {
            let host = layer.host();
            assert_eq!(host.reports.len(), 2, "big refused, boom failed");
            let (big, seen) = &host.reports[0];
            assert_eq!((big.opaque, *seen), (2, 1), "acknowledged before the host");
            let failure = big.result.as_ref().unwrap_err();
            let ProduceError::Refused(reason) = &failure.error else {
                panic!("refused by the core, got {:?}", failure.error)
            };
            assert!(matches!(**reason, SendErrorReason::RecordTooLarge { .. }));
            assert_eq!(
                failure.record.value.as_ref().map(|v| v.len()),
                Some(4096),
                "the core checked the record as the interceptor grew it"
            );
            let (boom, seen) = &host.reports[1];
            assert_eq!((boom.opaque, *seen), (3, 2));
            let failure = boom.result.as_ref().unwrap_err();
            assert_eq!(
                failure.error,
                ProduceError::Interceptor {
                    message: "stamper bug".into()
                }
            );
            assert_eq!(failure.record.value.as_deref(), Some(&b"boom"[..]));
            assert_eq!(
                host.events,
                [Event::CallbackPanicked {
                    callback: Callback::Interceptor,
                    message: "stamper bug".into()
                }]
            );
        }

        // No broker: the core fails the small record at its delivery timeout.
        let mut t = t0;
        core.close(t0);
        while !core.is_closed() {
            t += Duration::from_secs(1);
            assert!(t < t0 + Duration::from_secs(600), "the core never closed");
            if core.poll_timeout().is_some_and(|d| d <= t) {
                core.handle_timeout(t);
            }
            layer.drain(&mut core, |_, _| {});
            let _ = layer.settle(&core, &queue);
        }
        let host = layer.host();
        assert_eq!(host.reports.len(), 3);
        let (small, seen) = &host.reports[2];
        assert_eq!((small.opaque, *seen), (1, 3));
        let record = &small.result.as_ref().unwrap_err().record;
        assert_eq!(seen_headers(record), ["stamp"], "the core sent it stamped");
        assert_eq!(
            *acked.lock().unwrap(),
            ["\0\0\0\0\0\0\0\0", "boom", "small"]
        );
    }

    fn seen_headers(record: &Record) -> Vec<&str> {
        record.headers.iter().map(|h| h.key.as_str()).collect()
    }
}
