//! One running producer of either threaded driver behind one synchronous API, for the tests
//! the drivers share: each such test is written once, as a function of the [`Driver`], and
//! each driver's crate runs it (see [`mod@crate::driver_suite`]). Beside [`crate::drive`], the
//! only place of the test suites that calls the drivers' APIs.
//!
//! Reports come through the drivers' callbacks (the tokio driver's detached records, or with
//! [`Options::futures`] its delivery futures), each recorded before an optional hook of the
//! test runs in the callback itself (a hook may panic: that is how the tests make a callback
//! panic); events likewise.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use opentelemetry_sdk::trace::SdkTracer;
use producer_core::{
    Config, Event, InFlight, MetricsSnapshot, Partitioner, PurgeScope, Record, TopicPartitions,
    TransactionError,
};
use producer_driver::otel::{ProducerMetrics, TracingInterceptor};
use producer_driver::panic::InjectedPanics;
use producer_driver::tls::TlsSetupError;
use producer_driver::{CloseOutcome, FlushOutcome, Interceptor, PartitionsError};

use crate::drive::{core_report, runtime, tokio_report, Driver, Report};

/// A hook a test runs inside a callback, after its report or event was recorded.
pub type Hook<A> = Arc<dyn Fn(&A) + Send + Sync>;

/// How to start a [`Running`] producer.
pub struct Options {
    /// The producer's configuration.
    pub config: Config,
    /// The command queue's capacity (tokio's `command_capacity`, mio's `queue_capacity`).
    pub queue_capacity: usize,
    /// Runs in the delivery callback with the record's id, after its report was recorded.
    pub on_report: Option<Hook<u64>>,
    /// Runs in the event callback, after the event was recorded.
    pub on_event: Option<Hook<Event>>,
    /// The OAUTHBEARER token provider, if any.
    pub tokens: Option<crate::drive::TokenSource>,
    /// Panics injected into the driver's loop.
    pub injected: InjectedPanics,
    /// The interceptors, in the order added to the builder.
    pub interceptors: Vec<Box<dyn Interceptor>>,
    /// tokio: one delivery future per record (`send`) instead of the delivery callback
    /// (`send_detached`); `on_report` then never runs. Ignored by mio.
    pub futures: bool,
    /// The application's partitioner, if any (the builders' `partitioner`).
    pub partitioner: Option<Box<dyn Partitioner>>,
    /// OpenTelemetry tracing (the builders' `opentelemetry`), added after `interceptors`.
    pub tracing: Option<TracingInterceptor<SdkTracer>>,
}

impl Options {
    /// The defaults for `config`: a queue of 8,192 commands, no hooks, no token provider,
    /// reports through the callback.
    pub fn new(config: Config) -> Self {
        Options {
            config,
            queue_capacity: 8192,
            on_report: None,
            on_event: None,
            tokens: None,
            injected: InjectedPanics::default(),
            interceptors: Vec::new(),
            futures: false,
            partitioner: None,
            tracing: None,
        }
    }
}

/// The report of record `id`, and the record when it came back with a failure.
#[derive(Debug)]
pub struct Reported {
    /// The id the record was sent with.
    pub id: u64,
    /// Its report.
    pub result: Report,
    /// The record handed back with a failure.
    pub record: Option<Record>,
}

/// Why [`Running::try_start`] could not start the producer: the driver's `StartError`, with
/// the variant both drivers share as a variant here.
#[derive(Debug)]
pub enum StartFailed {
    /// The TLS settings cannot be used (`StartError::Tls` of either driver).
    Tls(TlsSetupError),
    /// Any other reason, as the driver words it.
    Other(String),
}

impl From<producer_tokio::StartError> for StartFailed {
    fn from(e: producer_tokio::StartError) -> Self {
        match e {
            producer_tokio::StartError::Tls(e) => StartFailed::Tls(e),
            other => StartFailed::Other(other.to_string()),
        }
    }
}

impl From<producer_mio::StartError> for StartFailed {
    fn from(e: producer_mio::StartError) -> Self {
        match e {
            producer_mio::StartError::Tls(e) => StartFailed::Tls(e),
            other => StartFailed::Other(other.to_string()),
        }
    }
}

/// [`Running::send`] refused the record: the producer is closed (or mio's queue full).
#[derive(Debug)]
pub struct Refused(pub Record);

/// Why [`Running::try_send`] refused a record (it comes back).
#[derive(Debug)]
pub enum TryRefused {
    /// The command queue (or the core's buffer) is full.
    Full(Record),
    /// The producer is closed.
    Closed(Record),
}

