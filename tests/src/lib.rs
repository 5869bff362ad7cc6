//! Test support for the end-to-end suites (`tests/*.rs`) against two real Kafka-protocol
//! brokers: librdkafka's mock cluster, embedded in-process (cheap, and able to inject what Kafka
//! cannot), and Apache Kafka itself (a 1- or 3-node KRaft cluster of JVMs, with a TCP fault
//! proxy in front of each broker), where exactly-once and order are asserted without tolerance.
//!
//! One concern per module:
//! * [`mock`]: [`MockKafka`], librdkafka's mock cluster and its fault injection;
//! * [`kafka`]: Apache Kafka from Maven Central: the cluster launcher, the fault proxy, the
//!   admin program, the protocol probe;
//! * [`workload`](mod@workload): the records the suites send (self-identifying, varied);
//! * [`drive`]: [`produce`], the one function that drives the producers (tokio, mio);
//! * [`readback`]: the independent librdkafka consumer (`check.crcs=true`);
//! * [`verify`](mod@verify): the comparison of reports and log, record by record.
//!
//! Binaries: `mock_cluster` (src/bin/mock_cluster.rs) runs a mock cluster in its own process
//! for benchmarks; `kafka_cluster` (src/bin/kafka_cluster.rs) runs a local 3-node Apache Kafka
//! for the examples. Both print `BOOTSTRAP host:port,...` and run until stdin closes.

pub use rdkafka;

pub mod drive;
pub mod driver_suite;
pub mod kafka;
pub mod mock;
pub mod oauth_broker;
pub mod readback;
pub mod running;
pub mod tls;
pub mod verify;
pub mod workload;

pub use drive::{
    produce, produce_rounds, produce_with_tokens, runtime, Driver, Failure, Pacing, Report,
    Reports, Run, TokenSource,
};
pub use mock::{api, errors, parse_bootstrap, MockError, MockKafka, MockRequest};
pub use readback::{read_back, read_back_all, read_back_each, read_back_topics, Consumed};
pub use verify::{check_consumed, check_run, verify, Expect, Rules, Summary};
pub use workload::{
    dead_port, id_of, key_partition, make_record, make_record_at, murmur2, now_ms, rss_kib,
    workload, Keys, ID_HEADER,
};
