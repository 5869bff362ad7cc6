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
//! cargo run --release --example bench_e2e -- --scale --readme README.md --plot docs/bench_scale.svg
//! cargo run --release --example bench_e2e -- --saturation --broker both --readme README.md
//! cargo run --release --example bench_e2e -- --broker kafka --defaults --readme README.md \
//!     --workloads null100,key8,val1000 \
//!     --producers rdkafka,rdkafka-idem,tokio-batch-idem,mio-idem,franz-go-idem,java-idem
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
//!   small and large records. Our throughput workers also report the most bytes their
//!   producer held against `buffer_memory` (a metrics snapshot every 2 ms), after the RSS in
//!   each run's line.
//! * `--mock-rtt-ms N`: every mock broker answers N ms late (`MockKafka::set_rtt`), so a
//!   producer faster than that fills its buffer: what `--buffer-memory` is measured with.
//! * `--baseline-exe PATH`: another build of this example (an older commit's, copied out of its
//!   target directory); a producer named `NAME@base` (`tokio@base`, `mio-idem@base`, ...) runs
//!   NAME's worker from that build, beside this build's `NAME` in the same invocation: a
//!   before/after comparison whose runs interleave on the same machine and mock.
//! * `NAME+qdN` (`tokio+qd50`, `mio-idem+qd100`, `mio@base+qd20`, ...): our producer NAME
//!   with the queue-delay limit at N ms (`queue.delay.target.ms` N, passed to the worker as
//!   `--queue-delay-ms N`; `+qd0` turns the limit off, which is otherwise on at its default
//!   of 20 ms), beside NAME in the same invocation.
//! * `NAME+growN` (`mio-idem+grow0`, `tokio-batch-idem+grow262144`, ...): our producer NAME
//!   with `batch.grow.max.bytes` N (passed to the worker as `--batch-grow-max N`; `+grow0`
//!   turns growth off), beside NAME in the same invocation. It goes last when combined with
//!   `+qdN` (`mio-idem+qd50+grow0`).
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
//! * `--defaults`: every producer at its shipped defaults instead of the equal settings below
//!   (ours, librdkafka, the Java and franz-go peers: no batch size, linger, in-flight or buffer
//!   setting; acks=all and the row's idempotence stay); `--readme` then writes between the
//!   `<!-- bench_e2e kafka-defaults begin -->` (`mock-defaults`) markers. krafka and
//!   Confluent's client have no such mode (their rows say so).
//! * `--partitions N`, `--topics N`: every run's topics: N topics (`bench-0` ..) of N
//!   partitions each instead of one `bench` topic of 12; record `i` goes to topic `i mod N`.
//! * `--instances N`: N producers in each producer process (ours, librdkafka's and the Java
//!   peer's), each sending its share of the records from its own thread (our tokio rows on one
//!   shared runtime); not with the `latency` workload.
//! * `--scale`: the scale sweep instead of the workloads, on one single-node Kafka whose topics
//!   each point creates once (see the `scale` module): `--scale-points a,b,...` narrows it,
//!   `--records N` caps each point's records, `--runs N` sets every point's runs, `--readme`
//!   writes between the `<!-- bench_e2e scale ... -->` markers and `--plot PATH.svg` draws CPU
//!   and peak RSS against partitions (the `plot` module).
//! * `--saturation`: latency under saturation instead of the workloads (see the `saturation`
//!   module): on each broker of `--broker`, every API row of ours (`tokio-idem`,
//!   `tokio-cb-idem`, `tokio-batch-idem`, `mio-idem`, `mio-batch-idem` unless `--producers`
//!   says) unthrottled on `null100` with the queue-delay limit on (the default) and off
//!   (`NAME+qd0`), then the open-loop `latency` workload at half of the higher of the two
//!   records/s;
//!   one table per broker (records/s, the "from send" average and p99, the p99 at half the
//!   peak, peak RSS, bytes buffered, each target met or not), which `--readme` writes between
//!   the `<!-- bench_e2e saturation-mock ... -->` (`saturation-kafka`) markers. Takes
//!   `--runs`, `--records`, `--batch-size`, `--buffer-memory`, `--mock-rtt-ms`.
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
//!   RSS (`ru_maxrss`). The worker builds its payloads before it starts the clock. Run by
//!   hand (under `valgrind --tool=callgrind`, against one long-lived `bench_e2e mock
//!   --partitions N`), `worker --linger-ms N` sets our linger (to fill batches of keyed
//!   records over many partitions), and our mio and tokio workers (but the open-loop
//!   `latency` one) print a `REQUESTS` line: Produce requests, batches, records, records per
//!   batch and per request.
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
//!   record. The `-batch` rows hand their API (`send_batch_detached`, `send_batch_timeout`) a
//!   burst of 1,024 records when the burst's first record is due, each record timed from
//!   then (its send call). Achieved rate: delivered records over the time from the schedule's
//!   start to the last report.
//!
//! Values are slices of a 1 MiB arena of pseudo-random words (compressible about like text),
//! keys slices of a 512 KiB arena. Our producers get them as `Bytes` slices (no copy:
//! `Record` carries `Bytes`); librdkafka gets borrowed slices and copies them into its queue
//! (`RD_KAFKA_MSG_F_COPY`, what `BaseProducer::send` does).
//!
//! # Latency from the send call, in the throughput workloads
//! Our workers also time one record in 64 of the throughput workloads (the clock is read for
//! those only, so the timing costs the producer's figures next to nothing) from just before its send
//! call (so a send that waits for room counts its wait, as `kafka-producer-perf-test` counts
//! from before `send`) to its report, and give the average and p99 (`acc_avg_us`,
//! `acc_p99_us`, on each run's `RESULT` line; "from send" on the coordinator's run lines): a
//! producer that lets its buffer fill shows it here. `tokio` awaits its delivery futures in
//! send order, so its figure is an upper bound; with `--instances N` the average is over all
//! instances' records and the p99 the highest instance's (an upper bound). The per-record
//! times live in the `send_times` module.
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
//!   sending thread calls `send_timeout` with no timeout, which waits in the producer while
//!   the queue is full; the delivery callback counts.
//! * `mio-batch`, `mio-batch-idem`: the same, but records go in with
//!   `ThreadedProducer::send_batch_timeout` in bursts of 1024 (one queue lock and one
//!   wall-clock reading per burst, as librdkafka's `rd_kafka_produce_batch` offers), with no
//!   timeout: it waits in the producer while the queue is full.
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

