//! One partition's batches and the rules for sending them: the open batch, the closed batches in
//! send order, what is in flight and where, its leader, and its idempotent sequence state.
//!
//! A partition's closed batches form one queue. Batches leave it only from the front, once they
//! and every batch before them are done, so delivery reports come out in send order whatever
//! order responses resolve them in. The first `sent` batches have been sent at least once and
//! carry sequence numbers; the rest have never been sent.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::active::Listing;

use crate::batch::{Batch, BatchState, OpenBatch, Unreported};
use crate::types::{ConnId, ConnectionError, ProduceError};

/// The sequence after `count` records from `seq`, wrapping from `i32::MAX` to 0 as Kafka does.
pub(crate) fn next_sequence(seq: i32, count: i32) -> i32 {
    ((seq as i64 + count as i64) % (i32::MAX as i64 + 1)) as i32
}

/// A partition's batches and its sending state.
#[derive(Debug)]
pub(crate) struct PartitionQueue<T> {
    /// The batch records are appended to.
    pub(crate) open: Option<OpenBatch<T>>,
    /// Closed batches in send order.
    batches: VecDeque<Batch<T>>,
    /// How many batches at the front of `batches` have been sent at least once (and so have
    /// sequence numbers).
    sent: usize,
    /// Batches currently in flight, and the connection they are on.
    inflight: usize,
    inflight_conn: Option<ConnId>,
    /// Leader node id (-1 unknown) and epoch.
    leader: i32,
    leader_epoch: i32,
    /// No send before this instant (retry backoff).
    pub(crate) backoff_until: Option<Instant>,
    /// Waiting for a metadata refresh before sending again.
    pub(crate) needs_metadata: bool,
    /// Producer id, epoch and next sequence this partition's batches are stamped with.
    producer_id: i64,
    epoch: i16,
    next_sequence: i32,
    /// This connection answered a batch of the partition with success, so the partition may
    /// pipeline more than one request on it.
    ok_on_conn: Option<ConnId>,
    /// The partition must bump its epoch and restamp its unacknowledged batches before it sends
    /// again (once nothing is in flight).
    needs_reset: bool,
    /// The batch whose failure left a hole in the sequence, and whether the hole is certain
    /// (the broker answered that it appended nothing of the batch). Batches before it still
    /// belong to the old epoch's sequence and are resolved under it first; the reset happens
    /// once this batch has left the queue (so everything before it is done).
    reset_barrier: Option<(u64, bool)>,
    /// The delivery-timeout deadline currently armed for this partition.
    pub(crate) delivery_timer: Option<Instant>,
    /// Id of the next batch opened on this partition (ids identify batches in requests).
    next_batch_id: u64,
    /// The broker list this partition is on ([`crate::active`]), if any.
    listing: Option<Listing>,
}

/// What [`PartitionQueue::purge`] ended.
#[derive(Debug)]
pub(crate) struct PurgeCount<T> {
    /// Records never sent, failed.
    pub(crate) unsent: usize,
    /// Records of sent batches (in flight, or waiting to be sent again) failed.
    pub(crate) sent: usize,
    /// The open batch's records when it could not be closed: to report at once (counted in
    /// `unsent`).
    pub(crate) open: Option<Unreported<T>>,
}

/// What [`PartitionQueue::prepare_identity`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdentityStep {
    /// The partition may send under its current producer id and epoch.
    Ready,
    /// It adopted the producer id for the first time.
    Adopted,
    /// It bumped its epoch and restarted its sequences at 0 (the new epoch).
    Reset(i16),
    /// A reset is due, but the batches before the sequence hole are still being resolved under
    /// the old epoch: those may be retried ([`PartitionQueue::next_sendable`] allows nothing
    /// else), and the reset happens once they are done.
    ResolvingHole,
    /// Its epochs are exhausted: the producer needs a new producer id.
    NeedsNewProducerId,
    /// A reset is due, but the partition may not bump its own epoch (a transactional producer's
    /// epoch is the coordinator's): it waits for the producer's epoch to move on.
    AwaitingEpoch,
}

