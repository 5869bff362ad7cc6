//! What the handles and the producer task share: the command queue and its wake-ups, and the
//! task's side of the command layer ([`TokioHost`]: where reports and events go, how a
//! waiting call is answered).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use producer_core::{Delivery, Event};
use producer_driver::{Answered, Channel, Command, CommandQueue, Host, LastWords};
use tokio::sync::{oneshot, Notify};

use crate::delivery::{OnDelivery, ReplyTo};
use crate::error::DeliveryError;

/// What the handles put in the producer task's queue.
pub(crate) type Cmd = Command<Answered<ReplyTo, Oneshot>>;

/// State shared by the handles and the producer task.
pub(crate) struct Shared {
    /// `close` was called: new sends are refused at once.
    pub(crate) closing: AtomicBool,
    /// The core refused a record as `Full` and the task holds it aside: `try_send` answers
    /// `Full` without queueing.
    pub(crate) core_full: AtomicBool,
    /// The commands; its capacity bounds the `Send`s queued or held by the task, and its byte
    /// budget (`buffer_memory`) their bytes together with what the core holds.
    pub(crate) queue: CommandQueue<Cmd>,
    /// Wakes the task: notified when a command lands in an empty queue (the task looks at the
    /// queue again before sleeping whenever it took something).
    pub(crate) cmd_ready: Notify,
    /// Wakes senders waiting for space.
    pub(crate) space: Notify,
    /// The core's metrics and transactional failure as the task stopped (set before the
    /// queue stops).
    pub(crate) last_words: LastWords,
    /// The producer has a `transactional.id`: the handles have the transactional API.
    pub(crate) transactional: bool,
    /// The send calls stamp the caller's OpenTelemetry context on each record
    /// (`ProducerBuilder::opentelemetry`).
    #[cfg(feature = "opentelemetry")]
    pub(crate) stamp_trace_context: bool,
}

impl Shared {
    pub(crate) fn new(command_capacity: usize, buffer_memory: usize, transactional: bool) -> Self {
        Shared {
            closing: AtomicBool::new(false),
            core_full: AtomicBool::new(false),
            queue: CommandQueue::new(command_capacity, buffer_memory).with_clock(now),
            cmd_ready: Notify::new(),
            space: Notify::new(),
            last_words: LastWords::default(),
            transactional,
            #[cfg(feature = "opentelemetry")]
            stamp_trace_context: false,
        }
    }

    /// Queues a flush, a close or another call that waits (not counted against the capacity):
    /// false when the task has stopped.
    pub(crate) fn push_control(&self, cmd: Cmd) -> bool {
        match self.queue.push_control(cmd) {
            Ok(was_empty) => {
                if was_empty {
                    self.cmd_ready.notify_one();
                }
                true
            }
            Err(_) => false,
        }
    }
}

/// The callback of [`crate::ProducerBuilder::on_event`].
#[derive(Clone)]
pub(crate) struct OnEvent(pub(crate) Arc<dyn Fn(&Event) + Send + Sync>);

impl std::fmt::Debug for OnEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnEvent(..)")
    }
}

/// The producer task's [`Host`]: a report goes to its future or the delivery callback, an
/// event to the event callback, a waiting call's answer down its oneshot channel.
pub(crate) struct TokioHost {
    pub(crate) on_delivery: Option<OnDelivery>,
    pub(crate) on_event: Option<OnEvent>,
    pub(crate) shared: Arc<Shared>,
}

/// tokio's oneshot channel: the handle awaits its receiver.
pub(crate) struct Oneshot;

impl Channel for Oneshot {
    type Sender<V> = oneshot::Sender<V>;

    fn send<V>(sender: oneshot::Sender<V>, value: V) {
        let _ = sender.send(value);
    }
}

impl Host for TokioHost {
    type Replies = Answered<ReplyTo, Oneshot>;

    #[inline]
    fn deliver(&mut self, delivery: Delivery<ReplyTo>) {
        let result = delivery.result.map_err(DeliveryError::Failed);
        delivery.opaque.report(self.on_delivery.as_ref(), result);
    }

    fn show(&mut self, event: &Event) {
        if let Some(f) = &self.on_event {
            (f.0)(event);
        }
    }

    fn core_full(&mut self, full: bool) {
        self.shared.core_full.store(full, Ordering::Release);
    }

    fn wake_senders(&mut self) {
        self.shared.space.notify_waiters();
    }
}

/// The clock the core runs on: tokio's, so tests may pause time.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}
