//! ApiVersions (key 18), versions 0-4: which APIs and versions a broker speaks.
//!
//! The first request on every connection. v3 is the first flexible version (KIP-511) and adds the
//! client software name and version; its response still uses response header v0 (see
//! [`ApiKey::response_header_version`]). v4 has v3's shape (KAFKA-17011 lets a supported
//! feature's minimum be 0).
//!
//! A broker that does not support the request version answers with a **v0-encoded** body
//! carrying `UNSUPPORTED_VERSION` (35) and, since Kafka 2.4, its own `ApiKeys` list;
//! [`ApiVersionsResponse::parse`] recognises that fallback body whatever version was asked for.

use super::primitives::{
    array, field, int16, int32, int64, min_tags_size, parse_tag_value, skip_tags, string,
    tagged_fields, PResult, Put,
};
use super::{ApiKey, DecodeError, Parsed};
use crate::error_code::ErrorCode;

const API: ApiKey = ApiKey::ApiVersions;

/// An ApiVersions request. Build one per connection and send it before anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersionsRequest<'a> {
    /// The client's software name (v3+; not sent before). Brokers validate it against
    /// `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
    pub client_software_name: &'a str,
    /// The client's software version (v3+; not sent before), same character rules as the name.
    pub client_software_version: &'a str,
}

impl ApiVersionsRequest<'_> {
    /// Appends the request body (no header) at `version` to `buf`.
    ///
    /// `version` must be within [`ApiKey::supported_versions`] for ApiVersions (0-3); anything
    /// else is a caller bug (checked with `debug_assert!`).
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "ApiVersions v{version} is not supported"
        );
        let flexible = API.is_flexible(version);
        if version >= 3 {
            buf.put_string(flexible, self.client_software_name);
            buf.put_string(flexible, self.client_software_version);
        }
        buf.put_empty_tags(flexible);
    }
}

/// The versions a broker supports for one API (one `ApiKeys` entry of the response).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ApiVersionRange {
    /// The numeric API key (may be one this crate does not speak).
    pub api_key: i16,
    /// The lowest supported version, inclusive.
    pub min_version: i16,
    /// The highest supported version, inclusive.
    pub max_version: i16,
}

/// A parsed ApiVersions response.
///
/// When `error_code` is [`ErrorCode::UNSUPPORTED_VERSION`] the broker did not support the
/// request version; `api_keys` then still lists what it does support (brokers since 2.4), so
/// retry with [`ApiVersionsResponse::negotiate`]`(ApiKey::ApiVersions)`, or with v0 when the list
/// is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersionsResponse {
    /// The top-level error code.
    pub error_code: ErrorCode,
    /// The APIs the broker supports, in the broker's order.
    pub api_keys: Vec<ApiVersionRange>,
    /// How long the request was throttled for, in milliseconds (v1+; 0 before).
    pub throttle_time_ms: i32,
    /// The epoch of the finalized features (v3+ tagged field 1); -1 when absent or unknown.
    pub finalized_features_epoch: i64,
    /// The cluster-wide finalized features (v3+ tagged field 2), e.g. `transaction.version`
    /// (2: transactions of KIP-890 part 2) and `metadata.version`; valid only when
    /// `finalized_features_epoch` >= 0.
    pub finalized_features: Vec<FinalizedFeature>,
}

