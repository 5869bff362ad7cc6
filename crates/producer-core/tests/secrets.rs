//! Credentials are never printed and are warned about when they go without TLS: the `Debug` of
//! every output (a SASL PLAIN frame included), of the producer and of its configuration shows
//! no password, while the frame itself, read by kafka-protocol, does carry it; and the
//! producer says once when credentials go over `SASL_PLAINTEXT`.

mod by_hand;

use std::time::{Duration, Instant};

use by_hand::Scripted;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::Decodable;
use producer_core::{
    Acks, Config, Event, Mechanism, OAuthToken, Producer, Record, SaslConfig, SecurityProtocol,
    TlsConfig,
};

const USER: &str = "alice";
const PASSWORD: &str = "hunter2-plain-password";
const TOKEN: &str = "eyJhbGciOiJub25lIn0.c2VjcmV0LXRva2Vu.";

fn producer(protocol: SecurityProtocol, sasl: SaslConfig) -> Scripted {
    let t0 = Instant::now();
    let mut b = Config::builder([("bootstrap", 9092)])
        .acks(Acks::Leader)
        .security_protocol(protocol)
        .sasl(sasl.with_nonce_seed([5; 32]));
    if protocol.uses_tls() {
        b = b.tls(TlsConfig::with_ca("ca.pem")); // the driver's: the core sees plaintext
    }
    let mut s = Scripted::new(Producer::new(b.build().unwrap(), t0), t0);
    s.producer
        .send(t0, Record::new("orders", &b"value"[..]), 1)
        .unwrap();
    s.pump();
    s
}

/// Up to the first SaslAuthenticate of the bootstrap connection (for OAUTHBEARER, the token is
/// handed over when asked for).
fn to_first_token(s: &mut Scripted, mechanism: &'static str) -> by_hand::Request {
    s.answer_api_versions();
    s.answer_handshake(mechanism);
    if s.token_requests > 0 {
        let now = s.now;
        s.producer
            .handle_token(now, Ok(OAuthToken::new(TOKEN, Duration::from_secs(3600))));
        s.pump();
    }
    s.take(ApiKey::SaslAuthenticate)
}

fn auth_bytes(req: &by_hand::Request) -> Vec<u8> {
    SaslAuthenticateRequest::decode(&mut req.body.clone(), req.header.request_api_version)
        .expect("kafka-protocol reads SaslAuthenticate")
        .auth_bytes
        .to_vec()
}

