//! Cross-checks the KIP-714 telemetry messages, GetTelemetrySubscriptions (71) and
//! PushTelemetry (72), against the independent `kafka-protocol` codec at every supported
//! version (v0): requests we encode decode there to the same values and match its encoding byte
//! for byte, responses it encodes parse here to the same values, and every prefix of them is
//! refused.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest as KpGetRequest,
    GetTelemetrySubscriptionsResponse as KpGetResponse, PushTelemetryRequest as KpPushRequest,
    PushTelemetryResponse as KpPushResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use producer_core::protocol::get_telemetry_subscriptions::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, RequestedMetrics,
    TelemetryCompression, NO_CLIENT_INSTANCE_ID,
};
use producer_core::protocol::push_telemetry::{PushTelemetryRequest, PushTelemetryResponse};
use producer_core::protocol::ApiKey;
use producer_core::{Compression, ErrorCode};
use proptest::prelude::*;

fn versions(api: ApiKey) -> std::ops::RangeInclusive<i16> {
    let (lo, hi) = api.supported_versions();
    lo..=hi
}

fn unknown_tags() -> impl Strategy<Value = BTreeMap<i32, Bytes>> {
    proptest::collection::btree_map(
        0i32..100,
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Bytes::from),
        0..3,
    )
}

fn codec() -> impl Strategy<Value = Compression> {
    proptest::sample::select(Compression::ALL.to_vec())
}

fn kp_get_response() -> impl Strategy<Value = KpGetResponse> {
    (
        (any::<i32>(), any::<i16>(), any::<[u8; 16]>(), any::<i32>()),
        proptest::collection::vec(any::<i8>(), 0..8),
        (any::<i32>(), any::<i32>(), any::<bool>()),
        proptest::collection::vec(".{0,20}", 0..6),
        unknown_tags(),
    )
        .prop_map(
            |((throttle, error, id, sub), codecs, (interval, max, delta), metrics, tags)| {
                let mut r = KpGetResponse::default()
                    .with_throttle_time_ms(throttle)
                    .with_error_code(error)
                    .with_subscription_id(sub)
                    .with_accepted_compression_types(codecs)
                    .with_push_interval_ms(interval)
                    .with_telemetry_max_bytes(max)
                    .with_delta_temporality(delta)
                    .with_requested_metrics(
                        metrics.into_iter().map(StrBytes::from_string).collect(),
                    )
                    .with_unknown_tagged_fields(tags);
                r.client_instance_id = id.to_vec().try_into().expect("16 bytes");
                r
            },
        )
}

fn ours(kp: &KpGetResponse) -> GetTelemetrySubscriptionsResponse {
    GetTelemetrySubscriptionsResponse {
        throttle_time_ms: kp.throttle_time_ms,
        error_code: ErrorCode(kp.error_code),
        client_instance_id: *kp.client_instance_id.as_bytes(),
        subscription_id: kp.subscription_id,
        accepted_compression_types: kp
            .accepted_compression_types
            .iter()
            .map(|&id| TelemetryCompression::from_id(id))
            .collect(),
        push_interval_ms: kp.push_interval_ms,
        telemetry_max_bytes: kp.telemetry_max_bytes,
        delta_temporality: kp.delta_temporality,
        requested_metrics: RequestedMetrics::from_names(
            kp.requested_metrics.iter().map(|s| s.as_str()),
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn get_requests_decode_in_kafka_protocol(id: [u8; 16]) {
        for version in versions(ApiKey::GetTelemetrySubscriptions) {
            let mut buf = Vec::new();
            GetTelemetrySubscriptionsRequest { client_instance_id: id }.encode(version, &mut buf);
            let mut bytes = Bytes::from(buf.clone());
            let decoded = KpGetRequest::decode(&mut bytes, version)
                .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert!(bytes.is_empty(), "v{} left {} bytes", version, bytes.len());
            prop_assert_eq!(decoded.client_instance_id.as_bytes(), &id);
            let mut theirs = BytesMut::new();
            decoded.encode(&mut theirs, version).expect("kafka-protocol encodes");
            prop_assert_eq!(&buf[..], &theirs[..]);
        }
    }

    #[test]
    fn push_requests_decode_in_kafka_protocol(
        id: [u8; 16],
        subscription_id: i32,
        terminating: bool,
        compression in codec(),
        metrics in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        for version in versions(ApiKey::PushTelemetry) {
            let req = PushTelemetryRequest {
                client_instance_id: id,
                subscription_id,
                terminating,
                compression,
                metrics: &metrics,
            };
            let mut buf = Vec::new();
            req.encode(version, &mut buf);
            let mut bytes = Bytes::from(buf.clone());
            let decoded = KpPushRequest::decode(&mut bytes, version)
                .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert!(bytes.is_empty(), "v{} left {} bytes", version, bytes.len());
            prop_assert_eq!(decoded.client_instance_id.as_bytes(), &id);
            prop_assert_eq!(decoded.subscription_id, subscription_id);
            prop_assert_eq!(decoded.terminating, terminating);
            prop_assert_eq!(i16::from(decoded.compression_type), compression.attribute_bits());
            prop_assert_eq!(&decoded.metrics[..], &metrics[..]);
            let mut theirs = BytesMut::new();
            decoded.encode(&mut theirs, version).expect("kafka-protocol encodes");
            prop_assert_eq!(&buf[..], &theirs[..]);
        }
    }

    #[test]
    fn get_responses_from_kafka_protocol_parse(kp in kp_get_response()) {
        for version in versions(ApiKey::GetTelemetrySubscriptions) {
            let mut buf = BytesMut::new();
            kp.encode(&mut buf, version).expect("kafka-protocol encodes");
            let parsed = GetTelemetrySubscriptionsResponse::parse(version, &buf)
                .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert_eq!(parsed.trailing, 0);
            prop_assert_eq!(&parsed.body, &ours(&kp));
            // The unknown ids are kept: each id comes back as it was sent.
            let ids: Vec<i8> = parsed.body.accepted_compression_types.iter().map(|t| t.id()).collect();
            prop_assert_eq!(&ids, &kp.accepted_compression_types);
            for cut in 0..buf.len() {
                let r = GetTelemetrySubscriptionsResponse::parse(version, &buf[..cut]);
                prop_assert!(r.is_err(), "v{} prefix of {} / {} bytes parsed: {:?}", version, cut, buf.len(), r);
            }
        }
    }

    #[test]
    fn push_responses_from_kafka_protocol_parse(throttle: i32, error: i16, tags in unknown_tags()) {
        let kp = KpPushResponse::default()
            .with_throttle_time_ms(throttle)
            .with_error_code(error)
            .with_unknown_tagged_fields(tags);
        for version in versions(ApiKey::PushTelemetry) {
            let mut buf = BytesMut::new();
            kp.encode(&mut buf, version).expect("kafka-protocol encodes");
            let parsed = PushTelemetryResponse::parse(version, &buf)
                .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert_eq!(parsed.trailing, 0);
            prop_assert_eq!(
                parsed.body,
                PushTelemetryResponse { throttle_time_ms: throttle, error_code: ErrorCode(error) }
            );
            for cut in 0..buf.len() {
                prop_assert!(PushTelemetryResponse::parse(version, &buf[..cut]).is_err(), "v{} cut {}", version, cut);
            }
        }
    }

    #[test]
    fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..96)) {
        for version in -1..=1 {
            if let Ok(p) = GetTelemetrySubscriptionsResponse::parse(version, &data) {
                prop_assert!(p.trailing <= data.len());
            }
            if let Ok(p) = PushTelemetryResponse::parse(version, &data) {
                prop_assert!(p.trailing <= data.len());
            }
        }
    }
}

