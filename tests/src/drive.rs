//! Producing a workload through any driver: the one place of the test suites that calls the
//! drivers' APIs (`producer_tokio`, `producer_mio`), so that an API change touches this file
//! only. [`produce`] sends records in order, calls a hook between chunks (where a test injects
//! faults or changes the cluster), flushes, closes, and returns every report each record got.
// `is_multiple_of` is newer than the workspace MSRV (1.85).
#![allow(unknown_lints, clippy::manual_is_multiple_of)]

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use producer_core::{
    Config, Delivery, DeliveryFailure, OAuthToken, ProduceError, Record, RecordMetadata,
    SendErrorReason,
};

use crate::workload::now_ms;

/// Which driver produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `producer_tokio::ProducerHandle` (`send().await` then the delivery future).
    Tokio,
    /// `producer_mio::ThreadedProducer` (non-blocking `send_with`, callback reports).
    MioThreaded,
    /// `producer_mio::MioDriver` in a loop owned by the test.
    MioEmbedded,
}

/// How the workload is paced: the hook runs before chunk `k` (records `k*chunk..`), after a
/// pause, so faults land while earlier records are buffered or in flight. The pause shapes the
/// load (records per second); it synchronises nothing.
#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    /// Records per chunk (`usize::MAX`: one chunk).
    pub chunk: usize,
    /// Pause before each chunk after the first.
    pub pause: Duration,
}

impl Pacing {
    /// No pauses; the hook runs once, before the first record.
    pub fn burst() -> Self {
        Pacing {
            chunk: usize::MAX,
            pause: Duration::ZERO,
        }
    }

    /// The hook runs before every `chunk` records, after a `pause`.
    pub fn chunks(chunk: usize, pause: Duration) -> Self {
        Pacing { chunk, pause }
    }
}

/// Why a record was not delivered, as the driver reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The core failed the record with this error (the record came back with it).
    Produce(ProduceError),
    /// The driver refused the record when handing it to the core.
    Rejected(SendErrorReason),
    /// The driver lost the record without a report of the core (a driver bug or a runtime
    /// shutdown).
    Lost,
    /// A failure this code does not know (a driver error variant added later).
    Other(String),
}

impl From<ProduceError> for Failure {
    /// A record the core refused when a driver handed it over is [`Failure::Rejected`]; every
    /// other failure of the core is [`Failure::Produce`].
    fn from(error: ProduceError) -> Self {
        match error {
            ProduceError::Refused(reason) => Failure::Rejected(*reason),
            e => Failure::Produce(e),
        }
    }
}

impl Failure {
    /// Whether the record may be in the log anyway. `false` means "certainly not written": a
    /// test asserts such records are absent.
    pub fn possibly_persisted(&self) -> bool {
        match self {
            Failure::Produce(ProduceError::Broker {
                possibly_persisted, ..
            })
            | Failure::Produce(ProduceError::DeliveryTimeout {
                possibly_persisted, ..
            }) => *possibly_persisted,
            Failure::Produce(ProduceError::Authentication {
                possibly_persisted, ..
            })
            | Failure::Produce(ProduceError::InvalidRecord {
                possibly_persisted, ..
            })
            | Failure::Produce(ProduceError::BatchRejected {
                possibly_persisted, ..
            }) => *possibly_persisted,
            Failure::Lost | Failure::Other(_) => true,
            Failure::Produce(_) | Failure::Rejected(_) => false,
        }
    }

    /// The core's error, when there is one.
    pub fn produce_error(&self) -> Option<&ProduceError> {
        match self {
            Failure::Produce(e) => Some(e),
            _ => None,
        }
    }
}

/// One delivery report.
pub type Report = Result<RecordMetadata, Failure>;

/// Every report each record got (exactly one is expected), indexed like the records.
pub type Reports = Vec<Vec<Report>>;

/// What a production run returns.
pub struct Run {
    /// The reports of record `i` at index `i`.
    pub reports: Reports,
    /// Wall clock (ms) before the first send and after the last report (for timestamps the
    /// driver filled in).
    pub start_ms: i64,
    /// See `start_ms`.
    pub end_ms: i64,
    /// How long the run took.
    pub elapsed: Duration,
    /// Records handed back by the failure reports, by index (they must equal what was sent).
    pub returned: Vec<Option<Record>>,
}

