//! Panics contained: one rule for every piece of code a driver runs.
//!
//! - **The application's code** (the delivery and event callbacks, the OAUTHBEARER token
//!   provider): a panic in it is caught around that one call ([`call_user`]); the producer goes
//!   on, and the panic is named by [`Event::CallbackPanicked`] (logged, and handed to the event
//!   callback like every event). A report whose callback panicked counts as delivered to the
//!   application: it is not handed over twice.
//! - **The producer's own code** (the core, the driver's loop): a panic in it is caught around
//!   the loop's step ([`contain`]), and the producer closes: [`Producer::fail_after_panic`]
//!   fails every record it holds with [`ProduceError::Panicked`], the driver fails what it
//!   still holds itself, and every waiting call returns. If even that panics, the driver
//!   answers everything it can still account for without the core (the records of its command
//!   queue, every flush, close, metrics and transaction call) and stops.
//!
//! What no rule can hand back: a record the core was taking in the very call that panicked
//! (it was moved into that call), and, after a second panic, the records the core held. Those
//! get no report from the mio driver; their tokio delivery futures resolve as lost. Every
//! call still returns.
//!
//! The application's partitioner ([`producer_core::Partitioner`]) runs inside the core, which
//! applies the same rule itself: its panic is caught around that one call, the record it was
//! routing fails with [`ProduceError::Partitioner`], the core names the panic with
//! [`Event::CallbackPanicked`] (`Callback::Partitioner`), and the producer goes on.
//!
//! [`ProduceError::Partitioner`]: producer_core::ProduceError::Partitioner
//! The application's code that runs before a record is accepted (an interceptor's `on_send`,
//! see [`crate::Interceptors`]) runs inside [`call_user`] too, and a panic there fails that
//! record with a typed error ([`ProduceError::Interceptor`]) instead of going on with it.
//!
//! [`Producer::fail_after_panic`]: producer_core::Producer::fail_after_panic
//! [`ProduceError::Panicked`]: producer_core::ProduceError::Panicked
//! [`ProduceError::Interceptor`]: producer_core::ProduceError::Interceptor

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use producer_core::{Callback, Event};

/// The text of a panic's payload: the message of `panic!("...")` (a `&str` or a `String`), or
/// a placeholder for any other payload.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a payload that is not text".to_owned()
    }
}

/// Runs the application's `callback` (`f`); a panic in it is caught and comes back as the
/// [`Event::CallbackPanicked`] that names it, for the driver to log and hand to the event
/// callback (see [`log_event`](crate::log_event)). What `f` captured may be left half-changed
/// by the panic: `f` must own or borrow only what the application gave (its callback) and
/// values it hands over.
#[inline]
pub fn call_user<R>(callback: Callback, f: impl FnOnce() -> R) -> Result<R, Event> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| Event::CallbackPanicked {
        callback,
        message: panic_message(&*payload),
    })
}

/// Runs a step of the producer's own code (`f`); a panic in it is caught and its message
/// comes back. After `Err`, what `f` changed cannot be trusted: the driver closes the
/// producer (see the module's rule).
#[inline]
pub fn contain<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| panic_message(&*payload))
}

/// For tests only: where a driver's loop panics on purpose, to prove that a panic in the
/// producer's own code is contained. Not part of the supported API.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InjectedPanics {
    /// Panic in the loop once it has handed this many records to the core, as it is about to
    /// hand over the next one (that record still in its queue: it is failed with the panic,
    /// like every record queued). Commands other than records (flush, metrics, transactions)
    /// go on being handled until then.
    pub after_records: Option<u64>,
    /// Panic again while failing the records after the first panic (the core cannot be
    /// trusted at all then).
    pub in_recovery: bool,
}

impl InjectedPanics {
    /// The number of records handed to the core at which to panic before the next record
    /// (`u64::MAX`: never), for a loop to compare with its count before each record it takes.
    #[inline]
    pub fn panic_at(&self) -> u64 {
        self.after_records.unwrap_or(u64::MAX)
    }

    /// Panics as [`InjectedPanics::after_records`] says: call when the loop's count of records
    /// handed over reaches [`InjectedPanics::panic_at`] and its next command is a record,
    /// before taking that command.
    #[cold]
    pub fn before_record(handed: u64) -> ! {
        panic!("injected panic in the driver's loop after {handed} records");
    }

    /// Call before failing the records after a panic.
    #[inline]
    pub fn before_recovery(&self) {
        if self.in_recovery {
            panic!("injected panic while failing the records after a panic");
        }
    }
}
