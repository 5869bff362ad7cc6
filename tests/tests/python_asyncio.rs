//! The Python package `kafka-sansio` (`crates/producer-py`): its pytest suite, run inside
//! `cargo test` against this suite's clusters.
//!
//! The test makes a virtualenv (kept under the target directory, `py/venv`, and reused while
//! its requirements are unchanged), installs maturin, pytest, pytest-asyncio, uvloop and
//! confluent-kafka (the independent consumer and admin client) from the package index, and
//! builds the package into it with `maturin develop`. maturin gets a Cargo target directory of
//! its own (`py/cargo` under this one): `cargo test` holds the build lock of its own target
//! directory while tests run, and a nested build on it would wait forever.
//!
//! Then pytest runs in three phases, each against the clusters it needs, whose addresses go in
//! the environment (`KAFKA_SANSIO_REQUIRE=1`: a test whose cluster is missing fails, it is not
//! skipped):
//!
//! 1. librdkafka's mock cluster (one with a broker error injected for the first Produce
//!    request, one answering Produce requests after 2 s from the second on) and a single Apache Kafka node: `-m "kafka or mock"`;
//! 2. the secured single node (TLS, SASL listeners, the test CA, a SCRAM user): `-m secured`;
//! 3. three nodes, without the proxy (the kill test sends SIGKILL to a broker's JVM by the
//!    PIDs given in `KAFKA3_PIDS`): `-m cluster3`.
//!
//! Without `python3` the test says so in a loud line and returns. With `SKIP_KAFKA_TESTS` set
//! only the mock phase runs (also said loudly). Each phase's time is printed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use producer_tests::kafka::{cluster_slot, own_cluster, skip_requested, ClusterSpec, Listener};
use producer_tests::tls::TestPki;
use producer_tests::MockKafka;

/// What the virtualenv gets from the package index. Changing it rebuilds the virtualenv.
const REQUIREMENTS: &[&str] = &[
    "maturin>=1.5,<2",
    "pytest>=8",
    "pytest-asyncio>=0.24",
    "uvloop>=0.19",
    "confluent-kafka>=2.5",
];

const SCRAM_USER: (&str, &str) = ("py-scram", "py-scram-secret-2026");

/// The workspace's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace")
        .to_path_buf()
}

/// Where this test keeps its virtualenv and maturin's target directory: `py/` beside the
/// target directory's `tmp/`.
fn scratch() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("py")
}

/// The Python interpreter (`PYTHON`, else `python3`), if there is one.
fn python() -> Option<String> {
    let exe = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&exe)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(exe)
}

/// Runs `cmd`, panicking with its output if it fails.
fn run(what: &str, cmd: &mut Command) {
    let started = Instant::now();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{what}: {:.1} s", started.elapsed().as_secs_f64());
}

/// The virtualenv with the requirements installed (made again when they changed).
fn venv(python: &str) -> PathBuf {
    let dir = scratch().join("venv");
    let stamp = dir.join("requirements.txt");
    let wanted = REQUIREMENTS.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        let _ = std::fs::remove_dir_all(&dir);
        run(
            "python -m venv",
            Command::new(python).args(["-m", "venv"]).arg(&dir),
        );
        run(
            "pip install the test requirements",
            Command::new(dir.join("bin/python"))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(REQUIREMENTS),
        );
        std::fs::write(&stamp, wanted).expect("write the virtualenv's stamp");
    }
    dir
}

/// Builds the package into the virtualenv with `maturin develop`, on a target directory of its
/// own.
fn build_package(venv: &Path) {
    let bin = venv.join("bin");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(
        "maturin develop (the package, built into the virtualenv)",
        Command::new(bin.join("maturin"))
            .arg("develop")
            .arg("--manifest-path")
            .arg(workspace().join("crates/producer-py/Cargo.toml"))
            .env("VIRTUAL_ENV", venv)
            .env("PATH", path)
            .env("CARGO_TARGET_DIR", scratch().join("cargo")),
    );
}

/// Runs pytest on the package's suite with `marker` and `env`; panics unless it passes with no
/// test skipped.
fn pytest(venv: &Path, phase: &str, marker: &str, env: &[(&str, String)]) {
    let started = Instant::now();
    let out = Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rs",
            "-m",
            marker,
        ])
        .current_dir(workspace().join("crates/producer-py"))
        .env("KAFKA_SANSIO_REQUIRE", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!(
        "---- pytest, {phase} (-m {marker:?}), {:.1} s:\n{stdout}{}",
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "pytest failed in phase {phase}");
    assert!(
        !stdout.contains(" skipped"),
        "phase {phase}: a test was skipped"
    );
}

