//! Shared helpers of the scenario and property tests: building a cluster and a producer, and
//! checking the invariants every run must keep.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use producer_core::{Config, ConfigBuilder, ErrorCode, ProduceError, Producer, Record};
use producer_sim::drive::Harness;
use producer_sim::{SimCluster, SimConfig};

/// What a test sent: the record's id (also in its value), topic and the partition it was sent to
/// if explicit.
#[derive(Debug, Clone)]
pub struct Sent {
    pub id: u64,
    pub topic: String,
    pub key: Option<Bytes>,
}

pub fn value_of(id: u64) -> Bytes {
    Bytes::from(format!("value-{id:08}-{}", "x".repeat((id % 50) as usize)))
}

pub fn id_of(value: &[u8]) -> u64 {
    std::str::from_utf8(&value[6..14]).unwrap().parse().unwrap()
}

pub fn cluster(brokers: usize, topics: &[(&str, i32)], seed: u64) -> SimCluster {
    cluster_with(SimConfig::with_brokers(brokers, seed), topics)
}

pub fn cluster_with(cfg: SimConfig, topics: &[(&str, i32)]) -> SimCluster {
    let mut c = SimCluster::new(cfg, Instant::now());
    for (t, n) in topics {
        c.create_topic(t, *n).unwrap();
    }
    c
}

pub fn harness(
    cluster: SimCluster,
    tune: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> Harness<u64> {
    let now = cluster.now();
    let config = tune(Config::builder(cluster.bootstrap())).build().unwrap();
    Harness::new(Producer::new(config, now), cluster, now)
}

pub fn record(id: u64, topic: &str, keyed: bool) -> Record {
    let mut r = Record::new(topic, value_of(id)).with_timestamp(1_700_000_000_000 + id as i64);
    if keyed {
        r = r.with_key(format!("key-{}", id % 17));
    }
    r
}

/// Sends `n` records with ids from `first`, keyed or not, round-robin over `topics`.
pub fn send_many(
    h: &mut Harness<u64>,
    topics: &[&str],
    first: u64,
    n: u64,
    keyed: bool,
) -> Vec<Sent> {
    let mut sent = Vec::new();
    for id in first..first + n {
        let topic = topics[(id % topics.len() as u64) as usize];
        let r = record(id, topic, keyed);
        let key = r.key.clone();
        h.send(r, id)
            .unwrap_or_else(|e| panic!("send {id} refused: {:?}", e.reason));
        sent.push(Sent {
            id,
            topic: topic.to_string(),
            key,
        });
    }
    sent
}

/// The report of each record id: `Ok((partition, offset))` or the error.
pub fn reports(h: &Harness<u64>) -> HashMap<u64, Result<(i32, i64), ProduceError>> {
    let mut out = HashMap::new();
    for d in &h.deliveries {
        let r = match &d.result {
            Ok(m) => Ok((m.partition, m.offset)),
            Err(f) => {
                assert_eq!(
                    id_of(f.record.value.as_deref().unwrap()),
                    d.opaque,
                    "failure hands back the record"
                );
                Err(f.error.clone())
            }
        };
        assert!(
            out.insert(d.opaque, r).is_none(),
            "record {} reported twice",
            d.opaque
        );
    }
    out
}

/// Broker errors that mean the broker did not write the batch (it was refused whole before
/// the append).
const REFUSED_BEFORE_APPEND: [ErrorCode; 11] = [
    ErrorCode::CORRUPT_MESSAGE,
    ErrorCode::MESSAGE_TOO_LARGE,
    ErrorCode::RECORD_LIST_TOO_LARGE,
    ErrorCode::INVALID_REQUIRED_ACKS,
    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
    ErrorCode::INVALID_TIMESTAMP,
    ErrorCode::INVALID_REQUEST,
    ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT,
    ErrorCode::POLICY_VIOLATION,
    ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
    ErrorCode::INVALID_RECORD,
];

/// Whether an error means the record was certainly not written.
pub fn certainly_not_written(e: &ProduceError) -> bool {
    match e {
        ProduceError::DeliveryTimeout {
            possibly_persisted, ..
        } => !possibly_persisted,
        ProduceError::Broker {
            code,
            possibly_persisted,
            ..
        } => !possibly_persisted && REFUSED_BEFORE_APPEND.contains(code),
        ProduceError::InvalidRecord {
            possibly_persisted, ..
        }
        | ProduceError::BatchRejected {
            possibly_persisted, ..
        } => !possibly_persisted,
        ProduceError::UnknownTopic
        | ProduceError::UnknownPartition { .. }
        | ProduceError::Refused(_) => true,
        _ => false,
    }
}

/// Checks every invariant of a finished run:
/// - exactly one report per sent record;
/// - each success's offset holds that very record in the log;
/// - per partition, successful records appear in the log in send order;
/// - no record appears twice in any log (idempotence);
/// - a record reported as certainly not written is not in any log.
pub fn check_run(h: &Harness<u64>, sent: &[Sent], topics: &[(&str, i32)], idempotent: bool) {
    assert!(
        h.contract_violations.is_empty(),
        "contract violations: {:?}",
        h.contract_violations
    );
    let reports = reports(h);
    for s in sent {
        assert!(reports.contains_key(&s.id), "record {} got no report", s.id);
    }
    assert_eq!(reports.len(), sent.len(), "reports for records never sent");
    let mut in_log: HashMap<u64, (String, i32, i64)> = HashMap::new();
    let mut all_offsets: HashMap<u64, Vec<i64>> = HashMap::new();
    let mut seen: HashSet<u64> = HashSet::new();
    for (t, n) in topics {
        for p in 0..*n {
            for rec in h.cluster.log(t, p) {
                let id = id_of(rec.value.as_deref().unwrap());
                if !seen.insert(id) && idempotent {
                    panic!(
                        "record {id} appears twice in the logs (second at {t}-{p}@{})",
                        rec.offset
                    );
                }
                in_log.entry(id).or_insert((t.to_string(), p, rec.offset));
                all_offsets.entry(id).or_default().push(rec.offset);
            }
        }
    }
    let by_id: HashMap<u64, &Sent> = sent.iter().map(|s| (s.id, s)).collect();
    let mut per_partition: BTreeMap<(String, i32), Vec<(u64, i64)>> = BTreeMap::new();
    for (id, r) in &reports {
        match r {
            Ok((p, offset)) => {
                let s = by_id[id];
                let logged = in_log
                    .get(id)
                    .unwrap_or_else(|| panic!("record {id} reported delivered but not in the log"));
                assert_eq!(
                    (&logged.0, logged.1),
                    (&s.topic, *p),
                    "record {id} landed elsewhere than reported"
                );
                if *offset >= 0 {
                    assert!(
                        all_offsets[id].contains(offset),
                        "record {id} reported at offset {offset}, logged at {:?}",
                        all_offsets[id]
                    );
                }
                per_partition
                    .entry((s.topic.clone(), *p))
                    .or_default()
                    .push((*id, logged.2));
            }
            Err(e) => {
                if certainly_not_written(e) {
                    assert!(
                        !in_log.contains_key(id),
                        "record {id} failed with {e:?} but is in the log"
                    );
                }
            }
        }
    }
    for ((t, p), mut recs) in per_partition {
        recs.sort_by_key(|&(id, _)| id);
        for w in recs.windows(2) {
            assert!(
                w[0].1 < w[1].1,
                "{t}-{p}: record {} sent before {} but logged after it",
                w[0].0,
                w[1].0
            );
        }
    }
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
