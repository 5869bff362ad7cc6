//! Produce (API key 0), versions 3-13: sending record batches to partition leaders.
//!
//! Versions 9 and later are flexible (compact encodings, tagged fields). Field order and version
//! ranges follow Kafka's `ProduceRequest.json` / `ProduceResponse.json`; v11 has the same shape
//! as v10, and v12 the same as v11 (KIP-890). v13 names each topic by its topic id instead of
//! its name, in the request and in the response (KIP-516); a broker that no longer knows the id
//! answers `UNKNOWN_TOPIC_ID`.
//!
//! The request is on the producer's hot path, so besides the struct form ([`ProduceRequest`])
//! there is a streaming [`ProduceRequestWriter`] that writes topics and partitions straight into
//! the caller's buffer without building an intermediate tree.

use super::primitives::{
    array, field, int16, int32, int64, min_array_size, min_string_size, min_tags_size,
    nullable_string, parse_tag_value, skip_tags, string, tagged_fields, uuid, PResult, Put,
};
use super::{ApiKey, DecodeError, Parsed};
use crate::ErrorCode;
use bytes::Bytes;

// ---------------------------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------------------------

/// Streams a Produce request body into a buffer, topic by topic and partition by partition.
///
/// Call [`begin`](Self::begin) once, then for each of the announced topics call
/// [`topic`](Self::topic) followed by exactly as many [`partition`](Self::partition) calls as that
/// topic announced, then [`finish`](Self::finish). The writer places the tagged-field sections
/// that close each struct in flexible versions (after each partition entry, after each topic's
/// partition array, and at the end of the request). Calling it out of order or with counts that
/// do not match is a caller bug, caught by `debug_assert!`.
#[derive(Debug)]
#[must_use = "a Produce request is incomplete until `finish` is called"]
pub struct ProduceRequestWriter {
    flexible: bool,
    by_topic_id: bool,
    topics_left: usize,
    partitions_left: usize,
}

impl ProduceRequestWriter {
    /// Writes the request's leading fields and the length of its topic array, and returns the
    /// writer for the `topic_count` topics that must follow.
    ///
    /// `version` must be within [`ApiKey::supported_versions`] for [`ApiKey::Produce`] (checked
    /// with `debug_assert!`). `acks` is 0, 1 or -1; `timeout_ms` is how long the broker may wait
    /// for the acknowledgements.
    pub fn begin(
        buf: &mut Vec<u8>,
        version: i16,
        transactional_id: Option<&str>,
        acks: i16,
        timeout_ms: i32,
        topic_count: usize,
    ) -> Self {
        debug_assert!(
            DecodeError::check_version(ApiKey::Produce, version).is_ok(),
            "Produce v{version} is not supported"
        );
        let flexible = ApiKey::Produce.is_flexible(version);
        buf.put_nullable_string(flexible, transactional_id);
        buf.put_i16(acks);
        buf.put_i32(timeout_ms);
        buf.put_array_len(flexible, topic_count);
        ProduceRequestWriter {
            flexible,
            by_topic_id: version >= FIRST_VERSION_BY_TOPIC_ID,
            topics_left: topic_count,
            partitions_left: 0,
        }
    }

    /// Starts the next topic entry: the topic (its name before v13, its id from v13) and the
    /// length of its partition array. Exactly `partition_count` [`partition`](Self::partition)
    /// calls must follow before the next topic. From v13 `topic_id` must be the topic's id from
    /// Metadata (not all zeros, checked with `debug_assert!`); before v13 it is not written.
    pub fn topic(
        &mut self,
        buf: &mut Vec<u8>,
        name: &str,
        topic_id: [u8; 16],
        partition_count: usize,
    ) {
        debug_assert!(self.topics_left > 0, "more topics written than announced");
        debug_assert!(
            self.partitions_left == 0,
            "previous topic is missing {} partitions",
            self.partitions_left
        );
        self.topics_left = self.topics_left.saturating_sub(1);
        if self.by_topic_id {
            debug_assert!(
                topic_id != [0; 16],
                "Produce v13+ needs the topic id of {name}"
            );
            buf.put_uuid(topic_id);
        } else {
            buf.put_string(self.flexible, name);
        }
        buf.put_array_len(self.flexible, partition_count);
        self.partitions_left = partition_count;
        if partition_count == 0 {
            buf.put_empty_tags(self.flexible); // the topic entry ends here
        }
    }

