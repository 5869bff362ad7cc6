//! Produce mode: lines from stdin or files.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use producer_core::Record;
use producer_tokio::ProducerHandle;

use crate::args::{Args, LineFormat};
use crate::lines::{read_line, rest_of_line, LineError, LineRead};
use crate::progress::{Counts, Display, Progress};
use crate::tally::Tally;
use crate::{runtime, Failure};

/// Records handed to the producer at a time, at most (fewer when the input has no more
/// ready, or when they reach [`CHUNK_BYTES`]).
const CHUNK: usize = 1024;

/// Bytes of lines in one chunk, at most (a line longer than that is a chunk of its own): what
/// the input thread and the channel to the producer hold stays small whatever the lines'
/// length.
const CHUNK_BYTES: usize = 256 * 1024;

/// Chunks read ahead of the producer, at most.
const CHUNKS_AHEAD: usize = 4;

/// One input: its name for messages, and its reader.
struct Input {
    name: String,
    reader: BufReader<Box<dyn Read + Send>>,
}

/// Opens every input first, so a file that cannot be read is a usage error before anything
/// is produced.
fn open_inputs(files: &[PathBuf]) -> Result<Vec<Input>, Failure> {
    if files.is_empty() {
        return Ok(vec![stdin()]);
    }
    files
        .iter()
        .map(|path| {
            if path.as_os_str() == "-" {
                return Ok(stdin());
            }
            let file = File::open(path)
                .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
            if file.metadata().is_ok_and(|m| m.is_dir()) {
                return Err(Failure::Usage(format!(
                    "cannot read {}: it is a directory",
                    path.display()
                )));
            }
            Ok(Input {
                name: path.display().to_string(),
                reader: BufReader::with_capacity(256 * 1024, Box::new(file)),
            })
        })
        .collect()
}

fn stdin() -> Input {
    Input {
        name: "stdin".into(),
        reader: BufReader::with_capacity(256 * 1024, Box::new(io::stdin())),
    }
}

/// Reads up to [`CHUNK`] lines (and [`CHUNK_BYTES`]), fewer when reading more would wait for
/// input (an interactive stdin): the records of the lines read go to `out`, the lines that
/// cannot be records to `--failed` at once (a line longer than `limit`, `max.request.size`,
/// is never held whole). Returns whether the input ended.
fn read_chunk(
    input: &mut Input,
    format: &LineFormat,
    limit: usize,
    tally: &Tally,
    seq: &mut u64,
    out: &mut Vec<(Record, u64)>,
) -> io::Result<bool> {
    let mut line = Vec::new();
    let mut bytes = 0;
    while out.len() < CHUNK && bytes < CHUNK_BYTES {
        line.clear();
        match read_line(&mut input.reader, limit, &mut line)? {
            LineRead::End => return Ok(true),
            LineRead::Line => match format.record(Bytes::copy_from_slice(&line)) {
                Ok(record) => {
                    bytes += line.len();
                    out.push((record, tally.tag(*seq, Instant::now())));
                    *seq += 1;
                }
                Err(reason) => tally.refuse_line(&reason, &line),
            },
            LineRead::TooLong => {
                let reader = &mut input.reader;
                tally.refuse_long_line(&LineError::TooLong { limit }, &line, |piece| {
                    rest_of_line(reader, piece)
                })?;
            }
        }
        if input.reader.buffer().is_empty() {
            // Reading on would wait: send what there is first.
            break;
        }
    }
    Ok(false)
}

pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    let format = args.line_format()?;
    let config = args.config()?;
    let inputs = open_inputs(&args.files)?;
    let counts = Arc::new(Counts::default());
    let display = if args.quiet {
        Display::Off
    } else {
        Display::auto(Duration::from_secs(5))
    };
    let progress = Progress::start(display, None, counts.clone());
    let tally = Tally::new(
        args.failed.as_deref(),
        progress.printer(),
        Some(format.clone()),
        counts.clone(),
    )?;
    let limit = config.max_request_size;
    let rt = runtime()?;
    let mut chunks = read_all(inputs, format, limit, &tally)?;
    let outcome = rt.block_on(async {
        let producer = tally.start_producer(config)?;
        let printing = crate::diagnose::start(args.diagnose, &producer, progress.printer());
        // A chunk received and not (wholly) handed to the producer yet.
        let mut held = Vec::new();
        let sending = send_all(&producer, &mut chunks, &mut held, &tally);
        // Ok(Some((cause, whether the whole input was read))) when stopped early.
        let result = tokio::select! {
            read = sending => match read {
                Ok(()) => {
                    tokio::select! {
                        () = crate::close(&producer, args.timeout) => Ok(None),
                        cause = tally.unreachable() => Ok(Some((cause, true))),
                    }
                }
                Err(e) => {
                    // Records the producer took are reported as it closes; those it did not
                    // take are in `held`.
                    producer.close().await;
                    Err(e)
                }
            },
            cause = tally.unreachable() => Ok(Some((cause, false))),
        };
        // What was read and never handed to the producer: the chunk in hand, then those read
        // ahead (the input thread stops at its next chunk).
        let mut unsent = std::mem::take(&mut held);
        if matches!(result, Ok(Some(_))) {
            chunks.close();
            while let Some(chunk) = chunks.recv().await {
                if let Ok(chunk) = chunk {
                    unsent.extend(chunk);
                }
            }
        }
        let diagnosis = crate::diagnose::stop(printing, &producer).await;
        Ok::<_, Failure>((result, unsent, diagnosis))
    })?;
    let (outcome, unsent, diagnosis) = outcome;
    // Whatever is still running (a producer waiting out its timeouts after an early stop) is
    // not waited for.
    rt.shutdown_background();
    let elapsed = tally.started().elapsed();
    let stopped = match &outcome {
        Ok(Some((cause, all_read))) => {
            Some((cause.clone(), tally.stop_early(cause, &unsent), *all_read))
        }
        _ => {
            // The producer closed under the sender (not expected: only this run closes it):
            // the records it did not take are failed here rather than dropped.
            tally.not_taken(&unsent);
            None
        }
    };
    let latencies = tally.finish();
    progress.finish();
    let (sent, delivered, failed) = counts.read();
    if let Some((cause, n, all_read)) = &stopped {
        eprintln!("no bootstrap broker could be reached: {cause}");
        eprintln!(
            "stopped early: the {n} records not delivered went to the failed records{}",
            if *all_read {
                ""
            } else {
                "; the rest of the input was not read"
            }
        );
    }
    let latencies = latencies?;
    let secs = elapsed.as_secs_f64().max(1e-9);
    eprintln!(
        "read {sent} records: delivered {delivered}, failed {failed} in {secs:.2} s ({:.0} delivered/s)",
        delivered as f64 / secs
    );
    if !latencies.is_empty() {
        eprintln!("delivery latency ms: {}", latencies.summary());
    }
    eprint!("{diagnosis}");
    outcome?;
    if let Some((cause, _, all_read)) = &stopped {
        // Stopped early: not every record was delivered (possibly none was read yet), so the
        // run did not do what was asked, whatever the failed count.
        return Err(Failure::Partial(format!(
            "no bootstrap broker could be reached: {cause}; stopped early{}",
            if *all_read {
                ""
            } else {
                " before the input was read to its end"
            }
        )));
    }
    if failed > 0 {
        let whither = match &args.failed {
            Some(p) => format!("written to {}", p.display()),
            None => "written to stderr".into(),
        };
        return Err(Failure::Partial(format!(
            "{failed} of {sent} records failed ({whither} with their reasons)"
        )));
    }
    Ok(())
}

/// What the input thread hands over: a chunk of records, or the input's failure.
type Chunk = Result<Vec<(Record, u64)>, Failure>;

/// Reads every input in order on a thread of its own (so a stdin that waits for input never
/// keeps the producer's task from noticing an unreachable cluster), a few chunks ahead of the
/// producer at most.
fn read_all(
    inputs: Vec<Input>,
    format: LineFormat,
    limit: usize,
    tally: &Arc<Tally>,
) -> Result<tokio::sync::mpsc::Receiver<Chunk>, Failure> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(CHUNKS_AHEAD);
    let tally = tally.clone();
    std::thread::Builder::new()
        .name("input".into())
        .spawn(move || {
            let mut seq = 0u64;
            for mut input in inputs {
                loop {
                    let mut chunk = Vec::new();
                    let read = read_chunk(&mut input, &format, limit, &tally, &mut seq, &mut chunk);
                    if !chunk.is_empty() && tx.blocking_send(Ok(chunk)).is_err() {
                        return;
                    }
                    match read {
                        Ok(false) => {}
                        Ok(true) => break,
                        Err(e) => {
                            let why =
                                format!("reading {} failed after {seq} records: {e}", input.name);
                            let _ = tx.blocking_send(Err(Failure::Partial(why)));
                            return;
                        }
                    }
                }
            }
        })
        .map_err(|e| Failure::Usage(format!("cannot start the input thread: {e}")))?;
    Ok(rx)
}

/// Hands the chunks to the producer, the first once the cluster is reached (so that a run
/// that stops early because it is not has every record read still in hand). `held` is the
/// chunk being handed over: what the producer did not take is left there.
async fn send_all(
    producer: &ProducerHandle,
    chunks: &mut tokio::sync::mpsc::Receiver<Chunk>,
    held: &mut Vec<(Record, u64)>,
    tally: &Tally,
) -> Result<(), Failure> {
    let mut reached = false;
    while let Some(chunk) = chunks.recv().await {
        *held = chunk?;
        if !reached {
            tally.reached().await;
            reached = true;
        }
        tally.sending(held.len());
        if producer.send_batch_detached(held).await.is_err() {
            return Err(Failure::Partial("the producer closed".into()));
        }
    }
    Ok(())
}
