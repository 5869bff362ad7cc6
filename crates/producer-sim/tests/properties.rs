//! Property tests over random workloads and fault schedules, against the simulated cluster.
//!
//! Cases per run: `PROPTEST_CASES` (default 1000).

mod support;

use std::time::Duration;

use producer_core::{Compression, Mechanism, ProduceError, SaslConfig, SecurityProtocol};
use producer_sim::{InjectedError, SimConfig, SimSasl, API_PRODUCE};
use proptest::prelude::*;
use support::run::*;
use support::ErrorCode;

const TOPICS: &[(&str, i32)] = &[("a", 3), ("b", 2)];
/// A compacted topic (`cleanup.policy=compact`): batches holding records without a key are
/// rejected with per-record errors.
const COMPACTED: (&str, i32) = ("c", 2);
/// Every topic, as the run checks them.
const ALL_TOPICS: &[(&str, i32)] = &[TOPICS[0], TOPICS[1], COMPACTED];
const BROKERS: i32 = 3;
const BUFFER_BYTES: usize = 256 * 1024;
const BUFFER_RECORDS: usize = 300;

/// Errors a real broker answers Produce with, and whether the batch was appended anyway.
/// The errors injected into Produce responses, and whether the batch is appended first.
const FAULTS: &[(ErrorCode, bool)] = &[
    (ErrorCode::NOT_LEADER_OR_FOLLOWER, false),
    (ErrorCode::REQUEST_TIMED_OUT, true),  // after the write
    (ErrorCode::REQUEST_TIMED_OUT, false), // before it
    (ErrorCode::NOT_ENOUGH_REPLICAS, false),
    (ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND, true),
    (ErrorCode::MESSAGE_TOO_LARGE, false),
    (ErrorCode::CORRUPT_MESSAGE, false),
    (ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, false),
    (ErrorCode::UNKNOWN_PRODUCER_ID, false),
    (ErrorCode::NETWORK_EXCEPTION, false),
    (ErrorCode::THROTTLING_QUOTA_EXCEEDED, false),
];

#[derive(Debug, Clone)]
enum Op {
    Send {
        topic: usize,
        keyed: bool,
        partition: Option<i32>,
        count: u8,
    },
    /// Records to the compacted topic; every `keyless`-th one (counting from the first) has no
    /// key (0: all keyed).
    SendCompacted {
        keyless: u8,
        count: u8,
    },
    Advance(u16),
    Flush,
    MoveLeader {
        topic: usize,
        partition: i32,
        broker: i32,
    },
    StopBroker(i32),
    StartBroker(i32),
    DropConnections(i32),
    Inject {
        fault: usize,
        topic: usize,
        partition: i32,
    },
    Stall {
        broker: i32,
        ms: u16,
    },
    Throttle {
        broker: i32,
        ms: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..2usize, any::<bool>(), proptest::option::of(0..2i32), 1..20u8)
            .prop_map(|(topic, keyed, partition, count)| Op::Send { topic, keyed, partition, count }),
        1 => (0..6u8, 1..20u8).prop_map(|(keyless, count)| Op::SendCompacted { keyless, count }),
        4 => (0..300u16).prop_map(Op::Advance),
        1 => Just(Op::Flush),
        1 => (0..2usize, 0..2i32, 1..=BROKERS).prop_map(|(topic, partition, broker)| Op::MoveLeader { topic, partition, broker }),
        1 => (1..=BROKERS).prop_map(Op::StopBroker),
        1 => (1..=BROKERS).prop_map(Op::StartBroker),
        1 => (1..=BROKERS).prop_map(Op::DropConnections),
        2 => (0..FAULTS.len(), 0..2usize, 0..2i32).prop_map(|(fault, topic, partition)| Op::Inject { fault, topic, partition }),
        1 => (1..=BROKERS, 0..3000u16).prop_map(|(broker, ms)| Op::Stall { broker, ms }),
        1 => (1..=BROKERS, 0..500u16).prop_map(|(broker, ms)| Op::Throttle { broker, ms }),
    ]
}

