//! The producer task: it owns the core and the command layer ([`DriverLoop`]), runs the
//! connection tasks and wakes on the network, the handles' commands and the core's deadline.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use producer_core::{Config, ConnId, Event, Output, Producer, WireBytes};
use producer_driver::panic::InjectedPanics;
use producer_driver::{step, Driven, DriverLoop, Intake, Tracked};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tracing::{debug, info};

use crate::connection::{ConnIo, Net};
use crate::delivery::{OnDelivery, ReplyTo};
use crate::handle::ProducerHandle;
use crate::shared::{OnEvent, Shared, TokioHost};
use crate::token::TokenProvider;

/// The driver's settings, checked by [`crate::ProducerBuilder::start`].
pub(crate) struct Settings {
    pub(crate) command_capacity: usize,
    pub(crate) event_capacity: usize,
    pub(crate) read_buffer: usize,
    pub(crate) write_backlog: usize,
    pub(crate) on_delivery: Option<OnDelivery>,
    /// Receives every core event.
    pub(crate) on_event: Option<OnEvent>,
    /// TLS for every connection (`SSL`, `SASL_SSL`).
    pub(crate) tls: Option<producer_driver::tls::TlsSetup>,
    /// The OAUTHBEARER token provider, if any.
    pub(crate) token_provider: Option<TokenProvider>,
    /// The application's partitioner, if any.
    pub(crate) partitioner: Option<Box<dyn producer_core::Partitioner>>,
    /// The application's interceptors.
    pub(crate) interceptors: producer_driver::Interceptors,
    /// Panics to inject (tests only).
    pub(crate) injected: InjectedPanics,
    /// The send calls stamp the caller's trace context on each record
    /// (`ProducerBuilder::opentelemetry`).
    #[cfg(feature = "opentelemetry")]
    pub(crate) stamp_trace_context: bool,
}

/// Spawns the producer task for `config` on `runtime`; the first handle to it.
pub(crate) fn spawn(
    runtime: &tokio::runtime::Handle,
    config: Config,
    settings: Settings,
) -> ProducerHandle {
    let (net_tx, net_rx) = mpsc::channel(settings.event_capacity);
    #[cfg_attr(not(feature = "opentelemetry"), allow(unused_mut))]
    let mut shared = Shared::new(
        settings.command_capacity,
        config.buffer_memory,
        config.transactional_id.is_some(),
    );
    #[cfg(feature = "opentelemetry")]
    {
        shared.stamp_trace_context = settings.stamp_trace_context;
    }
    let shared = Arc::new(shared);
    let host = TokioHost {
        on_delivery: settings.on_delivery,
        on_event: settings.on_event,
        shared: shared.clone(),
    };
    let mut core = Producer::new(config, now());
    // The wall clock's anchor for telemetry's OTLP times (the core reads no clock).
    if let Ok(unix) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        core.set_wall_clock(now(), unix);
    }
    if let Some(p) = settings.partitioner {
        core.set_partitioner(p);
    }
    shared
        .queue
        .start_from(producer_driver::CoreLoad::of(&core));
    let actor = Actor {
        core,
        layer: DriverLoop::new(host, settings.injected).with_interceptors(settings.interceptors),
        io: Io {
            net_tx,
            net_rx,
            conns: HashMap::new(),
            closing: Vec::new(),
            read_buffer: settings.read_buffer,
            write_backlog: settings.write_backlog,
            congested: 0,
            tls: settings.tls,
            token_provider: settings.token_provider,
        },
        shared: shared.clone(),
    };
    runtime.spawn(actor.run());
    ProducerHandle::new(shared)
}

/// Resolves when the actor has commands to handle: at once when it still holds some, else
/// when a handle queues one.
async fn commands(ready: &Notify, holding: bool) {
    if !holding {
        ready.notified().await;
    }
}

use crate::shared::now;

