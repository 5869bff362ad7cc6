//! AddOffsetsToTxn response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::add_offsets_to_txn::AddOffsetsToTxnResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::AddOffsetsToTxn,
        data,
        AddOffsetsToTxnResponse::parse,
        |version, resp, len| {
            assert!(len >= 6);
            let _ = (version, resp);
        },
    );
});
