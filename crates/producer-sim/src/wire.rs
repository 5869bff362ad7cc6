//! Byte-level checks the simulated broker runs before (and besides) handing bytes to the
//! `kafka-protocol` decoders.
//!
//! `kafka-protocol` reserves `Vec` capacity straight from array counts and record counts read off
//! the wire, and adds record deltas without overflow checks. A hostile or buggy client could make
//! those allocations or additions abort the process. The walkers here validate every length and
//! count against the bytes actually present first, so the decoders only ever see well-formed
//! structure. They also implement the strict RecordBatch checks the broker applies (CRC-32C, sizes,
//! offset deltas, exact consumption).

use bytes::Bytes;
use std::io::Read;

/// Offset of the CRC-covered region inside a RecordBatch (attributes onwards).
const CRC_START: usize = 21;
/// Size of the RecordBatch v2 header.
pub(crate) const BATCH_HEADER_LEN: usize = 61;

/// A tiny bounds-checked reader over a byte slice.
pub(crate) struct Walker<'a> {
    buf: &'a [u8],
    pos: usize,
}

type WResult<T> = Result<T, String>;

impl<'a> Walker<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Walker { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize, what: &str) -> WResult<&'a [u8]> {
        if self.remaining() < n {
            return Err(format!("{what}: need {n} bytes, {} left", self.remaining()));
        }
        let start = self.pos;
        self.pos += n;
        self.buf
            .get(start..start + n)
            .ok_or_else(|| format!("{what}: out of bounds"))
    }

    fn array<const N: usize>(&mut self, what: &str) -> WResult<[u8; N]> {
        let s = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    pub(crate) fn i8(&mut self, what: &str) -> WResult<i8> {
        Ok(i8::from_be_bytes(self.array::<1>(what)?))
    }
    pub(crate) fn i16(&mut self, what: &str) -> WResult<i16> {
        Ok(i16::from_be_bytes(self.array::<2>(what)?))
    }
    pub(crate) fn i32(&mut self, what: &str) -> WResult<i32> {
        Ok(i32::from_be_bytes(self.array::<4>(what)?))
    }
    pub(crate) fn u32(&mut self, what: &str) -> WResult<u32> {
        Ok(u32::from_be_bytes(self.array::<4>(what)?))
    }
    pub(crate) fn i64(&mut self, what: &str) -> WResult<i64> {
        Ok(i64::from_be_bytes(self.array::<8>(what)?))
    }

    /// Unsigned LEB128 varint, at most 5 bytes (u32).
    pub(crate) fn uvarint(&mut self, what: &str) -> WResult<u32> {
        let mut value: u64 = 0;
        for i in 0..5 {
            let b = self.array::<1>(what)?[0];
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return u32::try_from(value).map_err(|_| format!("{what}: varint overflow"));
            }
        }
        Err(format!("{what}: varint longer than 5 bytes"))
    }

    /// Zigzag varint (i32).
    pub(crate) fn varint(&mut self, what: &str) -> WResult<i32> {
        let u = self.uvarint(what)?;
        Ok(((u >> 1) as i32) ^ -((u & 1) as i32))
    }

    /// Zigzag varlong (i64), at most 10 bytes.
    pub(crate) fn varlong(&mut self, what: &str) -> WResult<i64> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let b = self.array::<1>(what)?[0];
            if i == 9 && b > 1 {
                return Err(format!("{what}: varlong overflow"));
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(format!("{what}: varlong longer than 10 bytes"))
    }

    /// Skips a (nullable) string or bytes field. `wide` selects an i32 length (bytes) instead of
    /// an i16 one (strings) for the non-flexible encoding.
    fn skip_len_prefixed(&mut self, flexible: bool, wide: bool, what: &str) -> WResult<()> {
        let len: i64 = if flexible {
            i64::from(self.uvarint(what)?) - 1
        } else if wide {
            i64::from(self.i32(what)?)
        } else {
            i64::from(self.i16(what)?)
        };
        if len < -1 {
            return Err(format!("{what}: negative length {len}"));
        }
        if len > 0 {
            let n = usize::try_from(len).map_err(|_| format!("{what}: length overflow"))?;
            self.take(n, what)?;
        }
        Ok(())
    }

    /// Reads an array count; `None` for a null array. Rejects counts that cannot fit in the bytes
    /// left, given the minimal encoded size of one element.
    fn array_len(&mut self, flexible: bool, min_elem: usize, what: &str) -> WResult<Option<usize>> {
        let n: i64 = if flexible {
            i64::from(self.uvarint(what)?) - 1
        } else {
            i64::from(self.i32(what)?)
        };
        if n == -1 {
            return Ok(None);
        }
        if n < -1 {
            return Err(format!("{what}: negative array length {n}"));
        }
        let n = usize::try_from(n).map_err(|_| format!("{what}: length overflow"))?;
        if n.saturating_mul(min_elem.max(1)) > self.remaining() {
            return Err(format!(
                "{what}: array of {n} elements cannot fit in {} bytes",
                self.remaining()
            ));
        }
        Ok(Some(n))
    }

    fn skip_tags(&mut self, flexible: bool, what: &str) -> WResult<()> {
        if !flexible {
            return Ok(());
        }
        let n = self.uvarint(what)?;
        for _ in 0..n {
            self.uvarint(what)?;
            let size = self.uvarint(what)?;
            self.take(size as usize, what)?;
        }
        Ok(())
    }
}

