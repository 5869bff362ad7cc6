//! Input lines to records, and records back to lines (for `--failed`).

use bytes::Bytes;
use producer_core::{Header, Record};

use crate::args::LineFormat;

/// The position of the first `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl LineFormat {
    /// The record of one line (without its `\n`), or why the line cannot be one.
    pub(crate) fn record(&self, line: Bytes) -> Result<Record, &'static str> {
        let (topic, rest) = match &self.topic_delimiter {
            Some(d) => {
                let i = find(&line, d).ok_or("the line has no topic delimiter (-T)")?;
                if i == 0 {
                    return Err("the line's topic is empty");
                }
                let topic =
                    std::str::from_utf8(&line[..i]).map_err(|_| "the line's topic is not UTF-8")?;
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
            Err("the line has no topic delimiter (-T)")
        );
        assert_eq!(
            f.record(Bytes::from_static(b"|empty topic")),
            Err("the line's topic is empty")
        );
    }
}
