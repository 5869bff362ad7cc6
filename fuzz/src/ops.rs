//! The operation interpreter behind the `producer_ops` fuzz target.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use producer_core::{
    Acks, Compression, Config, Event, PartitionView, Partitioner, PartitionerError, Producer,
    Record, Route,
};
use producer_sim::drive::Harness;
use producer_sim::{InjectedError, SimCluster, SimConfig, API_PRODUCE};

const BUFFER_BYTES: usize = 128 * 1024;
const BUFFER_RECORDS: usize = 200;
const TOPICS: [(&str, i32); 2] = [("a", 3), ("b", 2)];
const CODES: [(i16, bool); 10] = [
    (6, false),
    (7, true),
    (19, false),
    (20, true),
    (10, false),
    (2, false),
    (45, false),
    (59, false),
    (13, false),
    (47, false),
];

/// The application's partitioner of a run with flag bit 3: the key's first byte (0 without
/// a key) decides: a partition in range, one out of range, the sticky partition, or an error
/// (never a panic: libFuzzer's hook aborts on any panic, caught or not).
struct ByKey;

impl Partitioner for ByKey {
    fn partition(
        &mut self,
        _topic: &str,
        key: Option<&[u8]>,
        _value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        let k = u32::from(key.and_then(|k| k.first()).copied().unwrap_or(0));
        let count = partitions.count();
        Ok(match k % 4 {
            0 => Route::Partition(k % count),
            1 => Route::Partition(count + k),
            2 => Route::Sticky,
            _ => return Err(PartitionerError::Failed("fuzz".into())),
        })
    }
}

/// Runs the operations encoded in `data`; panics when the producer breaks its contract.
pub fn run(data: &[u8]) {
    let Some((&flags, mut ops)) = data.split_first() else {
        return;
    };
    let seed = u64::from(flags);
    let mut cfg = SimConfig::with_brokers(3, seed);
    cfg.fragment_responses = flags & 1 == 1;
    let now = Instant::now();
    let mut cluster = SimCluster::new(cfg, now);
    for (t, n) in TOPICS {
        cluster.create_topic(t, n).expect("fresh topic");
    }
    let idempotent = flags & 2 == 0;
    let mut builder = Config::builder(cluster.bootstrap())
        .buffer_memory(BUFFER_BYTES)
        .buffer_max_records(BUFFER_RECORDS)
        .max_request_size(32 * 1024)
        .batch_size(1024)
        .request_timeout(Duration::from_millis(800))
        .delivery_timeout(Duration::from_secs(10))
        .max_block(Duration::from_secs(3))
        .compression(if flags & 4 == 4 {
            Compression::Lz4
        } else {
            Compression::None
        })
        .seed(seed);
    if !idempotent {
        builder = builder.enable_idempotence(false).acks(Acks::Leader);
    }
    let config = builder.build().expect("valid config");
    let mut producer = Producer::new(config, now);
    if flags & 8 == 8 {
        producer.set_partitioner(Box::new(ByKey));
    }
    let mut h = Harness::new(producer, cluster, now);
    let mut accepted = HashSet::new();
    // Each ask for a topic's partitions, and how many events had come before it.
    let mut asked: Vec<(&str, usize)> = Vec::new();
    let mut next = 0u64;
    while let Some((&op, rest)) = ops.split_first() {
        let arg = rest.first().copied().unwrap_or(0);
        ops = rest.get(1..).unwrap_or(&[]);
        match op % 11 {
            0..=3 => {
                for _ in 0..=(arg % 8) {
                    let topic = TOPICS[usize::from(op & 1)].0;
                    let mut r = Record::new(topic, vec![b'v'; usize::from(arg) * 3])
                        .with_timestamp(next as i64);
                    if arg & 0x10 != 0 {
                        r = r.with_key(vec![arg, op]);
                    }
                    if arg & 0x20 != 0 {
                        r = r.with_partition(i32::from(arg % 4));
                    }
                    if h.send(r, next).is_ok() {
                        accepted.insert(next);
                    }
                    next += 1;
                }
            }
            4 => h.run_for(Duration::from_millis(u64::from(arg) * 4)),
            5 if arg & 0x80 != 0 => {
                let topic = ["a", "b", "missing"][usize::from(arg % 3)];
                asked.push((topic, h.events.len()));
                h.producer
                    .request_partitions(h.now, topic)
                    .expect("a valid name");
            }
            5 => h.producer.flush(h.now),
            6 => {
                let _ = h.cluster.move_leader(
                    TOPICS[usize::from(arg & 1)].0,
                    i32::from(arg >> 1) % 2,
                    i32::from(arg % 3) + 1,
                );
            }
            7 => {
                let b = i32::from(arg % 3) + 1;
                if arg & 0x80 != 0 {
                    let _ = h.cluster.start_broker(b);
                } else {
                    let now = h.now;
                    let _ = h.cluster.stop_broker(b, now);
                }
            }
            8 => {
                let (code, persist) = CODES[usize::from(arg) % CODES.len()];
                h.cluster.inject_error(InjectedError {
                    api_key: API_PRODUCE,
                    topic: Some(TOPICS[usize::from(arg >> 4) & 1].0.to_string()),
                    partition: Some(i32::from(arg >> 5) % 2),
                    error_code: code,
                    count: 1,
                    persist,
                });
            }
            9 => {
                let now = h.now;
                h.cluster.drop_connections_to(now, i32::from(arg % 3) + 1);
            }
            _ => {
                let n = usize::from(arg).min(ops.len());
                let (garbage, rest) = ops.split_at(n);
                h.feed_bytes(garbage);
                ops = rest;
            }
        }
        h.drain();
        assert!(h.producer.buffered_bytes() <= BUFFER_BYTES);
        assert!(h.producer.buffered_records() <= BUFFER_RECORDS);
        assert!(
            h.contract_violations.is_empty(),
            "{:?}",
            h.contract_violations
        );
    }
    for b in 1..=3 {
        let _ = h.cluster.start_broker(b);
    }
    assert!(
        h.flush(Duration::from_secs(300)),
        "records left unreported: {}",
        h.producer.buffered_records()
    );
    // An ask for a topic whose metadata never comes is answered at `max_block` (3 s), which
    // the flush above need not have waited for.
    h.run_for(Duration::from_secs(4));
    for (topic, before) in asked {
        let answered = h.events[before..].iter().any(|e| match e {
            Event::PartitionsKnown { topic: t, .. }
            | Event::PartitionsUnavailable { topic: t, .. } => &**t == topic,
            _ => false,
        });
        assert!(answered, "the ask for {topic}'s partitions was answered");
    }
    let mut reported = HashSet::new();
    for d in &h.deliveries {
        assert!(
            reported.insert(d.opaque),
            "record {} reported twice",
            d.opaque
        );
    }
    assert_eq!(
        reported, accepted,
        "every accepted record gets exactly one report"
    );
    assert!(
        h.contract_violations.is_empty(),
        "{:?}",
        h.contract_violations
    );
}
