//! The protocol probe: decodes every request frame a producer sends through the fault proxies
//! with the `kafka-protocol` crate (an independent codec), at the version its header names,
//! and fails on any decode error or byte left over; the record batches of Produce requests are
//! decoded too (CRC-32C checked). The ApiVersions answers of the broker are decoded as well, so
//! the negotiated version of each API can be set beside what the broker offers.
//!
//! Use: [`Probe::attach`] to the cluster's proxies before the producer starts, produce,
//! [`Probe::finish`] to detach and get the [`ProbeReport`].
//!
//! The transaction APIs are looked into as well ([`TxnWire`]): FindCoordinator key types,
//! InitProducerId with a transactional id, AddPartitionsToTxn partitions, AddOffsetsToTxn,
//! TxnOffsetCommit groups (generation, member), EndTxn commit/abort by version, transactional
//! Produce requests and batches, the error codes of their answers and the producer id and
//! epoch EndTxn v5 hands back. [`ProbeReport::check_transaction_version`] sets a run beside
//! the rules of TV1 and TV2.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::mpsc;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, ApiKey, ApiVersionsResponse,
    EndTxnResponse, FindCoordinatorResponse, InitProducerIdResponse, MetadataResponse,
    ProduceResponse, RequestKind, ResponseHeader, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable};
use kafka_protocol::records::RecordBatchDecoder;

use super::proxy::{Direction, TappedFrame};
use super::KafkaCluster;

/// One decoded request.
#[derive(Debug, Clone)]
pub struct DecodedRequest {
    /// Its API.
    pub api: ApiKey,
    /// The version its header names.
    pub version: i16,
    /// Its correlation id.
    pub correlation_id: i32,
    /// Records in its record batches (Produce).
    pub records: usize,
    /// What the transaction APIs (and Produce) say about transactions.
    pub txn: TxnDetail,
}

/// The transaction-related content of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TxnDetail {
    /// Not a transaction API (or a Produce without a transactional id).
    #[default]
    None,
    /// FindCoordinator: key type (0 group, 1 transaction) and how many keys.
    FindCoordinator {
        /// 0 group, 1 transaction.
        key_type: i8,
        /// Keys asked (batched at v4+, one before).
        keys: usize,
    },
    /// InitProducerId; `transactional_id` `None` for an idempotent producer.
    InitProducerId {
        /// The transactional id.
        transactional_id: Option<String>,
        /// The transaction timeout asked, ms.
        timeout_ms: i32,
    },
    /// AddPartitionsToTxn: partitions added (over every transaction of a v4+ batch).
    AddPartitionsToTxn {
        /// Partitions in the request.
        partitions: usize,
        /// Whether a v4+ transaction in it was verify-only (brokers' own requests).
        verify_only: bool,
    },
    /// AddOffsetsToTxn for a group.
    AddOffsetsToTxn {
        /// The group.
        group: String,
    },
    /// TxnOffsetCommit.
    TxnOffsetCommit {
        /// The group.
        group: String,
        /// The generation sent (-1: none).
        generation: i32,
        /// The member id sent.
        member: String,
        /// Partitions committed.
        partitions: usize,
    },
    /// EndTxn: commit or abort.
    EndTxn {
        /// True for a commit.
        committed: bool,
    },
    /// A Produce request with a transactional id.
    Produce {
        /// Batches carrying the transactional flag.
        transactional_batches: usize,
        /// Batches in it.
        batches: usize,
    },
}

