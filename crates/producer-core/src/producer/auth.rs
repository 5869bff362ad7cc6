//! SASL authentication, as part of each connection's setup: SaslHandshake and the
//! SaslAuthenticate rounds (requests and answers here), OAUTHBEARER tokens asked of the
//! application (waited for `token_timeout` at most), re-authentication before the session the
//! broker gave ends (KIP-368), and what a failure does: the connection closes and backs off,
//! and the records waiting fail at once. Credentials sent without TLS are reported once
//! ([`Event::CredentialsInPlaintext`]).

use std::time::{Duration, Instant};

/// The share of a token's lifetime during which new sessions use it; after it the next
/// authentication asks for a fresh token.
const TOKEN_REFRESH_FACTOR: f64 = 0.8;

use crate::classify::{decide, Action, Request};
use crate::connection::{ConnState, RequestKind};
use crate::protocol::sasl_authenticate::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use crate::protocol::sasl_handshake::{SaslHandshakeRequest, SaslHandshakeResponse};
use crate::protocol::ApiKey;
use crate::sasl::{AuthError, Exchange, NonceSource, OAuthToken, Step};
use crate::timer::TimerKind;
use crate::types::{ConnId, Event, Output, ProduceError};
use crate::ErrorCode;

use super::Producer;

/// The OAUTHBEARER token, as far as the producer has one.
#[derive(Debug, Default)]
pub(super) struct Tokens {
    /// The latest token and when it stops being valid.
    current: Option<(OAuthToken, Instant)>,
    /// A `TokenRequest` is out and not answered yet: when it stops being waited for
    /// (`token_timeout` after it was asked).
    requested_until: Option<Instant>,
}

/// The producer's SASL state beyond each connection's.
#[derive(Debug)]
pub(super) struct Auth {
    pub(super) tokens: Tokens,
    nonces: NonceSource,
    /// [`Event::CredentialsInPlaintext`] was emitted (once per producer).
    warned_plaintext: bool,
}

impl Auth {
    /// SCRAM nonces from the configured seed, or from the operating system's random source.
    pub(super) fn new(config: &crate::Config) -> Self {
        let seed = config.sasl.as_ref().and_then(|s| s.nonce_seed);
        let key = seed.unwrap_or_else(|| {
            let mut key = [0u8; 32];
            if config.sasl.is_some() {
                // Without entropy SCRAM nonces would be predictable: refuse to go on silently.
                getrandom::fill(&mut key).expect("the operating system's random source failed");
            }
            key
        });
        Auth {
            tokens: Tokens::default(),
            nonces: NonceSource::new(key),
            warned_plaintext: false,
        }
    }
}

impl<T> Producer<T> {
    /// Starts authenticating `conn` (after ApiVersions, or again before the session ends):
    /// SaslHandshake with the configured mechanism.
    pub(super) fn begin_authentication(&mut self, conn: ConnId, reauthentication: bool) {
        let Some(sasl) = self.config.sasl.as_ref() else {
            return;
        };
        let mechanism = sasl.mechanism;
        let Some(c) = self.brokers.conn_mut(conn) else {
            return;
        };
        let Some(versions) = c.versions.and_then(|v| v.sasl) else {
            self.authentication_failed(conn, AuthError::NotOffered);
            return;
        };
        c.state = if reauthentication {
            ConnState::Reauthenticating
        } else {
            ConnState::Authenticating
        };
        c.reauthenticate_at = None;
        let version = versions.handshake;
        let req = SaslHandshakeRequest {
            mechanism: mechanism.kafka_name(),
        };
        self.send_control_request(
            conn,
            ApiKey::SaslHandshake,
            version,
            RequestKind::SaslHandshake,
            |b| req.encode(version, b),
        );
    }

