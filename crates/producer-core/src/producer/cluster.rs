//! The producer's view of the cluster, from Metadata (request and answer here): the brokers
//! (joining, and dropped when the cluster no longer lists them), each partition's leader (also
//! moved by Produce leader hints), topics that do not exist or may not be written, topics
//! forgotten after `metadata.max.idle.ms` unused, the answer's rules and caps (an answer or a
//! topic entry that breaks them is refused), and the refresh policy (wanted, rate-limited, at
//! most one in flight, aged).

use std::sync::Arc;
use std::time::Instant;

use crate::classify::{decide, Action, Request};
use crate::config::MetadataRecovery;
use crate::connection::RequestKind;
use crate::limits::{MAX_BROKERS, MAX_PARTITIONS, MAX_TOPICS};
use crate::protocol::metadata::{MetadataRequest, MetadataResponse, MetadataTopic};
use crate::protocol::ApiKey;
use crate::timer::{backoff, TimerKind};
use crate::types::{ConnId, Event, Output, ProduceError, RebootstrapReason, Violation};
use crate::ErrorCode;

use super::Producer;

/// Metadata refresh bookkeeping: at most one request in flight, rate-limited.
#[derive(Debug)]
pub(super) struct MetadataPolicy {
    /// A refresh is wanted.
    wanted: bool,
    /// A request is in flight.
    in_flight: bool,
    /// No request before this instant (rate limit).
    next_allowed: Instant,
    /// When the last successful refresh arrived.
    last_refresh: Option<Instant>,
    /// Since when a refresh has been wanted or in flight without an answer applied (the
    /// rebootstrap trigger counts from here); `None` while none is outstanding.
    unanswered_since: Option<Instant>,
    /// Going back to the bootstrap list: the next Metadata request goes to a bootstrap
    /// address, and the answer to it ends this.
    rebootstrapping: bool,
    /// Consecutive requests without a usable answer (lost, unreadable, or a top-level error):
    /// the exponent of the backoff before the next one.
    failures: u32,
}

impl MetadataPolicy {
    /// A new producer wants metadata at once.
    pub(super) fn new(now: Instant) -> Self {
        MetadataPolicy {
            wanted: true,
            in_flight: false,
            next_allowed: now,
            last_refresh: None,
            unanswered_since: Some(now),
            rebootstrapping: false,
            failures: 0,
        }
    }

    /// Whether the next Metadata request must go to a bootstrap address.
    pub(super) fn rebootstrapping(&self) -> bool {
        self.rebootstrapping
    }

    /// Whether the cluster ever answered a Metadata request.
    pub(super) fn ever_refreshed(&self) -> bool {
        self.last_refresh.is_some()
    }
}

/// Checks what a Metadata answer says as a whole, before any of it is used: at most
/// [`MAX_BROKERS`] brokers, each with a node id of 0 or more, and at most [`MAX_TOPICS`]
/// topics. An answer that breaks one of these is refused whole.
fn check_answer(resp: &MetadataResponse) -> Result<(), Violation> {
    if resp.brokers.len() > MAX_BROKERS {
        return Err(Violation::TooManyBrokers {
            count: resp.brokers.len(),
            max: MAX_BROKERS,
        });
    }
    if let Some(b) = resp.brokers.iter().find(|b| b.node_id < 0) {
        return Err(Violation::NegativeNodeId(b.node_id));
    }
    if resp.topics.len() > MAX_TOPICS {
        return Err(Violation::TooManyTopics {
            count: resp.topics.len(),
            max: MAX_TOPICS,
        });
    }
    Ok(())
}

/// Checks one topic's entry, before any of it is used: its n partition entries are exactly
/// 0..n-1 (none negative, none left out, none twice), n is at most [`MAX_PARTITIONS`], and each
/// leader is a node id (0 or more) or -1 (none). An entry that breaks one of these is refused
/// (that topic only).
fn check_topic(topic: &MetadataTopic) -> Result<(), Violation> {
    let count = topic.partitions.len();
    if count > MAX_PARTITIONS {
        return Err(Violation::TooManyPartitions {
            count,
            max: MAX_PARTITIONS,
        });
    }
    let mut seen = vec![false; count];
    for p in &topic.partitions {
        let index = p.partition_index;
        let Some(slot) = usize::try_from(index).ok().and_then(|i| seen.get_mut(i)) else {
            return Err(Violation::PartitionOutOfRange { index, count });
        };
        if std::mem::replace(slot, true) {
            return Err(Violation::DuplicatePartition(index));
        }
        if p.leader_id < -1 {
            return Err(Violation::InvalidLeader {
                partition: index,
                leader: p.leader_id,
            });
        }
    }
    Ok(())
}

