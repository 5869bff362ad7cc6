//! A custom partitioner: records keyed by region (`eu-…`, `us-…`, `ap-…`) go to their region's
//! partitions (two per region, the key's hash choosing between them); records without a
//! region go to the producer's adaptive sticky partition. Then the records are read back with
//! an independent consumer and counted per partition.
//!
//! ```text
//! cargo run --example custom_partitioner
//! ```
//!
//! It starts librdkafka's mock cluster (three brokers) in this process with the topic `orders`
//! of 6 partitions, asks for the topic's partitions first (`partitions_for`: the count and each
//! partition's leader), sends 3,000 records through the tokio driver with the partitioner set
//! on the builder, and prints how many records each partition got, by the delivery reports and
//! by the read-back, which must agree.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use producer_core::partitioner::murmur2;
use producer_core::{PartitionView, Partitioner, PartitionerError, Route};
use producer_tokio::{Config, ProducerHandle, Record};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const RECORDS: u64 = 3_000;
const REGIONS: [&str; 3] = ["eu", "us", "ap"];

/// Region `r` (its index in [`REGIONS`]) owns partitions `2r` and `2r + 1`; the key's murmur2
/// hash picks one of the two. Keys without a known region prefix, and records without a key,
/// take the sticky partition.
struct ByRegion;

impl Partitioner for ByRegion {
    fn partition(
        &mut self,
        _topic: &str,
        key: Option<&[u8]>,
        _value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        if partitions.count() < 2 * REGIONS.len() as u32 {
            return Err(PartitionerError::Failed(format!(
                "ByRegion needs {} partitions, the topic has {}",
                2 * REGIONS.len(),
                partitions.count()
            )));
        }
        let Some(key) = key else {
            return Ok(Route::Sticky);
        };
        let region = REGIONS
            .iter()
            .position(|r| key.starts_with(r.as_bytes()) && key.get(2) == Some(&b'-'));
        Ok(match region {
            Some(r) => {
                let half = (murmur2(key) & 1) as u32;
                Route::Partition(2 * r as u32 + half)
            }
            None => Route::Sticky,
        })
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("custom_partitioner: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mock = producer_tests::MockKafka::new(3, &[(TOPIC, PARTITIONS)])?;
    let config = Config::builder(mock.bootstrap()).build()?;
    let rt = tokio::runtime::Runtime::new()?;
    let by_report = rt.block_on(async {
        let producer = ProducerHandle::builder(config)
            .partitioner(Box::new(ByRegion))
            .start()?;
        let parts = producer.partitions_for(TOPIC).await?;
        println!(
            "{TOPIC}: {} partitions, leaders by partition {:?}",
            parts.count(),
            parts.leaders()
        );
        let mut futures = Vec::new();
        for i in 0..RECORDS {
            let record = Record::new(TOPIC, format!("order-{i}"));
            // One record in ten has no region: it goes to the sticky partition.
            let record = match i % 10 {
                9 => record,
                n => record.with_key(format!("{}-customer-{i}", REGIONS[n as usize % 3])),
            };
            futures.push(producer.send(record).await?);
        }
        producer.flush().await;
        let mut counts: BTreeMap<i32, u64> = BTreeMap::new();
        for f in futures {
            let m = f.await?;
            *counts.entry(m.partition).or_default() += 1;
        }
        producer.close().await;
        Ok::<_, Box<dyn std::error::Error>>(counts)
    })?;
    let read = producer_tests::read_back_all(
        &mock.bootstrap_servers(),
        TOPIC,
        PARTITIONS,
        Duration::from_secs(30),
    );
    let mut by_readback: BTreeMap<i32, u64> = BTreeMap::new();
    for r in &read {
        *by_readback.entry(r.partition).or_default() += 1;
    }
    println!("partition  reported  read back");
    for p in 0..PARTITIONS {
        println!(
            "{p:>9}  {:>8}  {:>9}",
            by_report.get(&p).copied().unwrap_or(0),
            by_readback.get(&p).copied().unwrap_or(0)
        );
    }
    if by_report != by_readback || read.len() as u64 != RECORDS {
        return Err(format!(
            "the read-back ({} records) does not match the reports",
            read.len()
        )
        .into());
    }
    println!("{RECORDS} records, every one read back where the partitioner put it");
    Ok(())
}
