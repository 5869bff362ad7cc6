//! Record batch (magic v2) encoder: golden bytes, and cross-checks against kafka-protocol's
//! independent `RecordBatchDecoder` (which verifies the CRC-32C itself) for every compression.

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType,
};
use producer_core::record::{
    BatchBuilder, Compression, CompressionError, Header, SealedBatch, RECORD_BATCH_OVERHEAD,
};
use proptest::prelude::*;

// ------------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------------

/// One record as the test generates it.
#[derive(Debug, Clone)]
struct Rec {
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<Header>,
}

fn build(recs: &[Rec]) -> BatchBuilder {
    let mut b = BatchBuilder::new();
    for r in recs {
        b.append(
            r.timestamp,
            r.key.as_deref(),
            r.value.as_deref(),
            &r.headers,
        );
    }
    b
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().unwrap())
}

/// Independent CRC check: CRC-32C over bytes [21, end) equals the header's CRC field.
fn crc_verifies(bytes: &[u8]) -> bool {
    be_u32(bytes, 17) == crc32c::crc32c(&bytes[21..])
}

fn kp_compression(c: Compression) -> KpCompression {
    match c {
        Compression::None => KpCompression::None,
        Compression::Gzip => KpCompression::Gzip,
        Compression::Snappy => KpCompression::Snappy,
        Compression::Lz4 => KpCompression::Lz4,
        Compression::Zstd => KpCompression::Zstd,
        other => panic!("unknown compression {other:?}"),
    }
}

/// Decodes `bytes` with kafka-protocol and compares everything with what was appended.
fn assert_decodes_to(
    bytes: &[u8],
    recs: &[Rec],
    compression: Compression,
    (pid, epoch, seq): (i64, i16, i32),
) {
    // Header fields, read independently.
    assert_eq!(be_i64(bytes, 0), 0, "base offset");
    assert_eq!(be_i32(bytes, 8) as usize, bytes.len() - 12, "length");
    assert_eq!(be_i32(bytes, 12), -1, "partition leader epoch");
    assert_eq!(bytes[16], 2, "magic");
    assert!(crc_verifies(bytes), "CRC-32C over [21..]");
    assert_eq!(
        be_i16(bytes, 21),
        compression.attribute_bits(),
        "attributes"
    );
    assert_eq!(
        be_i32(bytes, 23),
        recs.len() as i32 - 1,
        "last offset delta"
    );
    assert_eq!(be_i64(bytes, 27), recs[0].timestamp, "base timestamp");
    let max_ts = recs.iter().map(|r| r.timestamp).max().unwrap();
    assert_eq!(be_i64(bytes, 35), max_ts, "max timestamp");
    assert_eq!(be_i64(bytes, 43), pid, "producer id");
    assert_eq!(be_i16(bytes, 51), epoch, "producer epoch");
    assert_eq!(be_i32(bytes, 53), seq, "base sequence");
    assert_eq!(be_i32(bytes, 57), recs.len() as i32, "records count");

    let mut buf = Bytes::copy_from_slice(bytes);
    let set = RecordBatchDecoder::decode(&mut buf).expect("kafka-protocol decodes our batch");
    assert!(buf.is_empty(), "{} trailing bytes", buf.len());
    assert_eq!(set.version, 2);
    assert_eq!(set.compression, kp_compression(compression));
    assert_eq!(set.records.len(), recs.len());
    for (i, (got, want)) in set.records.iter().zip(recs).enumerate() {
        assert_eq!(got.offset, i as i64, "record {i} offset delta");
        assert_eq!(
            got.sequence,
            seq.wrapping_add(i as i32),
            "record {i} sequence"
        );
        assert_eq!(got.timestamp, want.timestamp, "record {i} timestamp");
        assert_eq!(got.timestamp_type, TimestampType::Creation);
        assert_eq!(got.key.as_deref(), want.key.as_deref(), "record {i} key");
        assert_eq!(
            got.value.as_deref(),
            want.value.as_deref(),
            "record {i} value"
        );
        let got_headers: Vec<(&str, Option<&[u8]>)> = got
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        let want_headers: Vec<(&str, Option<&[u8]>)> = want
            .headers
            .iter()
            .map(|h| (h.key.as_str(), h.value.as_deref()))
            .collect();
        assert_eq!(got_headers, want_headers, "record {i} headers");
        assert_eq!(got.producer_id, pid);
        assert_eq!(got.producer_epoch, epoch);
        assert_eq!(got.partition_leader_epoch, -1);
        assert!(!got.transactional && !got.control && !got.delete_horizon);
    }
}

