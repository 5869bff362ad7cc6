//! The producer's hot path: appending records to a batch, sealing and stamping it.
//!
//! ~16 KiB batches of 100-byte values with null keys, no compression (about 140 records), against
//! a floor: copying the same record bytes into a Vec and computing CRC-32C over them.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use producer_core::record::{BatchBuilder, Compression, RECORD_BATCH_OVERHEAD};

const VALUE_LEN: usize = 100;
const BATCH_BYTES: usize = 16 * 1024;

fn records_per_batch() -> usize {
    let per_record = BatchBuilder::record_size(100, 0, None, Some(&[0; VALUE_LEN]), &[]);
    (BATCH_BYTES - RECORD_BATCH_OVERHEAD) / per_record
}

fn bench(c: &mut Criterion) {
    let n = records_per_batch();
    let value = [0x5au8; VALUE_LEN];
    let ts0 = 1_700_000_000_000i64;

    // The exact bytes the encoder produces, for the floor.
    let reference = {
        let mut b = BatchBuilder::with_capacity(BATCH_BYTES);
        for i in 0..n {
            b.append(ts0 + i as i64, None, Some(&value), &[]);
        }
        let mut s = b.seal(Compression::None).unwrap();
        s.stamp(1, 0, 0);
        s.into_buffer()
    };

    let mut g = c.benchmark_group("batch_encode");
    g.throughput(Throughput::Elements(n as u64));

    // append x N + seal + stamp, reusing the buffer of the previous batch (as a producer does).
    g.bench_function(format!("append_seal_stamp/{n}x{VALUE_LEN}B"), |bench| {
        let mut spare = Vec::with_capacity(BATCH_BYTES);
        bench.iter(|| {
            let mut b = BatchBuilder::with_buffer(std::mem::take(&mut spare));
            for i in 0..n {
                b.append(ts0 + i as i64, None, Some(black_box(&value)), &[]);
            }
            let mut s = b.seal(Compression::None).unwrap();
            s.stamp(1, 0, black_box(0));
            black_box(s.as_bytes());
            spare = s.into_buffer();
        })
    });

    // Same, with a fresh Vec per batch (allocation included).
    g.bench_function(
        format!("append_seal_stamp_alloc/{n}x{VALUE_LEN}B"),
        |bench| {
            bench.iter(|| {
                let mut b = BatchBuilder::with_capacity(BATCH_BYTES);
                for i in 0..n {
                    b.append(ts0 + i as i64, None, Some(black_box(&value)), &[]);
                }
                let mut s = b.seal(Compression::None).unwrap();
                s.stamp(1, 0, black_box(0));
                black_box(s.as_bytes());
                s
            })
        },
    );

    // Floor: memcpy of the finished bytes into a reused Vec + CRC-32C over [21..].
    g.bench_function(format!("floor_copy_crc/{n}x{VALUE_LEN}B"), |bench| {
        let mut dst: Vec<u8> = Vec::with_capacity(BATCH_BYTES);
        bench.iter(|| {
            dst.clear();
            dst.extend_from_slice(black_box(&reference));
            black_box(crc32c::crc32c(&dst[21..]))
        })
    });

    // Re-stamp alone (epoch bump): 14 bytes + CRC.
    g.bench_function(format!("restamp/{n}x{VALUE_LEN}B"), |bench| {
        let mut b = BatchBuilder::with_capacity(BATCH_BYTES);
        for i in 0..n {
            b.append(ts0 + i as i64, None, Some(&value), &[]);
        }
        let s = b.seal(Compression::None).unwrap();
        bench.iter_batched_ref(
            || s.clone(),
            |s| s.stamp(1, black_box(1), 0),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
