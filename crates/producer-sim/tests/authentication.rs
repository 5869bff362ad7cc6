//! SASL against the simulated brokers' authenticator: every mechanism authenticates and
//! delivers, re-authentication keeps a long stream whole, and each failure is typed, prompt
//! (virtual time), hands every record back, and backs off.

mod support;

use std::time::Duration;

use producer_core::{
    AuthError, ErrorCode, Event, Mechanism, OAuthToken, ProduceError, SaslConfig, SecurityProtocol,
};
use producer_sim::{SimConfig, SimSasl};
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("orders", 4), ("clicks", 3)];
const NAMES: &[&str] = &["orders", "clicks"];
const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";
const TOKEN: &str = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.";

fn sasl_cluster(seed: u64, tune: impl FnOnce(&mut SimSasl)) -> producer_sim::SimCluster {
    let mut sasl = SimSasl::for_user(USER, PASSWORD);
    sasl.oauth_tokens.push(TOKEN.to_string());
    tune(&mut sasl);
    let mut cfg = SimConfig::with_brokers(3, seed);
    cfg.sasl = Some(sasl);
    cluster_with(cfg, TOPICS)
}

fn sasl(mechanism: Mechanism, password: &str) -> SaslConfig {
    SaslConfig::with(mechanism, USER, password).with_nonce_seed([3; 32])
}

fn with_sasl(
    config: SaslConfig,
) -> impl FnOnce(producer_core::ConfigBuilder) -> producer_core::ConfigBuilder {
    move |b| {
        b.security_protocol(SecurityProtocol::SaslPlaintext)
            .sasl(config)
            .delivery_timeout(secs(60))
            .request_timeout(secs(10))
    }
}

fn authenticated(h: &producer_sim::drive::Harness<u64>, reauthentication: bool) -> usize {
    h.events
        .iter()
        .filter(|e| {
            matches!(e, Event::Authenticated { reauthentication: r, .. } if *r == reauthentication)
        })
        .count()
}

fn auth_failures(h: &producer_sim::drive::Harness<u64>) -> Vec<AuthError> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::AuthenticationFailed { error, .. } => Some(error.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_mechanism_authenticates_and_delivers() {
    for (seed, mechanism) in [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
        Mechanism::OAuthBearer,
    ]
    .into_iter()
    .enumerate()
    {
        let mut h = harness(
            sasl_cluster(seed as u64, |_| {}),
            with_sasl(sasl(mechanism, PASSWORD)),
        );
        h.oauth_token = Some(OAuthToken::new(TOKEN, secs(3600)));
        let sent = send_many(&mut h, NAMES, 0, 1000, true);
        assert!(
            h.flush(secs(60)),
            "{mechanism}: not everything was reported"
        );
        check_run(&h, &sent, TOPICS, true);
        assert!(
            reports(&h).values().all(|r| r.is_ok()),
            "{mechanism}: failures"
        );
        assert!(
            authenticated(&h, false) >= 2,
            "{mechanism}: bootstrap and broker connections authenticate"
        );
        assert!(auth_failures(&h).is_empty(), "{mechanism}");
        // SASL_PLAINTEXT: credentials without TLS are warned about once for the producer,
        // however many connections authenticate.
        let warnings: Vec<&Event> = h
            .events
            .iter()
            .filter(|e| matches!(e, Event::CredentialsInPlaintext { .. }))
            .collect();
        assert!(
            matches!(
                warnings[..],
                [Event::CredentialsInPlaintext { mechanism: m, .. }] if *m == mechanism
            ),
            "{mechanism}: {warnings:?}"
        );
        assert!(
            h.cluster.violations().is_empty(),
            "{mechanism}: {:?}",
            h.cluster.violations()
        );
    }
}

#[test]
fn reauthentication_keeps_a_long_stream_whole_across_leader_moves() {
    let mut h = harness(
        sasl_cluster(7, |s| s.session_lifetime = Some(secs(2))),
        with_sasl(sasl(Mechanism::ScramSha512, PASSWORD)),
    );
    let mut sent = Vec::new();
    for round in 0..40u64 {
        sent.extend(send_many(&mut h, NAMES, round * 100, 100, round % 2 == 0));
        if round % 8 == 7 {
            let p = (round / 8) as i32 % 4;
            let leader = 1 + (round / 8) as i32 % 3;
            h.cluster.move_leader("orders", p, leader).unwrap();
        }
        h.run_for(Duration::from_millis(500));
    }
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, TOPICS, true);
    assert!(reports(&h).values().all(|r| r.is_ok()), "failures");
    // 20 virtual seconds with 2-second sessions: every live connection re-authenticated many
    // times; none sent a request after its session ended (the broker would have closed it and
    // recorded a violation).
    assert!(
        authenticated(&h, true) >= 3 * 8,
        "re-authentications: {}",
        authenticated(&h, true)
    );
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );
}

