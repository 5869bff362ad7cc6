//! What both modes keep while producing: counts, latencies, whether the cluster was reached,
//! and the `--failed` output.
//!
//! No copy of a record sent is kept: a record that fails comes back in its report, and is
//! written to `--failed` from there. The one way a run ends without a report for every record
//! sent (the early stop when no bootstrap broker can be reached) cannot leave records in the
//! producer: nothing is sent before the cluster is reached (see [`Tally::reached`]), and once it
//! was, the run no longer stops early.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use producer_core::{ConnectionError, Event, Record};
use producer_tokio::{ProducerHandle, Report};
use tokio::sync::watch;

use crate::args::LineFormat;
use crate::latency::Latencies;
use crate::lines::LineError;
use crate::progress::{Counts, Printer};
use crate::Failure;

/// Where failed records go.
enum FailedSink {
    File(BufWriter<File>),
    Stderr(Printer),
}

impl FailedSink {
    /// One failed record: the reason, a tab, the record as read.
    fn write(&mut self, reason: &str, line: &[u8]) -> io::Result<()> {
        self.with(|w| {
            write_reason(w, reason)?;
            w.write_all(line)?;
            w.write_all(b"\n")
        })
    }

    /// Writes with `f` to the file, or to stderr with the progress display out of the way.
    fn with(&mut self, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
        match self {
            FailedSink::File(w) => f(w),
            FailedSink::Stderr(p) => p.suspend(|| f(&mut io::stderr().lock())),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            FailedSink::File(w) => w.flush(),
            FailedSink::Stderr(_) => Ok(()),
        }
    }
}

/// A failed record's reason and the tab after it (tabs and line ends in the reason become
/// spaces, so the line stays one line of two fields).
fn write_reason(w: &mut dyn Write, reason: &str) -> io::Result<()> {
    w.write_all(reason.replace(['\t', '\n', '\r'], " ").as_bytes())?;
    w.write_all(b"\t")
}

/// Whether the cluster was reached: the first of a ready connection and the failure of every
/// bootstrap connection decides, once.
#[derive(Debug, Clone)]
enum Reach {
    Unknown,
    Reached,
    Unreachable(ConnectionError),
}

struct Inner {
    latencies: Latencies,
    failed: FailedSink,
    /// The run stopped early: reports arriving now were accounted for already.
    stopped: bool,
    /// A line longer than `max.request.size` is being written to `--failed` piece by piece as
    /// the input thread reads it ([`Tally::refuse_long_line`]): other failed records wait in
    /// `deferred` meanwhile, so that lines do not interleave. (They are records the producer
    /// handed back, and lines refused while the long line is read: no more than the producer
    /// held.)
    long_line: bool,
    deferred: Vec<(String, Vec<u8>)>,
    /// The first error writing `--failed`.
    write_error: Option<io::Error>,
}

/// The state the sender, the delivery callback and the event callback share.
pub(crate) struct Tally {
    pub(crate) counts: Arc<Counts>,
    started: Instant,
    format: Option<LineFormat>,
    inner: Mutex<Inner>,
    /// Whether the cluster was reached, and if not, why.
    reach: watch::Sender<Reach>,
}

/// Tags carry the planned send time (µs since the start, above bit 24) and a sequence number
/// (its low 24 bits), so a report gives its latency without a lookup and tags stay unique.
const SEQ_BITS: u32 = 24;

