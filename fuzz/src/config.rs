//! The configuration parsers: `.properties` text (`Config::from_properties_text`,
//! `ConfigBuilder::apply_properties_text`) and settings one by one (`ConfigBuilder::set`),
//! then a producer built from whatever configuration they accept.
//!
//! Input byte 0 `% 3` picks the mode. Text mode: the rest is the text (lossy UTF-8). Set mode:
//! pairs `[name selector] [value selector] [value bytes...]`: the name is one of every
//! spelling `SETTINGS` lists (and a few unsupported or misspelled ones), the value one of a
//! table of edge values (0, -1, `u64::MAX`, 20 digits, ...) or the input's bytes. Builder
//! mode: pairs `[setter] [value]` for the typed setters, with durations from zero to
//! `Duration::MAX` and sizes from zero to `usize::MAX`.
//!
//! Checked: no panic, no allocation over the cap (the counting allocator), the value of a
//! secret (`sasl.password`, `sasl.jaas.config`) never appears in an error's `Display` or
//! `Debug` nor in the `Debug` of the builder or the configuration; and a configuration that
//! `build` accepts makes a producer that goes through a whole run against the scripted broker
//! answering sanely ([`crate::hostile::run_config`]: records to every topic, a flush, time,
//! the close) with all of that target's checks: durations and sizes that do not work must be
//! refused by `build`.

use std::time::Duration;

use producer_core::properties::SETTINGS;
use producer_core::{Acks, Compression, Config, ConfigBuilder};

/// Names a user may write that `SETTINGS` does not list.
const OTHER_NAMES: [&str; 6] = [
    "retries",
    "partitioner.class",
    "sasl.pasword",
    "ssl.truststore.location",
    "",
    "linger",
];

/// Values at the edges of what the parsers read.
const VALUES: [&str; 24] = [
    "0",
    "1",
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "4294967295",
    "2147483648",
    "99999999999999999999999",
    "",
    " ",
    "true",
    "false",
    "all",
    "none",
    "zstd",
    "SASL_PLAINTEXT",
    "OAUTHBEARER",
    "SCRAM-SHA-512",
    "broker:9092",
    "[::1]:9092,b:1",
    "a:99999",
    "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p4ssw0rd-jaas\";",
    "\u{0}\u{1}=:#!",
];

/// The secrets the input gives: (setting name, value), for the leak check.
type Secrets = Vec<String>;

fn is_secret_name(name: &str) -> bool {
    matches!(name, "sasl.password" | "sasl.jaas.config")
}

/// Whether `text` shows a secret: one of at least 6 characters that neither another part of
/// the input nor the parsers' own texts (setting names, accepted forms, the edge values)
/// contain, so its appearance can only come from the secret.
fn leaks(text: &str, secrets: &Secrets, others: &str) -> Option<String> {
    let known: String = SETTINGS
        .iter()
        .flat_map(|s| s.names.iter().copied().chain([s.form]))
        .chain(OTHER_NAMES)
        .chain(VALUES)
        .collect::<Vec<_>>()
        .join("\n");
    secrets
        .iter()
        .filter(|s| s.len() >= 6 && !others.contains(s.as_str()) && !known.contains(s.as_str()))
        .find(|s| text.contains(s.as_str()))
        .cloned()
}

/// Runs one input; panics when a rule breaks.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let built = match mode % 3 {
        0 => from_text(&String::from_utf8_lossy(rest)),
        1 => from_settings(rest),
        _ => from_builder(rest),
    };
    if std::env::var_os("HOSTILE_TRACE").is_some() {
        eprintln!("built: {built:?}");
    }
    if let Some(config) = built {
        crate::hostile::run_config(config);
    }
}

fn from_text(text: &str) -> Option<Config> {
    // The secret values as Java's `.properties` reader would take them: the name, then `=`,
    // `:` or whitespace, then the value.
    let mut secrets = Secrets::new();
    let mut others = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        let end = t.find(['=', ':', ' ', '\t']).unwrap_or(t.len());
        let (name, value) = t.split_at(end);
        let value = value
            .trim_start_matches([' ', '\t'])
            .trim_start_matches(['=', ':'])
            .trim();
        if is_secret_name(name.trim()) {
            secrets.push(value.to_string());
            if let Some((_, p)) = value.split_once("password=\"") {
                secrets.push(p.split('"').next().unwrap_or_default().to_string());
            }
            others.push_str(name);
        } else {
            others.push_str(line);
        }
        others.push('\n');
    }
    let result = Config::from_properties_text(text);
    let (builder, lines) = Config::builder(Vec::<(String, u16)>::new()).apply_properties_text(text);
    for l in &lines {
        if let Err(e) = &l.outcome {
            check_error(&format!("{e} {e:?}"), &secrets, &others);
        }
    }
    check_error(&format!("{builder:?}"), &secrets, &others);
    match result {
        Ok(config) => {
            check_error(&format!("{config:?}"), &secrets, &others);
            Some(config)
        }
        Err(e) => {
            check_error(&format!("{e} {e:?}"), &secrets, &others);
            None
        }
    }
}

