//! A sans-IO Kafka producer: the whole protocol logic as a deterministic state machine.
//!
//! See [`Producer`] for the run loop. The wire codec lives in [`protocol`] and [`record`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod batch;
mod brokers;
mod buffer;
pub mod classify;
pub mod config;
mod connection;
pub mod error_code;
mod outputs;
mod partition;
pub mod partitioner;
mod producer;
pub mod properties;
pub mod protocol;
pub mod record;
pub mod sasl;
mod security;
mod timer;
mod topics;
mod types;

pub use config::{Acks, Config, ConfigBuilder, ConfigError};
pub use error_code::ErrorCode;
pub use producer::{Producer, Stats};
pub use record::{Compression, Header};
pub use sasl::{AuthError, Mechanism, OAuthToken, Secret};
pub use security::{SaslConfig, SecurityProtocol, TlsConfig};
pub use types::{
    ConnId, ConnectionError, Delivery, DeliveryFailure, Event, Output, ProduceError, Record,
    RecordMetadata, SendError, SendErrorReason,
};
