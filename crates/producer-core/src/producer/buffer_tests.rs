//! What open batches hold with many partitions: their buffers grow with their records, so
//! thousands of partitions with a record or two each cost what those records take.

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use bytes::Bytes;

    use crate::batch::Pending;
    use crate::buffer::BufferPool;
    use crate::config::Config;
    use crate::types::Record;

    use super::super::Producer;

    const TOPIC: &str = "t";
    const PARTITIONS: usize = 10_000;

    /// Keyed records over 10,000 partitions with the default `batch_size` (16 KiB) and a linger
    /// that never ends: every partition's batch stays open. What the open batches' buffers and
    /// report lists hold is at most twice what their records and headers use plus a small amount
    /// per partition, where reserving `batch_size` per open batch would take 160 MiB.
    #[test]
    fn open_batches_over_10000_partitions_hold_what_their_records_use() {
        let config = Config::builder([("k", 9092)])
            .linger(Duration::from_secs(3600))
            // Nothing is ever sent: no drain to limit the queue by.
            .queue_delay_target(Duration::ZERO)
            .seed(3)
            .build()
            .unwrap();
        let batch_size = config.batch_size;
        let budget = config.buffer_memory / 16;
        let t0 = Instant::now();
        let mut p: Producer<u64> = Producer::new(config, t0);
        let (id, _) = p.topics.id_of(&Arc::from(TOPIC), t0);
        let t = p.topics.get_mut(id);
        t.grow_partitions(PARTITIONS);
        t.known = true;
        for pq in t.partitions.iter_mut() {
            pq.set_leader(1, 0);
        }
        let value = Bytes::from(vec![b'v'; 100]);
        for i in 0..50_000u64 {
            let record = Record {
                topic: Arc::from(TOPIC),
                partition: None,
                key: Some(Bytes::from(format!("key-{i}"))),
                value: Some(value.clone()),
                headers: Vec::new(),
                timestamp: Some(1),
            };
            p.send(t0, record, i).unwrap();
        }
        let open: Vec<_> = p
            .topics
            .get(id)
            .partitions
            .iter()
            .filter_map(|pq| pq.open.as_ref())
            .collect();
        assert!(
            open.len() > 9_900,
            "nearly every partition has an open batch: {}",
            open.len()
        );
        let capacity: usize = open.iter().map(|o| o.capacity_bytes()).sum();
        let used: usize = open.iter().map(|o| o.used_bytes()).sum();
        let per_partition = BufferPool::MIN_CAPACITY + 4 * std::mem::size_of::<Pending<u64>>();
        assert!(
            capacity <= budget + 2 * used + open.len() * per_partition,
            "open batches hold {capacity} bytes for {used} used"
        );
        assert!(
            capacity < open.len() * batch_size / 8,
            "{capacity} bytes: far below batch_size per open batch"
        );
        println!(
            "{} open batches: {capacity} bytes held for {used} used ({} per batch)",
            open.len(),
            capacity / open.len()
        );
    }
}