/// Commands or events handled per wake-up before the outputs are drained.
const BATCH: usize = 128;

/// How the task takes commands: [`BATCH`] per wake-up.
const INTAKE: Intake = Intake {
    per_call: BATCH,
    release_every: BATCH,
};

/// How long a connection the core closed may take to write the frames already queued for it.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The actor's side of one connection task.
struct ConnHandle {
    writer: mpsc::UnboundedSender<WireBytes>,
    task: JoinHandle<()>,
    /// Bytes handed to the writer and not yet written (shared with the connection task).
    backlog: Arc<AtomicUsize>,
    /// The backlog is over the limit: counted in [`Io::congested`].
    over: bool,
    /// The task reported the connection established ([`Net::Connected`]).
    connected: bool,
}

/// What woke the producer task.
enum Wake {
    Net(Net),
    Commands,
    Timer,
}

/// What the producer task does after acting on the core's outputs.
enum Next {
    /// Wait for the network, commands, or the core's deadline (if any).
    Wait(Option<std::time::Instant>),
    /// The core has closed: stop.
    Closed,
}

/// The core's records as the core holds them: each with where its report goes.
type Core = Producer<Tracked<ReplyTo>>;

struct Actor {
    core: Core,
    /// The commands, the flushes, the reports and events.
    layer: DriverLoop<TokioHost>,
    /// The connection tasks.
    io: Io,
    shared: Arc<Shared>,
}

/// The task's network side: a task per connection, and the token provider's.
struct Io {
    net_tx: mpsc::Sender<Net>,
    net_rx: mpsc::Receiver<Net>,
    conns: HashMap<ConnId, ConnHandle>,
    /// Tasks of connections the core closed, still writing their queued frames.
    closing: Vec<JoinHandle<()>>,
    read_buffer: usize,
    write_backlog: usize,
    /// Connections whose write backlog is over the limit; while any is, no command is read.
    congested: usize,
    tls: Option<producer_driver::tls::TlsSetup>,
    token_provider: Option<TokenProvider>,
}

/// However the producer task ends (a panic this loop could not contain, the runtime shutting
/// down under it), the handles stop waiting: the queue stops (the commands still in it are
/// dropped, so their waiters and delivery futures resolve) and later sends are refused.
struct StopOnDrop(Arc<Shared>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.closing.store(true, Ordering::Release);
        drop(self.0.queue.stop());
        self.0.space.notify_waiters();
    }
}

impl Actor {
    async fn run(mut self) {
        let _stop = StopOnDrop(self.shared.clone());
        let sleep = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(sleep);
        while let Some(Next::Wait(deadline)) = step(&mut self, Actor::next) {
            if let Some(d) = deadline {
                sleep.as_mut().reset(tokio::time::Instant::from_std(d));
            }
            // Behind a record held aside for room, commands are only read for their
            // deadlines: that adds nothing to the connections.
            let read_cmds = (self.layer.reads_commands() && self.io.congested == 0)
                || self.layer.scans_commands();
            let holding = self.layer.holds_commands();
            let wake = tokio::select! {
                biased;
                Some(ev) = self.io.net_rx.recv() => Wake::Net(ev),
                () = commands(&self.shared.cmd_ready, holding), if read_cmds => Wake::Commands,
                () = &mut sleep, if deadline.is_some() => Wake::Timer,
            };
            if step(&mut self, |a| a.on_wake(wake)).is_none() {
                break;
            }
        }
        self.shutdown().await;
    }

