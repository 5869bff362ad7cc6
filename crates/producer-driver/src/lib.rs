//! What every driver of [`producer_core`] needs, whatever runtime it puts the core on.
//!
//! `producer-mio` and `producer-tokio` share these pieces, so a driver keeps only what is
//! specific to its runtime (sockets, timers, waking):
//!
//! * [`FlushTracker`]: knows when a flush is done (every record sent before it has its
//!   report), O(1) per record.
//! * [`WriteQueue`]: the frames one connection still has to write, written with vectored
//!   writes and advanced by what each write took.
//! * [`CommandQueue`]: the bounded queue between the application's handles and the owner of
//!   the core, taken whole by swapping buffers.
//! * [`DriverLoop`]: the command layer around the core: the handles' commands applied to it,
//!   flush, close and transaction bookkeeping, reports and events handed to the application,
//!   the rule for a panic in the producer's own code. A driver implements its [`Host`].
//! * [`PartitionsError`]: what a handle's `partitions_for` answers when a topic's partitions
//!   are not to be had (the waiting callers are the [`DriverLoop`]'s, in `partitions.rs`).
//! * [`FlushOutcome`], [`CloseOutcome`]: what a `flush_within` and a `close_within` of a
//!   driver's handle answer (the waiters and the core's deadlines are kept by the loop).
//! * [`timestamp`]: the wall clock for records sent without a timestamp (the core reads no
//!   clock).
//! * [`log_event`]: the core's events, logged with `tracing`.
//! * [`ReadSizing`]: how much to read from a socket at a time, growing with traffic and
//!   shrinking back when it stops.
//! * [`Interceptor`]: the application's hooks on every record taken ([`Interceptor::on_send`],
//!   which may change it) and every report given ([`Interceptor::on_acknowledgement`]); a
//!   driver keeps them in an [`Interceptors`] chain.
//! * [`panic`](mod@panic): the one rule for panics: [`call_user`] around the application's
//!   code (the producer goes on, an event names the panic), [`contain`] around the producer's
//!   own.
//! * [`tls`]: the rustls client configuration for `SSL` and `SASL_SSL` (CA file or platform
//!   roots, mTLS, endpoint identification), with typed errors for unusable files.
//! * `metrics_facade` (feature `metrics`): the core's metrics published through the
//!   `metrics` facade crate.
//!
//! Nothing here does I/O or depends on a runtime; nothing here is protocol logic (that is the
//! core's).
//!
//! # Example
//! A driver's flush bookkeeping: records carry their [`Cohort`] through the core (in the
//! opaque value), and a flush is answered once every record accepted before it is reported.
//! ```
//! use producer_driver::FlushTracker;
//!
//! let mut flushes = FlushTracker::<&str>::default();
//! let a = flushes.accept();
//! let b = flushes.accept();
//! assert_eq!(flushes.flush("flush 1").count(), 0, "two records are unreported");
//! let c = flushes.accept(); // after the flush: does not hold it up
//! assert_eq!(flushes.reported(a).count(), 0);
//! assert_eq!(flushes.reported(b).collect::<Vec<_>>(), ["flush 1"]);
//! assert_eq!(flushes.flush("flush 2").count(), 0, "c is unreported");
//! assert_eq!(flushes.reported(c).collect::<Vec<_>>(), ["flush 2"]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod command_queue;
mod commands;
mod control;
mod driver_loop;
mod events;
mod flush;
mod interceptors;
#[cfg(feature = "metrics")]
pub mod metrics_facade;
#[cfg(feature = "opentelemetry")]
pub mod otel;
pub mod panic;
mod partitions;
mod read_sizing;
mod send_wait;
pub mod timestamp;
pub mod tls;
mod write_queue;

pub use command_queue::{Burst, CommandQueue, CoreLoad, OnFull, Refill, Refused, Stopped};
pub use commands::{deadline_after, Answered, Channel, Command, Replies, TransactionCall};
pub use control::{CloseOutcome, FlushOutcome};
pub use driver_loop::{step, CoreOf, Driven, DriverLoop, Host, Intake, LastWords, Opaque, Tracked};
pub use events::log_event;
pub use flush::{Cohort, Done, FlushTracker};
pub use interceptors::{Acknowledgement, Interceptor, Interceptors, OnSendPanicked, RecordId};
pub use panic::{call_user, contain};
pub use partitions::{PartitionsError, PartitionsResult};
pub use read_sizing::ReadSizing;
pub use send_wait::SendWaits;
pub use write_queue::{WriteQueue, MAX_IOV};
