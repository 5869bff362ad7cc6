//! `TelemetryRequest`, what a telemetry request's answer needs, kept on its connection (a
//! leaf: the connection names it without telemetry's logic).

/// Which telemetry request is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TelemetryRequest {
    /// GetTelemetrySubscriptions.
    Subscriptions,
    /// PushTelemetry; `terminating` for the close's last push.
    Push { terminating: bool },
}
