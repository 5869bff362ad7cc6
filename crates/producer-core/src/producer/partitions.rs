//! A topic's partitions for the application: [`Producer::partitions`] (what is known now),
//! [`Producer::request_partitions`] (make the topic known and be told when its metadata
//! arrives: [`Event::PartitionsKnown`], or [`Event::PartitionsUnavailable`] when the topic may
//! not be used or `max_block` passes first), and the application's [`crate::Partitioner`]
//! ([`Producer::set_partitioner`]).
//!
//! A topic asked for is a topic in use like one sent to: it is in every Metadata request, it
//! counts among the topics the producer holds, and it is forgotten after
//! `metadata.max.idle.ms` without a record or another ask (never while an ask waits). An ask
//! waits in the topic's state (one deadline per topic, however many asks), on the holding
//! timer ([`TimerKind::Holding`]), so nothing grows per call.

use std::sync::Arc;
use std::time::Instant;

use crate::partitioners::{Custom, Partitioner};
use crate::timer::TimerKind;
use crate::topic_name::{check_topic_name, InvalidTopicName};
use crate::types::{Event, Output, ProduceError};

use super::Producer;

/// A topic's partitions as the producer knows them ([`Producer::partitions`]): how many, and
/// each one's leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitions {
    topic: Arc<str>,
    leaders: Vec<i32>,
}

impl TopicPartitions {
    /// The partitions of `topic`, one leader node id per partition (-1: none known): for a
    /// driver or a test double that answers on the core's behalf.
    #[must_use]
    pub fn new(topic: Arc<str>, leaders: Vec<i32>) -> Self {
        TopicPartitions { topic, leaders }
    }

    /// The topic.
    #[must_use]
    pub fn topic(&self) -> &Arc<str> {
        &self.topic
    }

    /// How many partitions the topic has (at least 1).
    #[must_use]
    pub fn count(&self) -> u32 {
        self.leaders.len() as u32
    }

    /// The node id of the leader of partition `p`, -1 when none is known (an election, a
    /// broker down) or `p` is not below [`TopicPartitions::count`].
    #[must_use]
    pub fn leader(&self, p: u32) -> i32 {
        self.leaders.get(p as usize).copied().unwrap_or(-1)
    }

    /// Each partition's leader, by partition (-1: none known).
    #[must_use]
    pub fn leaders(&self) -> &[i32] {
        &self.leaders
    }
}

impl<T> Producer<T> {
    /// A producer routing records sent without a partition with `partitioner` (see
    /// [`Producer::set_partitioner`]).
    pub fn with_partitioner(
        config: crate::Config,
        now: Instant,
        partitioner: Box<dyn Partitioner>,
    ) -> Self {
        let mut p = Producer::new(config, now);
        p.set_partitioner(partitioner);
        p
    }

    /// Routes every record sent without an explicit partition with `partitioner` from now on,
    /// instead of the built-in rule (murmur2 of the key, the adaptive sticky partition for
    /// null keys; `partitioner.ignore.keys` then has no effect, the adaptive settings still
    /// govern [`crate::Route::Sticky`]). Call it before the first `send` (records already in batches stay where they
    /// are; records held for their topic's metadata are routed by it when the metadata
    /// arrives). It replaces any partitioner set before. See [`crate::Partitioner`] for when
    /// it is called and what its errors and panics do.
    pub fn set_partitioner(&mut self, partitioner: Box<dyn Partitioner>) {
        self.partitioner = Some(Custom(partitioner));
    }

    /// The partitions of `topic` and their leaders, as the latest metadata says; `None` while
    /// the topic's metadata is not known (the producer never sent to it nor asked for it, or
    /// the answer has not come yet: see [`Producer::request_partitions`]). Cheap: reads the
    /// producer's state, allocates the list of leaders. Changes nothing.
    #[must_use]
    pub fn partitions(&self, topic: &str) -> Option<TopicPartitions> {
        let t = self.topics.get(self.topics.lookup(topic)?);
        if !t.known {
            return None;
        }
        Some(TopicPartitions {
            topic: t.name.clone(),
            leaders: t.partitions.iter().map(|p| p.leader()).collect(),
        })
    }

