//! TLS through the mio driver (the threaded producer, which runs `MioDriver`) against the mock
//! cluster behind a TLS-terminating proxy per broker (`producer_tests::tls`): certificates
//! made in the test, every connection (the bootstrap's and those to the brokers Metadata
//! names) through TLS. Successes are read back and compared record by record; failures must
//! hand every record back with the TLS error long before the delivery timeout (120 s: a
//! record failing by timeout would carry `DeliveryTimeout`, not the TLS error).

mod support;

use std::sync::mpsc;
use std::time::Duration;

use producer_core::{AuthError, Delivery, ProduceError, Record, SecurityProtocol, TlsConfig};
use producer_driver::tls::TlsSetupError;
use producer_mio::{Config, StartError, ThreadedProducer};
use producer_tests::tls::{BrokerCert, TestPki, TlsCluster};
use producer_tests::MockKafka;

use support::*;

const TOPIC: &str = "mio-tls";
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

/// Sends `records` and returns every report, in the order they came.
fn produce(config: Config, records: &[Record]) -> Vec<Delivery<usize>> {
    let (tx, rx) = mpsc::channel();
    let producer = ThreadedProducer::<usize>::spawn(config, 4096, move |d| {
        let _ = tx.send(d);
    })
    .expect("spawn");
    for (i, r) in records.iter().enumerate() {
        producer.send_with(r.clone(), i).expect("send");
    }
    let reports: Vec<_> = (0..records.len())
        .map(|_| {
            rx.recv_timeout(HANG_GUARD)
                .expect("a report for every record")
        })
        .collect();
    producer.close();
    reports
}

/// Sends `n` records, and checks their reports against what is read back.
fn produce_and_verify(cluster: &TlsCluster, config: Config, n: usize) {
    let sent: Vec<_> = (0..n).map(|i| record(TOPIC, i)).collect();
    let start_ms = now_ms();
    let mut reports = Reports::new(n);
    for d in produce(config, &sent) {
        reports.take(d);
    }
    let end_ms = now_ms();
    let bootstrap = cluster.plaintext_for_read_back();
    verify_delivered(
        &bootstrap,
        TOPIC,
        PARTITIONS,
        &sent,
        &reports.all(),
        (start_ms, end_ms),
    );
}

/// Sends `n` records: each report must be a TLS authentication failure handing the record
/// back. Returns the first reason.
fn expect_tls_failures(config: Config, n: usize) -> String {
    let sent: Vec<_> = (0..n).map(|i| record(TOPIC, i)).collect();
    let mut reasons = Vec::new();
    for d in produce(config, &sent) {
        let f = d.result.expect_err("a TLS failure must fail the record");
        let r = &sent[d.opaque];
        assert_eq!(
            (&f.record.key, &f.record.value),
            (&r.key, &r.value),
            "record handed back"
        );
        match f.error {
            ProduceError::Authentication {
                error: AuthError::Tls(reason),
                ..
            } => reasons.push(reason),
            other => panic!("expected a TLS authentication failure, got {other:?}"),
        }
    }
    reasons.swap_remove(0)
}

#[test]
fn tls_delivers_and_reads_back() {
    with_hang_guard(|| {
        let pki = TestPki::new();
        let cluster = tls_cluster(&pki, BrokerCert::Valid, false, "127.0.0.1");
        // Large batches: requests of several hundred KB, more than rustls buffers at once,
        // so frames wait in the write queue while the socket drains.
        let config = Config::builder(cluster.bootstrap())
            .security_protocol(SecurityProtocol::Ssl)
            .tls(TlsConfig::with_ca(&pki.ca))
            .batch_size(256 * 1024)
            .linger(Duration::from_millis(50))
            .build()
            .expect("config");
        produce_and_verify(&cluster, config, 10 * N);
        assert_eq!(cluster.handshakes_failed(), 0);
    });
}

#[test]
fn mtls_with_client_auth_required_delivers() {
    with_hang_guard(|| {
        let pki = TestPki::new();
        // By name: resolved on the resolver thread, SNI and a DNS-name check.
        let cluster = tls_cluster(&pki, BrokerCert::Valid, true, "localhost");
        let tls =
            TlsConfig::with_ca(&pki.ca).with_client_certificate(&pki.client_cert, &pki.client_key);
        produce_and_verify(&cluster, ssl_config(cluster.bootstrap(), tls), N);
        assert_eq!(cluster.handshakes_failed(), 0);
    });
}

#[test]
fn endpoint_identification_off_accepts_a_certificate_for_another_name() {
    with_hang_guard(|| {
        let pki = TestPki::new();
        let cluster = tls_cluster(&pki, BrokerCert::OtherName, false, "127.0.0.1");
        let tls = TlsConfig::with_ca(&pki.ca).with_endpoint_identification(false);
        produce_and_verify(&cluster, ssl_config(cluster.bootstrap(), tls), N);
    });
}