impl<T> PartitionQueue<T> {
    pub(crate) fn new() -> Self {
        PartitionQueue {
            open: None,
            batches: VecDeque::new(),
            sent: 0,
            inflight: 0,
            inflight_conn: None,
            leader: -1,
            leader_epoch: -1,
            backoff_until: None,
            needs_metadata: false,
            producer_id: -1,
            epoch: -1,
            next_sequence: 0,
            ok_on_conn: None,
            needs_reset: false,
            reset_barrier: None,
            delivery_timer: None,
            next_batch_id: 0,
            listing: None,
        }
    }

    /// Where the partition is listed as having something to send ([`crate::active`]).
    pub(crate) fn listing(&self) -> Option<Listing> {
        self.listing
    }

    /// Notes the listing the partition's entry carries (`None`: on no list; an entry with
    /// another sequence number is stale).
    pub(crate) fn set_listing(&mut self, listing: Option<Listing>) {
        self.listing = listing;
    }

    /// Whether anything (open, queued or in flight) is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.open.is_none() && self.batches.is_empty()
    }

    /// The leader's node id, -1 when none is known.
    pub(crate) fn leader(&self) -> i32 {
        self.leader
    }

    /// Batches waiting to be sent for the first time, the open one included (Java: the length
    /// of the partition's deque in `RecordAccumulator.partitionReady`, which holds the open
    /// batch and the batches not drained yet). Counters only: no walk. The adaptive
    /// partitioner weighs [`PartitionQueue::queued_load`].
    #[cfg(test)]
    pub(crate) fn queued_batches(&self) -> u32 {
        let closed = self.batches.len().saturating_sub(self.sent);
        u32::try_from(closed + usize::from(self.open.is_some())).unwrap_or(u32::MAX)
    }

    /// Batches waiting to be sent for the first time, the open one counted as the batches of
    /// `batch_size` it stands for ([`OpenBatch::batch_equivalents`]: more than one once it grew
    /// while its leader was busy): the depth the adaptive partitioner weighs, so that growth
    /// does not hide a busy leader's queue from it. Counters only: no walk.
    #[inline]
    pub(crate) fn queued_load(&self) -> u32 {
        let closed = self.batches.len().saturating_sub(self.sent);
        let open = self.open.as_ref().map_or(0, OpenBatch::batch_equivalents);
        u32::try_from(closed + open).unwrap_or(u32::MAX)
    }

    /// Whether a closed batch waits for its first send: a batch closed now would go out after
    /// it, in a later request (a request carries one batch per partition).
    #[inline]
    pub(crate) fn has_unsent_closed(&self) -> bool {
        self.batches.len() > self.sent
    }

    /// Whether batches are waiting for the leader to take them at `now`: a closed batch never
    /// sent, or an open one past its `linger` (what makes the Java client's `ready` name the
    /// leader).
    pub(crate) fn has_waiting(&self, now: Instant, linger: Duration) -> bool {
        self.batches.len() > self.sent
            || self
                .open
                .as_ref()
                .is_some_and(|o| o.created() + linger <= now)
    }

    /// The producer id and epoch its batches are stamped with.
    pub(crate) fn identity(&self) -> (i64, i16) {
        (self.producer_id, self.epoch)
    }

    /// A fresh id for a new batch of this partition.
    pub(crate) fn take_batch_id(&mut self) -> u64 {
        let id = self.next_batch_id;
        self.next_batch_id += 1;
        id
    }

    /// Queues a closed batch behind the others.
    pub(crate) fn push_closed(&mut self, batch: Batch<T>) {
        self.batches.push_back(batch);
    }

    /// Index of the batch with this id, if it is still held.
    pub(crate) fn find(&self, id: u64) -> Option<usize> {
        // A split batch's halves get fresh ids, so ids are not ordered along the queue; but the
        // batches looked up (in flight, or just answered) sit near its front.
        self.batches.iter().position(|b| b.id() == id)
    }

    pub(crate) fn batch(&self, i: usize) -> &Batch<T> {
        &self.batches[i]
    }

    pub(crate) fn batch_mut(&mut self, i: usize) -> &mut Batch<T> {
        &mut self.batches[i]
    }

    /// Whether the batch at `i` is the oldest one not yet finished.
    pub(crate) fn is_head(&self, i: usize) -> bool {
        self.batches.iter().position(|b| !b.is_done()) == Some(i)
    }

    // ---------------------------------------------------------------------------------------
    // Leadership
    // ---------------------------------------------------------------------------------------

    /// The leader epoch known for the partition (-1 when none is known).
    pub(crate) fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// Applies a leader (from metadata or a Produce leader hint) and returns the previous
    /// leader if it changed. A newer leader epoch ends any backoff (no wait before retrying on a
    /// new leader, KIP-951) and the partition no longer waits for metadata.
    pub(crate) fn set_leader(&mut self, leader: i32, leader_epoch: i32) -> Option<i32> {
        let old = self.leader;
        let changed = old != leader || leader_epoch > self.leader_epoch;
        self.leader_epoch = self.leader_epoch.max(leader_epoch);
        self.needs_metadata = false;
        if changed && leader_epoch > -1 {
            self.backoff_until = None;
        }
        if old == leader {
            return None;
        }
        self.leader = leader;
        Some(old)
    }

    /// A new partition of a topic that may have been written before under `producer_id` (the
    /// producer forgot the topic while idle, and with it the partition's sequence): it starts
    /// under an epoch above `epoch`, the highest a forgotten partition used, so its sequence
    /// starting at 0 is a new epoch's to the broker, never a repeat or a gap under an old one.
    /// At the last epoch it needs a new producer id instead. Call it before the partition's
    /// first batch is sent; a later producer id or a higher producer epoch is adopted as usual.
    pub(crate) fn start_above(&mut self, producer_id: i64, epoch: i16) {
        debug_assert!(self.is_empty() && self.sent == 0);
        self.producer_id = producer_id;
        self.next_sequence = 0;
        match epoch.checked_add(1) {
            Some(next) => self.epoch = self.epoch.max(next),
            None => {
                self.epoch = i16::MAX;
                self.needs_reset = true;
            }
        }
    }

    /// The topic was deleted and created again (a new topic id): its leader epochs start over,
    /// so the epoch seen so far no longer says which leader is newer. Call before applying the
    /// new incarnation's leader; after it any epoch is accepted (Java's `Metadata` does the same
    /// when a topic id changes).
    pub(crate) fn forget_leader_epoch(&mut self) {
        self.leader_epoch = -1;
    }

    // ---------------------------------------------------------------------------------------
    // What may be sent
    // ---------------------------------------------------------------------------------------

    /// The index of the batch this partition would send next on `conn`, if the ordering rules
    /// allow one now. Open batches are not considered (the request builder closes them first).
    pub(crate) fn next_sendable(&self, conn: ConnId, idempotent: bool) -> Option<usize> {
        if self.blocked_on(conn) {
            return None;
        }
        // A batch waiting to be sent again comes first, and alone.
        if let Some(i) = self.first_retry() {
            let before_barrier = self.barrier_position().is_some_and(|b| i < b);
            let allowed = self.inflight == 0 && (!self.needs_reset || before_barrier);
            return allowed.then_some(i);
        }
        if self.sent >= self.batches.len() {
            return None;
        }
        self.fresh_allowed(conn, idempotent).then_some(self.sent)
    }

    /// Whether the partition could start a new batch from its open one on `conn` (the same
    /// rules as a fresh closed batch).
    pub(crate) fn may_send_fresh(&self, conn: ConnId, idempotent: bool) -> bool {
        !self.blocked_on(conn)
            && self.sent >= self.batches.len()
            && self.first_retry().is_none()
            && self.fresh_allowed(conn, idempotent)
    }

    /// Whether there is something to send on `conn` at `now`: a closed batch the ordering rules
    /// allow, or an open batch past its `linger` or grown past `batch_size` (or any open batch
    /// while `closing`).
    pub(crate) fn has_sendable(
        &self,
        conn: ConnId,
        idempotent: bool,
        now: Instant,
        linger: Duration,
        closing: bool,
    ) -> bool {
        if self.backoff_until.is_some_and(|at| at > now) {
            return false;
        }
        if self.next_sendable(conn, idempotent).is_some() {
            return true;
        }
        // A grown batch goes as soon as its leader takes it, as a full one does.
        let lingered = self
            .open
            .as_ref()
            .is_some_and(|o| o.created() + linger <= now || closing || o.grown());
        lingered && self.may_send_fresh(conn, idempotent)
    }

    /// Nothing may go to `conn` now: no leader known, waiting for metadata, or batches of this
    /// partition in flight on another connection (never overlap across a leader move).
    fn blocked_on(&self, conn: ConnId) -> bool {
        self.needs_metadata
            || self.leader < 0
            || (self.inflight > 0 && self.inflight_conn != Some(conn))
    }

    /// The first sent batch waiting to be sent again.
    fn first_retry(&self) -> Option<usize> {
        self.batches
            .iter()
            .take(self.sent)
            .position(|b| *b.state() == BatchState::Ready)
    }

    /// Whether a batch never sent may go out on `conn`: with idempotence, after a success on
    /// that connection (pipelining) or with nothing in flight, and not before a pending reset;
    /// without it, one batch in flight per partition keeps order under retries.
    fn fresh_allowed(&self, conn: ConnId, idempotent: bool) -> bool {
        if idempotent {
            !self.needs_reset && (self.inflight == 0 || self.ok_on_conn == Some(conn))
        } else {
            self.inflight == 0
        }
    }

    // ---------------------------------------------------------------------------------------
    // Flights
    // ---------------------------------------------------------------------------------------

    /// The batch at `i` goes out in a request on `conn`. A batch sent for the first time is
    /// stamped now, with the partition's next sequence when `idempotent` (sequences are fixed at
    /// first send), else with -1s.
    pub(crate) fn begin_flight(&mut self, i: usize, conn: ConnId, idempotent: bool) {
        if i == self.sent {
            let b = &mut self.batches[i];
            if idempotent {
                let seq = self.next_sequence;
                b.stamp(self.producer_id, self.epoch, Some(seq));
                self.next_sequence = next_sequence(seq, b.record_count());
            } else {
                b.stamp(-1, -1, None);
            }
            self.sent += 1;
        }
        self.batches[i].begin_attempt(conn);
        self.inflight += 1;
        self.inflight_conn = Some(conn);
    }

    /// The flight of the batch at `i` on `conn` ended (answered, lost with its connection, or
    /// handed to an acks=0 connection). Returns false, changing nothing, when that batch is not
    /// in flight on `conn` (a stale answer).
    pub(crate) fn end_flight(&mut self, i: usize, conn: ConnId) -> bool {
        if !self.batches[i].is_in_flight_on(conn) {
            return false;
        }
        self.inflight -= 1;
        if self.inflight == 0 {
            self.inflight_conn = None;
        }
        true
    }

    /// A batch of this partition succeeded on `conn`: with idempotence the partition may now
    /// pipeline requests there.
    pub(crate) fn succeeded_on(&mut self, conn: ConnId) {
        self.ok_on_conn = Some(conn);
    }

    // ---------------------------------------------------------------------------------------
    // Idempotent sequences
    // ---------------------------------------------------------------------------------------

    /// Asks for an epoch bump and sequence restart. `after` is the batch whose failure left the
    /// hole (`None` when the broker rejected the partition's head batch itself); the batch
    /// may have been written (it expired after an attempt that went unanswered, say), so the
    /// batches after it may still be accepted under the old epoch too.
    pub(crate) fn request_reset(&mut self, after: Option<u64>) {
        self.needs_reset = true;
        if let Some(id) = after {
            self.place_barrier(id, false);
        }
    }

    /// Moves the reset barrier to batch `id` if that waits for what may still be written under
    /// the old epoch and no more. Behind a possible hole, later batches may still be accepted,
    /// so the latest possible hole counts; behind a certain hole (`certain`: the broker
    /// appended nothing of batch `id`) nothing later can be, so the earliest certain hole
    /// counts, and waiting past it would retry the batches between for ever
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER each time) until their delivery timeout.
    fn place_barrier(&mut self, id: u64, certain: bool) {
        let Some(new_pos) = self.find(id) else { return };
        let replace = match (self.barrier_position(), self.reset_barrier) {
            (Some(old_pos), Some((_, old_certain))) => match (old_certain, certain) {
                (true, true) => new_pos < old_pos,
                (true, false) => false,
                (false, true) => true,
                (false, false) => new_pos > old_pos,
            },
            _ => true,
        };
        if replace {
            self.reset_barrier = Some((id, certain));
        }
    }

    /// Where the reset barrier batch sits, if it is still queued.
    fn barrier_position(&self) -> Option<usize> {
        self.reset_barrier.and_then(|(id, _)| self.find(id))
    }

    /// Gets the partition ready to send under the producer's id and epoch: adopts them on first
    /// use and, once nothing is in flight and the batches before a sequence hole are resolved,
    /// bumps the partition's epoch and restamps its unacknowledged batches from sequence 0.
    ///
    /// A producer epoch above the partition's (a transactional producer's new epoch after a
    /// transaction ended, or a bump after an abort) is adopted the same way. With `may_bump`
    /// false the partition never bumps its own epoch: a due reset waits for the producer's.
    pub(crate) fn prepare_identity(
        &mut self,
        producer_id: i64,
        epoch: i16,
        may_bump: bool,
    ) -> IdentityStep {
        if self.inflight > 0 {
            return IdentityStep::Ready;
        }
        let (new_epoch, step) = if self.producer_id != producer_id || epoch > self.epoch {
            (epoch, IdentityStep::Adopted)
        } else if self.needs_reset && !may_bump {
            return IdentityStep::AwaitingEpoch;
        } else if self.needs_reset {
            if self.barrier_position().is_some() {
                return IdentityStep::ResolvingHole;
            }
            if self.epoch == i16::MAX {
                return IdentityStep::NeedsNewProducerId;
            }
            (self.epoch + 1, IdentityStep::Reset(self.epoch + 1))
        } else {
            return IdentityStep::Ready;
        };
        self.producer_id = producer_id;
        self.epoch = new_epoch;
        self.needs_reset = false;
        self.reset_barrier = None;
        self.ok_on_conn = None;
        let mut seq = 0i32;
        for b in self.batches.iter_mut().take(self.sent) {
            if b.is_done() {
                continue;
            }
            b.stamp(producer_id, new_epoch, Some(seq));
            seq = next_sequence(seq, b.record_count());
        }
        self.next_sequence = seq;
        step
    }

    // ---------------------------------------------------------------------------------------
    // Failing and splitting
    // ---------------------------------------------------------------------------------------

    /// Fails a batch that was sent: with idempotence its sequence numbers are now a hole, so
    /// the partition restarts its sequence under a new epoch before sending again.
    pub(crate) fn fail_sent(&mut self, i: usize, error: ProduceError, idempotent: bool) {
        self.batches[i].finish(Err(error));
        if idempotent {
            let id = self.batches[i].id();
            self.request_reset(Some(id));
        }
    }

    /// [`Self::fail_sent`] for a batch the broker answered it appended nothing of (it rejected
    /// the batch's records, KIP-467): the hole it leaves is certain, so the sequence restarts
    /// once the batches before it are resolved, without waiting for those after it (which the
    /// broker cannot accept under the old epoch).
    pub(crate) fn fail_rejected(&mut self, i: usize, error: ProduceError, idempotent: bool) {
        self.batches[i].finish(Err(error));
        if idempotent {
            // A reset already due (its barrier resolved, or none) restamps every batch still
            // queued, those behind this one included: it needs no barrier of its own.
            let due = self.needs_reset && self.barrier_position().is_none();
            self.needs_reset = true;
            if !due {
                let id = self.batches[i].id();
                self.place_barrier(id, true);
            }
        }
    }

    /// Fails, in order, the batches whose delivery timeout passed at `now` (a batch in flight
    /// waits for its response), and the open batch too if it is that old: it is closed as a
    /// failed batch behind the others, so its reports still come after theirs (only if it
    /// cannot be closed are its records returned, to be reported at once). Also returns the
    /// next deadline to arm, if any batch is still younger.
    /// `connection_error` is what each expired batch's [`ProduceError::DeliveryTimeout`] names.
    pub(crate) fn expire(
        &mut self,
        now: Instant,
        timeout: Duration,
        connection_error: Option<Box<ConnectionError>>,
    ) -> (Option<Unreported<T>>, Option<Instant>) {
        let mut next_deadline = None;
        for i in 0..self.batches.len() {
            let b = &mut self.batches[i];
            if b.created() + timeout > now {
                next_deadline = Some(b.created() + timeout);
                break;
            }
            match b.state() {
                BatchState::Ready => {
                    let was_sent = i < self.sent;
                    let possibly_persisted = b.possibly_persisted();
                    b.finish(Err(ProduceError::DeliveryTimeout {
                        possibly_persisted,
                        last_connection_error: connection_error.clone(),
                    }));
                    if was_sent {
                        // A hole (or a possible duplicate) in the sequence: restart it.
                        let id = b.id();
                        self.request_reset(Some(id));
                    } else {
                        self.sent = i + 1;
                    }
                }
                BatchState::InFlight { .. } | BatchState::Done(_) => {}
            }
        }
        if next_deadline.is_none() {
            if let Some(open) = &self.open {
                if open.created() + timeout > now {
                    next_deadline = Some(open.created() + timeout);
                }
            }
        }
        let open_expired = self
            .open
            .as_ref()
            .is_some_and(|o| o.created() + timeout <= now);
        let mut unreported = None;
        if let Some(open) = self.open.take_if(|_| open_expired) {
            let error = ProduceError::DeliveryTimeout {
                possibly_persisted: false,
                last_connection_error: connection_error,
            };
            match open.into_failed(error) {
                Ok(batch) => {
                    // Every batch before it expired too (it is the youngest), so each is done
                    // or in flight: the failed batch joins the sent region, never to be sent.
                    self.batches.push_back(batch);
                    self.sent = self.batches.len();
                }
                Err(records) => unreported = Some(records),
            }
        }
        (unreported, next_deadline)
    }

    /// Fails everything the partition holds, unless it has batches in flight (they resolve on
    /// their own connection, and the partition with them): its closed batches not yet finished,
    /// and its open batch, closed as a failed batch behind them. Reports then come out in send
    /// order through [`PartitionQueue::pop_done`]. With idempotence, batches that had been sent
    /// leave a hole in the sequence, so the partition restarts it before sending again. Only if
    /// the open batch cannot be closed are its records returned, to be reported at once.
    ///
    /// `error` makes each batch's error from whether an earlier attempt of it may have been
    /// written.
    pub(crate) fn fail_idle(
        &mut self,
        error: impl Fn(bool) -> ProduceError,
        idempotent: bool,
    ) -> Option<Unreported<T>> {
        if self.inflight > 0 {
            return None;
        }
        let mut sent_failed = false;
        for (i, b) in self.batches.iter_mut().enumerate() {
            if !b.is_done() {
                sent_failed |= i < self.sent;
                let e = error(b.possibly_persisted());
                b.finish(Err(e));
            }
        }
        if sent_failed && idempotent {
            self.request_reset(None);
        }
        self.sent = self.batches.len();
        let open = self.open.take()?;
        match open.into_failed(error(false)) {
            Ok(batch) => {
                self.batches.push_back(batch);
                self.sent = self.batches.len();
                None
            }
            Err(records) => Some(records),
        }
    }

    /// Fails every batch not in flight (sent before or not) with `error`, and the open batch,
    /// closed as a failed batch behind them (the transaction they belong to is aborted);
    /// batches in flight wait for their answer. Reports then come out in order through
    /// [`PartitionQueue::pop_done`]. Returns whether a batch that had been sent failed (its
    /// sequence numbers are a hole), and the open batch's records if it could not be closed.
    pub(crate) fn fail_unsent(&mut self, error: ProduceError) -> (bool, Option<Unreported<T>>) {
        let mut sent_failed = false;
        let sent = self.sent;
        for (i, b) in self.batches.iter_mut().enumerate() {
            if !b.is_done() && !b.is_in_flight() {
                sent_failed |= i < sent;
                b.finish(Err(error.clone()));
            }
        }
        self.sent = self.batches.len();
        let Some(open) = self.open.take() else {
            return (sent_failed, None);
        };
        match open.into_failed(error) {
            Ok(batch) => {
                self.batches.push_back(batch);
                self.sent = self.batches.len();
                (sent_failed, None)
            }
            Err(records) => (sent_failed, Some(records)),
        }
    }

    /// Purges the partition ([`crate::Producer::purge`], or a close at its deadline): every
    /// batch never sent (the closed ones, and the open one, closed as a failed batch behind
    /// them) fails with `unsent`. With `abandon`, so does every batch that was sent and is not
    /// finished, in flight or waiting to be sent again, with `sent`: the flights end here (their
    /// answers are then stale and ignored, as for a batch that is no longer in flight) and, with
    /// idempotence, the sequence numbers they took are a hole, so the partition bumps its epoch
    /// and restarts at 0 before it sends again. Without `abandon` the sent batches are left to
    /// finish. Reports then come out in send order through [`PartitionQueue::pop_done`]: after
    /// an abandon every batch is finished, so nothing waits. Only if the open batch cannot be
    /// closed are its records returned, to be reported at once.
    pub(crate) fn purge(
        &mut self,
        abandon: bool,
        unsent: &ProduceError,
        sent: &ProduceError,
        idempotent: bool,
    ) -> PurgeCount<T> {
        let mut count = PurgeCount {
            unsent: 0,
            sent: 0,
            open: None,
        };
        let first_unsent = self.sent;
        for (i, b) in self.batches.iter_mut().enumerate() {
            if b.is_done() {
                continue;
            }
            let records = b.record_count() as usize;
            if i >= first_unsent {
                count.unsent += records;
                b.finish(Err(unsent.clone()));
            } else if abandon {
                if b.is_in_flight() {
                    self.inflight -= 1;
                }
                count.sent += records;
                b.finish(Err(sent.clone()));
            }
        }
        if self.inflight == 0 {
            self.inflight_conn = None;
        }
        if count.sent > 0 && idempotent {
            self.request_reset(None);
        }
        // The failed batches never sent join the sent region, never to be sent.
        self.sent = self.batches.len();
        if let Some(open) = self.open.take() {
            count.unsent += open.record_count();
            match open.into_failed(unsent.clone()) {
                Ok(batch) => {
                    self.batches.push_back(batch);
                    self.sent = self.batches.len();
                }
                Err(records) => count.open = Some(records),
            }
        }
        count
    }

    /// Takes the sent batch at `i` out of the queue, to be split (its place is refilled by
    /// [`PartitionQueue::insert_halves`]) or failed. With idempotence, a batch taken for good
    /// leaves a hole in the sequence: the caller asks for a reset.
    pub(crate) fn take_sent(&mut self, i: usize) -> Option<Batch<T>> {
        let b = self.batches.remove(i)?;
        self.sent -= 1;
        Some(b)
    }

    /// Puts the two halves of a split batch where the original was (taken with
    /// [`PartitionQueue::take_sent`]); they are in the sent region, keeping the original's
    /// sequence range.
    pub(crate) fn insert_halves(&mut self, i: usize, halves: [Batch<T>; 2]) {
        for (k, half) in halves.into_iter().enumerate() {
            self.batches.insert(i + k, half);
        }
        self.sent += 2;
    }

    /// Takes everything the partition holds, to fail it (the producer failed fatally): the
    /// closed batches in order and the open batch. Nothing is in flight afterwards.
    pub(crate) fn take_all(&mut self) -> (Vec<Batch<T>>, Option<OpenBatch<T>>) {
        self.sent = 0;
        self.inflight = 0;
        self.inflight_conn = None;
        (self.batches.drain(..).collect(), self.open.take())
    }

    /// Removes the finished batch at the front, if there is one: its reports are due.
    pub(crate) fn pop_done(&mut self) -> Option<Batch<T>> {
        if self.batches.front().is_some_and(Batch::is_done) {
            let b = self.batches.pop_front();
            if self.sent > 0 {
                self.sent -= 1;
            }
            return b;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::next_sequence;

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(next_sequence(0, 5), 5);
        assert_eq!(next_sequence(i32::MAX, 1), 0);
        assert_eq!(next_sequence(i32::MAX - 1, 3), 1);
    }
}
