//! A sans-IO Kafka producer: the whole protocol logic as a deterministic state machine.
//!
//! [`Producer`] takes records ([`Producer::send`]), bytes read from sockets, connection events
//! and the current `Instant`; it hands back [`Output`]s (connections to open, bytes to write,
//! one delivery report per record, events) and the next instant it wants to be woken. It does
//! no I/O, reads no clock and spawns no thread; the drivers `producer-mio` and
//! `producer-tokio` put it on real sockets, and `producer-sim` runs it against a simulated
//! cluster. See [`Producer`] for the run loop. The wire codec lives in [`protocol`] and
//! [`record`]; configuration by Kafka's names in [`properties`]; what it measures in
//! [`metrics`].
//!
//! # Example
//! The first steps of the run loop, with the driver's side written out by hand: the producer
//! asks for a connection, the driver reports it connected, and the producer writes its first
//! request (ApiVersions) on it; the record waits in its batch meanwhile.
//! ```
//! use std::time::Instant;
//! use producer_core::metrics::ConnectionState;
//! use producer_core::{Config, Output, Producer, Record};
//!
//! let now = Instant::now();
//! let config = Config::builder([("broker-1", 9092)])
//!     .set("linger.ms", "20")?
//!     .build()?;
//! let mut producer = Producer::<u32>::new(config, now);
//! producer.send(now, Record::new("orders", "hello").with_key("k1"), 7)?;
//! let Some(Output::Connect { conn, host, port }) = producer.poll_output() else {
//!     panic!("the first output opens a connection");
//! };
//! assert_eq!((host.as_str(), port), ("broker-1", 9092));
//! assert!(producer.poll_output().is_none());
//! producer.handle_connected(now, conn);
//! let Some(Output::Transmit { conn: to, bytes }) = producer.poll_output() else {
//!     panic!("then a request to write");
//! };
//! assert_eq!(to, conn);
//! assert!(bytes.len() > 4, "a size-prefixed ApiVersions request");
//! assert!(producer.poll_timeout().is_some(), "its timeout is armed");
//!
//! let metrics = producer.metrics();
//! assert_eq!(metrics.buffered_records, 1);
//! assert_eq!(metrics.brokers[0].state, ConnectionState::Negotiating);
//! assert_eq!(metrics.brokers[0].in_flight_requests, 1);
//! let mut text = String::new();
//! metrics.render_prometheus(&mut text);
//! assert!(text.contains("kafka_producer_buffered_records 1\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod active;
mod batch;
mod brokers;
mod buffer;
pub mod classify;
pub mod config;
mod connection;
pub mod diagnosis;
pub mod error_code;
mod errors;
pub mod limits;
pub mod metrics;
mod outputs;
mod partition;
pub mod partitioner;
mod partitioners;
mod producer;
pub mod properties;
pub mod protocol;
mod queue_delay;
pub mod record;
pub mod sasl;
mod security;
mod stats;
mod timer;
mod topic_name;
mod topics;
pub mod transaction;
mod types;
pub mod windowed;

pub use config::{Acks, Config, ConfigBuilder, ConfigError, MetadataRecovery};
pub use diagnosis::{BackpressureCause, BrokerDiagnosis, Diagnosis, Verdict};
pub use error_code::ErrorCode;
pub use metrics::{MetricsSnapshot, SendWaitCause, TopicMetrics};
pub use partitioners::{
    DefaultPartitioner, Murmur2Partitioner, PartitionView, Partitioner, PartitionerError,
    RoundRobinPartitioner, Route, StickyPartitioner,
};
pub use producer::{
    InFlight, Producer, PurgeScope, TelemetryState, TelemetryStatus, TopicPartitions, Transactions,
};
pub use record::{Compression, Header};
pub use sasl::{AuthError, Mechanism, OAuthToken, Secret};
pub use security::{SaslConfig, SecurityProtocol, TlsConfig};
pub use stats::Stats;
pub use topic_name::{check_topic_name, InvalidTopicName, MAX_TOPIC_NAME_LEN};
pub use transaction::{
    ConsumerGroupMetadata, InvalidOffsets, OffsetToCommit, TransactionError, TransactionOperation,
    TransactionResult, TransactionState,
};
pub use types::{
    Callback, ConnId, ConnectionError, Delivery, DeliveryFailure, Event, Output, ProduceError,
    RebootstrapReason, Record, RecordMetadata, SendError, SendErrorReason, Violation, WireBytes,
};
