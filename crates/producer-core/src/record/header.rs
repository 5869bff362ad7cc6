//! A record header, as the application gives it and as a batch's records give it back.

use bytes::Bytes;

/// A record header: a non-null UTF-8 key and a nullable byte value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Header {
    /// The header key (never null on the wire).
    pub key: String,
    /// The header value; `None` is written as length -1.
    pub value: Option<Bytes>,
}

impl Header {
    /// A header with the given key and value.
    pub fn new(key: impl Into<String>, value: Option<Bytes>) -> Self {
        Header {
            key: key.into(),
            value,
        }
    }
}
