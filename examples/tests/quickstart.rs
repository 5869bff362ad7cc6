//! The quickstart as a newcomer meets it: `--help` answers with the options, and a cluster
//! that cannot be reached (a closed port) stops the run at the first refused connection, with
//! the address and the OS error, instead of running for minutes into the records' timeouts.
//!
//! The example is run with `cargo run` (examples have no `CARGO_BIN_EXE_*`); it is built in the
//! same target directory, so it costs one build of the example.

use std::process::{Command, Output};

fn quickstart(args: &[&str]) -> Output {
    Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--example", "quickstart", "--"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs the quickstart")
}

#[test]
fn help_prints_the_options_and_starts_nothing() {
    let out = quickstart(&["--help"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("Usage: quickstart"), "{stdout}");
    assert!(stdout.contains("--brokers"), "{stdout}");
    assert!(
        !stdout.contains("producing"),
        "nothing is produced: {stdout}"
    );
}

#[test]
fn a_closed_port_stops_the_run_naming_the_refused_connection() {
    let out = quickstart(&["--brokers", "127.0.0.1:1", "--records", "100000"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            "no bootstrap broker could be reached: cannot connect to 127.0.0.1:1 (bootstrap): Connection refused"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("stopped early"), "{stderr}");
    assert!(
        stdout.contains("delivered 0, failed 0"),
        "nothing is counted delivered: {stdout}"
    );
}
