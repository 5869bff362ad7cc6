//! The OAUTHBEARER token provider's plumbing through the mio driver (the threaded producer,
//! and the embeddable driver's `set_token_provider` under it), against a broker that takes
//! OAUTHBEARER tokens and rejects them (`producer_tests::oauth_broker`; librdkafka's mock has
//! no SASL, and a token *accepted* end to end is the Apache Kafka tier's proof): the provider
//! runs on its helper thread when the core asks, its token is what goes on the wire, the token
//! is reused while valid, and a provider's error fails the records with it.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use producer_core::{
    AuthError, Config, ErrorCode, OAuthToken, ProduceError, SaslConfig, SecurityProtocol,
};
use producer_mio::ThreadedProducer;
use producer_tests::oauth_broker::{OAuthBroker, REJECTED, REJECTION_MESSAGE};

use support::*;

const TOPIC: &str = "mio-oauth";

fn oauth_config(broker: &OAuthBroker) -> Config {
    init_tracing();
    Config::builder(broker.bootstrap())
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::oauthbearer())
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .expect("config")
}

/// Sends `n` records and returns each one's error, checking the record came back with it.
fn failures(
    config: Config,
    n: usize,
    provider: Option<Box<dyn FnMut() -> Result<OAuthToken, String> + Send>>,
) -> Vec<ProduceError> {
    let (tx, rx) = mpsc::channel();
    let on_delivery = move |d| {
        let _ = tx.send(d);
    };
    let producer = match provider {
        Some(p) => ThreadedProducer::<usize>::spawn_with_token_provider(config, 64, on_delivery, p),
        None => ThreadedProducer::<usize>::spawn(config, 64, on_delivery),
    }
    .expect("spawn");
    let sent: Vec<_> = (0..n).map(|i| record(TOPIC, i)).collect();
    for (i, r) in sent.iter().enumerate() {
        producer.send_with(r.clone(), i).expect("send");
    }
    let errors = (0..n)
        .map(|_| {
            let d = rx
                .recv_timeout(HANG_GUARD)
                .expect("a report for every record");
            let f = d.result.expect_err("the broker rejects every token");
            assert_eq!(f.record.value, sent[d.opaque].value, "record handed back");
            f.error
        })
        .collect();
    producer.close();
    errors
}

#[test]
fn the_providers_token_goes_on_the_wire_and_is_reused_while_valid() {
    with_hang_guard(|| {
        let broker = OAuthBroker::start().expect("broker");
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let provider = move || {
            let n = counted.fetch_add(1, Ordering::AcqRel) + 1;
            Ok(OAuthToken::new(
                format!("token-{n}"),
                Duration::from_secs(600),
            ))
        };
        for e in failures(oauth_config(&broker), 20, Some(Box::new(provider))) {
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
    });
}

#[test]
fn a_providers_error_fails_the_records_with_it() {
    with_hang_guard(|| {
        let broker = OAuthBroker::start().expect("broker");
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let provider = move || {
            counted.fetch_add(1, Ordering::AcqRel);
            Err("identity provider down".to_string())
        };
        for e in failures(oauth_config(&broker), 20, Some(Box::new(provider))) {
            assert_eq!(
                e,
                ProduceError::Authentication {
                    error: AuthError::TokenUnavailable("identity provider down".into()),
                    possibly_persisted: false,
                }
            );
        }
        assert!(calls.load(Ordering::Acquire) >= 1);
        assert!(broker.messages().is_empty());
    });
}

#[test]
fn a_provider_that_panics_fails_the_records() {
    with_hang_guard(|| {
        let broker = OAuthBroker::start().expect("broker");
        let provider = || -> Result<OAuthToken, String> { panic!("provider bug") };
        for e in failures(oauth_config(&broker), 5, Some(Box::new(provider))) {
            match e {
                ProduceError::Authentication {
                    error: AuthError::TokenUnavailable(reason),
                    ..
                } => {
                    assert!(reason.contains("panicked"), "{reason}")
                }
                other => panic!("expected no token, got {other:?}"),
            }
        }
    });
}

#[test]
fn without_a_provider_the_records_fail_with_no_token() {
    with_hang_guard(|| {
        let broker = OAuthBroker::start().expect("broker");
        for e in failures(oauth_config(&broker), 5, None) {
            match e {
                ProduceError::Authentication {
                    error: AuthError::TokenUnavailable(reason),
                    ..
                } => {
                    assert!(reason.contains("set_token_provider"), "{reason}")
                }
                other => panic!("expected no token, got {other:?}"),
            }
        }
        assert!(broker.messages().is_empty());
    });
}
