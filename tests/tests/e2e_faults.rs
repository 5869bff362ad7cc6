//! Faults injected mid-stream by librdkafka's mock cluster (3 brokers, two topics of 6 and 3
//! partitions) while the drivers produce: leader moves, a broker going down and coming back,
//! Produce answered with NOT_LEADER_OR_FOLLOWER (6), REQUEST_TIMED_OUT (7),
//! NOT_ENOUGH_REPLICAS (19), connections dropped by the broker (`_TRANSPORT`, -195), and added
//! round-trip delay. Records are sent in chunks with pauses; the faults fire between chunks,
//! while earlier records are buffered or in flight. Every record must be delivered, in send
//! order per partition, with exactly one report, and be read back intact.
//!
//! What the mock does (librdkafka 2.12.1, `rdkafka_mock_handlers.c`, `rdkafka_mock.c`):
//! * An injected Produce error (including -195) fails the whole request **before** anything is
//!   appended. So injected errors never create duplicates: exactly once must hold.
//! * -195 closes the connection (`rd_kafka_transport_shutdown`) while it handles that
//!   request. Requests that arrived earlier on the same connection were already appended and
//!   answered into the output queue; their answers die with the connection, so the producer
//!   retries them and the mock appends them again (it checks sequences only for
//!   transactional producers). With one request in flight per connection nothing else is
//!   pending: exactly once. With five: at least once, duplicates counted.
//! * `broker_down` closes the broker's connections with the same effect on the requests whose
//!   answers were not yet written: at least once, duplicates counted.
//! * A leader move makes the old leader answer NOT_LEADER_OR_FOLLOWER without appending:
//!   exactly once.
//! * The mock does not check idempotent sequence numbers. With several requests in flight on
//!   a connection, a request failed by an injected error may be followed by one that carries
//!   later batches of the same partition: a real broker refuses those
//!   (OUT_OF_ORDER_SEQUENCE_NUMBER) and the producer resends in order; the mock appends them.
//!   So with injected errors and five requests in flight, send order can be broken by the mock
//!   (counted, printed, `Expect::ExactlyOnceMockReorders`); with one request in flight, or
//!   without idempotence (the core then keeps one batch per partition in flight), strict order
//!   is asserted.

use std::time::Duration;

use producer_core::Acks;
use producer_tests::{api, errors, MockKafka};
use producer_tests::{produce, verify, workload, Driver, Expect, Keys, Pacing};

const TOPICS: &[(&str, i32)] = &[("faults-a", 6), ("faults-b", 3)];
const RECORDS: usize = 4_000;
const CHUNK: usize = 200;
const PAUSE: Duration = Duration::from_millis(40);

#[derive(Debug, Clone, Copy)]
enum Fault {
    LeaderMoves,
    BrokerDownUp,
    Inject(i32),
    /// NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT and NOT_ENOUGH_REPLICAS, mixed.
    InjectMix,
    /// Produce errors on one broker's own stack, each answered after a delay.
    BrokerInject,
    Rtt,
}

struct Case {
    driver: Driver,
    fault: Fault,
    expect: Expect,
    max_in_flight: usize,
    acks: Acks,
    idempotence: bool,
    /// Round-trip delay of every broker from the start, so that requests are in flight (and
    /// pipelined) when the faults fire.
    rtt: Duration,
}

impl Case {
    fn new(driver: Driver, fault: Fault, expect: Expect) -> Self {
        Case {
            driver,
            fault,
            expect,
            max_in_flight: 5,
            acks: Acks::All,
            idempotence: true,
            rtt: Duration::from_millis(20),
        }
    }
}

/// Leaders move before every `LEADER_MOVE_EVERY`-th chunk.
const LEADER_MOVE_EVERY: usize = 4;
/// Chunks before which `BrokerDownUp` takes a broker down or brings it up:
/// (chunk, broker, up).
const BROKER_DOWN_UP: [(usize, i32, bool); 4] =
    [(4, 2, false), (9, 2, true), (11, 3, false), (15, 3, true)];
/// Chunks before which `Inject(code)` pushes `INJECT_COUNT` errors.
const INJECT_AT: [usize; 3] = [3, 10, 16];
/// Errors pushed at each of `INJECT_AT`.
const INJECT_COUNT: usize = 3;
/// `InjectMix` pushes its three errors before every `INJECT_MIX_EVERY`-th chunk.
const INJECT_MIX_EVERY: usize = 3;
/// Chunks before which `BrokerInject` fills every broker's own error stack.
const BROKER_INJECT_AT: [usize; 2] = [3, 12];
/// `Rtt`: (chunk, broker or -1 for all, round-trip delay).
const RTT_STEPS: [(usize, i32, Duration); 3] = [
    (2, -1, Duration::from_millis(50)),
    (8, 2, Duration::from_millis(300)),
    (14, -1, Duration::ZERO),
];

