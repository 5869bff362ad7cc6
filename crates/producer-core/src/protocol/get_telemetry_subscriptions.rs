//! GetTelemetrySubscriptions (key 71), version 0: which client metrics the broker wants pushed
//! (KIP-714).
//!
//! A client sends it with the all-zero client instance id ([`NO_CLIENT_INSTANCE_ID`]) the first
//! time, and the broker assigns one; later requests (when a push interval has passed, or after
//! `UNKNOWN_SUBSCRIPTION_ID`) carry the assigned id. The answer names the subscription: its id,
//! the metrics asked for (name prefixes), the push interval, the largest push accepted, whether
//! sums go as deltas, and the compression types a push may use. v0 is flexible. Brokers list
//! keys 71 and 72 in ApiVersions only when a telemetry receiver is configured.
//!
//! The producer sends it from its telemetry state machine (`producer/telemetry/`).

use std::fmt;

use super::primitives::{
    array, boolean, bytes, field, int16, int32, int8, min_string_size, skip_tags, uuid, PResult,
    Put, WireError, WireErrorKind,
};
use super::{ApiKey, DecodeError, Parsed};
use crate::error_code::ErrorCode;
use crate::record::Compression;

const API: ApiKey = ApiKey::GetTelemetrySubscriptions;

/// The client instance id of a client the broker has not yet assigned one (the zero uuid).
pub const NO_CLIENT_INSTANCE_ID: [u8; 16] = [0; 16];

/// A GetTelemetrySubscriptions request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetTelemetrySubscriptionsRequest {
    /// The client instance id the broker assigned, or [`NO_CLIENT_INSTANCE_ID`] on the first
    /// request (the broker then assigns one in its answer).
    pub client_instance_id: [u8; 16],
}

impl GetTelemetrySubscriptionsRequest {
    /// Appends the request body (no header) at `version` (0; else a caller bug, checked with
    /// `debug_assert!`) to `buf`.
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "GetTelemetrySubscriptions v{version} is not supported"
        );
        let flexible = API.is_flexible(version);
        buf.put_uuid(self.client_instance_id);
        buf.put_empty_tags(flexible);
    }
}

/// A compression type id of the telemetry messages (an INT8 on the wire: 0 none, 1 gzip,
/// 2 snappy, 3 lz4, 4 zstd, the record batch's codes).
///
/// An id this crate does not know is kept as [`TelemetryCompression::Unknown`] rather than
/// refusing the answer: a newer broker may accept a codec this crate lacks, and the client
/// then picks among the ones it knows, as Java's client does (it skips unknown ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TelemetryCompression {
    /// A codec this crate knows (whether this build compiled it in is
    /// [`Compression::is_supported`]).
    Known(Compression),
    /// An id no codec of this crate has.
    Unknown(i8),
}

impl TelemetryCompression {
    /// The type for a wire id.
    pub fn from_id(id: i8) -> Self {
        Compression::ALL
            .into_iter()
            .find(|c| c.attribute_bits() == i16::from(id))
            .map_or(
                TelemetryCompression::Unknown(id),
                TelemetryCompression::Known,
            )
    }

    /// The wire id.
    pub const fn id(self) -> i8 {
        match self {
            // Attribute bits are 0-4.
            TelemetryCompression::Known(c) => c.attribute_bits() as i8,
            TelemetryCompression::Unknown(id) => id,
        }
    }

    /// The codec, when this crate knows it.
    pub const fn codec(self) -> Option<Compression> {
        match self {
            TelemetryCompression::Known(c) => Some(c),
            TelemetryCompression::Unknown(_) => None,
        }
    }
}

impl From<Compression> for TelemetryCompression {
    fn from(c: Compression) -> Self {
        TelemetryCompression::Known(c)
    }
}

/// The metric name prefixes a subscription asks for, in the broker's order.
///
/// An empty list asks for no metrics. The message definition says a single empty string asks
/// for all of them; Kafka's broker sends a single `*` instead (`ClientMetricsConfigs`), which
/// Java's client reads as all. Both read as all here ([`RequestedMetrics::all`]); otherwise a
/// metric is asked for when one of the prefixes starts its name ([`RequestedMetrics::matches`]).
///
/// The names are kept in one buffer, not a `String` each: an answer of many empty names then
/// holds at most about 5 bytes per byte it took on the wire.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RequestedMetrics {
    /// The names, one after another.
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<u32>,
}

