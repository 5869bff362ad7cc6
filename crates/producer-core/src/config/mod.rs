//! Producer configuration: a builder with Kafka's names in the docs, validated at build time.

use std::time::Duration;

use crate::record::Compression;
use crate::security::{SaslConfig, SecurityProtocol, TlsConfig};

mod error;

/// How many acknowledgements the producer asks for (`acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Acks {
    /// `acks=0`: no response; a batch completes once it is handed to the connection (offset -1).
    None,
    /// `acks=1`: the leader has written the batch.
    Leader,
    /// `acks=all` (-1): every in-sync replica has it. Required by idempotence.
    All,
}

impl Acks {
    /// The value on the wire.
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

pub use error::ConfigError;

/// A validated producer configuration. Build one with [`Config::builder`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// `bootstrap.servers`: `(host, port)` pairs tried in turn for the first metadata.
    pub bootstrap: Vec<(String, u16)>,
    /// `client.id`, sent in every request header.
    pub client_id: String,
    /// `acks`.
    pub acks: Acks,
    /// `enable.idempotence` after validation.
    pub idempotence: bool,
    /// `transactional.id`: set, the producer is transactional (see
    /// [`crate::Transactions::init`]); it implies idempotence.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`: how long the coordinator lets a transaction stay open
    /// (default 60 s).
    pub transaction_timeout: Duration,
    /// `linger.ms`.
    pub linger: Duration,
    /// `batch.size` (bytes, uncompressed). At most `max_request_size`: [`ConfigBuilder::build`]
    /// lowers a larger one to it (a batch cannot be larger than the request that carries it;
    /// librdkafka caps it the same way).
    pub batch_size: usize,
    /// `max.request.size` (bytes); also the largest record accepted. At most
    /// [`Config::MAX_REQUEST_SIZE`].
    pub max_request_size: usize,
    /// `batch.grow.max.bytes` (bytes, uncompressed): how far an open batch may grow past
    /// `batch_size` while every in-flight slot to its partition's leader is busy
    /// (`max_in_flight` Produce requests outstanding on its connection), or while an earlier
    /// batch of its partition still waits for its first send. The batch could not go out
    /// sooner anyway, so it keeps taking records instead of being sealed at
    /// `batch_size`: the broker then gets fewer, fuller requests (less work per record), and a
    /// slot that frees takes the grown batch as it is. Under light load batches stay at
    /// `batch_size`. [`ConfigBuilder::build`] brings it within `batch_size ..=
    /// max_request_size` (a topic's batches also stay within the request's framing); setting
    /// it to `batch_size` or 0 turns growth off. A topic whose broker answers a grown batch
    /// MESSAGE_TOO_LARGE or RECORD_LIST_TOO_LARGE (its `max.message.bytes` below this) has the
    /// batch split and resent, and its later batches grow to at most half the refused size.
    /// Buffer space is still charged per record against `buffer_memory`, which stays the hard
    /// cap; a grown batch's buffer grows with its records (nothing is reserved up front).
    /// Default 1 MiB.
    pub batch_grow_max: usize,
    /// `buffer.memory`: bytes of records held at most.
    pub buffer_memory: usize,
    /// `queue.delay.target.ms`: the queue-delay limit. When the cluster absorbs less than the
    /// application offers, `send` pushes back (`Full`, or a driver's blocking send waits)
    /// once the unacknowledged bytes reach what the cluster drains in this long (or less: see
    /// `queue_delay_min`, which learns how deep a queue pays) plus `linger`
    /// and twice the Produce round trip without queueing (the bytes in flight the rate needs,
    /// and as much headroom; measured: the acknowledged bytes per second of time with Produce
    /// requests in flight, and the round trip of a request written while nothing else was in
    /// flight on its connection, probed for once a second at most by letting a connection's
    /// pipeline drain), never below `max.in.flight + 1` batches per
    /// broker or a batch per partition with something to send, and never above
    /// `buffer_memory`, which stays the hard cap. While it holds no sender back it is also
    /// never below an eighth of `buffer_memory` (a burst that size is taken), which is where
    /// it starts. So records queue about this long in the producer instead of the whole
    /// `buffer_memory`'s worth. Default 50 ms. Zero turns the limit off (the producer
    /// then fills `buffer_memory`, as the Java client does); it is off with `acks=0` too
    /// (nothing is acknowledged to measure the drain by).
    pub queue_delay_target: Duration,
    /// `queue.delay.min.ms`: the least queueing the queue-delay limit learns down to. Below
    /// `queue_delay_target` (the default) the limit starts at this depth and, while it holds
    /// senders back, tries now and then twice and half the queue it allows (held fixed for a
    /// few drain samples): it keeps the shallower queue unless it drained a twentieth less, the
    /// deeper one only if it drained a tenth more. Where a deeper queue does not raise the
    /// cluster's drain (a broker whose work is per byte, such as one recompressing every batch)
    /// records then queue about this long instead of the target; where it does (larger batches
    /// on a broker whose work is per request) the limit climbs back to the target. At or above
    /// the target the limit allows the target. Default 2 ms (less is taken as 1 ms).
    pub queue_delay_min: Duration,
    /// Records held at most (franz-go's `MaxBufferedRecords`).
    pub buffer_max_records: usize,
    /// `compression.type`.
    pub compression: Compression,
    /// `retry.backoff.ms`.
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms`.
    pub retry_backoff_max: Duration,
    /// `reconnect.backoff.ms`.
    pub reconnect_backoff: Duration,
    /// `reconnect.backoff.max.ms`.
    pub reconnect_backoff_max: Duration,
    /// `request.timeout.ms`: on the wire, and the client-side deadline of each request; it
    /// also bounds each connection attempt (name resolution included) from the moment the core
    /// emits [`crate::Output::Connect`]: a driver needs no connect timer of its own.
    pub request_timeout: Duration,
    /// `delivery.timeout.ms`: bounds each record's life from its batch's creation.
    pub delivery_timeout: Duration,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight: usize,
    /// `metadata.max.age.ms`.
    pub metadata_max_age: Duration,
    /// `metadata.max.idle.ms`: a topic nothing was sent to for this long, with nothing
    /// buffered or in flight, is forgotten (no longer asked for in Metadata requests; a record
    /// sent to it later finds it new).
    pub metadata_max_idle: Duration,
    /// `metrics.sample.window.ms`: the length of one sample of the windowed rates in
    /// [`crate::MetricsSnapshot`] (`record_send_rate`, ...), as Java's metrics keep them.
    pub metrics_sample_window: Duration,
    /// `metrics.num.samples`: how many samples the windowed rates keep (the current one
    /// included); a rate covers up to this many windows. At least 1.
    pub metrics_num_samples: usize,
    /// `metadata.recovery.strategy`: whether the producer goes back to its bootstrap list when
    /// no broker it knows can be reached.
    pub metadata_recovery: MetadataRecovery,
    /// `metadata.recovery.rebootstrap.trigger.ms`: with [`MetadataRecovery::Rebootstrap`],
    /// also go back to the bootstrap list when a wanted metadata refresh has not been answered
    /// for this long (KIP-1102).
    pub rebootstrap_trigger: Duration,
    /// `max.block.ms`: how long records wait for their topic's metadata before failing, and
    /// how long a transactional operation's call waits for it (see
    /// [`crate::Transactions::commit`]).
    pub max_block: Duration,
    /// `sasl.login.read.timeout.ms`: how long the application's OAUTHBEARER token provider may
    /// take to answer one [`crate::Output::TokenRequest`]. After it the connections waiting for
    /// the token fail to authenticate ([`crate::AuthError::TokenTimedOut`]) and back off; a
    /// token handed over later is still taken.
    pub token_timeout: Duration,
    /// `partitioner.adaptive.partitioning.enable`: records without a key (and every record with
    /// `partitioner_ignore_keys`) move to a new sticky partition after `batch_size` bytes,
    /// chosen at random weighted against the queue depth of each partition's leader (true), or
    /// uniformly among the partitions with a leader (false).
    pub adaptive_partitioning: bool,
    /// `partitioner.availability.timeout.ms`: with adaptive partitioning, a partition whose
    /// leader has had batches waiting and took none for longer than this is left out of the
    /// choice of the next sticky partition. Zero turns it off.
    pub partitioner_availability_timeout: Duration,
    /// `partitioner.ignore.keys`: keyed records are partitioned like records without a key
    /// (sticky) instead of by murmur2 of the key.
    pub partitioner_ignore_keys: bool,
    /// `enable.metrics.push` (KIP-714): push the producer's metrics to a broker that asks for
    /// them (a client-metrics subscription matching this client), every push interval of the
    /// subscription and once more on close. The producer asks for a subscription only when a
    /// broker lists GetTelemetrySubscriptions in ApiVersions (brokers list it only with a
    /// telemetry receiver configured) and pushes only what a subscription asks for. Needs the
    /// core's `telemetry` cargo feature (default on): without it, telemetry is off whatever
    /// this says.
    pub enable_metrics_push: bool,
    /// Largest response frame accepted (bytes); larger ones close the connection.
    pub max_response_size: usize,
    /// When false, only failures produce delivery reports (fire-and-forget mode).
    pub report_successes: bool,
    /// Seed of the producer's random choices (sticky partitions, jitter).
    pub seed: u64,
    /// `security.protocol`.
    pub security_protocol: SecurityProtocol,
    /// The SASL mechanism and credentials (`sasl.mechanism`, `sasl.username`,
    /// `sasl.password`); required with a SASL security protocol.
    pub sasl: Option<SaslConfig>,
    /// TLS settings (`ssl.*`); required with `SSL` and `SASL_SSL`.
    pub tls: Option<TlsConfig>,
}

/// `metadata.recovery.strategy` (KIP-899): what the producer does when it cannot reach any
/// broker it knows of (every connection attempt to the brokers Metadata named fails), or a
/// broker answers Metadata with `REBOOTSTRAP_REQUIRED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MetadataRecovery {
    /// Go back to the bootstrap list (names resolved again by the driver on each connection)
    /// and take the cluster from the first bootstrap address that answers Metadata: a cluster
    /// replaced behind the same bootstrap names is found. The Java client's default since
    /// Kafka 4.0.
    #[default]
    Rebootstrap,
    /// Keep to the brokers Metadata named once the first answer arrived; the bootstrap list is
    /// used only before it (the Java client's behaviour before Kafka 3.8).
    None,
}

impl Config {
    /// The longest duration any setting takes: `i32::MAX` milliseconds (about 24.8 days), the
    /// largest timeout Kafka's protocol carries (Java's `Integer.MAX_VALUE` ms). Every deadline
    /// the producer arms is its `now` plus one or two settings, which an `Instant` always
    /// holds; a longer setting (`Duration::MAX` for "never") is refused by
    /// [`ConfigBuilder::build`] with [`ConfigError::DurationTooLong`].
    pub const MAX_DURATION: Duration = Duration::from_millis(i32::MAX as u64);

