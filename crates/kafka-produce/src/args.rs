//! The command line, and the producer configuration it makes.

use std::path::PathBuf;

use bytes::Bytes;
use clap::Parser;
use producer_core::{Config, ConfigBuilder};

use crate::Failure;

const AFTER_HELP: &str = "\
INPUT:
  Each line (up to \\n, which is not part of the record) is one record. With -T, a line starts
  with its topic and DELIM; with -K, the key comes before DELIM and the value after it (a line
  without DELIM has a null key). Lines are bytes: no encoding is assumed.

FAILED RECORDS:
  Each record that is not delivered is written to --failed FILE (default: stderr) as one line:
  the reason, a tab, then the record as it was read (topic and key with their delimiters), so
  `cut -f2- FILE` gives back the input to retry. Nothing read is dropped without a line there.
  A line longer than max.request.size cannot be a record: it goes there whole, with that
  reason (it is read and written in pieces, never held in memory whole).
  When no bootstrap broker can be reached at all (the connection is refused, times out or the
  name does not resolve before any broker answered), kafka-produce stops at once: it names the
  address and the error, writes every record not yet delivered to --failed, and reads no more.
  With --timeout SECS the close at the end of the input ends within SECS: the records not
  delivered by then go to --failed, as purged (never sent) or as sent and unanswered (the
  close's deadline passed: they may have been written).

EXIT CODES:
  0  every record was delivered
  1  some records failed (each is in --failed with its reason), or reading the input failed
     part-way (the records read before it are accounted for)
  2  usage or configuration error: a bad option, an input file that cannot be opened, an
     unknown or bad -X setting (with the nearest known name), a -F file that cannot be read;
     nothing was produced

EXAMPLES:
  kafka-produce -b localhost:9092 -t events < events.txt
  kafka-produce -b localhost:9092 -t events -K : -H source=import -X linger.ms=20 a.txt b.txt
  kafka-produce -F client.properties -t events --failed failed.txt events.txt
  kafka-produce -b localhost:9092 -t events --timeout 30 --failed failed.txt events.txt
  kafka-produce -b localhost:9092 -t bench --num-records 1000000 --record-size 100 --throughput -1
";

/// A command-line Kafka producer: lines from stdin or files become records; or, with
/// --num-records, a load generator as kafka-producer-perf-test.
///
/// Its `Debug` shows the names of the -X settings, not their values (a value may be a
/// password); the errors it gives name settings, never values.
#[derive(Parser)]
#[command(name = "kafka-produce", version, after_help = AFTER_HELP)]
pub struct Args {
    /// Bootstrap brokers, host:port[,host:port...] (same as -X bootstrap.servers=...).
    #[arg(short = 'b', long = "brokers", value_name = "HOST:PORT,...")]
    pub brokers: Option<String>,

    /// The topic of every record (required unless -T gives it per line).
    #[arg(short = 't', long = "topic")]
    pub topic: Option<String>,

    /// Each line starts with its topic followed by DELIM.
    #[arg(short = 'T', long = "topic-delimiter", value_name = "DELIM")]
    pub topic_delimiter: Option<String>,

    /// Split each line at the first DELIM into key and value.
    #[arg(short = 'K', long = "key-delimiter", value_name = "DELIM")]
    pub key_delimiter: Option<String>,

    /// A header for every record, name=value (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,

    /// Produce every record to this partition (default: the partitioner: murmur2 of the key,
    /// sticky for null keys).
    #[arg(short = 'p', long = "partition")]
    pub partition: Option<i32>,

    /// A producer setting by its Kafka name (Java's or librdkafka's spelling), e.g.
    /// -X linger.ms=20 -X compression.type=lz4 (repeatable; later ones win).
    #[arg(short = 'X', value_name = "NAME=VALUE")]
    pub settings: Vec<String>,

    /// A .properties file of producer settings (applied before -X and -b).
    #[arg(short = 'F', long = "config-file", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// Where failed records go, each with its reason (default: stderr).
    #[arg(long = "failed", value_name = "FILE")]
    pub failed: Option<PathBuf>,

    /// No progress display (by default: a bar on a terminal, a line every 5 s otherwise).
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,

    /// Print the diagnosis ("why is it slow?": per broker, the dominant limit over the last
    /// metrics.sample.window.ms x metrics.num.samples, its numbers and the setting to change)
    /// on stderr every 5 s while producing. It is printed at the end of every run anyway.
    #[arg(long = "diagnose")]
    pub diagnose: bool,

    /// At the end of the input, close within this many seconds: what is not delivered by then
    /// goes to --failed with its reason (never sent: purged; sent and unanswered: the close's
    /// deadline passed, possibly written). Without it the close waits for every record
    /// (at most delivery.timeout.ms).
    #[arg(long = "timeout", value_name = "SECS", value_parser = parse_timeout)]
    pub timeout: Option<std::time::Duration>,

    /// Perf mode: produce this many generated records instead of reading input.
    #[arg(long = "num-records", value_name = "N", conflicts_with_all = ["files", "key_delimiter", "topic_delimiter"])]
    pub num_records: Option<u64>,

    /// Perf mode: the size of each record's value in bytes.
    #[arg(
        long = "record-size",
        value_name = "BYTES",
        default_value_t = 100,
        requires = "num_records"
    )]
    pub record_size: usize,

    /// Perf mode: records per second, paced open-loop (latency counts from each record's
    /// planned send time); -1 for no limit.
    #[arg(long = "throughput", value_name = "N", default_value_t = -1.0, allow_negative_numbers = true, requires = "num_records")]
    pub throughput: f64,

    /// Input files, read in order ("-" is stdin; none: stdin).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

