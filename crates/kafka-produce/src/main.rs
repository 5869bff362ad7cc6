//! `kafka-produce`: see `kafka-produce --help`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    kafka_produce::run(kafka_produce::Args::parse())
}
