//! SaslAuthenticate response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::sasl_authenticate::SaslAuthenticateResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::SaslAuthenticate,
        data,
        SaslAuthenticateResponse::parse,
        |_version, resp, len| {
            // The token is a slice of the input, never larger.
            assert!(resp.auth_bytes.len() <= len);
        },
    );
});
