//! AddPartitionsToTxn response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::add_partitions_to_txn::AddPartitionsToTxnResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::AddPartitionsToTxn,
        data,
        AddPartitionsToTxnResponse::parse,
        |version, resp, len| {
            // Every partition result takes 6 bytes.
            let partitions: usize = resp.topics.iter().map(|t| t.partitions.len()).sum();
            assert!(partitions * 6 <= len);
            let _ = version;
        },
    );
});
