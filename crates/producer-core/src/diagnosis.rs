//! "Why is it slow?": a verdict per broker from the last sample window
//! (`metrics.sample.window.ms` x `metrics.num.samples`), naming the dominant limit with the
//! numbers behind it and the setting to change. [`crate::Producer::diagnose`] gives one; a
//! driver's handle gives one from its metrics snapshot ([`MetricsSnapshot::diagnose`]).
//!
//! The verdict of a broker is the first of these that holds, from the broker's end back to the
//! caller's (a limit further along hides the ones before it: a broker that is down also fills
//! the buffer and keeps batches full):
//!
//! | verdict | holds when, over the window | setting |
//! |---|---|---|
//! | [`Verdict::NotConnected`] | partitions it leads hold records and no ready connection to it for at least half the window | `bootstrap.servers` (or the broker itself) |
//! | [`Verdict::Throttled`] | its answers' `throttle_time_ms` add up to at least a tenth of the window | the broker's quota `producer_byte_rate` |
//! | [`Verdict::SlowBroker`] | its average round trip is at least 3 times its usual and 20 ms above it | `request.timeout.ms` (or the broker itself) |
//! | [`Verdict::Retries`] | batches put back to be sent again are at least a quarter of the batches sent | `retry.backoff.ms` (and the error named) |
//! | [`Verdict::InFlightCap`] | every `max.in.flight.requests.per.connection` slot was busy for at least half the window, and at least half its batches were sealed full | `max.in.flight.requests.per.connection` |
//! | [`Verdict::Backpressure`] with [`BackpressureCause::BufferMemory`] | records waited for buffer space (in the producer or in a driver's queue in front of it) for at least a fifth of the window, and at least as long as for the queue-delay limit | `buffer.memory` |
//! | [`Verdict::Backpressure`] with [`BackpressureCause::QueueDelay`] | records were held back by the queue-delay limit (in the producer or in a driver's queue) for at least a fifth of the window, and longer than they waited for buffer space | `queue.delay.target.ms` |
//! | [`Verdict::Linger`] | at least half its requests went because a batch's `linger.ms` ended (none in them full), and `linger.ms` is at least its round trip | `linger.ms` |
//! | [`Verdict::CallerBound`] | none of the above: the caller does not send enough to fill what the producer can carry | none: send more (more concurrent sends) |
//!
//! Brokers known only as a bootstrap address, that lead no partition and carried nothing in
//! the window, get no verdict.

use std::fmt;
use std::time::Duration;

use crate::metrics::{BrokerMetrics, ConnectionState, MetricsSnapshot};
use crate::ErrorCode;

/// [`Verdict::NotConnected`]: the least fraction of the window without a ready connection.
pub const DOWN_FRACTION: f64 = 0.5;
/// [`Verdict::Throttled`]: the least throttle time, as a fraction of the window.
pub const THROTTLE_FRACTION: f64 = 0.1;
/// [`Verdict::SlowBroker`]: the least ratio of the round trip to the broker's usual.
pub const SLOW_FACTOR: u64 = 3;
/// [`Verdict::SlowBroker`]: the least excess of the round trip over the broker's usual.
pub const SLOW_MARGIN: Duration = Duration::from_millis(20);
/// [`Verdict::Retries`]: the least ratio of batches retried to batches sent.
pub const RETRY_SHARE: f64 = 0.25;
/// [`Verdict::InFlightCap`]: the least fraction of the window with every slot busy.
pub const SATURATED_FRACTION: f64 = 0.5;
/// [`Verdict::InFlightCap`]: the least share of batches sealed full.
pub const FULL_SHARE: f64 = 0.5;
/// [`Verdict::Backpressure`]: the least fraction of the window spent waiting for buffer
/// space, or held back by the queue-delay limit.
pub const BUFFER_WAIT_FRACTION: f64 = 0.2;
/// [`Verdict::Linger`]: the least share of requests sent because a batch's `linger.ms`
/// ended.
pub const LINGERED_SHARE: f64 = 0.5;

