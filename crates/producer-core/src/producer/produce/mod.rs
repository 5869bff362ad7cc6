//! Produce, sent and answered: choosing the sendable batches of a broker and building its one
//! request across topics and partitions; then, per partition of the answer, success, retry
//! after a metadata refresh or a leader hint, backoff, "possibly written", split, sequence reset,
//! failure, or a fatal error (the table in `classify`); and the delivery timeout.

mod record_errors;
mod split;

use std::collections::HashMap;

use bytes::Bytes;
use std::time::Instant;

use crate::batch::BatchRef;
use crate::classify::{decide, Action, LeaderHint, Request};
use crate::connection::{InFlightRequest, RequestKind};
use crate::protocol::produce::{
    encode_spliced_frame, PartitionProduceResponse, ProduceResponse, SplicedTopic,
    FIRST_VERSION_BY_TOPIC_ID,
};
use crate::protocol::{ApiKey, RequestHeader};
use crate::timer::{backoff, TimerKind};
use crate::types::{ConnId, Event, Output, ProduceError, WireBytes};
use crate::ErrorCode;

use super::Producer;

impl<T> Producer<T> {
    fn idempotent(&self) -> bool {
        self.config.idempotence
    }

    /// Sends what a broker marked as having something to send can take: connects it first if
    /// it has data and no connection, waits out its throttle, then builds Produce requests until
    /// `max_in_flight` (1 while the queue-delay limit probes its base round trip:
    /// [`crate::queue_delay::QueueDelay::probing`]; the probe request carries one batch) or
    /// nothing is sendable.
    pub(super) fn service_broker(&mut self, slot: u32) {
        let now = self.now;
        let b = self.brokers.slot(slot);
        if b.conn.is_none() {
            let has_data = self.has_active_partition(slot);
            if has_data && self.fatal_error().is_none() {
                match b.reconnect_at {
                    Some(at) if at > now => self.timers.arm(at, TimerKind::Broker { slot }),
                    _ => self.connect(slot),
                }
            }
            return;
        }
        if !b.is_ready() {
            return;
        }
        if b.conn
            .as_ref()
            .and_then(|c| c.versions)
            .is_some_and(|v| v.produce.is_none())
        {
            self.fail_unproducible(slot);
            return;
        }
        if let Some(until) = b.throttled_until {
            if until > now {
                self.timers.arm(until, TimerKind::Broker { slot });
                return;
            }
            self.brokers.slot_mut(slot).throttled_until = None;
        }
        if self.idempotent() && self.pid.assigned().is_none() {
            return;
        }
        // While the queue-delay limit probes the round trip, a connection with a request in
        // flight waits for it: the next request goes alone.
        let probing = self.queue_delay.probing(now);
        let limit = if probing {
            1
        } else {
            self.config.max_in_flight
        };
        loop {
            let in_flight = self
                .brokers
                .slot(slot)
                .conn
                .as_ref()
                .map_or(usize::MAX, |c| c.produce_in_flight());
            if in_flight >= limit || !self.build_produce_request(slot, probing) {
                break;
            }
        }
    }

    /// The broker in `slot` shares no Produce version with this client: the records waiting
    /// for the partitions it leads fail (those sent before, to another leader, say whether they
    /// may have been written), and the rest of the producer goes on. Records sent to those
    /// partitions later fail the same way while it leads them.
    fn fail_unproducible(&mut self, slot: u32) {
        let idem = self.idempotent();
        let node_id = self.brokers.slot(slot).node_id;
        let failure = |possibly_persisted| ProduceError::Broker {
            code: ErrorCode::UNSUPPORTED_VERSION,
            message: Some(format!(
                "broker {node_id} shares no Produce version with this client"
            )),
            possibly_persisted,
        };
        let led = self.brokers.slot(slot).partitions.clone();
        for (t, p) in led {
            let pq = self.topics.partition_mut(t, p);
            if let Some(records) = pq.fail_idle(failure, idem) {
                self.fail_records(t, p as i32, records, failure(false));
            }
            self.emit_done(t, p);
        }
    }

    /// Whether a partition has something the broker should send now.
    fn partition_ready(&self, t: u32, p: u32, conn: ConnId) -> bool {
        self.topics.partition(t, p).has_sendable(
            conn,
            self.idempotent(),
            self.now,
            self.config.linger,
            self.lifecycle.closing,
        )
    }

