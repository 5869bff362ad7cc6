//! Configuration by Kafka's names: `key=value` settings as the Java client and librdkafka spell
//! them, one at a time ([`ConfigBuilder::set`]), from pairs ([`Config::from_properties`]) or
//! from the text of a `.properties` file ([`Config::from_properties_text`]).
//!
//! Every name the producer supports is in [`SETTINGS`] with its spellings; a name that is known
//! but not supported (`interceptor.classes`, `partitioner.class`, serializers, ...) is an error
//! that says so, an unknown name is an error that suggests the nearest known one, and a bad
//! value names the setting and the accepted form.

use std::time::Duration;

use crate::config::{Acks, Config, ConfigBuilder, ConfigError, MetadataRecovery};
use crate::record::Compression;
use crate::sasl::Mechanism;
use crate::security::{SaslConfig, SecurityProtocol, TlsConfig};

/// One supported setting: its names (the Java spelling first, then librdkafka's where it
/// differs) and the form of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Setting {
    /// The names it goes by.
    pub names: &'static [&'static str],
    /// The accepted form of its value, for error messages and the docs.
    pub form: &'static str,
}

const fn setting(names: &'static [&'static str], form: &'static str) -> Setting {
    Setting { names, form }
}

/// Every setting [`ConfigBuilder::set`] accepts.
pub const SETTINGS: &[Setting] = &[
    setting(
        &["bootstrap.servers", "metadata.broker.list"],
        "host:port[,host:port...]",
    ),
    setting(&["client.id"], "a string"),
    setting(&["acks", "request.required.acks"], "all, -1, 0 or 1"),
    setting(&["enable.idempotence"], "true or false"),
    setting(&["linger.ms", "queue.buffering.max.ms"], "milliseconds"),
    setting(&["batch.size"], "bytes"),
    setting(&["max.request.size", "message.max.bytes"], "bytes"),
    setting(&["buffer.memory"], "bytes"),
    setting(&["queue.buffering.max.kbytes"], "kibibytes"),
    setting(&["queue.buffering.max.messages"], "a count"),
    setting(
        &["compression.type", "compression.codec"],
        "none, gzip, snappy, lz4 or zstd",
    ),
    setting(&["retry.backoff.ms"], "milliseconds"),
    setting(&["retry.backoff.max.ms"], "milliseconds"),
    setting(&["reconnect.backoff.ms"], "milliseconds"),
    setting(&["reconnect.backoff.max.ms"], "milliseconds"),
    setting(&["request.timeout.ms"], "milliseconds"),
    setting(&["delivery.timeout.ms", "message.timeout.ms"], "milliseconds"),
    setting(
        &["max.in.flight.requests.per.connection", "max.in.flight"],
        "a count, 1-5 with idempotence",
    ),
    setting(&["metadata.max.age.ms"], "milliseconds"),
    setting(&["metadata.recovery.strategy"], "rebootstrap or none"),
    setting(&["metadata.recovery.rebootstrap.trigger.ms"], "milliseconds"),
    setting(&["max.block.ms"], "milliseconds"),
    setting(&["partitioner.adaptive.partitioning.enable"], "true or false"),
    setting(&["partitioner.availability.timeout.ms"], "milliseconds"),
    setting(&["partitioner.ignore.keys"], "true or false"),
    setting(
        &["security.protocol"],
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    ),
    setting(
        &["sasl.mechanism", "sasl.mechanisms"],
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
    ),
    setting(&["sasl.username"], "a string"),
    setting(&["sasl.password"], "a string"),
    setting(
        &["sasl.jaas.config"],
        "a JAAS line for PlainLoginModule or ScramLoginModule with username=\"...\" password=\"...\"",
    ),
    setting(&["ssl.ca.location"], "a PEM file"),
    setting(&["ssl.certificate.location"], "a PEM file"),
    setting(&["ssl.key.location"], "a PEM file"),
    setting(&["ssl.endpoint.identification.algorithm"], "https or none"),
];