/// Where backpressure comes from: the wait that took the larger part of the window.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum BackpressureCause {
    /// `buffer.memory` (or `buffer.max.records`) is used up: `send` refuses records as `Full`.
    BufferMemory {
        /// The fraction of the window records waited for buffer space (0 to 1).
        wait_fraction: f64,
        /// `buffer.memory`, in bytes.
        buffer_memory: usize,
        /// Bytes buffered at the snapshot.
        buffered_bytes: usize,
        /// `buffer.max.records`.
        buffer_max_records: usize,
        /// Records buffered at the snapshot.
        buffered_records: usize,
    },
    /// The queue-delay limit (`queue.delay.target.ms`) holds `send` back: the unacknowledged
    /// bytes reached what the cluster drains in the target delay, well below `buffer.memory`.
    QueueDelay {
        /// The fraction of the window records were held back by the limit (0 to 1).
        wait_fraction: f64,
        /// The limit at the snapshot: the unacknowledged bytes `send` accepts records up to
        /// (0 if it was turned off since).
        limit_bytes: usize,
        /// Bytes accepted and not yet acknowledged at the snapshot.
        unacknowledged_bytes: usize,
    },
}

/// The dominant limit of one broker over the window, with the numbers behind it.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Verdict {
    /// The caller does not send enough: no limit of the producer or the broker was reached.
    CallerBound {
        /// Records sent to the broker per second (retries included).
        records_per_sec: f64,
        /// The fraction of the window a Produce request to it was in flight (0 to 1).
        busy_fraction: f64,
        /// Bytes per batch sent, over `batch.size` (how full batches were; NaN without
        /// batches).
        batch_fill: f64,
    },
    /// Batches wait for `linger.ms`: most requests go because it ended (none of their batches
    /// full), and it is at least the broker's round trip.
    Linger {
        /// `linger.ms`.
        linger: Duration,
        /// The share of requests sent because a batch's `linger.ms` ended (0 to 1).
        lingered_share: f64,
        /// The average round trip to the broker.
        round_trip: Duration,
    },
    /// Batches are full and every in-flight slot is taken: more would go at once with more
    /// slots (or bigger batches).
    InFlightCap {
        /// `max.in.flight.requests.per.connection`.
        max_in_flight: usize,
        /// The fraction of the window every slot was busy (0 to 1).
        saturated_fraction: f64,
        /// The share of batches sealed full (0 to 1; NaN without batches).
        full_share: f64,
    },
    /// The broker is slow to answer against its usual.
    SlowBroker {
        /// The average round trip in the window.
        round_trip: Duration,
        /// Its usual: the lowest average of an earlier sample.
        usual: Duration,
    },
    /// The broker throttles (quota).
    Throttled {
        /// `throttle_time_ms` of its answers in the window, added up.
        throttle: Duration,
        /// The share of its answers that were throttled (0 to 1).
        throttled_share: f64,
        /// The throttle time as a fraction of the window (at most 1).
        throttle_fraction: f64,
    },
    /// `send` is pushed back: see the cause.
    Backpressure {
        /// Where the push-back comes from.
        cause: BackpressureCause,
    },
    /// No ready connection while records wait for it.
    NotConnected {
        /// The time in the window without a ready connection.
        down: Duration,
        /// Where the connection stands at the snapshot.
        state: ConnectionState,
    },
    /// Retries dominate: batches are sent again and again.
    Retries {
        /// Batches put back to be sent again in the window.
        retried: u64,
        /// Batches sent for the first time in the window.
        sent: u64,
        /// The error of the last retried batch (`NONE`: a lost connection).
        last_error: Option<ErrorCode>,
    },
}

