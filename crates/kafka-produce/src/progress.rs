//! Progress while producing: a bar on a terminal (indicatif), plain periodic lines otherwise,
//! always with delivered and failed apart.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What has happened to the records so far; updated by the sender and the delivery callback,
/// read by the progress display.
#[derive(Debug, Default)]
pub struct Counts {
    /// Records handed to the producer.
    pub sent: AtomicU64,
    /// Records acknowledged by the cluster.
    pub delivered: AtomicU64,
    /// Records that failed (each with its report).
    pub failed: AtomicU64,
}

impl Counts {
    /// (sent, delivered, failed) now.
    pub fn read(&self) -> (u64, u64, u64) {
        (
            self.sent.load(Ordering::Relaxed),
            self.delivered.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// A bar on stderr, redrawn ten times a second.
    Bar,
    /// A line on stderr every this often.
    Lines(Duration),
    /// Nothing.
    Off,
}

impl Display {
    /// A bar when stderr is a terminal, else a line every `every`.
    pub fn auto(every: Duration) -> Display {
        if std::io::stderr().is_terminal() {
            Display::Bar
        } else {
            Display::Lines(every)
        }
    }
}

/// The running display: a thread that redraws the bar or prints the lines until
/// [`Progress::finish`].
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts showing `counts` in `display`; `total` is the number of records expected, when
    /// known (a bar then shows how far along it is).
    pub fn start(display: Display, total: Option<u64>, counts: Arc<Counts>) -> Progress {
        let (stop, stopped) = mpsc::channel::<()>();
        let started = Instant::now();
        let (bar, every) = match display {
            Display::Off => {
                return Progress {
                    bar: None,
                    stop: None,
                    thread: None,
                }
            }
            Display::Bar => {
                let bar = match total {
                    Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr())
                        .with_style(
                            ProgressStyle::with_template(
                                "[{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
                            )
                            .expect("a valid template"),
                        ),
                    None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
                        .with_style(
                            ProgressStyle::with_template("[{elapsed_precise}] {spinner} {msg}")
                                .expect("a valid template"),
                        ),
                };
                (Some(bar), Duration::from_millis(100))
            }
            Display::Lines(every) => (None, every),
        };
        let shown = bar.clone();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || loop {
                let stopping = match stopped.recv_timeout(every) {
                    Err(mpsc::RecvTimeoutError::Timeout) => false,
                    Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => true,
                };
                let (sent, delivered, failed) = counts.read();
                let secs = started.elapsed().as_secs_f64().max(1e-9);
                let rate = (delivered + failed) as f64 / secs;
                match &shown {
                    Some(bar) => {
                        bar.set_position(delivered + failed);
                        bar.set_message(format!(
                            "{delivered} delivered, {failed} failed ({rate:.0}/s)"
                        ));
                    }
                    None if !stopping => eprintln!(
                        "{:.0} s: {sent} sent, {delivered} delivered, {failed} failed ({rate:.0} records/s)",
                        secs
                    ),
                    None => {}
                }
                if stopping {
                    return;
                }
            })
            .ok();
        Progress {
            bar,
            stop: Some(stop),
            thread,
        }
    }

    /// Prints `line` on stderr without tearing the bar.
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// Runs `f` (which writes to the terminal) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    /// A handle for [`Progress::println`] from another thread (the delivery callback).
    pub fn printer(&self) -> Printer {
        Printer(self.bar.clone())
    }

    /// Draws the last state and stops the display.
    pub fn finish(mut self) {
        self.stop_thread();
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }

    fn stop_thread(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// Prints lines above the progress bar, from any thread.
#[derive(Debug, Clone)]
pub struct Printer(Option<ProgressBar>);

impl Printer {
    /// Runs `f` (which writes to stderr) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }
}
