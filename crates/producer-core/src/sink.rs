//! Building requests: one Produce request per broker carrying the sendable batches of every
//! partition it leads, plus the Metadata and InitProducerId requests, and connection choice.

use crate::accumulator::BatchState;
use crate::connection::{ConnState, Connection, InFlightRequest, RequestKind};
use crate::producer::{backoff, PidState, Producer};
use crate::protocol::init_producer_id::InitProducerIdRequest;
use crate::protocol::metadata::MetadataRequest;
use crate::protocol::produce::ProduceRequestWriter;
use crate::protocol::{encode_request, ApiKey, RequestHeader};
use crate::timer::TimerKind;
use crate::types::{ConnId, Event, Output};

impl<T> Producer<T> {
    /// Does the work that inputs made due: connections, metadata, producer id, and Produce
    /// requests for the brokers marked dirty. Called from `poll_output`.
    pub(crate) fn pump(&mut self) {
        if self.closed {
            return;
        }
        self.maybe_send_metadata();
        self.maybe_init_producer_id();
        let dirty = std::mem::take(&mut self.dirty_brokers);
        for slot in dirty {
            self.brokers[slot as usize].dirty = false;
            self.service_broker(slot);
        }
    }

    fn idempotent(&self) -> bool {
        self.config.idempotence
    }

    /// Opens a new connection for a broker slot.
    pub(crate) fn connect(&mut self, slot: u32) {
        let max_frame = self.config.max_response_size;
        let b = &mut self.brokers[slot as usize];
        b.generation = b.generation.wrapping_add(1);
        let id = ConnId {
            slot,
            generation: b.generation,
        };
        b.conn = Some(Connection::new(id, max_frame, self.now));
        self.timers.arm(
            self.now + self.config.request_timeout,
            TimerKind::Request { slot },
        );
        self.outputs.push_back(Output::Connect {
            conn: id,
            host: b.host.clone(),
            port: b.port,
        });
    }

    /// A ready connection for a control request (the least loaded), or `None` after starting
    /// a connection attempt if none is ready.
    fn control_connection(&mut self, needs_init_pid: bool) -> Option<ConnId> {
        let best = self
            .brokers
            .iter()
            .filter_map(|b| b.conn.as_ref())
            .filter(|c| c.state == ConnState::Ready)
            .filter(|c| !needs_init_pid || c.versions.is_some_and(|v| v.init_producer_id.is_some()))
            .min_by_key(|c| c.inflight.len())
            .map(|c| c.id);
        if best.is_some() {
            return best;
        }
        if self
            .brokers
            .iter()
            .any(|b| b.conn.as_ref().is_some_and(|c| c.state != ConnState::Ready))
        {
            return None; // one is on its way
        }
        let now = self.now;
        let allowed = |b: &crate::metadata::BrokerSlot| b.reconnect_at.is_none_or(|t| t <= now);
        let node = (0..self.brokers.len())
            .filter(|&i| self.brokers[i].node_id >= 0 && allowed(&self.brokers[i]))
            .min_by_key(|&i| self.brokers[i].failures);
        let pick = node.or_else(|| {
            let boot: Vec<usize> = (0..self.brokers.len())
                .filter(|&i| self.brokers[i].node_id < 0)
                .collect();
            (0..boot.len())
                .map(|k| boot[(self.next_bootstrap + k) % boot.len()])
                .find(|&i| allowed(&self.brokers[i]))
        });
        match pick {
            Some(i) => self.connect(i as u32),
            None => {
                if let Some(at) = self.brokers.iter().filter_map(|b| b.reconnect_at).min() {
                    self.timers.arm(at, TimerKind::Metadata);
                }
            }
        }
        None
    }

