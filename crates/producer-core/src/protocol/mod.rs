//! The Kafka wire protocol, as far as a producer speaks it.
//!
//! One module per API. Each request type has `encode(&self, version, &mut Vec<u8>)` writing the
//! body; [`encode_request`] frames it with its size prefix and request header. Each response type
//! has `parse(version, &[u8])` (nom inside) returning the body or a [`DecodeError`] naming the
//! API, version and field that was wrong. Versions follow Kafka's JSON message definitions.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod api_versions;
pub mod end_txn;
pub mod find_coordinator;
pub mod frame;
pub mod get_telemetry_subscriptions;
pub mod header;
pub mod init_producer_id;
pub mod metadata;
pub mod primitives;
pub mod produce;
pub mod push_telemetry;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod txn_offset_commit;

use std::fmt;

pub use frame::{FrameDecoder, FrameError};
pub use header::{encode_request, parse_response_header, RequestHeader};
use primitives::{WireError, WireErrorKind};

/// The APIs a producer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApiKey {
    /// Produce (0).
    Produce,
    /// Metadata (3).
    Metadata,
    /// ApiVersions (18).
    ApiVersions,
    /// InitProducerId (22).
    InitProducerId,
    /// SaslHandshake (17).
    SaslHandshake,
    /// SaslAuthenticate (36).
    SaslAuthenticate,
    /// FindCoordinator (10).
    FindCoordinator,
    /// AddPartitionsToTxn (24).
    AddPartitionsToTxn,
    /// AddOffsetsToTxn (25).
    AddOffsetsToTxn,
    /// EndTxn (26).
    EndTxn,
    /// TxnOffsetCommit (28).
    TxnOffsetCommit,
    /// GetTelemetrySubscriptions (71), KIP-714 client telemetry.
    GetTelemetrySubscriptions,
    /// PushTelemetry (72), KIP-714 client telemetry.
    PushTelemetry,
}

impl ApiKey {
    /// Every API this crate speaks.
    pub const ALL: [ApiKey; 13] = [
        ApiKey::Produce,
        ApiKey::Metadata,
        ApiKey::ApiVersions,
        ApiKey::InitProducerId,
        ApiKey::SaslHandshake,
        ApiKey::SaslAuthenticate,
        ApiKey::FindCoordinator,
        ApiKey::AddPartitionsToTxn,
        ApiKey::AddOffsetsToTxn,
        ApiKey::EndTxn,
        ApiKey::TxnOffsetCommit,
        ApiKey::GetTelemetrySubscriptions,
        ApiKey::PushTelemetry,
    ];

    /// The numeric key on the wire.
    pub const fn code(self) -> i16 {
        match self {
            ApiKey::Produce => 0,
            ApiKey::Metadata => 3,
            ApiKey::ApiVersions => 18,
            ApiKey::InitProducerId => 22,
            ApiKey::SaslHandshake => 17,
            ApiKey::SaslAuthenticate => 36,
            ApiKey::FindCoordinator => 10,
            ApiKey::AddPartitionsToTxn => 24,
            ApiKey::AddOffsetsToTxn => 25,
            ApiKey::EndTxn => 26,
            ApiKey::TxnOffsetCommit => 28,
            ApiKey::GetTelemetrySubscriptions => 71,
            ApiKey::PushTelemetry => 72,
        }
    }

    /// The API for a numeric key, if this crate speaks it.
    pub const fn from_code(code: i16) -> Option<ApiKey> {
        match code {
            0 => Some(ApiKey::Produce),
            3 => Some(ApiKey::Metadata),
            18 => Some(ApiKey::ApiVersions),
            22 => Some(ApiKey::InitProducerId),
            17 => Some(ApiKey::SaslHandshake),
            36 => Some(ApiKey::SaslAuthenticate),
            10 => Some(ApiKey::FindCoordinator),
            24 => Some(ApiKey::AddPartitionsToTxn),
            25 => Some(ApiKey::AddOffsetsToTxn),
            26 => Some(ApiKey::EndTxn),
            28 => Some(ApiKey::TxnOffsetCommit),
            71 => Some(ApiKey::GetTelemetrySubscriptions),
            72 => Some(ApiKey::PushTelemetry),
            _ => None,
        }
    }

