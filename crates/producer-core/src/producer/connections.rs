//! Connections: opening one per broker, ApiVersions (request and answer here) with the
//! fallback for brokers that refuse a version, reading frames and dispatching each answer to
//! the concern that sent its request, request (and connection attempt) timeouts, lost
//! connections, and reconnect backoff.

use crate::connection::{ConnState, InFlightRequest, RequestKind, Versions};
use crate::protocol::api_versions::{peek_error_code, ApiVersionsRequest, ApiVersionsResponse};
use crate::protocol::header::peek_correlation_id;
use crate::protocol::produce::ProduceResponse;
use crate::protocol::{encode_request, parse_response_header, ApiKey, RequestHeader};
use crate::timer::{backoff, TimerKind};
use std::collections::VecDeque;
use std::io::ErrorKind;

use crate::brokers::FailureOutcome;
use crate::classify::{decide, Action, Request};
use crate::config::MetadataRecovery;
use crate::types::{ConnId, ConnectionError, Event, Output, RebootstrapReason, WireBytes};

use super::Producer;

/// The ApiVersions version asked first (the highest this crate speaks); a broker that refuses
/// it is asked again at the highest version it offers (or v0).
const API_VERSIONS_FIRST: i16 = ApiKey::ApiVersions.supported_versions().1;

impl<T> Producer<T> {
    /// Opens a new connection for a broker slot: the driver is told to connect, and the attempt
    /// is bounded by `request_timeout`.
    pub(super) fn connect(&mut self, slot: u32) {
        let id = self
            .brokers
            .open_connection(slot, self.config.max_response_size, self.now);
        self.metrics.connection_down(slot, true, self.now);
        self.timers.arm(
            self.now + self.config.request_timeout,
            TimerKind::Request { slot },
        );
        let b = self.brokers.slot(slot);
        self.outputs.push_back(Output::Connect {
            conn: id,
            host: b.host.clone(),
            port: b.port,
        });
    }

    /// A ready connection for a control request (the least loaded), or `None` after starting
    /// a connection attempt if none is ready (or arming a retry when every broker is backing
    /// off).
    ///
    /// Before the first Metadata answer the bootstrap addresses are tried; after it the brokers
    /// Metadata named. When none of those can be connected to (each backing off after a failed
    /// attempt), `metadata.recovery.strategy=rebootstrap` goes back to the bootstrap list
    /// ([`Producer::begin_rebootstrap`]); while rebootstrapping, Metadata requests go to
    /// bootstrap addresses only.
    pub(super) fn control_connection(&mut self, needs_init_pid: bool) -> Option<ConnId> {
        let bootstrap_only = self.metadata.rebootstrapping() && !needs_init_pid;
        let best = self
            .brokers
            .ready_control_connection(needs_init_pid, bootstrap_only);
        if best.is_some() {
            return best;
        }
        if self.brokers.any_connecting(bootstrap_only) {
            return None; // one is on its way
        }
        let now = self.now;
        let pick = if bootstrap_only || !self.metadata.ever_refreshed() {
            self.brokers.pick_bootstrap_to_connect(now)
        } else {
            match self.brokers.pick_node_to_connect(now) {
                Some(slot) => Some(slot),
                None if self.config.metadata_recovery == MetadataRecovery::Rebootstrap => {
                    self.begin_rebootstrap(RebootstrapReason::NoBrokerReachable);
                    self.brokers.pick_bootstrap_to_connect(now)
                }
                None => None,
            }
        };
        match pick {
            Some(slot) => self.connect(slot),
            None => {
                let bootstrap_only = self.metadata.rebootstrapping() && !needs_init_pid;
                if let Some(at) = self.brokers.earliest_reconnect(now, bootstrap_only) {
                    self.timers.arm(at, TimerKind::Metadata);
                }
            }
        }
        None
    }

