//! The OAUTHBEARER token provider's plumbing through the tokio driver, against a broker that
//! takes OAUTHBEARER tokens and rejects them (`producer_tests::oauth_broker`; librdkafka's mock
//! has no SASL, and a token *accepted* end to end is the Apache Kafka tier's proof): the
//! provider is called when the core asks, its token is what goes on the wire, the token is
//! reused while valid, and a provider's error fails the records with it.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use producer_core::{AuthError, SaslConfig, SecurityProtocol};
use producer_tests::oauth_broker::{OAuthBroker, REJECTED, REJECTION_MESSAGE};
use producer_tokio::{Config, ErrorCode, OAuthToken, ProduceError, ProducerBuilder};

use support::*;

fn oauth_config(broker: &OAuthBroker) -> Config {
    init_tracing();
    Config::builder(broker.bootstrap())
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslConfig::oauthbearer())
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .expect("config")
}

/// Sends `n` records through `builder` and returns each one's error, checking the record
/// came back with it.
async fn failures(builder: ProducerBuilder, n: usize) -> Vec<ProduceError> {
    let handle = builder.start().expect("start");
    let sent = records(n);
    let mut futures = Vec::new();
    for r in &sent {
        futures.push(handle.send(r.clone()).await.expect("send"));
    }
    let mut errors = Vec::new();
    for (f, r) in futures.into_iter().zip(&sent) {
        errors.push(assert_handed_back(
            f.await.expect_err("the broker rejects every token"),
            r,
        ));
    }
    handle.close().await;
    errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_token_goes_on_the_wire_and_is_reused_while_valid() {
    let broker = OAuthBroker::start().expect("broker");
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let builder = ProducerBuilder::new(oauth_config(&broker)).oauth_token_provider(move || {
        let n = counted.fetch_add(1, Ordering::AcqRel) + 1;
        async move {
            // An identity provider that takes a while: the producer task must not wait on it.
            tokio::task::yield_now().await;
            Ok(OAuthToken::new(
                format!("token-{n}"),
                Duration::from_secs(600),
            ))
        }
    });
    for e in failures(builder, 20).await {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_error_fails_the_records_with_it() {
    let broker = OAuthBroker::start().expect("broker");
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let builder = ProducerBuilder::new(oauth_config(&broker)).oauth_token_provider(move || {
        counted.fetch_add(1, Ordering::AcqRel);
        async { Err("identity provider down".to_string()) }
    });
    for e in failures(builder, 20).await {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_panics_fails_the_records() {
    let broker = OAuthBroker::start().expect("broker");
    let builder = ProducerBuilder::new(oauth_config(&broker))
        .oauth_token_provider(|| async { panic!("provider bug") });
    for e in failures(builder, 5).await {
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_provider_the_records_fail_with_no_token() {
    let broker = OAuthBroker::start().expect("broker");
    for e in failures(ProducerBuilder::new(oauth_config(&broker)), 5).await {
        match e {
            ProduceError::Authentication {
                error: AuthError::TokenUnavailable(reason),
                ..
            } => {
                assert!(reason.contains("oauth_token_provider"), "{reason}")
            }
            other => panic!("expected no token, got {other:?}"),
        }
    }
    assert!(broker.messages().is_empty());
}
