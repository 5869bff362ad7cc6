//! `metadata.recovery.strategy` (KIP-899 / KIP-1102) against the simulated cluster's rules:
//! with `rebootstrap` (the default) the producer goes back to its bootstrap list once every
//! broker Metadata named is unreachable, or when a broker answers Metadata with
//! `REBOOTSTRAP_REQUIRED`, once per episode, and says so with [`Event::Rebootstrapping`];
//! with `none` it keeps to the brokers it knows. (On Apache Kafka, `kafka_rebootstrap` shows
//! the cluster found again behind the bootstrap address.)

mod support;

use producer_core::{Event, MetadataRecovery, RebootstrapReason};
use producer_sim::API_METADATA;
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("orders", 4)];

fn rebootstraps(h: &producer_sim::drive::Harness<u64>) -> Vec<RebootstrapReason> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::Rebootstrapping { reason } => Some(*reason),
            _ => None,
        })
        .collect()
}

/// Every broker stopped for a while, then started again: one rebootstrap for the outage with
/// `rebootstrap`, none with `none`; every record delivered either way (the brokers come back at
/// the addresses the producer knows).
fn outage(strategy: MetadataRecovery, seed: u64) -> producer_sim::drive::Harness<u64> {
    let mut h = harness(cluster(2, TOPICS, seed), |b| b.metadata_recovery(strategy));
    let mut sent = send_many(&mut h, &["orders"], 0, 100, false);
    assert!(h.flush(secs(30)));
    let now = h.now;
    h.cluster.stop_broker(1, now).unwrap();
    h.cluster.stop_broker(2, now).unwrap();
    sent.extend(send_many(&mut h, &["orders"], 100, 100, false));
    h.run_for(secs(10));
    h.cluster.start_broker(1).unwrap();
    h.cluster.start_broker(2).unwrap();
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, TOPICS, true);
    h
}

#[test]
fn an_outage_of_every_known_broker_rebootstraps_once() {
    let h = outage(MetadataRecovery::Rebootstrap, 71);
    assert_eq!(rebootstraps(&h), vec![RebootstrapReason::NoBrokerReachable]);
    assert_eq!(h.producer.stats().rebootstraps, 1);
}

#[test]
fn with_strategy_none_an_outage_does_not_rebootstrap() {
    let h = outage(MetadataRecovery::None, 72);
    assert!(rebootstraps(&h).is_empty());
    assert_eq!(h.producer.stats().rebootstraps, 0);
}

/// REBOOTSTRAP_REQUIRED (129) as Metadata v13's top-level error, from a broker the producer
/// learnt from Metadata: the next Metadata request goes to the bootstrap address, on a new
/// connection (the one from startup was cut).
#[test]
fn rebootstrap_required_rebootstraps_and_delivers() {
    let mut h = harness(cluster(2, TOPICS, 73), |b| b);
    let mut sent = send_many(&mut h, &["orders"], 0, 100, false);
    assert!(h.flush(secs(30)));
    let bootstrap_conn = h.cluster.request_log()[0].conn;
    let now = h.now;
    h.cluster.drop_connection(now, bootstrap_conn);
    h.cluster.inject_metadata_top_level_error(129, 1);
    h.cluster.inject_error(producer_sim::InjectedError {
        api_key: producer_sim::API_PRODUCE,
        topic: None,
        partition: None,
        error_code: 6, // NOT_LEADER_OR_FOLLOWER: fresh metadata wanted
        count: 1,
        persist: false,
    });
    let before = h.cluster.request_log().len();
    let conns_before: std::collections::BTreeSet<_> =
        h.cluster.request_log().iter().map(|r| r.conn).collect();
    sent.extend(send_many(&mut h, &["orders"], 100, 100, false));
    assert!(h.flush(secs(30)));
    check_run(&h, &sent, TOPICS, true);
    assert_eq!(
        rebootstraps(&h),
        vec![RebootstrapReason::RebootstrapRequired]
    );
    let metadata: Vec<_> = h.cluster.request_log()[before..]
        .iter()
        .filter(|r| r.api_key == API_METADATA)
        .collect();
    assert_eq!(metadata[0].error_code, 129);
    assert!(
        conns_before.contains(&metadata[0].conn),
        "asked a known broker"
    );
    assert!(
        !conns_before.contains(&metadata[1].conn),
        "the next Metadata went to a new (bootstrap) connection"
    );
    assert_eq!(metadata[1].error_code, 0);
}

#[test]
fn with_strategy_none_rebootstrap_required_is_only_asked_again() {
    let mut h = harness(cluster(2, TOPICS, 74), |b| {
        b.metadata_recovery(MetadataRecovery::None)
    });
    h.cluster.inject_metadata_top_level_error(129, 1);
    let sent = send_many(&mut h, &["orders"], 0, 100, false);
    assert!(h.flush(secs(30)));
    check_run(&h, &sent, TOPICS, true);
    assert!(rebootstraps(&h).is_empty());
}

/// A metadata refresh that stays unanswered (every answer a top-level error other than
/// REBOOTSTRAP_REQUIRED) for `metadata.recovery.rebootstrap.trigger.ms` rebootstraps too.
#[test]
fn metadata_unanswered_for_the_trigger_rebootstraps() {
    let mut h = harness(cluster(2, TOPICS, 75), |b| {
        b.rebootstrap_trigger(secs(2))
            .retry_backoff(std::time::Duration::from_millis(100))
    });
    let mut sent = send_many(&mut h, &["orders"], 0, 50, false);
    assert!(h.flush(secs(30)));
    // UNKNOWN_SERVER_ERROR (-1) as the top-level answer, long enough to pass the trigger.
    h.cluster.inject_metadata_top_level_error(-1, 40);
    h.producer.flush(h.now);
    // A partition error that wants fresh metadata starts the refresh.
    h.cluster.inject_error(producer_sim::InjectedError {
        api_key: producer_sim::API_PRODUCE,
        topic: None,
        partition: None,
        error_code: 6, // NOT_LEADER_OR_FOLLOWER
        count: 1,
        persist: false,
    });
    sent.extend(send_many(&mut h, &["orders"], 50, 50, false));
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, TOPICS, true);
    assert!(
        rebootstraps(&h).contains(&RebootstrapReason::MetadataUnanswered),
        "{:?}",
        rebootstraps(&h)
    );
}
