//! Drives the producer against the simulated cluster with an arbitrary sequence of operations
//! (records, time, faults, garbage bytes on a connection) and checks its contract: no panic,
//! bounded buffers, at most one report per record, every record reported once the faults stop.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::ops::run(data);
});