    /// Acts on the core's outputs; whether the core closed, else its deadline.
    fn next(&mut self) -> Next {
        self.act_on_outputs();
        if self.core.is_closed() {
            return Next::Closed;
        }
        // The deadlines of the timed commands behind a record held aside, too.
        let at = match (self.core.poll_timeout(), self.layer.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Next::Wait(at)
    }

    /// Handles what woke the task, then the core's deadline if it passed, then the record held
    /// aside.
    fn on_wake(&mut self, wake: Wake) {
        match wake {
            Wake::Net(ev) => {
                // A clock reading per event: handling a chunk of responses takes a while.
                self.on_net(now(), ev);
                for _ in 0..BATCH {
                    match self.io.net_rx.try_recv() {
                        Ok(ev) => self.on_net(now(), ev),
                        Err(_) => break,
                    }
                }
            }
            Wake::Commands => {
                let _ = self
                    .layer
                    .take_commands(&mut self.core, &self.shared.queue, INTAKE, now);
            }
            Wake::Timer => {}
        }
        // Compare against the clock: the sleep may not be what woke us, and a woken sleep
        // may race with the deadline moving.
        let t = now();
        if self.core.poll_timeout().is_some_and(|d| d <= t) {
            self.core.handle_timeout(t);
        }
        self.layer
            .retry_stash(&mut self.core, &self.shared.queue, now());
    }

    /// Everything is reported and the core has closed (or the task stops after a panic): stop
    /// the connections, refuse what is still queued, and wake the waiters.
    async fn shutdown(&mut self) {
        for (_, c) in self.io.conns.drain() {
            c.task.abort();
        }
        // Connections the core closed write what was queued for them before `close` returns.
        let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
        for task in self.io.closing.drain(..) {
            let abort = task.abort_handle();
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                abort.abort();
            }
        }
        self.shared.closing.store(true, Ordering::Release);
        self.layer
            .shutdown(&mut self.core, &self.shared.queue, &self.shared.last_words);
        info!("producer task stopped");
    }

    /// Handles one network event; `t` is a recent clock reading.
    fn on_net(&mut self, t: std::time::Instant, ev: Net) {
        let io = &mut self.io;
        match ev {
            Net::Connected(conn) => {
                if let Some(c) = io.conns.get_mut(&conn) {
                    c.connected = true;
                }
                self.core.handle_connected(t, conn)
            }
            Net::ConnectFailed(conn, reason) => {
                io.remove_conn(conn);
                self.core.handle_connect_failed(t, conn, reason);
            }
            Net::Token(Ok(token)) => self.core.handle_token(t, token),
            Net::Token(Err(panicked)) => {
                self.layer.emit(&panicked);
                let message = match &panicked {
                    Event::CallbackPanicked { message, .. } => message.as_str(),
                    _ => "",
                };
                let reason = format!("the OAUTHBEARER token provider panicked: {message}");
                self.core.handle_token(t, Err(reason));
            }
            Net::TlsFailed(conn, reason) => {
                io.remove_conn(conn);
                self.core.handle_tls_failed(t, conn, reason);
            }
            Net::Data(conn, bytes) => self.core.handle_read(t, conn, &bytes),
            Net::Drained(conn) => {
                let limit = io.write_backlog;
                if let Some(c) = io.conns.get_mut(&conn) {
                    if c.over && c.backlog.load(Ordering::Acquire) <= limit {
                        c.over = false;
                        io.congested -= 1;
                    }
                }
            }
            Net::Closed(conn, reason) => {
                io.remove_conn(conn);
                self.core.handle_disconnected(t, conn, reason);
            }
        }
    }
}

impl Driven for Actor {
    type Host = TokioHost;

    fn parts(&mut self) -> (&mut Core, &mut DriverLoop<TokioHost>) {
        (&mut self.core, &mut self.layer)
    }

    /// Acts on every output of the core, and flushes again when metadata arrived for a
    /// pending flush (see [`DriverLoop::settle`]).
    fn act_on_outputs(&mut self) {
        loop {
            let io = &mut self.io;
            let queue = &self.shared.queue;
            self.layer
                .drain(&mut self.core, |core, out| io.output(core, out));
            if !self.layer.settle(&mut self.core, queue) {
                return;
            }
            self.core.flush(now());
        }
    }
}