impl ApiVersionsResponse {
    /// Parses a response body (after the v0 response header) to a request sent at `version`.
    ///
    /// When `version >= 1` and the body starts with error code 35 (`UNSUPPORTED_VERSION`), the
    /// body is parsed as v0, the encoding brokers use for that answer. Only when the v0 reading
    /// fails or leaves bytes over while the reading at `version` uses the body exactly is the
    /// latter taken; otherwise the v0 result (including its error) is returned. (Reading a v0
    /// body at v3 can "succeed" with garbage, because a v0 array length starts with a zero byte,
    /// which is a null compact array.)
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        DecodeError::check_version(API, version)?;
        if version >= 1
            && body.get(..2) == Some(&ErrorCode::UNSUPPORTED_VERSION.0.to_be_bytes()[..])
        {
            let as_v0 = Self::parse_exact(0, body);
            if matches!(as_v0, Ok(ref p) if p.trailing == 0) {
                return as_v0;
            }
            match Self::parse_exact(version, body) {
                Ok(p) if p.trailing == 0 => return Ok(p),
                _ => return as_v0,
            }
        }
        Self::parse_exact(version, body)
    }

    /// Parses `body` strictly as `version`, without the UNSUPPORTED_VERSION fallback.
    fn parse_exact(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        let (rest, resp) =
            parse_body(body, version).map_err(|e| DecodeError::from_nom(API, version, e))?;
        Ok(Parsed {
            body: resp,
            trailing: rest.len(),
        })
    }

    /// The broker's `(min, max)` versions for `api`, or `None` when the broker did not list it.
    /// If the broker listed an API twice, the first entry counts.
    pub fn version_range(&self, api: ApiKey) -> Option<(i16, i16)> {
        self.api_keys
            .iter()
            .find(|r| r.api_key == api.code())
            .map(|r| (r.min_version, r.max_version))
    }

    /// The version to use for `api` with this broker: the highest version both this crate
    /// ([`ApiKey::supported_versions`]) and the broker support, or `None` when the broker does not
    /// list `api` or the two ranges do not overlap.
    pub fn negotiate(&self, api: ApiKey) -> Option<i16> {
        let (ours_lo, ours_hi) = api.supported_versions();
        let (theirs_lo, theirs_hi) = self.version_range(api)?;
        let lo = ours_lo.max(theirs_lo);
        let hi = ours_hi.min(theirs_hi);
        (lo <= hi).then_some(hi)
    }
}

/// The error code an ApiVersions answer starts with, read alone: for a refusal whose body is
/// not in the version asked (librdkafka's mock answers a v3 request with a body that is neither
/// v0 nor v3), where that code is all there is to go on. `None` for a body too short.
pub fn peek_error_code(body: &[u8]) -> Option<ErrorCode> {
    Some(ErrorCode(i16::from_be_bytes([
        *body.first()?,
        *body.get(1)?,
    ])))
}

fn api_version(i: &[u8], flexible: bool) -> PResult<'_, ApiVersionRange> {
    let (i, api_key) = field("ApiKey", int16)(i)?;
    let (i, min_version) = field("MinVersion", int16)(i)?;
    let (i, max_version) = field("MaxVersion", int16)(i)?;
    let (i, ()) = field("ApiKeys tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        ApiVersionRange {
            api_key,
            min_version,
            max_version,
        },
    ))
}

/// One finalized feature of an ApiVersions response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizedFeature {
    /// The feature's name (`transaction.version`, `metadata.version`, ...).
    pub name: String,
    /// The cluster-wide finalized maximum level.
    pub max_version_level: i16,
    /// The cluster-wide finalized minimum level.
    pub min_version_level: i16,
}

impl ApiVersionsResponse {
    /// The finalized (maximum) level of feature `name`, when the broker reported it with a
    /// valid epoch; `None` otherwise (an older broker, or the feature not finalized).
    pub fn finalized_level(&self, name: &str) -> Option<i16> {
        if self.finalized_features_epoch < 0 {
            return None;
        }
        self.finalized_features
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.max_version_level)
    }
}

fn finalized_feature(i: &[u8]) -> PResult<'_, FinalizedFeature> {
    let (i, name) = field("Name", string(true))(i)?;
    let (i, max_version_level) = field("MaxVersionLevel", int16)(i)?;
    let (i, min_version_level) = field("MinVersionLevel", int16)(i)?;
    let (i, ()) = field("tagged fields", |i| skip_tags(i, true))(i)?;
    Ok((
        i,
        FinalizedFeature {
            name,
            max_version_level,
            min_version_level,
        },
    ))
}