/// Structural pre-check of a Metadata request body: the topic array count must be backed by
/// real elements.
pub(crate) fn precheck_metadata(body: &[u8], version: i16) -> WResult<()> {
    let flexible = version >= 9;
    let mut w = Walker::new(body);
    let min_elem = if version >= 10 { 18 } else { 2 };
    if let Some(n) = w.array_len(flexible, min_elem, "Topics")? {
        for _ in 0..n {
            if version >= 10 {
                w.take(16, "TopicId")?;
            }
            w.skip_len_prefixed(flexible, false, "Name")?;
            w.skip_tags(flexible, "Topics tagged fields")?;
        }
    }
    Ok(())
}

/// One field of a request body, as far as [`precheck`] needs to know it.
#[derive(Debug, Clone)]
pub(crate) enum Shape {
    /// A fixed-size field of this many bytes.
    Fixed(usize),
    /// A (nullable) string.
    Str,
    /// An array of fixed-size primitives of this many bytes each (no tagged fields).
    Ints(usize),
    /// An array of (nullable) strings.
    Strs,
    /// An array of structs with these fields (tagged fields after each at flexible versions).
    Array(Vec<Shape>),
}

impl Shape {
    fn min_size(&self, flexible: bool) -> usize {
        match self {
            Shape::Fixed(n) => *n,
            Shape::Str | Shape::Ints(_) | Shape::Strs | Shape::Array(_) if flexible => 1,
            Shape::Str => 2,
            Shape::Ints(_) | Shape::Strs | Shape::Array(_) => 4,
        }
    }
}

fn walk_fields(w: &mut Walker<'_>, fields: &[Shape], flexible: bool, what: &str) -> WResult<()> {
    for f in fields {
        match f {
            Shape::Fixed(n) => {
                w.take(*n, what)?;
            }
            Shape::Str => w.skip_len_prefixed(flexible, false, what)?,
            Shape::Ints(n) => {
                let len = w.array_len(flexible, *n, what)?.unwrap_or(0);
                w.take(len.saturating_mul(*n), what)?;
            }
            Shape::Strs => {
                let min = Shape::Str.min_size(flexible);
                for _ in 0..w.array_len(flexible, min, what)?.unwrap_or(0) {
                    w.skip_len_prefixed(flexible, false, what)?;
                }
            }
            Shape::Array(elem) => {
                let min: usize = elem.iter().map(|e| e.min_size(flexible)).sum::<usize>()
                    + usize::from(flexible);
                for _ in 0..w.array_len(flexible, min, what)?.unwrap_or(0) {
                    walk_fields(w, elem, flexible, what)?;
                }
            }
        }
    }
    w.skip_tags(flexible, what)
}