/// Names the Java client or librdkafka know that this producer does not support, with why.
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "batch.num.messages",
        "batches are bounded by bytes (batch.size), not by a record count",
    ),
    (
        "socket.keepalive.enable",
        "socket options are the driver's: the drivers set TCP_NODELAY only",
    ),
    (
        "statistics.interval.ms",
        "no statistics callback: read Producer::metrics() (or its Prometheus text) when you want",
    ),
    (
        "interceptor.classes",
        "interceptors are Java classes; wrap the driver's send instead",
    ),
    (
        "partitioner.class",
        "the partitioner is built in (murmur2 for keys, adaptive sticky for null keys); tune it with partitioner.adaptive.partitioning.enable, partitioner.availability.timeout.ms and partitioner.ignore.keys",
    ),
    (
        "key.serializer",
        "records carry bytes: serialize in the application",
    ),
    (
        "value.serializer",
        "records carry bytes: serialize in the application",
    ),
    (
        "retries",
        "retries are bounded by delivery.timeout.ms, not counted",
    ),
    ("transactional.id", "transactions are not supported yet"),
    (
        "transaction.timeout.ms",
        "transactions are not supported yet",
    ),
    (
        "ssl.truststore.location",
        "Java keystores are not read: give the CA as PEM in ssl.ca.location",
    ),
    (
        "ssl.keystore.location",
        "Java keystores are not read: give ssl.certificate.location and ssl.key.location as PEM",
    ),
    (
        "sasl.login.callback.handler.class",
        "OAUTHBEARER tokens come from the driver's token provider",
    ),
];

/// A setting that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PropertyError {
    /// No setting has this name.
    #[error("unknown setting {name:?}{}", nearest.map(|n| format!(" (did you mean {n:?}?)")).unwrap_or_default())]
    Unknown {
        /// The name given.
        name: String,
        /// The known name nearest to it, if one is near.
        nearest: Option<&'static str>,
    },
    /// The Java client or librdkafka knows this setting, this producer does not support it.
    #[error("setting {name:?} is not supported: {why}")]
    Unsupported {
        /// The name given.
        name: String,
        /// Why, and what to do instead.
        why: &'static str,
    },
    /// The value is not of the setting's form.
    #[error("setting {name:?} = {value:?}: expected {form}")]
    BadValue {
        /// The setting.
        name: String,
        /// The value given (never a secret: those are shown as `<redacted>`).
        value: String,
        /// The accepted form.
        form: &'static str,
    },
    /// A `.properties` line that is not `name=value` (or `name: value`).
    #[error("line {line}: not a name=value setting: {text:?}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
    /// A line of a `.properties` text whose setting was refused (the inner error says why).
    #[error("line {line}: {error}")]
    AtLine {
        /// 1-based line number.
        line: usize,
        /// Why the line's setting was refused.
        error: Box<PropertyError>,
    },
    /// The settings parse but do not go together.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// What became of one setting line of a `.properties` text (see
/// [`ConfigBuilder::apply_properties_text`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PropertyLine {
    /// 1-based line number.
    pub line: usize,
    /// The setting's name as written (`None` for a line that is not `name=value`).
    pub name: Option<String>,
    /// `Ok` when the setting was taken; otherwise why not (the value of a secret is never in
    /// the error).
    pub outcome: Result<(), PropertyError>,
}

/// The setting named `name`, by any of its spellings.
pub fn find_setting(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.names.contains(&name))
}

fn is_secret(name: &str) -> bool {
    name == "sasl.password" || name == "sasl.jaas.config"
}