impl Verdict {
    /// A short name of the limit (`caller`, `linger`, `in-flight-cap`, `slow-broker`,
    /// `throttled`, `backpressure`, `not-connected`, `retries`).
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::CallerBound { .. } => "caller",
            Verdict::Linger { .. } => "linger",
            Verdict::InFlightCap { .. } => "in-flight-cap",
            Verdict::SlowBroker { .. } => "slow-broker",
            Verdict::Throttled { .. } => "throttled",
            Verdict::Backpressure { .. } => "backpressure",
            Verdict::NotConnected { .. } => "not-connected",
            Verdict::Retries { .. } => "retries",
        }
    }

    /// The setting to change, by its Kafka name; `None` when no producer setting is the cure
    /// (the caller must send more).
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            Verdict::CallerBound { .. } => None,
            Verdict::Linger { .. } => Some("linger.ms"),
            Verdict::InFlightCap { .. } => Some("max.in.flight.requests.per.connection"),
            Verdict::SlowBroker { .. } => Some("request.timeout.ms"),
            Verdict::Throttled { .. } => Some("producer_byte_rate"),
            Verdict::Backpressure {
                cause: BackpressureCause::BufferMemory { .. },
            } => Some("buffer.memory"),
            Verdict::Backpressure {
                cause: BackpressureCause::QueueDelay { .. },
            } => Some("queue.delay.target.ms"),
            Verdict::NotConnected { .. } => Some("bootstrap.servers"),
            Verdict::Retries { .. } => Some("retry.backoff.ms"),
        }
    }

    /// What to do, in a few words.
    pub fn advice(&self) -> &'static str {
        match self {
            Verdict::CallerBound { .. } => "send more at once (more concurrent sends)",
            Verdict::Linger { .. } => "lower linger.ms (latency) or send more",
            Verdict::InFlightCap { .. } => {
                "raise max.in.flight.requests.per.connection (5 at most with idempotence) or batch.size"
            }
            Verdict::SlowBroker { .. } => {
                "look at the broker (disk, replication); request.timeout.ms bounds the wait"
            }
            Verdict::Throttled { .. } => "raise the broker's quota (producer_byte_rate)",
            Verdict::Backpressure {
                cause: BackpressureCause::BufferMemory { .. },
            } => "raise buffer.memory, or find what keeps the brokers from taking more",
            Verdict::Backpressure {
                cause: BackpressureCause::QueueDelay { .. },
            } => {
                "the cluster drains no faster: raise queue.delay.target.ms (0: off) to queue more, or add brokers or partitions"
            }
            Verdict::NotConnected { .. } => {
                "check the broker is up and reachable at this address (bootstrap.servers, advertised.listeners)"
            }
            Verdict::Retries { .. } => "fix the error named; retry.backoff.ms spaces the retries",
        }
    }

    /// What it means, in one phrase.
    fn meaning(&self) -> &'static str {
        match self {
            Verdict::CallerBound { .. } => "the caller does not send enough",
            Verdict::Linger { .. } => "batches wait for linger",
            Verdict::InFlightCap { .. } => "batches are full and the in-flight cap is reached",
            Verdict::SlowBroker { .. } => "the broker is slow to answer",
            Verdict::Throttled { .. } => "the broker throttles",
            Verdict::Backpressure { .. } => "backpressure",
            Verdict::NotConnected { .. } => "the connection is not up",
            Verdict::Retries { .. } => "retries dominate",
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn pct(f: f64) -> f64 {
    if f.is_nan() {
        0.0
    } else {
        f * 100.0
    }
}

impl fmt::Display for Verdict {
    /// The meaning and the numbers behind it, e.g. `batches wait for linger: 98% of batches
    /// sent on linger.ms=200 ms, round trip 6.1 ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.meaning())?;
        match *self {
            Verdict::CallerBound {
                records_per_sec,
                batch_fill,
                ..
            } if records_per_sec == 0.0 || batch_fill.is_nan() => {
                write!(f, "nothing sent to it in the window")
            }
            Verdict::CallerBound {
                records_per_sec,
                busy_fraction,
                batch_fill,
            } => write!(
                f,
                "{records_per_sec:.0} records/s, a request in flight {:.0}% of the time, batches {:.0}% of batch.size",
                pct(busy_fraction),
                pct(batch_fill)
            ),
            Verdict::Linger {
                linger,
                lingered_share,
                round_trip,
            } => write!(
                f,
                "{:.0}% of requests sent on linger.ms={:.0} ms, round trip {:.1} ms",
                pct(lingered_share),
                ms(linger),
                ms(round_trip)
            ),
            Verdict::InFlightCap {
                max_in_flight,
                saturated_fraction,
                full_share,
            } => write!(
                f,
                "all {max_in_flight} in-flight slots busy {:.0}% of the time, {:.0}% of batches full",
                pct(saturated_fraction),
                pct(full_share)
            ),
            Verdict::SlowBroker { round_trip, usual } => write!(
                f,
                "round trip {:.1} ms against its usual {:.1} ms",
                ms(round_trip),
                ms(usual)
            ),
            Verdict::Throttled {
                throttle,
                throttled_share,
                throttle_fraction,
            } => write!(
                f,
                "throttled {:.0} ms in all ({:.0}% of the window), {:.0}% of answers throttled",
                ms(throttle),
                pct(throttle_fraction),
                pct(throttled_share)
            ),
            Verdict::Backpressure {
                cause:
                    BackpressureCause::BufferMemory {
                        wait_fraction,
                        buffer_memory,
                        buffered_bytes,
                        buffer_max_records,
                        buffered_records,
                    },
            } => write!(
                f,
                "send waited for buffer space {:.0}% of the time ({buffered_bytes} of {buffer_memory} bytes, {buffered_records} of {buffer_max_records} records buffered)",
                pct(wait_fraction)
            ),
            Verdict::Backpressure {
                cause:
                    BackpressureCause::QueueDelay {
                        wait_fraction,
                        limit_bytes,
                        unacknowledged_bytes,
                    },
            } => write!(
                f,
                "send was held back by the queue-delay limit {:.0}% of the time ({unacknowledged_bytes} bytes unacknowledged, limit {limit_bytes} bytes)",
                pct(wait_fraction)
            ),
            Verdict::NotConnected { down, state } => write!(
                f,
                "no ready connection for {:.1} s of the window, now {}",
                down.as_secs_f64(),
                state.as_str()
            ),
            Verdict::Retries {
                retried,
                sent,
                last_error,
            } => {
                write!(f, "{retried} batches retried for {sent} sent")?;
                match last_error {
                    Some(ErrorCode::NONE) => write!(f, ", last after a lost connection"),
                    Some(code) => write!(f, ", last on {}", code.name().unwrap_or("?")),
                    None => Ok(()),
                }
            }
        }
    }
}

