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
