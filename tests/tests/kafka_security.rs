//! TLS and SASL against Apache Kafka's own listeners (4.1.1, from the test tier), with
//! certificates made in the test (`producer_tests::tls::TestPki`: a CA, a broker certificate
//! for 127.0.0.1 and localhost, one expired, one for another name, a client certificate).
//!
//! A shared single node has every secured listener of `Listener` (SSL, SSL with
//! `ssl.client.auth=required`, SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and
//! SCRAM-SHA-512, OAUTHBEARER with Kafka's unsecured JWS validator, and SSL with the expired and
//! the other-name certificate). The SCRAM user is created with Kafka's own `kafka-configs` tool.
//! Successes go through both drivers and are read back (librdkafka, through the internal
//! listener) and compared record by record: exactly once, in order. Every bad input fails every
//! record with a typed error, the record handed back; the authentication and TLS errors come
//! long before the delivery timeout of 120 s (a record failing by timeout would carry
//! `DeliveryTimeout`, not the error asserted).
//!
//! Re-authentication (KIP-368) has a three-node cluster of its own with
//! `connections.max.reauth.ms` of 3 s: a 30 s produce stream per driver with a leader moved
//! every 2 s: exactly once and in order, and the brokers' logs show the re-authentications.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use producer_core::{
    AuthError, Config, ConfigBuilder, ErrorCode, Mechanism, OAuthToken, ProduceError, Record,
    SaslConfig, SecurityProtocol, TlsConfig,
};
use producer_tests::kafka::suite::{produce_with_faults, read_back_and_check, rules, FaultTally};
use producer_tests::kafka::{
    cluster_slot, own_cluster, shared_cluster, ClusterSpec, KafkaCluster, Listener, TestCluster,
    PLAIN_USER,
};
use producer_tests::tls::TestPki;
use producer_tests::{
    produce_with_tokens, workload, Driver, Expect, Failure, Keys, Pacing, Run, TokenSource,
};

const PARTITIONS: i32 = 3;
const N: usize = 2_000;
const SCRAM_USER: (&str, &str) = ("bob", "bob-secret-2026");

/// The drivers each case runs through.
const DRIVERS: [Driver; 2] = [Driver::Tokio, Driver::MioThreaded];

fn spec() -> ClusterSpec {
    ClusterSpec::single()
        .name("secured")
        .secured(Arc::new(TestPki::new()))
}

/// A shared secured node, with the SCRAM user created (once per node: the process may start
/// more than one, see `shared_cluster`) by kafka-configs.
fn cluster() -> Option<TestCluster> {
    let kafka = shared_cluster(spec)?;
    static WITH_USER: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let mut with_user = WITH_USER.lock().unwrap_or_else(|e| e.into_inner());
    if !with_user.iter().any(|dir| dir == kafka.dir()) {
        let started = Instant::now();
        kafka
            .add_scram_user(SCRAM_USER.0, SCRAM_USER.1)
            .unwrap_or_else(|e| panic!("SCRAM user: {e}"));
        println!(
            "SCRAM user {} (SCRAM-SHA-256 and -512) created with kafka-configs in {:?}",
            SCRAM_USER.0,
            started.elapsed()
        );
        with_user.push(kafka.dir().to_path_buf());
    }
    drop(with_user);
    Some(kafka)
}

fn pki(kafka: &KafkaCluster) -> &TestPki {
    kafka.pki().expect("a secured cluster has its PKI")
}

/// A producer config for `listener` of `kafka` (every node by `host`): short backoffs, a 120 s
/// delivery timeout.
fn config_for(kafka: &KafkaCluster, listener: Listener, host: &str) -> ConfigBuilder {
    Config::builder(kafka.listener_bootstrap(listener, host))
        .retry_backoff(Duration::from_millis(20))
        .reconnect_backoff(Duration::from_millis(50))
        .reconnect_backoff_max(Duration::from_millis(500))
        .request_timeout(Duration::from_secs(10))
        .delivery_timeout(Duration::from_secs(120))
}

