//! Encoding record batches (magic v2).
//!
//! A batch goes through two stages:
//! 1. [`BatchBuilder`], an open batch: records are appended straight into one buffer in their
//!    final wire form, after 61 placeholder bytes reserved for the batch header.
//! 2. [`SealedBatch`], produced once by [`BatchBuilder::seal`]: records compressed if asked and
//!    every header field written except the producer id, epoch, base sequence and the CRC, which
//!    [`SealedBatch::stamp`] writes right before each (re)send. Re-stamping after an epoch bump
//!    patches 14 bytes and recomputes the CRC; the records are never re-encoded.
//!
//! Layout (all integers big-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | BaseOffset (0) |
//! | 8 | 4 | Length (total - 12) |
//! | 12 | 4 | PartitionLeaderEpoch (-1) |
//! | 16 | 1 | Magic (2) |
//! | 17 | 4 | CRC-32C over bytes [21, end) |
//! | 21 | 2 | Attributes (compression in bits 0-2) |
//! | 23 | 4 | LastOffsetDelta (count - 1) |
//! | 27 | 8 | BaseTimestamp (first record's) |
//! | 35 | 8 | MaxTimestamp |
//! | 43 | 8 | ProducerId |
//! | 51 | 2 | ProducerEpoch |
//! | 53 | 4 | BaseSequence |
//! | 57 | 4 | RecordsCount |
//! | 61 | .. | Records (compressed as one stream if compression is not none) |
//!
//! Each record is: Length varint, Attributes int8 (0), TimestampDelta varlong, OffsetDelta
//! varint, Key (varint length, -1 = null, then bytes), Value (same), header count varint, then per
//! header a key (varint length + UTF-8) and a nullable value. Record varints are zigzag-encoded.

use std::fmt;

use bytes::Bytes;

use super::compression::{compress_into, decompress, Compression, CompressionError};
use super::decode::{decode_records, DecodedRecord, MalformedRecords};
use super::header::Header;
use super::storage::Storage;
use super::RECORD_BATCH_OVERHEAD;
use crate::protocol::primitives::{varint_len, varlong_len, zigzag32, zigzag64};

const LENGTH_OFFSET: usize = 8;
const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;
/// The attributes bit of a batch written in a transaction.
const TRANSACTIONAL_BIT: i16 = 0x10;
const LAST_OFFSET_DELTA_OFFSET: usize = 23;
const BASE_TIMESTAMP_OFFSET: usize = 27;
const MAX_TIMESTAMP_OFFSET: usize = 35;
const PRODUCER_ID_OFFSET: usize = 43;
const PRODUCER_EPOCH_OFFSET: usize = 51;
const BASE_SEQUENCE_OFFSET: usize = 53;
const RECORDS_COUNT_OFFSET: usize = 57;
/// BaseOffset + Length: the bytes not counted by the Length field.
const LOG_OVERHEAD: usize = 12;
/// The timestamp written when a batch has no records (Kafka's `NO_TIMESTAMP`).
const NO_TIMESTAMP: i64 = -1;

/// Encoded size of a nullable byte field (varint length, -1 for null, then the bytes).
#[inline]
fn nullable_len(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => varint_len(b.len() as i32) + b.len(),
    }
}

/// Writes a record's fields into the exact-size slice reserved for it.
struct Out<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Out<'_> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.buf[self.pos] = b;
        self.pos += 1;
    }

    #[inline(always)]
    fn uvarlong(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte((v as u8) | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    #[inline(always)]
    fn varint(&mut self, v: i32) {
        self.uvarlong(u64::from(zigzag32(v)));
    }

    #[inline(always)]
    fn varlong(&mut self, v: i64) {
        self.uvarlong(zigzag64(v));
    }

    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }

    #[inline(always)]
    fn nullable(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.byte(1), // zigzag(-1)
            Some(b) => {
                self.varint(b.len() as i32);
                self.bytes(b);
            }
        }
    }
}

/// Size of the part of a record body that does not depend on its place in the batch: key,
/// value and headers with their length prefixes. See [`BatchBuilder::payload_size`].
#[inline(always)]
fn payload_size(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header]) -> usize {
    let mut size = nullable_len(key) + nullable_len(value) + varint_len(headers.len() as i32);
    for h in headers {
        size += varint_len(h.key.len() as i32) + h.key.len() + nullable_len(h.value.as_deref());
    }
    size
}