enum Inner {
    Tokio {
        rt: tokio::runtime::Runtime,
        handle: producer_tokio::ProducerHandle,
        futures: bool,
        reports: mpsc::Sender<Reported>,
    },
    Mio(producer_mio::ThreadedProducer<u64>),
}

/// A running producer of either driver, with its reports and events in channels.
pub struct Running {
    inner: Inner,
    reports: mpsc::Receiver<Reported>,
    events: mpsc::Receiver<Event>,
}

impl Running {
    /// Starts a producer of `driver` (tokio, or mio's threaded producer); panics if it cannot
    /// start.
    pub fn start(driver: Driver, options: Options) -> Running {
        Running::try_start(driver, options)
            .unwrap_or_else(|e| panic!("start the {driver:?} producer: {e:?}"))
    }

    /// Starts a producer of `driver` (tokio, or mio's threaded producer), or says why the
    /// driver refused to start.
    pub fn try_start(driver: Driver, options: Options) -> Result<Running, StartFailed> {
        let (report_tx, reports) = mpsc::channel::<Reported>();
        let (event_tx, events) = mpsc::channel::<Event>();
        let Options {
            config,
            queue_capacity,
            on_report,
            on_event,
            tokens,
            injected,
            interceptors,
            futures,
            partitioner,
            tracing,
        } = options;
        let event_tx = std::sync::Mutex::new(event_tx);
        let on_event = move |e: &Event| {
            let _ = event_tx
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(e.clone());
            if let Some(hook) = &on_event {
                hook(e);
            }
        };
        let inner = match driver {
            Driver::Tokio => {
                let rt = runtime();
                let tx = std::sync::Mutex::new(report_tx.clone());
                let mut builder = producer_tokio::ProducerHandle::builder(config)
                    .command_capacity(queue_capacity)
                    .on_event(on_event)
                    .inject_panics(injected)
                    .on_delivery(move |r| {
                        let (result, record) = tokio_report(r.result);
                        let id = r.tag;
                        let reported = Reported { id, result, record };
                        let _ = tx.lock().unwrap_or_else(|e| e.into_inner()).send(reported);
                        if let Some(hook) = &on_report {
                            hook(&id);
                        }
                    });
                if let Some(partitioner) = partitioner {
                    builder = builder.partitioner(partitioner);
                }
                for interceptor in interceptors {
                    builder = builder.interceptor(interceptor);
                }
                if let Some(tracing) = tracing {
                    builder = builder.opentelemetry(tracing);
                }
                if let Some(tokens) = tokens {
                    builder = builder.oauth_token_provider(move || {
                        let tokens = tokens.clone();
                        // Called inside the provider's task: a panic is the provider's. Pending
                        // once first, as an identity provider that takes a while: the
                        // producer's task must not wait on it.
                        async move {
                            tokio::task::yield_now().await;
                            tokens()
                        }
                    });
                }
                let handle = {
                    let _entered = rt.enter();
                    builder.start()?
                };
                Inner::Tokio {
                    rt,
                    handle,
                    futures,
                    reports: report_tx,
                }
            }
            Driver::MioThreaded => {
                let mut builder = producer_mio::ThreadedProducer::<u64>::builder(config)
                    .queue_capacity(queue_capacity)
                    .on_event(on_event)
                    .inject_panics(injected);
                for interceptor in interceptors {
                    builder = builder.interceptor(interceptor);
                }
                if let Some(tracing) = tracing {
                    builder = builder.opentelemetry(tracing);
                }
                if let Some(tokens) = tokens {
                    builder = builder.oauth_token_provider(move || tokens());
                }
                if let Some(partitioner) = partitioner {
                    builder = builder.partitioner(partitioner);
                }
                let producer = builder.spawn(move |d| {
                    let (id, result, record) = core_report(d);
                    let _ = report_tx.send(Reported { id, result, record });
                    if let Some(hook) = &on_report {
                        hook(&id);
                    }
                })?;
                Inner::Mio(producer)
            }
            Driver::MioEmbedded => panic!("the embedded mio driver has no handle to share"),
        };
        Ok(Running {
            inner,
            reports,
            events,
        })
    }

