//! The transaction coordinator and the group coordinator's transactional offsets, as Kafka's
//! `TransactionCoordinator` and `TransactionMetadata` model them: per transactional id a
//! producer id and epoch and a state (Empty, Ongoing, PrepareCommit, PrepareAbort,
//! CompleteCommit, CompleteAbort); the partitions of the open transaction; the markers written
//! into them when it ends; the offsets staged for the end of the transaction; and which broker
//! coordinates which key.
//!
//! The broker files (`broker/end_txn.rs` and the others) decode requests and encode answers;
//! the rules live here. Errors are Kafka's codes as the coordinator produces them
//! (`PRODUCER_FENCED` included); each API maps them to what its version answers.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use producer_core::ErrorCode;

use super::state::AbortedTxn;
use super::{later, SimCluster};
use crate::{ControlMarker, LoggedRecord, SimError};

/// Kafka's partition count of `__consumer_offsets` and of `__transaction_state`
/// (`offsets.topic.num.partitions`, `transaction.state.log.num.partitions`).
pub(super) const INTERNAL_PARTITIONS: i32 = 50;

/// The group coordinator's internal topic: AddOffsetsToTxn adds one of its partitions.
pub(super) const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Which kind of coordinator a key is looked up for (FindCoordinator's key type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CoordinatorKind {
    /// A consumer group's coordinator (key type 0): the leader of the group's
    /// `__consumer_offsets` partition. TxnOffsetCommit goes there.
    Group,
    /// A transactional id's coordinator (key type 1): the leader of its
    /// `__transaction_state` partition. InitProducerId with the id, AddPartitionsToTxn,
    /// AddOffsetsToTxn and EndTxn go there.
    Transaction,
}

/// A transactional id's state in the coordinator (Kafka's `TransactionState`, without the
/// internal Dead and PrepareEpochFence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionState {
    /// Initialised (InitProducerId), no transaction open.
    Empty,
    /// A transaction is open: partitions were added.
    Ongoing,
    /// EndTxn(commit) was accepted; the markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a fencing InitProducerId or the timeout is aborting the transaction;
    /// the markers are being written.
    PrepareAbort,
    /// The last transaction committed, its markers are written.
    CompleteCommit,
    /// The last transaction aborted, its markers are written.
    CompleteAbort,
}

/// A snapshot of one transactional id in the coordinator, see [`SimCluster::transaction`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionView {
    /// Its state.
    pub state: TransactionState,
    /// The producer id the coordinator holds for it.
    pub producer_id: i64,
    /// The current producer epoch (a producer with an older one is fenced).
    pub producer_epoch: i16,
    /// The transaction timeout set by the last InitProducerId.
    pub timeout: Duration,
    /// The partitions of the open (or completing) transaction, `__consumer_offsets`
    /// partitions (AddOffsetsToTxn) included; empty when none is open.
    pub partitions: Vec<(String, i32)>,
    /// Offsets staged by TxnOffsetCommit in the open transaction: `(group, topic, partition)`
    /// with the offset; they become committed with the commit marker.
    pub pending_offsets: Vec<(String, String, i32, CommittedOffset)>,
}

/// An offset committed for a consumer group, see [`SimCluster::committed_offsets`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset to read.
    pub offset: i64,
    /// The leader epoch the client sent (-1: none, or TxnOffsetCommit below v2).
    pub leader_epoch: i32,
    /// The metadata string.
    pub metadata: Option<String>,
}