#[test]
fn debug_of_a_sasl_plain_output_shows_no_password() {
    let mut s = producer(
        SecurityProtocol::SaslPlaintext,
        SaslConfig::plain(USER, PASSWORD),
    );
    s.answer_api_versions();
    // The handshake's answer makes the producer queue the PLAIN token: look at everything
    // while the frame with the password sits in its output queue.
    let handshake = s.take(ApiKey::SaslHandshake);
    s.answer_undrained(
        &handshake,
        &kafka_protocol::messages::SaslHandshakeResponse::default().with_mechanisms(vec![
            kafka_protocol::protocol::StrBytes::from_static_str("PLAIN"),
        ]),
    );
    for shown in [
        format!("{:?}", s.producer),
        format!("{:#?}", s.producer),
        format!("{:?}", s.producer.config()),
    ] {
        assert!(!shown.contains(PASSWORD), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
    s.pump();
    let auth = s.take(ApiKey::SaslAuthenticate);
    // The frame does carry the password (so the check above is not vacuous)...
    assert_eq!(
        auth_bytes(&auth),
        format!("\0{USER}\0{PASSWORD}").into_bytes()
    );
    // ...and no output's Debug shows it: the Transmit shows its length and pieces only.
    let transmit = s
        .debug_log
        .iter()
        .rfind(|l| l.starts_with("Transmit"))
        .expect("the SaslAuthenticate was transmitted");
    assert!(
        transmit.contains("WireBytes { len: ") && transmit.contains("pieces: 1"),
        "{transmit}"
    );
    for line in &s.debug_log {
        assert!(!line.contains("hunter2"), "{line}");
    }
}

/// The Debug of SCRAM and OAUTHBEARER outputs, and of the producer during their exchanges,
/// show neither the password nor the token.
#[test]
fn debug_of_scram_and_oauthbearer_outputs_shows_no_credential() {
    for (sasl, mechanism, secret) in [
        (
            SaslConfig::scram_sha512(USER, PASSWORD),
            "SCRAM-SHA-512",
            PASSWORD,
        ),
        (SaslConfig::oauthbearer(), "OAUTHBEARER", TOKEN),
    ] {
        let mut s = producer(SecurityProtocol::SaslSsl, sasl);
        let first = to_first_token(&mut s, mechanism);
        if mechanism == "OAUTHBEARER" {
            let sent = String::from_utf8(auth_bytes(&first)).unwrap();
            assert!(sent.contains(secret), "the token is sent: {sent:?}");
        }
        for shown in s
            .debug_log
            .iter()
            .cloned()
            .chain([format!("{:?}", s.producer)])
        {
            assert!(!shown.contains(secret), "{mechanism}: {shown}");
        }
    }
}

fn plaintext_warnings(s: &Scripted) -> Vec<(i32, Mechanism)> {
    s.events
        .iter()
        .filter_map(|e| match e {
            Event::CredentialsInPlaintext { node_id, mechanism } => Some((*node_id, *mechanism)),
            _ => None,
        })
        .collect()
}

/// PLAIN, SCRAM and OAUTHBEARER over `SASL_PLAINTEXT`: one warning for the producer, when its
/// first connection starts the exchange, none for the broker connection that authenticates
/// next; over `SASL_SSL` none at all.
#[test]
fn credentials_over_plaintext_are_warned_once_per_producer() {
    for (sasl, name, mechanism) in [
        (SaslConfig::plain(USER, PASSWORD), "PLAIN", Mechanism::Plain),
        (
            SaslConfig::scram_sha256(USER, PASSWORD),
            "SCRAM-SHA-256",
            Mechanism::ScramSha256,
        ),
        (
            SaslConfig::oauthbearer(),
            "OAUTHBEARER",
            Mechanism::OAuthBearer,
        ),
    ] {
        for protocol in [SecurityProtocol::SaslPlaintext, SecurityProtocol::SaslSsl] {
            let mut s = producer(protocol, sasl.clone());
            let first = to_first_token(&mut s, name);
            let expected = match protocol {
                SecurityProtocol::SaslPlaintext => vec![(-1, mechanism)],
                _ => vec![],
            };
            assert_eq!(plaintext_warnings(&s), expected, "{name} over {protocol}");
            if mechanism != Mechanism::Plain {
                continue; // the rest needs the exchange to succeed; PLAIN's is one round
            }
            // The bootstrap connection authenticates, asks for metadata, and the producer
            // connects to the leader, which authenticates the same way: no second warning.
            s.answer(&first, &SaslAuthenticateResponse::default());
            assert!(
                s.events
                    .iter()
                    .any(|e| matches!(e, Event::Authenticated { node_id: -1, .. })),
                "{:?}",
                s.events
            );
            s.answer_metadata("leader", 1);
            assert_eq!(
                s.connects
                    .iter()
                    .map(|(_, h)| h.as_str())
                    .collect::<Vec<_>>(),
                ["bootstrap", "leader"]
            );
            s.answer_api_versions();
            s.answer_handshake(name);
            let second = s.take(ApiKey::SaslAuthenticate);
            assert_eq!(
                auth_bytes(&second),
                format!("\0{USER}\0{PASSWORD}").into_bytes()
            );
            assert_eq!(
                plaintext_warnings(&s),
                expected,
                "{name} over {protocol}: once per producer"
            );
        }
    }
}

/// A token larger than any broker reads (`sasl.server.max.receive.size`, 512 KiB), or with a
/// lifetime of `Duration::MAX`: the first fails the waiting connection with a typed error
/// (never a wrapped length), the second is taken (its lifetime capped, no `Instant` overflow).
#[test]
fn an_oversized_token_is_a_typed_failure_and_an_endless_one_is_taken() {
    let mut s = producer(SecurityProtocol::SaslSsl, SaslConfig::oauthbearer());
    s.answer_api_versions();
    s.answer_handshake("OAUTHBEARER");
    assert_eq!(s.token_requests, 1);
    let now = s.now;
    let huge = "t".repeat(Config::MAX_SASL_CREDENTIALS + 1);
    s.producer
        .handle_token(now, Ok(OAuthToken::new(huge, Duration::from_secs(60))));
    s.pump();
    assert!(
        s.events.iter().any(|e| matches!(
            e,
            Event::AuthenticationFailed {
                error: producer_core::AuthError::TokenUnavailable(why),
                ..
            } if why.contains("bytes")
        )),
        "{:?}",
        s.events
    );
    assert!(s.requests.iter().all(|r| r.api != ApiKey::SaslAuthenticate));
    let mut s = producer(SecurityProtocol::SaslSsl, SaslConfig::oauthbearer());
    let first = to_first_token(&mut s, "OAUTHBEARER");
    let now = s.now;
    s.producer
        .handle_token(now, Ok(OAuthToken::new(TOKEN, Duration::MAX)));
    s.answer(&first, &SaslAuthenticateResponse::default());
    assert!(s
        .events
        .iter()
        .any(|e| matches!(e, Event::Authenticated { .. })));
}
