//! Why a configuration was refused: [`ConfigError`], returned by [`super::ConfigBuilder::build`].

use std::time::Duration;

use super::Config;
use crate::record::Compression;
use crate::security::SecurityProtocol;

/// A configuration that cannot be used; returned by [`ConfigBuilder::build`](super::ConfigBuilder::build).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `bootstrap.servers` is empty.
    #[error("no bootstrap servers given")]
    NoBootstrapServers,
    /// `delivery.timeout.ms` is shorter than `linger.ms + request.timeout.ms`.
    #[error("delivery_timeout ({delivery:?}) must be at least linger + request_timeout ({min:?})")]
    DeliveryTimeoutTooShort {
        /// The configured delivery timeout.
        delivery: Duration,
        /// `linger + request_timeout`.
        min: Duration,
    },
    /// `transactional.id` is set while idempotence is off (`enable_idempotence(false)`, or
    /// `acks` other than `all`): transactions need the idempotent producer.
    #[error("transactional_id requires idempotence (enable_idempotence true and acks=all)")]
    TransactionsNeedIdempotence,
    /// `transactional.id` is the empty string.
    #[error("transactional_id is empty")]
    EmptyTransactionalId,
    /// `transaction.timeout.ms` is zero or does not fit the protocol's 32-bit milliseconds.
    #[error("transaction_timeout = {0:?}: must be between 1 ms and i32::MAX ms")]
    InvalidTransactionTimeout(Duration),
    /// Idempotence was asked for explicitly together with `acks` other than `all`.
    #[error("enable_idempotence requires acks=all")]
    IdempotenceNeedsAcksAll,
    /// `max.in.flight.requests.per.connection` is 0, or above 5 with idempotence.
    #[error("max_in_flight_requests_per_connection = {0}: must be 1..=5 with idempotence, at least 1 otherwise")]
    InvalidMaxInFlight(usize),
    /// `max.request.size` is too small to hold a batch header.
    #[error("max_request_size = {0} is too small")]
    MaxRequestSizeTooSmall(usize),
    /// `buffer.memory` is smaller than `max.request.size`, so a maximal record could never fit.
    #[error("buffer_memory ({buffer}) must be at least max_request_size ({request})")]
    BufferSmallerThanRequest {
        /// `buffer.memory`.
        buffer: usize,
        /// `max.request.size`.
        request: usize,
    },
    /// `buffer_max_records` is 0.
    #[error("buffer_max_records must be at least 1")]
    NoRecordBuffer,
    /// The chosen compression codec was compiled out (its cargo feature is off).
    #[error("compression {0:?} is not compiled in (enable its cargo feature)")]
    CompressionNotCompiled(Compression),
    /// `metrics.num.samples` is 0 or above [`crate::windowed::MAX_SAMPLES`] (64).
    #[error("metrics_num_samples = {0}: must be 1..=64")]
    InvalidMetricsNumSamples(usize),
    /// A duration is zero where it must be positive.
    #[error("{0} must be positive")]
    ZeroDuration(&'static str),
    /// A duration is longer than [`Config::MAX_DURATION`] (`i32::MAX` ms, about 24.8 days):
    /// `Duration::MAX` and other durations no deadline could be armed with.
    #[error("{0} is longer than the longest duration taken, i32::MAX ms (about 24.8 days)")]
    DurationTooLong(&'static str),
    /// `max.request.size` is larger than [`Config::MAX_REQUEST_SIZE`] (1 GiB).
    #[error("max_request_size = {0} is larger than the largest taken, {max} (1 GiB)", max = Config::MAX_REQUEST_SIZE)]
    MaxRequestSizeTooLarge(usize),
    /// `client.id` or `transactional.id` is longer than its INT16 length prefix can say
    /// ([`Config::MAX_ID_LEN`] bytes).
    #[error("{setting} is {len} bytes long: at most {max} bytes are taken", max = Config::MAX_ID_LEN)]
    IdTooLong {
        /// `client_id` or `transactional_id`.
        setting: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// The SASL username and password together are longer than
    /// [`Config::MAX_SASL_CREDENTIALS`] bytes (the broker's `sasl.server.max.receive.size`
    /// default, 512 KiB): no broker would take the token.
    #[error("the SASL username and password are {len} bytes together: at most {max} are taken", max = Config::MAX_SASL_CREDENTIALS)]
    SaslCredentialsTooLong {
        /// Their length in bytes together.
        len: usize,
    },
    /// `security.protocol` is SASL_PLAINTEXT or SASL_SSL but no SASL mechanism is configured.
    #[error("security.protocol {0} needs a SASL mechanism (sasl.mechanism)")]
    SaslMechanismMissing(SecurityProtocol),
    /// A SASL mechanism is configured but `security.protocol` is PLAINTEXT or SSL.
    #[error("a SASL mechanism is configured but security.protocol is {0} (use SASL_PLAINTEXT or SASL_SSL)")]
    SaslWithoutSaslProtocol(SecurityProtocol),
    /// PLAIN or SCRAM without a username.
    #[error("SASL {0} needs a username (sasl.username)")]
    SaslUsernameMissing(crate::sasl::Mechanism),
    /// `security.protocol` SSL or SASL_SSL without a way to verify brokers: neither
    /// `ssl.ca.location` nor the platform roots.
    #[error("security.protocol {0} needs ssl.ca.location (or the platform roots, opted in)")]
    TlsTrustMissing(SecurityProtocol),
    /// TLS settings with `security.protocol` PLAINTEXT or SASL_PLAINTEXT.
    #[error("TLS settings are given but security.protocol is {0} (use SSL or SASL_SSL)")]
    TlsWithoutTlsProtocol(SecurityProtocol),
    /// A client certificate without its key, or a key without its certificate.
    #[error("ssl.certificate.location and ssl.key.location go together (mTLS needs both)")]
    TlsClientCertificateIncomplete,
}