    /// The versions this crate can encode and parse (inclusive).
    pub const fn supported_versions(self) -> (i16, i16) {
        match self {
            // v12 is v11 (KIP-890: a transactional Produce adds its partitions to the
            // transaction); v13 addresses topics by id.
            ApiKey::Produce => (3, 13),
            // v13 adds the top-level error code.
            ApiKey::Metadata => (1, 13),
            // v4 is v3 (KAFKA-17011: SupportedFeatures with a minimum of 0).
            ApiKey::ApiVersions => (0, 4),
            // v5 is v4 (TRANSACTION_ABORTABLE may come back); v6 is two-phase commit (KIP-939).
            ApiKey::InitProducerId => (0, 5),
            // v0 sends the mechanism's tokens unframed after the handshake; this crate speaks
            // v1, which carries them in SaslAuthenticate (KIP-152), as every 1.0+ broker does.
            ApiKey::SaslHandshake => (1, 1),
            ApiKey::SaslAuthenticate => (0, 2),
            ApiKey::FindCoordinator => (0, 6),
            // v4+ batch transactions and are spoken between brokers only.
            ApiKey::AddPartitionsToTxn => (0, 3),
            ApiKey::AddOffsetsToTxn => (0, 4),
            ApiKey::EndTxn => (0, 5),
            ApiKey::TxnOffsetCommit => (0, 5),
            // KIP-714 client telemetry: v0 is the only version.
            ApiKey::GetTelemetrySubscriptions | ApiKey::PushTelemetry => (0, 0),
        }
    }

    /// The first flexible version (compact encodings and tagged fields).
    pub const fn first_flexible_version(self) -> i16 {
        match self {
            ApiKey::Produce => 9,
            ApiKey::Metadata => 9,
            ApiKey::ApiVersions => 3,
            ApiKey::InitProducerId => 2,
            // Never flexible.
            ApiKey::SaslHandshake => i16::MAX,
            ApiKey::SaslAuthenticate => 2,
            ApiKey::FindCoordinator
            | ApiKey::AddPartitionsToTxn
            | ApiKey::AddOffsetsToTxn
            | ApiKey::EndTxn
            | ApiKey::TxnOffsetCommit => 3,
            // Flexible from their first version.
            ApiKey::GetTelemetrySubscriptions | ApiKey::PushTelemetry => 0,
        }
    }

    /// Whether `version` of this API uses the flexible encodings.
    pub const fn is_flexible(self, version: i16) -> bool {
        version >= self.first_flexible_version()
    }

    /// The request header version used with `version` of this API.
    pub const fn request_header_version(self, version: i16) -> i16 {
        if self.is_flexible(version) {
            2
        } else {
            1
        }
    }

    /// The response header version used with `version` of this API. ApiVersions responses always
    /// use v0 (KIP-511), so a client can read them before it knows what the broker supports.
    pub const fn response_header_version(self, version: i16) -> i16 {
        match self {
            ApiKey::ApiVersions => 0,
            _ if self.is_flexible(version) => 1,
            _ => 0,
        }
    }

    /// The API's name as Kafka spells it.
    pub const fn name(self) -> &'static str {
        match self {
            ApiKey::Produce => "Produce",
            ApiKey::Metadata => "Metadata",
            ApiKey::ApiVersions => "ApiVersions",
            ApiKey::InitProducerId => "InitProducerId",
            ApiKey::SaslHandshake => "SaslHandshake",
            ApiKey::SaslAuthenticate => "SaslAuthenticate",
            ApiKey::FindCoordinator => "FindCoordinator",
            ApiKey::AddPartitionsToTxn => "AddPartitionsToTxn",
            ApiKey::AddOffsetsToTxn => "AddOffsetsToTxn",
            ApiKey::EndTxn => "EndTxn",
            ApiKey::TxnOffsetCommit => "TxnOffsetCommit",
            ApiKey::GetTelemetrySubscriptions => "GetTelemetrySubscriptions",
            ApiKey::PushTelemetry => "PushTelemetry",
        }
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A response (or response header) that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A field of the response body was malformed or the body ended early.
    #[error("{api} v{version} response: field `{field}`: {kind:?} ({remaining} bytes left)")]
    Malformed {
        /// The API whose response failed.
        api: ApiKey,
        /// The version it was parsed as.
        version: i16,
        /// The innermost field being parsed.
        field: &'static str,
        /// What was wrong with it.
        kind: WireErrorKind,
        /// How many bytes were left where the parse failed.
        remaining: usize,
    },
    /// The response was parsed as a version this crate does not speak.
    #[error("{api} v{version} is not a supported version")]
    UnsupportedVersion {
        /// The API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
    },
}