    /// Builds one Produce request for the broker in `slot`, carrying at most one batch per
    /// partition it leads, up to `max_request_size`; one batch in all when the queue-delay
    /// limit is `probing` and nothing is in flight on the connection (the request is the
    /// probe: its round trip is one without queueing, behind other batches included).
    /// Returns false when nothing was sendable.
    /// It walks the broker's partitions with something to send ([`crate::active`]), not every
    /// partition it leads: its cost follows the batches waiting, not the partition count. The
    /// walk is round robin (a partition served goes to the back of the list, one left over by
    /// `max_request_size` starts the next request), so no partition starves.
    fn build_produce_request(&mut self, slot: u32, probing: bool) -> bool {
        let now = self.now;
        let idem = self.idempotent();
        // Nothing in flight on the connection: the request goes alone (nothing below writes to
        // the connection before it is pushed).
        let Some((conn, sent_alone)) = self
            .brokers
            .slot(slot)
            .conn
            .as_ref()
            .map(|c| (c.id, c.inflight.is_empty()))
        else {
            return false;
        };
        let n = self.brokers.slot(slot).active.len();
        if n == 0 {
            return false;
        }
        let mut any = false;
        for k in 0..n {
            let Some(e) = self.brokers.slot(slot).active.get(k) else {
                break;
            };
            if !self.listing_valid(slot, e) {
                continue;
            }
            let (t, p) = (e.topic, e.partition);
            if self.prepare_partition_identity(t, p)
                && self.partition_ready(t, p, conn)
                && self.txn_may_send(t, p)
            {
                any = true;
                break;
            }
        }
        if !any {
            return false;
        }
        let correlation_id = match self.brokers.slot_mut(slot).conn.as_mut() {
            Some(c) => c.take_correlation_id(),
            None => return false,
        };
        let max = self.config.max_request_size;
        let mut size = 64 + self.config.client_id.len();
        let mut chosen: Vec<BatchRef> = Vec::new();
        let (mut records, mut bytes) = (0u64, 0u64);
        // Whether this request goes because a batch's linger passed: none of its batches is
        // full and one sent for the first time waited its `linger.ms` (the diagnosis's count).
        let (mut any_full, mut any_lingered) = (false, false);
        self.metrics.tick(now, &self.stats);
        // The first entry put back: meeting it again means the walk went round (the list may
        // have been compacted meanwhile), and a partition is in a request at most once.
        let mut first_kept = None;
        let probe = probing && sent_alone;
        for _ in 0..n {
            if probe && !chosen.is_empty() {
                break;
            }
            let Some(e) = self.brokers.slot_mut(slot).active.pop_front() else {
                break;
            };
            if first_kept == Some(e) {
                self.brokers.slot_mut(slot).active.put_back_front(e);
                break;
            }
            if !self.listing_valid(slot, e) {
                // Stale (the partition moved or was listed again): dropped.
                continue;
            }
            let (t, p) = (e.topic, e.partition);
            if self.topics.partition(t, p).is_empty() {
                self.unlist_partition(t, p);
                continue;
            }
            // Served or not, the partition holds something: back of the list.
            self.brokers.slot_mut(slot).active.push(e);
            first_kept.get_or_insert(e);
            if self
                .topics
                .partition(t, p)
                .backoff_until
                .is_some_and(|at| at > now)
            {
                continue;
            }
            if !self.prepare_partition_identity(t, p) {
                continue;
            }
            let pq = self.topics.partition(t, p);
            let mut cand = pq.next_sendable(conn, idem);
            if cand.is_none() && pq.open.is_some() && pq.may_send_fresh(conn, idem) {
                self.close_open_batch(t, p);
                cand = self.topics.partition(t, p).next_sendable(conn, idem);
            }
            let Some(i) = cand else { continue };
            // With TV1 a partition joins the transaction (AddPartitionsToTxn) before it sends.
            if !self.txn_may_send(t, p) {
                continue;
            }
            let topic_len = self.topics.get(t).name.len();
            let pq = self.topics.partition_mut(t, p);
            let len = pq.batch(i).len_bytes() + topic_len + 16;
            if size + len > max && !chosen.is_empty() {
                // Left over: the next request starts with it.
                self.brokers.slot_mut(slot).active.back_to_front();
                break;
            }
            size += len;
            let batch = pq.batch(i);
            let (count, len) = (batch.record_count() as u64, batch.len_bytes());
            records += count;
            bytes += len as u64;
            self.metrics
                .batch_sent(t, count, len, batch.uncompressed_size());
            self.telemetry
                .batch_drained(self.now.saturating_duration_since(batch.created()));
            if batch.attempts() == 0 {
                let full = batch.sealed_full();
                any_full |= full;
                any_lingered |= !full && batch.created() + self.config.linger <= now;
                self.metrics.batch_sent_first(slot, full);
            }
            pq.begin_flight(i, conn, idem);
            chosen.push(BatchRef {
                topic: t,
                partition: p,
                id: pq.batch(i).id(),
            });
        }
        if chosen.is_empty() {
            return false;
        }
        chosen.sort_by_key(|b| b.topic);
        let negotiated = self
            .brokers
            .slot(slot)
            .conn
            .as_ref()
            .and_then(|c| c.versions)
            .and_then(|v| v.produce)
            .unwrap_or(3);
        let negotiated = self.txn_produce_version(negotiated);
        // v13 names topics by id: only when every topic of the request has one (a broker with
        // Metadata before v10 gives none), else the highest version that names them.
        let version = if negotiated >= FIRST_VERSION_BY_TOPIC_ID
            && chosen
                .iter()
                .any(|b| self.topics.get(b.topic).topic_id() == [0; 16])
        {
            FIRST_VERSION_BY_TOPIC_ID - 1
        } else {
            negotiated
        };
        let acks = self.config.acks.wire();
        let timeout_ms = self
            .config
            .request_timeout
            .as_millis()
            .min(i32::MAX as u128) as i32;
        let header = RequestHeader {
            api_key: ApiKey::Produce,
            api_version: version,
            correlation_id,
            client_id: Some(&self.config.client_id),
        };
        // The chosen batches, grouped by topic (sorted above); each goes out as it is, shared
        // with the batch, not copied.
        let record_sets: Vec<(i32, Option<Bytes>)> = chosen
            .iter()
            .map(|b| {
                let pq = self.topics.partition_mut(b.topic, b.partition);
                let set = pq.find(b.id).map(|idx| pq.batch_mut(idx).share_bytes());
                (b.partition as i32, set)
            })
            .collect();
        let mut topics: Vec<SplicedTopic<'_>> = Vec::new();
        let mut i = 0;
        while i < chosen.len() {
            let t = chosen[i].topic;
            let n = chosen[i..].iter().take_while(|c| c.topic == t).count();
            let topic = self.topics.get(t);
            topics.push(SplicedTopic {
                name: &topic.name,
                topic_id: topic.topic_id(),
                partitions: n,
            });
            i += n;
        }
        let transactional_id = self.txn.as_ref().map(|t| t.id());
        let pieces = encode_spliced_frame(
            &header,
            transactional_id,
            acks,
            timeout_ms,
            &topics,
            record_sets,
        );
        self.stats.produce_requests += 1;
        let lingered = any_lingered && !any_full;
        self.metrics.request_sent(slot, records, bytes, lingered);
        self.queue_delay.request_sent(lingered);
        self.txn_produce_sent();
        self.stats.batches_sent += chosen.len() as u64;
        self.stats.records_sent += records;
        self.stats.bytes_sent += bytes;
        self.outputs.push_back(Output::Transmit {
            conn,
            bytes: WireBytes::from_pieces(pieces),
        });
        if acks == 0 {
            self.complete_unanswered(slot, conn, correlation_id, chosen);
            return true;
        }
        let c = self
            .brokers
            .slot_mut(slot)
            .conn
            .as_mut()
            .expect("connection checked above");
        c.push_request(InFlightRequest {
            correlation_id,
            api: ApiKey::Produce,
            version,
            sent_at: now,
            kind: RequestKind::Produce {
                batches: chosen,
                sent_alone,
            },
        });
        let in_flight = c.produce_in_flight();
        self.produce_slots_changed(slot, in_flight);
        // Sent alone: its request timeout must be armed.
        if sent_alone {
            self.arm_request_timer(slot);
        }
        true
    }