/// One transactional id's metadata (Kafka's `TransactionMetadata`).
#[derive(Debug, Clone)]
pub(super) struct TxnMeta {
    pub(super) producer_id: i64,
    /// The id before the last rotation (an exhausted epoch), for KIP-360 and TV2 retries.
    pub(super) previous_producer_id: i64,
    /// TV2: the id taking over once the markers of an end that exhausted the epoch are
    /// written; -1 otherwise.
    pub(super) next_producer_id: i64,
    pub(super) epoch: i16,
    /// The epoch before the last bump, to recognise a retried InitProducerId (KIP-360).
    pub(super) last_epoch: i16,
    pub(super) timeout: Duration,
    pub(super) state: TransactionState,
    pub(super) partitions: BTreeSet<(String, i32)>,
    /// group -> (topic, partition) -> offset, staged for the end of the transaction.
    pub(super) offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    /// When the open transaction started (its first partition was added).
    pub(super) started: Option<Instant>,
    /// The last end was a transaction-version-2 end (the epoch was bumped).
    pub(super) tv2: bool,
    /// PrepareCommit / PrepareAbort: when the markers are written.
    pub(super) completes_at: Option<Instant>,
}

/// Whether an epoch leaves no room for another bump (Kafka's `isEpochExhausted`).
fn exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// Kafka's `Utils.abs(key.hashCode()) % partitions`, with Java's `String.hashCode` over the
/// key's UTF-16 code units.
pub(super) fn partition_for(key: &str) -> i32 {
    let h = key
        .encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)));
    let a = if h == i32::MIN { 0 } else { h.abs() };
    a % INTERNAL_PARTITIONS
}

impl SimCluster {
    /// The node that coordinates `key` (a group id or a transactional id), running or not:
    /// the leader of the key's internal partition (Kafka: `abs(hashCode) % 50`). That
    /// partition `p` is led by the `(p mod n)`-th broker in node-id order, like a topic's, until
    /// [`SimCluster::move_coordinator`] moves it. `None` only for a cluster without brokers.
    pub fn coordinator(&self, kind: CoordinatorKind, key: &str) -> Option<i32> {
        let p = partition_for(key);
        if let Some(node) = self.coordinator_moves.get(&(kind, p)) {
            return Some(*node);
        }
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        ids.get(usize::try_from(p).ok()? % ids.len().max(1))
            .copied()
    }

    /// Moves the leadership of the internal partition holding `key` (and so the coordination
    /// of every key hashing to it) to `node`, as a leader election of `__transaction_state`
    /// or `__consumer_offsets` does. The coordinator's state moves with it (a replicated log):
    /// the client sees NOT_COORDINATOR from the old node and finds the new one.
    pub fn move_coordinator(
        &mut self,
        kind: CoordinatorKind,
        key: &str,
        node: i32,
    ) -> Result<(), SimError> {
        if !self.brokers.contains_key(&node) {
            return Err(SimError::UnknownBroker(node));
        }
        self.coordinator_moves
            .insert((kind, partition_for(key)), node);
        Ok(())
    }

    /// The coordinator's view of a transactional id (`None` when no InitProducerId created
    /// it).
    pub fn transaction(&self, transactional_id: &str) -> Option<TransactionView> {
        let m = self.transactions.get(transactional_id)?;
        let pending_offsets = m
            .offsets
            .iter()
            .flat_map(|(g, offs)| {
                offs.iter()
                    .map(move |((t, p), o)| (g.clone(), t.clone(), *p, o.clone()))
            })
            .collect();
        Some(TransactionView {
            state: m.state,
            producer_id: m.producer_id,
            producer_epoch: m.epoch,
            timeout: m.timeout,
            partitions: m.partitions.iter().cloned().collect(),
            pending_offsets,
        })
    }

