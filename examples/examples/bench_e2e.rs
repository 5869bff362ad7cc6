//! End-to-end producer benchmark: our tokio driver, our threaded mio driver, librdkafka
//! (through the `rdkafka` crate's `BaseProducer`) and peers of other projects (franz-go, the
//! Java producer, krafka, Confluent's Rust client) against librdkafka's mock cluster (or, with
//! `--broker kafka`, a single-node Apache Kafka), each in its own process.
//!
//! ```text
//! cargo run --release --example bench_e2e                 # full: 1M records, 3 runs, medians
//! cargo run --release --example bench_e2e -- --quick      # smoke test: 100k records, 1 run
//! cargo run --release --example bench_e2e -- --runs 5 --records 2000000 \
//!     --workloads null100,key8 --producers tokio,rdkafka
//! cargo run --release --example bench_e2e -- --records 200000 --runs 1 --workloads null100 \
//!     --producers rdkafka,franz-go,java,krafka,confluent --broker kafka
//! cargo run --release --example bench_e2e -- --workloads latency --rate 200000 \
//!     --producers rdkafka,tokio-idem,mio-idem
//! cargo run --release --example bench_e2e -- --broker both --readme README.md   # the README
//! ```
//!
//! # Flags
//! * `--quick`: 100,000 records, 1 run (unless `--records`, `--runs` say otherwise).
//! * `--runs N` (default 3), `--records N` (default 1,000,000): per producer and workload.
//! * `--batch-size BYTES`: every producer's batch size (default 16 KiB for all, librdkafka
//!   included: its own default would be 1,000,000 bytes).
//! * `--broker mock|kafka|both`: librdkafka's mock cluster (the default), a single-node Apache
//!   Kafka, or the mock and then Kafka in one invocation (each broker's tables with ratios to
//!   that broker's librdkafka).
//! * `--workloads a,b,...`, `--producers a,b,...`: narrow (or, for the peers' other rows,
//!   widen) the lists; `--help` lists the names.
//! * `--buffer-memory MIB`: our producers' `buffer_memory` and librdkafka's
//!   `queue.buffering.max.kbytes` (default 64 MiB); the peers keep their own.
//! * `--value-bytes N`: every workload's value size instead of its own (100 or 1000 bytes);
//!   with `--buffer-memory`, what the peak RSS of a producer holding its whole buffer is for
//!   small and large records. Our workers also report the most bytes their producer held
//!   against `buffer_memory` (sampled every 2 ms), after the RSS in each run's line.
//! * `--mock-rtt-ms N`: every mock broker answers N ms late (`MockKafka::set_rtt`), so a
//!   producer faster than that fills its buffer: what `--buffer-memory` is measured with.
//! * `--baseline-exe PATH`: another build of this example (an older commit's, copied out of its
//!   target directory); a producer named `NAME@base` (`tokio@base`, `mio-idem@base`, ...) runs
//!   NAME's worker from that build, beside this build's `NAME` in the same invocation: a
//!   before/after comparison whose runs interleave on the same machine and mock.
//! * `NAME+qdN` (`tokio+qd0`, `mio-idem+qd100`, ...): our producer NAME with
//!   `queue.delay.target.ms` set to N (0: the queue-delay limit off), beside NAME at its
//!   default in the same invocation.
//! * `--rate N`: records per second of the `latency` workload. Without it the rate is half of
//!   librdkafka's (`rdkafka`) median records/s on `null100` measured earlier in the same
//!   invocation on the same broker, so it is required when `null100` (or `rdkafka`) does not run
//!   before `latency`.
//! * `--readme PATH`: after each broker's workloads, rewrite that broker's tables in the file:
//!   everything between `<!-- bench_e2e mock begin -->` and `<!-- bench_e2e mock end -->`
//!   (`kafka` for Kafka) is replaced by a line naming the command, commit, date, records and
//!   runs, the throughput table and the latency table; nothing outside the markers changes. The
//!   markers are checked before anything runs. `cargo run --release --example bench_e2e --
//!   --broker both --readme README.md` regenerates both of the README's tables.
//!
//! Bad flags are an error with the usage, before anything runs.
//!
//! # What runs where
//! * **The mock cluster** runs in its own process (this binary in `mock` mode, which calls
//!   [`producer_tests::MockKafka`]): three brokers, one topic `bench` of 12 partitions
//!   (replication 3). A **fresh mock process is started for every run** and killed after it. The
//!   mock keeps at most ~5 MiB per partition (older batches are dropped), so a run of 110 MB
//!   (1M x 100 B) or 1 GB (1M x 1000 B) overflows that retention within the run: the mock
//!   drops old batches as it goes, which costs the mock, not the producer, and costs the same
//!   for every producer. Restarting per run keeps the mock's memory and state identical at the
//!   start of every run. Nothing is read back here (the quickstart and the integration tests
//!   check contents).
//! * With **`--broker kafka`** the cluster is instead a single-node Apache Kafka 4.1.1 from the
//!   test tier ([`producer_tests::kafka::cluster::KafkaCluster`], this binary in `kafka` mode,
//!   topic `bench` of 12 partitions, replication 1), likewise **a fresh one for every run**
//!   (its start, some seconds, is outside every timing). It keeps what it is sent on disk.
//! * **The producer under test** runs in another process (this binary in `worker` mode), so
//!   `getrusage(RUSAGE_SELF)` at its end measures that producer only: user+sys CPU and peak
//!   RSS (`ru_maxrss`). The worker builds its payloads before it starts the clock.
//! * The coordinator (no mode argument) runs, for every workload, `--runs` rounds of every
//!   producer (interleaved, so drift hits all alike), takes medians and prints one table per
//!   workload with the ratio of each figure to librdkafka without idempotence.
//! * **The peers** are programs of their own (below), started by the coordinator with the
//!   cluster's address, the workload's payload arenas (written by the coordinator to
//!   `target/bench_e2e/payloads/`, sliced by the peer the same way) and the settings. Each prints
//!   its counts and elapsed time; the coordinator reaps it with `wait4`, whose rusage is that
//!   process's alone: user+sys CPU and peak RSS (the Java peer's CPU is its own report, below).
//!   A peer gets at most 60 s + 1 s per 20,000 records; a peer that cannot be built, cannot
//!   connect, fails or times out gets a row saying why instead of figures. Every process's
//!   stderr goes to `target/bench_e2e/logs/PRODUCER-WORKLOAD-runN.stderr`.
//!
//! # Workloads (all: acks=all, linger 5 ms)
//! * `null100`: 100-byte values, null keys.
//! * `key8`: 100-byte values, 8-byte keys (65,536 distinct keys).
//! * `val1000`: 1000-byte values, null keys.
//! * `lz4`: 100-byte values, null keys, lz4 compression.
//! * `zstd`: 100-byte values, null keys, zstd compression (ours at zstd level 3, the core's;
//!   librdkafka, Java, franz-go, krafka and Confluent's client at their default level).
//! * `latency` (runs last): 100-byte values, null keys, no compression, sent **open loop** at a
//!   fixed rate (`--rate`, or half of librdkafka's `null100` rate, above) with the same
//!   settings; `--records` records. Each producer first delivers one warm-up record (its
//!   connections and metadata ready; the Java peer: its 100,000-record warm-up), then record
//!   `i` is due at `start + i / rate`: the sender sends every record that is due (sleeping until
//!   the next one is, catching up in a burst when it fell behind, never waiting for reports)
//!   and the latency of record `i` is from when it was due to when its report arrives, so a
//!   producer that stalls its sender is charged for every record that waited (no coordinated
//!   omission). Latencies (µs) go into a preallocated array indexed by record, are sorted and
//!   give p50 / p99 / p99.9 (nearest rank, delivered records only). How each producer takes
//!   the time of a report: `tokio`, `tokio-idem`: one `send(record).await` future per record,
//!   each handed at once to a collector task that polls them all unordered (`FuturesUnordered`)
//!   and takes the time as each resolves; `tokio-cb*`: `send_detached(record, i)` and the
//!   `on_delivery` callback; `mio`, `mio-idem`: `ThreadedProducer::send_with(record, i)` and
//!   its callback; `rdkafka*`: `BaseProducer::send` with `i` as the delivery opaque, the sender
//!   serving the callbacks with `poll` after every send and while it waits for the next due
//!   time; franz-go: a promise (callback) per record; Java: a `Callback` per record; krafka:
//!   its delivery handles polled unordered as `tokio`'s; Confluent's client: a callback per
//!   record. The `-batch` rows have no open-loop sender (their API takes bursts): their row
//!   says so. Achieved rate: delivered records over the time from the schedule's start to the
//!   last report.
//!
//! Values are slices of a 1 MiB arena of pseudo-random words (compressible about like text),
//! keys slices of a 512 KiB arena. Our producers get them as `Bytes` slices (no copy:
//! `Record` carries `Bytes`); librdkafka gets borrowed slices and copies them into its queue
//! (`RD_KAFKA_MSG_F_COPY`, what `BaseProducer::send` does).
//!
//! # Latency from the send call, in the throughput workloads
//! Our workers also time each record of the throughput workloads from just before its send
//! call (so a send that waits for room counts its wait, as `kafka-producer-perf-test` counts
//! from before `send`) to its report, and give the average and p99 (`acc_avg_us`,
//! `acc_p99_us`, on each run's line): a producer that lets its buffer fill shows it here.
//! `tokio` awaits its delivery futures in send order, so its figure is an upper bound.
//!
//! # Producers (settings equal where both have them)
//! * `tokio`, `tokio-idem`: `producer_tokio::ProducerHandle` on a multi-thread runtime (default
//!   worker count). `send(record).await` per record; the delivery futures go in chunks of
//!   1024 to a collector task that awaits them (counting successes and failures).
//! * `tokio-cb`, `tokio-cb-idem`: the same producer, but records go through
//!   `ProducerHandle::send_detached(record, tag).await` and their reports to an
//!   `on_delivery` callback that counts (no future per record); `flush` at the end.
//! * `tokio-batch`, `tokio-batch-idem`: the same as `tokio-cb`, but records go in with
//!   `ProducerHandle::send_batch_detached(&mut burst).await` in bursts of 1024 (one queue lock
//!   and one wall-clock reading per chunk that fits in the command queue, waiting for room as
//!   `send_detached` does); the same counting callback and `flush` at the end.
//! * `mio`, `mio-idem`: `producer_mio::ThreadedProducer` with a 16,384-command queue; the
//!   sending thread sleeps 200 µs whenever the queue is full; the delivery callback counts.
//! * `mio-batch`, `mio-batch-idem`: the same, but records go in with
//!   `ThreadedProducer::send_batch` in bursts of 1024 (one queue lock and one wall-clock
//!   reading per burst, as librdkafka's `rd_kafka_produce_batch` offers).
//! * `rdkafka`, `rdkafka-idem`: `BaseProducer` with a context whose `delivery` counts;
//!   `poll(0)` every 1024 sends, `poll(1 ms)` when the queue is full; at the end
//!   `rd_kafka_flush` without waiting and `poll(1 ms)` in turn until every report is in (not the
//!   crate's `flush`, which polls in 100 ms slices that each run to their end, so a run would
//!   end on a 100 ms boundary).
//!
//! # Peers (own processes; 16 KiB batches unless `--batch-size`)
//! * `franz-go`, `franz-go-idem`: `examples/peers/franz-go`, a Go program on
//!   `github.com/twmb/franz-go/pkg/kgo` v1.22.3, `Client.Produce(ctx, record, callback)` per
//!   record (the callback counts), `Flush` at the end; `MaxBufferedRecords` 1,000,000,
//!   `MaxBufferedBytes` 64 MiB, `ProducerBatchMaxBytes` 16 KiB, `ProducerLinger` 5 ms,
//!   all-ISR acks; the plain row `DisableIdempotentWrite` and 5 produce requests in flight per
//!   broker (franz-go refuses that option with idempotence, where it uses its own default).
//!   Timed from creating the client to the end of `Flush`. Against the mock its protocol is
//!   capped at Kafka 2.3 (`kgo.MaxVersions`): franz-go cannot read the mock's answer to
//!   ApiVersions v3 or v5 ("response did not contain enough data to be valid") but reads v2.
//!   Built by the bench with `go build` into `target/peers/franz-go-HASH` (HASH of main.go,
//!   go.mod and go.sum: rebuilt only when they change). In the default list.
//! * `java`, `java-idem`: `examples/peers/java/JavaPeer.java`, Apache Kafka's `KafkaProducer`
//!   from kafka-clients 4.1.1 (the test tier's jars in `target/kafka/4.1.1/lib`), byte-array
//!   serializers, one `send(record, callback)` per record (each value copied into its own
//!   `byte[]`, as a Java application holds it), on the JVM's default settings (heap, GC).
//!   **A warm-up of 100,000 records** is sent and flushed first, not counted; then the clock
//!   starts and runs to the last callback of the timed records. **Its CPU is the process's CPU
//!   time during the timed phase only** (all threads, `OperatingSystemMXBean.getProcessCpuTime`
//!   read before and after), so neither the JVM's start nor the JIT's warm-up counts; its RSS is
//!   the whole process's peak (wait4). `buffer.memory` 64 MiB, `max.block.ms` 20 s. With
//!   `--broker kafka` the warm-up also warms the fresh broker (its JIT, its log segments),
//!   which the other rows start without: short runs favour this row there. Compiled
//!   by the bench with `javac` into `target/peers/java-HASH`. Not in the default list: against
//!   the mock it cannot connect (the 4.1 client gets no metadata from it: "Topic bench not
//!   present in metadata after 20000 ms"); it runs with `--broker kafka`.
//! * `krafka`, `krafka-idem`: the `krafka` crate (0.28, feature `zstd` for zstd encoding),
//!   `Producer::enqueue(record).await` per record, the delivery handles in chunks of 1024 to a
//!   collector task that awaits them (as the `tokio` row does), `flush` at the end;
//!   `buffer_memory` 64 MiB.
//! * `confluent`, `confluent-idem`: Confluent's Rust client (crate `confluent-kafka` 1.0, no
//!   default features but lz4 and zstd), `KafkaProducer::send(record, Some(callback)).await`
//!   per record on its byte-slice path (values copied into the batch), the callback counts,
//!   `flush` at the end; `buffer.memory` 64 MiB, `max.block.ms` 20 s.
//! * krafka and Confluent's client are `examples/peers/rust-peers`, a cargo project **outside
//!   the workspace** (its own `[workspace]` table: no workspace build or CI builds them), built
//!   by the bench with `cargo build --release` into `target/rust-peers` only when one of their
//!   rows is asked for. Neither is in the default list: against the mock krafka cannot connect
//!   (it rejects the mock's ApiVersions answer: "array length 16781824 exceeds safety limit")
//!   and Confluent's client gets no metadata ("Topic bench not present in metadata after
//!   20000 ms"); both run with `--broker kafka`.
//!
//! Common settings: acks=all, linger 5 ms, max in flight 5 per connection, a buffer of 64 MiB
//! and 1,000,000 records (`buffer_memory`/`buffer_max_records`;
//! `queue.buffering.max.kbytes`/`queue.buffering.max.messages`), no retries needed. Batch size
//! 16 KiB for every producer (Java's default and ours; librdkafka's `batch.size` is set to it,
//! its own default being 1,000,000 bytes) unless `--batch-size N` sets another. `-idem` turns
//! idempotence on (`enable.idempotence`), the plain ones turn it off.
//!
//! # Figures
//! records/s and MB/s (key+value bytes) over the time from creating the producer to the last
//! delivery report (the Java peer: its timed phase); CPU-seconds per million records
//! (user+sys of the worker or peer process, whole life; the Java peer: its timed phase); peak
//! RSS; failed deliveries; lost (neither delivered nor failed); and the broker's CPU-seconds
//! per million records (user+sys of the cluster's processes, the mock or Kafka's JVM, from
//! `/proc` while the producer ran: with the producer's own CPU it shows when the 2 cores, and
//! not the producer, bound the rate). Each is the median over the runs that gave figures. The
//! `latency` table instead gives the target rate, the achieved rate, p50 / p99 / p99.9 delivery
//! latency in ms (each the median over the runs), failures, and the ratio of each p99 to
//! librdkafka's.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

