//! The records the end-to-end suites send: each identifies itself (its first header is its
//! index in the workload), keys and values vary, some values and header values are null, most
//! records carry an explicit timestamp. Also Kafka's key partitioning, written here
//! independently of the core's partitioner, and small helpers (wall clock, RSS).
// `is_multiple_of` is newer than the workspace MSRV (1.85).
#![allow(unknown_lints, clippy::manual_is_multiple_of)]

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use producer_core::Record;

use crate::readback::Consumed;

/// Name of the header that carries a record's index in the workload (always the first header).
pub const ID_HEADER: &str = "id";

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A port on localhost with nothing listening (connections are refused).
pub fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Which driver produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Every record has a key (97 distinct keys).
    All,
    /// No record has a key (sticky partitioner).
    Null,
    /// Two thirds keyed, one third null; every 11th record has an explicit partition.
    Mixed,
    /// Every record has an explicit partition; half of them also have a key (the explicit
    /// partition wins over the key's hash).
    Explicit,
}

/// Java's murmur2 (Kafka's `Utils.murmur2`), written here independently of the core's
/// partitioner so that keyed placement is checked against Kafka's definition.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: i32 = 0x5bd1_e995;
    let len = data.len() as i32;
    let mut h: i32 = (0x9747_b28c_u32 as i32) ^ len;
    for c in data.chunks_exact(4) {
        let mut k = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= ((k as u32) >> 24) as i32;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = &data[data.len() & !3..];
    if tail.len() >= 3 {
        h ^= (tail[2] as i32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as i32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as i32;
        h = h.wrapping_mul(M);
    }
    h ^= ((h as u32) >> 13) as i32;
    h = h.wrapping_mul(M);
    h ^= ((h as u32) >> 15) as i32;
    h
}

/// The partition Kafka's default partitioner gives a key.
pub fn key_partition(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions
}

/// Record `i` of a workload over `topics` (round robin over the topics). Its first header is
/// `id = i`; values vary in size (`value_len` bytes on average) and content; a few values are
/// null; headers include a null value, an empty value and a repeated key; most records carry
/// an explicit timestamp, some are left for the driver to fill with the wall clock.
pub fn make_record(i: usize, topics: &[(&str, i32)], keys: Keys, value_len: usize) -> Record {
    make_record_at(i, topics, keys, value_len, now_ms() - 3_600_000)
}

/// [`make_record`] with explicit timestamps spread over `base_ms..base_ms + 1000 s`: the same
/// arguments give the same record (the soak test regenerates records instead of keeping them).
pub fn make_record_at(
    i: usize,
    topics: &[(&str, i32)],
    keys: Keys,
    value_len: usize,
    base_ms: i64,
) -> Record {
    let (topic, partitions) = topics[i % topics.len()];
    let fill = (i * 7919) % (value_len.max(1) * 2);
    let body: String =
        std::iter::repeat_n(char::from(b'a' + (i % 26) as u8), fill.min(value_len * 2)).collect();
    let mut r = Record::new(topic, format!("value-{i}-{body}"));
    if i % 101 == 50 {
        r.value = None;
    }
    let keyed = match keys {
        Keys::All => true,
        Keys::Null => false,
        Keys::Mixed => i % 3 != 0,
        Keys::Explicit => i % 2 == 0,
    };
    if keyed {
        r = r.with_key(format!("key-{}", i % 97));
    }
    if keys == Keys::Explicit {
        r = r.with_partition((i / topics.len() % partitions as usize) as i32);
    } else if keys == Keys::Mixed && i % 11 == 0 {
        r = r.with_partition((i / 11 % partitions as usize) as i32);
    }
    if i % 4 != 3 {
        // Spread over the past few hours, not monotonic within a partition.
        r = r.with_timestamp(base_ms + ((i * 104_729) % 1_000_000) as i64);
    }
    r = r.with_header(ID_HEADER, Some(Bytes::from(i.to_string())));
    if i % 5 == 0 {
        r = r
            .with_header("null", None)
            .with_header("empty", Some(Bytes::new()))
            .with_header("dup", Some(Bytes::from_static(b"1")))
            .with_header("dup", Some(Bytes::from_static(b"2")));
    }
    r
}

/// Records `0..n` of [`make_record`].
pub fn workload(n: usize, topics: &[(&str, i32)], keys: Keys, value_len: usize) -> Vec<Record> {
    (0..n)
        .map(|i| make_record(i, topics, keys, value_len))
        .collect()
}

/// The workload index of a record read back (its first header, [`ID_HEADER`]).
pub fn id_of(c: &Consumed) -> usize {
    let (k, v) = c.headers.first().expect("a record without headers");
    assert_eq!(
        k, ID_HEADER,
        "first header of {}-{}@{}",
        c.topic, c.partition, c.offset
    );
    std::str::from_utf8(v.as_deref().expect("null id"))
        .unwrap()
        .parse()
        .unwrap()
}

/// A record's headers in the form [`Consumed::headers`] has.
pub fn headers_of(r: &Record) -> Vec<(String, Option<Vec<u8>>)> {
    r.headers
        .iter()
        .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
        .collect()
}

/// Current and peak resident set size of this process, in KiB (`VmRSS`, `VmHWM`).
pub fn rss_kib() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
