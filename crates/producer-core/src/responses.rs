//! Handling responses and lost connections: ApiVersions, Metadata, InitProducerId, Produce.

use std::collections::HashMap;
use std::time::Duration;

use crate::accumulator::{charged_size, Batch, BatchState};
use crate::classify::{classify, Action};
use crate::connection::{ConnState, InFlightRequest, RequestKind, Versions};
use crate::metadata::BrokerSlot;
use crate::producer::{PidState, Producer};
use crate::protocol::api_versions::ApiVersionsResponse;
use crate::protocol::header::peek_correlation_id;
use crate::protocol::init_producer_id::InitProducerIdResponse;
use crate::protocol::metadata::MetadataResponse;
use crate::protocol::produce::{PartitionProduceResponse, ProduceResponse};
use crate::protocol::{parse_response_header, ApiKey};
use crate::record::{BatchBuilder, Compression, DecodedRecord, SealedBatch};
use crate::timer::TimerKind;
use crate::types::{ConnId, Event, Output, ProduceError};
use crate::ErrorCode;

impl<T> Producer<T> {
    /// Processes one response frame. Returns false when the connection was closed.
    pub(crate) fn handle_frame(&mut self, conn: ConnId, frame: &[u8]) -> bool {
        let Some(c) = self.brokers[conn.slot as usize].conn.as_mut() else {
            return false;
        };
        let expected = c.inflight.front().map(|r| r.correlation_id);
        let got = peek_correlation_id(frame);
        if got.is_some_and(|id| c.take_unexpected_answer(id)) {
            // An answer to an acks=0 request (librdkafka's mock sends them): nothing to do.
            self.stats.ignored_responses += 1;
            return true;
        }
        if expected.is_none() || got != expected {
            self.stats.malformed_responses += 1;
            self.connection_lost(conn, true);
            return false;
        }
        let Some(req) = c.inflight.pop_front() else {
            return false;
        };
        let body = match parse_response_header(req.api, req.version, frame) {
            Ok((_, body)) => body,
            Err(_) => return self.malformed(conn, req),
        };
        let ok = match req.kind {
            RequestKind::ApiVersions => self.on_api_versions(conn, req.version, body),
            RequestKind::Metadata => self.on_metadata(req.version, body),
            RequestKind::InitProducerId => self.on_init_producer_id(req.version, body),
            RequestKind::Produce { .. } => match ProduceResponse::parse(req.version, body) {
                Ok(parsed) => {
                    self.stats.trailing_response_bytes += parsed.trailing as u64;
                    let RequestKind::Produce { batches } = req.kind else {
                        unreachable!()
                    };
                    self.on_produce(conn, batches, parsed.body);
                    true
                }
                Err(_) => return self.malformed(conn, req),
            },
        };
        if !ok {
            self.stats.malformed_responses += 1;
            self.connection_lost(conn, true);
            return false;
        }
        let alive = self.brokers[conn.slot as usize]
            .conn
            .as_ref()
            .is_some_and(|c| c.id == conn);
        if alive {
            self.arm_request_timer(conn.slot);
        }
        // A close may have been waiting for this answer.
        self.check_closed();
        alive && self.brokers[conn.slot as usize].conn.is_some()
    }

    fn malformed(&mut self, conn: ConnId, req: InFlightRequest) -> bool {
        self.stats.malformed_responses += 1;
        if let Some(c) = self.brokers[conn.slot as usize].conn.as_mut() {
            c.inflight.push_front(req);
        }
        self.connection_lost(conn, true);
        false
    }

