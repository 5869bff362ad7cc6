//! Input lines to records, and records back to lines (for `--failed`); reading a line without
//! ever holding more of it than a record may take.

use std::io::{self, BufRead, Read};

use bytes::Bytes;
use producer_core::{Header, Record};

use crate::args::LineFormat;

/// Why a line read is not a record: it goes to `--failed` with this reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LineError {
    /// `-T` is given and the line does not contain the delimiter.
    #[error("the line has no topic delimiter (-T)")]
    NoTopicDelimiter,
    /// `-T` is given and the line starts with the delimiter.
    #[error("the line's topic is empty")]
    EmptyTopic,
    /// `-T` is given and the bytes before the delimiter are not UTF-8.
    #[error("the line's topic is not UTF-8")]
    TopicNotUtf8,
    /// The line has more bytes than `max.request.size`: no request could carry its record.
    /// Only its first `limit + 1` bytes were held; the rest was read piece by piece.
    #[error("the line is longer than max.request.size ({limit} bytes)")]
    TooLong {
        /// `max.request.size`.
        limit: usize,
    },
}

/// What [`read_line`] read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// The input has ended: no line.
    End,
    /// A whole line, without its `\n` (the last line of an input may have none).
    Line,
    /// A line of more than the limit: its first `limit + 1` bytes were read, the reader is
    /// still inside it (read the rest with [`rest_of_line`]).
    TooLong,
}

/// Reads one line into `line` (appended, without its `\n`), holding at most `limit + 1` of its
/// bytes whatever its length: a line of more than `limit` bytes is [`LineRead::TooLong`].
pub(crate) fn read_line(
    reader: &mut impl BufRead,
    limit: usize,
    line: &mut Vec<u8>,
) -> io::Result<LineRead> {
    let start = line.len();
    let wanted = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    if (&mut *reader).take(wanted).read_until(b'\n', line)? == 0 {
        return Ok(LineRead::End);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        return Ok(LineRead::Line);
    }
    // No `\n`: the input ended inside the line, or the line is longer than the limit.
    Ok(if line.len() - start <= limit {
        LineRead::Line
    } else {
        LineRead::TooLong
    })
}

/// Most bytes of a line's rest that [`rest_of_line`] holds at a time.
const PIECE: u64 = 64 * 1024;

/// Reads the rest of a line after [`LineRead::TooLong`], up to its `\n` (not included) or the
/// end of the input, handing it to `piece` in pieces of at most 64 KiB as they are read.
/// Returns how many bytes the rest had.
pub(crate) fn rest_of_line(
    reader: &mut impl BufRead,
    mut piece: impl FnMut(&[u8]),
) -> io::Result<u64> {
    let mut scratch = Vec::new();
    let mut total = 0u64;
    loop {
        scratch.clear();
        if (&mut *reader).take(PIECE).read_until(b'\n', &mut scratch)? == 0 {
            return Ok(total);
        }
        let done = scratch.last() == Some(&b'\n');
        if done {
            scratch.pop();
        }
        total += scratch.len() as u64;
        piece(&scratch);
        if done {
            return Ok(total);
        }
    }
}

