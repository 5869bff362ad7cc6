//! Request and response headers, and request framing.

use super::primitives::{field, int32, skip_tags, PResult, Put};
use super::{ApiKey, DecodeError};

/// The header in front of every request (v1, or v2 for flexible API versions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader<'a> {
    /// Which API.
    pub api_key: ApiKey,
    /// Which version of it.
    pub api_version: i16,
    /// Echoed back in the response header; matches responses to requests.
    pub correlation_id: i32,
    /// The client id (always a classic, non-compact nullable string, even in header v2).
    pub client_id: Option<&'a str>,
}

impl RequestHeader<'_> {
    /// Appends the header to `buf`.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.put_i16(self.api_key.code());
        buf.put_i16(self.api_version);
        buf.put_i32(self.correlation_id);
        buf.put_nullable_string(false, self.client_id);
        buf.put_empty_tags(self.api_key.request_header_version(self.api_version) >= 2);
    }
}

/// Appends one whole request frame to `buf`: the 4-byte size prefix, the header, and the body
/// written by `body`. Returns the frame's length including the prefix.
///
/// Call it once per request; `buf` may already hold earlier frames (they are left untouched).
pub fn encode_request(
    buf: &mut Vec<u8>,
    header: &RequestHeader<'_>,
    body: impl FnOnce(&mut Vec<u8>),
) -> usize {
    let start = buf.len();
    buf.put_i32(0); // size, patched below
    header.encode(buf);
    body(buf);
    let size = (buf.len() - start - 4) as i32;
    buf[start..start + 4].copy_from_slice(&size.to_be_bytes());
    buf.len() - start
}

/// Parses the response header of a response to `api` at `version` and returns the correlation id
/// and the body that follows it.
pub fn parse_response_header(
    api: ApiKey,
    version: i16,
    frame: &[u8],
) -> Result<(i32, &[u8]), DecodeError> {
    let flexible = api.response_header_version(version) >= 1;
    let p = |i| -> PResult<'_, i32> {
        let (i, correlation_id) = field("CorrelationId", int32)(i)?;
        let (i, ()) = field("ResponseHeader tagged fields", |i| skip_tags(i, flexible))(i)?;
        Ok((i, correlation_id))
    };
    let (rest, id) = p(frame).map_err(|e| DecodeError::from_nom(api, version, e))?;
    Ok((id, rest))
}

/// Reads the correlation id at the start of a response frame without knowing which API it
/// answers (the first four bytes of every response header).
pub fn peek_correlation_id(frame: &[u8]) -> Option<i32> {
    frame
        .get(..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_request_header_v1_and_v2() {
        let mut buf = Vec::new();
        let h = RequestHeader {
            api_key: ApiKey::Metadata,
            api_version: 8,
            correlation_id: 7,
            client_id: Some("ab"),
        };
        let n = encode_request(&mut buf, &h, |b| b.push(0xee));
        assert_eq!(n, buf.len());
        assert_eq!(
            buf,
            [0, 0, 0, 13, 0, 3, 0, 8, 0, 0, 0, 7, 0, 2, b'a', b'b', 0xee]
        );

        let mut buf = Vec::new();
        let h = RequestHeader {
            api_key: ApiKey::Metadata,
            api_version: 9,
            correlation_id: 7,
            client_id: None,
        };
        encode_request(&mut buf, &h, |_| {});
        // v2 header: client id stays a classic nullable string (-1), then an empty tag section.
        assert_eq!(buf, [0, 0, 0, 11, 0, 3, 0, 9, 0, 0, 0, 7, 0xff, 0xff, 0]);
    }

    #[test]
    fn response_headers() {
        // ApiVersions v3 is flexible but its response header is v0: no tag section.
        let (id, rest) = parse_response_header(ApiKey::ApiVersions, 3, &[0, 0, 0, 5, 9]).unwrap();
        assert_eq!((id, rest), (5, &[9][..]));
        let (id, rest) = parse_response_header(ApiKey::Produce, 9, &[0, 0, 0, 5, 0, 9]).unwrap();
        assert_eq!((id, rest), (5, &[9][..]));
        assert!(parse_response_header(ApiKey::Produce, 9, &[0, 0, 0]).is_err());
    }
}
