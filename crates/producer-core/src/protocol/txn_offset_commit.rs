//! TxnOffsetCommit (key 28), versions 0-5: the consumer offsets of a consume-transform-produce
//! transaction, sent to the group coordinator after AddOffsetsToTxn; they become visible when the
//! transaction commits.
//!
//! v2 adds each partition's leader epoch, v3 (flexible) the consumer's generation, member id
//! and group instance id so the group coordinator can fence zombies (KIP-447), v4 adds
//! TRANSACTION_ABORTABLE, v5 (transaction version 2) is v4 sent by a producer that knows the
//! coordinator verifies the transaction itself.

use super::primitives::{field, int32, skip_tags, PResult, Put};
use super::{topic_partition_errors, ApiKey, DecodeError, Parsed, TopicPartitionErrors};

const API: ApiKey = ApiKey::TxnOffsetCommit;

/// The consumer's group membership (KIP-447), sent from v3 on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupMember<'a> {
    /// The generation (-1: unknown).
    pub generation_id: i32,
    /// The member id ("" when unknown).
    pub member_id: &'a str,
    /// The static membership id, if any.
    pub group_instance_id: Option<&'a str>,
}

/// One partition's offset to commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnOffsetCommitPartition<'a> {
    /// The partition.
    pub partition: i32,
    /// The next offset to consume.
    pub offset: i64,
    /// The leader epoch of the last record consumed (-1: unknown; v2+).
    pub leader_epoch: i32,
    /// Metadata kept with the offset.
    pub metadata: Option<&'a str>,
}

/// A TxnOffsetCommit request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest<'a> {
    /// The transactional id.
    pub transactional_id: &'a str,
    /// The consumer group.
    pub group_id: &'a str,
    /// The producer id.
    pub producer_id: i64,
    /// Its current epoch.
    pub producer_epoch: i16,
    /// The consumer's membership (sent from v3).
    pub member: GroupMember<'a>,
    /// The offsets, by topic.
    pub topics: &'a [(&'a str, &'a [TxnOffsetCommitPartition<'a>])],
}

impl TxnOffsetCommitRequest<'_> {
    /// Appends the request body (no header) at `version` (0-5; else a caller bug, checked
    /// with `debug_assert!`) to `buf`.
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "TxnOffsetCommit v{version} is not supported"
        );
        let flexible = API.is_flexible(version);
        buf.put_string(flexible, self.transactional_id);
        buf.put_string(flexible, self.group_id);
        buf.put_i64(self.producer_id);
        buf.put_i16(self.producer_epoch);
        if version >= 3 {
            buf.put_i32(self.member.generation_id);
            buf.put_string(flexible, self.member.member_id);
            buf.put_nullable_string(flexible, self.member.group_instance_id);
        }
        buf.put_array_len(flexible, self.topics.len());
        for (topic, partitions) in self.topics {
            buf.put_string(flexible, topic);
            buf.put_array_len(flexible, partitions.len());
            for p in *partitions {
                buf.put_i32(p.partition);
                buf.put_i64(p.offset);
                if version >= 2 {
                    buf.put_i32(p.leader_epoch);
                }
                buf.put_nullable_string(flexible, p.metadata);
                buf.put_empty_tags(flexible);
            }
            buf.put_empty_tags(flexible);
        }
        buf.put_empty_tags(flexible);
    }
}

/// One topic's results in a TxnOffsetCommit response.
pub type TxnOffsetCommitTopicResult = TopicPartitionErrors;

/// A parsed TxnOffsetCommit response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitResponse {
    /// How long the request was throttled for, in milliseconds.
    pub throttle_time_ms: i32,
    /// The results, by topic.
    pub topics: Vec<TxnOffsetCommitTopicResult>,
}

impl TxnOffsetCommitResponse {
    /// Parses a response body (after the response header) to a request sent at `version`.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        Parsed::parse_with(API, version, body, |i| {
            parse_body(i, API.is_flexible(version))
        })
    }
}

fn parse_body(i: &[u8], flexible: bool) -> PResult<'_, TxnOffsetCommitResponse> {
    let (i, throttle_time_ms) = field("ThrottleTimeMs", int32)(i)?;
    let (i, topics) = field("Topics", topic_partition_errors(flexible))(i)?;
    let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        TxnOffsetCommitResponse {
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
    fn golden_request_v0_and_v3() {
        let offsets = [TxnOffsetCommitPartition {
            partition: 1,
            offset: 42,
            leader_epoch: 7,
            metadata: None,
        }];
        let topics = [("in", &offsets[..])];
        let req = TxnOffsetCommitRequest {
            transactional_id: "t",
            group_id: "g",
            producer_id: 3,
            producer_epoch: 1,
            member: GroupMember {
                generation_id: 5,
                member_id: "m",
                group_instance_id: None,
            },
            topics: &topics,
        };
        let mut buf = Vec::new();
        req.encode(0, &mut buf);
        #[rustfmt::skip]
        let v0 = [
            0, 1, b't', 0, 1, b'g',
            0, 0, 0, 0, 0, 0, 0, 3, 0, 1,
            0, 0, 0, 1, 0, 2, b'i', b'n',
            0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 42, 0xff, 0xff, // metadata null
        ];
        assert_eq!(buf, v0);
        let mut buf = Vec::new();
        req.encode(3, &mut buf);
        #[rustfmt::skip]
        let v3 = [
            2, b't', 2, b'g',
            0, 0, 0, 0, 0, 0, 0, 3, 0, 1,
            0, 0, 0, 5, 2, b'm', 0,          // generation 5, member "m", no instance id
            2, 3, b'i', b'n',
            2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 0, 7, 0, 0, // metadata null, tags
            0, 0,
        ];
        assert_eq!(buf, v3);
    }

    #[test]
    fn golden_response_v3() {
        let body = [0, 0, 0, 0, 2, 3, b'i', b'n', 2, 0, 0, 0, 1, 0, 120, 0, 0, 0];
        let r = TxnOffsetCommitResponse::parse(3, &body).unwrap();
        assert_eq!(r.trailing, 0);
        assert_eq!(
            r.body.topics[0].partitions,
            [(1, ErrorCode::TRANSACTION_ABORTABLE)]
        );
        for cut in 0..body.len() {
            assert!(TxnOffsetCommitResponse::parse(3, &body[..cut]).is_err());
        }
    }
}
