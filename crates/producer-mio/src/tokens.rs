//! The tokens a [`crate::MioDriver`] owns in the caller's `mio::Poll`.

use mio::Token;

/// The tokens a [`crate::MioDriver`] may use in the caller's `mio::Poll`: `len` consecutive
/// tokens starting at `start`.
///
/// The first token (`start`) is reserved for the driver's [`mio::Waker`] (whether the driver
/// registered it or the caller lent one, see [`crate::MioDriver::with_waker`]); the other
/// `len - 1` tokens are given to connections, one per open connection. The core keeps at most
/// one connection per broker (plus the bootstrap servers while it has no metadata), so
/// `len = 1 + brokers + bootstrap servers` is enough; a `Connect` the driver has no free token
/// for fails (and the core retries it after its reconnect backoff). [`TokenRange::default`]
/// gives 1024 tokens from `Token(1 << 30)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenRange {
    start: usize,
    len: usize,
}

impl TokenRange {
    /// The tokens `start .. start + len`. `len` must be at least 2 (checked by
    /// [`crate::MioDriver::new`]).
    #[must_use]
    pub fn new(start: Token, len: usize) -> Self {
        TokenRange {
            start: start.0,
            len,
        }
    }

    /// Whether `token` is in the range.
    pub fn contains(&self, token: Token) -> bool {
        token.0 >= self.start && token.0 - self.start < self.len
    }

    /// The token of the driver's waker (the first of the range).
    pub fn waker_token(&self) -> Token {
        Token(self.start)
    }

    /// How many tokens are left for connections (all but the waker's).
    pub(crate) fn connection_slots(&self) -> usize {
        self.len - 1
    }

    /// The token of connection slot `slot` (`0..connection_slots()`).
    pub(crate) fn connection_token(&self, slot: usize) -> Token {
        Token(self.start + 1 + slot)
    }

    /// The connection slot of `token`, if it is one of the range's connection tokens.
    pub(crate) fn connection_slot(&self, token: Token) -> Option<usize> {
        let offset = token.0.checked_sub(self.start)?;
        (offset >= 1 && offset < self.len).then(|| offset - 1)
    }

    /// Refuses a range too small for the waker and one connection, or running past
    /// `usize::MAX`.
    pub(crate) fn check(&self) -> std::io::Result<()> {
        if self.len < 2 || self.start.checked_add(self.len).is_none() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the token range needs at least 2 tokens",
            ));
        }
        Ok(())
    }
}

impl Default for TokenRange {
    fn default() -> Self {
        TokenRange {
            start: 1 << 30,
            len: 1024,
        }
    }
}
