//! The idempotent producer's identity: the producer id and epoch from InitProducerId (request
//! and answer here), and each partition's adoption of it, epoch bumps and sequence restarts.

use std::time::Instant;

use crate::classify::{decide, Action, Request};
use crate::config::Config;
use crate::connection::RequestKind;
use crate::partition::IdentityStep;
use crate::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::ApiKey;
use crate::timer::{backoff, TimerKind};
use crate::types::{Event, Output, ProduceError};

use super::Producer;

/// The producer id state of an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PidState {
    /// Not idempotent: batches carry -1.
    Disabled,
    /// Needed; no request in flight. Retry allowed from the instant.
    Needed { retry_at: Option<Instant> },
    /// InitProducerId in flight.
    Requesting,
    /// Assigned.
    Ready { producer_id: i64, epoch: i16 },
}

impl PidState {
    /// Where a new producer starts: needing an id when idempotent.
    pub(super) fn initial(config: &Config) -> Self {
        if config.idempotence {
            PidState::Needed { retry_at: None }
        } else {
            PidState::Disabled
        }
    }

    /// The producer id and epoch, once assigned.
    pub(super) fn assigned(&self) -> Option<(i64, i16)> {
        match *self {
            PidState::Ready { producer_id, epoch } => Some((producer_id, epoch)),
            _ => None,
        }
    }
}

impl<T> Producer<T> {
    /// Sends InitProducerId when an id is needed, its retry backoff is over, and a connection
    /// to a broker that offers it is ready (starting one otherwise).
    pub(super) fn maybe_init_producer_id(&mut self) {
        let now = self.now;
        let PidState::Needed { retry_at } = self.pid else {
            return;
        };
        if self.txn.is_some() {
            return; // the transactional producer gets its id from its coordinator
        }
        if self.fatal_error().is_some() {
            return;
        }
        if let Some(at) = retry_at {
            if now < at {
                self.timers.arm(at, TimerKind::ProducerId);
                return;
            }
        }
        let Some(conn) = self.control_connection(true) else {
            return;
        };
        let versions = self.brokers.conn(conn).and_then(|c| c.versions);
        let Some(version) = versions.and_then(|v| v.init_producer_id) else {
            return;
        };
        let req = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: i32::MAX,
            producer_id: -1,
            producer_epoch: -1,
        };
        self.send_control_request(
            conn,
            ApiKey::InitProducerId,
            version,
            RequestKind::InitProducerId,
            |b| req.encode(version, b),
        );
        self.pid = PidState::Requesting;
    }

    /// The answer to InitProducerId. Returns false when it could not be parsed (the connection
    /// is then closed and the request is redone elsewhere).
    pub(super) fn on_init_producer_id(&mut self, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = InitProducerIdResponse::parse(version, body) else {
            self.init_producer_id_lost();
            return false;
        };
        let resp = parsed.body;
        if self.pid != PidState::Requesting {
            return true;
        }
        match decide(Request::InitProducerId, resp.error_code, self.mode()) {
            Action::Ok => {
                self.pid = PidState::Ready {
                    producer_id: resp.producer_id,
                    epoch: resp.producer_epoch,
                };
                self.pid_failures = 0;
                self.outputs.push_back(Output::Event(Event::ProducerId {
                    producer_id: resp.producer_id,
                    epoch: resp.producer_epoch,
                }));
                for slot in 0..self.brokers.len() {
                    self.mark_broker_dirty(slot);
                }
            }
            Action::Fatal => self.go_fatal(ProduceError::Broker {
                code: resp.error_code,
                message: Some("InitProducerId".into()),
                possibly_persisted: false,
            }),
            _ => {
                // Exponential backoff with jitter from the consecutive failures.
                self.pid_failures = self.pid_failures.saturating_add(1);
                let delay = backoff(
                    &mut self.rng,
                    self.config.retry_backoff,
                    self.config.retry_backoff_max,
                    self.pid_failures - 1,
                );
                let at = self.now + delay;
                self.pid = PidState::Needed { retry_at: Some(at) };
                self.timers.arm(at, TimerKind::ProducerId);
            }
        }
        true
    }

    /// The InitProducerId request in flight was lost with its connection: it is redone.
    pub(super) fn init_producer_id_lost(&mut self) {
        if self.pid == PidState::Requesting {
            self.pid = PidState::Needed { retry_at: None };
        }
    }

    /// Gets a partition ready to send under the current producer id (see
    /// [`crate::partition::PartitionQueue::prepare_identity`]); reports an epoch bump and, when a
    /// partition's epochs run out, asks for a new producer id. Returns false when the
    /// partition may not send now.
    pub(super) fn prepare_partition_identity(&mut self, t: u32, p: u32) -> bool {
        if !self.config.idempotence {
            return true;
        }
        let Some((producer_id, epoch)) = self.pid.assigned() else {
            return false;
        };
        // A transactional producer's epoch is the coordinator's: a partition never bumps it.
        let may_bump = self.txn.is_none();
        match self
            .topics
            .partition_mut(t, p)
            .prepare_identity(producer_id, epoch, may_bump)
        {
            IdentityStep::Ready | IdentityStep::Adopted | IdentityStep::ResolvingHole => true,
            IdentityStep::AwaitingEpoch => false,
            IdentityStep::Reset(epoch) => {
                let topic = self.topics.name(t);
                self.outputs.push_back(Output::Event(Event::SequenceReset {
                    topic,
                    partition: p as i32,
                    producer_id,
                    epoch,
                }));
                true
            }
            IdentityStep::NeedsNewProducerId => {
                // Epochs exhausted: a new producer id is needed before anyone sends again.
                self.pid = PidState::Needed { retry_at: None };
                self.work_pending = true;
                false
            }
        }
    }
}
