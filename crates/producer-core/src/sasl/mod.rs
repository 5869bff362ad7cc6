//! SASL mechanisms, client side: PLAIN, SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and
//! OAUTHBEARER (RFC 7628). Each is a small exchange of tokens that the connection setup carries
//! in SaslAuthenticate requests; this module knows the tokens, not the transport.
//!
//! Secrets (passwords, tokens) live in [`Secret`], whose `Debug` never shows them and whose
//! bytes are wiped when it is dropped; the tokens built from them (a PLAIN token, a SCRAM proof
//! and the keys it comes from, a bearer token's initial response) are wiped when dropped too.

mod oauthbearer;
mod plain;
mod scram;

use std::fmt;

use zeroize::{Zeroize, Zeroizing};

pub(crate) use oauthbearer::check as check_token;
pub use oauthbearer::OAuthToken;
pub(crate) use scram::NonceSource;

/// A client side of any mechanism's exchange, for the SASL fuzz targets only (see `fuzz/`;
/// compiled under `cargo fuzz`, which sets `--cfg fuzzing`): the tokens the producer sends and
/// what it makes of the broker's.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    use super::{AuthError, Exchange, Mechanism, NonceSource, OAuthToken, Secret, Step};

    /// One exchange, client side.
    #[derive(Debug)]
    pub struct Client(Exchange);

    impl Client {
        /// Starts an exchange and returns it with the client's first token. SCRAM nonces
        /// come from `nonce_key` as a producer seeded with it would derive them.
        pub fn start(
            mechanism: Mechanism,
            username: &str,
            password: &str,
            token: Option<&OAuthToken>,
            nonce_key: [u8; 32],
        ) -> Result<(Client, Vec<u8>), AuthError> {
            let mut nonces = NonceSource::new(nonce_key);
            let (exchange, first) = Exchange::start(
                mechanism,
                username,
                &Secret::new(password),
                token,
                &mut nonces,
            )?;
            Ok((Client(exchange), first.as_slice().to_vec()))
        }

        /// The broker's next token: the client's next one, or `None` when the exchange is
        /// complete on the client's side. The tokens come back as plain copies (not wiped when
        /// dropped): this entry point is compiled for the fuzz targets only.
        pub fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, AuthError> {
            Ok(match self.0.step(server)? {
                Step::Send(next) => Some(next.as_slice().to_vec()),
                Step::Done => None,
            })
        }
    }
}

use crate::ErrorCode;

/// A SASL mechanism the producer can authenticate with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mechanism {
    /// `PLAIN` (RFC 4616): the password is sent as is; use it over TLS only.
    Plain,
    /// `SCRAM-SHA-256` (RFC 7677).
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
    /// `OAUTHBEARER` (RFC 7628): a bearer token from the application (see
    /// [`crate::Output::TokenRequest`]).
    OAuthBearer,
}

impl Mechanism {
    /// The mechanism's name as Kafka spells it (`sasl.mechanism`).
    pub const fn kafka_name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// The mechanism named `name` (Kafka's spelling, any case), if this crate speaks it.
    pub fn from_kafka_name(name: &str) -> Option<Mechanism> {
        [
            Mechanism::Plain,
            Mechanism::ScramSha256,
            Mechanism::ScramSha512,
            Mechanism::OAuthBearer,
        ]
        .into_iter()
        .find(|m| m.kafka_name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kafka_name())
    }
}

/// A password or token: its `Debug` never shows it (it has no `Display`), and its bytes are
/// overwritten with zeros when it is dropped (by the `zeroize` crate), so a freed secret does
/// not linger in memory. Each clone is a copy of its own, wiped when that clone is dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret. The `String` is taken as it is (not copied); a `&str` is copied, and
    /// the caller's copy stays the caller's to wipe.
    pub fn new(secret: impl Into<String>) -> Self {
        Secret(secret.into())
    }

    /// The secret itself, for the mechanism that sends or hashes it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Bytes that carry a credential: a PLAIN token (the password itself), a SCRAM client-final
/// message (the proof), an OAUTHBEARER initial response (the bearer token). Built in a buffer
/// sized once, so no copy is left behind by a reallocation; wiped when dropped; `Debug` shows
/// the length only.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SecretBytes(Zeroizing<Vec<u8>>);

impl SecretBytes {
    /// An empty buffer with room for exactly `capacity` bytes: pushing more than that is a
    /// bug of the caller's (a reallocation would leave an unwiped copy), caught in debug
    /// builds.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        SecretBytes(Zeroizing::new(Vec::with_capacity(capacity)))
    }

    /// Appends `bytes`.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        debug_assert!(
            self.0.len() + bytes.len() <= self.0.capacity(),
            "a secret buffer outgrew the capacity it was sized with"
        );
        self.0.extend_from_slice(bytes);
    }

    /// Appends one byte.
    pub(crate) fn push(&mut self, byte: u8) {
        self.extend(&[byte]);
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretBytes(<{} bytes>)", self.0.len())
    }
}