/// Converts a tokio delivery future's result into a report and the handed-back record.
pub fn tokio_report(
    r: Result<RecordMetadata, producer_tokio::DeliveryError>,
) -> (Report, Option<Record>) {
    match r {
        Ok(m) => (Ok(m), None),
        Err(producer_tokio::DeliveryError::Failed(f)) => {
            let DeliveryFailure { error, record, .. } = *f;
            (Err(Failure::from(error)), Some(record))
        }
        Err(producer_tokio::DeliveryError::Lost) => (Err(Failure::Lost), None),
        Err(e) => (Err(Failure::Other(e.to_string())), None),
    }
}

/// Converts a core delivery into a report and the handed-back record.
pub fn core_report<T>(d: Delivery<T>) -> (T, Report, Option<Record>) {
    match d.result {
        Ok(m) => (d.opaque, Ok(m), None),
        Err(f) => {
            let DeliveryFailure { error, record, .. } = *f;
            (d.opaque, Err(Failure::from(error)), Some(record))
        }
    }
}

/// Produces `records` in order through `driver`, calling `hook(k)` before chunk `k`, then
/// flushes and closes the producer and returns every report.
pub fn produce(
    driver: Driver,
    config: Config,
    records: &[Record],
    pacing: &Pacing,
    hook: &mut dyn FnMut(usize),
) -> Run {
    produce_with_tokens(driver, config, records, pacing, hook, None)
}

/// An OAUTHBEARER token provider for [`produce_with_tokens`] (called on the driver's token
/// thread or task whenever the core asks for a token).
pub type TokenSource = Arc<dyn Fn() -> Result<OAuthToken, String> + Send + Sync>;

/// [`produce`] with an OAUTHBEARER token provider given to the driver (`None`: none).
pub fn produce_with_tokens(
    driver: Driver,
    config: Config,
    records: &[Record],
    pacing: &Pacing,
    hook: &mut dyn FnMut(usize),
    tokens: Option<TokenSource>,
) -> Run {
    let start = Instant::now();
    let start_ms = now_ms();
    let mut sink = Collected::new(records.len());
    match driver {
        Driver::Tokio => produce_tokio(config, records, pacing, hook, &mut sink, tokens),
        Driver::MioThreaded => {
            produce_mio_threaded(config, records, pacing, hook, &mut sink, tokens)
        }
        Driver::MioEmbedded => {
            produce_mio_embedded(config, records, pacing, hook, &mut sink, tokens)
        }
    }
    Run {
        reports: sink.reports,
        returned: sink.returned,
        start_ms,
        end_ms: now_ms(),
        elapsed: start.elapsed(),
    }
}

/// Produces in rounds through one producer of `driver` (Tokio or MioThreaded: the drivers with
/// a flush): `next` is asked for each round's records given the runs so far (`None`: done);
/// each round is sent in order and flushed, and its [`Run`] holds its reports. The producer is
/// closed after the last round. Panics for [`Driver::MioEmbedded`], whose loop has no flush.
pub fn produce_rounds(
    driver: Driver,
    config: Config,
    next: &mut dyn FnMut(&[Run]) -> Option<Vec<Record>>,
) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    let round = |runs: &mut Vec<Run>, records: &[Record], sink: Collected, start: Instant| {
        runs.push(Run {
            reports: sink.reports,
            returned: sink.returned,
            start_ms: now_ms() - start.elapsed().as_millis() as i64,
            end_ms: now_ms(),
            elapsed: start.elapsed(),
        });
        debug_assert_eq!(runs.last().map(|r| r.reports.len()), Some(records.len()));
    };
    match driver {
        Driver::Tokio => runtime().block_on(async {
            let handle = producer_tokio::ProducerHandle::builder(config)
                .start()
                .unwrap();
            while let Some(records) = next(&runs) {
                let start = Instant::now();
                let mut sink = Collected::new(records.len());
                send_each_and_collect(&handle, &records, |_| {}, &mut sink).await;
                round(&mut runs, &records, sink, start);
            }
            handle.close().await;
        }),
        Driver::MioThreaded => {
            let (tx, rx) = mpsc::channel::<Delivery<usize>>();
            let producer = producer_mio::ThreadedProducer::<usize>::spawn(config, 1024, move |d| {
                let _ = tx.send(d);
            })
            .unwrap();
            while let Some(records) = next(&runs) {
                let start = Instant::now();
                let mut sink = Collected::new(records.len());
                for (i, r) in records.iter().enumerate() {
                    producer
                        .send_with(r.clone(), i)
                        .unwrap_or_else(|e| panic!("send of record {i} refused: {e}"));
                }
                producer.flush();
                // Flush returns once every record of the round was reported.
                while let Ok(d) = rx.try_recv() {
                    let (i, report, back) = core_report(d);
                    sink.take(i, report, back);
                }
                round(&mut runs, &records, sink, start);
            }
            producer.close();
        }
        Driver::MioEmbedded => panic!("produce_rounds needs a driver with a flush"),
    }
    runs
}

