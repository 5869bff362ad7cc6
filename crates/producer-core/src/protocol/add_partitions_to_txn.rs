//! AddPartitionsToTxn (key 24), the client's versions 0-3: adding partitions to the open
//! transaction before the first Produce to them (transaction version 1; with version 2 the
//! partitions join implicitly with Produce v12, KIP-890 part 2).
//!
//! Sent to the transaction coordinator. v2 adds PRODUCER_FENCED, v3 is the first flexible
//! version; v4 and v5 batch several transactions and are spoken between brokers only, so this
//! crate neither sends nor parses them.

use super::primitives::{field, int32, skip_tags, PResult, Put};
use super::{topic_partition_errors, ApiKey, DecodeError, Parsed, TopicPartitionErrors};

const API: ApiKey = ApiKey::AddPartitionsToTxn;

/// An AddPartitionsToTxn request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddPartitionsToTxnRequest<'a> {
    /// The transactional id.
    pub transactional_id: &'a str,
    /// The producer id.
    pub producer_id: i64,
    /// Its current epoch.
    pub producer_epoch: i16,
    /// The partitions to add, by topic.
    pub topics: &'a [(&'a str, &'a [i32])],
}

impl AddPartitionsToTxnRequest<'_> {
    /// Appends the request body (no header) at `version` (0-3; else a caller bug, checked
    /// with `debug_assert!`) to `buf`.
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "AddPartitionsToTxn v{version} is not supported"
        );
        let flexible = API.is_flexible(version);
        buf.put_string(flexible, self.transactional_id);
        buf.put_i64(self.producer_id);
        buf.put_i16(self.producer_epoch);
        buf.put_array_len(flexible, self.topics.len());
        for (topic, partitions) in self.topics {
            buf.put_string(flexible, topic);
            buf.put_array_len(flexible, partitions.len());
            for p in *partitions {
                buf.put_i32(*p);
            }
            buf.put_empty_tags(flexible);
        }
        buf.put_empty_tags(flexible);
    }
}

/// One topic's results in an AddPartitionsToTxn response.
pub type AddPartitionsToTxnTopicResult = TopicPartitionErrors;

/// A parsed AddPartitionsToTxn response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitionsToTxnResponse {
    /// How long the request was throttled for, in milliseconds.
    pub throttle_time_ms: i32,
    /// The results, by topic.
    pub topics: Vec<AddPartitionsToTxnTopicResult>,
}

impl AddPartitionsToTxnResponse {
    /// Parses a response body (after the response header) to a request sent at `version`.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        Parsed::parse_with(API, version, body, |i| {
            parse_body(i, API.is_flexible(version))
        })
    }
}

fn parse_body(i: &[u8], flexible: bool) -> PResult<'_, AddPartitionsToTxnResponse> {
    let (i, throttle_time_ms) = field("ThrottleTimeMs", int32)(i)?;
    let (i, topics) = field("ResultsByTopicV3AndBelow", topic_partition_errors(flexible))(i)?;
    let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        AddPartitionsToTxnResponse {
            throttle_time_ms,
            topics,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn golden_request_and_response_v3() {
        let req = AddPartitionsToTxnRequest {
            transactional_id: "t",
            producer_id: 1,
            producer_epoch: 0,
            topics: &[("a", &[0, 2])],
        };
        let mut buf = Vec::new();
        req.encode(3, &mut buf);
        #[rustfmt::skip]
        let expected = [
            2, b't',
            0, 0, 0, 0, 0, 0, 0, 1,
            0, 0,
            2,                   // topics: 1
            2, b'a',
            3, 0, 0, 0, 0, 0, 0, 0, 2, // partitions [0, 2]
            0,                   // topic tags
            0,                   // request tags
        ];
        assert_eq!(buf, expected);
        #[rustfmt::skip]
        let body = [
            0, 0, 0, 0,
            2,                   // topics: 1
            2, b'a',
            2, 0, 0, 0, 2, 0, 53, 0, // partition 2: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            0,
            0,
        ];
        let r = AddPartitionsToTxnResponse::parse(3, &body).unwrap();
        assert_eq!(r.trailing, 0);
        assert_eq!(
            r.body.topics,
            [AddPartitionsToTxnTopicResult {
                name: "a".into(),
                partitions: vec![(2, ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)],
            }]
        );
        for cut in 0..body.len() {
            assert!(AddPartitionsToTxnResponse::parse(3, &body[..cut]).is_err());
        }
        assert!(matches!(
            AddPartitionsToTxnResponse::parse(4, &body),
            Err(DecodeError::UnsupportedVersion { .. })
        ));
    }
}
