//! Reading records back out of a batch this crate encoded.
//!
//! While a batch waits for its acknowledgement the producer keeps each record only in the
//! batch's bytes (plus the caller's opaque value), not a second copy of its key, value and
//! headers. When the records must come back out (a failure hands each record back to the
//! caller, a batch too large for the broker is re-encoded as two), they are decoded here from
//! the batch: keys and values come out as slices of one shared buffer, no copy per record.
//!
//! The bytes were written by [`super::BatchBuilder`], so decoding is not expected to fail; it
//! still checks every length against the bytes left and never allocates from a length it has
//! not checked, and reports a malformed batch as an error rather than panicking.

use bytes::Bytes;

use super::header::Header;
use crate::protocol::primitives::{varint, varlong, PResult};

/// One record decoded from a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodedRecord {
    /// The record's timestamp (base timestamp + delta); -1 means the record had none.
    pub(crate) timestamp: i64,
    pub(crate) key: Option<Bytes>,
    pub(crate) value: Option<Bytes>,
    pub(crate) headers: Vec<Header>,
}

/// The records section of a batch could not be decoded (a bug: the producer wrote it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed record {index} in a batch: {what}")]
pub(crate) struct MalformedRecords {
    /// Index of the record being decoded.
    pub(crate) index: usize,
    /// What was wrong.
    pub(crate) what: &'static str,
}

/// Decodes `count` records from an uncompressed records section (the bytes after the 61-byte
/// batch header) whose batch base timestamp is `base_timestamp`.
pub(crate) fn decode_records(
    records: Bytes,
    count: usize,
    base_timestamp: i64,
) -> Result<Vec<DecodedRecord>, MalformedRecords> {
    let mut cursor = Cursor {
        bytes: &records,
        pos: 0,
    };
    // Every record takes at least 7 bytes: never reserve more than the bytes could hold.
    let mut out = Vec::with_capacity(count.min(records.len() / 7 + 1));
    for index in 0..count {
        let err = |what| MalformedRecords { index, what };
        let length = cursor.varint().ok_or(err("length"))?;
        let length = usize::try_from(length).map_err(|_| err("negative length"))?;
        let end = cursor.pos.checked_add(length).ok_or(err("length"))?;
        if end > records.len() {
            return Err(err("record longer than the batch"));
        }
        let mut r = Cursor {
            bytes: &records[..end],
            pos: cursor.pos,
        };
        r.byte().ok_or(err("attributes"))?;
        let delta = r.varlong().ok_or(err("timestamp delta"))?;
        r.varint().ok_or(err("offset delta"))?;
        let key = r.nullable(&records).ok_or(err("key"))?;
        let value = r.nullable(&records).ok_or(err("value"))?;
        let header_count = r.varint().ok_or(err("header count"))?;
        let header_count = usize::try_from(header_count).map_err(|_| err("header count"))?;
        let mut headers = Vec::with_capacity(header_count.min((end - r.pos) / 2));
        for _ in 0..header_count {
            let key = r.nullable(&records).ok_or(err("header key"))?;
            let key = key.ok_or(err("null header key"))?;
            let key = String::from_utf8(key.to_vec()).map_err(|_| err("header key not UTF-8"))?;
            let value = r.nullable(&records).ok_or(err("header value"))?;
            headers.push(Header { key, value });
        }
        if r.pos != end {
            return Err(err("record length does not match its fields"));
        }
        cursor.pos = end;
        out.push(DecodedRecord {
            timestamp: base_timestamp.wrapping_add(delta),
            key,
            value,
            headers,
        });
    }
    if cursor.pos != records.len() {
        return Err(MalformedRecords {
            index: count,
            what: "bytes after the last record",
        });
    }
    Ok(out)
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Runs one of the protocol's varint parsers at the cursor.
    fn parse<O>(&mut self, parser: impl Fn(&[u8]) -> PResult<'_, O>) -> Option<O> {
        let (rest, v) = parser(self.bytes.get(self.pos..)?).ok()?;
        self.pos = self.bytes.len() - rest.len();
        Some(v)
    }

    fn varlong(&mut self) -> Option<i64> {
        self.parse(varlong)
    }

    fn varint(&mut self) -> Option<i32> {
        self.parse(varint)
    }

    /// A varint length (-1 = null) and that many bytes, sliced from `all` (the buffer this
    /// cursor reads, as `Bytes`). `None` if malformed; `Some(None)` for null.
    fn nullable(&mut self, all: &Bytes) -> Option<Option<Bytes>> {
        let len = self.varint()?;
        if len < 0 {
            return (len == -1).then_some(None);
        }
        let end = self.pos.checked_add(len as usize)?;
        if end > self.bytes.len() {
            return None;
        }
        let slice = all.slice(self.pos..end);
        self.pos = end;
        Some(Some(slice))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{BatchBuilder, RECORD_BATCH_OVERHEAD};
    use proptest::prelude::*;

    type Input = (
        i64,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        Vec<(String, Option<Vec<u8>>)>,
    );

    fn encode(records: &[Input]) -> (Bytes, i64) {
        let mut b = BatchBuilder::new();
        for (ts, k, v, h) in records {
            let headers: Vec<Header> = h
                .iter()
                .map(|(k, v)| Header::new(k.clone(), v.clone().map(Bytes::from)))
                .collect();
            b.append(*ts, k.as_deref(), v.as_deref(), &headers);
        }
        let base = b.base_timestamp().unwrap_or(-1);
        let sealed = b.seal(crate::Compression::None).unwrap();
        let mut sealed = sealed;
        sealed.stamp(-1, -1, -1);
        let bytes = Bytes::copy_from_slice(&sealed.as_bytes()[RECORD_BATCH_OVERHEAD..]);
        (bytes, base)
    }

    proptest! {
        #[test]
        fn decodes_what_the_builder_wrote(records in proptest::collection::vec((
            prop_oneof![Just(-1i64), 0i64..2_000_000_000_000],
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
            proptest::collection::vec(("[a-z]{0,8}", proptest::option::of(proptest::collection::vec(any::<u8>(), 0..10))), 0..3),
        ), 0..20)) {
            let (bytes, base) = encode(&records);
            let decoded = decode_records(bytes.clone(), records.len(), base).unwrap();
            prop_assert_eq!(decoded.len(), records.len());
            for (d, (ts, k, v, h)) in decoded.iter().zip(&records) {
                prop_assert_eq!(d.timestamp, *ts);
                prop_assert_eq!(d.key.as_deref(), k.as_deref());
                prop_assert_eq!(d.value.as_deref(), v.as_deref());
                let hs: Vec<(String, Option<Vec<u8>>)> = d.headers.iter()
                    .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec()))).collect();
                prop_assert_eq!(&hs, h);
            }
            // Any truncation is an error, never a panic; a wrong count is an error too.
            for cut in 0..bytes.len() {
                prop_assert!(decode_records(bytes.slice(..cut), records.len(), base).is_err());
            }
            prop_assert!(decode_records(bytes.clone(), records.len() + 1, base).is_err());
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), count in 0usize..1000) {
            let _ = decode_records(Bytes::from(bytes), count, 0);
        }
    }
}
