//! The threaded producer's batch sends: many records queued under one lock, without waiting
//! ([`ThreadedProducer::send_batch`]) or waiting for room ([`ThreadedProducer::send_batch_timeout`]).

use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use producer_core::Record;
use producer_driver::{Command, OnFull};

use super::{charge, BatchClosed, ThreadedProducer};

impl<T: Send + 'static> ThreadedProducer<T> {
    /// Queues many records at once: one lock for the whole call, instead of one each as with
    /// [`ThreadedProducer::send_with`]. Use it when records arrive in bursts (a consumer's
    /// poll, a file read) and the per-record overhead matters.
    ///
    /// Records are taken from the front of `records`, in order, while the queue has room;
    /// returns how many were taken. Those left in `records` were not queued (the queue is
    /// full, as [`super::TrySendError::Full`] means for `send`): call again later with what is left.
    /// Never blocks. After [`ThreadedProducer::close`] it takes nothing and returns
    /// [`BatchClosed`], leaving every record in `records`.
    pub fn send_batch(&self, records: &mut Vec<(Record, T)>) -> Result<usize, BatchClosed> {
        self.stamp_batch(records);
        self.queue_batch(records, OnFull::Return)
    }

    /// Queues many records at once as [`ThreadedProducer::send_batch`] does, blocking while
    /// the queue is full for at most `timeout` (as [`ThreadedProducer::send_timeout`] blocks
    /// for one record): returns once every record is taken, or when `timeout` passes with
    /// some left (those stay in `records`), with how many it took. Held back by the
    /// queue-delay limit without its burst floor, as a sender that waits is (see
    /// `queue.delay.target.ms`): the call for a caller that would rather wait than poll.
    /// `Duration::ZERO` makes it `send_batch`; `Duration::MAX` waits as long as it takes.
    /// After [`ThreadedProducer::close`] (also while it waits), or if the thread ended, it
    /// returns what it took before, or [`BatchClosed`] if that was nothing. Called from the
    /// delivery callback it does not wait.
    pub fn send_batch_timeout(
        &self,
        records: &mut Vec<(Record, T)>,
        timeout: Duration,
    ) -> Result<usize, BatchClosed> {
        self.stamp_batch(records);
        let deadline = Instant::now().checked_add(timeout);
        let may_wait = !timeout.is_zero() && thread::current().id() != self.inner.thread_id;
        if !may_wait {
            return self.queue_batch(records, OnFull::Return);
        }
        let space = &self.inner.shared.space;
        // Closed while waiting: what was taken before, or `BatchClosed` if nothing was.
        let closed = |taken: usize| {
            if taken > 0 {
                Ok(taken)
            } else {
                Err(BatchClosed)
            }
        };
        let mut taken = self.queue_batch(records, OnFull::Look)?;
        while !records.is_empty() {
            // As in `send_timeout`: the generation read before the look that registers the
            // caller as waiting.
            let seen = space.generation();
            taken += match self.queue_batch(records, OnFull::Wait) {
                Ok(n) => n,
                Err(BatchClosed) => return closed(taken),
            };
            if records.is_empty() {
                break;
            }
            let woken = space.wait_past(seen, deadline);
            taken += match self.queue_batch(records, OnFull::Look) {
                Ok(n) => n,
                Err(BatchClosed) => return closed(taken),
            };
            if !woken || deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        Ok(taken)
    }

    /// Stamps the caller's trace context on `records` if the producer traces.
    #[inline]
    fn stamp_batch(&self, records: &mut [(Record, T)]) {
        #[cfg(feature = "opentelemetry")]
        if self.inner.shared.stamp_trace_context {
            records.iter_mut().for_each(|(record, _)| {
                producer_driver::otel::inject_current_context(record);
            });
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = records;
    }

    /// Queues records from the front of `records` as they are (see
    /// [`ThreadedProducer::send_batch`]); `on_full` as for [`ThreadedProducer::queue_record`].
    fn queue_batch(
        &self,
        records: &mut Vec<(Record, T)>,
        on_full: OnFull,
    ) -> Result<usize, BatchClosed> {
        let shared = &self.inner.shared;
        if shared.close_requested.load(Ordering::Relaxed) {
            return Err(BatchClosed);
        }
        let burst = shared
            .queue
            .push_burst(
                records,
                on_full,
                |(record, _)| charge::<T>(record),
                |(record, opaque), bytes| Command::Send {
                    record,
                    opaque,
                    bytes,
                },
            )
            .map_err(|_| BatchClosed)?;
        if burst.taken > 0 {
            shared.wake();
        }
        Ok(burst.taken)
    }
}