    /// acks=0: no response will come, so the batches are done once handed to the connection.
    /// (A lenient broker may answer anyway; the correlation id is kept so that answer is
    /// ignored.)
    fn complete_unanswered(
        &mut self,
        slot: u32,
        conn: ConnId,
        correlation_id: i32,
        batches: Vec<BatchRef>,
    ) {
        if let Some(c) = self.brokers.slot_mut(slot).conn.as_mut() {
            c.expect_no_response(correlation_id);
        }
        for b in batches {
            let pq = self.topics.partition_mut(b.topic, b.partition);
            if let Some(i) = pq.find(b.id) {
                if pq.end_flight(i, conn) {
                    pq.batch_mut(i).finish(Ok((-1, -1)));
                }
            }
            self.emit_done(b.topic, b.partition);
        }
    }

    /// The answer to a Produce request on `conn` that carried `batches`: applies each
    /// partition's result, then emits the reports now due and looks for more to send.
    pub(super) fn on_produce(
        &mut self,
        conn: ConnId,
        batches: Vec<BatchRef>,
        resp: ProduceResponse,
    ) {
        let now = self.now;
        // At most limits::MAX_THROTTLE.
        if let Some(until) = self
            .brokers
            .slot_mut(conn.slot)
            .throttle(now, resp.throttle_time_ms)
        {
            self.timers
                .arm(until, TimerKind::Broker { slot: conn.slot });
        }
        for n in &resp.node_endpoints {
            // Ignored for a negative node id, or a new node past limits::MAX_BROKERS.
            let _ = self.brokers.node_slot(n.node_id, &n.host, n.port);
        }
        // Each answer by (topic number, partition): a v13 answer names topics by the ids the
        // request carried, an older one by name. A partition named more than once gets `None`:
        // its entries may contradict each other (written and not), so none is believed.
        // Sized for the batches the request carried (a partition each), so that it does not
        // grow on the way; a longer answer grows it, bounded by the response's size.
        let mut results: HashMap<(u32, i32), Option<&PartitionProduceResponse>> =
            HashMap::with_capacity(batches.len());
        for topic in &resp.topics {
            let t = if topic.topic_id != [0; 16] {
                self.topics.by_topic_id(topic.topic_id)
            } else {
                self.topics.lookup(&topic.name)
            };
            let Some(t) = t else { continue };
            for part in &topic.partitions {
                results
                    .entry((t, part.index))
                    .and_modify(|r| *r = None)
                    .or_insert(Some(part));
            }
        }
        // Every partition's result is applied, the acknowledged ones first among equals: a
        // fatal answer for one partition does not undo another's success in the same answer
        // (its records are reported delivered, whatever happens after).
        let mut touched = Vec::new();
        let mut fatal = None;
        for b in batches {
            let (t, p) = (b.topic, b.partition);
            let pq = self.topics.partition_mut(t, p);
            let Some(i) = pq.find(b.id) else { continue };
            if !pq.end_flight(i, conn) {
                continue;
            }
            touched.push((t, p));
            match results.get(&(t, p as i32)) {
                Some(Some(r)) => {
                    if let Some(error) = self.resolve(conn, t, p, i, r) {
                        fatal.get_or_insert(error);
                    }
                }
                Some(None) | None => {
                    // The broker left the partition out, or named it more than once: nothing
                    // certain is known of this attempt, so treat it as possibly written.
                    self.topics
                        .partition_mut(t, p)
                        .batch_mut(i)
                        .mark_possibly_persisted();
                    self.retry(t, p, i, ErrorCode::NETWORK_EXCEPTION, None);
                }
            }
        }
        if let Some(error) = fatal {
            self.go_fatal(error);
            return;
        }
        for (t, p) in touched {
            self.emit_done(t, p);
            self.mark_partition_dirty(t, p);
        }
        self.mark_broker_dirty(conn.slot);
    }

