//! The threaded mio producer's metrics from the delivery callback: on the producer thread
//! `metrics` answers `None` at once (waiting for the thread would deadlock it). What the
//! snapshot counts is the shared suite's (`driver_suite::metrics`).

mod support;

use std::sync::{mpsc, Arc, Mutex, OnceLock};

use producer_core::{Config, Delivery, Record};
use producer_mio::ThreadedProducer;

use support::{record, with_hang_guard, Cluster, Reports, HANG_GUARD};

#[test]
fn metrics_from_the_delivery_callback_answer_none() {
    with_hang_guard(run);
}

fn run() {
    const N: usize = 500;
    let topic = "metrics";
    let cluster = Cluster::start(topic);
    let config = Config::builder(cluster.servers(false)).build().unwrap();
    let records: Vec<Record> = (0..N).map(|i| record(topic, i)).collect();
    let (tx, rx) = mpsc::channel::<Delivery<usize>>();
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
    assert!(
        producer.metrics().is_some(),
        "a snapshot from outside the callback"
    );
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
    producer.close();
    assert!(producer.metrics().is_some(), "the thread's last snapshot");
}
