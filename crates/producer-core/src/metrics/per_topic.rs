//! [`TopicMetrics`]: one topic's part of a snapshot (Java's `producer-topic-metrics`).

use std::sync::Arc;

/// One topic's part of a snapshot: the topics in use (a topic forgotten after
/// `metadata.max.idle.ms` drops out, its series with it). Java's `producer-topic-metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicMetrics {
    /// The topic's name.
    pub topic: Arc<str>,
    /// Records carried by Produce requests (retries included): `record-send-total`.
    pub records_sent: u64,
    /// Record batch bytes carried by Produce requests (retries included): `byte-total`.
    pub bytes_sent: u64,
    /// What those batches held before compression.
    pub uncompressed_bytes_sent: u64,
    /// Records put back to be sent again: `record-retry-total`.
    pub records_retried: u64,
    /// Records reported failed: `record-error-total`.
    pub records_failed: u64,
}

impl TopicMetrics {
    /// `compression-rate`: bytes sent over their size before compression (NaN before any
    /// batch was sent).
    pub fn compression_rate(&self) -> f64 {
        if self.uncompressed_bytes_sent == 0 {
            f64::NAN
        } else {
            self.bytes_sent as f64 / self.uncompressed_bytes_sent as f64
        }
    }
}
