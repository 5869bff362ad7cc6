//! What the producer holds against its buffer limits, and the batch buffers it reuses.

use crate::config::Config;
use crate::record::RECORD_BATCH_OVERHEAD;

/// Records accepted and not yet reported, and the bytes they count against `buffer_memory`.
/// A record is charged once, at `send`, and released once, when its report is queued.
#[derive(Debug, Default)]
pub(crate) struct BufferUse {
    bytes: usize,
    records: usize,
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

    pub(crate) fn records(&self) -> usize {
        self.records
    }
}

/// Batch buffers of finished batches, kept for new batches: a steady stream of batches then
/// allocates (and page-faults) nothing. Holds at most [`BufferPool::MAX_BYTES`] of buffers.
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    free: Vec<Vec<u8>>,
}

impl BufferPool {
    /// Most bytes of buffers kept.
    const MAX_BYTES: usize = 4 << 20;

    /// The capacity a batch buffer needs for batches of `batch_size` bytes.
    fn capacity_for(batch_size: usize) -> usize {
        batch_size.max(RECORD_BATCH_OVERHEAD)
    }

    /// A buffer for a new batch of `batch_size` bytes: a kept one, or a new one.
    pub(crate) fn take(&mut self, batch_size: usize) -> Vec<u8> {
        self.free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(Self::capacity_for(batch_size)))
    }

    /// Keeps a buffer no longer needed if it suits batches of `batch_size` bytes (not smaller,
    /// nor much larger after an outsized record) and the pool has room.
    pub(crate) fn give(&mut self, buf: Vec<u8>, batch_size: usize) {
        let want = Self::capacity_for(batch_size);
        let fits = buf.capacity() >= want && buf.capacity() <= 2 * want;
        if fits && (self.free.len() + 1) * want <= Self::MAX_BYTES {
            self.free.push(buf);
        }
    }
}
