//! TLS for `SSL` and `SASL_SSL`, the part both drivers share: the core's [`TlsConfig`] turned
//! into a rustls [`ClientConfig`] (CA file or platform roots, the client certificate and key
//! for mTLS, endpoint identification on or off), the server name each connection verifies, and
//! the typed errors for files that cannot be used. The handshake and the encrypted bytes are
//! each driver's (its runtime decides how sockets are read and written).
//!
//! Everything here runs when a driver starts, so a missing file, a file without PEM
//! certificates or a key that does not match its certificate stops the driver before any
//! connection is tried, instead of failing every handshake later.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use producer_core::{Config, TlsConfig};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

pub use rustls;

/// What a driver hands to `Producer::handle_tls_failed` when the peer closed the connection
/// in the middle of the handshake (a plaintext listener reading our ClientHello as a frame of
/// absurd size closes it): the same words from every driver.
pub const HANDSHAKE_EOF: &str = "the broker closed the connection during the TLS handshake";

/// Why a driver could not set up TLS from the configuration. Returned when the driver starts;
/// nothing was connected yet.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsSetupError {
    /// `security.protocol` is SSL or SASL_SSL but the configuration has no [`TlsConfig`] (a
    /// `Config` built by hand; the builder refuses this).
    #[error("security.protocol uses TLS but no TLS settings are configured")]
    Missing,
    /// A file named by a setting could not be read.
    #[error("cannot read {setting} {}: {source}", path.display())]
    Read {
        /// The setting naming the file (`ssl.ca.location`, ...).
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// A file is not valid PEM.
    #[error("{setting} {} is not valid PEM: {source}", path.display())]
    Pem {
        /// The setting naming the file.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// What the PEM parser said.
        source: rustls_pki_types::pem::Error,
    },
    /// A certificate file holds no `CERTIFICATE` block.
    #[error("{setting} {} holds no PEM certificate", path.display())]
    NoCertificate {
        /// The setting naming the file.
        setting: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// A CA file's certificate cannot be a trust anchor.
    #[error("ssl.ca.location {}: a certificate cannot be used as a CA: {source}", path.display())]
    BadCaCertificate {
        /// The CA file.
        path: PathBuf,
        /// What rustls said.
        source: rustls::Error,
    },
    /// `ssl.key.location` holds no private key (PKCS#8, PKCS#1 or SEC1 PEM block).
    #[error("ssl.key.location {} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)", path.display())]
    NoPrivateKey {
        /// The key file.
        path: PathBuf,
    },
    /// The client key cannot be used, or does not match the client certificate.
    #[error("client certificate and key cannot be used together: {0}")]
    ClientCertificate(rustls::Error),
    /// Platform roots were asked for and none could be loaded.
    #[error("no platform root certificate could be loaded: {0}")]
    PlatformRoots(String),
    /// The server certificate verifier could not be built from the trust anchors.
    #[error("cannot verify brokers with these trust anchors: {0}")]
    Verifier(rustls::client::VerifierBuilderError),
    /// The TLS versions could not be set up with the crypto provider.
    #[error("TLS versions not supported by the crypto provider: {0}")]
    Versions(rustls::Error),
}

/// A connection's TLS settings, ready to use for every connection: made once by a driver when
/// it starts ([`TlsSetup::from_config`]), shared by all its connections.
#[derive(Clone)]
pub struct TlsSetup {
    config: Arc<ClientConfig>,
}

impl fmt::Debug for TlsSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The client key lives in the resolver; nothing of it is shown.
        f.debug_struct("TlsSetup").finish_non_exhaustive()
    }
}

impl TlsSetup {
    /// The TLS setup for `config`: `None` when its `security.protocol` uses no TLS. Call it
    /// once when the driver starts; it reads the files the [`TlsConfig`] names.
    pub fn from_config(config: &Config) -> Result<Option<TlsSetup>, TlsSetupError> {
        if !config.security_protocol.uses_tls() {
            return Ok(None);
        }
        let tls = config.tls.as_ref().ok_or(TlsSetupError::Missing)?;
        Ok(Some(TlsSetup {
            config: client_config(tls)?,
        }))
    }

    /// The rustls configuration every connection uses.
    pub fn client_config(&self) -> &Arc<ClientConfig> {
        &self.config
    }

    /// A client connection for `host` (the host of `Output::Connect`): it sends `host` as SNI
    /// (unless it is an IP address) and verifies the broker's certificate against it.
    pub fn connect(&self, host: &str) -> Result<rustls::ClientConnection, rustls::Error> {
        let name = server_name(host)?;
        rustls::ClientConnection::new(self.config.clone(), name)
    }
}

