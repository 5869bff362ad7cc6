//! ApiVersions response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::api_versions::ApiVersionsResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::ApiVersions,
        data,
        ApiVersionsResponse::parse,
        |version, body, len| {
            // Each entry takes at least 6 bytes; nothing is invented.
            assert!(body.api_keys.len() * 6 <= len);
            if version < 3 {
                assert_eq!(body.finalized_features_epoch, -1);
            }
            // Negotiation stays inside both ranges.
            for api in ApiKey::ALL {
                if let Some(v) = body.negotiate(api) {
                    let (ours_lo, ours_hi) = api.supported_versions();
                    let (theirs_lo, theirs_hi) =
                        body.version_range(api).expect("negotiated without a range");
                    assert!(ours_lo <= v && v <= ours_hi && theirs_lo <= v && v <= theirs_hi);
                }
            }
        },
    );
});