    /// Drops a connection: batches in flight on it are retried as possibly written, control
    /// requests are redone, metadata is refreshed and a reconnect is scheduled.
    /// `ours` says the producer decided it (timeout, bad bytes), so the driver must be told.
    pub(crate) fn connection_lost(&mut self, conn: ConnId, ours: bool) {
        let slot = conn.slot;
        let Some(c) = self.brokers[slot as usize].conn.take() else {
            return;
        };
        if c.id != conn {
            self.brokers[slot as usize].conn = Some(c);
            return;
        }
        if ours {
            self.outputs.push_back(Output::Disconnect { conn });
        }
        let was_ready = c.state == ConnState::Ready;
        self.stats.disconnects += 1;
        let b = &mut self.brokers[slot as usize];
        b.failures += 1;
        if b.node_id < 0 {
            self.next_bootstrap += 1;
        }
        self.schedule_reconnect(slot);
        for req in c.inflight {
            match req.kind {
                RequestKind::Produce { batches } => {
                    for (t, p, id) in batches {
                        let pq = &mut self.topics[t as usize].partitions[p as usize];
                        let Some(i) = pq.find(id) else { continue };
                        if !matches!(pq.batches[i].state, BatchState::InFlight { conn: c2, .. } if c2 == conn)
                        {
                            continue;
                        }
                        pq.inflight -= 1;
                        if pq.inflight == 0 {
                            pq.inflight_conn = None;
                        }
                        pq.batches[i].possibly_persisted = true;
                        self.retry_or_expire(t, p, i, ErrorCode(0));
                        self.emit_done(t, p);
                        self.mark_partition_dirty(t, p);
                    }
                }
                RequestKind::Metadata => {
                    self.metadata.in_flight = false;
                    self.metadata.wanted = true;
                }
                RequestKind::InitProducerId => {
                    if self.pid == PidState::Requesting {
                        self.pid = PidState::Needed { retry_at: None };
                    }
                }
                RequestKind::ApiVersions => {}
            }
        }
        if was_ready {
            self.request_metadata();
        }
        self.work_pending = true;
        self.check_closed();
    }

    fn on_api_versions(&mut self, conn: ConnId, version: i16, body: &[u8]) -> bool {
        let parsed = match ApiVersionsResponse::parse(version, body) {
            Ok(parsed) => parsed,
            Err(_)
                if version > 0
                    && body.starts_with(&ErrorCode::UNSUPPORTED_VERSION.0.to_be_bytes()) =>
            {
                // A refusal we cannot read further (librdkafka's mock answers a v3 request with
                // a body that is neither v0 nor v3): the error code alone says to retry with v0.
                self.send_api_versions(conn, 0);
                return true;
            }
            Err(_) => return false,
        };
        let resp = parsed.body;
        if resp.error_code == ErrorCode::UNSUPPORTED_VERSION {
            // The broker does not speak this ApiVersions version: retry with the highest it
            // offers (or v0 when it did not say).
            let broker_max = resp
                .version_range(ApiKey::ApiVersions)
                .map_or(0, |(_, max)| max);
            let next = broker_max.min(version - 1).max(0);
            if version == 0 {
                return false;
            }
            self.send_api_versions(conn, next);
            return true;
        }
        if !resp.error_code.is_ok() {
            return false;
        }
        let Some(versions) = Versions::negotiate(&resp) else {
            self.go_fatal(ProduceError::Broker {
                code: ErrorCode::UNSUPPORTED_VERSION,
                message: Some("no common Produce or Metadata version".into()),
                possibly_persisted: false,
            });
            return true;
        };
        let slot = conn.slot;
        let Some(c) = self.brokers[slot as usize].conn.as_mut() else {
            return true;
        };
        c.versions = Some(versions);
        c.state = ConnState::Ready;
        let b = &mut self.brokers[slot as usize];
        b.failures = 0;
        b.reconnect_at = None;
        let node_id = b.node_id;
        self.outputs
            .push_back(Output::Event(Event::BrokerReady { node_id }));
        self.mark_broker_dirty(slot);
        true
    }