    /// The largest `max_request_size`: 1 GiB. A request's size goes on the wire as an INT32;
    /// the margin below `i32::MAX` keeps a request that carries one batch larger than the
    /// limit (a record at the limit that compression made a little larger) from wrapping it.
    /// (Brokers take 100 MiB by default: `socket.request.max.bytes`.)
    pub const MAX_REQUEST_SIZE: usize = 1 << 30;

    /// The longest `client_id` and `transactional_id`, in bytes: both go in requests as
    /// strings with an INT16 length.
    pub const MAX_ID_LEN: usize = i16::MAX as usize;

    /// The most bytes of SASL username and password together: 512 KiB, the default of the
    /// broker's `sasl.server.max.receive.size`, the largest SASL token it reads.
    pub const MAX_SASL_CREDENTIALS: usize = 512 * 1024;

    /// A builder with the Java client 4.x defaults and the given bootstrap servers.
    pub fn builder<H: Into<String>>(
        bootstrap: impl IntoIterator<Item = (H, u16)>,
    ) -> ConfigBuilder {
        ConfigBuilder {
            config: Config {
                bootstrap: bootstrap.into_iter().map(|(h, p)| (h.into(), p)).collect(),
                client_id: "producer-core".to_owned(),
                acks: Acks::All,
                idempotence: true,
                transactional_id: None,
                transaction_timeout: Duration::from_secs(60),
                linger: Duration::from_millis(5),
                batch_size: 16 * 1024,
                max_request_size: 1024 * 1024,
                batch_grow_max: 1024 * 1024,
                buffer_memory: 32 * 1024 * 1024,
                queue_delay_target: Duration::from_millis(50),
                queue_delay_min: Duration::from_millis(2),
                buffer_max_records: 1_000_000,
                compression: Compression::None,
                retry_backoff: Duration::from_millis(100),
                retry_backoff_max: Duration::from_millis(1000),
                reconnect_backoff: Duration::from_millis(50),
                reconnect_backoff_max: Duration::from_millis(1000),
                request_timeout: Duration::from_secs(30),
                delivery_timeout: Duration::from_secs(120),
                max_in_flight: 5,
                metadata_max_age: Duration::from_secs(300),
                metadata_max_idle: Duration::from_secs(300),
                metrics_sample_window: Duration::from_secs(30),
                metrics_num_samples: 2,
                metadata_recovery: MetadataRecovery::Rebootstrap,
                rebootstrap_trigger: Duration::from_secs(300),
                max_block: Duration::from_secs(60),
                token_timeout: Duration::from_secs(30),
                adaptive_partitioning: true,
                partitioner_availability_timeout: Duration::ZERO,
                partitioner_ignore_keys: false,
                enable_metrics_push: true,
                max_response_size: 100 * 1024 * 1024,
                report_successes: true,
                seed: 0x5eed,
                security_protocol: SecurityProtocol::Plaintext,
                sasl: None,
                tls: None,
            },
            idempotence_explicit: None,
            delivery_explicit: false,
        }
    }
}

impl Config {
    /// Every duration setting by its builder name: the ones [`ConfigBuilder::build`] bounds by
    /// [`Config::MAX_DURATION`].
    fn durations(&self) -> [(&'static str, Duration); 17] {
        [
            ("linger", self.linger),
            ("retry_backoff", self.retry_backoff),
            ("retry_backoff_max", self.retry_backoff_max),
            ("reconnect_backoff", self.reconnect_backoff),
            ("reconnect_backoff_max", self.reconnect_backoff_max),
            ("request_timeout", self.request_timeout),
            ("delivery_timeout", self.delivery_timeout),
            ("metadata_max_age", self.metadata_max_age),
            ("metadata_max_idle", self.metadata_max_idle),
            ("metrics_sample_window", self.metrics_sample_window),
            ("rebootstrap_trigger", self.rebootstrap_trigger),
            ("max_block", self.max_block),
            (
                "partitioner_availability_timeout",
                self.partitioner_availability_timeout,
            ),
            ("transaction_timeout", self.transaction_timeout),
            ("token_timeout", self.token_timeout),
            ("queue_delay_target", self.queue_delay_target),
            ("queue_delay_min", self.queue_delay_min),
        ]
    }

    /// The configuration with its durations and sizes brought within the bounds
    /// [`ConfigBuilder::build`] enforces, for [`crate::Producer::new`]: a configuration whose
    /// public fields were changed after it was built is capped here instead of overflowing an
    /// `Instant` or reserving an absurd buffer later. (One from `build` is unchanged; the
    /// delivery timeout `build` raised to `linger + request_timeout` may be up to twice
    /// [`Config::MAX_DURATION`].)
    pub(crate) fn within_bounds(mut self) -> Config {
        let max = Config::MAX_DURATION;
        for d in [
            &mut self.linger,
            &mut self.retry_backoff,
            &mut self.retry_backoff_max,
            &mut self.reconnect_backoff,
            &mut self.reconnect_backoff_max,
            &mut self.request_timeout,
            &mut self.metadata_max_age,
            &mut self.metadata_max_idle,
            &mut self.metrics_sample_window,
            &mut self.rebootstrap_trigger,
            &mut self.max_block,
            &mut self.partitioner_availability_timeout,
            &mut self.transaction_timeout,
            &mut self.token_timeout,
            &mut self.queue_delay_target,
            &mut self.queue_delay_min,
        ] {
            *d = (*d).min(max);
        }
        self.delivery_timeout = self.delivery_timeout.min(max * 2);
        self.max_request_size = self.max_request_size.min(Config::MAX_REQUEST_SIZE);
        self.batch_size = self.batch_size.min(self.max_request_size);
        self.batch_grow_max = self
            .batch_grow_max
            .min(self.max_request_size)
            .max(self.batch_size);
        self.metrics_sample_window = self.metrics_sample_window.max(Duration::from_millis(1));
        self.metrics_num_samples = self
            .metrics_num_samples
            .clamp(1, crate::windowed::MAX_SAMPLES);
        self
    }
}

/// Builds a [`Config`]; every setter documents the Kafka config it stands for.
#[derive(Debug, Clone)]
pub struct ConfigBuilder {
    pub(crate) config: Config,
    idempotence_explicit: Option<bool>,
    delivery_explicit: bool,
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident: $ty:ty) => {
        $(#[$doc])*
        #[must_use = "the builder is returned, not changed in place"]
        pub fn $name(mut self, v: $ty) -> Self {
            self.config.$name = v;
            self
        }
    };
}

impl ConfigBuilder {
    setter!(/// `client.id`.
        client_id: String);
    setter!(/// `acks` (default `all`).
        acks: Acks);
    setter!(/// `linger.ms` (default 5 ms).
        linger: Duration);
    setter!(/// `batch.size` (default 16384 bytes).
        batch_size: usize);
    setter!(/// `max.request.size` (default 1 MiB).
        max_request_size: usize);
    setter!(/// `batch.grow.max.bytes` (default 1 MiB; `batch_size` or 0: off): how far a batch
        /// grows past `batch_size` while its leader's in-flight slots are all busy; see
        /// [`Config::batch_grow_max`].
        batch_grow_max: usize);
    setter!(/// `buffer.memory` (default 32 MiB).
        buffer_memory: usize);
    setter!(/// `queue.delay.target.ms` (default 50 ms; zero turns the limit off): see
        /// [`Config::queue_delay_target`].
        queue_delay_target: Duration);
    setter!(/// `queue.delay.min.ms` (default 2 ms): see
        /// [`Config::queue_delay_min`].
        queue_delay_min: Duration);
    setter!(/// Most records held at once (default 1,000,000).
        buffer_max_records: usize);
    setter!(/// `compression.type` (default none).
        compression: Compression);
    setter!(/// `retry.backoff.ms` (default 100 ms).
        retry_backoff: Duration);
    setter!(/// `retry.backoff.max.ms` (default 1 s).
        retry_backoff_max: Duration);
    setter!(/// `reconnect.backoff.ms` (default 50 ms).
        reconnect_backoff: Duration);
    setter!(/// `reconnect.backoff.max.ms` (default 1 s).
        reconnect_backoff_max: Duration);
    setter!(/// `request.timeout.ms` (default 30 s).
        request_timeout: Duration);
    setter!(/// `max.in.flight.requests.per.connection` (default 5).
        max_in_flight: usize);
    setter!(/// `metadata.max.age.ms` (default 5 min).
        metadata_max_age: Duration);
    setter!(/// `metadata.max.idle.ms` (default 5 min): how long a topic goes unused (nothing sent,
        /// nothing buffered or in flight) before the producer forgets it. Not zero.
        metadata_max_idle: Duration);
    setter!(/// `metrics.sample.window.ms` (default 30 s): the length of one sample of the windowed
        /// rates. Not zero.
        metrics_sample_window: Duration);
    setter!(/// `metrics.num.samples` (default 2): how many samples a windowed rate keeps, the
        /// current one included. 1 to 64.
        metrics_num_samples: usize);
    setter!(/// `metadata.recovery.strategy` (default rebootstrap, as Kafka 4.x's Java client):
        /// what happens when no broker the producer knows of can be reached, or a broker
        /// answers Metadata with `REBOOTSTRAP_REQUIRED`.
        metadata_recovery: MetadataRecovery);
    setter!(/// `metadata.recovery.rebootstrap.trigger.ms` (default 5 min): with rebootstrap, also
        /// go back to the bootstrap list when a wanted metadata refresh has gone unanswered for
        /// this long.
        rebootstrap_trigger: Duration);
    setter!(/// `max.block.ms`: wait for unknown topics' metadata (default 60 s).
        max_block: Duration);
    setter!(/// `sasl.login.read.timeout.ms` (default 30 s): how long the OAUTHBEARER token
        /// provider may take to answer one token request. (Java bounds the read of its token
        /// endpoint's answer with this setting; here it bounds the whole provider call.)
        token_timeout: Duration);
    setter!(/// `partitioner.adaptive.partitioning.enable` (default true). Records without a key
        /// stick to one partition until about `batch_size` bytes went to it, switching at a
        /// batch boundary (at the latest after twice `batch_size`); the next partition is drawn
        /// at random, weighted against how many batches wait at each partition's leader (a
        /// slow broker's partitions get fewer records). False: drawn uniformly among the
        /// partitions with a leader, still switching after `batch_size` bytes.
        adaptive_partitioning: bool);
    setter!(/// `partitioner.availability.timeout.ms` (default zero: off). With adaptive
        /// partitioning, a partition whose leader had batches waiting and took none for longer
        /// than this is not chosen as the next sticky partition until its leader takes batches
        /// again. No effect when adaptive partitioning is off (as in the Java client).
        partitioner_availability_timeout: Duration);
    setter!(/// `partitioner.ignore.keys` (default false). True: keyed records are partitioned
        /// like records without a key (sticky, as above) instead of by murmur2 of their key.
        partitioner_ignore_keys: bool);
    setter!(/// `enable.metrics.push` (default true, as in Java): push the producer's metrics to
        /// a broker whose client-metrics subscription asks for them (KIP-714). Needs the core's
        /// `telemetry` cargo feature (default on); without it telemetry stays off.
        enable_metrics_push: bool);
    setter!(/// Largest response frame accepted (default 100 MiB).
        max_response_size: usize);
    setter!(/// Report successes too (default true); false = failures only.
        report_successes: bool);
    setter!(/// Seed for the producer's random choices.
        seed: u64);
    setter!(/// `security.protocol` (default PLAINTEXT).
        security_protocol: SecurityProtocol);