    /// Queues `record` with `id` (tokio: waiting for room; mio: refused when the queue is
    /// full). `Err` hands the record back: the producer is closed (or mio's queue full).
    // The record comes back by value, as the drivers hand it back.
    #[allow(clippy::result_large_err)]
    pub fn send(&self, record: Record, id: u64) -> Result<(), Refused> {
        match &self.inner {
            Inner::Tokio {
                rt,
                handle,
                futures: false,
                ..
            } => rt
                .block_on(handle.send_detached(record, id))
                .map_err(|e| Refused(e.into_record())),
            Inner::Tokio {
                rt,
                handle,
                futures: true,
                reports,
            } => {
                let future = rt
                    .block_on(handle.send(record))
                    .map_err(|e| Refused(e.into_record()))?;
                let reports = reports.clone();
                rt.spawn(async move {
                    let (result, record) = tokio_report(future.await);
                    let _ = reports.send(Reported { id, result, record });
                });
                Ok(())
            }
            Inner::Mio(p) => p
                .send_with(record, id)
                .map_err(|e| Refused(e.into_parts().0)),
        }
    }

    /// Queues `record` with `id`, waiting for room as long as it takes (tokio: `send_detached`;
    /// mio: `send_timeout` with no timeout, `Duration::MAX`: the test's hang guard ends it). `Err`
    /// hands the record back: the producer is closed.
    #[allow(clippy::result_large_err)]
    pub fn send_waiting(&self, record: Record, id: u64) -> Result<(), Refused> {
        match &self.inner {
            Inner::Tokio { .. } => self.send(record, id),
            Inner::Mio(p) => p
                .send_timeout(record, id, Duration::MAX)
                .map_err(|e| Refused(e.into_parts().0)),
        }
    }

    /// Queues `record` with `id` without waiting (tokio: `try_send_detached`; mio:
    /// `send_with`).
    #[allow(clippy::result_large_err)]
    pub fn try_send(&self, record: Record, id: u64) -> Result<(), TryRefused> {
        match &self.inner {
            Inner::Tokio { handle, .. } => {
                handle.try_send_detached(record, id).map_err(|e| match e {
                    producer_tokio::TrySendError::Full(r) => TryRefused::Full(r),
                    other => TryRefused::Closed(other.into_record()),
                })
            }
            Inner::Mio(p) => p.send_with(record, id).map_err(|e| match e {
                producer_mio::TrySendError::Full(r, _) => TryRefused::Full(r),
                other => TryRefused::Closed(other.into_parts().0),
            }),
        }
    }

    /// Flushes: returns once every record sent before has its report.
    pub fn flush(&self) {
        match &self.inner {
            Inner::Tokio { rt, handle, .. } => rt.block_on(handle.flush()),
            Inner::Mio(p) => p.flush(),
        }
    }

    /// Closes: returns once every record has its report and the producer stopped.
    pub fn close(&self) {
        match &self.inner {
            Inner::Tokio { rt, handle, .. } => rt.block_on(handle.close()),
            Inner::Mio(p) => p.close(),
        }
    }

    /// Purges (`ProducerHandle::purge`, `ThreadedProducer::purge`): how many records it
    /// removed; `None` once the producer stopped.
    pub fn purge(&self, scope: PurgeScope, in_flight: InFlight) -> Option<usize> {
        match &self.inner {
            Inner::Tokio { rt, handle, .. } => rt.block_on(handle.purge(scope, in_flight)).ok(),
            Inner::Mio(p) => p.purge(scope, in_flight),
        }
    }

    /// A flush bounded by `timeout`; `None` (mio) once the producer stopped.
    pub fn flush_within(&self, timeout: Duration) -> Option<FlushOutcome> {
        match &self.inner {
            Inner::Tokio { rt, handle, .. } => Some(rt.block_on(handle.flush_within(timeout))),
            Inner::Mio(p) => p.flush_within(timeout),
        }
    }

    /// A close bounded by `timeout`: returns once the producer stopped; `None` (mio) when it
    /// had stopped already.
    pub fn close_within(&self, timeout: Duration) -> Option<CloseOutcome> {
        match &self.inner {
            Inner::Tokio { rt, handle, .. } => Some(rt.block_on(handle.close_within(timeout))),
            Inner::Mio(p) => p.close_within(timeout),
        }
    }

    /// Whether the producer is closed (or closing).
    pub fn is_closed(&self) -> bool {
        match &self.inner {
            Inner::Tokio { handle, .. } => handle.is_closed(),
            Inner::Mio(p) => p.is_closed(),
        }
    }

    /// A metrics snapshot (`None`: mio's thread stopped without leaving one).
    pub fn metrics(&self) -> Option<MetricsSnapshot> {
        match &self.inner {
            Inner::Tokio { rt, handle, .. } => Some(rt.block_on(handle.metrics())),
            Inner::Mio(p) => p.metrics(),
        }
    }

    /// The diagnosis (`None`: mio's thread stopped without leaving a snapshot).
    pub fn diagnose(&self) -> Option<producer_core::Diagnosis> {
        match &self.inner {
            Inner::Tokio { rt, handle, .. } => Some(rt.block_on(handle.diagnose())),
            Inner::Mio(p) => p.diagnose(),
        }
    }