/// Size of a record without its Length prefix, from its payload size (see [`payload_size`]).
#[inline(always)]
fn body_size(offset_delta: i32, timestamp_delta: i64, payload: usize) -> usize {
    1 // attributes
        + varlong_len(timestamp_delta)
        + varint_len(offset_delta)
        + payload
}

/// Size of a record with its Length prefix, from its body size.
#[inline(always)]
fn framed_size(body: usize) -> usize {
    varint_len(body as i32) + body
}

/// An open record batch: records are appended in their wire form into one buffer.
///
/// Create one per partition batch with [`BatchBuilder::new`] (or [`BatchBuilder::with_buffer`] to
/// reuse the buffer of a batch that was sent), check the size a record would add with
/// [`BatchBuilder::estimated_size_with`] or [`BatchBuilder::record_size`] against the batch and
/// request limits, [`append`](BatchBuilder::append) it, and [`seal`](BatchBuilder::seal) the batch
/// when it is full or its linger expired.
///
/// Record offsets deltas are the append order (0, 1, ...); the batch base timestamp is the first
/// record's timestamp and later records may have smaller timestamps (negative deltas).
pub struct BatchBuilder {
    buf: Vec<u8>,
    count: usize,
    base_timestamp: i64,
    max_timestamp: i64,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for BatchBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchBuilder")
            .field("records", &self.count)
            .field("size_in_bytes", &self.buf.len())
            .field("base_timestamp", &self.base_timestamp)
            .field("max_timestamp", &self.max_timestamp)
            .finish()
    }
}

impl BatchBuilder {
    /// An empty batch with a fresh buffer.
    pub fn new() -> Self {
        Self::with_buffer(Vec::new())
    }