    fn on_init_producer_id(&mut self, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = InitProducerIdResponse::parse(version, body) else {
            if self.pid == PidState::Requesting {
                self.pid = PidState::Needed { retry_at: None };
            }
            return false;
        };
        let resp = parsed.body;
        if self.pid != PidState::Requesting {
            return true;
        }
        match resp.error_code {
            ErrorCode::NONE => {
                self.pid = PidState::Ready {
                    producer_id: resp.producer_id,
                    epoch: resp.producer_epoch,
                };
                self.outputs.push_back(Output::Event(Event::ProducerId {
                    producer_id: resp.producer_id,
                    epoch: resp.producer_epoch,
                }));
                for slot in 0..self.brokers.len() as u32 {
                    self.mark_broker_dirty(slot);
                }
            }
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED
            | ErrorCode::UNSUPPORTED_VERSION
            | ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            | ErrorCode::PRODUCER_FENCED => self.go_fatal(ProduceError::Broker {
                code: resp.error_code,
                message: Some("InitProducerId".into()),
                possibly_persisted: false,
            }),
            _ => {
                let at = self.now + self.config.retry_backoff;
                self.pid = PidState::Needed { retry_at: Some(at) };
                self.timers.arm(at, TimerKind::ProducerId);
            }
        }
        true
    }

    fn on_metadata(&mut self, version: i16, body: &[u8]) -> bool {
        self.metadata.in_flight = false;
        let Ok(parsed) = MetadataResponse::parse(version, body) else {
            self.metadata.wanted = true;
            return false;
        };
        self.stats.trailing_response_bytes += parsed.trailing as u64;
        self.apply_metadata(parsed.body);
        true
    }

    /// The slot of a node, created (or its address updated) from a metadata broker entry.
    fn node_slot(&mut self, node_id: i32, host: &str, port: i32) -> u32 {
        let port = u16::try_from(port).unwrap_or(0);
        if let Some(&slot) = self.node_slots.get(&node_id) {
            let b = &mut self.brokers[slot as usize];
            if b.host != host || b.port != port {
                b.host = host.to_owned();
                b.port = port;
            }
            return slot;
        }
        let slot = self.brokers.len() as u32;
        self.brokers
            .push(BrokerSlot::new(node_id, host.to_owned(), port));
        self.node_slots.insert(node_id, slot);
        slot
    }

    /// Moves a partition to a new leader (from metadata or a Produce leader hint).
    pub(crate) fn set_leader(&mut self, t: u32, p: u32, leader: i32, leader_epoch: i32) {
        let pq = &mut self.topics[t as usize].partitions[p as usize];
        let old = pq.leader;
        let changed = old != leader || leader_epoch > pq.leader_epoch;
        pq.leader_epoch = pq.leader_epoch.max(leader_epoch);
        pq.needs_metadata = false;
        if changed && leader_epoch > -1 {
            // A new leader: no backoff needed before retrying (KIP-951).
            pq.backoff_until = None;
        }
        if old == leader {
            self.mark_partition_dirty(t, p);
            return;
        }
        pq.leader = leader;
        if let Some(&slot) = self.node_slots.get(&old) {
            self.brokers[slot as usize]
                .partitions
                .retain(|&x| x != (t, p));
        }
        if let Some(&slot) = self.node_slots.get(&leader) {
            self.brokers[slot as usize].partitions.push((t, p));
        }
        self.mark_partition_dirty(t, p);
    }

