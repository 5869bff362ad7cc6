//! Running the built `kafka-produce` binary in the tests.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// What a run of the command gave.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Panics with the run's output unless it exited with `code`.
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "exit code; the run gave {self:#?}");
        self
    }

    /// Panics with the run's output unless stderr contains `text`.
    pub fn expect_stderr(&self, text: &str) -> &Self {
        assert!(
            self.stderr.contains(text),
            "stderr should contain {text:?}; the run gave {self:#?}"
        );
        self
    }
}

/// Runs `kafka-produce` with `args`, feeding it `stdin` (nothing: an empty stdin).
pub fn kafka_produce(args: &[&str], stdin: &[u8]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kafka-produce"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the kafka-produce binary runs");
    let mut input = child.stdin.take().expect("piped stdin");
    let stdin = stdin.to_vec();
    // A broken pipe is fine: the command may stop reading early (an unreachable cluster).
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("the run ends");
    feeder.join().expect("the feeder thread");
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// A directory of the test's own, removed at drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "kafka-produce-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temp dir");
        TempDir(dir)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The lines of a `--failed` file: (reason, record as read).
pub fn failed_lines(path: &Path) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(path).expect("the --failed file exists");
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let tab = l.iter().position(|b| *b == b'\t').expect("reason<TAB>line");
            (
                String::from_utf8_lossy(&l[..tab]).into_owned(),
                l[tab + 1..].to_vec(),
            )
        })
        .collect()
}

/// `n` input lines `key-{i}:value-{i}-...` (values of varied lengths), newline-terminated.
pub fn keyed_lines(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        out.extend_from_slice(format!("key-{i}:value-{i}-{}\n", "x".repeat(i % 37)).as_bytes());
    }
    out
}

/// The (key, value) of each line of [`keyed_lines`].
pub fn split_keyed(input: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    input
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let i = l.iter().position(|b| *b == b':').expect("a key delimiter");
            (l[..i].to_vec(), l[i + 1..].to_vec())
        })
        .collect()
}

/// Checks that `back` holds exactly the (key, value) pairs of `input`'s keyed lines, in any
/// order, each record with `headers`.
pub fn assert_read_back_as_keyed_lines(
    back: &[producer_tests::Consumed],
    input: &[u8],
    headers: &[(&str, &[u8])],
) {
    let headers: Vec<(String, Option<Vec<u8>>)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_vec())))
        .collect();
    let mut got: Vec<(Vec<u8>, Vec<u8>)> = back
        .iter()
        .map(|c| {
            assert_eq!(c.headers, headers, "headers of {c:?}");
            (
                c.key.clone().expect("a key"),
                c.value.clone().expect("a value"),
            )
        })
        .collect();
    let mut want = split_keyed(input);
    got.sort();
    want.sort();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the records read back are the lines sent");
}

/// The records/sec figure of a perf-mode summary line.
pub fn perf_rate(stdout: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.contains("records/sec"))
        .unwrap_or_else(|| panic!("no summary line in {stdout:?}"));
    let (_, rest) = line
        .split_once("records sent, ")
        .expect("the summary's form");
    rest.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no rate in {line:?}"))
}