impl DecodeError {
    /// Converts a nom failure into a typed error for `api` at `version`.
    pub fn from_nom(api: ApiKey, version: i16, err: nom::Err<WireError>) -> Self {
        let e = match err {
            nom::Err::Error(e) | nom::Err::Failure(e) => e,
            nom::Err::Incomplete(_) => WireError {
                field: "",
                kind: WireErrorKind::Truncated,
                remaining: 0,
            },
        };
        DecodeError::Malformed {
            api,
            version,
            field: if e.field.is_empty() { "?" } else { e.field },
            kind: e.kind,
            remaining: e.remaining,
        }
    }

    /// Checks that `version` is one this crate speaks for `api`.
    pub fn check_version(api: ApiKey, version: i16) -> Result<(), DecodeError> {
        let (lo, hi) = api.supported_versions();
        if version < lo || version > hi {
            return Err(DecodeError::UnsupportedVersion { api, version });
        }
        Ok(())
    }
}

/// A parsed response body, with the count of bytes after it that the body did not use.
///
/// Extra trailing bytes are tolerated (librdkafka's mock broker appends one to flexible Metadata
/// responses); callers count them rather than failing the connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<T> {
    /// The response body.
    pub body: T,
    /// Bytes left over after the body.
    pub trailing: usize,
}

impl<T> Parsed<T> {
    /// A response body of `api` to a request sent at `version`, read by `parser` (the message
    /// module's body parser): the version checked first, a parse failure named by the API and
    /// version, the bytes after the body counted. Every message's `parse` is this call.
    pub(crate) fn parse_with<'a>(
        api: ApiKey,
        version: i16,
        body: &'a [u8],
        parser: impl FnOnce(&'a [u8]) -> primitives::PResult<'a, T>,
    ) -> Result<Self, DecodeError> {
        DecodeError::check_version(api, version)?;
        let (rest, body) = parser(body).map_err(|e| DecodeError::from_nom(api, version, e))?;
        Ok(Parsed {
            body,
            trailing: rest.len(),
        })
    }
}

/// One topic's error code per partition, as the transaction responses carry them
/// (AddPartitionsToTxn v0-3, TxnOffsetCommit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitionErrors {
    /// The topic.
    pub name: String,
    /// `(partition, error code)` for each partition of the request.
    pub partitions: Vec<(i32, crate::ErrorCode)>,
}

/// Parses an array of [`TopicPartitionErrors`] (each topic and partition with its tagged fields
/// at flexible versions).
fn topic_partition_errors<'a>(
    flexible: bool,
) -> impl FnMut(&'a [u8]) -> primitives::PResult<'a, Vec<TopicPartitionErrors>> {
    use primitives::{
        array, field, int16, int32, min_array_size, min_string_size, min_tags_size, skip_tags,
        string,
    };
    // A topic: Name, Partitions, tagged fields; a partition: PartitionIndex, ErrorCode, tagged
    // fields.
    let min_topic = min_string_size(flexible) + min_array_size(flexible) + min_tags_size(flexible);
    let min_partition = 4 + 2 + min_tags_size(flexible);
    array(flexible, min_topic, move |i| {
        let (i, name) = field("Name", string(flexible))(i)?;
        let (i, partitions) = field(
            "Partitions",
            array(flexible, min_partition, |i| {
                let (i, index) = field("PartitionIndex", int32)(i)?;
                let (i, code) = field("ErrorCode", int16)(i)?;
                let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
                Ok((i, (index, crate::ErrorCode(code))))
            }),
        )(i)?;
        let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
        Ok((i, TopicPartitionErrors { name, partitions }))
    })
}
