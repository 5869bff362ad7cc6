//! The embeddable driver: a [`Producer`] and its sockets, registered in the caller's
//! `mio::Registry`.

use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes};
use mio::event::Event as MioEvent;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token, Waker};
use producer_core::{
    Config, ConnId, Delivery, Event, Output, Producer, Record, SendError, SendErrorReason,
};

use crate::resolver::Resolver;

/// Size of the reusable read buffer.
const READ_BUF: usize = 64 * 1024;
/// Most buffers handed to one `write_vectored` call.
const MAX_IOV: usize = 64;
/// Most producer events kept for [`MioDriver::poll_event`]; older ones are dropped.
const EVENT_CAPACITY: usize = 256;

/// The tokens a [`MioDriver`] may use in the caller's `mio::Poll`: `len` consecutive tokens
/// starting at `start`.
///
/// The first token (`start`) is reserved for the driver's [`Waker`] (whether the driver
/// registered it or the caller lent one, see [`MioDriver::with_waker`]); the other `len - 1`
/// tokens are given to connections, one per open connection. The core keeps at most one
/// connection per broker (plus the bootstrap servers while it has no metadata), so
/// `len = 1 + brokers + bootstrap servers` is enough; a `Connect` the driver has no free token
/// for fails (and the core retries it after its reconnect backoff). [`TokenRange::default`]
/// gives 1024 tokens from `Token(1 << 30)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenRange {
    start: usize,
    len: usize,
}

impl TokenRange {
    /// The tokens `start .. start + len`. `len` must be at least 2 (checked by
    /// [`MioDriver::new`]).
    pub fn new(start: Token, len: usize) -> Self {
        TokenRange {
            start: start.0,
            len,
        }
    }

    /// Whether `token` is in the range.
    pub fn contains(&self, token: Token) -> bool {
        token.0 >= self.start && token.0 - self.start < self.len
    }

    /// The token of the driver's waker (the first of the range).
    pub fn waker_token(&self) -> Token {
        Token(self.start)
    }
}

impl Default for TokenRange {
    fn default() -> Self {
        TokenRange {
            start: 1 << 30,
            len: 1024,
        }
    }
}

/// Where a [`MioDriver`] puts the delivery reports the core produces.
///
/// The default, [`DeliveryQueue`], keeps them for [`MioDriver::poll_delivery`]. A sink of your
/// own (see [`MioDriver::with_sink`]) receives each report the moment the core produces it,
/// inside whichever driver method produced it, without the copy into and out of a queue: for
/// loops that handle reports with a callback anyway.
pub trait DeliverySink<T> {
    /// Takes one report.
    fn deliver(&mut self, delivery: Delivery<T>);

    /// Reports the sink holds and has not handed on yet. [`MioDriver::send`] answers `Full`
    /// while these plus the records in flight reach `buffer_max_records`, so a sink that
    /// queues must count them here; a sink that hands reports on at once keeps the default 0.
    fn pending(&self) -> usize {
        0
    }
}

/// The default [`DeliverySink`]: a queue drained with [`MioDriver::poll_delivery`].
#[derive(Debug)]
pub struct DeliveryQueue<T>(VecDeque<Delivery<T>>);

impl<T> Default for DeliveryQueue<T> {
    fn default() -> Self {
        DeliveryQueue(VecDeque::new())
    }
}

impl<T> DeliverySink<T> for DeliveryQueue<T> {
    fn deliver(&mut self, delivery: Delivery<T>) {
        self.0.push_back(delivery);
    }

    fn pending(&self) -> usize {
        self.0.len()
    }
}

/// Where one connection stands.
enum SockState {
    /// Waiting for the resolver thread.
    Resolving,
    /// Non-blocking connect in progress to one address; `rest` are tried next if it fails.
    Connecting {
        stream: TcpStream,
        addr: SocketAddr,
        rest: VecDeque<SocketAddr>,
    },
    /// Established.
    Connected { stream: TcpStream },
}

/// One connection the core asked for.
struct Sock {
    id: ConnId,
    token: Token,
    host: String,
    port: u16,
    state: SockState,
    /// Resolution and connection must complete by then.
    connect_deadline: Option<Instant>,
    /// Frames waiting to be written, in order; the front one may be partly written.
    out: VecDeque<Bytes>,
    out_bytes: usize,
}

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
/// A connection attempt (resolution included) that has not completed after the configured
/// `request_timeout` is abandoned and reported as failed (the core has no connect deadline of
/// its own).
pub struct MioDriver<T, S: DeliverySink<T> = DeliveryQueue<T>> {
    core: Producer<T>,
    registry: Registry,
    tokens: TokenRange,
    waker: Arc<Waker>,
    resolver: Resolver,
    /// Connections by `ConnId::as_u64`.
    socks: HashMap<u64, Sock>,
    /// `token - tokens.start - 1` -> connection key.
    by_token: Vec<Option<u64>>,
    /// Unused connection tokens, least recently freed first (so a stale event rarely reaches
    /// a new connection; when it does, it is harmless).
    free_tokens: VecDeque<usize>,
    read_buf: Vec<u8>,
    sink: S,
    events: VecDeque<Event>,
    /// Most bytes queued for writing on one connection.
    max_queued_bytes: usize,
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
    /// cannot be registered, or `tokens` has fewer than 2 tokens.
    pub fn new(config: Config, registry: &Registry, tokens: TokenRange) -> io::Result<Self> {
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
    ) -> io::Result<Self> {
        Self::with_sink(
            config,
            registry,
            tokens,
            Some(waker),
            DeliveryQueue::default(),
        )
    }

