//! TLS through the tokio driver against the mock cluster behind a TLS-terminating proxy per
//! broker (`producer_tests::tls`): certificates made in the test, every connection (the
//! bootstrap's and those to the brokers Metadata names) through TLS. Successes are read back
//! and compared record by record; failures must hand every record back with the TLS error
//! long before the delivery timeout (120 s: a record failing by timeout would carry
//! `DeliveryTimeout`, not the TLS error).

mod support;

use std::time::Duration;

use producer_core::{AuthError, SecurityProtocol, TlsConfig};
use producer_driver::tls::TlsSetupError;
use producer_tests::tls::{BrokerCert, TestPki, TlsCluster};
use producer_tests::MockKafka;
use producer_tokio::{Config, ProduceError, ProducerHandle, StartError};

use support::*;

const N: usize = 300;

fn tls_cluster(pki: &TestPki, cert: BrokerCert, client_auth: bool, host: &str) -> TlsCluster {
    init_tracing();
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    TlsCluster::start(mock, pki.server_config(cert, client_auth), host)
}

fn ssl_config(bootstrap: Vec<(String, u16)>, tls: TlsConfig) -> Config {
    Config::builder(bootstrap)
        .security_protocol(SecurityProtocol::Ssl)
        .tls(tls)
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .expect("config")
}

/// Sends `n` records, waits for every report, and checks them against what is read back.
async fn produce_and_verify(cluster: &TlsCluster, config: Config, n: usize) {
    let handle = ProducerHandle::start(config).expect("start");
    let base_ts = now_ms() - 1_000_000;
    let start_ms = now_ms();
    let sent: Vec<_> = (0..n).map(|i| test_record(i, base_ts)).collect();
    let mut futures = Vec::with_capacity(n);
    for r in &sent {
        futures.push(handle.send(r.clone()).await.expect("send"));
    }
    let mut reports = Vec::with_capacity(n);
    for (i, f) in futures.into_iter().enumerate() {
        reports.push(f.await.unwrap_or_else(|e| panic!("record {i} failed: {e}")));
    }
    handle.close().await;
    let end_ms = now_ms();
    let bootstrap = cluster.plaintext_for_read_back();
    tokio::task::block_in_place(|| {
        verify_delivered(
            &bootstrap,
            TOPIC,
            PARTITIONS,
            &sent,
            &reports,
            (start_ms, end_ms),
        )
    });
}

