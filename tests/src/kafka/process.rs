//! The JVMs a cluster starts, and the guarantee that none outlives its test process.
//!
//! Every JVM is started with `prctl(PR_SET_PDEATHSIG, SIGKILL)`: the kernel kills it when the
//! *thread* that forked it exits (on Linux the "parent" of that signal is the thread). So all
//! JVMs of a cluster are forked by one long-lived [`Spawner`] thread that lives exactly as long
//! as its cluster: the cluster's drop kills its JVMs by PID first, and if the test process dies
//! without dropping it (a panic in a shared static, `SIGKILL`, `exit`), the spawner thread dies
//! with the process and the kernel kills every JVM it forked.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// One thread that forks every JVM of a cluster (see the module docs).
pub struct Spawner {
    jobs: Option<mpsc::Sender<SpawnJob>>,
    thread: Option<JoinHandle<()>>,
}

impl Spawner {
    /// Starts the spawner thread.
    pub fn new(name: &str) -> io::Result<Spawner> {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        let thread = std::thread::Builder::new()
            .name(format!("jvm-spawner-{name}"))
            .spawn(move || {
                for (mut cmd, answer) in rx {
                    // SAFETY: the closure runs in the forked child before exec and only makes
                    // async-signal-safe calls (prctl, getppid, _exit).
                    unsafe {
                        cmd.pre_exec(|| {
                            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                                return Err(io::Error::last_os_error());
                            }
                            // The spawner died between fork and prctl: do not outlive it.
                            if libc::getppid() == 1 {
                                libc::_exit(1);
                            }
                            Ok(())
                        });
                    }
                    let _ = answer.send(cmd.spawn());
                }
            })?;
        Ok(Spawner {
            jobs: Some(tx),
            thread: Some(thread),
        })
    }

    /// Forks `cmd` from the spawner thread.
    pub fn spawn(&self, cmd: Command) -> io::Result<Child> {
        let (tx, rx) = mpsc::channel();
        let gone = || io::Error::other("the JVM spawner thread is gone");
        self.jobs
            .as_ref()
            .ok_or_else(gone)?
            .send((cmd, tx))
            .map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())?
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A running JVM with its output appended to a log file.
pub struct Jvm {
    child: Child,
    /// What it is, for messages ("node 2", "KafkaCtl").
    pub name: String,
    /// Its log file (stdout and stderr).
    pub log: PathBuf,
}

/// Opens `log` for appending, with a line saying what starts.
pub fn open_log(log: &Path, banner: &str) -> io::Result<File> {
    let mut f = OpenOptions::new().create(true).append(true).open(log)?;
    writeln!(f, "==== {banner}")?;
    Ok(f)
}

impl Jvm {
    /// Starts `java <args>` through `spawner`, appending its output to `log`. When `stdin` is
    /// true the JVM's stdin is a pipe (take it with [`Jvm::child_mut`]).
    pub fn start(
        spawner: &Spawner,
        name: &str,
        args: &[String],
        log: &Path,
        piped_stdio: bool,
    ) -> io::Result<Jvm> {
        let out = open_log(log, &format!("{name}: java {}", args.join(" ")))?;
        let mut cmd = Command::new("java");
        cmd.args(args);
        if piped_stdio {
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(out);
        } else {
            cmd.stdin(Stdio::null())
                .stdout(out.try_clone()?)
                .stderr(out);
        }
        let child = spawner.spawn(cmd)?;
        Ok(Jvm {
            child,
            name: name.to_string(),
            log: log.to_path_buf(),
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child, to take its pipes.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, SIGTERM, ...). Fails when it has exited (its pid
    /// may belong to another process by now).
    pub fn signal(&mut self, signal: libc::c_int) -> io::Result<()> {
        if let Some(status) = self.exited() {
            return Err(io::Error::other(format!(
                "{} has exited ({status})",
                self.name
            )));
        }
        // SAFETY: kill(2) on our own child's pid, not yet reaped (checked above).
        if unsafe { libc::kill(self.child.id() as libc::pid_t, signal) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// After a SIGSTOP: waits until every thread of the process is stopped (state `T` in
    /// `/proc/<pid>/task/*/stat`), so that nothing more is answered once it returns; fails
    /// after `timeout`. `kill(2)` returns before a stop is delivered: a thread running on
    /// another core goes on until it next enters the kernel, and a test that sent right after
    /// the signal saw a record acknowledged by a broker it had paused.
    pub fn wait_stopped(&mut self, timeout: Duration) -> io::Result<()> {
        let tasks = PathBuf::from(format!("/proc/{}/task", self.child.id()));
        let deadline = Instant::now() + timeout;
        loop {
            if self.exited().is_some() {
                return Err(io::Error::other(format!("{} has exited", self.name)));
            }
            let mut all_stopped = true;
            for task in std::fs::read_dir(&tasks)? {
                // A thread that ended between the listing and the read is not running.
                let Ok(stat) = std::fs::read_to_string(task?.path().join("stat")) else {
                    continue;
                };
                // "tid (comm) S ...": the state follows the last ')' (comm may hold any).
                let state = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim_start().chars().next());
                // A zombie (a leader thread that exited before the others) runs nothing either.
                all_stopped &= matches!(state, Some('T' | 't' | 'Z' | 'X'));
            }
            if all_stopped {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::other(format!(
                    "{}: not every thread stopped within {timeout:?} of SIGSTOP",
                    self.name
                )));
            }
            // A poll of the condition, not a wait standing in for it.
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether it has exited (and how), without waiting.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits up to `timeout` for it to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            // Process exit cannot be waited on with a timeout in std: poll.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL and reap (a stopped process dies of SIGKILL too).
    pub fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Resident set size in KiB (`VmRSS`), if it still runs.
    pub fn rss_kib(&self) -> Option<u64> {
        pid_rss_kib(self.child.id())
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `VmRSS` of a process in KiB.
pub fn pid_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether a process with this pid exists (and is not a zombie).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the field after the parenthesised command name.
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The last `lines` lines of a log file (or a note that it cannot be read).
pub fn log_tail(log: &Path, lines: usize) -> String {
    match std::fs::read(log) {
        Ok(bytes) => {
            let s = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = s.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", log.display()),
    }
}
