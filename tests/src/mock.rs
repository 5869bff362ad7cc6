//! librdkafka's mock cluster, embedded in-process through the `rdkafka` crate, with its fault
//! injection.
//!
//! librdkafka 2.12.1 (bundled by `rdkafka-sys` 4.10, used by `rdkafka` 0.39) has these mock
//! controls. The safe `rdkafka::mocking::MockCluster` wraps most of them, but it does not expose its
//! raw cluster pointer, so the per-broker and request-tracking calls that it lacks could not be
//! added next to it. [`MockKafka`] therefore owns the cluster itself (created exactly as
//! `MockCluster::new` does: a bare librdkafka client handle plus `rd_kafka_mock_cluster_new`) and
//! calls the C functions through `rdkafka::bindings`. Each call is one `unsafe` line on a pointer
//! this struct owns.
//!
//! | [`MockKafka`] method | C function | in rdkafka's safe `MockCluster`? |
//! | --- | --- | --- |
//! | [`create_topic`](MockKafka::create_topic) | `rd_kafka_mock_topic_create` | yes |
//! | [`set_leader`](MockKafka::set_leader) | `rd_kafka_mock_partition_set_leader` | yes |
//! | [`broker_down`](MockKafka::broker_down) / [`broker_up`](MockKafka::broker_up) | `rd_kafka_mock_broker_set_down` / `_set_up` | yes |
//! | [`set_rtt`](MockKafka::set_rtt) | `rd_kafka_mock_broker_set_rtt` | yes |
//! | [`push_request_errors`](MockKafka::push_request_errors) | `rd_kafka_mock_push_request_errors` | yes (as an enum slice) |
//! | [`clear_request_errors`](MockKafka::clear_request_errors) | `rd_kafka_mock_clear_request_errors` | yes |
//! | [`push_broker_request_errors`](MockKafka::push_broker_request_errors) | `rd_kafka_mock_broker_push_request_error_rtts` | **no** |
//! | [`broker_error_stack_len`](MockKafka::broker_error_stack_len) | `rd_kafka_mock_broker_error_stack_cnt` | **no** |
//! | [`topic_error`](MockKafka::topic_error) | `rd_kafka_mock_topic_set_error` | yes |
//! | [`set_api_version`](MockKafka::set_api_version) | `rd_kafka_mock_set_apiversion` | yes |
//! | [`start_request_tracking`](MockKafka::start_request_tracking), [`requests`](MockKafka::requests), [`clear_requests`](MockKafka::clear_requests) | `rd_kafka_mock_start_request_tracking`, `_get_requests`, `_clear_requests` | **no** |
//! | [`push_leader_response`](MockKafka::push_leader_response) | `rd_kafka_mock_partition_push_leader_response` | **no** |
//! | [`set_advertised`](MockKafka::set_advertised) | `rd_kafka_mock_broker_set_host_port` | **no** |
//!
//! Not wrapped (not useful to a producer): follower/rack/coordinator/consumer-group controls,
//! broker decommission/add, telemetry.
//!
//! Semantics worth knowing (from librdkafka's `rdkafka_mock*.c`; the wire facts are asserted in
//! `tests/mock_wire.rs`):
//! * Broker ids are `1..=N`. `-1` means "all brokers" for down/up/rtt.
//! * Injected errors form a FIFO stack per API key, cluster-wide or per broker (the broker's stack
//!   is consulted first). Each request of that API key pops one error and the whole request fails
//!   with it (for Produce: every partition in the request gets that code). The special code
//!   `-195` (`_TRANSPORT`) makes the broker close the connection instead of answering.
//! * `broker_down` closes the broker's connections and refuses new ones; it does **not** move
//!   leadership (call [`set_leader`](MockKafka::set_leader) for that). Metadata omits down brokers.
//! * `set_leader` bumps the partition's leader epoch; a Produce to the old leader then gets
//!   `NOT_LEADER_OR_FOLLOWER` (6).
//! * Each partition log keeps at most ~5 MiB (and 100,000 batches); older batches are dropped,
//!   so a read back of more than that from offset 0 sees a moved log start.
//! * Versions it implements (what it lists in ApiVersions): ApiVersions 0-2 (a v3 request gets
//!   error 35 in a body that is neither valid v3 nor v0), Produce 0-10, Metadata 0-12,
//!   InitProducerId 0-4, Fetch 0-16. Produce needs RecordBatch v2 (magic 2).
//! * Flexible Metadata responses (v9+) end with one extra `0x00` byte after the body.
//! * A Metadata request naming an unknown topic auto-creates it with 4 partitions unless it sets
//!   `AllowAutoTopicCreation = false` (v4+). Produce never creates topics (unknown topic or
//!   partition: `UNKNOWN_TOPIC_OR_PARTITION`). Create topics up front with [`MockKafka::new`].

