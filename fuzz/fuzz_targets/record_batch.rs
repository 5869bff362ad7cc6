//! Record batches: the producer's decode paths on arbitrary bytes, and its encoder against
//! `kafka-protocol`'s decoder; see `producer_fuzz::records`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: producer_fuzz::alloc::Counting = producer_fuzz::alloc::Counting;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::records::run(data);
});