    /// The answer to SaslHandshake: on success the mechanism's exchange starts (or waits for an
    /// OAUTHBEARER token). Returns false when it could not be parsed.
    pub(super) fn on_sasl_handshake(&mut self, conn: ConnId, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = SaslHandshakeResponse::parse(version, body) else {
            return false;
        };
        let resp = parsed.body;
        let Some(sasl) = self.config.sasl.as_ref() else {
            return false;
        };
        let mechanism = sasl.mechanism;
        if decide(Request::SaslHandshake, resp.error_code, self.mode()) != Action::Ok {
            // The table fails the authentication; the code only says how to describe it.
            let error = match resp.error_code {
                ErrorCode::UNSUPPORTED_SASL_MECHANISM => AuthError::UnsupportedMechanism {
                    mechanism,
                    enabled: resp.mechanisms,
                },
                code => AuthError::Rejected {
                    code,
                    message: Some(if code == ErrorCode::ILLEGAL_SASL_STATE {
                        // What Kafka answers on a listener without SASL.
                        "in answer to SaslHandshake: the listener does not take SASL (is \
                         security.protocol right?)"
                            .to_string()
                    } else {
                        "in answer to SaslHandshake".to_string()
                    }),
                },
            };
            self.authentication_failed(conn, error);
            return true;
        }
        if mechanism == crate::Mechanism::OAuthBearer && self.valid_token().is_none() {
            self.request_token();
            return true;
        }
        self.start_exchange(conn);
        true
    }

    /// The token the producer holds, if it is still valid now.
    fn valid_token(&self) -> Option<&OAuthToken> {
        self.auth
            .tokens
            .current
            .as_ref()
            .filter(|(_, until)| *until > self.now)
            .map(|(t, _)| t)
    }

    /// Asks the application for an OAUTHBEARER token, once at a time, and arms its deadline:
    /// `token_timeout` from now.
    fn request_token(&mut self) {
        if self.auth.tokens.requested_until.is_none() {
            let until = self.now + self.config.token_timeout;
            self.auth.tokens.requested_until = Some(until);
            self.timers.arm(until, TimerKind::TokenRequest);
            self.outputs.push_back(Output::TokenRequest);
        }
    }

    /// The token request's timer fired: if the request that is out has reached its deadline,
    /// it is no longer waited for, and the connections waiting for it fail to authenticate
    /// ([`AuthError::TokenTimedOut`]) and back off. An answer that comes later is still taken
    /// ([`Producer::token_arrived`]).
    pub(super) fn token_request_expired(&mut self) {
        let now = self.now;
        if self
            .auth
            .tokens
            .requested_until
            .is_none_or(|until| until > now)
        {
            return; // answered, or asked again since (its own timer is armed)
        }
        self.auth.tokens.requested_until = None;
        let error = AuthError::TokenTimedOut(self.config.token_timeout);
        for conn in self.waiting_for_token() {
            self.authentication_failed(conn, error.clone());
        }
    }

    /// The connections whose SaslHandshake was answered and that wait for a token to start
    /// their exchange.
    fn waiting_for_token(&self) -> Vec<ConnId> {
        self.brokers
            .iter()
            .filter_map(|b| b.conn.as_ref())
            .filter(|c| {
                matches!(
                    c.state,
                    ConnState::Authenticating | ConnState::Reauthenticating
                ) && c.exchange.is_none()
                    && c.inflight.is_empty()
            })
            .map(|c| c.id)
            .collect()
    }

    /// Starts the mechanism's exchange on `conn` and sends its first token.
    fn start_exchange(&mut self, conn: ConnId) {
        let Some(sasl) = self.config.sasl.as_ref() else {
            return;
        };
        if !self.config.security_protocol.uses_tls() && !self.auth.warned_plaintext {
            self.auth.warned_plaintext = true;
            let node_id = self.brokers.slot(conn.slot).node_id;
            self.outputs
                .push_back(Output::Event(Event::CredentialsInPlaintext {
                    node_id,
                    mechanism: sasl.mechanism,
                }));
        }
        let token = self.valid_token().cloned();
        let started = Exchange::start(
            sasl.mechanism,
            &sasl.username,
            &sasl.password,
            token.as_ref(),
            &mut self.auth.nonces,
        );
        match started {
            Ok((exchange, first)) => {
                if let Some(c) = self.brokers.conn_mut(conn) {
                    c.exchange = Some(exchange);
                }
                self.send_sasl_token(conn, first.as_slice());
            }
            Err(e) => self.authentication_failed(conn, e),
        }
    }