impl<T> Producer<T> {
    /// Asks for a metadata refresh (rate-limited, at most one in flight).
    pub(super) fn request_metadata(&mut self) {
        self.metadata.wanted = true;
        self.note_metadata_outstanding();
        self.work_pending = true;
    }

    /// Asks for metadata for a topic the producer has not used yet: at once (the rate limit
    /// and backoff are for refreshes of what is known; Java's `requestUpdateForNewTopics`
    /// does the same), still one request in flight at a time.
    pub(super) fn request_metadata_for_new_topic(&mut self) {
        self.metadata.next_allowed = self.metadata.next_allowed.min(self.now);
        self.request_metadata();
    }

    /// A refresh is now outstanding: the rebootstrap trigger starts counting, if it was not.
    fn note_metadata_outstanding(&mut self) {
        if self.metadata.unanswered_since.is_none() {
            self.metadata.unanswered_since = Some(self.now);
            if self.config.metadata_recovery == MetadataRecovery::Rebootstrap {
                self.timers.arm(
                    self.now + self.config.rebootstrap_trigger,
                    TimerKind::Metadata,
                );
            }
        }
    }

    /// Goes back to the bootstrap list (`metadata.recovery.strategy=rebootstrap`): the next
    /// Metadata request goes to a bootstrap address (resolved again by the driver when it
    /// connects), and the cluster it describes replaces what the producer knew (brokers at new
    /// addresses, new topic ids). Once per episode: the answer applied ends it.
    pub(super) fn begin_rebootstrap(&mut self, reason: RebootstrapReason) {
        if self.metadata.rebootstrapping
            || self.config.metadata_recovery != MetadataRecovery::Rebootstrap
        {
            return;
        }
        self.metadata.rebootstrapping = true;
        self.metadata.wanted = true;
        self.metadata.unanswered_since = None;
        self.note_metadata_outstanding();
        self.stats.rebootstraps += 1;
        self.outputs
            .push_back(Output::Event(Event::Rebootstrapping { reason }));
        self.work_pending = true;
    }

    /// Sends a Metadata request for every topic in use when one is wanted (or the last one is
    /// older than `metadata_max_age`), none is in flight, and the rate limit allows it.
    pub(super) fn maybe_send_metadata(&mut self) {
        let now = self.now;
        if self
            .metadata
            .last_refresh
            .is_some_and(|t| t + self.config.metadata_max_age <= now)
        {
            self.metadata.wanted = true;
            self.note_metadata_outstanding();
        }
        if self.metadata.ever_refreshed()
            && self
                .metadata
                .unanswered_since
                .is_some_and(|t| t + self.config.rebootstrap_trigger <= now)
        {
            self.begin_rebootstrap(RebootstrapReason::MetadataUnanswered);
        }
        if !self.metadata.wanted || self.metadata.in_flight || self.fatal_error().is_some() {
            return;
        }
        if now < self.metadata.next_allowed {
            self.timers
                .arm(self.metadata.next_allowed, TimerKind::Metadata);
            return;
        }
        let Some(conn) = self.control_connection(false) else {
            return;
        };
        self.forget_idle_topics();
        let names: Vec<Arc<str>> = self.topics.iter().map(|t| t.name.clone()).collect();
        let name_refs: Vec<&str> = names.iter().map(|n| &**n).collect();
        let versions = self.brokers.conn(conn).and_then(|c| c.versions);
        let version = versions.map_or(1, |v| v.metadata);
        let req = MetadataRequest {
            topics: Some(&name_refs),
            allow_auto_topic_creation: true,
            include_topic_authorized_operations: false,
        };
        self.send_control_request(
            conn,
            ApiKey::Metadata,
            version,
            RequestKind::Metadata,
            |b| req.encode(version, b),
        );
        self.metadata.in_flight = true;
        self.metadata.wanted = false;
        // Rate limit, and backoff with jitter after requests that got no usable answer.
        self.metadata.next_allowed = now
            + backoff(
                &mut self.rng,
                self.config.retry_backoff,
                self.config.retry_backoff_max,
                self.metadata.failures,
            );
    }

