//! TLS in front of the mock cluster, for the drivers' TLS tests: certificates made in the test
//! ([`TestPki`]: a CA, broker certificates good, for another name and expired, a client
//! certificate, a second CA nobody uses), and a TLS-terminating proxy per mock broker
//! ([`TlsCluster`]) whose ports the mock advertises, so every connection the producer opens,
//! the bootstrap's and those to the brokers Metadata names, goes through TLS.
//!
//! The mock speaks plaintext only; the proxy ends TLS (rustls, tokio-rustls, on a thread of
//! its own with its own runtime, so mio tests can use it too) and relays the bytes to the
//! broker behind it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tokio::sync::oneshot;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};

use crate::MockKafka;

/// A broker certificate the proxy presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerCert {
    /// For `127.0.0.1` and `localhost`, signed by the test CA, valid now.
    Valid,
    /// For `broker.other.example` only (a name the producer never connects to).
    OtherName,
    /// For `127.0.0.1` and `localhost`, but valid only in 2020.
    Expired,
}

/// A server certificate and its key, DER.
struct ServerCert {
    chain: Vec<CertificateDer<'static>>,
    key: Vec<u8>,
    key_pem: String,
    /// A PEM keystore as Kafka reads one (`ssl.keystore.type=PEM`): the PKCS#8 key, then
    /// the certificate.
    keystore: PathBuf,
}

/// Certificates made for one test, and the PEM files the producer's `TlsConfig` names (in a
/// directory of their own, removed on drop).
pub struct TestPki {
    dir: PathBuf,
    /// `ssl.ca.location`: the test CA.
    pub ca: PathBuf,
    /// A CA that signed nothing the brokers present (the "wrong CA").
    pub other_ca: PathBuf,
    /// `ssl.certificate.location`: a client certificate signed by the test CA.
    pub client_cert: PathBuf,
    /// `ssl.key.location`: its key (PKCS#8).
    pub client_key: PathBuf,
    /// The valid broker certificate's key (PKCS#8): with `client_cert`, a key that does not
    /// match its certificate.
    pub broker_key: PathBuf,
    ca_der: CertificateDer<'static>,
    valid: ServerCert,
    other_name: ServerCert,
    expired: ServerCert,
}

impl std::fmt::Debug for TestPki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestPki")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

fn leaf(names: &[&str], purpose: ExtendedKeyUsagePurpose) -> CertificateParams {
    let mut p = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        .expect("valid names");
    p.distinguished_name.push(
        DnType::CommonName,
        names.first().copied().unwrap_or("client"),
    );
    p.extended_key_usages = vec![purpose];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p
}

fn new_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("no names");
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(p, KeyPair::generate().expect("key")).expect("CA certificate")
}

impl TestPki {
    /// Makes every certificate and writes the client's files.
    pub fn new() -> TestPki {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "producer-tls-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let ca = new_ca("producer test CA");
        let other_ca = new_ca("some other CA");
        let write = |name: &str, pem: String| {
            let path = dir.join(name);
            std::fs::write(&path, pem).expect("write PEM");
            path
        };
        let server = |names: &[&str], expired: bool, file: &str| {
            let mut p = leaf(names, ExtendedKeyUsagePurpose::ServerAuth);
            if expired {
                p.not_before = rcgen::date_time_ymd(2020, 1, 1);
                p.not_after = rcgen::date_time_ymd(2020, 12, 31);
            }
            let key = KeyPair::generate().expect("key");
            let cert = p.signed_by(&key, &ca).expect("broker certificate");
            ServerCert {
                chain: vec![cert.der().clone()],
                key: key.serialize_der(),
                key_pem: key.serialize_pem(),
                keystore: write(file, format!("{}{}", key.serialize_pem(), cert.pem())),
            }
        };
        let valid = server(&["127.0.0.1", "localhost"], false, "broker-valid.pem");
        let other_name = server(&["broker.other.example"], false, "broker-other-name.pem");
        let expired = server(&["127.0.0.1", "localhost"], true, "broker-expired.pem");
        let client_key = KeyPair::generate().expect("key");
        let client = leaf(&["producer-client"], ExtendedKeyUsagePurpose::ClientAuth)
            .signed_by(&client_key, &ca)
            .expect("client certificate");
        TestPki {
            ca: write("ca.pem", ca.pem()),
            other_ca: write("other-ca.pem", other_ca.pem()),
            client_cert: write("client.pem", client.pem()),
            client_key: write("client.key", client_key.serialize_pem()),
            broker_key: write("broker.key", valid.key_pem.clone()),
            ca_der: ca.der().clone(),
            valid,
            other_name,
            expired,
            dir,
        }
    }

