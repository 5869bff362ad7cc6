//! [`BrokerMetrics`]: one broker's part of a snapshot (Java's `producer-node-metrics`), and
//! [`ConnectionState`], where its connection stands.

use super::broker_window::BrokerWindow;
use super::histogram::{latency_histogram, Histogram};

/// Where a broker's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// No connection, and none wanted or allowed yet.
    Disconnected,
    /// No connection; the reconnect backoff is running.
    BackingOff,
    /// Connecting (the driver was told to connect).
    Connecting,
    /// Connected, negotiating API versions.
    Negotiating,
    /// Authenticating with SASL.
    Authenticating,
    /// Ready for requests.
    Ready,
    /// Ready, authenticating again before the session ends.
    Reauthenticating,
}

impl ConnectionState {
    /// Every state, in the order the Prometheus text lists them.
    pub const ALL: [ConnectionState; 7] = [
        ConnectionState::Disconnected,
        ConnectionState::BackingOff,
        ConnectionState::Connecting,
        ConnectionState::Negotiating,
        ConnectionState::Authenticating,
        ConnectionState::Ready,
        ConnectionState::Reauthenticating,
    ];

    /// The `state` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Disconnected => "disconnected",
            ConnectionState::BackingOff => "backing_off",
            ConnectionState::Connecting => "connecting",
            ConnectionState::Negotiating => "negotiating",
            ConnectionState::Authenticating => "authenticating",
            ConnectionState::Ready => "ready",
            ConnectionState::Reauthenticating => "reauthenticating",
        }
    }
}

/// One broker's part of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerMetrics {
    /// Node id, or -1 for a bootstrap address.
    pub node_id: i32,
    /// Host name.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Its connection's state.
    pub state: ConnectionState,
    /// Requests awaiting an answer on its connection (all kinds).
    pub in_flight_requests: usize,
    /// Of those, Produce requests.
    pub in_flight_produce: usize,
    /// Produce requests sent to it.
    pub requests_sent: u64,
    /// Record batch bytes those carried.
    pub bytes_sent: u64,
    /// Its Produce round trips, in microseconds (`request-latency-avg` of Java's
    /// `producer-node-metrics` is its sum over its count).
    pub request_latency: Histogram,
    /// The longest of them, in microseconds (over the broker's life).
    pub request_latency_max_us: u64,
    /// `throttle_time_ms` of its Produce responses, added up.
    pub throttle_time_ms: u64,
    /// The longest of them.
    pub throttle_time_max_ms: u64,
    /// Produce responses it throttled (`throttle_time_ms` above 0).
    pub throttled_responses: u64,
    /// Whether partitions it leads hold records not yet reported (sent or waiting).
    pub records_waiting: bool,
    /// What it did over the sample window, for [`crate::diagnosis`].
    pub window: BrokerWindow,
}

impl BrokerMetrics {
    /// A broker with no traffic counted yet.
    pub(crate) fn new(node_id: i32, host: String, port: u16, state: ConnectionState) -> Self {
        BrokerMetrics {
            node_id,
            host,
            port,
            state,
            in_flight_requests: 0,
            in_flight_produce: 0,
            requests_sent: 0,
            bytes_sent: 0,
            request_latency: latency_histogram(),
            request_latency_max_us: 0,
            throttle_time_ms: 0,
            throttle_time_max_ms: 0,
            throttled_responses: 0,
            records_waiting: false,
            window: BrokerWindow::default(),
        }
    }
}