const TOPIC: &str = "bench";
const PARTITIONS: i32 = 12;
const BROKERS: i32 = 3;
const VALUE_ARENA: usize = 1 << 20;
const KEYS: usize = 65_536;
/// Command queue capacity of the threaded mio producer.
const MIO_QUEUE: usize = 16_384;
const WORKER_TIMEOUT: Duration = Duration::from_secs(600);

/// The workloads, in the order they run: `latency` last, as its rate comes from `null100`.
const ALL_WORKLOADS: &[&str] = &["null100", "key8", "val1000", "lz4", "zstd", "latency"];
const ALL_PRODUCERS: &[&str] = &[
    "rdkafka",
    "rdkafka-idem",
    "tokio",
    "tokio-idem",
    "tokio-cb",
    "tokio-cb-idem",
    "tokio-batch",
    "tokio-batch-idem",
    "mio",
    "mio-idem",
    "mio-batch",
    "mio-batch-idem",
    "franz-go",
    "franz-go-idem",
];
/// Producers that `--producers` takes but that are not in the default list: the peers' other
/// rows (see the module docs).
const OTHER_PRODUCERS: &[&str] = &[
    "java",
    "java-idem",
    "krafka",
    "krafka-idem",
    "confluent",
    "confluent-idem",
];
/// The baseline of the ratio columns.
const BASELINE: &str = "rdkafka";

type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("mock") => mock_main(&args[1..]),
        Some("kafka") => kafka_main(),
        Some("worker") => worker_main(&args[1..]),
        _ => coordinator_main(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_e2e: {e}");
            ExitCode::FAILURE
        }
    }
}

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

// ---------------------------------------------------------------------------------------------
// Mock mode
// ---------------------------------------------------------------------------------------------

/// Starts the mock cluster (with `--rtt-ms N`, every broker answering N ms late), prints
/// `BOOTSTRAP host:port,...` and runs until stdin closes.
fn mock_main(args: &[String]) -> Result<(), Error> {
    let mock = producer_tests::MockKafka::new(BROKERS, &[(TOPIC, PARTITIONS)])?;
    if let Some(ms) = arg(args, "--rtt-ms") {
        mock.set_rtt(-1, Duration::from_millis(ms.parse()?))?;
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "BOOTSTRAP {}", mock.bootstrap_servers())?;
        out.flush()?;
    }
    let mut buf = [0u8; 256];
    let mut stdin = std::io::stdin().lock();
    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    drop(mock);
    Ok(())
}

struct Mock {
    child: Child,
    bootstrap: String,
}

