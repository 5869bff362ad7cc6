//! What the application's handles queue for a [`crate::DriverLoop`] ([`Command`],
//! [`TransactionCall`]), and how a driver answers the calls that wait ([`Replies`], through a
//! [`Channel`]: [`Answered`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use producer_core::{
    ConsumerGroupMetadata, InFlight, MetricsSnapshot, OffsetToCommit, PurgeScope, Record,
    TransactionError, TransactionOperation,
};

use crate::control::{CloseOutcome, FlushOutcome};
use crate::partitions::PartitionsResult;

/// How a driver answers the calls that wait for the producer (a flush, a close, a metrics
/// snapshot, a transactional operation), and what its records carry: the types of its
/// [`Command`]s.
pub trait Replies {
    /// The value a record was sent with, handed back in its report.
    type Opaque;
    /// Waits for a flush or a close to be done.
    type Done;
    /// Waits for a metrics snapshot.
    type Metrics;
    /// Waits for a transactional operation's result.
    type Transaction;
    /// Waits for a topic's partitions.
    type Partitions;
    /// Waits for a purge's count.
    type Purged;
    /// Waits for a `flush_within`'s outcome.
    type Flushed;
    /// Waits for a `close_within`'s outcome.
    type Closed;

    /// Answers a flush or a close: it is done.
    fn done(waiter: Self::Done);
    /// Answers a metrics request.
    fn metrics(waiter: Self::Metrics, snapshot: MetricsSnapshot);
    /// Answers a transactional operation.
    fn transaction(waiter: Self::Transaction, result: Result<(), TransactionError>);
    /// Answers a topic's partitions.
    fn partitions(waiter: Self::Partitions, result: PartitionsResult);
    /// Answers a purge with how many records it removed.
    fn purged(waiter: Self::Purged, count: usize);
    /// Answers a `flush_within`.
    fn flushed(waiter: Self::Flushed, outcome: FlushOutcome);
    /// Answers a `close_within`.
    fn closed(waiter: Self::Closed, outcome: CloseOutcome);
}

/// A kind of one-shot channel a driver answers its waiting calls through (tokio's oneshot,
/// a blocking `sync_channel(1)`).
pub trait Channel {
    /// The sending half, for a value of type `V`.
    type Sender<V>;
    /// Sends `value`; a receiver that is gone is no error (nobody waits any more).
    fn send<V>(sender: Self::Sender<V>, value: V);
}

/// The [`Replies`] of a driver whose records carry `O` and whose waiting calls are answered
/// through channels of kind `C`.
pub struct Answered<O, C>(std::marker::PhantomData<(fn(O), C)>);

impl<O, C: Channel> Replies for Answered<O, C> {
    type Opaque = O;
    type Done = C::Sender<()>;
    type Metrics = C::Sender<MetricsSnapshot>;
    type Transaction = C::Sender<Result<(), TransactionError>>;
    type Partitions = C::Sender<PartitionsResult>;
    type Purged = C::Sender<usize>;
    type Flushed = C::Sender<FlushOutcome>;
    type Closed = C::Sender<CloseOutcome>;

    fn done(waiter: Self::Done) {
        C::send(waiter, ());
    }

    fn metrics(waiter: Self::Metrics, snapshot: MetricsSnapshot) {
        C::send(waiter, snapshot);
    }

    fn transaction(waiter: Self::Transaction, result: Result<(), TransactionError>) {
        C::send(waiter, result);
    }

    fn partitions(waiter: Self::Partitions, result: PartitionsResult) {
        C::send(waiter, result);
    }

    fn purged(waiter: Self::Purged, count: usize) {
        C::send(waiter, count);
    }

    fn flushed(waiter: Self::Flushed, outcome: FlushOutcome) {
        C::send(waiter, outcome);
    }

    fn closed(waiter: Self::Closed, outcome: CloseOutcome) {
        C::send(waiter, outcome);
    }
}

/// What the application's handles queue for the loop.
pub enum Command<R: Replies> {
    /// A record, with the bytes handling it frees in the queue (see
    /// [`crate::CommandQueue::push_burst`]).
    Send {
        /// The record.
        record: Record,
        /// Handed back in its report.
        opaque: R::Opaque,
        /// What the record counts against the queue's byte budget.
        bytes: usize,
    },
    /// Send everything buffered now; answered once every record sent before has its report
    /// (for a transactional producer: once every record is acknowledged).
    Flush(R::Done),
    /// Close the producer; answered once it is closed.
    Close(R::Done),
    /// A metrics snapshot.
    Metrics(R::Metrics),
    /// A transactional operation; answered when the core reports it complete (refused or
    /// local ones at once).
    Transaction(TransactionCall, R::Transaction),
    /// A topic's partitions: answered from the core's events (see [`crate::PartitionsError`]).
    Partitions(Arc<str>, R::Partitions),
    /// [`producer_core::Producer::purge`] of the records the core holds (every record sent
    /// before this command is there); answered at once with how many it removed.
    Purge(PurgeScope, InFlight, R::Purged),
    /// [`producer_core::Producer::flush_within`] until this deadline (computed by the handle
    /// at the call: [`deadline_after`]); answered when every record is acknowledged, or at
    /// the deadline. Behind a record held aside (the core was full) the deadline still holds:
    /// the flush is answered at it with the records not yet reported, those held and queued
    /// before it included.
    FlushWithin(Instant, R::Flushed),
    /// [`producer_core::Producer::close_within`] with this deadline (computed by the handle at
    /// the call: [`deadline_after`]); answered once the core is closed, with what the deadline
    /// ended. Behind a record held aside (the core was full) the deadline still holds: at it,
    /// that record and the records queued before the close fail as never sent
    /// ([`producer_core::ProduceError::Purged`], counted in the outcome's `purged`), then the
    /// close applies and the core ends the rest at once.
    CloseWithin(Instant, R::Closed),
}

/// A deadline as good as none, for a timeout too large to add to an `Instant`.
const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// The deadline `timeout` after `now` (a year when that overflows): what a handle puts in a
/// [`Command::FlushWithin`] or [`Command::CloseWithin`], `now` read from the clock its loop
/// runs on, at the call.
pub fn deadline_after(now: Instant, timeout: Duration) -> Instant {
    now.checked_add(timeout).unwrap_or(now + YEAR)
}

impl<R: Replies> Command<R> {
    /// What handling the command frees of the queue's byte budget.
    #[inline]
    pub fn bytes(&self) -> usize {
        match self {
            Command::Send { bytes, .. } => *bytes,
            _ => 0,
        }
    }
}

/// The transactional operations, as a handle queues them.
#[derive(Debug)]
pub enum TransactionCall {
    /// [`producer_core::Transactions::init`].
    Init,
    /// [`producer_core::Transactions::begin`].
    Begin,
    /// [`producer_core::Transactions::send_offsets`].
    SendOffsets(Vec<OffsetToCommit>, ConsumerGroupMetadata),
    /// [`producer_core::Transactions::commit`].
    Commit,
    /// [`producer_core::Transactions::abort`].
    Abort,
}

impl TransactionCall {
    /// The operation it starts.
    pub fn operation(&self) -> TransactionOperation {
        match self {
            TransactionCall::Init => TransactionOperation::Init,
            TransactionCall::Begin => TransactionOperation::Begin,
            TransactionCall::SendOffsets(..) => TransactionOperation::SendOffsets,
            TransactionCall::Commit => TransactionOperation::Commit,
            TransactionCall::Abort => TransactionOperation::Abort,
        }
    }
}
