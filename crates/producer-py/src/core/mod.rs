//! `Core`: the sans-IO producer owned by a Python object, driven by the asyncio loop it is
//! attached to.
//!
//! The Python `Producer` (in `kafka_sansio/_producer.py`) subclasses it: `send_nowait` and
//! `send_batch` are this class's own methods, so a record crosses from Python into the core in
//! one call. Everything else the loop does goes through one call per loop turn, `_turn_poll`:
//! it drains the core's outputs, resolves every report's future from Rust, writes what the core
//! transmits to the transports, and hands back to Python only what needs the loop (connections
//! to open or close, events to log) and the core's next deadline, for the one `call_at` handle.
//!
//! All calls come from the loop's thread with the GIL held; the core reads no clock, so this
//! driver reads the monotonic clock (`Instant::now`) at each input.

use std::sync::Arc;
use std::time::{Duration, Instant};

use producer_core::{
    ConsumerGroupMetadata, OAuthToken, OffsetToCommit, Producer, Record, SendError, SendErrorReason,
};
use producer_driver::{timestamp, Cohort, FlushTracker};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::gc::{PyTraverseError, PyVisit};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

mod drain;

use crate::conns::Connections;
use crate::convert::{self, TopicNames};
use crate::settings;

/// What each record carries through the core: its future and its flush cohort.
pub(crate) struct Pending {
    future: Py<PyAny>,
    cohort: Cohort,
}

/// The loop's methods this driver calls, bound once at `_attach`.
struct Attached {
    create_future: Py<PyAny>,
    call_soon: Py<PyAny>,
    /// The Python side's `_turn`, scheduled with `call_soon` after an input.
    turn: Py<PyAny>,
}

/// Python's `logging` levels for the events handed to Python.
const DEBUG: u8 = 10;
const WARNING: u8 = 30;

/// The sans-IO producer, attached to an asyncio loop. Subclassed by `kafka_sansio.Producer`;
/// its underscored methods are the driver's, not the application's.
#[pyclass(subclass, module = "kafka_sansio._core", name = "Core")]
pub struct Core {
    producer: Option<Producer<Pending>>,
    attached: Option<Attached>,
    /// A `_turn` is scheduled and has not run yet.
    turn_scheduled: bool,
    conns: Connections,
    flushes: FlushTracker<Py<PyAny>>,
    topics: TopicNames,
    /// The topic of the last success report, as the `str` its metadata carries.
    last_topic: Option<(Arc<str>, Py<PyString>)>,
    /// Futures of `close` calls, resolved at the core's `Closed` event.
    close_waiters: Vec<Py<PyAny>>,
    /// The future of the transactional operation under way, and its name.
    txn_waiter: Option<(String, Py<PyAny>)>,
    /// The core emitted `Closed`.
    closed: bool,
    /// Reports whose future had been cancelled (their result went to the log, not a future).
    reports_of_cancelled: u64,
}

/// The core, or the error for a producer not configured yet.
fn configured(p: &mut Option<Producer<Pending>>) -> PyResult<&mut Producer<Pending>> {
    p.as_mut()
        .ok_or_else(|| PyRuntimeError::new_err("the producer is not configured"))
}

/// An `io::Error` from what Python reported: the OS error number when there is one.
fn io_error(errno: Option<i32>, message: String, default: std::io::ErrorKind) -> std::io::Error {
    match errno {
        Some(n) if n > 0 => {
            let kind = std::io::Error::from_raw_os_error(n).kind();
            std::io::Error::new(kind, message)
        }
        _ => std::io::Error::new(default, message),
    }
}

impl Core {
    /// Schedules one `_turn` on the loop, unless one is scheduled already: inputs within one
    /// loop turn share one drain of the core.
    fn schedule(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.turn_scheduled {
            return Ok(());
        }
        if let Some(a) = &self.attached {
            a.call_soon.call1(py, (a.turn.clone_ref(py),))?;
            self.turn_scheduled = true;
        }
        Ok(())
    }