fn inject(mock: &MockKafka, fault: Fault, chunk: usize) {
    match fault {
        Fault::LeaderMoves => {
            if chunk % LEADER_MOVE_EVERY == LEADER_MOVE_EVERY - 1 {
                for &(t, n) in TOPICS {
                    for p in 0..n {
                        let to = ((p as usize + chunk) % 3) as i32 + 1;
                        mock.set_leader(t, p, Some(to)).unwrap();
                    }
                }
            }
        }
        Fault::BrokerDownUp => {
            for (at, broker, up) in BROKER_DOWN_UP {
                if at == chunk && up {
                    mock.broker_up(broker).unwrap();
                } else if at == chunk {
                    mock.broker_down(broker).unwrap();
                }
            }
        }
        Fault::Inject(code) => {
            if INJECT_AT.contains(&chunk) {
                mock.push_request_errors(api::PRODUCE, &[code; INJECT_COUNT]);
            }
        }
        Fault::InjectMix => {
            if chunk % INJECT_MIX_EVERY == INJECT_MIX_EVERY - 1 {
                mock.push_request_errors(
                    api::PRODUCE,
                    &[
                        errors::NOT_LEADER_OR_FOLLOWER,
                        errors::REQUEST_TIMED_OUT,
                        errors::NOT_ENOUGH_REPLICAS,
                    ],
                );
            }
        }
        Fault::BrokerInject => {
            if BROKER_INJECT_AT.contains(&chunk) {
                for b in 1..=3 {
                    mock.push_broker_request_errors(
                        b,
                        api::PRODUCE,
                        &[
                            (errors::NOT_ENOUGH_REPLICAS, Duration::from_millis(100)),
                            (errors::REQUEST_TIMED_OUT, Duration::from_millis(50)),
                            (0, Duration::from_millis(200)),
                            (errors::NOT_LEADER_OR_FOLLOWER, Duration::ZERO),
                        ],
                    )
                    .unwrap();
                }
            }
        }
        Fault::Rtt => {
            for (at, broker, rtt) in RTT_STEPS {
                if at == chunk {
                    mock.set_rtt(broker, rtt).unwrap();
                }
            }
        }
    }
}

/// Waits until a broker has received a Produce request since the last `clear_requests` (or
/// 10 s passed: then the fault fires anyway, and the run still checks everything).
fn wait_for_a_produce_request(mock: &MockKafka) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !mock.requests().iter().any(|r| r.api_key == api::PRODUCE)
        && std::time::Instant::now() < deadline
    {
        // Request tracking can only be asked: poll.
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn run(case: Case) {
    let mock = MockKafka::new(3, TOPICS).unwrap();
    mock.set_rtt(-1, case.rtt).unwrap();
    let config = mock
        .producer_config()
        .max_in_flight(case.max_in_flight)
        .acks(case.acks)
        .enable_idempotence(case.idempotence)
        .request_timeout(Duration::from_secs(5))
        .delivery_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let records = workload(RECORDS, TOPICS, Keys::Mixed, 100);
    let fault = case.fault;
    // The mock's control calls sometimes wait a full second for its thread (its op queue
    // wake-up is missed until a 1 s poll timeout): they run on their own thread, in order,
    // so that sending keeps its pace. Each fires once a Produce request of its chunk has
    // reached a broker (request tracking): requests are in flight then (every broker answers
    // after its round-trip delay).
    mock.start_request_tracking();
    let (run, _) = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<usize>();
        let mock = &mock;
        let faults = scope.spawn(move || {
            for k in rx {
                mock.clear_requests();
                wait_for_a_produce_request(mock);
                inject(mock, fault, k);
            }
        });
        let run = produce(
            case.driver,
            config,
            &records,
            &Pacing::chunks(CHUNK, PAUSE),
            &mut |k| tx.send(k).unwrap(),
        );
        drop(tx);
        (run, faults.join().unwrap())
    });
    let s = verify(
        &mock.bootstrap_servers(),
        TOPICS,
        &records,
        &run,
        case.expect,
        false,
    );
    println!(
        "{:?} {:?} (in flight {}, rtt {:?}): {} records in {:?}, {} read back, {} duplicated and {} reordered by the mock",
        case.driver,
        case.fault,
        case.max_in_flight,
        case.rtt,
        records.len(),
        run.elapsed,
        s.consumed,
        s.duplicates.len(),
        s.inversions
    );
}

// ---- tokio handle ----

#[test]
fn tokio_leader_moves() {
    run(Case::new(
        Driver::Tokio,
        Fault::LeaderMoves,
        Expect::ExactlyOnce,
    ));
}

/// Tolerates duplicates (the mock appends retried requests again); the strict property for the
/// same fault is asserted against Apache Kafka by
/// `kafka_faults::tokio_broker_killed_mid_stream_and_restarted`.
#[test]
fn tokio_broker_down_and_up() {
    run(Case::new(
        Driver::Tokio,
        Fault::BrokerDownUp,
        Expect::AtLeastOnce,
    ));
}

