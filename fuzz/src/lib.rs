//! The fuzz targets' code: the shared driver of the response targets (here), the producer
//! against a hostile broker ([`hostile`]), operation sequences against the simulated cluster
//! ([`ops`]), record batches ([`records`]), SASL SCRAM and OAUTHBEARER exchanges ([`scram`],
//! [`oauth`]), the configuration parsers ([`config`]), and the counting allocator the
//! targets that check memory install ([`alloc`]).
//!
//! Every `<api>_response` target reads its input as one selector byte followed by a response
//! body, and calls [`fuzz_response`]. To add a target for another API, copy
//! `fuzz_targets/init_producer_id_response.rs`, change the API and the parse function, and add
//! API-specific invariants in the closure.

pub mod alloc;
pub mod config;
pub mod hostile;
pub mod oauth;
pub mod ops;
pub mod records;
pub mod scram;

use producer_core::protocol::{parse_response_header, ApiKey, DecodeError, Parsed};

/// Picks a supported version of `api` from the selector byte (`data[0]`, modulo the number of
/// supported versions) and returns it with the rest of the input.
pub fn version_and_body(api: ApiKey, data: &[u8]) -> Option<(i16, &[u8])> {
    let (&selector, body) = data.split_first()?;
    let (lo, hi) = api.supported_versions();
    let count = (hi - lo + 1) as u16;
    Some((lo + (u16::from(selector) % count) as i16, body))
}

/// Runs `parse` on the body at the selected version, and also on the input read as a whole
/// response frame (response header, then body). `check` receives every successfully parsed
/// body, with the length of the input it came from, to assert API-specific invariants.
///
/// The generic invariants: parsing never panics, `trailing` never exceeds the input, an
/// unsupported version is refused with `UnsupportedVersion`, and parsing is deterministic.
pub fn fuzz_response<T: PartialEq + std::fmt::Debug>(
    api: ApiKey,
    data: &[u8],
    parse: fn(i16, &[u8]) -> Result<Parsed<T>, DecodeError>,
    check: impl Fn(i16, &T, usize),
) {
    let Some((version, body)) = version_and_body(api, data) else {
        return;
    };

    let first = parse(version, body);
    if let Ok(p) = &first {
        assert!(
            p.trailing <= body.len(),
            "trailing {} > input {}",
            p.trailing,
            body.len()
        );
        check(version, &p.body, body.len());
    }
    assert_eq!(first, parse(version, body), "parse is not deterministic");

    if let Ok((_correlation_id, rest)) = parse_response_header(api, version, body) {
        assert!(rest.len() <= body.len());
        if let Ok(p) = parse(version, rest) {
            assert!(p.trailing <= rest.len());
            check(version, &p.body, rest.len());
        }
    }

    let (_, hi) = api.supported_versions();
    match parse(hi + 1, body) {
        Err(DecodeError::UnsupportedVersion { api: a, version: v }) => {
            assert_eq!((a, v), (api, hi + 1))
        }
        other => panic!("version {} accepted: {other:?}", hi + 1),
    }
}
