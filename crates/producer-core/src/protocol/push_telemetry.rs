//! PushTelemetry (key 72), version 0: client metrics pushed to the broker (KIP-714).
//!
//! Sent every push interval of the subscription GetTelemetrySubscriptions returned (see
//! [`super::get_telemetry_subscriptions`]), naming that subscription, and once more with
//! `terminating` set when the client closes. The metrics are OpenTelemetry `MetricsData` (v1
//! protobuf), compressed with one of the subscription's accepted compression types; the answer
//! is a throttle and an error code only. v0 is flexible.
//!
//! The producer sends it from its telemetry state machine (`producer/telemetry/`).

use std::fmt;

use super::primitives::{field, int16, int32, skip_tags, PResult, Put};
use super::{ApiKey, DecodeError, Parsed};
use crate::error_code::ErrorCode;
use crate::record::Compression;

const API: ApiKey = ApiKey::PushTelemetry;

/// A PushTelemetry request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PushTelemetryRequest<'a> {
    /// The client instance id the broker assigned (GetTelemetrySubscriptions).
    pub client_instance_id: [u8; 16],
    /// The subscription the metrics answer.
    pub subscription_id: i32,
    /// True for the last push, as the client closes.
    pub terminating: bool,
    /// How `metrics` is compressed (its id on the wire: 0 none, 1 gzip, 2 snappy, 3 lz4,
    /// 4 zstd); one of the subscription's accepted types.
    pub compression: Compression,
    /// The metrics: OpenTelemetry `MetricsData` (v1 protobuf), compressed with `compression`.
    pub metrics: &'a [u8],
}

impl fmt::Debug for PushTelemetryRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushTelemetryRequest")
            .field("client_instance_id", &self.client_instance_id)
            .field("subscription_id", &self.subscription_id)
            .field("terminating", &self.terminating)
            .field("compression", &self.compression)
            .field("metrics", &format_args!("<{} bytes>", self.metrics.len()))
            .finish()
    }
}

impl PushTelemetryRequest<'_> {
    /// Appends the request body (no header) at `version` (0; else a caller bug, checked with
    /// `debug_assert!`) to `buf`.
    ///
    /// # Panics
    /// If `metrics` is longer than `u32::MAX - 1` bytes (see [`Put`]: lengths never wrap); the
    /// subscription's `telemetry_max_bytes` (an INT32) bounds it far below.
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "PushTelemetry v{version} is not supported"
        );
        let flexible = API.is_flexible(version);
        buf.put_uuid(self.client_instance_id);
        buf.put_i32(self.subscription_id);
        buf.put_bool(self.terminating);
        // Attribute bits are 0-4.
        buf.put_i8(self.compression.attribute_bits() as i8);
        buf.put_bytes(flexible, self.metrics);
        buf.put_empty_tags(flexible);
    }
}

/// A parsed PushTelemetry response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushTelemetryResponse {
    /// How long the request was throttled for, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code: [`ErrorCode::NONE`], or for instance `UNKNOWN_SUBSCRIPTION_ID` (117:
    /// get the subscription again), `TELEMETRY_TOO_LARGE` (118), `UNSUPPORTED_COMPRESSION_TYPE`,
    /// `INVALID_RECORD`, `THROTTLING_QUOTA_EXCEEDED`.
    pub error_code: ErrorCode,
}

impl PushTelemetryResponse {
    /// Parses a response body (after the response header) to a request sent at `version`.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        Parsed::parse_with(API, version, body, |i| {
            parse_body(i, API.is_flexible(version))
        })
    }
}

