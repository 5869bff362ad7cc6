//! A consume-transform-produce pipeline with exactly-once output: read an input topic,
//! transform each record, write it to an output topic, and commit the input offsets in the
//! same transaction as the output (producer-tokio's transactional API).
//!
//! ```text
//! cargo run --release --example transactional_pipeline                        # embedded mock cluster
//! cargo run --release --example transactional_pipeline -- --brokers host:9092  # a real cluster
//! ```
//!
//! With no `--brokers` it starts librdkafka's mock cluster (three brokers), fills the input
//! topic with `--records` records, and runs the pipeline over them. With `--brokers` the input
//! topic (`--input`) is read as it is (from the group's committed offsets, which the pipeline's
//! transactions move) and the output topic (`--output`) must exist or be auto-created. Each
//! transaction carries up to `--per-transaction` records. At the end the output is read back with
//! `isolation.level=read_committed` and counted.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use producer_core::{Config, ConsumerGroupMetadata, OffsetToCommit, Record, TransactionError};
use producer_tokio::ProducerHandle;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer as _, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

#[derive(Parser)]
struct Args {
    /// Bootstrap servers; none: an embedded mock cluster.
    #[arg(long)]
    brokers: Option<String>,
    #[arg(long, default_value = "pipeline-in")]
    input: String,
    #[arg(long, default_value = "pipeline-out")]
    output: String,
    /// Partitions of the input topic.
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    /// Records to put in the input topic (mock cluster only).
    #[arg(long, default_value_t = 10_000)]
    records: usize,
    #[arg(long, default_value_t = 500)]
    per_transaction: usize,
    #[arg(long, default_value = "pipeline-1")]
    transactional_id: String,
    #[arg(long, default_value = "pipeline")]
    group: String,
}

fn consumer(brokers: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .create()
        .expect("a consumer")
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let mock = match &args.brokers {
        Some(_) => None,
        None => Some(rdkafka::mocking::MockCluster::new(3).expect("the mock cluster")),
    };
    let brokers = match (&args.brokers, &mock) {
        (Some(b), _) => b.clone(),
        (None, Some(m)) => {
            m.create_topic(&args.input, args.partitions, 1).unwrap();
            m.create_topic(&args.output, args.partitions, 1).unwrap();
            m.bootstrap_servers()
        }
        (None, None) => unreachable!(),
    };
    if mock.is_some() {
        let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .create()
            .unwrap();
        for i in 0..args.records {
            let key = format!("k{}", i % 97);
            let value = format!("input-{i}");
            p.send(BaseRecord::to(&args.input).key(&key).payload(&value))
                .map_err(|(e, _)| e)
                .unwrap();
        }
        p.flush(Duration::from_secs(30)).unwrap();
    }

    let config = Config::from_properties([
        ("bootstrap.servers", brokers.as_str()),
        ("transactional.id", args.transactional_id.as_str()),
    ]);
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            eprintln!("config: {e}");
            return ExitCode::FAILURE;
        }
    };
    let producer = ProducerHandle::start(config).expect("the producer");
    // Some: the config has a transactional.id.
    let txn = producer.transactions().expect("a transactional producer");
    if let Err(e) = txn.init().await {
        eprintln!("init: {e}");
        return ExitCode::FAILURE;
    }

    // The input, from the group's committed offsets.
    let input = consumer(&brokers, &args.group);
    let mut tpl = TopicPartitionList::new();
    for p in 0..args.partitions {
        tpl.add_partition(&args.input, p);
    }
    let committed = input
        .committed_offsets(tpl, Duration::from_secs(10))
        .expect("committed offsets");
    let mut start = TopicPartitionList::new();
    for p in 0..args.partitions {
        let offset = match committed.find_partition(&args.input, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => Offset::Offset(o),
            _ => Offset::Beginning,
        };
        start.add_partition_offset(&args.input, p, offset).unwrap();
    }
    input.assign(&start).unwrap();

    let (mut transactions, mut written, mut eofs) = (0u64, 0u64, 0);
    while eofs < args.partitions {
        txn.begin().await.unwrap();
        let mut next: HashMap<i32, i64> = HashMap::new();
        let mut deliveries = Vec::new();
        while deliveries.len() < args.per_transaction && eofs < args.partitions {
            match input.poll(Duration::from_millis(500)) {
                Some(Ok(m)) => {
                    let value = m
                        .payload()
                        .map(|v| v.to_ascii_uppercase())
                        .unwrap_or_default();
                    let mut r = Record::new(args.output.as_str(), value);
                    if let Some(k) = m.key() {
                        r = r.with_key(k.to_vec());
                    }
                    deliveries.push(producer.send(r).await.expect("accepted"));
                    next.insert(m.partition(), m.offset() + 1);
                }
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => eofs += 1,
                Some(Err(e)) => eprintln!("consumer: {e}"),
                None => {}
            }
        }
        let offsets = next
            .iter()
            .map(|(&p, &o)| OffsetToCommit::new(args.input.as_str(), p, o))
            .collect();
        let group = ConsumerGroupMetadata::new(args.group.as_str());
        let mut outcome = txn.send_offsets(offsets, group).await;
        if outcome.is_ok() {
            outcome = txn.commit().await;
        }
        match outcome {
            Ok(()) => {
                transactions += 1;
                written += deliveries.len() as u64;
                for d in deliveries {
                    assert!(d.await.is_ok_and(|m| m.committed));
                }
            }
            Err(TransactionError::Abortable { .. } | TransactionError::TimedOut { .. }) => {
                txn.abort().await.unwrap();
                eprintln!("aborted a transaction; its input is read again on the next run");
                break;
            }
            Err(e) => {
                eprintln!("fatal: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    producer.close().await;
    println!("{written} records in {transactions} transactions");

    // The output, read_committed.
    let out = consumer(&brokers, "pipeline-read-back");
    let mut tpl = TopicPartitionList::new();
    for p in 0..args.partitions {
        tpl.add_partition_offset(&args.output, p, Offset::Beginning)
            .unwrap();
    }
    out.assign(&tpl).unwrap();
    let (mut read, mut eofs) = (0u64, 0);
    while eofs < args.partitions {
        match out.poll(Duration::from_secs(5)) {
            Some(Ok(_)) => read += 1,
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => eofs += 1,
            Some(Err(e)) => eprintln!("read-back: {e}"),
            None => break,
        }
    }
    println!("read back {read} committed records from {}", args.output);
    if mock.is_some() && read != args.records as u64 {
        eprintln!("expected {}", args.records);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