    /// Sends one token of the exchange in a SaslAuthenticate request.
    fn send_sasl_token(&mut self, conn: ConnId, token: &[u8]) {
        let Some(version) = self
            .brokers
            .conn(conn)
            .and_then(|c| c.versions)
            .and_then(|v| v.sasl)
            .map(|v| v.authenticate)
        else {
            return;
        };
        if let Some(c) = self.brokers.conn_mut(conn) {
            c.auth_sent_at = Some(self.now);
        }
        let req = SaslAuthenticateRequest { auth_bytes: token };
        // The token may hold the password or the bearer token: the frame is wiped once sent.
        self.send_secret_request(
            conn,
            ApiKey::SaslAuthenticate,
            version,
            RequestKind::SaslAuthenticate,
            token.len(),
            |b| req.encode(version, b),
        );
    }

    /// The answer to one SaslAuthenticate round: the next token, the end of the exchange, or a
    /// failure. Returns false when it could not be parsed.
    pub(super) fn on_sasl_authenticate(&mut self, conn: ConnId, version: i16, body: &[u8]) -> bool {
        let Ok(parsed) = SaslAuthenticateResponse::parse(version, body) else {
            return false;
        };
        let resp = parsed.body;
        if decide(Request::SaslAuthenticate, resp.error_code, self.mode()) != Action::Ok {
            let error = AuthError::Rejected {
                code: resp.error_code,
                message: resp.error_message,
            };
            self.authentication_failed(conn, error);
            return true;
        }
        let Some(c) = self.brokers.conn_mut(conn) else {
            return true;
        };
        let Some(exchange) = c.exchange.as_mut() else {
            self.authentication_failed(
                conn,
                AuthError::Scram("an answer without an exchange".into()),
            );
            return true;
        };
        match exchange.step(&resp.auth_bytes) {
            Ok(Step::Send(next)) => self.send_sasl_token(conn, next.as_slice()),
            Ok(Step::Done) => self.authenticated(conn, resp.session_lifetime_ms),
            Err(e) => self.authentication_failed(conn, e),
        }
        true
    }

    /// The exchange succeeded: the connection is ready, and re-authenticates at 85-95% of the
    /// session lifetime the broker gave (as the Java client does), if it gave one, counted from
    /// when the last SaslAuthenticate was sent (the broker's session cannot have started
    /// earlier). An answer so late that this moment has passed starts re-authentication at
    /// once, before any other request.
    fn authenticated(&mut self, conn: ConnId, session_lifetime_ms: i64) {
        let now = self.now;
        let factor = self.rng.factor(0.85, 0.95);
        let Some(c) = self.brokers.conn_mut(conn) else {
            return;
        };
        let start = c.auth_sent_at.unwrap_or(now);
        let reauth_at = (session_lifetime_ms > 0).then(|| {
            let lifetime = Duration::from_millis(session_lifetime_ms as u64);
            start + lifetime.mul_f64(factor)
        });
        let reauthentication = c.state == ConnState::Reauthenticating;
        c.state = ConnState::Ready;
        c.exchange = None;
        c.reauthenticate_at = reauth_at;
        if let Some(at) = reauth_at {
            self.timers
                .arm(at, TimerKind::Reauthenticate { slot: conn.slot });
        }
        let node_id = self.brokers.slot(conn.slot).node_id;
        self.outputs.push_back(Output::Event(Event::Authenticated {
            node_id,
            reauthentication,
            session_lifetime_ms: session_lifetime_ms.max(0),
        }));
        if reauthentication {
            self.telemetry.connection_ready();
            self.mark_broker_dirty(conn.slot);
        } else {
            self.connection_usable(conn);
        }
        if reauth_at.is_some_and(|at| at <= now) {
            // Requests are sent only from `poll_output`, after this: the connection is
            // re-authenticating by then and sends none.
            self.begin_authentication(conn, true);
        }
    }

