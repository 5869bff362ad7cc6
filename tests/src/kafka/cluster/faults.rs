//! Process faults on a running cluster (SIGKILL, restart, SIGSTOP/SIGCONT, SIGTERM) and the
//! waits that say a fault has taken effect or the cluster has recovered.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{other, views, KafkaCluster, LaunchError, Node, POLL};
use crate::kafka::process::log_tail;

impl KafkaCluster {
    /// Whether node `id`'s JVM runs (paused counts as running).
    pub fn is_running(&self, id: i32) -> bool {
        let mut jvm = self.node(id).jvm.lock().unwrap();
        jvm.as_mut().is_some_and(|j| j.exited().is_none())
    }

    /// Whether node `id` is SIGSTOPped.
    pub fn is_paused(&self, id: i32) -> bool {
        self.node(id).paused.load(Ordering::Relaxed)
    }

    /// The nodes that run and are not paused.
    pub fn live_nodes(&self) -> Vec<i32> {
        self.node_ids()
            .into_iter()
            .filter(|&id| self.is_running(id) && !self.is_paused(id))
            .collect()
    }

    /// SIGKILLs node `id` and reaps it. Its partitions move once the controller fences it
    /// (`broker.session.timeout.ms`, 3 s).
    pub fn kill(&self, id: i32) -> Result<(), LaunchError> {
        let node = self.try_node(id)?;
        let mut jvm = node.jvm.lock().unwrap();
        match jvm.take() {
            Some(mut j) => {
                j.kill();
                node.paused.store(false, Ordering::Relaxed);
                Ok(())
            }
            None => Err(other(format!("node {id} is not running"))),
        }
    }

    /// SIGTERM: a controlled shutdown (leaders move away first). Waits up to `timeout` for
    /// the JVM to exit and returns how long it took; kills it and fails after that.
    pub fn terminate(&self, id: i32, timeout: Duration) -> Result<Duration, LaunchError> {
        let node = self.try_node(id)?;
        let mut guard = node.jvm.lock().unwrap();
        let Some(mut jvm) = guard.take() else {
            return Err(other(format!("node {id} is not running")));
        };
        let started = Instant::now();
        jvm.signal(libc::SIGTERM).map_err(other)?;
        match jvm.wait_exit(timeout) {
            Some(_) => Ok(started.elapsed()),
            None => {
                jvm.kill();
                Err(LaunchError::Timeout {
                    waiting_for: format!("node {id} to shut down after SIGTERM ({timeout:?})"),
                    logs: log_tail(&node.log, 60),
                })
            }
        }
    }