fn check_error(text: &str, secrets: &Secrets, others: &str) {
    if let Some(s) = leaks(text, secrets, others) {
        panic!("a secret ({s:?}) is shown: {text}");
    }
}

fn from_settings(data: &[u8]) -> Option<Config> {
    let names: Vec<&str> = SETTINGS
        .iter()
        .flat_map(|s| s.names.iter().copied())
        .chain(OTHER_NAMES)
        .collect();
    let mut secrets = Secrets::new();
    let mut others = String::new();
    let mut b: ConfigBuilder = Config::builder([("boot", 9092)]);
    let mut rest = data;
    let mut errors = Vec::new();
    while let [n, v, tail @ ..] = rest {
        let name = names[usize::from(*n) % names.len()];
        let value = if *v < 0xC0 {
            rest = tail;
            VALUES[usize::from(*v) % VALUES.len()].to_string()
        } else {
            let len = usize::from(*v - 0xC0).min(tail.len());
            rest = &tail[len..];
            String::from_utf8_lossy(&tail[..len]).into_owned()
        };
        if is_secret_name(name) {
            secrets.push(value.trim().to_string());
            if let Some((_, p)) = value.split_once("password=\"") {
                secrets.push(p.split('"').next().unwrap_or_default().to_string());
            }
        } else {
            others.push_str(&value);
            others.push('\n');
        }
        others.push_str(name);
        match b.clone().set(name, &value) {
            Ok(next) => b = next,
            Err(e) => errors.push(format!("{e} {e:?}")),
        }
    }
    for e in &errors {
        check_error(e, &secrets, &others);
    }
    check_error(&format!("{b:?}"), &secrets, &others);
    match b.build() {
        Ok(c) => {
            check_error(&format!("{c:?}"), &secrets, &others);
            Some(c)
        }
        Err(e) => {
            check_error(&format!("{e} {e:?}"), &secrets, &others);
            None
        }
    }
}

/// A configuration from the typed setters, with edge durations and sizes.
fn from_builder(data: &[u8]) -> Option<Config> {
    const DURATIONS: [Duration; 9] = [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_millis(1),
        Duration::from_millis(100),
        Duration::from_secs(30),
        Duration::MAX,
        Duration::from_secs(u64::MAX / 2),
        Duration::from_millis(u64::MAX),
        Duration::from_millis(i32::MAX as u64 + 1),
    ];
    const SIZES: [usize; 9] = [
        0,
        1,
        1024,
        16_384,
        1 << 20,
        usize::MAX,
        u32::MAX as usize + 1,
        i32::MAX as usize + 1,
        1 << 40,
    ];
    let mut b = Config::builder([("boot", 9092)]);
    for pair in data.chunks_exact(2) {
        let d = DURATIONS[usize::from(pair[1]) % DURATIONS.len()];
        let z = SIZES[usize::from(pair[1]) % SIZES.len()];
        b = match pair[0] % 22 {
            0 => b.linger(d),
            1 => b.retry_backoff(d),
            2 => b.retry_backoff_max(d),
            3 => b.reconnect_backoff(d),
            4 => b.reconnect_backoff_max(d),
            5 => b.request_timeout(d),
            6 => b.delivery_timeout(d),
            7 => b.metadata_max_age(d),
            8 => b.rebootstrap_trigger(d),
            9 => b.max_block(d),
            10 => b.partitioner_availability_timeout(d),
            11 => b.transactional_id("tx").transaction_timeout(d),
            12 => b.batch_size(z),
            13 => b.max_request_size(z),
            14 => b.buffer_memory(z),
            15 => b.buffer_max_records(z),
            16 => b.max_in_flight(z),
            17 => b.max_response_size(z),
            18 => b.acks([Acks::All, Acks::Leader, Acks::None][usize::from(pair[1]) % 3]),
            19 => b.enable_idempotence(pair[1] & 1 == 1),
            20 => b.compression(Compression::ALL[usize::from(pair[1]) % 5]),
            _ => b.adaptive_partitioning(pair[1] & 1 == 1),
        };
    }
    b.build().ok()
}
