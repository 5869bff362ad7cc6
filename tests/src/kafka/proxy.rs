//! The test suite's TCP fault proxy: one [`Proxy`] in front of each broker's client listener
//! (the broker advertises the proxy's port, so Metadata sends producers through it), forwarding
//! bytes both ways until told to misbehave:
//!
//! * [`Proxy::cut_all`]: reset every open connection (RST both ways);
//! * [`Proxy::set_delay`]: hold every chunk for a while before forwarding it (both ways);
//! * [`Proxy::set_black_hole`]: stop forwarding on open connections (bytes wait, nothing is
//!   lost), and accept new connections without ever connecting them to the broker;
//! * [`Proxy::reset_after`]: the next connection to forward N more bytes in one direction
//!   forwards exactly N, then is reset (a request or response cut mid-frame);
//! * [`Proxy::heal`]: all of that off (connections accepted while black-holed stay dead).
//!
//! It frames the byte stream as it passes (4-byte length prefixes), so it knows how many
//! requests each connection's client has awaiting an answer ([`Proxy::max_in_flight`],
//! [`Proxy::wait_for_in_flight`]) and can hand every complete request and response frame to a
//! tap ([`Proxy::set_tap`], used by the protocol probe). Runs on its own tokio runtime.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// Which way bytes travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Producer to broker (requests).
    ToBroker,
    /// Broker to producer (responses).
    ToClient,
}

/// A complete frame (length prefix included) seen by the proxy.
#[derive(Debug, Clone)]
pub struct TappedFrame {
    /// The proxy's broker node id.
    pub node: i32,
    /// The connection (unique within the proxy).
    pub conn: u64,
    /// Which way it went.
    pub direction: Direction,
    /// The frame, length prefix included.
    pub frame: Bytes,
}

/// What the proxy has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections accepted while black-holed (never connected to the broker).
    pub black_holed: u64,
    /// Connections reset by [`Proxy::cut_all`].
    pub cut: u64,
    /// Connections reset by [`Proxy::reset_after`].
    pub reset: u64,
    /// Bytes forwarded to the broker.
    pub to_broker: u64,
    /// Bytes forwarded to clients.
    pub to_client: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    black_hole: bool,
    delay: Duration,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    black_holed: AtomicU64,
    cut: AtomicU64,
    reset: AtomicU64,
    to_broker: AtomicU64,
    to_client: AtomicU64,
}

struct Shared {
    node: i32,
    /// Where new connections are forwarded ([`Proxy::set_upstream`] moves it).
    upstream: Mutex<SocketAddr>,
    faults: watch::Sender<Faults>,
    /// Incremented by `cut_all`: every connection watching it resets itself.
    cut_generation: watch::Sender<u64>,
    /// Armed `reset_after`: (direction, bytes still to forward before the reset).
    reset_arm: Mutex<Option<(Direction, u64)>>,
    counters: Counters,
    tap: Mutex<Option<std::sync::mpsc::Sender<TappedFrame>>>,
    /// conn -> (requests the client has written, answers forwarded to the client).
    frames: Mutex<HashMap<u64, (u64, u64)>>,
    frames_changed: Condvar,
    next_conn: AtomicU64,
}