/// One broker's verdict.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BrokerDiagnosis {
    /// Node id (-1 for a bootstrap address).
    pub node_id: i32,
    /// `host:port`.
    pub broker: String,
    /// Records sent to it per second over the window (retries included).
    pub records_per_sec: f64,
    /// Record batch bytes sent to it per second over the window.
    pub bytes_per_sec: f64,
    /// The dominant limit.
    pub verdict: Verdict,
}

impl fmt::Display for BrokerDiagnosis {
    /// One line: `node 2 (host:9093) 1234 rec/s: <verdict> -> <setting>: <advice>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {} ({}) {:.0} rec/s, {:.1} MB/s: {}",
            self.node_id,
            self.broker,
            self.records_per_sec,
            self.bytes_per_sec / 1e6,
            self.verdict
        )?;
        match self.verdict.setting() {
            Some(s) => write!(f, " -> {s}: {}", self.verdict.advice()),
            None => write!(f, " -> {}", self.verdict.advice()),
        }
    }
}

/// A verdict per broker over the last sample window: [`crate::Producer::diagnose`],
/// [`MetricsSnapshot::diagnose`].
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Diagnosis {
    /// Per broker, in the snapshot's order.
    pub brokers: Vec<BrokerDiagnosis>,
}

impl Diagnosis {
    /// The verdict of node `node_id`, if it has one.
    pub fn verdict_of(&self, node_id: i32) -> Option<&Verdict> {
        self.brokers
            .iter()
            .find(|b| b.node_id == node_id)
            .map(|b| &b.verdict)
    }
}

impl fmt::Display for Diagnosis {
    /// One line per broker ([`BrokerDiagnosis`]'s), or `no broker carried traffic`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.brokers.is_empty() {
            return writeln!(f, "diagnose: no broker carried traffic");
        }
        for b in &self.brokers {
            writeln!(f, "diagnose: {b}")?;
        }
        Ok(())
    }
}

