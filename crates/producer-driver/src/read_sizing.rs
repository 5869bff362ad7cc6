//! How many bytes to read from a socket at a time: a read buffer that grows with traffic and
//! shrinks back when the traffic stops, so an idle connection does not keep a large buffer.
//!
//! A buffer starts at [`ReadSizing::MIN`] bytes. A read that fills it doubles it for the next
//! one (up to the driver's maximum); a read that takes less than a quarter of it halves it. A
//! connection that has read nothing for [`ReadSizing::IDLE`] goes back to the minimum at once
//! (the driver tells it: [`ReadSizing::idle`]), so a connection that went quiet right after a
//! burst lets its large buffer go too.

use std::time::Duration;

/// The size of a connection's (or a driver's) read buffer, adapted to its traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSizing {
    /// The size to offer the next read.
    target: usize,
    /// The largest size (the driver's setting), at least [`ReadSizing::MIN`].
    max: usize,
}

impl ReadSizing {
    /// The smallest buffer, and where every buffer starts: enough for the answers of a
    /// connection with little traffic (a Produce or Metadata answer of a small cluster) in one
    /// read.
    pub const MIN: usize = 4 * 1024;

    /// How long a connection reads nothing before its buffer goes back to [`ReadSizing::MIN`].
    pub const IDLE: Duration = Duration::from_secs(1);

    /// A buffer that starts small and grows up to `max` bytes (at least [`ReadSizing::MIN`]).
    pub fn new(max: usize) -> Self {
        let max = max.max(Self::MIN);
        ReadSizing {
            target: Self::MIN,
            max,
        }
    }

    /// How many bytes to offer the next read.
    #[inline]
    pub fn next(&self) -> usize {
        self.target
    }

    /// Whether the buffer is above its minimum: only then is there something to give back
    /// when the connection goes idle (a driver need not watch for idleness otherwise).
    #[inline]
    pub fn is_grown(&self) -> bool {
        self.target > Self::MIN
    }

    /// Call after a read that was offered `offered` bytes and took `got`: grows after a full
    /// read, shrinks after a small one.
    #[inline]
    pub fn after_read(&mut self, offered: usize, got: usize) {
        if got >= offered {
            self.target = self.target.saturating_mul(2).min(self.max);
        } else if got < offered / 4 {
            self.target = (self.target / 2).max(Self::MIN);
        }
    }

    /// Call when the connection has read nothing for [`ReadSizing::IDLE`]: back to the
    /// minimum (the driver then lets its larger buffer go).
    #[inline]
    pub fn idle(&mut self) {
        self.target = Self::MIN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_with_full_reads_up_to_the_maximum() {
        let mut s = ReadSizing::new(20 * 1024);
        assert_eq!(s.next(), 4096);
        assert!(!s.is_grown());
        s.after_read(4096, 4096);
        assert_eq!(s.next(), 8192);
        s.after_read(8192, 8192);
        s.after_read(16384, 16384);
        assert_eq!(s.next(), 20 * 1024, "capped");
        s.after_read(20 * 1024, 20 * 1024);
        assert_eq!(s.next(), 20 * 1024);
        assert!(s.is_grown());
    }

    #[test]
    fn shrinks_after_small_reads_and_at_once_when_idle() {
        let mut s = ReadSizing::new(64 * 1024);
        for _ in 0..4 {
            let n = s.next();
            s.after_read(n, n);
        }
        assert_eq!(s.next(), 64 * 1024);
        s.after_read(64 * 1024, 30 * 1024);
        assert_eq!(
            s.next(),
            64 * 1024,
            "a read of more than a quarter keeps the size"
        );
        s.after_read(64 * 1024, 100);
        assert_eq!(s.next(), 32 * 1024, "a small read halves it");
        s.idle();
        assert_eq!(s.next(), ReadSizing::MIN);
        s.after_read(ReadSizing::MIN, 10);
        assert_eq!(s.next(), ReadSizing::MIN, "never below the minimum");
    }

    #[test]
    fn a_maximum_below_the_minimum_is_the_minimum() {
        let mut s = ReadSizing::new(100);
        s.after_read(4096, 4096);
        assert_eq!(s.next(), ReadSizing::MIN);
    }
}