    /// The offsets committed for a consumer group: only those of committed transactions
    /// (staged ones appear with their transaction's commit marker, aborted ones never).
    pub fn committed_offsets(&self, group: &str) -> BTreeMap<(String, i32), CommittedOffset> {
        self.committed_offsets
            .get(group)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether transaction-version-2 rules apply to a request: Kafka decides by the request
    /// version (`tv2_version`: Produce v12+, EndTxn v5, TxnOffsetCommit v5), whatever the
    /// cluster's finalized `transaction.version`. Such a version on a cluster below 2 is
    /// recorded as a violation: the client must cap its versions there (Java's does).
    pub(super) fn txn_v2(&mut self, broker: i32, conn: u64, tv2_version: bool, what: &str) -> bool {
        if tv2_version && self.cfg.transaction_version < 2 {
            self.violation(
                Some(broker),
                conn,
                format!(
                    "{what} is a transaction-version-2 request but the cluster's finalized \
                     transaction.version is {}",
                    self.cfg.transaction_version
                ),
            );
        }
        tv2_version
    }

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId` and
    /// `prepareInitProducerIdTransit`): a new id gets a producer id and epoch 0; an existing
    /// one is bumped (a new producer id when the epoch is exhausted), which fences the producer
    /// of the old epoch. An open transaction is aborted first (epoch bumped, abort markers) and
    /// the answer is CONCURRENT_TRANSACTIONS: the client retries and gets the next epoch.
    /// `expected` is the producer id and epoch of a KIP-360 recovery. The id and the timeout
    /// are checked before `coordinator` (whether this broker coordinates the id), as Kafka
    /// does.
    pub(super) fn txn_init(
        &mut self,
        at: Instant,
        coordinator: bool,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), i16> {
        if transactional_id.is_empty() {
            return Err(ErrorCode::INVALID_REQUEST.0);
        }
        let max = self.cfg.transaction_max_timeout;
        let timeout = u64::try_from(timeout_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis)
            .filter(|t| *t <= max)
            .ok_or(ErrorCode::INVALID_TRANSACTION_TIMEOUT.0)?;
        if !coordinator {
            return Err(ErrorCode::NOT_COORDINATOR.0);
        }
        if !self.transactions.contains_key(transactional_id) {
            let pid = self.allocate_pid();
            self.transactions.insert(
                transactional_id.to_string(),
                TxnMeta {
                    producer_id: pid,
                    previous_producer_id: -1,
                    next_producer_id: -1,
                    epoch: -1,
                    last_epoch: -1,
                    timeout,
                    state: TransactionState::Empty,
                    partitions: BTreeSet::new(),
                    offsets: BTreeMap::new(),
                    started: None,
                    tv2: false,
                    completes_at: None,
                },
            );
        }
        let m = self
            .transactions
            .get(transactional_id)
            .ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING.0)?;
        if let Some((pid, epoch)) = expected {
            let valid = m.epoch == -1
                || pid == m.producer_id
                || (pid == m.previous_producer_id && exhausted(epoch));
            if !valid {
                return Err(ErrorCode::PRODUCER_FENCED.0);
            }
        }
        match m.state {
            TransactionState::PrepareCommit | TransactionState::PrepareAbort => {
                Err(ErrorCode::CONCURRENT_TRANSACTIONS.0)
            }
            TransactionState::Ongoing => {
                self.txn_fence_and_abort(at, transactional_id);
                Err(ErrorCode::CONCURRENT_TRANSACTIONS.0)
            }
            TransactionState::Empty
            | TransactionState::CompleteCommit
            | TransactionState::CompleteAbort => {
                let rotate = exhausted(m.epoch) && expected.is_none_or(|(_, e)| e == m.epoch);
                let (pid, epoch, last_epoch, previous) = if rotate {
                    let last = if expected.is_some() { m.epoch } else { -1 };
                    let old = m.producer_id;
                    (self.allocate_pid(), 0, last, old)
                } else if exhausted(m.epoch) {
                    return Err(ErrorCode::PRODUCER_FENCED.0);
                } else {
                    let (epoch, last) = match expected {
                        None => (m.epoch + 1, -1),
                        Some((_, e)) if m.epoch == -1 || e == m.epoch => (m.epoch + 1, m.epoch),
                        Some((_, e)) if e == m.last_epoch => (m.epoch, m.last_epoch),
                        Some(_) => return Err(ErrorCode::PRODUCER_FENCED.0),
                    };
                    (m.producer_id, epoch, last, m.previous_producer_id)
                };
                self.producer_ids.insert(pid, epoch);
                let m = self
                    .transactions
                    .get_mut(transactional_id)
                    .ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING.0)?;
                m.producer_id = pid;
                m.previous_producer_id = previous;
                m.epoch = epoch;
                m.last_epoch = last_epoch;
                m.timeout = timeout;
                m.state = TransactionState::Empty;
                m.partitions.clear();
                m.offsets.clear();
                m.started = None;
                Ok((pid, epoch))
            }
        }
    }

    /// The checks every request of a transaction passes at the coordinator (Kafka's
    /// `handleAddPartitionsToTransaction` before the add): the id is known, the producer id
    /// is its, the epoch is the current one, no end is completing.
    fn txn_current(&self, transactional_id: &str, pid: i64, epoch: i16) -> Result<&TxnMeta, i16> {
        if transactional_id.is_empty() {
            return Err(ErrorCode::INVALID_REQUEST.0);
        }
        let m = self
            .transactions
            .get(transactional_id)
            .ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING.0)?;
        if m.producer_id != pid {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING.0);
        }
        if m.epoch != epoch {
            return Err(ErrorCode::PRODUCER_FENCED.0);
        }
        if matches!(
            m.state,
            TransactionState::PrepareCommit | TransactionState::PrepareAbort
        ) {
            return Err(ErrorCode::CONCURRENT_TRANSACTIONS.0);
        }
        Ok(m)
    }

    /// Adds partitions to the transaction (AddPartitionsToTxn, AddOffsetsToTxn, and the
    /// implicit add of Produce v12+ / TxnOffsetCommit v5 under transaction version 2). From
    /// Empty or a completed transaction this opens a new one (Ongoing, its timeout running
    /// from `at`).
    pub(super) fn txn_add_partitions(
        &mut self,
        at: Instant,
        transactional_id: &str,
        pid: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<(), i16> {
        let m = self.txn_current(transactional_id, pid, epoch)?;
        if m.state == TransactionState::Ongoing
            && partitions.iter().all(|p| m.partitions.contains(p))
        {
            return Ok(());
        }
        let Some(m) = self.transactions.get_mut(transactional_id) else {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING.0);
        };
        if m.state != TransactionState::Ongoing {
            m.started = Some(at);
            m.partitions.clear();
            m.offsets.clear();
        }
        m.state = TransactionState::Ongoing;
        m.partitions.extend(partitions.iter().cloned());
        Ok(())
    }

    /// Whether each partition is in the open transaction (AddPartitionsToTxn v4+ with
    /// `verify_only`, Kafka's `handleVerifyPartitionsInTransaction`); the checks of
    /// [`txn_current`](Self::txn_current) first.
    pub(super) fn txn_verify(
        &self,
        transactional_id: &str,
        pid: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<bool>, i16> {
        let m = self.txn_current(transactional_id, pid, epoch)?;
        Ok(partitions
            .iter()
            .map(|p| m.partitions.contains(p))
            .collect())
    }

    /// Stages offsets in the open transaction of `transactional_id` for `group`; the later of
    /// two for one partition wins. They become the group's committed offsets with the commit
    /// marker and are dropped on abort.
    pub(super) fn txn_stage_offsets(
        &mut self,
        transactional_id: &str,
        group: &str,
        offsets: Vec<((String, i32), CommittedOffset)>,
    ) {
        if let Some(m) = self.transactions.get_mut(transactional_id) {
            m.offsets
                .entry(group.to_string())
                .or_default()
                .extend(offsets);
        }
    }

    /// EndTxn (Kafka's `endTransaction` from a client). `tv2`: the request is EndTxn v5 (a
    /// transaction-version-2 client), so the end bumps the epoch (a new producer id when it is
    /// exhausted). Returns the producer id and epoch the producer goes on with. A retry of an
    /// end that completed with the same outcome is answered NONE (under TV2 the retry carries
    /// the epoch before the bump); the other outcome is INVALID_TXN_STATE; a retry while the
    /// markers are being written is CONCURRENT_TRANSACTIONS.
    ///
    /// Under TV2 (as Kafka 4.1.1's `TransactionCoordinator.endTransaction` decides, read from
    /// its bytecode): after a completed end, the current epoch is valid too, and an abort with
    /// it is a new, empty transaction's abort (no partition added: no markers), which bumps the
    /// epoch like any TV2 end; so is an abort from Empty. An abort of a transaction whose
    /// partitions never reached the coordinator is answered so, not fenced.
    pub(super) fn txn_end(
        &mut self,
        at: Instant,
        transactional_id: &str,
        pid: i64,
        epoch: i16,
        commit: bool,
        tv2: bool,
    ) -> Result<(i64, i16), i16> {
        use TransactionState::*;
        if transactional_id.is_empty() {
            return Err(ErrorCode::INVALID_REQUEST.0);
        }
        // A v5 request on a cluster below transaction version 2 (a violation the caller
        // records) keeps the version-1 rules.
        let tv2_rules = tv2 && self.cfg.transaction_version >= 2;
        let m = self
            .transactions
            .get(transactional_id)
            .ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING.0)?;
        let retry_on_overflow =
            m.tv2 && m.previous_producer_id == pid && epoch == i16::MAX - 1 && m.epoch == 0;
        let retry_on_bump = m.tv2 && i32::from(m.epoch) == i32::from(epoch) + 1;
        let is_retry = retry_on_bump || retry_on_overflow;
        let valid_epoch = if tv2_rules {
            match m.state {
                Ongoing | Empty => epoch == m.epoch,
                PrepareCommit | PrepareAbort => retry_on_bump,
                CompleteCommit | CompleteAbort => is_retry || epoch == m.epoch,
            }
        } else if m.tv2 {
            match m.state {
                Ongoing | Empty => epoch == m.epoch,
                PrepareCommit | PrepareAbort => retry_on_bump,
                CompleteCommit | CompleteAbort => is_retry,
            }
        } else {
            epoch == m.epoch
        };
        if m.producer_id != pid && !retry_on_overflow {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING.0);
        }
        if !valid_epoch {
            return Err(ErrorCode::PRODUCER_FENCED.0);
        }
        let same = |c: bool| {
            if c == commit {
                Ok(())
            } else {
                Err(ErrorCode::INVALID_TXN_STATE.0)
            }
        };
        // TV2: a new end where the last one completed, or from Empty, is an abort of a
        // transaction with no partitions (Kafka's `noPartitionAdded`).
        let new_empty_abort = tv2_rules
            && !commit
            && match m.state {
                Empty => true,
                CompleteCommit | CompleteAbort => !is_retry,
                _ => false,
            };
        match m.state {
            Ongoing => {}
            _ if new_empty_abort => {}
            CompleteCommit if tv2_rules && !is_retry => return Err(ErrorCode::INVALID_TXN_STATE.0),
            CompleteCommit => return same(true).map(|()| (m.producer_id, m.epoch)),
            CompleteAbort => return same(false).map(|()| (m.producer_id, m.epoch)),
            PrepareCommit => return same(true).and(Err(ErrorCode::CONCURRENT_TRANSACTIONS.0)),
            PrepareAbort => return same(false).and(Err(ErrorCode::CONCURRENT_TRANSACTIONS.0)),
            Empty => return Err(ErrorCode::INVALID_TXN_STATE.0),
        }
        if new_empty_abort {
            if let Some(m) = self.transactions.get_mut(transactional_id) {
                m.partitions.clear();
                m.offsets.clear();
            }
        }
        self.txn_begin_end(at, transactional_id, commit, tv2);
        let m = self
            .transactions
            .get(transactional_id)
            .ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING.0)?;
        Ok(if m.next_producer_id >= 0 {
            (m.next_producer_id, 0)
        } else {
            (m.producer_id, m.epoch)
        })
    }

    /// Fences the producer of an open transaction and aborts it (Kafka's
    /// `prepareFenceProducerEpoch` then an abort from the coordinator, which uses the
    /// cluster's transaction version: at 2 the abort bumps the epoch once more, as Kafka's
    /// does). Used by a fencing InitProducerId and by the transaction timeout.
    fn txn_fence_and_abort(&mut self, at: Instant, transactional_id: &str) {
        let server_tv2 = self.cfg.transaction_version >= 2;
        let Some(m) = self.transactions.get_mut(transactional_id) else {
            return;
        };
        if server_tv2 {
            // Kafka 4.1.1 at transaction version 2, as observed on Apache Kafka
            // (`tests/tests/kafka_transactions.rs`): the fencing abort bumps the epoch once,
            // keeping the fenced one as the last epoch, so the fenced producer's KIP-360
            // InitProducerId from it is answered with the new epoch (it goes on after a
            // timeout), while its EndTxn is fenced and a new producer's InitProducerId without
            // an epoch bumps again. (The October 2024 source bumped twice and kept no last
            // epoch, which fenced the timed-out producer.)
            self.txn_begin_end(at, transactional_id, false, true);
            return;
        }
        m.epoch = m.epoch.saturating_add(1);
        m.last_epoch = -1;
        let (pid, epoch) = (m.producer_id, m.epoch);
        self.producer_ids.insert(pid, epoch);
        self.txn_begin_end(at, transactional_id, false, server_tv2);
    }

    /// Moves an Ongoing transaction to PrepareCommit / PrepareAbort (bumping the epoch for a
    /// TV2 end) and writes its markers now, or after
    /// [`SimConfig::transaction_marker_delay`](crate::SimConfig::transaction_marker_delay).
    fn txn_begin_end(&mut self, at: Instant, transactional_id: &str, commit: bool, bump: bool) {
        let delay = self.cfg.transaction_marker_delay;
        let Some(m) = self.transactions.get(transactional_id) else {
            return;
        };
        let rotate = bump && exhausted(m.epoch);
        let next = if rotate { self.allocate_pid() } else { -1 };
        let Some(m) = self.transactions.get_mut(transactional_id) else {
            return;
        };
        if bump && m.epoch < i16::MAX {
            m.last_epoch = m.epoch;
            m.epoch += 1;
        }
        m.next_producer_id = next;
        m.tv2 = bump;
        m.state = if commit {
            TransactionState::PrepareCommit
        } else {
            TransactionState::PrepareAbort
        };
        let (pid, epoch) = (m.producer_id, m.epoch);
        self.producer_ids.insert(pid, epoch);
        if delay.is_zero() {
            self.txn_complete(transactional_id);
        } else if let Some(m) = self.transactions.get_mut(transactional_id) {
            m.completes_at = Some(later(at, delay));
        }
    }

    /// Writes the markers of a PrepareCommit / PrepareAbort transaction into each of its
    /// partitions, applies (commit) or drops (abort) its staged offsets, and completes it.
    fn txn_complete(&mut self, transactional_id: &str) {
        let Some(m) = self.transactions.get_mut(transactional_id) else {
            return;
        };
        let commit = match m.state {
            TransactionState::PrepareCommit => true,
            TransactionState::PrepareAbort => false,
            _ => return,
        };
        let (pid, epoch) = (m.producer_id, m.epoch);
        let partitions = std::mem::take(&mut m.partitions);
        let offsets = std::mem::take(&mut m.offsets);
        m.state = if commit {
            TransactionState::CompleteCommit
        } else {
            TransactionState::CompleteAbort
        };
        m.started = None;
        m.completes_at = None;
        if m.next_producer_id >= 0 {
            m.previous_producer_id = m.producer_id;
            m.producer_id = m.next_producer_id;
            m.last_epoch = m.epoch;
            m.epoch = 0;
            m.next_producer_id = -1;
            let (p, e) = (m.producer_id, m.epoch);
            self.producer_ids.insert(p, e);
        }
        for (topic, partition) in &partitions {
            if topic != OFFSETS_TOPIC {
                self.write_marker(topic, *partition, pid, epoch, commit);
            }
        }
        if commit {
            for (group, offs) in offsets {
                self.committed_offsets
                    .entry(group)
                    .or_default()
                    .extend(offs);
            }
        }
    }

    /// Appends one transaction marker (a control batch of one record) for producer `pid` at
    /// `epoch`, closing its open transaction in the partition; an abort goes into the
    /// aborted-transaction index. A marker with a newer epoch becomes the producer's epoch in
    /// the partition and empties its idempotence window (Kafka's `appendEndTxnMarker`), so its
    /// next batch starts at sequence 0. A deleted topic is skipped.
    fn write_marker(&mut self, topic: &str, partition: i32, pid: i64, epoch: i16, commit: bool) {
        let Some(part) = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(usize::try_from(partition).ok()?))
        else {
            return;
        };
        let offset = part.log.len() as i64;
        let timestamp = part.log.last().map_or(0, |r| r.timestamp);
        // ControlRecordType: version 0, type 0 (abort) / 1 (commit); EndTransactionMarker:
        // version 0, coordinator epoch 0.
        let key = Bytes::from(vec![0, 0, 0, u8::from(commit)]);
        let value = Bytes::from(vec![0, 0, 0, 0, 0, 0]);
        part.log.push(LoggedRecord {
            offset,
            key: Some(key),
            value: Some(value),
            headers: Vec::new(),
            timestamp,
            producer_id: pid,
            producer_epoch: epoch,
            sequence: -1,
            batch_base_offset: offset,
            transactional: true,
            control: Some(if commit {
                ControlMarker::Commit
            } else {
                ControlMarker::Abort
            }),
        });
        if let Some(first) = part.open_txns.remove(&pid) {
            if !commit {
                part.aborted.push(AbortedTxn {
                    producer_id: pid,
                    first_offset: first,
                    marker_offset: offset,
                });
            }
        }
        let entry = part
            .producers
            .entry(pid)
            .or_insert_with(|| super::state::ProducerEntry {
                epoch,
                batches: Default::default(),
            });
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
    }

    /// Lets the coordinator act up to `now`: markers whose delay ran out are written, and an
    /// Ongoing transaction open longer than its timeout is aborted with its producer fenced
    /// (Kafka's `abortTimedOutTransactions`), in time order.
    pub(super) fn txn_tick(&mut self, now: Instant) {
        loop {
            let due = self
                .transactions
                .iter()
                .filter_map(|(id, m)| {
                    let at = match m.state {
                        TransactionState::PrepareCommit | TransactionState::PrepareAbort => {
                            m.completes_at?
                        }
                        TransactionState::Ongoing => later(m.started?, m.timeout),
                        _ => return None,
                    };
                    let due = if m.state == TransactionState::Ongoing {
                        at < now
                    } else {
                        at <= now
                    };
                    due.then(|| (at, id.clone()))
                })
                .min();
            let Some((at, id)) = due else { return };
            let ongoing = self
                .transactions
                .get(&id)
                .is_some_and(|m| m.state == TransactionState::Ongoing);
            if ongoing {
                self.txn_fence_and_abort(at, &id);
            } else {
                self.txn_complete(&id);
            }
        }
    }

    /// The next time the coordinator writes delayed markers, if any (a broker-side event).
    pub(super) fn txn_next_completion(&self) -> Option<Instant> {
        self.transactions
            .values()
            .filter_map(|m| m.completes_at)
            .min()
    }
}

#[cfg(test)]
mod tests;
