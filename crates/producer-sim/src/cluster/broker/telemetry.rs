//! GetTelemetrySubscriptions and PushTelemetry (KIP-714): the telemetry receiver's rules, as
//! Kafka's `ClientMetricsManager` applies them, and the pushes it accepted.
//!
//! * GetTelemetrySubscriptions: a zero client instance id gets a new one (a random v4 uuid
//!   from the cluster's seed); the answer carries the subscription the test set (its id: a
//!   generation counted from 1 by each [`SimCluster::set_telemetry_subscription`]), or, with
//!   none, no metrics, Kafka's default interval of 5 minutes and subscription id 0.
//! * PushTelemetry, checked in Kafka's order: an unknown client instance id or another
//!   subscription id is UNKNOWN_SUBSCRIPTION_ID (117); a push from a client that already sent
//!   its terminating push is INVALID_REQUEST (42); a push sooner than the interval since the
//!   client's last request (a push straight after GetTelemetrySubscriptions is allowed, and a
//!   terminating push always) is THROTTLING_QUOTA_EXCEEDED (89); a compression type the
//!   subscription does not accept is UNSUPPORTED_COMPRESSION_TYPE (76); more than
//!   `max_bytes` of metrics is TELEMETRY_TOO_LARGE (118); metrics that do not decompress are
//!   INVALID_RECORD (87). An accepted push is recorded with its metrics decompressed.
//!
//! Bounds: one entry per client instance id handed out (each asks the broker, so the test
//! bounds them); every accepted push is kept (the test reads them).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest,
    PushTelemetryResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::code;
use crate::cluster::SimCluster;
use crate::config::SimSubscription;
use crate::{API_GET_TELEMETRY_SUBSCRIPTIONS, API_PUSH_TELEMETRY};

/// Kafka's interval for a client no subscription matches (`ClientMetricsConfigs`).
const NO_SUBSCRIPTION_INTERVAL_MS: i32 = 300_000;

/// One push a broker accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimTelemetryPush {
    /// The broker that took it.
    pub broker: i32,
    /// When the broker handled it (virtual time).
    pub at: Instant,
    /// The client instance id.
    pub client_instance_id: [u8; 16],
    /// The subscription it named.
    pub subscription_id: i32,
    /// Whether it was the client's terminating push.
    pub terminating: bool,
    /// Its compression type id.
    pub compression: i8,
    /// Its metrics as sent (compressed).
    pub compressed_len: usize,
    /// Its metrics, decompressed: OTLP `MetricsData` from a KIP-714 client.
    pub metrics: Bytes,
}

/// What the receiver keeps of one client instance.
#[derive(Debug, Clone, Default)]
struct ClientInstance {
    last_get: Option<Instant>,
    last_push: Option<Instant>,
    terminated: bool,
}

/// The cluster's telemetry receiver.
#[derive(Debug, Default)]
pub(crate) struct TelemetryReceiver {
    subscription: Option<SimSubscription>,
    generation: i32,
    clients: BTreeMap<[u8; 16], ClientInstance>,
    pushes: Vec<SimTelemetryPush>,
    /// Pushes refused, by error code.
    refused: BTreeMap<i16, u64>,
}

impl SimCluster {
    /// Sets (or with `None` removes) the client-metrics subscription every client gets: the
    /// subscription id changes, so a client pushing under the old one is answered
    /// UNKNOWN_SUBSCRIPTION_ID and must ask again. Needs [`crate::SimConfig::telemetry_receiver`]
    /// for clients to see it.
    pub fn set_telemetry_subscription(&mut self, subscription: Option<SimSubscription>) {
        self.telemetry.subscription = subscription;
        self.telemetry.generation = self.telemetry.generation.wrapping_add(1).max(1);
    }

    /// Every push the brokers accepted, in order.
    pub fn telemetry_pushes(&self) -> &[SimTelemetryPush] {
        &self.telemetry.pushes
    }

    /// How many pushes were refused with `code` (throttled, unknown subscription, ...).
    pub fn telemetry_refused(&self, code: i16) -> u64 {
        self.telemetry.refused.get(&code).copied().unwrap_or(0)
    }

    /// The current subscription id (0 with none).
    fn subscription_id(&self) -> i32 {
        match self.telemetry.subscription {
            Some(_) => self.telemetry.generation,
            None => 0,
        }
    }