// ------------------------------------------------------------------------------------------------
// Golden bytes
// ------------------------------------------------------------------------------------------------

#[test]
fn golden_one_record_uncompressed() {
    let mut b = BatchBuilder::new();
    b.append(
        1_700_000_000_000, // 0x0000_018B_CFE5_6800
        Some(b"key"),
        Some(b"value"),
        &[Header::new("h", Some(Bytes::from_static(b"x")))],
    );
    let mut sealed = b.seal(Compression::None).unwrap();
    sealed.stamp(42, 3, 7);
    let bytes = sealed.as_bytes();

    // CRC-32C over [21..end) of the bytes below, pinned as a literal (also checked with a
    // bitwise Python CRC-32C, poly 0x82F63B78, outside this crate).
    let crc: u32 = 0xA686_F1C0;
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        &[0, 0, 0, 0, 0, 0, 0, 0][..],          // BaseOffset int64 = 0
        &[0, 0, 0, 68],                         // Length int32 = 80 - 12
        &[0xff, 0xff, 0xff, 0xff],              // PartitionLeaderEpoch int32 = -1
        &[2],                                   // Magic int8 = 2
        &crc.to_be_bytes(),                     // CRC uint32 (CRC-32C of [21..80))
        &[0, 0],                                // Attributes int16: no compression, CreateTime
        &[0, 0, 0, 0],                          // LastOffsetDelta int32 = count - 1 = 0
        &[0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00], // BaseTimestamp int64 = 1_700_000_000_000
        &[0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00], // MaxTimestamp int64 = same
        &[0, 0, 0, 0, 0, 0, 0, 42],             // ProducerId int64 = 42
        &[0, 3],                                // ProducerEpoch int16 = 3
        &[0, 0, 0, 7],                          // BaseSequence int32 = 7
        &[0, 0, 0, 1],                          // RecordsCount int32 = 1
        // Record (19 bytes)
        &[0x24],                                // Length varint: zigzag(18) = 36
        &[0x00],                                // Attributes int8 = 0
        &[0x00],                                // TimestampDelta varlong: zigzag(0)
        &[0x00],                                // OffsetDelta varint: zigzag(0)
        &[0x06], b"key",                        // KeyLength varint zigzag(3) = 6; key
        &[0x0a], b"value",                      // ValueLength varint zigzag(5) = 10; value
        &[0x02],                                // HeadersCount varint zigzag(1) = 2
        &[0x02], b"h",                          // HeaderKeyLength zigzag(1); "h"
        &[0x02], b"x",                          // HeaderValueLength zigzag(1); "x"
    ]
    .concat();
    assert_eq!(expected.len(), 80);
    // The pinned literal is the CRC-32C of the expected bytes.
    assert_eq!(crc32c::crc32c(&expected[21..]), crc);
    assert_eq!(bytes, &expected[..]);
    assert_eq!(sealed.record_count(), 1);
    assert_eq!(sealed.len_bytes(), 80);
    assert_eq!(sealed.uncompressed_size(), 80);
    assert_eq!(sealed.to_bytes(), Bytes::from(expected));
}

