//! TLS through the driver against librdkafka's mock cluster behind a TLS-terminating proxy per
//! broker ([`crate::tls`]): certificates made in the test, every connection (the bootstrap's
//! and those to the brokers Metadata names) through TLS. Successes are read back by an
//! independent consumer (librdkafka, through the plaintext listeners) and compared record by
//! record; failures must hand every record back with the TLS error long before the delivery
//! timeout (120 s: a record failing by timeout would carry `DeliveryTimeout`, not the TLS
//! error). Unusable TLS files are typed start errors.

use std::path::Path;
use std::time::Duration;

use producer_core::{AuthError, Config, ProduceError, Record, SecurityProtocol, TlsConfig};
use producer_driver::tls::TlsSetupError;

use super::{assert_sent_record_back, send_and_report};
use crate::drive::{Driver, Failure};
use crate::running::{Options, Running, StartFailed};
use crate::tls::{BrokerCert, TestPki, TlsCluster};
use crate::verify::verify_delivered;
use crate::workload::{dead_port, now_ms, workload, Keys};
use crate::MockKafka;

const TOPIC: &str = "tls";
const PARTITIONS: i32 = 6;
const N: usize = 300;

/// Record `i` of the workload: keyed, null-keyed and explicitly partitioned, some null values,
/// headers (null, empty, repeated), explicit and missing timestamps, varied sizes.
fn records(n: usize) -> Vec<Record> {
    workload(n, &[(TOPIC, PARTITIONS)], Keys::Mixed, 100)
}

fn tls_cluster(pki: &TestPki, cert: BrokerCert, client_auth: bool, host: &str) -> TlsCluster {
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

/// Starts a producer of `driver` (tokio: a delivery future per record).
fn start(driver: Driver, config: Config) -> Running {
    let mut options = Options::new(config);
    options.futures = true;
    Running::start(driver, options)
}

/// Sends `n` records, waits for every report, and checks them against what is read back.
fn produce_and_verify(driver: Driver, cluster: &TlsCluster, config: Config, n: usize) {
    let sent = records(n);
    let start_ms = now_ms();
    let p = start(driver, config);
    let mut reports = send_and_report(&p, &sent);
    p.close();
    let end_ms = now_ms();
    let delivered: Vec<_> = (0..n as u64)
        .map(|id| match reports.remove(&id).expect("reported").result {
            Ok(meta) => meta,
            Err(e) => panic!("record {id} failed: {e:?}"),
        })
        .collect();
    verify_delivered(
        &cluster.plaintext_for_read_back(),
        TOPIC,
        PARTITIONS,
        &sent,
        &delivered,
        (start_ms, end_ms),
    );
}

/// Sends `n` records and waits for every report: each must be a TLS authentication failure
/// handing the record back. Returns the first record's reason.
fn expect_tls_failures(driver: Driver, config: Config, n: usize) -> String {
    let sent = records(n);
    let p = start(driver, config);
    let mut reports = send_and_report(&p, &sent);
    p.close();
    let mut reasons = Vec::new();
    for (id, sent) in (0u64..).zip(&sent) {
        let r = reports.remove(&id).expect("reported");
        match r.result {
            Err(Failure::Produce(ProduceError::Authentication {
                error: AuthError::Tls(reason),
                ..
            })) => reasons.push(reason),
            other => panic!("record {id}: expected a TLS authentication failure, got {other:?}"),
        }
        assert_sent_record_back(r.record, sent, id);
    }
    reasons.swap_remove(0)
}

/// Brokers presenting `cert` (and requiring a client certificate, with `client_auth`) to a
/// client that trusts the CA file `trusted` picks from the test's PKI and has no certificate of
/// its own: 50 records, each of which must fail with the TLS error and come back. Returns the
/// first record's reason.
fn handshake_failure(
    driver: Driver,
    cert: BrokerCert,
    client_auth: bool,
    trusted: fn(&TestPki) -> &Path,
) -> String {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, cert, client_auth, "127.0.0.1");
    let config = ssl_config(cluster.bootstrap(), TlsConfig::with_ca(trusted(&pki)));
    expect_tls_failures(driver, config, 50)
}

