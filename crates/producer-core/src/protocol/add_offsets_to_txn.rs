//! AddOffsetsToTxn (key 25), versions 0-4: adding a consumer group's offsets to the open
//! transaction (KIP-98), before TxnOffsetCommit sends them to the group coordinator.
//!
//! Sent to the transaction coordinator. v2 adds PRODUCER_FENCED, v3 is the first flexible
//! version, v4 adds TRANSACTION_ABORTABLE.

use super::primitives::{field, int16, int32, skip_tags, PResult, Put};
use super::{ApiKey, DecodeError, Parsed};
use crate::error_code::ErrorCode;

const API: ApiKey = ApiKey::AddOffsetsToTxn;

/// An AddOffsetsToTxn request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddOffsetsToTxnRequest<'a> {
    /// The transactional id.
    pub transactional_id: &'a str,
    /// The producer id.
    pub producer_id: i64,
    /// Its current epoch.
    pub producer_epoch: i16,
    /// The consumer group whose offsets the transaction commits.
    pub group_id: &'a str,
}

impl AddOffsetsToTxnRequest<'_> {
    /// Appends the request body (no header) at `version` (0-4; else a caller bug, checked
    /// with `debug_assert!`) to `buf`.
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "AddOffsetsToTxn v{version} is not supported"
        );
        let flexible = API.is_flexible(version);
        buf.put_string(flexible, self.transactional_id);
        buf.put_i64(self.producer_id);
        buf.put_i16(self.producer_epoch);
        buf.put_string(flexible, self.group_id);
        buf.put_empty_tags(flexible);
    }
}

/// A parsed AddOffsetsToTxn response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddOffsetsToTxnResponse {
    /// How long the request was throttled for, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, [`ErrorCode::NONE`] on success.
    pub error_code: ErrorCode,
}

impl AddOffsetsToTxnResponse {
    /// Parses a response body (after the response header) to a request sent at `version`.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        Parsed::parse_with(API, version, body, |i| {
            parse_body(i, API.is_flexible(version))
        })
    }
}

fn parse_body(i: &[u8], flexible: bool) -> PResult<'_, AddOffsetsToTxnResponse> {
    let (i, throttle_time_ms) = field("ThrottleTimeMs", int32)(i)?;
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        AddOffsetsToTxnResponse {
            throttle_time_ms,
            error_code: ErrorCode(error_code),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_request_and_response() {
        let req = AddOffsetsToTxnRequest {
            transactional_id: "t",
            producer_id: 1,
            producer_epoch: 0,
            group_id: "g",
        };
        let mut buf = Vec::new();
        req.encode(3, &mut buf);
        assert_eq!(buf, [2, b't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 2, b'g', 0]);
        let mut buf = Vec::new();
        req.encode(0, &mut buf);
        assert_eq!(buf, [0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, b'g']);
        let r = AddOffsetsToTxnResponse::parse(4, &[0, 0, 0, 7, 0, 90, 0]).unwrap();
        assert_eq!(r.body.throttle_time_ms, 7);
        assert_eq!(r.body.error_code, ErrorCode::PRODUCER_FENCED);
        assert!(AddOffsetsToTxnResponse::parse(4, &[0, 0, 0, 7, 0, 90]).is_err());
    }
}
