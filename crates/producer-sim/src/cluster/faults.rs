//! Faults a test injects: leadership moves, broker stops, connection resets and stalls, error
//! responses, delayed and throttled responses.

use std::time::{Duration, Instant};

use super::network::Stall;
use super::state::Service;
use super::transactions::{CoordinatorKind, INTERNAL_PARTITIONS};
use super::SimCluster;
use crate::{ConnId, SimError};

/// An error response to inject, see [`SimCluster::inject_error`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedError {
    /// The API whose responses are affected ([`API_PRODUCE`](crate::API_PRODUCE), [`API_METADATA`](crate::API_METADATA),
    /// [`API_INIT_PRODUCER_ID`](crate::API_INIT_PRODUCER_ID), [`API_API_VERSIONS`](crate::API_API_VERSIONS), and the
    /// transaction APIs: [`API_FIND_COORDINATOR`](crate::API_FIND_COORDINATOR) (every key),
    /// [`API_ADD_PARTITIONS_TO_TXN`](crate::API_ADD_PARTITIONS_TO_TXN) (every partition of one transaction),
    /// [`API_ADD_OFFSETS_TO_TXN`](crate::API_ADD_OFFSETS_TO_TXN), [`API_END_TXN`](crate::API_END_TXN) and
    /// [`API_TXN_OFFSET_COMMIT`](crate::API_TXN_OFFSET_COMMIT) (every partition), and the telemetry APIs
    /// [`API_GET_TELEMETRY_SUBSCRIPTIONS`](crate::API_GET_TELEMETRY_SUBSCRIPTIONS) and
    /// [`API_PUSH_TELEMETRY`](crate::API_PUSH_TELEMETRY)). An injected answer changes
    /// no coordinator state.
    pub api_key: i16,
    /// Only this topic (Produce, Metadata); `None` matches every topic.
    pub topic: Option<String>,
    /// Only this partition (Produce, Metadata); `None` matches every partition.
    pub partition: Option<i32>,
    /// The error code to answer with.
    pub error_code: i16,
    /// How many matches to affect: Produce partitions, Metadata topics (or partitions when
    /// `partition` is set), or whole responses for the other APIs.
    pub count: u32,
    /// Produce only: when true the batch is still appended (if it passes every check) before
    /// the error is returned, modelling NOT_ENOUGH_REPLICAS_AFTER_APPEND or a REQUEST_TIMED_OUT
    /// after the write. When false nothing is appended and no producer state changes.
    pub persist: bool,
}

impl SimCluster {
    /// Another producer with the same transactional id starts (a zombie's successor): the
    /// coordinator handles its InitProducerId as Kafka does, retried while it answers
    /// CONCURRENT_TRANSACTIONS (an open transaction is aborted first, with its markers). The
    /// producer holding the old epoch is fenced from then on. Returns the new producer id and
    /// epoch, or the error code the coordinator answered.
    pub fn fence_transactional_id(
        &mut self,
        at: Instant,
        transactional_id: &str,
    ) -> Result<(i64, i16), i16> {
        let mut at = at;
        for _ in 0..100 {
            match self.txn_init(at, true, transactional_id, 60_000, None) {
                Err(code) if code == producer_core::ErrorCode::CONCURRENT_TRANSACTIONS.0 => {
                    // The abort's markers may take `transaction_marker_delay`.
                    at += self
                        .cfg
                        .transaction_marker_delay
                        .max(Duration::from_millis(1));
                    self.txn_tick(at);
                }
                r => return r,
            }
        }
        Err(producer_core::ErrorCode::CONCURRENT_TRANSACTIONS.0)
    }

