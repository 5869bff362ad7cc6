//! The configuration parsers (`.properties` text, `ConfigBuilder::set`) and a producer from
//! whatever they accept; see `producer_fuzz::config`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: producer_fuzz::alloc::Counting = producer_fuzz::alloc::Counting;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::config::run(data);
});