    fn maybe_send_metadata(&mut self) {
        let now = self.now;
        if self
            .metadata
            .last_refresh
            .is_some_and(|t| t + self.config.metadata_max_age <= now)
        {
            self.metadata.wanted = true;
        }
        if !self.metadata.wanted || self.metadata.in_flight || self.fatal.is_some() {
            return;
        }
        if now < self.metadata.next_allowed {
            self.timers
                .arm(self.metadata.next_allowed, TimerKind::Metadata);
            return;
        }
        let Some(conn) = self.control_connection(false) else {
            return;
        };
        let names: Vec<std::sync::Arc<str>> = self.topics.iter().map(|t| t.name.clone()).collect();
        let name_refs: Vec<&str> = names.iter().map(|n| &**n).collect();
        let versions = self.brokers[conn.slot as usize]
            .conn
            .as_ref()
            .and_then(|c| c.versions);
        let version = versions.map_or(1, |v| v.metadata);
        let req = MetadataRequest {
            topics: Some(&name_refs),
            allow_auto_topic_creation: true,
            include_topic_authorized_operations: false,
        };
        self.send_control_request(
            conn,
            ApiKey::Metadata,
            version,
            RequestKind::Metadata,
            |b| req.encode(version, b),
        );
        self.metadata.in_flight = true;
        self.metadata.wanted = false;
        self.metadata.next_allowed = now + self.config.retry_backoff;
    }

