//! Batches that grow while their leader is busy (`batch.grow.max.bytes`): when every in-flight
//! slot to a partition's leader is taken, its open batch could not go out sooner anyway, so at
//! `batch_size` it keeps taking records, up to the topic's growth limit, instead of being
//! sealed. The broker then gets fewer, fuller requests (one batch per partition each, from
//! Produce v3 on), doing less work per record; the slot that frees takes the grown batch as
//! it is. A batch already sealed stays sealed.
//!
//! The rules, each in one place here:
//! - whether a broker's slots are all busy is noted when its count of Produce requests in
//!   flight changes ([`Producer::produce_slots_changed`]), never worked out per record;
//! - it also grows when a batch of its partition closed earlier has not been sent yet: it
//!   would go in a later request anyway (a request carries one batch per partition);
//! - an open batch is looked at once, when it reaches its limit
//!   ([`Producer::grow_open_batch`]); the per-record path compares against the batch's own
//!   limit, as it compared against `batch_size` before;
//! - a grown batch the broker refuses as too large (the topic's `max.message.bytes` is
//!   smaller) is split and resent, and the topic's growth limit comes down to half its size
//!   ([`Producer::refused_as_too_large`]).

use crate::classify::batch_too_large;
use crate::ErrorCode;

use super::intake::request_overhead;
use super::Producer;

impl<T> Producer<T> {
    /// The count of Produce requests in flight on the connection of the broker in `slot`
    /// changed to `in_flight` (a request sent or answered; 0 when the connection was lost):
    /// notes it for the metrics and for growth.
    pub(super) fn produce_slots_changed(&mut self, slot: u32, in_flight: usize) {
        let max = self.config.max_in_flight;
        self.metrics
            .produce_in_flight(slot, self.now, in_flight, max);
        self.brokers
            .slot_mut(slot)
            .set_produce_in_flight(in_flight, max);
    }

    /// The open batch of partition `p` of `topic` reached its limit: lets it grow to the
    /// topic's growth limit if it could not go out now anyway and it has not grown yet: every
    /// in-flight slot to the partition's leader is busy, or a batch of the partition closed
    /// earlier still waits for its first send (a request carries one batch per partition, so
    /// this one would go in a later request: at startup, before the first request, or behind
    /// a backlog). Returns whether it grew (else the caller seals it as full).
    #[cold]
    #[inline(never)]
    pub(super) fn grow_open_batch(&mut self, topic: u32, p: u32) -> bool {
        let pq = self.topics.partition(topic, p);
        let busy = pq.has_unsent_closed()
            || self
                .brokers
                .slot_of_node(pq.leader())
                .is_some_and(|slot| self.brokers.slot(slot).produce_slots_full());
        if !busy {
            return false;
        }
        let t = self.topics.get(topic);
        // Within the request that carries it, with its framing.
        let framed = self
            .config
            .max_request_size
            .saturating_sub(request_overhead(&self.config.client_id, &t.name));
        let limit = t.grow_limit(self.config.batch_grow_max).min(framed);
        match self.topics.partition_mut(topic, p).open.as_mut() {
            Some(open) if !open.grown() && limit > open.limit() => {
                open.grow_to(limit);
                self.stats.batches_grown += 1;
                true
            }
            _ => false,
        }
    }

    /// The broker answered the sent batch at `i` of partition `p` of `topic` with `code`.
    /// When the code says the batch was too large ([`batch_too_large`]) and it held more than
    /// one record, the topic's growth limit comes down to half the batch's size (never below
    /// `batch_size`), and a batch that grew past `batch_size` is split and resent, whichever
    /// of the two codes it was (the retry table would fail it on RECORD_LIST_TOO_LARGE).
    /// Returns whether the answer was dealt with here; else the retry table decides.
    pub(super) fn refused_as_too_large(
        &mut self,
        t: u32,
        p: u32,
        i: usize,
        code: ErrorCode,
    ) -> bool {
        if !batch_too_large(code) {
            return false;
        }
        let batch = self.topics.partition(t, p).batch(i);
        if batch.record_count() < 2 {
            return false;
        }
        let size = batch.uncompressed_size();
        let batch_size = self.config.batch_size;
        self.topics.get_mut(t).learn_grow_limit(size, batch_size);
        if size > batch_size {
            self.split(t, p, i);
            return true;
        }
        false
    }
}
