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
    /// The token (a JWT for most providers).
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

/// One OAUTHBEARER exchange.
#[derive(Debug)]
pub(crate) struct OAuthClient {
    /// The broker sent an error challenge and the client acknowledged it.
    acknowledged_error: bool,
}

impl OAuthClient {
    /// The client's initial response: `n,,` then `auth=Bearer <token>`, the extensions, and
    /// the closing separators (it holds the token: wiped when dropped).
    pub(super) fn start(token: &OAuthToken) -> (OAuthClient, SecretBytes) {
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
        (
            OAuthClient {
                acknowledged_error: false,
            },
            m,
        )
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
        let (_, first) = OAuthClient::start(&token);
        assert_eq!(
            first.as_slice(),
            b"n,,\x01auth=Bearer eyJ.x.y\x01logicalCluster=lkc-1\x01\x01"
        );
    }

    #[test]
    fn an_error_challenge_is_acknowledged_once() {
        let (mut c, _) = OAuthClient::start(&OAuthToken::new("t", Duration::from_secs(1)));
        match c.step(br#"{"status":"invalid_token"}"#).unwrap() {
            Step::Send(ack) => assert_eq!(ack.as_slice(), [1]),
            Step::Done => panic!("the error challenge was taken for success"),
        }
        assert!(c.step(b"again").is_err());
        let (mut ok, _) = OAuthClient::start(&OAuthToken::new("t", Duration::from_secs(1)));
        assert_eq!(ok.step(b"").unwrap(), Step::Done);
    }

    #[test]
    fn the_token_stays_out_of_debug() {
        let token = OAuthToken::new("super-secret-jwt", Duration::from_secs(1));
        assert!(!format!("{token:?}").contains("super-secret"));
    }
}