    /// The batches of a Produce request whose connection was lost before its answer: each is
    /// retried as possibly written (or expires), and its partition looks for more to send.
    pub(super) fn produce_request_lost(&mut self, conn: ConnId, batches: Vec<BatchRef>) {
        for b in batches {
            let (t, p) = (b.topic, b.partition);
            let pq = self.topics.partition_mut(t, p);
            let Some(i) = pq.find(b.id) else { continue };
            if !pq.end_flight(i, conn) {
                continue;
            }
            pq.batch_mut(i).mark_possibly_persisted();
            self.retry(t, p, i, ErrorCode::NONE, None);
            self.emit_done(t, p);
            self.mark_partition_dirty(t, p);
        }
    }

    /// Applies one partition's result to the batch at index `i`, as the retry table says.
    /// Returns the error when the answer is fatal: the caller applies the rest of the answer
    /// first, then fails the producer.
    #[must_use = "a fatal answer must fail the producer"]
    fn resolve(
        &mut self,
        conn: ConnId,
        t: u32,
        p: u32,
        i: usize,
        r: &PartitionProduceResponse,
    ) -> Option<ProduceError> {
        let idem = self.idempotent();
        let code = r.error_code;
        if code != ErrorCode::NONE {
            self.metrics.partition_error(code);
        }
        if self.refused_as_too_large(t, p, i, code) {
            return None;
        }
        let possibly_persisted = self.topics.partition(t, p).batch(i).possibly_persisted();
        let broker_error = || ProduceError::Broker {
            code,
            message: r.error_message.clone(),
            possibly_persisted,
        };
        match decide(Request::Produce, code, self.mode()) {
            action @ (Action::Ok | Action::OkDuplicate) => {
                let base = match action {
                    Action::Ok => r.base_offset,
                    _ => -1, // a duplicate: the broker had the batch, its offset is unknown
                };
                let pq = self.topics.partition_mut(t, p);
                pq.batch_mut(i).finish(Ok((base, r.log_append_time_ms)));
                if idem {
                    pq.succeeded_on(conn);
                }
            }
            Action::Refresh => {
                let answered_by = self.brokers.slot(conn.slot).node_id;
                let pq = self.topics.partition(t, p);
                let known_epoch = pq.leader_epoch();
                // A hint naming a node metadata named, at an epoch no older than the known one.
                let hint = r
                    .current_leader
                    .filter(|l| l.leader_id >= 0 && self.brokers.knows_node(l.leader_id))
                    .filter(|l| l.leader_epoch >= known_epoch)
                    .map(|l| LeaderHint {
                        leader_id: l.leader_id,
                        leader_epoch: l.leader_epoch,
                    });
                let at_once = pq
                    .batch(i)
                    .retries_at_once()
                    .allows(hint, answered_by, known_epoch);
                match hint {
                    Some(l) => self.set_leader(t, p, l.leader_id, l.leader_epoch),
                    None => self.topics.partition_mut(t, p).needs_metadata = true,
                }
                self.request_metadata();
                self.retry(t, p, i, code, hint.filter(|_| at_once));
            }
            Action::Backoff => self.retry(t, p, i, code, None),
            Action::Unsure => {
                self.topics
                    .partition_mut(t, p)
                    .batch_mut(i)
                    .mark_possibly_persisted();
                self.retry(t, p, i, code, None);
            }
            Action::Split => {
                if self.topics.partition(t, p).batch(i).record_count() > 1 {
                    self.split(t, p, i);
                } else {
                    self.fail_answered(t, p, i, r, broker_error(), false);
                }
            }
            Action::Reset => {
                let pq = self.topics.partition_mut(t, p);
                if pq.is_head(i) && idem {
                    pq.request_reset(None);
                }
                self.retry(t, p, i, code, None);
            }
            Action::Fail => self.fail_answered(t, p, i, r, broker_error(), false),
            Action::EpochMovedOn => {
                self.txn_epoch_moved_on();
                self.fail_answered(t, p, i, r, broker_error(), false);
            }
            Action::Reject => self.fail_answered(t, p, i, r, broker_error(), true),
            Action::FailTopic => {
                self.topics.get_mut(t).error = Some(code);
                self.fail_answered(t, p, i, r, broker_error(), false);
            }
            // This batch's attempt was answered: not written. The rest of the producer's
            // batches are reported by `go_fatal`, each as it stands.
            Action::Fatal => {
                self.topics.partition_mut(t, p).batch_mut(i).ready_again();
                return Some(broker_error());
            }
            // Not a Produce action.
            other => {
                debug_assert!(false, "{other:?} is not a Produce action");
                self.fail_answered(t, p, i, r, broker_error(), false);
            }
        }
        None
    }

