use super::*;
use crate::SimConfig;

fn cluster() -> (SimCluster, Instant) {
    let t0 = Instant::now();
    let mut sim = SimCluster::new(SimConfig::with_brokers(1, 5), t0);
    sim.create_topic("t", 1).unwrap();
    (sim, t0)
}

#[test]
fn java_string_hash_partitions() {
    // Java: "tx-1".hashCode() == 3572520, "group-a".hashCode() == 293427347.
    assert_eq!(partition_for("tx-1"), 3_572_520 % 50);
    assert_eq!(partition_for("group-a"), 293_427_347 % 50);
    assert_eq!(partition_for(""), 0);
    // Negative hashes take the absolute value.
    let h = "zzzzzzzzzz"
        .encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)));
    assert!(h < 0);
    assert_eq!(partition_for("zzzzzzzzzz"), h.abs() % 50);
}

#[test]
fn an_exhausted_epoch_rotates_the_producer_id_at_init() {
    let (mut sim, t0) = cluster();
    let (pid, _) = sim.txn_init(t0, true, "x", 1000, None).unwrap();
    sim.transactions.get_mut("x").unwrap().epoch = i16::MAX - 1;
    let (new, epoch) = sim.txn_init(t0, true, "x", 1000, None).unwrap();
    assert_ne!(new, pid);
    assert_eq!(epoch, 0);
    assert_eq!(sim.transactions["x"].previous_producer_id, pid);
    // A rotation without KIP-360 forgets the last epoch: the old producer is fenced.
    let r = sim.txn_init(t0, true, "x", 1000, Some((pid, i16::MAX - 1)));
    assert_eq!(r, Err(ErrorCode::PRODUCER_FENCED.0));

    // A KIP-360 rotation remembers it, so its retry gets the same answer.
    let (pid, _) = sim.txn_init(t0, true, "y", 1000, None).unwrap();
    sim.transactions.get_mut("y").unwrap().epoch = i16::MAX - 1;
    let first = sim.txn_init(t0, true, "y", 1000, Some((pid, i16::MAX - 1)));
    let (new, epoch) = first.unwrap();
    assert_ne!(new, pid);
    assert_eq!(epoch, 0);
    let retry = sim.txn_init(t0, true, "y", 1000, Some((pid, i16::MAX - 1)));
    assert_eq!(retry, Ok((new, 0)));
}

#[test]
fn a_tv2_end_at_an_exhausted_epoch_hands_out_a_new_producer_id() {
    let (mut sim, t0) = cluster();
    let (pid, _) = sim.txn_init(t0, true, "x", 1000, None).unwrap();
    let e = i16::MAX - 1;
    sim.transactions.get_mut("x").unwrap().epoch = e;
    sim.txn_add_partitions(t0, "x", pid, e, &[("t".into(), 0)])
        .unwrap();
    let (new, epoch) = sim.txn_end(t0, "x", pid, e, true, true).unwrap();
    assert_ne!(new, pid);
    assert_eq!(epoch, 0);
    // The marker carries the old id at the last epoch.
    let marker = sim.log("t", 0).last().cloned().unwrap();
    assert_eq!((marker.producer_id, marker.producer_epoch), (pid, i16::MAX));
    // A retry with the old id and epoch is recognised (Kafka's retryOnOverflow).
    assert_eq!(sim.txn_end(t0, "x", pid, e, true, true), Ok((new, 0)));
    assert_eq!(
        sim.txn_end(t0, "x", pid, e, false, true),
        Err(ErrorCode::INVALID_TXN_STATE.0)
    );
}

#[test]
fn timeouts_abort_at_the_first_tick_past_the_deadline() {
    let (mut sim, t0) = cluster();
    let (pid, e) = sim.txn_init(t0, true, "x", 1000, None).unwrap();
    sim.txn_add_partitions(t0, "x", pid, e, &[("t".into(), 0)])
        .unwrap();
    sim.txn_tick(t0 + Duration::from_millis(1000));
    assert_eq!(sim.transactions["x"].state, TransactionState::Ongoing);
    sim.txn_tick(t0 + Duration::from_millis(1001));
    assert_eq!(sim.transactions["x"].state, TransactionState::CompleteAbort);
    // A TV2 cluster's fencing abort bumps once and keeps the fenced epoch as the last one
    // (Kafka 4.1.1's answers; see `txn_fence_and_abort`).
    assert_eq!(sim.transactions["x"].epoch, e + 1);
    assert_eq!(sim.transactions["x"].last_epoch, e);
}
