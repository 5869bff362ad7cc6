//! Compression codecs for the records section of a batch.
//!
//! Only the records (bytes `[61, end)` of a batch) are compressed, as one stream; the batch header
//! stays plain. Each codec is compiled in by the cargo feature of the same name (`gzip`,
//! `snappy`, `lz4`, `zstd`, all on by default). Compressing with a codec whose feature is off
//! gives [`CompressionError::Unsupported`].
//!
//! Formats are the ones Kafka clients put on the wire:
//! - gzip: a gzip member (RFC 1952), default level (6), as Java's `GZIPOutputStream`;
//! - snappy: one *raw* snappy block (no xerial framing), as librdkafka and franz-go write;
//! - lz4: an LZ4 *frame* with independent 64 KiB blocks and no checksums, as Java's
//!   `KafkaLZ4BlockOutputStream` writes;
//! - zstd: a zstd frame at level 3 (zstd's and Kafka's default).

use std::fmt;

/// The compression codec of a record batch (bits 0-2 of the batch attributes).
///
/// Choose it from the producer's `compression.type`; [`Compression::None`] is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Compression {
    /// No compression (attribute bits 0).
    #[default]
    None,
    /// gzip (attribute bits 1), needs the `gzip` feature.
    Gzip,
    /// Raw snappy block (attribute bits 2), needs the `snappy` feature.
    Snappy,
    /// LZ4 frame (attribute bits 3), needs the `lz4` feature.
    Lz4,
    /// zstd (attribute bits 4), needs the `zstd` feature.
    Zstd,
}

