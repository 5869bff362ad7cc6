//! Produce: per partition, leadership, the RecordBatch checks (CRC-32C, sizes, codecs, an
//! independent decode), the idempotence window, then the append to the log.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use super::code;
use crate::cluster::state::{BatchMeta, ProducerEntry};
use crate::cluster::{CoordinatorKind, SimCluster};
use crate::wire::{self, BATCH_HEADER_LEN};
use crate::{LoggedRecord, ProducePartitionRecord, RequestRecord, API_PRODUCE};

/// Number of batches whose metadata the broker keeps per producer (Kafka's
/// `NUM_BATCHES_TO_RETAIN`).
const BATCHES_TO_RETAIN: usize = 5;

/// Produce errors that depend on a batch's contents or sequence, which a broker never returns
/// for an exact retry of a batch it already appended.
const CONTENT_ERRORS: [i16; 6] = [
    code::CORRUPT_MESSAGE,
    code::MESSAGE_TOO_LARGE,
    code::RECORD_LIST_TOO_LARGE,
    code::OUT_OF_ORDER_SEQUENCE_NUMBER,
    code::UNKNOWN_PRODUCER_ID,
    code::INVALID_RECORD,
];

/// Result of one Produce partition.
struct PartOutcome {
    code: i16,
    base_offset: i64,
    message: Option<String>,
    leader_hint: Option<(i32, i32)>,
    appended: bool,
    /// `(batch index, message)` of the records that failed validation (v8+ `RecordErrors`).
    record_errors: Vec<(i32, String)>,
}

impl PartOutcome {
    fn err(code: i16, message: impl Into<String>) -> Self {
        PartOutcome {
            code,
            base_offset: -1,
            message: Some(message.into()),
            leader_hint: None,
            appended: false,
            record_errors: Vec::new(),
        }
    }

    fn ok(base_offset: i64, appended: bool) -> Self {
        PartOutcome {
            code: code::NONE,
            base_offset,
            message: None,
            leader_hint: None,
            appended,
            record_errors: Vec::new(),
        }
    }
}

/// Kafka's validation of a batch for a compacted topic (`LogValidator.validateKey`): every
/// record needs a key; each one without fails the batch with INVALID_RECORD and one record
/// error, and the partition's message summarises them (`RecordValidationException`).
fn compaction_errors(
    topic: &str,
    index: i32,
    keys: impl Iterator<Item = bool>,
) -> Option<PartOutcome> {
    let errors: Vec<(i32, String)> = keys
        .enumerate()
        .filter(|&(_, has_key)| !has_key)
        .map(|(i, _)| {
            let message = format!(
                "Compacted topic cannot accept message without key in topic partition {topic}-{index}"
            );
            (i32::try_from(i).unwrap_or(i32::MAX), message)
        })
        .collect();
    if errors.is_empty() {
        return None;
    }
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|(i, m)| format!("RecordError(batchIndex={i}, message='{m}')"))
        .collect();
    let message = format!(
        "One or more records have been rejected due to {} record errors in total, and only \
         showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    );
    Some(PartOutcome {
        record_errors: errors,
        ..PartOutcome::err(code::INVALID_RECORD, message)
    })
}