/// SASL on the cluster and in the producer, for the authenticated property: the mechanism and
/// the session lifetime (re-authentication every so often, amid the faults) come from `seed`.
fn authentication(seed: u64) -> (SimSasl, SaslConfig) {
    let mechanism = match seed % 4 {
        0 => Mechanism::ScramSha512,
        1 => Mechanism::ScramSha256,
        _ => Mechanism::Plain,
    };
    let mut sasl = SimSasl::for_user("prop", "prop-secret");
    sasl.session_lifetime = match (seed >> 2) % 3 {
        0 => None,
        1 => Some(Duration::from_millis(1000)),
        _ => Some(Duration::from_millis(3000)),
    };
    let client =
        SaslConfig::with(mechanism, "prop", "prop-secret").with_nonce_seed([seed as u8; 32]);
    (sasl, client)
}

fn run(seed: u64, ops: &[Op], idempotent: bool, compression: Compression, drop_probability: f64) {
    run_with(seed, ops, idempotent, compression, drop_probability, None)
}

fn run_with(
    seed: u64,
    ops: &[Op],
    idempotent: bool,
    compression: Compression,
    drop_probability: f64,
    auth: Option<(SimSasl, SaslConfig)>,
) {
    let mut cfg = SimConfig::with_brokers(BROKERS as usize, seed);
    cfg.drop_probability = drop_probability;
    cfg.fragment_responses = seed % 2 == 0;
    let (sim_sasl, client_sasl) = auth.unzip();
    cfg.sasl = sim_sasl;
    let mut cluster = cluster_with(cfg, TOPICS);
    cluster
        .create_topic_with_config(COMPACTED.0, COMPACTED.1, &[("cleanup.policy", "compact")])
        .unwrap();
    let mut h = harness(cluster, |b| {
        let b = match client_sasl {
            Some(sasl) => b
                .security_protocol(SecurityProtocol::SaslPlaintext)
                .sasl(sasl),
            None => b,
        };
        let b = b
            .buffer_memory(BUFFER_BYTES)
            .max_request_size(64 * 1024)
            .batch_size(2048)
            .buffer_max_records(BUFFER_RECORDS)
            .request_timeout(Duration::from_millis(1500))
            .delivery_timeout(Duration::from_secs(20))
            .max_block(Duration::from_secs(5))
            .compression(compression)
            .seed(seed);
        if idempotent {
            b
        } else {
            b.enable_idempotence(false)
                .acks(producer_core::Acks::Leader)
                .max_in_flight(3)
        }
    });
    let names = ["a", "b"];
    let mut sent = Vec::new();
    let mut next_id = 0u64;
    // Ids of the records sent to the compacted topic without a key.
    let mut keyless = std::collections::HashSet::new();
    for op in ops {
        match *op {
            Op::Send {
                topic,
                keyed,
                partition,
                count,
            } => {
                for _ in 0..count {
                    let id = next_id;
                    let mut r = record(id, names[topic], keyed);
                    if let Some(p) = partition {
                        r = r.with_partition(p);
                    }
                    if h.send(r, id).is_ok() {
                        sent.push(Sent {
                            id,
                            topic: names[topic].to_string(),
                            key: None,
                        });
                    }
                    next_id += 1;
                }
            }
            Op::SendCompacted {
                keyless: every,
                count,
            } => {
                for k in 0..count {
                    let id = next_id;
                    let no_key = every > 0 && k % every == 0;
                    if h.send(record(id, COMPACTED.0, !no_key), id).is_ok() {
                        sent.push(Sent {
                            id,
                            topic: COMPACTED.0.to_string(),
                            key: None,
                        });
                        if no_key {
                            keyless.insert(id);
                        }
                    }
                    next_id += 1;
                }
            }
            Op::Advance(ms) => h.run_for(Duration::from_millis(ms as u64)),
            Op::Flush => h.producer.flush(h.now),
            Op::MoveLeader {
                topic,
                partition,
                broker,
            } => {
                h.cluster
                    .move_leader(names[topic], partition, broker)
                    .unwrap();
            }
            Op::StopBroker(b) => h.cluster.stop_broker(b, h.now).unwrap(),
            Op::StartBroker(b) => h.cluster.start_broker(b).unwrap(),
            Op::DropConnections(b) => {
                let now = h.now;
                h.cluster.drop_connections_to(now, b);
            }
            Op::Inject {
                fault,
                topic,
                partition,
            } => {
                let (code, persist) = FAULTS[fault];
                h.cluster.inject_error(InjectedError {
                    api_key: API_PRODUCE,
                    topic: Some(names[topic].to_string()),
                    partition: Some(partition),
                    error_code: code.0,
                    count: 1,
                    persist,
                });
            }
            Op::Stall { broker, ms } => {
                let until = h.now + Duration::from_millis(ms as u64);
                h.cluster.stall_connections_to(broker, Some(until)).unwrap();
            }
            Op::Throttle { broker, ms } => h.cluster.set_throttle(broker, ms as i32, 1).unwrap(),
        }
        h.drain();
        assert!(
            h.producer.buffered_bytes() <= BUFFER_BYTES,
            "buffered bytes over the limit"
        );
        assert!(
            h.producer.buffered_records() <= BUFFER_RECORDS,
            "buffered records over the limit"
        );
    }
    for b in 1..=BROKERS {
        h.cluster.start_broker(b).unwrap();
        let now = h.now;
        h.cluster.unstall_connections_to(b, now).unwrap();
    }
    assert!(
        h.flush(Duration::from_secs(600)),
        "not every record was reported: {} left",
        h.producer.buffered_records()
    );
    assert!(h.max_drain < producer_sim::drive::MAX_OUTPUTS_PER_DRAIN);
    check_run(&h, &sent, ALL_TOPICS, idempotent);
    check_record_errors(&h, &keyless);
    if idempotent {
        assert!(
            h.cluster.violations().is_empty(),
            "sim saw protocol violations: {:?}",
            h.cluster.violations()
        );
    }
}