impl RequestedMetrics {
    /// A list of the given names (for tests and for building answers).
    ///
    /// # Panics
    /// If the names together pass `u32::MAX` bytes (a parsed answer never does: it would be
    /// refused as [`WireErrorKind::InvalidLength`]).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut out = RequestedMetrics::default();
        for name in names {
            let pushed = out.push(name);
            assert!(pushed, "requested metric names past u32::MAX bytes");
        }
        out
    }

    /// Appends a name; false (and nothing appended) when the text would pass `u32::MAX` bytes.
    fn push(&mut self, name: &str) -> bool {
        let Some(end) = self
            .text
            .len()
            .checked_add(name.len())
            .and_then(|e| u32::try_from(e).ok())
        else {
            return false;
        };
        self.text.push_str(name);
        self.ends.push(end);
        true
    }

    /// How many names the list holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the list is empty: no metrics are asked for.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The `index`th name.
    pub fn get(&self, index: usize) -> Option<&str> {
        let end = *self.ends.get(index)? as usize;
        let start = match index {
            0 => 0,
            _ => self.ends[index - 1] as usize,
        };
        self.text.get(start..end)
    }

    /// The names, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or(""))
    }

    /// Whether every metric is asked for: the list is the single `*` Kafka's broker sends, or
    /// holds an empty name (the message definition's "all", a prefix of every name).
    pub fn all(&self) -> bool {
        (self.len() == 1 && self.get(0) == Some("*")) || self.iter().any(str::is_empty)
    }

    /// Whether the metric `name` is asked for: every metric when [`RequestedMetrics::all`],
    /// else when one of the names is a prefix of it (Java's rule).
    pub fn matches(&self, name: &str) -> bool {
        self.all() || self.iter().any(|prefix| name.starts_with(prefix))
    }
}

impl fmt::Debug for RequestedMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A parsed GetTelemetrySubscriptions response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetTelemetrySubscriptionsResponse {
    /// How long the request was throttled for, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error code, [`ErrorCode::NONE`] on success.
    pub error_code: ErrorCode,
    /// The client instance id the broker assigned, when the request carried
    /// [`NO_CLIENT_INSTANCE_ID`]; else zero.
    pub client_instance_id: [u8; 16],
    /// The subscription's id, which each PushTelemetry names.
    pub subscription_id: i32,
    /// The compression types a PushTelemetry may use, in the broker's order, unknown ids
    /// included (see [`TelemetryCompression`]; [`Self::accepted_codecs`] skips them).
    pub accepted_compression_types: Vec<TelemetryCompression>,
    /// How often to push, in milliseconds (the lowest interval of the subscriptions matching
    /// the client).
    pub push_interval_ms: i32,
    /// The most bytes of metrics a PushTelemetry may carry.
    pub telemetry_max_bytes: i32,
    /// True: counters and sums go as deltas since the last push; false: as cumulative values.
    pub delta_temporality: bool,
    /// The metrics asked for (name prefixes; see [`RequestedMetrics`]).
    pub requested_metrics: RequestedMetrics,
}

impl GetTelemetrySubscriptionsResponse {
    /// Parses a response body (after the response header) to a request sent at `version`.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        Parsed::parse_with(API, version, body, |i| {
            parse_body(i, API.is_flexible(version))
        })
    }

    /// The accepted codecs this crate knows, in the broker's order (unknown ids skipped).
    pub fn accepted_codecs(&self) -> impl Iterator<Item = Compression> + '_ {
        self.accepted_compression_types
            .iter()
            .filter_map(|t| t.codec())
    }
}