/// Structural pre-check of a request body described by `fields`: every array count must be
/// backed by real elements (kafka-protocol reserves capacity from the count it reads).
pub(crate) fn precheck(body: &[u8], fields: &[Shape], flexible: bool, what: &str) -> WResult<()> {
    let mut w = Walker::new(body);
    walk_fields(&mut w, fields, flexible, what)
}

/// Structural pre-check of a Produce request body (every array count and length is backed by
/// the bytes present).
pub(crate) fn precheck_produce(body: &[u8], version: i16) -> WResult<()> {
    let flexible = version >= 9;
    let mut w = Walker::new(body);
    w.skip_len_prefixed(flexible, false, "TransactionalId")?;
    w.i16("Acks")?;
    w.i32("TimeoutMs")?;
    let topic_min = if version >= 13 { 17 } else { 2 };
    let topics = w
        .array_len(flexible, topic_min, "TopicData")?
        .ok_or("TopicData: null array")?;
    for _ in 0..topics {
        if version >= 13 {
            w.take(16, "TopicId")?;
        } else {
            w.skip_len_prefixed(flexible, false, "Name")?;
        }
        let parts = w
            .array_len(flexible, 5, "PartitionData")?
            .ok_or("PartitionData: null array")?;
        for _ in 0..parts {
            w.i32("Index")?;
            w.skip_len_prefixed(flexible, true, "Records")?;
            w.skip_tags(flexible, "PartitionData tagged fields")?;
        }
        w.skip_tags(flexible, "TopicData tagged fields")?;
    }
    w.skip_tags(flexible, "ProduceRequest tagged fields")?;
    Ok(())
}

/// The fixed header of a RecordBatch v2.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchHeader {
    pub(crate) base_offset: i64,
    pub(crate) batch_length: i32,
    pub(crate) magic: i8,
    pub(crate) crc: u32,
    pub(crate) attributes: i16,
    pub(crate) last_offset_delta: i32,
    pub(crate) base_timestamp: i64,
    pub(crate) max_timestamp: i64,
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) base_sequence: i32,
    pub(crate) record_count: i32,
}

impl BatchHeader {
    /// Compression codec (attributes bits 0-2).
    pub(crate) fn compression(&self) -> i16 {
        self.attributes & 0x7
    }
    pub(crate) fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }
    pub(crate) fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
}

/// Reads the 61-byte batch header (no validation beyond length).
pub(crate) fn parse_batch_header(b: &[u8]) -> WResult<BatchHeader> {
    let mut w = Walker::new(b);
    let base_offset = w.i64("BaseOffset")?;
    let batch_length = w.i32("BatchLength")?;
    let _ple = w.i32("PartitionLeaderEpoch")?;
    let magic = w.i8("Magic")?;
    let crc = w.u32("CRC")?;
    let attributes = w.i16("Attributes")?;
    let last_offset_delta = w.i32("LastOffsetDelta")?;
    let base_timestamp = w.i64("BaseTimestamp")?;
    let max_timestamp = w.i64("MaxTimestamp")?;
    let producer_id = w.i64("ProducerId")?;
    let producer_epoch = w.i16("ProducerEpoch")?;
    let base_sequence = w.i32("BaseSequence")?;
    let record_count = w.i32("RecordsCount")?;
    Ok(BatchHeader {
        base_offset,
        batch_length,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    })
}

