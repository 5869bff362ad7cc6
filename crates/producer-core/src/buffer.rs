//! What the producer holds against its buffer limits, and the batch buffers it reuses.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::config::Config;
use crate::record::RECORD_BATCH_OVERHEAD;

/// Records accepted and not yet reported, and the bytes they count against `buffer_memory`.
/// A record is charged once, at `send`, and released once, when its report is queued.
/// Of those bytes, the ones of records acknowledged and held for their transaction's end are
/// counted apart too: the queue-delay limit counts only the unacknowledged ones.
#[derive(Debug, Default)]
pub(crate) struct BufferUse {
    bytes: usize,
    records: usize,
    /// Bytes of acknowledged records held (a transactional producer's, until the end of
    /// their transaction): part of `bytes`.
    acknowledged_held: usize,
}

impl BufferUse {
    /// Whether one more record of `size` bytes stays within the configured limits.
    #[inline]
    pub(crate) fn has_room(&self, size: usize, config: &Config) -> bool {
        self.bytes + size <= config.buffer_memory && self.records < config.buffer_max_records
    }

    /// Counts one accepted record.
    #[inline]
    pub(crate) fn charge(&mut self, size: usize) {
        self.bytes += size;
        self.records += 1;
    }

    /// Releases `records` records worth `bytes` in all (their reports are queued).
    pub(crate) fn release(&mut self, bytes: usize, records: usize) {
        self.bytes -= bytes;
        self.records -= records;
    }