use std::ffi::{c_int, CStr, CString};
use std::fmt;
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::client::{Client, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr, RDKafkaType};

/// Kafka API keys used with the error-injection and request-tracking calls.
pub mod api {
    /// Produce.
    pub const PRODUCE: i16 = 0;
    /// Fetch.
    pub const FETCH: i16 = 1;
    /// Metadata.
    pub const METADATA: i16 = 3;
    /// ApiVersions.
    pub const API_VERSIONS: i16 = 18;
    /// InitProducerId.
    pub const INIT_PRODUCER_ID: i16 = 22;
}

/// Kafka error codes handy for injection (the wire values; librdkafka's own negative codes such
/// as [`TRANSPORT`](errors::TRANSPORT) are also accepted by the mock).
pub mod errors {
    /// librdkafka `_TRANSPORT`: the mock broker closes the connection instead of answering.
    pub const TRANSPORT: i32 = -195;
    /// CORRUPT_MESSAGE.
    pub const CORRUPT_MESSAGE: i32 = 2;
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub const UNKNOWN_TOPIC_OR_PARTITION: i32 = 3;
    /// LEADER_NOT_AVAILABLE.
    pub const LEADER_NOT_AVAILABLE: i32 = 5;
    /// NOT_LEADER_OR_FOLLOWER (formerly NOT_LEADER_FOR_PARTITION).
    pub const NOT_LEADER_OR_FOLLOWER: i32 = 6;
    /// REQUEST_TIMED_OUT.
    pub const REQUEST_TIMED_OUT: i32 = 7;
    /// MESSAGE_TOO_LARGE.
    pub const MESSAGE_TOO_LARGE: i32 = 10;
    /// NOT_ENOUGH_REPLICAS.
    pub const NOT_ENOUGH_REPLICAS: i32 = 19;
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i32 = 20;
    /// OUT_OF_ORDER_SEQUENCE_NUMBER.
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i32 = 45;
    /// UNKNOWN_PRODUCER_ID.
    pub const UNKNOWN_PRODUCER_ID: i32 = 59;
}

/// A failed mock-cluster operation: which operation, and librdkafka's error code for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockError {
    /// The operation that failed, e.g. `"set_leader"`.
    pub op: &'static str,
    /// What librdkafka answered.
    pub code: RDKafkaErrorCode,
}

impl fmt::Display for MockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mock cluster {} failed: {}", self.op, self.code)
    }
}

impl std::error::Error for MockError {}

fn check(op: &'static str, err: RDKafkaRespErr) -> Result<(), MockError> {
    if err == RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        Err(MockError {
            op,
            code: err.into(),
        })
    }
}

fn cstring(op: &'static str, s: &str) -> Result<CString, MockError> {
    CString::new(s).map_err(|_| MockError {
        op,
        code: RDKafkaErrorCode::InvalidArgument,
    })
}

/// One request the mock cluster received, as recorded by request tracking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MockRequest {
    /// The broker that received it.
    pub broker_id: i32,
    /// Its API key (see [`api`]).
    pub api_key: i16,
    /// When it was received (librdkafka's monotonic clock, microseconds).
    pub timestamp_us: i64,
}

/// An in-process librdkafka mock cluster: N brokers on 127.0.0.1, topics created up front, and
/// fault injection. Dropping it shuts the cluster down (its listeners close).
///
/// It is `Send + Sync`: every librdkafka mock call either takes the cluster's lock or posts an
/// operation to the mock's own thread and waits for the answer.
pub struct MockKafka {
    cluster: *mut rd::rd_kafka_mock_cluster_t,
    brokers: i32,
    // The librdkafka handle the cluster runs on. It must outlive `cluster` (see `Drop`); it is
    // never used to produce or consume.
    _client: Client<DefaultClientContext>,
}

