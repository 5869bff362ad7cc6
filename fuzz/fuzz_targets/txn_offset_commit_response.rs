//! TxnOffsetCommit response bodies: first byte selects the version, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::txn_offset_commit::TxnOffsetCommitResponse;
use producer_core::protocol::ApiKey;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::fuzz_response(
        ApiKey::TxnOffsetCommit,
        data,
        TxnOffsetCommitResponse::parse,
        |version, resp, len| {
            let partitions: usize = resp.topics.iter().map(|t| t.partitions.len()).sum();
            assert!(partitions * 6 <= len);
            let _ = version;
        },
    );
});
