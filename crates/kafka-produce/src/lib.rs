//! `kafka-produce`, a command-line producer on `producer-tokio`, and the pieces the quickstart
//! shares with it: the progress display ([`progress`]) and the latency histogram
//! ([`latency`]). `kafka-produce --help` documents the command; [`run`] is its whole body.

#![forbid(unsafe_code)]

pub mod args;
mod diagnose;
pub mod latency;
mod lines;
mod perf;
mod produce;
pub mod progress;
mod tally;

use std::process::ExitCode;

pub use args::Args;

/// Why a run did not deliver everything, and its exit code.
#[derive(Debug)]
pub enum Failure {
    /// A bad option, an input that cannot be opened, a bad setting: nothing was produced
    /// (exit code 2).
    Usage(String),
    /// Some records failed, or the input could not be read to its end (exit code 1).
    Partial(String),
}

impl Failure {
    /// The exit code the command documents for it.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Partial(_) => 1,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Usage(m) | Failure::Partial(m) => f.write_str(m),
        }
    }
}

/// Runs the command with these arguments: 0 when every record was delivered, 1 when some
/// failed, 2 for a usage or configuration error (see `--help`).
pub fn run(args: Args) -> ExitCode {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let result = match &args.num_records {
        Some(_) => perf::run(&args),
        None => produce::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("kafka-produce: {f}");
            ExitCode::from(f.exit_code())
        }
    }
}

/// The tokio runtime both modes run on: the producer task and the connections on two
/// workers, the input read on the calling thread.
/// Closes the producer at the end of the run: within `timeout` (`--timeout`) when given, the
/// records not delivered by then reported failed (and so written to `--failed`).
async fn close(producer: &producer_tokio::ProducerHandle, timeout: Option<std::time::Duration>) {
    match timeout {
        Some(t) => {
            let outcome = producer.close_within(t).await;
            if !outcome.in_time() {
                eprintln!(
                    "--timeout passed: {} records never sent and {} sent and unanswered went to                      the failed records",
                    outcome.purged, outcome.timed_out
                );
            }
        }
        None => producer.close().await,
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Usage(format!("cannot start the runtime: {e}")))
}