impl Io {
    /// Acts on an output of the core that is not a report: a connection to open, a frame to
    /// write, a connection to close, a token to fetch.
    fn output(&mut self, core: &mut Core, out: Output<Tracked<ReplyTo>>) {
        match out {
            Output::Connect { conn, host, port } => self.connect(conn, host, port),
            Output::Transmit { conn, bytes } => self.transmit(conn, bytes),
            Output::Disconnect { conn } => {
                if self.remove_conn(conn) {
                    debug!(conn = conn.as_u64(), "connection closed by the producer");
                }
            }
            Output::TokenRequest => match &self.token_provider {
                // The core asks once at a time: one provider task at most.
                Some(provider) => {
                    let (provider, net) = (provider.clone(), self.net_tx.clone());
                    tokio::spawn(async move {
                        let token = provider.fetch().await;
                        let _ = net.send(Net::Token(token)).await;
                    });
                }
                // Without a provider, the core fails the connections that wait for a token,
                // with this reason.
                None => core.handle_token(now(), Err(NO_TOKEN_PROVIDER.into())),
            },
            // Reports, transactional results and events are the command layer's.
            Output::Delivery(_) | Output::Transaction(_) | Output::Event(_) => {}
        }
    }

    /// Hands a frame to its connection's task; pauses records while the connection's backlog
    /// is over the limit.
    fn transmit(&mut self, conn: ConnId, bytes: WireBytes) {
        let Some(c) = self.conns.get_mut(&conn) else {
            debug!(
                conn = conn.as_u64(),
                "transmit for a connection that is gone"
            );
            return;
        };
        let len = bytes.len();
        // Counted before the writer can see the frame, so its decrement never comes first.
        let backlog = c.backlog.fetch_add(len, Ordering::AcqRel) + len;
        // A send error means the task ended; its Closed event is on the way.
        if c.writer.send(bytes).is_ok() && backlog > self.write_backlog && !c.over {
            c.over = true;
            self.congested += 1;
            debug!(
                conn = conn.as_u64(),
                backlog, "write backlog over the limit; pausing records"
            );
        }
    }

    fn connect(&mut self, conn: ConnId, host: String, port: u16) {
        let (writer, frames) = mpsc::unbounded_channel();
        let backlog = Arc::new(AtomicUsize::new(0));
        let io = ConnIo {
            conn,
            frames,
            net: self.net_tx.clone(),
            backlog: backlog.clone(),
            backlog_limit: self.write_backlog,
            read_buffer: self.read_buffer,
            tls: self.tls.clone(),
        };
        let task = tokio::spawn(io.run(host, port));
        self.conns.insert(
            conn,
            ConnHandle {
                writer,
                task,
                backlog,
                over: false,
                connected: false,
            },
        );
    }

    /// Forgets a connection; whether it was known. An established connection's task first
    /// writes the frames already handed to it (the core counts them as sent: with acks=0 they
    /// are even reported delivered), then closes; it is stopped outright if that takes longer
    /// than [`CLOSE_GRACE`]. A connection still connecting has nothing to write: its attempt
    /// is abandoned at once (this is how the core's connect deadline, `request_timeout`, ends
    /// an attempt that hangs).
    fn remove_conn(&mut self, conn: ConnId) -> bool {
        let Some(c) = self.conns.remove(&conn) else {
            return false;
        };
        let ConnHandle {
            writer,
            task,
            over,
            connected,
            ..
        } = c;
        if over {
            self.congested -= 1;
        }
        if !connected {
            task.abort();
            return true;
        }
        drop(writer); // the writer loop ends once the queued frames are written
        self.closing.retain(|t| !t.is_finished());
        self.closing.push(task);
        true
    }
}

/// Why OAUTHBEARER fails on this driver today.
pub(crate) const NO_TOKEN_PROVIDER: &str =
    "producer-tokio has no OAUTHBEARER token provider (ProducerBuilder::oauth_token_provider)";