impl Tally {
    /// A tally writing failures to `failed` (or stderr through `printer`); `format` is the
    /// line format of produce mode (failed records are written back as lines), `None` in perf
    /// mode.
    pub(crate) fn new(
        failed: Option<&Path>,
        printer: Printer,
        format: Option<LineFormat>,
        counts: Arc<Counts>,
    ) -> Result<Arc<Tally>, Failure> {
        let sink = match failed {
            Some(path) => FailedSink::File(BufWriter::new(File::create(path).map_err(|e| {
                Failure::Usage(format!("cannot create --failed {}: {e}", path.display()))
            })?)),
            None => FailedSink::Stderr(printer),
        };
        Ok(Arc::new(Tally {
            counts,
            started: Instant::now(),
            inner: Mutex::new(Inner {
                latencies: Latencies::new(),
                failed: sink,
                stopped: false,
                long_line: false,
                deferred: Vec::new(),
                write_error: None,
            }),
            format,
            reach: watch::channel(Reach::Unknown).0,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When the run started (latencies count from the planned send times after it).
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// The tag of record number `seq`, planned for `at`.
    pub(crate) fn tag(&self, seq: u64, at: Instant) -> u64 {
        let us = at.saturating_duration_since(self.started).as_micros() as u64;
        (us << SEQ_BITS) | (seq & ((1 << SEQ_BITS) - 1))
    }

    /// Counts `n` records about to be handed to the producer.
    pub(crate) fn sending(&self, n: usize) {
        use std::sync::atomic::Ordering;
        self.counts.sent.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// A record that could not even be made (a line without its topic): failed at once.
    /// After an early stop the line counts as not read (the reader thread may still be at it).
    pub(crate) fn refuse_line(&self, reason: &LineError, line: &[u8]) {
        use std::sync::atomic::Ordering;
        let mut inner = self.lock();
        if inner.stopped {
            return;
        }
        self.counts.sent.fetch_add(1, Ordering::Relaxed);
        self.counts.failed.fetch_add(1, Ordering::Relaxed);
        Self::write_failed(&mut inner, &reason.to_string(), line);
    }

    /// A line longer than `max.request.size` (`reason`, [`LineError::TooLong`]) whose first
    /// bytes are `start`: failed at once. `rest` reads the rest of the line, handing it over
    /// in pieces, which go to `--failed` as they come, so the line is never held whole; other
    /// failures are written after it. Returns what `rest` returned (an error reading the
    /// input: the line is cut there). After an early stop nothing is written or read.
    pub(crate) fn refuse_long_line(
        &self,
        reason: &LineError,
        start: &[u8],
        rest: impl FnOnce(&mut dyn FnMut(&[u8])) -> io::Result<u64>,
    ) -> io::Result<()> {
        use std::sync::atomic::Ordering;
        {
            let mut inner = self.lock();
            if inner.stopped {
                return Ok(());
            }
            self.counts.sent.fetch_add(1, Ordering::Relaxed);
            self.counts.failed.fetch_add(1, Ordering::Relaxed);
            inner.long_line = true;
            let reason = reason.to_string();
            let written = inner.failed.with(|w| {
                write_reason(w, &reason)?;
                w.write_all(start)
            });
            Self::note(&mut inner, written);
        }
        // The lock is not held while the input is read: reports go on meanwhile.
        let read = rest(&mut |piece| {
            let mut inner = self.lock();
            let written = inner.failed.with(|w| w.write_all(piece));
            Self::note(&mut inner, written);
        });
        let mut inner = self.lock();
        let written = inner.failed.with(|w| w.write_all(b"\n"));
        Self::note(&mut inner, written);
        inner.long_line = false;
        for (reason, line) in std::mem::take(&mut inner.deferred) {
            Self::write_failed(&mut inner, &reason, &line);
        }
        read.map(|_| ())
    }

    fn write_failed(inner: &mut Inner, reason: &str, line: &[u8]) {
        if inner.long_line {
            inner.deferred.push((reason.to_string(), line.to_vec()));
            return;
        }
        let written = inner.failed.write(reason, line);
        Self::note(inner, written);
    }

    /// Keeps the first error writing `--failed`.
    fn note(inner: &mut Inner, written: io::Result<()>) {
        if let Err(e) = written {
            inner.write_error.get_or_insert(e);
        }
    }

    /// The line of a failed record, for `--failed`.
    fn line_of(&self, tag: u64, record: Option<&Record>) -> Vec<u8> {
        match (&self.format, record) {
            (Some(f), Some(r)) => f.line(r),
            (Some(_), None) => {
                format!("(record {}: not handed back)", tag & ((1 << SEQ_BITS) - 1)).into_bytes()
            }
            (None, _) => format!("(generated record {})", tag & ((1 << SEQ_BITS) - 1)).into_bytes(),
        }
    }

    /// One record's report (the delivery callback). A failed record comes back in it, and goes
    /// to `--failed` from there.
    pub(crate) fn report(&self, report: Report) {
        use std::sync::atomic::Ordering;
        let planned = Duration::from_micros(report.tag >> SEQ_BITS);
        let latency = self.started.elapsed().saturating_sub(planned);
        let mut inner = self.lock();
        if inner.stopped {
            return;
        }
        inner.latencies.record(latency);
        match report.result {
            Ok(_) => {
                self.counts.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
                let reason = e.to_string();
                let line = self.line_of(report.tag, e.record());
                Self::write_failed(&mut inner, &reason, &line);
            }
        }
    }

    /// A producer event (the event callback): the first ready connection means the cluster
    /// was reached; no bootstrap broker reachable before that stops the run.
    fn event(&self, event: &Event) {
        let reach = match event {
            Event::BrokerReady { .. } => Reach::Reached,
            Event::AllBrokersDown {
                last_error,
                cluster_reached: false,
            } => Reach::Unreachable(last_error.clone()),
            _ => return,
        };
        self.reach.send_if_modified(|r| match r {
            Reach::Unknown => {
                *r = reach;
                true
            }
            _ => false,
        });
    }

    /// Resolves once a connection to the cluster is ready; never if no bootstrap broker could
    /// be reached (see [`Tally::unreachable`]). Hand the producer no record before: a run
    /// that stops early then has every record it read still in hand.
    pub(crate) async fn reached(&self) {
        let mut rx = self.reach.subscribe();
        let reach = rx
            .wait_for(|r| !matches!(r, Reach::Unknown))
            .await
            .expect("the sender lives in self")
            .clone();
        if let Reach::Unreachable(_) = reach {
            std::future::pending::<()>().await;
        }
    }

    /// Resolves with the cause once no bootstrap broker could be reached (before any
    /// connection was ready); never once the cluster was reached.
    pub(crate) async fn unreachable(&self) -> ConnectionError {
        let mut rx = self.reach.subscribe();
        let reach = rx
            .wait_for(|r| !matches!(r, Reach::Unknown))
            .await
            .expect("the sender lives in self")
            .clone();
        match reach {
            Reach::Unreachable(cause) => cause,
            _ => std::future::pending().await,
        }
    }

    /// Starts the run's producer with `config`, hooked to the tally: every report and event
    /// comes here. Must be called inside the tokio runtime; a producer that cannot start is a
    /// usage failure.
    pub(crate) fn start_producer(
        self: &Arc<Self>,
        config: producer_core::Config,
    ) -> Result<ProducerHandle, Failure> {
        let (reports, events) = (self.clone(), self.clone());
        ProducerHandle::builder(config)
            .on_delivery(move |r| reports.report(r))
            .on_event(move |e| events.event(e))
            .start()
            .map_err(|e| Failure::Usage(format!("cannot start the producer: {e}")))
    }

    /// The run stops early because of `cause`: `unsent`, the records read and not handed to
    /// the producer (in input order), are counted and written to `--failed` with it, and
    /// later reports are ignored. Returns how many records were not delivered.
    pub(crate) fn stop_early(&self, cause: &ConnectionError, unsent: &[(Record, u64)]) -> u64 {
        use std::sync::atomic::Ordering;
        let mut inner = self.lock();
        inner.stopped = true;
        let reason =
            format!("not delivered: no bootstrap broker could be reached ({cause}); stopped early");
        for (record, tag) in unsent {
            let line = self.line_of(*tag, Some(record));
            Self::write_failed(&mut inner, &reason, &line);
        }
        let n = unsent.len() as u64;
        self.counts.sent.fetch_add(n, Ordering::Relaxed);
        self.counts.failed.fetch_add(n, Ordering::Relaxed);
        // Records handed to the producer: none, as nothing is sent before the cluster is
        // reached; were there any, they are counted as not delivered.
        let (sent, delivered, failed) = self.counts.read();
        let in_producer = sent - delivered - failed;
        self.counts.failed.fetch_add(in_producer, Ordering::Relaxed);
        n + in_producer
    }

    /// Records counted as sent that the producer did not take (it closed under the sender):
    /// failed here, with that reason.
    pub(crate) fn not_taken(&self, records: &[(Record, u64)]) {
        use std::sync::atomic::Ordering;
        let mut inner = self.lock();
        for (record, tag) in records {
            let line = self.line_of(*tag, Some(record));
            Self::write_failed(&mut inner, "not sent: the producer closed", &line);
        }
        self.counts
            .failed
            .fetch_add(records.len() as u64, Ordering::Relaxed);
    }

    /// Flushes `--failed` and returns the latencies; an error if writing it failed.
    pub(crate) fn finish(&self) -> Result<Latencies, Failure> {
        let mut inner = self.lock();
        if let Err(e) = inner.failed.flush() {
            inner.write_error.get_or_insert(e);
        }
        if let Some(e) = inner.write_error.take() {
            return Err(Failure::Partial(format!(
                "writing the failed records failed: {e}"
            )));
        }
        Ok(inner.latencies.clone())
    }
}
