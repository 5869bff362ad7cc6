//! The producer's counters: plain totals, kept by the state machine, read in its metrics.

/// Counters an operator may want to read: plain totals over the producer's life, each updated
/// once per request, batch or report run (never per record). [`crate::Producer::metrics`] gives them
/// together with the gauges and histograms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Records carried by Produce requests (each attempt counts: retries included).
    pub records_sent: u64,
    /// Bytes of the record batches carried by Produce requests (retries included).
    pub bytes_sent: u64,
    /// Records reported delivered.
    pub records_delivered: u64,
    /// Records reported failed.
    pub records_failed: u64,
    /// Of [`Stats::records_failed`], the records a broker rejected themselves, each named in
    /// its Produce response's record errors (KIP-467) and reported with
    /// [`crate::ProduceError::InvalidRecord`]; their batch mates
    /// ([`crate::ProduceError::BatchRejected`]) count in `records_failed` only.
    pub records_invalid: u64,
    /// Produce requests built.
    pub produce_requests: u64,
    /// Batches sent (retries included).
    pub batches_sent: u64,
    /// Open batches that grew past `batch_size` because every in-flight slot to their leader
    /// was busy (`batch.grow.max.bytes`; counted once per batch, when it starts to grow).
    pub batches_grown: u64,
    /// Batches retried.
    pub retries: u64,
    /// Records retried: the records of the batches in [`Stats::retries`] (Java's
    /// `record-retry-total`).
    pub records_retried: u64,
    /// Nanoseconds records waited for buffer space (Java's `bufferpool-wait-time-ns-total`):
    /// from `send`'s first refusal as [`crate::SendErrorReason::Full`] to the next record it
    /// accepts, by the `now` the calls carried. Counted when the wait ends. With a threaded
    /// driver, also the time senders were held back in its queue by the same budget
    /// ([`crate::Producer::note_send_wait`]).
    pub buffer_wait_ns: u64,
    /// Nanoseconds records were held back by the queue-delay limit (`queue.delay.target.ms`,
    /// `queue-delay-wait-time-ns-total`): from `send`'s first refusal by it as
    /// [`crate::SendErrorReason::Full`] to the next record it accepts, by the `now` the calls
    /// carried; counted when the wait ends. Apart from [`Stats::buffer_wait_ns`]: a refusal
    /// counts here when `buffer.memory` had room and the limit did not. A threaded driver
    /// holds its senders back in its own queue first, by the same limit (see
    /// [`crate::Producer::queue_delay_room`]), and its waits count here too
    /// ([`crate::Producer::note_send_wait`]).
    pub queue_delay_wait_ns: u64,
    /// Responses that could not be parsed (the connection was closed).
    pub malformed_responses: u64,
    /// Bytes after complete response bodies that the body did not use (ignored).
    pub trailing_response_bytes: u64,
    /// Connections lost or timed out.
    pub disconnects: u64,
    /// Metadata responses applied.
    pub metadata_refreshes: u64,
    /// Topics Metadata showed with a new topic id (deleted and created again under their
    /// name while in use).
    pub topics_recreated: u64,
    /// Times the producer went back to its bootstrap list (`metadata.recovery.strategy`
    /// rebootstrap: no known broker reachable, or `REBOOTSTRAP_REQUIRED`).
    pub rebootstraps: u64,
    /// Brokers dropped because Metadata no longer listed them.
    pub brokers_dropped: u64,
    /// Topics forgotten after `metadata.max.idle.ms` unused.
    pub topics_forgotten: u64,
    /// Answers (or topic entries of answers) refused for breaking the protocol's rules or the
    /// caps in [`crate::limits`] ([`crate::Event::AnswerRefused`]).
    pub answers_refused: u64,
    /// Responses to acks=0 requests (which expect none), ignored.
    pub ignored_responses: u64,
    /// Transactions committed (a transactional producer).
    pub transactions_committed: u64,
    /// Transactions aborted (by `abort_transaction`, or by a close with one open).
    pub transactions_aborted: u64,
}