    /// An empty batch with room for `capacity` bytes (header included) before reallocating.
    /// Use the producer's `batch.size` to allocate once per batch.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_buffer(Vec::with_capacity(capacity))
    }

    /// An empty batch writing into `buf`, e.g. a buffer recycled with
    /// [`SealedBatch::into_buffer`]. Its contents are discarded, its capacity kept.
    pub fn with_buffer(mut buf: Vec<u8>) -> Self {
        buf.clear();
        buf.resize(RECORD_BATCH_OVERHEAD, 0);
        BatchBuilder {
            buf,
            count: 0,
            base_timestamp: NO_TIMESTAMP,
            max_timestamp: NO_TIMESTAMP,
        }
    }

    /// The exact encoded size of a record, its Length prefix included, given its offset delta
    /// (index in the batch) and timestamp delta (timestamp minus the batch's base timestamp).
    ///
    /// A static function so that callers can check limits (e.g. `max.request.size`) before they
    /// have a batch; [`BatchBuilder::estimated_size_with`] does it for a given batch.
    pub fn record_size(
        offset_delta: i32,
        timestamp_delta: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> usize {
        let body = body_size(
            offset_delta,
            timestamp_delta,
            payload_size(key, value, headers),
        );
        framed_size(body)
    }

    /// The size of a record's key, value and headers with their length prefixes: the part of
    /// its encoded size that does not depend on where it goes. Compute it once per record and
    /// hand it to [`BatchBuilder::record_size_with_payload`] and
    /// [`BatchBuilder::try_append_with_payload`].
    pub fn payload_size(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header]) -> usize {
        payload_size(key, value, headers)
    }

    /// [`BatchBuilder::payload_size`] and [`BatchBuilder::record_size_with_payload`] of a
    /// record as the first of its batch (offset and timestamp deltas 0), computed inline with a
    /// compare or two per length: for a caller that sizes every record it takes (a producer's
    /// `send`, a driver's queue).
    #[inline(always)]
    pub fn first_record_sizes(
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> (usize, usize) {
        /// The length of the zigzag varint of a length `n` (`2n` once zigzag encoded).
        #[inline(always)]
        fn length_varint_len(n: usize) -> usize {
            match n {
                0..64 => 1,
                64..8_192 => 2,
                8_192..1_048_576 => 3,
                1_048_576..134_217_728 => 4,
                _ => 5,
            }
        }
        #[inline(always)]
        fn field(b: Option<&[u8]>) -> usize {
            b.map_or(1, |b| length_varint_len(b.len()) + b.len())
        }
        let mut payload = field(key) + field(value) + length_varint_len(headers.len());
        for h in headers {
            payload += field(Some(h.key.as_bytes())) + field(h.value.as_deref());
        }
        // Attributes, timestamp delta and offset delta, 1 byte each here.
        let body = 3 + payload;
        (payload, length_varint_len(body) + body)
    }

    /// [`BatchBuilder::record_size`] from a [`BatchBuilder::payload_size`].
    pub fn record_size_with_payload(
        offset_delta: i32,
        timestamp_delta: i64,
        payload: usize,
    ) -> usize {
        framed_size(body_size(offset_delta, timestamp_delta, payload))
    }

    /// Appends a record with the given timestamp (milliseconds, CreateTime), key, value and
    /// headers.
    ///
    /// The record is written once, in wire form, with no temporary buffer. Sizes are not limited
    /// here: check [`BatchBuilder::estimated_size_with`] against the batch and request limits
    /// first (or use [`BatchBuilder::try_append_with_payload`], which does both at once). (A
    /// batch over 2 GiB is refused by [`BatchBuilder::seal`].)
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) {
        let payload = payload_size(key, value, headers);
        let appended =
            self.try_append_with_payload(usize::MAX, timestamp, key, value, headers, payload);
        debug_assert!(appended);
    }

    /// Appends a record unless the batch already holds records and the record would take it
    /// past `limit` bytes (uncompressed, header included); returns whether it was appended. A
    /// record always goes into an empty batch. `payload` must be
    /// [`BatchBuilder::payload_size`] of the same key, value and headers: the record's size is
    /// computed once, for the check and the encoding both.
    pub fn try_append_with_payload(
        &mut self,
        limit: usize,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        payload: usize,
    ) -> bool {
        debug_assert_eq!(payload, payload_size(key, value, headers));
        let (offset_delta, timestamp_delta) = if self.count == 0 {
            (0, 0)
        } else {
            (
                self.count as i32,
                timestamp.wrapping_sub(self.base_timestamp),
            )
        };
        let body = body_size(offset_delta, timestamp_delta, payload);
        let total = framed_size(body);
        if self.count > 0 && self.buf.len().saturating_add(total) > limit {
            return false;
        }
        if self.count == 0 {
            self.base_timestamp = timestamp;
            self.max_timestamp = timestamp;
        } else if timestamp > self.max_timestamp {
            self.max_timestamp = timestamp;
        }
        self.write_record(
            body,
            total,
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers,
        );
        self.count += 1;
        true
    }

    /// Writes one record whose body size is `body` (`total` with its Length prefix), growing
    /// the buffer once by exactly `total`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn write_record(
        &mut self,
        body: usize,
        total: usize,
        timestamp_delta: i64,
        offset_delta: i32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) {
        // The record's exact size is known: grow the buffer once (zero-filled, a few vector
        // stores) and write every field in place, with no capacity check per field.
        let start = self.buf.len();
        self.buf.resize(start + total, 0);
        let mut out = Out {
            buf: &mut self.buf[start..],
            pos: 0,
        };
        out.varint(body as i32);
        out.byte(0); // attributes (unused)
        out.varlong(timestamp_delta);
        out.varint(offset_delta);
        out.nullable(key);
        out.nullable(value);
        out.varint(headers.len() as i32);
        for h in headers {
            out.varint(h.key.len() as i32);
            out.bytes(h.key.as_bytes());
            out.nullable(h.value.as_deref());
        }
        debug_assert_eq!(out.pos, total, "record size computed and written differ");
    }

    /// Number of records appended so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no record was appended yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The current size of the batch, uncompressed, its 61-byte header included.
    pub fn size_in_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Bytes the batch's buffer holds, used or not.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The timestamp of the first record (the batch's base timestamp), `None` if empty.
    pub fn base_timestamp(&self) -> Option<i64> {
        (self.count > 0).then_some(self.base_timestamp)
    }

    /// The uncompressed size the batch would have after appending this record: exact without
    /// compression, an upper estimate with it (compression happens at seal time). Use it to
    /// decide whether the record still fits in this batch.
    pub fn estimated_size_with(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> usize {
        let timestamp_delta = if self.count == 0 {
            0
        } else {
            timestamp.wrapping_sub(self.base_timestamp)
        };
        self.buf.len() + Self::record_size(self.count as i32, timestamp_delta, key, value, headers)
    }

    /// Closes the batch: compresses the records with `compression` (into a new buffer; without
    /// compression the builder's buffer is kept, no copy) and writes the batch header except the
    /// producer fields and the CRC, which [`SealedBatch::stamp`] writes.
    ///
    /// Fails if the codec is not compiled in ([`CompressionError::Unsupported`]), if it fails, or
    /// if the batch exceeds the int32 length field. An empty batch seals fine (count 0,
    /// timestamps -1) but brokers reject it: producers should not send one.
    pub fn seal(self, compression: Compression) -> Result<SealedBatch, CompressionError> {
        self.seal_recycling(compression).map(|(sealed, _)| sealed)
    }

    /// [`BatchBuilder::seal`], also handing back the builder's buffer when the sealed batch
    /// does not use it (with compression the records go to a new buffer), for reuse with
    /// [`BatchBuilder::with_buffer`].
    pub fn seal_recycling(
        self,
        compression: Compression,
    ) -> Result<(SealedBatch, Option<Vec<u8>>), CompressionError> {
        self.seal_or_keep(compression).map_err(|(e, _)| e)
    }

    /// [`BatchBuilder::seal_recycling`], handing the builder back (records intact) when sealing
    /// fails, so its records can still be recovered with [`BatchBuilder::into_records`].
    pub(crate) fn seal_or_keep(
        self,
        compression: Compression,
    ) -> Result<Sealed, (CompressionError, BatchBuilder)> {
        let uncompressed_size = self.buf.len();
        let too_large = |size| CompressionError::BatchTooLarge { size };
        if i32::try_from(self.count).is_err() {
            return Err((too_large(uncompressed_size), self));
        }
        let count = self.count as i32;
        let (mut buf, spare) = match compression {
            Compression::None => {
                if i32::try_from(uncompressed_size - LOG_OVERHEAD).is_err() {
                    return Err((too_large(uncompressed_size), self));
                }
                let mut buf = self.buf;
                trim(&mut buf);
                (buf, None)
            }
            codec => {
                let records = &self.buf[RECORD_BATCH_OVERHEAD..];
                let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len() / 2 + 64);
                out.resize(RECORD_BATCH_OVERHEAD, 0);
                if let Err(e) = compress_into(codec, records, &mut out) {
                    return Err((e, self));
                }
                if i32::try_from(out.len() - LOG_OVERHEAD).is_err() {
                    return Err((too_large(out.len()), self));
                }
                trim(&mut out);
                (out, Some(self.buf))
            }
        };
        let length = (buf.len() - LOG_OVERHEAD) as i32;

        let header = &mut buf[..RECORD_BATCH_OVERHEAD];
        put_at(header, 0, &0i64.to_be_bytes()); // base offset
        put_at(header, LENGTH_OFFSET, &length.to_be_bytes());
        put_at(
            header,
            PARTITION_LEADER_EPOCH_OFFSET,
            &(-1i32).to_be_bytes(),
        );
        put_at(header, MAGIC_OFFSET, &[2]);
        put_at(header, CRC_OFFSET, &[0; 4]);
        put_at(
            header,
            ATTRIBUTES_OFFSET,
            &compression.attribute_bits().to_be_bytes(),
        );
        put_at(header, LAST_OFFSET_DELTA_OFFSET, &(count - 1).to_be_bytes());
        put_at(
            header,
            BASE_TIMESTAMP_OFFSET,
            &self.base_timestamp.to_be_bytes(),
        );
        put_at(
            header,
            MAX_TIMESTAMP_OFFSET,
            &self.max_timestamp.to_be_bytes(),
        );
        put_at(header, RECORDS_COUNT_OFFSET, &count.to_be_bytes());
        let mut sealed = SealedBatch {
            buf: Storage::Owned(buf),
            record_count: count,
            uncompressed_size,
            compression,
            stamped: false,
        };
        sealed.write_producer_fields(-1, -1, -1);
        Ok((sealed, spare))
    }
}

