//! Requests per unit of virtual time: a retry storm or a hot loop is a failure.
//!
//! The window `W` is the shortest backoff the jitter allows (0.8 × `retry.backoff.ms`;
//! reconnects back off as long). Within any window `(t - W, t]`:
//! - Produce requests that carry only batches sent before (retries) number at most
//!   `2·B·M + 2 + 2·D`: B nodes connected so far (as H below), M `max.in.flight`, D the distinct batches
//!   those requests carry. Each batch may go once after its backoff and once more at once on a
//!   new leader (KIP-951); each connection lost may resend up to M requests, and a broker's
//!   reconnects are a backoff apart. Requests carrying a new batch are bounded by the records
//!   the input sends and are not counted.
//! - Requests of any other API (Metadata, InitProducerId, the transaction APIs, SASL) number
//!   at most `2·B + 4 + 2·A`, A the application's calls in the window (a send to a new topic,
//!   `send_offsets_to_transaction`, a commit: each may ask once or twice). ApiVersions is
//!   bounded per connection instead.
//! - Connection attempts number at most `2·H + 2`, H the nodes ever connected to: a host under
//!   each numbering of the nodes the broker gave (a broker that renumbers its nodes makes each
//!   host a new node, which the producer connects to anew, as Java's connections are a node's).

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::broker::ProduceExchange;
use super::ledger::Violation;

/// A batch, by where it goes and its first record and count.
type BatchKey = (String, i32, u64, usize);

#[derive(Debug)]
pub(crate) struct Rates {
    window: Duration,
    max_in_flight: usize,
    /// The nodes connected to: host, port, and the broker's numbering then.
    hosts: HashSet<(String, u16, i32)>,
    connects: VecDeque<Instant>,
    /// Retry-only Produce requests: when, and their batches.
    retries: VecDeque<(Instant, Vec<BatchKey>)>,
    /// Other requests: when, and the API key.
    others: VecDeque<(Instant, i16)>,
    /// The application's calls.
    calls: VecDeque<(Instant, ())>,
    seen: HashSet<BatchKey>,
}

impl Rates {
    pub(crate) fn new(window: Duration, max_in_flight: usize) -> Self {
        Rates {
            window,
            max_in_flight,
            hosts: HashSet::new(),
            connects: VecDeque::new(),
            retries: VecDeque::new(),
            others: VecDeque::new(),
            calls: VecDeque::new(),
            seen: HashSet::new(),
        }
    }

    fn purge<T>(q: &mut VecDeque<(Instant, T)>, now: Instant, window: Duration) {
        while q
            .front()
            .is_some_and(|(t, _)| t.checked_add(window).is_some_and(|end| end <= now))
        {
            q.pop_front();
        }
    }

    /// The application called the producer (send, flush, a transaction operation).
    pub(crate) fn call(&mut self, now: Instant) {
        Self::purge(&mut self.calls, now, self.window);
        self.calls.push_back((now, ()));
    }

    pub(crate) fn connect(
        &mut self,
        now: Instant,
        host: &str,
        port: u16,
        naming: i32,
    ) -> Result<(), Violation> {
        self.hosts.insert((host.to_string(), port, naming));
        let window = self.window;
        while self
            .connects
            .front()
            .is_some_and(|t| t.checked_add(window).is_some_and(|end| end <= now))
        {
            self.connects.pop_front();
        }
        self.connects.push_back(now);
        let bound = 2 * self.hosts.len() + 2;
        if self.connects.len() > bound {
            return Err((
                "connect-storm",
                format!(
                    "{} connection attempts within {:?} ({} nodes; bound {bound})",
                    self.connects.len(),
                    self.window,
                    self.hosts.len()
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn request(
        &mut self,
        now: Instant,
        api: i16,
        produce: Option<&ProduceExchange>,
    ) -> Result<(), Violation> {
        let brokers = self.hosts.len().max(1);
        if api == 18 {
            return Ok(());
        }
        let Some(x) = produce else {
            Self::purge(&mut self.others, now, self.window);
            self.others.push_back((now, api));
            let n = self.others.iter().filter(|(_, a)| *a == api).count();
            Self::purge(&mut self.calls, now, self.window);
            let bound = 2 * brokers + 4 + 2 * self.calls.len();
            if n > bound {
                return Err((
                    "request-storm",
                    format!(
                        "{n} requests of API {api} within {:?} (bound {bound})",
                        self.window
                    ),
                ));
            }
            return Ok(());
        };
        let keys: Vec<BatchKey> = x
            .batches
            .iter()
            .filter_map(|b| {
                let first = *b.ids.first()?;
                Some((b.topic.clone(), b.partition, first, b.ids.len()))
            })
            .collect();
        let retry_only = !keys.is_empty() && keys.iter().all(|k| self.seen.contains(k));
        self.seen.extend(keys.iter().cloned());
        if !retry_only {
            return Ok(());
        }
        Self::purge(&mut self.retries, now, self.window);
        self.retries.push_back((now, keys));
        let distinct: HashSet<&BatchKey> = self.retries.iter().flat_map(|(_, k)| k).collect();
        let bound = 2 * brokers * self.max_in_flight + 2 + 2 * distinct.len();
        if self.retries.len() > bound {
            return Err((
                "retry-storm",
                format!(
                    "{} Produce requests of batches sent before within {:?} ({} brokers, max.in.flight {}, {} distinct batches; bound {bound})",
                    self.retries.len(),
                    self.window,
                    brokers,
                    self.max_in_flight,
                    distinct.len()
                ),
            ));
        }
        Ok(())
    }
}
