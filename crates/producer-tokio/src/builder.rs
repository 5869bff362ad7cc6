//! The driver's own settings, and starting the producer task.

use std::future::Future;

use std::sync::Arc;

use producer_core::{Config, Event, OAuthToken, Partitioner};
use producer_driver::panic::InjectedPanics;
use producer_driver::{Interceptor, Interceptors};

use crate::actor::{self, Settings};
use crate::delivery::{OnDelivery, Report};
use crate::error::StartError;
use crate::handle::ProducerHandle;
use crate::shared::OnEvent;
use crate::token::TokenProvider;

/// Driver settings (queue and buffer sizes, the delivery callback) for a producer about to
/// start; [`ProducerBuilder::start`] spawns it. The protocol's settings are the [`Config`]'s.
///
/// Not `Clone`: it may own the application's [`Partitioner`] and [`Interceptor`]s, which one
/// producer owns.
#[derive(Debug)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct ProducerBuilder {
    config: Config,
    command_capacity: usize,
    event_capacity: usize,
    read_buffer: usize,
    write_backlog: Option<usize>,
    on_delivery: Option<OnDelivery>,
    on_event: Option<OnEvent>,
    token_provider: Option<TokenProvider>,
    partitioner: Option<CustomPartitioner>,
    interceptors: Interceptors,
    injected: InjectedPanics,
    #[cfg(feature = "opentelemetry")]
    stamp_trace_context: bool,
}

/// The application's partitioner, as the builder keeps it (`Debug` without the partitioner's).
struct CustomPartitioner(Box<dyn Partitioner>);

impl std::fmt::Debug for CustomPartitioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Partitioner(..)")
    }
}

impl ProducerBuilder {
    /// The default driver settings for `config` (also [`ProducerHandle::builder`]).
    pub fn new(config: Config) -> Self {
        ProducerBuilder {
            config,
            command_capacity: 1024,
            event_capacity: 64,
            read_buffer: 64 * 1024,
            write_backlog: None,
            on_delivery: None,
            on_event: None,
            token_provider: None,
            partitioner: None,
            interceptors: Interceptors::default(),
            injected: InjectedPanics::default(),
            #[cfg(feature = "opentelemetry")]
            stamp_trace_context: false,
        }
    }

    /// The callback that receives the [`Report`] of every record sent with
    /// [`ProducerHandle::send_detached`] or [`ProducerHandle::try_send_detached`] (records sent
    /// with [`ProducerHandle::send`] report through their [`crate::DeliveryFuture`] instead).
    /// Use it for high rates: a detached record costs no channel or future of its own, as with
    /// the callbacks of the Java client and librdkafka.
    ///
    /// It runs **on the producer task**, once per record, in the order the core reports them
    /// (per partition, in send order). Keep it short and non-blocking (count, or forward to a
    /// channel): the producer waits for it. Without a callback, detached reports are discarded
    /// (failures are logged at `warn`).
    pub fn on_delivery<F>(mut self, f: F) -> Self
    where
        F: Fn(Report) + Send + Sync + 'static,
    {
        self.on_delivery = Some(OnDelivery::new(f));
        self
    }

    /// The callback that receives every [`Event`] of the producer (they are logged with
    /// `tracing` either way): to watch for [`Event::AllBrokersDown`] and stop early when the
    /// cluster cannot be reached, or [`Event::Fatal`]. It runs **on the producer task**, in the
    /// order the events happen; keep it short and non-blocking (forward to a channel).
    ///
    /// A callback (this one, [`ProducerBuilder::on_delivery`], the token provider) that panics
    /// does not stop the producer: the panic is caught around that call and named by an
    /// [`Event::CallbackPanicked`], which this callback receives too (if it panics on that
    /// one, the panic is only logged). A report whose callback panicked is not handed over
    /// again.
    pub fn on_event<F>(mut self, f: F) -> Self
    where
        F: Fn(&Event) + Send + Sync + 'static,
    {
        self.on_event = Some(OnEvent(Arc::new(f)));
        self
    }