fn next_seq(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

fn seq_add(base: i32, n: i64) -> i32 {
    // Sequence arithmetic wraps at i32::MAX to 0 (2^31 values).
    let m = i64::from(i32::MAX) + 1;
    ((i64::from(base) + n).rem_euclid(m)) as i32
}

impl SimCluster {
    /// Handles a Produce request; returns the response and whether any partition failed.
    pub(super) fn produce(
        &mut self,
        broker_id: i32,
        conn: u64,
        version: i16,
        req: ProduceRequest,
        rec: &mut RequestRecord,
    ) -> (ProduceResponse, bool) {
        rec.acks = Some(req.acks);
        let mut resp = ProduceResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        rec.throttle_time_ms = resp.throttle_time_ms;
        let mut any_error = false;
        let mut seen = BTreeSet::new();
        let mut endpoints: BTreeMap<i32, NodeEndpoint> = BTreeMap::new();
        let at = rec.at;
        let txn_id = req.transactional_id.as_ref().map(|t| t.0.to_string());
        let request_error = Self::produce_request_error(&req, txn_id.is_some());
        for td in req.topic_data {
            let (name, id_unknown) = if version >= 13 {
                match self.topics.iter().find(|(_, t)| t.id == td.topic_id) {
                    Some((n, _)) => (Some(n.clone()), false),
                    None => (None, true),
                }
            } else {
                (Some(td.name.0.to_string()), false)
            };
            let mut tr = TopicProduceResponse::default();
            if version >= 13 {
                tr.topic_id = td.topic_id;
            } else {
                tr.name = td.name.clone();
            }
            for pd in td.partition_data {
                let batch_bytes = pd.records.as_ref().map_or(0, |r| r.len());
                let hdr = pd
                    .records
                    .as_ref()
                    .and_then(|r| r.get(..BATCH_HEADER_LEN))
                    .and_then(|b| wire::parse_batch_header(b).ok());
                let dup = !seen.insert((name.clone(), td.topic_id, pd.index));
                let out = if let Some((code, message)) = &request_error {
                    PartOutcome::err(*code, message.clone())
                } else if id_unknown {
                    PartOutcome::err(code::UNKNOWN_TOPIC_ID, "unknown topic id")
                } else if dup {
                    self.violation(
                        Some(broker_id),
                        conn,
                        format!(
                            "Produce carries partition {:?}/{} twice",
                            name.as_deref().unwrap_or(""),
                            pd.index
                        ),
                    );
                    PartOutcome::err(code::INVALID_REQUEST, "duplicate partition in request")
                } else {
                    self.produce_partition(
                        broker_id,
                        conn,
                        at,
                        version,
                        req.acks,
                        txn_id.as_deref(),
                        name.as_deref().unwrap_or(""),
                        pd.index,
                        pd.records.as_ref(),
                    )
                };
                if out.code != code::NONE {
                    any_error = true;
                }
                if let Some((leader, _)) = out.leader_hint {
                    if let Some(b) = self.brokers.get(&leader) {
                        let mut ne = NodeEndpoint::default();
                        ne.node_id = leader.into();
                        ne.host = StrBytes::from_string(b.spec.host.clone());
                        ne.port = i32::from(b.spec.port);
                        endpoints.insert(leader, ne);
                    }
                }
                let mut pr = PartitionProduceResponse::default();
                pr.index = pd.index;
                pr.error_code = out.code;
                pr.base_offset = out.base_offset;
                if version >= 5 {
                    pr.log_start_offset = if out.code == code::NONE { 0 } else { -1 };
                }
                if version >= 8 && out.code != code::NONE {
                    pr.error_message = out.message.clone().map(StrBytes::from_string);
                    for (i, m) in &out.record_errors {
                        let mut e = BatchIndexAndErrorMessage::default();
                        e.batch_index = *i;
                        e.batch_index_error_message = Some(StrBytes::from_string(m.clone()));
                        pr.record_errors.push(e);
                    }
                }
                if version >= 10 {
                    if let Some((leader, epoch)) = out.leader_hint {
                        let mut l = LeaderIdAndEpoch::default();
                        l.leader_id = leader.into();
                        l.leader_epoch = epoch;
                        pr.current_leader = l;
                    }
                }
                tr.partition_responses.push(pr);
                rec.produce.push(ProducePartitionRecord {
                    topic: name.clone().unwrap_or_default(),
                    partition: pd.index,
                    record_count: hdr.map_or(0, |h| h.record_count),
                    producer_id: hdr.map_or(-1, |h| h.producer_id),
                    producer_epoch: hdr.map_or(-1, |h| h.producer_epoch),
                    base_sequence: hdr.map_or(-1, |h| h.base_sequence),
                    error_code: out.code,
                    base_offset: out.base_offset,
                    appended: out.appended,
                    batch_bytes,
                });
            }
            resp.responses.push(tr);
        }
        if version >= 10 {
            resp.node_endpoints = endpoints.into_values().collect();
        }
        (resp, any_error)
    }

    /// Kafka's checks of a whole Produce request carrying transactional batches: they need a
    /// TransactionalId (TRANSACTIONAL_ID_AUTHORIZATION_FAILED without one) and one producer
    /// (INVALID_PRODUCER_ID_MAPPING for batches of several).
    fn produce_request_error(req: &ProduceRequest, has_txn_id: bool) -> Option<(i16, String)> {
        let producers: BTreeSet<(i64, i16)> = req
            .topic_data
            .iter()
            .flat_map(|t| &t.partition_data)
            .filter_map(|p| {
                let raw = p.records.as_ref()?.get(..BATCH_HEADER_LEN)?;
                let h = wire::parse_batch_header(raw).ok()?;
                (h.is_transactional() && h.producer_id >= 0)
                    .then_some((h.producer_id, h.producer_epoch))
            })
            .collect();
        if producers.is_empty() {
            None
        } else if !has_txn_id {
            Some((
                code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "transactional records without a TransactionalId".into(),
            ))
        } else if producers.len() > 1 {
            Some((
                code::INVALID_PRODUCER_ID_MAPPING,
                "Transactional records contained more than one producer ID".into(),
            ))
        } else {
            None
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn produce_partition(
        &mut self,
        broker_id: i32,
        conn: u64,
        at: Instant,
        version: i16,
        acks: i16,
        txn_id: Option<&str>,
        topic: &str,
        index: i32,
        records: Option<&Bytes>,
    ) -> PartOutcome {
        if !matches!(acks, -1..=1) {
            return PartOutcome::err(code::INVALID_REQUIRED_ACKS, format!("acks {acks}"));
        }
        let Some(t) = self.topics.get(topic) else {
            return PartOutcome::err(code::UNKNOWN_TOPIC_OR_PARTITION, "unknown topic");
        };
        let Some(p) = usize::try_from(index)
            .ok()
            .and_then(|i| t.partitions.get(i))
        else {
            return PartOutcome::err(code::UNKNOWN_TOPIC_OR_PARTITION, "unknown partition");
        };
        if p.leader != broker_id {
            let mut o = PartOutcome::err(code::NOT_LEADER_OR_FOLLOWER, "not the leader");
            o.leader_hint = (version >= 10).then_some((p.leader, p.leader_epoch));
            return o;
        }
        let topic_owned = topic.to_string();
        // A real broker answers an exact retry of a batch it already appended with the original
        // offsets before any check that looks at the batch's contents or sequence could fail
        // (those bytes were accepted once). So errors of that kind are not injected into such a
        // retry; the injection waits for the next batch.
        let duplicate = self.is_cached_duplicate(topic, index, records);
        let injected = self.take_injection(API_PRODUCE, |i| {
            i.topic.as_ref().is_none_or(|x| *x == topic_owned)
                && i.partition.is_none_or(|x| x == index)
                && !(duplicate && CONTENT_ERRORS.contains(&i.error_code))
        });
        if let Some(inj) = &injected {
            if !inj.persist {
                return PartOutcome::err(inj.error_code, "injected error");
            }
        }
        let out = self.append_batch(broker_id, conn, at, version, txn_id, topic, index, records);
        match injected {
            Some(inj) if out.code == code::NONE => PartOutcome {
                appended: out.appended,
                ..PartOutcome::err(inj.error_code, "injected error (after append)")
            },
            _ => out,
        }
    }

    /// Kafka's transaction verification of a transactional batch (`ReplicaManager` with
    /// `AddPartitionsToTxnManager`), skipped when the partition already has an open transaction
    /// of this producer at this epoch. The coordinator's errors as Produce answers them:
    /// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH; CONCURRENT_TRANSACTIONS (an end completing)
    /// and a stopped coordinator are NOT_ENOUGH_REPLICAS (retriable for every client);
    /// INVALID_PRODUCER_ID_MAPPING stays. A partition not in the transaction is added by
    /// Produce v12+ (opening the transaction if none is; a violation on a cluster below
    /// transaction version 2); below v12 it is TRANSACTION_ABORTABLE at v11 and
    /// INVALID_TXN_STATE before.
    #[allow(clippy::too_many_arguments)]
    fn verify_txn_produce(
        &mut self,
        broker_id: i32,
        conn: u64,
        at: Instant,
        version: i16,
        txn_id: &str,
        topic: &str,
        index: i32,
        (pid, epoch): (i64, i16),
    ) -> Result<(), (i16, String)> {
        let open = self.partition(topic, index).is_some_and(|p| {
            p.open_txns.contains_key(&pid)
                && p.producers.get(&pid).is_some_and(|e| e.epoch == epoch)
        });
        if open {
            return Ok(());
        }
        let coordinator_up = self
            .coordinator(CoordinatorKind::Transaction, txn_id)
            .and_then(|n| self.brokers.get(&n))
            .is_some_and(|b| b.running);
        let translate = |e: i16| -> (i16, String) {
            match e {
                code::PRODUCER_FENCED => (code::INVALID_PRODUCER_EPOCH, "Producer fenced".into()),
                code::CONCURRENT_TRANSACTIONS => (
                    code::NOT_ENOUGH_REPLICAS,
                    "Unable to verify the partition has been added to the transaction. \
                     Underlying error: CONCURRENT_TRANSACTIONS"
                        .into(),
                ),
                other => (other, "transaction verification failed".into()),
            }
        };
        if !coordinator_up {
            return Err((
                code::NOT_ENOUGH_REPLICAS,
                "Unable to verify the partition has been added to the transaction. Underlying \
                 error: COORDINATOR_NOT_AVAILABLE"
                    .into(),
            ));
        }
        let partition = (topic.to_string(), index);
        let added = self
            .txn_verify(txn_id, pid, epoch, std::slice::from_ref(&partition))
            .map_err(translate)?;
        if added.iter().all(|a| *a) {
            return Ok(());
        }
        let tv2 = self.txn_v2(
            broker_id,
            conn,
            version >= 12,
            &format!("transactional Produce v{version}"),
        );
        if tv2 {
            return self
                .txn_add_partitions(at, txn_id, pid, epoch, &[partition])
                .map_err(translate);
        }
        let code = if version >= 11 {
            code::TRANSACTION_ABORTABLE
        } else {
            code::INVALID_TXN_STATE
        };
        Err((code, "Partition was not added to the transaction".into()))
    }

    /// Whether `records` is an idempotent batch whose (producer id, epoch, first and last
    /// sequence) match one the partition already appended.
    fn is_cached_duplicate(&self, topic: &str, index: i32, records: Option<&Bytes>) -> bool {
        let Some(h) = records
            .and_then(|raw| raw.get(..BATCH_HEADER_LEN))
            .and_then(|b| wire::parse_batch_header(b).ok())
        else {
            return false;
        };
        if h.producer_id < 0 {
            return false;
        }
        let last = seq_add(h.base_sequence, i64::from(h.record_count) - 1);
        self.topics
            .get(topic)
            .and_then(|t| t.partitions.get(usize::try_from(index).ok()?))
            .and_then(|p| p.producers.get(&h.producer_id))
            .is_some_and(|e| {
                e.epoch == h.producer_epoch
                    && e.batches
                        .iter()
                        .any(|b| b.first_seq == h.base_sequence && b.last_seq == last)
            })
    }

    #[allow(clippy::too_many_arguments)]
    fn append_batch(
        &mut self,
        broker_id: i32,
        conn: u64,
        at: Instant,
        version: i16,
        txn_id: Option<&str>,
        topic: &str,
        index: i32,
        records: Option<&Bytes>,
    ) -> PartOutcome {
        let where_ = format!("Produce v{version} {topic}/{index}");
        let corrupt = |this: &mut Self, msg: String| {
            this.violation(Some(broker_id), conn, format!("{where_}: {msg}"));
            PartOutcome::err(code::CORRUPT_MESSAGE, msg)
        };
        let Some(raw) = records else {
            return corrupt(self, "null Records".into());
        };
        let Some(h) = raw
            .get(..BATCH_HEADER_LEN)
            .and_then(|b| wire::parse_batch_header(b).ok())
        else {
            return corrupt(
                self,
                format!(
                    "{} bytes of records: shorter than a RecordBatch header",
                    raw.len()
                ),
            );
        };
        if let Err(e) = wire::validate_batch_frame(raw, &h) {
            return corrupt(self, e);
        }
        // Kafka's `LogValidator`: the batch as it came (compressed, header included) within the
        // topic's `max.message.bytes`, else none of it is appended.
        let max_message_bytes = self
            .topics
            .get(topic)
            .map_or(usize::MAX, |t| t.max_message_bytes);
        if raw.len() > max_message_bytes {
            return PartOutcome::err(
                code::MESSAGE_TOO_LARGE,
                format!(
                    "the batch is {} bytes, larger than the topic's max.message.bytes {max_message_bytes}",
                    raw.len()
                ),
            );
        }
        if h.is_control() {
            return corrupt(self, "control batch in a Produce request".into());
        }
        if h.is_transactional() && h.producer_id < 0 {
            return corrupt(self, "transactional batch without a producer id".into());
        }
        if h.compression() == 4 && version < 7 {
            return PartOutcome::err(
                code::UNSUPPORTED_COMPRESSION_TYPE,
                "zstd requires Produce v7+",
            );
        }
        let idempotent = h.producer_id >= 0;
        if idempotent && (h.producer_epoch < 0 || h.base_sequence < 0) {
            return corrupt(
                self,
                format!(
                    "idempotent batch (producer id {}) with epoch {} and base sequence {}",
                    h.producer_id, h.producer_epoch, h.base_sequence
                ),
            );
        }
        if !idempotent && h.base_sequence != -1 {
            self.violation(
                Some(broker_id),
                conn,
                format!(
                    "{where_}: non-idempotent batch with base sequence {}",
                    h.base_sequence
                ),
            );
        }
        let Some(section) = raw.get(BATCH_HEADER_LEN..) else {
            return corrupt(self, "missing records section".into());
        };
        let data = match wire::decompress(h.compression(), section, self.cfg.max_decompressed_size)
        {
            Ok(d) => d,
            Err(e) => return corrupt(self, e),
        };
        let walked = match wire::walk_records(&data, &h) {
            Ok(w) => w,
            Err(e) => return corrupt(self, e),
        };
        // Independent decode with kafka-protocol; it must agree with the walker.
        let decoded = {
            let mut b = raw.clone();
            let d = data.clone();
            RecordBatchDecoder::decode_with_custom_compression(
                &mut b,
                Some(move |_: &mut Bytes, _: Compression| Ok(d.clone())),
            )
        };
        let set = match decoded {
            Ok(s) => s,
            Err(e) => return corrupt(self, format!("kafka-protocol rejects the batch: {e}")),
        };
        if set.records.len() != walked.len()
            || set
                .records
                .iter()
                .zip(&walked)
                .any(|(r, w)| r.timestamp != w.timestamp)
        {
            return corrupt(
                self,
                "kafka-protocol and the sim disagree on the records".into(),
            );
        }
        let max_ts = walked
            .iter()
            .map(|w| w.timestamp)
            .max()
            .unwrap_or(h.base_timestamp);
        if max_ts != h.max_timestamp {
            self.violation(
                Some(broker_id),
                conn,
                format!(
                    "{where_}: MaxTimestamp {} but the records' largest timestamp is {max_ts}",
                    h.max_timestamp
                ),
            );
        }
        if idempotent && !self.producer_ids.contains_key(&h.producer_id) {
            self.violation(
                Some(broker_id),
                conn,
                format!(
                    "{where_}: producer id {} was never allocated by InitProducerId",
                    h.producer_id
                ),
            );
        }

        // Record validation comes before the producer-state checks, as in Kafka (`LogValidator`
        // before `analyzeAndValidateProducerState`): a rejected batch leaves the idempotence
        // window as it was.
        let compacted = self.topics.get(topic).is_some_and(|t| t.compacted);
        if compacted {
            if let Some(out) =
                compaction_errors(topic, index, set.records.iter().map(|r| r.key.is_some()))
            {
                return out;
            }
        }

        // Transactions: the first batch of a transaction in this partition is verified with
        // the coordinator (KIP-890); a plain idempotent batch may not interleave with an open
        // transaction of its producer.
        if h.is_transactional() {
            let txn_id = txn_id.unwrap_or_default();
            if let Err((code, message)) = self.verify_txn_produce(
                broker_id,
                conn,
                at,
                version,
                txn_id,
                topic,
                index,
                (h.producer_id, h.producer_epoch),
            ) {
                return PartOutcome::err(code, message);
            }
        } else if idempotent
            && self
                .partition(topic, index)
                .is_some_and(|p| p.open_txns.contains_key(&h.producer_id))
        {
            return PartOutcome::err(
                code::INVALID_TXN_STATE,
                format!(
                    "Expected transactional write from producer {}: it has a transaction open \
                     in this partition",
                    h.producer_id
                ),
            );
        }

        // Idempotence.
        let count = i64::from(h.record_count);
        let first = h.base_sequence;
        let last = seq_add(first, count - 1);
        let Some(part) = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(usize::try_from(index).ok()?))
        else {
            return PartOutcome::err(code::UNKNOWN_TOPIC_OR_PARTITION, "unknown partition");
        };
        let mut reset_window = false;
        if idempotent {
            if let Some(e) = part.producers.get(&h.producer_id) {
                if h.producer_epoch < e.epoch {
                    return PartOutcome::err(
                        code::INVALID_PRODUCER_EPOCH,
                        format!("epoch {} < current {}", h.producer_epoch, e.epoch),
                    );
                } else if h.producer_epoch > e.epoch {
                    if first != 0 {
                        return PartOutcome::err(
                            code::OUT_OF_ORDER_SEQUENCE_NUMBER,
                            format!(
                                "new epoch {} must start at sequence 0, got {first}",
                                h.producer_epoch
                            ),
                        );
                    }
                    reset_window = true;
                } else if let Some(d) = e
                    .batches
                    .iter()
                    .find(|b| b.first_seq == first && b.last_seq == last)
                {
                    return PartOutcome::ok(d.base_offset, false);
                } else {
                    // An empty window (a transaction marker with a newer epoch emptied it):
                    // the epoch's first batch, sequence 0.
                    let expected = e.batches.back().map_or(0, |b| next_seq(b.last_seq));
                    if expected != first {
                        return PartOutcome::err(
                            code::OUT_OF_ORDER_SEQUENCE_NUMBER,
                            format!("expected sequence {expected}, got {first}"),
                        );
                    }
                }
            } else {
                reset_window = true;
            }
        }

        // Append.
        let base = part.log.len() as i64;
        if h.is_transactional() {
            part.open_txns.entry(h.producer_id).or_insert(base);
        }
        for (i, (r, w)) in set.records.into_iter().zip(walked).enumerate() {
            part.log.push(LoggedRecord {
                offset: base + i as i64,
                key: r.key,
                value: r.value,
                headers: w.headers,
                timestamp: w.timestamp,
                producer_id: h.producer_id,
                producer_epoch: h.producer_epoch,
                sequence: if idempotent {
                    seq_add(first, i as i64)
                } else {
                    -1
                },
                batch_base_offset: base,
                transactional: h.is_transactional(),
                control: None,
            });
        }
        if idempotent {
            let meta = BatchMeta {
                first_seq: first,
                last_seq: last,
                base_offset: base,
                timestamp: h.base_timestamp,
            };
            let entry = part
                .producers
                .entry(h.producer_id)
                .or_insert_with(|| ProducerEntry {
                    epoch: h.producer_epoch,
                    batches: Default::default(),
                });
            if reset_window {
                entry.epoch = h.producer_epoch;
                entry.batches.clear();
            }
            entry.batches.push_back(meta);
            while entry.batches.len() > BATCHES_TO_RETAIN {
                entry.batches.pop_front();
            }
        }
        PartOutcome::ok(base, true)
    }
}