fn parse_body(i: &[u8], flexible: bool) -> PResult<'_, GetTelemetrySubscriptionsResponse> {
    let (i, throttle_time_ms) = field("ThrottleTimeMs", int32)(i)?;
    let (i, error_code) = field("ErrorCode", int16)(i)?;
    let (i, client_instance_id) = field("ClientInstanceId", uuid)(i)?;
    let (i, subscription_id) = field("SubscriptionId", int32)(i)?;
    // Each INT8 takes one byte.
    let (i, accepted_compression_types) = field(
        "AcceptedCompressionTypes",
        array(flexible, 1, |i| {
            let (i, id) = int8(i)?;
            Ok((i, TelemetryCompression::from_id(id)))
        }),
    )(i)?;
    let (i, push_interval_ms) = field("PushIntervalMs", int32)(i)?;
    let (i, telemetry_max_bytes) = field("TelemetryMaxBytes", int32)(i)?;
    let (i, delta_temporality) = field("DeltaTemporality", boolean)(i)?;
    let (i, requested_metrics) = field("RequestedMetrics", requested_metrics)(i)?;
    let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        GetTelemetrySubscriptionsResponse {
            throttle_time_ms,
            error_code: ErrorCode(error_code),
            client_instance_id,
            subscription_id,
            accepted_compression_types,
            push_interval_ms,
            telemetry_max_bytes,
            delta_temporality,
            requested_metrics,
        },
    ))
}