// SAFETY: see the type's documentation; the pointer is owned and only freed in `Drop`.
unsafe impl Send for MockKafka {}
unsafe impl Sync for MockKafka {}

impl MockKafka {
    /// Starts a cluster of `brokers` brokers (ids `1..=brokers`) and creates `topics` as
    /// `(name, partitions)`, with replication factor `min(brokers, 3)`. Partition leaders are
    /// spread over the brokers by the mock.
    pub fn new(brokers: i32, topics: &[(&str, i32)]) -> Result<Self, MockError> {
        let config = ClientConfig::new();
        let native = config.create_native_config().map_err(|_| MockError {
            op: "new",
            code: RDKafkaErrorCode::InvalidArgument,
        })?;
        let client = Client::new(
            &config,
            native,
            RDKafkaType::RD_KAFKA_PRODUCER,
            DefaultClientContext,
        )
        .map_err(|_| MockError {
            op: "new",
            code: RDKafkaErrorCode::Fail,
        })?;
        // SAFETY: the client handle is valid and outlives the cluster (field order + Drop).
        let cluster = unsafe { rd::rd_kafka_mock_cluster_new(client.native_ptr(), brokers) };
        if cluster.is_null() {
            return Err(MockError {
                op: "new",
                code: RDKafkaErrorCode::Fail,
            });
        }
        let mock = MockKafka {
            cluster,
            brokers,
            _client: client,
        };
        for (name, partitions) in topics {
            mock.create_topic(name, *partitions)?;
        }
        Ok(mock)
    }

    /// A producer config builder for this cluster's brokers, with short backoffs (tests stay
    /// fast).
    pub fn producer_config(&self) -> producer_core::ConfigBuilder {
        producer_core::Config::builder(self.bootstrap())
            .retry_backoff(Duration::from_millis(20))
            .retry_backoff_max(Duration::from_millis(200))
            .reconnect_backoff(Duration::from_millis(20))
            .reconnect_backoff_max(Duration::from_millis(200))
    }

    /// Number of brokers; their ids are `1..=broker_count()`.
    pub fn broker_count(&self) -> i32 {
        self.brokers
    }

    /// The bootstrap string librdkafka gives, `127.0.0.1:port,127.0.0.1:port,...`.
    pub fn bootstrap_servers(&self) -> String {
        // SAFETY: the returned string lives as long as the cluster.
        unsafe { CStr::from_ptr(rd::rd_kafka_mock_cluster_bootstraps(self.cluster)) }
            .to_string_lossy()
            .into_owned()
    }

    /// The brokers' `(host, port)` pairs, in broker-id order.
    pub fn bootstrap(&self) -> Vec<(String, u16)> {
        parse_bootstrap(&self.bootstrap_servers())
    }

