//! The diagnosis ("why is it slow?", [`producer_core::diagnosis`]) on stderr: once at the end
//! of every run, after the summary, and with `--diagnose` every [`EVERY`] while producing.

use std::time::Duration;

use producer_core::Diagnosis;
use producer_tokio::ProducerHandle;
use tokio::task::JoinHandle;

use crate::progress::Printer;

/// How often `--diagnose` prints: as often as the progress lines.
pub(crate) const EVERY: Duration = Duration::from_secs(5);

/// With `--diagnose` (`on`), starts printing `producer`'s diagnosis every [`EVERY`] (above the
/// progress bar, through `printer`) on the current runtime; stop it with [`stop`]. Call it
/// right after the producer started.
#[must_use = "the printing runs until stopped"]
pub(crate) fn start(
    on: bool,
    producer: &ProducerHandle,
    printer: Printer,
) -> Option<JoinHandle<()>> {
    on.then(|| {
        let producer = producer.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(EVERY);
            ticks.tick().await; // the first tick is at once: nothing to say yet
            loop {
                ticks.tick().await;
                let d = producer.diagnose().await;
                printer.suspend(|| eprint!("{d}"));
            }
        })
    })
}

/// Stops the periodic printing, and takes the diagnosis for the end of the run. Call it once
/// the run is over (closed, or stopped early).
pub(crate) async fn stop(printing: Option<JoinHandle<()>>, producer: &ProducerHandle) -> Diagnosis {
    if let Some(p) = printing {
        p.abort();
    }
    producer.diagnose().await
}