    /// [`Producer::handle_connected`]: the connection starts negotiating with ApiVersions.
    pub(super) fn connection_established(&mut self, conn: ConnId) {
        let Some(c) = self.brokers.conn_mut(conn) else {
            return;
        };
        if c.state != ConnState::Connecting {
            return;
        }
        c.state = ConnState::Negotiating;
        self.send_api_versions(conn, API_VERSIONS_FIRST);
    }

    /// Sends ApiVersions at `version` on `conn` (also used, at v0, as the acks=0 close
    /// barrier: any answered request proves the earlier ones were handled).
    pub(super) fn send_api_versions(&mut self, conn: ConnId, version: i16) {
        let body = ApiVersionsRequest {
            client_software_name: "producer-core",
            client_software_version: env!("CARGO_PKG_VERSION"),
        };
        self.send_control_request(
            conn,
            ApiKey::ApiVersions,
            version,
            RequestKind::ApiVersions,
            |b| body.encode(version, b),
        );
    }

    /// The answer to ApiVersions: the connection becomes ready with the negotiated versions,
    /// or asks again at a version the broker speaks. Returns false when the answer is unusable
    /// (the connection is then closed).
    fn on_api_versions(&mut self, conn: ConnId, version: i16, body: &[u8]) -> bool {
        let parsed = match ApiVersionsResponse::parse(version, body) {
            Ok(parsed) => parsed,
            Err(_)
                if version > 0
                    && peek_error_code(body).is_some_and(|code| {
                        decide(Request::ApiVersions, code, self.mode()) == Action::Downgrade
                    }) =>
            {
                // A refusal we cannot read further (librdkafka's mock answers a v3 request with
                // a body that is neither v0 nor v3): the error code alone says to retry with v0.
                self.send_api_versions(conn, 0);
                return true;
            }
            Err(_) => return false,
        };
        let resp = parsed.body;
        match decide(Request::ApiVersions, resp.error_code, self.mode()) {
            Action::Ok => {}
            // The broker does not speak this ApiVersions version: retry with the highest it
            // offers (or v0 when it did not say).
            Action::Downgrade if version > 0 => {
                let broker_max = resp
                    .version_range(ApiKey::ApiVersions)
                    .map_or(0, |(_, max)| max);
                let next = broker_max.min(version - 1).max(0);
                self.send_api_versions(conn, next);
                return true;
            }
            _ => return false,
        }
        let Some(versions) = Versions::negotiate(&resp) else {
            // No common Metadata version: the broker is of no use to this producer. Its
            // connection fails (and backs off) like any unusable one; other brokers go on.
            let reason = match resp.version_range(ApiKey::Metadata) {
                Some((lo, hi)) => format!(
                    "the broker offers Metadata v{lo}-v{hi}, none of which this client speaks"
                ),
                None => "the broker does not offer Metadata".to_string(),
            };
            self.stats.malformed_responses += 1;
            self.connection_lost(conn, true, ErrorKind::Unsupported, reason);
            return true;
        };
        let Some(c) = self.brokers.conn_mut(conn) else {
            return true;
        };
        c.versions = Some(versions);
        if self.config.sasl.is_some() {
            self.begin_authentication(conn, false);
        } else {
            self.brokers.conn_mut(conn).expect("checked above").state = ConnState::Ready;
            self.connection_usable(conn);
        }
        true
    }

    /// `conn` finished its setup (ApiVersions, and authentication with SASL): its broker's
    /// reconnect backoff starts over, and it may send.
    pub(super) fn connection_usable(&mut self, conn: ConnId) {
        self.brokers.connection_ready(conn.slot);
        self.telemetry.connection_created();
        self.metrics.connection_down(conn.slot, false, self.now);
        let node_id = self.brokers.slot(conn.slot).node_id;
        self.outputs
            .push_back(Output::Event(Event::BrokerReady { node_id }));
        self.mark_broker_dirty(conn.slot);
    }

