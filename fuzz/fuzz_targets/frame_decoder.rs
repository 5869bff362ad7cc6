//! `FrameDecoder` fed a stream in arbitrary chunks must return exactly the frames (and the
//! error) that a straightforward re-parse of the whole stream gives.
//!
//! Input layout: `ctl`, then `ctl & 7` chunk-size bytes, then the stream. The top two bits of
//! `ctl` pick the maximum frame size. Chunk sizes are used in a cycle; a size byte of 0 pushes an
//! empty slice and then one byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use producer_core::protocol::{FrameDecoder, FrameError};

const MAX_FRAMES: [usize; 4] = [64 * 1024, 1024, 16, 0];

/// The frames of `stream`, and the error that stops it, if any (a partial last frame is neither).
fn reference(stream: &[u8], max: usize) -> (Vec<&[u8]>, Option<FrameError>) {
    let mut frames = Vec::new();
    let mut rest = stream;
    while let Some(prefix) = rest.get(..4) {
        let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        if size < 0 {
            return (frames, Some(FrameError::NegativeSize(size)));
        }
        if size as usize > max {
            return (
                frames,
                Some(FrameError::TooLarge {
                    size: size as u64,
                    max,
                }),
            );
        }
        match rest.get(4..4 + size as usize) {
            Some(frame) => frames.push(frame),
            None => break,
        }
        rest = &rest[4 + size as usize..];
    }
    (frames, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let n_sizes = usize::from(ctl & 7).min(rest.len());
    let (sizes, stream) = rest.split_at(n_sizes);
    let max = MAX_FRAMES[usize::from(ctl >> 6)];

    let mut decoder = FrameDecoder::new(max);
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut error = None;
    let mut pos = 0;
    let mut cycle = sizes.iter().copied().cycle();
    while pos < stream.len() {
        let size = match cycle.next() {
            Some(0) => {
                decoder.push(&[]);
                1
            }
            Some(s) => usize::from(s),
            None => stream.len(),
        };
        let end = (pos + size).min(stream.len());
        decoder.push(&stream[pos..end]);
        pos = end;
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    assert!(error.is_none(), "frame after an error");
                    assert!(frame.len() <= max);
                    frames.push(frame.to_vec());
                }
                Ok(None) => {
                    assert!(error.is_none(), "Ok(None) after an error");
                    break;
                }
                Err(e) => {
                    // Poisoned: the same error every time.
                    assert!(error.is_none() || error == Some(e));
                    error = Some(e);
                    break;
                }
            }
        }
    }

    let (want_frames, want_error) = reference(stream, max);
    assert_eq!(frames.len(), want_frames.len());
    assert!(
        frames.iter().zip(&want_frames).all(|(a, b)| a == b),
        "frames differ"
    );
    assert_eq!(error, want_error);
    if error.is_none() {
        let consumed: usize = want_frames.iter().map(|f| 4 + f.len()).sum();
        assert_eq!(decoder.buffered(), stream.len() - consumed);
    }
});