impl ConfigBuilder {
    /// Applies one setting by its Kafka name (Java or librdkafka spelling). When to call it:
    /// while building, in any order (later settings win); [`ConfigBuilder::build`] then checks
    /// that they go together.
    pub fn set(mut self, name: &str, value: &str) -> Result<Self, PropertyError> {
        let name = name.trim();
        let value = value.trim();
        let Some(setting) = find_setting(name) else {
            if let Some((_, why)) = UNSUPPORTED.iter().find(|(n, _)| *n == name) {
                return Err(PropertyError::Unsupported {
                    name: name.to_string(),
                    why,
                });
            }
            return Err(PropertyError::Unknown {
                name: name.to_string(),
                nearest: nearest(name),
            });
        };
        let bad = || PropertyError::BadValue {
            name: name.to_string(),
            value: if is_secret(name) {
                "<redacted>".to_string()
            } else {
                value.to_string()
            },
            form: setting.form,
        };
        let ms = || {
            value
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad())
        };
        let count = || value.parse::<usize>().map_err(|_| bad());
        match setting.names[0] {
            "bootstrap.servers" => {
                self.config.bootstrap = parse_bootstrap(value).ok_or_else(bad)?
            }
            "client.id" => self.config.client_id = value.to_string(),
            "acks" => {
                self.config.acks = match value {
                    "all" | "-1" => Acks::All,
                    "1" => Acks::Leader,
                    "0" => Acks::None,
                    _ => return Err(bad()),
                }
            }
            "enable.idempotence" => {
                self = self.enable_idempotence(parse_bool(value).ok_or_else(bad)?)
            }
            "linger.ms" => self.config.linger = ms()?,
            "batch.size" => self.config.batch_size = count()?,
            "max.request.size" => self.config.max_request_size = count()?,
            "buffer.memory" => self.config.buffer_memory = count()?,
            "queue.buffering.max.kbytes" => {
                self.config.buffer_memory = count()?.checked_mul(1024).ok_or_else(bad)?
            }
            "queue.buffering.max.messages" => self.config.buffer_max_records = count()?,
            "compression.type" => {
                self.config.compression = match value.to_ascii_lowercase().as_str() {
                    "none" => Compression::None,
                    "gzip" => Compression::Gzip,
                    "snappy" => Compression::Snappy,
                    "lz4" => Compression::Lz4,
                    "zstd" => Compression::Zstd,
                    _ => return Err(bad()),
                }
            }
            "retry.backoff.ms" => self.config.retry_backoff = ms()?,
            "retry.backoff.max.ms" => self.config.retry_backoff_max = ms()?,
            "reconnect.backoff.ms" => self.config.reconnect_backoff = ms()?,
            "reconnect.backoff.max.ms" => self.config.reconnect_backoff_max = ms()?,
            "request.timeout.ms" => self.config.request_timeout = ms()?,
            "delivery.timeout.ms" => self = self.delivery_timeout(ms()?),
            "max.in.flight.requests.per.connection" => self.config.max_in_flight = count()?,
            "metadata.max.age.ms" => self.config.metadata_max_age = ms()?,
            "metadata.recovery.strategy" => {
                self.config.metadata_recovery = match value.to_ascii_lowercase().as_str() {
                    "rebootstrap" => MetadataRecovery::Rebootstrap,
                    "none" => MetadataRecovery::None,
                    _ => return Err(bad()),
                }
            }
            "metadata.recovery.rebootstrap.trigger.ms" => self.config.rebootstrap_trigger = ms()?,
            "max.block.ms" => self.config.max_block = ms()?,
            "partitioner.adaptive.partitioning.enable" => {
                self.config.adaptive_partitioning = parse_bool(value).ok_or_else(bad)?
            }
            "partitioner.availability.timeout.ms" => {
                self.config.partitioner_availability_timeout = ms()?
            }
            "partitioner.ignore.keys" => {
                self.config.partitioner_ignore_keys = parse_bool(value).ok_or_else(bad)?
            }
            "security.protocol" => {
                self.config.security_protocol =
                    SecurityProtocol::from_kafka_name(value).ok_or_else(bad)?
            }
            "sasl.mechanism" => {
                let m = Mechanism::from_kafka_name(value).ok_or_else(bad)?;
                self.sasl_mut().mechanism = m;
            }
            "sasl.username" => self.sasl_mut().username = value.to_string(),
            "sasl.password" => self.sasl_mut().password = crate::Secret::new(value),
            "sasl.jaas.config" => {
                // The login module must be PLAIN's or SCRAM's; sasl.mechanism says which.
                let (user, password) = parse_jaas(value).ok_or_else(bad)?;
                let sasl = self.sasl_mut();
                sasl.username = user;
                sasl.password = crate::Secret::new(password);
            }
            "ssl.ca.location" => self.tls_mut().ca_location = Some(value.into()),
            "ssl.certificate.location" => self.tls_mut().certificate_location = Some(value.into()),
            "ssl.key.location" => self.tls_mut().key_location = Some(value.into()),
            "ssl.endpoint.identification.algorithm" => {
                self.tls_mut().endpoint_identification = match value.to_ascii_lowercase().as_str() {
                    "https" => true,
                    "none" | "" => false,
                    _ => return Err(bad()),
                }
            }
            other => unreachable!("setting {other} is listed but not applied"),
        }
        Ok(self)
    }

    fn sasl_mut(&mut self) -> &mut SaslConfig {
        self.config
            .sasl
            .get_or_insert_with(|| SaslConfig::with(Mechanism::Plain, "", ""))
    }

    fn tls_mut(&mut self) -> &mut TlsConfig {
        self.config.tls.get_or_insert_with(TlsConfig::default)
    }
}