#[test]
fn wrong_ca_fails_every_record_with_the_tls_error() {
    with_hang_guard(|| {
        let pki = TestPki::new();
        let cluster = tls_cluster(&pki, BrokerCert::Valid, false, "127.0.0.1");
        let config = ssl_config(cluster.bootstrap(), TlsConfig::with_ca(&pki.other_ca));
        let reason = expect_tls_failures(config, 50);
        assert!(reason.contains("UnknownIssuer"), "{reason}");
    });
}

#[test]
fn hostname_mismatch_fails_every_record_with_the_tls_error() {
    with_hang_guard(|| {
        let pki = TestPki::new();
        let cluster = tls_cluster(&pki, BrokerCert::OtherName, false, "127.0.0.1");
        let config = ssl_config(cluster.bootstrap(), TlsConfig::with_ca(&pki.ca));
        let reason = expect_tls_failures(config, 50);
        assert!(reason.contains("not valid for name"), "{reason}");
    });
}

#[test]
fn expired_certificate_fails_every_record_with_the_tls_error() {
    with_hang_guard(|| {
        let pki = TestPki::new();
        let cluster = tls_cluster(&pki, BrokerCert::Expired, false, "127.0.0.1");
        let config = ssl_config(cluster.bootstrap(), TlsConfig::with_ca(&pki.ca));
        let reason = expect_tls_failures(config, 50);
        assert!(reason.contains("expired"), "{reason}");
    });
}

#[test]
fn missing_client_certificate_fails_every_record_with_the_tls_error() {
    with_hang_guard(|| {
        let pki = TestPki::new();
        let cluster = tls_cluster(&pki, BrokerCert::Valid, true, "127.0.0.1");
        let config = ssl_config(cluster.bootstrap(), TlsConfig::with_ca(&pki.ca));
        let reason = expect_tls_failures(config, 50);
        // The broker's alert, or (when its close overtakes the alert) the end of the
        // connection during the handshake's last flight.
        assert!(
            reason.contains("CertificateRequired") || reason.contains("closed"),
            "{reason}"
        );
    });
}

#[test]
fn tls_client_to_a_plaintext_listener_fails_every_record_with_the_tls_error() {
    with_hang_guard(|| {
        let pki = TestPki::new();
        init_tracing();
        let mock = MockKafka::new(1, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
        let reason = expect_tls_failures(
            ssl_config(mock.bootstrap(), TlsConfig::with_ca(&pki.ca)),
            50,
        );
        // The mock reads the ClientHello as a Kafka frame of absurd length and resets the
        // connection during the handshake.
        assert!(reason.contains("handshake"), "{reason}");
    });
}

/// A plaintext client's ApiVersions is not a TLS ClientHello: the proxy's handshake fails and
/// it answers with a TLS alert before closing. The core recognises the TLS record where a frame
/// size should be and fails every record at once with `BrokerExpectsTls` (long before the
/// delivery timeout of 120 s), each handed back.
#[test]
fn plaintext_client_to_a_tls_listener_fails_every_record_promptly() {
    with_hang_guard(|| {
        let pki = TestPki::new();
        let cluster = tls_cluster(&pki, BrokerCert::Valid, false, "127.0.0.1");
        let config = Config::builder(cluster.bootstrap())
            .linger(Duration::ZERO)
            .delivery_timeout(Duration::from_secs(120))
            .build()
            .expect("config");
        let sent: Vec<_> = (0..10).map(|i| record(TOPIC, i)).collect();
        for d in produce(config, &sent) {
            let f = d.result.expect_err("no broker answers");
            assert_eq!(f.record.value, sent[d.opaque].value, "record handed back");
            assert!(
                matches!(
                    f.error,
                    ProduceError::Authentication {
                        error: AuthError::BrokerExpectsTls,
                        ..
                    }
                ),
                "expected BrokerExpectsTls, got {:?}",
                f.error
            );
        }
        assert!(
            cluster.wait_for_failed_handshake(Duration::from_secs(30)) > 0,
            "the proxy saw no failed handshake"
        );
    });
}

#[test]
fn unusable_tls_files_are_typed_start_errors() {
    let pki = TestPki::new();
    let start = |tls: TlsConfig| {
        let config = ssl_config(vec![("127.0.0.1".into(), 9)], tls);
        ThreadedProducer::<()>::spawn(config, 16, |_| {}).map(|_| ())
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
    let tls =
        TlsConfig::with_ca(&pki.ca).with_client_certificate(&pki.client_cert, &pki.broker_key);
    match start(tls) {
        Err(StartError::Tls(TlsSetupError::ClientCertificate(e))) => {
            assert!(e.to_string().contains("key"), "{e}")
        }
        other => panic!("expected a key mismatch, got {other:?}"),
    }
    // The embeddable driver reads them when it is created, too.
    let poll = mio::Poll::new().unwrap();
    let config = ssl_config(vec![("127.0.0.1".into(), 9)], TlsConfig::with_ca(&not_pem));
    let e = producer_mio::MioDriver::<u8>::new(
        config,
        poll.registry(),
        producer_mio::TokenRange::new(mio::Token(0), 8),
    )
    .expect_err("unusable CA file");
    assert!(
        matches!(e, StartError::Tls(TlsSetupError::NoCertificate { .. })),
        "{e:?}"
    );
}
