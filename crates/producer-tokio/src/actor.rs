//! The producer task: it owns the core, takes the handles' commands, runs the connection
//! tasks and reports every record.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use producer_core::{
    Callback, Config, ConnId, Event, MetricsSnapshot, Output, ProduceError, Record,
    SendErrorReason, TransactionError, WireBytes,
};
use producer_driver::panic::InjectedPanics;
use producer_driver::{call_user, contain, log_event, timestamp, Cohort, FlushTracker};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use tracing::{debug, error, info};

use crate::connection::{ConnIo, Net};
use crate::delivery::{failure, DeliveryResult, OnDelivery, Reply, ReplyTo, Report};
use crate::error::DeliveryError;
use crate::handle::{Cmd, ProducerHandle, Shared, TxnCmd};
use crate::token::TokenProvider;

/// The driver's settings, checked by [`crate::ProducerBuilder::start`].
pub(crate) struct Settings {
    pub(crate) command_capacity: usize,
    pub(crate) event_capacity: usize,
    pub(crate) read_buffer: usize,
    pub(crate) write_backlog: usize,
    pub(crate) on_delivery: Option<OnDelivery>,
    /// Receives every core event.
    pub(crate) on_event: Option<crate::builder::OnEvent>,
    /// TLS for every connection (`SSL`, `SASL_SSL`).
    pub(crate) tls: Option<producer_driver::tls::TlsSetup>,
    /// The OAUTHBEARER token provider, if any.
    pub(crate) token_provider: Option<TokenProvider>,
    /// Panics to inject (tests only).
    pub(crate) injected: InjectedPanics,
}

