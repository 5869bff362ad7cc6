//! The producer's life: closing (no new records, flush, then [`Event::Closed`] once every
//! record has its report and no answer is awaited) and failing fatally (every record fails,
//! `send` refuses new ones).

use crate::config::Acks;
use crate::connection::ConnState;
use crate::types::{Event, Output, ProduceError};

use super::Producer;

/// Where the producer is in its life.
#[derive(Debug, Default)]
pub(super) struct Lifecycle {
    /// `close` was called (or a fatal error): no new records.
    pub(super) closing: bool,
    /// With acks=0, `close` sent one answered request per connection to wait on.
    close_barrier_sent: bool,
    /// Every record was reported and every connection closed.
    pub(super) closed: bool,
    /// The error that made the producer fail for good.
    pub(super) fatal: Option<ProduceError>,
}

impl<T> Producer<T> {
    /// [`Producer::close`]: no new records, everything buffered is flushed, and the close
    /// completes once every record is reported.
    pub(super) fn begin_close(&mut self) {
        self.txn_close();
        self.lifecycle.closing = true;
        self.close_all_open_batches();
        self.check_closed();
    }

    /// Completes a close when every record has its report and no answer is awaited: every
    /// connection is closed and [`Event::Closed`] emitted. Call after anything that may have
    /// released the last record or answered the last request.
    pub(super) fn check_closed(&mut self) {
        let l = &self.lifecycle;
        if !l.closing || l.closed || self.buffered.records() != 0 || self.txn_blocks_close() {
            return;
        }
        if self.deadlines.ending {
            return; // completed once the close's deadline is handled
        }
        // At a `close_within`'s deadline nothing more is waited for.
        let wait = self.fatal_error().is_none() && !self.deadlines.close_passed;
        if wait && !self.lifecycle.close_barrier_sent && self.config.acks == Acks::None {
            // acks=0 requests get no answer, and a broker may drop requests it has read but
            // not yet handled when the connection closes. Answers come in order, so one
            // answered request per connection proves every earlier one was handled.
            self.lifecycle.close_barrier_sent = true;
            let ready: Vec<_> = self
                .brokers
                .iter()
                .filter_map(|b| b.conn.as_ref())
                .filter(|c| c.state == ConnState::Ready)
                .map(|c| c.id)
                .collect();
            for conn in ready {
                self.send_api_versions(conn, 0);
            }
        }
        if wait && self.telemetry_close() {
            return; // the terminating push, answered within the request timeout
        }
        if !wait {
            self.telemetry_abandoned();
        }
        if self.brokers.any_in_flight() && wait {
            return; // bounded by the request timeout
        }
        self.lifecycle.closed = true;
        for slot in 0..self.brokers.len() {
            if let Some(c) = self.brokers.slot_mut(slot).conn.take() {
                self.outputs.push_back(Output::Disconnect { conn: c.id });
            }
        }
        self.outputs.push_back(Output::Event(Event::Closed));
    }

    /// Fails every record held and refuses new ones; the producer then closes. Each record is
    /// reported as it stands: a batch the broker acknowledged is reported delivered (or, in a
    /// transaction, held until the transaction's fatal end below), one answered with an error
    /// keeps that error, and the rest fail with `error`, marked possibly written when an
    /// attempt of theirs may have been (in flight now, or an earlier attempt unsure): only
    /// records never sent, or sent and answered as not written, say certainly not written.
    pub(super) fn go_fatal(&mut self, error: ProduceError) {
        if self.lifecycle.fatal.is_some() {
            return;
        }
        self.lifecycle.fatal = Some(error.clone());
        self.outputs
            .push_back(Output::Event(Event::Fatal(error.clone())));
        // The error may say an attempt of the batch it came with was possibly written; a
        // record never sent says certainly not.
        let never_sent = error.clone().with_possibly_persisted(false);
        for t in 0..self.topics.len() {
            let held = std::mem::take(&mut self.topics.get_mut(t).holding);
            for h in held {
                self.fail_unrouted(t, h.partition.unwrap_or(-1), h.pending, never_sent.clone());
            }
            for p in 0..self.topics.partition_count(t) {
                let (batches, open) = self.topics.partition_mut(t, p).take_all();
                for b in batches {
                    if b.is_done() {
                        self.report_finished(t, p, b);
                        continue;
                    }
                    let possibly_persisted = b.possibly_persisted() || b.is_in_flight();
                    let error = error.clone().with_possibly_persisted(possibly_persisted);
                    self.fail_records(t, p as i32, b.into_unreported(), error);
                }
                if let Some(o) = open {
                    self.fail_records(t, p as i32, o.into_unreported(), never_sent.clone());
                }
            }
        }
        self.txn_fatal(&error);
        self.lifecycle.closing = true;
        self.check_closed();
    }

    /// [`Producer::fail_after_panic`]: a fatal error that names the panic.
    pub(super) fn go_fatal_after_panic(&mut self, message: String) {
        self.go_fatal(ProduceError::Panicked {
            message,
            possibly_persisted: false,
        });
    }
}