/// Produces `N` keyed records through each driver to a topic of its own and checks them
/// against what is read back: exactly once, in order.
fn delivers(kafka: &mut TestCluster, what: &str, config: Config, tokens: Option<TokenSource>) {
    for driver in DRIVERS {
        let topic = kafka.topic(&format!("sec-{what}"), PARTITIONS, 1, &[]);
        let topics = [(topic.as_str(), PARTITIONS)];
        let records = workload(N, &topics, Keys::All, 200);
        let run = produce_with_tokens(
            driver,
            config.clone(),
            &records,
            &Pacing::burst(),
            &mut |_| {},
            tokens.clone(),
        );
        let s = read_back_and_check(kafka, &rules(&topics, Expect::ExactlyOnce), &records, &run);
        assert_eq!(s.consumed, N, "{what} {driver:?}");
        assert!(s.duplicates.is_empty(), "{what} {driver:?}: duplicates");
        println!(
            "{what} {driver:?}: {N} records in {:.2} s, read back each once and in order",
            run.elapsed.as_secs_f64()
        );
    }
}

/// Produces 100 records through each driver, expecting every one to fail with an error
/// `check` accepts and to come back as sent; returns the first error's text.
fn fails(
    kafka: &mut TestCluster,
    what: &str,
    config: Config,
    tokens: Option<TokenSource>,
    check: impl Fn(&ProduceError) -> bool,
) -> String {
    let mut first = None;
    for driver in DRIVERS {
        let topic = kafka.topic(&format!("sec-bad-{what}"), PARTITIONS, 1, &[]);
        let topics = [(topic.as_str(), PARTITIONS)];
        let records = workload(100, &topics, Keys::All, 50);
        let run = produce_with_tokens(
            driver,
            config.clone(),
            &records,
            &Pacing::burst(),
            &mut |_| {},
            tokens.clone(),
        );
        let e = all_failed(what, driver, &records, &run, &check);
        println!(
            "{what} {driver:?}: all {} records failed in {:.2} s, each handed back: {e}",
            records.len(),
            run.elapsed.as_secs_f64()
        );
        first.get_or_insert(e);
    }
    first.expect("two drivers ran")
}

fn all_failed(
    what: &str,
    driver: Driver,
    records: &[Record],
    run: &Run,
    check: &impl Fn(&ProduceError) -> bool,
) -> String {
    let mut text = None;
    for (i, reports) in run.reports.iter().enumerate() {
        assert_eq!(
            reports.len(),
            1,
            "{what} {driver:?}: record {i} got {reports:?}"
        );
        match &reports[0] {
            Err(Failure::Produce(e)) if check(e) => {
                text.get_or_insert_with(|| e.to_string());
            }
            other => panic!("{what} {driver:?}: record {i}: unexpected report {other:?}"),
        }
        // As sent; a timestamp the application left unset is the one the driver stamped.
        let back = run.returned[i]
            .as_ref()
            .unwrap_or_else(|| panic!("{what} {driver:?}: record {i} failed without its record"));
        let r = &records[i];
        assert_eq!(
            (
                &back.topic,
                &back.partition,
                &back.key,
                &back.value,
                &back.headers
            ),
            (&r.topic, &r.partition, &r.key, &r.value, &r.headers),
            "{what} {driver:?}: record {i} not handed back as sent"
        );
        assert!(r.timestamp.is_none() || back.timestamp == r.timestamp);
    }
    text.expect("records were sent")
}

fn tls_error(e: &ProduceError) -> Option<&str> {
    match e {
        ProduceError::Authentication {
            error: AuthError::Tls(reason),
            ..
        } => Some(reason),
        _ => None,
    }
}

/// The core's verdict on a plaintext connection answered with TLS.
fn expects_tls(e: &ProduceError) -> bool {
    matches!(
        e,
        ProduceError::Authentication {
            error: AuthError::BrokerExpectsTls,
            ..
        }
    )
}

/// Re-authentications in every broker's log so far.
fn reauthentications(kafka: &KafkaCluster) -> usize {
    kafka
        .reauthentications_logged()
        .iter()
        .map(|(_, n)| n)
        .sum()
}

fn sasl_failed(e: &ProduceError) -> bool {
    matches!(
        e,
        ProduceError::Authentication {
            error: AuthError::Rejected {
                code: ErrorCode::SASL_AUTHENTICATION_FAILED,
                ..
            },
            ..
        }
    )
}