    /// Writes one partition entry of the current topic: its index and its records (one
    /// magic-v2 record batch, opaque here; `None` is a null record set).
    pub fn partition(&mut self, buf: &mut Vec<u8>, index: i32, records: Option<&[u8]>) {
        debug_assert!(
            self.partitions_left > 0,
            "more partitions written than announced"
        );
        buf.put_i32(index);
        buf.put_nullable_bytes(self.flexible, records);
        self.end_partition(buf);
    }

    /// Like [`partition`](Self::partition), but lets `write_records` append the `records_len`
    /// bytes of the record set directly into `buf` (no intermediate copy). `write_records` must
    /// append exactly `records_len` bytes (checked with `debug_assert!`).
    pub fn partition_with(
        &mut self,
        buf: &mut Vec<u8>,
        index: i32,
        records_len: usize,
        write_records: impl FnOnce(&mut Vec<u8>),
    ) {
        self.begin_records(buf, index, records_len);
        let start = buf.len();
        write_records(buf);
        debug_assert_eq!(
            buf.len() - start,
            records_len,
            "records writer wrote the wrong number of bytes"
        );
        self.end_partition(buf);
    }

    /// Like [`partition`](Self::partition), for a record set that goes on the wire as a piece
    /// of its own rather than in `buf`: writes the partition entry around it and returns the
    /// offset in `buf` where its `records_len` bytes belong. Whoever sends `buf` sends
    /// `buf[..offset]`, the records, then the rest of `buf`.
    #[must_use = "the records must be sent at this offset"]
    pub fn partition_spliced(
        &mut self,
        buf: &mut Vec<u8>,
        index: i32,
        records_len: usize,
    ) -> usize {
        self.begin_records(buf, index, records_len);
        let offset = buf.len();
        self.end_partition(buf);
        offset
    }

    /// Writes a partition entry's index and the length prefix of its `records_len` bytes.
    fn begin_records(&self, buf: &mut Vec<u8>, index: i32, records_len: usize) {
        debug_assert!(
            self.partitions_left > 0,
            "more partitions written than announced"
        );
        buf.put_i32(index);
        if self.flexible {
            buf.put_uvarint(records_len as u32 + 1);
        } else {
            buf.put_i32(records_len as i32);
        }
    }

    fn end_partition(&mut self, buf: &mut Vec<u8>) {
        buf.put_empty_tags(self.flexible); // PartitionProduceData tags
        self.partitions_left = self.partitions_left.saturating_sub(1);
        if self.partitions_left == 0 {
            buf.put_empty_tags(self.flexible); // TopicProduceData tags
        }
    }

    /// Ends the request (its top-level tagged-field section in flexible versions). Every
    /// announced topic and partition must have been written.
    pub fn finish(self, buf: &mut Vec<u8>) {
        debug_assert!(
            self.topics_left == 0,
            "{} announced topics were not written",
            self.topics_left
        );
        debug_assert!(
            self.partitions_left == 0,
            "{} announced partitions were not written",
            self.partitions_left
        );
        buf.put_empty_tags(self.flexible);
    }
}

/// One topic of a request written by [`encode_spliced_frame`]: its name (written before v13) or
/// its id (from v13), and how many of the partitions handed over with it are its.
#[derive(Debug, Clone, Copy)]
pub struct SplicedTopic<'a> {
    /// The topic's name.
    pub name: &'a str,
    /// The topic's id from Metadata (needed from v13).
    pub topic_id: [u8; 16],
    /// How many of the partitions that follow belong to this topic (at least one).
    pub partitions: usize,
}

