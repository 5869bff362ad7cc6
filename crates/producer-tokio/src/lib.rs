//! A tokio driver for [`producer_core`]: one task owns the sans-IO state machine, and a
//! cloneable [`ProducerHandle`] sends records to it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use producer_tokio::{Config, ProducerHandle, Record};
//!
//! let handle = ProducerHandle::start(Config::builder([("localhost", 9092)]).build()?)?;
//! let delivery = handle.send(Record::new("events", "hello").with_key("k")).await?;
//! let metadata = delivery.await?; // partition and offset
//! println!("written at {}-{}", metadata.partition, metadata.offset);
//! handle.close().await;
//! # Ok(()) }
//! ```
//!
//! A runnable one: the only broker accepts connections and never answers, so the record fails
//! once its delivery timeout has passed and comes back with the error.
//! ```
//! use std::time::Duration;
//! use producer_tokio::{Config, ProducerHandle, Record};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! runtime.block_on(async {
//!     let silent_broker = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let port = silent_broker.local_addr()?.port();
//!     let config = Config::builder([("127.0.0.1", port)])
//!         .request_timeout(Duration::from_millis(100))
//!         .max_block(Duration::from_millis(200))
//!         .delivery_timeout(Duration::from_millis(300))
//!         .build()?;
//!     let handle = ProducerHandle::start(config)?;
//!     let delivery = handle.send(Record::new("events", "hello")).await?;
//!     let failure = delivery.await.expect_err("no broker answered");
//!     let record = failure.record().expect("handed back");
//!     assert_eq!(record.value.as_deref(), Some(&b"hello"[..]));
//!     assert_eq!(handle.metrics().await.counters.records_failed, 1);
//!     handle.close().await;
//!     Ok::<(), Box<dyn std::error::Error>>(())
//! })
//! # }
//! ```
//!
//! # How it works
//! * **The producer task.** [`ProducerHandle::start`] (or [`ProducerHandle::builder`] to tune
//!   the driver) spawns one task that owns [`producer_core::Producer`]. It reads commands from
//!   the handles through a *bounded* queue (a mutex-guarded deque the task empties in one go,
//!   then handles in batches, reading the clock once per batch), events from the connection
//!   tasks through a bounded channel, and sleeps until the core's
//!   [`poll_timeout`](producer_core::Producer::poll_timeout). After every input it drains the
//!   core's outputs. The deadline is compared against the clock (not only the sleep future)
//!   before `handle_timeout` is called. The clock is [`tokio::time::Instant`], so tests may
//!   pause time.
//! * **Connections.** Each `Output::Connect` spawns one task. It connects with
//!   [`tokio::net::TcpStream::connect`] (tokio resolves the host name off the event loop),
//!   then reads into a reusable buffer and forwards chunks to the producer task, and writes
//!   the frames it is handed whole and in order. The driver sets no connect deadline of its
//!   own: the core closes a connection still connecting after `request_timeout`, and the
//!   driver then abandons the attempt. `Output::Disconnect` lets an established connection
//!   write what is queued, then close. Events from a connection the core has since dropped
//!   are harmless: the core ignores stale ids.
//! * **Backpressure.** When the core answers `Full`, the task keeps that one record aside and
//!   stops reading the command queue until deliveries free space. The bounded command queue
//!   then fills, and [`ProducerHandle::send`] waits. Nothing in the driver grows without bound:
//!   commands are bounded by the queue's capacity, records by the core's `buffer_memory` /
//!   `buffer_max_records`, and read chunks by the event channel. A connection's write queue
//!   holds what the core has transmitted and the socket has not yet taken: the core bounds it
//!   with `max_in_flight` requests, and the driver stops reading commands while any
//!   connection's backlog exceeds [`ProducerBuilder::write_backlog`] (this is what bounds it
//!   with `acks=none`, where a batch is done as soon as it is handed over).
//! * **Flush.** Records accepted between two flushes form a cohort; a flush resolves when no
//!   record of its cohort or an earlier one is unreported. Records that were waiting for their
//!   topic's metadata are flushed again when it arrives.
//! * **Reports.** Each record carries the sending end of a one-shot slot (slots come from
//!   blocks of 64 that each sending thread allocates, not one allocation per record). Its
//!   [`DeliveryFuture`] resolves when
//!   the core reports the record. Dropping the future only discards the report: the record is
//!   still delivered. The driver always asks the core for success reports
//!   (`report_successes` is forced on) because every future must resolve. A record the core
//!   refuses when the task hands it over (too large, invalid partition, closed) fails with
//!   [`ProduceError::Refused`] and comes back, as with the mio driver.
//! * **Detached records.** [`ProducerHandle::send_detached`] skips the per-record future: the
//!   record carries a caller's `u64` tag, and its [`Report`] goes to the
//!   [`ProducerBuilder::on_delivery`] callback, run on the producer task (as the Java client
//!   and librdkafka report through callbacks). This is the cheaper path for high rates.
//!   [`ProducerHandle::send_batch_detached`] and [`ProducerHandle::try_send_batch_detached`]
//!   queue a whole burst of them under one lock.
//! * **Interceptors.** [`ProducerBuilder::interceptor`] adds an [`Interceptor`]: its
//!   `on_send` sees and may change each record on the producer task before the core takes it
//!   (stamp headers, such as a `traceparent`), its `on_acknowledgement` each report before the
//!   application gets it.
//! * **Metrics.** [`ProducerHandle::metrics`] asks the task for the core's [`MetricsSnapshot`]
//!   (names and meanings in [`producer_core::metrics`]); render it as Prometheus text with
//!   [`MetricsSnapshot::render_prometheus`], or, with the feature `metrics`, hand it to the
//!   [`metrics`](https://docs.rs/metrics) facade with `metrics_facade::publish`.
//! * **Transactions.** A producer started with a `transactional.id` has a [`Transactions`]
//!   handle ([`ProducerHandle::transactions`]; `None` without one): `init`, `begin`,
//!   `send_offsets`, `commit` and `abort`, each queued for the task like a flush and resolved
//!   when the core completes it (at the latest after `max_block`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
// The errors hand the record back by value, as the core's do; boxing would only move it.
#![allow(clippy::result_large_err)]

mod actor;
mod builder;
mod completion;
mod connection;
mod control;
mod delivery;
mod error;
mod handle;
#[cfg(feature = "opentelemetry")]
pub mod otel;
mod shared;
mod token;
mod transactions;

pub use builder::ProducerBuilder;
pub use delivery::{DeliveryFuture, DeliveryResult, Report};
pub use error::{BatchClosed, DeliveryError, ProducerStopped, SendError, StartError, TrySendError};
pub use handle::ProducerHandle;
pub use transactions::Transactions;

pub use producer_driver::{Acknowledgement, Interceptor};

pub use producer_core::{
    Acks, Compression, Config, ConfigBuilder, ConfigError, ConsumerGroupMetadata, DeliveryFailure,
    ErrorCode, Header, InFlight, MetricsSnapshot, OAuthToken, OffsetToCommit, Partitioner,
    ProduceError, PurgeScope, Record, RecordMetadata, SendErrorReason, TopicPartitions,
    TransactionError,
};
pub use producer_driver::{CloseOutcome, FlushOutcome, PartitionsError};

/// Publishing [`MetricsSnapshot`]s through the `metrics` facade (feature `metrics`).
#[cfg(feature = "metrics")]
pub use producer_driver::metrics_facade;
