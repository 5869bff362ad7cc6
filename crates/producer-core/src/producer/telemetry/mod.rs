//! KIP-714 client telemetry: GetTelemetrySubscriptions and PushTelemetry sent and answered,
//! driven by the producer's poll and its one timer (`TimerKind::Telemetry`).
//!
//! `state.rs` keeps the state machine (subscription, push interval, codec, errors, the close's
//! terminating push); `collect.rs` (cargo feature `telemetry`) what a push carries, encoded as
//! OTLP. Requests go out like the other control requests: on a ready connection of a broker
//! that lists GetTelemetrySubscriptions and PushTelemetry in ApiVersions (the least loaded),
//! never opening one for telemetry alone; their answers come back through the producer's
//! response dispatch. Telemetry is asked for only when `enable.metrics.push` is true and the
//! feature is compiled in.

// Without the feature the push path is compiled out and the state machine never leaves `Off`:
// what only pushes use is unused then.
#![cfg_attr(not(feature = "telemetry"), allow(dead_code, unused_imports))]

#[cfg(feature = "telemetry")]
mod collect;
pub(crate) mod in_flight;
mod state;
#[cfg(test)]
mod telemetry_tests;

use std::time::{Duration, Instant};

use crate::classify::{decide, Request};
use crate::connection::{ConnState, RequestKind};
use crate::protocol::get_telemetry_subscriptions::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
};
use crate::protocol::push_telemetry::{PushTelemetryRequest, PushTelemetryResponse};
use crate::protocol::ApiKey;
use crate::timer::{backoff, TimerKind};
use crate::types::ConnId;

pub(crate) use in_flight::TelemetryRequest;
pub(crate) use state::Telemetry;
pub use state::{TelemetryState, TelemetryStatus};

use super::Producer;

/// Telemetry's part of the producer: the state machine, what it counts itself, and the wall
/// clock's anchor.
#[derive(Debug)]
pub(crate) struct TelemetryBook {
    machine: Telemetry,
    #[cfg(feature = "telemetry")]
    collector: collect::Collector,
    /// An instant and the Unix time then, from the driver (`Producer::set_wall_clock`); without
    /// it, times count from the producer's creation.
    wall_clock: Option<(Instant, Duration)>,
    created: Instant,
    /// The instant `TimerKind::Telemetry` is armed for, so that the poll that finds the next
    /// request not yet due arms it once, not once per poll (the heap keeps every entry until
    /// it fires).
    armed: Option<Instant>,
    /// Whether a ready connection offering telemetry may exist: cleared when a search finds
    /// none, set when a connection becomes ready (or ready again after re-authentication) and
    /// when the timer fires. Spares each poll a scan of every broker while no broker offers
    /// telemetry (the common case: Kafka hides the APIs without a receiver).
    may_find_connection: bool,
}

impl TelemetryBook {
    /// Telemetry of a new producer: on when `enable.metrics.push` and the `telemetry` feature.
    pub(crate) fn new(config: &crate::Config, now: Instant) -> Self {
        TelemetryBook {
            machine: Telemetry::new(
                cfg!(feature = "telemetry") && config.enable_metrics_push,
                now,
            ),
            #[cfg(feature = "telemetry")]
            collector: collect::Collector::new(now),
            wall_clock: None,
            created: now,
            armed: None,
            may_find_connection: true,
        }
    }

    /// A connection is ready again after re-authenticating: it may be telemetry's.
    pub(crate) fn connection_ready(&mut self) {
        self.may_find_connection = true;
    }

    /// A connection finished its setup (counted for `connection.creation.*`; it may be
    /// telemetry's).
    pub(crate) fn connection_created(&mut self) {
        self.may_find_connection = true;
        #[cfg(feature = "telemetry")]
        self.collector.connection_created();
    }

    /// A batch is drained into a Produce request after waiting `waited` since it opened
    /// (`record.queue.time.*`). One call per batch sent.
    #[inline]
    pub(crate) fn batch_drained(&mut self, waited: Duration) {
        #[cfg(feature = "telemetry")]
        self.collector.batch_drained(waited);
        #[cfg(not(feature = "telemetry"))]
        let _ = waited;
    }
}

