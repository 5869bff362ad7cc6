//! The caps on what a broker's answer may make the producer hold, beyond what its bytes could
//! encode (every array a parser reads is bounded by its bytes first: see
//! [`crate::protocol::primitives`]). An answer over one of these caps is refused with
//! [`crate::Event::AnswerRefused`]; `docs/bounds.md` lists every table and buffer with its cap.
//!
//! The counts are librdkafka's protocol sanity limits (`RD_KAFKAP_BROKERS_MAX`,
//! `RD_KAFKAP_TOPICS_MAX`, `RD_KAFKAP_PARTITIONS_MAX` in `rdkafka_int.h`), which refuse the same
//! answers: far above any real cluster (Kafka's own guidance is a few thousand partitions per
//! broker and a few hundred brokers per cluster), low enough that a table sized by one answer
//! stays within a few tens of megabytes.

use std::time::Duration;

/// Brokers one Metadata answer may list (and node slots the producer keeps for nodes: bootstrap
/// addresses come on top). An answer listing more is refused whole.
pub const MAX_BROKERS: usize = 10_000;

/// Topics one Metadata answer may list. An answer listing more is refused whole. (The producer
/// asks only for the topics it uses; this bounds what is read of an answer that lists others.)
pub const MAX_TOPICS: usize = 1_000_000;

/// Partitions one topic may have. A topic entry listing more is refused (that topic only).
pub const MAX_PARTITIONS: usize = 100_000;

/// The longest throttle the producer honours: a `throttle_time_ms` above it waits this long.
///
/// A broker throttles a client over its quota for about one quota window's worth of excess
/// (the request quota is capped at `quota.window.size.seconds`, 1 s by default, and bandwidth
/// quotas are measured over `quota.window.num` windows, 11 s by default); a minute is well past
/// either, and short enough that a bogus throttle cannot hold records until their delivery
/// timeout (120 s by default).
pub const MAX_THROTTLE: Duration = Duration::from_secs(60);
