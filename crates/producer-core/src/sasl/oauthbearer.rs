//! OAUTHBEARER (RFC 7628), client side: the initial response carries the bearer token; a
//! broker that refuses it answers with an error challenge (JSON), which the client acknowledges
//! with a single `\x01` before the broker fails the exchange.

use std::time::Duration;

use super::{AuthError, Secret, SecretBytes, Step};

/// A bearer token from the application's token provider. Its value is a [`Secret`]: never
/// shown by `Debug`, wiped when dropped (the extensions are identifiers, not secrets: `Debug`
/// shows them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthToken {
    /// The token (a JWT for most providers): an RFC 6750 `b64token` (letters, digits,
    /// `-._~+/`, then `=` padding). A token with anything else is refused when handed over,
    /// as are extension keys that are not letters only (or are `auth`) and extension values
    /// with control characters other than tab, CR and LF: they would change the initial
    /// response's `key=value` pairs.
    pub value: Secret,
    /// How long the token stays valid from when it was handed over. Connections
    /// (re-)authenticating after 80% of it has passed ask for a new one (as Java's
    /// `sasl.login.refresh.window.factor` of 0.8), so a session never starts on a token about
    /// to expire. A lifetime beyond [`crate::Config::MAX_DURATION`] counts as that.
    pub lifetime: Duration,
    /// SASL extensions sent with the token (`key=value`; Confluent Cloud uses
    /// `logicalCluster` and `identityPoolId`).
    pub extensions: Vec<(String, String)>,
}

impl OAuthToken {
    /// A token valid for `lifetime`, without extensions.
    pub fn new(value: impl Into<String>, lifetime: Duration) -> Self {
        OAuthToken {
            value: Secret::new(value),
            lifetime,
            extensions: Vec::new(),
        }
    }
}

/// The separator of RFC 7628's key/value pairs.
const KVSEP: u8 = 0x01;

/// Whether `token` can be sent as it is: its value an RFC 6750 `b64token` (`1*(ALPHA / DIGIT
/// / "-" / "." / "_" / "~" / "+" / "/") *"="`, what a JWT is made of), each extension key
/// RFC 7628's `1*ALPHA` other than the reserved `auth`, each value `*(VCHAR / SP / HTAB / CR /
/// LF)`. Anything else (a `\x01` above all) would change the initial response's pairs: an
/// application's token could then inject pairs of its own. The reason names no value (the
/// token is a secret).
pub(crate) fn check(token: &OAuthToken) -> Result<(), String> {
    let value = token.value.expose().as_bytes();
    let body = value
        .iter()
        .rposition(|&b| b != b'=')
        .map_or(&[][..], |last| &value[..=last]);
    if body.is_empty()
        || !body
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(b))
    {
        return Err(
            "the token is not an RFC 6750 b64token (letters, digits, -._~+/ and trailing =)".into(),
        );
    }
    for (k, v) in &token.extensions {
        if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphabetic()) || k == "auth" {
            return Err(format!(
                "the extension key {k:?} is not RFC 7628's 1*ALPHA, or is the reserved auth"
            ));
        }
        if !v
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        {
            return Err(format!(
                "the value of the extension {k:?} holds characters RFC 7628 does not allow"
            ));
        }
    }
    Ok(())
}

/// One OAUTHBEARER exchange.
#[derive(Debug)]
pub(crate) struct OAuthClient {
    /// The broker sent an error challenge and the client acknowledged it.
    acknowledged_error: bool,
}

impl OAuthClient {
    /// The client's initial response: `n,,` then `auth=Bearer <token>`, the extensions, and
    /// the closing separators (it holds the token: wiped when dropped). A token that fails
    /// [`check`] is refused ([`AuthError::TokenUnavailable`]), not sent.
    pub(super) fn start(token: &OAuthToken) -> Result<(OAuthClient, SecretBytes), AuthError> {
        check(token).map_err(AuthError::TokenUnavailable)?;
        const AUTH: &[u8] = b"auth=Bearer ";
        let value = token.value.expose().as_bytes();
        let extensions: usize = token
            .extensions
            .iter()
            .map(|(k, v)| k.len() + 1 + v.len() + 1)
            .sum();
        let mut m =
            SecretBytes::with_capacity(3 + 1 + AUTH.len() + value.len() + 1 + extensions + 1);
        m.extend(b"n,,");
        m.push(KVSEP);
        m.extend(AUTH);
        m.extend(value);
        m.push(KVSEP);
        for (k, v) in &token.extensions {
            m.extend(k.as_bytes());
            m.push(b'=');
            m.extend(v.as_bytes());
            m.push(KVSEP);
        }
        m.push(KVSEP);
        Ok((
            OAuthClient {
                acknowledged_error: false,
            },
            m,
        ))
    }