/// Sends records to a cluster that refuses the client, and checks: one typed failure per
/// record (each with its record), all before the delivery timeout, and reconnects that back
/// off.
fn refused(
    cluster: producer_sim::SimCluster,
    config: SaslConfig,
    token: Option<OAuthToken>,
    expected: impl Fn(&AuthError) -> bool,
) {
    let mut h = harness(cluster, with_sasl(config));
    h.oauth_token = token;
    let sent = send_many(&mut h, NAMES, 0, 200, true);
    let start = h.now;
    assert!(h.flush(secs(30)), "not every record was reported");
    let failed_by = h.now - start;
    assert!(
        failed_by < secs(5),
        "records failed after {failed_by:?} of virtual time: not promptly"
    );
    let r = reports(&h);
    assert_eq!(r.len(), sent.len());
    for (id, result) in &r {
        match result {
            Err(ProduceError::Authentication { error: e, .. }) => {
                assert!(expected(e), "record {id}: {e:?}")
            }
            other => panic!("record {id}: {other:?}"),
        }
    }
    let failures = auth_failures(&h);
    assert!(
        !failures.is_empty() && failures.iter().all(&expected),
        "{failures:?}"
    );
    // Ten more virtual seconds of retrying: each broker's reconnect backoff grows (50 ms
    // doubling up to `reconnect_backoff_max`, 1 s), so each broker sees about one connection
    // (one ApiVersions) a second instead of one every round trip.
    let before = h.cluster.request_log().len();
    h.run_for(secs(10));
    let mut per_broker = std::collections::BTreeMap::new();
    for r in &h.cluster.request_log()[before..] {
        if r.api_key == producer_sim::API_API_VERSIONS {
            *per_broker.entry(r.broker_id).or_insert(0) += 1;
        }
    }
    assert!(
        !per_broker.is_empty(),
        "no attempt at all after the failure"
    );
    assert!(
        per_broker.values().all(|&n| n <= 14),
        "connections per broker in 10 s: {per_broker:?}"
    );
    assert!(h.producer.buffered_records() == 0);
}

#[test]
fn a_wrong_password_fails_every_record_promptly_for_each_mechanism() {
    for mechanism in [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
    ] {
        refused(
            sasl_cluster(11, |_| {}),
            sasl(mechanism, "not-the-password"),
            None,
            |e| matches!(e, AuthError::Rejected { code, .. } if *code == ErrorCode::SASL_AUTHENTICATION_FAILED),
        );
    }
}

#[test]
fn an_unknown_user_is_rejected() {
    refused(
        sasl_cluster(12, |_| {}),
        SaslConfig::scram_sha256("mallory", PASSWORD).with_nonce_seed([1; 32]),
        None,
        |e| matches!(e, AuthError::Rejected { code, .. } if *code == ErrorCode::SASL_AUTHENTICATION_FAILED),
    );
}

#[test]
fn a_mechanism_the_broker_does_not_enable_is_named_with_what_it_enables() {
    refused(
        sasl_cluster(13, |s| s.mechanisms = vec!["SCRAM-SHA-512".into()]),
        sasl(Mechanism::Plain, PASSWORD),
        None,
        |e| {
            matches!(e, AuthError::UnsupportedMechanism { mechanism: Mechanism::Plain, enabled }
                if enabled == &["SCRAM-SHA-512".to_string()])
        },
    );
}

