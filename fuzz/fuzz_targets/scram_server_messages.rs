//! The broker's SCRAM messages (server-first, server-final), as SaslAuthenticate carries them:
//! the first byte picks the hash (odd: SHA-512) and where the input splits into the two
//! messages; whatever the bytes, the exchange ends in a typed error or a verified success.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let split = (selector as usize >> 1).min(rest.len());
    let (first, fin) = rest.split_at(split);
    // A verified success needs the password's signature: random bytes never produce it, but
    // the corpus' valid exchanges reach the signature check.
    let _ = producer_core::sasl::fuzz_scram_exchange(selector & 1 == 1, first, fin);
});
