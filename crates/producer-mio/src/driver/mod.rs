//! The embeddable driver: a [`Producer`] and its sockets, registered in the caller's
//! `mio::Registry`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::event::Event as MioEvent;
use mio::{Registry, Token, Waker};
use producer_core::{
    Callback, Config, Delivery, Event, Output, ProduceError, Producer, Record, SendError,
    SendErrorReason, TransactionResult,
};
use producer_driver::tls::TlsSetup;
use producer_driver::{
    call_user, log_event, timestamp, Acknowledgement, Interceptor, Interceptors, ReadSizing,
    RecordId,
};

use crate::error::StartError;

use crate::resolver::Resolver;
use crate::sink::{DeliveryQueue, DeliverySink};
use crate::socket::{Sock, SockState};
use crate::token::TokenFetcher;
use crate::tokens::TokenRange;

mod control;
mod sockets;

/// Why OAUTHBEARER fails without a token provider: it names both ways to give one
/// ([`crate::ThreadedBuilder::oauth_token_provider`], [`MioDriver::set_token_provider`]).
pub(crate) const NO_TOKEN_PROVIDER: &str = "producer-mio has no OAUTHBEARER token provider \
    (ThreadedBuilder::oauth_token_provider for a ThreadedProducer, \
    MioDriver::set_token_provider for a MioDriver)";

/// Most bytes read from a socket at a time: the read buffer grows with traffic up to this.
const READ_BUF: usize = 64 * 1024;
/// Most producer events kept for [`MioDriver::poll_event`]; older ones are dropped.
const EVENT_CAPACITY: usize = 256;

/// Drives a [`producer_core::Producer`] with sockets registered in the caller's
/// [`mio::Poll`]: the building block to embed a Kafka producer into an existing mio event loop.
///
/// `T` is the caller's value handed back with each record's [`Delivery`] report; `S` is
/// where the reports go (by default a queue drained with [`MioDriver::poll_delivery`]; see
/// [`DeliverySink`]).
///
/// # Embedding
/// ```no_run
/// use std::time::Duration;
/// use mio::{Events, Poll, Token};
/// use producer_core::{Config, Record};
/// use producer_mio::{MioDriver, TokenRange};
///
/// let mut poll = Poll::new()?;
/// let config = Config::builder([("localhost", 9092)]).build().unwrap();
/// // The driver owns tokens 1000..1064 of this Poll (1000 is its waker).
/// let mut driver = MioDriver::<u64>::new(config, poll.registry(), TokenRange::new(Token(1000), 64))?;
/// driver.send(Record::new("topic", "value"), 1).ok();
/// let mut events = Events::with_capacity(256);
/// while driver.buffered_records() > 0 {
///     poll.poll(&mut events, driver.next_timeout())?;
///     for event in events.iter() {
///         if driver.owns_token(event.token()) {
///             driver.handle_event(event);
///         } // else: the application's own sources
///     }
///     driver.handle_timeout();
///     while let Some(report) = driver.poll_delivery() {
///         println!("{}: {:?}", report.opaque, report.result);
///     }
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Contract
/// - Pass every event whose token satisfies [`MioDriver::owns_token`] to
///   [`MioDriver::handle_event`] (sockets are registered edge-triggered for both readable and
///   writable; the driver reads and writes until `WouldBlock`).
/// - Poll with [`MioDriver::next_timeout`] as the timeout (or less), and call
///   [`MioDriver::handle_timeout`] after each `poll` returns (it does nothing when no deadline
///   passed).
/// - Drain [`MioDriver::poll_delivery`]: reports are queued inside the driver, and
///   [`MioDriver::send`] answers `Full` while the queued reports plus the records in flight
///   reach `buffer_max_records`, so an undrained queue stops intake instead of growing.
///
/// Every method drives the core itself (it drains the core's outputs after each input), so
/// nothing else is needed. No method blocks: name resolution runs on a helper thread (started
/// at the first host name that is not an IP literal) whose results arrive through the waker.
/// I/O errors never panic: a failed socket is reported to the core, which reconnects with
/// backoff and retries its requests.
///
/// Connection attempts have no deadline of the driver's: the core owns it. A connection
/// still connecting (name resolution included) after the configured `request_timeout` is
/// closed by the core (`Output::Disconnect`), which then reconnects with backoff.
pub struct MioDriver<T, S: DeliverySink<T> = DeliveryQueue<T>> {
    core: Producer<T>,
    registry: Registry,
    tokens: TokenRange,
    waker: Arc<Waker>,
    resolver: Resolver,
    /// Connections by `ConnId::as_u64`.
    socks: HashMap<u64, Sock>,
    /// Connection slot (see [`TokenRange::connection_slot`]) -> connection key.
    by_token: Vec<Option<u64>>,
    /// Unused connection slots, least recently freed first (so a stale event rarely reaches
    /// a new connection; when it does, it is harmless).
    free_tokens: VecDeque<usize>,
    /// The one buffer every connection is read into, sized to the traffic by `read_sizing`.
    read_buf: Vec<u8>,
    read_sizing: ReadSizing,
    /// When a socket last gave bytes: a grown read buffer goes back to its minimum after
    /// [`ReadSizing::IDLE`] without.
    last_read: Instant,
    sink: S,
    events: VecDeque<Event>,
    /// Most bytes queued for writing on one connection.
    max_queued_bytes: usize,
    /// TLS for every connection (`SSL`, `SASL_SSL`).
    tls: Option<TlsSetup>,
    /// The application's OAUTHBEARER token provider, on its helper thread.
    oauth: Option<TokenFetcher>,
    /// Completed transactional operations, for [`MioDriver::poll_transaction`].
    transactions: VecDeque<TransactionResult>,
    /// The application's interceptors ([`MioDriver::add_interceptor`]).
    interceptors: Interceptors,
}

