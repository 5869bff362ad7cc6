//! The embeddable `MioDriver` reads the TLS files when it is created (`MioDriver::new`), so an
//! unusable file is a typed start error there too. Here, not in the shared driver suite: the
//! embedded driver is mio's alone and has no handle the suite's `Running` could drive. What TLS
//! does on the wire, and the start errors of the threaded producer (and of tokio's), are the
//! suite's (`producer_tests::driver_suite::tls`, run by `tests/driver_suite.rs`).

use std::time::Duration;

use producer_core::{SecurityProtocol, TlsConfig};
use producer_driver::tls::TlsSetupError;
use producer_mio::{Config, MioDriver, StartError, TokenRange};
use producer_tests::tls::TestPki;

#[test]
fn the_embeddable_driver_reads_the_tls_files_when_it_is_created() {
    let pki = TestPki::new();
    let not_pem = pki.write("not-pem.pem", b"this is not a certificate\n");
    let config = Config::builder(vec![("127.0.0.1".to_owned(), 9)])
        .security_protocol(SecurityProtocol::Ssl)
        .tls(TlsConfig::with_ca(&not_pem))
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .expect("config");
    let poll = mio::Poll::new().unwrap();
    let e = MioDriver::<u8>::new(config, poll.registry(), TokenRange::new(mio::Token(0), 8))
        .expect_err("unusable CA file");
    assert!(
        matches!(
            e,
            StartError::Tls(TlsSetupError::NoCertificate { setting, .. })
                if setting == "ssl.ca.location"
        ),
        "{e:?}"
    );
}
