//! SaslHandshake response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::sasl_handshake::SaslHandshakeResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::SaslHandshake,
        data,
        SaslHandshakeResponse::parse,
        |_version, resp, len| {
            // Each mechanism name costs at least its 2-byte length prefix.
            assert!(6 + 2 * resp.mechanisms.len() <= len);
        },
    );
});
