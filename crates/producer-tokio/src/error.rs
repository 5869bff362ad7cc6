//! What the handle's calls and the delivery futures can fail with.

use producer_core::{DeliveryFailure, Record};

/// [`crate::ProducerHandle::send`] (or `send_detached`) refused a record; the record comes
/// back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// [`crate::ProducerHandle::close`] was called, or the producer task has stopped (every
    /// handle was dropped and it finished closing, or the runtime shut down).
    #[error("producer is closed")]
    Closed(Record),
}

impl SendError {
    /// The record that was not sent.
    pub fn into_record(self) -> Record {
        match self {
            SendError::Closed(r) => r,
        }
    }
}

/// [`crate::ProducerHandle::try_send`] (or `try_send_detached`) refused a record; the record
/// comes back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrySendError {
    /// The command queue is full, or the core's buffer is (the task holds a refused record
    /// aside until deliveries free space). Try again later, or use
    /// [`crate::ProducerHandle::send`] to wait for space.
    #[error("producer buffer is full")]
    Full(Record),
    /// [`crate::ProducerHandle::close`] was called, or the producer task has stopped.
    #[error("producer is closed")]
    Closed(Record),
}

impl TrySendError {
    /// The record that was not sent.
    pub fn into_record(self) -> Record {
        match self {
            TrySendError::Full(r) | TrySendError::Closed(r) => r,
        }
    }
}

/// [`crate::ProducerHandle::try_send_batch_detached`] or
/// [`crate::ProducerHandle::send_batch_detached`] was called after
/// [`crate::ProducerHandle::close`] (or the producer task has stopped). The records not taken
/// are still in the caller's vector; those taken before are reported as usual.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("producer is closed")]
pub struct BatchClosed;

/// [`crate::ProducerHandle::purge`] was called after the producer task stopped (every handle
/// was dropped and it finished closing, a close completed, or the runtime shut down): every
/// record was reported already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the producer task has stopped")]
pub struct ProducerStopped;

/// Why a record accepted by the handle was not delivered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// The record failed, and comes back in the failure: the core failed it (broker error,
    /// delivery timeout, unknown topic, producer closed, ...), or refused it when the task
    /// handed it over ([`producer_core::ProduceError::Refused`]: too large, invalid partition,
    /// producer closed or failed), or the producer closed before the task could hand it over
    /// ([`producer_core::ProduceError::Closed`]).
    #[error("delivery failed: {}", .0.error)]
    Failed(Box<DeliveryFailure>),
    /// The producer task stopped without reporting the record. This happens only when the
    /// runtime shut down under it (or a bug panicked it); the record is gone with the task.
    #[error("producer task stopped before reporting the record")]
    Lost,
}

impl DeliveryError {
    /// The record handed back, if any (every variant but [`DeliveryError::Lost`]).
    pub fn into_record(self) -> Option<Record> {
        match self {
            DeliveryError::Failed(f) => Some(f.record),
            DeliveryError::Lost => None,
        }
    }

    /// The record handed back, by reference.
    pub fn record(&self) -> Option<&Record> {
        match self {
            DeliveryError::Failed(f) => Some(&f.record),
            DeliveryError::Lost => None,
        }
    }

    /// Why the record failed (`None` for [`DeliveryError::Lost`]).
    pub fn error(&self) -> Option<&producer_core::ProduceError> {
        match self {
            DeliveryError::Failed(f) => Some(&f.error),
            DeliveryError::Lost => None,
        }
    }
}

/// [`crate::ProducerBuilder::start`] (or [`crate::ProducerHandle::start`]) could not start the
/// producer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// It was called outside a tokio runtime.
    #[error("producer-tokio must be started from within a tokio runtime")]
    NoRuntime,
    /// A driver setting that must be positive was set to 0 (its name is given).
    #[error("{0} must be positive")]
    Zero(&'static str),
    /// `security.protocol` is SSL or SASL_SSL and the TLS settings cannot be used: a file
    /// missing or unreadable, not PEM, without a certificate or key, or a client key that does
    /// not match its certificate.
    #[error("TLS setup failed: {0}")]
    Tls(#[from] producer_driver::tls::TlsSetupError),
}