/// Gives back the unused part of a sealed batch's buffer when it is more than a quarter of
/// what is used (a batch closed by its linger or a flush before it filled, a compressed one): a
/// sealed batch waits for its answer holding what it needs, not what its buffer grew to.
/// (glibc's allocator shrinks a buffer in place, without a copy.)
fn trim(buf: &mut Vec<u8>) {
    if buf.capacity() - buf.len() > buf.len() / 4 {
        buf.shrink_to_fit();
    }
}

#[inline]
fn put_at(buf: &mut [u8], offset: usize, bytes: &[u8]) {
    buf[offset..offset + bytes.len()].copy_from_slice(bytes);
}

/// A sealed batch and, when it no longer uses it, the builder's buffer for reuse.
type Sealed = (SealedBatch, Option<Vec<u8>>);

/// A closed record batch: final bytes except the producer fields and CRC, set by
/// [`SealedBatch::stamp`].
///
/// Stamp it with the producer id, epoch and base sequence before each send (`(-1, -1, -1)` for a
/// non-idempotent producer), then put [`SealedBatch::as_bytes`] in the Produce request. Stamping
/// again (after an epoch bump or a sequence reset) rewrites those 14 bytes and the CRC only.
/// When the batch is done, [`SealedBatch::into_buffer`] gives its buffer back for a new
/// [`BatchBuilder::with_buffer`].
#[derive(Clone)]
pub struct SealedBatch {
    buf: Storage,
    record_count: i32,
    uncompressed_size: usize,
    compression: Compression,
    stamped: bool,
}