/// The first request of a client: the zero id, byte for byte what kafka-protocol writes.
#[test]
fn the_first_get_request_matches_kafka_protocol() {
    let mut ours = Vec::new();
    GetTelemetrySubscriptionsRequest {
        client_instance_id: NO_CLIENT_INSTANCE_ID,
    }
    .encode(0, &mut ours);
    let mut theirs = BytesMut::new();
    KpGetRequest::default().encode(&mut theirs, 0).unwrap();
    assert_eq!(ours, theirs.to_vec());
}

/// What Kafka's broker answers (`ClientMetricsManager`): `*` for all metrics, the codecs it
/// accepts, delta temporality.
#[test]
fn a_broker_like_answer_asking_for_everything() {
    let kp = KpGetResponse::default()
        .with_subscription_id(-12345)
        .with_accepted_compression_types(vec![4, 3, 1, 2])
        .with_push_interval_ms(1000)
        .with_telemetry_max_bytes(1024 * 1024)
        .with_delta_temporality(true)
        .with_requested_metrics(vec![StrBytes::from_static_str("*")]);
    let mut buf = BytesMut::new();
    kp.encode(&mut buf, 0).unwrap();
    let r = GetTelemetrySubscriptionsResponse::parse(0, &buf)
        .unwrap()
        .body;
    assert!(r.requested_metrics.all());
    assert!(r
        .requested_metrics
        .matches("org.apache.kafka.producer.record.queue.time.avg"));
    assert_eq!(
        r.accepted_codecs().collect::<Vec<_>>(),
        [
            Compression::Zstd,
            Compression::Lz4,
            Compression::Gzip,
            Compression::Snappy
        ]
    );
}

/// The response header kafka-protocol declares for both APIs is v1 (flexible), as ours.
#[test]
fn header_versions_agree() {
    use kafka_protocol::protocol::HeaderVersion;
    for v in versions(ApiKey::GetTelemetrySubscriptions) {
        assert_eq!(
            ApiKey::GetTelemetrySubscriptions.response_header_version(v),
            KpGetResponse::header_version(v)
        );
        assert_eq!(
            ApiKey::GetTelemetrySubscriptions.request_header_version(v),
            KpGetRequest::header_version(v)
        );
    }
    for v in versions(ApiKey::PushTelemetry) {
        assert_eq!(
            ApiKey::PushTelemetry.response_header_version(v),
            KpPushResponse::header_version(v)
        );
        assert_eq!(
            ApiKey::PushTelemetry.request_header_version(v),
            KpPushRequest::header_version(v)
        );
    }
}

/// kafka-protocol's version ranges are ours.
#[test]
fn version_ranges_agree() {
    use kafka_protocol::protocol::Message;
    for (ours, theirs) in [
        (ApiKey::GetTelemetrySubscriptions, KpGetResponse::VERSIONS),
        (ApiKey::PushTelemetry, KpPushResponse::VERSIONS),
    ] {
        assert_eq!(
            ours.supported_versions(),
            (theirs.min, theirs.max),
            "{ours}"
        );
    }
    assert_eq!(
        ApiKey::from_code(71),
        Some(ApiKey::GetTelemetrySubscriptions)
    );
    assert_eq!(ApiKey::from_code(72), Some(ApiKey::PushTelemetry));
}