    fn maybe_init_producer_id(&mut self) {
        let now = self.now;
        let PidState::Needed { retry_at } = self.pid else {
            return;
        };
        if self.fatal.is_some() {
            return;
        }
        if let Some(at) = retry_at {
            if now < at {
                self.timers.arm(at, TimerKind::ProducerId);
                return;
            }
        }
        let Some(conn) = self.control_connection(true) else {
            return;
        };
        let versions = self.brokers[conn.slot as usize]
            .conn
            .as_ref()
            .and_then(|c| c.versions);
        let Some(version) = versions.and_then(|v| v.init_producer_id) else {
            return;
        };
        let req = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: i32::MAX,
            producer_id: -1,
            producer_epoch: -1,
        };
        self.send_control_request(
            conn,
            ApiKey::InitProducerId,
            version,
            RequestKind::InitProducerId,
            |b| req.encode(version, b),
        );
        self.pid = PidState::Requesting;
    }

    /// Sends one non-Produce request on `conn`: frames it, records it as in flight (arming the
    /// connection's request timer if it was idle) and queues the bytes.
    pub(crate) fn send_control_request(
        &mut self,
        conn: ConnId,
        api: ApiKey,
        version: i16,
        kind: RequestKind,
        body: impl FnOnce(&mut Vec<u8>),
    ) {
        let now = self.now;
        let Some(c) = self.brokers[conn.slot as usize]
            .conn
            .as_mut()
            .filter(|c| c.id == conn)
        else {
            return;
        };
        let correlation_id = c.take_correlation_id();
        let mut buf = Vec::with_capacity(128);
        let header = RequestHeader {
            api_key: api,
            api_version: version,
            correlation_id,
            client_id: Some(&self.config.client_id),
        };
        encode_request(&mut buf, &header, body);
        let was_idle = c.inflight.is_empty();
        c.inflight.push_back(InFlightRequest {
            correlation_id,
            api,
            version,
            sent_at: now,
            kind,
        });
        if was_idle {
            self.arm_request_timer(conn.slot);
        }
        self.outputs.push_back(Output::Transmit {
            conn,
            bytes: buf.into(),
        });
    }

    fn service_broker(&mut self, slot: u32) {
        let now = self.now;
        let b = &self.brokers[slot as usize];
        if b.conn.is_none() {
            let has_data = b
                .partitions
                .iter()
                .any(|&(t, p)| !self.topics[t as usize].partitions[p as usize].is_empty());
            if has_data && self.fatal.is_none() {
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
        if let Some(until) = b.throttled_until {
            if until > now {
                self.timers.arm(until, TimerKind::Broker { slot });
                return;
            }
            self.brokers[slot as usize].throttled_until = None;
        }
        if self.idempotent() && !matches!(self.pid, PidState::Ready { .. }) {
            return;
        }
        loop {
            let in_flight = self.brokers[slot as usize]
                .conn
                .as_ref()
                .map_or(usize::MAX, Connection::produce_in_flight);
            if in_flight >= self.config.max_in_flight || !self.build_produce_request(slot) {
                break;
            }
        }
    }

    /// Gets a partition ready to send under the current producer id: adopts the id on first
    /// use and, once nothing is in flight, bumps its epoch and restamps its unacknowledged
    /// batches when a reset is due. Returns false when it may not send now.
    fn prepare_partition(&mut self, t: u32, p: u32) -> bool {
        if !self.idempotent() {
            return true;
        }
        let PidState::Ready { producer_id, epoch } = self.pid else {
            return false;
        };
        let pq = &mut self.topics[t as usize].partitions[p as usize];
        if pq.inflight > 0 {
            return true;
        }
        let bump = pq.producer_id == producer_id;
        let new_epoch = if !bump {
            epoch
        } else if pq.needs_reset {
            if pq.barrier_position().is_some() {
                // Batches before the hole are still being resolved under the old epoch.
                return true;
            }
            if pq.epoch == i16::MAX {
                // Epochs exhausted: a new producer id is needed before anyone sends again.
                self.pid = PidState::Needed { retry_at: None };
                self.work_pending = true;
                return false;
            }
            pq.epoch + 1
        } else {
            return true;
        };
        pq.producer_id = producer_id;
        pq.epoch = new_epoch;
        pq.needs_reset = false;
        pq.reset_barrier = None;
        pq.ok_on_conn = None;
        let mut seq = 0i32;
        for b in pq.batches.iter_mut().take(pq.sent) {
            if b.is_done() {
                continue;
            }
            b.sealed.stamp(producer_id, new_epoch, seq);
            b.base_sequence = Some(seq);
            seq = next_sequence(seq, b.record_count());
        }
        pq.next_sequence = seq;
        if bump {
            let topic = self.topics[t as usize].name.clone();
            self.outputs.push_back(Output::Event(Event::SequenceReset {
                topic,
                partition: p as i32,
                producer_id,
                epoch: new_epoch,
            }));
        }
        true
    }

    /// Whether a partition has something the broker should send now (a closed batch allowed
    /// by the ordering rules, or an open batch past its linger).
    fn partition_ready(&self, t: u32, p: u32, conn: ConnId) -> bool {
        let pq = &self.topics[t as usize].partitions[p as usize];
        if pq.backoff_until.is_some_and(|at| at > self.now) {
            return false;
        }
        let idem = self.idempotent();
        if pq.next_sendable(conn, idem).is_some() {
            return true;
        }
        let lingered = pq
            .open
            .as_ref()
            .is_some_and(|o| o.created + self.config.linger <= self.now || self.closing);
        lingered && pq.may_send_fresh(conn, idem)
    }

    /// Builds one Produce request for the broker in `slot`. Returns false when nothing was
    /// sendable.
    fn build_produce_request(&mut self, slot: u32) -> bool {
        let now = self.now;
        let idem = self.idempotent();
        let Some(conn) = self.brokers[slot as usize].conn.as_ref().map(|c| c.id) else {
            return false;
        };
        let n = self.brokers[slot as usize].partitions.len();
        if n == 0 {
            return false;
        }
        let start = self.brokers[slot as usize].drain_index % n;
        let mut any = false;
        for k in 0..n {
            let (t, p) = self.brokers[slot as usize].partitions[(start + k) % n];
            if self.prepare_partition(t, p) && self.partition_ready(t, p, conn) {
                any = true;
                break;
            }
        }
        if !any {
            return false;
        }
        let correlation_id = match self.brokers[slot as usize].conn.as_mut() {
            Some(c) => c.take_correlation_id(),
            None => return false,
        };
        let max = self.config.max_request_size;
        let mut size = 64 + self.config.client_id.len();
        let mut chosen: Vec<(u32, u32, u64)> = Vec::new();
        for k in 0..n {
            let (t, p) = self.brokers[slot as usize].partitions[(start + k) % n];
            if self.topics[t as usize].partitions[p as usize]
                .backoff_until
                .is_some_and(|at| at > now)
            {
                continue;
            }
            if !self.prepare_partition(t, p) {
                continue;
            }
            let pq = &self.topics[t as usize].partitions[p as usize];
            let mut cand = pq.next_sendable(conn, idem);
            if cand.is_none() && pq.open.is_some() && pq.may_send_fresh(conn, idem) {
                self.close_open_batch(t, p);
                cand = self.topics[t as usize].partitions[p as usize].next_sendable(conn, idem);
            }
            let Some(i) = cand else { continue };
            let topic_len = self.topics[t as usize].name.len();
            let pq = &mut self.topics[t as usize].partitions[p as usize];
            let len = pq.batches[i].sealed.len_bytes() + topic_len + 16;
            if size + len > max && !chosen.is_empty() {
                break;
            }
            size += len;
            let fresh = i == pq.sent;
            if fresh {
                let (pid, epoch, seq) = if idem {
                    (pq.producer_id, pq.epoch, pq.next_sequence)
                } else {
                    (-1, -1, -1)
                };
                let b = &mut pq.batches[i];
                b.sealed.stamp(pid, epoch, seq);
                if idem {
                    b.base_sequence = Some(seq);
                    pq.next_sequence = next_sequence(seq, b.record_count());
                }
                pq.sent += 1;
            }
            let b = &mut pq.batches[i];
            b.state = BatchState::InFlight {
                conn,
                correlation_id,
            };
            b.attempts += 1;
            pq.inflight += 1;
            pq.inflight_conn = Some(conn);
            chosen.push((t, p, b.id));
        }
        self.brokers[slot as usize].drain_index = (start + 1) % n;
        if chosen.is_empty() {
            return false;
        }
        chosen.sort_by_key(|&(t, _, _)| t);
        let version = self.brokers[slot as usize]
            .conn
            .as_ref()
            .and_then(|c| c.versions)
            .map_or(3, |v| v.produce);
        let acks = self.config.acks.wire();
        let timeout_ms = self
            .config
            .request_timeout
            .as_millis()
            .min(i32::MAX as u128) as i32;
        let mut buf = Vec::with_capacity(size);
        let header = RequestHeader {
            api_key: ApiKey::Produce,
            api_version: version,
            correlation_id,
            client_id: Some(&self.config.client_id),
        };
        let topics = &self.topics;
        encode_request(&mut buf, &header, |buf| {
            let topic_count = 1 + chosen.windows(2).filter(|w| w[0].0 != w[1].0).count();
            let mut w =
                ProduceRequestWriter::begin(buf, version, None, acks, timeout_ms, topic_count);
            let mut i = 0;
            while i < chosen.len() {
                let t = chosen[i].0;
                let j = chosen[i..]
                    .iter()
                    .position(|c| c.0 != t)
                    .map_or(chosen.len(), |k| i + k);
                w.topic(buf, &topics[t as usize].name, j - i);
                for &(t, p, id) in &chosen[i..j] {
                    let pq = &topics[t as usize].partitions[p as usize];
                    let bytes = pq.find(id).map(|idx| pq.batches[idx].sealed.as_bytes());
                    w.partition(buf, p as i32, bytes);
                }
                i = j;
            }
            w.finish(buf);
        });
        self.stats.produce_requests += 1;
        self.stats.batches_sent += chosen.len() as u64;
        self.outputs.push_back(Output::Transmit {
            conn,
            bytes: buf.into(),
        });
        if acks == 0 {
            // No response will come: the batches are done once handed to the connection. (A
            // lenient broker may answer anyway; the id is kept so that answer is ignored.)
            if let Some(c) = self.brokers[slot as usize].conn.as_mut() {
                c.expect_no_response(correlation_id);
            }
            for (t, p, id) in chosen {
                let pq = &mut self.topics[t as usize].partitions[p as usize];
                if let Some(i) = pq.find(id) {
                    pq.batches[i].state = BatchState::Done(Ok((-1, -1)));
                    pq.inflight -= 1;
                    if pq.inflight == 0 {
                        pq.inflight_conn = None;
                    }
                }
                self.emit_done(t, p);
            }
            return true;
        }
        let c = self.brokers[slot as usize]
            .conn
            .as_mut()
            .expect("connection checked above");
        let was_idle = c.inflight.is_empty();
        c.inflight.push_back(InFlightRequest {
            correlation_id,
            api: ApiKey::Produce,
            version,
            sent_at: now,
            kind: RequestKind::Produce { batches: chosen },
        });
        if was_idle {
            self.arm_request_timer(slot);
        }
        true
    }

    /// Schedules a reconnect after a failure of the broker in `slot`.
    pub(crate) fn schedule_reconnect(&mut self, slot: u32) {
        let (base, max) = (
            self.config.reconnect_backoff,
            self.config.reconnect_backoff_max,
        );
        let failures = self.brokers[slot as usize].failures;
        let delay = backoff(&mut self.rng, base, max, failures.saturating_sub(1));
        let at = self.now + delay;
        self.brokers[slot as usize].reconnect_at = Some(at);
        self.timers.arm(at, TimerKind::Broker { slot });
    }
}

/// The sequence after `count` records from `seq`, wrapping from `i32::MAX` to 0 as Kafka does.
pub(crate) fn next_sequence(seq: i32, count: i32) -> i32 {
    ((seq as i64 + count as i64) % (i32::MAX as i64 + 1)) as i32
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
