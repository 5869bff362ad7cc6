//! Record batches: the producer's decode paths (the records a failure hands back, the halves
//! of a split batch) on arbitrary bytes, and the encoder checked against an independent decoder.
//!
//! Input byte 0: bits 0-2 the codec (`% 5`: none, gzip, snappy, lz4, zstd), bit 3 the mode.
//! - Decode mode: `[count: u16] [expected size: u16] [base timestamp: 8 bytes] [bytes...]`:
//!   decompress and decode never panic, never yield more records than asked, never allocate
//!   from a length they did not check (the counting allocator's cap), and decode the same
//!   bytes the same way twice.
//! - Round-trip mode: records from the input (`[n] ([ts delta][key?][value?][headers])*`) are
//!   appended to a `BatchBuilder` and sealed with the codec; the batch must decode with
//!   `kafka-protocol`'s record decoder (CRC, sizes, compression, every field) to exactly those
//!   records, stamped with a producer id, epoch and sequence, and come back out of the
//!   producer's own paths (open and sealed) identical.

use bytes::Bytes;
use producer_core::record::fuzzing::{decode, unpack, unpack_open, Decoded};
use producer_core::record::{BatchBuilder, Compression, Header};

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (c, rest) = self.0.split_at(n);
        self.0 = rest;
        c
    }

    /// A nullable field: a length byte (255: null) and that many bytes.
    fn nullable(&mut self) -> Option<Vec<u8>> {
        match self.byte() {
            255 => None,
            n => Some(self.bytes(usize::from(n % 64)).to_vec()),
        }
    }
}

type Input = (i64, Option<Vec<u8>>, Option<Vec<u8>>, Vec<Header>);

/// Runs one input; panics when a rule breaks.
pub fn run(data: &[u8]) {
    let mut r = Reader(data);
    let flags = r.byte();
    let codec = Compression::ALL[usize::from(flags & 7) % 5];
    if flags & 8 == 0 {
        decode_bytes(codec, &mut r);
    } else {
        round_trip(codec, &mut r);
    }
}

fn decode_bytes(codec: Compression, r: &mut Reader) {
    let count = usize::from(r.u16());
    let expected = usize::from(r.u16());
    let base = i64::from_be_bytes(r.bytes(8).try_into().unwrap_or([0; 8]));
    let input = r.0;
    let first = decode(codec, input, expected, count, base);
    if let Ok(records) = &first {
        assert_eq!(
            records.len(),
            count,
            "decoded a number of records other than asked"
        );
        let held: usize = records
            .iter()
            .map(|(_, k, v, h)| {
                k.as_ref().map_or(0, Bytes::len)
                    + v.as_ref().map_or(0, Bytes::len)
                    + h.iter()
                        .map(|h| h.key.len() + h.value.as_ref().map_or(0, Bytes::len))
                        .sum::<usize>()
            })
            .sum();
        assert!(
            held <= expected,
            "records hold {held} bytes out of {expected} decompressed"
        );
    }
    assert_eq!(
        first,
        decode(codec, input, expected, count, base),
        "decode is not deterministic"
    );
}

fn round_trip(codec: Compression, r: &mut Reader) {
    let n = usize::from(r.byte() % 32);
    let base = 1_700_000_000_000i64 + i64::from(r.u16());
    let mut records: Vec<Input> = Vec::new();
    let mut builder = BatchBuilder::new();
    for _ in 0..n {
        let ts = match r.byte() {
            255 => -1,
            254 => base - 1_000_000,
            d => base + i64::from(d) * 1000,
        };
        let key = r.nullable();
        let value = r.nullable();
        let headers: Vec<Header> = (0..r.byte() % 3)
            .map(|_| {
                let k = String::from_utf8_lossy(&r.nullable().unwrap_or_default()).into_owned();
                Header::new(k, r.nullable().map(Bytes::from))
            })
            .collect();
        builder.append(ts, key.as_deref(), value.as_deref(), &headers);
        records.push((ts, key, value, headers));
    }
    if r.byte() & 1 == 1 {
        check_same(
            &records,
            &unpack_open(builder).expect("an open batch reads back"),
            "open batch",
        );
        return;
    }
    let mut sealed = match builder.seal(codec) {
        Ok(s) => s,
        Err(e) => panic!("sealing {n} records with {codec:?} failed: {e}"),
    };
    sealed.stamp(4242, 7, 100);
    // The independent decoder: CRC, sizes, offsets, compression.
    let mut bytes = Bytes::copy_from_slice(sealed.as_bytes());
    let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut bytes)
        .unwrap_or_else(|e| panic!("kafka-protocol cannot decode the batch ({codec:?}): {e}"));
    let decoded: Vec<_> = sets.iter().flat_map(|s| s.records.iter()).collect();
    assert_eq!(
        decoded.len(),
        records.len(),
        "kafka-protocol reads another record count"
    );
    for (i, (d, (ts, k, v, h))) in decoded.iter().zip(&records).enumerate() {
        assert_eq!(d.offset, i as i64, "offset delta of record {i}");
        assert_eq!((d.producer_id, d.producer_epoch), (4242, 7));
        assert_eq!(d.sequence, 100 + i as i32, "sequence of record {i}");
        assert_eq!(d.timestamp, *ts, "timestamp of record {i}");
        assert_eq!(d.key.as_deref(), k.as_deref(), "key of record {i}");
        assert_eq!(d.value.as_deref(), v.as_deref(), "value of record {i}");
        let hs: Vec<(String, Option<Vec<u8>>)> = d
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_ref().map(|v| v.to_vec())))
            .collect();
        let want: Vec<(String, Option<Vec<u8>>)> = h
            .iter()
            .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
            .collect();
        // kafka-protocol keeps headers in a map: compare the last value of each key.
        let mut dedup: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        for (k, v) in want {
            match dedup.iter_mut().find(|(dk, _)| *dk == k) {
                Some(e) => e.1 = v,
                None => dedup.push((k, v)),
            }
        }
        assert_eq!(hs, dedup, "headers of record {i}");
    }
    check_same(
        &records,
        &unpack(sealed).expect("a sealed batch reads back"),
        "sealed batch",
    );
}

fn check_same(want: &[Input], got: &[Decoded], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: record count");
    for (i, ((ts, k, v, h), (gts, gk, gv, gh))) in want.iter().zip(got).enumerate() {
        assert_eq!(gts, ts, "{what}: timestamp of record {i}");
        assert_eq!(gk.as_deref(), k.as_deref(), "{what}: key of record {i}");
        assert_eq!(gv.as_deref(), v.as_deref(), "{what}: value of record {i}");
        assert_eq!(gh, h, "{what}: headers of record {i}");
    }
}