/// Tolerates reorders (the mock checks no sequence numbers); the strict property for the same
/// error is asserted against Apache Kafka by `kafka_faults::tokio_leader_moves_every_200ms_for_10s`
/// (real NOT_LEADER_OR_FOLLOWER answers with five requests in flight).
#[test]
fn tokio_not_leader_or_follower() {
    run(Case::new(
        Driver::Tokio,
        Fault::Inject(errors::NOT_LEADER_OR_FOLLOWER),
        Expect::ExactlyOnceMockReorders,
    ));
}

/// Tolerates reorders (the mock checks no sequence numbers); the strict property for requests
/// that time out is asserted against Apache Kafka by
/// `kafka_faults::tokio_broker_hung_past_request_timeout`.
#[test]
fn tokio_request_timed_out() {
    run(Case::new(
        Driver::Tokio,
        Fault::Inject(errors::REQUEST_TIMED_OUT),
        Expect::ExactlyOnceMockReorders,
    ));
}

/// Tolerates reorders (the mock checks no sequence numbers); the strict property for the same
/// error is asserted against Apache Kafka by
/// `kafka_faults::tokio_not_enough_replicas_then_recovery`.
#[test]
fn tokio_not_enough_replicas() {
    run(Case::new(
        Driver::Tokio,
        Fault::Inject(errors::NOT_ENOUGH_REPLICAS),
        Expect::ExactlyOnceMockReorders,
    ));
}

#[test]
fn tokio_mixed_produce_errors_one_in_flight() {
    run(Case {
        max_in_flight: 1,
        ..Case::new(Driver::Tokio, Fault::InjectMix, Expect::ExactlyOnce)
    });
}

#[test]
fn tokio_dropped_connection_one_in_flight() {
    run(Case {
        max_in_flight: 1,
        ..Case::new(
            Driver::Tokio,
            Fault::Inject(errors::TRANSPORT),
            Expect::ExactlyOnce,
        )
    });
}

/// Tolerates duplicates and reorders (see [`Expect::AtLeastOnceMockReorders`]: seen here when
/// the machine is loaded and more requests are pipelined); the strict property for the same
/// fault is asserted against Apache Kafka by
/// `kafka_faults::tokio_every_connection_cut_with_five_in_flight`.
#[test]
fn tokio_dropped_connection_five_in_flight() {
    run(Case::new(
        Driver::Tokio,
        Fault::Inject(errors::TRANSPORT),
        Expect::AtLeastOnceMockReorders,
    ));
}

#[test]
fn tokio_round_trip_delay() {
    run(Case::new(Driver::Tokio, Fault::Rtt, Expect::ExactlyOnce));
}

#[test]
fn tokio_delayed_broker_errors_not_idempotent_acks_leader() {
    run(Case {
        acks: Acks::Leader,
        idempotence: false,
        ..Case::new(Driver::Tokio, Fault::BrokerInject, Expect::ExactlyOnce)
    });
}

// ---- mio threaded producer ----

#[test]
fn mio_leader_moves() {
    run(Case::new(
        Driver::MioThreaded,
        Fault::LeaderMoves,
        Expect::ExactlyOnce,
    ));
}

/// Tolerates duplicates (the mock appends retried requests again); the strict property for the
/// same fault is asserted against Apache Kafka by
/// `kafka_faults::mio_broker_killed_mid_stream_and_restarted`.
#[test]
fn mio_broker_down_and_up() {
    run(Case::new(
        Driver::MioThreaded,
        Fault::BrokerDownUp,
        Expect::AtLeastOnce,
    ));
}

#[test]
fn mio_not_enough_replicas_not_idempotent() {
    run(Case {
        idempotence: false,
        ..Case::new(
            Driver::MioThreaded,
            Fault::Inject(errors::NOT_ENOUGH_REPLICAS),
            Expect::ExactlyOnce,
        )
    });
}

#[test]
fn mio_dropped_connection_one_in_flight() {
    run(Case {
        max_in_flight: 1,
        ..Case::new(
            Driver::MioThreaded,
            Fault::Inject(errors::TRANSPORT),
            Expect::ExactlyOnce,
        )
    });
}

/// Tolerates reorders (the mock checks no sequence numbers); the strict property for delayed
/// retriable errors is asserted against Apache Kafka by `kafka_faults::mio_round_trip_delay`,
/// `kafka_faults::mio_not_enough_replicas_then_recovery` and
/// `kafka_random::mio_random_fault_schedule`.
#[test]
fn mio_delayed_broker_errors() {
    run(Case::new(
        Driver::MioThreaded,
        Fault::BrokerInject,
        Expect::ExactlyOnceMockReorders,
    ));
}

#[test]
fn mio_delayed_broker_errors_one_in_flight() {
    run(Case {
        max_in_flight: 1,
        ..Case::new(
            Driver::MioThreaded,
            Fault::BrokerInject,
            Expect::ExactlyOnce,
        )
    });
}
