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
//! * [`timestamp`]: the wall clock for records sent without a timestamp (the core reads no
//!   clock).
//! * [`log_event`]: the core's events, logged with `tracing`.
//! * [`tls`]: the rustls client configuration for `SSL` and `SASL_SSL` (CA file or platform
//!   roots, mTLS, endpoint identification), with typed errors for unusable files.
//! * `metrics_facade` (feature `metrics`): the core's metrics published through the
//!   `metrics` facade crate.
//!
//! Nothing here does I/O or depends on a runtime; nothing here is protocol logic (that is the
//! core's).
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod command_queue;
mod events;
mod flush;
#[cfg(feature = "metrics")]
pub mod metrics_facade;
pub mod timestamp;
pub mod tls;
mod write_queue;

pub use command_queue::{Burst, CommandQueue, Refill, Refused, Stopped};
pub use events::log_event;
pub use flush::{Cohort, Done, FlushTracker};
pub use write_queue::{WriteQueue, MAX_IOV};
