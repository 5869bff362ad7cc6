//! SaslAuthenticate (key 36), versions 0-2: one round of a SASL mechanism's tokens.
//!
//! After a successful SaslHandshake, the client sends the mechanism's tokens one request at a
//! time and the broker answers each with its own. v1 adds `SessionLifetimeMs` (KIP-368): when
//! positive, the session ends after that long unless the client re-authenticates on the same
//! connection. v2 is the first flexible version.

use super::primitives::{bytes, field, int16, int64, nullable_string, skip_tags, PResult, Put};
use super::{ApiKey, DecodeError, Parsed};
use crate::error_code::ErrorCode;

const API: ApiKey = ApiKey::SaslAuthenticate;

/// A SaslAuthenticate request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SaslAuthenticateRequest<'a> {
    /// The mechanism's token for this round (it may carry a password: never logged).
    pub auth_bytes: &'a [u8],
}

impl std::fmt::Debug for SaslAuthenticateRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslAuthenticateRequest")
            .field(
                "auth_bytes",
                &format_args!("<{} bytes>", self.auth_bytes.len()),
            )
            .finish()
    }
}

impl SaslAuthenticateRequest<'_> {
    /// Appends the request body (no header) at `version` to `buf`.
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "SaslAuthenticate v{version} is not supported"
        );
        let flexible = API.is_flexible(version);
        buf.put_bytes(flexible, self.auth_bytes);
        buf.put_empty_tags(flexible);
    }
}

/// A parsed SaslAuthenticate response.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslAuthenticateResponse {
    /// The error code: [`ErrorCode::NONE`], or `SASL_AUTHENTICATION_FAILED`,
    /// `ILLEGAL_SASL_STATE`, ...
    pub error_code: ErrorCode,
    /// The broker's message, if any.
    pub error_message: Option<String>,
    /// The broker's token for this round.
    pub auth_bytes: Vec<u8>,
    /// The session's lifetime in milliseconds (v1+; 0 before, and when the broker sets none):
    /// re-authenticate on the same connection before it ends.
    pub session_lifetime_ms: i64,
}

impl std::fmt::Debug for SaslAuthenticateResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslAuthenticateResponse")
            .field("error_code", &self.error_code)
            .field("error_message", &self.error_message)
            .field(
                "auth_bytes",
                &format_args!("<{} bytes>", self.auth_bytes.len()),
            )
            .field("session_lifetime_ms", &self.session_lifetime_ms)
            .finish()
    }
}

impl SaslAuthenticateResponse {
    /// Parses a response body (after the response header) to a request sent at `version`.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        Parsed::parse_with(API, version, body, |i| {
            parse_body(i, version, API.is_flexible(version))
        })
    }
}

fn parse_body(i: &[u8], version: i16, flexible: bool) -> PResult<'_, SaslAuthenticateResponse> {
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    let (i, error_message) = field("ErrorMessage", nullable_string(flexible))(i)?;
    let (i, auth_bytes) = field("AuthBytes", bytes(flexible))(i)?;
    let (i, session_lifetime_ms) = if version >= 1 {
        field("SessionLifetimeMs", int64)(i)?
    } else {
        (i, 0)
    };
    let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        SaslAuthenticateResponse {
            error_code: ErrorCode(error_code),
            error_message,
            auth_bytes: auth_bytes.to_vec(),
            session_lifetime_ms,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_request_at_each_version() {
        for (version, want) in [
            (0, &b"\x00\x00\x00\x03abc"[..]),
            (1, b"\x00\x00\x00\x03abc"),
            (2, b"\x04abc\x00"),
        ] {
            let mut buf = Vec::new();
            SaslAuthenticateRequest { auth_bytes: b"abc" }.encode(version, &mut buf);
            assert_eq!(buf, want, "v{version}");
        }
    }

    #[test]
    fn golden_responses() {
        let v0 = b"\x00\x3a\x00\x04oops\x00\x00\x00\x00";
        let r = SaslAuthenticateResponse::parse(0, v0).unwrap().body;
        assert_eq!(r.error_code, ErrorCode(58));
        assert_eq!(r.error_message.as_deref(), Some("oops"));
        assert_eq!(r.session_lifetime_ms, 0);
        let v2 = b"\x00\x00\x00\x04v=x\x00\x00\x00\x00\x00\x00\x0b\xb8\x00";
        let r = SaslAuthenticateResponse::parse(2, v2).unwrap();
        assert_eq!(r.trailing, 0);
        assert_eq!(r.body.error_message, None);
        assert_eq!(r.body.auth_bytes, b"v=x");
        assert_eq!(r.body.session_lifetime_ms, 3000);
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let req = SaslAuthenticateRequest {
            auth_bytes: b"\0user\0hunter2",
        };
        assert!(!format!("{req:?}").contains("hunter2"));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let v1 = b"\x00\x00\xff\xff\x00\x00\x00\x02ok\x00\x00\x00\x00\x00\x00\x0b\xb8";
        assert!(SaslAuthenticateResponse::parse(1, v1).is_ok());
        for n in 0..v1.len() {
            assert!(
                SaslAuthenticateResponse::parse(1, &v1[..n]).is_err(),
                "{n} bytes"
            );
        }
    }
}
