//! Produce response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::produce::ProduceResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::Produce,
        data,
        ProduceResponse::parse,
        |version, body, _len| {
            if version < 10 {
                assert!(
                    body.node_endpoints.is_empty(),
                    "leader hints exist from v10 only"
                );
                assert!(body
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .all(|p| p.current_leader.is_none()));
            }
            // Topics by id from v13, by name before.
            for t in &body.topics {
                if version >= 13 {
                    assert!(t.name.is_empty(), "v13 names no topic");
                } else {
                    assert_eq!(t.topic_id, [0; 16], "no topic id before v13");
                }
            }
            if version < 8 {
                assert!(body
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .all(|p| p.record_errors.is_empty()));
            }
        },
    );
});
