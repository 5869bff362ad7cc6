//! Splitting a byte stream into size-prefixed frames.

use bytes::{Buf, BytesMut};

/// A frame that cannot be accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The size prefix announced a frame larger than the configured maximum; nothing was
    /// allocated for it. The connection should be closed.
    #[error("frame of {size} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// The announced size.
        size: u64,
        /// The configured maximum.
        max: usize,
    },
    /// The size prefix was negative.
    #[error("negative frame size {0}")]
    NegativeSize(i32),
}

impl FrameError {
    /// Whether the refused size prefix is the start of a TLS record instead (content type
    /// 20-23: change cipher spec, alert, handshake, application data; then protocol version
    /// 3.x): a TLS listener answering a plaintext client.
    pub fn looks_like_tls_record(&self) -> bool {
        match *self {
            FrameError::TooLarge { size, .. } => {
                let bytes = (size as u32).to_be_bytes();
                (20..=23).contains(&bytes[0]) && bytes[1] == 3 && bytes[2] <= 4
            }
            FrameError::NegativeSize(_) => false,
        }
    }
}

/// Reassembles size-prefixed frames from bytes arriving in any chunking.
///
/// Feed it with [`FrameDecoder::push`] whenever bytes are read, then call
/// [`FrameDecoder::next_frame`] until it returns `Ok(None)`. After an error the decoder is
/// poisoned: the stream cannot be resynchronised, so the connection must be closed.
///
/// Its memory follows the bytes that arrived, never what a size prefix announces: the buffer
/// grows as bytes are pushed (at most about twice what it holds), and after a frame larger than
/// [`RETAIN_AFTER_FRAME`] bytes is taken, what is left is moved to a buffer of its own size so
/// the large one is freed with the frame.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max_frame: usize,
    poisoned: Option<FrameError>,
}

/// The largest frame after which the decoder keeps its buffer for the next frames; after a
/// larger one it starts a new buffer, so one large answer does not pin its size for the life
/// of the connection.
pub const RETAIN_AFTER_FRAME: usize = 64 * 1024;

impl FrameDecoder {
    /// A decoder refusing frames whose body exceeds `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        FrameDecoder {
            buf: BytesMut::new(),
            max_frame,
            poisoned: None,
        }
    }

    /// Appends bytes read from the connection. The buffer grows by what arrives (amortised),
    /// not by the size the frame being assembled announced.
    pub fn push(&mut self, data: &[u8]) {
        if self.poisoned.is_none() {
            self.buf.extend_from_slice(data);
        }
    }

    /// Returns the next whole frame body (without its size prefix), `Ok(None)` when more bytes
    /// are needed, or an error when the stream announced a frame that may not be accepted.
    pub fn next_frame(&mut self) -> Result<Option<BytesMut>, FrameError> {
        if let Some(e) = self.poisoned {
            return Err(e);
        }
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if size < 0 {
            return Err(self.poison(FrameError::NegativeSize(size)));
        }
        let size = size as usize;
        if size > self.max_frame {
            return Err(self.poison(FrameError::TooLarge {
                size: size as u64,
                max: self.max_frame,
            }));
        }
        if self.buf.len() < 4 + size {
            // Nothing is reserved for the rest: the buffer grows as its bytes arrive.
            return Ok(None);
        }
        self.buf.advance(4);
        let frame = self.buf.split_to(size);
        if size > RETAIN_AFTER_FRAME {
            // The rest shares the frame's allocation and would keep it (and reuse it) once the
            // frame is dropped: copy the rest (the start of the next frames, at most what one
            // read returned) out of it instead.
            self.buf = BytesMut::from(&self.buf[..]);
        }
        Ok(Some(frame))
    }

    /// Bytes held that do not yet form a whole frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Bytes of buffer the decoder holds room for (what it has allocated for frames not yet
    /// whole), at least [`FrameDecoder::buffered`].
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    fn poison(&mut self, e: FrameError) -> FrameError {
        self.poisoned = Some(e);
        self.buf = BytesMut::new();
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frames(bodies: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in bodies {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    #[test]
    fn one_byte_at_a_time() {
        let bodies = vec![vec![1, 2, 3], vec![], vec![9; 100]];
        let stream = frames(&bodies);
        let mut d = FrameDecoder::new(1000);
        let mut got = Vec::new();
        for b in stream {
            d.push(&[b]);
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f.to_vec());
            }
        }
        assert_eq!(got, bodies);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn oversized_frame_is_refused_before_allocating() {
        let mut d = FrameDecoder::new(1 << 20);
        d.push(&i32::MAX.to_be_bytes());
        assert_eq!(
            d.next_frame(),
            Err(FrameError::TooLarge {
                size: i32::MAX as u64,
                max: 1 << 20
            })
        );
        assert!(d.buf.capacity() < 1024);
        // Poisoned afterwards.
        d.push(&[0, 0, 0, 0]);
        assert!(d.next_frame().is_err());
        let mut d = FrameDecoder::new(10);
        d.push(&(-5i32).to_be_bytes());
        assert_eq!(d.next_frame(), Err(FrameError::NegativeSize(-5)));
    }

    #[test]
    fn capacity_follows_the_bytes_that_arrived_not_the_announced_size() {
        // A 100 MiB frame announced (the default max.response.size), 1 KiB of it sent.
        let mut d = FrameDecoder::new(100 << 20);
        d.push(&(100i32 << 20).to_be_bytes());
        d.push(&[7; 1024]);
        assert_eq!(d.next_frame(), Ok(None));
        assert!(d.capacity() < 16 * 1024, "{} bytes held", d.capacity());
        // It grows as more arrives, within twice what it holds.
        for _ in 0..1024 {
            d.push(&[7; 1024]);
            assert_eq!(d.next_frame(), Ok(None));
            assert!(d.capacity() <= 2 * d.buffered() + 64, "{}", d.capacity());
        }
        assert_eq!(d.buffered(), 4 + 1025 * 1024);
    }

    #[test]
    fn a_large_frame_does_not_pin_its_buffer_after_it_is_taken() {
        let mut d = FrameDecoder::new(1 << 30);
        let body = vec![3u8; 4 << 20];
        let mut stream = frames(std::slice::from_ref(&body));
        stream.extend_from_slice(&[0, 0, 0, 2, 9]); // the start of a small next frame
        d.push(&stream);
        let frame = d.next_frame().unwrap().unwrap();
        assert_eq!(frame.len(), body.len());
        drop(frame);
        assert_eq!(d.buffered(), 5);
        assert!(d.capacity() < 1024, "{} bytes held", d.capacity());
        d.push(&[8]);
        assert_eq!(d.next_frame().unwrap().unwrap().to_vec(), vec![9, 8]);
    }

    proptest! {
        #[test]
        fn any_chunking_yields_the_same_frames(
            bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8),
            cuts in proptest::collection::vec(1usize..20, 0..40),
        ) {
            let stream = frames(&bodies);
            let mut d = FrameDecoder::new(64);
            let mut got = Vec::new();
            let mut pos = 0;
            let mut cuts = cuts.into_iter();
            while pos < stream.len() {
                let n = cuts.next().unwrap_or(7).min(stream.len() - pos);
                d.push(&stream[pos..pos + n]);
                pos += n;
                while let Some(f) = d.next_frame().unwrap() { got.push(f.to_vec()); }
            }
            prop_assert_eq!(got, bodies);
        }
    }
}