/// `host:port,...`
fn servers(list: &[(String, u16)]) -> String {
    list.iter()
        .map(|(h, p)| format!("{h}:{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn python_package_passes_its_pytest_suite_against_the_mock_and_apache_kafka() {
    let Some(python) = python() else {
        eprintln!(
            "\n**** SKIPPED: python3 not found: the Python package's tests \
             (crates/producer-py) did not run ****\n"
        );
        return;
    };
    let started = Instant::now();
    let venv = venv(&python);
    build_package(&venv);

    let mock = MockKafka::new(3, &[("py-mock", 6)]).expect("the mock cluster");
    // CORRUPT_MESSAGE (2, not retried) for the first Produce request (API key 0).
    mock.push_request_errors(0, &[2]);
    // Its first Produce request answered at once, the next 20 after 2 s each.
    let slow = MockKafka::new(1, &[("py-slow", 1)]).expect("the slow mock cluster");
    let mut delays = vec![(0, Duration::ZERO)];
    delays.extend([(0, Duration::from_secs(2)); 20]);
    slow.push_broker_request_errors(1, 0, &delays)
        .expect("mock delays");
    let mut env = vec![
        ("MOCK_BOOTSTRAP", mock.bootstrap_servers()),
        ("MOCK_SLOW_BOOTSTRAP", slow.bootstrap_servers()),
    ];
    let _slot = cluster_slot();
    if skip_requested() {
        eprintln!(
            "\n**** SKIPPED: the Python tests against Apache Kafka did not run \
             (SKIP_KAFKA_TESTS is set); the mock phase runs ****\n"
        );
        pytest(&venv, "mock", "mock", &env);
        return;
    }

    // 1. The mock and a single node.
    let single = own_cluster(ClusterSpec::single().name("py").without_proxy())
        .expect("the tier is not skipped");
    env.push(("KAFKA_BOOTSTRAP", single.bootstrap_servers()));
    pytest(&venv, "mock and single node", "kafka or mock", &env);
    drop(single);
    drop((mock, slow));

    // 2. The secured node.
    let pki = Arc::new(TestPki::new());
    let secured = own_cluster(
        ClusterSpec::single()
            .name("py-secured")
            .without_proxy()
            .secured(pki.clone()),
    )
    .expect("the tier is not skipped");
    secured
        .add_scram_user(SCRAM_USER.0, SCRAM_USER.1)
        .expect("the SCRAM user");
    let host = "127.0.0.1";
    let env = [
        ("SECURED_PLAIN_BOOTSTRAP", secured.bootstrap_servers()),
        (
            "SECURED_SSL_BOOTSTRAP",
            servers(&secured.listener_bootstrap(Listener::Ssl, host)),
        ),
        (
            "SECURED_SASL_SSL_BOOTSTRAP",
            servers(&secured.listener_bootstrap(Listener::SaslSsl, host)),
        ),
        (
            "SECURED_SASL_PLAINTEXT_BOOTSTRAP",
            servers(&secured.listener_bootstrap(Listener::SaslPlaintext, host)),
        ),
        ("SECURED_CA", pki.ca.display().to_string()),
        (
            "SECURED_SCRAM_USER",
            format!("{}:{}", SCRAM_USER.0, SCRAM_USER.1),
        ),
    ];
    pytest(&venv, "secured node", "secured", &env);
    drop(secured);

    // 3. Three nodes.
    let three = own_cluster(ClusterSpec::three().name("py3").without_proxy())
        .expect("the tier is not skipped");
    let pids = three
        .node_ids()
        .iter()
        .zip(three.pids())
        .map(|(id, pid)| format!("{id}:{pid}"))
        .collect::<Vec<_>>()
        .join(",");
    let env = [
        ("KAFKA3_BOOTSTRAP", three.bootstrap_servers()),
        ("KAFKA3_PIDS", pids),
    ];
    pytest(&venv, "three nodes", "cluster3", &env);
    drop(three);
    println!(
        "the Python tier took {:.1} s in all",
        started.elapsed().as_secs_f64()
    );
}