/// A fault proxy in front of one broker. Dropping it closes its listener and connections.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `upstream` (which need not be up
    /// yet: each accepted connection connects then). `node` names the broker in taps.
    pub fn start(node: i32, upstream: SocketAddr) -> io::Result<Proxy> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("kafka-proxy-{node}"))
            .enable_all()
            .build()?;
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let shared = Arc::new(Shared {
            node,
            upstream: Mutex::new(upstream),
            faults: watch::channel(Faults::default()).0,
            cut_generation: watch::channel(0).0,
            reset_arm: Mutex::new(None),
            counters: Counters::default(),
            tap: Mutex::new(None),
            frames: Mutex::new(HashMap::new()),
            frames_changed: Condvar::new(),
            next_conn: AtomicU64::new(1),
        });
        let listener = {
            let _guard = runtime.enter();
            TcpListener::from_std(std_listener)?
        };
        runtime.spawn(accept_loop(listener, shared.clone()));
        Ok(Proxy {
            addr,
            shared,
            runtime: Some(runtime),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The broker address it forwards to.
    pub fn upstream(&self) -> SocketAddr {
        *self
            .shared
            .upstream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Forwards connections accepted from now on to `upstream` (open ones keep theirs): a
    /// stable address in front of a broker that is replaced, as a DNS name or load balancer
    /// in front of a cluster would be.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        *self
            .shared
            .upstream
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = upstream;
    }

    /// Resets every open connection (both sides get an RST); returns how many. New
    /// connections are accepted as before.
    pub fn cut_all(&self) -> usize {
        let open = self.open_connections();
        self.shared.cut_generation.send_modify(|g| *g += 1);
        open
    }

    /// From now on every chunk waits `delay` (from when it was read) before it is forwarded,
    /// both ways. `Duration::ZERO` turns it off.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.faults.send_modify(|f| f.delay = delay);
    }

    /// On: open connections stop forwarding (what they read waits), new connections are
    /// accepted and never connected. Off: open connections forward what waited; the ones
    /// accepted meanwhile stay dead until their client closes them.
    pub fn set_black_hole(&self, on: bool) {
        self.shared.faults.send_modify(|f| f.black_hole = on);
    }

    /// Arms a one-shot reset: the first connection to forward `bytes` more bytes in
    /// `direction` forwards exactly that many, then is reset both ways.
    pub fn reset_after(&self, direction: Direction, bytes: u64) {
        *self.shared.reset_arm.lock().unwrap() = Some((direction, bytes));
    }

    /// Whether a [`reset_after`](Self::reset_after) is still armed.
    pub fn reset_armed(&self) -> bool {
        self.shared.reset_arm.lock().unwrap().is_some()
    }

    /// Turns every fault off (delay, black hole, an armed reset).
    pub fn heal(&self) {
        self.shared.faults.send_replace(Faults::default());
        *self.shared.reset_arm.lock().unwrap() = None;
    }

    /// Starts (`Some`) or stops (`None`) handing every complete frame to `tap`.
    pub fn set_tap(&self, tap: Option<std::sync::mpsc::Sender<TappedFrame>>) {
        *self.shared.tap.lock().unwrap() = tap;
    }

    /// Connections open now (connected to the broker).
    pub fn open_connections(&self) -> usize {
        self.shared.frames.lock().unwrap().len()
    }

    /// The most requests any open connection's client has written without an answer reaching
    /// it yet (the client's own count of requests in flight, whatever delay is set).
    pub fn max_in_flight(&self) -> u64 {
        max_in_flight(&self.shared.frames.lock().unwrap())
    }

    /// Waits until some connection has at least `n` requests awaiting an answer; returns
    /// that count, or `None` after `timeout`.
    pub fn wait_for_in_flight(&self, n: u64, timeout: Duration) -> Option<u64> {
        let deadline = Instant::now() + timeout;
        let mut frames = self.shared.frames.lock().unwrap();
        loop {
            let m = max_in_flight(&frames);
            if m >= n {
                return Some(m);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            frames = self
                .shared
                .frames_changed
                .wait_timeout(frames, left)
                .unwrap()
                .0;
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ProxyStats {
        let c = &self.shared.counters;
        ProxyStats {
            accepted: c.accepted.load(Ordering::Relaxed),
            black_holed: c.black_holed.load(Ordering::Relaxed),
            cut: c.cut.load(Ordering::Relaxed),
            reset: c.reset.load(Ordering::Relaxed),
            to_broker: c.to_broker.load(Ordering::Relaxed),
            to_client: c.to_client.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn max_in_flight(frames: &HashMap<u64, (u64, u64)>) -> u64 {
    frames
        .values()
        .map(|&(req, resp)| req.saturating_sub(resp))
        .max()
        .unwrap_or(0)
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        shared.counters.accepted.fetch_add(1, Ordering::Relaxed);
        let _ = client.set_nodelay(true);
        let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        if shared.faults.borrow().black_hole {
            shared.counters.black_holed.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(swallow(client, shared.clone()));
        } else {
            tokio::spawn(forward(client, conn, shared.clone()));
        }
    }
}

/// A black-holed connection: read and discard until the client closes it or a cut.
async fn swallow(mut client: TcpStream, shared: Arc<Shared>) {
    let mut cut = shared.cut_generation.subscribe();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            r = client.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = cut.changed() => {
                set_linger_zero(client.as_raw_fd());
                return;
            }
        }
    }
}

/// Makes the next close of `fd` send an RST instead of a FIN.
fn set_linger_zero(fd: RawFd) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor owned by a live tokio stream; a plain setsockopt.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Why a connection ended.
enum End {
    Closed,
    Reset,
}

async fn forward(client: TcpStream, conn: u64, shared: Arc<Shared>) {
    let to = *shared.upstream.lock().unwrap_or_else(|e| e.into_inner());
    let Ok(upstream) = TcpStream::connect(to).await else {
        // The broker is down: the client sees its connection closed right away.
        return;
    };
    let _ = upstream.set_nodelay(true);
    let fds = [client.as_raw_fd(), upstream.as_raw_fd()];
    shared.frames.lock().unwrap().insert(conn, (0, 0));
    let mut cut = shared.cut_generation.subscribe();
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    let mut to_broker = tokio::spawn(pump(cr, uw, conn, Direction::ToBroker, shared.clone()));
    let mut to_client = tokio::spawn(pump(ur, cw, conn, Direction::ToClient, shared.clone()));
    let end = tokio::select! {
        r = &mut to_broker => r.unwrap_or(End::Closed),
        r = &mut to_client => r.unwrap_or(End::Closed),
        _ = cut.changed() => {
            shared.counters.cut.fetch_add(1, Ordering::Relaxed);
            End::Reset
        }
    };
    if let End::Reset = end {
        for fd in fds {
            set_linger_zero(fd);
        }
    }
    // Dropping the halves (in the aborted tasks) closes both sockets.
    to_broker.abort();
    to_client.abort();
    shared.frames.lock().unwrap().remove(&conn);
    shared.frames_changed.notify_all();
}

/// Counts frames in a byte stream and collects them for a tap.
struct Framer {
    /// Bytes of the current frame still to come (after its length prefix).
    remaining: usize,
    /// The partial length prefix.
    prefix: Vec<u8>,
    /// The frame being collected for the tap.
    frame: Vec<u8>,
}

impl Framer {
    fn new() -> Self {
        Framer {
            remaining: 0,
            prefix: Vec::with_capacity(4),
            frame: Vec::new(),
        }
    }

    /// Feeds bytes; calls `done` with each completed frame (empty unless `collect`).
    fn feed(&mut self, mut data: &[u8], collect: bool, mut done: impl FnMut(Vec<u8>)) {
        while !data.is_empty() {
            if self.remaining == 0 {
                let take = (4 - self.prefix.len()).min(data.len());
                self.prefix.extend_from_slice(&data[..take]);
                data = &data[take..];
                if self.prefix.len() == 4 {
                    let len = u32::from_be_bytes(self.prefix[..4].try_into().unwrap()) as usize;
                    if collect {
                        self.frame.clear();
                        self.frame.extend_from_slice(&self.prefix);
                    }
                    self.prefix.clear();
                    self.remaining = len;
                    if len == 0 {
                        done(std::mem::take(&mut self.frame));
                    }
                }
            } else {
                let take = self.remaining.min(data.len());
                if collect {
                    self.frame.extend_from_slice(&data[..take]);
                }
                data = &data[take..];
                self.remaining -= take;
                if self.remaining == 0 {
                    done(std::mem::take(&mut self.frame));
                }
            }
        }
    }
}

/// Reads from `from` and forwards to `to` through a delay queue; ends on EOF, an error, or
/// an armed reset reached.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    conn: u64,
    dir: Direction,
    shared: Arc<Shared>,
) -> End {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(256);
    let reader_shared = Arc::clone(&shared);
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        // A request is in flight from when the client has written it (read here, before any
        // delay) until its answer reaches the client (counted by the writer, after the delay):
        // the client's own view, whatever delay the proxy adds.
        let mut sent = Framer::new();
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if dir == Direction::ToBroker {
                        count_requests_sent(&reader_shared, conn, &buf[..n], &mut sent);
                    }
                    if tx.send((Instant::now(), buf[..n].to_vec())).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    let writer = async {
        let mut faults = shared.faults.subscribe();
        let mut framer = Framer::new();
        let mut tap_framer = Framer::new();
        while let Some((read_at, mut chunk)) = rx.recv().await {
            // Black hole: hold everything until it is lifted.
            while faults.borrow_and_update().black_hole {
                if faults.changed().await.is_err() {
                    return End::Closed;
                }
            }
            let delay = faults.borrow().delay;
            if !delay.is_zero() {
                tokio::time::sleep_until((read_at + delay).into()).await;
            }
            let mut reset = false;
            {
                let mut arm = shared.reset_arm.lock().unwrap();
                if let Some((d, left)) = *arm {
                    if d == dir {
                        if (chunk.len() as u64) >= left {
                            chunk.truncate(left as usize);
                            *arm = None;
                            reset = true;
                        } else {
                            *arm = Some((d, left - chunk.len() as u64));
                        }
                    }
                }
            }
            // The tap sees a frame before its receiver does: a test that finishes its probe
            // once the client has an answer finds that answer decoded.
            tap(&shared, conn, dir, &chunk, &mut tap_framer);
            if to.write_all(&chunk).await.is_err() {
                return End::Closed;
            }
            account(&shared, conn, dir, &chunk, &mut framer);
            if reset {
                shared.counters.reset.fetch_add(1, Ordering::Relaxed);
                return End::Reset;
            }
        }
        End::Closed
    };
    // The writer ends the pump: after the reader's EOF it first writes what is queued.
    tokio::pin!(reader);
    tokio::pin!(writer);
    let mut reading = true;
    loop {
        tokio::select! {
            _ = &mut reader, if reading => reading = false,
            end = &mut writer => return end,
        }
    }
}

/// Hands the frames `chunk` completes to the tap, if one is set.
fn tap(shared: &Shared, conn: u64, dir: Direction, chunk: &[u8], framer: &mut Framer) {
    let tap = shared.tap.lock().unwrap().clone();
    framer.feed(chunk, tap.is_some(), |frame| {
        if let Some(t) = &tap {
            let _ = t.send(TappedFrame {
                node: shared.node,
                conn,
                direction: dir,
                frame: Bytes::from(frame),
            });
        }
    });
}

/// Byte counters and frame counts for in-flight tracking.
fn account(shared: &Shared, conn: u64, dir: Direction, chunk: &[u8], framer: &mut Framer) {
    let counter = match dir {
        Direction::ToBroker => &shared.counters.to_broker,
        Direction::ToClient => &shared.counters.to_client,
    };
    counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    let mut completed = 0u64;
    framer.feed(chunk, false, |_| completed += 1);
    // Requests are counted as the client writes them (see `count_requests_sent`).
    if completed > 0 && dir == Direction::ToClient {
        let mut frames = shared.frames.lock().unwrap();
        if let Some(f) = frames.get_mut(&conn) {
            f.1 += completed;
        }
        drop(frames);
        shared.frames_changed.notify_all();
    }
}

/// Counts the requests the client has written on `conn` (complete frames read from it).
fn count_requests_sent(shared: &Shared, conn: u64, chunk: &[u8], framer: &mut Framer) {
    let mut completed = 0u64;
    framer.feed(chunk, false, |_| completed += 1);
    if completed > 0 {
        let mut frames = shared.frames.lock().unwrap();
        if let Some(f) = frames.get_mut(&conn) {
            f.0 += completed;
        }
        drop(frames);
        shared.frames_changed.notify_all();
    }
}
