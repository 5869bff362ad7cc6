//! librdkafka's worker (`rdkafka`, `rdkafka-idem`) through the `rdkafka` crate's
//! `BaseProducer`.

use crate::payloads::Payloads;
use crate::worker::{Counting, Outcome, WorkerArgs};
use crate::{Error, DEFAULT_BATCH_SIZE, WORKER_TIMEOUT};
use std::time::{Duration, Instant};

impl rdkafka::ClientContext for Counting {}

impl rdkafka::producer::ProducerContext for Counting {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        self.count(result.as_ref().map_err(|(e, _)| e));
    }
}

/// librdkafka's settings of the bench (the same as ours where both have them).
pub(crate) fn rdkafka_config(w: &WorkerArgs, idempotence: bool) -> rdkafka::ClientConfig {
    let mut cfg = rdkafka::ClientConfig::new();
    cfg.set("bootstrap.servers", &w.bootstrap)
        .set("acks", "all")
        .set(
            "enable.idempotence",
            if idempotence { "true" } else { "false" },
        )
        .set("compression.codec", w.workload.codec.name());
    if let Some(n) = w.max_request_size {
        // librdkafka's cap on a request (and a record) is message.max.bytes, 1,000,000 by
        // default: below a 1,000,000-byte value with its overheads.
        cfg.set("message.max.bytes", n.to_string());
    }
    if w.defaults {
        // librdkafka's shipped defaults: batch.size 1,000,000, linger.ms 5, its own queue.
        return cfg;
    }
    cfg.set("linger.ms", "5")
        .set("max.in.flight.requests.per.connection", "5")
        .set(
            "queue.buffering.max.kbytes",
            (w.buffer_memory.max(w.max_request_size.unwrap_or(0)) / 1024).to_string(),
        )
        .set(
            "queue.buffering.max.messages",
            // librdkafka's most.
            w.buffer_max_records.min(2_147_483_647).to_string(),
        );
    // 16 KiB as every other producer's unless --batch-size says: the equal settings
    // (librdkafka's own default is 1,000,000 bytes).
    cfg.set(
        "batch.size",
        w.batch_size.unwrap_or(DEFAULT_BATCH_SIZE).to_string(),
    );
    cfg
}

/// Waits until `done` (every report counted): librdkafka's flush without the `rdkafka` crate's
/// waits. Its `BaseProducer::flush` polls in slices of 100 ms and its `poll` runs to the end of
/// its timeout, so the end of a run would be timed to the end of a 100 ms slice; here each
/// round is `rd_kafka_flush` without waiting (it sends what lingers) and a 1 ms `poll`.
pub(crate) fn drain<C: rdkafka::producer::ProducerContext>(
    producer: &rdkafka::producer::BaseProducer<C>,
    done: impl Fn(&C) -> bool,
    started: Instant,
) {
    use rdkafka::producer::Producer;
    while !done(producer.context()) && started.elapsed() < WORKER_TIMEOUT {
        // An error is "not everything delivered yet": the polls below serve the reports.
        let _ = producer.flush(Duration::ZERO);
        producer.poll(Duration::from_millis(1));
    }
}

pub(crate) fn run_rdkafka(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
) -> Result<Outcome, Error> {
    use rdkafka::error::KafkaError;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::types::RDKafkaErrorCode;

    let started = Instant::now();
    let cfg = rdkafka_config(w, idempotence);
    let producer: BaseProducer<Counting> = cfg.create_with_context(Counting::default())?;
    for i in 0..w.records {
        let value = &p.values[p.value_range(i)];
        let key = p.key_range(i).map(|k| &p.keys[k]);
        let mut record = BaseRecord::<[u8], [u8]>::to(p.topic(i)).payload(value);
        if let Some(k) = key {
            record = record.key(k);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(format!("send refused: {e}").into()),
            }
        }
        if i % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    drain(&producer, |c| c.reported() >= w.records, started);
    let secs = started.elapsed().as_secs_f64();
    let outcome = producer.context().outcome(secs);
    drop(producer);
    Ok(outcome)
}
