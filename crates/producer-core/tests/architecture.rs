//! The invariants of ARCHITECTURE.md that a reader of the source can check, checked on the
//! source: the codec imports no producer state, and the core does no I/O and reads no clock.

use std::fs;
use std::path::{Path, PathBuf};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The source of a file without its `#[cfg(test)] mod tests` (tests may read the clock).
fn non_test_source(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_codec_imports_no_producer_state() {
    let allowed = [
        "crate::protocol",
        "crate::record",
        "crate::ErrorCode",
        "crate::error_code",
    ];
    let mut checked = 0;
    for dir in ["protocol", "record"] {
        for file in sources(&src().join(dir)) {
            let text = non_test_source(&file);
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if let Some(i) = line.find("crate::") {
                    let path = &line[i..];
                    assert!(
                        allowed.iter().any(|a| path.starts_with(a)),
                        "{}:{}: the codec uses `{path}`",
                        file.display(),
                        n + 1
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} codec files found");
}

#[test]
fn the_core_does_no_io_and_reads_no_clock() {
    let forbidden = [
        "std::net",
        "std::fs",
        "std::process",
        // (`std::io::Write` is allowed: the compression codecs write into a `Vec`.)
        "std::io::stdin",
        "std::io::stdout",
        "std::thread",
        "Instant::now",
        "SystemTime",
        "Mutex",
        "RwLock",
    ];
    let mut checked = 0;
    for file in sources(&src()) {
        let text = non_test_source(&file);
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for f in forbidden {
                assert!(
                    !line.contains(f),
                    "{}:{}: the core uses `{f}`",
                    file.display(),
                    n + 1
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} core files found");
}

/// Where an error code is decided: every comparison of an answer's error code with a named code
/// (`==`, `!=`, a `match` arm, `matches!`, a list of codes) outside the codec belongs to the one
/// retry table, `classify.rs`. Naming a code to *build* an error (`code: ErrorCode::X`) or to
/// *describe* one the table already decided is not a decision; the few places that describe
/// are listed here, each with what it describes.
#[test]
fn only_the_retry_table_maps_an_error_code_to_an_action() {
    // (file, code): a code named in a comparison that describes, not decides.
    let describes: &[(&str, &str, &str)] = &[
        (
            "producer/auth.rs",
            "UNSUPPORTED_SASL_MECHANISM",
            "which AuthError a failed SaslHandshake is",
        ),
        (
            "producer/auth.rs",
            "ILLEGAL_SASL_STATE",
            "the message of a failed SaslHandshake",
        ),
    ];
    let exempt_dirs = ["protocol", "record"];
    let exempt_files = ["classify.rs", "error_code.rs"];
    let mut decisions = Vec::new();
    for file in sources(&src()) {
        let rel = file
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .to_string();
        if exempt_files.contains(&rel.as_str()) || exempt_dirs.iter().any(|d| rel.starts_with(d)) {
            continue;
        }
        let text = non_test_source(&file);
        for (n, line) in text.lines().enumerate() {
            let code_part = line.split("//").next().unwrap_or("");
            let mut rest = code_part;
            while let Some(i) = rest.find("ErrorCode::") {
                let after = &rest[i + "ErrorCode::".len()..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_' || c.is_ascii_digit())
                    .collect();
                rest = &after[name.len()..];
                if name.is_empty() || name == "NONE" {
                    continue;
                }
                let before = code_part[..code_part.len() - rest.len() - name.len() - 11].trim_end();
                let after = rest.trim_start();
                // A comparison, a match arm or pattern, or a list of codes to look codes up in.
                let compared = before.ends_with("==")
                    || before.ends_with("!=")
                    || before.ends_with('|')
                    || after.starts_with("=>")
                    || after.starts_with('|')
                    || code_part.contains("matches!")
                    || code_part.contains(".contains(")
                    || code_part.contains("[ErrorCode;");
                let built =
                    before.ends_with(':') || before.ends_with('=') && !before.ends_with("==");
                if !compared || built {
                    continue;
                }
                if describes.iter().any(|(f, c, _)| *f == rel && *c == name) {
                    continue;
                }
                decisions.push(format!("{rel}:{}: ErrorCode::{name}", n + 1));
            }
        }
    }
    assert!(
        decisions.is_empty(),
        "error codes compared outside the retry table (classify.rs):\n{}",
        decisions.join("\n")
    );
}

/// The state machine chooses what to send; the codec writes how: outside `protocol/` and
/// `record/` (and the SASL mechanisms' own messages in `sasl/`), no module writes or reads a
/// byte layout (no `Put` writer, no big-endian conversions).
#[test]
fn the_state_machine_holds_no_byte_layout() {
    let forbidden = [
        "to_be_bytes",
        "from_be_bytes",
        "primitives::Put",
        ".put_i",
        ".put_u",
        ".put_string",
        ".put_nullable",
        ".put_array_len",
        ".put_empty_tags",
    ];
    let exempt = ["protocol", "record", "sasl"];
    let mut checked = 0;
    for file in sources(&src()) {
        let rel = file
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .to_string();
        if exempt.iter().any(|d| rel.starts_with(d)) {
            continue;
        }
        let text = non_test_source(&file);
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for f in forbidden {
                assert!(
                    !code.contains(f),
                    "{rel}:{}: byte layout outside the codec (`{f}`)",
                    n + 1
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} files checked");
}
