//! Name resolution off the event loop: one helper thread runs the blocking
//! `ToSocketAddrs` lookups and hands each result back through a bounded channel, waking the
//! loop with a `mio::Waker`.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::thread;

use mio::Waker;

/// Lookups waiting for the helper thread, at most. The core opens few connections (one per
/// broker at a time, with backoff), so this is never reached in practice; a full queue fails
/// the connection attempt, which the core retries after its reconnect backoff.
const JOB_CAPACITY: usize = 64;

/// One lookup to run.
struct Job {
    key: u64,
    host: String,
    port: u16,
}

/// The outcome of one lookup: the connection key it was for, and the addresses or the error.
pub(crate) struct Resolved {
    pub(crate) key: u64,
    pub(crate) result: io::Result<Vec<SocketAddr>>,
}

/// The resolver's helper thread, started at the first lookup. It exits when the driver (and
/// so the job sender) is dropped, after the lookup in progress, if any.
pub(crate) struct Resolver {
    waker: Arc<Waker>,
    jobs: Option<SyncSender<Job>>,
    results: Option<Receiver<Resolved>>,
}

impl Resolver {
    pub(crate) fn new(waker: Arc<Waker>) -> Self {
        Resolver {
            waker,
            jobs: None,
            results: None,
        }
    }

    /// Queues a lookup of `host:port` for the connection `key`. An error means the lookup could
    /// not even be queued (thread spawn failed, queue full); the caller fails the connection.
    pub(crate) fn resolve(&mut self, key: u64, host: String, port: u16) -> io::Result<()> {
        if self.jobs.is_none() {
            self.spawn()?;
        }
        let Some(jobs) = &self.jobs else {
            return Err(io::Error::other("resolver not running"));
        };
        match jobs.try_send(Job { key, host, port }) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "resolver queue full",
            )),
            Err(TrySendError::Disconnected(_)) => {
                // The thread is gone (it cannot panic, but be safe): restart it next time.
                self.jobs = None;
                self.results = None;
                Err(io::Error::other("resolver thread exited"))
            }
        }
    }

    /// The next finished lookup, if any. Never blocks.
    pub(crate) fn try_next(&mut self) -> Option<Resolved> {
        let rx = self.results.as_ref()?;
        match rx.try_recv() {
            Ok(r) => Some(r),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.jobs = None;
                self.results = None;
                None
            }
        }
    }

    fn spawn(&mut self) -> io::Result<()> {
        let (job_tx, job_rx) = mpsc::sync_channel::<Job>(JOB_CAPACITY);
        // One result per job: the queue plus the job in progress always fit.
        let (res_tx, res_rx) = mpsc::sync_channel::<Resolved>(JOB_CAPACITY + 1);
        let waker = self.waker.clone();
        thread::Builder::new()
            .name("producer-mio-resolver".into())
            .spawn(move || {
                for job in job_rx {
                    let result = (job.host.as_str(), job.port)
                        .to_socket_addrs()
                        .map(|it| it.collect::<Vec<_>>());
                    if res_tx
                        .send(Resolved {
                            key: job.key,
                            result,
                        })
                        .is_err()
                    {
                        return;
                    }
                    if let Err(e) = waker.wake() {
                        tracing::warn!(error = %e, "resolver could not wake the event loop");
                    }
                }
            })?;
        self.jobs = Some(job_tx);
        self.results = Some(res_rx);
        Ok(())
    }
}