impl MetricsSnapshot {
    /// The verdict per broker over the snapshot's window (see [`crate::diagnosis`]). Take the
    /// snapshot while (or right after) the run to be explained: the window covers the last
    /// `metrics.num.samples` x `metrics.sample.window.ms`.
    pub fn diagnose(&self) -> Diagnosis {
        let brokers = self
            .brokers
            .iter()
            .filter(|b| b.node_id >= 0 || b.window.growth.requests > 0 || b.records_waiting)
            .map(|b| BrokerDiagnosis {
                node_id: b.node_id,
                broker: format!("{}:{}", b.host, b.port),
                records_per_sec: b.window.per_second(b.window.growth.records),
                bytes_per_sec: b.window.per_second(b.window.growth.bytes),
                verdict: self.verdict(b),
            })
            .collect();
        Diagnosis { brokers }
    }

    /// The fraction of the window records waited for buffer space: waits ended in the window
    /// plus the one running, over the window.
    fn buffer_wait_fraction(&self) -> f64 {
        self.wait_fraction(
            self.windowed.growth.buffer_wait_ns,
            self.buffer_wait_running,
        )
    }

    /// The fraction of the window records were held back by the queue-delay limit, likewise.
    fn queue_delay_wait_fraction(&self) -> f64 {
        self.wait_fraction(
            self.windowed.growth.queue_delay_wait_ns,
            self.queue_delay_wait_running,
        )
    }

    fn wait_fraction(&self, ended_ns: u64, running: Duration) -> f64 {
        let waited = Duration::from_nanos(ended_ns).saturating_add(running);
        (waited.as_secs_f64() / self.windowed.elapsed.as_secs_f64()).min(1.0)
    }

    /// The backpressure cause, if `send` waited for at least [`BUFFER_WAIT_FRACTION`] of the
    /// window: the wait that took longer (buffer space on a tie).
    fn backpressure(&self) -> Option<BackpressureCause> {
        let buffer = self.buffer_wait_fraction();
        let queue_delay = self.queue_delay_wait_fraction();
        if queue_delay > buffer && queue_delay >= BUFFER_WAIT_FRACTION {
            return Some(BackpressureCause::QueueDelay {
                wait_fraction: queue_delay,
                limit_bytes: self.queue_delay_limit_bytes.unwrap_or(0),
                unacknowledged_bytes: self.unacknowledged_bytes,
            });
        }
        (buffer >= BUFFER_WAIT_FRACTION).then_some(BackpressureCause::BufferMemory {
            wait_fraction: buffer,
            buffer_memory: self.buffer_total_bytes,
            buffered_bytes: self.buffered_bytes,
            buffer_max_records: self.settings.buffer_max_records,
            buffered_records: self.buffered_records,
        })
    }