/// One whole Produce request frame (its size prefix, `header`, the body) in pieces, for a
/// vectored write: the request's own bytes, with each partition's record set (one record
/// batch, or `None` for a null record set) as a piece of its own, shared rather than copied.
/// `partitions` are `(index, records)` of every topic in `topics`' order, each topic's
/// `partitions` of them in turn. Send the pieces in order; their lengths add up to the frame.
///
/// Call it once per request, when the batches it carries are chosen: the caller decides what
/// goes in a request, this writes its byte layout.
#[must_use = "the pieces are the request"]
pub fn encode_spliced_frame(
    header: &super::RequestHeader<'_>,
    transactional_id: Option<&str>,
    acks: i16,
    timeout_ms: i32,
    topics: &[SplicedTopic<'_>],
    partitions: impl IntoIterator<Item = (i32, Option<Bytes>)>,
) -> Vec<Bytes> {
    let mut buf = Vec::with_capacity(64 + 32 * topics.len());
    // Where each record set goes in `buf`, in order.
    let mut splices: Vec<(usize, Bytes)> = Vec::new();
    buf.put_i32(0); // the frame's size, set below
    header.encode(&mut buf);
    let mut w = ProduceRequestWriter::begin(
        &mut buf,
        header.api_version,
        transactional_id,
        acks,
        timeout_ms,
        topics.len(),
    );
    let mut partitions = partitions.into_iter();
    for topic in topics {
        w.topic(&mut buf, topic.name, topic.topic_id, topic.partitions);
        for (index, records) in partitions.by_ref().take(topic.partitions) {
            match records {
                Some(set) => {
                    let at = w.partition_spliced(&mut buf, index, set.len());
                    splices.push((at, set));
                }
                None => w.partition(&mut buf, index, None),
            }
        }
    }
    w.finish(&mut buf);
    let frame_size = buf.len() - 4 + splices.iter().map(|(_, s)| s.len()).sum::<usize>();
    debug_assert!(
        i32::try_from(frame_size).is_ok(),
        "a request past i32::MAX bytes"
    );
    buf[..4].copy_from_slice(&(frame_size as i32).to_be_bytes());
    let own = Bytes::from(buf);
    let mut pieces = Vec::with_capacity(2 * splices.len() + 1);
    let mut from = 0;
    for (at, set) in splices {
        pieces.push(own.slice(from..at));
        pieces.push(set);
        from = at;
    }
    pieces.push(own.slice(from..));
    pieces
}

/// A Produce request body in struct form, for tests and callers that already hold every
/// partition's records. The producer's hot path uses [`ProduceRequestWriter`] directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRequest<'a> {
    /// The transactional id, or `None` for a non-transactional producer.
    pub transactional_id: Option<&'a str>,
    /// Acknowledgements required: 0 (none), 1 (leader), -1 (all in-sync replicas).
    pub acks: i16,
    /// How long the broker may wait for the acknowledgements, in milliseconds.
    pub timeout_ms: i32,
    /// The topics to produce to.
    pub topics: Vec<TopicProduceData<'a>>,
}

/// The first Produce version that names topics by id (KIP-516): a request at this version or
/// later needs every topic's id.
pub const FIRST_VERSION_BY_TOPIC_ID: i16 = 13;

/// One topic of a [`ProduceRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicProduceData<'a> {
    /// The topic name (written before v13).
    pub name: &'a str,
    /// The topic id from Metadata (written from v13).
    pub topic_id: [u8; 16],
    /// The partitions to produce to.
    pub partitions: Vec<PartitionProduceData<'a>>,
}

/// One partition of a [`TopicProduceData`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProduceData<'a> {
    /// The partition index.
    pub index: i32,
    /// The encoded record batch (`None` = null).
    pub records: Option<&'a [u8]>,
}

impl ProduceRequest<'_> {
    /// Appends the request body for `version` to `buf` (through [`ProduceRequestWriter`]).
    ///
    /// `version` must be within [`ApiKey::supported_versions`] for [`ApiKey::Produce`] (checked
    /// with `debug_assert!`).
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        let mut w = ProduceRequestWriter::begin(
            buf,
            version,
            self.transactional_id,
            self.acks,
            self.timeout_ms,
            self.topics.len(),
        );
        for topic in &self.topics {
            w.topic(buf, topic.name, topic.topic_id, topic.partitions.len());
            for p in &topic.partitions {
                w.partition(buf, p.index, p.records);
            }
        }
        w.finish(buf);
    }
}

// ---------------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------------

/// A parsed Produce response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceResponse {
    /// One entry per topic of the request.
    pub topics: Vec<TopicProduceResponse>,
    /// How long the broker throttled the request for quota reasons.
    pub throttle_time_ms: i32,
    /// Endpoints of the new leaders named in partitions that failed with
    /// `NOT_LEADER_OR_FOLLOWER` (v10+ tagged field 0; empty when absent).
    pub node_endpoints: Vec<NodeEndpoint>,
}

/// One topic of a [`ProduceResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicProduceResponse {
    /// The topic name (before v13; empty from v13).
    pub name: String,
    /// The topic id (from v13; all zeros before).
    pub topic_id: [u8; 16],
    /// One entry per partition produced to.
    pub partitions: Vec<PartitionProduceResponse>,
}