impl Mock {
    fn start(broker: Broker, rtt_ms: Option<u64>) -> Result<Mock, Error> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg(match broker {
                Broker::Mock => "mock",
                Broker::Kafka => "kafka",
            })
            .args(
                rtt_ms
                    .map(|ms| ["--rtt-ms".to_string(), ms.to_string()])
                    .into_iter()
                    .flatten(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("mock has no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let bootstrap = line
            .trim()
            .strip_prefix("BOOTSTRAP ")
            .ok_or_else(|| format!("mock cluster said {line:?}"))?
            .to_string();
        Ok(Mock { child, bootstrap })
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        // Closing stdin lets the cluster process shut down on its own (Kafka's cluster then
        // stops its broker and removes its directory); killed if it takes more than 20 s.
        drop(self.child.stdin.take());
        let started = Instant::now();
        while matches!(self.child.try_wait(), Ok(None))
            && started.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads and payloads
// ---------------------------------------------------------------------------------------------

/// The compression codec of a workload, for every producer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Codec {
    None,
    Lz4,
    Zstd,
}

impl Codec {
    /// The name librdkafka, Java, the peers and the tables use.
    fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }

    fn ours(self) -> producer_core::Compression {
        match self {
            Codec::None => producer_core::Compression::None,
            Codec::Lz4 => producer_core::Compression::Lz4,
            Codec::Zstd => producer_core::Compression::Zstd,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Workload {
    value_bytes: usize,
    keyed: bool,
    codec: Codec,
    /// The `latency` workload: an open-loop sender at a fixed rate (`--rate`), delivery
    /// latencies reported instead of the time to send everything.
    open_loop: bool,
}

fn workload(name: &str) -> Result<Workload, Error> {
    let (value_bytes, keyed, codec, open_loop) = match name {
        "null100" => (100, false, Codec::None, false),
        "key8" => (100, true, Codec::None, false),
        "val1000" => (1000, false, Codec::None, false),
        "lz4" => (100, false, Codec::Lz4, false),
        "zstd" => (100, false, Codec::Zstd, false),
        "latency" => (100, false, Codec::None, true),
        other => {
            return Err(format!(
                "unknown workload {other:?} (known: {})",
                ALL_WORKLOADS.join(",")
            )
            .into())
        }
    };
    Ok(Workload {
        value_bytes,
        keyed,
        codec,
        open_loop,
    })
}

/// `w` with values of `value_bytes` bytes instead of its own, if given (`--value-bytes`).
fn sized(w: Workload, value_bytes: Option<usize>) -> Workload {
    Workload {
        value_bytes: value_bytes.unwrap_or(w.value_bytes),
        ..w
    }
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The payload arenas every producer takes its keys and values from.
struct Payloads {
    values: Bytes,
    keys: Bytes,
    value_bytes: usize,
    keyed: bool,
}

impl Payloads {
    fn new(w: Workload) -> Payloads {
        const WORDS: &[&str] = &[
            "kafka",
            "producer",
            "record",
            "batch",
            "partition",
            "offset",
            "leader",
            "broker",
            "topic",
            "sequence",
            "epoch",
            "linger",
            "acks",
            "retry",
            "buffer",
            "request",
            "response",
            "metadata",
            "latency",
            "throughput",
            "event",
            "order",
            "user",
            "id",
            "status",
            "ok",
            "error",
            "timeout",
            "payload",
            "value",
            "key",
            "header",
        ];
        let mut rng = 42u64;
        let mut values = Vec::with_capacity(VALUE_ARENA + w.value_bytes + 16);
        while values.len() < VALUE_ARENA + w.value_bytes {
            let r = splitmix(&mut rng);
            values.extend_from_slice(WORDS[(r % WORDS.len() as u64) as usize].as_bytes());
            values.push(if r & 0x100 == 0 { b' ' } else { b',' });
            if r & 0xf000 == 0 {
                values.extend_from_slice(format!("{}", r >> 40).as_bytes());
            }
        }
        let mut keys = Vec::with_capacity(KEYS * 8);
        for _ in 0..KEYS {
            keys.extend_from_slice(&splitmix(&mut rng).to_be_bytes());
        }
        Payloads {
            values: Bytes::from(values),
            keys: Bytes::from(keys),
            value_bytes: w.value_bytes,
            keyed: w.keyed,
        }
    }

    fn value_range(&self, i: u64) -> std::ops::Range<usize> {
        // 7919 is prime: consecutive records start at scattered offsets.
        let start = (i as usize).wrapping_mul(7919) % VALUE_ARENA;
        start..start + self.value_bytes
    }

    fn key_range(&self, i: u64) -> Option<std::ops::Range<usize>> {
        let k = (i as usize % KEYS) * 8;
        self.keyed.then_some(k..k + 8)
    }

    /// A record for our producers: `Bytes` slices of the arenas, no copy.
    fn record(&self, topic: &Arc<str>, i: u64) -> producer_core::Record {
        let r = producer_core::Record::new(topic.clone(), self.values.slice(self.value_range(i)));
        match self.key_range(i) {
            Some(k) => r.with_key(self.keys.slice(k)),
            None => r,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Worker mode
// ---------------------------------------------------------------------------------------------

struct Outcome {
    ok: u64,
    failed: u64,
    secs: f64,
    /// The `latency` workload's p50, p99 and p99.9 delivery latency in µs.
    latency: Option<[u64; 3]>,
    /// The most bytes the producer held against `buffer_memory` (ours, sampled).
    peak_buffered: Option<usize>,
    /// Throughput workloads (ours): average and p99 µs from each send call to its report.
    accepted: Option<[u64; 2]>,
}

/// Each record's time from just before its send call to its report (the throughput
/// workloads; see the module docs).
struct SendTimes {
    start: Instant,
    /// Per record: ns since `start` when its send was called.
    sent: Vec<AtomicU64>,
    /// Per record: 1 + µs from its send call to its report, 0 before.
    micros: Vec<std::sync::atomic::AtomicU32>,
}

impl SendTimes {
    fn new(records: u64) -> Arc<SendTimes> {
        Arc::new(SendTimes {
            start: Instant::now(),
            sent: (0..records).map(|_| AtomicU64::new(0)).collect(),
            micros: (0..records).map(|_| Default::default()).collect(),
        })
    }

    /// Records `start..end` are about to be sent.
    fn sending(&self, start: u64, end: u64) {
        let ns = self.start.elapsed().as_nanos() as u64;
        for i in start..end {
            if let Some(slot) = self.sent.get(i as usize) {
                slot.store(ns, Ordering::Relaxed);
            }
        }
    }

    fn reported(&self, i: u64) {
        let now = self.start.elapsed().as_nanos() as u64;
        if let (Some(sent), Some(slot)) = (self.sent.get(i as usize), self.micros.get(i as usize)) {
            let us = now.saturating_sub(sent.load(Ordering::Relaxed)) / 1000;
            slot.store(
                us.min(u64::from(u32::MAX - 1)) as u32 + 1,
                Ordering::Relaxed,
            );
        }
    }

    /// Average and p99 (nearest rank) in µs over the reported records.
    fn summary(&self) -> Option<[u64; 2]> {
        let mut v: Vec<u32> = self
            .micros
            .iter()
            .map(|m| m.load(Ordering::Relaxed))
            .filter(|&m| m > 0)
            .map(|m| m - 1)
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let avg = v.iter().map(|&x| u64::from(x)).sum::<u64>() / v.len() as u64;
        let p99 = v[((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some([avg, u64::from(p99)])
    }
}

struct WorkerArgs {
    producer: String,
    workload: Workload,
    records: u64,
    bootstrap: String,
    batch_size: Option<usize>,
    /// Records per second of the `latency` workload.
    rate: Option<f64>,
    /// `buffer_memory` in bytes (`--buffer-memory` MiB; default 64 MiB).
    buffer_memory: usize,
    /// `buffer_max_records`: 1,000,000, or with `--buffer-memory` 100,000,000, so that the
    /// bytes decide how much is buffered whatever the record size.
    buffer_max_records: usize,
    /// `queue.delay.target.ms` (`NAME+qdN`); the default when absent.
    queue_delay_ms: Option<u64>,
}

fn worker_main(args: &[String]) -> Result<(), Error> {
    let w = WorkerArgs {
        producer: arg(args, "--producer").ok_or("--producer")?.to_string(),
        workload: sized(
            workload(arg(args, "--workload").ok_or("--workload")?)?,
            arg(args, "--value-bytes").map(str::parse).transpose()?,
        ),
        records: arg(args, "--records").ok_or("--records")?.parse()?,
        bootstrap: arg(args, "--bootstrap").ok_or("--bootstrap")?.to_string(),
        batch_size: arg(args, "--batch-size").map(str::parse).transpose()?,
        rate: arg(args, "--rate").map(str::parse).transpose()?,
        buffer_memory: arg(args, "--buffer-memory")
            .map(str::parse::<usize>)
            .transpose()?
            .map_or(DEFAULT_BUFFER_MEMORY, |mib| mib << 20),
        buffer_max_records: if arg(args, "--buffer-memory").is_some() {
            100_000_000
        } else {
            1_000_000
        },
        queue_delay_ms: arg(args, "--queue-delay-ms").map(str::parse).transpose()?,
    };
    let payloads = Payloads::new(w.workload);
    let outcome = if w.workload.open_loop {
        let rate = w.rate.ok_or("the latency workload needs --rate")?;
        let p = &payloads;
        match w.producer.as_str() {
            "tokio" => run_tokio_open_loop(&w, p, false, rate)?,
            "tokio-idem" => run_tokio_open_loop(&w, p, true, rate)?,
            "tokio-cb" => run_tokio_cb_open_loop(&w, p, false, rate)?,
            "tokio-cb-idem" => run_tokio_cb_open_loop(&w, p, true, rate)?,
            "mio" => run_mio_open_loop(&w, p, false, rate)?,
            "mio-idem" => run_mio_open_loop(&w, p, true, rate)?,
            "rdkafka" => run_rdkafka_open_loop(&w, p, false, rate)?,
            "rdkafka-idem" => run_rdkafka_open_loop(&w, p, true, rate)?,
            other => return Err(format!("{other:?} has no open-loop sender").into()),
        }
    } else {
        match w.producer.as_str() {
            "tokio" => run_tokio(&w, &payloads, false)?,
            "tokio-idem" => run_tokio(&w, &payloads, true)?,
            "tokio-cb" => run_tokio_detached(&w, &payloads, false, false)?,
            "tokio-cb-idem" => run_tokio_detached(&w, &payloads, true, false)?,
            "tokio-batch" => run_tokio_detached(&w, &payloads, false, true)?,
            "tokio-batch-idem" => run_tokio_detached(&w, &payloads, true, true)?,
            "mio" => run_mio(&w, &payloads, false, false)?,
            "mio-idem" => run_mio(&w, &payloads, true, false)?,
            "mio-batch" => run_mio(&w, &payloads, false, true)?,
            "mio-batch-idem" => run_mio(&w, &payloads, true, true)?,
            "rdkafka" => run_rdkafka(&w, &payloads, false)?,
            "rdkafka-idem" => run_rdkafka(&w, &payloads, true)?,
            other => return Err(format!("unknown producer {other:?}").into()),
        }
    };
    // SAFETY: getrusage writes into the struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let latency = outcome.latency.map_or(String::new(), |[p50, p99, p999]| {
        format!(" p50_us={p50} p99_us={p99} p999_us={p999}")
    });
    let buffered = outcome
        .peak_buffered
        .map_or(String::new(), |b| format!(" peak_buffered_kb={}", b / 1024));
    let accepted = outcome.accepted.map_or(String::new(), |[avg, p99]| {
        format!(" acc_avg_us={avg} acc_p99_us={p99}")
    });
    println!(
        "RESULT ok={} failed={} secs={:.6} user={:.6} sys={:.6} maxrss_kb={}{latency}{buffered}{accepted}",
        outcome.ok,
        outcome.failed,
        outcome.secs,
        tv(ru.ru_utime),
        tv(ru.ru_stime),
        ru.ru_maxrss
    );
    Ok(())
}

fn our_config(w: &WorkerArgs, idempotence: bool) -> Result<producer_core::Config, Error> {
    let bootstrap = producer_tests::parse_bootstrap(&w.bootstrap);
    let mut b = producer_core::Config::builder(bootstrap)
        .acks(producer_core::Acks::All)
        .enable_idempotence(idempotence)
        .linger(Duration::from_millis(5))
        .max_in_flight(5)
        .buffer_memory(w.buffer_memory)
        .buffer_max_records(w.buffer_max_records)
        .compression(w.workload.codec.ours());
    if let Some(n) = w.batch_size {
        b = b.batch_size(n);
    }
    if let Some(ms) = w.queue_delay_ms {
        b = b.queue_delay_target(Duration::from_millis(ms));
    }
    Ok(b.build()?)
}

fn run_tokio(w: &WorkerArgs, p: &Payloads, idempotence: bool) -> Result<Outcome, Error> {
    use producer_tokio::{DeliveryFuture, ProducerHandle};
    let config = our_config(w, idempotence)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let records = w.records;
    rt.block_on(async move {
        let started = Instant::now();
        let handle = ProducerHandle::start(config)?;
        let times = SendTimes::new(records);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<(u64, DeliveryFuture)>>(4096);
        let collector = {
            let times = times.clone();
            tokio::spawn(async move {
                let counts = Counting::default();
                while let Some(chunk) = rx.recv().await {
                    for (i, f) in chunk {
                        let r = f.await;
                        times.reported(i);
                        counts.count(r);
                    }
                }
                counts
            })
        };
        let topic: Arc<str> = Arc::from(TOPIC);
        let mut chunk = Vec::with_capacity(1024);
        for i in 0..records {
            times.sending(i, i + 1);
            let f = handle
                .send(p.record(&topic, i))
                .await
                .map_err(|e| format!("send refused: {e}"))?;
            chunk.push((i, f));
            if chunk.len() == 1024 {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(1024));
                tx.send(full).await.map_err(|_| "collector gone")?;
            }
        }
        tx.send(chunk).await.map_err(|_| "collector gone")?;
        drop(tx);
        let counts = collector.await?;
        let secs = started.elapsed().as_secs_f64();
        handle.close().await;
        Ok(Outcome {
            accepted: times.summary(),
            ..counts.outcome(secs)
        })
    })
}

/// `tokio-cb` (`send_detached` per record) or, with `batched`, `tokio-batch`
/// (`send_batch_detached` in bursts of [`BURST`]); reports go to a counting callback.
fn run_tokio_detached(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    batched: bool,
) -> Result<Outcome, Error> {
    use producer_tokio::ProducerHandle;
    let config = our_config(w, idempotence)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let records = w.records;
    let counts = Arc::new(Counting::default());
    let times = SendTimes::new(records);
    rt.block_on(async move {
        let started = Instant::now();
        let handle = {
            let (counts, times) = (counts.clone(), times.clone());
            ProducerHandle::builder(config)
                .on_delivery(move |report| {
                    times.reported(report.tag);
                    counts.count(report.result)
                })
                .start()?
        };
        let peak = Arc::new(AtomicU64::new(0));
        let sampler = {
            let (handle, peak) = (handle.clone(), peak.clone());
            tokio::spawn(async move {
                loop {
                    let buffered = handle.metrics().await.buffered_bytes as u64;
                    peak.fetch_max(buffered, Ordering::Relaxed);
                    tokio::time::sleep(SAMPLE_EVERY).await;
                }
            })
        };
        let topic: Arc<str> = Arc::from(TOPIC);
        let mut burst = Vec::with_capacity(BURST as usize);
        for (start, end) in bursts(records, if batched { BURST } else { 1 }) {
            times.sending(start, end);
            let sent = if batched {
                burst.extend((start..end).map(|i| (p.record(&topic, i), i)));
                handle
                    .send_batch_detached(&mut burst)
                    .await
                    .map_err(|e| e.to_string())
            } else {
                let record = p.record(&topic, start);
                handle
                    .send_detached(record, start)
                    .await
                    .map_err(|e| e.to_string())
            };
            sent.map_err(|e| format!("send refused: {e}"))?;
        }
        handle.flush().await;
        let secs = started.elapsed().as_secs_f64();
        sampler.abort();
        handle.close().await;
        Ok(Outcome {
            peak_buffered: Some(peak.load(Ordering::Relaxed) as usize),
            accepted: times.summary(),
            ..counts.outcome(secs)
        })
    })
}

/// How often our workers read how much their producer holds against `buffer_memory`.
const SAMPLE_EVERY: Duration = Duration::from_millis(2);

/// `mio` (`ThreadedProducer::send` per record) or, with `batched`, `mio-batch` (`send_batch`
/// in bursts of [`BURST`]); the sender sleeps 200 µs whenever the queue is full.
fn run_mio(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    batched: bool,
) -> Result<Outcome, Error> {
    use producer_mio::ThreadedProducer;
    let config = our_config(w, idempotence)?;
    let counts = Arc::new(Counting::default());
    let times = SendTimes::new(w.records);
    let started = Instant::now();
    let producer = {
        let (counts, times) = (counts.clone(), times.clone());
        ThreadedProducer::<u64>::spawn(config, MIO_QUEUE, move |d| {
            times.reported(d.opaque);
            counts.count(d.result.map_err(|f| f.error))
        })?
    };
    let full = || std::thread::sleep(Duration::from_micros(200));
    let done = std::sync::atomic::AtomicBool::new(false);
    let peak = AtomicU64::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if let Some(m) = producer.metrics() {
                    peak.fetch_max(m.buffered_bytes as u64, Ordering::Relaxed);
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        let sent = send_mio(&producer, w, p, batched, full, &times);
        if sent.is_ok() {
            producer.flush();
        }
        done.store(true, Ordering::Relaxed);
        sent
    })?;
    let secs = started.elapsed().as_secs_f64();
    producer.close();
    Ok(Outcome {
        peak_buffered: Some(peak.load(Ordering::Relaxed) as usize),
        accepted: times.summary(),
        ..counts.outcome(secs)
    })
}

/// The sending loop of [`run_mio`].
fn send_mio(
    producer: &producer_mio::ThreadedProducer<u64>,
    w: &WorkerArgs,
    p: &Payloads,
    batched: bool,
    full: impl Fn(),
    times: &SendTimes,
) -> Result<(), Error> {
    use producer_mio::TrySendError;
    let topic: Arc<str> = Arc::from(TOPIC);
    let mut burst = Vec::with_capacity(BURST as usize);
    for (start, end) in bursts(w.records, if batched { BURST } else { 1 }) {
        times.sending(start, end);
        if batched {
            burst.extend((start..end).map(|i| (p.record(&topic, i), i)));
            while !burst.is_empty() {
                let taken = producer
                    .send_batch(&mut burst)
                    .map_err(|e| format!("send refused: {e}"))?;
                if taken == 0 {
                    full();
                }
            }
        } else {
            let mut record = p.record(&topic, start);
            loop {
                match producer.send_with(record, start) {
                    Ok(()) => break,
                    Err(TrySendError::Full(r, _)) => {
                        record = r;
                        full();
                    }
                    Err(e) => return Err(format!("send refused: {e}").into()),
                }
            }
        }
    }
    Ok(())
}

/// Records per burst for the batched producers.
const BURST: u64 = 1024;

/// `[start, end)` ranges of `size` records covering `0..records`.
fn bursts(records: u64, size: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..records)
        .step_by(size as usize)
        .map(move |start| (start, (start + size).min(records)))
}

/// Delivery counts of one producer under test (also librdkafka's delivery context).
#[derive(Default)]
struct Counting {
    ok: AtomicU64,
    failed: AtomicU64,
}

impl Counting {
    /// Counts one report; the first few failures are printed.
    fn count<T, E: std::fmt::Display>(&self, result: Result<T, E>) {
        match result {
            Ok(_) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                if self.failed.fetch_add(1, Ordering::Relaxed) < 3 {
                    eprintln!("worker: delivery failed: {e}");
                }
            }
        }
    }

    fn reported(&self) -> u64 {
        self.ok.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed)
    }

    fn outcome(&self, secs: f64) -> Outcome {
        Outcome {
            ok: self.ok.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            secs,
            latency: None,
            peak_buffered: None,
            accepted: None,
        }
    }
}

impl rdkafka::ClientContext for Counting {}

impl rdkafka::producer::ProducerContext for Counting {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        self.count(result.as_ref().map_err(|(e, _)| e));
    }
}

/// librdkafka's settings of the bench (the same as ours where both have them).
fn rdkafka_config(w: &WorkerArgs, idempotence: bool) -> rdkafka::ClientConfig {
    let mut cfg = rdkafka::ClientConfig::new();
    cfg.set("bootstrap.servers", &w.bootstrap)
        .set("acks", "all")
        .set(
            "enable.idempotence",
            if idempotence { "true" } else { "false" },
        )
        .set("linger.ms", "5")
        .set("max.in.flight.requests.per.connection", "5")
        .set(
            "queue.buffering.max.kbytes",
            (w.buffer_memory / 1024).to_string(),
        )
        .set(
            "queue.buffering.max.messages",
            // librdkafka's most.
            w.buffer_max_records.min(2_147_483_647).to_string(),
        )
        .set("compression.codec", w.workload.codec.name());
    // 16 KiB as every other producer's unless --batch-size says: the issue's equal settings
    // (librdkafka's own default is 1,000,000 bytes).
    cfg.set(
        "batch.size",
        w.batch_size.unwrap_or(DEFAULT_BATCH_SIZE).to_string(),
    );
    cfg
}

/// Every producer's batch size unless `--batch-size` says: Java's default and ours.
const DEFAULT_BATCH_SIZE: usize = 16_384;

/// Our producers' `buffer_memory` and librdkafka's unless `--buffer-memory` says.
const DEFAULT_BUFFER_MEMORY: usize = 64 << 20;

/// Waits until `done` (every report counted): librdkafka's flush without the `rdkafka` crate's
/// waits. Its `BaseProducer::flush` polls in slices of 100 ms and its `poll` runs to the end of
/// its timeout, so the end of a run would be timed to the end of a 100 ms slice; here each
/// round is `rd_kafka_flush` without waiting (it sends what lingers) and a 1 ms `poll`.
fn drain<C: rdkafka::producer::ProducerContext>(
    producer: &rdkafka::producer::BaseProducer<C>,
    done: impl Fn(&C) -> bool,
    started: Instant,
) {
    use rdkafka::producer::Producer;
    while !done(producer.context()) && started.elapsed() < WORKER_TIMEOUT {
        // An error is "not everything delivered yet": the polls below serve the reports.
        let _ = producer.flush(Duration::ZERO);
        producer.poll(Duration::from_millis(1));
    }
}

fn run_rdkafka(w: &WorkerArgs, p: &Payloads, idempotence: bool) -> Result<Outcome, Error> {
    use rdkafka::error::KafkaError;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::types::RDKafkaErrorCode;

    let started = Instant::now();
    let cfg = rdkafka_config(w, idempotence);
    let producer: BaseProducer<Counting> = cfg.create_with_context(Counting::default())?;
    for i in 0..w.records {
        let value = &p.values[p.value_range(i)];
        let key = p.key_range(i).map(|k| &p.keys[k]);
        let mut record = BaseRecord::<[u8], [u8]>::to(TOPIC).payload(value);
        if let Some(k) = key {
            record = record.key(k);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(format!("send refused: {e}").into()),
            }
        }
        if i % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    drain(&producer, |c| c.reported() >= w.records, started);
    let secs = started.elapsed().as_secs_f64();
    let outcome = producer.context().outcome(secs);
    drop(producer);
    Ok(outcome)
}

// ---------------------------------------------------------------------------------------------
// The latency workload: open-loop senders
// ---------------------------------------------------------------------------------------------

/// The tag (opaque) of the warm-up record each open-loop run delivers before its clock starts.
const WARMUP_TAG: u64 = u64::MAX;

/// The open-loop schedule of the `latency` workload and each record's delivery latency.
/// Record `i` is due at `start + i / rate`; its latency is from then to its report, so a
/// producer that stalls its sender is charged for every record that waited (no coordinated
/// omission).
struct Latencies {
    /// When record 0 was due: set once the warm-up record is delivered.
    start: std::sync::OnceLock<Instant>,
    /// Nanoseconds between two records' due times (10^9 / rate).
    interval_ns: f64,
    /// Per record: 1 + its latency in µs once delivered, 0 before (and if it failed).
    micros: Vec<std::sync::atomic::AtomicU32>,
}

impl Latencies {
    fn new(records: u64, rate: f64) -> Latencies {
        Latencies {
            start: std::sync::OnceLock::new(),
            interval_ns: 1e9 / rate,
            micros: (0..records).map(|_| Default::default()).collect(),
        }
    }

    /// Starts the schedule now (record 0 is due now).
    fn begin(&self) -> Instant {
        *self.start.get_or_init(Instant::now)
    }

    fn due(&self, i: u64) -> Instant {
        let start = *self.start.get().expect("the schedule has begun");
        start + Duration::from_nanos((i as f64 * self.interval_ns) as u64)
    }

    /// How long until record `i` is due; zero once it is (the sender then catches up).
    fn until_due(&self, i: u64) -> Duration {
        self.due(i).saturating_duration_since(Instant::now())
    }

    /// Blocks the sending thread until record `i` is due: the pacing of the workload.
    fn pace(&self, i: u64) {
        let wait = self.until_due(i);
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }

    fn delivered(&self, i: u64, at: Instant) {
        if let Some(slot) = self.micros.get(i as usize) {
            let us = at.saturating_duration_since(self.due(i)).as_micros();
            slot.store(
                us.min(u128::from(u32::MAX - 1)) as u32 + 1,
                Ordering::Relaxed,
            );
        }
    }

    /// p50, p99 and p99.9 in µs (nearest rank) over the delivered records; `None` if none.
    fn percentiles(&self) -> Option<[u64; 3]> {
        let mut v: Vec<u32> = self
            .micros
            .iter()
            .map(|m| m.load(Ordering::Relaxed))
            .filter(|&m| m > 0)
            .map(|m| m - 1)
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let rank =
            |q: f64| u64::from(v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]);
        Some([rank(0.50), rank(0.99), rank(0.999)])
    }
}

/// The reports of an open-loop run: counted, and each delivered record's latency kept.
struct Timed {
    counts: Counting,
    latencies: Latencies,
}

impl Timed {
    fn new(records: u64, rate: f64) -> Timed {
        Timed {
            counts: Counting::default(),
            latencies: Latencies::new(records, rate),
        }
    }

    /// The report of record `i` (the warm-up record's is not counted).
    fn report<T, E: std::fmt::Display>(&self, i: u64, result: Result<T, E>) {
        let at = Instant::now();
        if i == WARMUP_TAG {
            return;
        }
        if result.is_ok() {
            self.latencies.delivered(i, at);
        }
        self.counts.count(result);
    }

    fn outcome(&self, secs: f64) -> Outcome {
        Outcome {
            latency: self.latencies.percentiles(),
            ..self.counts.outcome(secs)
        }
    }
}

impl rdkafka::ClientContext for Timed {}

impl rdkafka::producer::ProducerContext for Timed {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, i: usize) {
        self.report(i as u64, result.as_ref().map_err(|(e, _)| e));
    }
}

/// Whether `producer` has an open-loop sender (the batch rows have none: their API takes
/// bursts, the latency row is about one record at a time).
fn open_loop_sender(producer: &str) -> bool {
    !producer.contains("-batch")
}

/// `tokio` / `tokio-idem` open loop: `send(record).await` per due record; each delivery future
/// goes at once to a collector task that polls all of them unordered and takes each one's
/// time as it resolves.
fn run_tokio_open_loop(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    rate: f64,
) -> Result<Outcome, Error> {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    use producer_tokio::{DeliveryFuture, ProducerHandle};
    let config = our_config(w, idempotence)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let records = w.records;
    let timed = Arc::new(Timed::new(records, rate));
    rt.block_on(async move {
        let handle = ProducerHandle::start(config)?;
        let topic: Arc<str> = Arc::from(TOPIC);
        let warmup = handle
            .send(p.record(&topic, 0))
            .await
            .map_err(|e| format!("send refused: {e}"))?;
        warmup
            .await
            .map_err(|e| format!("warm-up record failed: {e}"))?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, DeliveryFuture)>();
        let collector = {
            let timed = timed.clone();
            tokio::spawn(async move {
                let mut pending = FuturesUnordered::new();
                let mut open = true;
                loop {
                    tokio::select! {
                        next = rx.recv(), if open => match next {
                            Some((i, f)) => pending.push(async move { (i, f.await) }),
                            None => open = false,
                        },
                        Some((i, result)) = pending.next(), if !pending.is_empty() => {
                            timed.report(i, result);
                        }
                        else => break,
                    }
                }
            })
        };
        let started = timed.latencies.begin();
        for i in 0..records {
            timed.latencies.pace(i);
            let f = handle
                .send(p.record(&topic, i))
                .await
                .map_err(|e| format!("send refused: {e}"))?;
            tx.send((i, f)).map_err(|_| "collector gone")?;
        }
        drop(tx);
        collector.await?;
        let secs = started.elapsed().as_secs_f64();
        handle.close().await;
        Ok(timed.outcome(secs))
    })
}

/// `tokio-cb` / `tokio-cb-idem` open loop: `send_detached(record, i).await` per due record,
/// the `on_delivery` callback takes each report's time.
fn run_tokio_cb_open_loop(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    rate: f64,
) -> Result<Outcome, Error> {
    use producer_tokio::ProducerHandle;
    let config = our_config(w, idempotence)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let records = w.records;
    let timed = Arc::new(Timed::new(records, rate));
    rt.block_on(async move {
        let handle = {
            let timed = timed.clone();
            ProducerHandle::builder(config)
                .on_delivery(move |report| timed.report(report.tag, report.result))
                .start()?
        };
        let topic: Arc<str> = Arc::from(TOPIC);
        handle
            .send_detached(p.record(&topic, 0), WARMUP_TAG)
            .await
            .map_err(|e| format!("send refused: {e}"))?;
        handle.flush().await;
        let started = timed.latencies.begin();
        for i in 0..records {
            timed.latencies.pace(i);
            handle
                .send_detached(p.record(&topic, i), i)
                .await
                .map_err(|e| format!("send refused: {e}"))?;
        }
        handle.flush().await;
        let secs = started.elapsed().as_secs_f64();
        handle.close().await;
        Ok(timed.outcome(secs))
    })
}

/// `mio` / `mio-idem` open loop: `ThreadedProducer::send_with(record, i)` per due record (200 µs
/// sleeps while the queue is full), the delivery callback takes each report's time.
fn run_mio_open_loop(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    rate: f64,
) -> Result<Outcome, Error> {
    use producer_mio::{ThreadedProducer, TrySendError};
    let config = our_config(w, idempotence)?;
    let timed = Arc::new(Timed::new(w.records, rate));
    let producer = {
        let timed = timed.clone();
        ThreadedProducer::<u64>::spawn(config, MIO_QUEUE, move |d| {
            timed.report(d.opaque, d.result.map_err(|f| f.error))
        })?
    };
    let topic: Arc<str> = Arc::from(TOPIC);
    let send = |mut record: producer_core::Record, i: u64| -> Result<(), Error> {
        loop {
            match producer.send_with(record, i) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(r, _)) => {
                    record = r;
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) => return Err(format!("send refused: {e}").into()),
            }
        }
    };
    send(p.record(&topic, 0), WARMUP_TAG)?;
    producer.flush();
    let started = timed.latencies.begin();
    for i in 0..w.records {
        timed.latencies.pace(i);
        send(p.record(&topic, i), i)?;
    }
    producer.flush();
    let secs = started.elapsed().as_secs_f64();
    producer.close();
    Ok(timed.outcome(secs))
}