    /// The Metadata request in flight was lost with its connection: another is wanted.
    pub(super) fn metadata_request_lost(&mut self) {
        self.metadata.in_flight = false;
        self.metadata.failures = self.metadata.failures.saturating_add(1);
        self.metadata.wanted = true;
        self.note_metadata_outstanding();
    }

    /// The answer to Metadata on `conn`. Returns false when it could not be parsed or breaks
    /// a rule of [`check_answer`] (the connection is then closed, and metadata asked for
    /// again).
    pub(super) fn on_metadata(&mut self, conn: ConnId, version: i16, body: &[u8]) -> bool {
        self.metadata.in_flight = false;
        let Ok(parsed) = MetadataResponse::parse(version, body) else {
            self.metadata.wanted = true;
            self.metadata.failures = self.metadata.failures.saturating_add(1);
            return false;
        };
        if let Err(violation) = check_answer(&parsed.body) {
            self.metadata.wanted = true;
            self.metadata.failures = self.metadata.failures.saturating_add(1);
            self.answer_refused(conn, None, violation);
            return false;
        }
        self.stats.trailing_response_bytes += parsed.trailing as u64;
        let mode = self.mode();
        match decide(Request::Metadata, parsed.body.error_code, mode) {
            Action::Ok => {}
            // v13's top-level error: the broker could not answer at all (nothing in the answer
            // is to be used); ask again after the retry backoff, from the bootstrap list when
            // the broker says so (KIP-1102).
            Action::Rebootstrap => {
                self.metadata.wanted = true;
                self.metadata.failures = self.metadata.failures.saturating_add(1);
                self.begin_rebootstrap(RebootstrapReason::RebootstrapRequired);
                return true;
            }
            _ => {
                self.metadata.wanted = true;
                self.metadata.failures = self.metadata.failures.saturating_add(1);
                return true;
            }
        }
        self.apply_metadata(conn, parsed.body);
        true
    }

    /// Reports an answer on `conn` (a topic's entry of it, with `topic`) refused for
    /// `violation`.
    fn answer_refused(&mut self, conn: ConnId, topic: Option<Arc<str>>, violation: Violation) {
        let node_id = self.brokers.slot(conn.slot).node_id;
        self.stats.answers_refused += 1;
        self.outputs.push_back(Output::Event(Event::AnswerRefused {
            node_id,
            api: ApiKey::Metadata,
            topic,
            violation,
        }));
    }

    /// Moves a partition to a new leader (from metadata or a Produce leader hint), and marks it
    /// as having something to send.
    pub(super) fn set_leader(&mut self, t: u32, p: u32, leader: i32, leader_epoch: i32) {
        if let Some(old) = self
            .topics
            .partition_mut(t, p)
            .set_leader(leader, leader_epoch)
        {
            self.brokers.move_partition((t, p), old, leader);
            self.unlist_partition(t, p);
        }
        self.mark_partition_dirty(t, p);
    }

