//! GetTelemetrySubscriptions response bodies: first byte selects the version, the rest is the
//! body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::get_telemetry_subscriptions::{
    GetTelemetrySubscriptionsResponse, TelemetryCompression,
};
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::GetTelemetrySubscriptions,
        data,
        GetTelemetrySubscriptionsResponse::parse,
        |_version, resp, len| {
            // The fixed fields (35 bytes), the two arrays' and the tags' prefixes; each
            // compression type takes a byte, each name at least one.
            let metrics = &resp.requested_metrics;
            assert!(len >= 38 + resp.accepted_compression_types.len() + metrics.len());
            // Every id reads back as itself, and known ids as their codec.
            for t in &resp.accepted_compression_types {
                assert_eq!(TelemetryCompression::from_id(t.id()), *t);
            }
            assert!(resp.accepted_codecs().count() <= resp.accepted_compression_types.len());
            // The names read back whole, in order, within the bytes that carried them.
            let names: Vec<&str> = metrics.iter().collect();
            assert_eq!(names.len(), metrics.len());
            assert!(names.iter().map(|n| n.len() + 1).sum::<usize>() <= len);
            for (i, name) in names.iter().enumerate() {
                assert_eq!(metrics.get(i), Some(*name));
                assert!(metrics.matches(name));
            }
            assert_eq!(metrics.get(names.len()), None);
            if names.iter().any(|n| n.is_empty()) {
                assert!(metrics.all());
            }
        },
    );
});
