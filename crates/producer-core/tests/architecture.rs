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