    /// [`Producer::handle_read`]: reassembles frames and handles each complete answer.
    pub(super) fn read_frames(&mut self, conn: ConnId, bytes: &[u8]) {
        let Some(c) = self.brokers.conn_mut(conn) else {
            return;
        };
        c.decoder.push(bytes);
        loop {
            let Some(c) = self.brokers.conn_mut(conn) else {
                return;
            };
            match c.decoder.next_frame() {
                Ok(Some(frame)) => {
                    if !self.handle_frame(conn, &frame) {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    self.stats.malformed_responses += 1;
                    if !self.config.security_protocol.uses_tls()
                        && c.state == ConnState::Negotiating
                        && e.looks_like_tls_record()
                    {
                        self.authentication_failed(conn, crate::AuthError::BrokerExpectsTls);
                        return;
                    }
                    let reason = format!("unreadable response frame: {e}");
                    self.connection_lost(conn, true, ErrorKind::InvalidData, reason);
                    return;
                }
            }
        }
    }

    /// Processes one answer frame: it must answer the oldest request in flight (answers come
    /// in order), and goes to the concern that sent that request. Returns false when the
    /// connection was closed.
    fn handle_frame(&mut self, conn: ConnId, frame: &[u8]) -> bool {
        let Some(c) = self.brokers.conn_mut(conn) else {
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
            let reason =
                format!("response with correlation id {got:?} where {expected:?} was expected");
            self.connection_lost(conn, true, ErrorKind::InvalidData, reason);
            return false;
        }
        let Some(req) = c.inflight.pop_front() else {
            return false;
        };
        let previous_answer = c.answer_came(self.now);
        let body = match parse_response_header(req.api, req.version, frame) {
            Ok((_, body)) => body,
            Err(_) => return self.malformed(conn, req),
        };
        let ok = match req.kind {
            RequestKind::ApiVersions => self.on_api_versions(conn, req.version, body),
            RequestKind::Metadata => self.on_metadata(conn, req.version, body),
            RequestKind::InitProducerId => self.on_init_producer_id(req.version, body),
            RequestKind::SaslHandshake => self.on_sasl_handshake(conn, req.version, body),
            RequestKind::SaslAuthenticate => self.on_sasl_authenticate(conn, req.version, body),
            RequestKind::Transaction(t) => self.on_txn_response(t, req.version, body),
            RequestKind::Telemetry(t) => self.on_telemetry_response(t, req.version, body),
            RequestKind::Produce { .. } => match ProduceResponse::parse(req.version, body) {
                Ok(parsed) => {
                    self.stats.trailing_response_bytes += parsed.trailing as u64;
                    self.metrics.tick(self.now, &self.stats);
                    let in_flight = c.produce_in_flight();
                    self.produce_slots_changed(conn.slot, in_flight);
                    self.metrics.produce_answered(
                        conn.slot,
                        self.now.saturating_duration_since(req.sent_at),
                        parsed.body.throttle_time_ms,
                    );
                    let RequestKind::Produce {
                        batches,
                        sent_alone,
                    } = req.kind
                    else {
                        unreachable!("matched as Produce above")
                    };
                    self.on_produce(conn, batches, parsed.body);
                    let brokers = &self.brokers;
                    self.queue_delay.answered(
                        self.now,
                        req.sent_at,
                        sent_alone,
                        previous_answer,
                        || brokers.backlog(),
                    );
                    true
                }
                Err(_) => return self.malformed(conn, req),
            },
        };
        if !ok {
            self.stats.malformed_responses += 1;
            let reason = format!("unusable {:?} v{} response", req.api, req.version);
            self.connection_lost(conn, true, ErrorKind::InvalidData, reason);
            return false;
        }
        let alive = self.brokers.conn(conn).is_some();
        if alive {
            self.arm_request_timer(conn.slot);
        }
        // A close may have been waiting for this answer.
        self.check_closed();
        alive && self.brokers.slot(conn.slot).conn.is_some()
    }

    /// An answer that could not be parsed: its request goes back in flight (so the lost
    /// connection redoes it) and the connection is closed.
    fn malformed(&mut self, conn: ConnId, req: InFlightRequest) -> bool {
        self.stats.malformed_responses += 1;
        let reason = format!("malformed {:?} v{} response", req.api, req.version);
        if let Some(c) = self.brokers.slot_mut(conn.slot).conn.as_mut() {
            c.inflight.push_front(req);
        }
        self.connection_lost(conn, true, ErrorKind::InvalidData, reason);
        false
    }

    /// Drops a connection: each request in flight on it goes back to its concern (batches are
    /// retried as possibly written, control requests are redone), metadata is refreshed and a
    /// reconnect is scheduled. `ours` says the producer decided it (timeout, bad bytes), so the
    /// driver must be told. `kind` and `reason` say why; the broker remembers them as its last
    /// connection error (named by the delivery timeouts of its records), and when no connection
    /// is left, [`Event::AllBrokersDown`] reports them.
    pub(super) fn connection_lost(
        &mut self,
        conn: ConnId,
        ours: bool,
        kind: ErrorKind,
        reason: String,
    ) {
        let slot = conn.slot;
        let Some(c) = self.brokers.take_conn(conn) else {
            return;
        };
        if ours {
            self.outputs.push_back(Output::Disconnect { conn });
        }
        let was_ready = matches!(c.state, ConnState::Ready | ConnState::Reauthenticating);
        let established = c.state != ConnState::Connecting;
        self.stats.disconnects += 1;
        let b = self.brokers.slot(slot);
        let error = ConnectionError::new(b.node_id, b.address(), kind, reason, established);
        if let FailureOutcome::AllDown { cluster_reached } =
            self.brokers.count_failure(slot, error.clone(), was_ready)
        {
            self.outputs.push_back(Output::Event(Event::AllBrokersDown {
                last_error: error,
                cluster_reached,
            }));
        }
        self.schedule_reconnect(slot);
        self.requests_lost(conn, c.inflight);
        // A broker that cannot be reached while it leads partitions with records waiting may
        // have lost its leadership (killed; the controller elects new leaders once it notices):
        // each failed attempt asks again, within the refresh backoff, until Metadata names
        // another leader. Without it, the records would wait out their delivery timeout.
        let leads_waiting = self
            .brokers
            .slot(slot)
            .partitions
            .iter()
            .any(|&(t, p)| !self.topics.partition(t, p).is_empty());
        self.produce_slots_changed(slot, 0);
        self.metrics.connection_down(slot, leads_waiting, self.now);
        if was_ready || leads_waiting {
            self.request_metadata();
        }
        self.work_pending = true;
        self.check_closed();
    }

    /// The requests in flight on connection `conn`, which is gone: each goes back to the
    /// concern that sent it (batches are retried as possibly written, control requests are
    /// redone; the connection's setup dies with it).
    pub(super) fn requests_lost(&mut self, conn: ConnId, inflight: VecDeque<InFlightRequest>) {
        for req in inflight {
            match req.kind {
                RequestKind::Produce { batches, .. } => self.produce_request_lost(conn, batches),
                RequestKind::Metadata => self.metadata_request_lost(),
                RequestKind::InitProducerId => self.init_producer_id_lost(),
                RequestKind::Transaction(t) => self.txn_request_lost(t),
                RequestKind::Telemetry(t) => self.telemetry_request_lost(t),
                // The connection's setup dies with it; a new connection starts over.
                RequestKind::ApiVersions
                | RequestKind::SaslHandshake
                | RequestKind::SaslAuthenticate => {}
            }
        }
    }

    /// Arms the request timeout of the oldest request in flight on the slot's connection.
    pub(super) fn arm_request_timer(&mut self, slot: u32) {
        let Some(c) = self.brokers.slot(slot).conn.as_ref() else {
            return;
        };
        if let Some(sent_at) = c.oldest_sent_at() {
            self.timers.arm(
                sent_at + self.config.request_timeout,
                TimerKind::Request { slot },
            );
        }
    }

    /// The slot's request timer fired: a connection attempt or the oldest request older than
    /// `request_timeout` closes the connection; otherwise the timer is armed again.
    pub(super) fn check_request_timeout(&mut self, slot: u32) {
        let now = self.now;
        let timeout = self.config.request_timeout;
        let Some(c) = self.brokers.slot(slot).conn.as_ref() else {
            return;
        };
        let started = if c.state == ConnState::Connecting {
            // The connection attempt itself is bounded by the request timeout too.
            Some(c.opened_at)
        } else {
            c.oldest_sent_at()
        };
        let Some(started) = started else {
            return;
        };
        if started + timeout <= now {
            let id = c.id;
            let reason = if c.state == ConnState::Connecting {
                format!(
                    "not connected within request.timeout.ms ({} ms)",
                    timeout.as_millis()
                )
            } else {
                format!(
                    "no answer within request.timeout.ms ({} ms)",
                    timeout.as_millis()
                )
            };
            self.connection_lost(id, true, ErrorKind::TimedOut, reason);
        } else {
            self.timers
                .arm(started + timeout, TimerKind::Request { slot });
        }
    }

    /// Schedules a reconnect after a failure of the broker in `slot`, with exponential
    /// backoff from its consecutive failures.
    fn schedule_reconnect(&mut self, slot: u32) {
        let (base, max) = (
            self.config.reconnect_backoff,
            self.config.reconnect_backoff_max,
        );
        let failures = self.brokers.slot(slot).failures;
        let delay = backoff(&mut self.rng, base, max, failures.saturating_sub(1));
        let at = self.now + delay;
        self.brokers.slot_mut(slot).reconnect_at = Some(at);
        self.timers.arm(at, TimerKind::Broker { slot });
    }

    /// Sends one non-Produce request on `conn`: frames it, records it as in flight (arming the
    /// connection's request timer if it was idle) and queues the bytes.
    pub(super) fn send_control_request(
        &mut self,
        conn: ConnId,
        api: ApiKey,
        version: i16,
        kind: RequestKind,
        body: impl FnOnce(&mut Vec<u8>),
    ) {
        self.send_request_frame(conn, api, version, kind, None, body);
    }

    /// As [`Producer::send_control_request`], for a request whose body carries a credential
    /// (SaslAuthenticate) of `secret_len` bytes: the frame is built in one buffer sized for it
    /// (never reallocated, so no copy is left behind) and wiped when the driver drops its last
    /// reference to it.
    pub(super) fn send_secret_request(
        &mut self,
        conn: ConnId,
        api: ApiKey,
        version: i16,
        kind: RequestKind,
        secret_len: usize,
        body: impl FnOnce(&mut Vec<u8>),
    ) {
        self.send_request_frame(conn, api, version, kind, Some(secret_len), body);
    }

    fn send_request_frame(
        &mut self,
        conn: ConnId,
        api: ApiKey,
        version: i16,
        kind: RequestKind,
        secret_len: Option<usize>,
        body: impl FnOnce(&mut Vec<u8>),
    ) {
        let now = self.now;
        let Some(c) = self.brokers.conn_mut(conn) else {
            return;
        };
        let correlation_id = c.take_correlation_id();
        // The frame's size, header (client id included) and the body's length prefix and tags
        // take less than 64 bytes beside the client id and the secret.
        let capacity = secret_len.map_or(128, |n| 64 + self.config.client_id.len() + n);
        let mut buf = Vec::with_capacity(capacity);
        let header = RequestHeader {
            api_key: api,
            api_version: version,
            correlation_id,
            client_id: Some(&self.config.client_id),
        };
        encode_request(&mut buf, &header, body);
        let bytes = match secret_len {
            Some(_) => {
                debug_assert_eq!(buf.capacity(), capacity, "a secret frame was reallocated");
                WireBytes::wiped_on_drop(buf)
            }
            None => WireBytes::from(buf),
        };
        let was_idle = c.push_request(InFlightRequest {
            correlation_id,
            api,
            version,
            sent_at: now,
            kind,
        });
        if was_idle {
            self.arm_request_timer(conn.slot);
        }
        self.outputs.push_back(Output::Transmit { conn, bytes });
    }
}