    /// Asks for `topic`'s partitions: the topic becomes one in use (as at its first `send`: it
    /// is asked for in Metadata at once, and counts among the topics the producer holds until
    /// `metadata.max.idle.ms` without use). The answer is an event out of
    /// [`Producer::poll_output`]: [`Event::PartitionsKnown`] once its metadata is known (at
    /// once when it is; then [`Producer::partitions`] has them), or
    /// [`Event::PartitionsUnavailable`] when the cluster refuses the topic or `max_block`
    /// passes first (a topic that does not exist, the cluster unreachable), or at once when
    /// the producer is closing or failed. Asking again while an ask waits adds no deadline:
    /// one event answers both. `Err` only for a name that breaks Kafka's rules (nothing
    /// changes then).
    pub fn request_partitions(
        &mut self,
        now: Instant,
        topic: &str,
    ) -> Result<(), InvalidTopicName> {
        self.touch(now);
        if self.topics.lookup(topic).is_none() {
            check_topic_name(topic)?;
        }
        let name: Arc<str> = Arc::from(topic);
        let refused = match self.fatal_error() {
            Some(e) => Some(e.clone()),
            None => self.lifecycle.closing.then_some(ProduceError::Closed),
        };
        if let Some(error) = refused {
            self.partitions_event(Event::PartitionsUnavailable { topic: name, error });
            return Ok(());
        }
        let (t, new) = self.topics.id_of(&name, now);
        if new {
            self.request_metadata_for_new_topic();
        }
        let ts = self.topics.get(t);
        if let Some(code) = ts.error {
            let error = ProduceError::Broker {
                code,
                message: None,
                possibly_persisted: false,
            };
            let topic = ts.name.clone();
            self.partitions_event(Event::PartitionsUnavailable { topic, error });
        } else if ts.known {
            let event = Event::PartitionsKnown {
                topic: ts.name.clone(),
                count: ts.partitions.len() as u32,
            };
            self.partitions_event(event);
        } else if ts.partitions_asked.is_none() {
            let deadline = self.now + self.config.max_block;
            self.topics.get_mut(t).partitions_asked = Some(deadline);
            self.timers.arm(deadline, TimerKind::Holding { topic: t });
        }
        Ok(())
    }

    fn partitions_event(&mut self, event: Event) {
        self.outputs.push_back(Output::Event(event));
    }

    /// Topic `t`'s metadata became known: answers an ask waiting for it.
    pub(super) fn partitions_became_known(&mut self, t: u32) {
        let ts = self.topics.get_mut(t);
        if ts.partitions_asked.take().is_some() {
            let event = Event::PartitionsKnown {
                topic: ts.name.clone(),
                count: ts.partitions.len() as u32,
            };
            self.partitions_event(event);
        }
    }

    /// Topic `t` may not be used (`error`): answers an ask waiting for it.
    pub(super) fn partitions_refused(&mut self, t: u32, error: ProduceError) {
        let ts = self.topics.get_mut(t);
        if ts.partitions_asked.take().is_some() {
            let topic = ts.name.clone();
            self.partitions_event(Event::PartitionsUnavailable { topic, error });
        }
    }

    /// The holding timer of topic `t` fired: an ask past its deadline is answered
    /// unavailable, as a record held as long fails ([`Producer::unknown_topic_error`]).
    pub(super) fn partitions_ask_expired(&mut self, t: u32) {
        let due = self.topics.get(t).partitions_asked;
        if due.is_some_and(|d| d <= self.now) {
            let error = self.unknown_topic_error();
            self.partitions_refused(t, error);
        }
    }

    /// Why a topic's metadata did not come within `max_block`: with metadata from the cluster
    /// the topic is known not to exist; without any, the cluster was never reached.
    pub(super) fn unknown_topic_error(&self) -> ProduceError {
        if self.metadata.ever_refreshed() {
            ProduceError::UnknownTopic
        } else {
            ProduceError::DeliveryTimeout {
                possibly_persisted: false,
                last_connection_error: self.brokers.error_for(-1),
            }
        }
    }
}
