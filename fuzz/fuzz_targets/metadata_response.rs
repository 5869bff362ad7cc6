//! Metadata response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::metadata::MetadataResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::Metadata,
        data,
        MetadataResponse::parse,
        |version, body, _len| {
            if version < 7 {
                assert!(body
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .all(|p| p.leader_epoch == -1));
            }
            if version < 10 {
                assert!(body.topics.iter().all(|t| t.topic_id == [0; 16]));
            }
        },
    );
});
