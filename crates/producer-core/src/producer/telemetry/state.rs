//! The KIP-714 client telemetry state machine, without the producer: the subscription, when
//! the next request is due, what an answer or a lost request changes, and the close's
//! terminating push. Private state; [`super`] sends what it says and hands the answers back.
//!
//! The states follow Java's `ClientTelemetryReporter` (`SUBSCRIPTION_NEEDED`,
//! `SUBSCRIPTION_IN_PROGRESS`, `PUSH_NEEDED`, `PUSH_IN_PROGRESS`, `TERMINATING_PUSH_NEEDED`,
//! `TERMINATING_PUSH_IN_PROGRESS`, `TERMINATED`), with `Off` for a producer that never pushes
//! (`enable.metrics.push=false`, the `telemetry` feature compiled out, or an answer that
//! disabled it).

use std::time::{Duration, Instant};

use crate::classify::Action;
use crate::protocol::get_telemetry_subscriptions::{
    GetTelemetrySubscriptionsResponse, RequestedMetrics, NO_CLIENT_INSTANCE_ID,
};
use crate::record::Compression;

/// The push interval when a broker gives none (or a non-positive one): Java's
/// `ClientTelemetryReporter.DEFAULT_PUSH_INTERVAL_MS`, 5 minutes.
pub(crate) const DEFAULT_PUSH_INTERVAL: Duration = Duration::from_secs(300);

/// The first push after a new subscription comes after the interval times a factor drawn in
/// this range (Java's initial jitter), so that clients started together spread their pushes.
pub(crate) const FIRST_PUSH_JITTER: (f64, f64) = (0.5, 1.5);

/// The codecs a push may use, in the order Java prefers them (and Kafka's broker lists them).
const PREFERRED_CODECS: [Compression; 4] = [
    Compression::Zstd,
    Compression::Lz4,
    Compression::Gzip,
    Compression::Snappy,
];

/// Where client telemetry stands ([`crate::Producer::telemetry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TelemetryState {
    /// Telemetry is off: `enable.metrics.push` is false, the core was built without its
    /// `telemetry` feature, or a broker's answer disabled it (see
    /// [`TelemetryStatus::disabled_by`]).
    Off,
    /// A subscription is to be asked for (at once, or after the push interval or a backoff),
    /// once a broker that offers telemetry is connected.
    SubscriptionNeeded,
    /// GetTelemetrySubscriptions is awaiting its answer.
    SubscriptionInProgress,
    /// Subscribed to some metrics: the next push is due at the interval.
    PushNeeded,
    /// PushTelemetry is awaiting its answer.
    PushInProgress,
    /// The producer closes: the terminating push goes out when everything else is done.
    TerminatingPushNeeded,
    /// The terminating push is awaiting its answer.
    TerminatingPushInProgress,
    /// Nothing more is pushed (the producer closed).
    Terminated,
}

/// What [`crate::Producer::telemetry`] reports of client telemetry (KIP-714).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TelemetryStatus {
    /// Where the state machine stands.
    pub state: TelemetryState,
    /// The client instance id the broker assigned, once one did.
    pub client_instance_id: Option<[u8; 16]>,
    /// The current subscription's id, once subscribed.
    pub subscription_id: Option<i32>,
    /// The current subscription's push interval.
    pub push_interval: Option<Duration>,
    /// Whether the current subscription asks for deltas (else cumulative values).
    pub delta_temporality: bool,
    /// Pushes the broker accepted (the terminating one included).
    pub pushes_accepted: u64,
    /// Pushes not sent because they came out larger than the subscription's
    /// `telemetry_max_bytes`.
    pub pushes_too_large: u64,
    /// The error code that turned telemetry off, when an answer did.
    pub disabled_by: Option<crate::ErrorCode>,
}

/// The subscription the broker handed out.
#[derive(Debug, Clone)]
pub(crate) struct Subscription {
    pub(crate) id: i32,
    pub(crate) interval: Duration,
    pub(crate) max_bytes: usize,
    pub(crate) delta: bool,
    pub(crate) metrics: RequestedMetrics,
    /// The codec pushes use: the first of [`PREFERRED_CODECS`] the broker accepts, this build
    /// has, and no broker refused; none when there is no such codec.
    pub(crate) codec: Compression,
}

/// The request the state machine wants sent now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    Subscribe,
    Push { terminating: bool },
}

/// The telemetry state machine (one per producer).
#[derive(Debug)]
pub(crate) struct Telemetry {
    state: TelemetryState,
    /// When the next request of `SubscriptionNeeded` or `PushNeeded` is due.
    due_at: Instant,
    instance_id: [u8; 16],
    subscription: Option<Subscription>,
    /// Codecs a broker refused (UNSUPPORTED_COMPRESSION_TYPE), by attribute bit.
    refused_codecs: u8,
    /// Consecutive lost requests (their backoff exponent).
    lost: u32,
    /// A push was in flight when the close asked for the terminating one.
    terminate_after_push: bool,
    pushes_accepted: u64,
    pushes_too_large: u64,
    disabled_by: Option<crate::ErrorCode>,
}

