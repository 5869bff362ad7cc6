//! Why a mio driver could not start.

use std::io;

use producer_driver::tls::TlsSetupError;

/// [`crate::MioDriver::new`] (and its siblings) or [`crate::ThreadedProducer::spawn`] could
/// not start; nothing was connected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The registry could not be cloned, the waker registered or the thread started, or the
    /// token range is too small.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// `security.protocol` is SSL or SASL_SSL and the TLS settings cannot be used: a file
    /// missing or unreadable, not PEM, without a certificate or key, or a client key that does
    /// not match its certificate.
    #[error("TLS setup failed: {0}")]
    Tls(#[from] TlsSetupError),
}

/// For callers that handle start failures as I/O errors (the TLS error stays inside, as the
/// source).
impl From<StartError> for io::Error {
    fn from(e: StartError) -> io::Error {
        match e {
            StartError::Io(e) => e,
            StartError::Tls(e) => io::Error::new(io::ErrorKind::InvalidInput, e),
        }
    }
}