    /// The OAUTHBEARER token provider (for `sasl.mechanism=OAUTHBEARER`): whenever the core
    /// needs a token (a connection authenticating without a valid one), `provider()` is called
    /// and its future run in a task of its own, so it may take its time (an HTTP call to the
    /// identity provider); connections wait for its answer, the rest of the producer does not.
    /// An `Err` (or a provider that panics) fails the connections waiting for it, and their
    /// records, with [`producer_core::AuthError::TokenUnavailable`]. Without a provider every
    /// token request is answered with that error.
    pub fn oauth_token_provider<F, Fut>(mut self, provider: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<OAuthToken, String>> + Send + 'static,
    {
        self.token_provider = Some(TokenProvider::new(provider));
        self
    }

    /// The partitioner of records sent without an explicit partition, instead of the
    /// built-in rule (murmur2 of the key, the adaptive sticky partition for null keys). It
    /// runs **on the producer task**, once per such record, when the record's topic's
    /// partitions are known; see [`Partitioner`] for its errors and panics (they fail that
    /// record alone, whose [`crate::DeliveryError`] carries
    /// [`producer_core::ProduceError::Partitioner`]).
    pub fn partitioner(mut self, partitioner: Box<dyn Partitioner>) -> Self {
        self.partitioner = Some(CustomPartitioner(partitioner));
        self
    }

    /// Adds an [`Interceptor`]: its [`Interceptor::on_send`] sees (and may change) every record
    /// before the core takes it, and its [`Interceptor::on_acknowledgement`] every report
    /// before the record's [`crate::DeliveryFuture`] resolves or the
    /// [`ProducerBuilder::on_delivery`] callback gets it. Call it once per interceptor; they
    /// run in the order added. For header stamping, auditing, metrics and tracing (inject a
    /// `traceparent` header in `on_send`).
    ///
    /// Both run **on the producer task**, one record at a time: they must not block (the
    /// producer waits for them). `on_send` runs when the task takes the record from the
    /// command queue, after the driver gave it a timestamp and right before the core's checks,
    /// so `max.request.size` and `buffer.memory` see the changed record. A panicking `on_send`
    /// fails that record with [`crate::ProduceError::Interceptor`] (not sent; the record comes
    /// back in its report); a panicking `on_acknowledgement` does not stop the report. Either
    /// panic is named by an [`Event::CallbackPanicked`] with
    /// [`producer_core::Callback::Interceptor`], and the producer goes on.
    pub fn interceptor(mut self, interceptor: impl Interceptor) -> Self {
        self.interceptors.push(interceptor);
        self
    }

    /// Traces every record with OpenTelemetry (feature `opentelemetry`): adds `tracing` as an
    /// interceptor (after those added before), and makes every send call of the handles stamp
    /// the caller's current context ([`opentelemetry::Context::current`], when a span is
    /// current) on the record as its `traceparent`/`tracestate` headers, so that the record's
    /// `send {topic}` span is a child of the sender's span and its own context replaces those
    /// headers (see [`producer_driver::otel`]). A record refused by a send call comes back with
    /// the stamped headers.
    #[cfg(feature = "opentelemetry")]
    pub fn opentelemetry<T>(mut self, tracing: crate::otel::TracingInterceptor<T>) -> Self
    where
        T: opentelemetry::trace::Tracer + Send + 'static,
        T::Span: Send + 'static,
    {
        self.interceptors.push(tracing);
        self.stamp_trace_context = true;
        self
    }

    /// Capacity of the command queue between handles and the producer task (default 1024):
    /// records queued plus those the task took and has not handed to the core yet. When the
    /// producer's buffer is full, at most this many sends queue before
    /// [`ProducerHandle::send`] waits and [`ProducerHandle::try_send`] answers `Full`.
    pub fn command_capacity(mut self, n: usize) -> Self {
        self.command_capacity = n;
        self
    }

    /// Capacity of the channel carrying network events to the producer task (default 64).
    pub fn event_capacity(mut self, n: usize) -> Self {
        self.event_capacity = n;
        self
    }

    /// The most bytes read from a socket at a time (default 64 KiB). A connection's read
    /// buffer starts at 4 KiB and grows with its traffic up to this; it goes back to 4 KiB
    /// when the traffic slows down, and when the connection has read nothing for a second (see
    /// [`producer_driver::ReadSizing`]), so an idle connection holds a small buffer.
    pub fn read_buffer(mut self, n: usize) -> Self {
        self.read_buffer = n;
        self
    }

    /// For tests only: panics injected into the producer task's loop, to prove that the
    /// producer contains them. Not part of the supported API.
    #[doc(hidden)]
    pub fn inject_panics(mut self, injected: InjectedPanics) -> Self {
        self.injected = injected;
        self
    }

    /// Bytes handed to a connection and not yet written to its socket above which the
    /// producer stops taking new records until the socket catches up (default:
    /// `max_request_size * max_in_flight`). With `acks` other than none the core already bounds
    /// this by `max_in_flight` requests; with `acks=none` a batch counts as done once handed over,
    /// so only this limit keeps a slow socket from queueing without bound.
    pub fn write_backlog(mut self, bytes: usize) -> Self {
        self.write_backlog = Some(bytes);
        self
    }

    /// Spawns the producer task on the current tokio runtime and returns a handle to it. Fails
    /// outside a runtime, when a capacity or buffer size is 0, or (for `SSL` and `SASL_SSL`)
    /// when the TLS files cannot be used ([`StartError::Tls`]: they are read here, once).
    pub fn start(self) -> Result<ProducerHandle, StartError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        for (name, v) in [
            ("command_capacity", self.command_capacity),
            ("event_capacity", self.event_capacity),
            ("read_buffer", self.read_buffer),
        ] {
            if v == 0 {
                return Err(StartError::Zero(name));
            }
        }
        let tls = producer_driver::tls::TlsSetup::from_config(&self.config)?;
        let mut config = self.config;
        // Every DeliveryFuture must resolve, successes included.
        config.report_successes = true;
        let write_backlog = self
            .write_backlog
            .unwrap_or(config.max_request_size.saturating_mul(config.max_in_flight))
            .max(1);
        let settings = Settings {
            command_capacity: self.command_capacity,
            event_capacity: self.event_capacity,
            read_buffer: self.read_buffer,
            write_backlog,
            on_delivery: self.on_delivery,
            on_event: self.on_event,
            tls,
            token_provider: self.token_provider,
            partitioner: self.partitioner.map(|p| p.0),
            interceptors: self.interceptors,
            injected: self.injected,
            #[cfg(feature = "opentelemetry")]
            stamp_trace_context: self.stamp_trace_context,
        };
        Ok(actor::spawn(&runtime, config, settings))
    }
}

impl ProducerHandle {
    /// Spawns the producer task on the current tokio runtime with the default driver settings
    /// and returns a handle to it. Call it from within a runtime.
    pub fn start(config: Config) -> Result<ProducerHandle, StartError> {
        ProducerBuilder::new(config).start()
    }

    /// A builder for the driver's own settings (queue and buffer sizes, the delivery
    /// callback); its [`ProducerBuilder::start`] spawns the task.
    pub fn builder(config: Config) -> ProducerBuilder {
        ProducerBuilder::new(config)
    }
}
