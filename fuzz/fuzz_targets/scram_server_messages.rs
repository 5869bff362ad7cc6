//! Full SCRAM exchanges (client-first, server-first, client-final, server-final) between the
//! producer's client and an independent server, with the server's messages right or wrong in
//! chosen ways; see `producer_fuzz::scram`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    producer_fuzz::scram::run(data);
});
