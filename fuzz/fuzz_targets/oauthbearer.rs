//! OAUTHBEARER: the initial response for any token and extensions, the broker's messages, and
//! the producer's token handling against the hostile broker; see `producer_fuzz::oauth`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: producer_fuzz::alloc::Counting = producer_fuzz::alloc::Counting;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::oauth::run(data);
});