/// `rdkafka` / `rdkafka-idem` open loop: `BaseProducer::send` per due record with the index as
/// its opaque; the sender serves the delivery callbacks with `poll` after every send and
/// while it waits for the next record to be due.
fn run_rdkafka_open_loop(
    w: &WorkerArgs,
    p: &Payloads,
    idempotence: bool,
    rate: f64,
) -> Result<Outcome, Error> {
    use rdkafka::error::KafkaError;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::types::RDKafkaErrorCode;

    let producer: BaseProducer<Timed> =
        rdkafka_config(w, idempotence).create_with_context(Timed::new(w.records, rate))?;
    let send = |i: u64, opaque: usize| -> Result<(), Error> {
        let mut record = BaseRecord::<[u8], [u8], usize>::with_opaque_to(TOPIC, opaque)
            .payload(&p.values[p.value_range(i)]);
        loop {
            match producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(format!("send refused: {e}").into()),
            }
        }
    };
    send(0, WARMUP_TAG as usize)?;
    producer.flush(Duration::from_secs(60))?;
    let timed = producer.context();
    let started = timed.latencies.begin();
    for i in 0..w.records {
        // Serve the callbacks until the record is due (poll's timeout is whole milliseconds).
        loop {
            let wait = timed.latencies.until_due(i);
            if wait >= Duration::from_millis(1) {
                producer.poll(Duration::from_millis(wait.as_millis() as u64));
            } else {
                producer.poll(Duration::ZERO);
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
                break;
            }
        }
        send(i, i as usize)?;
        producer.poll(Duration::ZERO);
    }
    drain(&producer, |t| t.counts.reported() >= w.records, started);
    let secs = started.elapsed().as_secs_f64();
    let outcome = timed.outcome(secs);
    drop(producer);
    Ok(outcome)
}