/// Produces `records` in order through `driver` (Tokio or MioThreaded), pausing
/// `pacing.pause` before every `pacing.chunk` records, flushes, takes the producer's metrics
/// snapshot, then closes; returns every report and that snapshot. For tests that compare what
/// the producer reported elsewhere (a broker's telemetry receiver) with its own metrics.
/// Panics for [`Driver::MioEmbedded`].
pub fn produce_then_snapshot(
    driver: Driver,
    config: Config,
    records: &[Record],
    pacing: &Pacing,
) -> (Run, producer_core::MetricsSnapshot) {
    let start = Instant::now();
    let start_ms = now_ms();
    let mut sink = Collected::new(records.len());
    let mut no_hook = |_| {};
    let snapshot = match driver {
        Driver::Tokio => runtime().block_on(async {
            let handle = producer_tokio::ProducerHandle::builder(config)
                .start()
                .unwrap();
            send_each_and_collect(
                &handle,
                records,
                |i| pace(i, pacing, &mut no_hook),
                &mut sink,
            )
            .await;
            let snapshot = handle.metrics().await;
            handle.close().await;
            snapshot
        }),
        Driver::MioThreaded => {
            let (tx, rx) = mpsc::channel::<Delivery<usize>>();
            let producer = producer_mio::ThreadedProducer::<usize>::spawn(config, 1024, move |d| {
                let _ = tx.send(d);
            })
            .unwrap();
            for (i, r) in records.iter().enumerate() {
                pace(i, pacing, &mut no_hook);
                producer
                    .send_with(r.clone(), i)
                    .unwrap_or_else(|e| panic!("send of record {i} refused: {e}"));
            }
            producer.flush();
            let snapshot = producer
                .metrics()
                .expect("a snapshot off the producer thread");
            producer.close();
            while let Ok(d) = rx.try_recv() {
                let (i, report, back) = core_report(d);
                sink.take(i, report, back);
            }
            snapshot
        }
        Driver::MioEmbedded => panic!("produce_then_snapshot needs a driver with a flush"),
    };
    let run = Run {
        reports: sink.reports,
        returned: sink.returned,
        start_ms,
        end_ms: now_ms(),
        elapsed: start.elapsed(),
    };
    (run, snapshot)
}

struct Collected {
    reports: Reports,
    returned: Vec<Option<Record>>,
}

impl Collected {
    fn new(n: usize) -> Self {
        Collected {
            reports: vec![Vec::new(); n],
            returned: vec![None; n],
        }
    }

    fn take(&mut self, i: usize, report: Report, back: Option<Record>) {
        self.reports[i].push(report);
        if back.is_some() {
            self.returned[i] = back;
        }
    }
}

fn pace(i: usize, pacing: &Pacing, hook: &mut dyn FnMut(usize)) {
    if pacing.chunk != usize::MAX && i % pacing.chunk == 0 {
        if i > 0 && !pacing.pause.is_zero() {
            std::thread::sleep(pacing.pause);
        }
        hook(i / pacing.chunk);
    } else if pacing.chunk == usize::MAX && i == 0 {
        hook(0);
    }
}

/// A multi-threaded runtime with two workers; the test body runs in `block_on` on the calling
/// thread, so its pauses and (short, blocking) cluster calls never stall the producer task.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn produce_tokio(
    config: Config,
    records: &[Record],
    pacing: &Pacing,
    hook: &mut dyn FnMut(usize),
    sink: &mut Collected,
    tokens: Option<TokenSource>,
) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let rt = runtime();
    rt.block_on(async {
        let mut builder = producer_tokio::ProducerHandle::builder(config);
        if let Some(tokens) = tokens {
            builder = builder.oauth_token_provider(move || {
                let token = tokens();
                async move { token }
            });
        }
        let handle = builder.start().unwrap();
        send_each_and_collect(&handle, records, |i| pace(i, pacing, hook), sink).await;
        handle.close().await;
    })
}