impl Telemetry {
    /// The state machine of a new producer: off unless `enabled` (the setting and the feature),
    /// else asking for a subscription as soon as a broker offers telemetry.
    pub(crate) fn new(enabled: bool, now: Instant) -> Self {
        Telemetry {
            state: if enabled {
                TelemetryState::SubscriptionNeeded
            } else {
                TelemetryState::Off
            },
            due_at: now,
            instance_id: NO_CLIENT_INSTANCE_ID,
            subscription: None,
            refused_codecs: 0,
            lost: 0,
            terminate_after_push: false,
            pushes_accepted: 0,
            pushes_too_large: 0,
            disabled_by: None,
        }
    }

    /// What the producer reports.
    pub(crate) fn status(&self) -> TelemetryStatus {
        let s = self.subscription.as_ref();
        TelemetryStatus {
            state: self.state,
            client_instance_id: (self.instance_id != NO_CLIENT_INSTANCE_ID)
                .then_some(self.instance_id),
            subscription_id: s.map(|s| s.id),
            push_interval: s.map(|s| s.interval),
            delta_temporality: s.is_some_and(|s| s.delta),
            pushes_accepted: self.pushes_accepted,
            pushes_too_large: self.pushes_too_large,
            disabled_by: self.disabled_by,
        }
    }

    /// The client instance id to send: the zero uuid until a broker assigned one.
    pub(crate) fn instance_id(&self) -> [u8; 16] {
        self.instance_id
    }

    /// The subscription in force, once a broker handed one out.
    pub(crate) fn subscription(&self) -> Option<&Subscription> {
        self.subscription.as_ref()
    }

    /// The request due at `now`, if any; when one is due later, the instant to wake up at
    /// (`Err`). `Ok(None)`/`Err` with nothing to wake for: nothing to do.
    pub(crate) fn due(&self, now: Instant) -> Result<Option<Due>, Instant> {
        let due = match self.state {
            TelemetryState::SubscriptionNeeded => Due::Subscribe,
            TelemetryState::PushNeeded => Due::Push { terminating: false },
            TelemetryState::TerminatingPushNeeded => {
                return Ok(Some(Due::Push { terminating: true }))
            }
            _ => return Ok(None),
        };
        if now < self.due_at {
            return Err(self.due_at);
        }
        Ok(Some(due))
    }

    /// The request `due` was sent.
    pub(crate) fn sent(&mut self, due: Due) {
        self.state = match due {
            Due::Subscribe => TelemetryState::SubscriptionInProgress,
            Due::Push { terminating: false } => TelemetryState::PushInProgress,
            Due::Push { terminating: true } => TelemetryState::TerminatingPushInProgress,
        };
    }

    /// A push came out larger than the subscription's `telemetry_max_bytes`: it is not sent,
    /// and the next one is due after the interval (a terminating push is given up).
    pub(crate) fn push_too_large(&mut self, now: Instant, terminating: bool) {
        self.pushes_too_large += 1;
        if terminating {
            self.state = TelemetryState::Terminated;
        } else {
            self.push_after_interval(now);
        }
    }

    /// The answer to GetTelemetrySubscriptions, with what the retry table says of its error
    /// code. `jitter` is a factor drawn in [`FIRST_PUSH_JITTER`]; `compiled` says whether this
    /// build has a codec.
    pub(crate) fn subscribed(
        &mut self,
        now: Instant,
        action: Action,
        resp: GetTelemetrySubscriptionsResponse,
        jitter: f64,
        compiled: impl Fn(Compression) -> bool,
    ) {
        if self.state != TelemetryState::SubscriptionInProgress {
            return;
        }
        self.lost = 0;
        if action != Action::Ok {
            return self.failed(now, action, resp.error_code);
        }
        if resp.client_instance_id != NO_CLIENT_INSTANCE_ID {
            self.instance_id = resp.client_instance_id;
        }
        let interval = u64::try_from(resp.push_interval_ms)
            .ok()
            .filter(|&ms| ms > 0)
            .map_or(DEFAULT_PUSH_INTERVAL, Duration::from_millis);
        let refused = self.refused_codecs;
        let codec = PREFERRED_CODECS
            .into_iter()
            .filter(|c| refused & (1 << c.attribute_bits()) == 0 && compiled(*c))
            .find(|c| resp.accepted_codecs().any(|a| a == *c))
            .unwrap_or(Compression::None);
        let wants_metrics = !resp.requested_metrics.is_empty();
        self.subscription = Some(Subscription {
            id: resp.subscription_id,
            interval,
            max_bytes: usize::try_from(resp.telemetry_max_bytes).unwrap_or(0),
            delta: resp.delta_temporality,
            metrics: resp.requested_metrics,
            codec,
        });
        if wants_metrics {
            // The first push of a subscription is spread over 50-150% of the interval.
            self.state = TelemetryState::PushNeeded;
            self.due_at = now + interval.mul_f64(jitter);
        } else {
            // Nothing asked for: ask again at the interval.
            self.state = TelemetryState::SubscriptionNeeded;
            self.due_at = now + interval;
        }
    }