    /// The first limit that holds for `b`, from the broker's end back to the caller's.
    fn verdict(&self, b: &BrokerMetrics) -> Verdict {
        let w = &b.window;
        let g = &w.growth;
        let down = w.fraction(g.down_ns);
        if b.records_waiting && down >= DOWN_FRACTION {
            return Verdict::NotConnected {
                down: Duration::from_nanos(g.down_ns),
                state: b.state,
            };
        }
        let throttle_fraction = w.fraction(g.throttle_ms.saturating_mul(1_000_000));
        if throttle_fraction >= THROTTLE_FRACTION {
            return Verdict::Throttled {
                throttle: Duration::from_millis(g.throttle_ms),
                throttled_share: share(g.throttled_responses, g.responses),
                throttle_fraction,
            };
        }
        let round_trip = w.latency_avg_us();
        if let (Some(avg), Some(usual)) = (round_trip, w.baseline_latency_us) {
            let margin = SLOW_MARGIN.as_micros() as u64;
            if avg >= usual.saturating_mul(SLOW_FACTOR) && avg >= usual.saturating_add(margin) {
                return Verdict::SlowBroker {
                    round_trip: Duration::from_micros(avg),
                    usual: Duration::from_micros(usual),
                };
            }
        }
        if g.batches_retried > 0 && g.batches_retried as f64 >= RETRY_SHARE * g.batches as f64 {
            return Verdict::Retries {
                retried: g.batches_retried,
                sent: g.batches,
                last_error: w.last_retry_error,
            };
        }
        let saturated_fraction = w.fraction(g.saturated_ns);
        let full_share = share(g.batches_full, g.batches);
        if saturated_fraction >= SATURATED_FRACTION && full_share >= FULL_SHARE {
            return Verdict::InFlightCap {
                max_in_flight: self.settings.max_in_flight,
                saturated_fraction,
                full_share,
            };
        }
        if b.records_waiting || g.requests > 0 {
            if let Some(cause) = self.backpressure() {
                return Verdict::Backpressure { cause };
            }
        }
        let linger = self.settings.linger;
        let lingered_share = share(g.requests_lingered, g.requests);
        let round_trip = Duration::from_micros(round_trip.unwrap_or(0));
        if !linger.is_zero() && lingered_share >= LINGERED_SHARE && linger >= round_trip {
            return Verdict::Linger {
                linger,
                lingered_share,
                round_trip,
            };
        }
        let per_batch = g.bytes as f64 / (g.batches + g.batches_retried) as f64;
        Verdict::CallerBound {
            records_per_sec: w.per_second(g.records),
            busy_fraction: w.fraction(g.busy_ns),
            batch_fill: per_batch / self.settings.batch_size.max(1) as f64,
        }
    }
}