/// An unsecured JWS (`alg: none`) for `sub`, valid for `lifetime`: what Kafka's
/// `OAuthBearerUnsecuredValidatorCallbackHandler` accepts.
fn unsecured_jws(sub: &str, lifetime: Duration) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let header = b64(r#"{"alg":"none"}"#);
    let payload = b64(&format!(
        r#"{{"sub":"{sub}","iat":{now:.3},"exp":{:.3}}}"#,
        now + lifetime.as_secs_f64()
    ));
    format!("{header}.{payload}.")
}

/// A token provider handing out unsecured JWS tokens for `sub`, counting its calls.
fn jws_provider(
    sub: &'static str,
    lifetime: Duration,
) -> (TokenSource, Arc<std::sync::atomic::AtomicUsize>) {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let source: TokenSource = Arc::new(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(OAuthToken::new(unsecured_jws(sub, lifetime), lifetime))
    });
    (source, calls)
}

// ---- successes ----

#[test]
fn ssl_delivers() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::Ssl, "127.0.0.1")
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&pki(&kafka).ca))
        .build()
        .unwrap();
    delivers(&mut kafka, "ssl", config, None);
}

/// By name (`localhost`): SNI and a DNS-name check, where the others check an IP address.
#[test]
fn mtls_with_client_auth_required_delivers() {
    let Some(mut kafka) = cluster() else { return };
    let p = pki(&kafka);
    let config = config_for(&kafka, Listener::Mtls, "localhost")
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&p.ca).with_client_certificate(&p.client_cert, &p.client_key))
        .build()
        .unwrap();
    delivers(&mut kafka, "mtls", config, None);
}

#[test]
fn sasl_plaintext_plain_delivers() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::SaslPlaintext, "127.0.0.1")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::plain(PLAIN_USER.0, PLAIN_USER.1))
        .build()
        .unwrap();
    delivers(&mut kafka, "sasl-plain", config, None);
}

#[test]
fn sasl_plaintext_scram_sha256_delivers() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::SaslPlaintext, "127.0.0.1")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::scram_sha256(SCRAM_USER.0, SCRAM_USER.1))
        .build()
        .unwrap();
    delivers(&mut kafka, "scram-256", config, None);
}

/// The Java JAAS form of the credentials, by Kafka's names.
#[test]
fn sasl_plaintext_scram_sha512_by_jaas_config_delivers() {
    let Some(mut kafka) = cluster() else { return };
    let jaas = format!(
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{}\" password=\"{}\";",
        SCRAM_USER.0, SCRAM_USER.1
    );
    let config = config_for(&kafka, Listener::SaslPlaintext, "127.0.0.1")
        .set("security.protocol", "SASL_PLAINTEXT")
        .unwrap()
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .unwrap()
        .set("sasl.jaas.config", &jaas)
        .unwrap()
        .build()
        .unwrap();
    delivers(&mut kafka, "scram-512", config, None);
}

/// SASL_SSL with SCRAM-SHA-512, configured exactly as the README shows (Kafka's names).
#[test]
fn sasl_ssl_scram_sha512_as_the_readme_shows_delivers() {
    let Some(mut kafka) = cluster() else { return };
    let ca = pki(&kafka).ca.display().to_string();
    let config = config_for(&kafka, Listener::SaslSsl, "127.0.0.1")
        .set("security.protocol", "SASL_SSL")
        .unwrap()
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .unwrap()
        .set("sasl.username", SCRAM_USER.0)
        .unwrap()
        .set("sasl.password", SCRAM_USER.1)
        .unwrap()
        .set("ssl.ca.location", &ca)
        .unwrap()
        .build()
        .unwrap();
    assert!(
        !format!("{config:?}").contains(SCRAM_USER.1),
        "the password must not appear in Debug output"
    );
    delivers(&mut kafka, "sasl-ssl-scram", config, None);
}

