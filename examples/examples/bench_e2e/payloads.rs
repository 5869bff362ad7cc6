//! The workloads (value size, keys, codec) and the payload arenas every producer takes its
//! keys and values from.

use crate::{Error, ALL_WORKLOADS, TOPIC};
use bytes::Bytes;
use std::sync::Arc;

pub(crate) const VALUE_ARENA: usize = 1 << 20;

pub(crate) const KEYS: usize = 65_536;

/// The compression codec of a workload, for every producer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Codec {
    None,
    Lz4,
    Zstd,
}

impl Codec {
    /// The name librdkafka, Java, the peers and the tables use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }

    pub(crate) fn ours(self) -> producer_core::Compression {
        match self {
            Codec::None => producer_core::Compression::None,
            Codec::Lz4 => producer_core::Compression::Lz4,
            Codec::Zstd => producer_core::Compression::Zstd,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Workload {
    pub(crate) value_bytes: usize,
    pub(crate) keyed: bool,
    pub(crate) codec: Codec,
    /// The `latency` workload: an open-loop sender at a fixed rate (`--rate`), delivery
    /// latencies reported instead of the time to send everything.
    pub(crate) open_loop: bool,
}

pub(crate) fn workload(name: &str) -> Result<Workload, Error> {
    let (value_bytes, keyed, codec, open_loop) = match name {
        "null100" => (100, false, Codec::None, false),
        "key8" => (100, true, Codec::None, false),
        "val1000" => (1000, false, Codec::None, false),
        "lz4" => (100, false, Codec::Lz4, false),
        "zstd" => (100, false, Codec::Zstd, false),
        "latency" => (100, false, Codec::None, true),
        // The scale sweep's open-loop runs: `key8`'s records (not in the workload list).
        "key8-latency" => (100, true, Codec::None, true),
        other => {
            return Err(format!(
                "unknown workload {other:?} (known: {})",
                ALL_WORKLOADS.join(",")
            )
            .into())
        }
    };
    Ok(Workload {
        value_bytes,
        keyed,
        codec,
        open_loop,
    })
}

/// `w` with values of `value_bytes` bytes instead of its own, if given (`--value-bytes`).
pub(crate) fn sized(w: Workload, value_bytes: Option<usize>) -> Workload {
    Workload {
        value_bytes: value_bytes.unwrap_or(w.value_bytes),
        ..w
    }
}

pub(crate) fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The payload arenas every producer takes its keys and values from.
pub(crate) struct Payloads {
    pub(crate) values: Bytes,
    pub(crate) keys: Bytes,
    pub(crate) value_bytes: usize,
    pub(crate) keyed: bool,
    /// The topics records go to: record `i` to `topics[i % topics.len()]` (never empty).
    pub(crate) topics: Vec<Arc<str>>,
}

impl Payloads {
    pub(crate) fn new(w: Workload) -> Payloads {
        const WORDS: &[&str] = &[
            "kafka",
            "producer",
            "record",
            "batch",
            "partition",
            "offset",
            "leader",
            "broker",
            "topic",
            "sequence",
            "epoch",
            "linger",
            "acks",
            "retry",
            "buffer",
            "request",
            "response",
            "metadata",
            "latency",
            "throughput",
            "event",
            "order",
            "user",
            "id",
            "status",
            "ok",
            "error",
            "timeout",
            "payload",
            "value",
            "key",
            "header",
        ];
        let mut rng = 42u64;
        let mut values = Vec::with_capacity(VALUE_ARENA + w.value_bytes + 16);
        while values.len() < VALUE_ARENA + w.value_bytes {
            let r = splitmix(&mut rng);
            values.extend_from_slice(WORDS[(r % WORDS.len() as u64) as usize].as_bytes());
            values.push(if r & 0x100 == 0 { b' ' } else { b',' });
            if r & 0xf000 == 0 {
                values.extend_from_slice(format!("{}", r >> 40).as_bytes());
            }
        }
        let mut keys = Vec::with_capacity(KEYS * 8);
        for _ in 0..KEYS {
            keys.extend_from_slice(&splitmix(&mut rng).to_be_bytes());
        }
        Payloads {
            values: Bytes::from(values),
            keys: Bytes::from(keys),
            value_bytes: w.value_bytes,
            keyed: w.keyed,
            topics: vec![Arc::from(TOPIC)],
        }
    }

    /// The same payloads spread over `count` topics named after `base` ([`topic_names`]).
    pub(crate) fn with_topics(self, base: &str, count: usize) -> Payloads {
        Payloads {
            topics: topic_names(base, count)
                .into_iter()
                .map(Arc::from)
                .collect(),
            ..self
        }
    }

    /// The topic of record `i`: the topics in turn, so records spread evenly.
    pub(crate) fn topic(&self, i: u64) -> &Arc<str> {
        &self.topics[i as usize % self.topics.len()]
    }

    pub(crate) fn value_range(&self, i: u64) -> std::ops::Range<usize> {
        // 7919 is prime: consecutive records start at scattered offsets.
        let start = (i as usize).wrapping_mul(7919) % VALUE_ARENA;
        start..start + self.value_bytes
    }

    pub(crate) fn key_range(&self, i: u64) -> Option<std::ops::Range<usize>> {
        let k = (i as usize % KEYS) * 8;
        self.keyed.then_some(k..k + 8)
    }

    /// A record for our producers: `Bytes` slices of the arenas, no copy.
    pub(crate) fn record(&self, i: u64) -> producer_core::Record {
        let r = producer_core::Record::new(
            self.topic(i).clone(),
            self.values.slice(self.value_range(i)),
        );
        match self.key_range(i) {
            Some(k) => r.with_key(self.keys.slice(k)),
            None => r,
        }
    }
}

/// The names of `count` topics for `base`: `base` itself for one, else `base-0` ..
/// `base-(count-1)` (the Java peer names them the same way).
pub(crate) fn topic_names(base: &str, count: usize) -> Vec<String> {
    if count <= 1 {
        vec![base.to_string()]
    } else {
        (0..count).map(|j| format!("{base}-{j}")).collect()
    }
}