#[test]
fn golden_null_key_null_value_negative_delta() {
    let mut b = BatchBuilder::new();
    b.append(1000, None, Some(b"a"), &[]);
    b.append(998, Some(b""), None, &[Header::new("", None)]);
    let mut sealed = b.seal(Compression::None).unwrap();
    sealed.stamp(-1, -1, -1);
    let bytes = sealed.as_bytes();
    #[rustfmt::skip]
    let records: &[u8] = &[
        // record 0
        0x0e,       // Length zigzag(7)
        0x00,       // Attributes
        0x00,       // TimestampDelta 0
        0x00,       // OffsetDelta 0
        0x01,       // KeyLength -1 (null)
        0x02, b'a', // ValueLength 1, "a"
        0x00,       // HeadersCount 0
        // record 1
        0x10,       // Length zigzag(8)
        0x00,       // Attributes
        0x03,       // TimestampDelta zigzag(-2) = 3
        0x02,       // OffsetDelta zigzag(1) = 2
        0x00,       // KeyLength 0 (empty, not null)
        0x01,       // ValueLength -1 (null)
        0x02,       // HeadersCount 1
        0x00,       // HeaderKeyLength 0 ("")
        0x01,       // HeaderValueLength -1 (null)
    ];
    assert_eq!(&bytes[RECORD_BATCH_OVERHEAD..], records);
    assert_eq!(
        be_i64(bytes, 27),
        1000,
        "base timestamp is the first record's"
    );
    assert_eq!(be_i64(bytes, 35), 1000, "max timestamp");
    assert_eq!(&bytes[43..57], &[0xff; 14], "producer id/epoch/sequence -1");
    assert!(crc_verifies(bytes));
}

// ------------------------------------------------------------------------------------------------
// Strategies
// ------------------------------------------------------------------------------------------------

fn bytes_strategy(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..max),
        // compressible
        (any::<u8>(), 0..max).prop_map(|(b, n)| vec![b; n]),
    ]
}

fn rec_strategy() -> impl Strategy<Value = (i64, Rec)> {
    (
        prop_oneof![-1000i64..1000, -(1i64 << 40)..(1i64 << 40)],
        prop::option::of(bytes_strategy(40)),
        prop::option::of(bytes_strategy(300)),
        prop::collection::vec(("\\PC{0,6}", prop::option::of(bytes_strategy(20))), 0..=3),
    )
        .prop_map(|(delta, key, value, headers)| {
            let headers = headers
                .into_iter()
                .enumerate()
                // kafka-protocol collects headers in a map: keep keys distinct.
                .map(|(j, (k, v))| Header::new(format!("{j}{k}"), v.map(Bytes::from)))
                .collect();
            (
                delta,
                Rec {
                    timestamp: 0,
                    key,
                    value,
                    headers,
                },
            )
        })
}

fn batch_strategy() -> impl Strategy<Value = Vec<Rec>> {
    (
        0i64..2_000_000_000_000,
        prop::collection::vec(rec_strategy(), 1..25),
    )
        .prop_map(|(base, recs)| {
            recs.into_iter()
                .map(|(delta, mut r)| {
                    r.timestamp = base + delta;
                    r
                })
                .collect()
        })
}

fn producer_strategy() -> impl Strategy<Value = (i64, i16, i32)> {
    prop_oneof![
        Just((-1i64, -1i16, -1i32)),
        (0i64..=i64::MAX, 0i16..=i16::MAX, 0i32..=i32::MAX),
        (any::<i64>(), any::<i16>(), any::<i32>()),
    ]
}

// ------------------------------------------------------------------------------------------------
// Cross-checks
// ------------------------------------------------------------------------------------------------

