//! The producer's view of the cluster, from Metadata (request and answer here): the brokers,
//! each partition's leader (also moved by Produce leader hints), topics that do not exist or may
//! not be written, and the refresh policy (wanted, rate-limited, at most one in flight, aged).

use std::sync::Arc;
use std::time::Instant;

use crate::classify::{decide, Action, Request};
use crate::config::MetadataRecovery;
use crate::connection::RequestKind;
use crate::protocol::metadata::{MetadataRequest, MetadataResponse};
use crate::protocol::ApiKey;
use crate::timer::{backoff, TimerKind};
use crate::types::{Event, Output, ProduceError, RebootstrapReason};
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

impl<T> Producer<T> {
    /// Asks for a metadata refresh (rate-limited, at most one in flight).
    pub(super) fn request_metadata(&mut self) {
        self.metadata.wanted = true;
        self.note_metadata_outstanding();
        self.work_pending = true;
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

    /// The answer to Metadata. Returns false when it could not be parsed (the connection is
    /// then closed).
    pub(super) fn on_metadata(&mut self, version: i16, body: &[u8]) -> bool {
        self.metadata.in_flight = false;
        let Ok(parsed) = MetadataResponse::parse(version, body) else {
            self.metadata.wanted = true;
            self.metadata.failures = self.metadata.failures.saturating_add(1);
            return false;
        };
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
        self.apply_metadata(parsed.body);
        true
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
        }
        self.mark_partition_dirty(t, p);
    }

    /// Applies a Metadata answer: brokers, then per topic its error or its partitions'
    /// leaders; a topic seen with partitions for the first time routes its held records.
    fn apply_metadata(&mut self, resp: MetadataResponse) {
        let now = self.now;
        let mode = self.mode();
        self.stats.metadata_refreshes += 1;
        for b in &resp.brokers {
            self.brokers.node_slot(b.node_id, &b.host, b.port);
        }
        let mut still_unknown = false;
        for topic in resp.topics {
            let Some(name) = topic.name.as_deref() else {
                continue;
            };
            let Some(t) = self.topics.lookup(name) else {
                continue;
            };
            let code = topic.error_code;
            let action = decide(Request::MetadataTopic, code, mode);
            if action != Action::Ok && topic.partitions.is_empty() {
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
            let count = topic
                .partitions
                .iter()
                .map(|p| p.partition_index + 1)
                .max()
                .unwrap_or(0)
                .max(0) as usize;
            self.note_topic_id(t, topic.topic_id);
            self.topics.get_mut(t).grow_partitions(count);
            for part in &topic.partitions {
                if part.partition_index < 0 {
                    continue;
                }
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
        if still_unknown || leaderless {
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

    /// Records the topic id a Metadata answer gave (all zeros: the broker sent none, before
    /// Metadata v10). A different id than before means the topic was deleted and created again
    /// under its name: its partitions' leader epochs start over, and batches not yet written
    /// go to the new topic when retried, as Java's producer does (its `Sender` names topics by
    /// the ids current when each request is built).
    fn note_topic_id(&mut self, t: u32, id: [u8; 16]) {
        let ts = self.topics.get_mut(t);
        if id == [0; 16] || ts.topic_id == id {
            return;
        }
        let recreated = ts.topic_id != [0; 16];
        ts.replaced_topic_id = ts.topic_id;
        ts.topic_id = id;
        if recreated {
            for p in &mut ts.partitions {
                p.forget_leader_epoch();
            }
            self.stats.topics_recreated += 1;
        }
    }

    /// Metadata reported a permanent error for a topic (authorization, invalid name): records
    /// held for it fail now, and later ones fail at `send`.
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
    }
}
