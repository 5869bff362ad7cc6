//! Record batches (magic v2) and their compression.
//!
//! [`BatchBuilder`] is an open batch records are appended to, [`SealedBatch`] the closed,
//! (optionally) compressed batch that is stamped with the producer's identity before each send.
//! Wire format: Kafka's `DefaultRecordBatch` / `DefaultRecord`.

mod batch;
mod compression;
mod decode;
mod header;
mod storage;

pub use batch::{BatchBuilder, SealedBatch};
pub use compression::{compress_into, Compression, CompressionError};
pub(crate) use decode::DecodedRecord;
pub use header::Header;

/// Size of the record batch header (magic v2): records start at this offset.
pub const RECORD_BATCH_OVERHEAD: usize = 61;

/// The paths that read records back out of a batch, for the `record_batch` fuzz target only
/// (see `fuzz/`; compiled under `cargo fuzz`, which sets `--cfg fuzzing`). A record comes out
/// as `(timestamp, key, value, headers)`.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    use bytes::Bytes;

    use super::{BatchBuilder, Compression, Header, SealedBatch};

    /// One record read back: timestamp, key, value, headers.
    pub type Decoded = (i64, Option<Bytes>, Option<Bytes>, Vec<Header>);

    fn out(records: Vec<super::DecodedRecord>) -> Vec<Decoded> {
        records
            .into_iter()
            .map(|r| (r.timestamp, r.key, r.value, r.headers))
            .collect()
    }

    /// Decompresses `input` with `codec`, expecting exactly `expected` bytes, then decodes
    /// `count` records from them with `base_timestamp`, as a failed batch's records are.
    pub fn decode(
        codec: Compression,
        input: &[u8],
        expected: usize,
        count: usize,
        base_timestamp: i64,
    ) -> Result<Vec<Decoded>, String> {
        let records =
            super::compression::decompress(codec, input, expected).map_err(|e| e.to_string())?;
        super::decode::decode_records(Bytes::from(records), count, base_timestamp)
            .map(out)
            .map_err(|e| e.to_string())
    }

    /// The records of a sealed batch, read back as a failure hands them back.
    pub fn unpack(batch: SealedBatch) -> Result<Vec<Decoded>, String> {
        batch.into_records().map(out).map_err(|e| e.to_string())
    }

    /// The records of an open batch, read back as a batch that cannot be sealed hands them
    /// back.
    pub fn unpack_open(builder: BatchBuilder) -> Result<Vec<Decoded>, String> {
        builder.into_records().map(out).map_err(|e| e.to_string())
    }
}