    /// The next delivery report, if any. Call it after each loop iteration until `None`.
    pub fn poll_delivery(&mut self) -> Option<Delivery<T>> {
        self.sink.0.pop_front()
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
    ) -> io::Result<Self> {
        check_range(tokens)?;
        let waker = match waker {
            Some(w) => w,
            None => Arc::new(Waker::new(registry, tokens.waker_token())?),
        };
        let registry = registry.try_clone()?;
        let max_queued_bytes = (config.max_in_flight + 4)
            .saturating_mul(config.max_request_size)
            .saturating_add(1 << 20);
        let conn_tokens = tokens.len - 1;
        let mut driver = MioDriver {
            core: Producer::new(config, Instant::now()),
            registry,
            tokens,
            resolver: Resolver::new(waker.clone()),
            waker,
            socks: HashMap::new(),
            by_token: vec![None; conn_tokens],
            free_tokens: (0..conn_tokens).collect(),
            read_buf: vec![0; READ_BUF],
            sink,
            events: VecDeque::new(),
            max_queued_bytes,
        };
        driver.drive(Instant::now());
        Ok(driver)
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
    pub(crate) fn accept(
        &mut self,
        now: Instant,
        mut record: Record,
        opaque: T,
    ) -> Result<(), SendError<T>> {
        if record.timestamp.is_none() {
            record.timestamp = Some(wall_clock_ms());
        }
        let limit = self.core.config().buffer_max_records;
        if self.sink.pending() + self.core.buffered_records() >= limit && !self.core.is_closed() {
            return Err(SendError {
                reason: SendErrorReason::Full,
                record,
                opaque,
            });
        }
        self.core.send(now, record, opaque)
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
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// How long the caller's `poll` may sleep before [`MioDriver::handle_timeout`] is due:
    /// pass it as `poll`'s timeout (or a shorter one). `None`: no deadline pending.
    pub fn next_timeout(&self) -> Option<Duration> {
        self.next_deadline()
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    fn next_deadline(&self) -> Option<Instant> {
        let connect = self.socks.values().filter_map(|s| s.connect_deadline).min();
        match (self.core.poll_timeout(), connect) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes the deadlines that passed. Call it after every `poll` returns; it is cheap and
    /// does nothing when none is due.
    pub fn handle_timeout(&mut self) {
        let now = Instant::now();
        if self.next_deadline().is_none_or(|at| at > now) {
            return;
        }
        let expired: Vec<u64> = self
            .socks
            .iter()
            .filter(|(_, s)| s.connect_deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| *k)
            .collect();
        for key in expired {
            if let Some(s) = self.socks.get(&key) {
                tracing::warn!(host = %s.host, port = s.port, conn = key, "connection attempt timed out");
            }
            self.connect_failed(now, key);
        }
        if self.core.poll_timeout().is_some_and(|at| at <= now) {
            self.core.handle_timeout(now);
        }
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
        let Some(Some(key)) = self.by_token.get(token.0 - self.tokens.start - 1).copied() else {
            return;
        };
        let now = Instant::now();
        self.on_socket_event(now, key, event);
        self.drive(now);
    }

    /// Collects finished name resolutions and starts their connections. Called by
    /// [`MioDriver::handle_event`] for the driver's own waker; call it yourself on your waker's
    /// event when you gave the driver your waker ([`MioDriver::with_waker`]).
    pub fn handle_wake(&mut self) {
        let now = Instant::now();
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
                    self.connect_next(now, r.key, addrs.into());
                }
                Ok(_) => {
                    tracing::warn!(host = %s.host, port = s.port, "name resolved to no address");
                    self.connect_failed(now, r.key);
                }
                Err(e) => {
                    tracing::warn!(host = %s.host, port = s.port, error = %e, "name resolution failed");
                    self.connect_failed(now, r.key);
                }
            }
        }
        self.drive(now);
    }

    // -----------------------------------------------------------------------------------------
    // Internals
    // -----------------------------------------------------------------------------------------

    /// Drains the core's outputs, doing what each says.
    /// Acts on every output the core has (connections, writes, reports, events).
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
                Output::Delivery(d) => self.sink.deliver(d),
                Output::Event(e) => self.on_core_event(e),
            }
        }
    }

    fn on_core_event(&mut self, e: Event) {
        match &e {
            Event::Retry {
                topic,
                partition,
                error,
            } => {
                tracing::warn!(%topic, partition, error = %error, "retrying batch")
            }
            Event::Fatal(err) => {
                tracing::error!(error = %err, "producer failed; every record fails")
            }
            Event::BrokerReady { node_id } => tracing::info!(node_id, "broker connection ready"),
            Event::ProducerId { producer_id, epoch } => {
                tracing::info!(producer_id, epoch, "producer id assigned")
            }
            Event::MetadataUpdated => tracing::debug!("metadata updated"),
            Event::Closed => tracing::info!("producer closed"),
            other => tracing::debug!(event = ?other, "producer event"),
        }
        if self.events.len() == EVENT_CAPACITY {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    fn start_connection(&mut self, now: Instant, conn: ConnId, host: String, port: u16) {
        let key = conn.as_u64();
        if let Some(old) = self.remove(key) {
            // Cannot happen (ConnIds are unique); never leak a socket if it does.
            tracing::debug!(host = %old.host, conn = key, "replacing connection with the same id");
        }
        let Some(slot) = self.free_tokens.pop_front() else {
            tracing::warn!(%host, port, "no free token in the driver's token range; connection attempt fails");
            self.core.handle_connect_failed(now, conn);
            return;
        };
        let token = Token(self.tokens.start + 1 + slot);
        self.by_token[slot] = Some(key);
        let deadline = now + self.core.config().request_timeout;
        tracing::info!(%host, port, conn = key, "connecting");
        let literal = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        let sock = Sock {
            id: conn,
            token,
            host,
            port,
            state: SockState::Resolving,
            connect_deadline: Some(deadline),
            out: VecDeque::new(),
            out_bytes: 0,
        };
        let (host, port) = (sock.host.clone(), sock.port);
        self.socks.insert(key, sock);
        match literal {
            Some(ip) => self.connect_next(now, key, VecDeque::from([SocketAddr::new(ip, port)])),
            None => {
                if let Err(e) = self.resolver.resolve(key, host.clone(), port) {
                    tracing::warn!(%host, port, error = %e, "cannot start name resolution");
                    self.connect_failed(now, key);
                }
            }
        }
    }

    /// Starts a non-blocking connect to the first address of `addrs`; the others are tried in
    /// turn if it fails. With none left, the connection fails.
    fn connect_next(&mut self, now: Instant, key: u64, mut addrs: VecDeque<SocketAddr>) {
        while let Some(addr) = addrs.pop_front() {
            let Some(s) = self.socks.get_mut(&key) else {
                return;
            };
            let attempt = TcpStream::connect(addr).and_then(|mut stream| {
                self.registry.register(
                    &mut stream,
                    s.token,
                    Interest::READABLE | Interest::WRITABLE,
                )?;
                Ok(stream)
            });
            match attempt {
                Ok(stream) => {
                    s.state = SockState::Connecting {
                        stream,
                        addr,
                        rest: addrs,
                    };
                    return;
                }
                Err(e) => tracing::warn!(host = %s.host, %addr, error = %e, "connect failed"),
            }
        }
        self.connect_failed(now, key);
    }

    /// Drops a connection that never got established and tells the core.
    fn connect_failed(&mut self, now: Instant, key: u64) {
        if let Some(s) = self.remove(key) {
            self.core.handle_connect_failed(now, s.id);
        }
    }

    /// Drops an established connection that failed and tells the core.
    fn lost(&mut self, now: Instant, key: u64, why: &dyn std::fmt::Display) {
        if let Some(s) = self.remove(key) {
            tracing::warn!(host = %s.host, port = s.port, conn = key, reason = %why, "connection lost");
            self.core.handle_disconnected(now, s.id);
        }
    }

    /// Forgets a connection: deregisters and closes its socket, frees its token.
    fn remove(&mut self, key: u64) -> Option<Sock> {
        let mut s = self.socks.remove(&key)?;
        match &mut s.state {
            SockState::Connecting { stream, .. } | SockState::Connected { stream } => {
                let _ = self.registry.deregister(stream);
            }
            SockState::Resolving => {}
        }
        let slot = s.token.0 - self.tokens.start - 1;
        self.by_token[slot] = None;
        self.free_tokens.push_back(slot);
        Some(s)
    }

    fn on_socket_event(&mut self, now: Instant, key: u64, event: &MioEvent) {
        let Some(s) = self.socks.get_mut(&key) else {
            return;
        };
        match &mut s.state {
            SockState::Resolving => {}
            SockState::Connecting { stream, addr, rest } => {
                let addr = *addr;
                let outcome = match stream.take_error() {
                    Ok(Some(e)) | Err(e) => Err(e),
                    Ok(None) => match stream.peer_addr() {
                        Ok(_) => Ok(true),
                        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
                        Err(e) => Err(e),
                    },
                };
                match outcome {
                    Ok(false) => {
                        // Not finished yet; a hang-up without an error code still fails it.
                        if event.is_error() || (event.is_read_closed() && event.is_write_closed()) {
                            let rest = std::mem::take(rest);
                            tracing::warn!(host = %s.host, %addr, "connect failed (hang-up)");
                            let _ = self.registry.deregister(stream);
                            s.state = SockState::Resolving;
                            self.connect_next(now, key, rest);
                        }
                    }
                    Ok(true) => {
                        let SockState::Connecting { stream, .. } =
                            std::mem::replace(&mut s.state, SockState::Resolving)
                        else {
                            return;
                        };
                        if let Err(e) = stream.set_nodelay(true) {
                            tracing::debug!(error = %e, "set_nodelay failed");
                        }
                        s.state = SockState::Connected { stream };
                        s.connect_deadline = None;
                        tracing::info!(host = %s.host, %addr, conn = key, "connected");
                        let id = s.id;
                        // The core answers with ApiVersions; handle_event's drive() writes it
                        // at once (the socket is writable now).
                        self.core.handle_connected(now, id);
                    }
                    Err(e) => {
                        tracing::warn!(host = %s.host, %addr, error = %e, "connect failed");
                        let rest = std::mem::take(rest);
                        let _ = self.registry.deregister(stream);
                        s.state = SockState::Resolving;
                        self.connect_next(now, key, rest);
                    }
                }
            }
            SockState::Connected { .. } => {
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    self.read_in(now, key);
                }
                if event.is_writable() || event.is_write_closed() {
                    self.write_out(now, key);
                }
            }
        }
    }

    /// Reads until `WouldBlock`, feeding the core.
    fn read_in(&mut self, now: Instant, key: u64) {
        loop {
            let Some(Sock {
                state: SockState::Connected { stream },
                id,
                ..
            }) = self.socks.get_mut(&key)
            else {
                return;
            };
            let id = *id;
            match stream.read(&mut self.read_buf) {
                Ok(0) => return self.lost(now, key, &"closed by the broker"),
                Ok(n) => {
                    self.core.handle_read(now, id, &self.read_buf[..n]);
                    // Act on the responses at once: new requests go out while reading, and a
                    // connection the core dropped (bad bytes) is closed before reading more.
                    self.drive(now);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.lost(now, key, &e),
            }
        }
    }

    fn transmit(&mut self, now: Instant, conn: ConnId, bytes: Bytes) {
        let key = conn.as_u64();
        let Some(s) = self.socks.get_mut(&key) else {
            return;
        };
        if bytes.is_empty() {
            return;
        }
        s.out_bytes += bytes.len();
        s.out.push_back(bytes);
        if s.out_bytes > self.max_queued_bytes {
            // The core bounds what it has in flight, so this means the socket is stuck.
            let why = format!(
                "{} bytes queued for writing, above the limit of {}",
                s.out_bytes, self.max_queued_bytes
            );
            return self.lost(now, key, &why);
        }
        if matches!(s.state, SockState::Connected { .. }) {
            self.write_out(now, key);
        }
    }

    /// Writes queued frames until the queue is empty or the socket would block.
    fn write_out(&mut self, now: Instant, key: u64) {
        let Some(s) = self.socks.get_mut(&key) else {
            return;
        };
        let SockState::Connected { stream } = &mut s.state else {
            return;
        };
        while !s.out.is_empty() {
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let mut count = 0;
            for (slot, b) in iov.iter_mut().zip(s.out.iter()) {
                *slot = IoSlice::new(b);
                count += 1;
            }
            match stream.write_vectored(&iov[..count]) {
                Ok(0) => return self.lost(now, key, &"write returned 0"),
                Ok(mut n) => {
                    s.out_bytes -= n;
                    while n > 0 {
                        let Some(front) = s.out.front_mut() else {
                            break;
                        };
                        if front.len() <= n {
                            n -= front.len();
                            s.out.pop_front();
                        } else {
                            front.advance(n);
                            n = 0;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.lost(now, key, &e),
            }
        }
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

fn check_range(tokens: TokenRange) -> io::Result<()> {
    if tokens.len < 2 || tokens.start.checked_add(tokens.len).is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the token range needs at least 2 tokens",
        ));
    }
    Ok(())
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn wall_clock_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        // Seconds and milliseconds separately: `as_millis` goes through a u128.
        Ok(d) => d.as_secs() as i64 * 1000 + i64::from(d.subsec_millis()),
        Err(_) => 0,
    }
}
