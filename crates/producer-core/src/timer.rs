//! The producer's deadlines, kept in one heap so `poll_timeout` is O(1).
//!
//! Entries are not removed when their deadline stops mattering: when an entry fires, its
//! handler checks whether it still applies (lazy deletion). Owners keep at most one armed entry
//! per partition, connection or purpose, so the heap stays small however many records flow.
//!
//! The one exception is a number that is about to name something else: a topic the producer
//! forgets, whose number a later topic takes, and a broker slot a departed node frees. Their
//! entries are removed then ([`Timers::forget_topic`], [`Timers::forget_slot`]), so no stale
//! entry can fire on the new owner.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use crate::partitioner::Rng;

/// What a deadline is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TimerKind {
    /// The open batch of a partition reaches `linger`.
    Linger {
        topic: u32,
        partition: u32,
        batch: u64,
    },
    /// A partition's backoff before retrying ends.
    Backoff { topic: u32, partition: u32 },
    /// The oldest batch of a partition reaches its delivery timeout.
    Delivery { topic: u32, partition: u32 },
    /// The oldest request of a connection reaches its request timeout.
    Request { slot: u32 },
    /// A broker may be connected to again, or its throttle ends.
    Broker { slot: u32 },
    /// Metadata should be refreshed (age, or a rate-limited refresh request).
    Metadata,
    /// Records held for a topic with unknown metadata reach `max_block`.
    Holding { topic: u32 },
    /// InitProducerId may be retried.
    ProducerId,
    /// The transactional producer's coordinator request may be retried, a coordinator may be
    /// connected to again, the open transaction reaches `transaction.timeout.ms`, the call
    /// waiting for a transactional operation reaches `max.block.ms`, or a close stops waiting
    /// for the transaction's end.
    Transaction,
    /// A connection's SASL session nears its end: authenticate again.
    Reauthenticate { slot: u32 },
    /// The OAUTHBEARER token asked of the application reaches `token_timeout` unanswered.
    TokenRequest,
    /// The deadline of a `flush_within` (its pending flush reports it timed out).
    FlushDeadline,
    /// The deadline of a `close_within` (what is still held is ended then).
    CloseDeadline,
    /// Client telemetry's next request (a subscription or a push) is due.
    Telemetry,
}

impl TimerKind {
    /// The topic the entry names, if it names one.
    fn topic(self) -> Option<u32> {
        match self {
            TimerKind::Linger { topic, .. }
            | TimerKind::Backoff { topic, .. }
            | TimerKind::Delivery { topic, .. }
            | TimerKind::Holding { topic } => Some(topic),
            _ => None,
        }
    }

    /// The broker slot the entry names, if it names one.
    fn slot(self) -> Option<u32> {
        match self {
            TimerKind::Request { slot }
            | TimerKind::Broker { slot }
            | TimerKind::Reauthenticate { slot } => Some(slot),
            _ => None,
        }
    }
}

/// A min-heap of deadlines.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, TimerKind)>>,
}

impl Timers {
    /// Adds a deadline.
    pub(crate) fn arm(&mut self, at: Instant, kind: TimerKind) {
        self.heap.push(Reverse((at, kind)));
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Removes and returns the earliest entry if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<TimerKind> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => self.heap.pop().map(|Reverse((_, k))| k),
            _ => None,
        }
    }

    /// Removes every entry naming `topic`: call it when the topic is forgotten, before its
    /// number can name another topic. (Linear in the heap; topics are forgotten rarely.)
    pub(crate) fn forget_topic(&mut self, topic: u32) {
        self.heap.retain(|Reverse((_, k))| k.topic() != Some(topic));
    }

    /// Removes every entry naming broker `slot`: call it when the slot is retired, before a
    /// new node takes it over.
    pub(crate) fn forget_slot(&mut self, slot: u32) {
        self.heap.retain(|Reverse((_, k))| k.slot() != Some(slot));
    }

    /// Entries held (stale ones included).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

/// Exponential backoff with jitter (KIP-580): `base * 2^attempts` times a random factor in
/// [0.8, 1.2), at most `max`.
pub(crate) fn backoff(rng: &mut Rng, base: Duration, max: Duration, attempts: u32) -> Duration {
    let exp = base.as_secs_f64() * 2f64.powi(attempts.min(30) as i32) * rng.factor(0.8, 1.2);
    Duration::from_secs_f64(exp.min(max.as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_deadline_order_only_when_due() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.arm(t0 + Duration::from_millis(5), TimerKind::Metadata);
        t.arm(t0 + Duration::from_millis(1), TimerKind::ProducerId);
        assert_eq!(t.next(), Some(t0 + Duration::from_millis(1)));
        assert_eq!(t.pop_due(t0), None);
        assert_eq!(
            t.pop_due(t0 + Duration::from_millis(10)),
            Some(TimerKind::ProducerId)
        );
        assert_eq!(
            t.pop_due(t0 + Duration::from_millis(10)),
            Some(TimerKind::Metadata)
        );
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn forgetting_a_topic_or_a_slot_removes_only_the_entries_naming_it() {
        let t0 = Instant::now();
        let at = t0 + Duration::from_millis(1);
        let mut t = Timers::default();
        let kinds = [
            TimerKind::Linger {
                topic: 3,
                partition: 0,
                batch: 0,
            },
            TimerKind::Backoff {
                topic: 3,
                partition: 1,
            },
            TimerKind::Delivery {
                topic: 3,
                partition: 2,
            },
            TimerKind::Holding { topic: 3 },
            TimerKind::Holding { topic: 4 },
            TimerKind::Request { slot: 3 },
            TimerKind::Broker { slot: 3 },
            TimerKind::Reauthenticate { slot: 3 },
            TimerKind::Broker { slot: 4 },
            TimerKind::Metadata,
        ];
        for k in kinds {
            t.arm(at, k);
        }
        t.forget_topic(3);
        assert_eq!(t.len(), kinds.len() - 4);
        t.forget_slot(3);
        let mut left = Vec::new();
        while let Some(k) = t.pop_due(at) {
            left.push(k);
        }
        left.sort();
        assert_eq!(
            left,
            [
                TimerKind::Broker { slot: 4 },
                TimerKind::Metadata,
                TimerKind::Holding { topic: 4 },
            ]
        );
    }
}
