//! Draining the core once per loop turn: each report's future resolved (its flush cohorts
//! answered), the bytes the core transmits written to their transports, and what needs the
//! loop (connections to open or close, events) handed to Python as actions.

use std::sync::Arc;

use producer_core::{Event, Output, Producer};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use super::{settle, Core, Pending, DEBUG, WARNING};
use crate::convert::{self, PyRecordMetadata};

impl Core {
    /// Drains every output of `producer` (taken out of `self` for the duration).
    pub(super) fn drain(
        &mut self,
        py: Python<'_>,
        producer: &mut Producer<Pending>,
        actions: &Bound<'_, PyList>,
        reports: &mut usize,
    ) -> PyResult<()> {
        while let Some(output) = producer.poll_output() {
            match output {
                Output::Delivery(d) => {
                    *reports += 1;
                    let Pending { future, cohort } = d.opaque;
                    let result = match &d.result {
                        Ok(m) => Ok(self.metadata(py, m)?.into_any()),
                        Err(f) => Err(convert::delivery_error(py, &f.error, &f.record)?),
                    };
                    let failed = d.result.as_ref().err().map(|f| f.error.to_string());
                    if !settle(py, &future, result)? {
                        self.reports_of_cancelled += 1;
                        if let Some(error) = failed {
                            actions.append((
                                "event",
                                WARNING,
                                format!("a record whose send was cancelled failed: {error}"),
                            ))?;
                        }
                    }
                    for w in self.flushes.reported(cohort) {
                        settle(py, &w, Ok(py.None()))?;
                    }
                }
                Output::Transmit { conn, bytes } => self.transmit(py, conn, bytes)?,
                Output::Connect { conn, host, port } => {
                    let id = self.conns.opening(conn);
                    actions.append(("connect", id, host, port))?;
                }
                Output::Disconnect { conn } => {
                    let id = conn.as_u64();
                    self.conns.remove(id);
                    actions.append(("disconnect", id))?;
                }
                Output::TokenRequest => actions.append(("token",))?,
                Output::Transaction(r) => {
                    if let Some((op, fut)) = self.txn_waiter.take() {
                        let result = match &r.result {
                            Ok(()) => Ok(py.None()),
                            Err(e) => Err(convert::transaction_error(py, &op, e)?),
                        };
                        settle(py, &fut, result)?;
                    } else {
                        let op = convert::operation_name(&r);
                        actions.append(("event", DEBUG, format!("{op}: {:?}", r.result)))?;
                    }
                }
                Output::Event(e) => self.event(py, e, actions)?,
            }
        }
        Ok(())
    }

    /// The metadata object of a delivered record.
    fn metadata(
        &mut self,
        py: Python<'_>,
        m: &producer_core::RecordMetadata,
    ) -> PyResult<Py<PyRecordMetadata>> {
        let topic = match &self.last_topic {
            Some((a, s)) if Arc::ptr_eq(a, &m.topic) => s.clone_ref(py),
            _ => {
                let s = PyString::new(py, &m.topic).unbind();
                self.last_topic = Some((m.topic.clone(), s.clone_ref(py)));
                s
            }
        };
        Py::new(
            py,
            PyRecordMetadata {
                topic,
                partition: m.partition,
                offset: m.offset,
                timestamp: m.timestamp,
            },
        )
    }

    /// One event for Python's log, or handled here (`Closed`).
    fn event(&mut self, py: Python<'_>, e: Event, actions: &Bound<'_, PyList>) -> PyResult<()> {
        let level = match &e {
            Event::Closed => {
                self.closed = true;
                for w in self.close_waiters.drain(..) {
                    settle(py, &w, Ok(py.None()))?;
                }
                for w in self.flushes.release_all() {
                    settle(py, &w, Ok(py.None()))?;
                }
                actions.append(("closed",))?;
                return Ok(());
            }
            Event::Fatal(_)
            | Event::AllBrokersDown { .. }
            | Event::AuthenticationFailed { .. }
            | Event::AnswerRefused { .. }
            | Event::CredentialsInPlaintext { .. }
            | Event::CallbackPanicked { .. } => WARNING,
            _ => DEBUG,
        };
        actions.append(("event", level, format!("{e:?}")))?;
        Ok(())
    }

    /// Writes `bytes` to the transport of `conn`, as one `bytes` object.
    fn transmit(
        &self,
        py: Python<'_>,
        conn: producer_core::ConnId,
        bytes: producer_core::WireBytes,
    ) -> PyResult<()> {
        // The core transmits only on connections reported up, whose writer is known; a
        // connection lost meanwhile has its loss reported to the core already.
        let Some(write) = self.conns.writer(conn) else {
            return Ok(());
        };
        let data = PyBytes::new_with(py, bytes.len(), |buf| {
            let mut at = 0;
            for piece in bytes.pieces() {
                buf[at..at + piece.len()].copy_from_slice(piece);
                at += piece.len();
            }
            Ok(())
        })?;
        write.call1(py, (data,))?;
        Ok(())
    }
}