fn crosscheck(
    compression: Compression,
    recs: &[Rec],
    first: (i64, i16, i32),
    second: (i64, i16, i32),
) {
    let builder = build(recs);
    let uncompressed = builder.size_in_bytes();
    let mut sealed: SealedBatch = builder.seal(compression).unwrap();
    assert_eq!(sealed.record_count(), recs.len() as i32);
    assert_eq!(sealed.uncompressed_size(), uncompressed);
    assert_eq!(sealed.compression(), compression);
    assert!(!sealed.is_stamped());

    sealed.stamp(first.0, first.1, first.2);
    let before = sealed.as_bytes().to_vec();
    assert_eq!(before.len(), sealed.len_bytes());
    assert_decodes_to(&before, recs, compression, first);

    // Re-stamp (epoch bump / new sequence): only the producer fields and the CRC change.
    sealed.stamp(second.0, second.1, second.2);
    let after = sealed.as_bytes();
    assert_decodes_to(after, recs, compression, second);
    assert_eq!(before.len(), after.len());
    for (i, (x, y)) in before.iter().zip(after).enumerate() {
        if x != y {
            assert!(
                (17..21).contains(&i) || (43..57).contains(&i),
                "byte {i} changed on re-stamp"
            );
        }
    }
    assert_eq!(
        (
            sealed.producer_id(),
            sealed.producer_epoch(),
            sealed.base_sequence()
        ),
        second
    );
}

macro_rules! crosscheck_test {
    ($name:ident, $compression:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            #[test]
            fn $name(
                recs in batch_strategy(),
                first in producer_strategy(),
                second in producer_strategy(),
            ) {
                crosscheck($compression, &recs, first, second);
            }
        }
    };
}

crosscheck_test!(crosscheck_none, Compression::None);
#[cfg(feature = "gzip")]
crosscheck_test!(crosscheck_gzip, Compression::Gzip);
#[cfg(feature = "snappy")]
crosscheck_test!(crosscheck_snappy, Compression::Snappy);
#[cfg(feature = "lz4")]
crosscheck_test!(crosscheck_lz4, Compression::Lz4);
#[cfg(feature = "zstd")]
crosscheck_test!(crosscheck_zstd, Compression::Zstd);

/// With a codec's feature off, sealing with it is a typed error, not a panic.
#[test]
fn unsupported_codec_is_a_typed_error() {
    for c in Compression::ALL {
        let mut b = BatchBuilder::new();
        b.append(1, None, Some(b"v"), &[]);
        match b.seal(c) {
            Ok(_) => assert!(c.is_supported(), "{c}"),
            Err(CompressionError::Unsupported(x)) => {
                assert_eq!(x, c);
                assert!(!c.is_supported());
            }
            Err(e) => panic!("{c}: {e}"),
        }
    }
}

/// A batch larger than one 64 KiB LZ4 block (and than snappy's internal 64 KiB blocks), for
/// every codec.
#[test]
fn large_batch_every_codec() {
    let recs: Vec<Rec> = (0..1500)
        .map(|i| Rec {
            timestamp: 1_700_000_000_000 + (i % 7) as i64 - 3,
            key: (i % 3 != 0).then(|| format!("key-{i}").into_bytes()),
            value: Some(format!("value {i} ").repeat(1 + i % 20).into_bytes()),
            headers: vec![Header::new("trace", Some(Bytes::from(vec![i as u8; 16])))],
        })
        .collect();
    for c in Compression::ALL.into_iter().filter(|c| c.is_supported()) {
        crosscheck(c, &recs, (1000, 5, 0), (1000, 6, 0));
        let sealed = build(&recs).seal(c).unwrap();
        assert!(sealed.uncompressed_size() > 128 * 1024);
        if c != Compression::None {
            assert!(
                sealed.len_bytes() < sealed.uncompressed_size() / 2,
                "{c} compresses repetitive data"
            );
        }
    }
}