/// Decodes one request frame (length prefix included): header, body at the header's version,
/// and for Produce every record batch. Fails on any decode error and on trailing bytes.
pub fn decode_request(frame: &Bytes) -> Result<DecodedRequest, String> {
    let mut b = frame.clone();
    if b.remaining() < 4 {
        return Err("frame shorter than its length prefix".into());
    }
    let len = b.get_u32() as usize;
    if len != b.remaining() {
        return Err(format!(
            "length prefix {len}, {} bytes follow",
            b.remaining()
        ));
    }
    let header =
        decode_request_header_from_buffer(&mut b).map_err(|e| format!("request header: {e}"))?;
    let api = ApiKey::try_from(header.request_api_key)
        .map_err(|_| format!("unknown API key {}", header.request_api_key))?;
    let version = header.request_api_version;
    let body = RequestKind::decode(api, &mut b, version)
        .map_err(|e| format!("{api:?} v{version} body: {e}"))?;
    if b.has_remaining() {
        return Err(format!(
            "{api:?} v{version}: {} bytes after the body",
            b.remaining()
        ));
    }
    let mut records = 0;
    let mut txn = TxnDetail::None;
    if let RequestKind::Produce(p) = &body {
        let (mut batches, mut transactional_batches) = (0, 0);
        for t in &p.topic_data {
            for part in &t.partition_data {
                let mut rb = part.records.clone().unwrap_or_default();
                let sets = RecordBatchDecoder::decode_all(&mut rb).map_err(|e| {
                    format!(
                        "Produce v{version} {}-{}: record batch: {e}",
                        t.name.0, part.index
                    )
                })?;
                records += sets.iter().map(|s| s.records.len()).sum::<usize>();
                batches += sets.len();
                transactional_batches += sets
                    .iter()
                    .filter(|s| s.records.first().is_some_and(|r| r.transactional))
                    .count();
            }
        }
        if p.transactional_id.is_some() || transactional_batches > 0 {
            txn = TxnDetail::Produce {
                transactional_batches,
                batches,
            };
        }
    }
    match &body {
        RequestKind::FindCoordinator(r) => {
            txn = TxnDetail::FindCoordinator {
                key_type: r.key_type,
                keys: if version >= 4 {
                    r.coordinator_keys.len()
                } else {
                    1
                },
            }
        }
        RequestKind::InitProducerId(r) => {
            txn = TxnDetail::InitProducerId {
                transactional_id: r.transactional_id.as_ref().map(|t| t.0.to_string()),
                timeout_ms: r.transaction_timeout_ms,
            }
        }
        RequestKind::AddPartitionsToTxn(r) => {
            let (partitions, verify_only) = if version >= 4 {
                (
                    r.transactions
                        .iter()
                        .flat_map(|t| t.topics.iter())
                        .map(|t| t.partitions.len())
                        .sum(),
                    r.transactions.iter().any(|t| t.verify_only),
                )
            } else {
                (
                    r.v3_and_below_topics
                        .iter()
                        .map(|t| t.partitions.len())
                        .sum(),
                    false,
                )
            };
            txn = TxnDetail::AddPartitionsToTxn {
                partitions,
                verify_only,
            }
        }
        RequestKind::AddOffsetsToTxn(r) => {
            txn = TxnDetail::AddOffsetsToTxn {
                group: r.group_id.0.to_string(),
            }
        }
        RequestKind::TxnOffsetCommit(r) => {
            txn = TxnDetail::TxnOffsetCommit {
                group: r.group_id.0.to_string(),
                generation: r.generation_id,
                member: r.member_id.to_string(),
                partitions: r.topics.iter().map(|t| t.partitions.len()).sum(),
            }
        }
        RequestKind::EndTxn(r) => {
            txn = TxnDetail::EndTxn {
                committed: r.committed,
            }
        }
        _ => {}
    }
    Ok(DecodedRequest {
        api,
        version,
        correlation_id: header.correlation_id,
        records,
        txn,
    })
}

