//! Splitting a batch the broker found too large (MESSAGE_TOO_LARGE): its records are decoded
//! back out of the batch and re-encoded as two halves that keep its place, its order and its
//! sequence range.

use crate::batch::{charged_size, Batch, Pending};
use crate::partition::next_sequence;
use crate::record::{BatchBuilder, Compression, CompressionError, DecodedRecord, SealedBatch};
use crate::types::ProduceError;

use super::Producer;

impl<T> Producer<T> {
    /// Splits the sent batch at `i` into two, in place. If its records cannot be re-encoded
    /// (not expected: this producer encoded them once), they fail instead, and with idempotence
    /// the hole they leave in the sequence is reset.
    pub(in crate::producer) fn split(&mut self, t: u32, p: u32, i: usize) {
        let compression = self.config.compression;
        let idem = self.idempotent();
        let pq = self.topics.partition_mut(t, p);
        let Some(old) = pq.take_sent(i) else {
            return;
        };
        let origin = old.split_origin();
        let (sealed, mut first_pending, charged) = old.into_split_parts();
        let mid = first_pending.len() / 2;
        let decoded = sealed.into_records().map_err(|e| e.to_string());
        // Both halves re-encoded, or the reason (then every record fails with what was decoded).
        let halves = match &decoded {
            Ok(d) if d.len() == first_pending.len() => encode_half::<T>(&d[..mid], compression)
                .and_then(|a| Ok([a, encode_half::<T>(&d[mid..], compression)?]))
                .map_err(|e| ProduceError::Compression(e.to_string())),
            Ok(d) => Err(ProduceError::BatchDecode(format!(
                "{} records decoded for {}",
                d.len(),
                first_pending.len()
            ))),
            Err(e) => Err(ProduceError::BatchDecode(e.clone())),
        };
        let second_pending = first_pending.split_off(mid);
        let halves = match halves {
            Ok(halves) => halves,
            Err(error) => {
                // The batch had been sent: its sequence range is now a hole.
                if idem {
                    self.topics.partition_mut(t, p).request_reset(None);
                }
                first_pending.extend(second_pending);
                let records = crate::batch::Unreported {
                    records: first_pending,
                    decoded,
                    charged,
                };
                self.fail_records(t, p as i32, records, error);
                return;
            }
        };
        debug_assert_eq!(
            halves[0].1 + halves[1].1,
            charged,
            "a split re-charges its records"
        );
        let transactional = self.txn.is_some();
        let pq = self.topics.partition_mut(t, p);
        let (pid, epoch) = pq.identity();
        let mut seq = origin.base_sequence.filter(|_| idem);
        let pendings: [Vec<Pending<T>>; 2] = [first_pending, second_pending];
        let [(sealed_a, charged_a), (sealed_b, charged_b)] = halves;
        let [records_a, records_b] = pendings;
        let mut make = |mut sealed: SealedBatch, records: Vec<Pending<T>>, charged: usize| {
            sealed.set_transactional(transactional);
            let stamp = seq.map(|s| (pid, epoch, s));
            seq = seq.map(|s| next_sequence(s, records.len() as i32));
            let id = pq.take_batch_id();
            Batch::half_of(&origin, id, sealed, records, charged, stamp)
        };
        let a = make(sealed_a, records_a, charged_a);
        let b = make(sealed_b, records_b, charged_b);
        pq.insert_halves(i, [a, b]);
    }
}

/// Encodes decoded records as a new batch; returns it with the buffer space its records count,
/// or why sealing (compressing) failed.
fn encode_half<T>(
    records: &[DecodedRecord],
    compression: Compression,
) -> Result<(SealedBatch, usize), CompressionError> {
    let mut builder = BatchBuilder::new();
    let mut charged = 0;
    for r in records {
        let (k, v) = (r.key.as_deref(), r.value.as_deref());
        let payload = BatchBuilder::payload_size(k, v, &r.headers);
        charged += charged_size::<T>(BatchBuilder::record_size_with_payload(0, 0, payload));
        builder.append(r.timestamp, k, v, &r.headers);
    }
    Ok((builder.seal(compression)?, charged))
}
