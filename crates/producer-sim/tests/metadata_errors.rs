//! Metadata v13's top-level error code: a broker that cannot answer says so with no brokers and
//! no topics, and the producer asks again after its retry backoff instead of reading the
//! empty answer as "no brokers, no topics".

mod support;

use producer_sim::API_METADATA;
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("orders", 3)];

/// REBOOTSTRAP_REQUIRED (129, KIP-1102).
const REBOOTSTRAP_REQUIRED: i16 = 129;

#[test]
fn a_top_level_metadata_error_is_asked_again_and_every_record_delivered() {
    let mut h = harness(cluster(2, TOPICS, 41), |b| b);
    h.cluster
        .inject_metadata_top_level_error(REBOOTSTRAP_REQUIRED, 2);
    let sent = send_many(&mut h, &["orders"], 0, 50, false);
    assert!(h.flush(secs(30)));
    check_run(&h, &sent, TOPICS, true);
    let metadata: Vec<(i16, i16)> = h
        .cluster
        .request_log()
        .iter()
        .filter(|r| r.api_key == API_METADATA)
        .map(|r| (r.api_version, r.error_code))
        .collect();
    assert!(
        metadata.len() >= 3,
        "two refused answers, then one applied: {metadata:?}"
    );
    assert_eq!(
        &metadata[..3],
        &[
            (13, REBOOTSTRAP_REQUIRED),
            (13, REBOOTSTRAP_REQUIRED),
            (13, 0)
        ]
    );
}