impl Config {
    /// A configuration from `(name, value)` settings by Kafka's names; `bootstrap.servers` is
    /// required. Defaults are the Java client 4.x's, as with [`Config::builder`].
    pub fn from_properties<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Config, PropertyError> {
        let mut b = Config::builder(Vec::<(String, u16)>::new());
        for (name, value) in pairs {
            b = b.set(name, value)?;
        }
        Ok(b.build()?)
    }

    /// A configuration from the text of a `.properties` file: `name=value` (or `name: value`)
    /// lines; blank lines and lines starting with `#` or `!` are skipped. Errors name the line.
    pub fn from_properties_text(text: &str) -> Result<Config, PropertyError> {
        Ok(Config::builder(Vec::<(String, u16)>::new())
            .set_properties_text(text)?
            .build()?)
    }
}

impl ConfigBuilder {
    /// Applies every setting of the text of a `.properties` file, as
    /// [`Config::from_properties_text`] reads it. When to call it: while building, before or
    /// after other settings (later ones win: a file first, then command-line overrides).
    pub fn set_properties_text(self, text: &str) -> Result<Self, PropertyError> {
        let (b, lines) = self.apply_properties_text(text);
        match lines.into_iter().find_map(|l| l.outcome.err()) {
            Some(e) => Err(e),
            None => Ok(b),
        }
    }

    /// Applies every setting line of a `.properties` text that it can, and says for each
    /// setting line whether it was taken or why not (unknown name with the nearest known one,
    /// unsupported, bad value, not `name=value`), so a whole file can be checked at once. When
    /// to call it: to show a user line by line what a file does; the builder returned has the
    /// accepted lines applied (later ones win), and [`ConfigBuilder::build`] still checks that
    /// they go together.
    pub fn apply_properties_text(mut self, text: &str) -> (Self, Vec<PropertyLine>) {
        let mut report = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = n + 1;
            let t = raw.trim();
            if t.is_empty() || t.starts_with('#') || t.starts_with('!') {
                continue;
            }
            let Some(i) = t.find(['=', ':']) else {
                report.push(PropertyLine {
                    line,
                    name: None,
                    outcome: Err(PropertyError::Malformed {
                        line,
                        text: raw.to_string(),
                    }),
                });
                continue;
            };
            let name = t[..i].trim().to_string();
            let outcome = match self.clone().set(&name, &t[i + 1..]) {
                Ok(b) => {
                    self = b;
                    Ok(())
                }
                Err(e) => Err(PropertyError::AtLine {
                    line,
                    error: Box::new(e),
                }),
            };
            report.push(PropertyLine {
                line,
                name: Some(name),
                outcome,
            });
        }
        (self, report)
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// `host:port,host:port`: every entry with a port (IPv6 hosts in brackets).
fn parse_bootstrap(v: &str) -> Option<Vec<(String, u16)>> {
    let list: Option<Vec<_>> = v
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (host, port) = s.rsplit_once(':')?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            (!host.is_empty()).then_some(())?;
            Some((host.to_string(), port.parse().ok()?))
        })
        .collect();
    list.filter(|l| !l.is_empty())
}

/// The Java JAAS line: `<module> required username="..." password="...";` for Kafka's
/// PlainLoginModule or ScramLoginModule: the username and the password.
fn parse_jaas(v: &str) -> Option<(String, String)> {
    let v = v.trim().trim_end_matches(';');
    let (module, rest) = v.split_once(char::is_whitespace)?;
    if !matches!(
        module.rsplit('.').next()?,
        "PlainLoginModule" | "ScramLoginModule"
    ) {
        return None;
    }
    let rest = rest.trim_start().strip_prefix("required")?;
    let field = |name: &str| -> Option<String> {
        let start = rest.find(&format!("{name}=\""))? + name.len() + 2;
        let end = rest[start..].find('"')? + start;
        Some(rest[start..end].to_string())
    };
    Some((field("username")?, field("password")?))
}

