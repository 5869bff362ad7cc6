//! FindCoordinator (key 10), versions 0-6: which broker coordinates a transactional id (or a
//! consumer group).
//!
//! A transactional producer sends it before InitProducerId, and again when the coordinator
//! answers NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE. v1 adds the key type (transaction
//! coordinators need it), v3 is the first flexible version, v4 batches several keys in one request
//! and answers one entry per key (KIP-699), v5 and v6 only add error codes and share groups. The
//! parsed response is the same list at every version: v0-3's single answer becomes one entry
//! without a key.

use super::primitives::{
    array, field, int16, int32, min_string_size, min_tags_size, nullable_string, skip_tags, string,
    PResult, Put,
};
use super::{ApiKey, DecodeError, Parsed};
use crate::error_code::ErrorCode;

const API: ApiKey = ApiKey::FindCoordinator;

/// What kind of coordinator is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorType {
    /// A consumer group's coordinator (key type 0).
    Group,
    /// A transactional id's coordinator (key type 1; v1+).
    Transaction,
}

impl CoordinatorType {
    /// The `KeyType` on the wire.
    pub const fn code(self) -> i8 {
        match self {
            CoordinatorType::Group => 0,
            CoordinatorType::Transaction => 1,
        }
    }
}

/// A FindCoordinator request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FindCoordinatorRequest<'a> {
    /// The kind of coordinator.
    pub key_type: CoordinatorType,
    /// The keys (transactional ids or group ids): exactly one below v4.
    pub keys: &'a [&'a str],
}

impl FindCoordinatorRequest<'_> {
    /// Appends the request body (no header) at `version` to `buf`.
    ///
    /// `version` must be within [`ApiKey::supported_versions`] (0-6), below v4 `keys` must hold
    /// exactly one key, and v0 looks up groups only: anything else is a caller bug (checked with
    /// `debug_assert!`; below v4 only the first key is sent).
    pub fn encode(&self, version: i16, buf: &mut Vec<u8>) {
        debug_assert!(
            DecodeError::check_version(API, version).is_ok(),
            "FindCoordinator v{version} is not supported"
        );
        debug_assert!(version >= 4 || self.keys.len() == 1, "one key below v4");
        debug_assert!(
            version >= 1 || self.key_type == CoordinatorType::Group,
            "v0 finds group coordinators only"
        );
        let flexible = API.is_flexible(version);
        if version < 4 {
            buf.put_string(flexible, self.keys.first().copied().unwrap_or(""));
        }
        if version >= 1 {
            buf.put_i8(self.key_type.code());
        }
        if version >= 4 {
            buf.put_array_len(flexible, self.keys.len());
            for k in self.keys {
                buf.put_string(flexible, k);
            }
        }
        buf.put_empty_tags(flexible);
    }
}

/// One coordinator in a FindCoordinator response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinator {
    /// The key this entry answers (v4+; `None` for v0-3, which answer the one key asked).
    pub key: Option<String>,
    /// The coordinator's node id (-1 on error).
    pub node_id: i32,
    /// Its host.
    pub host: String,
    /// Its port.
    pub port: i32,
    /// The error code, [`ErrorCode::NONE`] on success.
    pub error_code: ErrorCode,
    /// The broker's message, if any (v1+).
    pub error_message: Option<String>,
}

/// A parsed FindCoordinator response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCoordinatorResponse {
    /// How long the request was throttled for, in milliseconds (0 for v0).
    pub throttle_time_ms: i32,
    /// One entry per key asked (one for v0-3).
    pub coordinators: Vec<Coordinator>,
}

impl FindCoordinatorResponse {
    /// Parses a response body (after the response header) to a request sent at `version`.
    pub fn parse(version: i16, body: &[u8]) -> Result<Parsed<Self>, DecodeError> {
        Parsed::parse_with(API, version, body, |i| parse_body(i, version))
    }
}

/// The fewest bytes a coordinator entry (v4+) takes: Key, NodeId, Host, Port, ErrorCode,
/// ErrorMessage, tagged fields.
fn min_coordinator_size(flexible: bool) -> usize {
    3 * min_string_size(flexible) + 4 + 4 + 2 + min_tags_size(flexible)
}