    /// Moves a partition's leadership to `new_leader` and increments its leader epoch. The log
    /// and producer state stay with the partition (replicated log).
    pub fn move_leader(
        &mut self,
        topic: &str,
        partition: i32,
        new_leader: i32,
    ) -> Result<(), SimError> {
        if !self.brokers.contains_key(&new_leader) {
            return Err(SimError::UnknownBroker(new_leader));
        }
        let t = self
            .topics
            .get_mut(topic)
            .ok_or_else(|| SimError::UnknownTopic(topic.to_string()))?;
        let p = usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get_mut(i))
            .ok_or_else(|| SimError::UnknownPartition {
                topic: topic.to_string(),
                partition,
            })?;
        p.leader = new_leader;
        p.leader_epoch += 1;
        Ok(())
    }

    /// Deletes a topic with its logs and producer state, as Kafka's DeleteTopics does: Metadata
    /// then answers `UNKNOWN_TOPIC_OR_PARTITION` for it, Produce by name the same, Produce v13
    /// by its old id `UNKNOWN_TOPIC_ID`. [`SimCluster::create_topic`] with the same name makes a
    /// new incarnation with a new topic id. Returns how many records it held.
    pub fn delete_topic(&mut self, topic: &str) -> Result<usize, SimError> {
        let t = self
            .topics
            .remove(topic)
            .ok_or_else(|| SimError::UnknownTopic(topic.to_string()))?;
        *self.deleted_topics.entry(topic.to_string()).or_default() += 1;
        Ok(t.partitions.iter().map(|p| p.log.len()).sum())
    }

    /// Stops a broker: its connections are reset (the client gets [`NetEvent::Closed`](crate::NetEvent::Closed) at `now`,
    /// or [`NetEvent::ConnectFailed`](crate::NetEvent::ConnectFailed) if the connection had not completed; bytes in flight are
    /// lost) and new connections to it fail until [`SimCluster::start_broker`].
    pub fn stop_broker(&mut self, broker_id: i32, now: Instant) -> Result<(), SimError> {
        let now = self.clock(now);
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.running = false;
        self.reset_conns(now, |c| c.broker == Some(broker_id));
        Ok(())
    }

    /// The controller gives up on `broker_id` (Kafka: its session timed out, or it shut down
    /// in a controlled way): every partition it leads moves to another running broker (leader
    /// epoch + 1), and so does every internal partition it leads, with the coordination of
    /// every key hashing there ([`SimCluster::move_coordinator`]). The new leaders are the
    /// running brokers other than `broker_id` in turn, in node-id order. The broker itself
    /// keeps running or not as it was. Returns how many partitions moved (internal ones
    /// included); none when no other broker runs.
    pub fn fail_over(&mut self, broker_id: i32) -> Result<usize, SimError> {
        if !self.brokers.contains_key(&broker_id) {
            return Err(SimError::UnknownBroker(broker_id));
        }
        let others: Vec<i32> = self
            .brokers
            .iter()
            .filter(|(id, b)| **id != broker_id && b.running)
            .map(|(id, _)| *id)
            .collect();
        if others.is_empty() {
            return Ok(0);
        }
        let mut moved = 0;
        for t in self.topics.values_mut() {
            for p in t.partitions.iter_mut().filter(|p| p.leader == broker_id) {
                p.leader = others[moved % others.len()];
                p.leader_epoch += 1;
                moved += 1;
            }
        }
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        for kind in [CoordinatorKind::Group, CoordinatorKind::Transaction] {
            for p in 0..INTERNAL_PARTITIONS {
                let leader = self
                    .coordinator_moves
                    .get(&(kind, p))
                    .copied()
                    .unwrap_or(ids[p as usize % ids.len()]);
                if leader == broker_id {
                    self.coordinator_moves
                        .insert((kind, p), others[moved % others.len()]);
                    moved += 1;
                }
            }
        }
        Ok(moved)
    }

    /// Restarts a stopped broker (its partitions' logs were never lost).
    pub fn start_broker(&mut self, broker_id: i32) -> Result<(), SimError> {
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.running = true;
        Ok(())
    }

    /// Resets one connection: the client gets [`NetEvent::Closed`](crate::NetEvent::Closed) at `now` (subject to a stall),
    /// bytes in flight both ways are lost. Ignored for unknown or already closed connections.
    pub fn drop_connection(&mut self, now: Instant, conn: ConnId) {
        let now = self.clock(now);
        let target = conn.0;
        self.reset_conns_by_id(now, |id, _| id == target);
    }

    /// Resets every connection to a broker, like [`SimCluster::drop_connection`].
    pub fn drop_connections_to(&mut self, now: Instant, broker_id: i32) {
        let now = self.clock(now);
        self.reset_conns(now, |c| c.broker == Some(broker_id));
    }

    /// Holds everything the broker sends (responses, closes, connection completions): nothing is
    /// delivered to the client from it until `until` (`Some`), or until
    /// [`SimCluster::unstall_connections_to`] (`None`). The broker keeps handling requests
    /// meanwhile. Use it to exceed a client's request timeout.
    pub fn stall_connections_to(
        &mut self,
        broker_id: i32,
        until: Option<Instant>,
    ) -> Result<(), SimError> {
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.stall = match until {
            Some(t) => Stall::Until(t),
            None => Stall::Indefinite,
        };
        Ok(())
    }

    /// Ends a stall at `now`: held events become deliverable from `now` on, in order.
    pub fn unstall_connections_to(&mut self, broker_id: i32, now: Instant) -> Result<(), SimError> {
        let now = self.clock(now);
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.stall = match b.stall {
            Stall::None => Stall::None,
            Stall::Until(t) => Stall::Until(t.min(now)),
            Stall::Indefinite => Stall::Until(now),
        };
        Ok(())
    }

    /// Queues an error injection (see [`InjectedError`]). Several may be active; the first
    /// matching one with a count left applies.
    pub fn inject_error(&mut self, error: InjectedError) {
        if error.count > 0 {
            self.injections.push(error);
        }
    }

    /// Answers the next `count` Metadata requests of v13 or later with only the top-level
    /// error `code` (no brokers, no topics), as a broker that cannot answer does (e.g.
    /// REBOOTSTRAP_REQUIRED, KIP-1102). Older versions have no such field and are unaffected.
    pub fn inject_metadata_top_level_error(&mut self, code: i16, count: u32) {
        self.metadata_top_level_error = (count > 0).then_some((code, count));
    }

    /// Adds `extra` to the travel time of the next `count` responses of the broker (later
    /// responses on the same connection wait behind them: TCP order).
    pub fn delay_responses(
        &mut self,
        broker_id: i32,
        extra: Duration,
        count: u32,
    ) -> Result<(), SimError> {
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.delay = (count > 0).then_some((extra, count));
        Ok(())
    }

    /// From `now` on, the broker serves Produce requests one at a time, from all its
    /// connections, each for `per_request` plus its size at `bytes_per_second`, and answers
    /// each when it is served: a request arriving while others are served waits for them, so
    /// a pipeline of requests adds its queue to each round trip, as on a Kafka node bound by
    /// its CPU. With a small `per_request` its work is per byte: it drains the same whatever
    /// the requests' size; with a large one its work is per request: larger requests drain
    /// more.
    pub fn serve_produce_in_turn(
        &mut self,
        broker_id: i32,
        per_request: Duration,
        bytes_per_second: u64,
        now: Instant,
    ) -> Result<(), SimError> {
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.service = Some(Service {
            per_request,
            bytes_per_second,
            busy_until: now,
        });
        Ok(())
    }

    /// Puts `throttle_time_ms = ms` in the next `count` responses of the broker that have the
    /// field. (The broker does not mute the channel afterwards.)
    pub fn set_throttle(&mut self, broker_id: i32, ms: i32, count: u32) -> Result<(), SimError> {
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        b.throttle = (count > 0).then_some((ms, count));
        Ok(())
    }

    /// Takes one throttle value for a response of `broker`.
    pub(super) fn take_throttle(&mut self, broker: i32) -> i32 {
        let Some(b) = self.brokers.get_mut(&broker) else {
            return 0;
        };
        match b.throttle {
            Some((ms, n)) => {
                b.throttle = (n > 1).then_some((ms, n - 1));
                ms
            }
            None => 0,
        }
    }

    /// Finds and consumes one injection for `api_key` that satisfies `pred`.
    pub(super) fn take_injection(
        &mut self,
        api_key: i16,
        pred: impl Fn(&InjectedError) -> bool,
    ) -> Option<InjectedError> {
        let idx = self
            .injections
            .iter()
            .position(|inj| inj.api_key == api_key && inj.count > 0 && pred(inj))?;
        let inj = self.injections.get_mut(idx)?;
        inj.count -= 1;
        let out = inj.clone();
        if inj.count == 0 {
            self.injections.remove(idx);
        }
        Some(out)
    }
}