    /// The broker's answer: empty means accepted; otherwise it is an error challenge, which is
    /// acknowledged once (the broker then fails the exchange with an error code).
    pub(super) fn step(&mut self, server: &[u8]) -> Result<Step, AuthError> {
        if server.is_empty() {
            return Ok(Step::Done);
        }
        if self.acknowledged_error {
            return Err(AuthError::Rejected {
                code: crate::ErrorCode::SASL_AUTHENTICATION_FAILED,
                message: Some(String::from_utf8_lossy(server).into_owned()),
            });
        }
        self.acknowledged_error = true;
        let mut ack = SecretBytes::with_capacity(1);
        ack.push(KVSEP);
        Ok(Step::Send(ack))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_response_as_rfc_7628_section_3_1() {
        let mut token = OAuthToken::new("eyJ.x.y", Duration::from_secs(60));
        token
            .extensions
            .push(("logicalCluster".into(), "lkc-1".into()));
        let (_, first) = OAuthClient::start(&token).unwrap();
        assert_eq!(
            first.as_slice(),
            b"n,,\x01auth=Bearer eyJ.x.y\x01logicalCluster=lkc-1\x01\x01"
        );
    }

    #[test]
    fn an_error_challenge_is_acknowledged_once() {
        let (mut c, _) = OAuthClient::start(&OAuthToken::new("t", Duration::from_secs(1))).unwrap();
        match c.step(br#"{"status":"invalid_token"}"#).unwrap() {
            Step::Send(ack) => assert_eq!(ack.as_slice(), [1]),
            Step::Done => panic!("the error challenge was taken for success"),
        }
        assert!(c.step(b"again").is_err());
        let (mut ok, _) =
            OAuthClient::start(&OAuthToken::new("t", Duration::from_secs(1))).unwrap();
        assert_eq!(ok.step(b"").unwrap(), Step::Done);
    }

    /// A token or extension that would change the initial response's pairs is refused, with
    /// a reason that does not show the token (found by the `oauthbearer` fuzz target:
    /// `fuzz/regressions/oauthbearer/token-with-separator`).
    #[test]
    fn a_token_or_extension_that_would_add_pairs_is_refused() {
        let refused = |token: OAuthToken| match OAuthClient::start(&token) {
            Err(AuthError::TokenUnavailable(reason)) => {
                assert!(!reason.contains("secret"), "{reason}");
            }
            other => panic!("{token:?} was not refused: {other:?}"),
        };
        let secs = Duration::from_secs(60);
        refused(OAuthToken::new("\x01", secs));
        refused(OAuthToken::new("secret\x01auth=Bearer x", secs));
        refused(OAuthToken::new("secret token", secs));
        refused(OAuthToken::new("", secs));
        refused(OAuthToken::new("==", secs));
        for (k, v) in [
            ("auth", "Bearer x"),
            ("", "v"),
            ("a=b", "v"),
            ("k1", "v"),
            ("key", "v\x01auth=Bearer x"),
        ] {
            let mut t = OAuthToken::new("secret", secs);
            t.extensions.push((k.into(), v.into()));
            refused(t);
        }
        let mut fine = OAuthToken::new("eyJ-a_b.c~d+e/f==", secs);
        fine.extensions
            .push(("logicalCluster".into(), "lkc-1 \t\r\n".into()));
        assert!(OAuthClient::start(&fine).is_ok());
    }

    #[test]
    fn the_token_stays_out_of_debug() {
        let token = OAuthToken::new("super-secret-jwt", Duration::from_secs(1));
        assert!(!format!("{token:?}").contains("super-secret"));
    }
}
