//! Cross-checks SaslHandshake (v1) and SaslAuthenticate (v0-2) against the independent
//! `kafka-protocol` codec: requests we encode must decode there, responses it encodes must parse
//! here, every strict prefix of a response is an error, and garbage never panics.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    SaslAuthenticateRequest as KpAuthRequest, SaslAuthenticateResponse as KpAuthResponse,
    SaslHandshakeRequest as KpHandshakeRequest, SaslHandshakeResponse as KpHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use producer_core::protocol::sasl_authenticate::{
    SaslAuthenticateRequest, SaslAuthenticateResponse,
};
use producer_core::protocol::sasl_handshake::{SaslHandshakeRequest, SaslHandshakeResponse};
use producer_core::ErrorCode;
use proptest::prelude::*;

const AUTH_VERSIONS: std::ops::RangeInclusive<i16> = 0..=2;
const HANDSHAKE_VERSION: i16 = 1;

fn unknown_tags() -> impl Strategy<Value = BTreeMap<i32, Bytes>> {
    proptest::collection::btree_map(
        0i32..100,
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Bytes::from),
        0..3,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn handshake_requests_decode_in_kafka_protocol(mechanism in "[A-Z0-9-]{0,20}") {
        let mut buf = Vec::new();
        SaslHandshakeRequest { mechanism: &mechanism }.encode(HANDSHAKE_VERSION, &mut buf);
        let mut bytes = Bytes::from(buf);
        let decoded = KpHandshakeRequest::decode(&mut bytes, HANDSHAKE_VERSION)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(bytes.is_empty());
        prop_assert_eq!(decoded.mechanism.as_str(), mechanism.as_str());
    }

    #[test]
    fn handshake_responses_from_kafka_protocol_parse(
        error: i16,
        mechanisms in proptest::collection::vec("[A-Z0-9-]{0,16}", 0..5),
    ) {
        let kp = KpHandshakeResponse::default()
            .with_error_code(error)
            .with_mechanisms(mechanisms.iter().map(|m| StrBytes::from_string(m.clone())).collect());
        let mut buf = BytesMut::new();
        kp.encode(&mut buf, HANDSHAKE_VERSION).unwrap();
        let parsed = SaslHandshakeResponse::parse(HANDSHAKE_VERSION, &buf)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.trailing, 0);
        prop_assert_eq!(parsed.body.error_code, ErrorCode(error));
        prop_assert_eq!(&parsed.body.mechanisms, &mechanisms);
        for cut in 0..buf.len() {
            prop_assert!(SaslHandshakeResponse::parse(HANDSHAKE_VERSION, &buf[..cut]).is_err());
        }
    }

    #[test]
    fn authenticate_requests_decode_in_kafka_protocol(
        token in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        for version in AUTH_VERSIONS {
            let mut buf = Vec::new();
            SaslAuthenticateRequest { auth_bytes: &token }.encode(version, &mut buf);
            let mut bytes = Bytes::from(buf);
            let decoded = KpAuthRequest::decode(&mut bytes, version)
                .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert!(bytes.is_empty(), "v{} left {} bytes", version, bytes.len());
            prop_assert_eq!(&decoded.auth_bytes[..], &token[..]);
        }
    }

    #[test]
    fn authenticate_responses_from_kafka_protocol_parse(
        error: i16,
        message in proptest::option::of(".{0,40}"),
        token in proptest::collection::vec(any::<u8>(), 0..300),
        lifetime: i64,
        tags in unknown_tags(),
    ) {
        for version in AUTH_VERSIONS {
            let kp = KpAuthResponse::default()
                .with_error_code(error)
                .with_error_message(message.clone().map(StrBytes::from_string))
                .with_auth_bytes(Bytes::from(token.clone()))
                .with_session_lifetime_ms(if version >= 1 { lifetime } else { 0 })
                .with_unknown_tagged_fields(if version >= 2 { tags.clone() } else { BTreeMap::new() });
            let mut buf = BytesMut::new();
            kp.encode(&mut buf, version).expect("kafka-protocol encodes");
            let parsed = SaslAuthenticateResponse::parse(version, &buf)
                .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert_eq!(parsed.trailing, 0);
            let r = parsed.body;
            prop_assert_eq!(r.error_code, ErrorCode(error));
            prop_assert_eq!(&r.error_message, &message);
            prop_assert_eq!(&r.auth_bytes, &token);
            prop_assert_eq!(r.session_lifetime_ms, if version >= 1 { lifetime } else { 0 });
            for cut in 0..buf.len() {
                prop_assert!(SaslAuthenticateResponse::parse(version, &buf[..cut]).is_err(), "v{} prefix {}", version, cut);
            }
        }
    }

    #[test]
    fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        for version in -1..=3 {
            if let Ok(p) = SaslAuthenticateResponse::parse(version, &data) {
                prop_assert!(p.trailing <= data.len());
            }
            if let Ok(p) = SaslHandshakeResponse::parse(version, &data) {
                prop_assert!(p.trailing <= data.len());
            }
        }
    }
}