    /// Applies a Metadata answer on `conn` (checked by [`check_answer`]): brokers (those it no
    /// longer lists are dropped), then per topic its error or its partitions' leaders (an entry
    /// [`check_topic`] refuses is left out, and metadata is asked for again); a topic seen with
    /// partitions for the first time routes its held records.
    fn apply_metadata(&mut self, conn: ConnId, resp: MetadataResponse) {
        let now = self.now;
        let mode = self.mode();
        self.stats.metadata_refreshes += 1;
        self.metrics.metadata_applied(now);
        if !resp.brokers.is_empty() {
            // An answer listing no broker at all says nothing about who left.
            let listed: Vec<i32> = resp.brokers.iter().map(|b| b.node_id).collect();
            for slot in self.brokers.nodes_not_listed(&listed) {
                self.drop_broker(slot);
            }
        }
        for b in &resp.brokers {
            // Within the cap and non-negative: check_answer saw to both.
            let _ = self.brokers.node_slot(b.node_id, &b.host, b.port);
        }
        let mut still_unknown = false;
        for topic in resp.topics {
            let Some(name) = topic.name.as_deref() else {
                continue;
            };
            let Some(t) = self.topics.lookup(name) else {
                continue;
            };
            if let Err(violation) = check_topic(&topic) {
                // The topic keeps what was known of it; its records wait (within their
                // timeouts) for a good answer.
                let name = self.topics.name(t);
                self.answer_refused(conn, Some(name), violation);
                still_unknown = true;
                continue;
            }
            let code = topic.error_code;
            let action = decide(Request::MetadataTopic, code, mode);
            // A topic's error counts even when the answer lists partitions with it (lenient
            // brokers do: librdkafka's mock lists them with TOPIC_AUTHORIZATION_FAILED).
            if action == Action::Fail || (action != Action::Ok && topic.partitions.is_empty()) {
                if action == Action::Missing {
                    if self.topics.get(t).known {
                        // A topic the producer used is gone (deleted, perhaps to be created
                        // again): its leaders no longer lead it. Leaderless partitions keep
                        // metadata wanted until it is back (Java: a partition without a leader
                        // asks for an update), instead of waiting on an old leader that
                        // answers UNKNOWN_TOPIC_ID or UNKNOWN_TOPIC_OR_PARTITION.
                        for p in 0..self.topics.get(t).partitions.len() as u32 {
                            self.set_leader(t, p, -1, -1);
                        }
                    } else {
                        still_unknown = true;
                    }
                } else if action == Action::Refresh {
                    still_unknown = true;
                } else {
                    self.fail_topic(t, code);
                }
                continue;
            }
            // A topic that failed before (refused by Metadata or by a Produce answer, e.g. not
            // authorized) and is listed without an error now is taken again: an ACL may have
            // been restored. Its records go to the broker, which says for itself.
            if action == Action::Ok {
                self.topics.get_mut(t).error = None;
            }
            if let Err(violation) = self.note_topic_id(t, topic.topic_id) {
                let name = self.topics.name(t);
                self.answer_refused(conn, Some(name), violation);
                still_unknown = true;
                continue;
            }
            // Exactly 0..count-1, count at most MAX_PARTITIONS: check_topic saw to it.
            let count = topic.partitions.len();
            self.grow_partitions(t, count);
            for part in &topic.partitions {
                let p = part.partition_index as u32;
                let leader = if part.leader_id >= 0 && self.brokers.knows_node(part.leader_id) {
                    part.leader_id
                } else {
                    -1
                };
                self.set_leader(t, p, leader, part.leader_epoch);
            }
            let ts = self.topics.get_mut(t);
            if !ts.known && !ts.partitions.is_empty() {
                ts.known = true;
                self.route_held(t);
                self.partitions_became_known(t);
            }
        }
        self.metadata.last_refresh = Some(now);
        self.metadata.failures = 0;
        self.metadata.unanswered_since = None;
        self.metadata.rebootstrapping = false;
        let leaderless = self
            .topics
            .iter()
            .any(|t| t.partitions.iter().any(|p| p.leader() < 0 && !p.is_empty()));
        // Records still wait for a topic the answer left out (or whose entry was refused).
        let waiting = self
            .topics
            .iter()
            .any(|t| !t.known && t.error.is_none() && !t.holding.is_empty());
        if still_unknown || leaderless || waiting {
            self.metadata.wanted = true;
            self.note_metadata_outstanding();
        }
        self.timers
            .arm(now + self.config.metadata_max_age, TimerKind::Metadata);
        self.outputs
            .push_back(Output::Event(Event::MetadataUpdated));
        self.work_pending = true;
        self.check_closed();
    }

    /// Grows topic `t`'s partition list to `count` (partitions are never removed). With
    /// idempotence, a new partition starts above the epochs of forgotten topics' partitions
    /// (the topic may be one of them, written before under this producer id): see
    /// [`crate::partition::PartitionQueue::start_above`]. A transactional producer's epoch is
    /// its coordinator's, so it forgets no topic written under its current epoch instead.
    fn grow_partitions(&mut self, t: u32, count: usize) {
        let floor = self
            .pid
            .assigned()
            .filter(|_| self.txn.is_none())
            .and_then(|(id, _)| Some((id, self.topics.epoch_floor(id)?)));
        let ts = self.topics.get_mut(t);
        let before = ts.partitions.len();
        ts.grow_partitions(count);
        if let Some((id, epoch)) = floor {
            for pq in ts.partitions.iter_mut().skip(before) {
                pq.start_above(id, epoch);
            }
        }
    }

