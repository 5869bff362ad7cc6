//! The OAUTHBEARER token provider's plumbing through the driver, against a broker that takes
//! OAUTHBEARER tokens and rejects them ([`crate::oauth_broker`]; librdkafka's mock has no SASL,
//! and a token *accepted* end to end is the Apache Kafka tier's proof): the provider runs off
//! the producer's loop (mio: on a helper thread; tokio: in a task of its own, its future
//! pending once first) when the core asks, its token is what goes on the wire, the token is
//! reused while valid, and a provider's error fails the records with it. A provider that
//! panics: [`super::panics::a_panicking_token_provider_is_named_by_an_event`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use producer_core::{
    AuthError, Config, ErrorCode, OAuthToken, ProduceError, SaslConfig, SecurityProtocol,
};

use super::{assert_sent_record_back, send_and_report};
use crate::drive::{Driver, Failure, TokenSource};
use crate::oauth_broker::{OAuthBroker, REJECTED, REJECTION_MESSAGE};
use crate::running::{Options, Running};
use crate::workload::{workload, Keys};

const TOPIC: &str = "oauth";

/// Sends `n` records to `broker` with `tokens` as the driver's token provider (tokio: a
/// delivery future per record) and returns each one's error, checking the record came back
/// with it.
fn failures(
    driver: Driver,
    broker: &OAuthBroker,
    n: u64,
    tokens: Option<TokenSource>,
) -> Vec<ProduceError> {
    let config = Config::builder(broker.bootstrap())
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::oauthbearer())
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .expect("config");
    let mut options = Options::new(config);
    options.tokens = tokens;
    options.futures = true;
    let p = Running::start(driver, options);
    let sent = workload(n as usize, &[(TOPIC, 1)], Keys::Mixed, 20);
    let mut reports = send_and_report(&p, &sent);
    p.close();
    (0..n)
        .map(|id| {
            let r = reports.remove(&id).expect("reported");
            assert_sent_record_back(r.record, &sent[id as usize], id);
            match r.result {
                Err(Failure::Produce(e)) => e,
                other => panic!("record {id}: the broker rejects every token, got {other:?}"),
            }
        })
        .collect()
}

/// A provider that counts its calls: every record fails with the broker's rejection (its
/// code and message), the provider was called once (the token reused while valid), and every
/// OAUTHBEARER message the broker saw carries that first token.
pub fn the_providers_token_goes_on_the_wire_and_is_reused_while_valid(driver: Driver) {
    let broker = OAuthBroker::start().expect("broker");
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let tokens: TokenSource = Arc::new(move || {
        let n = counted.fetch_add(1, Ordering::AcqRel) + 1;
        Ok(OAuthToken::new(
            format!("token-{n}"),
            Duration::from_secs(600),
        ))
    });
    for e in failures(driver, &broker, 20, Some(tokens)) {
        match e {
            ProduceError::Authentication {
                error: AuthError::Rejected { code, message },
                ..
            } => {
                assert_eq!(code, ErrorCode(REJECTED));
                assert!(message
                    .as_deref()
                    .is_some_and(|m| m.contains(REJECTION_MESSAGE)));
            }
            other => panic!("expected the broker's rejection, got {other:?}"),
        }
    }
    assert_eq!(
        calls.load(Ordering::Acquire),
        1,
        "one token, reused while valid"
    );
    let messages = broker.messages();
    assert!(
        !messages.is_empty(),
        "the broker saw no OAUTHBEARER message"
    );
    for m in &messages {
        let text = String::from_utf8_lossy(m);
        assert!(text.contains("auth=Bearer token-1\u{1}"), "{text:?}");
    }
}

/// A provider that fails: every record fails with its error, not persisted, and the broker
/// saw no token.
pub fn a_providers_error_fails_the_records_with_it(driver: Driver) {
    let broker = OAuthBroker::start().expect("broker");
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let tokens: TokenSource = Arc::new(move || {
        counted.fetch_add(1, Ordering::AcqRel);
        Err("identity provider down".to_string())
    });
    for e in failures(driver, &broker, 20, Some(tokens)) {
        assert_eq!(
            e,
            ProduceError::Authentication {
                error: AuthError::TokenUnavailable("identity provider down".into()),
                possibly_persisted: false,
            }
        );
    }
    assert!(calls.load(Ordering::Acquire) >= 1);
    assert!(
        broker.messages().is_empty(),
        "no token, so nothing to authenticate with"
    );
}

/// No provider: every record fails for want of a token, the reason naming the driver's call
/// that gives it one, and the broker saw no token.
pub fn without_a_provider_the_records_fail_with_no_token(driver: Driver) {
    let broker = OAuthBroker::start().expect("broker");
    let call = match driver {
        Driver::Tokio => "oauth_token_provider",
        Driver::MioThreaded => "ThreadedBuilder::oauth_token_provider",
        Driver::MioEmbedded => "MioDriver::set_token_provider",
    };
    for e in failures(driver, &broker, 5, None) {
        match e {
            ProduceError::Authentication {
                error: AuthError::TokenUnavailable(reason),
                ..
            } => assert!(reason.contains(call), "{reason}"),
            other => panic!("expected no token, got {other:?}"),
        }
    }
    assert!(broker.messages().is_empty());
}
