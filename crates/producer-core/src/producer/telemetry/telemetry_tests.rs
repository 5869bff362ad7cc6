//! The telemetry state machine's rules one by one (the whole flow against a broker is in
//! `producer-sim`'s `telemetry` tests and the Kafka tier's `kafka_telemetry`).

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::state::{Due, Telemetry, DEFAULT_PUSH_INTERVAL};
    use super::super::TelemetryState;
    use crate::classify::{decide, Action, Mode, Request};
    use crate::protocol::get_telemetry_subscriptions::{
        GetTelemetrySubscriptionsResponse, RequestedMetrics, TelemetryCompression,
    };
    use crate::record::Compression;
    use crate::{Config, ErrorCode, Producer};

    const ID: [u8; 16] = [7; 16];

    fn answer(
        metrics: &[&str],
        interval_ms: i32,
        codecs: &[Compression],
    ) -> GetTelemetrySubscriptionsResponse {
        GetTelemetrySubscriptionsResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::NONE,
            client_instance_id: ID,
            subscription_id: 5,
            accepted_compression_types: codecs
                .iter()
                .map(|&c| TelemetryCompression::Known(c))
                .collect(),
            push_interval_ms: interval_ms,
            telemetry_max_bytes: 1 << 20,
            delta_temporality: true,
            requested_metrics: RequestedMetrics::from_names(metrics.iter().copied()),
        }
    }

    fn action(code: ErrorCode) -> Action {
        decide(Request::Telemetry, code, Mode::Idempotent)
    }

    /// Subscribed at `t0` to the producer prefix every second, with the first push due at once.
    fn subscribed(t0: Instant, codecs: &[Compression]) -> Telemetry {
        let mut t = Telemetry::new(true, t0);
        assert_eq!(t.due(t0), Ok(Some(Due::Subscribe)));
        t.sent(Due::Subscribe);
        let all = |_| true;
        t.subscribed(
            t0,
            Action::Ok,
            answer(&["org.apache.kafka.producer."], 1000, codecs),
            1.0,
            all,
        );
        t
    }

    #[test]
    fn the_first_push_is_jittered_and_the_next_ones_wait_the_interval() {
        let t0 = Instant::now();
        let mut t = Telemetry::new(true, t0);
        t.sent(Due::Subscribe);
        t.subscribed(t0, Action::Ok, answer(&["a"], 1000, &[]), 0.5, |_| true);
        assert_eq!(t.due(t0), Err(t0 + Duration::from_millis(500)));
        let at = t0 + Duration::from_millis(500);
        assert_eq!(t.due(at), Ok(Some(Due::Push { terminating: false })));
        t.sent(Due::Push { terminating: false });
        t.pushed(at, Action::Ok, ErrorCode::NONE);
        assert_eq!(t.due(at), Err(at + Duration::from_secs(1)));
        let s = t.status();
        assert_eq!(
            (s.client_instance_id, s.subscription_id, s.pushes_accepted),
            (Some(ID), Some(5), 1)
        );
    }

    #[test]
    fn no_metrics_asks_again_at_the_interval_and_a_bad_interval_is_the_default() {
        let t0 = Instant::now();
        let mut t = Telemetry::new(true, t0);
        t.sent(Due::Subscribe);
        t.subscribed(t0, Action::Ok, answer(&[], 0, &[]), 1.0, |_| true);
        assert_eq!(t.status().state, TelemetryState::SubscriptionNeeded);
        assert_eq!(t.due(t0), Err(t0 + DEFAULT_PUSH_INTERVAL));
    }

    #[test]
    fn the_codec_is_the_first_preferred_one_accepted_and_compiled_and_a_refused_one_is_dropped() {
        let t0 = Instant::now();
        let accepted = [Compression::Gzip, Compression::Lz4, Compression::Zstd];
        let mut t = subscribed(t0, &accepted);
        assert_eq!(t.subscription().unwrap().codec, Compression::Zstd);
        t.sent(Due::Push { terminating: false });
        let code = ErrorCode::UNSUPPORTED_COMPRESSION_TYPE;
        t.pushed(t0, action(code), code);
        // Asked again at once; zstd is not chosen again.
        assert_eq!(t.due(t0), Ok(Some(Due::Subscribe)));
        t.sent(Due::Subscribe);
        t.subscribed(t0, Action::Ok, answer(&["x"], 1000, &accepted), 1.0, |_| {
            true
        });
        assert_eq!(t.subscription().unwrap().codec, Compression::Lz4);
        // A codec this build lacks is skipped.
        t.sent(Due::Push { terminating: false });
        t.pushed(
            t0,
            action(ErrorCode::UNKNOWN_SUBSCRIPTION_ID),
            ErrorCode::UNKNOWN_SUBSCRIPTION_ID,
        );
        t.sent(Due::Subscribe);
        t.subscribed(t0, Action::Ok, answer(&["x"], 1000, &accepted), 1.0, |c| {
            c != Compression::Lz4
        });
        assert_eq!(t.subscription().unwrap().codec, Compression::Gzip);
        // Nothing accepted: uncompressed, and a refusal of that waits the interval.
        t.sent(Due::Push { terminating: false });
        t.pushed(
            t0,
            action(ErrorCode::UNKNOWN_SUBSCRIPTION_ID),
            ErrorCode::UNKNOWN_SUBSCRIPTION_ID,
        );
        t.sent(Due::Subscribe);
        t.subscribed(t0, Action::Ok, answer(&["x"], 1000, &[]), 1.0, |_| true);
        assert_eq!(t.subscription().unwrap().codec, Compression::None);
        t.sent(Due::Push { terminating: false });
        t.pushed(t0, action(code), code);
        assert_eq!(t.due(t0), Err(t0 + Duration::from_secs(1)));
    }

    #[test]
    fn errors_follow_the_retry_table() {
        let t0 = Instant::now();
        // Too large or throttled: ask again after the interval.
        for code in [
            ErrorCode::TELEMETRY_TOO_LARGE,
            ErrorCode::THROTTLING_QUOTA_EXCEEDED,
        ] {
            let mut t = subscribed(t0, &[]);
            t.sent(Due::Push { terminating: false });
            t.pushed(t0, action(code), code);
            assert_eq!(t.due(t0), Err(t0 + Duration::from_secs(1)), "{code}");
            assert_eq!(t.status().state, TelemetryState::SubscriptionNeeded);
        }
        // What retrying cannot fix turns telemetry off.
        for code in [
            ErrorCode::INVALID_REQUEST,
            ErrorCode::INVALID_RECORD,
            ErrorCode(9999),
        ] {
            let mut t = subscribed(t0, &[]);
            t.sent(Due::Push { terminating: false });
            t.pushed(t0, action(code), code);
            assert_eq!(t.status().state, TelemetryState::Off);
            assert_eq!(t.status().disabled_by, Some(code));
            assert_eq!(t.due(t0 + Duration::from_secs(3600)), Ok(None));
        }
    }

    #[test]
    fn a_lost_request_backs_off_and_the_instance_id_is_kept() {
        let t0 = Instant::now();
        let mut t = subscribed(t0, &[]);
        t.sent(Due::Push { terminating: false });
        t.lost(t0, |n| Duration::from_millis(100 << n));
        assert_eq!(t.due(t0), Err(t0 + Duration::from_millis(100)));
        assert_eq!(t.instance_id(), ID);
        let at = t0 + Duration::from_millis(100);
        t.sent(Due::Subscribe);
        t.lost(at, |n| Duration::from_millis(100 << n));
        assert_eq!(t.due(at), Err(at + Duration::from_millis(200)));
    }

    #[test]
    fn the_close_pushes_once_more_only_when_subscribed() {
        let t0 = Instant::now();
        // Subscribed: one terminating push, due at once, then terminated.
        let mut t = subscribed(t0, &[]);
        assert!(t.close());
        assert_eq!(t.due(t0), Ok(Some(Due::Push { terminating: true })));
        t.sent(Due::Push { terminating: true });
        assert!(t.close(), "waits for the answer");
        t.pushed(t0, Action::Ok, ErrorCode::NONE);
        assert!(!t.close());
        assert_eq!(t.status().state, TelemetryState::Terminated);
        // A push in flight: the terminating one follows its answer.
        let mut t = subscribed(t0, &[]);
        t.sent(Due::Push { terminating: false });
        assert!(t.close());
        t.pushed(t0, Action::Ok, ErrorCode::NONE);
        assert_eq!(t.due(t0), Ok(Some(Due::Push { terminating: true })));
        // A lost terminating push is given up.
        t.sent(Due::Push { terminating: true });
        t.lost(t0, |_| Duration::ZERO);
        assert!(!t.close());
        // Not subscribed: nothing more.
        let mut t = Telemetry::new(true, t0);
        assert!(!t.close());
        assert_eq!(t.status().state, TelemetryState::Terminated);
        // Off stays off.
        let mut t = Telemetry::new(false, t0);
        assert!(!t.close());
        assert_eq!(t.status().state, TelemetryState::Off);
    }

    #[test]
    fn telemetry_is_on_by_default_only_with_the_feature() {
        let config = Config::builder([("h", 9092)]).build().unwrap();
        assert!(config.enable_metrics_push);
        let p: Producer<()> = Producer::new(config, Instant::now());
        let want = if cfg!(feature = "telemetry") {
            TelemetryState::SubscriptionNeeded
        } else {
            TelemetryState::Off
        };
        assert_eq!(p.telemetry().state, want);
        let off = Config::builder([("h", 9092)])
            .enable_metrics_push(false)
            .build()
            .unwrap();
        let p: Producer<()> = Producer::new(off, Instant::now());
        assert_eq!(p.telemetry().state, TelemetryState::Off);
    }

    /// Every poll finds the next push not yet due; the timer is armed once for it, not once per
    /// poll (the heap would otherwise grow with every input until the push).
    #[test]
    fn the_timer_is_armed_once_per_due_instant() {
        let t0 = Instant::now();
        let config = Config::builder([("h", 9092)]).build().unwrap();
        let mut p: Producer<()> = Producer::new(config, t0);
        p.telemetry.machine = subscribed(t0, &[]);
        let before = p.timers.len();
        for _ in 0..1000 {
            p.drive_telemetry();
        }
        assert_eq!(p.timers.len(), before + 1);
        assert_eq!(p.poll_timeout(), Some(t0 + Duration::from_secs(1)));
    }
}
