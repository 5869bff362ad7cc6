//! The secured client listeners a cluster can have besides its plaintext `CLIENT` one (see
//! [`ClusterSpec::secured`](super::ClusterSpec::secured)): TLS, mutual TLS, SASL over
//! plaintext and over TLS (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), OAUTHBEARER with Kafka's
//! unsecured JWS validator, and two TLS listeners presenting a bad certificate (expired, for
//! another name). Their certificates come from the test's [`TestPki`]; their PLAIN users are in
//! the listener's JAAS line; SCRAM users are created with Kafka's own `kafka-configs` tool
//! ([`KafkaCluster::add_scram_user`]). These listeners are not proxied: producers reach each
//! broker's own port, advertised under the listener's name.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use super::{addr, other, KafkaCluster, LaunchError};
use crate::kafka::process::{log_tail, Jvm};
use crate::kafka::wire;
use crate::tls::{BrokerCert, TestPki};

/// A secured client listener (every node of a secured cluster has each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// `SSL`, presenting a certificate for `127.0.0.1` and `localhost` signed by the test CA.
    Ssl,
    /// `SSL` with `ssl.client.auth=required`: a client certificate signed by the test CA.
    Mtls,
    /// `SASL_PLAINTEXT` with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 enabled.
    SaslPlaintext,
    /// `SASL_SSL` with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 enabled (the valid certificate).
    SaslSsl,
    /// `SASL_PLAINTEXT` with OAUTHBEARER only, validated by Kafka's unsecured JWS validator
    /// (tokens with `alg: none`; test-only).
    OAuthBearer,
    /// `SSL` presenting a certificate that expired in 2020.
    SslExpired,
    /// `SSL` presenting a certificate for `broker.other.example` only.
    SslOtherName,
}

impl Listener {
    /// Every secured listener, in port order.
    pub const ALL: [Listener; 7] = [
        Listener::Ssl,
        Listener::Mtls,
        Listener::SaslPlaintext,
        Listener::SaslSsl,
        Listener::OAuthBearer,
        Listener::SslExpired,
        Listener::SslOtherName,
    ];

    /// The listener's name in the broker's configuration.
    pub fn name(self) -> &'static str {
        match self {
            Listener::Ssl => "SSL_OK",
            Listener::Mtls => "MTLS",
            Listener::SaslPlaintext => "SASL_PLAIN",
            Listener::SaslSsl => "SASL_TLS",
            Listener::OAuthBearer => "OAUTH",
            Listener::SslExpired => "SSL_EXPIRED",
            Listener::SslOtherName => "SSL_OTHER_NAME",
        }
    }

    /// Its `security.protocol`.
    pub fn protocol(self) -> &'static str {
        match self {
            Listener::Ssl | Listener::Mtls | Listener::SslExpired | Listener::SslOtherName => "SSL",
            Listener::SaslPlaintext | Listener::OAuthBearer => "SASL_PLAINTEXT",
            Listener::SaslSsl => "SASL_SSL",
        }
    }

    fn index(self) -> usize {
        Listener::ALL
            .iter()
            .position(|l| *l == self)
            .expect("every listener is in ALL")
    }

    fn certificate(self) -> Option<BrokerCert> {
        match self {
            Listener::Ssl | Listener::Mtls | Listener::SaslSsl => Some(BrokerCert::Valid),
            Listener::SslExpired => Some(BrokerCert::Expired),
            Listener::SslOtherName => Some(BrokerCert::OtherName),
            Listener::SaslPlaintext | Listener::OAuthBearer => None,
        }
    }
}

/// Ports per node for the secured listeners.
pub(super) const SECURED_PORTS: usize = Listener::ALL.len();

/// The PLAIN user every SASL listener knows (in its JAAS line).
pub const PLAIN_USER: (&str, &str) = ("alice", "alice-secret");

/// The principal the broker's own OAUTHBEARER login claims (the broker never uses it: no
/// inter-broker traffic goes through that listener, but the login module needs one).
const OAUTH_BROKER_SUB: &str = "broker";

/// Appends the secured listeners' own settings (keystores, client auth, SASL mechanisms and
/// JAAS lines) to `props`; `listeners`, `advertised.listeners` and the protocol map are written
/// by the caller from [`listener_entries`].
pub(super) fn listener_settings(pki: &TestPki, props: &mut String) {
    let mut set = |k: &str, v: &str| {
        let _ = writeln!(props, "{k}={v}");
    };
    let sasl_mechanisms = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512";
    for l in Listener::ALL {
        let prefix = format!("listener.name.{}.", l.name().to_ascii_lowercase());
        if let Some(cert) = l.certificate() {
            set(&format!("{prefix}ssl.keystore.type"), "PEM");
            set(
                &format!("{prefix}ssl.keystore.location"),
                &pki.broker_keystore(cert).display().to_string(),
            );
        }
        match l {
            Listener::Mtls => {
                set(&format!("{prefix}ssl.client.auth"), "required");
                set(&format!("{prefix}ssl.truststore.type"), "PEM");
                set(
                    &format!("{prefix}ssl.truststore.location"),
                    &pki.ca.display().to_string(),
                );
            }
            Listener::SaslPlaintext | Listener::SaslSsl => {
                set(&format!("{prefix}sasl.enabled.mechanisms"), sasl_mechanisms);
                set(
                    &format!("{prefix}plain.sasl.jaas.config"),
                    &format!(
                        "org.apache.kafka.common.security.plain.PlainLoginModule required \
                         user_{}=\"{}\";",
                        PLAIN_USER.0, PLAIN_USER.1
                    ),
                );
                for m in ["scram-sha-256", "scram-sha-512"] {
                    set(
                        &format!("{prefix}{m}.sasl.jaas.config"),
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                    );
                }
            }
            Listener::OAuthBearer => {
                set(&format!("{prefix}sasl.enabled.mechanisms"), "OAUTHBEARER");
                set(
                    &format!("{prefix}oauthbearer.sasl.jaas.config"),
                    &format!(
                        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
                         required unsecuredLoginStringClaim_sub=\"{OAUTH_BROKER_SUB}\";"
                    ),
                );
            }
            Listener::Ssl | Listener::SslExpired | Listener::SslOtherName => {}
        }
    }
}

