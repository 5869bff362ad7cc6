//! The real producer, from bootstrap on, against a scripted broker whose answers are
//! structurally valid at the request's version but carry arbitrary values, with connection
//! events and virtual time interleaved: see `producer_fuzz::hostile` for the input and the
//! checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: producer_fuzz::alloc::Counting = producer_fuzz::alloc::Counting;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::hostile::run(data);
});
