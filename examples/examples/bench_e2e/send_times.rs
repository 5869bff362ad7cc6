//! Each record's time from just before its send call to its report, in the throughput
//! workloads of our workers (see the module docs of `main.rs`: "Latency from the send call").

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One record in this many is timed (record `i` when `i % SAMPLE_EVERY == 0`): the clock is
/// read only for those, so the timing adds next to nothing to the producer's CPU figures (read
/// for every record it cost more instructions per record than the producer's whole send
/// path); 1,000,000 records still give 15,625 samples for the p99.
const SAMPLE_EVERY: u64 = 64; // a power of two (a mask picks the sampled records)

/// Send and report times of one producer's run for the sampled records, preallocated (two
/// atomics per sampled record, written without locks from the sender and the report callback).
pub(crate) struct SendTimes {
    start: Instant,
    /// Per sampled record (`i / SAMPLE_EVERY`): ns since `start` when its send was called.
    sent: Vec<AtomicU64>,
    /// Per sampled record: 1 + µs from its send call to its report, 0 before.
    micros: Vec<AtomicU32>,
}

impl SendTimes {
    /// Slots for records `0..records`, the clock starting now. Indexes beyond are ignored.
    pub(crate) fn new(records: u64) -> Arc<SendTimes> {
        let sampled = records.div_ceil(SAMPLE_EVERY);
        Arc::new(SendTimes {
            start: Instant::now(),
            sent: (0..sampled).map(|_| AtomicU64::new(0)).collect(),
            micros: (0..sampled).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    /// Call just before sending records `start..end` (one send call, or one burst).
    pub(crate) fn sending(&self, start: u64, end: u64) {
        let first = start.next_multiple_of(SAMPLE_EVERY);
        if first >= end {
            return;
        }
        let ns = self.start.elapsed().as_nanos() as u64;
        for i in (first..end).step_by(SAMPLE_EVERY as usize) {
            if let Some(slot) = self.sent.get((i / SAMPLE_EVERY) as usize) {
                slot.store(ns, Ordering::Relaxed);
            }
        }
    }

    /// Call when record `i`'s report arrives (delivered or failed).
    pub(crate) fn reported(&self, i: u64) {
        if i & (SAMPLE_EVERY - 1) != 0 {
            return;
        }
        let k = (i / SAMPLE_EVERY) as usize;
        let now = self.start.elapsed().as_nanos() as u64;
        if let (Some(sent), Some(slot)) = (self.sent.get(k), self.micros.get(k)) {
            store_micros(
                slot,
                now.saturating_sub(sent.load(Ordering::Relaxed)) / 1000,
            );
        }
    }

    /// Average and p99 (nearest rank) in µs over the sampled records reported; `None` if none was.
    pub(crate) fn summary(&self) -> Option<[u64; 2]> {
        let v = sorted_micros(&self.micros)?;
        let avg = v.iter().map(|&x| u64::from(x)).sum::<u64>() / v.len() as u64;
        Some([avg, nearest_rank(&v, 0.99)])
    }
}

/// Stores `us` microseconds in a per-record slot as 1 + µs (0 means no report yet), capped
/// below `u32::MAX` (what the open-loop workload and [`SendTimes`] both keep).
pub(crate) fn store_micros(slot: &AtomicU32, us: u64) {
    slot.store(
        us.min(u64::from(u32::MAX - 1)) as u32 + 1,
        Ordering::Relaxed,
    );
}

/// The µs stored by [`store_micros`] in the slots that have one, sorted; `None` if none has.
pub(crate) fn sorted_micros(slots: &[AtomicU32]) -> Option<Vec<u32>> {
    let mut v: Vec<u32> = slots
        .iter()
        .map(|m| m.load(Ordering::Relaxed))
        .filter(|&m| m > 0)
        .map(|m| m - 1)
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v)
}

/// The `q` quantile of sorted, non-empty `v` by nearest rank.
pub(crate) fn nearest_rank(v: &[u32], q: f64) -> u64 {
    u64::from(v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1])
}