    /// Creates `topic` with `partitions` partitions (replication `min(brokers, 3)`). Fails with
    /// `TopicAlreadyExists` if it exists.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), MockError> {
        let t = cstring("create_topic", topic)?;
        // SAFETY: valid cluster and NUL-terminated topic, copied by librdkafka.
        let err = unsafe {
            rd::rd_kafka_mock_topic_create(
                self.cluster,
                t.as_ptr(),
                partitions,
                self.brokers.min(3),
            )
        };
        check("create_topic", err)
    }

    /// Moves the leadership of `topic`/`partition` to `broker` (or makes it leaderless with
    /// `None`). Bumps the leader epoch. Clients learn of it through Metadata, or through
    /// `NOT_LEADER_OR_FOLLOWER` from the old leader.
    pub fn set_leader(
        &self,
        topic: &str,
        partition: i32,
        broker: Option<i32>,
    ) -> Result<(), MockError> {
        let t = cstring("set_leader", topic)?;
        // SAFETY: valid cluster and topic.
        let err = unsafe {
            rd::rd_kafka_mock_partition_set_leader(
                self.cluster,
                t.as_ptr(),
                partition,
                broker.unwrap_or(-1),
            )
        };
        check("set_leader", err)
    }

    /// Makes the next Metadata responses report `leader`/`leader_epoch` for this partition (one
    /// pushed entry per response), without moving the real leadership: for stale-metadata tests.
    pub fn push_leader_response(
        &self,
        topic: &str,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
    ) -> Result<(), MockError> {
        let t = cstring("push_leader_response", topic)?;
        // SAFETY: valid cluster and topic.
        let err = unsafe {
            rd::rd_kafka_mock_partition_push_leader_response(
                self.cluster,
                t.as_ptr(),
                partition,
                leader,
                leader_epoch,
            )
        };
        check("push_leader_response", err)
    }

    /// Closes the broker's connections and refuses new ones (`-1`: all brokers). Leadership does
    /// not move.
    pub fn broker_down(&self, broker: i32) -> Result<(), MockError> {
        // SAFETY: valid cluster.
        check("broker_down", unsafe {
            rd::rd_kafka_mock_broker_set_down(self.cluster, broker)
        })
    }

    /// Lets the broker accept connections again (`-1`: all brokers).
    pub fn broker_up(&self, broker: i32) -> Result<(), MockError> {
        // SAFETY: valid cluster.
        check("broker_up", unsafe {
            rd::rd_kafka_mock_broker_set_up(self.cluster, broker)
        })
    }

    /// Makes Metadata (and [`MockKafka::bootstrap_servers`]) name `host:port` for `broker`
    /// instead of its own listener, which keeps listening where it was: for a proxy in front of
    /// the broker that every client must go through (the TLS tests' terminating proxy).
    pub fn set_advertised(&self, broker: i32, host: &str, port: u16) -> Result<(), MockError> {
        let host = CString::new(host).map_err(|_| MockError {
            op: "set_advertised",
            code: RDKafkaErrorCode::InvalidArgument,
        })?;
        // SAFETY: valid cluster; the host string outlives the call (the mock copies it).
        unsafe {
            rd::rd_kafka_mock_broker_set_host_port(
                self.cluster,
                broker,
                host.as_ptr(),
                c_int::from(port),
            )
        };
        Ok(())
    }

    /// Delays every response of `broker` (`-1`: all brokers) by `rtt` (millisecond resolution).
    pub fn set_rtt(&self, broker: i32, rtt: Duration) -> Result<(), MockError> {
        let ms = c_int::try_from(rtt.as_millis()).unwrap_or(c_int::MAX);
        // SAFETY: valid cluster.
        check("set_rtt", unsafe {
            rd::rd_kafka_mock_broker_set_rtt(self.cluster, broker, ms)
        })
    }

    /// Appends `errors` (Kafka error codes, see [`errors`]) to the cluster-wide error stack of
    /// `api_key`: the next `errors.len()` requests of that API, on any broker, fail with them in
    /// order. To inject one code `n` times, pass it `n` times.
    pub fn push_request_errors(&self, api_key: i16, errors: &[i32]) {
        for &e in errors {
            // SAFETY: valid cluster; the variadic part is `cnt` C ints (the error enum's type),
            // so arbitrary codes are passed without building an invalid Rust enum value.
            unsafe { rd::rd_kafka_mock_push_request_errors(self.cluster, api_key, 1, e as c_int) }
        }
    }

    /// Empties the cluster-wide error stack of `api_key`.
    pub fn clear_request_errors(&self, api_key: i16) {
        // SAFETY: valid cluster.
        unsafe { rd::rd_kafka_mock_clear_request_errors(self.cluster, api_key) }
    }

    /// Appends `(error, rtt)` pairs to `broker`'s own error stack for `api_key`: its next
    /// requests of that API are answered with `error` after `rtt` (error `0` = answer normally,
    /// only delayed). Consulted before the cluster-wide stack.
    pub fn push_broker_request_errors(
        &self,
        broker: i32,
        api_key: i16,
        errors: &[(i32, Duration)],
    ) -> Result<(), MockError> {
        for &(e, rtt) in errors {
            let ms = c_int::try_from(rtt.as_millis()).unwrap_or(c_int::MAX);
            // SAFETY: valid cluster; the variadic part is `cnt` pairs of (C int error, C int
            // rtt in ms), read with va_arg(int) by librdkafka.
            let err = unsafe {
                rd::rd_kafka_mock_broker_push_request_error_rtts(
                    self.cluster,
                    broker,
                    api_key,
                    1,
                    e as c_int,
                    ms,
                )
            };
            check("push_broker_request_errors", err)?;
        }
        Ok(())
    }

    /// How many injected errors remain on `broker`'s own stack for `api_key`.
    pub fn broker_error_stack_len(&self, broker: i32, api_key: i16) -> Result<usize, MockError> {
        let mut n = 0usize;
        // SAFETY: valid cluster and out-pointer.
        let err = unsafe {
            rd::rd_kafka_mock_broker_error_stack_cnt(self.cluster, broker, api_key, &mut n)
        };
        check("broker_error_stack_len", err).map(|_| n)
    }

    /// Sets the topic-level error returned in Metadata for `topic` (`0` clears it).
    pub fn topic_error(&self, topic: &str, error: i32) -> Result<(), MockError> {
        extern "C" {
            // Same symbol as `rdkafka::bindings::rd_kafka_mock_topic_set_error`, declared with
            // the C enum's underlying `int` so any code can be passed.
            #[link_name = "rd_kafka_mock_topic_set_error"]
            fn topic_set_error(
                mcluster: *mut rd::rd_kafka_mock_cluster_t,
                topic: *const std::ffi::c_char,
                err: c_int,
            );
        }
        let t = cstring("topic_error", topic)?;
        // SAFETY: valid cluster and topic; `rd_kafka_resp_err_t` is a C enum passed as int.
        unsafe { topic_set_error(self.cluster, t.as_ptr(), error) };
        Ok(())
    }

    /// Restricts the advertised version range of `api_key` (`None, None` disables the API).
    /// The mock does not check the range: keep `max` within what it implements (see the crate
    /// docs), or it will advertise versions it cannot parse.
    pub fn set_api_version(
        &self,
        api_key: i16,
        min: Option<i16>,
        max: Option<i16>,
    ) -> Result<(), MockError> {
        // SAFETY: valid cluster.
        check("set_api_version", unsafe {
            rd::rd_kafka_mock_set_apiversion(
                self.cluster,
                api_key,
                min.unwrap_or(-1),
                max.unwrap_or(-1),
            )
        })
    }

    /// Starts recording every request the brokers receive (see [`requests`](Self::requests)).
    pub fn start_request_tracking(&self) {
        // SAFETY: valid cluster.
        unsafe { rd::rd_kafka_mock_start_request_tracking(self.cluster) }
    }

    /// Stops recording requests.
    pub fn stop_request_tracking(&self) {
        // SAFETY: valid cluster.
        unsafe { rd::rd_kafka_mock_stop_request_tracking(self.cluster) }
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        // SAFETY: valid cluster.
        unsafe { rd::rd_kafka_mock_clear_requests(self.cluster) }
    }

    /// The requests recorded since tracking started (or the last clear), in arrival order.
    pub fn requests(&self) -> Vec<MockRequest> {
        let mut n = 0usize;
        // SAFETY: valid cluster; librdkafka returns a calloc'd array of `n` copied requests (or
        // NULL when n == 0), which `rd_kafka_mock_request_destroy_array` frees (elements and
        // array).
        unsafe {
            let reqs = rd::rd_kafka_mock_get_requests(self.cluster, &mut n);
            if reqs.is_null() {
                return Vec::new();
            }
            let out = (0..n)
                .map(|i| {
                    let r = *reqs.add(i);
                    MockRequest {
                        broker_id: rd::rd_kafka_mock_request_id(r),
                        api_key: rd::rd_kafka_mock_request_api_key(r),
                        timestamp_us: rd::rd_kafka_mock_request_timestamp(r),
                    }
                })
                .collect();
            rd::rd_kafka_mock_request_destroy_array(reqs, n);
            out
        }
    }
}

impl Drop for MockKafka {
    fn drop(&mut self) {
        // SAFETY: owned cluster, destroyed once; `_client` is dropped after this body.
        unsafe { rd::rd_kafka_mock_cluster_destroy(self.cluster) }
    }
}

/// Parses `host:port,host:port` (the form librdkafka's mock gives) into pairs. Entries without a
/// valid port are skipped.
pub fn parse_bootstrap(s: &str) -> Vec<(String, u16)> {
    s.split(',')
        .filter_map(|e| {
            let (h, p) = e.trim().rsplit_once(':')?;
            Some((h.to_string(), p.parse().ok()?))
        })
        .collect()
}