fn parse_body(i: &[u8], version: i16) -> PResult<'_, FindCoordinatorResponse> {
    let flexible = API.is_flexible(version);
    let (i, throttle_time_ms) = if version >= 1 {
        field("ThrottleTimeMs", int32)(i)?
    } else {
        (i, 0)
    };
    let (i, coordinators) = if version >= 4 {
        field(
            "Coordinators",
            array(flexible, min_coordinator_size(flexible), |i| {
                let (i, key) = field("Key", string(flexible))(i)?;
                let (i, node_id) = field("NodeId", int32)(i)?;
                let (i, host) = field("Host", string(flexible))(i)?;
                let (i, port) = field("Port", int32)(i)?;
                let (i, error_code) = field("ErrorCode", int16)(i)?;
                let (i, error_message) = field("ErrorMessage", nullable_string(flexible))(i)?;
                let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
                Ok((
                    i,
                    Coordinator {
                        key: Some(key),
                        node_id,
                        host,
                        port,
                        error_code: ErrorCode(error_code),
                        error_message,
                    },
                ))
            }),
        )(i)?
    } else {
        let (i, error_code) = field("ErrorCode", int16)(i)?;
        let (i, error_message) = if version >= 1 {
            field("ErrorMessage", nullable_string(flexible))(i)?
        } else {
            (i, None)
        };
        let (i, node_id) = field("NodeId", int32)(i)?;
        let (i, host) = field("Host", string(flexible))(i)?;
        let (i, port) = field("Port", int32)(i)?;
        (
            i,
            vec![Coordinator {
                key: None,
                node_id,
                host,
                port,
                error_code: ErrorCode(error_code),
                error_message,
            }],
        )
    };
    let (i, ()) = field("tagged fields", |i| skip_tags(i, flexible))(i)?;
    Ok((
        i,
        FindCoordinatorResponse {
            throttle_time_ms,
            coordinators,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_request_v1_and_v4() {
        let req = FindCoordinatorRequest {
            key_type: CoordinatorType::Transaction,
            keys: &["tx"],
        };
        let mut buf = Vec::new();
        req.encode(1, &mut buf);
        assert_eq!(buf, [0x00, 0x02, b't', b'x', 0x01]);
        let mut buf = Vec::new();
        req.encode(4, &mut buf);
        #[rustfmt::skip]
        let expected = [
            0x01,             // KeyType: transaction
            0x02,             // CoordinatorKeys: compact array of 1
            0x03, b't', b'x', // "tx"
            0x00,             // no tagged fields
        ];
        assert_eq!(buf, expected);
    }

    #[test]
    fn golden_response_v0_and_v4() {
        #[rustfmt::skip]
        let v0 = [
            0x00, 0x0f,             // ErrorCode 15 (COORDINATOR_NOT_AVAILABLE)
            0xff, 0xff, 0xff, 0xff, // NodeId -1
            0x00, 0x00,             // Host ""
            0xff, 0xff, 0xff, 0xff, // Port -1
        ];
        let parsed = FindCoordinatorResponse::parse(0, &v0).unwrap();
        assert_eq!(parsed.trailing, 0);
        assert_eq!(
            parsed.body.coordinators,
            [Coordinator {
                key: None,
                node_id: -1,
                host: String::new(),
                port: -1,
                error_code: ErrorCode::COORDINATOR_NOT_AVAILABLE,
                error_message: None,
            }]
        );
        #[rustfmt::skip]
        let v4 = [
            0x00, 0x00, 0x00, 0x00, // ThrottleTimeMs
            0x02,                   // Coordinators: 1
            0x03, b't', b'x',       // Key "tx"
            0x00, 0x00, 0x00, 0x02, // NodeId 2
            0x02, b'h',             // Host "h"
            0x00, 0x00, 0x23, 0x84, // Port 9092
            0x00, 0x00,             // ErrorCode 0
            0x00,                   // ErrorMessage null
            0x00,                   // entry tags
            0x00,                   // response tags
        ];
        let parsed = FindCoordinatorResponse::parse(4, &v4).unwrap();
        assert_eq!(parsed.trailing, 0);
        let c = &parsed.body.coordinators[0];
        assert_eq!(c.key.as_deref(), Some("tx"));
        assert_eq!((c.node_id, c.host.as_str(), c.port), (2, "h", 9092));
        for cut in 0..v4.len() {
            assert!(FindCoordinatorResponse::parse(4, &v4[..cut]).is_err());
        }
    }
}