/// Independent encoder, byte for byte: kafka-protocol takes the *minimum* timestamp as the base
/// (Java takes the first record's), so compare on batches with non-decreasing timestamps.
#[test]
fn uncompressed_bytes_equal_kafka_protocol_encoder() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(64));
    runner
        .run(
            &(batch_strategy(), producer_strategy()),
            |(mut recs, (pid, epoch, seq))| {
                recs.sort_by_key(|r| r.timestamp);
                let mut sealed = build(&recs).seal(Compression::None).unwrap();
                sealed.stamp(pid, epoch, seq);

                let kp_recs: Vec<KpRecord> = recs
                    .iter()
                    .enumerate()
                    .map(|(i, r)| KpRecord {
                        transactional: false,
                        control: false,
                        delete_horizon: false,
                        partition_leader_epoch: -1,
                        producer_id: pid,
                        producer_epoch: epoch,
                        timestamp_type: TimestampType::Creation,
                        offset: i as i64,
                        sequence: seq.wrapping_add(i as i32),
                        timestamp: r.timestamp,
                        key: r.key.clone().map(Bytes::from),
                        value: r.value.clone().map(Bytes::from),
                        headers: r
                            .headers
                            .iter()
                            .map(|h| (StrBytes::from_string(h.key.clone()), h.value.clone()))
                            .collect(),
                    })
                    .collect();
                let mut theirs = bytes::BytesMut::new();
                RecordBatchEncoder::encode(
                    &mut theirs,
                    &kp_recs,
                    &RecordEncodeOptions {
                        version: 2,
                        compression: KpCompression::None,
                    },
                )
                .unwrap();
                prop_assert_eq!(sealed.as_bytes(), &theirs[..]);
                Ok(())
            },
        )
        .unwrap();
}

// ------------------------------------------------------------------------------------------------
// record_size
// ------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `record_size` and `estimated_size_with` equal the bytes `append` actually writes,
    /// including timestamps far apart (long varlong deltas).
    #[test]
    fn record_size_matches_append(
        recs in prop::collection::vec(rec_strategy(), 1..20),
        base in any::<i64>().prop_map(|t| t >> 2),
    ) {
        let mut b = BatchBuilder::new();
        let mut first_ts = None;
        for (i, (delta, r)) in recs.iter().enumerate() {
            let ts = base + delta * 1000;
            let base_ts = *first_ts.get_or_insert(ts);
            let before = b.size_in_bytes();
            let predicted = BatchBuilder::record_size(
                i as i32,
                ts - base_ts,
                r.key.as_deref(),
                r.value.as_deref(),
                &r.headers,
            );
            let estimated = b.estimated_size_with(ts, r.key.as_deref(), r.value.as_deref(), &r.headers);
            b.append(ts, r.key.as_deref(), r.value.as_deref(), &r.headers);
            prop_assert_eq!(b.size_in_bytes() - before, predicted);
            prop_assert_eq!(b.size_in_bytes(), estimated);
            prop_assert_eq!(b.len(), i + 1);
        }
    }

    /// `record_size` for arbitrary offset and timestamp deltas, against a size computed here
    /// from an independent zigzag varint writer.
    #[test]
    fn record_size_matches_independent_formula(
        offset_delta in any::<i32>(),
        ts_delta in any::<i64>(),
        (_, r) in rec_strategy(),
    ) {
        fn zz_len(v: i64) -> usize {
            let mut u = ((v << 1) ^ (v >> 63)) as u64;
            let mut n = 1;
            while u >= 0x80 {
                u >>= 7;
                n += 1;
            }
            n
        }
        let nullable = |b: Option<&[u8]>| b.map_or(1, |b| zz_len(b.len() as i64) + b.len());
        let mut body = 1 + zz_len(ts_delta) + zz_len(offset_delta as i64)
            + nullable(r.key.as_deref()) + nullable(r.value.as_deref())
            + zz_len(r.headers.len() as i64);
        for h in &r.headers {
            body += zz_len(h.key.len() as i64) + h.key.len() + nullable(h.value.as_deref());
        }
        let want = zz_len(body as i64) + body;
        prop_assert_eq!(
            BatchBuilder::record_size(offset_delta, ts_delta, r.key.as_deref(), r.value.as_deref(), &r.headers),
            want
        );
    }
}