impl Compression {
    /// Every codec, in attribute-bit order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The value of the batch attributes' compression bits (0-2) for this codec: 0 none, 1 gzip,
    /// 2 snappy, 3 lz4, 4 zstd.
    pub const fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// Kafka's name for the codec (the `compression.type` config value).
    pub const fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// Whether this build can compress with the codec (its cargo feature is on). Check it when
    /// validating a producer configuration, so an unsupported codec fails early rather than at
    /// the first batch.
    pub const fn is_supported(self) -> bool {
        match self {
            Compression::None => true,
            Compression::Gzip => cfg!(feature = "gzip"),
            Compression::Snappy => cfg!(feature = "snappy"),
            Compression::Lz4 => cfg!(feature = "lz4"),
            Compression::Zstd => cfg!(feature = "zstd"),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why sealing a batch (compressing its records) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompressionError {
    /// The codec was asked for but its cargo feature is off in this build (see
    /// [`Compression::is_supported`]).
    #[error("{0} compression is not compiled in: enable the `{0}` feature of producer-core")]
    Unsupported(Compression),
    /// The codec library reported an error while compressing (in practice only for inputs
    /// beyond the codec's size limits, e.g. more than ~4 GiB for snappy).
    #[error("{codec} compression failed: {source}")]
    Codec {
        /// The codec that failed.
        codec: Compression,
        /// The library's error.
        #[source]
        source: std::io::Error,
    },
    /// The sealed batch would be larger than a batch's int32 Length field can describe. Callers
    /// that keep batches under `max.request.size` (checking [`super::BatchBuilder::record_size`]
    /// before appending) never see this.
    #[error("record batch of {size} bytes is too large for the int32 batch length field")]
    BatchTooLarge {
        /// Total size of the batch in bytes.
        size: usize,
    },
}

/// Compresses `input` with `codec`, appending the compressed stream to `out` (what is already in
/// `out` is kept, so a caller can reserve room for a header first). [`Compression::None`] copies
/// `input` as is.
pub fn compress_into(
    codec: Compression,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    match codec {
        Compression::None => {
            out.extend_from_slice(input);
            Ok(())
        }
        Compression::Gzip => gzip(input, out),
        Compression::Snappy => snappy(input, out),
        Compression::Lz4 => lz4(input, out),
        Compression::Zstd => zstd(input, out),
    }
}

#[cfg(any(
    feature = "gzip",
    feature = "snappy",
    feature = "lz4",
    feature = "zstd"
))]
fn codec_error(
    codec: Compression,
    e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> CompressionError {
    CompressionError::Codec {
        codec,
        source: std::io::Error::other(e),
    }
}

#[cfg(feature = "gzip")]
fn gzip(input: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    enc.write_all(input)
        .and_then(|()| enc.try_finish())
        .map_err(|e| codec_error(Compression::Gzip, e))
}

#[cfg(not(feature = "gzip"))]
fn gzip(_input: &[u8], _out: &mut Vec<u8>) -> Result<(), CompressionError> {
    Err(CompressionError::Unsupported(Compression::Gzip))
}

#[cfg(feature = "snappy")]
fn snappy(input: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
    let start = out.len();
    let max = snap::raw::max_compress_len(input.len());
    if max == 0 && !input.is_empty() {
        return Err(codec_error(
            Compression::Snappy,
            format!(
                "input of {} bytes is too large for one snappy block",
                input.len()
            ),
        ));
    }
    out.resize(start + max, 0);
    match snap::raw::Encoder::new().compress(input, &mut out[start..]) {
        Ok(n) => {
            out.truncate(start + n);
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(codec_error(Compression::Snappy, e))
        }
    }
}

#[cfg(not(feature = "snappy"))]
fn snappy(_input: &[u8], _out: &mut Vec<u8>) -> Result<(), CompressionError> {
    Err(CompressionError::Unsupported(Compression::Snappy))
}

/// LZ4 frame header for Kafka batches: magic, FLG (version 01, independent blocks, no
/// checksums, no content size), BD (64 KiB blocks), HC (second byte of xxh32 over FLG and BD;
/// a constant since both are; the tests check it against lz4_flex's own frame encoder).
#[cfg(feature = "lz4")]
const LZ4_FRAME_HEADER: [u8; 7] = [0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82];

/// Largest LZ4 block of the frame (BD 64 KiB).
#[cfg(feature = "lz4")]
const LZ4_BLOCK: usize = 64 << 10;

/// Writes the LZ4 frame straight into `out` with the block compressor: no intermediate
/// buffers (the frame encoder would copy the input in and the output out). Blocks that do not
/// shrink are stored raw (size with the high bit set), as the frame format allows.
#[cfg(feature = "lz4")]
fn lz4(input: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
    out.extend_from_slice(&LZ4_FRAME_HEADER);
    for block in input.chunks(LZ4_BLOCK) {
        let size_at = out.len();
        let data_at = size_at + 4;
        out.resize(
            data_at + lz4_flex::block::get_maximum_output_size(block.len()),
            0,
        );
        let n = lz4_flex::block::compress_into(block, &mut out[data_at..])
            .map_err(|e| codec_error(Compression::Lz4, e))?;
        let size = if n < block.len() {
            out.truncate(data_at + n);
            n as u32
        } else {
            out.truncate(data_at);
            out.extend_from_slice(block);
            block.len() as u32 | 0x8000_0000
        };
        out[size_at..data_at].copy_from_slice(&size.to_le_bytes());
    }
    out.extend_from_slice(&[0; 4]); // EndMark
    Ok(())
}

#[cfg(not(feature = "lz4"))]
fn lz4(_input: &[u8], _out: &mut Vec<u8>) -> Result<(), CompressionError> {
    Err(CompressionError::Unsupported(Compression::Lz4))
}

/// zstd level used for batches (Kafka's and zstd's default).
#[cfg(feature = "zstd")]
const ZSTD_LEVEL: i32 = 3;

#[cfg(feature = "zstd")]
thread_local! {
    /// This thread's zstd context and the buffer it compresses into, kept from one batch to
    /// the next: setting a context up (its tables for level 3) costs more than compressing a
    /// 16 KiB batch with it.
    static ZSTD_CONTEXT: std::cell::RefCell<Option<(zstd::bulk::Compressor<'static>, Vec<u8>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Appends one zstd frame of `input` to `out`, with this thread's reused context (a fresh
/// one if the thread-local is gone, as in a thread-local's destructor).
#[cfg(feature = "zstd")]
fn zstd(input: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
    let error = |e| codec_error(Compression::Zstd, e);
    let reused = ZSTD_CONTEXT.try_with(|cell| -> std::io::Result<()> {
        let mut context = cell.borrow_mut();
        let (compressor, frame) = match context.as_mut() {
            Some(c) => c,
            None => context.insert((zstd::bulk::Compressor::new(ZSTD_LEVEL)?, Vec::new())),
        };
        // The bulk compressor writes a buffer from its start: into `frame`, then after what
        // `out` holds.
        frame.clear();
        frame.reserve(zstd::zstd_safe::compress_bound(input.len()));
        compressor.compress_to_buffer(input, frame)?;
        out.extend_from_slice(frame);
        Ok(())
    });
    match reused {
        Ok(result) => result.map_err(error),
        Err(_) => {
            out.extend_from_slice(&zstd::bulk::compress(input, ZSTD_LEVEL).map_err(error)?);
            Ok(())
        }
    }
}

#[cfg(not(feature = "zstd"))]
fn zstd(_input: &[u8], _out: &mut Vec<u8>) -> Result<(), CompressionError> {
    Err(CompressionError::Unsupported(Compression::Zstd))
}

/// Decompresses the records section of a batch this crate compressed with `codec`, expecting
/// exactly `expected` bytes out (the batch's uncompressed records size, known from sealing).
/// Used only when a batch's records must come back out: to hand them to the caller with a
/// failure, or to re-encode them in smaller batches. Never produces more than `expected` bytes.
pub(crate) fn decompress(
    codec: Compression,
    input: &[u8],
    expected: usize,
) -> Result<Vec<u8>, CompressionError> {
    let out = match codec {
        Compression::None => input.to_vec(),
        Compression::Gzip => gunzip(input, expected)?,
        Compression::Snappy => unsnappy(input, expected)?,
        Compression::Lz4 => unlz4(input, expected)?,
        Compression::Zstd => unzstd(input, expected)?,
    };
    if out.len() != expected {
        return Err(CompressionError::Codec {
            codec,
            source: std::io::Error::other(format!(
                "decompressed {} bytes, expected {expected}",
                out.len()
            )),
        });
    }
    Ok(out)
}

/// Reads at most `expected + 1` bytes from a decoder (one more than expected shows a mismatch
/// without reading an unbounded stream).
#[cfg(any(feature = "gzip", feature = "lz4"))]
fn read_bounded(
    codec: Compression,
    decoder: impl std::io::Read,
    expected: usize,
) -> Result<Vec<u8>, CompressionError> {
    use std::io::Read;
    let mut out = Vec::with_capacity(expected);
    decoder
        .take(expected as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| codec_error(codec, e))?;
    Ok(out)
}

#[cfg(feature = "gzip")]
fn gunzip(input: &[u8], expected: usize) -> Result<Vec<u8>, CompressionError> {
    read_bounded(
        Compression::Gzip,
        flate2::read::GzDecoder::new(input),
        expected,
    )
}

#[cfg(not(feature = "gzip"))]
fn gunzip(_input: &[u8], _expected: usize) -> Result<Vec<u8>, CompressionError> {
    Err(CompressionError::Unsupported(Compression::Gzip))
}

#[cfg(feature = "snappy")]
fn unsnappy(input: &[u8], expected: usize) -> Result<Vec<u8>, CompressionError> {
    let len = snap::raw::decompress_len(input).map_err(|e| codec_error(Compression::Snappy, e))?;
    if len != expected {
        return Err(codec_error(
            Compression::Snappy,
            format!("block of {len} bytes, expected {expected}"),
        ));
    }
    snap::raw::Decoder::new()
        .decompress_vec(input)
        .map_err(|e| codec_error(Compression::Snappy, e))
}

#[cfg(not(feature = "snappy"))]
fn unsnappy(_input: &[u8], _expected: usize) -> Result<Vec<u8>, CompressionError> {
    Err(CompressionError::Unsupported(Compression::Snappy))
}

#[cfg(feature = "lz4")]
fn unlz4(input: &[u8], expected: usize) -> Result<Vec<u8>, CompressionError> {
    read_bounded(
        Compression::Lz4,
        lz4_flex::frame::FrameDecoder::new(input),
        expected,
    )
}

#[cfg(not(feature = "lz4"))]
fn unlz4(_input: &[u8], _expected: usize) -> Result<Vec<u8>, CompressionError> {
    Err(CompressionError::Unsupported(Compression::Lz4))
}

#[cfg(feature = "zstd")]
fn unzstd(input: &[u8], expected: usize) -> Result<Vec<u8>, CompressionError> {
    zstd::bulk::decompress(input, expected).map_err(|e| codec_error(Compression::Zstd, e))
}

#[cfg(not(feature = "zstd"))]
fn unzstd(_input: &[u8], _expected: usize) -> Result<Vec<u8>, CompressionError> {
    Err(CompressionError::Unsupported(Compression::Zstd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_bits_match_kafka() {
        let bits: Vec<i16> = Compression::ALL
            .iter()
            .map(|c| c.attribute_bits())
            .collect();
        assert_eq!(bits, [0, 1, 2, 3, 4]);
        assert_eq!(Compression::default(), Compression::None);
        assert_eq!(Compression::Lz4.to_string(), "lz4");
    }

    #[test]
    fn none_copies_and_keeps_prefix() {
        let mut out = vec![9, 9];
        compress_into(Compression::None, b"abc", &mut out).unwrap();
        assert_eq!(out, b"\x09\x09abc");
    }

    #[test]
    fn unsupported_codecs_give_typed_error() {
        for c in Compression::ALL {
            let mut out = vec![1, 2, 3];
            let res = compress_into(c, b"hello hello hello", &mut out);
            if c.is_supported() {
                assert!(res.is_ok(), "{c}: {res:?}");
                assert_eq!(&out[..3], &[1, 2, 3], "{c}: prefix kept");
                assert!(out.len() > 3, "{c}: wrote something");
            } else {
                assert!(
                    matches!(res, Err(CompressionError::Unsupported(x)) if x == c),
                    "{c}: {res:?}"
                );
            }
        }
    }

    #[cfg(feature = "snappy")]
    #[test]
    fn snappy_is_a_raw_block_not_xerial() {
        let input = b"snappy snappy snappy snappy snappy".repeat(10);
        let mut out = Vec::new();
        compress_into(Compression::Snappy, &input, &mut out).unwrap();
        assert_ne!(&out[..8], b"\x82SNAPPY\x00");
        // A raw block starts with the uncompressed length as an unsigned varint.
        assert!(out[0] & 0x80 != 0 && out[1] & 0x80 == 0);
        assert_eq!(
            (out[0] as usize & 0x7f) | ((out[1] as usize) << 7),
            input.len()
        );
        let back = snap::raw::Decoder::new().decompress_vec(&out).unwrap();
        assert_eq!(back, input);
    }

    #[cfg(feature = "lz4")]
    #[test]
    fn lz4_is_a_frame_with_64k_independent_blocks() {
        let input = vec![7u8; 200_000];
        let mut out = Vec::new();
        compress_into(Compression::Lz4, &input, &mut out).unwrap();
        // Frame magic 0x184D2204, little-endian.
        assert_eq!(&out[..4], &[0x04, 0x22, 0x4d, 0x18]);
        // FLG: version 01, block independence set, no block/content checksum, no content size.
        assert_eq!(out[4], 0b0110_0000);
        // BD: block max size 64 KiB (code 4).
        assert_eq!(out[5], 4 << 4);
    }

    #[cfg(feature = "gzip")]
    #[test]
    fn gzip_writes_a_gzip_member() {
        let mut out = Vec::new();
        compress_into(Compression::Gzip, b"gzip gzip gzip", &mut out).unwrap();
        assert_eq!(&out[..3], &[0x1f, 0x8b, 0x08]);
    }

    #[cfg(feature = "zstd")]
    #[test]
    fn zstd_writes_a_zstd_frame() {
        let mut out = Vec::new();
        compress_into(Compression::Zstd, b"zstd zstd zstd", &mut out).unwrap();
        assert_eq!(&out[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
    }

    #[test]
    fn decompress_inverts_every_supported_codec() {
        let input = b"abcdefgh abcdefgh 0123456789 records records".repeat(300);
        for c in Compression::ALL.into_iter().filter(|c| c.is_supported()) {
            let mut out = Vec::new();
            compress_into(c, &input, &mut out).unwrap();
            assert_eq!(decompress(c, &out, input.len()).unwrap(), input, "{c}");
            // A wrong expected size is an error, never a longer output.
            assert!(
                decompress(c, &out, input.len() - 1).is_err(),
                "{c}: shorter"
            );
            assert!(decompress(c, &out, input.len() + 1).is_err(), "{c}: longer");
        }
    }

    #[cfg(feature = "lz4")]
    #[test]
    fn lz4_frame_matches_the_frame_encoder_and_decodes() {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameDecoder, FrameEncoder, FrameInfo};
        use std::io::{Read, Write};
        // Incompressible and compressible blocks, an exact 64 KiB block, and empty input.
        let mut noise = vec![0u8; 70_000];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for b in noise.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let text = b"record record value key header ".repeat(5000);
        for input in [noise, text, vec![7u8; 65_536], Vec::new()] {
            let mut ours = Vec::new();
            compress_into(Compression::Lz4, &input, &mut ours).unwrap();
            let info = FrameInfo::new()
                .block_size(BlockSize::Max64KB)
                .block_mode(BlockMode::Independent);
            let mut enc = FrameEncoder::with_frame_info(info, Vec::new());
            enc.write_all(&input).unwrap();
            let theirs = enc.finish().unwrap();
            assert_eq!(&ours[..7], &theirs[..7], "frame header");
            let mut back = Vec::new();
            FrameDecoder::new(&ours[..]).read_to_end(&mut back).unwrap();
            assert_eq!(back, input);
        }
    }
}
