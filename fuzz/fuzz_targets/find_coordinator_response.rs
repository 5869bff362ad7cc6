//! FindCoordinator response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::find_coordinator::FindCoordinatorResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::FindCoordinator,
        data,
        FindCoordinatorResponse::parse,
        |version, resp, len| {
            // Each coordinator entry takes at least 12 bytes (node id, port, error code, lengths).
            assert!(resp.coordinators.len() * 12 <= len + 12);
            if version < 4 {
                assert_eq!(resp.coordinators.len(), 1);
                assert!(resp.coordinators[0].key.is_none());
            }
        },
    );
});
