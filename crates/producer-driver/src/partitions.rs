//! A handle's `partitions_for(topic)`: the ask handed to the core
//! ([`producer_core::Producer::request_partitions`]) and the callers waiting for its answer,
//! answered from the core's events ([`Event::PartitionsKnown`], then
//! [`producer_core::Producer::partitions`]; [`Event::PartitionsUnavailable`]), or with
//! [`PartitionsError::Closed`] when the loop stops. The core bounds the wait by `max.block.ms`.

use std::sync::Arc;
use std::time::Instant;

use producer_core::{Event, InvalidTopicName, ProduceError, Producer, TopicPartitions};

/// Why a handle's `partitions_for` has no partitions to give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionsError {
    /// The topic's name breaks Kafka's rules: no broker would take it.
    #[error("{0}")]
    InvalidTopic(InvalidTopicName),
    /// The topic's partitions are not to be had: the cluster refused the topic
    /// ([`ProduceError::Broker`]), or `max.block.ms` passed without its metadata
    /// ([`ProduceError::UnknownTopic`]: the cluster does not have it;
    /// [`ProduceError::DeliveryTimeout`]: no broker was reached), or the producer is closing or
    /// failed (see [`Event::PartitionsUnavailable`]).
    #[error("partitions unavailable: {0}")]
    Unavailable(ProduceError),
    /// The caller's own timeout passed first (the blocking call with a timeout). The ask goes
    /// on in the producer: a later call may find the partitions known at once.
    #[error("timed out waiting for the topic's partitions")]
    TimedOut,
    /// The producer has stopped (closed, or its loop ended).
    #[error("producer closed")]
    Closed,
}

/// The answer a `partitions_for` caller gets.
pub type PartitionsResult = Result<TopicPartitions, PartitionsError>;

/// The callers waiting for a topic's partitions, each with its waiter `W`.
pub(crate) struct PartitionWaiters<W> {
    /// Callers by topic, in the order they asked (a handful: each blocks or awaits).
    waiting: Vec<(Arc<str>, W)>,
    /// Topics whose `PartitionsKnown` came and whose callers are answered at the next settle
    /// (the event carries no leaders: the core gives them then).
    known: Vec<Arc<str>>,
}

impl<W> Default for PartitionWaiters<W> {
    fn default() -> Self {
        PartitionWaiters {
            waiting: Vec::new(),
            known: Vec::new(),
        }
    }
}

impl<W> PartitionWaiters<W> {
    /// Hands a caller's ask to the core, and keeps `waiter` for the answer; an invalid name is
    /// answered at once through `answer`.
    pub(crate) fn ask<T>(
        &mut self,
        core: &mut Producer<T>,
        now: Instant,
        topic: Arc<str>,
        waiter: W,
        answer: impl FnOnce(W, PartitionsResult),
    ) {
        match core.request_partitions(now, &topic) {
            Ok(()) => self.waiting.push((topic, waiter)),
            Err(e) => answer(waiter, Err(PartitionsError::InvalidTopic(e))),
        }
    }

    /// One of the core's events: an unavailable topic's callers are answered now, a known
    /// topic's at the next [`PartitionWaiters::settle`].
    pub(crate) fn event(&mut self, event: &Event, mut answer: impl FnMut(W, PartitionsResult)) {
        match event {
            Event::PartitionsKnown { topic, .. }
                if self.waiting.iter().any(|(t, _)| t == topic) && !self.known.contains(topic) =>
            {
                self.known.push(topic.clone());
            }
            Event::PartitionsUnavailable { topic, error } => {
                for w in self.take(topic) {
                    answer(w, Err(PartitionsError::Unavailable(error.clone())));
                }
            }
            _ => {}
        }
    }

    /// Answers the callers of topics whose partitions became known, with the core's view.
    pub(crate) fn settle<T>(
        &mut self,
        core: &Producer<T>,
        mut answer: impl FnMut(W, PartitionsResult),
    ) {
        for topic in std::mem::take(&mut self.known) {
            let result = core
                .partitions(&topic)
                .ok_or(PartitionsError::Unavailable(ProduceError::UnknownTopic));
            for w in self.take(&topic) {
                answer(w, result.clone());
            }
        }
    }

    /// The loop stops: every caller still waiting is answered [`PartitionsError::Closed`].
    pub(crate) fn close_all(&mut self, mut answer: impl FnMut(W, PartitionsResult)) {
        self.known.clear();
        for (_, w) in self.waiting.drain(..) {
            answer(w, Err(PartitionsError::Closed));
        }
    }

    /// The waiters of `topic`, taken out in the order they asked.
    fn take(&mut self, topic: &str) -> Vec<W> {
        let mut taken = Vec::new();
        let mut i = 0;
        while i < self.waiting.len() {
            if &*self.waiting[i].0 == topic {
                taken.push(self.waiting.remove(i).1);
            } else {
                i += 1;
            }
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use producer_core::Config;

    use super::*;

    /// Without a broker: an invalid name is answered at once; a topic whose metadata never
    /// comes is answered unavailable at `max_block` through the core's event; a caller still
    /// waiting when the loop stops gets `Closed`.
    #[test]
    fn callers_are_answered_from_the_core_and_at_the_end() {
        let t0 = Instant::now();
        let config = Config::builder([("127.0.0.1", 9)])
            .max_block(Duration::from_secs(2))
            .build()
            .unwrap();
        let mut core: Producer<()> = Producer::new(config, t0);
        let mut waiters = PartitionWaiters::default();
        let mut answers: Vec<(u32, PartitionsResult)> = Vec::new();
        waiters.ask(&mut core, t0, "bad name".into(), 1, |w, r| {
            answers.push((w, r))
        });
        assert!(matches!(
            answers.as_slice(),
            [(1, Err(PartitionsError::InvalidTopic(_)))]
        ));
        waiters.ask(&mut core, t0, "t".into(), 2, |w, r| answers.push((w, r)));
        waiters.ask(&mut core, t0, "t".into(), 3, |w, r| answers.push((w, r)));
        waiters.ask(&mut core, t0, "u".into(), 4, |w, r| answers.push((w, r)));
        core.handle_timeout(t0 + Duration::from_secs(2));
        while let Some(out) = core.poll_output() {
            if let producer_core::Output::Event(e) = out {
                waiters.event(&e, |w, r| answers.push((w, r)));
            }
        }
        waiters.settle(&core, |w, r| answers.push((w, r)));
        let unavailable: Vec<u32> = answers
            .iter()
            .filter(|(_, r)| matches!(r, Err(PartitionsError::Unavailable(_))))
            .map(|(w, _)| *w)
            .collect();
        assert_eq!(
            unavailable,
            [2, 3, 4],
            "both topics, every caller, in order"
        );
        waiters.ask(&mut core, t0, "v".into(), 5, |w, r| answers.push((w, r)));
        waiters.close_all(|w, r| answers.push((w, r)));
        assert_eq!(answers.last(), Some(&(5, Err(PartitionsError::Closed))));
    }
}