#[test]
fn a_refused_oauth_token_fails_typed() {
    refused(
        sasl_cluster(14, |s| s.oauth_tokens.clear()),
        SaslConfig::oauthbearer(),
        Some(OAuthToken::new(TOKEN, secs(3600))),
        |e| matches!(e, AuthError::Rejected { code, .. } if *code == ErrorCode::SASL_AUTHENTICATION_FAILED),
    );
}

#[test]
fn no_oauth_token_from_the_application_fails_typed() {
    refused(
        sasl_cluster(16, |_| {}),
        SaslConfig::oauthbearer(),
        None,
        |e| matches!(e, AuthError::TokenUnavailable(_)),
    );
}

#[test]
fn sasl_to_a_cluster_without_it_fails_as_not_offered() {
    refused(
        cluster(3, TOPICS, 15),
        sasl(Mechanism::ScramSha256, PASSWORD),
        None,
        |e| matches!(e, AuthError::NotOffered),
    );
}

/// The OAUTHBEARER token provider hangs: after `token_timeout` (2 s of virtual time here) the
/// connections that waited for the token fail to authenticate with `TokenTimedOut`, and the
/// records waiting with them fail at once, typed and handed back, long before their delivery
/// timeout. The connections back off and ask again; the token handed over late is taken, and
/// the next records are delivered with it, with no further request.
#[test]
fn an_oauth_token_provider_that_hangs_times_out_and_a_later_token_still_works() {
    let timeout = secs(2);
    let mut h = harness(sasl_cluster(17, |_| {}), |b| {
        with_sasl(SaslConfig::oauthbearer())(b).token_timeout(timeout)
    });
    h.hold_token_requests = true;
    let sent = send_many(&mut h, NAMES, 0, 100, true);
    let start = h.now;
    assert!(h.run_until(secs(30), |h| h.token_requests > 0));
    let asked_at = h.now;
    let early = h.run_until(timeout - Duration::from_millis(1), |h| {
        !auth_failures(h).is_empty()
    });
    assert!(
        !early,
        "failed before the token timeout: {:?}",
        auth_failures(&h)
    );
    assert!(
        reports(&h).is_empty(),
        "nothing is reported while the token is awaited"
    );
    assert!(h.run_until(secs(1), |h| h.producer.buffered_records() == 0));
    let failed_at = h.now - asked_at;
    assert!(
        failed_at >= timeout && failed_at < timeout + secs(1),
        "records failed {failed_at:?} after the token was asked for"
    );
    assert!(h.now - start < secs(10), "not at the 60 s delivery timeout");
    let r = reports(&h);
    assert_eq!(r.len(), sent.len());
    for (id, result) in &r {
        match result {
            Err(ProduceError::Authentication {
                error: AuthError::TokenTimedOut(t),
                ..
            }) => assert_eq!(*t, timeout, "record {id}"),
            other => panic!("record {id}: {other:?}"),
        }
    }
    let failures = auth_failures(&h);
    assert!(
        !failures.is_empty()
            && failures
                .iter()
                .all(|e| matches!(e, AuthError::TokenTimedOut(_))),
        "{failures:?}"
    );
    // The provider answers late: the token is kept, and later connections use it.
    h.run_for(secs(3));
    let now = h.now;
    h.producer
        .handle_token(now, Ok(OAuthToken::new(TOKEN, secs(3600))));
    let asked = h.token_requests;
    let later = send_many(&mut h, NAMES, 1000, 100, true);
    assert!(h.flush(secs(30)), "the later records are reported");
    let r = reports(&h);
    for s in &later {
        assert!(
            matches!(r.get(&s.id), Some(Ok(_))),
            "record {}: {:?}",
            s.id,
            r.get(&s.id)
        );
    }
    assert!(
        authenticated(&h, false) >= 1,
        "connections authenticate with the late token"
    );
    assert_eq!(
        h.token_requests, asked,
        "the late token is used, not asked for again"
    );
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );
}
