//! Cross-checks InitProducerId against the independent `kafka-protocol` codec, at every
//! supported version: requests we encode must decode there, responses it encodes must parse here.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    InitProducerIdRequest as KpRequest, InitProducerIdResponse as KpResponse, ProducerId,
    TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use producer_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use producer_core::ErrorCode;
use proptest::prelude::*;

const VERSIONS: std::ops::RangeInclusive<i16> = 0..=5;

fn unknown_tags() -> impl Strategy<Value = BTreeMap<i32, Bytes>> {
    proptest::collection::btree_map(
        0i32..100,
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Bytes::from),
        0..3,
    )
}

fn kp_response() -> impl Strategy<Value = KpResponse> {
    (
        any::<i32>(),
        any::<i16>(),
        any::<i64>(),
        any::<i16>(),
        unknown_tags(),
    )
        .prop_map(|(throttle, error, pid, epoch, tags)| {
            KpResponse::default()
                .with_throttle_time_ms(throttle)
                .with_error_code(error)
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_unknown_tagged_fields(tags)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn requests_decode_in_kafka_protocol(
        transactional_id in proptest::option::of(".{0,30}"),
        transaction_timeout_ms: i32,
        producer_id: i64,
        producer_epoch: i16,
    ) {
        for version in VERSIONS {
            let req = InitProducerIdRequest { transactional_id: transactional_id.as_deref(), transaction_timeout_ms, producer_id, producer_epoch };
            let mut buf = Vec::new();
            req.encode(version, &mut buf);
            let mut bytes = Bytes::from(buf);
            let decoded = KpRequest::decode(&mut bytes, version).map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert!(bytes.is_empty(), "v{} left {} bytes", version, bytes.len());
            prop_assert_eq!(decoded.transactional_id.as_ref().map(|t| t.0.as_str()), transactional_id.as_deref());
            prop_assert_eq!(decoded.transaction_timeout_ms, transaction_timeout_ms);
            // Before v3 the fields are not sent; kafka-protocol fills in the JSON default -1.
            let (want_pid, want_epoch) = if version >= 3 { (producer_id, producer_epoch) } else { (-1, -1) };
            prop_assert_eq!(decoded.producer_id, ProducerId(want_pid));
            prop_assert_eq!(decoded.producer_epoch, want_epoch);
        }
    }

    #[test]
    fn responses_from_kafka_protocol_parse(kp in kp_response()) {
        for version in VERSIONS {
            let mut buf = BytesMut::new();
            kp.encode(&mut buf, version).expect("kafka-protocol encodes");
            let parsed = InitProducerIdResponse::parse(version, &buf).map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert_eq!(parsed.trailing, 0);
            prop_assert_eq!(
                parsed.body,
                InitProducerIdResponse {
                    throttle_time_ms: kp.throttle_time_ms,
                    error_code: ErrorCode(kp.error_code),
                    producer_id: kp.producer_id.0,
                    producer_epoch: kp.producer_epoch,
                }
            );
            for cut in 0..buf.len() {
                let r = InitProducerIdResponse::parse(version, &buf[..cut]);
                prop_assert!(r.is_err(), "v{} prefix of {} / {} bytes parsed: {:?}", version, cut, buf.len(), r);
            }
        }
    }

    #[test]
    fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        for version in -1..=5 {
            if let Ok(p) = InitProducerIdResponse::parse(version, &data) {
                prop_assert!(p.trailing <= data.len());
            }
        }
    }
}

#[test]
fn transactional_request_matches_kafka_protocol_encoding() {
    // Byte-for-byte equality with the independent encoder, at every version.
    let ours = InitProducerIdRequest {
        transactional_id: Some("txn-1"),
        transaction_timeout_ms: 60_000,
        producer_id: 42,
        producer_epoch: 7,
    };
    let theirs = KpRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("txn-1"))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(42))
        .with_producer_epoch(7);
    for version in VERSIONS {
        let mut a = Vec::new();
        ours.encode(version, &mut a);
        // kafka-protocol refuses to encode fields a version does not have unless they hold
        // their default (-1).
        let theirs = if version >= 3 {
            theirs.clone()
        } else {
            theirs
                .clone()
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        };
        let mut b = BytesMut::new();
        theirs.encode(&mut b, version).unwrap();
        assert_eq!(a, b.to_vec(), "v{version}");
    }
}
