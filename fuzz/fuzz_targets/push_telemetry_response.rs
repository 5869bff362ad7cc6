//! PushTelemetry response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::push_telemetry::PushTelemetryResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::PushTelemetry,
        data,
        PushTelemetryResponse::parse,
        |_version, _resp, len| {
            // Fixed-size body: 6 bytes and the tag section.
            assert!(len >= 7);
        },
    );
});
