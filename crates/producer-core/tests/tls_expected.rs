//! A plaintext connection answered with a TLS record (Kafka's SSL listener answers a plaintext
//! ApiVersions with a TLS alert): the producer says the listener expects TLS and fails the
//! waiting records at once, with the records handed back, instead of retrying until their
//! delivery timeout.

use std::time::{Duration, Instant};

use producer_core::{AuthError, Config, Event, Output, ProduceError, Producer, Record};

/// A TLS 1.2 fatal alert record (handshake_failure), as a TLS server sends it.
const TLS_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28];

#[test]
fn a_tls_answer_on_a_plaintext_connection_fails_the_records_with_broker_expects_tls() {
    let t0 = Instant::now();
    let config = Config::builder([("127.0.0.1", 9093)])
        .delivery_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let mut p = Producer::<u32>::new(config, t0);
    for i in 0..5 {
        p.send(t0, Record::new("t", vec![i as u8; 10]), i).unwrap();
    }
    let mut conn = None;
    while let Some(o) = p.poll_output() {
        if let Output::Connect { conn: c, .. } = o {
            conn = Some(c);
        }
    }
    let conn = conn.expect("a bootstrap connection is asked for");
    p.handle_connected(t0, conn);
    let mut transmitted = false;
    while let Some(o) = p.poll_output() {
        transmitted |= matches!(o, Output::Transmit { .. });
    }
    assert!(transmitted, "ApiVersions is sent");
    p.handle_read(t0, conn, &TLS_ALERT);
    let mut failed = Vec::new();
    let mut event = false;
    let mut disconnected = false;
    while let Some(o) = p.poll_output() {
        match o {
            Output::Delivery(d) => {
                let failure = d.result.expect_err("the record must fail");
                assert!(
                    matches!(
                        failure.error,
                        ProduceError::Authentication {
                            error: AuthError::BrokerExpectsTls,
                            ..
                        }
                    ),
                    "{:?}",
                    failure.error
                );
                assert_eq!(
                    failure.record.value.as_deref(),
                    Some(&[d.opaque as u8; 10][..])
                );
                failed.push(d.opaque);
            }
            Output::Event(Event::AuthenticationFailed {
                error: AuthError::BrokerExpectsTls,
                ..
            }) => event = true,
            Output::Disconnect { conn: c } => disconnected |= c == conn,
            _ => {}
        }
    }
    assert!(event, "the failure is an event too");
    assert!(disconnected, "the connection is closed");
    assert_eq!(
        failed,
        [0, 1, 2, 3, 4],
        "every record, in send order, at once"
    );
    assert!(
        AuthError::BrokerExpectsTls
            .to_string()
            .contains("SSL or SASL_SSL"),
        "the error says what to set"
    );
}