    /// Drops the broker in `slot`, which the cluster no longer lists: the partitions it led
    /// have no leader until an answer names another, its connection is closed (each request in
    /// flight on it goes back to its owner, as for a lost connection: batches are retried as
    /// possibly written), its timers are forgotten, and its slot is free for a later node.
    fn drop_broker(&mut self, slot: u32) {
        let b = self.brokers.slot(slot);
        let node_id = b.node_id;
        let led = b.partitions.clone();
        for (t, p) in led {
            self.set_leader(t, p, -1, -1);
        }
        if let Some(c) = self.brokers.slot_mut(slot).conn.take() {
            self.outputs.push_back(Output::Disconnect { conn: c.id });
            self.requests_lost(c.id, c.inflight);
        }
        self.timers.forget_slot(slot);
        self.partitioning_forget_node(node_id);
        self.brokers.retire(slot);
        self.metrics.forget_broker(slot);
        self.stats.brokers_dropped += 1;
        self.work_pending = true;
    }

    /// Forgets the topics unused for `metadata.max.idle.ms`
    /// ([`crate::topics::TopicState::is_idle`]), as a Metadata request is about to name the
    /// topics in use. No broker leads their
    /// partitions any more, their timers are forgotten, and their numbers go to later topics;
    /// a record sent to one later finds it new.
    ///
    /// A transactional producer forgets topics only between transactions, and not one written
    /// under its current producer id and epoch (the broker keeps the partition's sequence,
    /// which a new partition would start over).
    fn forget_idle_topics(&mut self) {
        let (now, idle) = (self.now, self.config.metadata_max_idle);
        if !self.txn_quiet() {
            return;
        }
        let identity = self.pid.assigned();
        let transactional = self.txn.is_some();
        let idle_topics: Vec<u32> = self
            .topics
            .numbers()
            .filter(|&t| {
                let ts = self.topics.get(t);
                ts.is_idle(now, idle)
                    && !(transactional
                        && identity.is_some_and(|(id, epoch)| {
                            ts.highest_epoch(id).is_some_and(|e| e >= epoch)
                        }))
            })
            .collect();
        for t in idle_topics {
            self.brokers.forget_topic(t);
            self.timers.forget_topic(t);
            self.topics.forget(t, identity.map(|(id, _)| id));
            self.metrics.forget_topic(t);
            self.stats.topics_forgotten += 1;
        }
    }

    /// Records the topic id a Metadata answer gave (all zeros: the broker sent none, before
    /// Metadata v10). A different id than before means the topic was deleted and created again
    /// under its name: its partitions' leader epochs start over, and batches not yet written
    /// go to the new topic when retried, as Java's producer does (its `Sender` names topics by
    /// the ids current when each request is built). An id that is another topic's is refused:
    /// nothing changes, and the caller refuses the topic's entry.
    fn note_topic_id(&mut self, t: u32, id: [u8; 16]) -> Result<(), Violation> {
        match self.topics.set_topic_id(t, id) {
            Ok(false) => {}
            Ok(true) => {
                for p in &mut self.topics.get_mut(t).partitions {
                    p.forget_leader_epoch();
                }
                self.stats.topics_recreated += 1;
            }
            Err(_other) => return Err(Violation::TopicIdTaken),
        }
        Ok(())
    }

