//! The partitions a broker has something for: what building a Produce request walks instead of
//! every partition the broker leads, so that its cost follows the batches waiting, not the
//! partition count (issue 22: flat cost as partitions grow).
//!
//! A partition is *listed* with its leader's slot when it gets something to send (a new open
//! batch, a batch back for retry, a new leader); a request walks the list in order (round
//! robin: a partition served goes to the back, one left over by `max_request_size` stays at
//! the front) and drops the partitions it finds empty. Each listing has a sequence number the
//! partition keeps ([`Listing`]); an entry whose number is not the partition's current one is
//! stale (the leader moved, the partition emptied and was listed again) and is dropped when
//! met, so a partition is served at most once per walk, and moving one costs no search.
//!
//! Cap: a list holds at most one valid entry per partition its broker leads, plus the stale
//! ones, which [`ActivePartitions::needs_compaction`] keeps below the valid ones plus 64 by
//! asking the producer to drop them (amortised: only after the list doubled).

use std::collections::VecDeque;
use std::num::NonZeroU64;

/// One entry of a broker's list: partition `partition` of topic `topic`, listed under `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Listed {
    pub(crate) topic: u32,
    pub(crate) partition: u32,
    pub(crate) seq: NonZeroU64,
}

/// Where a partition is listed: the broker slot and the listing's sequence number (kept in the
/// partition; an entry is valid while it matches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Listing {
    pub(crate) slot: u32,
    /// Never 0, so that an `Option<Listing>` in every partition takes 16 bytes, not 24.
    pub(crate) seq: NonZeroU64,
}

/// The stale entries a list may hold beyond twice the partitions its broker leads before it is
/// compacted.
const SLACK: usize = 64;

/// A broker's partitions with something to send, in the order requests serve them.
#[derive(Debug, Default)]
pub(crate) struct ActivePartitions {
    queue: VecDeque<Listed>,
}

impl ActivePartitions {
    /// Entries, valid or stale.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// The `i`-th entry from the front (`i < len`).
    pub(crate) fn get(&self, i: usize) -> Option<Listed> {
        self.queue.get(i).copied()
    }

    /// Lists a partition at the back (its partition keeps `entry.seq`).
    pub(crate) fn push(&mut self, entry: Listed) {
        self.queue.push_back(entry);
    }

    /// Takes the front entry, to serve it ([`ActivePartitions::push`] it back while its
    /// partition holds anything, else drop it).
    pub(crate) fn pop_front(&mut self) -> Option<Listed> {
        self.queue.pop_front()
    }

    /// Puts an entry taken by [`ActivePartitions::pop_front`] back in front.
    pub(crate) fn put_back_front(&mut self, entry: Listed) {
        self.queue.push_front(entry);
    }

    /// Moves the back entry (one just pushed back but not served after all) to the front: the
    /// next request starts with it.
    pub(crate) fn back_to_front(&mut self) {
        if let Some(entry) = self.queue.pop_back() {
            self.queue.push_front(entry);
        }
    }

    /// Whether the list holds more than twice `led` (the partitions its broker leads) plus
    /// [`SLACK`] entries: then the stale ones are to be dropped
    /// ([`ActivePartitions::retain`]).
    pub(crate) fn needs_compaction(&self, led: usize) -> bool {
        self.queue.len() > 2 * led + SLACK
    }

    /// Keeps the entries for which `keep` says so, in order.
    pub(crate) fn retain(&mut self, keep: impl FnMut(&Listed) -> bool) {
        self.queue.retain(keep);
    }

    /// Drops every entry of `topic` (a topic the producer forgets; its number may be reused).
    pub(crate) fn forget_topic(&mut self, topic: u32) {
        self.queue.retain(|e| e.topic != topic);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(topic: u32, partition: u32, seq: u64) -> Listed {
        Listed {
            topic,
            partition,
            seq: NonZeroU64::new(seq + 1).unwrap(),
        }
    }

    #[test]
    fn serves_in_order_and_puts_an_unserved_entry_back_in_front() {
        let mut a = ActivePartitions::default();
        a.push(e(0, 0, 1));
        a.push(e(0, 1, 2));
        let first = a.pop_front().unwrap();
        a.push(first);
        let second = a.pop_front().unwrap();
        a.push(second);
        a.back_to_front();
        assert_eq!(a.get(0), Some(e(0, 1, 2)));
        assert_eq!(a.get(1), Some(e(0, 0, 1)));
    }

    #[test]
    fn compaction_is_asked_for_only_past_twice_the_led_partitions_plus_slack() {
        let mut a = ActivePartitions::default();
        for i in 0..(2 * 10 + SLACK) as u32 {
            a.push(e(0, i, u64::from(i)));
        }
        assert!(!a.needs_compaction(10));
        a.push(e(1, 0, 999));
        assert!(a.needs_compaction(10));
        a.forget_topic(0);
        assert_eq!(a.len(), 1);
        assert!(!a.needs_compaction(0));
    }
}