    /// The answer to PushTelemetry, with what the retry table says of its error code.
    pub(crate) fn pushed(&mut self, now: Instant, action: Action, code: crate::ErrorCode) {
        let terminating = match self.state {
            TelemetryState::PushInProgress => false,
            TelemetryState::TerminatingPushInProgress => true,
            _ => return,
        };
        self.lost = 0;
        if action == Action::Ok {
            self.pushes_accepted += 1;
        }
        if terminating {
            self.state = TelemetryState::Terminated;
            return;
        }
        if self.terminate_after_push {
            self.state = TelemetryState::TerminatingPushNeeded;
            return;
        }
        if action == Action::Ok {
            self.push_after_interval(now);
        } else {
            self.failed(now, action, code);
        }
    }

    /// A request of telemetry's was lost with its connection (or refused as unreadable): a
    /// subscription is asked for again after `backoff`; a terminating push is given up.
    pub(crate) fn lost(&mut self, now: Instant, backoff: impl FnOnce(u32) -> Duration) {
        match self.state {
            TelemetryState::SubscriptionInProgress | TelemetryState::PushInProgress => {
                if self.terminate_after_push {
                    self.state = TelemetryState::Terminated;
                    return;
                }
                self.lost = self.lost.saturating_add(1);
                self.state = TelemetryState::SubscriptionNeeded;
                self.due_at = now + backoff(self.lost - 1);
            }
            TelemetryState::TerminatingPushInProgress => self.state = TelemetryState::Terminated,
            _ => {}
        }
    }

    /// The producer closes and everything else is done: a subscribed producer pushes once
    /// more, marked terminating (at once, or after the push in flight is answered); any other
    /// ends here. Returns whether a terminating push is still to come (so the close waits).
    pub(crate) fn close(&mut self) -> bool {
        match self.state {
            TelemetryState::PushNeeded => {
                self.state = TelemetryState::TerminatingPushNeeded;
                true
            }
            TelemetryState::PushInProgress => {
                self.terminate_after_push = true;
                true
            }
            TelemetryState::TerminatingPushNeeded | TelemetryState::TerminatingPushInProgress => {
                true
            }
            TelemetryState::Off | TelemetryState::Terminated => false,
            TelemetryState::SubscriptionNeeded | TelemetryState::SubscriptionInProgress => {
                self.state = TelemetryState::Terminated;
                false
            }
        }
    }

    /// The close cannot send its terminating push (no broker offering telemetry is ready, or
    /// the close stopped waiting): telemetry ends.
    pub(crate) fn give_up(&mut self) {
        if self.state != TelemetryState::Off {
            self.state = TelemetryState::Terminated;
        }
    }

    /// The next push is due after the interval.
    fn push_after_interval(&mut self, now: Instant) {
        let interval = self
            .subscription
            .as_ref()
            .map_or(DEFAULT_PUSH_INTERVAL, |s| s.interval);
        self.state = TelemetryState::PushNeeded;
        self.due_at = now + interval;
    }

    /// An error answer: what the retry table says.
    fn failed(&mut self, now: Instant, action: Action, code: crate::ErrorCode) {
        let interval = self
            .subscription
            .as_ref()
            .map_or(DEFAULT_PUSH_INTERVAL, |s| s.interval);
        match action {
            Action::Resubscribe => {
                self.state = TelemetryState::SubscriptionNeeded;
                self.due_at = now;
            }
            Action::RefusedCodec => {
                let codec = self
                    .subscription
                    .as_ref()
                    .map_or(Compression::None, |s| s.codec);
                self.state = TelemetryState::SubscriptionNeeded;
                if codec == Compression::None {
                    // Uncompressed pushes refused: nothing else to try before the interval.
                    self.due_at = now + interval;
                } else {
                    // Bits 1-4: each codec is refused once, so this asks again at once at
                    // most four times before the pushes go uncompressed.
                    self.refused_codecs |= 1 << codec.attribute_bits();
                    self.due_at = now;
                }
            }
            Action::Backoff => {
                self.state = TelemetryState::SubscriptionNeeded;
                self.due_at = now + interval;
            }
            _ => {
                self.state = TelemetryState::Off;
                self.disabled_by = Some(code);
            }
        }
    }
}