/// The per-record errors of the compacted topic: a record without a key is never delivered,
/// and when its batch reached the broker's validation it is reported with its own
/// `InvalidRecord` and Kafka's message; only records without a key get that, and only keyed
/// ones are rejected for their batch mates.
fn check_record_errors(
    h: &producer_sim::drive::Harness<u64>,
    keyless: &std::collections::HashSet<u64>,
) {
    for d in &h.deliveries {
        let no_key = keyless.contains(&d.opaque);
        match &d.result {
            Ok(m) => assert!(
                !no_key,
                "record {} without a key delivered: {m:?}",
                d.opaque
            ),
            Err(f) => match &f.error {
                ProduceError::InvalidRecord {
                    code,
                    batch_index,
                    message,
                    ..
                } => {
                    assert!(no_key, "keyed record {} reported invalid", d.opaque);
                    assert_eq!(*code, ErrorCode::INVALID_RECORD);
                    assert!(*batch_index >= 0);
                    let m = message.as_deref().unwrap_or_default();
                    assert!(
                        m.starts_with("Compacted topic cannot accept message without key in topic partition c-"),
                        "record {}: {m}",
                        d.opaque
                    );
                }
                ProduceError::BatchRejected {
                    invalid_records, ..
                } => {
                    assert!(
                        !no_key,
                        "record {} without a key rejected for its batch mates",
                        d.opaque
                    );
                    assert!(*invalid_records > 0);
                    assert_eq!(&*f.record.topic, COMPACTED.0);
                }
                _ => {}
            },
        }
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn idempotent_producer_keeps_every_invariant(seed: u64, ops in proptest::collection::vec(op(), 1..40)) {
        run(seed, &ops, true, Compression::None, 0.0);
    }

    #[test]
    fn idempotent_producer_with_random_drops(seed: u64, ops in proptest::collection::vec(op(), 1..30)) {
        run(seed, &ops, true, Compression::Lz4, 0.03);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 4, ..ProptestConfig::default() })]

    #[test]
    fn plain_producer_reports_every_record_in_order(seed: u64, ops in proptest::collection::vec(op(), 1..30)) {
        run(seed, &ops, false, Compression::None, 0.0);
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 8, ..ProptestConfig::default() })]

    /// The idempotent properties with SASL on: every connection authenticates (PLAIN or SCRAM),
    /// and with a session lifetime re-authenticates amid the faults and random drops.
    #[test]
    fn authenticated_producer_keeps_every_invariant(seed: u64, ops in proptest::collection::vec(op(), 1..30)) {
        run_with(seed, &ops, true, Compression::None, 0.02, Some(authentication(seed)));
    }
}