/// Sends every record through `handle` with one delivery future each (`before(i)` runs before
/// record `i` is sent), flushes, and puts each report into `sink`.
async fn send_each_and_collect(
    handle: &producer_tokio::ProducerHandle,
    records: &[Record],
    mut before: impl FnMut(usize),
    sink: &mut Collected,
) {
    let mut futures = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        before(i);
        let f = handle
            .send(r.clone())
            .await
            .unwrap_or_else(|e| panic!("send of record {i} refused: {e}"));
        futures.push(f);
    }
    handle.flush().await;
    for (i, f) in futures.into_iter().enumerate() {
        // After flush every future has resolved: awaiting cannot hang.
        let (report, back) = tokio_report(f.await);
        sink.take(i, report, back);
    }
}

fn produce_mio_threaded(
    config: Config,
    records: &[Record],
    pacing: &Pacing,
    hook: &mut dyn FnMut(usize),
    sink: &mut Collected,
    tokens: Option<TokenSource>,
) {
    let (tx, rx) = mpsc::channel::<Delivery<usize>>();
    let on_delivery = move |d| {
        let _ = tx.send(d);
    };
    let producer = match tokens {
        None => producer_mio::ThreadedProducer::<usize>::spawn(config, 1024, on_delivery),
        Some(tokens) => producer_mio::ThreadedProducer::<usize>::spawn_with_token_provider(
            config,
            1024,
            on_delivery,
            move || tokens(),
        ),
    }
    .unwrap();
    let take = |d: Delivery<usize>, sink: &mut Collected| {
        let (i, report, back) = core_report(d);
        sink.take(i, report, back);
    };
    for (i, r) in records.iter().enumerate() {
        pace(i, pacing, hook);
        let mut r = r.clone();
        loop {
            match producer.send_with(r, i) {
                Ok(()) => break,
                Err(producer_mio::TrySendError::Full(back, _)) => {
                    r = back;
                    // Queued records guarantee a report comes (at the latest at their
                    // delivery timeout): wait for one, which frees room.
                    match rx.recv_timeout(Duration::from_millis(200)) {
                        Ok(d) => take(d, sink),
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(e) => panic!("report channel: {e}"),
                    }
                }
                Err(e) => panic!("send of record {i} refused: {e}"),
            }
        }
    }
    producer.flush();
    producer.close();
    while let Ok(d) = rx.try_recv() {
        take(d, sink);
    }
}

fn produce_mio_embedded(
    config: Config,
    records: &[Record],
    pacing: &Pacing,
    hook: &mut dyn FnMut(usize),
    sink: &mut Collected,
    tokens: Option<TokenSource>,
) {
    use mio::{Events, Poll, Token};
    // Without progress (a send accepted or a report) for this long, the run is stuck.
    let stall_limit = config.delivery_timeout + Duration::from_secs(30);
    let mut poll = Poll::new().unwrap();
    let range = producer_mio::TokenRange::new(Token(1000), 32);
    let mut driver = producer_mio::MioDriver::<usize>::new(config, poll.registry(), range).unwrap();
    if let Some(tokens) = tokens {
        driver.set_token_provider(move || tokens());
    }
    let mut events = Events::with_capacity(256);
    let mut next = 0;
    let mut paced = None;
    let mut closing = false;
    let mut progress = Instant::now();
    loop {
        assert!(
            progress.elapsed() < stall_limit,
            "embedded driver made no progress for {stall_limit:?}"
        );
        while next < records.len() {
            if paced != Some(next) {
                paced = Some(next);
                pace(next, pacing, hook);
            }
            match driver.send(records[next].clone(), next) {
                Ok(()) => {
                    next += 1;
                    progress = Instant::now();
                }
                Err(e) if e.reason == SendErrorReason::Full => break,
                Err(e) => panic!("send of record {next} refused: {:?}", e.reason),
            }
        }
        if next == records.len() && !closing {
            closing = true;
            driver.close();
        }
        if driver.is_closed() {
            break;
        }
        poll.poll(&mut events, driver.next_timeout()).unwrap();
        for event in events.iter() {
            assert!(driver.owns_token(event.token()));
            driver.handle_event(event);
        }
        driver.handle_timeout();
        while let Some(d) = driver.poll_delivery() {
            progress = Instant::now();
            let (i, report, back) = core_report(d);
            sink.take(i, report, back);
        }
    }
    while let Some(d) = driver.poll_delivery() {
        let (i, report, back) = core_report(d);
        sink.take(i, report, back);
    }
}