/// Validates the batch framing: exactly one batch, magic 2, CRC-32C, known codec, sane counts.
pub(crate) fn validate_batch_frame(b: &[u8], h: &BatchHeader) -> WResult<()> {
    if h.magic != 2 {
        return Err(format!(
            "magic {} (only RecordBatch v2 is accepted)",
            h.magic
        ));
    }
    let expected_len = i64::try_from(b.len()).unwrap_or(i64::MAX) - 12;
    if i64::from(h.batch_length) != expected_len {
        return Err(format!(
            "BatchLength {} but the partition carries {} bytes after the length field \
             (exactly one RecordBatch per partition is allowed)",
            h.batch_length, expected_len
        ));
    }
    let covered = b.get(CRC_START..).ok_or("batch shorter than its header")?;
    let actual = crc32c::crc32c(covered);
    if actual != h.crc {
        return Err(format!(
            "CRC-32C mismatch: header says {:#010x}, bytes [21..] give {:#010x}",
            h.crc, actual
        ));
    }
    if h.compression() > 4 {
        return Err(format!("unknown compression codec {}", h.compression()));
    }
    if h.record_count <= 0 {
        return Err(format!("RecordsCount {} (must be >= 1)", h.record_count));
    }
    if h.last_offset_delta != h.record_count - 1 {
        return Err(format!(
            "LastOffsetDelta {} but RecordsCount {}",
            h.last_offset_delta, h.record_count
        ));
    }
    if h.base_offset
        .checked_add(i64::from(h.record_count))
        .is_none()
    {
        return Err(format!("BaseOffset {} overflows", h.base_offset));
    }
    Ok(())
}

/// Decompresses the records section with a hard cap on the output size.
pub(crate) fn decompress(codec: i16, data: &[u8], cap: usize) -> WResult<Bytes> {
    fn read_capped<R: Read>(r: R, cap: usize, what: &str) -> WResult<Bytes> {
        let mut out = Vec::new();
        let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
        r.take(limit)
            .read_to_end(&mut out)
            .map_err(|e| format!("{what} decompression failed: {e}"))?;
        if out.len() > cap {
            return Err(format!("{what} data decompresses to more than {cap} bytes"));
        }
        Ok(Bytes::from(out))
    }
    match codec {
        0 => Ok(Bytes::copy_from_slice(data)),
        1 => read_capped(flate2::read::MultiGzDecoder::new(data), cap, "gzip"),
        2 => snappy_decompress(data, cap),
        3 => read_capped(lz4_flex::frame::FrameDecoder::new(data), cap, "lz4"),
        4 => {
            let d = zstd::stream::read::Decoder::new(data)
                .map_err(|e| format!("zstd decompression failed: {e}"))?;
            read_capped(d, cap, "zstd")
        }
        other => Err(format!("unknown compression codec {other}")),
    }
}

const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";

fn snappy_decompress(data: &[u8], cap: usize) -> WResult<Bytes> {
    fn block(b: &[u8], out: &mut Vec<u8>, cap: usize) -> WResult<()> {
        let n = snap::raw::decompress_len(b).map_err(|e| format!("snappy: {e}"))?;
        if out.len().saturating_add(n) > cap {
            return Err(format!("snappy data decompresses to more than {cap} bytes"));
        }
        let start = out.len();
        out.resize(start + n, 0);
        let dst = out.get_mut(start..).ok_or("snappy: buffer")?;
        let written = snap::raw::Decoder::new()
            .decompress(b, dst)
            .map_err(|e| format!("snappy: {e}"))?;
        out.truncate(start + written);
        Ok(())
    }
    let mut out = Vec::new();
    if data.len() >= 16 && data.starts_with(XERIAL_MAGIC) {
        // xerial framing: magic(8) version(4) compatible(4) then [len u32][block]...
        let mut w = Walker::new(data.get(16..).unwrap_or_default());
        while w.remaining() > 0 {
            let len = w.u32("xerial block length")? as usize;
            let b = w.take(len, "xerial block")?;
            block(b, &mut out, cap)?;
        }
    } else {
        block(data, &mut out, cap)?;
    }
    Ok(Bytes::from(out))
}

/// One record as seen by the strict walker.
#[derive(Debug, Clone)]
pub(crate) struct WalkedRecord {
    pub(crate) timestamp: i64,
    pub(crate) headers: Vec<(String, Option<Bytes>)>,
}

