//! InitProducerId (key 22), versions 0-5: obtaining a producer id and epoch.
//!
//! Idempotent producers send it (with a null transactional id) to any broker before their first
//! Produce request, and again to bump the epoch after a sequence error. v2 is the first flexible
//! version; v3 adds the current `ProducerId`/`ProducerEpoch` (KIP-360 epoch bump); v4 adds the
//! `PRODUCER_FENCED` error, v5 `TRANSACTION_ABORTABLE` (same shape as v4).

use super::primitives::{field, int16, int32, int64, skip_tags, PResult, Put};
use super::{ApiKey, DecodeError, Parsed};
use crate::error_code::ErrorCode;

const API: ApiKey = ApiKey::InitProducerId;

/// An InitProducerId request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitProducerIdRequest<'a> {
    /// The transactional id, or `None` for a producer that is idempotent but not transactional.
    pub transactional_id: Option<&'a str>,
    /// How long the coordinator waits before aborting an idle transaction, in milliseconds;
    /// only meaningful with a transactional id.
    pub transaction_timeout_ms: i32,
    /// The producer id currently held, or -1 for none (v3+; not sent before).
    pub producer_id: i64,
    /// The epoch currently held, or -1 for none (v3+; not sent before).
    pub producer_epoch: i16,
}

impl InitProducerIdRequest<'_> {
    /// Appends the request body (no header) at `version` to `buf`.
    ///
    /// `version` must be within [`ApiKey::supported_versions`] for InitProducerId (0-4); anything
    /// else is a caller bug (checked with `debug_assert!`). Below v3, `producer_id` and
    /// `producer_epoch` are not sent.
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "InitProducerId v{version} is not supported"
        );
        let flexible = API.is_flexible(version);
        buf.put_nullable_string(flexible, self.transactional_id);
        buf.put_i32(self.transaction_timeout_ms);
        if version >= 3 {
            buf.put_i64(self.producer_id);
            buf.put_i16(self.producer_epoch);
        }
        buf.put_empty_tags(flexible);
    }
}

/// A parsed InitProducerId response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    /// How long the request was throttled for, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, [`ErrorCode::NONE`] on success.
    pub error_code: ErrorCode,
    /// The producer id assigned (-1 on error).
    pub producer_id: i64,
    /// The epoch of that producer id.
    pub producer_epoch: i16,
}

impl InitProducerIdResponse {
    /// Parses a response body (after the response header) to a request sent at `version`.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        Parsed::parse_with(API, version, body, |i| {
            parse_body(i, API.is_flexible(version))
        })
    }
}