/// What the probe saw of transactions.
#[derive(Debug, Default, Clone)]
pub struct TxnWire {
    /// FindCoordinator keys asked, by key type (0 group, 1 transaction).
    pub coordinator_keys: BTreeMap<i8, usize>,
    /// InitProducerId requests with a transactional id, and without.
    pub init_transactional: usize,
    /// InitProducerId requests without a transactional id (idempotent producers).
    pub init_idempotent: usize,
    /// The transaction timeouts asked in InitProducerId, ms.
    pub init_timeouts_ms: BTreeSet<i32>,
    /// AddPartitionsToTxn requests, and the partitions they add.
    pub add_partitions_requests: usize,
    /// Partitions in AddPartitionsToTxn requests.
    pub add_partitions: usize,
    /// AddOffsetsToTxn requests.
    pub add_offsets: usize,
    /// TxnOffsetCommit requests: (group, generation, member) -> how many.
    pub offset_commits: BTreeMap<(String, i32, String), usize>,
    /// Partitions in TxnOffsetCommit requests.
    pub offset_commit_partitions: usize,
    /// EndTxn requests: (version, committed) -> how many (retries counted again).
    pub end_txn: BTreeMap<(i16, bool), usize>,
    /// EndTxn answers without an error: committed -> how many (transactions ended).
    pub ended: BTreeMap<bool, usize>,
    /// TxnOffsetCommit answers without an error for any partition: (group, generation,
    /// member) -> how many.
    pub offset_commits_ok: BTreeMap<(String, i32, String), usize>,
    /// Produce requests with a transactional id, by version.
    pub produce_versions: BTreeMap<i16, usize>,
    /// Batches with the transactional flag in Produce requests.
    pub transactional_batches: usize,
    /// Error codes in the answers of the transaction APIs: (API, code) -> how many (0 = no
    /// error). For AddPartitionsToTxn and TxnOffsetCommit the partitions' codes.
    pub answer_codes: BTreeMap<(String, i16), usize>,
    /// The (producer id, epoch) EndTxn v5+ answers handed back, in order.
    pub end_txn_epochs: Vec<(i64, i16)>,
    /// The (producer id, epoch) InitProducerId answers handed back, in order.
    pub init_epochs: Vec<(i64, i16)>,
    /// Every request, and the answers of the transaction APIs and Produce, as the probe
    /// received them: (ms since the probe attached, node, what). For a failing test's message
    /// ([`TxnWire::timeline_tail`]).
    pub timeline: Vec<(u64, i32, String)>,
    /// The node the last FindCoordinator answer named (for the timeline).
    last_coordinator: Option<i32>,
}

impl TxnWire {
    /// Transactions committed: EndTxn commits answered without an error.
    pub fn committed(&self) -> usize {
        self.ended.get(&true).copied().unwrap_or(0)
    }

    /// Transactions aborted: EndTxn aborts answered without an error.
    pub fn aborted(&self) -> usize {
        self.ended.get(&false).copied().unwrap_or(0)
    }

    /// EndTxn commits sent (any version, retries counted again).
    pub fn commits(&self) -> usize {
        self.end_txn
            .iter()
            .filter(|((_, c), _)| *c)
            .map(|(_, n)| n)
            .sum()
    }

    /// EndTxn aborts sent (any version, retries counted again).
    pub fn aborts(&self) -> usize {
        self.end_txn
            .iter()
            .filter(|((_, c), _)| !*c)
            .map(|(_, n)| n)
            .sum()
    }

    /// How many answers of `api` carried `code`.
    pub fn answer_count(&self, api: ApiKey, code: i16) -> usize {
        self.answer_codes
            .get(&(format!("{api:?}"), code))
            .copied()
            .unwrap_or(0)
    }

    /// The last `n` entries of [`timeline`](Self::timeline), one a line.
    pub fn timeline_tail(&self, n: usize) -> String {
        let skip = self.timeline.len().saturating_sub(n);
        self.timeline
            .iter()
            .skip(skip)
            .map(|(ms, node, what)| format!("{:>8.3} s node {node}: {what}\n", *ms as f64 / 1000.0))
            .collect()
    }