    /// Holds the partition back before its next attempt: exponential backoff with jitter from
    /// the batch's attempts.
    fn back_off(&mut self, t: u32, p: u32, i: usize) {
        let attempts = self.topics.partition(t, p).batch(i).attempts();
        let delay = backoff(
            &mut self.rng,
            self.config.retry_backoff,
            self.config.retry_backoff_max,
            attempts.saturating_sub(1),
        );
        let at = self.now + delay;
        let pq = self.topics.partition_mut(t, p);
        if pq.backoff_until.is_none_or(|b| b < at) {
            pq.backoff_until = Some(at);
            self.timers.arm(
                at,
                TimerKind::Backoff {
                    topic: t,
                    partition: p,
                },
            );
        }
    }

    /// A partition's backoff timer fired: if its backoff is over, its leader may send again.
    pub(super) fn backoff_expired(&mut self, t: u32, p: u32) {
        let now = self.now;
        let pq = self.topics.partition_mut(t, p);
        if pq.backoff_until.is_some_and(|at| at <= now) {
            pq.backoff_until = None;
            self.mark_partition_dirty(t, p);
        }
    }

    /// Puts a batch back to be sent again, or fails it when its delivery timeout has passed.
    /// `error` is what caused the retry (0 for a lost connection or a timeout). Every retry
    /// waits its backoff, except one on the leader hint `at_once_on` (which the retry table
    /// allowed: [`crate::classify::RetriesAtOnce`]): the one place a retry's timing is set.
    fn retry(
        &mut self,
        t: u32,
        p: u32,
        i: usize,
        error: ErrorCode,
        at_once_on: Option<LeaderHint>,
    ) {
        let now = self.now;
        let deadline = self.config.delivery_timeout;
        let idem = self.idempotent();
        let leader = self.topics.partition(t, p).leader();
        let pq = self.topics.partition_mut(t, p);
        let b = pq.batch_mut(i);
        if b.created() + deadline <= now {
            let possibly_persisted = b.possibly_persisted();
            let last_connection_error = self.brokers.error_for(leader);
            pq.fail_sent(
                i,
                ProduceError::DeliveryTimeout {
                    possibly_persisted,
                    last_connection_error,
                },
                idem,
            );
            return;
        }
        b.retried(at_once_on);
        b.ready_again();
        let records = b.record_count() as u64;
        if at_once_on.is_none() {
            self.back_off(t, p, i);
        }
        self.stats.retries += 1;
        self.metrics.tick(self.now, &self.stats);
        if let Some(slot) = self.brokers.slot_of_node(leader) {
            self.metrics.batch_retried(slot, error);
        }
        self.stats.records_retried += records;
        self.metrics.records_retried(t, records);
        let topic = self.topics.name(t);
        self.outputs.push_back(Output::Event(Event::Retry {
            topic,
            partition: p as i32,
            error,
        }));
    }

