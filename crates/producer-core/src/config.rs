//! Producer configuration: a builder with Kafka's names in the docs, validated at build time.

use std::time::Duration;

use crate::record::Compression;
use crate::security::{SaslConfig, SecurityProtocol, TlsConfig};

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

/// A configuration that cannot be used; returned by [`ConfigBuilder::build`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `bootstrap.servers` is empty.
    #[error("no bootstrap servers given")]
    NoBootstrapServers,
    /// `delivery.timeout.ms` is shorter than `linger.ms + request.timeout.ms`.
    #[error("delivery_timeout ({delivery:?}) must be at least linger + request_timeout ({min:?})")]
    DeliveryTimeoutTooShort {
        /// The configured delivery timeout.
        delivery: Duration,
        /// `linger + request_timeout`.
        min: Duration,
    },
    /// `transactional.id` is set while idempotence is off (`enable_idempotence(false)`, or
    /// `acks` other than `all`): transactions need the idempotent producer.
    #[error("transactional_id requires idempotence (enable_idempotence true and acks=all)")]
    TransactionsNeedIdempotence,
    /// `transactional.id` is the empty string.
    #[error("transactional_id is empty")]
    EmptyTransactionalId,
    /// `transaction.timeout.ms` is zero or does not fit the protocol's 32-bit milliseconds.
    #[error("transaction_timeout = {0:?}: must be between 1 ms and i32::MAX ms")]
    InvalidTransactionTimeout(Duration),
    /// Idempotence was asked for explicitly together with `acks` other than `all`.
    #[error("enable_idempotence requires acks=all")]
    IdempotenceNeedsAcksAll,
    /// `max.in.flight.requests.per.connection` is 0, or above 5 with idempotence.
    #[error("max_in_flight_requests_per_connection = {0}: must be 1..=5 with idempotence, at least 1 otherwise")]
    InvalidMaxInFlight(usize),
    /// `max.request.size` is too small to hold a batch header.
    #[error("max_request_size = {0} is too small")]
    MaxRequestSizeTooSmall(usize),
    /// `buffer.memory` is smaller than `max.request.size`, so a maximal record could never fit.
    #[error("buffer_memory ({buffer}) must be at least max_request_size ({request})")]
    BufferSmallerThanRequest {
        /// `buffer.memory`.
        buffer: usize,
        /// `max.request.size`.
        request: usize,
    },
    /// `buffer_max_records` is 0.
    #[error("buffer_max_records must be at least 1")]
    NoRecordBuffer,
    /// The chosen compression codec was compiled out (its cargo feature is off).
    #[error("compression {0:?} is not compiled in (enable its cargo feature)")]
    CompressionNotCompiled(Compression),
    /// `metrics.num.samples` is 0 or above [`crate::windowed::MAX_SAMPLES`] (64).
    #[error("metrics_num_samples = {0}: must be 1..=64")]
    InvalidMetricsNumSamples(usize),
    /// A duration is zero where it must be positive.
    #[error("{0} must be positive")]
    ZeroDuration(&'static str),
    /// A duration is longer than [`Config::MAX_DURATION`] (`i32::MAX` ms, about 24.8 days):
    /// `Duration::MAX` and other durations no deadline could be armed with.
    #[error("{0} is longer than the longest duration taken, i32::MAX ms (about 24.8 days)")]
    DurationTooLong(&'static str),
    /// `max.request.size` is larger than [`Config::MAX_REQUEST_SIZE`] (1 GiB).
    #[error("max_request_size = {0} is larger than the largest taken, {max} (1 GiB)", max = Config::MAX_REQUEST_SIZE)]
    MaxRequestSizeTooLarge(usize),
    /// `client.id` or `transactional.id` is longer than its INT16 length prefix can say
    /// ([`Config::MAX_ID_LEN`] bytes).
    #[error("{setting} is {len} bytes long: at most {max} bytes are taken", max = Config::MAX_ID_LEN)]
    IdTooLong {
        /// `client_id` or `transactional_id`.
        setting: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// The SASL username and password together are longer than
    /// [`Config::MAX_SASL_CREDENTIALS`] bytes (the broker's `sasl.server.max.receive.size`
    /// default, 512 KiB): no broker would take the token.
    #[error("the SASL username and password are {len} bytes together: at most {max} are taken", max = Config::MAX_SASL_CREDENTIALS)]
    SaslCredentialsTooLong {
        /// Their length in bytes together.
        len: usize,
    },
    /// `security.protocol` is SASL_PLAINTEXT or SASL_SSL but no SASL mechanism is configured.
    #[error("security.protocol {0} needs a SASL mechanism (sasl.mechanism)")]
    SaslMechanismMissing(SecurityProtocol),
    /// A SASL mechanism is configured but `security.protocol` is PLAINTEXT or SSL.
    #[error("a SASL mechanism is configured but security.protocol is {0} (use SASL_PLAINTEXT or SASL_SSL)")]
    SaslWithoutSaslProtocol(SecurityProtocol),
    /// PLAIN or SCRAM without a username.
    #[error("SASL {0} needs a username (sasl.username)")]
    SaslUsernameMissing(crate::sasl::Mechanism),
    /// `security.protocol` SSL or SASL_SSL without a way to verify brokers: neither
    /// `ssl.ca.location` nor the platform roots.
    #[error("security.protocol {0} needs ssl.ca.location (or the platform roots, opted in)")]
    TlsTrustMissing(SecurityProtocol),
    /// TLS settings with `security.protocol` PLAINTEXT or SASL_PLAINTEXT.
    #[error("TLS settings are given but security.protocol is {0} (use SSL or SASL_SSL)")]
    TlsWithoutTlsProtocol(SecurityProtocol),
    /// A client certificate without its key, or a key without its certificate.
    #[error("ssl.certificate.location and ssl.key.location go together (mTLS needs both)")]
    TlsClientCertificateIncomplete,
}

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
    /// `buffer.memory`: bytes of records held at most.
    pub buffer_memory: usize,
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
                buffer_memory: 32 * 1024 * 1024,
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
    fn durations(&self) -> [(&'static str, Duration); 15] {
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
        ] {
            *d = (*d).min(max);
        }
        self.delivery_timeout = self.delivery_timeout.min(max * 2);
        self.max_request_size = self.max_request_size.min(Config::MAX_REQUEST_SIZE);
        self.batch_size = self.batch_size.min(self.max_request_size);
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
    setter!(/// `buffer.memory` (default 32 MiB).
        buffer_memory: usize);
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
mod tests {
    use super::*;

    fn b() -> ConfigBuilder {
        Config::builder([("localhost", 9092)])
    }

    #[test]
    fn defaults_are_java_4x() {
        let c = b().build().unwrap();
        assert_eq!(c.acks, Acks::All);
        assert!(c.idempotence);
        assert_eq!(c.linger, Duration::from_millis(5));
        assert_eq!(c.batch_size, 16384);
        assert_eq!(c.max_request_size, 1 << 20);
        assert_eq!(c.delivery_timeout, Duration::from_secs(120));
        assert_eq!(c.request_timeout, Duration::from_secs(30));
        assert_eq!(c.max_in_flight, 5);
    }

    /// One rule of [`ConfigBuilder::build`] per test: the builder, and the error it must give.
    macro_rules! refused {
        ($name:ident, $builder:expr, $error:expr) => {
            #[test]
            fn $name() {
                assert_eq!($builder.build().unwrap_err(), $error);
            }
        };
    }

    refused!(
        no_bootstrap_servers,
        Config::builder(Vec::<(String, u16)>::new()),
        ConfigError::NoBootstrapServers
    );
    refused!(
        explicit_delivery_timeout_below_linger_plus_request_timeout,
        b().delivery_timeout(Duration::from_secs(1)),
        ConfigError::DeliveryTimeoutTooShort {
            delivery: Duration::from_secs(1),
            min: Duration::from_millis(30_005)
        }
    );
    refused!(
        explicit_idempotence_needs_acks_all,
        b().acks(Acks::Leader).enable_idempotence(true),
        ConfigError::IdempotenceNeedsAcksAll
    );
    refused!(
        idempotence_allows_at_most_five_in_flight,
        b().max_in_flight(6),
        ConfigError::InvalidMaxInFlight(6)
    );
    refused!(
        zero_in_flight,
        b().max_in_flight(0),
        ConfigError::InvalidMaxInFlight(0)
    );
    refused!(
        max_request_size_too_small_for_a_batch,
        b().max_request_size(10),
        ConfigError::MaxRequestSizeTooSmall(10)
    );
    refused!(
        buffer_smaller_than_one_request,
        b().buffer_memory(2048),
        ConfigError::BufferSmallerThanRequest {
            buffer: 2048,
            request: 1 << 20
        }
    );
    refused!(
        sasl_protocol_without_a_mechanism,
        b().security_protocol(SecurityProtocol::SaslSsl),
        ConfigError::SaslMechanismMissing(SecurityProtocol::SaslSsl)
    );
    refused!(
        sasl_mechanism_without_a_sasl_protocol,
        b().security_protocol(SecurityProtocol::Ssl)
            .sasl(SaslConfig::plain("u", "p")),
        ConfigError::SaslWithoutSaslProtocol(SecurityProtocol::Ssl)
    );
    refused!(
        scram_without_a_username,
        b().security_protocol(SecurityProtocol::SaslPlaintext)
            .sasl(SaslConfig::scram_sha256("", "p")),
        ConfigError::SaslUsernameMissing(crate::sasl::Mechanism::ScramSha256)
    );
    refused!(
        tls_without_a_way_to_verify_brokers,
        b().security_protocol(SecurityProtocol::Ssl),
        ConfigError::TlsTrustMissing(SecurityProtocol::Ssl)
    );
    refused!(
        tls_settings_on_a_plaintext_protocol,
        b().tls(TlsConfig::with_ca("ca.pem")),
        ConfigError::TlsWithoutTlsProtocol(SecurityProtocol::Plaintext)
    );
    refused!(
        a_client_certificate_without_its_key,
        b().security_protocol(SecurityProtocol::Ssl).tls(TlsConfig {
            certificate_location: Some("client.pem".into()),
            ..TlsConfig::with_ca("ca.pem")
        }),
        ConfigError::TlsClientCertificateIncomplete
    );
    refused!(
        zero_request_timeout,
        b().request_timeout(Duration::ZERO),
        ConfigError::ZeroDuration("request_timeout")
    );

    /// Every duration setting at `Duration::MAX` is a typed error naming it (no `Instant`
    /// overflow later, no panic adding `linger + request_timeout`); at
    /// [`Config::MAX_DURATION`] each is taken.
    #[test]
    fn duration_max_for_each_duration_setting_is_a_typed_error() {
        type Set = fn(ConfigBuilder, Duration) -> ConfigBuilder;
        let settings: [(&str, Set); 15] = [
            ("linger", |b, d| b.linger(d)),
            ("retry_backoff", |b, d| b.retry_backoff(d)),
            ("retry_backoff_max", |b, d| b.retry_backoff_max(d)),
            ("reconnect_backoff", |b, d| b.reconnect_backoff(d)),
            ("reconnect_backoff_max", |b, d| b.reconnect_backoff_max(d)),
            ("request_timeout", |b, d| b.request_timeout(d)),
            ("delivery_timeout", |b, d| b.delivery_timeout(d)),
            ("metadata_max_age", |b, d| b.metadata_max_age(d)),
            ("metadata_max_idle", |b, d| b.metadata_max_idle(d)),
            ("metrics_sample_window", |b, d| b.metrics_sample_window(d)),
            ("rebootstrap_trigger", |b, d| b.rebootstrap_trigger(d)),
            ("max_block", |b, d| b.max_block(d)),
            ("partitioner_availability_timeout", |b, d| {
                b.partitioner_availability_timeout(d)
            }),
            ("transaction_timeout", |b, d| b.transaction_timeout(d)),
            ("token_timeout", |b, d| b.token_timeout(d)),
        ];
        assert_eq!(
            settings.map(|(n, _)| n),
            b().build().unwrap().durations().map(|(n, _)| n),
            "every duration setting is tried"
        );
        for (name, set) in settings {
            assert_eq!(
                set(b(), Duration::MAX).build().unwrap_err(),
                ConfigError::DurationTooLong(name),
                "{name}"
            );
            let over = Config::MAX_DURATION + Duration::from_nanos(1);
            assert_eq!(
                set(b(), over).build().unwrap_err(),
                ConfigError::DurationTooLong(name),
                "{name}"
            );
            // Delivery must cover linger + request_timeout, set explicitly here.
            let at_max = set(b(), Config::MAX_DURATION)
                .delivery_timeout(Config::MAX_DURATION)
                .build();
            match name {
                "linger" | "request_timeout" => assert!(
                    matches!(at_max, Err(ConfigError::DeliveryTimeoutTooShort { .. })),
                    "{name}: {at_max:?}"
                ),
                _ => {
                    let c = at_max.unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(c
                        .durations()
                        .iter()
                        .all(|(_, d)| *d <= Config::MAX_DURATION));
                }
            }
        }
        // The transactional producer's own check comes first and says the same.
        assert_eq!(
            b().transactional_id("t")
                .transaction_timeout(Duration::MAX)
                .build()
                .unwrap_err(),
            ConfigError::InvalidTransactionTimeout(Duration::MAX)
        );
        // linger and request_timeout both at the maximum: the default delivery timeout is
        // raised to their sum, which no arithmetic overflows.
        let c = b()
            .linger(Config::MAX_DURATION)
            .request_timeout(Config::MAX_DURATION)
            .build()
            .unwrap();
        assert_eq!(c.delivery_timeout, Config::MAX_DURATION * 2);
    }

    /// Every size setting at `usize::MAX`: `max_request_size` is a typed error (a request's
    /// size is an INT32 on the wire); `batch_size` is lowered to `max_request_size` (no batch
    /// buffer of `usize::MAX` bytes is ever asked for); `buffer_memory`, `buffer_max_records`
    /// and `max_response_size` are limits, taken as they are.
    #[test]
    fn usize_max_for_each_size_setting_is_typed_or_capped() {
        assert_eq!(
            b().max_request_size(usize::MAX).build().unwrap_err(),
            ConfigError::MaxRequestSizeTooLarge(usize::MAX)
        );
        assert_eq!(
            b().max_request_size(Config::MAX_REQUEST_SIZE + 1)
                .buffer_memory(usize::MAX)
                .build()
                .unwrap_err(),
            ConfigError::MaxRequestSizeTooLarge(Config::MAX_REQUEST_SIZE + 1)
        );
        let c = b()
            .batch_size(usize::MAX)
            .buffer_memory(usize::MAX)
            .buffer_max_records(usize::MAX)
            .max_response_size(usize::MAX)
            .build()
            .unwrap();
        assert_eq!(c.batch_size, c.max_request_size);
        assert_eq!(c.buffer_memory, usize::MAX);
        assert_eq!(c.buffer_max_records, usize::MAX);
        assert_eq!(c.max_response_size, usize::MAX);
        let c = b()
            .max_request_size(Config::MAX_REQUEST_SIZE)
            .buffer_memory(usize::MAX)
            .batch_size(usize::MAX)
            .build()
            .unwrap();
        assert_eq!(c.batch_size, Config::MAX_REQUEST_SIZE);
    }

    /// A client id or transactional id longer than its INT16 length prefix can say is a typed
    /// error, never a length that wraps on the wire; at the limit each is taken.
    #[test]
    fn ids_too_long_for_their_length_prefix_are_typed_errors() {
        let long = "c".repeat(Config::MAX_ID_LEN + 1);
        assert_eq!(
            b().client_id(long.clone()).build().unwrap_err(),
            ConfigError::IdTooLong {
                setting: "client_id",
                len: 32768
            }
        );
        assert_eq!(
            b().transactional_id(long).build().unwrap_err(),
            ConfigError::IdTooLong {
                setting: "transactional_id",
                len: 32768
            }
        );
        let at_limit = "c".repeat(Config::MAX_ID_LEN);
        let c = b()
            .client_id(at_limit.clone())
            .transactional_id(at_limit)
            .build()
            .unwrap();
        assert_eq!(c.client_id.len(), 32767);
    }

    /// SASL credentials no broker would read (more than `sasl.server.max.receive.size`) are a
    /// typed error, which shows neither of them.
    #[test]
    fn sasl_credentials_too_long_are_a_typed_error_without_them() {
        let password = "p".repeat(Config::MAX_SASL_CREDENTIALS);
        let e = b()
            .security_protocol(SecurityProtocol::SaslSsl)
            .tls(TlsConfig::with_ca("ca.pem"))
            .sasl(SaslConfig::plain("alice", password))
            .build()
            .unwrap_err();
        assert_eq!(
            e,
            ConfigError::SaslCredentialsTooLong {
                len: 5 + Config::MAX_SASL_CREDENTIALS
            }
        );
        assert!(!e.to_string().contains("alice") && !e.to_string().contains("ppp"));
    }

    /// A configuration changed after `build` (its fields are public) is brought within the
    /// bounds when a producer takes it, instead of overflowing later.
    #[test]
    fn a_config_changed_after_build_is_bounded_by_the_producer() {
        let mut c = b().build().unwrap();
        c.linger = Duration::MAX;
        c.delivery_timeout = Duration::MAX;
        c.batch_size = usize::MAX;
        c.max_request_size = usize::MAX;
        let c = c.within_bounds();
        assert_eq!(c.linger, Config::MAX_DURATION);
        assert_eq!(c.delivery_timeout, Config::MAX_DURATION * 2);
        assert_eq!(c.max_request_size, Config::MAX_REQUEST_SIZE);
        assert_eq!(c.batch_size, Config::MAX_REQUEST_SIZE);
    }

    #[test]
    fn implicit_settings_adjust_silently() {
        let c = b().acks(Acks::Leader).build().unwrap();
        assert!(
            !c.idempotence,
            "idempotence turns off when acks != all and it was not asked for"
        );
        let c = b().max_in_flight(10).acks(Acks::Leader).build().unwrap();
        assert_eq!(c.max_in_flight, 10);
        let c = b()
            .request_timeout(Duration::from_secs(200))
            .build()
            .unwrap();
        assert_eq!(
            c.delivery_timeout,
            Duration::from_millis(200_005),
            "default delivery timeout is raised"
        );
    }
}
