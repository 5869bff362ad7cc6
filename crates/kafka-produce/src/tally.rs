//! What both modes keep while producing: counts, latencies, the records not yet reported (to
//! write them out if the run stops early), and the `--failed` output.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use producer_core::{ConnectionError, Event, Record};
use producer_tokio::{DeliveryError, ProducerHandle, Report};
use tokio::sync::watch;

use crate::args::LineFormat;
use crate::latency::Latencies;
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
        let reason = reason.replace(['\t', '\n', '\r'], " ");
        match self {
            FailedSink::File(w) => {
                w.write_all(reason.as_bytes())?;
                w.write_all(b"\t")?;
                w.write_all(line)?;
                w.write_all(b"\n")
            }
            FailedSink::Stderr(p) => p.suspend(|| {
                let mut e = io::stderr().lock();
                e.write_all(reason.as_bytes())?;
                e.write_all(b"\t")?;
                e.write_all(line)?;
                e.write_all(b"\n")
            }),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            FailedSink::File(w) => w.flush(),
            FailedSink::Stderr(_) => Ok(()),
        }
    }
}

struct Inner {
    latencies: Latencies,
    failed: FailedSink,
    /// Records sent and not reported, by tag (produce mode; perf records are generated).
    unreported: Option<HashMap<u64, Record>>,
    /// The run stopped early: reports arriving now were accounted for already.
    stopped: bool,
    /// The first error writing `--failed`.
    write_error: Option<io::Error>,
}

/// The state the sender, the delivery callback and the event callback share.
pub(crate) struct Tally {
    pub(crate) counts: Arc<Counts>,
    started: Instant,
    format: Option<LineFormat>,
    inner: Mutex<Inner>,
    /// Set, once, when no bootstrap broker could be reached: the cause.
    unreachable: watch::Sender<Option<ConnectionError>>,
}

/// Tags carry the planned send time (µs since the start, above bit 24) and a sequence number
/// (its low 24 bits), so a report gives its latency without a lookup and tags stay unique.
const SEQ_BITS: u32 = 24;

impl Tally {
    /// A tally writing failures to `failed` (or stderr through `printer`); `format` is the
    /// line format of produce mode (records are then kept until reported), `None` in perf mode.
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
                unreported: format.as_ref().map(|_| HashMap::new()),
                stopped: false,
                write_error: None,
            }),
            format,
            unreachable: watch::channel(None).0,
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

    /// Registers records about to be sent (produce mode keeps them until their report).
    pub(crate) fn sending(&self, records: &[(Record, u64)]) {
        use std::sync::atomic::Ordering;
        self.counts
            .sent
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        let mut inner = self.lock();
        if let Some(map) = inner.unreported.as_mut() {
            map.extend(records.iter().map(|(r, tag)| (*tag, r.clone())));
        }
    }

    /// A record that could not even be made (a line without its topic): failed at once.
    /// After an early stop the line counts as not read (the reader thread may still be at it).
    pub(crate) fn refuse_line(&self, reason: &str, line: &[u8]) {
        use std::sync::atomic::Ordering;
        let mut inner = self.lock();
        if inner.stopped {
            return;
        }
        self.counts.sent.fetch_add(1, Ordering::Relaxed);
        self.counts.failed.fetch_add(1, Ordering::Relaxed);
        Self::write_failed(&mut inner, reason, line);
    }

    fn write_failed(inner: &mut Inner, reason: &str, line: &[u8]) {
        if let Err(e) = inner.failed.write(reason, line) {
            inner.write_error.get_or_insert(e);
        }
    }

    /// The line of a failed record, for `--failed`.
    fn line_of(&self, tag: u64, record: Option<&Record>) -> Vec<u8> {
        match (&self.format, record) {
            (Some(f), Some(r)) => f.line(r),
            _ => format!("(generated record {})", tag & ((1 << SEQ_BITS) - 1)).into_bytes(),
        }
    }

    /// One record's report (the delivery callback).
    pub(crate) fn report(&self, report: Report) {
        use std::sync::atomic::Ordering;
        let planned = Duration::from_micros(report.tag >> SEQ_BITS);
        let latency = self.started.elapsed().saturating_sub(planned);
        let mut inner = self.lock();
        if inner.stopped {
            return;
        }
        let kept = inner
            .unreported
            .as_mut()
            .and_then(|m| m.remove(&report.tag));
        inner.latencies.record(latency);
        match report.result {
            Ok(_) => {
                self.counts.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
                let (reason, record) = match e {
                    DeliveryError::Failed(f) => (f.error.to_string(), Some(f.record)),
                    e => (e.to_string(), kept),
                };
                let line = self.line_of(report.tag, record.as_ref());
                Self::write_failed(&mut inner, &reason, &line);
            }
        }
    }

    /// A producer event (the event callback): no bootstrap broker reachable stops the run.
    fn event(&self, event: &Event) {
        if let Event::AllBrokersDown {
            last_error,
            cluster_reached: false,
        } = event
        {
            self.unreachable.send_if_modified(|cause| {
                let first = cause.is_none();
                cause.get_or_insert_with(|| last_error.clone());
                first
            });
        }
    }

    /// Resolves with the cause once no bootstrap broker could be reached.
    pub(crate) async fn unreachable(&self) -> ConnectionError {
        let mut rx = self.unreachable.subscribe();
        let cause = rx
            .wait_for(Option::is_some)
            .await
            .expect("the sender lives in self");
        cause.clone().expect("waited for Some")
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

    /// The run stops early because of `cause`: every record not reported yet is written to
    /// `--failed` with it, and later reports are ignored. Returns how many there were.
    pub(crate) fn stop_early(&self, cause: &ConnectionError) -> u64 {
        use std::sync::atomic::Ordering;
        let mut inner = self.lock();
        inner.stopped = true;
        let reason =
            format!("not delivered: no bootstrap broker could be reached ({cause}); stopped early");
        let left: Vec<(u64, Record)> = match inner.unreported.as_mut() {
            Some(m) => {
                let mut v: Vec<_> = m.drain().collect();
                v.sort_by_key(|(tag, _)| *tag);
                v
            }
            None => Vec::new(),
        };
        let (sent, delivered, failed) = self.counts.read();
        let unreported = match &inner.unreported {
            Some(_) => left.len() as u64,
            None => sent - delivered - failed,
        };
        for (tag, record) in &left {
            let line = self.line_of(*tag, Some(record));
            Self::write_failed(&mut inner, &reason, &line);
        }
        self.counts.failed.fetch_add(unreported, Ordering::Relaxed);
        unreported
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