    fn add(&mut self, d: &DecodedRequest) {
        match &d.txn {
            TxnDetail::None => {}
            TxnDetail::FindCoordinator { key_type, keys } => {
                *self.coordinator_keys.entry(*key_type).or_default() += keys
            }
            TxnDetail::InitProducerId {
                transactional_id,
                timeout_ms,
            } => {
                if transactional_id.is_some() {
                    self.init_transactional += 1;
                    self.init_timeouts_ms.insert(*timeout_ms);
                } else {
                    self.init_idempotent += 1;
                }
            }
            TxnDetail::AddPartitionsToTxn { partitions, .. } => {
                self.add_partitions_requests += 1;
                self.add_partitions += partitions;
            }
            TxnDetail::AddOffsetsToTxn { .. } => self.add_offsets += 1,
            TxnDetail::TxnOffsetCommit {
                group,
                generation,
                member,
                partitions,
            } => {
                *self
                    .offset_commits
                    .entry((group.clone(), *generation, member.clone()))
                    .or_default() += 1;
                self.offset_commit_partitions += partitions;
            }
            TxnDetail::EndTxn { committed } => {
                *self.end_txn.entry((d.version, *committed)).or_default() += 1
            }
            TxnDetail::Produce {
                transactional_batches,
                ..
            } => {
                *self.produce_versions.entry(d.version).or_default() += 1;
                self.transactional_batches += transactional_batches;
            }
        }
    }
}

impl fmt::Display for TxnWire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "FindCoordinator keys {:?} (key type: count), InitProducerId transactional {} \
             (timeouts {:?} ms) idempotent {}, AddPartitionsToTxn {} requests / {} partitions, \
             AddOffsetsToTxn {}, TxnOffsetCommit {:?} / {} partitions, EndTxn (version, commit) \
             {:?} ended {:?}, transactional Produce by version {:?} / {} batches, answers (API, \
             code) {:?}",
            self.coordinator_keys,
            self.init_transactional,
            self.init_timeouts_ms,
            self.init_idempotent,
            self.add_partitions_requests,
            self.add_partitions,
            self.add_offsets,
            self.offset_commits,
            self.offset_commit_partitions,
            self.end_txn,
            self.ended,
            self.produce_versions,
            self.transactional_batches,
            self.answer_codes
        )
    }
}

/// What the probe saw.
#[derive(Debug, Default)]
pub struct ProbeReport {
    /// Requests decoded, per API: the versions used and how many.
    pub versions: BTreeMap<String, BTreeMap<i16, usize>>,
    /// Requests decoded.
    pub requests: usize,
    /// Records in the Produce requests (retries counted again).
    pub produce_records: usize,
    /// Decode failures: (node, connection, error).
    pub errors: Vec<(i32, u64, String)>,
    /// The broker's ApiVersions ranges (api name -> (min, max)), from its first answer.
    pub broker_ranges: BTreeMap<String, (i16, i16)>,
    /// Partition error codes in the brokers' Produce answers (code -> count; 0 = success):
    /// which real broker errors a fault produced.
    pub produce_errors: BTreeMap<i16, usize>,
    /// Produce answers that acknowledged some partitions and refused others (`code -> count`
    /// of the refusals): a mixed answer.
    pub mixed_produce_answers: BTreeMap<i16, usize>,
    /// The broker's finalized features (name -> (min, max level)), from its first ApiVersions
    /// answer (v3+).
    pub broker_finalized: BTreeMap<String, (i16, i16)>,
    /// The transaction APIs' traffic.
    pub txn: TxnWire,
}

impl ProbeReport {
    /// Requests of `api` decoded (every version).
    pub fn count(&self, api: ApiKey) -> usize {
        self.versions
            .get(&format!("{api:?}"))
            .map_or(0, |v| v.values().sum())
    }

