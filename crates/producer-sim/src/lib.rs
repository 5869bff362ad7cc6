//! A deterministic, seeded, virtual-time simulated Kafka cluster, plus the network between one
//! client and its brokers.
//!
//! Use it to test a Kafka producer (or any Kafka client speaking ApiVersions, Metadata,
//! InitProducerId and Produce, and for transactions FindCoordinator, AddPartitionsToTxn,
//! AddOffsetsToTxn, TxnOffsetCommit and EndTxn) without sockets, threads or wall-clock time: the client writes
//! request bytes into a [`SimCluster`], the simulated brokers decode them with the independent
//! [`kafka-protocol`](https://docs.rs/kafka-protocol) codec, apply the broker's real rules
//! (leadership, CRC-32C, the five-batch idempotence window, sequence and epoch checks) and send
//! response bytes back, each direction delayed by a seeded random latency.
//!
//! # Time
//! Every method that can change state takes `now: Instant`. The simulator never reads the clock:
//! the caller decides how time moves (typically by jumping straight to
//! [`SimCluster::next_event_time`]). A `now` earlier than one already seen is treated as the
//! latest time seen. With the same [`SimConfig::seed`] and the same sequence of calls, the
//! simulator produces exactly the same events.
//!
//! # Network model
//! * [`SimCluster::connect`] completes (or fails) one one-way latency later.
//! * Bytes written by the client arrive at the broker after a latency; per connection and
//!   direction arrival times never decrease (TCP: in order, no loss, no duplication).
//! * A broker handles a request at the instant its last byte arrives; the response leaves at that
//!   instant and arrives one latency later (plus any [`SimCluster::delay_responses`] delay).
//!   Responses on one connection arrive in request order.
//! * [`SimCluster::poll_event`] processes everything due (broker side first) and returns the next
//!   client-side event due at or before `now`, in time order.
//!
//! # Broker rules
//! See [`SimCluster`] for the list. Requests for an API or version the broker does not advertise
//! (other than ApiVersions) make the broker close the connection, as a real Kafka broker does; the
//! reason is recorded in [`SimCluster::violations`].
//!
//! # Example
//! ```
//! use producer_sim::{NetEvent, SimCluster, SimConfig};
//! use std::time::Instant;
//!
//! let t0 = Instant::now();
//! let mut sim = SimCluster::new(SimConfig::with_brokers(3, 42), t0);
//! sim.create_topic("events", 6).unwrap();
//! let (host, port) = sim.bootstrap()[0].clone();
//! let conn = sim.connect(t0, &host, port);
//! let t1 = sim.next_event_time().unwrap();
//! assert_eq!(sim.poll_event(t1), Some(NetEvent::Connected(conn)));
//! ```
//!
//! A producer against it, through [`drive::Harness`] (the reference run loop, in virtual
//! time), with an error injected and the brokers' logs read back:
//! ```
//! use std::time::{Duration, Instant};
//! use producer_core::{Config, ErrorCode, Producer, Record};
//! use producer_sim::{drive::Harness, InjectedError, SimCluster, SimConfig, API_PRODUCE};
//!
//! let t0 = Instant::now();
//! let mut sim = SimCluster::new(SimConfig::with_brokers(3, 7), t0);
//! sim.create_topic("events", 3).unwrap();
//! sim.inject_error(InjectedError {
//!     api_key: API_PRODUCE,
//!     topic: Some("events".into()),
//!     partition: None,
//!     error_code: ErrorCode::NOT_ENOUGH_REPLICAS.0,
//!     count: 1,
//!     persist: false,
//! });
//! let config = Config::builder(sim.bootstrap()).build().unwrap();
//! let mut h = Harness::new(Producer::new(config, t0), sim, t0);
//! for i in 0..100u32 {
//!     h.send(Record::new("events", format!("value-{i}")), i).unwrap();
//! }
//! assert!(h.flush(Duration::from_secs(30)), "every record reported");
//! assert!(h.deliveries.iter().all(|d| d.result.is_ok()), "the error was retried");
//! let logged: usize = (0..3).map(|p| h.cluster.log("events", p).len()).sum();
//! assert_eq!(logged, 100);
//! assert_eq!(h.producer.metrics().counters.retries, 1);
//! ```

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod cluster;
mod config;
pub mod drive;
mod error;
mod rng;
mod wire;

pub use cluster::{
    CommittedOffset, ConnId, ControlMarker, CoordinatorKind, InjectedError, LoggedRecord, NetEvent,
    ProducePartitionRecord, RequestRecord, SimCluster, SimTelemetryPush, TransactionState,
    TransactionView, DEFAULT_MAX_MESSAGE_BYTES,
};
pub use config::{
    BrokerSpec, SimConfig, SimSasl, SimSubscription, API_ADD_OFFSETS_TO_TXN,
    API_ADD_PARTITIONS_TO_TXN, API_API_VERSIONS, API_END_TXN, API_FIND_COORDINATOR,
    API_GET_TELEMETRY_SUBSCRIPTIONS, API_INIT_PRODUCER_ID, API_METADATA, API_PRODUCE,
    API_PUSH_TELEMETRY, API_SASL_AUTHENTICATE, API_SASL_HANDSHAKE, API_TXN_OFFSET_COMMIT,
    DEFAULT_API_VERSIONS, SASL_API_VERSIONS, SIM_CAPABILITIES, TELEMETRY_API_VERSIONS,
};
pub use error::SimError;