    pub(super) fn get_telemetry_subscriptions(
        &mut self,
        broker_id: i32,
        at: Instant,
        req: GetTelemetrySubscriptionsRequest,
    ) -> GetTelemetrySubscriptionsResponse {
        let mut resp = GetTelemetrySubscriptionsResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        if let Some(inj) = self.take_injection(API_GET_TELEMETRY_SUBSCRIPTIONS, |_| true) {
            resp.error_code = inj.error_code;
            return resp;
        }
        let mut id = *req.client_instance_id.as_bytes();
        if id == [0; 16] {
            let bits = u128::from(self.rng.next_u64()) << 64 | u128::from(self.rng.next_u64());
            id = *uuid::Builder::from_random_bytes(bits.to_be_bytes())
                .into_uuid()
                .as_bytes();
        }
        self.telemetry.clients.entry(id).or_default().last_get = Some(at);
        resp.client_instance_id = uuid::Uuid::from_bytes(id);
        resp.subscription_id = self.subscription_id();
        match &self.telemetry.subscription {
            Some(s) => {
                resp.accepted_compression_types = s.accepted_compression.clone();
                resp.push_interval_ms =
                    i32::try_from(s.push_interval.as_millis()).unwrap_or(i32::MAX);
                resp.telemetry_max_bytes = s.max_bytes;
                resp.delta_temporality = s.delta_temporality;
                resp.requested_metrics = s
                    .metrics
                    .iter()
                    .map(|m| StrBytes::from_string(m.clone()))
                    .collect();
            }
            None => {
                resp.accepted_compression_types = vec![4, 3, 1, 2];
                resp.push_interval_ms = NO_SUBSCRIPTION_INTERVAL_MS;
                resp.telemetry_max_bytes = 1024 * 1024;
                resp.delta_temporality = true;
            }
        }
        resp
    }

    pub(super) fn push_telemetry(
        &mut self,
        broker_id: i32,
        at: Instant,
        req: PushTelemetryRequest,
    ) -> PushTelemetryResponse {
        let mut resp = PushTelemetryResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        resp.error_code = match self.take_injection(API_PUSH_TELEMETRY, |_| true) {
            Some(inj) => inj.error_code,
            None => self.accept_push(broker_id, at, &req),
        };
        if resp.error_code != code::NONE {
            *self.telemetry.refused.entry(resp.error_code).or_default() += 1;
        }
        resp
    }

    /// Kafka's checks of a push, in its order; an accepted push is recorded.
    fn accept_push(&mut self, broker_id: i32, at: Instant, req: &PushTelemetryRequest) -> i16 {
        let id = *req.client_instance_id.as_bytes();
        let current = self.subscription_id();
        let cap = self.cfg.max_decompressed_size;
        let sub = self.telemetry.subscription.clone();
        let Some(client) = self.telemetry.clients.get_mut(&id) else {
            return code::UNKNOWN_SUBSCRIPTION_ID;
        };
        let Some(sub) = sub.filter(|_| req.subscription_id == current) else {
            return code::UNKNOWN_SUBSCRIPTION_ID;
        };
        if client.terminated {
            return code::INVALID_REQUEST;
        }
        // A push straight after a GetTelemetrySubscriptions is allowed; else the interval must
        // have passed since the client's last request.
        let fresh = match (client.last_get, client.last_push) {
            (Some(get), Some(push)) => get > push,
            (Some(_), None) => true,
            _ => false,
        };
        let last = client.last_get.max(client.last_push);
        let waited = last.map_or(Duration::MAX, |l| at.saturating_duration_since(l));
        if !req.terminating && !fresh && waited < sub.push_interval {
            return code::THROTTLING_QUOTA_EXCEEDED;
        }
        client.last_push = Some(at);
        if !sub.accepted_compression.contains(&req.compression_type) {
            return code::UNSUPPORTED_COMPRESSION_TYPE;
        }
        if req.metrics.len() > usize::try_from(sub.max_bytes).unwrap_or(0) {
            return code::TELEMETRY_TOO_LARGE;
        }
        let Ok(metrics) =
            crate::wire::decompress(i16::from(req.compression_type), &req.metrics, cap)
        else {
            return code::INVALID_RECORD;
        };
        client.terminated |= req.terminating;
        self.telemetry.pushes.push(SimTelemetryPush {
            broker: broker_id,
            at,
            client_instance_id: id,
            subscription_id: req.subscription_id,
            terminating: req.terminating,
            compression: req.compression_type,
            compressed_len: req.metrics.len(),
            metrics,
        });
        code::NONE
    }
}