    /// Writes `contents` to a file `name` in the test's directory (for bad-input cases).
    pub fn write(&self, name: &str, contents: &[u8]) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).expect("write file");
        path
    }

    /// The PEM keystore (key and certificate) of broker certificate `cert`, for a Kafka
    /// listener's `ssl.keystore.location` with `ssl.keystore.type=PEM`.
    pub fn broker_keystore(&self, cert: BrokerCert) -> &Path {
        match cert {
            BrokerCert::Valid => &self.valid.keystore,
            BrokerCert::OtherName => &self.other_name.keystore,
            BrokerCert::Expired => &self.expired.keystore,
        }
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The proxy's TLS configuration: it presents `cert`; with `client_auth` it requires a
    /// client certificate signed by the test CA (`ssl.client.auth=required`).
    pub fn server_config(&self, cert: BrokerCert, client_auth: bool) -> Arc<ServerConfig> {
        let c = match cert {
            BrokerCert::Valid => &self.valid,
            BrokerCert::OtherName => &self.other_name,
            BrokerCert::Expired => &self.expired,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("versions");
        let builder = if client_auth {
            let mut roots = RootCertStore::empty();
            roots.add(self.ca_der.clone()).expect("CA");
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("client verifier");
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(c.key.clone()));
        Arc::new(
            builder
                .with_single_cert(c.chain.clone(), key)
                .expect("server certificate"),
        )
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TLS-terminating proxy on `127.0.0.1`: each connection's TLS handshake is completed with
/// the proxy's configuration, then bytes are relayed to the upstream address in both
/// directions. Stops (and closes every connection) on drop.
pub struct TlsProxy {
    port: u16,
    handshakes_failed: Arc<HandshakeFailures>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TlsProxy {
    /// Starts a proxy to `upstream` on a port of its own.
    pub fn start(server: Arc<ServerConfig>, upstream: (String, u16)) -> io::Result<TlsProxy> {
        Self::start_counting(server, upstream, Arc::default())
    }

    /// Starts a proxy as [`TlsProxy::start`] does, counting its failed handshakes in
    /// `handshakes_failed` (which several proxies may share).
    pub fn start_counting(
        server: Arc<ServerConfig>,
        upstream: (String, u16),
        handshakes_failed: Arc<HandshakeFailures>,
    ) -> io::Result<TlsProxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let failed = handshakes_failed.clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("tls-proxy".into())
            .spawn(move || runtime.block_on(serve(listener, server, upstream, failed, stopped)))?;
        Ok(TlsProxy {
            port,
            handshakes_failed,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The port it listens on (on `127.0.0.1`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connections whose TLS handshake the proxy could not complete, so far.
    pub fn handshakes_failed(&self) -> usize {
        self.handshakes_failed.count()
    }
}

/// A count of failed TLS handshakes that can be waited on. The proxy counts a failure after
/// rustls has written its alert, so a client can see the alert before the count moves: a
/// test that saw the alert waits for the count with [`HandshakeFailures::wait_for_one`].
#[derive(Debug, Default)]
pub struct HandshakeFailures {
    count: Mutex<usize>,
    changed: Condvar,
}

impl HandshakeFailures {
    /// Failures counted so far.
    pub fn count(&self) -> usize {
        *self.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self) {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.changed.notify_all();
    }

    /// Waits until at least one failure is counted, for at most `limit` (a bound against a
    /// hang, not a timing). Returns the count then (0 if none came).
    pub fn wait_for_one(&self, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        let mut count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        while *count == 0 {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            count = match self.changed.wait_timeout(count, deadline - now) {
                Ok((c, _)) => c,
                Err(e) => e.into_inner().0,
            };
        }
        *count
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    server: Arc<ServerConfig>,
    upstream: (String, u16),
    failed: Arc<HandshakeFailures>,
    mut stopped: oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(server);
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let acceptor = acceptor.clone();
                let upstream = upstream.clone();
                let failed = failed.clone();
                tasks.spawn(async move {
                    let mut tls = match acceptor.accept(tcp).await {
                        Ok(s) => s,
                        Err(_) => {
                            failed.record();
                            return;
                        }
                    };
                    let Ok(mut up) = tokio::net::TcpStream::connect((upstream.0.as_str(), upstream.1)).await else {
                        return;
                    };
                    let _ = up.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                });
            }
        }
    }
    tasks.abort_all();
}

/// A mock cluster behind one [`TlsProxy`] per broker, the proxies' ports advertised in its
/// Metadata: a TLS cluster as the producer sees it.
pub struct TlsCluster {
    proxies: Vec<TlsProxy>,
    handshakes_failed: Arc<HandshakeFailures>,
    plain: Vec<(String, u16)>,
    host: String,
    /// The mock behind the proxies.
    pub mock: MockKafka,
}

impl TlsCluster {
    /// Puts a proxy with `server` in front of each of `mock`'s brokers and advertises the
    /// proxies as `host` (`127.0.0.1` or `localhost`: names the valid broker certificate has).
    pub fn start(mock: MockKafka, server: Arc<ServerConfig>, host: &str) -> TlsCluster {
        let plain = mock.bootstrap();
        let mut proxies = Vec::new();
        let handshakes_failed = Arc::<HandshakeFailures>::default();
        for (i, upstream) in plain.iter().enumerate() {
            let proxy = TlsProxy::start_counting(
                server.clone(),
                upstream.clone(),
                handshakes_failed.clone(),
            )
            .expect("TLS proxy");
            mock.set_advertised(i as i32 + 1, host, proxy.port())
                .expect("advertise the proxy");
            proxies.push(proxy);
        }
        TlsCluster {
            proxies,
            handshakes_failed,
            plain,
            host: host.to_string(),
            mock,
        }
    }

    /// The producer's bootstrap: the proxies.
    pub fn bootstrap(&self) -> Vec<(String, u16)> {
        self.proxies
            .iter()
            .map(|p| (self.host.clone(), p.port()))
            .collect()
    }

    /// TLS handshakes the proxies could not complete so far, in all.
    pub fn handshakes_failed(&self) -> usize {
        self.handshakes_failed.count()
    }

    /// After a client saw a proxy's alert: waits (at most `limit`) until the failure that sent
    /// it is counted, and returns the count.
    pub fn wait_for_failed_handshake(&self, limit: Duration) -> usize {
        self.handshakes_failed.wait_for_one(limit)
    }

    /// Advertises the brokers' own plaintext listeners again and returns their bootstrap
    /// string: for reading back with the plaintext consumer once producing is done.
    pub fn plaintext_for_read_back(&self) -> String {
        for (i, (host, port)) in self.plain.iter().enumerate() {
            self.mock
                .set_advertised(i as i32 + 1, host, *port)
                .expect("advertise the broker");
        }
        self.mock.bootstrap_servers()
    }
}