    /// Arms a partition's delivery timer for `at` unless an earlier one is armed.
    pub(super) fn arm_delivery_timer(&mut self, topic: u32, p: u32, at: Instant) {
        let pq = self.topics.partition_mut(topic, p);
        if pq.delivery_timer.is_none_or(|t| t > at) {
            pq.delivery_timer = Some(at);
            self.timers.arm(
                at,
                TimerKind::Delivery {
                    topic,
                    partition: p,
                },
            );
        }
    }

    /// A partition's delivery timer fired: if it is due, the batches (and open batch) past
    /// their delivery timeout fail, in order.
    pub(super) fn delivery_timer_fired(&mut self, topic: u32, p: u32) {
        let now = self.now;
        let pq = self.topics.partition_mut(topic, p);
        if pq.delivery_timer.is_some_and(|t| t <= now) {
            pq.delivery_timer = None;
            self.expire_partition(topic, p);
        }
    }

    /// Fails the batches of a partition whose delivery timeout passed, in order; a batch in
    /// flight waits for its response.
    fn expire_partition(&mut self, topic: u32, p: u32) {
        let (now, timeout) = (self.now, self.config.delivery_timeout);
        let leader = self.topics.partition(topic, p).leader();
        let last_connection_error = self.brokers.error_for(leader);
        let (expired_open, next_deadline) =
            self.topics
                .partition_mut(topic, p)
                .expire(now, timeout, last_connection_error.clone());
        if let Some(open) = expired_open {
            let error = ProduceError::DeliveryTimeout {
                possibly_persisted: false,
                last_connection_error,
            };
            self.fail_records(topic, p as i32, open, error);
        }
        if let Some(at) = next_deadline {
            self.arm_delivery_timer(topic, p, at);
        }
        self.emit_done(topic, p);
        self.mark_partition_dirty(topic, p);
    }
}
