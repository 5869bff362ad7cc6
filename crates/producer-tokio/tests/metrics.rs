//! The tokio driver's metrics against librdkafka's mock cluster: `ProducerHandle::metrics`
//! answers from the producer task while it runs, and with the task's last snapshot after it
//! stopped.

mod support;

use producer_core::metrics::ConnectionState;
use producer_tokio::{ProducerHandle, Record};

use support::*;

#[tokio::test(flavor = "current_thread")]
async fn handle_metrics_count_the_run() {
    const N: usize = 2_000;
    let mock = cluster();
    let handle = ProducerHandle::start(builder(&mock).build().unwrap()).unwrap();
    assert_eq!(handle.metrics().await.counters.records_delivered, 0);
    let mut futures = Vec::new();
    for i in 0..N {
        let r = Record::new(TOPIC, format!("value-{i}")).with_key(format!("k{}", i % 13));
        futures.push(handle.send(r).await.unwrap());
    }
    handle.flush().await;
    for f in futures {
        f.await.expect("delivered");
    }
    let m = handle.metrics().await;
    let c = &m.counters;
    assert_eq!(c.records_delivered, N as u64);
    assert_eq!(c.records_failed, 0);
    assert!(c.records_sent >= N as u64 && c.bytes_sent > 0);
    assert!(c.produce_requests > 0 && c.batches_sent >= c.produce_requests);
    assert_eq!(m.request_latency.count(), c.produce_requests);
    assert_eq!(m.delivery_latency.count(), N as u64);
    assert_eq!((m.buffered_records, m.buffered_bytes), (0, 0));
    assert!(m.producer_id.is_some(), "idempotent by default");
    assert!(m.brokers.iter().any(|b| b.state == ConnectionState::Ready));

    handle.close().await;
    let last = handle.metrics().await;
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
