//! What the simulator's tests share, in one module:
//! * [`client`]: a small hand-rolled Kafka client that drives the simulated brokers with
//!   kafka-protocol's client-side encoders (for the broker-rule and network tests);
//! * [`run`]: a producer wired to the simulated cluster, and the invariants every run must
//!   keep (for the scenario and property tests).
//!
//! Error codes are `producer_core::ErrorCode`'s named constants, re-exported here.
#![allow(dead_code)]

pub mod client;
pub mod run;

#[allow(unused_imports)]
pub use producer_core::ErrorCode;