fn parse_body(i: &[u8], flexible: bool) -> PResult<'_, PushTelemetryResponse> {
    let (i, throttle_time_ms) = field("ThrottleTimeMs", int32)(i)?;
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        PushTelemetryResponse {
            throttle_time_ms,
            error_code: ErrorCode(error_code),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::primitives::WireErrorKind;

    #[test]
    fn golden_request() {
        let id: [u8; 16] = std::array::from_fn(|i| 0xa0 + i as u8);
        let req = PushTelemetryRequest {
            client_instance_id: id,
            subscription_id: 0x0102_0304,
            terminating: true,
            compression: Compression::Zstd,
            metrics: b"otlp",
        };
        let mut buf = Vec::new();
        req.encode(0, &mut buf);
        let mut expected = id.to_vec(); // ClientInstanceId
        #[rustfmt::skip]
        expected.extend_from_slice(&[
            0x01, 0x02, 0x03, 0x04,     // SubscriptionId
            0x01,                       // Terminating true
            0x04,                       // CompressionType 4 (zstd)
            0x05, b'o', b't', b'l', b'p', // Metrics: compact bytes, len 4 + 1
            0x00,                       // no tagged fields
        ]);
        assert_eq!(buf, expected);
    }

    #[test]
    fn each_codec_goes_as_its_id_and_empty_metrics_as_one_byte() {
        for c in Compression::ALL {
            let mut buf = Vec::new();
            PushTelemetryRequest {
                client_instance_id: [0; 16],
                subscription_id: -1,
                terminating: false,
                compression: c,
                metrics: &[],
            }
            .encode(0, &mut buf);
            assert_eq!(
                buf[16..],
                [
                    0xff,
                    0xff,
                    0xff,
                    0xff,
                    0x00,
                    c.attribute_bits() as u8,
                    0x01,
                    0x00
                ],
                "{c}"
            );
        }
    }

    #[test]
    fn the_metrics_stay_out_of_debug() {
        let req = PushTelemetryRequest {
            client_instance_id: [0; 16],
            subscription_id: 1,
            terminating: false,
            compression: Compression::None,
            metrics: &[0xab; 1000],
        };
        let text = format!("{req:?}");
        assert!(text.contains("<1000 bytes>"), "{text}");
        assert!(!text.contains("171"), "{text}");
    }

    const BODY: &[u8] = &[0x00, 0x00, 0x01, 0x00, 0x00, 0x75, 0x00];

    #[test]
    fn golden_response() {
        assert_eq!(
            PushTelemetryResponse::parse(0, BODY).unwrap(),
            Parsed {
                body: PushTelemetryResponse {
                    throttle_time_ms: 256,
                    error_code: ErrorCode(117),
                },
                trailing: 0
            }
        );
        // An unknown tagged field is skipped; a trailing byte is counted.
        let body = [0, 0, 0, 0, 0, 0, 0x01, 0x03, 0x01, 0xaa, 0xff];
        assert_eq!(
            PushTelemetryResponse::parse(0, &body).unwrap(),
            Parsed {
                body: PushTelemetryResponse {
                    throttle_time_ms: 0,
                    error_code: ErrorCode::NONE,
                },
                trailing: 1
            }
        );
    }

    #[test]
    fn every_truncation_is_an_error_naming_its_field() {
        for (cut, name) in [
            (0, "ThrottleTimeMs"),
            (3, "ThrottleTimeMs"),
            (4, "ErrorCode"),
            (5, "ErrorCode"),
            (6, "tagged fields"),
        ] {
            match PushTelemetryResponse::parse(0, &BODY[..cut]) {
                Err(DecodeError::Malformed {
                    api,
                    version,
                    field,
                    kind,
                    ..
                }) => assert_eq!(
                    (api, version, field, kind),
                    (ApiKey::PushTelemetry, 0, name, WireErrorKind::Truncated),
                    "cut {cut}"
                ),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
        // A tag section claiming more tags than bytes left.
        let body = [0, 0, 0, 0, 0, 0, 0x05, 0x00];
        match PushTelemetryResponse::parse(0, &body) {
            Err(DecodeError::Malformed { field, kind, .. }) => {
                assert_eq!(
                    (field, kind),
                    ("tagged fields", WireErrorKind::InvalidLength(5))
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unsupported_parse_versions_are_rejected() {
        for v in [-1, 1, 2] {
            assert_eq!(
                PushTelemetryResponse::parse(v, BODY),
                Err(DecodeError::UnsupportedVersion {
                    api: ApiKey::PushTelemetry,
                    version: v
                })
            );
        }
    }
}
