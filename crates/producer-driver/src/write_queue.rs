//! The frames one connection still has to write, written with vectored writes.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes};

/// Most frames handed to one vectored write.
pub const MAX_IOV: usize = 64;

/// The frames the core transmitted on one connection and the socket has not taken yet, in
/// order; the front one may be partly written. The core bounds what it has in flight, so
/// this stays small unless the socket is stuck (see [`WriteQueue::queued_bytes`]).
#[derive(Debug, Default)]
pub struct WriteQueue {
    frames: VecDeque<Bytes>,
    /// The bytes in `frames`.
    bytes: usize,
}

impl WriteQueue {
    /// Queues a frame behind the others (an empty one is ignored).
    #[inline]
    pub fn push(&mut self, frame: Bytes) {
        if frame.is_empty() {
            return;
        }
        self.bytes += frame.len();
        self.frames.push_back(frame);
    }

    /// Queues the pieces of one [`producer_core::Output::Transmit`] behind the others.
    #[inline]
    pub fn push_wire(&mut self, bytes: producer_core::WireBytes) {
        for piece in bytes {
            self.push(piece);
        }
    }

    /// Whether everything was written.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Frames queued (the front one perhaps partly written).
    #[inline]
    pub fn frames(&self) -> usize {
        self.frames.len()
    }

    /// Bytes still to write.
    #[inline]
    pub fn queued_bytes(&self) -> usize {
        self.bytes
    }

    /// Points `iov` at the first frames (at most `iov.len()`, and at most [`MAX_IOV`] are
    /// useful); how many it filled. Pass `&iov[..n]` to one vectored write, then call
    /// [`WriteQueue::advance`] with the bytes it wrote.
    #[inline]
    #[must_use = "only that many slices are filled"]
    pub fn fill_slices<'a>(&'a self, iov: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (slot, frame) in iov.iter_mut().zip(self.frames.iter()) {
            *slot = IoSlice::new(frame);
            n += 1;
        }
        n
    }

    /// Call after a write took `written` bytes: drops the frames written whole and the written
    /// part of the next one. More than what is queued empties the queue.
    #[inline]
    pub fn advance(&mut self, written: usize) {
        self.bytes = self.bytes.saturating_sub(written);
        let mut left = written;
        while left > 0 {
            let Some(front) = self.frames.front_mut() else {
                break;
            };
            if front.len() <= left {
                left -= front.len();
                self.frames.pop_front();
            } else {
                front.advance(left);
                left = 0;
            }
        }
    }

    /// Writes with `write` (one vectored write of the first [`MAX_IOV`] frames) until the
    /// queue is empty or `write` returns an error (`WouldBlock` included, for a non-blocking
    /// socket: call again when it is writable). A write of 0 bytes is `WriteZero`; an
    /// `Interrupted` write is retried.
    pub fn write_with(
        &mut self,
        mut write: impl FnMut(&[IoSlice<'_>]) -> std::io::Result<usize>,
    ) -> std::io::Result<()> {
        while !self.frames.is_empty() {
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let n = self.fill_slices(&mut iov);
            match write(&iov[..n]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(written) => self.advance(written),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(frames: &[&'static [u8]]) -> WriteQueue {
        let mut q = WriteQueue::default();
        for f in frames {
            q.push(Bytes::from_static(f));
        }
        q
    }

    #[test]
    fn advance_drops_whole_frames_and_cuts_the_next() {
        let mut q = queue(&[b"abc", b"", b"defg", b"h"]);
        assert_eq!(
            (q.frames(), q.queued_bytes()),
            (3, 8),
            "the empty frame is ignored"
        );
        q.advance(5);
        assert_eq!((q.frames(), q.queued_bytes()), (2, 3));
        let mut iov = [IoSlice::new(&[]); MAX_IOV];
        let n = q.fill_slices(&mut iov);
        assert_eq!(n, 2);
        assert_eq!(&*iov[0], b"fg", "the front frame is partly written");
        assert_eq!(&*iov[1], b"h");
        q.advance(3);
        assert!(q.is_empty());
        assert_eq!(q.queued_bytes(), 0);
    }

    #[test]
    fn write_with_stops_at_would_block_and_resumes() {
        let mut q = queue(&[b"hello ", b"world"]);
        let mut out = Vec::new();
        let mut budget = 4;
        let r = q.write_with(|iov| {
            if budget == 0 {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            let bytes: Vec<u8> = iov.iter().flat_map(|s| s.iter().copied()).collect();
            let n = bytes.len().min(budget);
            budget -= n;
            out.extend_from_slice(&bytes[..n]);
            Ok(n)
        });
        assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
        assert_eq!(out, b"hell");
        q.write_with(|iov| {
            let bytes: Vec<u8> = iov.iter().flat_map(|s| s.iter().copied()).collect();
            out.extend_from_slice(&bytes);
            Ok(bytes.len())
        })
        .unwrap();
        assert_eq!(out, b"hello world");
        assert!(q.is_empty());
    }

    #[test]
    fn a_write_of_nothing_is_an_error() {
        let mut q = queue(&[b"x"]);
        let e = q.write_with(|_| Ok(0)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WriteZero);
        assert_eq!(q.queued_bytes(), 1, "nothing was written");
    }
}
