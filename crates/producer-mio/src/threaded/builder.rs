//! [`ThreadedBuilder`]: the settings of a [`ThreadedProducer`] about to start, and `spawn`,
//! which starts its thread.

use super::*;

/// The capacity of a [`ThreadedBuilder`]'s command queue unless set.
const DEFAULT_QUEUE_CAPACITY: usize = 1024;

/// The event callback of a [`ThreadedBuilder`].
pub(super) type OnEvent = Box<dyn FnMut(&Event) + Send>;

/// The settings of a [`ThreadedProducer`] about to start ([`ThreadedProducer::builder`]);
/// [`ThreadedBuilder::spawn`] starts its thread. The protocol's settings are the [`Config`]'s.
#[must_use = "a builder does nothing until `spawn` is called"]
pub struct ThreadedBuilder<T> {
    config: Config,
    queue_capacity: usize,
    on_event: Option<OnEvent>,
    token_provider: Option<crate::token::Provider>,
    partitioner: Option<Box<dyn Partitioner>>,
    interceptors: Interceptors,
    injected: InjectedPanics,
    #[cfg(feature = "opentelemetry")]
    stamp_trace_context: bool,
    _reports: std::marker::PhantomData<fn(T)>,
}

impl<T> std::fmt::Debug for ThreadedBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedBuilder")
            .field("queue_capacity", &self.queue_capacity)
            .field("on_event", &self.on_event.is_some())
            .field("token_provider", &self.token_provider.is_some())
            .field("partitioner", &self.partitioner.is_some())
            .field("interceptors", &self.interceptors.len())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> ThreadedBuilder<T> {
    /// A builder with the defaults ([`ThreadedProducer::builder`]).
    pub(super) fn new(config: Config) -> Self {
        ThreadedBuilder {
            config,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            on_event: None,
            token_provider: None,
            partitioner: None,
            interceptors: Interceptors::default(),
            injected: InjectedPanics::default(),
            #[cfg(feature = "opentelemetry")]
            stamp_trace_context: false,
            _reports: std::marker::PhantomData,
        }
    }

    /// The most commands waiting for the producer thread (default 1024; at least 1): see
    /// [`ThreadedProducer::spawn`].
    pub fn queue_capacity(mut self, n: usize) -> Self {
        self.queue_capacity = n;
        self
    }

    /// The callback that receives every [`Event`] of the producer (they are logged with
    /// `tracing` either way), **on the producer thread**, in the order they happen; keep it
    /// short and non-blocking. A callback (this one, the delivery callback, the token
    /// provider) that panics does not stop the producer: the panic is caught around that call
    /// and named by an [`Event::CallbackPanicked`], which this callback receives too (if it
    /// panics on that one, the panic is only logged). A report whose callback panicked is not
    /// handed over again.
    pub fn on_event<E>(mut self, on_event: E) -> Self
    where
        E: FnMut(&Event) + Send + 'static,
    {
        self.on_event = Some(Box::new(on_event));
        self
    }

    /// The OAUTHBEARER token provider (for `sasl.mechanism=OAUTHBEARER`): whenever the core
    /// needs a token, `provider` is called on a helper thread of its own, so it may block (see
    /// [`MioDriver::set_token_provider`]).
    pub fn oauth_token_provider<P>(mut self, provider: P) -> Self
    where
        P: FnMut() -> Result<OAuthToken, String> + Send + 'static,
    {
        self.token_provider = Some(Box::new(provider));
        self
    }

    /// The partitioner of records sent without an explicit partition, instead of the
    /// built-in rule (murmur2 of the key, the adaptive sticky partition for null keys): it runs
    /// on the producer thread, once per such record (see [`producer_core::Partitioner`] for
    /// its errors and panics, which fail that record alone).
    pub fn partitioner(mut self, partitioner: Box<dyn Partitioner>) -> Self {
        self.partitioner = Some(partitioner);
        self
    }

    /// Adds an [`Interceptor`]: its [`Interceptor::on_send`] sees (and may change) every record
    /// before the core takes it, and its [`Interceptor::on_acknowledgement`] every report
    /// before the delivery callback gets it. Call it once per interceptor; they run in the
    /// order added. For header stamping, auditing, metrics and tracing (inject a
    /// `traceparent` header in `on_send`).
    ///
    /// Both run **on the producer thread**, one record at a time: they must not block (the
    /// producer waits for them). `on_send` runs when the thread takes the record from the
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
    /// interceptor (after those added before), and makes [`ThreadedProducer::send_with`],
    /// [`ThreadedProducer::send`] and [`ThreadedProducer::send_batch`] stamp the caller's
    /// current context ([`opentelemetry::Context::current`], when a span is current) on each
    /// record as its `traceparent`/`tracestate` headers, so that the record's `send {topic}`
    /// span is a child of the sender's span and its own context replaces those headers (see
    /// [`producer_driver::otel`]). A record refused by a send call comes back with the stamped
    /// headers.
    #[cfg(feature = "opentelemetry")]
    pub fn opentelemetry<Tr>(
        mut self,
        tracing: producer_driver::otel::TracingInterceptor<Tr>,
    ) -> Self
    where
        Tr: opentelemetry::trace::Tracer + Send + 'static,
        Tr::Span: Send + 'static,
    {
        self.interceptors.push(tracing);
        self.stamp_trace_context = true;
        self
    }

    /// For tests only: panics injected into the producer thread's loop, to prove that the
    /// producer contains them. Not part of the supported API.
    #[doc(hidden)]
    pub fn inject_panics(mut self, injected: InjectedPanics) -> Self {
        self.injected = injected;
        self
    }

    /// Starts the producer thread; `on_delivery` receives every report on it (see
    /// [`ThreadedProducer::spawn`] for the errors).
    pub fn spawn<F>(self, on_delivery: F) -> Result<ThreadedProducer<T>, StartError>
    where
        F: FnMut(Delivery<T>) + Send + 'static,
    {
        let ThreadedBuilder {
            config,
            queue_capacity,
            on_event,
            token_provider,
            partitioner,
            interceptors,
            injected,
            #[cfg(feature = "opentelemetry")]
            stamp_trace_context,
            ..
        } = self;
        let poll = Poll::new()?;
        let buffer_memory = config.buffer_memory;
        let transactional = config.transactional_id.is_some();
        let space = Arc::new(Space::default());
        let mut driver = MioDriver::with_sink(
            config,
            poll.registry(),
            TokenRange::new(mio::Token(0), 1024),
            None,
            DriverLoop::new(
                Reports {
                    on_delivery,
                    on_event,
                    space: space.clone(),
                    _reports: std::marker::PhantomData,
                },
                injected,
            )
            .with_interceptors(interceptors),
        )?;
        if let Some(provider) = token_provider {
            driver.set_token_provider(provider);
        }
        if let Some(partitioner) = partitioner {
            driver.set_partitioner(partitioner);
        }
        let shared = Arc::new(Shared {
            queue: CommandQueue::new(queue_capacity, buffer_memory),
            waker: driver.waker().clone(),
            close_requested: AtomicBool::new(false),
            wake_pending: AtomicBool::new(false),
            last_words: LastWords::default(),
            transactional,
            space,
            #[cfg(feature = "opentelemetry")]
            stamp_trace_context,
        });
        shared
            .queue
            .start_from(producer_driver::CoreLoad::of(driver.core()));
        let loop_shared = shared.clone();
        let handle = thread::Builder::new()
            .name("producer-mio".into())
            .spawn(move || {
                let _stop = StopOnDrop(loop_shared.clone());
                let mut state = Loop {
                    driver,
                    poll,
                    shared: loop_shared,
                };
                state.run();
            })?;
        let thread_id = handle.thread().id();
        Ok(ThreadedProducer {
            inner: Arc::new(Inner {
                shared,
                thread: Mutex::new(Some(handle)),
                thread_id,
            }),
        })
    }
}
