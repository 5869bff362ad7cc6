//! The configuration parsers: `.properties` text (`Config::from_properties_text`,
//! `ConfigBuilder::apply_properties_text`) and settings one by one (`ConfigBuilder::set`),
//! then a producer built from whatever configuration they accept.
//!
//! Input byte 0: bit 0 the mode. Text mode: the rest is the text (lossy UTF-8). Set mode:
//! pairs `[name selector] [value selector] [value bytes...]`: the name is one of every
//! spelling `SETTINGS` lists (and a few unsupported or misspelled ones), the value one of a
//! table of edge values (0, -1, `u64::MAX`, 20 digits, ...) or the input's bytes.
//!
//! Checked: no panic, no allocation over the cap (the counting allocator), the value of a
//! secret (`sasl.password`, `sasl.jaas.config`) never appears in an error's `Display` or
//! `Debug` nor in the `Debug` of the builder or the configuration; and a configuration that
//! `build` accepts makes a producer that takes a record, connects, sends, flushes, fires its
//! deadlines up to a day ahead and closes without a panic (durations up to `Duration::MAX`,
//! sizes up to `usize::MAX` must be refused by `build` or work).

use std::time::{Duration, Instant};

use producer_core::properties::SETTINGS;
use producer_core::{Config, ConfigBuilder, Output, Producer, Record};

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

/// Whether `text` shows a secret: one of at least 4 characters that no other part of the
/// input contains (so its appearance can only come from the secret).
fn leaks(text: &str, secrets: &Secrets, others: &str) -> Option<String> {
    secrets
        .iter()
        .filter(|s| s.len() >= 4 && !others.contains(s.as_str()))
        .find(|s| text.contains(s.as_str()))
        .cloned()
}

/// Runs one input; panics when a rule breaks.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let built = if mode & 1 == 0 {
        from_text(&String::from_utf8_lossy(rest))
    } else {
        from_settings(rest)
    };
    if let Some(config) = built {
        exercise(config, mode);
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

/// A producer from `config` takes a record, connects, sends, fires its deadlines for a day of
/// virtual time, and closes: no panic, whatever the durations and sizes.
fn exercise(config: Config, seed: u8) {
    let t0 = Instant::now();
    let transactional = config.transactional_id.is_some();
    let mut p = Producer::<u32>::new(config, t0);
    let mut now = t0;
    if transactional {
        let _ = p.init_transactions(now);
    }
    let value = vec![b'v'; usize::from(seed) * 8];
    let _ = p.send(now, Record::new("t", value).with_key("k"), 1);
    let mut connected = Vec::new();
    for step in 0..40 {
        let mut outputs = 0;
        while let Some(o) = p.poll_output() {
            outputs += 1;
            assert!(outputs < 10_000, "poll_output does not drain");
            match o {
                Output::Connect { conn, .. } => connected.push(conn),
                Output::TokenRequest => p.handle_token(now, Err("none".into())),
                _ => {}
            }
        }
        for c in connected.drain(..) {
            p.handle_connected(now, c);
        }
        match step {
            10 => p.flush(now),
            20 => p.close(now),
            _ => {}
        }
        let _ = p.metrics();
        let Some(t) = p.poll_timeout() else { continue };
        if t.saturating_duration_since(t0) > Duration::from_secs(86_400) {
            now = t0 + Duration::from_secs(86_400);
        } else {
            now = now.max(t);
        }
        p.handle_timeout(now);
    }
}