// ---------------------------------------------------------------------------------------------
// Coordinator
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    ok: u64,
    failed: u64,
    secs: f64,
    cpu: f64,
    maxrss_kb: u64,
    /// The `latency` workload's p50, p99 and p99.9 in µs.
    latency_us: Option<[f64; 3]>,
    /// CPU seconds the cluster's processes (the mock, or Kafka's JVM) used while the producer
    /// ran: shows when the broker, not the producer, is what bounds the rate.
    broker_cpu: f64,
    /// The most KiB our producer held against `buffer_memory` (sampled; ours only).
    peak_buffered_kb: Option<u64>,
    /// Ours, throughput workloads: average and p99 µs from each send call to its report.
    accepted_us: Option<[f64; 2]>,
}

/// CPU seconds (user and system) used so far by process `pid` and every process below it,
/// from `/proc` (0 for what cannot be read).
fn tree_cpu_secs(pid: u32) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut total = 0.0;
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            // Fields after the command name (which may hold spaces) closed by ')'.
            if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
                for i in [11, 12] {
                    total += f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / ticks;
                }
            }
        }
        // Each thread lists the children it started (Kafka's JVM is started from one that is
        // not the main thread).
        let tasks = std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten();
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                todo.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    total
}

/// Where the brokers of one run come from (`--broker`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Broker {
    /// librdkafka's mock cluster, a fresh process per run.
    Mock,
    /// A single-node Apache Kafka from the test tier, a fresh process per run.
    Kafka,
}

/// `kafka` mode: starts a single-node Apache Kafka, creates the bench topic, prints
/// `BOOTSTRAP host:port` and runs until stdin closes.
fn kafka_main() -> Result<(), Error> {
    use producer_tests::kafka::cluster::{ClusterSpec, KafkaCluster};
    let cluster = KafkaCluster::start(ClusterSpec::single()).map_err(|e| e.to_string())?;
    cluster.ctl().create_topic(TOPIC, PARTITIONS, 1, &[])?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "BOOTSTRAP {}", cluster.bootstrap_servers())?;
        out.flush()?;
    }
    let mut buf = [0u8; 256];
    let mut stdin = std::io::stdin().lock();
    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    drop(cluster);
    Ok(())
}

/// The producers of other projects, each a program of its own (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Peer {
    FranzGo,
    Java,
    Krafka,
    Confluent,
}

/// The peer and idempotence of a `--producers` name, `None` for our worker's producers.
fn peer(name: &str) -> Option<(Peer, bool)> {
    let (base, idem) = name
        .strip_suffix("-idem")
        .map_or((name, false), |b| (b, true));
    let p = match base {
        "franz-go" => Peer::FranzGo,
        "java" => Peer::Java,
        "krafka" => Peer::Krafka,
        "confluent" => Peer::Confluent,
        _ => return None,
    };
    Some((p, idem))
}

/// Records of the Java peer's warm-up, sent and flushed before its clock starts.
const JAVA_WARMUP: u64 = 100_000;

/// The built peer programs: the command line that starts each, or why it could not be built.
type PeerPrograms = BTreeMap<Peer, Result<Vec<String>, String>>;

/// 64-bit FNV-1a of the files' contents: the cache key of a built peer.
fn source_hash(files: &[std::path::PathBuf]) -> Result<String, Error> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in files {
        for b in std::fs::read(f)? {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
    Ok(format!("{h:016x}"))
}

fn run_tool(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "{:?} failed ({}): {}",
        cmd.get_program(),
        out.status,
        err.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
    ))
}

/// Builds (or finds cached under `target/peers`) the program of `peer`.
fn build_peer(peer: Peer) -> Result<Vec<String>, String> {
    let target = producer_tests::kafka::dist::target_dir();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("peers");
    let cache = target.join("peers");
    std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
    let s = |p: &std::path::Path| p.display().to_string();
    match peer {
        Peer::FranzGo => {
            let dir = src.join("franz-go");
            let files = ["main.go", "go.mod", "go.sum"].map(|f| dir.join(f));
            let hash = source_hash(&files).map_err(|e| e.to_string())?;
            let bin = cache.join(format!("franz-go-{hash}"));
            if !bin.is_file() {
                eprintln!("bench_e2e: go build of the franz-go peer");
                let tmp = cache.join(format!("franz-go-{hash}.tmp"));
                run_tool(
                    Command::new("go")
                        .args(["build", "-o"])
                        .arg(&tmp)
                        .arg(".")
                        .current_dir(&dir),
                )?;
                std::fs::rename(&tmp, &bin).map_err(|e| e.to_string())?;
            }
            Ok(vec![s(&bin)])
        }
        Peer::Java => {
            let dist = producer_tests::kafka::dist::Dist::shared()?;
            let file = src.join("java").join("JavaPeer.java");
            let hash = source_hash(std::slice::from_ref(&file)).map_err(|e| e.to_string())?;
            let classes = cache.join(format!("java-{hash}"));
            if !classes.join("JavaPeer.class").is_file() {
                eprintln!("bench_e2e: javac of the Java peer");
                let tmp = cache.join(format!("java-{hash}.tmp"));
                let _ = std::fs::remove_dir_all(&tmp);
                run_tool(
                    Command::new("javac")
                        .arg("-d")
                        .arg(&tmp)
                        .args(["-cp", &dist.classpath()])
                        .arg(&file),
                )?;
                let _ = std::fs::remove_dir_all(&classes);
                std::fs::rename(&tmp, &classes).map_err(|e| e.to_string())?;
            }
            Ok(vec![
                "java".to_string(),
                "-cp".to_string(),
                format!("{}:{}", s(&classes), dist.classpath()),
                "JavaPeer".to_string(),
            ])
        }
        Peer::Krafka | Peer::Confluent => {
            let dir = target.join("rust-peers");
            eprintln!("bench_e2e: cargo build of the Rust peers (krafka, confluent-kafka)");
            run_tool(
                Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                    .args(["build", "--release", "--manifest-path"])
                    .arg(src.join("rust-peers").join("Cargo.toml"))
                    .env("CARGO_TARGET_DIR", &dir),
            )?;
            let bin = dir.join("release").join("rust-peers");
            let client = if peer == Peer::Krafka {
                "krafka"
            } else {
                "confluent"
            };
            Ok(vec![s(&bin), client.to_string()])
        }
    }
}

