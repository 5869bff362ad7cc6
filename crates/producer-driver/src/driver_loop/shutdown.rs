//! The loop's end: [`DriverLoop::shutdown`] fails what the core never took, answers every
//! waiting call, and leaves the [`LastWords`] for the handles that ask after.

use std::sync::Mutex;

use producer_core::{Delivery, MetricsSnapshot, ProduceError, TransactionError};

use super::{answer, Cmd, CoreOf, DriverLoop, Host};
use crate::commands::{Command, Replies};
use crate::control::FlushOutcome;
use crate::partitions::PartitionsError;
use crate::{contain, CommandQueue};

/// The producer's last words, left by the loop as it stops for the handles that ask after:
/// its last metrics and its transactional failure.
#[derive(Debug, Default)]
pub struct LastWords {
    metrics: Mutex<Option<MetricsSnapshot>>,
    transaction_failure: Mutex<Option<TransactionError>>,
}

impl LastWords {
    /// The core's metrics as the loop stopped (`None` before, or when the core could not be
    /// trusted to give them after a panic).
    pub fn metrics(&self) -> Option<MetricsSnapshot> {
        self.metrics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What a transactional operation gets once the loop stopped: the producer's fatal error,
    /// else [`TransactionError::Closed`].
    pub fn transaction_error(&self) -> TransactionError {
        let failure = self.transaction_failure.lock();
        let failure = failure.unwrap_or_else(|e| e.into_inner()).clone();
        failure.unwrap_or(TransactionError::Closed)
    }

    fn set(&self, metrics: Option<MetricsSnapshot>, failure: Option<TransactionError>) {
        *self
            .transaction_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = failure;
        *self.metrics.lock().unwrap_or_else(|e| e.into_inner()) = metrics;
    }
}

impl<H: Host> DriverLoop<H> {
    /// The core closed (or a panic stopped the loop): leaves the last words for the handles,
    /// stops the queue (later sends are refused), fails every record the core never took
    /// (closed, or with the panic: they surely never went out) and answers every waiting call.
    pub fn shutdown(
        &mut self,
        core: &mut CoreOf<H>,
        queue: &CommandQueue<Cmd<H>>,
        last_words: &LastWords,
    ) {
        let (last, failure) = if self.core_broken {
            (None, None)
        } else {
            contain(|| {
                let failure = core.transactions().and_then(|t| t.failure());
                (Some(core.metrics()), failure)
            })
            .unwrap_or((None, None))
        };
        last_words.set(last.clone(), failure.clone());
        let stopped = failure.unwrap_or(TransactionError::Closed);
        let queued = queue.stop();
        // Senders waiting for space see the queue stopped and give up.
        self.host.wake_senders();
        let never_sent = match &self.panicked {
            Some(message) => ProduceError::Panicked {
                message: message.clone(),
                possibly_persisted: false,
            },
            None => ProduceError::Closed,
        };
        if let Some(s) = self.stash.take() {
            let record_id = s.opaque.record_id;
            let d = Delivery::failed(s.opaque.opaque, never_sent.clone(), s.record);
            self.hand_over(record_id, d);
        }
        let taken = std::mem::take(&mut self.taken);
        for command in taken.into_iter().chain(queued) {
            match command {
                Command::Send { record, opaque, .. } => {
                    self.hand_over(None, Delivery::failed(opaque, never_sent.clone(), record));
                }
                Command::Flush(done) | Command::Close(done) => H::Replies::done(done),
                Command::Metrics(waiter) => {
                    if let Some(m) = &last {
                        H::Replies::metrics(waiter, m.clone());
                    }
                }
                Command::Transaction(_, waiter) => {
                    H::Replies::transaction(waiter, Err(stopped.clone()))
                }
                Command::Partitions(_, w) => {
                    H::Replies::partitions(w, Err(PartitionsError::Closed))
                }
                Command::Purge(_, _, waiter) => H::Replies::purged(waiter, 0),
                Command::FlushWithin(_, waiter) => {
                    H::Replies::flushed(waiter, FlushOutcome::new(0))
                }
                Command::CloseWithin(_, waiter) => {
                    H::Replies::closed(waiter, self.timed.close_outcome())
                }
            }
        }
        if let Some(w) = self.txn_waiter.take() {
            H::Replies::transaction(w, Err(stopped));
        }
        answer::<H>(self.txn_flushes.drain(..));
        answer::<H>(self.flushes.release_all());
        answer::<H>(self.close_waiters.drain(..));
        self.partitions.close_all(H::Replies::partitions);
        self.timed
            .finish(0, H::Replies::flushed, H::Replies::closed);
    }
}
