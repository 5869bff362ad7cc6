//! [mio](https://docs.rs/mio) drivers for the sans-IO Kafka producer in [`producer_core`].
//!
//! Two layers:
//!
//! - [`MioDriver`]: embeddable. It owns a [`producer_core::Producer`] and its sockets, and
//!   registers them in **your** `mio::Poll` under a [`TokenRange`] you choose. Your loop passes
//!   it the events of its tokens, polls with its [`MioDriver::next_timeout`], calls
//!   [`MioDriver::handle_timeout`] and drains [`MioDriver::poll_delivery`] (or gives the
//!   driver a [`DeliverySink`] of its own with [`MioDriver::with_sink`] to receive each report
//!   as it is produced; a loop sending many records may read the clock once for several
//!   with [`MioDriver::send_at`]).
//! - [`ThreadedProducer`]: ready-made. A thread runs its own `mio::Poll` with a `MioDriver`;
//!   the cloneable handle has a non-blocking, bounded [`ThreadedProducer::send`],
//!   [`ThreadedProducer::flush`] and [`ThreadedProducer::close`]; reports go to a callback run
//!   on the producer thread.
//!
//! With a `transactional.id`, each has its transactional operations behind a handle (`None`
//! without one): [`MioDriver::transactions`] ([`MioTransactions`]: non-blocking, each result
//! from [`MioDriver::poll_transaction`]) and [`ThreadedProducer::transactions`]
//! ([`ThreadedTransactions`]: blocking).
//!
//! Both are thin: the protocol, batching, retries and timeouts are the core's, connection
//! deadlines included (the core closes a connection still connecting after `request_timeout`;
//! the drivers keep no timer of their own). The drivers open non-blocking connections
//! (resolving host names on a helper thread, never on the event loop), write frames as the
//! sockets allow, read until `WouldBlock`, and fill missing record timestamps with the wall
//! clock. Operators get `tracing` events for connections (opened, failed, lost, closed) and for
//! the producer's events (retries at `warn`, fatal errors at `error`). What they share with
//! the tokio driver (flush tracking, write queues, the command queue, timestamps, event
//! logging) is in `producer-driver`.
//!
//! # Example
//! A threaded producer whose only broker accepts connections and never answers: the record
//! fails once its delivery timeout has passed, and comes back in its report.
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use producer_mio::{Config, Record, ThreadedProducer};
//!
//! let silent_broker = std::net::TcpListener::bind("127.0.0.1:0")?;
//! let port = silent_broker.local_addr()?.port();
//! let config = Config::builder([("127.0.0.1", port)])
//!     .request_timeout(Duration::from_millis(100))
//!     .max_block(Duration::from_millis(200))
//!     .delivery_timeout(Duration::from_millis(300))
//!     .build()?;
//! let (reports, received) = mpsc::channel();
//! let producer = ThreadedProducer::<u32>::spawn(config, 1024, move |report| {
//!     let _ = reports.send(report);
//! })?;
//! producer.send_with(Record::new("events", "hello"), 7)?;
//! let report = received.recv()?;
//! assert_eq!(report.opaque, 7);
//! let failure = report.result.expect_err("no broker answered");
//! assert_eq!(failure.record.value.as_deref(), Some(&b"hello"[..]));
//! let metrics = producer.metrics().expect("asked from outside the callback");
//! assert_eq!(metrics.counters.records_failed, 1);
//! producer.close();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Metrics
//! [`MioDriver::metrics`] and [`ThreadedProducer::metrics`] give the core's
//! [`MetricsSnapshot`] (names and meanings in [`producer_core::metrics`]); render it as
//! Prometheus text with [`MetricsSnapshot::render_prometheus`], or, with the feature
//! `metrics`, hand it to the [`metrics`](https://docs.rs/metrics) facade with
//! `metrics_facade::publish`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
// Send errors hand the record back by value, as the core does; boxing would cost an
// allocation on every refusal (`Full` is the hot one).
#![allow(clippy::result_large_err)]

mod driver;
mod error;
#[cfg(feature = "opentelemetry")]
pub mod otel;
mod partitions;
mod resolver;
mod sink;
mod socket;
mod threaded;
mod tls;
mod token;
mod tokens;
mod transactions;

pub use driver::MioDriver;
pub use error::StartError;
pub use sink::{DeliveryQueue, DeliverySink};
pub use threaded::{BatchClosed, ThreadedBuilder, ThreadedProducer, TrySendError};
pub use tokens::TokenRange;
pub use transactions::{MioTransactions, ThreadedTransactions};

pub use producer_driver::{Acknowledgement, Interceptor};

pub use producer_core::{
    Config, ConsumerGroupMetadata, Delivery, DeliveryFailure, Event, InFlight, MetricsSnapshot,
    OffsetToCommit, Partitioner, ProduceError, PurgeScope, Record, RecordMetadata, TopicPartitions,
    TransactionError, TransactionResult,
};
pub use producer_driver::{CloseOutcome, FlushOutcome, PartitionsError};

/// Publishing [`MetricsSnapshot`]s through the `metrics` facade (feature `metrics`).
#[cfg(feature = "metrics")]
pub use producer_driver::metrics_facade;