/// The outcome of producing to one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProduceResponse {
    /// The partition index.
    pub index: i32,
    /// The error, or `NONE` when the batch was appended.
    pub error_code: ErrorCode,
    /// The offset given to the batch's first record.
    pub base_offset: i64,
    /// The append time if the topic uses LogAppendTime, otherwise -1.
    pub log_append_time_ms: i64,
    /// The partition's log start offset (v5+; -1 before).
    pub log_start_offset: i64,
    /// Records that caused the batch to be dropped (v8+).
    pub record_errors: Vec<RecordError>,
    /// A message summarising why the batch was dropped (v8+).
    pub error_message: Option<String>,
    /// The new leader, sent with `NOT_LEADER_OR_FOLLOWER` (v10+ tagged field 0).
    pub current_leader: Option<LeaderIdAndEpoch>,
}

/// One record that caused a batch to be dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The record's index within its batch.
    pub batch_index: i32,
    /// Why it was rejected.
    pub message: Option<String>,
}

/// A partition leader hint from a Produce response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderIdAndEpoch {
    /// The leader's broker id, or -1 when unknown.
    pub leader_id: i32,
    /// The leader epoch, or -1 when unknown.
    pub leader_epoch: i32,
}

/// The address of a broker named in a [`LeaderIdAndEpoch`] hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEndpoint {
    /// The broker id.
    pub node_id: i32,
    /// The host to connect to.
    pub host: String,
    /// The port to connect to.
    pub port: i32,
    /// The broker's rack, if it has one.
    pub rack: Option<String>,
}

impl ProduceResponse {
    /// Parses a Produce response body (everything after the response header) at `version`.
    ///
    /// Known tagged fields (`CurrentLeader`, `NodeEndpoints`) are parsed, unknown ones skipped;
    /// bytes after the body are counted in [`Parsed::trailing`], not rejected.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        DecodeError::check_version(ApiKey::Produce, version)?;
        let (rest, body) = parse_response(body, version)
            .map_err(|e| DecodeError::from_nom(ApiKey::Produce, version, e))?;
        Ok(Parsed {
            body,
            trailing: rest.len(),
        })
    }
}

fn parse_response(i: &[u8], version: i16) -> PResult<'_, ProduceResponse> {
    let flexible = ApiKey::Produce.is_flexible(version);
    let (i, topics) = field(
        "Responses",
        array(flexible, min_topic_size(version), |i| {
            parse_topic(i, version)
        }),
    )(i)?;
    let (i, throttle_time_ms) = field("ThrottleTimeMs", int32)(i)?;
    let mut node_endpoints = Vec::new();
    let (i, ()) = field("ProduceResponse tagged fields", |i| {
        tagged_fields(i, flexible, |tag, data| {
            if version >= 10 && tag == 0 {
                node_endpoints = parse_tag_value(
                    data,
                    field(
                        "NodeEndpoints",
                        array(true, MIN_NODE_ENDPOINT_SIZE, parse_node_endpoint),
                    ),
                )?;
            }
            Ok(())
        })
    })(i)?;
    Ok((
        i,
        ProduceResponse {
            topics,
            throttle_time_ms,
            node_endpoints,
        },
    ))
}

/// The fewest bytes a topic entry takes at `version`: TopicId (v13+) or Name, then
/// PartitionResponses and tagged fields.
fn min_topic_size(version: i16) -> usize {
    let flexible = ApiKey::Produce.is_flexible(version);
    let topic = if version >= FIRST_VERSION_BY_TOPIC_ID {
        16
    } else {
        min_string_size(flexible)
    };
    topic + min_array_size(flexible) + min_tags_size(flexible)
}

/// The fewest bytes a partition entry takes at `version`: Index, ErrorCode, BaseOffset,
/// LogAppendTimeMs, LogStartOffset (v5+), RecordErrors and ErrorMessage (v8+), tagged fields.
fn min_partition_size(version: i16) -> usize {
    let flexible = ApiKey::Produce.is_flexible(version);
    4 + 2
        + 8
        + 8
        + if version >= 5 { 8 } else { 0 }
        + if version >= 8 {
            min_array_size(flexible) + min_string_size(flexible)
        } else {
            0
        }
        + min_tags_size(flexible)
}

/// The fewest bytes a record error takes: BatchIndex, BatchIndexErrorMessage, tagged fields.
fn min_record_error_size(flexible: bool) -> usize {
    4 + min_string_size(flexible) + min_tags_size(flexible)
}