    /// The versions of `api` used, ascending.
    pub fn versions_of(&self, api: ApiKey) -> Vec<i16> {
        self.versions
            .get(&format!("{api:?}"))
            .map(|v| v.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Checks the run against the protocol of `transaction.version` `tv`. Both: at least one
    /// FindCoordinator for a transactional id, InitProducerId with one, EndTxn, and
    /// transactional Produce requests. TV2 (KIP-890): no AddPartitionsToTxn, every
    /// transactional Produce v12+, every EndTxn v5+. TV1: AddPartitionsToTxn sent, every
    /// Produce at most v11, every EndTxn at most v4. Says everything that is off.
    pub fn check_transaction_version(&self, tv: i16) -> Result<(), String> {
        let t = &self.txn;
        let mut off = Vec::new();
        if t.coordinator_keys.get(&1).copied().unwrap_or(0) == 0 {
            off.push("no FindCoordinator for a transactional id".to_string());
        }
        if t.init_transactional == 0 {
            off.push("no InitProducerId with a transactional id".into());
        }
        if t.end_txn.is_empty() {
            off.push("no EndTxn".into());
        }
        if t.produce_versions.is_empty() {
            off.push("no transactional Produce request".into());
        }
        let end_versions: BTreeSet<i16> = t.end_txn.keys().map(|(v, _)| *v).collect();
        let produce_all = self.versions_of(ApiKey::Produce);
        if tv >= 2 {
            if self.count(ApiKey::AddPartitionsToTxn) > 0 {
                off.push(format!(
                    "TV2 but {} AddPartitionsToTxn requests ({} partitions)",
                    self.count(ApiKey::AddPartitionsToTxn),
                    t.add_partitions
                ));
            }
            if let Some(v) = t.produce_versions.keys().find(|&&v| v < 12) {
                off.push(format!(
                    "TV2 but a transactional Produce v{v} (versions {:?})",
                    t.produce_versions
                ));
            }
            if let Some(v) = end_versions.iter().find(|&&v| v < 5) {
                off.push(format!("TV2 but EndTxn v{v} (versions {end_versions:?})"));
            }
        } else {
            if t.add_partitions_requests == 0 {
                off.push("TV1 but no AddPartitionsToTxn".into());
            }
            if let Some(v) = produce_all.iter().find(|&&v| v > 11) {
                off.push(format!("TV1 but a Produce v{v} (versions {produce_all:?})"));
            }
            if let Some(v) = end_versions.iter().find(|&&v| v > 4) {
                off.push(format!("TV1 but EndTxn v{v} (versions {end_versions:?})"));
            }
        }
        if off.is_empty() {
            Ok(())
        } else {
            Err(format!("{}; the run: {t}", off.join("; ")))
        }
    }

    /// How many Produce answers carried `code` for a partition.
    pub fn produce_error_count(&self, code: producer_core::ErrorCode) -> usize {
        self.produce_errors.get(&code.0).copied().unwrap_or(0)
    }
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} requests decoded, {} decode errors, {} records in Produce requests",
            self.requests,
            self.errors.len(),
            self.produce_records
        )?;
        writeln!(
            f,
            "{:<18} {:>10} {:>14} {:>10}",
            "API", "versions", "broker offers", "requests"
        )?;
        for (api, vs) in &self.versions {
            let used: Vec<String> = vs.keys().map(|v| format!("v{v}")).collect();
            let offer = self
                .broker_ranges
                .get(api)
                .map(|(a, b)| format!("v{a}-v{b}"))
                .unwrap_or_else(|| "?".into());
            writeln!(
                f,
                "{api:<18} {:>10} {offer:>14} {:>10}",
                used.join(","),
                vs.values().sum::<usize>()
            )?;
        }
        let codes: Vec<String> = self
            .produce_errors
            .iter()
            .map(|(c, n)| {
                let name = producer_core::ErrorCode(*c).name().unwrap_or("?");
                format!("{name}({c}) x{n}")
            })
            .collect();
        writeln!(f, "Produce answers, per partition: {}", codes.join(", "))?;
        if !self.broker_finalized.is_empty() {
            writeln!(f, "broker finalized features: {:?}", self.broker_finalized)?;
        }
        if self.txn.init_transactional > 0 || !self.txn.end_txn.is_empty() {
            writeln!(f, "transactions: {}", self.txn)?;
        }
        for (node, conn, e) in self.errors.iter().take(10) {
            writeln!(f, "DECODE ERROR node {node} conn {conn}: {e}")?;
        }
        Ok(())
    }
}

