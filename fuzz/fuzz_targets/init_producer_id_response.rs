//! InitProducerId response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::init_producer_id::InitProducerIdResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::InitProducerId,
        data,
        InitProducerIdResponse::parse,
        |_version, _body, len| {
            // Fixed-size body: 16 bytes, plus a tag section when flexible.
            assert!(len >= 16);
        },
    );
});