    /// Lowers the charge of records still held by `bytes` (they moved to a cheaper place).
    pub(crate) fn discount(&mut self, bytes: usize) {
        self.bytes -= bytes;
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of records not yet acknowledged: what the queue-delay limit counts.
    #[inline(always)]
    pub(crate) fn unacknowledged_bytes(&self) -> usize {
        self.bytes - self.acknowledged_held
    }

    /// Records worth `bytes` were acknowledged and stay held (for their transaction's end).
    pub(crate) fn hold_acknowledged(&mut self, bytes: usize) {
        self.acknowledged_held += bytes;
    }

    /// Acknowledged records held worth `bytes` are about to be reported (and released).
    pub(crate) fn end_acknowledged_hold(&mut self, bytes: usize) {
        self.acknowledged_held -= bytes;
    }

    pub(crate) fn records(&self) -> usize {
        self.records
    }
}

/// Batch buffers: lent to open batches, taken back from finished ones and kept for new ones,
/// so a steady stream of batches allocates (and page-faults) nothing; and the rule for how
/// large a batch's buffer is.
///
/// A batch buffer holds what its batch holds, not `batch_size` up front, except within a fixed
/// budget:
/// - While the buffers of batches opened at full size (the class of `batch_size`, and room for
///   the report entries of a full batch) hold less than the budget, a new batch opens at full
///   size too: with a few busy partitions, a batch is written into one buffer and never moves.
/// - Past it, a new batch gets the smallest buffer its first record fits in, which doubles
///   when the next record does not fit in it (see [`crate::batch::OpenBatch::try_append`]).
///   Such a batch holds at most twice its bytes (and at least [`BufferPool::MIN_CAPACITY`]):
///   many partitions with a record or two each cost what those records take, not `batch_size`
///   each.
///
/// Buffers are kept by size class: powers of two from [`BufferPool::MIN_CAPACITY`] to the
/// smallest one that holds `batch_size` bytes. A buffer of another size (an outsized record
/// alone in its batch, a compressed batch, a batch trimmed when it was sealed) is freed when
/// given back.
///
/// The budget of full-size batches and the bytes of free buffers kept are each a sixteenth of
/// `buffer_memory`, and never more than [`BufferPool::MAX_BYTES`]: the fixed part of what the
/// producer holds beyond the records it counts against `buffer_memory`.
#[derive(Debug)]
pub(crate) struct BufferPool {
    /// Free buffers by class: `free[k]` holds buffers of capacity `MIN_CAPACITY << k`.
    free: Vec<Vec<Vec<u8>>>,
    /// Bytes of buffers in `free`.
    bytes: usize,
    /// Most bytes kept in `free`, and most bytes of batches opened at full size.
    max_bytes: usize,
    /// The largest class: the smallest power of two of at least `batch_size` bytes.
    top: usize,
    /// Bytes of the batches opened at full size that are still open (each [`FullSize`] gives
    /// its bytes back when dropped).
    full_size: Arc<AtomicUsize>,
}

/// The share of the full-size budget an open batch holds (see [`BufferPool`]): given back
/// when it is dropped, as the batch is sealed or fails.
#[derive(Debug)]
pub(crate) struct FullSize {
    budget: Arc<AtomicUsize>,
    bytes: usize,
}

impl Drop for FullSize {
    fn drop(&mut self) {
        self.budget.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl BufferPool {
    /// The smallest buffer a batch gets: the 61-byte batch header and a few small records.
    pub(crate) const MIN_CAPACITY: usize = 128;

    /// The most bytes of free buffers kept, and of batches opened at full size, whatever
    /// `buffer_memory` is.
    const MAX_BYTES: usize = 4 << 20;

    /// A pool for batches of `batch_size` bytes within a sixteenth of `buffer_memory` (see
    /// [`BufferPool`]).
    pub(crate) fn new(config: &Config) -> Self {
        let top = Self::class_of(config.batch_size.max(RECORD_BATCH_OVERHEAD));
        let max_bytes = (config.buffer_memory / 16).min(Self::MAX_BYTES);
        let classes = (top / Self::MIN_CAPACITY).trailing_zeros() as usize + 1;
        BufferPool {
            free: (0..classes).map(|_| Vec::new()).collect(),
            bytes: 0,
            max_bytes,
            top,
            full_size: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A full-size buffer for a new batch whose first record takes `needed` bytes (header
    /// included) and whose report entries will take `entries` bytes, if the budget of
    /// full-size batches has room for both; the share of the budget goes with the batch.
    /// `None`: open the batch with [`BufferPool::take`].
    pub(crate) fn take_full_size(
        &mut self,
        needed: usize,
        entries: usize,
    ) -> Option<(Vec<u8>, FullSize)> {
        let bytes = self.top.saturating_add(entries);
        let in_use = self.full_size.load(Ordering::Relaxed);
        if needed > self.top || in_use.saturating_add(bytes) > self.max_bytes {
            return None;
        }
        self.full_size.fetch_add(bytes, Ordering::Relaxed);
        let share = FullSize {
            budget: self.full_size.clone(),
            bytes,
        };
        Some((self.take_class(self.top), share))
    }

    /// The capacity of the class that holds `bytes`: the smallest power of two of at least
    /// `bytes` and [`BufferPool::MIN_CAPACITY`] (saturating at the largest power of two).
    fn class_of(bytes: usize) -> usize {
        bytes
            .max(Self::MIN_CAPACITY)
            .checked_next_power_of_two()
            .unwrap_or(1 << (usize::BITS - 1))
    }

    /// The index in `free` of a class capacity.
    fn index_of(class: usize) -> usize {
        (class / Self::MIN_CAPACITY).trailing_zeros() as usize
    }

    /// An empty buffer for at least `needed` bytes, no more than twice that (and at least
    /// [`BufferPool::MIN_CAPACITY`]): a kept one, or a new one. A buffer for more than half the
    /// largest class (a record that takes most of a batch, or is larger than one) is allocated
    /// to the byte: such a batch holds one record or two, and a buffer of the next class would
    /// be up to half empty while it waits for its answer.
    pub(crate) fn take(&mut self, needed: usize) -> Vec<u8> {
        if needed > self.top / 2 {
            return Vec::with_capacity(needed);
        }
        self.take_class(Self::class_of(needed))
    }

    /// An empty buffer of capacity `class` (a class): a kept one, or a new one.
    fn take_class(&mut self, class: usize) -> Vec<u8> {
        match self.free[Self::index_of(class)].pop() {
            Some(buf) => {
                self.bytes -= class;
                buf
            }
            None => Vec::with_capacity(class),
        }
    }

    /// Keeps a buffer no longer needed if it is of a class and the pool has room; frees it
    /// otherwise. (`_batch_size`: the configured one, which the pool knows already.)
    pub(crate) fn give(&mut self, mut buf: Vec<u8>, _batch_size: usize) {
        let class = buf.capacity();
        let of_a_class =
            class >= Self::MIN_CAPACITY && class <= self.top && class.is_power_of_two();
        if of_a_class && self.bytes + class <= self.max_bytes {
            buf.clear();
            self.bytes += class;
            self.free[Self::index_of(class)].push(buf);
        }
    }

    /// Bytes of the buffers kept.
    #[cfg(test)]
    pub(crate) fn kept_bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(batch_size: usize, buffer_memory: usize) -> BufferPool {
        let config = Config::builder([("k", 9092)])
            .batch_size(batch_size)
            .buffer_memory(buffer_memory)
            .max_request_size(buffer_memory.min(1 << 20))
            .build()
            .unwrap();
        BufferPool::new(&config)
    }

    /// A buffer for `needed` bytes is the smallest power of two that holds them (at least
    /// 128), so never more than twice what is needed; past half the largest class (a record
    /// that fills most of a batch, or an outsized one) it is exact.
    #[test]
    fn take_gives_the_smallest_class_that_holds_the_bytes() {
        let mut p = pool(16 * 1024, 32 << 20);
        for (needed, capacity) in [
            (0, 128),
            (61, 128),
            (129, 256),
            (5000, 8192),
            (8192, 8192),
            (8193, 8193),
            (10_100, 10_100),
            (16 * 1024, 16 * 1024),
            (16 * 1024 + 1, 16 * 1024 + 1),
            (1 << 20, 1 << 20),
        ] {
            let buf = p.take(needed);
            assert!(buf.is_empty());
            assert_eq!(buf.capacity(), capacity, "for {needed} bytes");
        }
    }

    /// Buffers given back are reused by class, buffers of no class are freed, and the pool
    /// keeps a sixteenth of `buffer_memory` at most.
    #[test]
    fn kept_buffers_are_reused_by_class_and_bounded() {
        let mut p = pool(16 * 1024, 1 << 20);
        let a = p.take(3000);
        let ptr = a.as_ptr();
        p.give(a, 16 * 1024);
        assert_eq!(p.kept_bytes(), 4096);
        let b = p.take(2100);
        assert_eq!(b.as_ptr(), ptr, "the kept buffer is reused");
        assert_eq!(p.kept_bytes(), 0);
        let (full, share) = p.take_full_size(200, 0).unwrap();
        let ptr = full.as_ptr();
        p.give(full, 16 * 1024);
        drop(share);
        assert_eq!(p.kept_bytes(), 16 * 1024);
        let (again, _share) = p.take_full_size(200, 0).unwrap();
        assert_eq!(again.as_ptr(), ptr, "a full-size buffer is reused");
        p.give(Vec::with_capacity(10_000), 16 * 1024);
        p.give(Vec::with_capacity(64), 16 * 1024);
        p.give(Vec::with_capacity(32 * 1024), 16 * 1024);
        assert_eq!(p.kept_bytes(), 0, "buffers of no class are freed");
        for _ in 0..100 {
            p.give(Vec::with_capacity(16 * 1024), 16 * 1024);
        }
        assert_eq!(
            p.kept_bytes(),
            (1 << 20) / 16,
            "a sixteenth of buffer_memory"
        );
    }
}
