//! The producer's side of [`crate::active`]: listing a partition with its leader when it gets
//! something to send, telling a valid entry from a stale one, dropping the stale ones.

use crate::active::Listed;

use super::Producer;

impl<T> Producer<T> {
    /// Lists partition `p` of `topic` with its leader's broker when it holds anything and is
    /// not listed there yet. Call it when the partition gets something to send: a new open
    /// batch ([`Producer::open_batch`]); [`Producer::mark_partition_dirty`] calls it too (a
    /// batch back for retry, a new leader). A partition without a known leader is listed once
    /// it has one (`set_leader` marks it dirty).
    pub(super) fn list_partition(&mut self, topic: u32, p: u32) {
        let leader = self.topics.partition(topic, p).leader();
        if let Some(slot) = self.brokers.slot_of_node(leader) {
            self.list_partition_with(slot, topic, p);
        }
    }

    /// [`Producer::list_partition`] for the leader's slot `slot`, known to the caller.
    pub(super) fn list_partition_with(&mut self, slot: u32, topic: u32, p: u32) {
        let pq = self.topics.partition(topic, p);
        if pq.is_empty() || pq.listing().is_some_and(|l| l.slot == slot) {
            return;
        }
        let listing = self.brokers.list(slot, (topic, p));
        self.topics
            .partition_mut(topic, p)
            .set_listing(Some(listing));
        let b = self.brokers.slot(slot);
        if b.active.needs_compaction(b.partitions.len()) {
            self.compact_active(slot);
        }
    }

    /// Takes partition `p` of `topic` off whatever list it is on (its leader changed: it is
    /// listed again with the new one when it has something to send). Its old entry is stale.
    pub(super) fn unlist_partition(&mut self, topic: u32, p: u32) {
        self.topics.partition_mut(topic, p).set_listing(None);
    }

    /// Whether `entry` of `slot`'s list is the partition's current listing (not stale).
    pub(super) fn listing_valid(&self, slot: u32, entry: Listed) -> bool {
        self.topics
            .get_checked(entry.topic)
            .and_then(|t| t.partitions.get(entry.partition as usize))
            .and_then(|pq| pq.listing())
            .is_some_and(|l| l.slot == slot && l.seq == entry.seq)
    }

    /// Whether `slot`'s list holds a partition with something in it (open, queued or in
    /// flight).
    pub(super) fn has_active_partition(&self, slot: u32) -> bool {
        let active = &self.brokers.slot(slot).active;
        (0..active.len()).any(|i| {
            active.get(i).is_some_and(|e| {
                self.listing_valid(slot, e)
                    && !self.topics.partition(e.topic, e.partition).is_empty()
            })
        })
    }

    /// Drops the stale entries of `slot`'s list (see [`crate::active`]'s cap).
    fn compact_active(&mut self, slot: u32) {
        let mut active = std::mem::take(&mut self.brokers.slot_mut(slot).active);
        active.retain(|&e| self.listing_valid(slot, e));
        self.brokers.slot_mut(slot).active = active;
    }
}