/// Taps every proxy of a cluster; a thread of its own decodes the frames as they come.
pub struct Probe<'a> {
    cluster: &'a KafkaCluster,
    worker: std::thread::JoinHandle<ProbeReport>,
}

impl<'a> Probe<'a> {
    /// Starts tapping every proxy of `cluster`.
    pub fn attach(cluster: &'a KafkaCluster) -> Probe<'a> {
        let (tx, rx) = mpsc::channel();
        for p in cluster.proxies() {
            p.set_tap(Some(tx.clone()));
        }
        let worker = std::thread::spawn(move || decode_all(rx));
        Probe { cluster, worker }
    }

    /// Stops tapping and returns what was decoded.
    pub fn finish(self) -> ProbeReport {
        // Dropping the proxies' senders ends the worker's loop.
        for p in self.cluster.proxies() {
            p.set_tap(None);
        }
        self.worker.join().expect("the probe's decoder panicked")
    }
}

fn decode_all(rx: mpsc::Receiver<TappedFrame>) -> ProbeReport {
    let mut report = ProbeReport::default();
    // (node, conn, correlation id) -> (api, version), to decode the ApiVersions answers.
    let mut asked: HashMap<(i32, u64, i32), (ApiKey, i16, TxnDetail)> = HashMap::new();
    let names = |k: i16| {
        ApiKey::try_from(k)
            .map(|a| format!("{a:?}"))
            .unwrap_or_else(|_| format!("api {k}"))
    };
    let mut seen_ranges = BTreeSet::new();
    let attached = std::time::Instant::now();
    let ms = || attached.elapsed().as_millis() as u64;
    for t in rx {
        match t.direction {
            Direction::ToBroker => match decode_request(&t.frame) {
                Ok(d) => {
                    report.requests += 1;
                    report.produce_records += d.records;
                    report.txn.add(&d);
                    let detail = d.txn.clone();
                    let what = match (&d.txn, d.api) {
                        (_, ApiKey::Produce) => format!(
                            "-> Produce v{} ({} records) {:?}",
                            d.version, d.records, d.txn
                        ),
                        (TxnDetail::None, api) => format!("-> {api:?} v{}", d.version),
                        (txn, api) => format!("-> {api:?} v{} {txn:?}", d.version),
                    };
                    report.txn.timeline.push((ms(), t.node, what));
                    *report
                        .versions
                        .entry(format!("{:?}", d.api))
                        .or_default()
                        .entry(d.version)
                        .or_default() += 1;
                    asked.insert(
                        (t.node, t.conn, d.correlation_id),
                        (d.api, d.version, detail),
                    );
                }
                Err(e) => report.errors.push((t.node, t.conn, e)),
            },
            Direction::ToClient => {
                let mut b = t.frame.clone();
                if b.remaining() < 8 {
                    continue;
                }
                b.advance(4);
                let corr = (&b[..4]).get_i32();
                let Some((api, version, detail)) = asked.remove(&(t.node, t.conn, corr)) else {
                    continue;
                };
                if api == ApiKey::Metadata {
                    let decoded =
                        ResponseHeader::decode(&mut b, api.response_header_version(version))
                            .and_then(|_| MetadataResponse::decode(&mut b, version));
                    match decoded {
                        Ok(r) => {
                            let brokers: Vec<i32> = r.brokers.iter().map(|b| b.node_id.0).collect();
                            let leaders: Vec<String> = r
                                .topics
                                .iter()
                                .filter(|t| t.name.as_ref().is_some_and(|n| !n.0.starts_with("__")))
                                .map(|t| {
                                    let ps: Vec<String> = t
                                        .partitions
                                        .iter()
                                        .map(|p| format!("{}:{}", p.partition_index, p.leader_id.0))
                                        .collect();
                                    format!(
                                        "{} [{}]",
                                        t.name.as_ref().map(|n| n.0.as_str()).unwrap_or("?"),
                                        ps.join(" ")
                                    )
                                })
                                .collect();
                            report.txn.timeline.push((
                                ms(),
                                t.node,
                                format!(
                                    "<- Metadata v{version} brokers {brokers:?}, leaders (partition:leader) {}",
                                    leaders.join("; ")
                                ),
                            ));
                        }
                        Err(e) => report.errors.push((
                            t.node,
                            t.conn,
                            format!("Metadata v{version} answer: {e}"),
                        )),
                    }
                    continue;
                }
                if api == ApiKey::Produce {
                    let decoded =
                        ResponseHeader::decode(&mut b, api.response_header_version(version))
                            .and_then(|_| ProduceResponse::decode(&mut b, version));
                    match decoded {
                        Ok(r) => {
                            let mut codes: BTreeMap<i16, usize> = BTreeMap::new();
                            for t in &r.responses {
                                for p in &t.partition_responses {
                                    *report.produce_errors.entry(p.error_code).or_default() += 1;
                                    *codes.entry(p.error_code).or_default() += 1;
                                }
                            }
                            if codes.contains_key(&0) {
                                for (&code, _) in codes.iter().filter(|(c, _)| **c != 0) {
                                    *report.mixed_produce_answers.entry(code).or_default() += 1;
                                }
                            }
                            report.txn.timeline.push((
                                ms(),
                                t.node,
                                format!("<- Produce v{version} partition codes {codes:?}"),
                            ));
                        }
                        Err(e) => report.errors.push((
                            t.node,
                            t.conn,
                            format!("Produce v{version} answer: {e}"),
                        )),
                    }
                    continue;
                }
                if is_txn_api(api) {
                    let before = report.txn.answer_codes.clone();
                    let header_version = api.response_header_version(version);
                    if let Err(e) = ResponseHeader::decode(&mut b, header_version)
                        .map_err(|e| e.to_string())
                        .and_then(|_| txn_answer(&mut report.txn, api, version, &detail, &mut b))
                    {
                        report.errors.push((
                            t.node,
                            t.conn,
                            format!("{api:?} v{version} answer: {e}"),
                        ));
                    }
                    let mut codes: Vec<String> = Vec::new();
                    for (k, n) in &report.txn.answer_codes {
                        let was = before.get(k).copied().unwrap_or(0);
                        if *n > was {
                            codes.push(format!("{}x{}", k.1, n - was));
                        }
                    }
                    let extra = report
                        .txn
                        .last_coordinator
                        .take()
                        .map(|c| format!(" coordinator {c}"))
                        .unwrap_or_default();
                    report.txn.timeline.push((
                        ms(),
                        t.node,
                        format!("<- {api:?} v{version} codes [{}]{extra}", codes.join(", ")),
                    ));
                    continue;
                }
                if api != ApiKey::ApiVersions || !seen_ranges.insert(t.node) {
                    continue;
                }
                // ApiVersions answers always use response header v0.
                let decoded = ResponseHeader::decode(&mut b, 0)
                    .and_then(|_| ApiVersionsResponse::decode(&mut b, version));
                match decoded {
                    Ok(r) => {
                        if report.broker_finalized.is_empty() {
                            report.broker_finalized = r
                                .finalized_features
                                .iter()
                                .map(|f| {
                                    (
                                        f.name.to_string(),
                                        (f.min_version_level, f.max_version_level),
                                    )
                                })
                                .collect();
                        }
                        for k in r.api_keys {
                            report
                                .broker_ranges
                                .insert(names(k.api_key), (k.min_version, k.max_version));
                        }
                    }
                    Err(e) => report.errors.push((
                        t.node,
                        t.conn,
                        format!("ApiVersions v{version} answer: {e}"),
                    )),
                }
            }
        }
    }
    report
}

fn is_txn_api(api: ApiKey) -> bool {
    matches!(
        api,
        ApiKey::FindCoordinator
            | ApiKey::InitProducerId
            | ApiKey::AddPartitionsToTxn
            | ApiKey::AddOffsetsToTxn
            | ApiKey::TxnOffsetCommit
            | ApiKey::EndTxn
    )
}

/// Decodes the answer of a transaction API (header already read) into `txn`'s error codes
/// and epochs.
fn txn_answer(
    txn: &mut TxnWire,
    api: ApiKey,
    version: i16,
    detail: &TxnDetail,
    b: &mut Bytes,
) -> Result<(), String> {
    let name = format!("{api:?}");
    let mut codes = Vec::new();
    fn e(e: impl fmt::Display) -> String {
        e.to_string()
    }
    match api {
        ApiKey::FindCoordinator => {
            let r = FindCoordinatorResponse::decode(b, version).map_err(e)?;
            txn.last_coordinator = if version >= 4 {
                r.coordinators.first().map(|c| c.node_id.0)
            } else {
                Some(r.node_id.0)
            };
            if version >= 4 {
                codes.extend(r.coordinators.iter().map(|c| c.error_code));
            } else {
                codes.push(r.error_code);
            }
        }
        ApiKey::InitProducerId => {
            let r = InitProducerIdResponse::decode(b, version).map_err(e)?;
            codes.push(r.error_code);
            if r.error_code == 0 {
                txn.init_epochs.push((r.producer_id.0, r.producer_epoch));
            }
        }
        ApiKey::AddPartitionsToTxn => {
            let r = AddPartitionsToTxnResponse::decode(b, version).map_err(e)?;
            if version >= 4 {
                if r.error_code != 0 {
                    codes.push(r.error_code);
                }
                for t in &r.results_by_transaction {
                    for tr in &t.topic_results {
                        codes.extend(
                            tr.results_by_partition
                                .iter()
                                .map(|p| p.partition_error_code),
                        );
                    }
                }
            } else {
                for tr in &r.results_by_topic_v3_and_below {
                    codes.extend(
                        tr.results_by_partition
                            .iter()
                            .map(|p| p.partition_error_code),
                    );
                }
            }
        }
        ApiKey::AddOffsetsToTxn => {
            let r = AddOffsetsToTxnResponse::decode(b, version).map_err(e)?;
            codes.push(r.error_code);
        }
        ApiKey::TxnOffsetCommit => {
            let r = TxnOffsetCommitResponse::decode(b, version).map_err(e)?;
            for t in &r.topics {
                codes.extend(t.partitions.iter().map(|p| p.error_code));
            }
            let ok = r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .all(|p| p.error_code == 0);
            if let (
                TxnDetail::TxnOffsetCommit {
                    group,
                    generation,
                    member,
                    ..
                },
                true,
            ) = (detail, ok)
            {
                *txn.offset_commits_ok
                    .entry((group.clone(), *generation, member.clone()))
                    .or_default() += 1;
            }
        }
        ApiKey::EndTxn => {
            let r = EndTxnResponse::decode(b, version).map_err(e)?;
            codes.push(r.error_code);
            if let (TxnDetail::EndTxn { committed }, 0) = (detail, r.error_code) {
                *txn.ended.entry(*committed).or_default() += 1;
            }
            if version >= 5 && r.error_code == 0 {
                txn.end_txn_epochs.push((r.producer_id.0, r.producer_epoch));
            }
        }
        _ => return Ok(()),
    }
    if b.has_remaining() {
        return Err(format!("{} bytes after the body", b.remaining()));
    }
    for c in codes {
        *txn.answer_codes.entry((name.clone(), c)).or_default() += 1;
    }
    Ok(())
}