/// `at` as nanoseconds since the Unix epoch, from the wall clock's anchor (an instant and the
/// Unix time then), or since `created` without one.
#[cfg(feature = "telemetry")]
fn unix_nanos(wall_clock: Option<(Instant, Duration)>, created: Instant, at: Instant) -> u64 {
    let since = match wall_clock {
        Some((anchor, unix)) => match at.checked_duration_since(anchor) {
            Some(d) => unix.saturating_add(d),
            None => unix.saturating_sub(anchor - at),
        },
        None => at.saturating_duration_since(created),
    };
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

impl<T> Producer<T> {
    /// Where client telemetry (KIP-714) stands: the state, the client instance id and
    /// subscription the broker handed out, pushes accepted and skipped. Cheap.
    pub fn telemetry(&self) -> TelemetryStatus {
        self.telemetry.machine.status()
    }

    /// Tells the producer the wall clock: `unix_time` (since the Unix epoch) is the time at
    /// `now`. The core reads no clock itself; telemetry's OTLP points carry Unix times from
    /// this anchor. Call it once after [`Producer::new`] (the drivers do). Without it, the
    /// points' times count from the producer's creation.
    pub fn set_wall_clock(&mut self, now: Instant, unix_time: Duration) {
        self.touch(now);
        self.telemetry.wall_clock = Some((now, unix_time));
    }

    /// Sends the telemetry request that is due (from `pump`), or arms the timer for when one
    /// is. Nothing without a ready connection to a broker that offers telemetry: the next
    /// connection made ready polls again.
    pub(super) fn drive_telemetry(&mut self) {
        if self.lifecycle.closing && !self.telemetry_closing_allowed() {
            return;
        }
        let due = match self.telemetry.machine.due(self.now) {
            Ok(Some(due)) => due,
            Ok(None) => return,
            Err(at) => {
                if self.telemetry.armed != Some(at) {
                    self.telemetry.armed = Some(at);
                    self.timers.arm(at, TimerKind::Telemetry);
                }
                return;
            }
        };
        let conn = match self.telemetry.may_find_connection {
            true => self.telemetry_connection(),
            false => None,
        };
        let Some(conn) = conn else {
            self.telemetry.may_find_connection = false;
            if due == (state::Due::Push { terminating: true }) {
                // Nowhere to send it now: the close does not wait for a connection.
                self.telemetry.machine.give_up();
            }
            return;
        };
        match due {
            state::Due::Subscribe => {
                let req = GetTelemetrySubscriptionsRequest {
                    client_instance_id: self.telemetry.machine.instance_id(),
                };
                self.send_control_request(
                    conn,
                    ApiKey::GetTelemetrySubscriptions,
                    0,
                    RequestKind::Telemetry(TelemetryRequest::Subscriptions),
                    |b| req.encode(0, b),
                );
                self.telemetry.machine.sent(due);
            }
            state::Due::Push { terminating } => self.send_push(conn, terminating),
        }
    }

    /// `TimerKind::Telemetry` fired: the next poll sends what is due (or arms the timer
    /// again).
    pub(super) fn telemetry_timer_fired(&mut self) {
        self.telemetry.armed = None;
        self.telemetry.may_find_connection = true;
        self.work_pending = true;
    }

    /// While closing, periodic telemetry goes on until the terminating push; a closed or
    /// failed producer sends nothing.
    fn telemetry_closing_allowed(&self) -> bool {
        !self.lifecycle.closed && self.fatal_error().is_none()
    }

    /// A ready connection (the least loaded) to a broker that offers telemetry.
    fn telemetry_connection(&self) -> Option<ConnId> {
        self.brokers
            .iter()
            .filter_map(|b| b.conn.as_ref())
            .filter(|c| c.state == ConnState::Ready)
            .filter(|c| c.versions.is_some_and(|v| v.telemetry))
            .min_by_key(|c| c.inflight.len())
            .map(|c| c.id)
    }

    /// Builds and sends a push on `conn`: the metrics the subscription asks for, compressed
    /// with its codec (uncompressed if that fails), unless larger than its
    /// `telemetry_max_bytes`.
    #[cfg(feature = "telemetry")]
    fn send_push(&mut self, conn: ConnId, terminating: bool) {
        let Some(sub) = self.telemetry.machine.subscription().cloned() else {
            self.telemetry.machine.give_up();
            return;
        };
        let snapshot = self.metrics_at(self.now);
        let book = &mut self.telemetry;
        let (wall_clock, created) = (book.wall_clock, book.created);
        let nanos = move |at: Instant| unix_nanos(wall_clock, created, at);
        let raw = book.collector.encode(self.now, &snapshot, &sub, nanos);
        let (codec, payload) = match sub.codec {
            crate::Compression::None => (crate::Compression::None, raw),
            codec => {
                let mut out = Vec::with_capacity(raw.len() / 2);
                match crate::record::compress_into(codec, &raw, &mut out) {
                    Ok(()) => (codec, out),
                    Err(_) => (crate::Compression::None, raw),
                }
            }
        };
        if payload.len() > sub.max_bytes {
            self.telemetry.machine.push_too_large(self.now, terminating);
            self.work_pending = true;
            return;
        }
        let req = PushTelemetryRequest {
            client_instance_id: self.telemetry.machine.instance_id(),
            subscription_id: sub.id,
            terminating,
            compression: codec,
            metrics: &payload,
        };
        self.send_control_request(
            conn,
            ApiKey::PushTelemetry,
            0,
            RequestKind::Telemetry(TelemetryRequest::Push { terminating }),
            |b| req.encode(0, b),
        );
        self.telemetry
            .machine
            .sent(state::Due::Push { terminating });
    }

    /// Without the `telemetry` feature the state machine never subscribes, so never pushes.
    #[cfg(not(feature = "telemetry"))]
    fn send_push(&mut self, _conn: ConnId, _terminating: bool) {
        self.telemetry.machine.give_up();
    }

    /// The answer to a telemetry request. Returns false when it could not be parsed (the
    /// connection is then closed; the request counts as lost).
    pub(super) fn on_telemetry_response(
        &mut self,
        request: TelemetryRequest,
        version: i16,
        body: &[u8],
    ) -> bool {
        let now = self.now;
        match request {
            TelemetryRequest::Subscriptions => {
                let Ok(parsed) = GetTelemetrySubscriptionsResponse::parse(version, body) else {
                    self.telemetry_request_lost(request);
                    return false;
                };
                self.stats.trailing_response_bytes += parsed.trailing as u64;
                let resp = parsed.body;
                let action = decide(Request::Telemetry, resp.error_code, self.mode());
                let (lo, hi) = state::FIRST_PUSH_JITTER;
                let jitter = self.rng.factor(lo, hi);
                self.telemetry.machine.subscribed(
                    now,
                    action,
                    resp,
                    jitter,
                    crate::Compression::is_supported,
                );
            }
            TelemetryRequest::Push { .. } => {
                let Ok(parsed) = PushTelemetryResponse::parse(version, body) else {
                    self.telemetry_request_lost(request);
                    return false;
                };
                self.stats.trailing_response_bytes += parsed.trailing as u64;
                let code = parsed.body.error_code;
                let action = decide(Request::Telemetry, code, self.mode());
                self.telemetry.machine.pushed(now, action, code);
            }
        }
        self.work_pending = true;
        true
    }

    /// A telemetry request was lost with its connection: asked again after a backoff (a
    /// terminating push is given up).
    pub(super) fn telemetry_request_lost(&mut self, _request: TelemetryRequest) {
        let (base, max) = (self.config.retry_backoff, self.config.retry_backoff_max);
        let rng = &mut self.rng;
        self.telemetry
            .machine
            .lost(self.now, |failures| backoff(rng, base, max, failures));
        self.work_pending = true;
    }

    /// The close reached its end (every record reported, nothing else to wait for): the
    /// terminating push goes out now if one is due. Returns whether the close must wait for
    /// telemetry (a push in flight, answered within the request timeout).
    pub(super) fn telemetry_close(&mut self) -> bool {
        if !self.telemetry.machine.close() {
            return false;
        }
        self.telemetry.may_find_connection = true;
        self.drive_telemetry();
        self.telemetry.machine.close()
    }

    /// The close stopped waiting (its deadline, a fatal error): telemetry ends.
    pub(super) fn telemetry_abandoned(&mut self) {
        self.telemetry.machine.give_up();
    }
}
