//! EndTxn (key 26), versions 0-5: committing or aborting the open transaction.
//!
//! Sent to the transaction coordinator once every record of the transaction is acknowledged.
//! v2 adds PRODUCER_FENCED, v3 is the first flexible version, v4 adds TRANSACTION_ABORTABLE, v5
//! (transaction version 2, KIP-890 part 2) answers with the producer id and epoch to use next:
//! the coordinator bumps the epoch at every transaction end.

use super::primitives::{field, int16, int32, int64, skip_tags, PResult, Put};
use super::{ApiKey, DecodeError, Parsed};
use crate::error_code::ErrorCode;

const API: ApiKey = ApiKey::EndTxn;

/// An EndTxn request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnRequest<'a> {
    /// The transactional id.
    pub transactional_id: &'a str,
    /// The producer id.
    pub producer_id: i64,
    /// Its current epoch.
    pub producer_epoch: i16,
    /// Commit (true) or abort (false).
    pub committed: bool,
}

impl EndTxnRequest<'_> {
    /// Appends the request body (no header) at `version` (0-5; else a caller bug, checked
    /// with `debug_assert!`) to `buf`.
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "EndTxn v{version} is not supported"
        );
        let flexible = API.is_flexible(version);
        buf.put_string(flexible, self.transactional_id);
        buf.put_i64(self.producer_id);
        buf.put_i16(self.producer_epoch);
        buf.put_bool(self.committed);
        buf.put_empty_tags(flexible);
    }
}

/// A parsed EndTxn response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnResponse {
    /// How long the request was throttled for, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, [`ErrorCode::NONE`] on success.
    pub error_code: ErrorCode,
    /// v5+: the producer id for the next transaction (-1 below v5).
    pub producer_id: i64,
    /// v5+: its epoch (-1 below v5).
    pub producer_epoch: i16,
}

impl EndTxnResponse {
    /// Parses a response body (after the response header) to a request sent at `version`.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        Parsed::parse_with(API, version, body, |i| parse_body(i, version))
    }
}

fn parse_body(i: &[u8], version: i16) -> PResult<'_, EndTxnResponse> {
    let flexible = API.is_flexible(version);
    let (i, throttle_time_ms) = field("ThrottleTimeMs", int32)(i)?;
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    let (i, producer_id, producer_epoch) = if version >= 5 {
        let (i, id) = field("ProducerId", int64)(i)?;
        let (i, epoch) = field("ProducerEpoch", int16)(i)?;
        (i, id, epoch)
    } else {
        (i, -1, -1)
    };
    let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        EndTxnResponse {
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

    #[test]
    fn golden_request_v0_and_v3() {
        let req = EndTxnRequest {
            transactional_id: "t",
            producer_id: 5,
            producer_epoch: 2,
            committed: true,
        };
        let mut buf = Vec::new();
        req.encode(0, &mut buf);
        assert_eq!(
            buf,
            [0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 5, 0, 2, 1],
            "classic string, INT64, INT16, BOOLEAN"
        );
        let mut buf = Vec::new();
        req.encode(3, &mut buf);
        assert_eq!(buf, [2, b't', 0, 0, 0, 0, 0, 0, 0, 5, 0, 2, 1, 0]);
    }

    #[test]
    fn golden_response_v4_and_v5() {
        let v4 = [0, 0, 0, 0, 0, 51, 0];
        let r = EndTxnResponse::parse(4, &v4).unwrap();
        assert_eq!(r.body.error_code, ErrorCode::CONCURRENT_TRANSACTIONS);
        assert_eq!((r.body.producer_id, r.body.producer_epoch), (-1, -1));
        let v5 = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 4, 0];
        let r = EndTxnResponse::parse(5, &v5).unwrap();
        assert_eq!((r.body.producer_id, r.body.producer_epoch), (9, 4));
        assert_eq!(r.trailing, 0);
        for cut in 0..v5.len() {
            assert!(EndTxnResponse::parse(5, &v5[..cut]).is_err());
        }
    }
}
