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
    let settings: [(&str, Set); 17] = [
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
        ("queue_delay_target", |b, d| b.queue_delay_target(d)),
        ("queue_delay_min", |b, d| b.queue_delay_min(d)),
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