/// `--timeout`: seconds, fractions allowed, not negative.
fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    std::time::Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("{s:?} is not a usable number of seconds"))
}

/// How a line becomes a record, and back (for --failed).
#[derive(Debug, Clone)]
pub struct LineFormat {
    pub topic: Option<std::sync::Arc<str>>,
    pub topic_delimiter: Option<Vec<u8>>,
    pub key_delimiter: Option<Vec<u8>>,
    pub headers: Vec<(String, Bytes)>,
    pub partition: Option<i32>,
}

impl Args {
    /// The producer configuration: -F's file, then each -X, then -b.
    pub fn config(&self) -> Result<Config, Failure> {
        let mut b = Config::builder(Vec::<(String, u16)>::new());
        if let Some(path) = &self.config_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Failure::Usage(format!("cannot read -F {}: {e}", path.display())))?;
            b = b
                .set_properties_text(&text)
                .map_err(|e| Failure::Usage(format!("-F {}: {e}", path.display())))?;
        }
        for s in &self.settings {
            let (name, value) = s.split_once('=').ok_or_else(|| {
                // Shown only when it is a name: "-X sasl.password:hunter2" is not echoed.
                Failure::Usage(if looks_like_a_name(s) {
                    format!("-X {s}: expected name=value")
                } else {
                    "-X: expected name=value (the argument is not shown: it may hold a secret)"
                        .to_string()
                })
            })?;
            // The error names the setting, never the value.
            b = b
                .set(name, value)
                .map_err(|e| Failure::Usage(format!("-X: {e}")))?;
        }
        if let Some(list) = &self.brokers {
            b = set(b, "bootstrap.servers", list, "-b")?;
        }
        let config = b.build().map_err(|e| match e {
            producer_core::ConfigError::NoBootstrapServers => Failure::Usage(
                "no bootstrap servers: give -b host:port (or -X bootstrap.servers=...)".into(),
            ),
            e => Failure::Usage(format!("configuration: {e}")),
        })?;
        if config.transactional_id.is_some() {
            // Its records would all be refused outside a transaction: say so instead.
            return Err(Failure::Usage(
                "transactional.id: kafka-produce does not run transactions (use the library's \
                 transactions(): init / begin / commit)"
                    .into(),
            ));
        }
        Ok(config)
    }

    /// The line format of produce mode.
    pub fn line_format(&self) -> Result<LineFormat, Failure> {
        if self.topic.is_none() && self.topic_delimiter.is_none() {
            return Err(Failure::Usage(
                "no topic: give -t TOPIC, or -T DELIM for a topic per line".into(),
            ));
        }
        for (flag, d) in [("-K", &self.key_delimiter), ("-T", &self.topic_delimiter)] {
            if d.as_ref().is_some_and(String::is_empty) {
                return Err(Failure::Usage(format!("{flag}: the delimiter is empty")));
            }
        }
        let mut headers = Vec::new();
        for h in &self.headers {
            let (name, value) = h
                .split_once('=')
                .ok_or_else(|| Failure::Usage(format!("-H {h}: expected name=value")))?;
            headers.push((name.to_string(), Bytes::copy_from_slice(value.as_bytes())));
        }
        if let Some(p) = self.partition {
            if p < 0 {
                return Err(Failure::Usage(format!("-p {p}: a partition is 0 or more")));
            }
        }
        Ok(LineFormat {
            topic: self.topic.as_deref().map(Into::into),
            topic_delimiter: self.topic_delimiter.as_ref().map(|d| d.as_bytes().to_vec()),
            key_delimiter: self.key_delimiter.as_ref().map(|d| d.as_bytes().to_vec()),
            headers,
            partition: self.partition,
        })
    }
}

impl std::fmt::Debug for Args {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let setting_names: Vec<&str> = self
            .settings
            .iter()
            .map(|s| s.split_once('=').map_or("<not name=value>", |(n, _)| n))
            .collect();
        f.debug_struct("Args")
            .field("brokers", &self.brokers)
            .field("topic", &self.topic)
            .field("topic_delimiter", &self.topic_delimiter)
            .field("key_delimiter", &self.key_delimiter)
            .field("headers", &self.headers)
            .field("partition", &self.partition)
            .field("settings (names only)", &setting_names)
            .field("config_file", &self.config_file)
            .field("failed", &self.failed)
            .field("quiet", &self.quiet)
            .field("timeout", &self.timeout)
            .field("num_records", &self.num_records)
            .field("record_size", &self.record_size)
            .field("throughput", &self.throughput)
            .field("files", &self.files)
            .finish()
    }
}

/// Whether `s` could be a setting's name (and so holds no secret): Kafka's names are ASCII
/// letters, digits, `.`, `_` and `-`.
fn looks_like_a_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

fn set(b: ConfigBuilder, name: &str, value: &str, flag: &str) -> Result<ConfigBuilder, Failure> {
    b.set(name, value)
        .map_err(|e| Failure::Usage(format!("{flag} {value}: {e}")))
}