/// The payload arenas of `wname` in files (`target/bench_e2e/payloads`), for the peers.
fn payload_files(
    wname: &str,
    value_bytes: Option<usize>,
) -> Result<(String, Option<String>), Error> {
    let dir = producer_tests::kafka::dist::target_dir()
        .join("bench_e2e")
        .join("payloads");
    std::fs::create_dir_all(&dir)?;
    let p = Payloads::new(sized(workload(wname)?, value_bytes));
    let values = dir.join(format!("{wname}.values"));
    std::fs::write(&values, &p.values)?;
    let keys = if p.keyed {
        let keys = dir.join(format!("{wname}.keys"));
        std::fs::write(&keys, &p.keys)?;
        Some(keys.display().to_string())
    } else {
        None
    };
    Ok((values.display().to_string(), keys))
}

/// What one run needs beyond the producer's name.
struct RunSpec<'a> {
    workload: &'a str,
    records: u64,
    batch_size: Option<usize>,
    broker: Broker,
    peers: &'a PeerPrograms,
    payload_files: Option<&'a (String, Option<String>)>,
    run: usize,
    /// Records per second of the `latency` workload (`None` for the others).
    rate: Option<f64>,
    /// `--buffer-memory MIB`, `--value-bytes N`.
    buffer_mib: Option<usize>,
    value_bytes: Option<usize>,
    /// `--mock-rtt-ms N`.
    mock_rtt_ms: Option<u64>,
    /// `--baseline-exe PATH`: runs the workers of the `NAME@base` producers.
    baseline_exe: Option<&'a std::path::Path>,
}

impl RunSpec<'_> {
    /// The time the open-loop schedule itself takes (zero for the other workloads).
    fn schedule(&self) -> Duration {
        self.rate.map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(self.records as f64 / r)
        })
    }
}

/// The peer's command line for one run.
fn peer_command(
    peer: Peer,
    idem: bool,
    program: &[String],
    spec: &RunSpec<'_>,
    bootstrap: &str,
) -> Result<Command, String> {
    let w = sized(
        workload(spec.workload).map_err(|e| e.to_string())?,
        spec.value_bytes,
    );
    let (values, keys) = spec.payload_files.ok_or("no payload files")?;
    let mut cmd = Command::new(&program[0]);
    cmd.args(&program[1..])
        .args(["--bootstrap", bootstrap])
        .args(["--records", &spec.records.to_string()])
        .args(["--values", values])
        .args(["--value-bytes", &w.value_bytes.to_string()])
        // Every peer gets 16 KiB batches (Java's default and ours) unless --batch-size says.
        .args([
            "--batch-size",
            &spec.batch_size.unwrap_or(DEFAULT_BATCH_SIZE).to_string(),
        ]);
    if let Some(k) = keys {
        cmd.args(["--keys", k]);
    }
    cmd.args(["--compression", w.codec.name()]);
    if let Some(rate) = spec.rate {
        cmd.args(["--rate", &format!("{rate:.0}")]);
    }
    match peer {
        Peer::FranzGo => {
            cmd.arg(format!("--idempotence={idem}"));
            if spec.broker == Broker::Mock {
                // franz-go cannot read the mock's ApiVersions v3 answer (nor its v5 one): capped
                // at Kafka 2.3's protocol it asks ApiVersions v2, which it reads.
                cmd.arg("--max-kafka=2.3");
            }
        }
        Peer::Java => {
            cmd.args(["--idempotence", &idem.to_string()])
                .args(["--warmup", &JAVA_WARMUP.to_string()]);
        }
        Peer::Krafka | Peer::Confluent => {
            if idem {
                cmd.arg("--idempotence");
            }
        }
    }
    Ok(cmd)
}

/// One run of `producer`: a fresh cluster, the producer's process, its figures or why not.
/// `NAME+qdN`: our producer NAME with `queue.delay.target.ms` N; any other name as it is.
fn queue_delay_suffix(producer: &str) -> (&str, Option<u64>) {
    match producer.rsplit_once("+qd") {
        Some((name, ms)) => match ms.parse() {
            Ok(ms) => (name, Some(ms)),
            Err(_) => (producer, None),
        },
        None => (producer, None),
    }
}