    /// TLS settings (`ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`,
    /// `ssl.endpoint.identification.algorithm`); needs `security_protocol` SSL or SASL_SSL.
    #[must_use = "the builder is returned, not changed in place"]
    pub fn tls(mut self, v: TlsConfig) -> Self {
        self.config.tls = Some(v);
        self
    }

    /// SASL authentication (`sasl.mechanism` and its credentials); needs
    /// `security_protocol` SASL_PLAINTEXT or SASL_SSL.
    #[must_use = "the builder is returned, not changed in place"]
    pub fn sasl(mut self, v: SaslConfig) -> Self {
        self.config.sasl = Some(v);
        self
    }

    /// `transactional.id` (default none): makes the producer transactional. Records are then
    /// sent inside transactions only ([`crate::Transactions::init`] once, then
    /// `begin_transaction` ... `commit_transaction`); it needs idempotence, so
    /// `enable_idempotence(false)` or `acks` other than `all` with it fail
    /// [`ConfigBuilder::build`].
    #[must_use = "the builder is returned, not changed in place"]
    pub fn transactional_id(mut self, v: impl Into<String>) -> Self {
        self.config.transactional_id = Some(v.into());
        self
    }

    /// `transaction.timeout.ms` (default 60 s): how long the coordinator lets a transaction
    /// stay open before it aborts it.
    #[must_use = "the builder is returned, not changed in place"]
    pub fn transaction_timeout(mut self, v: Duration) -> Self {
        self.config.transaction_timeout = v;
        self
    }

