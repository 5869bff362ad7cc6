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

use producer_tests::{produce, verify, workload, Driver, Expect, Keys, Pacing};
use producer_core::Acks;
use producer_tests::{api, errors, MockKafka};

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

fn inject(mock: &MockKafka, fault: Fault, chunk: usize) {
    match fault {
        Fault::LeaderMoves => {
            if chunk % 4 == 3 {
                for &(t, n) in TOPICS {
                    for p in 0..n {
                        let to = ((p as usize + chunk) % 3) as i32 + 1;
                        mock.set_leader(t, p, Some(to)).unwrap();
                    }
                }
            }
        }
        Fault::BrokerDownUp => match chunk {
            4 => mock.broker_down(2).unwrap(),
            9 => mock.broker_up(2).unwrap(),
            11 => mock.broker_down(3).unwrap(),
            15 => mock.broker_up(3).unwrap(),
            _ => {}
        },
        Fault::Inject(code) => {
            if chunk == 3 || chunk == 10 || chunk == 16 {
                mock.push_request_errors(api::PRODUCE, &[code; 3]);
            }
        }
        Fault::InjectMix => {
            if chunk % 3 == 2 {
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
            if chunk == 3 || chunk == 12 {
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
        Fault::Rtt => match chunk {
            2 => mock.set_rtt(-1, Duration::from_millis(50)).unwrap(),
            8 => mock.set_rtt(2, Duration::from_millis(300)).unwrap(),
            14 => mock.set_rtt(-1, Duration::ZERO).unwrap(),
            _ => {}
        },
    }
}

fn run(case: Case) {
    let mock = MockKafka::new(3, TOPICS).unwrap();
    mock.set_rtt(-1, case.rtt).unwrap();
    let config = mock.producer_config()
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
    // so that sending keeps its pace. Each fires 10 ms after its chunk started.
    let (run, _) = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<usize>();
        let mock = &mock;
        let faults = scope.spawn(move || {
            for k in rx {
                // Fire 10 ms into the chunk: its first requests are in flight by then.
                std::thread::sleep(Duration::from_millis(10));
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
    let s = verify(&mock.bootstrap_servers(), TOPICS, &records, &run, case.expect, false);
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

#[test]
fn tokio_broker_down_and_up() {
    run(Case::new(
        Driver::Tokio,
        Fault::BrokerDownUp,
        Expect::AtLeastOnce,
    ));
}

#[test]
fn tokio_not_leader_or_follower() {
    run(Case::new(
        Driver::Tokio,
        Fault::Inject(errors::NOT_LEADER_OR_FOLLOWER),
        Expect::ExactlyOnceMockReorders,
    ));
}

#[test]
fn tokio_request_timed_out() {
    run(Case::new(
        Driver::Tokio,
        Fault::Inject(errors::REQUEST_TIMED_OUT),
        Expect::ExactlyOnceMockReorders,
    ));
}

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

#[test]
fn tokio_dropped_connection_five_in_flight() {
    run(Case::new(
        Driver::Tokio,
        Fault::Inject(errors::TRANSPORT),
        Expect::AtLeastOnce,
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