    fn apply_metadata(&mut self, resp: MetadataResponse) {
        let now = self.now;
        self.stats.metadata_refreshes += 1;
        for b in &resp.brokers {
            self.node_slot(b.node_id, &b.host, b.port);
        }
        let mut still_unknown = false;
        for topic in resp.topics {
            let Some(name) = topic.name.as_deref() else {
                continue;
            };
            let Some(&t) = self.topic_index.get(name) else {
                continue;
            };
            match topic.error_code.0 {
                0 => {}
                3 | 5 if topic.partitions.is_empty() => {
                    still_unknown |= !self.topics[t as usize].known;
                    continue;
                }
                code if topic.partitions.is_empty() => {
                    let code = ErrorCode(code);
                    if matches!(crate::classify::classify(code), Action::Refresh) {
                        still_unknown = true;
                        continue;
                    }
                    self.topics[t as usize].error = Some(code);
                    let held = std::mem::take(&mut self.topics[t as usize].holding);
                    for h in held {
                        self.fail_unrouted(
                            t,
                            h.partition.unwrap_or(-1),
                            h.pending,
                            ProduceError::Broker {
                                code,
                                message: None,
                                possibly_persisted: false,
                            },
                        );
                    }
                    continue;
                }
                _ => {}
            }
            let count = topic
                .partitions
                .iter()
                .map(|p| p.partition_index + 1)
                .max()
                .unwrap_or(0)
                .max(0) as usize;
            while self.topics[t as usize].partitions.len() < count {
                self.topics[t as usize]
                    .partitions
                    .push(crate::accumulator::PartitionQueue::new());
            }
            for part in &topic.partitions {
                if part.partition_index < 0 {
                    continue;
                }
                let p = part.partition_index as u32;
                let leader = if part.leader_id >= 0 && self.node_slots.contains_key(&part.leader_id)
                {
                    part.leader_id
                } else {
                    -1
                };
                self.set_leader(t, p, leader, part.leader_epoch);
            }
            let ts = &mut self.topics[t as usize];
            if !ts.known && !ts.partitions.is_empty() {
                ts.known = true;
                self.route_held(t);
                if std::mem::take(&mut self.topics[t as usize].flush_held) {
                    for p in 0..self.topics[t as usize].partitions.len() as u32 {
                        self.close_open_batch(t, p);
                    }
                }
            }
        }
        self.metadata.last_refresh = Some(now);
        let leaderless = self
            .topics
            .iter()
            .any(|t| t.partitions.iter().any(|p| p.leader < 0 && !p.is_empty()));
        if still_unknown || leaderless {
            self.metadata.wanted = true;
        }
        self.timers
            .arm(now + self.config.metadata_max_age, TimerKind::Metadata);
        self.outputs
            .push_back(Output::Event(Event::MetadataUpdated));
        self.work_pending = true;
        self.check_closed();
    }

    fn on_produce(&mut self, conn: ConnId, batches: Vec<(u32, u32, u64)>, resp: ProduceResponse) {
        let now = self.now;
        if resp.throttle_time_ms > 0 {
            let until = now + Duration::from_millis(resp.throttle_time_ms as u64);
            self.brokers[conn.slot as usize].throttled_until = Some(until);
            self.timers
                .arm(until, TimerKind::Broker { slot: conn.slot });
        }
        for n in &resp.node_endpoints {
            self.node_slot(n.node_id, &n.host, n.port);
        }
        let mut results: HashMap<(&str, i32), &PartitionProduceResponse> = HashMap::new();
        for topic in &resp.topics {
            for part in &topic.partitions {
                results.insert((topic.name.as_str(), part.index), part);
            }
        }
        let mut touched = Vec::new();
        for (t, p, id) in batches {
            let name = self.topics[t as usize].name.clone();
            let pq = &mut self.topics[t as usize].partitions[p as usize];
            let Some(i) = pq.find(id) else { continue };
            if !matches!(pq.batches[i].state, BatchState::InFlight { conn: c, .. } if c == conn) {
                continue;
            }
            pq.inflight -= 1;
            if pq.inflight == 0 {
                pq.inflight_conn = None;
            }
            touched.push((t, p));
            match results.get(&(&*name, p as i32)) {
                Some(r) => self.resolve(conn, t, p, i, r),
                None => {
                    // The broker left the partition out: treat as possibly written.
                    self.topics[t as usize].partitions[p as usize].batches[i].possibly_persisted =
                        true;
                    self.retry_or_expire(t, p, i, ErrorCode::NETWORK_EXCEPTION);
                }
            }
            if self.fatal.is_some() {
                return;
            }
        }
        for (t, p) in touched {
            self.emit_done(t, p);
            self.mark_partition_dirty(t, p);
        }
        self.mark_broker_dirty(conn.slot);
    }