    /// A new future of the attached loop.
    fn new_future(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match &self.attached {
            Some(a) => a.create_future.call0(py),
            None => Err(PyRuntimeError::new_err(
                "the producer is not started: `async with Producer(...)` or `await start()` first",
            )),
        }
    }

    /// The record `send` takes, from the arguments of `send_nowait`.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        topic: &Bound<'_, PyString>,
        value: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
    ) -> PyResult<Record> {
        convert::record(
            &mut self.topics,
            topic,
            value,
            key,
            headers,
            partition,
            timestamp,
        )
    }

    /// The record of one `send_batch` item.
    fn batch_record(&mut self, item: &Bound<'_, PyAny>) -> PyResult<Record> {
        let t = item.cast::<PyTuple>().map_err(|_| {
            PyValueError::new_err(
                "send_batch takes (topic, value[, key[, headers[, partition[, timestamp]]]]) tuples",
            )
        })?;
        let n = t.len();
        if !(2..=6).contains(&n) {
            return Err(PyValueError::new_err(format!(
                "a send_batch tuple has 2 to 6 items, not {n}"
            )));
        }
        let get = |i: usize| -> PyResult<Option<Bound<'_, PyAny>>> {
            (i < n).then(|| t.get_item(i)).transpose()
        };
        let topic = t.get_item(0)?;
        // `None` in a tuple is no partition / no timestamp, as a missing item.
        let partition: Option<i32> = get(4)?.map(|p| p.extract()).transpose()?.flatten();
        let timestamp: Option<i64> = get(5)?.map(|p| p.extract()).transpose()?.flatten();
        self.record(
            topic.cast::<PyString>()?,
            get(1)?.as_ref(),
            get(2)?.as_ref(),
            get(3)?.as_ref(),
            partition,
            timestamp,
        )
    }

    /// Hands `record` to the core with `future`: `Err` with the refusal and the record as it
    /// came (the wall-clock timestamp given to it taken back).
    #[allow(clippy::result_large_err)]
    fn accept(
        &mut self,
        py: Python<'_>,
        mut record: Record,
        future: &Py<PyAny>,
    ) -> PyResult<Result<(), (SendErrorReason, Record)>> {
        let filled = timestamp::fill(&mut record);
        let cohort = self.flushes.accept();
        let producer = configured(&mut self.producer)?;
        let pending = Pending {
            future: future.clone_ref(py),
            cohort,
        };
        match producer.send(Instant::now(), record, pending) {
            Ok(()) => {
                self.schedule(py)?;
                Ok(Ok(()))
            }
            Err(SendError {
                reason,
                mut record,
                opaque,
            }) => {
                // Never accepted: its cohort counts no record.
                for w in self.flushes.reported(opaque.cohort) {
                    settle(py, &w, Ok(py.None()))?;
                }
                timestamp::unfill(&mut record, filled);
                Ok(Err((reason, record)))
            }
        }
    }
}

/// Resolves `future` with `result` unless it is done (cancelled by its caller): whether it
/// was resolved.
fn settle(py: Python<'_>, future: &Py<PyAny>, result: Result<Py<PyAny>, PyErr>) -> PyResult<bool> {
    let f = future.bind(py);
    let call = match result {
        Ok(v) => f.call_method1(intern!(py, "set_result"), (v,)),
        Err(e) => f.call_method1(intern!(py, "set_exception"), (e.into_value(py),)),
    };
    match call {
        Ok(_) => Ok(true),
        // InvalidStateError: the caller cancelled it; the result has no one to go to.
        Err(_) if f.call_method0(intern!(py, "done"))?.is_truthy()? => Ok(false),
        Err(e) => Err(e),
    }
}