impl<T, S: DeliverySink<T>> std::fmt::Debug for MioDriver<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MioDriver")
            .field("tokens", &self.tokens)
            .field("connections", &self.socks.len())
            .field("buffered_records", &self.core.buffered_records())
            .field("pending_deliveries", &self.sink.pending())
            .finish_non_exhaustive()
    }
}

impl<T> MioDriver<T> {
    /// A driver for `config` whose sockets and waker are registered in `registry` with tokens
    /// from `tokens` (see [`TokenRange`]). The driver registers its own [`Waker`] at
    /// `tokens.waker_token()`; as mio allows one waker per `Poll`, use
    /// [`MioDriver::with_waker`] instead if the application already has one, or share this one
    /// through [`MioDriver::waker`].
    ///
    /// The core starts connecting at once. Fails if the registry cannot be cloned, the waker
    /// cannot be registered, or `tokens` has fewer than 2 tokens ([`StartError::Io`]); or,
    /// for `SSL` and `SASL_SSL`, if the TLS files cannot be used ([`StartError::Tls`]: they
    /// are read here, once).
    pub fn new(
        config: Config,
        registry: &Registry,
        tokens: TokenRange,
    ) -> Result<Self, StartError> {
        Self::with_sink(config, registry, tokens, None, DeliveryQueue::default())
    }

    /// Like [`MioDriver::new`], but with the application's own [`Waker`] (registered in the
    /// same `Poll`). The driver wakes it when a name resolution finishes; the application must
    /// then call [`MioDriver::handle_wake`] (calling it on every wake-up is fine). The first
    /// token of `tokens` stays reserved and unused.
    pub fn with_waker(
        config: Config,
        registry: &Registry,
        tokens: TokenRange,
        waker: Arc<Waker>,
    ) -> Result<Self, StartError> {
        Self::with_sink(
            config,
            registry,
            tokens,
            Some(waker),
            DeliveryQueue::default(),
        )
    }

    /// The next delivery report, if any. Call it after each loop iteration until `None`.
    #[must_use = "a dropped report is lost"]
    pub fn poll_delivery(&mut self) -> Option<Delivery<T>> {
        self.sink.pop()
    }
}