    /// The slot's re-authentication timer fired: a ready connection whose time has come
    /// authenticates again (requests in flight are answered first; new ones wait).
    pub(super) fn reauthentication_due(&mut self, slot: u32) {
        let now = self.now;
        let Some(c) = self.brokers.slot(slot).conn.as_ref() else {
            return;
        };
        if c.state == ConnState::Ready && c.reauthenticate_at.is_some_and(|at| at <= now) {
            let conn = c.id;
            self.begin_authentication(conn, true);
        }
    }

    /// [`Producer::handle_token`]: the token provider answered (in time or after
    /// `token_timeout`: a late token is taken all the same). Connections waiting for a token
    /// start their exchange, or fail.
    pub(super) fn token_arrived(&mut self, token: Result<OAuthToken, String>) {
        self.auth.tokens.requested_until = None;
        let waiting = self.waiting_for_token();
        let token = token.and_then(|t| {
            let len = t.value.expose().len()
                + t.extensions
                    .iter()
                    .map(|(k, v)| k.len() + v.len() + 2)
                    .sum::<usize>();
            if len > crate::Config::MAX_SASL_CREDENTIALS {
                return Err(format!(
                    "the token and its extensions are {len} bytes: at most {} are taken",
                    crate::Config::MAX_SASL_CREDENTIALS
                ));
            }
            crate::sasl::check_token(&t)?;
            Ok(t)
        });
        match token {
            Ok(token) => {
                // Used for new sessions until 80% of its lifetime has passed (Java's default
                // `sasl.login.refresh.window.factor`): a session started later would get the
                // short remainder, and its re-authentication an expired token. A lifetime
                // beyond `Config::MAX_DURATION` counts as that (no `Instant` overflows).
                let lifetime = token.lifetime.min(crate::Config::MAX_DURATION);
                let until = self.now + lifetime.mul_f64(TOKEN_REFRESH_FACTOR);
                self.auth.tokens.current = Some((token, until));
                for conn in waiting {
                    self.start_exchange(conn);
                }
            }
            Err(reason) => {
                for conn in waiting {
                    self.authentication_failed(conn, AuthError::TokenUnavailable(reason.clone()));
                }
            }
        }
    }

    /// Authentication of `conn` failed: the failure is reported, the records waiting for a
    /// connection fail with it at once (those in flight on other connections go on), and the
    /// connection closes; its reconnect backs off.
    pub(super) fn authentication_failed(&mut self, conn: ConnId, error: AuthError) {
        let node_id = self.brokers.slot(conn.slot).node_id;
        self.outputs
            .push_back(Output::Event(Event::AuthenticationFailed {
                node_id,
                error: error.clone(),
            }));
        self.fail_waiting_records(&error);
        let reason = format!("authentication failed: {error}");
        self.connection_lost(conn, true, std::io::ErrorKind::PermissionDenied, reason);
    }

    /// [`Producer::handle_tls_failed`]: as an authentication failure, except that the driver
    /// has closed the connection already (no `Disconnect` is emitted for it).
    pub(super) fn tls_failed(&mut self, conn: ConnId, reason: String) {
        let node_id = self.brokers.slot(conn.slot).node_id;
        let error = AuthError::Tls(reason);
        self.outputs
            .push_back(Output::Event(Event::AuthenticationFailed {
                node_id,
                error: error.clone(),
            }));
        self.fail_waiting_records(&error);
        let reason = error.to_string();
        self.connection_lost(conn, false, std::io::ErrorKind::InvalidData, reason);
    }

    /// Fails every record that is not in flight with `error`: held for metadata, or in a
    /// partition with nothing in flight.
    fn fail_waiting_records(&mut self, error: &AuthError) {
        let idem = self.config.idempotence;
        let failure = |possibly_persisted| ProduceError::Authentication {
            error: error.clone(),
            possibly_persisted,
        };
        for t in 0..self.topics.len() {
            let held = std::mem::take(&mut self.topics.get_mut(t).holding);
            for h in held {
                self.fail_unrouted(t, h.partition.unwrap_or(-1), h.pending, failure(false));
            }
            for p in 0..self.topics.partition_count(t) {
                if let Some(records) = self.topics.partition_mut(t, p).fail_idle(failure, idem) {
                    self.fail_records(t, p as i32, records, failure(false));
                }
                self.emit_done(t, p);
            }
        }
    }
}