    /// Applies one partition's result to the batch at index `i`.
    fn resolve(&mut self, conn: ConnId, t: u32, p: u32, i: usize, r: &PartitionProduceResponse) {
        let idem = self.config.idempotence;
        let code = r.error_code;
        let possibly_persisted =
            self.topics[t as usize].partitions[p as usize].batches[i].possibly_persisted;
        let broker_error = || ProduceError::Broker {
            code,
            message: r.error_message.clone(),
            possibly_persisted,
        };
        match classify(code) {
            Action::Ok | Action::OkDuplicate => {
                let base = if code == ErrorCode::DUPLICATE_SEQUENCE_NUMBER {
                    -1
                } else {
                    r.base_offset
                };
                let pq = &mut self.topics[t as usize].partitions[p as usize];
                pq.batches[i].state = BatchState::Done(Ok((base, r.log_append_time_ms)));
                if idem {
                    pq.ok_on_conn = Some(conn);
                }
            }
            Action::Refresh => {
                let hinted = r
                    .current_leader
                    .filter(|l| l.leader_id >= 0 && self.node_slots.contains_key(&l.leader_id));
                match hinted {
                    Some(l) => self.set_leader(t, p, l.leader_id, l.leader_epoch),
                    None => {
                        self.topics[t as usize].partitions[p as usize].needs_metadata = true;
                        self.back_off(t, p, i);
                    }
                }
                self.request_metadata();
                self.retry_or_expire(t, p, i, code);
            }
            Action::Backoff => {
                self.back_off(t, p, i);
                self.retry_or_expire(t, p, i, code);
            }
            Action::Unsure => {
                self.topics[t as usize].partitions[p as usize].batches[i].possibly_persisted = true;
                self.back_off(t, p, i);
                self.retry_or_expire(t, p, i, code);
            }
            Action::Split => {
                if self.topics[t as usize].partitions[p as usize].batches[i]
                    .records
                    .len()
                    > 1
                {
                    self.split(t, p, i);
                } else {
                    self.fail_sent(t, p, i, broker_error());
                }
            }
            Action::Reset => {
                let pq = &mut self.topics[t as usize].partitions[p as usize];
                let head = pq.batches.iter().position(|b| !b.is_done()) == Some(i);
                if head && idem {
                    pq.request_reset(None);
                }
                self.retry_or_expire(t, p, i, code);
            }
            Action::Fail => {
                if code == ErrorCode::TOPIC_AUTHORIZATION_FAILED {
                    self.topics[t as usize].error = Some(code);
                }
                self.fail_sent(t, p, i, broker_error());
            }
            Action::Fatal => self.go_fatal(broker_error()),
        }
    }

    /// Fails a batch that was sent: with idempotence its sequence numbers are now a hole, so
    /// the partition restarts its sequence under a new epoch before sending again.
    fn fail_sent(&mut self, t: u32, p: u32, i: usize, error: ProduceError) {
        let pq = &mut self.topics[t as usize].partitions[p as usize];
        pq.batches[i].state = BatchState::Done(Err(error));
        if self.config.idempotence {
            let id = pq.batches[i].id;
            pq.request_reset(Some(id));
        }
    }

