//! Where one record's report goes: its [`DeliveryFuture`], or the `on_delivery` callback.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use producer_core::RecordMetadata;
use tracing::warn;

use crate::completion;
use crate::error::DeliveryError;

/// What a [`DeliveryFuture`] resolves to.
pub type DeliveryResult = Result<RecordMetadata, DeliveryError>;

/// Resolves to one record's delivery report. Dropping it is harmless: the record is still
/// delivered and its report discarded.
///
/// Its report waits in a slot of a block that the sending thread allocates for 64 futures at a
/// time, not in an allocation of its own; a block is freed once all 64 are resolved or
/// dropped.
#[derive(Debug)]
#[must_use = "the record is sent either way; drop the future only if its report does not matter"]
pub struct DeliveryFuture {
    rx: completion::Receiver<DeliveryResult>,
}

thread_local! {
    /// The block this thread's next futures take their slots from.
    static SLOTS: completion::Cursor<DeliveryResult> = const { completion::Cursor::new() };
}

impl completion::SlotSource for DeliveryResult {
    fn with_cursor<R>(f: impl FnOnce(&completion::Cursor<Self>) -> R) -> Option<R> {
        SLOTS.try_with(f).ok()
    }
}

impl DeliveryFuture {
    /// A future and the sender its report goes through. Call on the thread that sends the
    /// record.
    pub(crate) fn new() -> (DeliveryFuture, ReplyTo) {
        let (tx, rx) = completion::channel();
        (DeliveryFuture { rx }, ReplyTo::Future(tx))
    }
}

impl Future for DeliveryFuture {
    type Output = DeliveryResult;

    /// Resolves once; polling again afterwards gives `Err(DeliveryError::Lost)`.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<DeliveryResult> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(DeliveryError::Lost)))
    }
}

/// The report of a record sent with [`crate::ProducerHandle::send_detached`] (or
/// [`crate::ProducerHandle::try_send_detached`] and the batch calls), handed to the
/// [`crate::ProducerBuilder::on_delivery`] callback.
#[derive(Debug)]
pub struct Report {
    /// The tag the record was sent with.
    pub tag: u64,
    /// Where the record landed, or why it was not delivered (with the record).
    pub result: DeliveryResult,
}

/// The callback of [`crate::ProducerBuilder::on_delivery`].
#[derive(Clone)]
pub(crate) struct OnDelivery(Arc<dyn Fn(Report) + Send + Sync>);

impl OnDelivery {
    pub(crate) fn new(f: impl Fn(Report) + Send + Sync + 'static) -> Self {
        OnDelivery(Arc::new(f))
    }
}

impl std::fmt::Debug for OnDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnDelivery(..)")
    }
}

/// Where one record's report goes.
pub(crate) enum ReplyTo {
    /// To its [`DeliveryFuture`].
    Future(completion::Sender<DeliveryResult>),
    /// To the [`crate::ProducerBuilder::on_delivery`] callback, with the caller's tag.
    Detached(u64),
}

impl ReplyTo {
    /// Hands the report over: to the future (discarded if it was dropped), or to the callback
    /// (failures logged when there is none). Runs on the producer task.
    pub(crate) fn report(self, on_delivery: Option<&OnDelivery>, result: DeliveryResult) {
        match self {
            ReplyTo::Future(tx) => tx.send(result),
            ReplyTo::Detached(tag) => match on_delivery {
                Some(f) => (f.0)(Report { tag, result }),
                None => {
                    if let Err(e) = result {
                        warn!(tag, error = %e, "detached record not delivered (no on_delivery callback)");
                    }
                }
            },
        }
    }
}