fn run_one(producer: &str, spec: &RunSpec<'_>) -> Result<Sample, String> {
    let e2s = |e: Error| e.to_string();
    if spec.rate.is_some() && !open_loop_sender(producer) {
        return Err(
            "no open-loop sender: the batch API takes bursts, not one record when it \
                    is due (the per-record rows measure latency)"
                .to_string(),
        );
    }
    let mock = Mock::start(spec.broker, spec.mock_rtt_ms)
        .map_err(|e| format!("cluster did not start: {e}"))?;
    let peer = peer(producer);
    let (mut cmd, timeout) = match peer {
        None => {
            // NAME@base: the same worker, from the baseline build (`--baseline-exe`).
            let (producer, queue_delay) = queue_delay_suffix(producer);
            let (exe, ours) = match (producer.strip_suffix("@base"), spec.baseline_exe) {
                (Some(ours), Some(exe)) => (exe.to_path_buf(), ours),
                _ => (
                    std::env::current_exe().map_err(|e| e.to_string())?,
                    producer,
                ),
            };
            let mut cmd = Command::new(exe);
            if let Some(ms) = queue_delay {
                cmd.args(["worker", "--queue-delay-ms", &ms.to_string()]);
            } else {
                cmd.arg("worker");
            }
            cmd.args(["--producer", ours, "--workload", spec.workload])
                .args(["--records", &spec.records.to_string()])
                .args(["--bootstrap", &mock.bootstrap]);
            if let Some(n) = spec.batch_size {
                cmd.args(["--batch-size", &n.to_string()]);
            }
            if let Some(rate) = spec.rate {
                cmd.args(["--rate", &format!("{rate:.0}")]);
            }
            if let Some(mib) = spec.buffer_mib {
                cmd.args(["--buffer-memory", &mib.to_string()]);
            }
            if let Some(n) = spec.value_bytes {
                cmd.args(["--value-bytes", &n.to_string()]);
            }
            (cmd, WORKER_TIMEOUT + spec.schedule())
        }
        Some((p, idem)) => {
            let program = spec.peers.get(&p).ok_or("peer not built")?;
            let program = program.as_ref().map_err(|e| format!("cannot build: {e}"))?;
            let cmd = peer_command(p, idem, program, spec, &mock.bootstrap)?;
            // A peer that cannot talk to the cluster should not hold the bench for 10 minutes.
            let timeout = Duration::from_secs(60 + spec.records / 20_000);
            (cmd, timeout.min(WORKER_TIMEOUT) + spec.schedule())
        }
    };
    let logs = producer_tests::kafka::dist::target_dir()
        .join("bench_e2e")
        .join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let log = logs.join(format!(
        "{producer}-{}-run{}.stderr",
        spec.workload, spec.run
    ));
    let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file));
    let broker_cpu_before = tree_cpu_secs(mock.child.id());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let pid = child.id() as libc::pid_t;
    let started = Instant::now();
    // wait4: the exit status and the rusage of this child alone (CPU, peak RSS).
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 writes into the structs we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut timed_out = false;
    loop {
        // SAFETY: pid is our child, not yet reaped.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            break;
        }
        if r < 0 {
            return Err(format!("wait4: {}", std::io::Error::last_os_error()));
        }
        if !timed_out && started.elapsed() > timeout {
            timed_out = true;
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = reader.join().unwrap_or_default();
    let broker_cpu = tree_cpu_secs(mock.child.id()) - broker_cpu_before;
    drop(mock);
    let last_err = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.chars().take(300).collect::<String>())
            .unwrap_or_default()
    };
    if timed_out {
        return Err(format!(
            "timed out after {} s (last words: {:?})",
            timeout.as_secs(),
            last_err()
        ));
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("exited with status {status:#x}: {}", last_err()));
    }
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .ok_or_else(|| format!("no RESULT in its output; last words: {}", last_err()))?;
    let fields: BTreeMap<&str, &str> = line.split(' ').filter_map(|f| f.split_once('=')).collect();
    let get = |k: &str| -> Result<f64, Error> {
        Ok(fields
            .get(k)
            .ok_or_else(|| format!("RESULT lacks {k}"))?
            .parse()?)
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Sample {
        ok: get("ok").map_err(e2s)? as u64,
        failed: get("failed").map_err(e2s)? as u64,
        secs: get("secs").map_err(e2s)?,
        cpu: match peer {
            // Our worker reports its own getrusage.
            None => get("user").map_err(e2s)? + get("sys").map_err(e2s)?,
            // The Java peer reports its timed phase's CPU.
            Some((Peer::Java, _)) => get("cpu").map_err(e2s)?,
            Some(_) => tv(ru.ru_utime) + tv(ru.ru_stime),
        },
        maxrss_kb: match peer {
            None => get("maxrss_kb").map_err(e2s)? as u64,
            Some(_) => ru.ru_maxrss as u64,
        },
        latency_us: match spec.rate {
            None => None,
            Some(_) => Some([
                get("p50_us").map_err(e2s)?,
                get("p99_us").map_err(e2s)?,
                get("p999_us").map_err(e2s)?,
            ]),
        },
        broker_cpu,
        peak_buffered_kb: fields.get("peak_buffered_kb").and_then(|v| v.parse().ok()),
        accepted_us: match (get("acc_avg_us"), get("acc_p99_us")) {
            (Ok(avg), Ok(p99)) => Some([avg, p99]),
            _ => None,
        },
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

struct Figures {
    rate: f64,
    mbps: f64,
    cpu_per_m: f64,
    rss_mb: f64,
    failed: f64,
    lost: f64,
    /// The cluster's CPU seconds per million records while the producer ran.
    broker_cpu_per_m: f64,
    /// The `latency` workload: delivered records per second of the open-loop run and the
    /// p50, p99 and p99.9 latency in ms.
    achieved: f64,
    latency_ms: Option<[f64; 3]>,
}

/// A row of a table: the medians of the runs that gave figures, and why the others did not.
struct Row {
    figures: Option<Figures>,
    errors: Vec<String>,
    runs: usize,
}

/// The flags that take a value (`--help` lists them all).
const VALUE_FLAGS: &[&str] = &[
    "--runs",
    "--records",
    "--batch-size",
    "--broker",
    "--workloads",
    "--producers",
    "--rate",
    "--readme",
    "--buffer-memory",
    "--value-bytes",
    "--mock-rtt-ms",
    "--baseline-exe",
];

/// The value of `--name`, parsed; an error (not a panic) for a missing or bad value.
fn flag<T: std::str::FromStr>(args: &[String], name: &str) -> Result<Option<T>, Error>
where
    T::Err: std::fmt::Display,
{
    let Some(i) = args.iter().position(|a| a == name) else {
        return Ok(None);
    };
    let v = args
        .get(i + 1)
        .filter(|v| !v.starts_with("--"))
        .ok_or_else(|| format!("{name} needs a value"))?;
    v.parse()
        .map(Some)
        .map_err(|e| format!("{name} {v:?}: {e}").into())
}

/// What one coordinator invocation runs.
struct Plan {
    runs: usize,
    records: u64,
    batch_size: Option<usize>,
    brokers: Vec<Broker>,
    workloads: Vec<String>,
    producers: Vec<String>,
    /// `--rate`: the latency workload's rate instead of half of librdkafka's null100 rate.
    rate: Option<f64>,
    /// `--readme PATH`: the file whose marked tables this run rewrites.
    readme: Option<std::path::PathBuf>,
    /// `--buffer-memory MIB`.
    buffer_mib: Option<usize>,
    /// `--value-bytes N`.
    value_bytes: Option<usize>,
    /// `--mock-rtt-ms N`.
    mock_rtt_ms: Option<u64>,
    /// `--baseline-exe PATH`: the bench_e2e build whose workers run the `NAME@base` producers.
    baseline_exe: Option<std::path::PathBuf>,
}

fn usage() -> String {
    format!(
        "usage: bench_e2e [--quick] [--runs N] [--records N] [--batch-size BYTES]\n\
         \x20                [--broker mock|kafka|both] [--rate RECORDS_PER_S] [--readme PATH]\n\
         \x20                [--buffer-memory MIB] [--value-bytes N] [--mock-rtt-ms N]\n\
         \x20                [--baseline-exe PATH (then NAME@base producers)]\n\
         \x20                [--workloads {}]\n\
         \x20                [--producers {}]\n\
         \x20                (also: {})",
        ALL_WORKLOADS.join(","),
        ALL_PRODUCERS.join(","),
        OTHER_PRODUCERS.join(",")
    )
}

/// The coordinator's flags, checked before anything runs.
fn plan(args: &[String]) -> Result<Plan, Error> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if VALUE_FLAGS.contains(&a) {
            i += 2;
            continue;
        }
        if a != "--quick" {
            return Err(format!("unknown argument {a:?}\n{}", usage()).into());
        }
        i += 1;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let runs: usize = flag(args, "--runs")?.unwrap_or(if quick { 1 } else { 3 });
    let records: u64 = flag(args, "--records")?.unwrap_or(if quick { 100_000 } else { 1_000_000 });
    if runs == 0 || records == 0 {
        return Err("--runs and --records must be at least 1".into());
    }
    let batch_size: Option<usize> = flag(args, "--batch-size")?;
    let brokers = match flag::<String>(args, "--broker")?
        .as_deref()
        .unwrap_or("mock")
    {
        "mock" => vec![Broker::Mock],
        "kafka" => vec![Broker::Kafka],
        "both" => vec![Broker::Mock, Broker::Kafka],
        other => return Err(format!("unknown --broker {other:?} (mock, kafka or both)").into()),
    };
    let list = |name: &str, all: &[&str]| -> Result<Vec<String>, Error> {
        Ok(flag::<String>(args, name)?.map_or_else(
            || all.iter().map(|s| s.to_string()).collect(),
            |s| s.split(',').map(str::to_string).collect(),
        ))
    };
    let workloads = list("--workloads", ALL_WORKLOADS)?;
    let producers = list("--producers", ALL_PRODUCERS)?;
    for w in &workloads {
        workload(w)?;
    }
    let baseline_exe = flag::<String>(args, "--baseline-exe")?.map(std::path::PathBuf::from);
    if let Some(exe) = &baseline_exe {
        if !exe.is_file() {
            return Err(format!("--baseline-exe {}: not a file", exe.display()).into());
        }
    }
    for p in &producers {
        let (p, queue_delay) = queue_delay_suffix(p);
        if queue_delay.is_some() && (peer(p).is_some() || !ALL_PRODUCERS.contains(&p)) {
            return Err(format!("{p:?}: NAME+qdN needs one of our producers as NAME").into());
        }
        let p = &p.to_string();
        if let Some(ours) = p.strip_suffix("@base") {
            if baseline_exe.is_none() || peer(ours).is_some() || !ALL_PRODUCERS.contains(&ours) {
                return Err(format!(
                    "{p:?}: NAME@base needs --baseline-exe and one of our producers as NAME"
                )
                .into());
            }
            continue;
        }
        if peer(p).is_none()
            && !ALL_PRODUCERS.contains(&p.as_str())
            && !OTHER_PRODUCERS.contains(&p.as_str())
        {
            return Err(format!("unknown producer {p:?}\n{}", usage()).into());
        }
    }
    let rate: Option<f64> = flag(args, "--rate")?;
    if rate.is_some_and(|r| !(r >= 1.0 && r.is_finite())) {
        return Err("--rate must be at least 1 record per second".into());
    }
    if let Some(at) = workloads.iter().position(|w| w == "latency") {
        let measured = workloads[..at].iter().any(|w| w == "null100")
            && producers.iter().any(|p| p == BASELINE);
        if rate.is_none() && !measured {
            return Err(format!(
                "the latency workload runs at half of {BASELINE}'s null100 rate: give --rate N, \
                 or run null100 before latency with {BASELINE} among the producers"
            )
            .into());
        }
    }
    let buffer_mib: Option<usize> = flag(args, "--buffer-memory")?;
    // Our producers refuse a buffer smaller than one request (max.request.size, 1 MiB).
    if buffer_mib.is_some_and(|m| !(1..=64 << 10).contains(&m)) {
        return Err("--buffer-memory must be 1 to 65536 MiB".into());
    }
    let value_bytes: Option<usize> = flag(args, "--value-bytes")?;
    // A record must fit in one request (max.request.size, 1 MiB, with its overheads).
    if value_bytes.is_some_and(|v| !(1..=1_000_000).contains(&v)) {
        return Err("--value-bytes must be 1 to 1000000".into());
    }
    let mock_rtt_ms: Option<u64> = flag(args, "--mock-rtt-ms")?;
    if mock_rtt_ms.is_some_and(|ms| ms > 10_000) {
        return Err("--mock-rtt-ms must be at most 10000".into());
    }
    let readme = flag::<String>(args, "--readme")?.map(std::path::PathBuf::from);
    if let Some(path) = &readme {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--readme {}: {e}", path.display()))?;
        for &b in &brokers {
            replace_marked(&text, b, "")
                .map_err(|e| format!("--readme {}: {e}", path.display()))?;
        }
    }
    Ok(Plan {
        runs,
        records,
        batch_size,
        brokers,
        workloads,
        producers,
        rate,
        readme,
        buffer_mib,
        value_bytes,
        mock_rtt_ms,
        baseline_exe,
    })
}

/// Builds the peers `producers` name (each once), or says why one cannot be.
fn build_peers(producers: &[String]) -> PeerPrograms {
    let mut peers = PeerPrograms::new();
    for p in producers {
        if let Some((kind, _)) = peer(p) {
            if !peers.contains_key(&kind) {
                // krafka and Confluent's client are one program: built once.
                let built = match kind {
                    Peer::Krafka => peers.get(&Peer::Confluent).cloned(),
                    Peer::Confluent => peers.get(&Peer::Krafka).cloned(),
                    _ => None,
                };
                let client = if kind == Peer::Krafka {
                    "krafka"
                } else {
                    "confluent"
                };
                let program = match built {
                    Some(Ok(mut cmd)) => {
                        cmd[1] = client.to_string();
                        Ok(cmd)
                    }
                    Some(Err(e)) => Err(e),
                    None => build_peer(kind),
                };
                peers.insert(kind, program);
            }
        }
    }
    for (kind, r) in &peers {
        if let Err(e) = r {
            eprintln!("bench_e2e: peer {kind:?} cannot be built: {e}");
        }
    }
    peers
}

fn coordinator_main(args: &[String]) -> Result<(), Error> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{}", usage());
        return Ok(());
    }
    let plan = plan(args)?;
    let peers = build_peers(&plan.producers);
    let total_started = Instant::now();
    for &broker in &plan.brokers {
        let markdown = run_broker(&plan, broker, &peers)?;
        if let Some(path) = &plan.readme {
            let text = std::fs::read_to_string(path)?;
            let body = format!("{}\n{markdown}", provenance(args, &plan, broker));
            std::fs::write(path, replace_marked(&text, broker, &body)?)?;
            println!(
                "bench_e2e: rewrote the {} tables of {}",
                broker.name(),
                path.display()
            );
        }
    }
    println!(
        "total bench time {:.0} s",
        total_started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Every workload of `plan` on `broker`: prints its tables and returns them in Markdown.
fn run_broker(plan: &Plan, broker: Broker, peers: &PeerPrograms) -> Result<String, Error> {
    let (runs, records) = (plan.runs, plan.records);
    println!(
        "bench_e2e: {records} records per run, {runs} run(s), {} in its own process (restarted \
         per run), acks=all, linger 5 ms, batch size {}, buffer {} MiB{}",
        match broker {
            Broker::Mock => format!("mock cluster of {BROKERS} brokers / {PARTITIONS} partitions"),
            Broker::Kafka => format!("Apache Kafka, one node / {PARTITIONS} partitions"),
        },
        plan.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
        plan.buffer_mib.unwrap_or(DEFAULT_BUFFER_MEMORY >> 20),
        plan.value_bytes.map_or(String::new(), |n| format!(
            ", {n}-byte values in every workload"
        ))
    );
    let mut throughput_md = String::new();
    let mut latency_md = String::new();
    // librdkafka's median null100 rate in this invocation: half of it is the latency rate.
    let mut baseline_rate: Option<f64> = None;
    // Peers that cannot connect to the mock, with the reason (not run again).
    let mut unreachable: BTreeMap<String, String> = BTreeMap::new();
    for wname in &plan.workloads {
        let w = sized(workload(wname)?, plan.value_bytes);
        let rate = match (w.open_loop, plan.rate) {
            (false, _) => None,
            (true, Some(r)) => Some(r),
            (true, None) => match baseline_rate {
                Some(r) => Some((r / 2.0).round().max(1.0)),
                None => {
                    println!(
                        "\n== {wname}: not run: {BASELINE} gave no null100 figures to take the \
                         rate from (give --rate N) =="
                    );
                    latency_md = format!(
                        "Latency not measured: {BASELINE} gave no null100 figures to take the \
                         rate from.\n"
                    );
                    continue;
                }
            },
        };
        let files = if peers.is_empty() {
            None
        } else {
            Some(payload_files(wname, plan.value_bytes)?)
        };
        let mut samples: BTreeMap<&str, Vec<Result<Sample, String>>> = BTreeMap::new();
        for run in 0..runs {
            for p in &plan.producers {
                // A peer that could not talk to this broker once will not the next time (the
                // mock's answers are the same every run): its reason stands for the rest.
                if let Some(why) = unreachable.get(p.as_str()) {
                    samples
                        .entry(p.as_str())
                        .or_default()
                        .push(Err(why.clone()));
                    continue;
                }
                let spec = RunSpec {
                    workload: wname,
                    records,
                    batch_size: plan.batch_size,
                    broker,
                    peers,
                    payload_files: files.as_ref(),
                    run: run + 1,
                    rate,
                    buffer_mib: plan.buffer_mib,
                    value_bytes: plan.value_bytes,
                    mock_rtt_ms: plan.mock_rtt_ms,
                    baseline_exe: plan.baseline_exe.as_deref(),
                };
                let s = run_one(p, &spec);
                match &s {
                    Ok(s) => eprintln!(
                        "  {wname} run {}/{runs} {p:>16}: {:>9.0} rec/s  cpu {:.2} s  rss {:.0} MB{}  \
                         ok {} failed {}{}",
                        run + 1,
                        records as f64 / s.secs,
                        s.cpu,
                        s.maxrss_kb as f64 / 1024.0,
                        s.peak_buffered_kb.map_or(String::new(), |kb| format!(
                            " (buffered at most {:.1} MB)",
                            kb as f64 / 1024.0
                        )),
                        s.ok,
                        s.failed,
                        s.latency_us.map_or(String::new(), |[a, b, c]| format!(
                            "  p50 {a:.0} us p99 {b:.0} us p99.9 {c:.0} us"
                        ))
                            + &s.accepted_us.map_or(String::new(), |[a, b]| format!(
                                "  from send: avg {:.1} ms p99 {:.1} ms",
                                a / 1000.0,
                                b / 1000.0
                            ))
                    ),
                    Err(e) => {
                        eprintln!("  {wname} run {}/{runs} {p:>16}: {e}", run + 1);
                        if broker == Broker::Mock && e.contains("cannot connect") {
                            unreachable.insert(p.clone(), e.clone());
                        }
                    }
                }
                samples.entry(p.as_str()).or_default().push(s);
            }
        }
        let rows = rows(&samples, records, w);
        if wname == "null100" {
            baseline_rate = rows
                .get(BASELINE)
                .and_then(|r| r.figures.as_ref())
                .map(|f| f.rate);
        }
        match rate {
            Some(rate) => {
                print_latency_table(wname, rate, &plan.producers, &rows);
                latency_md = markdown_latency(rate, &plan.producers, &rows);
            }
            None => {
                print_table(wname, w, &plan.producers, &rows);
                throughput_md += &markdown_throughput(w, &plan.producers, &rows);
            }
        }
    }
    let mut md = String::new();
    if !throughput_md.is_empty() {
        md +=
            "| workload | producer | records/s (x) | MB/s (x) | CPU-s per million (x) | peak RSS \
               MB (x) | failed | lost | broker CPU-s per million |\n|---|---|---|---|---|---|---|---|---|\n";
        md += &throughput_md;
    }
    if !latency_md.is_empty() {
        if !md.is_empty() {
            md.push('\n');
        }
        md += &latency_md;
    }
    Ok(md)
}

/// The rows of one workload: the medians of each producer's runs that gave figures.
fn rows<'a>(
    samples: &BTreeMap<&'a str, Vec<Result<Sample, String>>>,
    records: u64,
    w: Workload,
) -> BTreeMap<&'a str, Row> {
    let bytes = (w.value_bytes + if w.keyed { 8 } else { 0 }) as f64;
    samples
        .iter()
        .map(|(p, all)| {
            let v: Vec<Sample> = all
                .iter()
                .filter_map(|s| s.as_ref().ok().copied())
                .collect();
            let errors: Vec<String> = all
                .iter()
                .filter_map(|s| s.as_ref().err().cloned())
                .collect();
            let m = |f: &dyn Fn(&Sample) -> f64| median(v.iter().map(f).collect());
            let figures = (!v.is_empty()).then(|| {
                let rate = m(&|s| records as f64 / s.secs);
                Figures {
                    rate,
                    mbps: rate * bytes / 1e6,
                    cpu_per_m: m(&|s| s.cpu / (records as f64 / 1e6)),
                    rss_mb: m(&|s| s.maxrss_kb as f64 / 1024.0),
                    failed: m(&|s| s.failed as f64),
                    lost: m(&|s| records.saturating_sub(s.ok + s.failed) as f64),
                    broker_cpu_per_m: m(&|s| s.broker_cpu / (records as f64 / 1e6)),
                    achieved: m(&|s| s.ok as f64 / s.secs),
                    latency_ms: v[0].latency_us.is_some().then(|| {
                        [0, 1, 2].map(|q| m(&|s| s.latency_us.map_or(f64::NAN, |l| l[q])) / 1e3)
                    }),
                }
            });
            (
                *p,
                Row {
                    figures,
                    errors,
                    runs: all.len(),
                },
            )
        })
        .collect()
}