    /// Metadata reported a permanent error for a topic (authorization, invalid name): records
    /// held for it fail now, and later ones fail at `send`, until a Metadata answer lists the
    /// topic without an error.
    fn fail_topic(&mut self, t: u32, code: ErrorCode) {
        self.topics.get_mut(t).error = Some(code);
        let held = std::mem::take(&mut self.topics.get_mut(t).holding);
        for h in held {
            let error = ProduceError::Broker {
                code,
                message: None,
                possibly_persisted: false,
            };
            self.fail_unrouted(t, h.partition.unwrap_or(-1), h.pending, error);
        }
        let error = ProduceError::Broker {
            code,
            message: None,
            possibly_persisted: false,
        };
        self.partitions_refused(t, error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::metadata::{MetadataBroker, MetadataPartition};

    fn partition(index: i32, leader: i32) -> MetadataPartition {
        MetadataPartition {
            error_code: ErrorCode::NONE,
            partition_index: index,
            leader_id: leader,
            leader_epoch: 0,
            replica_nodes: vec![],
            isr_nodes: vec![],
            offline_replicas: vec![],
        }
    }

    fn topic(partitions: Vec<MetadataPartition>) -> MetadataTopic {
        MetadataTopic {
            error_code: ErrorCode::NONE,
            name: Some("t".into()),
            topic_id: [0; 16],
            is_internal: false,
            partitions,
            topic_authorized_operations: i32::MIN,
        }
    }

    fn answer(brokers: Vec<MetadataBroker>, topics: Vec<MetadataTopic>) -> MetadataResponse {
        MetadataResponse {
            throttle_time_ms: 0,
            brokers,
            cluster_id: None,
            controller_id: 1,
            topics,
            cluster_authorized_operations: i32::MIN,
            error_code: ErrorCode::NONE,
        }
    }

    fn broker(node_id: i32) -> MetadataBroker {
        MetadataBroker {
            node_id,
            host: "h".into(),
            port: 9092,
            rack: None,
        }
    }

    #[test]
    fn partitions_must_be_exactly_zero_to_n_minus_one() {
        let ok = |ps: &[(i32, i32)]| {
            check_topic(&topic(ps.iter().map(|&(i, l)| partition(i, l)).collect()))
        };
        assert_eq!(ok(&[]), Ok(()));
        assert_eq!(
            ok(&[(2, 1), (0, -1), (1, 3)]),
            Ok(()),
            "in any order, leaderless too"
        );
        assert_eq!(
            ok(&[(0, 1), (2, 1)]),
            Err(Violation::PartitionOutOfRange { index: 2, count: 2 })
        );
        assert_eq!(ok(&[(1, 1), (1, 1)]), Err(Violation::DuplicatePartition(1)));
        assert_eq!(
            ok(&[(-1, 1)]),
            Err(Violation::PartitionOutOfRange {
                index: -1,
                count: 1
            })
        );
        assert_eq!(
            ok(&[(i32::MIN, 1)]),
            Err(Violation::PartitionOutOfRange {
                index: i32::MIN,
                count: 1
            })
        );
        assert_eq!(
            ok(&[(0, -2)]),
            Err(Violation::InvalidLeader {
                partition: 0,
                leader: -2
            })
        );
    }

    #[test]
    fn more_partitions_than_the_cap_are_refused() {
        let at_cap: Vec<_> = (0..MAX_PARTITIONS as i32)
            .map(|i| partition(i, 1))
            .collect();
        assert_eq!(check_topic(&topic(at_cap.clone())), Ok(()));
        let mut over = at_cap;
        over.push(partition(MAX_PARTITIONS as i32, 1));
        assert_eq!(
            check_topic(&topic(over)),
            Err(Violation::TooManyPartitions {
                count: MAX_PARTITIONS + 1,
                max: MAX_PARTITIONS
            })
        );
    }

    #[test]
    fn an_answer_over_a_cap_or_with_a_negative_node_id_is_refused_whole() {
        assert_eq!(
            check_answer(&answer(vec![broker(0), broker(1)], vec![])),
            Ok(())
        );
        assert_eq!(
            check_answer(&answer(vec![broker(1), broker(-1)], vec![])),
            Err(Violation::NegativeNodeId(-1))
        );
        let brokers = (0..=MAX_BROKERS as i32).map(broker).collect();
        assert_eq!(
            check_answer(&answer(brokers, vec![])),
            Err(Violation::TooManyBrokers {
                count: MAX_BROKERS + 1,
                max: MAX_BROKERS
            })
        );
        let topics = vec![topic(vec![]); MAX_TOPICS + 1];
        assert_eq!(
            check_answer(&answer(vec![broker(1)], topics)),
            Err(Violation::TooManyTopics {
                count: MAX_TOPICS + 1,
                max: MAX_TOPICS
            })
        );
    }
}
