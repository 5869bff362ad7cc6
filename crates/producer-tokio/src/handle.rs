//! The application's side: a cloneable handle that queues commands for the producer task.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use producer_core::{Diagnosis, MetricsSnapshot, Record, TopicPartitions};
use producer_driver::{Command, DriverLoop, OnFull, PartitionsError, Refused};
use tokio::sync::oneshot;

use crate::delivery::{DeliveryFuture, ReplyTo};
use crate::error::{BatchClosed, SendError, TrySendError};
use crate::shared::{Shared, TokioHost};

/// What `record` counts against `buffer_memory` in the command queue: what the core will
/// charge for it.
#[inline]
fn charge(record: &Record) -> usize {
    DriverLoop::<TokioHost>::charge(record)
}

/// What the handles hold: when the last one is dropped, the task is told.
struct HandleInner {
    shared: Arc<Shared>,
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        self.shared.queue.senders_gone();
        self.shared.cmd_ready.notify_one();
    }
}

/// A cloneable handle to a running producer: [`ProducerHandle::start`] spawns one. When the
/// last handle is dropped, the producer closes in the background: records already sent are
/// still delivered.
#[derive(Clone)]
pub struct ProducerHandle {
    inner: Arc<HandleInner>,
}

impl std::fmt::Debug for ProducerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerHandle")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl ProducerHandle {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        ProducerHandle {
            inner: Arc::new(HandleInner { shared }),
        }
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// Sends a record, waiting while the producer's buffer is full (backpressure). Returns a
    /// future of the record's delivery report once the producer task has the record. Records
    /// sent through one handle keep their order per partition.
    ///
    /// A record without a timestamp gets the wall clock when the producer task takes it from
    /// the queue (one reading for each run of commands it takes). Returns
    /// [`SendError::Closed`] with the record once [`ProducerHandle::close`] has been called.
    /// Cancelling this future before it completes drops the record unsent.
    pub async fn send(&self, record: Record) -> Result<DeliveryFuture, SendError> {
        let (future, reply) = DeliveryFuture::new();
        // The queue has room nearly always: queue it here, and make the waiting future only
        // when it is full (moving a record into a future and out again is not free).
        match self.push_unless_closed(record, reply) {
            Ok(()) => Ok(future),
            Err(Refused::Stopped((record, _))) => Err(SendError::Closed(record)),
            Err(Refused::Full((record, reply))) => {
                self.enqueue(record, reply).await?;
                Ok(future)
            }
        }
    }

    /// Like [`ProducerHandle::send`], but the report goes to the
    /// [`crate::ProducerBuilder::on_delivery`] callback as a [`crate::Report`] carrying `tag` (for
    /// instance an index into the caller's own table), instead of a future per record. The
    /// cheapest way to send many records. Waits while the producer's buffer is full; resolves
    /// once the record is queued for the producer task. Returns [`SendError::Closed`] with the
    /// record once [`ProducerHandle::close`] has been called.
    pub async fn send_detached(&self, record: Record, tag: u64) -> Result<(), SendError> {
        match self.push_unless_closed(record, ReplyTo::Detached(tag)) {
            Ok(()) => Ok(()),
            Err(Refused::Stopped((record, _))) => Err(SendError::Closed(record)),
            Err(Refused::Full((record, reply))) => self.enqueue(record, reply).await,
        }
    }

    /// Sends a record without waiting. Returns [`TrySendError::Full`] with the record when the
    /// producer's buffer is full (the task holds a refused record aside) or the command queue
    /// is full. The record is never queued in that case.
    ///
    /// Design: the handle never waits for the task's answer. It checks a flag that the task
    /// sets while the core refuses records, then queues the record if the queue has room. A
    /// record that passes both checks is accepted: if the core fills up in the meantime, the
    /// task holds it aside (one record at most) and sends it when space frees. So `Ok` means
    /// "will be delivered or reported", and `Full` always returns the record.
    pub fn try_send(&self, record: Record) -> Result<DeliveryFuture, TrySendError> {
        let (future, reply) = DeliveryFuture::new();
        self.try_enqueue(record, reply)?;
        Ok(future)
    }

    /// Like [`ProducerHandle::try_send`], but the report goes to the
    /// [`crate::ProducerBuilder::on_delivery`] callback with `tag` (see
    /// [`ProducerHandle::send_detached`]). Never waits: [`TrySendError::Full`] hands the
    /// record back when the producer's buffer or the command queue is full.
    pub fn try_send_detached(&self, record: Record, tag: u64) -> Result<(), TrySendError> {
        self.try_enqueue(record, ReplyTo::Detached(tag))
    }

    /// Queues many detached records at once without waiting: one queue lock for the whole
    /// call, instead of one each as with [`ProducerHandle::try_send_detached`]. Use it
    /// when records arrive in bursts (a consumer's poll, a file read) and the per-record cost
    /// matters, from code that must not wait (else see
    /// [`ProducerHandle::send_batch_detached`]). Reports go to the
    /// [`crate::ProducerBuilder::on_delivery`] callback with each record's tag.
    ///
    /// Records are taken from the front of `records`, in order, while the command queue has
    /// room; returns how many were taken. Those left in `records` were not queued (the queue
    /// is full, or the producer's buffer is: what [`TrySendError::Full`] means for
    /// `try_send`): call again later with what is left. After [`ProducerHandle::close`] it
    /// takes nothing and returns [`BatchClosed`], leaving every record in `records`.
    pub fn try_send_batch_detached(
        &self,
        records: &mut Vec<(Record, u64)>,
    ) -> Result<usize, BatchClosed> {
        let shared = self.shared();
        if shared.closing.load(Ordering::Acquire) {
            return Err(BatchClosed);
        }
        if shared.core_full.load(Ordering::Acquire) || records.is_empty() {
            return Ok(0);
        }
        #[cfg(feature = "opentelemetry")]
        if shared.stamp_trace_context {
            records.iter_mut().for_each(|(record, _)| {
                producer_driver::otel::inject_current_context(record);
            });
        }
        self.push_batch(records, OnFull::Return)
    }

    /// Queues every record of `records` as detached records (reports to the
    /// [`crate::ProducerBuilder::on_delivery`] callback with each record's tag), waiting for
    /// room as [`ProducerHandle::send_detached`] does. One queue lock per chunk that fits in the
    /// queue, instead of one each per record: the cheapest way to send
    /// records that come in bursts. Records keep their order (per partition, as with
    /// `send_detached`); `records` is empty when this resolves `Ok`.
    ///
    /// Records are taken from the front of `records`. Returns [`BatchClosed`] once
    /// [`ProducerHandle::close`] has been called: the records not yet taken stay in `records`
    /// (those taken before are reported as usual). Cancelling the future leaves the records
    /// not yet taken in `records`, so none is lost.
    pub async fn send_batch_detached(
        &self,
        records: &mut Vec<(Record, u64)>,
    ) -> Result<(), BatchClosed> {
        let shared = self.shared();
        #[cfg(feature = "opentelemetry")]
        if shared.stamp_trace_context {
            records.iter_mut().for_each(|(record, _)| {
                producer_driver::otel::inject_current_context(record);
            });
        }
        loop {
            if shared.closing.load(Ordering::Acquire) {
                return Err(BatchClosed);
            }
            if records.is_empty() {
                return Ok(());
            }
            self.push_batch(records, OnFull::Look)?;
            if records.is_empty() {
                return Ok(());
            }
            // The queue is full: register for a wake-up, then look again (a wake-up between
            // the look and the wait is kept).
            let space = shared.space.notified();
            tokio::pin!(space);
            space.as_mut().enable();
            self.push_batch(records, OnFull::Wait)?;
            if records.is_empty() {
                return Ok(());
            }
            space.await;
        }
    }

    /// Sends every buffered record now, ignoring `linger`. Resolves when every record sent
    /// before the call (through any handle) has its report; records sent afterwards do not
    /// delay it.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if !self.shared().push_control(Command::Flush(tx)) {
            return; // The task has finished: every record was reported.
        }
        let _ = rx.await;
    }

    /// Closes the producer: refuses new records, delivers (or fails, at the latest after
    /// `delivery_timeout`) every record already sent, closes the connections and stops the
    /// task. Resolves when that is done. Any handle may call it, any number of times.
    pub async fn close(&self) {
        self.shared().closing.store(true, Ordering::Release);
        let (tx, rx) = oneshot::channel();
        if !self.shared().push_control(Command::Close(tx)) {
            return; // Already stopped.
        }
        let _ = rx.await;
    }

    /// A snapshot of the core's metrics (see [`producer_core::metrics`]; render it with
    /// [`MetricsSnapshot::render_prometheus`]), taken by the producer task between two batches
    /// of commands; after the task stopped, the snapshot it took as it stopped. Meant for a
    /// scrape interval, not for every record.
    pub async fn metrics(&self) -> MetricsSnapshot {
        let (tx, rx) = oneshot::channel();
        if self.shared().push_control(Command::Metrics(tx)) {
            if let Ok(m) = rx.await {
                return m;
            }
        }
        // The task stopped: it left its last snapshot before stopping the queue.
        self.shared().last_words.metrics().unwrap_or_default()
    }

    /// "Why is it slow?": a verdict per broker over the last sample window (see
    /// [`producer_core::diagnosis`]), from a [`ProducerHandle::metrics`] snapshot (so it costs
    /// what one does; after the task stopped, from its last one). Call it during or right after
    /// the run to explain: a progress line, the end of a run.
    pub async fn diagnose(&self) -> Diagnosis {
        self.metrics().await.diagnose()
    }

    /// The partitions of `topic` and their leaders, asking the cluster when they are not known
    /// yet (the topic is then in use, as after a send to it). Resolves once its metadata
    /// arrives, at once when it is known; or with [`PartitionsError::Unavailable`] when the
    /// cluster refuses the topic or `max.block.ms` passes first (the core's deadline bounds
    /// the wait), [`PartitionsError::InvalidTopic`] for a name that breaks Kafka's rules,
    /// [`PartitionsError::Closed`] once the producer stopped. Call it before sending to choose
    /// explicit partitions, or to size work per partition; a partition count only grows.
    /// Cancelling the future leaves the ask to run out in the producer. The ask queues behind
    /// the commands before it: while the producer's buffer is full and the task holds a record
    /// aside, it waits for room as a flush does.
    pub async fn partitions_for(&self, topic: &str) -> Result<TopicPartitions, PartitionsError> {
        let (tx, rx) = oneshot::channel();
        if !self
            .shared()
            .push_control(Command::Partitions(Arc::from(topic), tx))
        {
            return Err(PartitionsError::Closed);
        }
        rx.await.unwrap_or(Err(PartitionsError::Closed))
    }

    /// Whether [`ProducerHandle::close`] was called or the producer task has stopped.
    pub fn is_closed(&self) -> bool {
        self.shared().closing.load(Ordering::Acquire) || self.shared().queue.is_stopped()
    }

    /// Queues detached records from the front of `records` while the queue has room, under
    /// one lock; how many it took.
    /// `on_full`: what the caller does if some are left.
    fn push_batch(
        &self,
        records: &mut Vec<(Record, u64)>,
        on_full: OnFull,
    ) -> Result<usize, BatchClosed> {
        let shared = self.shared();
        let burst = shared
            .queue
            .push_burst(
                records,
                on_full,
                |(record, _)| charge(record),
                |(record, tag), bytes| Command::Send {
                    record,
                    opaque: ReplyTo::Detached(tag),
                    bytes,
                },
            )
            .map_err(|_| BatchClosed)?;
        if burst.taken > 0 && burst.was_empty {
            shared.cmd_ready.notify_one();
        }
        Ok(burst.taken)
    }

    /// Queues `record` if there is room; a refused record comes back as it was given.
    /// `on_full`: what the caller does when refused as full.
    fn push(
        &self,
        record: Record,
        reply: ReplyTo,
        on_full: OnFull,
    ) -> Result<(), Refused<(Record, ReplyTo)>> {
        let shared = self.shared();
        let bytes = charge(&record);
        let was_empty = shared
            .queue
            .push((record, reply), bytes, on_full, |(record, reply)| {
                Command::Send {
                    record,
                    opaque: reply,
                    bytes,
                }
            })?;
        if was_empty {
            shared.cmd_ready.notify_one();
        }
        Ok(())
    }

    /// Queues `record` if there is room and [`ProducerHandle::close`] was not called (a
    /// refusal as stopped then), for a sender that waits for room if refused as full.
    #[inline]
    fn push_unless_closed(
        &self,
        record: Record,
        reply: ReplyTo,
    ) -> Result<(), Refused<(Record, ReplyTo)>> {
        if self.shared().closing.load(Ordering::Acquire) {
            return Err(Refused::Stopped((record, reply)));
        }
        #[cfg(feature = "opentelemetry")]
        if self.shared().stamp_trace_context {
            return self.push_stamped(record, reply, OnFull::Look);
        }
        self.push(record, reply, OnFull::Look)
    }

    /// [`ProducerHandle::push`] for a producer that traces: the caller's context stamped on
    /// the record first. Out of line, so that the record path of a producer that does not
    /// trace stays one branch (a record borrowed mutably there was copied once more).
    #[cfg(feature = "opentelemetry")]
    #[cold]
    #[inline(never)]
    fn push_stamped(
        &self,
        mut record: Record,
        reply: ReplyTo,
        on_full: OnFull,
    ) -> Result<(), Refused<(Record, ReplyTo)>> {
        producer_driver::otel::inject_current_context(&mut record);
        self.push(record, reply, on_full)
    }

    /// Queues a record, waiting for room.
    async fn enqueue(&self, mut record: Record, mut reply: ReplyTo) -> Result<(), SendError> {
        let shared = self.shared();
        loop {
            if shared.closing.load(Ordering::Acquire) {
                return Err(SendError::Closed(record));
            }
            match self.push(record, reply, OnFull::Look) {
                Ok(()) => return Ok(()),
                Err(Refused::Stopped((r, _))) => return Err(SendError::Closed(r)),
                Err(Refused::Full(back)) => (record, reply) = back,
            }
            // Full: register for a wake-up, then look again (a wake-up between the look and
            // the wait is kept).
            let space = shared.space.notified();
            tokio::pin!(space);
            space.as_mut().enable();
            match self.push(record, reply, OnFull::Wait) {
                Ok(()) => return Ok(()),
                Err(Refused::Stopped((r, _))) => return Err(SendError::Closed(r)),
                Err(Refused::Full(back)) => {
                    (record, reply) = back;
                    space.await;
                }
            }
        }
    }

    /// Queues a record without waiting (see [`ProducerHandle::try_send`]).
    fn try_enqueue(&self, record: Record, reply: ReplyTo) -> Result<(), TrySendError> {
        let shared = self.shared();
        if shared.closing.load(Ordering::Acquire) {
            return Err(TrySendError::Closed(record));
        }
        if shared.core_full.load(Ordering::Acquire) {
            return Err(TrySendError::Full(record));
        }
        #[cfg(feature = "opentelemetry")]
        if shared.stamp_trace_context {
            return self.push_stamped(record, reply, OnFull::Return).map_err(
                |refused| match refused {
                    Refused::Full((r, _)) => TrySendError::Full(r),
                    Refused::Stopped((r, _)) => TrySendError::Closed(r),
                },
            );
        }
        self.push(record, reply, OnFull::Return)
            .map_err(|refused| match refused {
                Refused::Full((r, _)) => TrySendError::Full(r),
                Refused::Stopped((r, _)) => TrySendError::Closed(r),
            })
    }
}