/// The fewest bytes a node endpoint takes (always flexible): NodeId, Host, Port, Rack, tagged
/// fields.
const MIN_NODE_ENDPOINT_SIZE: usize = 4 + 1 + 4 + 1 + 1;

fn parse_topic(i: &[u8], version: i16) -> PResult<'_, TopicProduceResponse> {
    let flexible = ApiKey::Produce.is_flexible(version);
    let (i, name, topic_id) = if version >= FIRST_VERSION_BY_TOPIC_ID {
        let (i, id) = field("TopicId", uuid)(i)?;
        (i, String::new(), id)
    } else {
        let (i, name) = field("Name", string(flexible))(i)?;
        (i, name, [0; 16])
    };
    let (i, partitions) = field(
        "PartitionResponses",
        array(flexible, min_partition_size(version), |i| {
            parse_partition(i, version)
        }),
    )(i)?;
    let (i, ()) = field("TopicProduceResponse tagged fields", |i| {
        skip_tags(i, flexible)
    })(i)?;
    Ok((
        i,
        TopicProduceResponse {
            name,
            topic_id,
            partitions,
        },
    ))
}

fn parse_partition(i: &[u8], version: i16) -> PResult<'_, PartitionProduceResponse> {
    let flexible = ApiKey::Produce.is_flexible(version);
    let (i, index) = field("Index", int32)(i)?;
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    let (i, base_offset) = field("BaseOffset", int64)(i)?;
    let (i, log_append_time_ms) = field("LogAppendTimeMs", int64)(i)?;
    let (i, log_start_offset) = if version >= 5 {
        field("LogStartOffset", int64)(i)?
    } else {
        (i, -1)
    };
    let (i, record_errors) = if version >= 8 {
        field(
            "RecordErrors",
            array(flexible, min_record_error_size(flexible), |i| {
                parse_record_error(i, flexible)
            }),
        )(i)?
    } else {
        (i, Vec::new())
    };
    let (i, error_message) = if version >= 8 {
        field("ErrorMessage", nullable_string(flexible))(i)?
    } else {
        (i, None)
    };
    let mut current_leader = None;
    let (i, ()) = field("PartitionProduceResponse tagged fields", |i| {
        tagged_fields(i, flexible, |tag, data| {
            if version >= 10 && tag == 0 {
                current_leader = Some(parse_tag_value(data, field("CurrentLeader", parse_leader))?);
            }
            Ok(())
        })
    })(i)?;
    Ok((
        i,
        PartitionProduceResponse {
            index,
            error_code: ErrorCode(error_code),
            base_offset,
            log_append_time_ms,
            log_start_offset,
            record_errors,
            error_message,
            current_leader,
        },
    ))
}

fn parse_record_error(i: &[u8], flexible: bool) -> PResult<'_, RecordError> {
    let (i, batch_index) = field("BatchIndex", int32)(i)?;
    let (i, message) = field("BatchIndexErrorMessage", nullable_string(flexible))(i)?;
    let (i, ()) = field("BatchIndexAndErrorMessage tagged fields", |i| {
        skip_tags(i, flexible)
    })(i)?;
    Ok((
        i,
        RecordError {
            batch_index,
            message,
        },
    ))
}

/// `LeaderIdAndEpoch` only exists in flexible versions (v10+).
fn parse_leader(i: &[u8]) -> PResult<'_, LeaderIdAndEpoch> {
    let (i, leader_id) = field("LeaderId", int32)(i)?;
    let (i, leader_epoch) = field("LeaderEpoch", int32)(i)?;
    let (i, ()) = field("LeaderIdAndEpoch tagged fields", |i| skip_tags(i, true))(i)?;
    Ok((
        i,
        LeaderIdAndEpoch {
            leader_id,
            leader_epoch,
        },
    ))
}

/// `NodeEndpoint` only exists in flexible versions (v10+).
fn parse_node_endpoint(i: &[u8]) -> PResult<'_, NodeEndpoint> {
    let (i, node_id) = field("NodeId", int32)(i)?;
    let (i, host) = field("Host", string(true))(i)?;
    let (i, port) = field("Port", int32)(i)?;
    let (i, rack) = field("Rack", nullable_string(true))(i)?;
    let (i, ()) = field("NodeEndpoint tagged fields", |i| skip_tags(i, true))(i)?;
    Ok((
        i,
        NodeEndpoint {
            node_id,
            host,
            port,
            rack,
        },
    ))
}

#[cfg(test)]
mod tests;
