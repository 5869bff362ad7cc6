//! The threaded mio producer's metrics against librdkafka's mock cluster: the snapshot comes
//! from the producer thread while it runs, and the thread's last one after it stopped.

mod support;

use std::sync::{mpsc, Arc, Mutex, OnceLock};

use producer_core::metrics::ConnectionState;
use producer_core::{Config, Delivery, Record};
use producer_mio::ThreadedProducer;

use support::{record, with_hang_guard, Cluster, Reports, HANG_GUARD};

#[test]
fn threaded_producer_metrics_count_the_run() {
    with_hang_guard(run);
}

fn run() {
    const N: usize = 3_000;
    let topic = "metrics";
    let cluster = Cluster::start(topic);
    let config = Config::builder(cluster.servers(false)).build().unwrap();
    let records: Vec<Record> = (0..N).map(|i| record(topic, i)).collect();
    let (tx, rx) = mpsc::channel::<Delivery<usize>>();
    // The callback asks for metrics too: on the producer thread that answers None at once
    // (waiting for the thread would deadlock it).
    let from_callback: Arc<OnceLock<ThreadedProducer<usize>>> = Arc::default();
    let answers = Arc::new(Mutex::new(Vec::new()));
    let (slot, seen) = (from_callback.clone(), answers.clone());
    let producer = ThreadedProducer::<usize>::spawn(config, 8192, move |d| {
        if let Some(p) = slot.get() {
            seen.lock().unwrap().push(p.metrics().is_none());
        }
        let _ = tx.send(d);
    })
    .unwrap();
    from_callback.set(producer.clone()).unwrap();
    let before = producer
        .metrics()
        .expect("a snapshot from outside the callback");
    assert_eq!(before.counters.records_delivered, 0);
    for (i, r) in records.into_iter().enumerate() {
        producer
            .send_with(r, i)
            .expect("the queue holds every record");
    }
    producer.flush();
    let mut reports = Reports::new(N);
    for _ in 0..N {
        reports.take(rx.recv_timeout(HANG_GUARD).expect("a report"));
    }
    assert!(reports.all().len() == N);
    let answers = answers.lock().unwrap().clone();
    assert_eq!(answers.len(), N, "the callback asked once per report");
    assert!(answers.iter().all(|&none| none), "None from the callback");

    let m = producer.metrics().expect("a snapshot");
    let c = &m.counters;
    assert_eq!(c.records_delivered, N as u64);
    assert_eq!(c.records_failed, 0);
    assert!(c.records_sent >= N as u64 && c.bytes_sent > 0);
    assert!(c.produce_requests > 0 && c.batches_sent >= c.produce_requests);
    // Flushed: every request was answered, each answer is in the latency histogram.
    assert_eq!(m.request_latency.count(), c.produce_requests);
    assert_eq!(m.delivery_latency.count(), N as u64);
    assert_eq!(m.batch_size.count(), c.batches_sent - c.retries);
    assert_eq!((m.buffered_records, m.buffered_bytes), (0, 0));
    assert!(m.producer_id.is_some(), "idempotent by default");
    assert!(m.brokers.iter().any(|b| b.state == ConnectionState::Ready));
    assert!(m.brokers.iter().all(|b| b.in_flight_requests == 0));
    let mut text = String::new();
    m.render_prometheus(&mut text);
    assert!(text.contains(&format!("kafka_producer_records_delivered_total {N}\n")));

    producer.close();
    let last = producer.metrics().expect("the thread's last snapshot");
    assert_eq!(last.counters.records_delivered, N as u64);
    assert_eq!(last.counters.produce_requests, c.produce_requests);
    assert!(
        last.brokers
            .iter()
            .all(|b| b.state != ConnectionState::Ready),
        "closed: no connection left: {:?}",
        last.brokers
    );
}