#[test]
fn sasl_ssl_plain_delivers() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::SaslSsl, "localhost")
        .security_protocol(SecurityProtocol::SaslSsl)
        .tls(TlsConfig::with_ca(&pki(&kafka).ca))
        .sasl(SaslConfig::plain(PLAIN_USER.0, PLAIN_USER.1))
        .build()
        .unwrap();
    delivers(&mut kafka, "sasl-ssl-plain", config, None);
}

/// OAUTHBEARER against Kafka's unsecured JWS validator, tokens from the test's provider.
#[test]
fn oauthbearer_with_a_token_provider_delivers() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::OAuthBearer, "127.0.0.1")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::oauthbearer())
        .build()
        .unwrap();
    let (tokens, calls) = jws_provider("alice", Duration::from_secs(3600));
    delivers(&mut kafka, "oauth", config, Some(tokens));
    assert!(calls.load(std::sync::atomic::Ordering::Relaxed) >= DRIVERS.len());
}

/// Tokens of 3 s: the broker ends each session when its token expires (KIP-368: the session
/// lifetime is the token's), so over 12 s of production each connection re-authenticates
/// several times, each time with a fresh token (one past 80% of its lifetime is not used
/// again); an expired token would be refused by Kafka's validator and fail the records.
#[test]
fn oauthbearer_short_lived_tokens_are_renewed_by_reauthentication() {
    let Some(mut kafka) = cluster() else { return };
    for driver in DRIVERS {
        let before = reauthentications(&kafka);
        let topic = kafka.topic("sec-oauth-renew", PARTITIONS, 1, &[]);
        let topics = [(topic.as_str(), PARTITIONS)];
        let records = workload(12_000, &topics, Keys::All, 100);
        let config = config_for(&kafka, Listener::OAuthBearer, "127.0.0.1")
            .security_protocol(SecurityProtocol::SaslPlaintext)
            .sasl(SaslConfig::oauthbearer())
            .build()
            .unwrap();
        let (tokens, calls) = jws_provider("alice", Duration::from_secs(3));
        // 100 records every 100 ms: 12 s.
        let pacing = Pacing::chunks(100, Duration::from_millis(100));
        let run = produce_with_tokens(driver, config, &records, &pacing, &mut |_| {}, Some(tokens));
        let s = read_back_and_check(&kafka, &rules(&topics, Expect::ExactlyOnce), &records, &run);
        let reauths = reauthentications(&kafka) - before;
        let calls = calls.load(std::sync::atomic::Ordering::Relaxed);
        println!(
            "oauth renewal {driver:?}: {} records in {:.1} s, read back each once in order; \
             {calls} tokens asked for, {reauths} re-authentications in the broker's log",
            records.len(),
            run.elapsed.as_secs_f64()
        );
        assert_eq!(s.consumed, records.len());
        assert!(reauths >= 3, "{reauths} re-authentications");
        assert!(calls >= 4, "{calls} tokens for 12 s of 3 s tokens");
    }
}

// ---- bad input ----

#[test]
fn wrong_password_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::SaslPlaintext, "127.0.0.1")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::scram_sha512(SCRAM_USER.0, "not-the-password"))
        .build()
        .unwrap();
    let e = fails(&mut kafka, "wrong-password", config, None, sasl_failed);
    assert!(e.contains("SCRAM-SHA-512"), "{e}");
}

#[test]
fn wrong_plain_password_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::SaslSsl, "127.0.0.1")
        .security_protocol(SecurityProtocol::SaslSsl)
        .tls(TlsConfig::with_ca(&pki(&kafka).ca))
        .sasl(SaslConfig::plain(PLAIN_USER.0, "not-the-password"))
        .build()
        .unwrap();
    fails(
        &mut kafka,
        "wrong-plain-password",
        config,
        None,
        sasl_failed,
    );
}

#[test]
fn unknown_user_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::SaslPlaintext, "127.0.0.1")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::scram_sha256("mallory", "whatever"))
        .build()
        .unwrap();
    fails(&mut kafka, "unknown-user", config, None, sasl_failed);
}

#[test]
fn mechanism_the_listener_does_not_enable_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::OAuthBearer, "127.0.0.1")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::plain(PLAIN_USER.0, PLAIN_USER.1))
        .build()
        .unwrap();
    let e = fails(&mut kafka, "mechanism", config, None, |e| {
        matches!(
            e,
            ProduceError::Authentication {
                error: AuthError::UnsupportedMechanism {
                    mechanism: Mechanism::Plain,
                    enabled,
                },
                ..
            } if enabled == &["OAUTHBEARER".to_string()]
        )
    });
    assert!(e.contains("OAUTHBEARER"), "{e}");
}