/// Sends `n` records and waits for every report: each must be a TLS authentication failure
/// handing the record back. Returns the first reason.
async fn expect_tls_failures(config: Config, n: usize) -> String {
    let handle = ProducerHandle::start(config).expect("start");
    let sent = records(n);
    let mut futures = Vec::with_capacity(n);
    for r in &sent {
        futures.push(handle.send(r.clone()).await.expect("send"));
    }
    let mut reasons = Vec::new();
    for (f, r) in futures.into_iter().zip(&sent) {
        let e = f.await.expect_err("a TLS failure must fail the record");
        match assert_handed_back(e, r) {
            ProduceError::Authentication {
                error: AuthError::Tls(reason),
                ..
            } => reasons.push(reason),
            other => panic!("expected a TLS authentication failure, got {other:?}"),
        }
    }
    handle.close().await;
    reasons.swap_remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_delivers_and_reads_back() {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::Valid, false, "127.0.0.1");
    // Large batches: requests of several hundred KB, more than rustls buffers at once.
    let config = Config::builder(cluster.bootstrap())
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&pki.ca))
        .batch_size(256 * 1024)
        .linger(Duration::from_millis(50))
        .build()
        .expect("config");
    produce_and_verify(&cluster, config, 10 * N).await;
    assert_eq!(cluster.handshakes_failed(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_with_client_auth_required_delivers() {
    let pki = TestPki::new();
    // By name: SNI and a DNS-name check, where the other tests check an IP address.
    let cluster = tls_cluster(&pki, BrokerCert::Valid, true, "localhost");
    let tls =
        TlsConfig::with_ca(&pki.ca).with_client_certificate(&pki.client_cert, &pki.client_key);
    produce_and_verify(&cluster, ssl_config(cluster.bootstrap(), tls), N).await;
    assert_eq!(cluster.handshakes_failed(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_identification_off_accepts_a_certificate_for_another_name() {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::OtherName, false, "127.0.0.1");
    let tls = TlsConfig::with_ca(&pki.ca).with_endpoint_identification(false);
    produce_and_verify(&cluster, ssl_config(cluster.bootstrap(), tls), N).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_ca_fails_every_record_with_the_tls_error() {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::Valid, false, "127.0.0.1");
    let reason = expect_tls_failures(
        ssl_config(cluster.bootstrap(), TlsConfig::with_ca(&pki.other_ca)),
        50,
    )
    .await;
    assert!(reason.contains("UnknownIssuer"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostname_mismatch_fails_every_record_with_the_tls_error() {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::OtherName, false, "127.0.0.1");
    let reason = expect_tls_failures(
        ssl_config(cluster.bootstrap(), TlsConfig::with_ca(&pki.ca)),
        50,
    )
    .await;
    assert!(reason.contains("not valid for name"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_certificate_fails_every_record_with_the_tls_error() {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::Expired, false, "127.0.0.1");
    let reason = expect_tls_failures(
        ssl_config(cluster.bootstrap(), TlsConfig::with_ca(&pki.ca)),
        50,
    )
    .await;
    assert!(reason.contains("expired"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_client_certificate_fails_every_record_with_the_tls_error() {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::Valid, true, "127.0.0.1");
    let reason = expect_tls_failures(
        ssl_config(cluster.bootstrap(), TlsConfig::with_ca(&pki.ca)),
        50,
    )
    .await;
    // The broker's alert, or (when its close overtakes the alert, our first bytes being
    // unread there) the end of the TLS session during the handshake's last flight.
    assert!(
        reason.contains("CertificateRequired") || reason.contains("eof"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_client_to_a_plaintext_listener_fails_every_record_with_the_tls_error() {
    let pki = TestPki::new();
    init_tracing();
    let mock = MockKafka::new(1, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let reason = expect_tls_failures(
        ssl_config(mock.bootstrap(), TlsConfig::with_ca(&pki.ca)),
        50,
    )
    .await;
    // The mock reads the ClientHello as a Kafka frame of absurd length and resets the
    // connection: the handshake fails on the socket ("connection reset by peer").
    assert!(!reason.is_empty());
}

/// A plaintext client's ApiVersions is not a TLS ClientHello: the proxy's handshake fails and
/// it answers with a TLS alert before closing. The core recognises the TLS record where a frame
/// size should be and fails every record at once with `BrokerExpectsTls` (long before the
/// delivery timeout of 120 s), each handed back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_client_to_a_tls_listener_fails_every_record_promptly() {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::Valid, false, "127.0.0.1");
    let config = Config::builder(cluster.bootstrap())
        .linger(Duration::ZERO)
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .expect("config");
    let handle = ProducerHandle::start(config).expect("start");
    let sent = records(10);
    let mut futures = Vec::new();
    for r in &sent {
        futures.push(handle.send(r.clone()).await.expect("send"));
    }
    for (f, r) in futures.into_iter().zip(&sent) {
        let e = f.await.expect_err("no broker answers");
        let err = assert_handed_back(e, r);
        assert!(
            matches!(
                err,
                ProduceError::Authentication {
                    error: AuthError::BrokerExpectsTls,
                    ..
                }
            ),
            "expected BrokerExpectsTls, got {err:?}"
        );
    }
    assert!(
        cluster.wait_for_failed_handshake(Duration::from_secs(30)) > 0,
        "the proxy saw no failed handshake"
    );
    handle.close().await;
}

#[tokio::test]
async fn unusable_tls_files_are_typed_start_errors() {
    let pki = TestPki::new();
    let start = |tls: TlsConfig| {
        ProducerHandle::start(ssl_config(vec![("127.0.0.1".into(), dead_port())], tls))
    };
    let missing = pki.dir().join("no-such-ca.pem");
    match start(TlsConfig::with_ca(&missing)) {
        Err(StartError::Tls(TlsSetupError::Read { setting, path, .. })) => {
            assert_eq!(setting, "ssl.ca.location");
            assert_eq!(path, missing);
        }
        other => panic!("expected a read error, got {other:?}"),
    }
    let not_pem = pki.write("not-pem.pem", b"this is not a certificate\n");
    match start(TlsConfig::with_ca(&not_pem)) {
        Err(StartError::Tls(TlsSetupError::NoCertificate { setting, .. })) => {
            assert_eq!(setting, "ssl.ca.location")
        }
        other => panic!("expected no certificate, got {other:?}"),
    }
    let tls = TlsConfig::with_ca(&pki.ca).with_client_certificate(&pki.client_cert, &pki.ca);
    match start(tls) {
        Err(StartError::Tls(TlsSetupError::NoPrivateKey { path })) => assert_eq!(path, pki.ca),
        other => panic!("expected no private key, got {other:?}"),
    }
    let tls =
        TlsConfig::with_ca(&pki.ca).with_client_certificate(&pki.client_cert, &pki.broker_key);
    match start(tls) {
        Err(StartError::Tls(TlsSetupError::ClientCertificate(e))) => {
            assert!(e.to_string().contains("key"), "{e}")
        }
        other => panic!("expected a key mismatch, got {other:?}"),
    }
}
