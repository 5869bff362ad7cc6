//! EndTxn response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::end_txn::EndTxnResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::EndTxn,
        data,
        EndTxnResponse::parse,
        |version, resp, len| {
            if version < 5 {
                assert_eq!((resp.producer_id, resp.producer_epoch), (-1, -1));
            }
            assert!(len >= 6);
        },
    );
});