/// `n / of` (NaN when `of` is 0).
fn share(n: u64, of: u64) -> f64 {
    if of == 0 {
        f64::NAN
    } else {
        n as f64 / of as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::BrokerWindow;

    const MS: u64 = 1_000_000;

    /// A snapshot with one broker whose window is `g` over 1 s.
    fn snapshot(records_waiting: bool, g: impl FnOnce(&mut BrokerWindow)) -> MetricsSnapshot {
        let mut b = BrokerMetrics::new(4, "h".into(), 9092, ConnectionState::Ready);
        b.records_waiting = records_waiting;
        b.window.span = Duration::from_secs(1);
        g(&mut b.window);
        let mut s = MetricsSnapshot::default();
        s.windowed.elapsed = Duration::from_secs(1);
        s.settings.max_in_flight = 5;
        s.settings.batch_size = 1000;
        s.brokers.push(b);
        s
    }

    fn verdict(s: &MetricsSnapshot) -> Verdict {
        s.diagnose().brokers[0].verdict
    }

    #[test]
    fn the_limit_nearest_the_broker_wins() {
        // Down, throttled, retried, saturated with full batches and a waiting caller at once:
        // the connection is named.
        let all = |w: &mut BrokerWindow| {
            w.growth.down_ns = 600 * MS;
            w.growth.requests = 4;
            w.growth.throttle_ms = 500;
            w.growth.batches = 4;
            w.growth.batches_full = 4;
            w.growth.batches_retried = 4;
            w.growth.saturated_ns = 900 * MS;
        };
        let mut s = snapshot(true, all);
        s.buffer_wait_running = Duration::from_secs(1);
        assert!(matches!(verdict(&s), Verdict::NotConnected { .. }));
        // Without records waiting, being down says nothing: the throttle is next.
        s.brokers[0].records_waiting = false;
        assert!(matches!(verdict(&s), Verdict::Throttled { .. }));
        s.brokers[0].window.growth.throttle_ms = 50;
        assert!(matches!(
            verdict(&s),
            Verdict::Retries {
                retried: 4,
                sent: 4,
                ..
            }
        ));
        s.brokers[0].window.growth.batches_retried = 0;
        assert!(matches!(
            verdict(&s),
            Verdict::InFlightCap {
                max_in_flight: 5,
                ..
            }
        ));
        // Saturated with batches not full: not the cap; the buffer wait is next.
        s.brokers[0].window.growth.batches_full = 1;
        assert_eq!(
            verdict(&s).setting(),
            Some("buffer.memory"),
            "{}",
            s.diagnose()
        );
    }

    /// The backpressure cause is the wait that took the larger part of the window: buffer
    /// space (on a tie too) or the queue-delay limit, each with the numbers behind it.
    #[test]
    fn the_longer_wait_names_the_backpressure_cause() {
        let mut s = snapshot(true, |w| w.growth.requests = 4);
        s.buffer_total_bytes = 1000;
        s.queue_delay_limit_bytes = Some(300);
        s.unacknowledged_bytes = 310;
        s.windowed.growth.buffer_wait_ns = 100 * MS;
        s.windowed.growth.queue_delay_wait_ns = 150 * MS;
        assert!(
            matches!(verdict(&s), Verdict::CallerBound { .. }),
            "neither wait reaches a fifth of the window"
        );
        s.queue_delay_wait_running = Duration::from_millis(100);
        let v = verdict(&s);
        assert_eq!(
            v,
            Verdict::Backpressure {
                cause: BackpressureCause::QueueDelay {
                    wait_fraction: 0.25,
                    limit_bytes: 300,
                    unacknowledged_bytes: 310,
                }
            }
        );
        assert_eq!(v.setting(), Some("queue.delay.target.ms"));
        assert!(v
            .to_string()
            .contains("310 bytes unacknowledged, limit 300 bytes"));
        s.buffer_wait_running = Duration::from_millis(150);
        assert!(
            matches!(
                verdict(&s),
                Verdict::Backpressure {
                    cause: BackpressureCause::BufferMemory { wait_fraction, .. }
                } if wait_fraction == 0.25
            ),
            "a tie: buffer space"
        );
    }

    #[test]
    fn slow_needs_both_the_factor_and_the_margin() {
        let slow = |avg_us: u64, usual_us: u64| {
            snapshot(false, |w| {
                w.growth.responses = 10;
                w.growth.latency_us = avg_us * 10;
                w.baseline_latency_us = Some(usual_us);
            })
        };
        assert!(matches!(
            verdict(&slow(60_000, 5_000)),
            Verdict::SlowBroker { .. }
        ));
        // 3x but only 10 ms above: a fast broker's jitter, not slowness.
        assert!(matches!(
            verdict(&slow(15_000, 5_000)),
            Verdict::CallerBound { .. }
        ));
        // 25 ms above but under 3x.
        assert!(matches!(
            verdict(&slow(75_000, 50_000)),
            Verdict::CallerBound { .. }
        ));
    }

    #[test]
    fn linger_needs_lingered_requests_and_a_linger_above_the_round_trip() {
        let mut s = snapshot(false, |w| {
            w.growth.requests = 10;
            w.growth.requests_lingered = 8;
            w.growth.responses = 10;
            w.growth.latency_us = 10 * 4_000;
        });
        s.settings.linger = Duration::from_millis(20);
        assert!(matches!(verdict(&s), Verdict::Linger { .. }));
        s.settings.linger = Duration::from_millis(2);
        assert!(matches!(verdict(&s), Verdict::CallerBound { .. }));
    }

    #[test]
    fn each_broker_gets_one_line_naming_the_setting() {
        let s = snapshot(false, |w| {
            w.growth.saturated_ns = 800 * MS;
            w.growth.batches = 10;
            w.growth.batches_full = 9;
        });
        let text = s.diagnose().to_string();
        assert_eq!(
            text,
            "diagnose: node 4 (h:9092) 0 rec/s, 0.0 MB/s: batches are full and the in-flight \
             cap is reached: all 5 in-flight slots busy 80% of the time, 90% of batches full \
             -> max.in.flight.requests.per.connection: raise \
             max.in.flight.requests.per.connection (5 at most with idempotence) or batch.size\n"
        );
        // A bootstrap address that carried nothing gets no line.
        let mut s = MetricsSnapshot::default();
        s.brokers.push(BrokerMetrics::new(
            -1,
            "b".into(),
            1,
            ConnectionState::Ready,
        ));
        assert!(s.diagnose().brokers.is_empty());
        assert_eq!(
            s.diagnose().to_string(),
            "diagnose: no broker carried traffic\n"
        );
    }
}