/// The test CA, which signed the brokers' certificates.
fn test_ca(pki: &TestPki) -> &Path {
    &pki.ca
}

/// 3,000 records through TLS to every broker, in large batches (requests of several hundred
/// KB, more than rustls buffers at once, so frames wait in the write queue while the socket
/// drains): each delivered once, read back as sent; no handshake failed.
pub fn tls_delivers_and_reads_back(driver: Driver) {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::Valid, false, "127.0.0.1");
    let config = Config::builder(cluster.bootstrap())
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&pki.ca))
        .batch_size(256 * 1024)
        .linger(Duration::from_millis(50))
        .build()
        .expect("config");
    produce_and_verify(driver, &cluster, config, 10 * N);
    assert_eq!(cluster.handshakes_failed(), 0);
}

/// Brokers that require a client certificate, reached by name (resolved by the driver; SNI
/// and a DNS-name check, where the other tests check an IP address): with the client's
/// certificate every record is delivered and read back; no handshake failed.
pub fn mtls_with_client_auth_required_delivers(driver: Driver) {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::Valid, true, "localhost");
    let tls =
        TlsConfig::with_ca(&pki.ca).with_client_certificate(&pki.client_cert, &pki.client_key);
    produce_and_verify(driver, &cluster, ssl_config(cluster.bootstrap(), tls), N);
    assert_eq!(cluster.handshakes_failed(), 0);
}

/// With `ssl.endpoint.identification.algorithm` off, a certificate of the right CA for another
/// name is accepted: every record is delivered and read back.
pub fn endpoint_identification_off_accepts_a_certificate_for_another_name(driver: Driver) {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::OtherName, false, "127.0.0.1");
    let tls = TlsConfig::with_ca(&pki.ca).with_endpoint_identification(false);
    produce_and_verify(driver, &cluster, ssl_config(cluster.bootstrap(), tls), N);
}

/// Brokers whose certificate another CA signed: every record fails with the TLS error
/// (`UnknownIssuer`) and comes back.
pub fn wrong_ca_fails_every_record_with_the_tls_error(driver: Driver) {
    let reason = handshake_failure(driver, BrokerCert::Valid, false, |pki| &pki.other_ca);
    assert!(reason.contains("UnknownIssuer"), "{reason}");
}

/// Brokers whose certificate names another host: every record fails with the TLS error and
/// comes back.
pub fn hostname_mismatch_fails_every_record_with_the_tls_error(driver: Driver) {
    let reason = handshake_failure(driver, BrokerCert::OtherName, false, test_ca);
    assert!(reason.contains("not valid for name"), "{reason}");
}

/// Brokers whose certificate has expired: every record fails with the TLS error and comes
/// back.
pub fn expired_certificate_fails_every_record_with_the_tls_error(driver: Driver) {
    let reason = handshake_failure(driver, BrokerCert::Expired, false, test_ca);
    assert!(reason.contains("expired"), "{reason}");
}

/// Brokers that require a client certificate, and none configured: every record fails with
/// the TLS error and comes back.
pub fn missing_client_certificate_fails_every_record_with_the_tls_error(driver: Driver) {
    let reason = handshake_failure(driver, BrokerCert::Valid, true, test_ca);
    // The broker's alert, or (when its close overtakes the alert, our first bytes being unread
    // there) the end of the connection during the handshake's last flight, as each driver's
    // TLS stack words it (tokio-rustls: "tls handshake eof").
    let end_of_connection = match driver {
        Driver::Tokio => "eof",
        Driver::MioThreaded | Driver::MioEmbedded => "closed",
    };
    assert!(
        reason.contains("CertificateRequired") || reason.contains(end_of_connection),
        "{reason}"
    );
}