/// The known name nearest to `name` (edit distance at most a third of its length).
fn nearest(name: &str) -> Option<&'static str> {
    let all = SETTINGS.iter().flat_map(|s| s.names.iter().copied());
    let (best, d) = all
        .map(|n| (n, distance(name, n)))
        .min_by_key(|&(_, d)| d)?;
    (d <= name.len().max(3) / 3).then_some(best)
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_is_applied_by_every_spelling() {
        let values = |name: &str| match name {
            "bootstrap.servers" => "a:1",
            "acks" => "all",
            "enable.idempotence"
            | "partitioner.adaptive.partitioning.enable"
            | "partitioner.ignore.keys" => "true",
            "compression.type" => "lz4",
            "security.protocol" => "SASL_SSL",
            "sasl.mechanism" => "SCRAM-SHA-512",
            "sasl.jaas.config" => {
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";"#
            }
            "ssl.endpoint.identification.algorithm" => "none",
            "metadata.recovery.strategy" => "none",
            "client.id" | "sasl.username" | "sasl.password" => "x",
            n if n.ends_with(".location") => "/tmp/x.pem",
            "max.in.flight.requests.per.connection" => "5",
            _ => "100",
        };
        for s in SETTINGS {
            for name in s.names {
                let v = values(s.names[0]);
                if let Err(e) = Config::builder([("h", 1)]).set(name, v) {
                    panic!("{name}={v}: {e}");
                }
            }
        }
    }

    #[test]
    fn metadata_recovery_by_name() {
        let c = Config::from_properties([
            ("bootstrap.servers", "k1:9092"),
            ("metadata.recovery.strategy", "NONE"),
            ("metadata.recovery.rebootstrap.trigger.ms", "2500"),
        ])
        .unwrap();
        assert_eq!(c.metadata_recovery, MetadataRecovery::None);
        assert_eq!(c.rebootstrap_trigger, Duration::from_millis(2500));
        let d = Config::from_properties([("bootstrap.servers", "k1:9092")]).unwrap();
        assert_eq!(d.metadata_recovery, MetadataRecovery::Rebootstrap);
        assert_eq!(d.rebootstrap_trigger, Duration::from_secs(300));
        let e = Config::builder([("h", 1)])
            .set("metadata.recovery.strategy", "sometimes")
            .unwrap_err()
            .to_string();
        assert!(e.contains("rebootstrap or none"), "{e}");
    }

    #[test]
    fn java_and_librdkafka_spellings_mean_the_same() {
        let java = Config::from_properties([
            ("bootstrap.servers", "k1:9092,k2:9093"),
            ("linger.ms", "20"),
            ("max.request.size", "2000000"),
            ("delivery.timeout.ms", "60000"),
            ("compression.type", "zstd"),
            ("acks", "1"),
        ])
        .unwrap();
        let rdkafka = Config::from_properties([
            ("metadata.broker.list", "k1:9092,k2:9093"),
            ("queue.buffering.max.ms", "20"),
            ("message.max.bytes", "2000000"),
            ("message.timeout.ms", "60000"),
            ("compression.codec", "zstd"),
            ("request.required.acks", "1"),
        ])
        .unwrap();
        assert_eq!(format!("{java:?}"), format!("{rdkafka:?}"));
        assert_eq!(
            java.bootstrap,
            [("k1".to_string(), 9092), ("k2".to_string(), 9093)]
        );
        assert_eq!(java.linger, Duration::from_millis(20));
        assert!(!java.idempotence, "acks=1 turns idempotence off");
    }

    #[test]
    fn a_java_sasl_ssl_file_with_jaas() {
        let c = Config::from_properties_text(
            "# a producer.properties as Java users write it\n\
             bootstrap.servers=broker:9094\n\
             security.protocol=SASL_SSL\n\
             sasl.mechanism=SCRAM-SHA-256\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"s3cret\";\n\
             ssl.ca.location=/etc/kafka/ca.pem\n",
        )
        .unwrap();
        let sasl = c.sasl.unwrap();
        assert_eq!(sasl.mechanism, Mechanism::ScramSha256);
        assert_eq!(sasl.username, "alice");
        assert_eq!(sasl.password.expose(), "s3cret");
        assert_eq!(c.security_protocol, SecurityProtocol::SaslSsl);
    }

    /// A librdkafka configuration as people write one (after librdkafka's CONFIGURATION.md and
    /// kcat's `-F` files): every line is taken or refused, with the reason.
    #[test]
    fn a_librdkafka_file_line_by_line() {
        let text = "\
# kcat / librdkafka producer settings
metadata.broker.list=k1:9092,k2:9092
client.id=orders-producer
queue.buffering.max.ms=10
batch.num.messages=10000
compression.codec=lz4
request.required.acks=-1
enable.idempotence=true
message.timeout.ms=120000
socket.keepalive.enable=true
statistics.interval.ms=60000
queue.buffering.max.kbytes=1048576
linger.msec=5
";
        let (b, lines) = Config::builder(Vec::<(String, u16)>::new()).apply_properties_text(text);
        let refused: Vec<(usize, String)> = lines
            .iter()
            .filter_map(|l| l.outcome.as_ref().err().map(|e| (l.line, e.to_string())))
            .collect();
        let taken: Vec<&str> = lines
            .iter()
            .filter(|l| l.outcome.is_ok())
            .filter_map(|l| l.name.as_deref())
            .collect();
        assert!(taken.contains(&"metadata.broker.list"), "{refused:?}");
        assert!(taken.contains(&"queue.buffering.max.ms"), "{refused:?}");
        assert!(taken.contains(&"compression.codec"), "{refused:?}");
        assert!(taken.contains(&"request.required.acks"), "{refused:?}");
        // The misspelling is refused with its line and the nearest name.
        let linger = refused
            .iter()
            .find(|(line, _)| *line == 13)
            .expect("line 13 refused");
        assert!(
            linger.1.contains("did you mean \"linger.ms\""),
            "{linger:?}"
        );
        // Every refused line says why, with its line number.
        for (line, why) in &refused {
            assert!(why.starts_with(&format!("line {line}: ")), "{why}");
        }
        assert_eq!(
            taken.len() + refused.len(),
            12,
            "one outcome per setting line"
        );
        // librdkafka-only settings this producer does not have are refused as unsupported.
        for (line, name) in [
            (5, "batch.num.messages"),
            (10, "socket.keepalive.enable"),
            (11, "statistics.interval.ms"),
        ] {
            let why = &refused.iter().find(|(l, _)| *l == line).expect(name).1;
            assert!(why.contains(name) && why.contains("not supported"), "{why}");
        }
        assert_eq!(refused.len(), 4, "{refused:#?}");
        let c = b.build().expect("the accepted lines go together");
        assert_eq!(c.linger, Duration::from_millis(10));
        assert_eq!(c.compression, crate::Compression::Lz4);
        assert_eq!(c.client_id, "orders-producer");
        // The first refusal is what set_properties_text reports.
        let first = Config::builder(Vec::<(String, u16)>::new())
            .set_properties_text(text)
            .unwrap_err();
        assert_eq!(first.to_string(), refused[0].1);
    }

    /// A Java `producer.properties` as found in deployments (Kafka's own config/producer.properties
    /// plus common additions): interceptors and a custom partitioner are refused as unsupported,
    /// with the line.
    #[test]
    fn a_java_file_line_by_line() {
        let text = "\
bootstrap.servers=localhost:9092
compression.type=none
partitioner.class=com.example.MyPartitioner
interceptor.classes=io.confluent.monitoring.clients.interceptor.MonitoringProducerInterceptor
key.serializer=org.apache.kafka.common.serialization.StringSerializer
linger.ms=5
batch.size=65536
acks=all
max.in.flight.requests.per.connection=5
retries=2147483647
";
        let (b, lines) = Config::builder(Vec::<(String, u16)>::new()).apply_properties_text(text);
        let outcome = |line: usize| {
            lines
                .iter()
                .find(|l| l.line == line)
                .map(|l| l.outcome.clone())
                .expect("a setting line")
        };
        assert!(outcome(1).is_ok());
        for line in [3, 4] {
            match outcome(line) {
                Err(PropertyError::AtLine { line: l, error }) => {
                    assert_eq!(l, line);
                    assert!(
                        matches!(*error, PropertyError::Unsupported { .. }),
                        "{error}"
                    );
                }
                other => panic!("line {line}: {other:?}"),
            }
        }
        assert!(outcome(6).is_ok() && outcome(7).is_ok() && outcome(8).is_ok());
        let refused: Vec<String> = lines
            .iter()
            .filter_map(|l| l.outcome.as_ref().err().map(|e| e.to_string()))
            .collect();
        assert!(
            refused.iter().all(|r| r.starts_with("line ")),
            "{refused:?}"
        );
        let c = b.build().unwrap();
        assert_eq!(c.batch_size, 65536);
        assert_eq!(c.linger, Duration::from_millis(5));
    }

    /// The adaptive partitioner's settings by their Java names (ProducerConfig.java:
    /// `PARTITIONER_ADPATIVE_PARTITIONING_ENABLE_CONFIG`, `PARTITIONER_AVAILABILITY_TIMEOUT_MS_CONFIG`,
    /// `PARTITIONER_IGNORE_KEYS_CONFIG`), with Java's defaults, and bad values refused by name.
    #[test]
    fn partitioner_settings_by_their_java_names() {
        let d = Config::builder([("h", 1)]).build().unwrap();
        assert!(d.adaptive_partitioning);
        assert_eq!(d.partitioner_availability_timeout, Duration::ZERO);
        assert!(!d.partitioner_ignore_keys);
        let c = Config::from_properties([
            ("bootstrap.servers", "k:9092"),
            ("partitioner.adaptive.partitioning.enable", "false"),
            ("partitioner.availability.timeout.ms", "250"),
            ("partitioner.ignore.keys", "TRUE"),
        ])
        .unwrap();
        assert!(!c.adaptive_partitioning);
        assert_eq!(
            c.partitioner_availability_timeout,
            Duration::from_millis(250)
        );
        assert!(c.partitioner_ignore_keys);
        let b = || Config::builder([("h", 1)]);
        for (name, value, form) in [
            (
                "partitioner.adaptive.partitioning.enable",
                "yes",
                "true or false",
            ),
            ("partitioner.availability.timeout.ms", "-1", "milliseconds"),
            ("partitioner.ignore.keys", "1", "true or false"),
        ] {
            assert_eq!(
                b().set(name, value).unwrap_err(),
                PropertyError::BadValue {
                    name: name.into(),
                    value: value.into(),
                    form
                }
            );
        }
        // A custom partitioner class stays refused, and says what can be tuned instead.
        match b().set("partitioner.class", "x").unwrap_err() {
            PropertyError::Unsupported { why, .. } => {
                assert!(why.contains("partitioner.ignore.keys"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let b = || Config::builder([("h", 1)]);
        assert_eq!(
            b().set("linger.msec", "5").unwrap_err(),
            PropertyError::Unknown {
                name: "linger.msec".into(),
                nearest: Some("linger.ms")
            }
        );
        assert!(matches!(
            b().set("frobnicate", "5").unwrap_err(),
            PropertyError::Unknown { nearest: None, .. }
        ));
        assert!(matches!(
            b().set("partitioner.class", "x").unwrap_err(),
            PropertyError::Unsupported { .. }
        ));
        assert_eq!(
            b().set("acks", "most").unwrap_err(),
            PropertyError::BadValue {
                name: "acks".into(),
                value: "most".into(),
                form: "all, -1, 0 or 1"
            }
        );
        let e = b()
            .set("sasl.jaas.config", "garbage password=\"hunter2\"")
            .unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert!(matches!(
            Config::from_properties_text("bootstrap.servers=a:1\njust words\n").unwrap_err(),
            PropertyError::Malformed { line: 2, .. }
        ));
        assert!(matches!(
            Config::from_properties([("security.protocol", "SASL_PLAINTEXT")]).unwrap_err(),
            PropertyError::Config(ConfigError::NoBootstrapServers)
        ));
    }
}