impl fmt::Debug for SealedBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealedBatch")
            .field("record_count", &self.record_count)
            .field("len_bytes", &self.len_bytes())
            .field("uncompressed_size", &self.uncompressed_size)
            .field("compression", &self.compression)
            .field("producer_id", &self.producer_id())
            .field("producer_epoch", &self.producer_epoch())
            .field("base_sequence", &self.base_sequence())
            .field("stamped", &self.stamped)
            .finish()
    }
}

impl SealedBatch {
    fn write_producer_fields(&mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) {
        let header = &mut self.buf.as_mut()[..RECORD_BATCH_OVERHEAD];
        put_at(header, PRODUCER_ID_OFFSET, &producer_id.to_be_bytes());
        put_at(header, PRODUCER_EPOCH_OFFSET, &producer_epoch.to_be_bytes());
        put_at(header, BASE_SEQUENCE_OFFSET, &base_sequence.to_be_bytes());
    }

    /// Writes the producer id, epoch and base sequence into the header and computes the CRC-32C
    /// over bytes [21, end). Call it before every send; calling it again (new epoch or sequence)
    /// only rewrites these fields and the CRC. A non-idempotent producer stamps `(-1, -1, -1)`.
    pub fn stamp(&mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) {
        self.write_producer_fields(producer_id, producer_epoch, base_sequence);
        let buf = self.buf.as_mut();
        let crc = crc32c::crc32c(&buf[ATTRIBUTES_OFFSET..]);
        put_at(buf, CRC_OFFSET, &crc.to_be_bytes());
        self.stamped = true;
    }

    /// Marks the batch as part of a transaction (attribute bit 4), or not. Call it before the
    /// first [`SealedBatch::stamp`]: the stamp's CRC covers the attributes.
    pub fn set_transactional(&mut self, transactional: bool) {
        let mut b = [0; 2];
        b.copy_from_slice(&self.buf.as_slice()[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2]);
        let mut attributes = i16::from_be_bytes(b);
        if transactional {
            attributes |= TRANSACTIONAL_BIT;
        } else {
            attributes &= !TRANSACTIONAL_BIT;
        }
        put_at(
            self.buf.as_mut(),
            ATTRIBUTES_OFFSET,
            &attributes.to_be_bytes(),
        );
        self.stamped = false;
    }

    /// Whether the batch is marked as part of a transaction.
    pub fn is_transactional(&self) -> bool {
        let mut b = [0; 2];
        b.copy_from_slice(&self.buf.as_slice()[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2]);
        i16::from_be_bytes(b) & TRANSACTIONAL_BIT != 0
    }

    /// Whether [`SealedBatch::stamp`] was called.
    pub fn is_stamped(&self) -> bool {
        self.stamped
    }

    /// The batch bytes as they go in a Produce request's `Records` field. Only valid after
    /// [`SealedBatch::stamp`] (the CRC is not set before; debug builds assert it).
    pub fn as_bytes(&self) -> &[u8] {
        debug_assert!(self.stamped, "SealedBatch::as_bytes before stamp");
        self.buf.as_slice()
    }

    /// A copy of the stamped batch bytes as [`Bytes`], for request builders that hold `Bytes`.
    /// Copies the whole batch: prefer [`SealedBatch::as_bytes`] when writing into a buffer, or
    /// [`SealedBatch::share`] to hand the bytes on without a copy.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }

    /// The stamped batch bytes as [`Bytes`] sharing the batch's own buffer: no copy. Call it
    /// when a request carries the batch as it is (a transmit in pieces). A later
    /// [`SealedBatch::stamp`] takes the buffer back if nothing holds these bytes any more, and
    /// copies it if something does, so what was shared never changes.
    pub fn share(&mut self) -> Bytes {
        debug_assert!(self.stamped, "SealedBatch::share before stamp");
        self.buf.share()
    }

    /// Number of records in the batch.
    pub fn record_count(&self) -> i32 {
        self.record_count
    }

    /// Size of the batch on the wire (compressed records plus the 61-byte header).
    pub fn len_bytes(&self) -> usize {
        self.buf.as_slice().len()
    }

    /// Size the batch had before compression, header included (equal to
    /// [`SealedBatch::len_bytes`] without compression).
    pub fn uncompressed_size(&self) -> usize {
        self.uncompressed_size
    }

    /// The codec the records were compressed with.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The batch's base timestamp (first record's), -1 if the batch is empty.
    pub fn base_timestamp(&self) -> i64 {
        self.read_i64(BASE_TIMESTAMP_OFFSET)
    }

    /// The batch's maximum record timestamp, -1 if the batch is empty.
    pub fn max_timestamp(&self) -> i64 {
        self.read_i64(MAX_TIMESTAMP_OFFSET)
    }

    /// The producer id last stamped (-1 before any stamp).
    pub fn producer_id(&self) -> i64 {
        self.read_i64(PRODUCER_ID_OFFSET)
    }

    /// The producer epoch last stamped (-1 before any stamp).
    pub fn producer_epoch(&self) -> i16 {
        let mut b = [0; 2];
        b.copy_from_slice(&self.buf.as_slice()[PRODUCER_EPOCH_OFFSET..PRODUCER_EPOCH_OFFSET + 2]);
        i16::from_be_bytes(b)
    }

    /// The base sequence last stamped (-1 before any stamp).
    pub fn base_sequence(&self) -> i32 {
        let mut b = [0; 4];
        b.copy_from_slice(&self.buf.as_slice()[BASE_SEQUENCE_OFFSET..BASE_SEQUENCE_OFFSET + 4]);
        i32::from_be_bytes(b)
    }

    fn read_i64(&self, offset: usize) -> i64 {
        let mut b = [0; 8];
        b.copy_from_slice(&self.buf.as_slice()[offset..offset + 8]);
        i64::from_be_bytes(b)
    }

    /// Gives the buffer back (for [`BatchBuilder::with_buffer`]) once the batch is acknowledged
    /// or failed for good; an empty one if a request still shares it.
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf.into_vec()
    }

    /// The batch's records, decoded (decompressed first if needed), for handing them back to
    /// the caller or re-encoding them. Consumes the batch: its buffer becomes the records'.
    pub(crate) fn into_records(self) -> Result<Vec<DecodedRecord>, UnpackError> {
        let base = self.base_timestamp();
        let count = self.record_count.max(0) as usize;
        let records = match self.compression {
            Compression::None => self.buf.into_bytes().slice(RECORD_BATCH_OVERHEAD..),
            codec => Bytes::from(decompress(
                codec,
                &self.buf.as_slice()[RECORD_BATCH_OVERHEAD..],
                self.uncompressed_size - RECORD_BATCH_OVERHEAD,
            )?),
        };
        Ok(decode_records(records, count, base)?)
    }
}

impl BatchBuilder {
    /// The records appended so far, decoded, for handing them back to the caller when the
    /// batch cannot be sent. Consumes the builder.
    pub(crate) fn into_records(self) -> Result<Vec<DecodedRecord>, MalformedRecords> {
        let records = Bytes::from(self.buf).slice(RECORD_BATCH_OVERHEAD..);
        decode_records(records, self.count, self.base_timestamp)
    }
}

/// The records of a sealed batch could not be recovered (not expected: this crate wrote them).
#[derive(Debug, thiserror::Error)]
pub(crate) enum UnpackError {
    /// Decompressing the records failed.
    #[error(transparent)]
    Decompress(#[from] CompressionError),
    /// The decompressed records did not decode.
    #[error(transparent)]
    Malformed(#[from] MalformedRecords),
}

#[cfg(test)]
mod tests;
