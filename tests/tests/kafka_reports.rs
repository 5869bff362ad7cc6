//! Reports say exactly what happened, on Apache Kafka itself (one node with Kafka's
//! `StandardAuthorizer`, everyone allowed where no ACL is found): records stream to two topics
//! whose partitions share every Produce request, and mid-run an ACL denies the producer WRITE
//! on one of them. From then on the broker answers requests *mixed*: the open topic's
//! partitions acknowledged, the denied topic's refused with TOPIC_AUTHORIZATION_FAILED.
//!
//! Checked, through both drivers: every record of the open topic is delivered and read back
//! exactly once, in order (an acknowledged partition is never reported failed because another
//! partition of its answer failed); every record of the denied topic is either delivered and
//! in the log, or failed with TOPIC_AUTHORIZATION_FAILED and `possibly_persisted = false` and
//! absent from the log; and the protocol probe saw the broker's mixed answers.

use std::time::Duration;

use producer_core::{ErrorCode, ProduceError};
use producer_tests::kafka::probe::Probe;
use producer_tests::kafka::suite::{
    expect_for, produce_with_faults, producer_config, read_back_and_check, rules, FaultTally,
};
use producer_tests::kafka::{shared_cluster, ClusterSpec, TestCluster};
use producer_tests::{workload, Driver, Failure, Keys, Pacing};

fn spec() -> ClusterSpec {
    ClusterSpec::single()
        .name("reports")
        .broker_config(
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        )
        .broker_config("allow.everyone.if.no.acl.found", "true")
}

fn cluster() -> Option<TestCluster> {
    shared_cluster(spec)
}

/// 100 records every 50 ms over both topics for about 6 s; the ACL lands after about 1 s.
fn mixed_answer_after_an_acl_revocation(driver: Driver) {
    let Some(mut kafka) = cluster() else { return };
    let open = kafka.topic("acl-open", 3, 1, &[]);
    let denied = kafka.topic("acl-denied", 3, 1, &[]);
    let config = producer_config(&kafka).build().unwrap();
    let topics = [(open.as_str(), 3), (denied.as_str(), 3)];
    let records = workload(6 * 2000, &topics, Keys::Mixed, 100);
    let probe = Probe::attach(&kafka);
    let k = &kafka;
    let target = denied.clone();
    let pacing = Pacing::chunks(100, Duration::from_millis(50));
    let (run, tally) = produce_with_faults(driver, config, &records, &pacing, move |p| {
        p.wait_chunk(20);
        // A plaintext client is User:ANONYMOUS.
        k.ctl().deny_write(&target, "User:ANONYMOUS").unwrap();
        FaultTally::default()
    });
    let probe = probe.finish();
    assert!(probe.errors.is_empty(), "protocol probe:\n{probe}");
    let mut r = rules(&topics, expect_for(true));
    r.failures_allowed = true;
    let summary = read_back_and_check(&kafka, &r, &records, &run);

    let (mut denied_delivered, mut denied_failed) = (0, 0);
    for (i, reports) in run.reports.iter().enumerate() {
        assert_eq!(reports.len(), 1, "record {i}: {} reports", reports.len());
        let topic = &*records[i].topic;
        match &reports[0] {
            Ok(_) if topic == denied => denied_delivered += 1,
            Ok(_) => {}
            Err(f) => {
                assert_eq!(
                    topic, denied,
                    "record {i} of the open topic failed: {f:?} (its partition was \
                     acknowledged or retried, never refused)"
                );
                assert!(
                    matches!(
                        f,
                        Failure::Produce(ProduceError::Broker {
                            code: ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                            possibly_persisted: false,
                            ..
                        })
                    ),
                    "record {i}: {f:?}"
                );
                denied_failed += 1;
            }
        }
    }
    println!(
        "{driver:?}: {} records, {} read back ({} delivered, {} failed: the denied topic's \
         {denied_delivered} delivered before the ACL, {denied_failed} refused); mixed Produce \
         answers {:?}; faults {tally}",
        records.len(),
        summary.consumed,
        summary.delivered,
        summary.failed,
        probe.mixed_produce_answers
    );
    assert!(
        denied_delivered > 0,
        "the ACL came before any record of the topic"
    );
    assert!(denied_failed > 0, "the ACL refused nothing");
    let mixed = probe
        .mixed_produce_answers
        .get(&ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)
        .copied()
        .unwrap_or(0);
    assert!(
        mixed > 0,
        "no Produce answer acknowledged one topic and refused the other:\n{probe}"
    );
}

#[test]
fn kafka_mixed_answer_after_an_acl_revocation_tokio() {
    mixed_answer_after_an_acl_revocation(Driver::Tokio);
}

#[test]
fn kafka_mixed_answer_after_an_acl_revocation_mio() {
    mixed_answer_after_an_acl_revocation(Driver::MioThreaded);
}