/// A SASL client on a listener without SASL: the broker answers SaslHandshake with
/// ILLEGAL_SASL_STATE.
#[test]
fn sasl_client_to_a_listener_without_sasl_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = Config::builder(kafka.bootstrap())
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::plain(PLAIN_USER.0, PLAIN_USER.1))
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let e = fails(&mut kafka, "sasl-on-plaintext", config, None, |e| {
        matches!(
            e,
            ProduceError::Authentication {
                error: AuthError::Rejected {
                    code: ErrorCode::ILLEGAL_SASL_STATE,
                    ..
                },
                ..
            }
        )
    });
    assert!(e.contains("security.protocol"), "{e}");
}

#[test]
fn wrong_ca_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::Ssl, "127.0.0.1")
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&pki(&kafka).other_ca))
        .build()
        .unwrap();
    let e = fails(&mut kafka, "wrong-ca", config, None, |e| {
        tls_error(e).is_some()
    });
    assert!(e.contains("UnknownIssuer"), "{e}");
}

#[test]
fn hostname_mismatch_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::SslOtherName, "127.0.0.1")
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&pki(&kafka).ca))
        .build()
        .unwrap();
    let e = fails(&mut kafka, "hostname", config, None, |e| {
        tls_error(e).is_some()
    });
    assert!(e.contains("not valid for name"), "{e}");
}

/// `ssl.endpoint.identification.algorithm=none` accepts the other name's certificate (the
/// chain still verifies).
#[test]
fn endpoint_identification_off_accepts_the_other_name() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::SslOtherName, "127.0.0.1")
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&pki(&kafka).ca).with_endpoint_identification(false))
        .build()
        .unwrap();
    delivers(&mut kafka, "no-endpoint-id", config, None);
}

#[test]
fn expired_certificate_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::SslExpired, "127.0.0.1")
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&pki(&kafka).ca))
        .build()
        .unwrap();
    let e = fails(&mut kafka, "expired", config, None, |e| {
        tls_error(e).is_some()
    });
    assert!(e.contains("expired") || e.contains("Expired"), "{e}");
}

#[test]
fn missing_client_certificate_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::Mtls, "127.0.0.1")
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&pki(&kafka).ca))
        .build()
        .unwrap();
    // With TLS 1.3 the client finishes its handshake before the broker checks the (absent)
    // certificate: the broker's alert, or its close, ends the session on the first read.
    fails(&mut kafka, "no-client-cert", config, None, |e| {
        tls_error(e).is_some()
    });
}

/// A TLS client to Kafka's plaintext listener: the broker reads the ClientHello as a request of
/// absurd size and closes; the handshake fails.
#[test]
fn tls_client_to_a_plaintext_listener_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = Config::builder(kafka.bootstrap())
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&pki(&kafka).ca))
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let e = fails(&mut kafka, "tls-to-plaintext", config, None, |e| {
        tls_error(e).is_some()
    });
    assert!(
        e.contains("closed the connection during the TLS handshake"),
        "{e}"
    );
}

/// A plaintext client to Kafka's SSL listener: the broker answers our ApiVersions with a TLS
/// alert, whose first four bytes read as a frame of 352,518,912 bytes. The core recognises a
/// TLS record there and fails every record at once with `BrokerExpectsTls` (the Java client
/// just reconnects until its delivery timeout; librdkafka logs a hint).
#[test]
fn plaintext_client_to_a_tls_listener_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::Ssl, "127.0.0.1")
        .build()
        .unwrap();
    let e = fails(&mut kafka, "plaintext-to-tls", config, None, expects_tls);
    assert!(e.contains("SSL or SASL_SSL"), "{e}");
}