/// `(listener entries, protocol map entries)` of the secured listeners on `ports` (indexed like
/// [`Listener::ALL`]); the listener entries are advertised as they are.
pub(super) fn listener_entries(ports: &[u16; SECURED_PORTS]) -> (Vec<String>, Vec<String>) {
    let mut listen = Vec::new();
    let mut map = Vec::new();
    for l in Listener::ALL {
        listen.push(format!("{}://127.0.0.1:{}", l.name(), ports[l.index()]));
        map.push(format!("{}:{}", l.name(), l.protocol()));
    }
    (listen, map)
}

impl KafkaCluster {
    /// Where clients reach node `id`'s `listener` (its own port, not proxied). Panics when
    /// the cluster was not made with [`ClusterSpec::secured`](super::ClusterSpec::secured).
    pub fn listener_addr(&self, id: i32, listener: Listener) -> SocketAddr {
        assert!(
            self.spec.security.is_some(),
            "this cluster has no secured listeners (ClusterSpec::secured)"
        );
        addr(self.node(id).ports.secured[listener.index()])
    }

    /// A producer's bootstrap list for `listener`, every node by `host` (`127.0.0.1` or
    /// `localhost`: both names are on the valid certificate).
    pub fn listener_bootstrap(&self, listener: Listener, host: &str) -> Vec<(String, u16)> {
        self.node_ids()
            .into_iter()
            .map(|id| (host.to_string(), self.listener_addr(id, listener).port()))
            .collect()
    }

    /// Creates (or changes) SCRAM user `user` with `password` for SCRAM-SHA-256 and
    /// SCRAM-SHA-512 with Kafka's own tool, once per mechanism (`kafka-configs
    /// --bootstrap-server .. --alter --entity-type users --entity-name USER --add-config
    /// 'SCRAM-SHA-256=[iterations=4096,password=..]'`, main class `kafka.admin.ConfigCommand`;
    /// one request may not alter a user twice) against the internal listener, then waits until
    /// every broker has both credentials (the tool returns when the controller accepted them).
    pub fn add_scram_user(&self, user: &str, password: &str) -> Result<(), LaunchError> {
        let bootstrap = self.internal_bootstrap();
        for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
            let log = self
                .dir
                .join(format!("kafka-configs-{user}-{mechanism}.log"));
            let config = format!("{mechanism}=[iterations=4096,password={password}]");
            let args = self.java_args(
                "128m",
                &[
                    "kafka.admin.ConfigCommand",
                    "--bootstrap-server",
                    &bootstrap,
                    "--alter",
                    "--entity-type",
                    "users",
                    "--entity-name",
                    user,
                    "--add-config",
                    &config,
                ],
            );
            let mut jvm =
                Jvm::start(&self.spawner, "kafka-configs", &args, &log, false).map_err(other)?;
            match jvm.wait_exit(Duration::from_secs(60)) {
                Some(s) if s.success() => {}
                status => {
                    return Err(other(format!(
                        "kafka-configs for {mechanism} user {user}: {status:?}; its output:\n{}",
                        log_tail(&log, 30)
                    )))
                }
            }
        }
        self.wait_scram_user(user)
    }

    /// Waits until every node has both credentials of `user` in its metadata image (a broker
    /// applies them from the metadata log after the controller accepted them; its
    /// authenticator's credential cache is updated from the same image).
    fn wait_scram_user(&self, user: &str) -> Result<(), LaunchError> {
        self.wait_until(
            &format!("every broker to have the SCRAM credentials of {user}"),
            Duration::from_secs(30),
            None,
            || {
                self.nodes.iter().all(|n| {
                    let a = addr(n.ports.internal);
                    wire::scram_credentials_known(a, user, Duration::from_secs(2)) == Ok(true)
                })
            },
        )
    }

    /// How many SASL re-authentications (KIP-368) the brokers' logs record, per node: each is a
    /// `SaslHandshake` a broker handled "during re-authentication" (its
    /// `SaslServerAuthenticator` logs that at DEBUG, which the test logging turns on).
    pub fn reauthentications_logged(&self) -> Vec<(i32, usize)> {
        let needle = "Handling Kafka request SASL_HANDSHAKE during re-authentication";
        self.nodes
            .iter()
            .map(|n| {
                let count = std::fs::read_to_string(&n.log)
                    .map(|s| s.lines().filter(|l| l.contains(needle)).count())
                    .unwrap_or(0);
                (n.id, count)
            })
            .collect()
    }
}