/// A TLS client to a plaintext listener: every record fails with the TLS error and comes back.
pub fn tls_client_to_a_plaintext_listener_fails_every_record_with_the_tls_error(driver: Driver) {
    let pki = TestPki::new();
    let mock = MockKafka::new(1, &[(TOPIC, PARTITIONS)]).expect("mock cluster");
    let config = ssl_config(mock.bootstrap(), TlsConfig::with_ca(&pki.ca));
    let reason = expect_tls_failures(driver, config, 50);
    // The mock reads the ClientHello as a Kafka frame of absurd length and resets the
    // connection during the handshake: mio names the handshake; tokio's reason is the
    // socket's error ("connection reset by peer") or the end of the handshake.
    match driver {
        Driver::Tokio => assert!(!reason.is_empty()),
        Driver::MioThreaded | Driver::MioEmbedded => {
            assert!(reason.contains("handshake"), "{reason}")
        }
    }
}

/// A plaintext client's ApiVersions is not a TLS ClientHello: the proxy's handshake fails and
/// it answers with a TLS alert before closing. The core recognises the TLS record where a frame
/// size should be and fails every record at once with `BrokerExpectsTls` (long before the
/// delivery timeout of 120 s), each handed back.
pub fn plaintext_client_to_a_tls_listener_fails_every_record_promptly(driver: Driver) {
    let pki = TestPki::new();
    let cluster = tls_cluster(&pki, BrokerCert::Valid, false, "127.0.0.1");
    let config = Config::builder(cluster.bootstrap())
        .linger(Duration::ZERO)
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .expect("config");
    let sent = records(10);
    let p = start(driver, config);
    let mut reports = send_and_report(&p, &sent);
    for (id, sent) in (0u64..).zip(&sent) {
        let r = reports.remove(&id).expect("reported");
        assert!(
            matches!(
                r.result,
                Err(Failure::Produce(ProduceError::Authentication {
                    error: AuthError::BrokerExpectsTls,
                    ..
                }))
            ),
            "record {id}: expected BrokerExpectsTls, got {:?}",
            r.result
        );
        assert_sent_record_back(r.record, sent, id);
    }
    assert!(
        cluster.wait_for_failed_handshake(Duration::from_secs(30)) > 0,
        "the proxy saw no failed handshake"
    );
    p.close();
}

/// TLS files that cannot be used stop the producer at start with a typed error: a CA file
/// missing (its setting and path named), a CA file without a certificate, a client key file
/// without a key, a client key that does not match the client certificate.
pub fn unusable_tls_files_are_typed_start_errors(driver: Driver) {
    let pki = TestPki::new();
    let start = |tls: TlsConfig| {
        let config = ssl_config(vec![("127.0.0.1".into(), dead_port())], tls);
        Running::try_start(driver, Options::new(config)).map(|_| ())
    };
    let missing = pki.dir().join("no-such-ca.pem");
    match start(TlsConfig::with_ca(&missing)) {
        Err(StartFailed::Tls(TlsSetupError::Read { setting, path, .. })) => {
            assert_eq!(setting, "ssl.ca.location");
            assert_eq!(path, missing);
        }
        other => panic!("expected a read error, got {other:?}"),
    }
    let not_pem = pki.write("not-pem.pem", b"this is not a certificate\n");
    match start(TlsConfig::with_ca(&not_pem)) {
        Err(StartFailed::Tls(TlsSetupError::NoCertificate { setting, .. })) => {
            assert_eq!(setting, "ssl.ca.location")
        }
        other => panic!("expected no certificate, got {other:?}"),
    }
    let tls = TlsConfig::with_ca(&pki.ca).with_client_certificate(&pki.client_cert, &pki.ca);
    match start(tls) {
        Err(StartFailed::Tls(TlsSetupError::NoPrivateKey { path })) => assert_eq!(path, pki.ca),
        other => panic!("expected no private key, got {other:?}"),
    }
    let tls =
        TlsConfig::with_ca(&pki.ca).with_client_certificate(&pki.client_cert, &pki.broker_key);
    match start(tls) {
        Err(StartFailed::Tls(TlsSetupError::ClientCertificate(e))) => {
            assert!(e.to_string().contains("key"), "{e}")
        }
        other => panic!("expected a key mismatch, got {other:?}"),
    }
}