    fn back_off(&mut self, t: u32, p: u32, i: usize) {
        let attempts = self.topics[t as usize].partitions[p as usize].batches[i].attempts;
        let delay = self.retry_backoff(attempts.saturating_sub(1));
        let at = self.now + delay;
        let pq = &mut self.topics[t as usize].partitions[p as usize];
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

    /// Puts a batch back to be sent again, or fails it when its delivery timeout has passed.
    pub(crate) fn retry_or_expire(&mut self, t: u32, p: u32, i: usize, error: ErrorCode) {
        let now = self.now;
        let deadline = self.config.delivery_timeout;
        let idem = self.config.idempotence;
        let pq = &mut self.topics[t as usize].partitions[p as usize];
        let b = &mut pq.batches[i];
        if b.created + deadline <= now {
            let possibly_persisted = b.possibly_persisted;
            b.state = BatchState::Done(Err(ProduceError::DeliveryTimeout { possibly_persisted }));
            if idem {
                let id = b.id;
                pq.request_reset(Some(id));
            }
            return;
        }
        b.state = BatchState::Ready;
        self.stats.retries += 1;
        let topic = self.topics[t as usize].name.clone();
        self.outputs.push_back(Output::Event(Event::Retry {
            topic,
            partition: p as i32,
            error,
        }));
    }

    /// Splits a batch the broker found too large into two, keeping order and sequence range.
    /// The records are decoded back out of the batch and re-encoded as two halves.
    fn split(&mut self, t: u32, p: u32, i: usize) {
        let compression = self.config.compression;
        let pq = &mut self.topics[t as usize].partitions[p as usize];
        let Some(old) = pq.batches.remove(i) else {
            return;
        };
        let Batch {
            sealed,
            records: mut first_pending,
            charged,
            created,
            attempts,
            base_sequence,
            possibly_persisted,
            ..
        } = old;
        let mid = first_pending.len() / 2;
        let decoded = sealed.into_records().map_err(|e| e.to_string());
        // Both halves re-encoded, or the reason (then every record fails with what was decoded).
        let halves = match &decoded {
            Ok(d) if d.len() == first_pending.len() => encode_half::<T>(&d[..mid], compression)
                .and_then(|a| Ok([a, encode_half::<T>(&d[mid..], compression)?]))
                .map_err(|e| ProduceError::Compression(e.to_string())),
            Ok(d) => Err(ProduceError::BatchDecode(format!(
                "{} records decoded for {}",
                d.len(),
                first_pending.len()
            ))),
            Err(e) => Err(ProduceError::BatchDecode(e.clone())),
        };
        let second_pending = first_pending.split_off(mid);
        let pq = &mut self.topics[t as usize].partitions[p as usize];
        let halves = match halves {
            Ok(halves) => halves,
            Err(error) => {
            // The codec sealed the original batch, so this is not expected; fail the records
            // rather than lose them. The batch had been sent: its sequence range is now a hole.
            pq.sent -= 1;
            if self.config.idempotence {
                pq.request_reset(None);
            }
            first_pending.extend(second_pending);
            self.fail_records(t, p as i32, first_pending, decoded, charged, error);
            return;
            }
        };
        debug_assert_eq!(
            halves[0].1 + halves[1].1,
            charged,
            "a split re-charges its records"
        );
        let mut seq = base_sequence;
        let (pid, epoch) = (pq.producer_id, pq.epoch);
        let pendings = [first_pending, second_pending];
        for (k, ((mut sealed, charged), records)) in halves.into_iter().zip(pendings).enumerate() {
            let id = pq.next_batch_id;
            pq.next_batch_id += 1;
            let mut base_sequence = None;
            match seq {
                Some(s) if self.config.idempotence => {
                    sealed.stamp(pid, epoch, s);
                    base_sequence = Some(s);
                    seq = Some(crate::sink::next_sequence(s, records.len() as i32));
                }
                _ => sealed.stamp(-1, -1, -1),
            }
            let batch = Batch {
                id,
                sealed,
                records,
                charged,
                created,
                state: BatchState::Ready,
                attempts,
                base_sequence,
                possibly_persisted,
            };
            pq.batches.insert(i + k, batch);
        }
        // The original occupied one place of the sent region; the halves occupy two.
        pq.sent += 1;
    }
}

/// Encodes decoded records as a new batch; returns it with the buffer space its records count,
/// or why sealing (compressing) failed.
fn encode_half<T>(
    records: &[DecodedRecord],
    compression: Compression,
) -> Result<(SealedBatch, usize), crate::record::CompressionError> {
    let mut builder = BatchBuilder::new();
    let mut charged = 0;
    for r in records {
        let (k, v) = (r.key.as_deref(), r.value.as_deref());
        let payload = BatchBuilder::payload_size(k, v, &r.headers);
        charged += charged_size::<T>(BatchBuilder::record_size_with_payload(0, 0, payload));
        builder.append(r.timestamp, k, v, &r.headers);
    }
    Ok((builder.seal(compression)?, charged))
}
