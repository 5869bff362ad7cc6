//! `SyncCore`: the synchronous producer for scripts, on the mio driver's `ThreadedProducer`
//! (its own thread owns the sockets; no asyncio loop is involved).
//!
//! Reports arrive on the producer thread, which never takes the GIL: each goes into a queue
//! here, and the application's delivery callbacks run on its own thread, in `poll` and
//! `flush` (as confluent-kafka's do). The queue holds at most the records accepted and not yet
//! served, which `buffer.memory` and the command queue bound.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use producer_core::Delivery;
use producer_mio::{ThreadedProducer, TrySendError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::convert::{self, TopicNames};
use crate::settings;

/// What each record carries: the application's delivery callback, if any.
type Callback = Option<Py<PyAny>>;

/// How many commands the producer thread's queue holds (records beyond it wait in `produce`,
/// up to `max.block.ms`; `buffer.memory` bounds their bytes).
const QUEUE_CAPACITY: usize = 64 * 1024;

/// Reports waiting for the application's thread, and the signal that one arrived.
#[derive(Default)]
struct Reports {
    queue: Mutex<VecDeque<Delivery<Callback>>>,
    arrived: Condvar,
}

impl Reports {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Delivery<Callback>>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits up to `timeout` for a report (none at all when one is queued).
    fn wait(&self, timeout: Duration) {
        let queue = self.lock();
        if queue.is_empty() && !timeout.is_zero() {
            let _ = self.arrived.wait_timeout(queue, timeout);
        }
    }
}

/// The synchronous producer: `produce` queues a record for the producer thread; `poll` and
/// `flush` run the delivery callbacks on the caller's thread. Subclassed by
/// `kafka_sansio.SyncProducer`.
#[pyclass(subclass, module = "kafka_sansio._core", name = "SyncCore")]
pub struct SyncCore {
    producer: Option<ThreadedProducer<Callback>>,
    reports: Arc<Reports>,
    topics: TopicNames,
    max_block: Duration,
}

impl SyncCore {
    fn producer(&self) -> PyResult<&ThreadedProducer<Callback>> {
        self.producer
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("the producer is not configured"))
    }

    /// Runs the callbacks of every queued report; the first exception a callback raised is
    /// raised after all ran (later ones are printed as unraisable).
    fn serve(&self, py: Python<'_>) -> PyResult<usize> {
        let mut served = 0;
        let mut first_error: Option<PyErr> = None;
        loop {
            let batch: Vec<_> = self.reports.lock().drain(..).collect();
            if batch.is_empty() {
                break;
            }
            for d in batch {
                served += 1;
                let Some(callback) = d.opaque else { continue };
                let (error, metadata) = match &d.result {
                    Ok(m) => (py.None(), convert::metadata_object(py, m)?.into_any()),
                    Err(f) => (
                        convert::delivery_error(py, &f.error, &f.record)?
                            .into_value(py)
                            .into_any(),
                        py.None(),
                    ),
                };
                if let Err(e) = callback.call1(py, (error, metadata)) {
                    match &first_error {
                        None => first_error = Some(e),
                        Some(_) => e.write_unraisable(py, None),
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(served),
        }
    }
}

#[pymethods]
impl SyncCore {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, pyo3::types::PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        SyncCore {
            producer: None,
            reports: Arc::default(),
            topics: TopicNames::default(),
            max_block: Duration::from_secs(60),
        }
    }

    /// Configures and starts the producer thread from `(name, value)` settings by Kafka's
    /// names. Called once, by `SyncProducer.__init__`.
    fn _configure(&mut self, py: Python<'_>, settings: Vec<(String, String)>) -> PyResult<()> {
        let config = settings::build(py, &settings, false)?;
        self.max_block = config.max_block;
        let reports = self.reports.clone();
        let producer = ThreadedProducer::spawn(config, QUEUE_CAPACITY, move |d| {
            reports.lock().push_back(d);
            reports.arrived.notify_all();
        })
        .map_err(|e| convert::config_error(py, e.to_string()))?;
        self.producer = Some(producer);
        Ok(())
    }

    /// Queues a record; `on_delivery(error, metadata)` runs in a later `poll` or `flush` (one
    /// of the two is `None`). When the queue is full, serves reports while waiting for room,
    /// up to `max.block.ms`, then raises `BufferFull` with the record.
    #[pyo3(signature = (topic, value=None, key=None, headers=None, partition=None, timestamp=None, on_delivery=None))]
    #[allow(clippy::too_many_arguments)]
    fn produce(
        &mut self,
        py: Python<'_>,
        topic: &Bound<'_, PyString>,
        value: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
        on_delivery: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let mut record = convert::record(
            &mut self.topics,
            topic,
            value,
            key,
            headers,
            partition,
            timestamp,
        )?;
        let mut callback = on_delivery;
        let deadline = Instant::now() + self.max_block;
        loop {
            match self.producer()?.send_with(record, callback) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(r, c)) => {
                    let now = Instant::now();
                    if now >= deadline {
                        let reason = producer_core::SendErrorReason::Full;
                        return Err(convert::send_error(py, &reason, &r)?);
                    }
                    (record, callback) = (r, c);
                    let reports = self.reports.clone();
                    let wait = (deadline - now).min(Duration::from_millis(100));
                    py.detach(|| reports.wait(wait));
                    self.serve(py)?;
                }
                // Closed (the only other refusal).
                Err(e) => {
                    let (r, _) = e.into_parts();
                    let reason = producer_core::SendErrorReason::Closed;
                    return Err(convert::send_error(py, &reason, &r)?);
                }
            }
        }
    }

    /// Runs the callbacks of the reports that arrived, waiting up to `timeout` seconds for
    /// one when none has; how many reports were served.
    #[pyo3(signature = (timeout=0.0))]
    fn poll(&self, py: Python<'_>, timeout: f64) -> PyResult<usize> {
        let wait = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::MAX);
        let reports = self.reports.clone();
        py.detach(|| reports.wait(wait));
        self.serve(py)
    }

    /// Sends everything queued now and waits until every record has its report (at most
    /// `timeout` seconds, if given), then runs the callbacks; how many reports were served.
    #[pyo3(signature = (timeout=None))]
    fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<usize> {
        let producer = self.producer()?.clone();
        let timeout = timeout.and_then(|t| Duration::try_from_secs_f64(t.max(0.0)).ok());
        py.detach(|| match timeout {
            Some(t) => drop(producer.flush_within(t)),
            None => producer.flush(),
        });
        self.serve(py)
    }

    /// Sends what is queued, waits for every report, stops the producer thread, then runs
    /// the last callbacks.
    fn close(&self, py: Python<'_>) -> PyResult<usize> {
        if let Some(p) = &self.producer {
            let p = p.clone();
            py.detach(|| p.close());
        }
        self.serve(py)
    }

    /// The producer's metrics (as the asyncio `Producer`'s `metrics()`); empty once closed.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let producer = self.producer()?.clone();
        if let Some(snapshot) = py.detach(|| producer.metrics()) {
            convert::metrics_into(&d, &snapshot)?;
        }
        Ok(d)
    }
}