/// The same with SASL_PLAINTEXT against the SASL_SSL listener.
#[test]
fn sasl_plaintext_client_to_a_sasl_ssl_listener_fails_every_record_promptly() {
    let Some(mut kafka) = cluster() else { return };
    let config = config_for(&kafka, Listener::SaslSsl, "127.0.0.1")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::plain(PLAIN_USER.0, PLAIN_USER.1))
        .build()
        .unwrap();
    fails(
        &mut kafka,
        "sasl-plaintext-to-sasl-ssl",
        config,
        None,
        expects_tls,
    );
}

// ---- re-authentication ----

/// KIP-368 on a three-node cluster: `connections.max.reauth.ms` of 3 s, SCRAM-SHA-512 over
/// SASL_PLAINTEXT, 30 s of production per driver (3,000 records a second) while a leader moves
/// every 2 s: every record delivered exactly once and in order, and the brokers' logs count
/// the re-authentications they handled.
#[test]
fn reauthentication_under_leader_moves_loses_and_reorders_nothing() {
    let _slot = cluster_slot();
    let Some(kafka) = own_cluster(
        ClusterSpec::three()
            .name("reauth")
            .secured(Arc::new(TestPki::new()))
            .broker_config("connections.max.reauth.ms", "3000"),
    ) else {
        return;
    };
    kafka
        .add_scram_user(SCRAM_USER.0, SCRAM_USER.1)
        .expect("SCRAM user");
    for driver in DRIVERS {
        let before = reauthentications(&kafka);
        let topic = producer_tests::kafka::unique_topic("reauth");
        kafka.create_topic(&topic, 6, 3, &[]).expect("topic");
        let topics = [(topic.as_str(), 6)];
        let records = workload(90_000, &topics, Keys::All, 100);
        let config =
            Config::builder(kafka.listener_bootstrap(Listener::SaslPlaintext, "127.0.0.1"))
                .security_protocol(SecurityProtocol::SaslPlaintext)
                .sasl(SaslConfig::scram_sha512(SCRAM_USER.0, SCRAM_USER.1))
                .retry_backoff(Duration::from_millis(20))
                .request_timeout(Duration::from_secs(5))
                .delivery_timeout(Duration::from_secs(120))
                .build()
                .unwrap();
        // 300 records every 100 ms: 30 s.
        let pacing = Pacing::chunks(300, Duration::from_millis(100));
        let (run, tally) = produce_with_faults(driver, config, &records, &pacing, |progress| {
            let mut tally = FaultTally::default();
            let mut next = 0;
            while progress.hold(Duration::from_secs(2)) {
                let partition = next % 6;
                let info = kafka.ctl().describe(&topic).expect("describe");
                let p = &info[partition as usize];
                let to = *p
                    .replicas
                    .iter()
                    .find(|r| **r != p.leader && p.isr.contains(r))
                    .unwrap_or(&p.leader);
                if to != p.leader && kafka.ctl().move_leader(&topic, partition, to).is_ok() {
                    tally.moves += 1;
                }
                next += 1;
            }
            tally
        });
        // Leader moves leave followers catching up: read back once every replica is in sync.
        kafka
            .ensure_healthy(&[topic.as_str()], Duration::from_secs(120))
            .expect("the cluster heals after the moves");
        let rules = rules(&topics, Expect::ExactlyOnce);
        let readable: Vec<(&str, i32)> = topics.to_vec();
        let consumed = producer_tests::read_back_topics(
            &kafka.internal_bootstrap(),
            &readable,
            Duration::from_secs(120),
        );
        let s = producer_tests::check_run(&rules, &records, &run, &consumed);
        let after = kafka.reauthentications_logged();
        let reauths = reauthentications(&kafka) - before;
        println!(
            "re-authentication {driver:?}: {} records in {:.1} s with {tally}; read back {} \
             exactly once in order; the brokers logged {reauths} re-authentications (per node, \
             cumulative: {after:?})",
            records.len(),
            run.elapsed.as_secs_f64(),
            s.consumed
        );
        assert_eq!(s.consumed, records.len());
        assert!(tally.moves >= 5, "only {} leader moves", tally.moves);
        // Three connections (one per broker) over 30 s with 3 s sessions: about 30 each.
        assert!(
            reauths >= 10,
            "the brokers logged {reauths} re-authentications in 30 s of 3 s sessions"
        );
    }
}