#[pymethods]
impl Core {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        Core {
            producer: None,
            attached: None,
            turn_scheduled: false,
            conns: Connections::default(),
            flushes: FlushTracker::default(),
            topics: TopicNames::default(),
            last_topic: None,
            close_waiters: Vec::new(),
            txn_waiter: None,
            closed: false,
            reports_of_cancelled: 0,
        }
    }

    /// Configures the core from `(name, value)` settings by Kafka's names (the core's property
    /// parser checks each); a `ConfigError` names the first one refused. `caller_tls`: the
    /// application gave its own `SSLContext`. Called once, by `Producer.__init__`.
    #[pyo3(signature = (settings, caller_tls=false))]
    fn _configure(
        &mut self,
        py: Python<'_>,
        settings: Vec<(String, String)>,
        caller_tls: bool,
    ) -> PyResult<()> {
        let config = settings::build(py, &settings, caller_tls)?;
        self.producer = Some(Producer::new(config, Instant::now()));
        Ok(())
    }

    /// The TLS settings (`None` without TLS): see `settings::tls_settings`.
    fn _tls_settings<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        match &self.producer {
            Some(p) => settings::tls_settings(py, p.config()),
            None => Ok(None),
        }
    }

    /// `max.block.ms` in seconds: how long `send` waits for room in the buffer.
    fn _max_block(&self) -> f64 {
        self.producer
            .as_ref()
            .map_or(60.0, |p| p.config().max_block.as_secs_f64())
    }

    /// Whether the producer has a `transactional.id`.
    fn _is_transactional(&self) -> bool {
        self.producer
            .as_ref()
            .is_some_and(|p| p.config().transactional_id.is_some())
    }

    /// Attaches to the running loop: futures are its (made by `create_future`, a callable
    /// without arguments, or the loop's own `create_future`), `_turn` is scheduled with its
    /// `call_soon`. Called by `start`.
    #[pyo3(signature = (event_loop, turn, create_future=None))]
    fn _attach(
        &mut self,
        py: Python<'_>,
        event_loop: &Bound<'_, PyAny>,
        turn: Py<PyAny>,
        create_future: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let create_future = match create_future {
            Some(f) => f,
            None => event_loop.getattr(intern!(py, "create_future"))?.unbind(),
        };
        self.attached = Some(Attached {
            create_future,
            call_soon: event_loop.getattr(intern!(py, "call_soon"))?.unbind(),
            turn,
        });
        self.turn_scheduled = false;
        self.schedule(py)
    }

    /// Detaches from the loop (after the close): no more turns are scheduled.
    fn _detach(&mut self) {
        self.attached = None;
        self.conns.clear();
    }

    /// Sends a record without waiting: the future of its report, which resolves to its
    /// `RecordMetadata` or fails with a `DeliveryError`. Raises a `SendError` (`BufferFull`
    /// when the buffer is full) when the record is refused, the record handed back.
    #[pyo3(signature = (topic, value=None, key=None, headers=None, partition=None, timestamp=None))]
    #[allow(clippy::too_many_arguments)]
    fn send_nowait(
        &mut self,
        py: Python<'_>,
        topic: &Bound<'_, PyString>,
        value: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
    ) -> PyResult<Py<PyAny>> {
        let record = self.record(topic, value, key, headers, partition, timestamp)?;
        let future = self.new_future(py)?;
        match self.accept(py, record, &future)? {
            Ok(()) => Ok(future),
            Err((reason, record)) => Err(convert::send_error(py, &reason, &record)?),
        }
    }

    /// `await producer.send(...)`: the record's `RecordMetadata` once it is acknowledged, or
    /// its `DeliveryError`. Returns the record's future itself when the core takes it at once
    /// (so a gather of sends wraps no task around each); when the buffer is full, or records
    /// already wait in line for room, the future `_send_slow` hands back: the record waits in
    /// line (up to `max.block.ms`, then the future fails with `BufferFull`), then the future
    /// is the record's.
    #[pyo3(signature = (topic, value=None, key=None, headers=None, partition=None, timestamp=None))]
    #[allow(clippy::too_many_arguments)]
    fn send(
        slf: &Bound<'_, Self>,
        topic: &Bound<'_, PyString>,
        value: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        // Behind records already waiting in line for room, a new one waits in line too: the
        // room a report frees is visible before the turn that admits the line runs, and a send
        // in between would take it ahead of them (first come first taken).
        let line_empty = slf
            .getattr(intern!(py, "_room_waiters"))?
            .len()
            .map_or(true, |n| n == 0);
        let taken = if line_empty {
            slf.borrow_mut()
                ._try_send(py, topic, value, key, headers, partition, timestamp)?
        } else {
            None
        };
        match taken {
            Some(future) => Ok(future),
            None => Ok(slf
                .call_method1(
                    intern!(py, "_send_slow"),
                    (topic, value, key, headers, partition, timestamp),
                )?
                .unbind()),
        }
    }

    /// `send_nowait`, except that a full buffer answers `None` (the caller waits for room and
    /// tries again) instead of raising `BufferFull`.
    #[pyo3(signature = (topic, value=None, key=None, headers=None, partition=None, timestamp=None))]
    #[allow(clippy::too_many_arguments)]
    fn _try_send(
        &mut self,
        py: Python<'_>,
        topic: &Bound<'_, PyString>,
        value: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let record = self.record(topic, value, key, headers, partition, timestamp)?;
        let future = self.new_future(py)?;
        match self.accept(py, record, &future)? {
            Ok(()) => Ok(Some(future)),
            Err((SendErrorReason::Full, _)) => Ok(None),
            Err((reason, record)) => Err(convert::send_error(py, &reason, &record)?),
        }
    }

    /// Hands a waiting record to the core with the future `send` gave its caller: whether
    /// the core took it. Called by the Python side for a record that waited for room (see
    /// `_send_slow`). When the core refuses it: with `fail_refused`, the future fails with
    /// the `SendError` (the record handed back) and the answer is `False`; without, a full
    /// buffer answers `False` with the future untouched (it waits on), and any other refusal
    /// fails the future.
    #[pyo3(signature = (future, fail_refused, topic, value=None, key=None, headers=None, partition=None, timestamp=None))]
    #[allow(clippy::too_many_arguments)]
    fn _send_into(
        &mut self,
        py: Python<'_>,
        future: Py<PyAny>,
        fail_refused: bool,
        topic: &Bound<'_, PyString>,
        value: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
    ) -> PyResult<bool> {
        let record = self.record(topic, value, key, headers, partition, timestamp)?;
        match self.accept(py, record, &future)? {
            Ok(()) => Ok(true),
            Err((SendErrorReason::Full, _)) if !fail_refused => Ok(false),
            Err((reason, record)) => {
                settle(py, &future, Err(convert::send_error(py, &reason, &record)?))?;
                Ok(false)
            }
        }
    }

    /// Sends many records in one call: one future per record, in order. Each item is a tuple
    /// `(topic, value[, key[, headers[, partition[, timestamp]]]])`; every item is checked
    /// before any is taken, so a malformed one raises with nothing sent. A record refused (the
    /// buffer full, too large, ...) gets a future already failed with its `SendError`, the
    /// record handed back: nothing is dropped.
    fn send_batch(&mut self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
        let mut batch = Vec::new();
        for item in records.try_iter()? {
            batch.push(self.batch_record(&item?)?);
        }
        let out = PyList::empty(py);
        for record in batch {
            let future = self.new_future(py)?;
            if let Err((reason, record)) = self.accept(py, record, &future)? {
                settle(py, &future, Err(convert::send_error(py, &reason, &record)?))?;
            }
            out.append(future)?;
        }
        Ok(out.unbind())
    }

    /// One turn of the driver: the core's deadline handled if `timer_fired`, every output
    /// drained (reports resolved, bytes written), and what Python must do: `(actions,
    /// delay, reports)`: `actions` a list of `("connect", id, host, port)`,
    /// `("disconnect", id)`, `("token",)`, `("event", level, text)`, `("closed",)` or `None`;
    /// `delay` the seconds until the core's next deadline, or `None`; `reports` how many
    /// records were reported (room freed in the buffer).
    fn _turn_poll<'py>(
        &mut self,
        py: Python<'py>,
        timer_fired: bool,
    ) -> PyResult<(Option<Bound<'py, PyList>>, Option<f64>, usize)> {
        self.turn_scheduled = false;
        let actions = PyList::empty(py);
        let mut reports = 0usize;
        let Some(mut producer) = self.producer.take() else {
            return Ok((None, None, 0));
        };
        if timer_fired {
            producer.handle_timeout(Instant::now());
        }
        let result = self.drain(py, &mut producer, &actions, &mut reports);
        let delay = producer
            .poll_timeout()
            .map(|t| t.saturating_duration_since(Instant::now()).as_secs_f64());
        self.producer = Some(producer);
        result?;
        let actions = (!actions.is_empty()).then_some(actions);
        Ok((actions, delay, reports))
    }

    /// Bytes read from connection `id`.
    /// (`bytes`, as asyncio's and uvloop's transports hand them, or a `bytearray`.)
    fn _read(&mut self, py: Python<'_>, id: u64, data: PyBackedBytes) -> PyResult<()> {
        if let (Some(conn), Some(p)) = (self.conns.get(id), self.producer.as_mut()) {
            p.handle_read(Instant::now(), conn, &data);
            self.schedule(py)?;
        }
        Ok(())
    }

    /// Connection `id` is up (TLS, if any, done): its transport's `write` is what the core's
    /// bytes go to. `False` if the core gave it up meanwhile (the caller closes it).
    fn _connected(
        &mut self,
        py: Python<'_>,
        id: u64,
        transport: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let write = transport.getattr(intern!(py, "write"))?.unbind();
        let (Some(conn), Some(p)) = (self.conns.up(id, write), self.producer.as_mut()) else {
            return Ok(false);
        };
        p.handle_connected(Instant::now(), conn);
        self.schedule(py)?;
        Ok(true)
    }

    /// Connection `id` could not be opened (`errno` of the `OSError`, if any, and its text).
    fn _connect_failed(
        &mut self,
        py: Python<'_>,
        id: u64,
        errno: Option<i32>,
        message: String,
    ) -> PyResult<()> {
        if let (Some(conn), Some(p)) = (self.conns.remove(id), self.producer.as_mut()) {
            let e = io_error(errno, message, std::io::ErrorKind::ConnectionRefused);
            p.handle_connect_failed(Instant::now(), conn, e);
            self.schedule(py)?;
        }
        Ok(())
    }

    /// The TLS handshake of connection `id` failed (`message`: Python's `ssl` error).
    fn _tls_failed(&mut self, py: Python<'_>, id: u64, message: String) -> PyResult<()> {
        if let (Some(conn), Some(p)) = (self.conns.remove(id), self.producer.as_mut()) {
            p.handle_tls_failed(Instant::now(), conn, message);
            self.schedule(py)?;
        }
        Ok(())
    }

    /// Connection `id` was lost (`errno` and text of the error, or `None` for the peer's
    /// close). Ignored for a connection the core closed itself.
    #[pyo3(signature = (id, errno, message))]
    fn _lost(
        &mut self,
        py: Python<'_>,
        id: u64,
        errno: Option<i32>,
        message: Option<String>,
    ) -> PyResult<()> {
        if let (Some(conn), Some(p)) = (self.conns.remove(id), self.producer.as_mut()) {
            let e = match message {
                Some(m) => io_error(errno, m, std::io::ErrorKind::ConnectionReset),
                None => {
                    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed by the broker")
                }
            };
            p.handle_disconnected(Instant::now(), conn, e);
            self.schedule(py)?;
        }
        Ok(())
    }

    /// The application's OAUTHBEARER token (`value`, valid for `lifetime` seconds), or why
    /// there is none (`error`).
    #[pyo3(signature = (value, lifetime, error=None))]
    fn _token(
        &mut self,
        py: Python<'_>,
        value: Option<String>,
        lifetime: f64,
        error: Option<String>,
    ) -> PyResult<()> {
        let p = configured(&mut self.producer)?;
        let token = match (value, error) {
            (Some(v), None) => Ok(OAuthToken::new(
                v,
                Duration::try_from_secs_f64(lifetime).unwrap_or(Duration::ZERO),
            )),
            (_, e) => Err(e.unwrap_or_else(|| "no token".into())),
        };
        p.handle_token(Instant::now(), token);
        self.schedule(py)
    }

    /// Closes every open batch now; `future` resolves once every record sent before this call
    /// has its report.
    fn _flush(&mut self, py: Python<'_>, future: Py<PyAny>) -> PyResult<()> {
        configured(&mut self.producer)?.flush(Instant::now());
        for w in self.flushes.flush(future) {
            settle(py, &w, Ok(py.None()))?;
        }
        self.schedule(py)
    }

    /// Starts the close (bounded by `timeout` seconds, if given); `future` resolves at the
    /// core's `Closed` event (at once if it came already).
    #[pyo3(signature = (future, timeout=None))]
    fn _close(&mut self, py: Python<'_>, future: Py<PyAny>, timeout: Option<f64>) -> PyResult<()> {
        if self.closed {
            settle(py, &future, Ok(py.None()))?;
            return Ok(());
        }
        let p = configured(&mut self.producer)?;
        let now = Instant::now();
        match timeout.and_then(|t| Duration::try_from_secs_f64(t).ok()) {
            Some(t) => p.close_within(now, now + t),
            None => p.close(now),
        }
        self.close_waiters.push(future);
        self.schedule(py)
    }

    /// A transactional operation: `op` is `init`, `begin`, `commit`, `abort` or
    /// `send_offsets` (with `offsets`, `(topic, partition, offset)` tuples, and `group_id`).
    /// A refusal raises at once; otherwise `future` resolves when the core answers (`begin`
    /// completes at once).
    #[pyo3(signature = (op, future, offsets=None, group_id=None))]
    fn _transaction(
        &mut self,
        py: Python<'_>,
        op: &str,
        future: Py<PyAny>,
        offsets: Option<Vec<(String, i32, i64)>>,
        group_id: Option<String>,
    ) -> PyResult<()> {
        let now = Instant::now();
        let p = configured(&mut self.producer)?;
        let Some(mut t) = p.transactions() else {
            let e = producer_core::TransactionError::NotTransactional;
            return Err(convert::transaction_error(py, op, &e)?);
        };
        let started = match op {
            "init" => t.init(now),
            "begin" => t.begin(now),
            "commit" => t.commit(now),
            "abort" => t.abort(now),
            "send_offsets" => {
                let offsets = offsets
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(topic, p, o)| OffsetToCommit::new(topic, p, o))
                    .collect();
                let group = ConsumerGroupMetadata::new(group_id.unwrap_or_default());
                t.send_offsets(now, offsets, group)
            }
            other => {
                return Err(PyValueError::new_err(format!(
                    "no transactional operation {other:?}"
                )))
            }
        };
        if let Err(e) = started {
            return Err(convert::transaction_error(py, op, &e)?);
        }
        if op == "begin" {
            settle(py, &future, Ok(py.None()))?;
        } else {
            self.txn_waiter = Some((op.to_string(), future));
        }
        self.schedule(py)
    }

    /// The producer's metrics: every series under Java's names (`docs/metrics.md`), a
    /// labelled one as a dict by its labels (`"topic=t"`, `"broker=1,node_id=1"`), plus
    /// `buffered_records`, `buffered_bytes`, `connections`, `disconnects` (connections lost) and
    /// `reports_of_cancelled_sends`.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let Some(p) = &self.producer else {
            return Ok(d);
        };
        let snapshot = p.metrics_at(Instant::now());
        convert::metrics_into(&d, &snapshot)?;
        d.set_item("connections", self.conns.len())?;
        d.set_item("reports_of_cancelled_sends", self.reports_of_cancelled)?;
        Ok(d)
    }

    /// Records in the core not yet reported.
    #[getter]
    fn _unreported(&self) -> usize {
        self.producer
            .as_ref()
            .map_or(0, |p| p.unacknowledged_records())
    }

    /// The core emitted `Closed`: every record has its report.
    #[getter]
    fn _closed(&self) -> bool {
        self.closed
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(a) = &self.attached {
            visit.call(&a.create_future)?;
            visit.call(&a.call_soon)?;
            visit.call(&a.turn)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.attached = None;
    }
}