/// Spawns the producer task for `config` on `runtime`; the first handle to it.
pub(crate) fn spawn(
    runtime: &tokio::runtime::Handle,
    config: Config,
    settings: Settings,
) -> ProducerHandle {
    let (net_tx, net_rx) = mpsc::channel(settings.event_capacity);
    let shared = Arc::new(Shared::new(settings.command_capacity, config.buffer_memory));
    let actor = Actor {
        core: producer_core::Producer::new(config, now()),
        taken: VecDeque::new(),
        cmd_open: true,
        net_tx,
        net_rx,
        conns: HashMap::new(),
        closing: Vec::new(),
        stash: None,
        shared: shared.clone(),
        flushes: FlushTracker::default(),
        on_delivery: settings.on_delivery,
        on_event: settings.on_event,
        close_waiters: Vec::new(),
        reflush: false,
        read_buffer: settings.read_buffer,
        write_backlog: settings.write_backlog,
        congested: 0,
        tls: settings.tls,
        token_provider: settings.token_provider,
        txn_waiter: None,
        txn_flushes: Vec::new(),
        handed: 0,
        injected: settings.injected,
        panic_at: settings.injected.panic_at(),
        panicked: None,
        core_broken: false,
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

/// The clock the core runs on: tokio's, so tests may pause time.
fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// Commands or events handled per wake-up before the outputs are drained.
const BATCH: usize = 128;

/// How long a connection the core closed may take to write the frames already queued for it.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The actor's side of one connection task.
struct ConnHandle {
    writer: mpsc::UnboundedSender<WireBytes>,
    task: JoinHandle<()>,
    /// Bytes handed to the writer and not yet written (shared with the connection task).
    backlog: Arc<AtomicUsize>,
    /// The backlog is over the limit: counted in [`Actor::congested`].
    over: bool,
    /// The task reported the connection established ([`Net::Connected`]).
    connected: bool,
}

/// Answers flushes that are done (on every report: inlined, as there is rarely any).
#[inline(always)]
fn answer(done: impl Iterator<Item = oneshot::Sender<()>>) {
    for waiter in done {
        let _ = waiter.send(());
    }
}

/// A record the core refused as `Full`, held aside until reports free space: while it is
/// here no command is read. Its bytes stay counted in the command queue's held bytes.
struct Stashed {
    record: Record,
    reply: Reply,
    bytes: usize,
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

struct Actor {
    core: producer_core::Producer<Reply>,
    /// Commands taken from the queue and not handled yet (still held in the queue's count).
    taken: VecDeque<Cmd>,
    /// False once every handle is gone.
    cmd_open: bool,
    net_tx: mpsc::Sender<Net>,
    net_rx: mpsc::Receiver<Net>,
    conns: HashMap<ConnId, ConnHandle>,
    /// Tasks of connections the core closed, still writing their queued frames.
    closing: Vec<JoinHandle<()>>,
    /// The one record the core refused as `Full`; while it is here no command is read.
    stash: Option<Stashed>,
    shared: Arc<Shared>,
    /// Unreported records per flush cohort, and the flushes waiting for them.
    flushes: FlushTracker<oneshot::Sender<()>>,
    /// Receives the reports of detached records.
    on_delivery: Option<OnDelivery>,
    /// Receives every core event.
    on_event: Option<crate::builder::OnEvent>,
    close_waiters: Vec<oneshot::Sender<()>>,
    /// Metadata arrived while a flush is pending: flush the core again.
    reflush: bool,
    read_buffer: usize,
    write_backlog: usize,
    /// Connections whose write backlog is over the limit; while any is, no command is read.
    congested: usize,
    tls: Option<producer_driver::tls::TlsSetup>,
    token_provider: Option<TokenProvider>,
    /// Who waits for the transactional operation under way (the core runs one at a time).
    txn_waiter: Option<oneshot::Sender<Result<(), TransactionError>>>,
    /// Flushes of a transactional producer, answered once every record is acknowledged.
    txn_flushes: Vec<oneshot::Sender<()>>,
    /// Records handed to the core so far (for [`InjectedPanics`]).
    handed: u64,
    injected: InjectedPanics,
    /// `injected.panic_at()`, compared with `handed` before every record.
    panic_at: u64,
    /// The message of a panic in the producer's own code: the task is stopping because of it.
    panicked: Option<String>,
    /// Failing the records after that panic panicked too: the core is not touched again.
    core_broken: bool,
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
        loop {
            let deadline = match contain(|| self.act_on_outputs()) {
                Ok(Next::Wait(deadline)) => deadline,
                Ok(Next::Closed) => break,
                Err(message) => {
                    self.after_panic(message);
                    break;
                }
            };
            if let Some(d) = deadline {
                sleep.as_mut().reset(tokio::time::Instant::from_std(d));
            }
            let read_cmds = self.cmd_open && self.stash.is_none() && self.congested == 0;
            let wake = tokio::select! {
                biased;
                Some(ev) = self.net_rx.recv() => Wake::Net(ev),
                () = commands(&self.shared.cmd_ready, !self.taken.is_empty()), if read_cmds => {
                    Wake::Commands
                }
                () = &mut sleep, if deadline.is_some() => Wake::Timer,
            };
            if let Err(message) = contain(|| self.on_wake(wake)) {
                self.after_panic(message);
                break;
            }
        }
        self.shutdown().await;
    }

    /// Acts on the core's outputs (and flushes again when metadata arrived for a pending
    /// flush); whether the core closed, else its deadline.
    fn act_on_outputs(&mut self) -> Next {
        self.drain_outputs();
        if std::mem::take(&mut self.reflush) {
            // Records that waited for their topic's metadata were just appended to batches
            // that linger as usual: a pending flush covers them too.
            self.core.flush(now());
            self.drain_outputs();
        }
        if self.core.is_closed() {
            return Next::Closed;
        }
        Next::Wait(self.core.poll_timeout())
    }

    /// Handles what woke the task, then the core's deadline if it passed, then the record held
    /// aside.
    fn on_wake(&mut self, wake: Wake) {
        match wake {
            Wake::Net(ev) => {
                // A clock reading per event: handling a chunk of responses takes a while.
                self.on_net(now(), ev);
                for _ in 0..BATCH {
                    match self.net_rx.try_recv() {
                        Ok(ev) => self.on_net(now(), ev),
                        Err(_) => break,
                    }
                }
            }
            Wake::Commands => self.take_commands(),
            Wake::Timer => {}
        }
        // Compare against the clock: the sleep may not be what woke us, and a woken sleep
        // may race with the deadline moving.
        let t = now();
        if self.core.poll_timeout().is_some_and(|d| d <= t) {
            self.core.handle_timeout(t);
        }
        self.retry_stash();
    }

    /// Handles up to [`BATCH`] commands, taking the whole queue when the previous take is
    /// used up.
    fn take_commands(&mut self) {
        if self.taken.is_empty() {
            self.sync_queue(0, 0);
        }
        // One reading of each clock for the whole batch: it is handled within microseconds.
        // Records without a timestamp get the wall clock here rather than in the handles: one
        // reading per batch, not per record.
        let t = now();
        let wall_ms = timestamp::wall_clock_ms();
        let (mut handled, mut bytes) = (0, 0);
        while handled < BATCH && self.stash.is_none() {
            if self.handed == self.panic_at && matches!(self.taken.front(), Some(Cmd::Send { .. }))
            {
                InjectedPanics::before_record(self.handed);
            }
            let Some(command) = self.taken.pop_front() else {
                break;
            };
            handled += 1;
            bytes += command.bytes();
            self.on_cmd(t, wall_ms, command);
        }
        // A record held aside stays counted until the core takes it.
        bytes -= self.stash.as_ref().map_or(0, |s| s.bytes);
        self.sync_queue(handled, bytes);
    }

    /// The producer's own code panicked (the core's, or this task's): fails every record the
    /// core holds, with the panic's message, and closes it; if that panics too, the core is
    /// left alone (its records' futures resolve as lost when it is dropped). The task then
    /// stops ([`Actor::shutdown`]).
    fn after_panic(&mut self, message: String) {
        error!(%message, "the producer task panicked in its own code; every record fails");
        self.panicked = Some(message.clone());
        let injected = self.injected;
        let failed = contain(|| {
            injected.before_recovery();
            self.core.fail_after_panic(message);
            self.drain_outputs();
            self.core.is_closed()
        });
        if failed != Ok(true) {
            error!("failing the records after the panic failed too; they are lost with the task");
            self.core_broken = true;
        }
    }

    /// Everything is reported and the core has closed (or the task stops after a panic): stop
    /// the connections, refuse what is still queued, and wake the waiters.
    async fn shutdown(&mut self) {
        for (_, c) in self.conns.drain() {
            c.task.abort();
        }
        // Connections the core closed write what was queued for them before `close` returns.
        let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
        for task in self.closing.drain(..) {
            let abort = task.abort_handle();
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                abort.abort();
            }
        }
        self.shared.closing.store(true, Ordering::Release);
        let (last, txn_failure) = self.last_words();
        *self
            .shared
            .transaction_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = txn_failure.clone();
        let stopped = txn_failure.unwrap_or(TransactionError::Closed);
        *self
            .shared
            .final_metrics
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(last.clone());
        let queued = self.shared.queue.stop();
        // Senders waiting for space see the queue stopped and give up.
        self.shared.space.notify_waiters();
        // Records the core never took: closed, or failed with the panic that stopped the task
        // (they surely never went out).
        let never_sent = match &self.panicked {
            Some(message) => ProduceError::Panicked {
                message: message.clone(),
                possibly_persisted: false,
            },
            None => ProduceError::Closed,
        };
        if let Some(s) = self.stash.take() {
            self.fail(s.reply, never_sent.clone(), s.record);
        }
        let taken = std::mem::take(&mut self.taken);
        for command in taken.into_iter().chain(queued) {
            match command {
                Cmd::Send { record, reply, .. } => {
                    self.deliver(reply, failure(never_sent.clone(), record));
                }
                Cmd::Flush(tx) | Cmd::Close(tx) => {
                    let _ = tx.send(());
                }
                Cmd::Metrics(tx) => {
                    let _ = tx.send(last.clone());
                }
                Cmd::Txn { reply, .. } => {
                    let _ = reply.send(Err(stopped.clone()));
                }
            }
        }
        if let Some(w) = self.txn_waiter.take() {
            let _ = w.send(Err(stopped));
        }
        answer(self.txn_flushes.drain(..));
        answer(self.flushes.release_all());
        for tx in self.close_waiters.drain(..) {
            let _ = tx.send(());
        }
        info!("producer task stopped");
    }

    /// The core's last metrics and its transactional failure, as the task stops; the defaults
    /// when the core cannot be trusted to give them (after a panic in failing its records).
    fn last_words(&self) -> (MetricsSnapshot, Option<TransactionError>) {
        if self.core_broken {
            return (MetricsSnapshot::default(), None);
        }
        contain(|| (self.core.metrics(), self.core.transaction_failure()))
            .unwrap_or_else(|_| (MetricsSnapshot::default(), None))
    }

    /// Settles with the queue after handling `handled` commands worth `bytes`: they no longer
    /// count against the capacity (the records among them count in the core now); takes
    /// everything queued when the taken commands are used up; wakes the senders waiting for
    /// space once there is room; starts closing when every handle is gone and nothing is left.
    fn sync_queue(&mut self, handled: usize, bytes: usize) {
        let core_bytes = self.core.buffered_bytes();
        self.shared.queue.release(handled, bytes, core_bytes);
        let refill = self.shared.queue.refill(&mut self.taken, core_bytes);
        // Waiting senders are woken once half the capacity is free, not for every batch: a
        // sender that outpaces the actor then sleeps once per half queue, not per batch.
        if refill.wake_senders {
            self.shared.space.notify_waiters();
        }
        if refill.finished && self.cmd_open {
            debug!("every producer handle dropped; closing");
            self.cmd_open = false;
            self.core.close(now());
        }
    }

    /// Handles one command; `t` and `wall_ms` are recent readings of the monotonic and the
    /// wall clock (the latter for a record without a timestamp).
    fn on_cmd(&mut self, t: std::time::Instant, wall_ms: i64, cmd: Cmd) {
        match cmd {
            Cmd::Send {
                mut record,
                reply,
                bytes,
            } => {
                timestamp::fill_at(&mut record, wall_ms);
                let cohort = self.flushes.accept();
                self.submit(t, record, Reply { to: reply, cohort }, bytes);
            }
            Cmd::Flush(tx) if self.core.config().transactional_id.is_some() => {
                // Reports wait for the transaction's end: the flush is done once every record
                // is acknowledged (as the Java client's, which waits for all of them).
                self.core.flush(t);
                self.txn_flushes.push(tx);
            }
            Cmd::Flush(tx) => {
                answer(self.flushes.flush(tx));
                self.core.flush(t);
            }
            Cmd::Close(tx) => {
                self.close_waiters.push(tx);
                self.core.close(t);
            }
            Cmd::Metrics(tx) => {
                let _ = tx.send(self.core.metrics());
            }
            Cmd::Txn { op, reply } => {
                let started = match op {
                    TxnCmd::Init => self.core.init_transactions(t),
                    TxnCmd::Begin => {
                        // Local: done at once, no completion output follows.
                        let _ = reply.send(self.core.begin_transaction(t));
                        return;
                    }
                    TxnCmd::SendOffsets(offsets, group) => {
                        self.core.send_offsets_to_transaction(t, offsets, group)
                    }
                    TxnCmd::Commit => self.core.commit_transaction(t),
                    TxnCmd::Abort => self.core.abort_transaction(t),
                };
                match started {
                    // The core runs one operation at a time: at most one waiter.
                    Ok(()) => self.txn_waiter = Some(reply),
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
        }
    }

    /// Hands a record to the core (it counts `bytes` in the command queue until the core has
    /// it); `Full` keeps it aside, any other refusal fails it.
    fn submit(&mut self, t: std::time::Instant, record: Record, reply: Reply, bytes: usize) {
        self.handed += 1;
        match self.core.send(t, record, reply) {
            Ok(()) => {}
            Err(e) if e.reason == SendErrorReason::Full => {
                self.handed -= 1;
                self.stash = Some(Stashed {
                    record: e.record,
                    reply: e.opaque,
                    bytes,
                });
                self.shared.core_full.store(true, Ordering::Release);
            }
            Err(e) => self.fail(
                e.opaque,
                ProduceError::Refused(Box::new(e.reason)),
                e.record,
            ),
        }
    }

    /// Hands the record held aside to the core again; once the core took it, its bytes leave
    /// the command queue's count.
    fn retry_stash(&mut self) {
        if let Some(s) = self.stash.take() {
            self.shared.core_full.store(false, Ordering::Release);
            let bytes = s.bytes;
            self.submit(now(), s.record, s.reply, bytes);
            if self.stash.is_none() {
                let core_bytes = self.core.buffered_bytes();
                self.shared.queue.release(0, bytes, core_bytes);
            }
        }
    }

    /// Reports a record the core never took as failed, with the record back.
    fn fail(&mut self, reply: Reply, error: ProduceError, record: Record) {
        self.report(reply, failure(error, record));
    }

    /// Hands one record's report to its future or the callback, then counts it reported.
    fn report(&mut self, reply: Reply, result: DeliveryResult) {
        let Reply { to, cohort } = reply;
        self.deliver(to, result);
        self.settle(cohort);
    }

    /// Hands one report to its future or the delivery callback; a callback that panics is
    /// named by an event, and the report counts as handed over.
    #[inline]
    fn deliver(&mut self, to: ReplyTo, result: DeliveryResult) {
        match to {
            ReplyTo::Future(tx) => tx.send(result),
            ReplyTo::Detached(tag) => {
                let Some(f) = &self.on_delivery else {
                    return ReplyTo::Detached(tag).report(None, result);
                };
                // The report moves into the callback through the closure's reference, not by
                // value into the closure.
                let mut report = Some(Report { tag, result });
                let call = || {
                    if let Some(r) = report.take() {
                        f.call(r)
                    }
                };
                if let Err(panicked) = call_user(Callback::Delivery, call) {
                    self.emit(&panicked);
                }
            }
        }
    }

    /// Logs an event and hands it to the event callback. A callback that panics is named by an
    /// event of its own, logged and handed to it once (a second panic is only logged).
    fn emit(&self, event: &Event) {
        log_event(event);
        let Some(f) = &self.on_event else {
            return;
        };
        if let Err(panicked) = call_user(Callback::Event, || (f.0)(event)) {
            log_event(&panicked);
            if let Err(again) = call_user(Callback::Event, || (f.0)(&panicked)) {
                log_event(&again);
            }
        }
    }

    /// One record of `cohort` has its report.
    fn settle(&mut self, cohort: Cohort) {
        answer(self.flushes.reported(cohort));
    }

    /// Handles one network event; `t` is a recent clock reading.
    fn on_net(&mut self, t: std::time::Instant, ev: Net) {
        match ev {
            Net::Connected(conn) => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.connected = true;
                }
                self.core.handle_connected(t, conn)
            }
            Net::ConnectFailed(conn, reason) => {
                self.remove_conn(conn);
                self.core.handle_connect_failed(t, conn, reason);
            }
            Net::Token(Ok(token)) => self.core.handle_token(t, token),
            Net::Token(Err(panicked)) => {
                self.emit(&panicked);
                let message = match &panicked {
                    Event::CallbackPanicked { message, .. } => message.as_str(),
                    _ => "",
                };
                let reason = format!("the OAUTHBEARER token provider panicked: {message}");
                self.core.handle_token(t, Err(reason));
            }
            Net::TlsFailed(conn, reason) => {
                self.remove_conn(conn);
                self.core.handle_tls_failed(t, conn, reason);
            }
            Net::Data(conn, bytes) => self.core.handle_read(t, conn, &bytes),
            Net::Drained(conn) => {
                let limit = self.write_backlog;
                if let Some(c) = self.conns.get_mut(&conn) {
                    if c.over && c.backlog.load(Ordering::Acquire) <= limit {
                        c.over = false;
                        self.congested -= 1;
                    }
                }
            }
            Net::Closed(conn, reason) => {
                self.remove_conn(conn);
                self.core.handle_disconnected(t, conn, reason);
            }
        }
    }

    fn drain_outputs(&mut self) {
        self.drain_core();
        // Reports freed space in the core: senders waiting for room may go.
        if self.shared.queue.settle(self.core.buffered_bytes()) {
            self.shared.space.notify_waiters();
        }
        if !self.txn_flushes.is_empty() && self.core.unacknowledged_records() == 0 {
            answer(self.txn_flushes.drain(..));
        }
    }

    fn drain_core(&mut self) {
        while let Some(out) = self.core.poll_output() {
            match out {
                Output::Connect { conn, host, port } => self.connect(conn, host, port),
                Output::Transmit { conn, bytes } => self.transmit(conn, bytes),
                Output::Disconnect { conn } => {
                    let known = self.remove_conn(conn);
                    if known {
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
                    // Without a provider, the core fails the connections that wait for a
                    // token, with this reason.
                    None => self.core.handle_token(now(), Err(NO_TOKEN_PROVIDER.into())),
                },
                Output::Delivery(d) => {
                    let result = d.result.map_err(DeliveryError::Failed);
                    self.report(d.opaque, result);
                }
                Output::Transaction(r) => {
                    if let Some(w) = self.txn_waiter.take() {
                        let _ = w.send(r.result);
                    }
                }
                Output::Event(e) => {
                    if e == Event::MetadataUpdated && self.flushes.is_waiting() {
                        self.reflush = true;
                    }
                    self.emit(&e);
                }
            }
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