fn parse_body(i: &[u8], version: i16) -> PResult<'_, ApiVersionsResponse> {
    let flexible = API.is_flexible(version);
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    // ApiKey, MinVersion, MaxVersion, tagged fields.
    let min_api_key = 6 + min_tags_size(flexible);
    let (i, api_keys) = field(
        "ApiKeys",
        array(flexible, min_api_key, |i| api_version(i, flexible)),
    )(i)?;
    let (i, throttle_time_ms) = if version >= 1 {
        field("ThrottleTimeMs", int32)(i)?
    } else {
        (i, 0)
    };
    let mut finalized_features_epoch = -1;
    let mut finalized_features = Vec::new();
    let (i, ()) = field("tagged fields", |i| {
        tagged_fields(i, flexible, |tag, data| {
            // Tags 0 (SupportedFeatures), 3 (ZkMigrationReady) and any unknown ones are
            // skipped.
            match tag {
                1 => {
                    finalized_features_epoch =
                        parse_tag_value(data, field("FinalizedFeaturesEpoch", int64))?;
                }
                2 => {
                    finalized_features = parse_tag_value(
                        data,
                        // Name, MaxVersionLevel, MinVersionLevel, tagged fields.
                        field(
                            "FinalizedFeatures",
                            array(true, 1 + 4 + 1, finalized_feature),
                        ),
                    )?;
                }
                _ => {}
            }
            Ok(())
        })
    })(i)?;
    Ok((
        i,
        ApiVersionsResponse {
            error_code: ErrorCode(error_code),
            api_keys,
            throttle_time_ms,
            finalized_features_epoch,
            finalized_features,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::primitives::WireErrorKind;

    fn range(api_key: i16, min_version: i16, max_version: i16) -> ApiVersionRange {
        ApiVersionRange {
            api_key,
            min_version,
            max_version,
        }
    }

    #[test]
    fn golden_request_bodies() {
        let req = ApiVersionsRequest {
            client_software_name: "rdk",
            client_software_version: "1.0",
        };
        for v in 0..=2 {
            let mut buf = Vec::new();
            req.encode(v, &mut buf);
            assert!(buf.is_empty(), "v{v} has an empty body: {buf:?}");
        }
        let mut buf = Vec::new();
        req.encode(3, &mut buf);
        #[rustfmt::skip]
        let expected = [
            0x04, b'r', b'd', b'k', // ClientSoftwareName: compact string, len 3 + 1
            0x04, b'1', b'.', b'0', // ClientSoftwareVersion
            0x00,                   // no tagged fields
        ];
        assert_eq!(buf, expected);
    }

    #[test]
    fn golden_response_v0() {
        #[rustfmt::skip]
        let body = [
            0x00, 0x00,             // ErrorCode 0
            0x00, 0x00, 0x00, 0x02, // ApiKeys: 2 entries
            0x00, 0x00, 0x00, 0x03, 0x00, 0x0b, // Produce 3..=11
            0x00, 0x12, 0x00, 0x00, 0x00, 0x03, // ApiVersions 0..=3
        ];
        let p = ApiVersionsResponse::parse(0, &body).unwrap();
        assert_eq!(p.trailing, 0);
        assert_eq!(
            p.body,
            ApiVersionsResponse {
                error_code: ErrorCode::NONE,
                api_keys: vec![range(0, 3, 11), range(18, 0, 3)],
                throttle_time_ms: 0,
                finalized_features_epoch: -1,
                finalized_features: Vec::new(),
            }
        );
    }

    #[test]
    fn golden_response_v1_and_v2() {
        #[rustfmt::skip]
        let body = [
            0x00, 0x00,             // ErrorCode 0
            0x00, 0x00, 0x00, 0x01, // ApiKeys: 1 entry
            0x00, 0x16, 0x00, 0x00, 0x00, 0x04, // InitProducerId 0..=4
            0x00, 0x00, 0x01, 0x2c, // ThrottleTimeMs 300
        ];
        for v in 1..=2 {
            let p = ApiVersionsResponse::parse(v, &body).unwrap();
            assert_eq!(p.trailing, 0);
            assert_eq!(p.body.api_keys, vec![range(22, 0, 4)]);
            assert_eq!(p.body.throttle_time_ms, 300);
            assert_eq!(p.body.finalized_features_epoch, -1);
        }
    }

    #[rustfmt::skip]
    const V3_BODY: &[u8] = &[
        0x00, 0x00,             // ErrorCode 0
        0x03,                   // ApiKeys: compact array, 2 entries + 1
        0x00, 0x00, 0x00, 0x03, 0x00, 0x0b, 0x00, // Produce 3..=11, no tags
        0x00, 0x03, 0x00, 0x01, 0x00, 0x0c, 0x01, 0x07, 0x01, 0xaa, // Metadata 1..=12, unknown tag 7
        0x00, 0x00, 0x00, 0x64, // ThrottleTimeMs 100
        0x04,                   // 4 tagged fields
        0x00, 0x08,             // tag 0 SupportedFeatures, 8 bytes:
        0x02, 0x02, b'x', 0x00, 0x01, 0x00, 0x02, 0x00, //   [{name "x", min 1, max 2}]
        0x01, 0x08,             // tag 1 FinalizedFeaturesEpoch, 8 bytes:
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, //   5
        0x02, 0x1a,             // tag 2 FinalizedFeatures, 26 bytes:
        0x02, 0x14,             //   [{name (19 bytes)
        b't', b'r', b'a', b'n', b's', b'a', b'c', b't', b'i', b'o', b'n', b'.',
        b'v', b'e', b'r', b's', b'i', b'o', b'n',
        0x00, 0x02, 0x00, 0x00, 0x00, //   max 2, min 0, no tags}]
        0x03, 0x01, 0x01,       // tag 3 ZkMigrationReady, 1 byte: true
    ];

    #[test]
    fn golden_response_v3() {
        let p = ApiVersionsResponse::parse(3, V3_BODY).unwrap();
        assert_eq!(p.trailing, 0);
        assert_eq!(
            p.body,
            ApiVersionsResponse {
                error_code: ErrorCode::NONE,
                api_keys: vec![range(0, 3, 11), range(3, 1, 12)],
                throttle_time_ms: 100,
                finalized_features_epoch: 5,
                finalized_features: vec![FinalizedFeature {
                    name: "transaction.version".into(),
                    max_version_level: 2,
                    min_version_level: 0,
                }],
            }
        );
        assert_eq!(p.body.finalized_level("transaction.version"), Some(2));
        assert_eq!(p.body.finalized_level("metadata.version"), None);
        // Trailing bytes are counted, not rejected.
        let mut longer = V3_BODY.to_vec();
        longer.push(0);
        assert_eq!(ApiVersionsResponse::parse(3, &longer).unwrap().trailing, 1);
    }

    #[test]
    fn short_finalized_features_epoch_is_named() {
        // Tag 1 with only 4 bytes of value.
        let body = [
            0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x04, 0, 0, 0, 5,
        ];
        match ApiVersionsResponse::parse(3, &body) {
            Err(DecodeError::Malformed { field, kind, .. }) => {
                assert_eq!(field, "FinalizedFeaturesEpoch");
                assert_eq!(kind, WireErrorKind::Truncated);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unsupported_version_answer_is_read_as_v0() {
        // A broker that does not know ApiVersions v3 answers with a v0 body.
        #[rustfmt::skip]
        let body = [
            0x00, 0x23,             // ErrorCode 35 UNSUPPORTED_VERSION
            0x00, 0x00, 0x00, 0x02, // ApiKeys: 2 entries (brokers >= 2.4)
            0x00, 0x00, 0x00, 0x00, 0x00, 0x08, // Produce 0..=8
            0x00, 0x12, 0x00, 0x00, 0x00, 0x02, // ApiVersions 0..=2
        ];
        for v in 1..=3 {
            let p = ApiVersionsResponse::parse(v, &body).unwrap();
            assert_eq!(p.trailing, 0, "v{v}");
            assert_eq!(p.body.error_code, ErrorCode::UNSUPPORTED_VERSION);
            assert_eq!(p.body.api_keys, vec![range(0, 0, 8), range(18, 0, 2)]);
            assert_eq!(p.body.throttle_time_ms, 0);
            assert_eq!(p.body.finalized_features_epoch, -1);
            assert_eq!(p.body.negotiate(ApiKey::ApiVersions), Some(2));
            assert_eq!(p.body.negotiate(ApiKey::Produce), Some(8));
        }
        // Older brokers send an empty list.
        let p = ApiVersionsResponse::parse(3, &[0x00, 0x23, 0, 0, 0, 0]).unwrap();
        assert_eq!(p.body.error_code, ErrorCode::UNSUPPORTED_VERSION);
        assert!(p.body.api_keys.is_empty());
        assert_eq!(p.body.negotiate(ApiKey::ApiVersions), None);
        // A truncated fallback body is an error, not a misreading at v3.
        assert!(ApiVersionsResponse::parse(3, &body[..body.len() - 1]).is_err());
    }

    #[test]
    fn unsupported_version_at_the_asked_version_is_still_read() {
        // Error 35 in a body really encoded at v1 (ThrottleTimeMs present): the v0 reading would
        // leave 4 bytes over, the v1 reading uses everything.
        let body = [0x00, 0x23, 0, 0, 0, 1, 0x00, 0x12, 0, 0, 0, 1, 0, 0, 0, 9];
        let p = ApiVersionsResponse::parse(1, &body).unwrap();
        assert_eq!(p.trailing, 0);
        assert_eq!(p.body.throttle_time_ms, 9);
        assert_eq!(p.body.api_keys, vec![range(18, 0, 1)]);
    }

    #[test]
    fn negotiation() {
        let resp = ApiVersionsResponse {
            error_code: ErrorCode::NONE,
            api_keys: vec![
                range(0, 0, 14),
                range(3, 0, 8),
                range(22, 6, 6),
                range(18, 0, 5),
                range(18, 0, 1),
            ],
            throttle_time_ms: 0,
            finalized_features_epoch: -1,
            finalized_features: Vec::new(),
        };
        // Broker supports more than we do: our max.
        assert_eq!(resp.negotiate(ApiKey::Produce), Some(13));
        // Broker max below ours: its max.
        assert_eq!(resp.negotiate(ApiKey::Metadata), Some(8));
        // First entry wins for duplicates.
        assert_eq!(resp.version_range(ApiKey::ApiVersions), Some((0, 5)));
        assert_eq!(resp.negotiate(ApiKey::ApiVersions), Some(4));
        // Disjoint ranges.
        assert_eq!(resp.version_range(ApiKey::InitProducerId), Some((6, 6)));
        assert_eq!(resp.negotiate(ApiKey::InitProducerId), None);
        // Not listed at all.
        let empty = ApiVersionsResponse {
            api_keys: vec![],
            ..resp.clone()
        };
        assert_eq!(empty.version_range(ApiKey::Produce), None);
        assert_eq!(empty.negotiate(ApiKey::Produce), None);
        // Broker range inverted (min > max): nothing usable.
        let odd = ApiVersionsResponse {
            api_keys: vec![range(0, 9, 4)],
            ..resp
        };
        assert_eq!(odd.negotiate(ApiKey::Produce), None);
    }

    #[test]
    fn unsupported_parse_versions_are_rejected() {
        for v in [-1, 5, i16::MAX] {
            assert_eq!(
                ApiVersionsResponse::parse(v, V3_BODY),
                Err(DecodeError::UnsupportedVersion {
                    api: ApiKey::ApiVersions,
                    version: v
                })
            );
        }
    }

    #[test]
    fn errors_name_the_field() {
        // v0 body cut inside the only entry's MaxVersion: the array claims one entry of 6
        // bytes where 5 are left, refused at the array before the entry is read.
        let body = [0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0];
        match ApiVersionsResponse::parse(0, &body) {
            Err(DecodeError::Malformed { field, kind, .. }) => {
                assert_eq!((field, kind), ("ApiKeys", WireErrorKind::InvalidLength(1)));
            }
            other => panic!("{other:?}"),
        }
        // v1 body with its entry whole, cut inside ThrottleTimeMs.
        let body = [0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 9, 0, 0];
        match ApiVersionsResponse::parse(1, &body) {
            Err(DecodeError::Malformed {
                api,
                version,
                field,
                kind,
                ..
            }) => {
                assert_eq!(
                    (api, version, field, kind),
                    (
                        ApiKey::ApiVersions,
                        1,
                        "ThrottleTimeMs",
                        WireErrorKind::Truncated
                    )
                );
            }
            other => panic!("{other:?}"),
        }
        // v1 body missing ThrottleTimeMs.
        match ApiVersionsResponse::parse(1, &[0, 0, 0, 0, 0, 0]) {
            Err(DecodeError::Malformed { field, .. }) => assert_eq!(field, "ThrottleTimeMs"),
            other => panic!("{other:?}"),
        }
    }
}