/// The `[]string` of names, into one buffer. Two passes over the array: the first checks it (the
/// claimed length against the bytes left at the smallest string, each string's length and
/// UTF-8) and counts its bytes, the second copies the names into buffers of exactly that size.
///
/// Every version of the API is flexible, so the strings are compact: the same bytes as a
/// COMPACT_BYTES of the same length, which is how each is read (no `String` per name).
fn requested_metrics(i: &[u8]) -> PResult<'_, RequestedMetrics> {
    let name = |i| -> PResult<'_, &str> {
        let (rest, raw) = bytes(true)(i)?;
        let s = std::str::from_utf8(raw).map_err(|_| {
            nom::Err::Error(WireError {
                field: "",
                kind: WireErrorKind::InvalidUtf8,
                remaining: i.len(),
            })
        })?;
        Ok((rest, s))
    };
    let min_name = min_string_size(true);
    let mut count = 0usize;
    let mut text_len = 0usize;
    // `()` elements: the array holds nothing.
    let (rest, _) = array(true, min_name, |i| {
        let (i, s) = name(i)?;
        count += 1;
        text_len += s.len();
        Ok((i, ()))
    })(i)?;
    if u32::try_from(text_len).is_err() {
        return Err(nom::Err::Error(WireError {
            field: "",
            kind: WireErrorKind::InvalidLength(text_len as i64),
            remaining: i.len(),
        }));
    }
    let mut out = RequestedMetrics {
        text: String::with_capacity(text_len),
        ends: Vec::with_capacity(count),
    };
    // The second pass reads what the first accepted, into room already there.
    array(true, min_name, |i| {
        let (i, s) = name(i)?;
        let pushed = out.push(s);
        debug_assert!(pushed, "the first pass checked the length");
        Ok((i, ()))
    })(i)?;
    Ok((rest, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_request() {
        let mut buf = Vec::new();
        GetTelemetrySubscriptionsRequest {
            client_instance_id: NO_CLIENT_INSTANCE_ID,
        }
        .encode(0, &mut buf);
        #[rustfmt::skip]
        let expected = [
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // ClientInstanceId: zero
            0x00,                                           // no tagged fields
        ];
        assert_eq!(buf, expected);
        buf.clear();
        let id: [u8; 16] = std::array::from_fn(|i| i as u8 + 1);
        GetTelemetrySubscriptionsRequest {
            client_instance_id: id,
        }
        .encode(0, &mut buf);
        assert_eq!(&buf[..16], &id);
        assert_eq!(buf[16..], [0x00]);
    }

    #[rustfmt::skip]
    const BODY: &[u8] = &[
        0x00, 0x00, 0x00, 0x05,             // ThrottleTimeMs 5
        0x00, 0x00,                         // ErrorCode 0
        0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22,
        0x33, 0x33, 0x33, 0x33, 0x44, 0x44, 0x44, 0x44, // ClientInstanceId
        0x7f, 0xff, 0xff, 0xfe,             // SubscriptionId i32::MAX - 1
        0x05, 0x04, 0x03, 0x01, 0x09,       // AcceptedCompressionTypes: 4 [zstd, lz4, gzip, 9]
        0x00, 0x00, 0x03, 0xe8,             // PushIntervalMs 1000
        0x00, 0x10, 0x00, 0x00,             // TelemetryMaxBytes 1 MiB
        0x01,                               // DeltaTemporality true
        0x03,                               // RequestedMetrics: 2 names
        0x1b, b'o', b'r', b'g', b'.', b'a', b'p', b'a', b'c', b'h', b'e', b'.', b'k', b'a',
              b'f', b'k', b'a', b'.', b'p', b'r', b'o', b'd', b'u', b'c', b'e', b'r', b'.',
        0x04, b'x', b'.', b'y',
        0x00,                               // no tagged fields
    ];

    fn expected() -> GetTelemetrySubscriptionsResponse {
        GetTelemetrySubscriptionsResponse {
            throttle_time_ms: 5,
            error_code: ErrorCode::NONE,
            client_instance_id: [
                0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22, 0x33, 0x33, 0x33, 0x33, 0x44, 0x44,
                0x44, 0x44,
            ],
            subscription_id: i32::MAX - 1,
            accepted_compression_types: vec![
                Compression::Zstd.into(),
                Compression::Lz4.into(),
                Compression::Gzip.into(),
                TelemetryCompression::Unknown(9),
            ],
            push_interval_ms: 1000,
            telemetry_max_bytes: 1 << 20,
            delta_temporality: true,
            requested_metrics: RequestedMetrics::from_names(["org.apache.kafka.producer.", "x.y"]),
        }
    }

    #[test]
    fn golden_response() {
        let parsed = GetTelemetrySubscriptionsResponse::parse(0, BODY).unwrap();
        assert_eq!(
            parsed,
            Parsed {
                body: expected(),
                trailing: 0
            }
        );
        let body = parsed.body;
        assert_eq!(
            body.accepted_codecs().collect::<Vec<_>>(),
            [Compression::Zstd, Compression::Lz4, Compression::Gzip]
        );
        let names: Vec<&str> = body.requested_metrics.iter().collect();
        assert_eq!(names, ["org.apache.kafka.producer.", "x.y"]);
        assert!(!body.requested_metrics.all());
        assert!(body
            .requested_metrics
            .matches("org.apache.kafka.producer.record.queue.time.avg"));
        assert!(!body
            .requested_metrics
            .matches("org.apache.kafka.consumer.x"));
        assert_eq!(
            format!("{:?}", body.requested_metrics),
            r#"["org.apache.kafka.producer.", "x.y"]"#
        );
    }

    #[test]
    fn an_unknown_tag_is_skipped_and_a_trailing_byte_counted() {
        let mut body = BODY.to_vec();
        *body.last_mut().unwrap() = 0x01;
        body.extend_from_slice(&[0x05, 0x02, 0xaa, 0xbb, 0xff]);
        let parsed = GetTelemetrySubscriptionsResponse::parse(0, &body).unwrap();
        assert_eq!(parsed.body, expected());
        assert_eq!(parsed.trailing, 1);
    }

    #[test]
    fn compression_ids_map_to_the_codecs_and_unknown_ones_are_kept() {
        for c in Compression::ALL {
            let t = TelemetryCompression::from_id(c.attribute_bits() as i8);
            assert_eq!(t, TelemetryCompression::Known(c));
            assert_eq!(t.id() as i16, c.attribute_bits());
            assert_eq!(t.codec(), Some(c));
        }
        for id in [-128, -1, 5, 127] {
            let t = TelemetryCompression::from_id(id);
            assert_eq!(t, TelemetryCompression::Unknown(id));
            assert_eq!((t.id(), t.codec()), (id, None));
        }
    }

    #[test]
    fn none_all_and_prefixes() {
        let none = RequestedMetrics::from_names([]);
        assert!(none.is_empty() && !none.all() && !none.matches("a"));
        // The message definition's "all", and the broker's.
        for all in [
            RequestedMetrics::from_names([""]),
            RequestedMetrics::from_names(["*"]),
        ] {
            assert!(all.all() && all.matches("org.apache.kafka.producer.x"));
        }
        // A `*` among other names is a prefix like the others (Java's rule).
        let star = RequestedMetrics::from_names(["*", "a."]);
        assert!(!star.all() && star.matches("a.b") && !star.matches("b"));
        assert_eq!(star.get(0), Some("*"));
        assert_eq!(star.get(1), Some("a."));
        assert_eq!(star.get(2), None);
        assert_eq!(star.len(), 2);
    }

    #[test]
    fn every_truncation_is_an_error_naming_its_field() {
        for cut in 0..BODY.len() {
            match GetTelemetrySubscriptionsResponse::parse(0, &BODY[..cut]) {
                Err(DecodeError::Malformed {
                    api: ApiKey::GetTelemetrySubscriptions,
                    version: 0,
                    field,
                    kind,
                    ..
                }) => {
                    assert_ne!(field, "?", "cut {cut}");
                    // A cut inside the names' array leaves too few bytes for its claim.
                    assert!(
                        matches!(
                            kind,
                            WireErrorKind::Truncated | WireErrorKind::InvalidLength(_)
                        ),
                        "cut {cut}: {kind:?}"
                    );
                }
                other => panic!("cut {cut}: {other:?}"),
            }
        }
        for (cut, name) in [
            (0, "ThrottleTimeMs"),
            (5, "ErrorCode"),
            (21, "ClientInstanceId"),
            (25, "SubscriptionId"),
            (27, "AcceptedCompressionTypes"),
            (34, "PushIntervalMs"),
            (38, "TelemetryMaxBytes"),
            (39, "DeltaTemporality"),
            (40, "RequestedMetrics"),
            (BODY.len() - 1, "tagged fields"),
        ] {
            match GetTelemetrySubscriptionsResponse::parse(0, &BODY[..cut]) {
                Err(DecodeError::Malformed { field, .. }) => assert_eq!(field, name, "cut {cut}"),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_claimed_length_past_the_bytes_left_is_refused() {
        // AcceptedCompressionTypes claims u32::MAX - 1 elements of one byte.
        let mut body = BODY[..26].to_vec();
        body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        body.extend_from_slice(&[0; 20]);
        match GetTelemetrySubscriptionsResponse::parse(0, &body) {
            Err(DecodeError::Malformed { field, kind, .. }) => {
                assert_eq!(field, "AcceptedCompressionTypes");
                assert_eq!(kind, WireErrorKind::InvalidLength(u32::MAX as i64 - 1));
            }
            other => panic!("{other:?}"),
        }
        // RequestedMetrics claims 5 names, with 4 bytes left: each takes at least one.
        let mut body = BODY[..40].to_vec();
        body.extend_from_slice(&[0x06, 0x01, 0x01, 0x01, 0x01]);
        match GetTelemetrySubscriptionsResponse::parse(0, &body) {
            Err(DecodeError::Malformed { field, kind, .. }) => {
                assert_eq!(field, "RequestedMetrics");
                assert_eq!(kind, WireErrorKind::InvalidLength(5));
            }
            other => panic!("{other:?}"),
        }
        // With the 5th name (and the tag section) it parses: 5 empty names (all metrics).
        body.extend_from_slice(&[0x01, 0x00]);
        let r = GetTelemetrySubscriptionsResponse::parse(0, &body)
            .unwrap()
            .body;
        assert_eq!(r.requested_metrics.len(), 5);
        assert!(r.requested_metrics.all());
    }

    #[test]
    fn a_null_or_non_utf8_name_is_refused() {
        for (name, want) in [
            (&[0x00][..], WireErrorKind::UnexpectedNull),
            (&[0x03, 0xff, 0xfe][..], WireErrorKind::InvalidUtf8),
        ] {
            let mut body = BODY[..40].to_vec();
            body.push(0x02);
            body.extend_from_slice(name);
            body.push(0x00);
            match GetTelemetrySubscriptionsResponse::parse(0, &body) {
                Err(DecodeError::Malformed { field, kind, .. }) => {
                    assert_eq!((field, kind), ("RequestedMetrics", want));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn unsupported_parse_versions_are_rejected() {
        for v in [-1, 1, 2] {
            assert_eq!(
                GetTelemetrySubscriptionsResponse::parse(v, BODY),
                Err(DecodeError::UnsupportedVersion {
                    api: ApiKey::GetTelemetrySubscriptions,
                    version: v
                })
            );
        }
    }
}
