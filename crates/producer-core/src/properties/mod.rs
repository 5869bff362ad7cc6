//! Configuration by Kafka's names: `key=value` settings as the Java client and librdkafka spell
//! them, one at a time ([`ConfigBuilder::set`]), from pairs ([`Config::from_properties`]) or
//! from the text of a `.properties` file ([`Config::from_properties_text`]).
//!
//! Every name the producer supports is in [`SETTINGS`] with its spellings; a name that is known
//! but not supported (`interceptor.classes`, `partitioner.class`, serializers, ...) is an error
//! that says so, an unknown name is an error that suggests the nearest known one, and a bad
//! value names the setting and the accepted form.
//!
//! No error shows a value, nor the text of a line it could not read: a value may be a secret
//! (`sasl.password`, `sasl.jaas.config`, a token), and a line that is not `name=value` may be
//! one written with another separator (`sasl.password hunter2`). Errors name the setting and
//! the line instead.

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
    setting(&["transactional.id"], "a non-empty string"),
    setting(&["transaction.timeout.ms"], "milliseconds"),
    setting(&["linger.ms", "queue.buffering.max.ms"], "milliseconds"),
    setting(&["batch.size"], "bytes"),
    setting(
        &["batch.grow.max.bytes"],
        "bytes (batch.size or 0: no growth past batch.size)",
    ),
    setting(&["max.request.size", "message.max.bytes"], "bytes"),
    setting(&["buffer.memory"], "bytes"),
    setting(&["queue.delay.target.ms"], "milliseconds, 0 for off"),
    setting(&["queue.delay.min.ms"], "milliseconds"),
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
    setting(&["metadata.max.idle.ms"], "milliseconds"),
    setting(&["metrics.sample.window.ms"], "milliseconds"),
    setting(&["metrics.num.samples"], "a count, 1-64"),
    setting(&["metadata.recovery.strategy"], "rebootstrap or none"),
    setting(&["metadata.recovery.rebootstrap.trigger.ms"], "milliseconds"),
    setting(&["max.block.ms"], "milliseconds"),
    setting(&["sasl.login.read.timeout.ms"], "milliseconds"),
    setting(&["partitioner.adaptive.partitioning.enable"], "true or false"),
    setting(&["partitioner.availability.timeout.ms"], "milliseconds"),
    setting(&["partitioner.ignore.keys"], "true or false"),
    setting(&["enable.metrics.push"], "true or false"),
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
        "the partitioner is built in (murmur2 for keys, adaptive sticky for null keys); tune it with partitioner.adaptive.partitioning.enable, partitioner.availability.timeout.ms and partitioner.ignore.keys, or set one in code (Producer::set_partitioner, the drivers' builders' partitioner: a producer_core::Partitioner)",
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
    /// The value is not of the setting's form. The value itself is not kept: it may be a
    /// secret.
    #[error("setting {name:?}: expected {form}")]
    BadValue {
        /// The setting.
        name: String,
        /// The accepted form.
        form: &'static str,
    },
    /// A `.properties` line that is not `name=value` (or `name: value`). Its text is not kept:
    /// it may hold a secret written with another separator.
    #[error("line {line}: not a name=value setting")]
    Malformed {
        /// 1-based line number.
        line: usize,
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
    /// `Ok` when the setting was taken; otherwise why not (no value is ever in the error).
    pub outcome: Result<(), PropertyError>,
}

/// The setting named `name`, by any of its spellings.
pub fn find_setting(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.names.contains(&name))
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
            "transactional.id" if value.is_empty() => return Err(bad()),
            "transactional.id" => self = self.transactional_id(value),
            "transaction.timeout.ms" => self = self.transaction_timeout(ms()?),
            "linger.ms" => self.config.linger = ms()?,
            "batch.size" => self.config.batch_size = count()?,
            // How far a batch grows past batch.size while its leader's in-flight slots are all
            // busy (`Config::batch_grow_max`); build brings it within batch.size and
            // max.request.size, so 0 turns growth off.
            "batch.grow.max.bytes" => self.config.batch_grow_max = count()?,
            "max.request.size" => self.config.max_request_size = count()?,
            "buffer.memory" => self.config.buffer_memory = count()?,
            "queue.delay.target.ms" => self.config.queue_delay_target = ms()?,
            "queue.delay.min.ms" => self.config.queue_delay_min = ms()?,
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
            "metadata.max.idle.ms" => self.config.metadata_max_idle = ms()?,
            "metrics.sample.window.ms" => self.config.metrics_sample_window = ms()?,
            "metrics.num.samples" => self.config.metrics_num_samples = count()?,
            "metadata.recovery.strategy" => {
                self.config.metadata_recovery = match value.to_ascii_lowercase().as_str() {
                    "rebootstrap" => MetadataRecovery::Rebootstrap,
                    "none" => MetadataRecovery::None,
                    _ => return Err(bad()),
                }
            }
            "metadata.recovery.rebootstrap.trigger.ms" => self.config.rebootstrap_trigger = ms()?,
            "max.block.ms" => self.config.max_block = ms()?,
            "sasl.login.read.timeout.ms" => self.config.token_timeout = ms()?,
            "partitioner.adaptive.partitioning.enable" => {
                self.config.adaptive_partitioning = parse_bool(value).ok_or_else(bad)?
            }
            "partitioner.availability.timeout.ms" => {
                self.config.partitioner_availability_timeout = ms()?
            }
            "enable.metrics.push" => {
                self.config.enable_metrics_push = parse_bool(value).ok_or_else(bad)?
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
                    outcome: Err(PropertyError::Malformed { line }),
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
mod tests;
