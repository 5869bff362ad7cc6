//! `kafka_sansio._core`: the extension module of the Python package `kafka-sansio`
//! (`crates/producer-py/python/kafka_sansio`), built by maturin as a stable-ABI (abi3) wheel for
//! CPython 3.9 and later.
//!
//! The package is an asyncio driver of [`producer_core`]: the application's own event loop
//! (asyncio's or uvloop's) opens the connections (`loop.create_connection` with a `Protocol`,
//! names resolved by the loop, TLS by Python's `ssl`), arms the core's one deadline with one
//! `loop.call_at` handle, and feeds what it reads to the core; no thread is started. This
//! crate is the Rust half: the `core::Core` class owning the core (records in, one call per
//! record; reports out, resolved from Rust in one call per loop turn), the connection table
//! (`conns`), the configuration through the core's property parser (`settings`) and the
//! values and exceptions crossing to Python (`convert`). The Python half (`_producer.py`)
//! keeps the loop's side: transports, the timer handle, backpressure waits, the async API.
//! For scripts, `sync::SyncCore` puts the same core on `producer-mio`'s `ThreadedProducer`
//! (its own thread owns the sockets), delivery callbacks run in `poll` and `flush`.
//!
//! Cargo builds it as an `rlib` too, so that `cargo test` and `cargo doc` see it; the
//! `extension-module` feature (on only when maturin builds the wheel) leaves libpython out of
//! the link, as an extension module must.
#![warn(missing_docs)]

mod conns;
mod convert;
mod core;
mod settings;
mod sync;

use pyo3::prelude::*;

/// The module `kafka_sansio._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<core::Core>()?;
    m.add_class::<sync::SyncCore>()?;
    m.add_class::<convert::PyRecordMetadata>()?;
    m.add_class::<convert::PyRecord>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