    /// SIGSTOP: node `id` hangs (connections stay open, nothing is answered). Returns once
    /// every thread of the node is stopped: nothing is answered after it.
    pub fn pause(&self, id: i32) -> Result<(), LaunchError> {
        let node = self.try_node(id)?;
        let mut jvm = node.jvm.lock().unwrap();
        let j = jvm
            .as_mut()
            .ok_or_else(|| other(format!("node {id} is not running")))?;
        j.signal(libc::SIGSTOP).map_err(other)?;
        j.wait_stopped(Duration::from_secs(10)).map_err(other)?;
        node.paused.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self, id: i32) -> Result<(), LaunchError> {
        let node = self.try_node(id)?;
        let mut jvm = node.jvm.lock().unwrap();
        let j = jvm
            .as_mut()
            .ok_or_else(|| other(format!("node {id} is not running")))?;
        j.signal(libc::SIGCONT).map_err(other)?;
        node.paused.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Starts node `id` again (same configuration and data, no format) after a kill or a
    /// shutdown, and waits until every live node lists it as a broker. Returns how long that
    /// took.
    pub fn restart(&self, id: i32, timeout: Duration) -> Result<Duration, LaunchError> {
        let started = Instant::now();
        let node = self.try_node(id)?;
        {
            let mut jvm = node.jvm.lock().unwrap();
            if jvm.as_mut().is_some_and(|j| j.exited().is_none()) {
                return Err(other(format!("node {id} is running")));
            }
            *jvm = Some(self.launch(node)?);
            node.paused.store(false, Ordering::Relaxed);
        }
        let all = self.node_ids();
        self.wait_until(
            &format!("node {id} to rejoin (every live node listing brokers {all:?})"),
            timeout,
            Some(node),
            || self.every_live_node_lists(&all),
        )?;
        Ok(started.elapsed())
    }

    /// Starts node `id` again like [`restart`](Self::restart), without waiting for it to
    /// rejoin: the JVM is launched and the call returns (a rolling schedule that does not
    /// wait for the cluster to recover).
    pub fn relaunch(&self, id: i32) -> Result<(), LaunchError> {
        let node = self.try_node(id)?;
        let mut jvm = node.jvm.lock().unwrap();
        if jvm.as_mut().is_some_and(|j| j.exited().is_none()) {
            return Err(other(format!("node {id} is running")));
        }
        *jvm = Some(self.launch(node)?);
        node.paused.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Waits until `done()` holds, checking every 100 ms; fails with the logs after
    /// `timeout`, or at once when `watched` exits.
    pub(super) fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        watched: Option<&Node>,
        mut done: impl FnMut() -> bool,
    ) -> Result<(), LaunchError> {
        let deadline = Instant::now() + timeout;
        loop {
            if done() {
                return Ok(());
            }
            if let Some(node) = watched {
                let mut jvm = node.jvm.lock().unwrap();
                if let Some(status) = jvm.as_mut().and_then(|j| j.exited()) {
                    return Err(LaunchError::NodeExited {
                        node: node.id,
                        status: status.to_string(),
                        log: log_tail(&node.log, 80),
                    });
                }
            }
            if Instant::now() > deadline {
                return Err(LaunchError::Timeout {
                    waiting_for: format!("{what} ({timeout:?})"),
                    logs: self.logs(40),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits until every live node lists exactly the brokers `ids` (for instance, until a
    /// killed broker is fenced and dropped from Metadata).
    pub fn wait_brokers_listed(&self, ids: &[i32], timeout: Duration) -> Result<(), LaunchError> {
        self.wait_until(
            &format!("every live node to list brokers {ids:?}"),
            timeout,
            None,
            || self.every_live_node_lists(ids),
        )
    }

    /// Whether every live node answers Metadata listing exactly the brokers `ids`.
    fn every_live_node_lists(&self, ids: &[i32]) -> bool {
        let live = self.live_nodes();
        let v = views(self, &[]);
        !live.is_empty()
            && live.iter().all(|n| {
                v.iter().any(|(m, view)| {
                    m == n && view.brokers.keys().copied().collect::<Vec<_>>() == ids
                })
            })
    }

    /// Turns off every proxy fault (delay, black hole, armed resets).
    pub fn heal_network(&self) {
        for p in self.proxies() {
            p.heal();
        }
    }

    /// Brings the cluster back to health after a test, whatever it left: proxy faults off,
    /// paused nodes resumed, dead nodes restarted, every broker listed, and the replicas of
    /// `topics` in sync.
    pub fn ensure_healthy(&self, topics: &[&str], timeout: Duration) -> Result<(), LaunchError> {
        self.heal_network();
        for id in self.node_ids() {
            if self.is_paused(id) {
                self.resume(id)?;
            }
        }
        for id in self.node_ids() {
            if !self.is_running(id) {
                // Reap a JVM that died by itself.
                self.node(id).jvm.lock().unwrap().take();
                self.restart(id, timeout)?;
            }
        }
        self.wait_brokers_listed(&self.node_ids(), timeout)?;
        // Topics a test deleted are not waited on.
        let view = self.view(topics)?;
        let existing: Vec<&str> = topics
            .iter()
            .copied()
            .filter(|t| view.topics.get(*t).is_some_and(|(err, _)| *err == 0))
            .collect();
        if !existing.is_empty() {
            self.wait_in_sync(&existing, timeout)?;
        }
        Ok(())
    }
}