/// The position of the first `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl LineFormat {
    /// The record of one line (without its `\n`), or why the line cannot be one.
    pub(crate) fn record(&self, line: Bytes) -> Result<Record, LineError> {
        let (topic, rest) = match &self.topic_delimiter {
            Some(d) => {
                let i = find(&line, d).ok_or(LineError::NoTopicDelimiter)?;
                if i == 0 {
                    return Err(LineError::EmptyTopic);
                }
                let topic = std::str::from_utf8(&line[..i]).map_err(|_| LineError::TopicNotUtf8)?;
                (topic.into(), line.slice(i + d.len()..))
            }
            None => (
                self.topic.clone().expect("checked: -t or -T is given"),
                line,
            ),
        };
        let (key, value) = match &self.key_delimiter {
            Some(d) => match find(&rest, d) {
                Some(i) => (Some(rest.slice(..i)), rest.slice(i + d.len()..)),
                None => (None, rest),
            },
            None => (None, rest),
        };
        Ok(Record {
            topic,
            partition: self.partition,
            key,
            value: Some(value),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| Header::new(k.clone(), Some(v.clone())))
                .collect(),
            timestamp: None,
        })
    }

    /// The line `record` was read from (topic and key with their delimiters, as given).
    pub(crate) fn line(&self, record: &Record) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(d) = &self.topic_delimiter {
            out.extend_from_slice(record.topic.as_bytes());
            out.extend_from_slice(d);
        }
        if let (Some(d), Some(key)) = (&self.key_delimiter, &record.key) {
            out.extend_from_slice(key);
            out.extend_from_slice(d);
        }
        out.extend_from_slice(record.value.as_deref().unwrap_or_default());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(topic_delim: Option<&str>, key_delim: Option<&str>) -> LineFormat {
        LineFormat {
            topic: Some("default".into()),
            topic_delimiter: topic_delim.map(|d| d.as_bytes().to_vec()),
            key_delimiter: key_delim.map(|d| d.as_bytes().to_vec()),
            headers: vec![("h".into(), Bytes::from_static(b"v"))],
            partition: Some(3),
        }
    }

    #[test]
    fn a_line_with_topic_and_key_round_trips() {
        let f = format(Some("|"), Some("::"));
        let r = f.record(Bytes::from_static(b"orders|k1::v::1")).unwrap();
        assert_eq!(&*r.topic, "orders");
        assert_eq!(r.key.as_deref(), Some(&b"k1"[..]));
        assert_eq!(r.value.as_deref(), Some(&b"v::1"[..]));
        assert_eq!(r.partition, Some(3));
        assert_eq!(r.headers.len(), 1);
        assert_eq!(f.line(&r), b"orders|k1::v::1");
    }

    #[test]
    fn no_key_delimiter_means_a_null_key_and_the_line_back_unchanged() {
        let f = format(None, Some(":"));
        let r = f.record(Bytes::from_static(b"just a value")).unwrap();
        assert_eq!(&*r.topic, "default");
        assert_eq!(r.key, None);
        assert_eq!(f.line(&r), b"just a value");
    }

    #[test]
    fn a_line_without_its_topic_is_refused_with_the_reason() {
        let f = format(Some("|"), None);
        assert_eq!(
            f.record(Bytes::from_static(b"no topic here")),
            Err(LineError::NoTopicDelimiter)
        );
        assert_eq!(
            LineError::NoTopicDelimiter.to_string(),
            "the line has no topic delimiter (-T)"
        );
        assert_eq!(
            f.record(Bytes::from_static(b"|empty topic")),
            Err(LineError::EmptyTopic)
        );
    }

    /// An input that yields `len` bytes of `x` and then `\n` and `after`, made as it is read:
    /// a line of any length without holding it.
    struct LongLine {
        left: u64,
        after: &'static [u8],
    }

    impl Read for LongLine {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.left > 0 {
                let n = (buf.len() as u64).min(self.left) as usize;
                buf[..n].fill(b'x');
                self.left -= n as u64;
                return Ok(n);
            }
            let n = buf.len().min(self.after.len());
            buf[..n].copy_from_slice(&self.after[..n]);
            self.after = &self.after[n..];
            Ok(n)
        }
    }

    /// Lines up to the limit are read whole (with or without a last `\n`); a longer line is
    /// held only up to `limit + 1` bytes, its rest read in pieces of at most 64 KiB, and the
    /// next line is read as usual.
    #[test]
    fn a_line_longer_than_the_limit_is_never_held_whole() {
        let mut input = io::BufReader::new(&b"12345\n123456\nabc"[..]);
        let mut line = Vec::new();
        assert_eq!(read_line(&mut input, 5, &mut line).unwrap(), LineRead::Line);
        assert_eq!(line, b"12345");
        line.clear();
        assert_eq!(
            read_line(&mut input, 5, &mut line).unwrap(),
            LineRead::TooLong
        );
        assert_eq!(line, b"123456");
        assert_eq!(rest_of_line(&mut input, |_| {}).unwrap(), 0);
        line.clear();
        assert_eq!(read_line(&mut input, 5, &mut line).unwrap(), LineRead::Line);
        assert_eq!(line, b"abc");
        line.clear();
        assert_eq!(read_line(&mut input, 5, &mut line).unwrap(), LineRead::End);

        // 100 MiB in one line, with a limit of 1 MiB: at most 1 MiB + 1 held in the line, and
        // the rest in pieces of at most 64 KiB.
        const LEN: u64 = 100 << 20;
        const LIMIT: usize = 1 << 20;
        let mut input = io::BufReader::with_capacity(
            256 * 1024,
            LongLine {
                left: LEN,
                after: b"\nnext\n",
            },
        );
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut input, LIMIT, &mut line).unwrap(),
            LineRead::TooLong
        );
        assert_eq!(line.len(), LIMIT + 1);
        assert!(line.capacity() <= 2 * (LIMIT + 1), "{}", line.capacity());
        let (mut pieces, mut largest) = (0u64, 0usize);
        let rest = rest_of_line(&mut input, |p| {
            pieces += p.len() as u64;
            largest = largest.max(p.len());
            assert!(p.iter().all(|&b| b == b'x'));
        })
        .unwrap();
        assert_eq!(rest, LEN - LIMIT as u64 - 1);
        assert_eq!(pieces, rest);
        assert!(largest <= 64 * 1024, "{largest}");
        line.clear();
        assert_eq!(
            read_line(&mut input, LIMIT, &mut line).unwrap(),
            LineRead::Line
        );
        assert_eq!(line, b"next");
    }
}