mod cluster;
mod coordinator;
mod open_loop;
mod payloads;
mod peers;
mod plan;
mod plot;
mod rdkafka_worker;
mod saturation;
mod scale;
mod send_times;
mod tables;
mod worker;

use crate::cluster::{kafka_main, mock_main};
use crate::coordinator::coordinator_main;
use crate::worker::worker_main;
use std::process::ExitCode;
use std::time::Duration;

pub(crate) const TOPIC: &str = "bench";

pub(crate) const PARTITIONS: i32 = 12;

pub(crate) const BROKERS: i32 = 3;

pub(crate) const WORKER_TIMEOUT: Duration = Duration::from_secs(600);

/// The workloads, in the order they run: `latency` last, as its rate comes from `null100`.
pub(crate) const ALL_WORKLOADS: &[&str] = &["null100", "key8", "val1000", "lz4", "zstd", "latency"];

pub(crate) const ALL_PRODUCERS: &[&str] = &[
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
pub(crate) const OTHER_PRODUCERS: &[&str] = &[
    "java",
    "java-idem",
    "krafka",
    "krafka-idem",
    "confluent",
    "confluent-idem",
];

/// The baseline of the ratio columns.
pub(crate) const BASELINE: &str = "rdkafka";

/// Every producer's batch size unless `--batch-size` says: Java's default and ours.
pub(crate) const DEFAULT_BATCH_SIZE: usize = 16_384;

/// Our producers' `buffer_memory` and librdkafka's unless `--buffer-memory` says.
pub(crate) const DEFAULT_BUFFER_MEMORY: usize = 64 << 20;

pub(crate) type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("mock") => mock_main(&args[1..]),
        Some("kafka") => kafka_main(&args[1..]),
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

pub(crate) fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}
