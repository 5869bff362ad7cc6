//! A producer configured at every limit runs: each duration at `Config::MAX_DURATION` (the
//! delivery timeout raised past it to `linger + request_timeout`) and each size setting at
//! `usize::MAX` (a batch capped at `max_request_size`) produces to the simulated cluster, with
//! every record delivered once, in order, and nothing overflows or aborts; the deadlines stay
//! within what an `Instant` holds while virtual time runs on for years.

mod support;

use producer_core::Config;
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("orders", 3), ("clicks", 2)];

#[test]
fn every_duration_and_size_at_its_limit_still_delivers() {
    let max = Config::MAX_DURATION;
    let mut h = harness(cluster(3, TOPICS, 41), |b| {
        b.linger(max)
            .request_timeout(max)
            .retry_backoff(max)
            .retry_backoff_max(max)
            .reconnect_backoff(max)
            .reconnect_backoff_max(max)
            .metadata_max_age(max)
            .metadata_max_idle(max)
            .rebootstrap_trigger(max)
            .max_block(max)
            .partitioner_availability_timeout(max)
            .transaction_timeout(max)
            .token_timeout(max)
            .batch_size(usize::MAX)
            .buffer_memory(usize::MAX)
            .buffer_max_records(usize::MAX)
            .max_response_size(usize::MAX)
    });
    assert_eq!(h.producer.config().delivery_timeout, max * 2);
    assert_eq!(
        h.producer.config().batch_size,
        h.producer.config().max_request_size
    );
    let sent = send_many(&mut h, &["orders", "clicks"], 0, 2000, true);
    // linger is 24.8 days: the records go when flushed.
    assert!(h.flush(secs(60)), "not everything was reported");
    check_run(&h, &sent, TOPICS, true);
    assert!(reports(&h).values().all(|r| r.is_ok()));
    // Months of virtual time (three times the longest duration) with timers armed at their
    // limits: nothing overflows. (The topics are forgotten meanwhile, idle past
    // `metadata.max.idle.ms`: "orders" comes back as a new topic, whose metadata is asked at
    // once whatever the retry backoff.)
    h.run_for(max * 3);
    let sent_later = send_many(&mut h, &["orders"], 2000, 10, false);
    assert!(h.flush(secs(60)));
    let all: Vec<_> = sent.into_iter().chain(sent_later).collect();
    check_run(&h, &all, TOPICS, true);
    assert!(
        h.contract_violations.is_empty(),
        "{:?}",
        h.contract_violations
    );
}
