//! SaslHandshake (key 17), version 1: choosing the SASL mechanism of a connection.
//!
//! Sent after ApiVersions on a connection to a SASL listener (and again to re-authenticate,
//! KIP-368). The answer lists the mechanisms the broker enables; on success the mechanism's
//! tokens follow in SaslAuthenticate requests (v1 framing, KIP-152). Version 0, which sent the
//! tokens unframed, is not spoken.

use super::primitives::{array, field, int16, min_string_size, string, PResult, Put};
use super::{ApiKey, DecodeError, Parsed};
use crate::error_code::ErrorCode;

const API: ApiKey = ApiKey::SaslHandshake;

/// A SaslHandshake request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaslHandshakeRequest<'a> {
    /// The mechanism the client chose, as Kafka names it (`PLAIN`, `SCRAM-SHA-256`, ...).
    pub mechanism: &'a str,
}

impl SaslHandshakeRequest<'_> {
    /// Appends the request body (no header) at `version` (1) to `buf`.
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "SaslHandshake v{version} is not supported"
        );
        buf.put_string(false, self.mechanism);
    }
}

/// A parsed SaslHandshake response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslHandshakeResponse {
    /// The error code: [`ErrorCode::NONE`], or `UNSUPPORTED_SASL_MECHANISM` when the broker
    /// does not enable the chosen mechanism, `ILLEGAL_SASL_STATE` out of sequence.
    pub error_code: ErrorCode,
    /// The mechanisms the broker enables.
    pub mechanisms: Vec<String>,
}

impl SaslHandshakeResponse {
    /// Parses a response body (after the response header) to a request sent at `version`.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        Parsed::parse_with(API, version, body, parse_body)
    }
}

fn parse_body(i: &[u8]) -> PResult<'_, SaslHandshakeResponse> {
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    let (i, mechanisms) = field(
        "Mechanisms",
        array(false, min_string_size(false), string(false)),
    )(i)?;
    Ok((
        i,
        SaslHandshakeResponse {
            error_code: ErrorCode(error_code),
            mechanisms,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_request_and_response() {
        let mut buf = Vec::new();
        SaslHandshakeRequest { mechanism: "PLAIN" }.encode(1, &mut buf);
        assert_eq!(buf, b"\x00\x05PLAIN");
        let body = b"\x00\x00\x00\x00\x00\x02\x00\x05PLAIN\x00\x0dSCRAM-SHA-512";
        let parsed = SaslHandshakeResponse::parse(1, body).unwrap();
        assert_eq!(parsed.trailing, 0);
        assert_eq!(parsed.body.error_code, ErrorCode::NONE);
        assert_eq!(parsed.body.mechanisms, ["PLAIN", "SCRAM-SHA-512"]);
    }

    #[test]
    fn truncated_and_version_zero_are_errors() {
        let body = b"\x00\x21\x00\x00\x00\x01\x00\x05PLA";
        assert!(SaslHandshakeResponse::parse(1, body).is_err());
        assert!(matches!(
            SaslHandshakeResponse::parse(0, b"\x00\x00\x00\x00\x00\x00"),
            Err(DecodeError::UnsupportedVersion { .. })
        ));
    }
}