/// The name a connection to `host` verifies: an IP address (brackets allowed) or a DNS name.
pub fn server_name(host: &str) -> Result<ServerName<'static>, rustls::Error> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(bare.to_string())
        .map_err(|_| rustls::Error::General(format!("{host:?} is not a valid TLS server name")))
}

/// The crypto provider both drivers use: ring (no C toolchain beyond a compiler needed).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the rustls client configuration for `tls`, reading its files.
pub fn client_config(tls: &TlsConfig) -> Result<Arc<ClientConfig>, TlsSetupError> {
    let provider = provider();
    let mut roots = RootCertStore::empty();
    if let Some(path) = &tls.ca_location {
        for cert in certificates("ssl.ca.location", path)? {
            roots
                .add(cert)
                .map_err(|source| TlsSetupError::BadCaCertificate {
                    path: path.clone(),
                    source,
                })?;
        }
    }
    if tls.platform_roots {
        let loaded = rustls_native_certs::load_native_certs();
        let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
        if added == 0 {
            let why = if loaded.errors.is_empty() {
                "the platform has none".to_string()
            } else {
                loaded
                    .errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            return Err(TlsSetupError::PlatformRoots(why));
        }
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(TlsSetupError::Verifier)?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsSetupError::Versions)?;
    let builder = if tls.endpoint_identification {
        builder.with_webpki_verifier(webpki)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly { inner: webpki }))
    };
    let config = match (&tls.certificate_location, &tls.key_location) {
        (Some(cert), Some(key)) => {
            let chain = certificates("ssl.certificate.location", cert)?;
            let key = private_key(key)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(TlsSetupError::ClientCertificate)?
        }
        // The core's builder refuses one without the other.
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

fn read(setting: &'static str, path: &Path) -> Result<Vec<u8>, TlsSetupError> {
    std::fs::read(path).map_err(|source| TlsSetupError::Read {
        setting,
        path: path.to_path_buf(),
        source,
    })
}

/// Every `CERTIFICATE` block of the PEM file at `path` (at least one).
fn certificates(
    setting: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let pem = read(setting, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsSetupError::Pem {
            setting,
            path: path.to_path_buf(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsSetupError::NoCertificate {
            setting,
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) of the PEM file at `path`.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsSetupError> {
    let pem = read("ssl.key.location", path)?;
    match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(key) => Ok(key),
        Err(rustls_pki_types::pem::Error::NoItemsFound) => Err(TlsSetupError::NoPrivateKey {
            path: path.to_path_buf(),
        }),
        Err(source) => Err(TlsSetupError::Pem {
            setting: "ssl.key.location",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// `ssl.endpoint.identification.algorithm=none`: the broker's certificate must still chain to
/// a trusted root, be in its validity period and be signed properly; only the check that it
/// names the host is skipped.
#[derive(Debug)]
struct ChainOnly {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            // webpki checks the name last: this error means everything else verified.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_addresses_are_verified_as_addresses_and_names_as_names() {
        assert!(matches!(
            server_name("127.0.0.1"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(server_name("[::1]"), Ok(ServerName::IpAddress(_))));
        assert!(matches!(
            server_name("broker-1.example.com"),
            Ok(ServerName::DnsName(n)) if n.as_ref() == "broker-1.example.com"
        ));
        assert!(server_name("not a host name").is_err());
    }

    #[test]
    fn plaintext_protocols_need_no_tls_and_tls_ones_need_settings() {
        let plain = Config::builder([("localhost", 9092)]).build().unwrap();
        assert!(TlsSetup::from_config(&plain).unwrap().is_none());
        // A Config assembled by hand past the builder's check.
        let mut ssl = plain;
        ssl.security_protocol = producer_core::SecurityProtocol::Ssl;
        assert!(matches!(
            TlsSetup::from_config(&ssl),
            Err(TlsSetupError::Missing)
        ));
    }

    #[test]
    fn a_key_file_without_a_key_is_a_typed_error() {
        let dir = std::env::temp_dir().join(format!("producer-driver-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("empty.key");
        std::fs::write(&path, b"no PEM here\n").unwrap();
        let r = private_key(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(r, Err(TlsSetupError::NoPrivateKey { path: p }) if p == path));
    }

    #[test]
    fn errors_say_which_setting_and_file() {
        let e = client_config(&TlsConfig::with_ca("/nonexistent/ca.pem")).unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains("ssl.ca.location"), "{shown}");
        assert!(shown.contains("/nonexistent/ca.pem"), "{shown}");
    }
}
