//! Failure reports keep per-partition send order too, whatever fails the records.

mod support;

use std::time::Duration;

use producer_core::{ProduceError, Record};
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("orders", 1)];

/// A closed batch and the open batch behind it expire at the same instant (they were created
/// together: the first record filled a batch on its own): the closed batch's records are
/// reported first. (The open batch's records used to be reported before the closed batch's.)
#[test]
fn batches_expiring_together_are_reported_in_send_order() {
    let delivery = Duration::from_secs(3);
    let mut h = harness(cluster(1, TOPICS, 21), |b| {
        b.batch_size(1024)
            .request_timeout(Duration::from_secs(1))
            .delivery_timeout(delivery)
    });
    // Metadata and a producer id first, then the only broker goes away.
    let warm = send_many(&mut h, &["orders"], 0, 1, false);
    assert!(h.flush(secs(10)));
    check_run(&h, &warm, TOPICS, true);
    let now = h.now;
    h.cluster.stop_broker(1, now).unwrap();

    // Same instant: record 1 fills a batch by itself (closed at once), record 2 opens the next.
    let big = Record::new("orders", vec![b'x'; 2000]).with_partition(0);
    let small = Record::new("orders", &b"small"[..]).with_partition(0);
    h.send(big, 1).unwrap();
    h.send(small, 2).unwrap();
    h.run_for(delivery + Duration::from_secs(1));

    let order: Vec<u64> = h
        .deliveries
        .iter()
        .filter(|d| d.opaque != 0)
        .map(|d| {
            assert!(
                matches!(
                    d.result.as_ref().unwrap_err().error,
                    ProduceError::DeliveryTimeout { .. }
                ),
                "record {}: {:?}",
                d.opaque,
                d.result
            );
            d.opaque
        })
        .collect();
    assert_eq!(order, [1, 2], "reports out of send order");
    assert_eq!(h.producer.buffered_records(), 0);
}
