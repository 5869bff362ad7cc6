//! How the producer secures its connections: the security protocol (`security.protocol`), and
//! the SASL settings the core authenticates with. TLS itself is the driver's (the core sees
//! plaintext bytes); the protocol says whether the driver must wrap connections in it.

use std::fmt;
use std::path::PathBuf;

use crate::sasl::{Mechanism, Secret};

/// `security.protocol`: whether connections use TLS, SASL, both or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SecurityProtocol {
    /// `PLAINTEXT`: neither.
    #[default]
    Plaintext,
    /// `SSL`: TLS (the driver's), no SASL.
    Ssl,
    /// `SASL_PLAINTEXT`: SASL without TLS.
    SaslPlaintext,
    /// `SASL_SSL`: SASL inside TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Whether connections authenticate with SASL.
    pub const fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// Whether the driver wraps connections in TLS.
    pub const fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Kafka's name for it.
    pub const fn kafka_name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol named `name` (Kafka's spelling, any case).
    pub fn from_kafka_name(name: &str) -> Option<SecurityProtocol> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.kafka_name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kafka_name())
    }
}

/// The SASL settings: the mechanism (`sasl.mechanism`) and its credentials. For OAUTHBEARER
/// the username and password are unused: tokens come from the application through
/// [`crate::Output::TokenRequest`].
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SaslConfig {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// `sasl.username`.
    pub username: String,
    /// `sasl.password`.
    pub password: Secret,
    /// The secret SCRAM client nonces are derived from. `None` (the default): 32 bytes from the
    /// operating system's random source, read once when the producer is created (the one
    /// thing the core takes from outside its inputs, as quinn-proto does for its own secrets).
    /// Set it only to make a test reproducible.
    pub nonce_seed: Option<[u8; 32]>,
}

impl SaslConfig {
    /// PLAIN with a username and password (send it over TLS only).
    #[must_use]
    pub fn plain(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self::with(Mechanism::Plain, username, password)
    }

    /// SCRAM-SHA-256 with a username and password.
    #[must_use]
    pub fn scram_sha256(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self::with(Mechanism::ScramSha256, username, password)
    }

    /// SCRAM-SHA-512 with a username and password.
    #[must_use]
    pub fn scram_sha512(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self::with(Mechanism::ScramSha512, username, password)
    }

    /// OAUTHBEARER: the driver asks the application for tokens.
    #[must_use]
    pub fn oauthbearer() -> Self {
        Self::with(Mechanism::OAuthBearer, "", "")
    }

    /// `mechanism` with a username and password.
    #[must_use]
    pub fn with(
        mechanism: Mechanism,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        SaslConfig {
            mechanism,
            username: username.into(),
            password: Secret::new(password),
            nonce_seed: None,
        }
    }

    /// Derives SCRAM nonces from `seed` instead of the operating system's random source (for
    /// reproducible tests only).
    #[must_use]
    pub fn with_nonce_seed(mut self, seed: [u8; 32]) -> Self {
        self.nonce_seed = Some(seed);
        self
    }
}

impl fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &self.password)
            .field("nonce_seed", &self.nonce_seed.map(|_| "<redacted>"))
            .finish()
    }
}

/// TLS settings for `SSL` and `SASL_SSL` (the drivers apply them; the core only validates
/// them): how the broker's certificate is verified, and the client's own certificate for mTLS.
/// Files are PEM; the drivers read them when they start, and a missing or malformed file is a
/// typed error then.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsConfig {
    /// `ssl.ca.location`: the CA certificates (PEM) the broker's certificate must chain to.
    pub ca_location: Option<PathBuf>,
    /// Trust the platform's root certificates too (opt-in; for brokers with publicly trusted
    /// certificates, as managed services have).
    pub platform_roots: bool,
    /// `ssl.certificate.location`: the client's certificate chain (PEM), for mTLS.
    pub certificate_location: Option<PathBuf>,
    /// `ssl.key.location`: the client's private key (PEM, PKCS#8, PKCS#1 or SEC1), for mTLS.
    pub key_location: Option<PathBuf>,
    /// `ssl.endpoint.identification.algorithm`: `https` (the default, true) checks that the
    /// certificate names the host connected to; `none` (false) does not (the chain is still
    /// verified).
    pub endpoint_identification: bool,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            ca_location: None,
            platform_roots: false,
            certificate_location: None,
            key_location: None,
            endpoint_identification: true,
        }
    }
}

impl TlsConfig {
    /// Verifies brokers against the CA certificates in `path` (PEM).
    #[must_use]
    pub fn with_ca(path: impl Into<PathBuf>) -> Self {
        TlsConfig {
            ca_location: Some(path.into()),
            ..TlsConfig::default()
        }
    }

    /// Verifies brokers against the platform's root certificates.
    #[must_use]
    pub fn with_platform_roots() -> Self {
        TlsConfig {
            platform_roots: true,
            ..TlsConfig::default()
        }
    }

    /// Presents a client certificate (mTLS): its chain and private key, both PEM files.
    #[must_use]
    pub fn with_client_certificate(
        mut self,
        certificate: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Self {
        self.certificate_location = Some(certificate.into());
        self.key_location = Some(key.into());
        self
    }

    /// `ssl.endpoint.identification.algorithm`: true for `https` (check the host name), false
    /// for `none`.
    #[must_use]
    pub fn with_endpoint_identification(mut self, on: bool) -> Self {
        self.endpoint_identification = on;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ] {
            assert_eq!(SecurityProtocol::from_kafka_name(p.kafka_name()), Some(p));
        }
        assert_eq!(
            SecurityProtocol::from_kafka_name("sasl_ssl"),
            Some(SecurityProtocol::SaslSsl)
        );
        assert_eq!(
            Mechanism::from_kafka_name("scram-sha-512"),
            Some(Mechanism::ScramSha512)
        );
        assert_eq!(Mechanism::from_kafka_name("GSSAPI"), None);
    }

    #[test]
    fn secrets_never_reach_debug() {
        let c = SaslConfig::scram_sha512("alice", "hunter2").with_nonce_seed([9; 32]);
        let shown = format!("{c:?}");
        assert!(shown.contains("alice"));
        assert!(!shown.contains("hunter2"));
        assert!(!shown.contains("9, 9"));
    }
}
