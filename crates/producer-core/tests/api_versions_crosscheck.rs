//! Cross-checks ApiVersions against the independent `kafka-protocol` codec, at every supported
//! version: requests we encode must decode there, responses it encodes must parse here.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{
    ApiVersionsRequest as KpRequest, ApiVersionsResponse as KpResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use producer_core::protocol::api_versions::{
    ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse,
};
use producer_core::protocol::{parse_response_header, ApiKey};
use producer_core::ErrorCode;
use proptest::prelude::*;

const VERSIONS: std::ops::RangeInclusive<i16> = 0..=4;

fn encode_kp(resp: &KpResponse, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    resp.encode(&mut buf, version)
        .expect("kafka-protocol encodes");
    buf.to_vec()
}

fn unknown_tags(first_tag: i32) -> impl Strategy<Value = BTreeMap<i32, Bytes>> {
    proptest::collection::btree_map(
        first_tag..first_tag + 50,
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Bytes::from),
        0..3,
    )
}

fn api_version_entry() -> impl Strategy<Value = ApiVersion> {
    (any::<i16>(), any::<i16>(), any::<i16>(), unknown_tags(0)).prop_map(|(k, lo, hi, tags)| {
        ApiVersion::default()
            .with_api_key(k)
            .with_min_version(lo)
            .with_max_version(hi)
            .with_unknown_tagged_fields(tags)
    })
}

fn feature_name() -> impl Strategy<Value = StrBytes> {
    "[a-z.]{0,12}".prop_map(StrBytes::from_string)
}

/// A response with every field set, including the tagged fields we skip and unknown ones.
fn kp_response() -> impl Strategy<Value = KpResponse> {
    (
        prop_oneof![Just(0i16), Just(35i16), any::<i16>()],
        proptest::collection::vec(api_version_entry(), 0..12),
        any::<i32>(),
        proptest::collection::vec((feature_name(), any::<i16>(), any::<i16>()), 0..3),
        prop_oneof![Just(-1i64), any::<i64>()],
        proptest::collection::vec((feature_name(), any::<i16>(), any::<i16>()), 0..3),
        any::<bool>(),
        unknown_tags(4),
    )
        .prop_map(
            |(error_code, api_keys, throttle, supported, epoch, finalized, zk, tags)| {
                KpResponse::default()
                    .with_error_code(error_code)
                    .with_api_keys(api_keys)
                    .with_throttle_time_ms(throttle)
                    .with_supported_features(
                        supported
                            .into_iter()
                            .map(|(n, lo, hi)| {
                                SupportedFeatureKey::default()
                                    .with_name(n)
                                    .with_min_version(lo)
                                    .with_max_version(hi)
                            })
                            .collect(),
                    )
                    .with_finalized_features_epoch(epoch)
                    .with_finalized_features(
                        finalized
                            .into_iter()
                            .map(|(n, lo, hi)| {
                                FinalizedFeatureKey::default()
                                    .with_name(n)
                                    .with_min_version_level(lo)
                                    .with_max_version_level(hi)
                            })
                            .collect(),
                    )
                    .with_zk_migration_ready(zk)
                    .with_unknown_tagged_fields(tags)
            },
        )
}

fn expected_ranges(kp: &KpResponse) -> Vec<ApiVersionRange> {
    kp.api_keys
        .iter()
        .map(|a| ApiVersionRange {
            api_key: a.api_key,
            min_version: a.min_version,
            max_version: a.max_version,
        })
        .collect()
}