/// Why authenticating a connection failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// SaslHandshake: the broker does not enable the configured mechanism
    /// (UNSUPPORTED_SASL_MECHANISM).
    #[error("the broker does not enable SASL mechanism {mechanism} (it enables {enabled:?})")]
    UnsupportedMechanism {
        /// The mechanism asked for.
        mechanism: Mechanism,
        /// The mechanisms the broker enables.
        enabled: Vec<String>,
    },
    /// The broker refused the credentials or the exchange (SASL_AUTHENTICATION_FAILED,
    /// ILLEGAL_SASL_STATE, or another error code in SaslHandshake or SaslAuthenticate).
    #[error("SASL authentication failed: error {code}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Rejected {
        /// The broker's error code.
        code: ErrorCode,
        /// The broker's message, if any.
        message: Option<String>,
    },
    /// SCRAM: the broker's final message did not carry the signature the password implies:
    /// the broker does not know the password (or is not the broker it claims to be).
    #[error("the broker's SCRAM server signature does not verify")]
    BadServerSignature,
    /// SCRAM: the broker's message could not be understood (malformed, the nonce does not
    /// extend ours, an iteration count outside Kafka's 4096-16384, a mandatory extension), or
    /// it reported an error (`e=`).
    #[error("SCRAM exchange failed: {0}")]
    Scram(String),
    /// OAUTHBEARER: the application's token provider gave no token (or one larger than
    /// [`crate::Config::MAX_SASL_CREDENTIALS`], which no broker would read).
    #[error("no OAUTHBEARER token: {0}")]
    TokenUnavailable(String),
    /// OAUTHBEARER: the application's token provider did not answer within `token_timeout`
    /// (`sasl.login.read.timeout.ms`). The connections that waited for it back off and ask
    /// again; a token handed over later is still taken.
    #[error(
        "the OAUTHBEARER token provider did not answer within {0:?} (sasl.login.read.timeout.ms)"
    )]
    TokenTimedOut(std::time::Duration),
    /// The driver's TLS handshake failed (the broker's certificate did not verify, its name did
    /// not match, the broker asked for a client certificate it did not get, the peer does not
    /// speak TLS), as the driver reported it with [`crate::Producer::handle_tls_failed`].
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    /// A plaintext connection (`security.protocol` PLAINTEXT or SASL_PLAINTEXT) was answered
    /// with a TLS record: the listener expects TLS. Kafka's SSL listeners answer a plaintext
    /// ApiVersions with a TLS alert, whose first bytes read as an absurd frame size.
    #[error("the broker answered with TLS: its listener expects TLS (security.protocol SSL or SASL_SSL)")]
    BrokerExpectsTls,
    /// The broker answered ApiVersions without SaslHandshake v1 or SaslAuthenticate, so SASL
    /// cannot be spoken with it (a listener without SASL, or a pre-1.0 broker).
    #[error("the broker does not offer SaslHandshake v1 and SaslAuthenticate")]
    NotOffered,
}

/// One authentication's exchange of tokens, client side.
#[derive(Debug)]
pub(crate) enum Exchange {
    Plain,
    Scram(scram::ScramClient),
    OAuthBearer(oauthbearer::OAuthClient),
}

/// What the client does after the broker's token.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Send this token next.
    Send(SecretBytes),
    /// The exchange is complete on the client's side (the broker's answer said success).
    Done,
}

impl Exchange {
    /// Starts an exchange for `mechanism` and returns it with its first token. OAUTHBEARER
    /// needs `token`; SCRAM takes a fresh nonce from `nonces`.
    pub(crate) fn start(
        mechanism: Mechanism,
        username: &str,
        password: &Secret,
        token: Option<&OAuthToken>,
        nonces: &mut NonceSource,
    ) -> Result<(Exchange, SecretBytes), AuthError> {
        Ok(match mechanism {
            Mechanism::Plain => (Exchange::Plain, plain::token(username, password)),
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                let hash = if mechanism == Mechanism::ScramSha256 {
                    scram::Hash::Sha256
                } else {
                    scram::Hash::Sha512
                };
                let (client, first) =
                    scram::ScramClient::start(hash, username, password, nonces.next_nonce());
                (Exchange::Scram(client), first)
            }
            Mechanism::OAuthBearer => {
                let token = token
                    .ok_or_else(|| AuthError::TokenUnavailable("requested, not provided".into()))?;
                let (client, first) = oauthbearer::OAuthClient::start(token)?;
                (Exchange::OAuthBearer(client), first)
            }
        })
    }

    /// The broker answered the last token with success and `server` bytes: the next token to
    /// send, or done. An error ends the exchange.
    pub(crate) fn step(&mut self, server: &[u8]) -> Result<Step, AuthError> {
        match self {
            Exchange::Plain => Ok(Step::Done),
            Exchange::Scram(c) => c.step(server),
            Exchange::OAuthBearer(c) => c.step(server),
        }
    }
}
