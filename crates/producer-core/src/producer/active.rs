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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::config::Config;
    use crate::types::Record;

    use super::super::Producer;

    /// Entries of `slot`'s list that are the current listing of their partition.
    fn valid(p: &Producer<()>, slot: u32) -> Vec<(u32, u32)> {
        let active = &p.brokers.slot(slot).active;
        (0..active.len())
            .filter_map(|i| active.get(i))
            .filter(|&e| p.listing_valid(slot, e))
            .map(|e| (e.topic, e.partition))
            .collect()
    }

    /// Partitions holding a record whose leader moves between two brokers a thousand times:
    /// each is validly listed exactly once, with its current leader, and neither list grows
    /// past its cap (twice the partitions led plus 64), whatever the stale entries left behind.
    #[test]
    fn leader_flaps_keep_one_valid_listing_and_bounded_lists() {
        let now = Instant::now();
        let config = Config::builder([("k", 9092)])
            .linger(Duration::from_secs(3600))
            .enable_idempotence(false)
            .build()
            .unwrap();
        let mut p: Producer<()> = Producer::new(config, now);
        let a = p.brokers.node_slot(1, "a", 9092).unwrap();
        let b = p.brokers.node_slot(2, "b", 9092).unwrap();
        let (t, _) = p.topics.id_of(&Arc::from("t"), now);
        p.topics.get_mut(t).grow_partitions(4);
        p.topics.get_mut(t).known = true;
        for part in 0..4 {
            p.set_leader(t, part, 1, 0);
            p.send(
                now,
                Record::new("t", &b"v"[..]).with_partition(part as i32),
                (),
            )
            .unwrap();
        }
        let mut both = valid(&p, a);
        both.sort_unstable();
        assert_eq!(
            both,
            vec![(t, 0), (t, 1), (t, 2), (t, 3)],
            "listed with broker 1"
        );
        for epoch in 1..1000 {
            let (leader, slot) = if epoch % 2 == 1 { (2, b) } else { (1, a) };
            for part in 0..4 {
                p.set_leader(t, part, leader, epoch);
            }
            let (now_valid, other) = (valid(&p, slot), valid(&p, if slot == a { b } else { a }));
            assert_eq!(
                now_valid.len(),
                4,
                "epoch {epoch}: each listed with its new leader"
            );
            assert!(
                other.is_empty(),
                "epoch {epoch}: no valid entry left with the old one"
            );
            for s in [a, b] {
                let led = p.brokers.slot(s).partitions.len();
                assert!(
                    p.brokers.slot(s).active.len() <= 2 * led.max(4) + 64 + 1,
                    "epoch {epoch}: list of slot {s} holds {}",
                    p.brokers.slot(s).active.len()
                );
            }
        }
    }
}