fn parse_body(i: &[u8], flexible: bool) -> PResult<'_, InitProducerIdResponse> {
    let (i, throttle_time_ms) = field("ThrottleTimeMs", int32)(i)?;
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    let (i, producer_id) = field("ProducerId", int64)(i)?;
    let (i, producer_epoch) = field("ProducerEpoch", int16)(i)?;
    let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        InitProducerIdResponse {
            throttle_time_ms,
            error_code: ErrorCode(error_code),
            producer_id,
            producer_epoch,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::primitives::WireErrorKind;

    #[test]
    fn golden_request_v0_v1() {
        let req = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            producer_id: 7,
            producer_epoch: 3,
        };
        for v in 0..=1 {
            let mut buf = Vec::new();
            req.encode(v, &mut buf);
            #[rustfmt::skip]
            let expected = [
                0xff, 0xff,             // TransactionalId: null (INT16 -1)
                0x00, 0x00, 0xea, 0x60, // TransactionTimeoutMs 60000
            ];
            assert_eq!(buf, expected, "v{v}");
        }
        let mut buf = Vec::new();
        InitProducerIdRequest {
            transactional_id: Some("tx"),
            ..req
        }
        .encode(0, &mut buf);
        assert_eq!(buf, [0x00, 0x02, b't', b'x', 0x00, 0x00, 0xea, 0x60]);
    }

    #[test]
    fn golden_request_v2() {
        let req = InitProducerIdRequest {
            transactional_id: Some("t"),
            transaction_timeout_ms: -1,
            producer_id: 7,
            producer_epoch: 3,
        };
        let mut buf = Vec::new();
        req.encode(2, &mut buf);
        #[rustfmt::skip]
        let expected = [
            0x02, b't',             // TransactionalId: compact nullable string, len 1 + 1
            0xff, 0xff, 0xff, 0xff, // TransactionTimeoutMs -1
            0x00,                   // no tagged fields
        ];
        assert_eq!(buf, expected);
    }

    #[test]
    fn golden_request_v3_v4() {
        let req = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: i32::MAX,
            producer_id: 0x0102_0304_0506_0708,
            producer_epoch: 9,
        };
        for v in 3..=4 {
            let mut buf = Vec::new();
            req.encode(v, &mut buf);
            #[rustfmt::skip]
            let expected = [
                0x00,                   // TransactionalId: compact null
                0x7f, 0xff, 0xff, 0xff, // TransactionTimeoutMs i32::MAX
                0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // ProducerId
                0x00, 0x09,             // ProducerEpoch 9
                0x00,                   // no tagged fields
            ];
            assert_eq!(buf, expected, "v{v}");
        }
    }

    #[rustfmt::skip]
    const V0_BODY: &[u8] = &[
        0x00, 0x00, 0x00, 0x0a, // ThrottleTimeMs 10
        0x00, 0x00,             // ErrorCode 0
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, // ProducerId 4096
        0x00, 0x02,             // ProducerEpoch 2
    ];

    fn expected() -> InitProducerIdResponse {
        InitProducerIdResponse {
            throttle_time_ms: 10,
            error_code: ErrorCode::NONE,
            producer_id: 4096,
            producer_epoch: 2,
        }
    }

    #[test]
    fn golden_response_v0_v1() {
        for v in 0..=1 {
            assert_eq!(
                InitProducerIdResponse::parse(v, V0_BODY).unwrap(),
                Parsed {
                    body: expected(),
                    trailing: 0
                }
            );
        }
    }

    #[test]
    fn golden_response_flexible() {
        let mut body = V0_BODY.to_vec();
        body.push(0x00); // no tagged fields
        for v in 2..=4 {
            assert_eq!(
                InitProducerIdResponse::parse(v, &body).unwrap(),
                Parsed {
                    body: expected(),
                    trailing: 0
                }
            );
        }
        // An unknown tagged field is skipped; a trailing byte is counted.
        let mut body = V0_BODY.to_vec();
        body.extend_from_slice(&[0x01, 0x05, 0x02, 0xaa, 0xbb, 0xff]);
        assert_eq!(
            InitProducerIdResponse::parse(4, &body).unwrap(),
            Parsed {
                body: expected(),
                trailing: 1
            }
        );
        // At a non-flexible version the same bytes are all trailing.
        assert_eq!(InitProducerIdResponse::parse(1, &body).unwrap().trailing, 6);
    }

    #[test]
    fn golden_error_response() {
        #[rustfmt::skip]
        let body = [
            0x00, 0x00, 0x00, 0x00, // ThrottleTimeMs 0
            0x00, 0x5a,             // ErrorCode 90 PRODUCER_FENCED
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // ProducerId -1
            0xff, 0xff,             // ProducerEpoch -1
            0x00,                   // no tagged fields
        ];
        let p = InitProducerIdResponse::parse(4, &body).unwrap().body;
        assert_eq!(p.error_code, ErrorCode::PRODUCER_FENCED);
        assert_eq!((p.producer_id, p.producer_epoch), (-1, -1));
    }

    #[test]
    fn errors_name_the_field() {
        for (cut, name) in [
            (0, "ThrottleTimeMs"),
            (5, "ErrorCode"),
            (13, "ProducerId"),
            (15, "ProducerEpoch"),
        ] {
            match InitProducerIdResponse::parse(0, &V0_BODY[..cut]) {
                Err(DecodeError::Malformed {
                    api,
                    version,
                    field,
                    kind,
                    ..
                }) => {
                    assert_eq!(
                        (api, version, field, kind),
                        (ApiKey::InitProducerId, 0, name, WireErrorKind::Truncated)
                    );
                }
                other => panic!("cut {cut}: {other:?}"),
            }
        }
        // Flexible body missing its tag section.
        match InitProducerIdResponse::parse(2, V0_BODY) {
            Err(DecodeError::Malformed { field, .. }) => assert_eq!(field, "tagged fields"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unsupported_parse_versions_are_rejected() {
        for v in [-1, 6, 7] {
            assert_eq!(
                InitProducerIdResponse::parse(v, V0_BODY),
                Err(DecodeError::UnsupportedVersion {
                    api: ApiKey::InitProducerId,
                    version: v
                })
            );
        }
    }
}