/// Walks the (decompressed) records section: every length is in bounds, every record's size
/// field matches its content, offset deltas are 0..n-1, timestamps do not overflow, header keys
/// are UTF-8, and the section is consumed exactly.
pub(crate) fn walk_records(data: &Bytes, h: &BatchHeader) -> WResult<Vec<WalkedRecord>> {
    let count = usize::try_from(h.record_count).map_err(|_| "negative record count")?;
    // A record takes at least 7 bytes (size, attributes, ts delta, offset delta, key len,
    // value len, header count): a larger count cannot be honest.
    if count.saturating_mul(7) > data.len() {
        return Err(format!(
            "RecordsCount {count} cannot fit in {} bytes of records",
            data.len()
        ));
    }
    let mut w = Walker::new(data);
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let size = w.varint("record Length")?;
        let size = usize::try_from(size).map_err(|_| format!("record {i}: negative Length"))?;
        let start = w.pos;
        let body = w.take(size, "record body")?;
        let mut r = Walker::new(body);
        let what = |f: &str| format!("record {i} {f}");
        r.i8(&what("Attributes"))?;
        let ts_delta = r.varlong(&what("TimestampDelta"))?;
        let timestamp = h
            .base_timestamp
            .checked_add(ts_delta)
            .ok_or_else(|| what("timestamp overflows"))?;
        let off = r.varint(&what("OffsetDelta"))?;
        if usize::try_from(off).ok() != Some(i) {
            return Err(format!("record {i} has OffsetDelta {off} (expected {i})"));
        }
        for f in ["Key", "Value"] {
            let len = r.varint(&what(f))?;
            if len < -1 {
                return Err(what(&format!("{f} length {len}")));
            }
            if len > 0 {
                r.take(len as usize, &what(f))?;
            }
        }
        let hc = r.varint(&what("HeadersCount"))?;
        let hc = usize::try_from(hc).map_err(|_| what("negative HeadersCount"))?;
        if hc.saturating_mul(2) > r.remaining() {
            return Err(what("HeadersCount larger than the record"));
        }
        let mut headers = Vec::with_capacity(hc);
        for _ in 0..hc {
            let klen = r.varint(&what("HeaderKeyLength"))?;
            let klen = usize::try_from(klen).map_err(|_| what("null or negative header key"))?;
            let kb = r.take(klen, &what("HeaderKey"))?;
            let key = std::str::from_utf8(kb)
                .map_err(|_| what("header key is not UTF-8"))?
                .to_owned();
            let vlen = r.varint(&what("HeaderValueLength"))?;
            let value = if vlen == -1 {
                None
            } else {
                let n = usize::try_from(vlen).map_err(|_| what("negative header value length"))?;
                let vstart = start + (body.len() - r.remaining());
                r.take(n, &what("HeaderValue"))?;
                Some(data.slice(vstart..vstart + n))
            };
            headers.push((key, value));
        }
        if r.remaining() != 0 {
            return Err(format!(
                "record {i}: Length says {size} bytes but the fields use {}",
                size - r.remaining()
            ));
        }
        out.push(WalkedRecord { timestamp, headers });
    }
    if w.remaining() != 0 {
        return Err(format!(
            "{} bytes left after the {count} records the header announces",
            w.remaining()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overflow() {
        let mut w = Walker::new(&[0x01]);
        assert_eq!(w.varint("x").unwrap(), -1);
        let mut w = Walker::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(w.uvarint("x").unwrap(), u32::MAX);
        let mut w = Walker::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(w.uvarint("x").is_err());
        let mut w = Walker::new(&[0x80]);
        assert!(w.uvarint("x").is_err());
    }

    #[test]
    fn produce_precheck_rejects_huge_counts() {
        // v3: null txn id, acks -1, timeout, TopicData count 0x7fffffff
        let mut b = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0x75, 0x30];
        b.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(precheck_produce(&b, 3).unwrap_err().contains("cannot fit"));
        // flexible: compact count 2^32-1
        let mut b = vec![0x00, 0xff, 0xff, 0, 0, 0x75, 0x30];
        b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(precheck_produce(&b, 9).is_err());
    }

    #[test]
    fn metadata_precheck_accepts_null_and_rejects_short() {
        assert!(precheck_metadata(&[0xff, 0xff, 0xff, 0xff, 0], 4).is_ok());
        assert!(precheck_metadata(&[0, 0, 0, 5, 0, 1], 1).is_err());
    }
}