    /// `enable.idempotence` (default true). Set explicitly together with `acks` other than
    /// `all`, [`ConfigBuilder::build`] fails; left unset, it is turned off silently in that case,
    /// as the Java client does.
    #[must_use = "the builder is returned, not changed in place"]
    pub fn enable_idempotence(mut self, v: bool) -> Self {
        self.idempotence_explicit = Some(v);
        self
    }

    /// `delivery.timeout.ms` (default 120 s). Set explicitly below `linger + request_timeout`,
    /// [`ConfigBuilder::build`] fails; left at its default, it is raised to that sum.
    #[must_use = "the builder is returned, not changed in place"]
    pub fn delivery_timeout(mut self, v: Duration) -> Self {
        self.config.delivery_timeout = v;
        self.delivery_explicit = true;
        self
    }

    /// Checks the configuration and returns it.
    pub fn build(self) -> Result<Config, ConfigError> {
        let mut c = self.config;
        if c.bootstrap.is_empty() {
            return Err(ConfigError::NoBootstrapServers);
        }
        c.idempotence = match self.idempotence_explicit {
            Some(true) if c.acks != Acks::All => return Err(ConfigError::IdempotenceNeedsAcksAll),
            Some(v) => v,
            None => c.acks == Acks::All,
        };
        if let Some(id) = &c.transactional_id {
            if id.is_empty() {
                return Err(ConfigError::EmptyTransactionalId);
            }
            if !c.idempotence {
                return Err(ConfigError::TransactionsNeedIdempotence);
            }
            if c.transaction_timeout.is_zero()
                || c.transaction_timeout > Duration::from_millis(i32::MAX as u64)
            {
                return Err(ConfigError::InvalidTransactionTimeout(
                    c.transaction_timeout,
                ));
            }
        }
        if c.metrics_num_samples == 0 || c.metrics_num_samples > crate::windowed::MAX_SAMPLES {
            return Err(ConfigError::InvalidMetricsNumSamples(c.metrics_num_samples));
        }
        if c.max_in_flight == 0 || (c.idempotence && c.max_in_flight > 5) {
            return Err(ConfigError::InvalidMaxInFlight(c.max_in_flight));
        }
        for (name, d) in [
            ("request_timeout", c.request_timeout),
            ("delivery_timeout", c.delivery_timeout),
            ("retry_backoff", c.retry_backoff),
            ("reconnect_backoff", c.reconnect_backoff),
            ("metadata_max_age", c.metadata_max_age),
            ("metadata_max_idle", c.metadata_max_idle),
            ("metrics_sample_window", c.metrics_sample_window),
            ("rebootstrap_trigger", c.rebootstrap_trigger),
            ("token_timeout", c.token_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::ZeroDuration(name));
            }
        }
        for (name, d) in c.durations() {
            if d > Config::MAX_DURATION {
                return Err(ConfigError::DurationTooLong(name));
            }
        }
        for (setting, id) in [
            ("client_id", Some(&c.client_id)),
            ("transactional_id", c.transactional_id.as_ref()),
        ] {
            if let Some(len) = id.map(String::len).filter(|&l| l > Config::MAX_ID_LEN) {
                return Err(ConfigError::IdTooLong { setting, len });
            }
        }
        let min = c.linger + c.request_timeout;
        if c.delivery_timeout < min {
            if self.delivery_explicit {
                return Err(ConfigError::DeliveryTimeoutTooShort {
                    delivery: c.delivery_timeout,
                    min,
                });
            }
            c.delivery_timeout = min;
        }
        if c.max_request_size < 1024 {
            return Err(ConfigError::MaxRequestSizeTooSmall(c.max_request_size));
        }
        if c.max_request_size > Config::MAX_REQUEST_SIZE {
            return Err(ConfigError::MaxRequestSizeTooLarge(c.max_request_size));
        }
        c.batch_size = c.batch_size.min(c.max_request_size);
        c.batch_grow_max = c.batch_grow_max.min(c.max_request_size).max(c.batch_size);
        if c.buffer_memory < c.max_request_size {
            return Err(ConfigError::BufferSmallerThanRequest {
                buffer: c.buffer_memory,
                request: c.max_request_size,
            });
        }
        if c.buffer_max_records == 0 {
            return Err(ConfigError::NoRecordBuffer);
        }
        if !c.compression.is_supported() {
            return Err(ConfigError::CompressionNotCompiled(c.compression));
        }
        match (&c.sasl, c.security_protocol.uses_sasl()) {
            (None, true) => return Err(ConfigError::SaslMechanismMissing(c.security_protocol)),
            (Some(_), false) => {
                return Err(ConfigError::SaslWithoutSaslProtocol(c.security_protocol))
            }
            (Some(s), true)
                if s.mechanism != crate::sasl::Mechanism::OAuthBearer && s.username.is_empty() =>
            {
                return Err(ConfigError::SaslUsernameMissing(s.mechanism))
            }
            (Some(s), true)
                if s.username.len() + s.password.expose().len() > Config::MAX_SASL_CREDENTIALS =>
            {
                let len = s.username.len() + s.password.expose().len();
                return Err(ConfigError::SaslCredentialsTooLong { len });
            }
            _ => {}
        }
        match (&c.tls, c.security_protocol.uses_tls()) {
            (Some(_), false) => {
                return Err(ConfigError::TlsWithoutTlsProtocol(c.security_protocol))
            }
            (None, true) => return Err(ConfigError::TlsTrustMissing(c.security_protocol)),
            (Some(t), true) => {
                if t.ca_location.is_none() && !t.platform_roots {
                    return Err(ConfigError::TlsTrustMissing(c.security_protocol));
                }
                if t.certificate_location.is_some() != t.key_location.is_some() {
                    return Err(ConfigError::TlsClientCertificateIncomplete);
                }
            }
            (None, false) => {}
        }
        c.retry_backoff_max = c.retry_backoff_max.max(Duration::from_millis(1));
        c.reconnect_backoff_max = c.reconnect_backoff_max.max(c.reconnect_backoff);
        Ok(c)
    }
}

#[cfg(test)]
mod tests;
