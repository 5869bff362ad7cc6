//! A topic's partitions and the partitioner, for both mio producers: [`MioDriver::partitions`]
//! and [`MioDriver::request_partitions`] (non-blocking: the answer is an event),
//! [`MioDriver::set_partitioner`]; [`ThreadedProducer::partitions_for`] (blocking, with a
//! timeout).

use std::sync::Arc;
use std::time::{Duration, Instant};

use producer_core::{InvalidTopicName, Partitioner, TopicPartitions};
use producer_driver::{Command, PartitionsError};

use crate::driver::MioDriver;
use crate::sink::DeliverySink;
use crate::threaded::ThreadedProducer;

impl<T, S: DeliverySink<T>> MioDriver<T, S> {
    /// Routes every record sent without an explicit partition with `partitioner` instead of
    /// the built-in rule (murmur2 of the key, the adaptive sticky partition for null keys).
    /// Call it right after creating the driver, before the first send (it replaces any
    /// partitioner set before; records already in batches stay where they are). It runs on
    /// the loop's thread, once per such record; see [`producer_core::Partitioner`] for its
    /// errors and panics (they fail that record alone).
    pub fn set_partitioner(&mut self, partitioner: Box<dyn Partitioner>) {
        self.parts_mut().0.set_partitioner(partitioner);
    }

    /// The partitions of `topic` and their leaders as the latest metadata says; `None` while
    /// they are not known (see [`MioDriver::request_partitions`]). Changes nothing.
    pub fn partitions(&self, topic: &str) -> Option<TopicPartitions> {
        self.core().partitions(topic)
    }

    /// Asks for `topic`'s partitions (the topic is then in use, as after a send to it): once
    /// its metadata arrives, [`MioDriver::poll_event`] (and a sink's events) gives
    /// [`producer_core::Event::PartitionsKnown`] and [`MioDriver::partitions`] has them; if
    /// the cluster refuses the topic or `max.block.ms` passes first,
    /// [`producer_core::Event::PartitionsUnavailable`]. Keep running the loop meanwhile.
    /// `Err` only for a name that breaks Kafka's rules.
    pub fn request_partitions(&mut self, topic: &str) -> Result<(), InvalidTopicName> {
        let now = Instant::now();
        let asked = self.parts_mut().0.request_partitions(now, topic);
        self.drive(now);
        asked
    }
}

impl<T: Send + 'static> ThreadedProducer<T> {
    /// The partitions of `topic` and their leaders, asking the cluster when they are not known
    /// yet (the topic is then in use, as after a send to it): blocks until its metadata
    /// arrives, `timeout` passes ([`PartitionsError::TimedOut`]; the ask goes on in the
    /// producer, bounded by `max.block.ms`), or the producer answers that the partitions are
    /// not to be had ([`PartitionsError::Unavailable`]: the cluster refused the topic, or
    /// `max.block.ms` passed first; [`PartitionsError::InvalidTopic`] for a name that breaks
    /// Kafka's rules). Known partitions come back at once. Call it before sending to choose
    /// explicit partitions, or to size work per partition; a partition count only grows.
    /// [`PartitionsError::Closed`] after the producer stopped, and when called from the
    /// delivery callback (the producer thread cannot wait for itself). The ask queues behind
    /// the commands before it: while the producer's buffer is full it waits for room as a
    /// flush does (`timeout` still bounds the call).
    pub fn partitions_for(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<TopicPartitions, PartitionsError> {
        let topic: Arc<str> = Arc::from(topic);
        let rx = self
            .queue_call(|tx| Command::Partitions(topic, tx))
            .ok_or(PartitionsError::Closed)?;
        match rx.recv_timeout(timeout) {
            Ok(result) => result,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(PartitionsError::TimedOut),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(PartitionsError::Closed),
        }
    }
}