fn check_response(kp: &KpResponse, version: i16) -> Result<(), TestCaseError> {
    let bytes = encode_kp(kp, version);
    let parsed = ApiVersionsResponse::parse(version, &bytes)
        .map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
    prop_assert_eq!(parsed.trailing, 0);
    let body = parsed.body;
    prop_assert_eq!(body.error_code, ErrorCode(kp.error_code));
    prop_assert_eq!(body.api_keys, expected_ranges(kp));
    prop_assert_eq!(
        body.throttle_time_ms,
        if version >= 1 { kp.throttle_time_ms } else { 0 }
    );
    prop_assert_eq!(
        body.finalized_features_epoch,
        if version >= 3 {
            kp.finalized_features_epoch
        } else {
            -1
        }
    );
    let expected_finalized: Vec<(String, i16, i16)> = if version >= 3 {
        kp.finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.max_version_level, f.min_version_level))
            .collect()
    } else {
        Vec::new()
    };
    let finalized: Vec<(String, i16, i16)> = body
        .finalized_features
        .iter()
        .map(|f| (f.name.clone(), f.max_version_level, f.min_version_level))
        .collect();
    prop_assert_eq!(finalized, expected_finalized);

    // Every strict prefix is an error (the parser reads up to the last byte). With error 35 a
    // prefix may legitimately read as a v0 fallback body, so only the absence of panics counts.
    for cut in 0..bytes.len() {
        let r = ApiVersionsResponse::parse(version, &bytes[..cut]);
        if kp.error_code != 35 {
            prop_assert!(
                r.is_err(),
                "v{} prefix of {} / {} bytes parsed: {:?}",
                version,
                cut,
                bytes.len(),
                r
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn requests_decode_in_kafka_protocol(name in ".{0,20}", sw_version in "[a-zA-Z0-9.-]{0,20}") {
        for version in VERSIONS {
            let req = ApiVersionsRequest { client_software_name: &name, client_software_version: &sw_version };
            let mut buf = Vec::new();
            req.encode(version, &mut buf);
            let mut bytes = Bytes::from(buf);
            let decoded = KpRequest::decode(&mut bytes, version).map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert!(bytes.is_empty(), "v{} left {} bytes", version, bytes.len());
            if version >= 3 {
                prop_assert_eq!(decoded.client_software_name.as_str(), name.as_str());
                prop_assert_eq!(decoded.client_software_version.as_str(), sw_version.as_str());
            } else {
                prop_assert_eq!(decoded, KpRequest::default());
            }
        }
    }

    #[test]
    fn responses_from_kafka_protocol_parse(kp in kp_response()) {
        for version in VERSIONS {
            check_response(&kp, version)?;
        }
    }

    /// A broker that does not support the version asked for answers with a v0 body holding
    /// UNSUPPORTED_VERSION and its api keys; every version must read it as such.
    #[test]
    fn v0_unsupported_version_fallback_parses_at_every_version(
        entries in proptest::collection::vec(api_version_entry(), 0..12),
        correlation_id: i32,
    ) {
        let kp = KpResponse::default().with_error_code(35).with_api_keys(entries);
        let body = encode_kp(&kp, 0);
        let mut frame = correlation_id.to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        for version in VERSIONS {
            let (id, rest) = parse_response_header(ApiKey::ApiVersions, version, &frame).unwrap();
            prop_assert_eq!(id, correlation_id);
            let parsed = ApiVersionsResponse::parse(version, rest).map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
            prop_assert_eq!(parsed.trailing, 0);
            prop_assert_eq!(parsed.body.error_code, ErrorCode::UNSUPPORTED_VERSION);
            prop_assert_eq!(&parsed.body.api_keys, &expected_ranges(&kp));
            prop_assert_eq!(parsed.body.throttle_time_ms, 0);
            prop_assert_eq!(parsed.body.finalized_features_epoch, -1);
        }
    }

    #[test]
    fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200), fallback: bool) {
        let mut data = data;
        if fallback && data.len() >= 2 {
            // Exercise the UNSUPPORTED_VERSION path too.
            data[0] = 0;
            data[1] = 35;
        }
        for version in -1..=4 {
            let r = ApiVersionsResponse::parse(version, &data);
            if let Ok(p) = r {
                prop_assert!(p.trailing <= data.len());
                prop_assert!(p.body.api_keys.len() <= data.len());
            }
        }
    }
}

#[test]
fn v3_request_answered_with_v0_unsupported_version() {
    // What a 2.4+ broker without ApiVersions v3 sends back (after the v0 response header).
    let kp = KpResponse::default()
        .with_error_code(35)
        .with_api_keys(vec![
            ApiVersion::default()
                .with_api_key(0)
                .with_min_version(0)
                .with_max_version(7),
            ApiVersion::default()
                .with_api_key(18)
                .with_min_version(0)
                .with_max_version(2),
        ]);
    let body = encode_kp(&kp, 0);
    let parsed = ApiVersionsResponse::parse(3, &body).unwrap();
    assert_eq!(parsed.trailing, 0);
    assert_eq!(parsed.body.error_code, ErrorCode::UNSUPPORTED_VERSION);
    assert_eq!(
        parsed.body.api_keys,
        vec![
            ApiVersionRange {
                api_key: 0,
                min_version: 0,
                max_version: 7
            },
            ApiVersionRange {
                api_key: 18,
                min_version: 0,
                max_version: 2
            },
        ]
    );
    // The client retries ApiVersions at the broker's max.
    assert_eq!(parsed.body.negotiate(ApiKey::ApiVersions), Some(2));
    // Produce 0..=7 overlaps ours (3..=12) at 3..=7.
    assert_eq!(parsed.body.negotiate(ApiKey::Produce), Some(7));
}