/// The title of a workload's table.
fn describe(w: Workload) -> String {
    format!(
        "{} B values, {} keys{}",
        w.value_bytes,
        if w.keyed { "8-byte" } else { "null" },
        match w.codec {
            Codec::None => String::new(),
            c => format!(", {}", c.name()),
        }
    )
}

/// The note under a table for a row some of whose runs gave no figures.
fn partial_note(p: &str, row: &Row) -> Option<String> {
    (!row.errors.is_empty() && row.figures.is_some()).then(|| {
        format!(
            "{p}: {} of {} run(s) gave no figures: {}",
            row.errors.len(),
            row.runs,
            row.errors[0]
        )
    })
}

fn print_table(name: &str, w: Workload, producers: &[String], rows: &BTreeMap<&str, Row>) {
    println!();
    println!("== {name}: {} ==", describe(w));
    println!(
        "{:<16} {:>10} {:>8} {:>11} {:>9} {:>7} {:>6} {:>10} | {:>7} {:>7} {:>7} {:>7}",
        "producer",
        "records/s",
        "MB/s",
        "CPU-s/M",
        "RSS MB",
        "failed",
        "lost",
        "broker CPU",
        "x rate",
        "x MB/s",
        "x CPU",
        "x RSS"
    );
    let base = rows.get(BASELINE).and_then(|r| r.figures.as_ref());
    let mut notes = Vec::new();
    for p in producers {
        let Some(row) = rows.get(p.as_str()) else {
            continue;
        };
        notes.extend(partial_note(p, row));
        let Some(x) = row.figures.as_ref() else {
            println!("{p:<16} no figures: {}", row.errors[0]);
            continue;
        };
        let ratio = |get: fn(&Figures) -> f64| {
            base.map_or("-".to_string(), |b| format!("{:.2}", get(x) / get(b)))
        };
        println!(
            "{:<16} {:>10.0} {:>8.1} {:>11.3} {:>9.1} {:>7.0} {:>6.0} {:>10.3} | {:>7} {:>7} {:>7} {:>7}",
            p,
            x.rate,
            x.mbps,
            x.cpu_per_m,
            x.rss_mb,
            x.failed,
            x.lost,
            x.broker_cpu_per_m,
            ratio(|f| f.rate),
            ratio(|f| f.mbps),
            ratio(|f| f.cpu_per_m),
            ratio(|f| f.rss_mb)
        );
    }
    for n in notes {
        println!("  note: {n}");
    }
}

/// The p99 of a latency row over librdkafka's, or `-`.
fn p99_ratio(x: &Figures, base: Option<&Figures>) -> String {
    match (x.latency_ms, base.and_then(|b| b.latency_ms)) {
        (Some(l), Some(b)) => format!("{:.2}", l[1] / b[1]),
        _ => "-".to_string(),
    }
}

fn print_latency_table(name: &str, rate: f64, producers: &[String], rows: &BTreeMap<&str, Row>) {
    println!();
    println!(
        "== {name}: 100 B values, null keys, open loop at {rate:.0} records/s, delivery latency =="
    );
    println!(
        "{:<16} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>6} | {:>7}",
        "producer",
        "target/s",
        "achieved/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "failed",
        "lost",
        "x p99"
    );
    let base = rows.get(BASELINE).and_then(|r| r.figures.as_ref());
    let mut notes = Vec::new();
    for p in producers {
        let Some(row) = rows.get(p.as_str()) else {
            continue;
        };
        notes.extend(partial_note(p, row));
        let Some(x) = row.figures.as_ref() else {
            println!("{p:<16} no figures: {}", row.errors[0]);
            continue;
        };
        let [p50, p99, p999] = x.latency_ms.unwrap_or([f64::NAN; 3]);
        println!(
            "{:<16} {:>10.0} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>7.0} {:>6.0} | {:>7}",
            p,
            rate,
            x.achieved,
            p50,
            p99,
            p999,
            x.failed,
            x.lost,
            p99_ratio(x, base)
        );
    }
    for n in notes {
        println!("  note: {n}");
    }
}

/// A table cell of a row that gave no figures: the reason, on one line, without `|`.
fn md_reason(row: &Row) -> String {
    format!(
        "no figures: {}",
        row.errors[0].replace('|', "/").replace('\n', " ")
    )
}

/// One workload's rows of the README's throughput table.
fn markdown_throughput(w: Workload, producers: &[String], rows: &BTreeMap<&str, Row>) -> String {
    let base = rows.get(BASELINE).and_then(|r| r.figures.as_ref());
    let mut out = String::new();
    let mut first = true;
    for p in producers {
        let Some(row) = rows.get(p.as_str()) else {
            continue;
        };
        let label = if std::mem::take(&mut first) {
            describe(w)
        } else {
            String::new()
        };
        let Some(x) = row.figures.as_ref() else {
            out += &format!("| {label} | {p} | {} | | | | | | |\n", md_reason(row));
            continue;
        };
        let cell = |v: String, get: fn(&Figures) -> f64| match base {
            Some(b) => format!("{v} ({:.2})", get(x) / get(b)),
            None => v,
        };
        out += &format!(
            "| {label} | {p} | {} | {} | {} | {} | {:.0} | {:.0} | {:.3} |\n",
            cell(thousands(x.rate), |f| f.rate),
            cell(format!("{:.1}", x.mbps), |f| f.mbps),
            cell(format!("{:.3}", x.cpu_per_m), |f| f.cpu_per_m),
            cell(format!("{:.1}", x.rss_mb), |f| f.rss_mb),
            x.failed,
            x.lost,
            x.broker_cpu_per_m
        );
    }
    out
}

/// The README's latency table.
fn markdown_latency(rate: f64, producers: &[String], rows: &BTreeMap<&str, Row>) -> String {
    let base = rows.get(BASELINE).and_then(|r| r.figures.as_ref());
    let mut out = format!(
        "Latency: 100 B values, null keys, an open-loop sender at {} records/s:\n\n\
         | producer | target records/s | achieved records/s | p50 ms | p99 ms (x) | p99.9 ms | \
         failed | lost |\n|---|---|---|---|---|---|---|---|\n",
        thousands(rate)
    );
    for p in producers {
        let Some(row) = rows.get(p.as_str()) else {
            continue;
        };
        let Some(x) = row.figures.as_ref() else {
            out += &format!(
                "| {p} | {} | {} | | | | | |\n",
                thousands(rate),
                md_reason(row)
            );
            continue;
        };
        let [p50, p99, p999] = x.latency_ms.unwrap_or([f64::NAN; 3]);
        out += &format!(
            "| {p} | {} | {} | {p50:.2} | {p99:.2} ({}) | {p999:.2} | {:.0} | {:.0} |\n",
            thousands(rate),
            thousands(x.achieved),
            p99_ratio(x, base),
            x.failed,
            x.lost
        );
    }
    out
}

/// `1234567.8` as `1,234,568`.
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 && c.is_ascii_digit() {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl Broker {
    fn name(self) -> &'static str {
        match self {
            Broker::Mock => "mock",
            Broker::Kafka => "kafka",
        }
    }
}

/// `text` with what lies between `broker`'s marker comments replaced by `body`; an error if
/// the markers are missing, repeated or out of order.
fn replace_marked(text: &str, broker: Broker, body: &str) -> Result<String, Error> {
    let begin = format!("<!-- bench_e2e {} begin -->", broker.name());
    let end = format!("<!-- bench_e2e {} end -->", broker.name());
    let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) else {
        return Err(format!("no {begin} ... {end} markers").into());
    };
    if text.matches(&begin).count() != 1 || text.matches(&end).count() != 1 || e < b {
        return Err(format!("the {begin} ... {end} markers must appear once, in order").into());
    }
    let inner = b + begin.len();
    Ok(format!("{}\n{body}{}", &text[..inner], &text[e..]))
}

/// The line above the README's tables: the command, commit, date, records and runs.
fn provenance(args: &[String], plan: &Plan, broker: Broker) -> String {
    let git = |a: &[&str]| {
        Command::new("git")
            .args(a)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]).map_or("unknown".to_string(), |c| {
        let dirty =
            git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        if dirty {
            format!("{c} with uncommitted changes")
        } else {
            c
        }
    });
    let command = if args.is_empty() {
        "cargo run --release --example bench_e2e".to_string()
    } else {
        format!(
            "cargo run --release --example bench_e2e -- {}",
            args.join(" ")
        )
    };
    format!(
        "Generated by `{command}` on commit {commit}, {} (UTC), {} records per run, medians of \
         {} run(s), {}; ratios (x) to `{BASELINE}` on the same broker.\n",
        utc_date(),
        thousands(plan.records as f64),
        plan.runs,
        match broker {
            Broker::Mock =>
                format!("the mock cluster ({BROKERS} brokers, {PARTITIONS} partitions)"),
            Broker::Kafka => format!("Apache Kafka 4.1.1 (one node, {PARTITIONS} partitions)"),
        }
    )
}

/// Today's date (UTC) as `YYYY-MM-DD`, from the system clock.
fn utc_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
