//! Produce mode: lines from stdin or files.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use producer_core::Record;
use producer_tokio::ProducerHandle;

use crate::args::{Args, LineFormat};
use crate::progress::{Counts, Display, Progress};
use crate::tally::Tally;
use crate::{runtime, Failure};

/// Records handed to the producer at a time (fewer when the input has no more ready).
const CHUNK: usize = 1024;

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

/// Reads up to [`CHUNK`] lines, fewer when reading more would wait for input (an
/// interactive stdin): the records of the lines read, the lines that cannot be records, and
/// whether the input ended.
fn read_chunk(
    input: &mut Input,
    format: &LineFormat,
    tally: &Tally,
    seq: &mut u64,
    out: &mut Vec<(Record, u64)>,
) -> io::Result<bool> {
    let mut line = Vec::new();
    while out.len() < CHUNK {
        line.clear();
        if input.reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(true);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let bytes = Bytes::copy_from_slice(&line);
        match format.record(bytes) {
            Ok(record) => {
                out.push((record, tally.tag(*seq, Instant::now())));
                *seq += 1;
            }
            Err(reason) => tally.refuse_line(reason, &line),
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
    let rt = runtime()?;
    let outcome = rt.block_on(async {
        let producer = tally.start_producer(config)?;
        let sending = send_all(&producer, inputs, format, &tally);
        // Ok(Some((cause, whether the whole input was read))) when stopped early.
        let result = tokio::select! {
            read = sending => match read {
                Ok(()) => {
                    tokio::select! {
                        () = producer.close() => Ok(None),
                        cause = tally.unreachable() => Ok(Some((cause, true))),
                    }
                }
                Err(e) => {
                    producer.close().await;
                    Err(e)
                }
            },
            cause = tally.unreachable() => Ok(Some((cause, false))),
        };
        Ok::<_, Failure>(result)
    })?;
    // Whatever is still running (a producer waiting out its timeouts after an early stop) is
    // not waited for.
    rt.shutdown_background();
    let elapsed = tally.started().elapsed();
    let stopped = match &outcome {
        Ok(Some((cause, all_read))) => Some((cause.clone(), tally.stop_early(cause), *all_read)),
        _ => None,
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

/// Reads every input in order on a thread of its own (so a stdin that waits for input never
/// keeps this task from noticing an unreachable cluster) and hands the records to the
/// producer in chunks.
async fn send_all(
    producer: &ProducerHandle,
    inputs: Vec<Input>,
    format: LineFormat,
    tally: &Arc<Tally>,
) -> Result<(), Failure> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Vec<(Record, u64)>, Failure>>(4);
    let reader_tally = tally.clone();
    std::thread::Builder::new()
        .name("input".into())
        .spawn(move || {
            let mut seq = 0u64;
            for mut input in inputs {
                loop {
                    let mut chunk = Vec::with_capacity(CHUNK);
                    let read = read_chunk(&mut input, &format, &reader_tally, &mut seq, &mut chunk);
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
    while let Some(chunk) = rx.recv().await {
        let mut chunk = chunk?;
        tally.sending(&chunk);
        if producer.send_batch_detached(&mut chunk).await.is_err() {
            return Err(Failure::Partial("the producer closed".into()));
        }
    }
    Ok(())
}