    /// A function that takes a metrics snapshot from any thread outside the producer's (what an
    /// OpenTelemetry collection calls).
    pub fn metrics_fetcher(&self) -> Box<dyn Fn() -> Option<MetricsSnapshot> + Send + Sync> {
        match &self.inner {
            Inner::Tokio { rt, handle, .. } => {
                let (rt, handle) = (rt.handle().clone(), handle.clone());
                Box::new(move || Some(rt.block_on(handle.metrics())))
            }
            Inner::Mio(p) => {
                let p = p.clone();
                Box::new(move || p.metrics())
            }
        }
    }

    /// The producer's metrics registered on `meter` by the driver's own
    /// `otel::register_metrics`.
    pub fn register_otel_metrics(&self, meter: opentelemetry::metrics::Meter) -> ProducerMetrics {
        match &self.inner {
            Inner::Tokio { rt, handle, .. } => {
                let _entered = rt.enter();
                producer_tokio::otel::register_metrics(meter, handle)
            }
            Inner::Mio(p) => producer_mio::otel::register_metrics(meter, p),
        }
    }

    /// The partitions of `topic` (tokio: `partitions_for`, bounded by `max.block.ms`; mio:
    /// `partitions_for` with `timeout`).
    pub fn partitions_for(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<TopicPartitions, PartitionsError> {
        match &self.inner {
            Inner::Tokio { rt, handle, .. } => rt.block_on(handle.partitions_for(topic)),
            Inner::Mio(p) => p.partitions_for(topic, timeout),
        }
    }

    /// The driver's transactional API (`ProducerHandle::transactions`,
    /// `ThreadedProducer::transactions`): `None` unless the config has a `transactional.id`.
    pub fn transactions(&self) -> Option<RunningTransactions<'_>> {
        let inner = match &self.inner {
            Inner::Tokio { rt, handle, .. } => TxnInner::Tokio(rt, handle.transactions()?),
            Inner::Mio(p) => TxnInner::Mio(p.transactions()?),
        };
        Some(RunningTransactions { inner })
    }

    /// The next report, waiting at most `limit` for it.
    pub fn next_report(&self, limit: Duration) -> Option<Reported> {
        self.reports.recv_timeout(limit).ok()
    }

    /// The reports that have come (without waiting).
    pub fn reports(&self) -> Vec<Reported> {
        self.reports.try_iter().collect()
    }

    /// The events that have come (without waiting).
    pub fn events(&self) -> Vec<Event> {
        self.events.try_iter().collect()
    }
}

/// The transactional API of a [`Running`] producer ([`Running::transactions`]), each call
/// waiting for its result.
pub struct RunningTransactions<'a> {
    inner: TxnInner<'a>,
}

enum TxnInner<'a> {
    Tokio(
        &'a tokio::runtime::Runtime,
        producer_tokio::Transactions<'a>,
    ),
    Mio(producer_mio::ThreadedTransactions<'a, u64>),
}

impl RunningTransactions<'_> {
    /// `init`.
    pub fn init(&self) -> Result<(), TransactionError> {
        match &self.inner {
            TxnInner::Tokio(rt, t) => rt.block_on(t.init()),
            TxnInner::Mio(t) => t.init(),
        }
    }

    /// `begin`.
    pub fn begin(&self) -> Result<(), TransactionError> {
        match &self.inner {
            TxnInner::Tokio(rt, t) => rt.block_on(t.begin()),
            TxnInner::Mio(t) => t.begin(),
        }
    }

    /// `commit`.
    pub fn commit(&self) -> Result<(), TransactionError> {
        match &self.inner {
            TxnInner::Tokio(rt, t) => rt.block_on(t.commit()),
            TxnInner::Mio(t) => t.commit(),
        }
    }

    /// `abort`.
    pub fn abort(&self) -> Result<(), TransactionError> {
        match &self.inner {
            TxnInner::Tokio(rt, t) => rt.block_on(t.abort()),
            TxnInner::Mio(t) => t.abort(),
        }
    }
}

/// How long a shared driver test may go on before it counts as hung. Not a timing assertion:
/// a test that works finishes long before, whatever the machine's load.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// Runs `test` on a thread of its own and waits for it to end: its panic is the test's, and a
/// test still running after [`HANG_GUARD`] fails as hung instead of hanging the suite.
pub fn with_hang_guard(test: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let runner = std::thread::spawn(move || {
        test();
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(HANG_GUARD) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = runner.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the test hung"),
    }
}
