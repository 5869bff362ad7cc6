//! A sans-IO Kafka producer: the whole protocol logic as a deterministic state machine.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error_code;
pub mod protocol;
pub mod record;

pub use error_code::ErrorCode;