impl<T, S: DeliverySink<T>> MioDriver<T, S> {
    /// Like [`MioDriver::new`] (with `waker: None`) or [`MioDriver::with_waker`], but the
    /// reports go to `sink` as the core produces them (see [`DeliverySink`]); reach it with
    /// [`MioDriver::sink_mut`].
    pub fn with_sink(
        config: Config,
        registry: &Registry,
        tokens: TokenRange,
        waker: Option<Arc<Waker>>,
        sink: S,
    ) -> Result<Self, StartError> {
        let tls = TlsSetup::from_config(&config)?;
        tokens.check()?;
        let waker = match waker {
            Some(w) => w,
            None => Arc::new(Waker::new(registry, tokens.waker_token())?),
        };
        let registry = registry.try_clone()?;
        let max_queued_bytes = (config.max_in_flight + 4)
            .saturating_mul(config.max_request_size)
            .saturating_add(1 << 20);
        let conn_tokens = tokens.connection_slots();
        let mut driver = MioDriver {
            core: Producer::new(config, Instant::now()),
            registry,
            tokens,
            resolver: Resolver::new(waker.clone()),
            waker,
            socks: HashMap::new(),
            by_token: vec![None; conn_tokens],
            free_tokens: (0..conn_tokens).collect(),
            read_buf: Vec::new(),
            read_sizing: ReadSizing::new(READ_BUF),
            last_read: Instant::now(),
            sink,
            events: VecDeque::new(),
            max_queued_bytes,
            tls,
            oauth: None,
            transactions: VecDeque::new(),
            interceptors: Interceptors::default(),
        };
        // The wall clock's anchor for telemetry's OTLP times (the core reads no clock).
        if let Ok(unix) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            driver.core.set_wall_clock(Instant::now(), unix);
        }
        driver.drive(Instant::now());
        Ok(driver)
    }

    /// Sets the OAUTHBEARER token provider (for `sasl.mechanism=OAUTHBEARER`): whenever the
    /// core needs a token, `provider` is called on a helper thread (started at the first call),
    /// so it may block (an HTTP call to the identity provider); its answer comes back through
    /// the waker and goes to the core (an `Err` fails the connections waiting for it, and
    /// their records, with [`producer_core::AuthError::TokenUnavailable`]). A provider that
    /// panics answers with an error. Call it before the loop runs (right after creating the
    /// driver); it replaces any provider set before. Without one, every token request is
    /// answered with an error.
    pub fn set_token_provider<F>(&mut self, provider: F)
    where
        F: FnMut() -> Result<producer_core::OAuthToken, String> + Send + 'static,
    {
        self.oauth = Some(TokenFetcher::new(self.waker.clone(), Box::new(provider)));
    }

    /// Adds an [`Interceptor`] (after those added before; they run in that order): its
    /// [`Interceptor::on_send`] sees (and may change) every record [`MioDriver::send`] takes,
    /// and its [`Interceptor::on_acknowledgement`] every report before it reaches the sink
    /// ([`MioDriver::poll_delivery`]). Call it right after creating the driver, before the
    /// first record.
    ///
    /// Both run inside the driver's calls, on the thread running the loop, one record at a
    /// time: they must not block. `on_send` runs in `send` after the driver gave the record a
    /// timestamp and checked the queued reports (the `Full` of `buffer_max_records` comes
    /// before it), right before the core's checks, so `max.request.size` and `buffer.memory`
    /// see the changed record. A record the core then refuses is acknowledged as failed
    /// ([`ProduceError::Refused`]) and comes back in the [`SendError`] as the interceptors
    /// changed it: sent again, it goes through `on_send` again. A panicking `on_send` fails
    /// that record with [`ProduceError::Interceptor`]: `send` returns `Ok` and the record comes
    /// back in its report (not sent). A panicking `on_acknowledgement` does not stop the
    /// report. Either panic is named by an [`Event::CallbackPanicked`] with
    /// [`Callback::Interceptor`] ([`MioDriver::poll_event`]), and the driver goes on.
    pub fn add_interceptor(&mut self, interceptor: impl Interceptor) {
        self.interceptors.push(interceptor);
    }

    /// The waker the driver uses (its own, or the one given to [`MioDriver::with_waker`]).
    /// Another thread may use it to wake the loop; the driver treats such wake-ups as spurious.
    pub fn waker(&self) -> &Arc<Waker> {
        &self.waker
    }

    /// The token range given at construction.
    pub fn token_range(&self) -> TokenRange {
        self.tokens
    }

    /// Whether `token` belongs to this driver: pass such events to [`MioDriver::handle_event`].
    pub fn owns_token(&self, token: Token) -> bool {
        self.tokens.contains(token)
    }

    /// The core, to read its [`producer_core::Stats`], configuration or producer id.
    pub fn core(&self) -> &Producer<T> {
        &self.core
    }

    /// The core and the sink, to change both between driver calls (the threaded producer's
    /// command layer is its sink).
    pub(crate) fn parts_mut(&mut self) -> (&mut Producer<T>, &mut S) {
        (&mut self.core, &mut self.sink)
    }

    /// Accepts a record; its report comes out of [`MioDriver::poll_delivery`]. A record without
    /// a timestamp gets the wall clock. Never blocks. On error the record and `opaque` come
    /// back: `Full` means retry after draining reports (and letting the loop run).
    pub fn send(&mut self, record: Record, opaque: T) -> Result<(), SendError<T>> {
        self.send_at(Instant::now(), record, opaque)
    }

    /// [`MioDriver::send`] with the monotonic clock read by the caller: for loops that send
    /// many records in a row and read the clock once for several of them. `now` must be a
    /// recent reading of [`Instant::now`] (a few milliseconds old at most: the core times
    /// linger and delivery timeouts from it) and never earlier than the `now` of a previous
    /// call. The wall-clock timestamp of a record without one is still read here.
    pub fn send_at(&mut self, now: Instant, record: Record, opaque: T) -> Result<(), SendError<T>> {
        let r = self.accept(now, record, opaque);
        self.drive(now);
        r
    }

    /// [`MioDriver::send_at`] without acting on the core's outputs: for a loop that hands over
    /// a run of records and then calls [`MioDriver::drive`] once for all of them.
    #[inline]
    pub(crate) fn accept(
        &mut self,
        now: Instant,
        mut record: Record,
        opaque: T,
    ) -> Result<(), SendError<T>> {
        timestamp::fill(&mut record);
        let limit = self.core.config().buffer_max_records;
        if self.sink.pending() + self.core.buffered_records() >= limit && !self.core.is_closed() {
            return Err(SendError {
                reason: SendErrorReason::Full,
                record,
                opaque,
            });
        }
        if !self.interceptors.is_empty() {
            return self.accept_intercepted(now, record, opaque);
        }
        self.core.send(now, record, opaque)
    }

    /// [`MioDriver::accept`] through the interceptors: `on_send` before the core's `send`; a
    /// panic there fails the record with a report, a refusal of the core is acknowledged.
    #[inline(never)]
    fn accept_intercepted(
        &mut self,
        now: Instant,
        mut record: Record,
        opaque: T,
    ) -> Result<(), SendError<T>> {
        let record_id = match self.interceptors.on_send(&mut record) {
            Ok(id) => id,
            Err(panicked) => {
                self.keep_event(panicked.event());
                let failed = Delivery::failed(opaque, panicked.error(), record);
                self.hand_to_sink_intercepted(Some(panicked.id), failed);
                return Ok(());
            }
        };
        let refused = self.core.send(now, record, opaque).err();
        let Some(refused) = refused else {
            return Ok(());
        };
        let error = ProduceError::Refused(Box::new(refused.reason.clone()));
        let panics = self.interceptors.on_acknowledgement_with_id(
            Some(record_id),
            Acknowledgement::Failed {
                error: &error,
                record: &refused.record,
            },
        );
        for panicked in panics {
            self.keep_event(panicked);
        }
        Err(refused)
    }

    /// The next completed transactional operation ([`MioDriver::transactions`]), if any. Call
    /// it after each loop iteration while an operation is under way; a producer without a
    /// `transactional.id` never has one.
    #[must_use = "the application waits for this result"]
    pub fn poll_transaction(&mut self) -> Option<TransactionResult> {
        self.transactions.pop_front()
    }

    /// Sends everything buffered now, ignoring `linger`. Watch
    /// [`MioDriver::buffered_records`] reach zero (and drain the reports) to know it completed.
    pub fn flush(&mut self) {
        let now = Instant::now();
        self.core.flush(now);
        self.drive(now);
    }

    /// Stops accepting records and flushes; once every record has its report, the connections
    /// are closed and [`MioDriver::is_closed`] turns true. Keep running the loop until then.
    pub fn close(&mut self) {
        let now = Instant::now();
        self.core.close(now);
        self.drive(now);
    }

    /// Whether [`MioDriver::close`] completed (or a fatal error ended the producer and every
    /// record was reported).
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    /// Records accepted whose report has not been produced yet (queued reports not included).
    pub fn buffered_records(&self) -> usize {
        self.core.buffered_records()
    }

    /// A snapshot of the core's metrics ([`Producer::metrics_at`] now: the windowed rates
    /// measured at the scrape; names in [`producer_core::metrics`]). Call it between driver
    /// calls, per scrape.
    pub fn metrics(&self) -> producer_core::MetricsSnapshot {
        self.core.metrics_at(std::time::Instant::now())
    }

    /// "Why is it slow?": a verdict per broker over the last sample window
    /// ([`Producer::diagnose`] now; see [`producer_core::diagnosis`]). Call it between driver
    /// calls: a progress line, the end of a run.
    pub fn diagnose(&self) -> producer_core::Diagnosis {
        self.core.diagnose(std::time::Instant::now())
    }

    /// The delivery sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The delivery sink, to change its state between driver calls.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// The next producer event (also logged with `tracing`), if any. Optional: at most the
    /// latest 256 are kept.
    #[must_use = "a dropped event is lost"]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// How long the caller's `poll` may sleep before [`MioDriver::handle_timeout`] is due:
    /// pass it as `poll`'s timeout (or a shorter one). `None`: no deadline pending.
    #[must_use = "pass it to `Poll::poll`"]
    pub fn next_timeout(&self) -> Option<Duration> {
        let core = self.core.poll_timeout();
        // A grown read buffer is given back after a while without reads.
        let shrink = self
            .read_sizing
            .is_grown()
            .then(|| self.last_read + ReadSizing::IDLE);
        let at = match (core, shrink) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        at.map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Processes the deadlines that passed. Call it after every `poll` returns; it is cheap and
    /// does nothing when none is due.
    pub fn handle_timeout(&mut self) {
        let now = Instant::now();
        if self.read_sizing.is_grown() && now >= self.last_read + ReadSizing::IDLE {
            self.read_sizing.idle();
            self.read_buf = Vec::new();
        }
        if self.core.poll_timeout().is_none_or(|at| at > now) {
            return;
        }
        self.core.handle_timeout(now);
        self.drive(now);
    }

    /// Handles a readiness event for one of the driver's tokens ([`MioDriver::owns_token`]);
    /// events for other tokens and stale events are ignored.
    pub fn handle_event(&mut self, event: &MioEvent) {
        let token = event.token();
        if !self.tokens.contains(token) {
            return;
        }
        if token == self.tokens.waker_token() {
            self.handle_wake();
            return;
        }
        let Some(slot) = self.tokens.connection_slot(token) else {
            return;
        };
        let Some(Some(key)) = self.by_token.get(slot).copied() else {
            return;
        };
        let now = Instant::now();
        self.on_socket_event(now, key, event);
        self.drive(now);
    }

    /// Collects finished name resolutions and starts their connections, and hands the token
    /// provider's answer to the core. Called by
    /// [`MioDriver::handle_event`] for the driver's own waker; call it yourself on your waker's
    /// event when you gave the driver your waker ([`MioDriver::with_waker`]).
    pub fn handle_wake(&mut self) {
        let now = Instant::now();
        match self.oauth.as_mut().and_then(TokenFetcher::try_next) {
            Some(Ok(token)) => self.core.handle_token(now, token),
            Some(Err(panicked)) => {
                let reason = match &panicked {
                    Event::CallbackPanicked { message, .. } => {
                        format!("the OAUTHBEARER token provider panicked: {message}")
                    }
                    _ => "the OAUTHBEARER token provider panicked".to_owned(),
                };
                self.keep_event(panicked);
                self.core.handle_token(now, Err(reason));
            }
            None => {}
        }
        while let Some(r) = self.resolver.try_next() {
            let Some(s) = self.socks.get(&r.key) else {
                continue;
            };
            if !matches!(s.state, SockState::Resolving) {
                continue;
            }
            match r.result {
                Ok(addrs) if !addrs.is_empty() => {
                    tracing::debug!(host = %s.host, port = s.port, ?addrs, "resolved");
                    self.connect_next(now, r.key, addrs.into(), None);
                }
                Ok(_) => {
                    tracing::warn!(host = %s.host, port = s.port, "name resolved to no address");
                    let reason =
                        io::Error::new(io::ErrorKind::NotFound, "name resolved to no address");
                    self.connect_failed(now, r.key, reason);
                }
                Err(e) => {
                    tracing::warn!(host = %s.host, port = s.port, error = %e, "name resolution failed");
                    self.connect_failed(now, r.key, e);
                }
            }
        }
        self.drive(now);
    }

    // -----------------------------------------------------------------------------------------
    // Internals
    // -----------------------------------------------------------------------------------------

    /// Acts on every output the core has (connections, writes, reports, events). Call after
    /// any input to the core.
    pub(crate) fn drive(&mut self, now: Instant) {
        while let Some(out) = self.core.poll_output() {
            match out {
                Output::Connect { conn, host, port } => {
                    self.start_connection(now, conn, host, port)
                }
                Output::Transmit { conn, bytes } => self.transmit(now, conn, bytes),
                Output::Disconnect { conn } => {
                    if let Some(s) = self.remove(conn.as_u64()) {
                        tracing::info!(host = %s.host, port = s.port, conn = conn.as_u64(), "connection closed by the producer");
                    }
                }
                Output::TokenRequest => {
                    let asked = match self.oauth.as_mut() {
                        Some(t) => t.request(),
                        None => Err(NO_TOKEN_PROVIDER.into()),
                    };
                    // Without a provider (or its thread), the core fails the connections that
                    // wait for a token, with the reason.
                    if let Err(reason) = asked {
                        self.core.handle_token(now, Err(reason));
                    }
                }
                Output::Delivery(d) => self.hand_to_sink(d),
                Output::Transaction(r) => self.transactions.push_back(r),
                Output::Event(e) => self.keep_event(e),
            }
        }
    }

    /// Hands a report to the sink, after the interceptors saw it. The sink may be the
    /// application's code: a panic in it (or in an interceptor) is named by an event, and the
    /// report counts as handed over.
    #[inline]
    fn hand_to_sink(&mut self, d: Delivery<T>) {
        if !self.interceptors.is_empty() {
            // The core carries the caller's value, not a record's number.
            return self.hand_to_sink_intercepted(None, d);
        }
        // Moved straight into the call: a report borrowed first would be copied again.
        let sink = &mut self.sink;
        if let Err(panicked) = call_user(Callback::Delivery, || sink.deliver(d)) {
            self.keep_event(panicked);
        }
    }

    /// [`MioDriver::hand_to_sink`] with interceptors: they see the report first, and their
    /// panics are named by events. Out of line: a driver without interceptors keeps only the
    /// branch.
    #[inline(never)]
    fn hand_to_sink_intercepted(&mut self, record_id: Option<RecordId>, d: Delivery<T>) {
        for panicked in self
            .interceptors
            .on_acknowledgement_with_id(record_id, Acknowledgement::of(&d))
        {
            self.keep_event(panicked);
        }
        let sink = &mut self.sink;
        if let Err(panicked) = call_user(Callback::Delivery, || sink.deliver(d)) {
            self.keep_event(panicked);
        }
    }

    /// Logs an event, shows it to the sink and keeps it for [`MioDriver::poll_event`]. A sink
    /// that panics on it is named by an event of its own, logged and kept after it (not shown
    /// to the sink again).
    fn keep_event(&mut self, e: Event) {
        log_event(&e);
        let sink = &mut self.sink;
        let panicked = call_user(Callback::Event, || sink.event(&e)).err();
        self.push_event(e);
        if let Some(panicked) = panicked {
            log_event(&panicked);
            self.push_event(panicked);
        }
    }

    /// Keeps an event for [`MioDriver::poll_event`], dropping the oldest past
    /// [`EVENT_CAPACITY`].
    fn push_event(&mut self, e: Event) {
        if self.events.len() == EVENT_CAPACITY {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }
}

impl<T, S: DeliverySink<T>> Drop for MioDriver<T, S> {
    fn drop(&mut self) {
        let keys: Vec<u64> = self.socks.keys().copied().collect();
        for key in keys {
            self.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one read buffer grows with full reads up to [`READ_BUF`]; once no socket has given
    /// bytes for [`ReadSizing::IDLE`], the deadline it arms lets the driver drop it, and the
    /// next read starts small again.
    #[test]
    fn a_grown_read_buffer_is_let_go_once_reads_stop() {
        let poll = mio::Poll::new().unwrap();
        let config = Config::builder([("127.0.0.1", 9)]).build().unwrap();
        let mut d: MioDriver<()> =
            MioDriver::new(config, poll.registry(), TokenRange::new(Token(0), 16)).unwrap();
        assert_eq!(d.read_buf.capacity(), 0, "nothing read: no buffer");
        for _ in 0..8 {
            let offered = sockets::size_read_buf(&mut d.read_buf, &d.read_sizing);
            d.read_sizing.after_read(offered, offered);
        }
        assert_eq!(
            sockets::size_read_buf(&mut d.read_buf, &d.read_sizing),
            READ_BUF
        );
        assert!(d.read_buf.capacity() >= READ_BUF);
        d.last_read = Instant::now();
        assert!(
            d.next_timeout().is_some_and(|t| t <= ReadSizing::IDLE),
            "a grown buffer arms the idle deadline"
        );
        d.last_read = Instant::now()
            .checked_sub(ReadSizing::IDLE)
            .expect("a clock past one second");
        d.handle_timeout();
        assert_eq!(d.read_buf.capacity(), 0, "the large buffer is let go");
        assert_eq!(
            sockets::size_read_buf(&mut d.read_buf, &d.read_sizing),
            ReadSizing::MIN
        );
        assert!(d.read_buf.capacity() < 2 * ReadSizing::MIN);
    }
}
