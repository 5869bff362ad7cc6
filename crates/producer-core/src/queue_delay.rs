//! The queue-delay limit (`queue.delay.target.ms`): how many unacknowledged bytes the producer
//! lets `send` add, so that a producer offered more than the cluster absorbs keeps about
//! `target` of records queued instead of filling `buffer.memory`.
//!
//! Little's law: bytes queued = drain rate x time each waits. The limit measures the rate at
//! which the producer's bytes are acknowledged while it holds unacknowledged records (its
//! *busy* time: idle time is not counted, so a producer offered little still measures what is
//! drained when there is something to drain; and whether the cluster or the producer's own
//! thread is what bounds the rate, the rate is what comes out), and allows
//! `rate x (depth + linger + 2 x base round trip)` unacknowledged bytes, never fewer than a
//! floor and never more than `buffer.memory` (which stays the hard cap, checked apart). The
//! depth is the target, or less where a deeper queue does not pay (see "Learning the depth"
//! below); it is the time a record *queues*: what it spends in any case (its batch's `linger`, and
//! the Produce round trip without queueing) comes on top, so a producer far from its cluster,
//! or lingering long, is not held back for those. The round trip counts twice
//! ([`ROUND_TRIP_HEADROOM`]): `rate x round trip` is what must be in flight for the rate, and
//! a limit with no room above it lowers the rate it measures (batches still filling, a lull
//! of the sender) and then itself. On a simulated cluster that parks every request for 100 ms
//! (five in flight, a 50 ms target) the limit counting it once delivered 0.70x the limit-off
//! rate; counting it twice, 0.94x (`producer-sim`'s
//! `on_a_cluster_that_parks_requests_the_limit_keeps_the_rate_of_the_limit_off`).
//!
//! # The base round trip, and probing for it
//! The round trip counted is that of a request written while nothing else was in flight on its
//! connection: the shortest such in the current probe interval ([`PROBE_INTERVAL`], or
//! [`PROBE_ROUND_TRIPS`] base round trips if longer), which starts with the first such answer
//! once the one before has passed; it stands until then. A request written behind others waits
//! for them: a Kafka broker reads a connection's next request only once it has answered (or
//! parked) the one before, so under a drain bound by the broker the round trip of pipelined
//! requests is mostly that wait, and a limit that counted it (as a smoothed round trip would)
//! kept the broker's whole pipeline queued on top of the target: five requests of up to 1 MiB,
//! a quarter of a second on one Kafka node recompressing 20 MB/s. The base round trip is what
//! a record spends in flight when nothing is queued, and it is all the pipeline a cluster
//! that parks requests (acks=all waiting for replicas) needs: there the round trip of a
//! request sent alone is as long as any, `rate x base` stays in flight, and the limit rises
//! with the rate it lets through. When a probe interval passes without such a request (a
//! saturated producer keeps every pipeline busy), the producer probes ([`QueueDelay::probing`]):
//! each connection's next Produce request waits until nothing is in flight there, so it goes
//! alone (a Produce request in flight holds it; another kind of request in flight makes it
//! not alone, and the probe goes on), and carries one batch, and its answer ends the probe.
//! One batch, because a broker serves a request's batches in turn too: a probe that took
//! everything queued while the pipeline drained (up to `max.request.size`, 1 MiB, 50 ms on a
//! Kafka node that recompresses 20 MB/s) measured that queue again, and the limit, counting
//! it twice, kept 110-128 ms of records queued there at a 50 ms target; with one batch, 68-76
//! ms (`bench_e2e worker` runs). A batch grown under saturation (`batch.grow.max.bytes`) can
//! still be large: the probe takes the first batch the walk reaches, grown or not. The
//! pipeline drains once per interval: on a broker that serves requests in turn that costs
//! about the network round trip, on a cluster that
//! parks them one round trip of a single request in flight, at most a fiftieth of the time.
//! Until the first such answer the smoothed round trip of all answers stands in. One base
//! round trip serves every broker (the shortest among them), and an error answer sent alone
//! counts as one too.
//!
//! While the limit holds no sender back, it never goes below an eighth of `buffer.memory`
//! ([`BURST_SHARE`]): a burst that size is taken without pushing back, whatever drain was
//! measured while the producer was lightly loaded (which is only what it was offered), so a
//! caller that sends a few thousand records at once after a quiet spell is not refused long
//! before `buffer.memory`. It is also where the limit starts, before the first Produce answer
//! gives a drain to go by: a burst sent before the producer is connected queues that much at
//! most in front of later records, not a whole `buffer.memory` (a second of records on a single
//! Kafka node). (Starting at the brokers' floor instead kept a producer flooded from its start
//! from queueing the eighth, 400 ms on a Kafka node that drains 20 MB/s, but held an open-loop
//! sender back until the first sample: on the mock cluster, in two of three runs, its p99 at
//! half the peak rate rose from 1-9 ms to 5-36 ms.)
//!
//! A sample during which the limit held senders back (in `send`, or in a driver's queue)
//! measured the cluster's drain, not the offer: the next limit then follows that drain below
//! the eighth (to the pipeline floor below), else a cluster that drains 20 MB/s would keep the
//! eighth of a 64 MiB buffer queued, 400 ms, whatever the target. A hold still running counts
//! for every sample it spans: one in `send` until a record is accepted, one in a driver's
//! queue until the driver reports it over ([`QueueDelay::driver_hold`]; a driver tells of its
//! senders' holds when it takes its queue, which the tokio driver does only when something is
//! queued, and held senders queue nothing). The first sample without a sender held back
//! brings the eighth back. Above it the limit follows the drain; it rises at once when the
//! cluster takes more: each sample while the limit binds measures about `limit / round trip`,
//! so the next limit is the last times `(depth + linger + 2 x round trip) / round trip`.
//! Each sample spans a quarter of the depth of busy time at least (1 ms at least), and the
//! smoothed round trip. While the producer is idle
//! the rate keeps its last value: the limit never drops below the floor for want of traffic.
//!
//! # One limit for the producer, from the whole producer's drain
//! `send` admits a record before it is routed (a record without a key gets its partition, and
//! so its broker, only when it is appended; a record waiting for metadata has none), and the
//! drivers' command queue in front of the core is one budget: the limit is the producer's.
//! It needs the producer's total drain rate. That is measured directly: each Produce answer
//! adds the bytes it acknowledged and the time since the later of the previous answer from
//! any broker and the moment the producer last went from holding nothing unacknowledged to
//! holding records, so the busy time of brokers draining at once is counted once and their
//! bytes add up. (Summing rates measured per broker would count a
//! broker no longer written to at its last rate, and overstate brokers that drain in turn.)
//! The floor: enough unacknowledged bytes for `max.in.flight` full batches and an open one on
//! every broker the producer knows, so that a limit near the floor still keeps every broker's
//! pipeline full, or a full batch for every partition with something to send if that is more,
//! so that the limit never keeps a batch from filling. With keys spread over thousands of partitions the
//! cluster's drain is bound by batches per second, not bytes: a limit that held the queue
//! to what was drained made batches of one record, which lowered the drain, which lowered the
//! limit (one topic of 10,000 partitions on one Kafka node: 4,000 records/s, a tenth of the
//! rate without the limit). There the floor reaches `buffer.memory` and the limit stands
//! aside.
//!
//! # Learning the depth (`queue.delay.min.ms`)
//! How long records should queue depends on the cluster. Where a deeper queue does not raise
//! its drain (a broker whose work is per byte: one Kafka node recompressing every batch drained
//! as much or more with a few milliseconds queued as with fifty), any queue above the pipeline
//! is only delay; where it does (a broker whose work is per request: a deeper queue lets
//! batches grow while every in-flight slot is busy, and fewer, larger requests drain more),
//! a short queue costs rate. With `queue.delay.min.ms` below the target the limit learns which
//! ([`DepthLearning`]): it starts at the least depth, and while it holds senders back it
//! measures the drain over a phase of samples (the mean of their middle half, so that a
//! sample spanning a probe or a stall does not count), then holds the limit fixed at twice
//! or half of what it was for a phase (a trial: fixed, so the queue is at once what is tried;
//! a limit that followed the drain would reach a deeper queue over many round trips where
//! depth pays through larger batches, and the phase would measure the climb). A deeper trial
//! is kept if it drained a tenth more, a shallower one unless it drained a twentieth less;
//! the depth is then what the trial's limit is at the drain it measured, within the least
//! and the target. A trial that clearly does not pay ends after two samples, and each that
//! does not pay doubles the phases before the next (up to eight): a producer whose depth is
//! right spends about a tenth of its samples trying another. A sample that held no sender back
//! measured the offer, not the drain: its phase counts for nothing and a trial running ends
//! at once (its fixed limit would otherwise keep the burst floor from a producer no longer
//! saturated); the depth changes only while the producer is offered more than the cluster
//! drains. Measured on one
//! Kafka node recompressing every batch (`bench_e2e --saturation`): 25-29 ms from send on
//! average against 70-74 at the 50 ms target alone, at a higher rate; on the simulated
//! brokers that serve requests in turn (`producer-sim`'s `queue_delay` tests), the least
//! depth's latency where depth does not pay and about the target's drain where it does.
//!
//! # What is counted
//! Bytes as `buffer.memory` counts them (a record's encoded size and its entry), of records
//! not yet acknowledged: a transactional producer's acknowledged records, held for the
//! transaction's end, count against `buffer.memory` but not here.
//!
//! # Cost
//! `send` pays one comparison ([`QueueDelay::admits`]); the rate is updated once per Produce
//! answer, the limit once per sample (at least a quarter of the depth of busy time).

use std::time::{Duration, Instant};

use crate::config::{Acks, Config};

/// The smoothing of a fall of the drain rate: each lower sample moves the rate this fraction
/// of the way down (a higher one sets it at once). Slow, so that a short stall (the cluster's,
/// or the producer's thread not scheduled) does not hold senders back once it is over.
const SMOOTHING: f64 = 0.125;

/// The share of `buffer.memory` the limit never goes below (and starts at): `buffer.memory / 8`.
const BURST_SHARE: usize = 8;

/// The weight of each answer's round trip in the smoothed one (TCP's SRTT gain).
const ROUND_TRIP_GAIN: f64 = 0.125;

/// How many times the limit counts the base round trip: the bytes in flight the rate needs,
/// and as much again as headroom (as BBR's congestion window is twice its bandwidth-delay
/// product); see the module documentation.
const ROUND_TRIP_HEADROOM: u32 = 2;

/// The shortest probe interval: the base round trip is the shortest sample of the current
/// interval, and a probe starts once an interval passes without one.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The probe interval is at least this many base round trips, so that probing (a pipeline
/// drained for about one round trip) costs at most about a fiftieth of the time.
const PROBE_ROUND_TRIPS: u32 = 50;

/// Drain samples a phase of the depth learning lets pass before it measures: the queue takes
/// about that long to settle at a new depth (the bytes above a lowered limit drain, those
/// below a raised one fill).
const DEPTH_SETTLE_SAMPLES: u32 = 2;

/// Drain samples a phase of the depth learning measures over, once settled.
const DEPTH_MEASURE_SAMPLES: u32 = 8;

/// The most phases measured at the learned depth between two trials: trials that do not pay
/// come less often (at most one phase in this many and one, once settled), as BBR probes for
/// bandwidth an eighth of its time.
const DEPTH_MAX_WAIT: u32 = 8;

/// Measured samples after which a trial that clearly does not pay ends: a deeper one that
/// drained less than [`DEPTH_EARLY_PAYS`] times the depth before, a shallower one that
/// drained less than [`DEPTH_EARLY_COSTS`] of it.
const DEPTH_EARLY_SAMPLES: u32 = 2;

/// See [`DEPTH_EARLY_SAMPLES`].
const DEPTH_EARLY_PAYS: f64 = 1.03;

/// See [`DEPTH_EARLY_SAMPLES`].
const DEPTH_EARLY_COSTS: f64 = 0.85;

/// A deeper queue is kept only if it drained at least this much more than the depth before
/// (the mean of the middle half of a phase's samples; one sample's drain varies by 10-15% on
/// a steady cluster).
const DEPTH_PAYS: f64 = 1.10;

/// A shallower queue is kept unless it drained less than this share of the depth before.
const DEPTH_COSTS: f64 = 0.95;

/// What the floor of the limit counts, asked of the producer when a sample completes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backlog {
    /// Brokers the producer knows.
    pub(crate) brokers: usize,
    /// Partitions with something to send (an open batch, or sealed ones waiting).
    pub(crate) partitions: usize,
}

/// The queue-delay limit's state; see the module documentation.
#[derive(Debug)]
pub(crate) struct QueueDelay {
    /// `queue.delay.target.ms`; `None`: the limit is off.
    target: Option<Duration>,
    /// The queueing the limit allows now: the target, or less when learned
    /// ([`DepthLearning`]).
    depth: Duration,
    /// Learns `depth` within `queue.delay.min.ms` and the target; `None`: the depth is the
    /// target.
    learning: Option<DepthLearning>,
    /// The limit a trial of the depth learning holds fixed for its phase.
    trial_limit: Option<usize>,
    /// The drain rate when the trial running started.
    rate_before_trial: f64,
    /// Unacknowledged bytes `send` may reach now ([`usize::MAX`] when off).
    allowed: usize,
    /// Floor bytes per broker known: `(max.in.flight + 1) x batch.size`.
    floor_per_broker: usize,
    /// `batch.size`: floor bytes per partition with something to send.
    batch_size: usize,
    /// `buffer.memory`: the limit never goes above it.
    cap: usize,
    /// The smoothed drain rate, bytes per second of busy time; 0 until measured.
    rate: f64,
    /// The sample being gathered: bytes acknowledged and busy time.
    sample_bytes: usize,
    sample_busy: Duration,
    /// When the previous Produce answer came (from any broker).
    last_answer: Option<Instant>,
    /// When `send` last accepted a record while nothing was unacknowledged: the start of the
    /// current busy period.
    busy_since: Option<Instant>,
    /// The Produce round trip, smoothed (each answer moves it [`ROUND_TRIP_GAIN`] of the way
    /// to its own); `None` until the first answer. How long a sample spans at least, and the
    /// round trip counted until a request sent alone is answered.
    round_trip: Option<Duration>,
    /// The base round trip: the shortest round trip of a Produce request sent alone on its
    /// connection in the current probe interval.
    base: Option<Duration>,
    /// When the current probe interval started: at the first answer to a request sent alone
    /// once the one before had passed. A probe is due when it has passed.
    interval_start: Option<Instant>,
    /// `linger.ms`.
    linger: Duration,
    /// When `send` was first refused by this limit since a record was last accepted.
    held_since: Option<Instant>,
    /// Senders were held back by this limit (in `send`, or in a driver's queue) during the
    /// sample being gathered: its rate is then what the cluster drains, not only what the
    /// producer was offered, and the burst floor stands aside (see the module docs).
    held_in_sample: bool,
    /// A driver reported senders held back by this limit in its own queue, and has not
    /// reported the wait over: it counts for every sample until then, as a wait in `send`
    /// does ([`QueueDelay::driver_hold`]).
    driver_holding: bool,
}

impl QueueDelay {
    /// The limit `config` asks for, before any drain is measured: its floor for the bootstrap
    /// brokers, at least an eighth of `buffer.memory` (see the module documentation). Off with a
    /// zero target, and with `acks=0` (no acknowledgement measures the
    /// drain; records leave the buffer as their requests are written).
    pub(crate) fn new(config: &Config) -> Self {
        let target =
            Some(config.queue_delay_target).filter(|t| !t.is_zero() && config.acks != Acks::None);
        let floor_per_broker = config
            .batch_size
            .saturating_mul(config.max_in_flight.saturating_add(1));
        let min = config.queue_delay_min.max(Duration::from_millis(1));
        let learning = target
            .filter(|&t| min < t)
            .map(|t| DepthLearning::new(min, t));
        let mut q = QueueDelay {
            target,
            depth: learning
                .as_ref()
                .map_or(config.queue_delay_target, |l| l.start()),
            learning,
            trial_limit: None,
            rate_before_trial: 0.0,
            allowed: usize::MAX,
            floor_per_broker,
            batch_size: config.batch_size,
            cap: config.buffer_memory,
            rate: 0.0,
            sample_bytes: 0,
            sample_busy: Duration::ZERO,
            last_answer: None,
            busy_since: None,
            round_trip: None,
            base: None,
            interval_start: None,
            linger: config.linger,
            held_since: None,
            held_in_sample: false,
            driver_holding: false,
        };
        if q.target.is_some() {
            q.update(
                Backlog {
                    brokers: config.bootstrap.len(),
                    partitions: 0,
                },
                false,
            );
        }
        q
    }

    /// Whether a record may be accepted beside `unacked` unacknowledged bytes: while they
    /// are below the limit (so the limit is passed by one record at most, and a record larger
    /// than the limit is not held back for ever). Call it on every `send`: one comparison.
    #[inline(always)]
    pub(crate) fn admits(&self, unacked: usize) -> bool {
        unacked < self.allowed
    }

    /// `send` accepted a record at `now` while nothing was unacknowledged: a busy period
    /// starts (the time before it is not counted as drain time).
    #[inline]
    pub(crate) fn busy_from(&mut self, now: Instant) {
        self.busy_since = Some(now);
    }

    /// Unacknowledged bytes `send` may reach now ([`usize::MAX`] when the limit is off).
    pub(crate) fn allowed(&self) -> usize {
        self.allowed
    }

    /// The smoothed drain rate in bytes per second of busy time (0 until measured, or off).
    #[cfg(test)]
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// Bytes of records acknowledged by the answer being handled (call before
    /// [`QueueDelay::answered`] for the same answer).
    #[inline]
    pub(crate) fn acknowledged(&mut self, bytes: usize) {
        self.sample_bytes = self.sample_bytes.saturating_add(bytes);
    }

    /// A Produce answer came at `now` for a request written at `sent_at` (call it after the
    /// answer's batches were reported); `sent_alone`: nothing else was in flight on its
    /// connection when it was written (its round trip is a base round trip sample, and ends a
    /// probe); `backlog` gives the brokers the producer knows and the partitions with
    /// something to send (for the floor), asked only when a sample completes. Adds the busy
    /// time since the later of the previous answer and the start of the busy period (the first
    /// answer: since `sent_at`); once the sample spans enough, folds it into the rate and sets
    /// the limit anew. Returns whether the limit rose.
    pub(crate) fn answered(
        &mut self,
        now: Instant,
        sent_at: Instant,
        sent_alone: bool,
        backlog: impl FnOnce() -> Backlog,
    ) -> bool {
        if self.target.is_none() {
            return false;
        }
        let from = match (self.last_answer, self.busy_since) {
            (Some(last), Some(busy)) => last.max(busy),
            (Some(last), None) => last,
            (None, _) => sent_at,
        };
        self.last_answer = Some(now);
        let round_trip = now.saturating_duration_since(sent_at);
        self.round_trip = Some(self.round_trip.map_or(round_trip, |smoothed| {
            smoothed.mul_f64(1.0 - ROUND_TRIP_GAIN) + round_trip.mul_f64(ROUND_TRIP_GAIN)
        }));
        if sent_alone {
            self.base_sample(now, round_trip);
        }
        self.sample_busy += now.saturating_duration_since(from);
        // A sample spans a round trip at least: the answers of pipelined requests come back to
        // back, and a sample of those alone would count a whole round trip's bytes in a
        // moment (and the rate rises at once).
        let span = (self.depth / 4).max(Duration::from_millis(1));
        if self.sample_busy < span.max(self.round_trip.unwrap_or_default()) {
            return false;
        }
        let sample = self.sample_bytes as f64 / self.sample_busy.as_secs_f64();
        // Up at once, down smoothed: a rise is the cluster taking more than the limit let it
        // have (the sample is bounded by what was queued), a fall may be a lull.
        self.rate = match self.rate {
            r if r > 0.0 && sample < r => r + SMOOTHING * (sample - r),
            _ => sample,
        };
        let (sample_bytes, sample_busy) = (self.sample_bytes, self.sample_busy);
        self.sample_bytes = 0;
        self.sample_busy = Duration::ZERO;
        // A hold still running (in `send`, or in a driver's queue) counts for this sample and
        // the next.
        let holding = self.held_since.is_some() || self.driver_holding;
        let held = std::mem::replace(&mut self.held_in_sample, holding) || holding;
        let backlog = backlog();
        if let Some(mut learning) = self.learning.take() {
            // A deeper trial may pass what the target gives at the drain now: where depth
            // pays, the drain rises with it.
            let bounds = (
                self.limit_at(learning.min, backlog, held),
                if self.depth < learning.max {
                    self.cap
                } else {
                    self.allowed
                },
            );
            match learning.sampled(sample_bytes, sample_busy, held, self.allowed, bounds) {
                DepthStep::Stay => {}
                DepthStep::Try(limit) => {
                    self.trial_limit = Some(limit);
                    self.rate_before_trial = self.rate;
                }
                DepthStep::Keep(limit, drain) => {
                    self.depth = learning.depth_for(limit, drain, self.rest_of_delay());
                    self.trial_limit = None;
                }
                // The trial's samples measured its limit, not the depth's: the rate is the
                // one before it (else a shallower trial's lower drain would hold the limit
                // below the depth's until the rate climbs back, sample by sample).
                DepthStep::Back => {
                    self.trial_limit = None;
                    self.rate = self.rate_before_trial;
                }
            }
            self.learning = Some(learning);
        }
        let before = self.allowed;
        self.update(backlog, held);
        self.allowed > before
    }

    /// Sets the limit from the rate: `rate x (depth + linger + 2 x base round trip)`, within the
    /// floor for `backlog` and `buffer.memory` (or the trial limit while the depth learning
    /// runs a trial). `held`: senders were held back by the limit
    /// while the rate was measured (it is the cluster's drain), so the burst floor, an eighth
    /// of `buffer.memory`, does not apply.
    fn update(&mut self, backlog: Backlog, held: bool) {
        self.allowed = if self.target.is_none() {
            usize::MAX
        } else if let Some(trial) = self.trial_limit {
            trial
        } else {
            self.limit_at(self.depth, backlog, held)
        };
    }

    /// What the limit counts beside the depth: `linger` and twice the base round trip.
    fn rest_of_delay(&self) -> Duration {
        let round_trip = self.base.or(self.round_trip).unwrap_or_default();
        self.linger + round_trip * ROUND_TRIP_HEADROOM
    }

    /// The limit `rate x (depth + linger + 2 x base round trip)` would set, within the floor
    /// for `backlog` (and the burst floor unless `held`) and `buffer.memory`.
    fn limit_at(&self, depth: Duration, backlog: Backlog, held: bool) -> usize {
        let burst = if held { 0 } else { self.cap / BURST_SHARE };
        let floor = self
            .floor_per_broker
            .saturating_mul(backlog.brokers.max(1))
            .max(self.batch_size.saturating_mul(backlog.partitions))
            .max(burst)
            .min(self.cap);
        let delay = depth + self.rest_of_delay();
        let wanted = (self.rate * delay.as_secs_f64()).min(self.cap as f64) as usize;
        wanted.clamp(floor, self.cap)
    }

    /// The probe interval: [`PROBE_INTERVAL`], or [`PROBE_ROUND_TRIPS`] base round trips if
    /// that is longer.
    fn probe_interval(&self) -> Duration {
        PROBE_INTERVAL.max(
            self.base
                .unwrap_or_default()
                .saturating_mul(PROBE_ROUND_TRIPS),
        )
    }

    /// Takes `round_trip`, that of a request sent alone, answered at `now`: the first once the
    /// probe interval has passed starts the next interval (and ends a probe); the base round
    /// trip is the shortest of the interval's.
    fn base_sample(&mut self, now: Instant, round_trip: Duration) {
        match self.interval_start {
            Some(start) if now.saturating_duration_since(start) < self.probe_interval() => {
                self.base = self.base.map(|b| b.min(round_trip));
            }
            _ => {
                self.interval_start = Some(now);
                self.base = Some(round_trip);
            }
        }
    }

    /// Whether the limit probes the base round trip at `now`: the probe interval has passed
    /// without an answer to a request sent alone (or none came yet, once an answer did).
    /// While it does, the producer writes a connection's next Produce request only once no
    /// Produce request is in flight there, with one batch if nothing else is in flight either
    /// (the request sent alone); the answer to that request ends the probe.
    /// Call it where the producer decides whether a connection takes another request: a
    /// comparison.
    #[inline]
    pub(crate) fn probing(&self, now: Instant) -> bool {
        if self.target.is_none() {
            return false;
        }
        match self.interval_start {
            Some(start) => now.saturating_duration_since(start) >= self.probe_interval(),
            None => self.round_trip.is_some(),
        }
    }

    /// `send` was refused by this limit at `now`: a wait starts, unless one already runs.
    #[cold]
    pub(crate) fn held_back(&mut self, now: Instant) {
        self.held_since.get_or_insert(now);
        self.held_in_sample = true;
    }

    /// A driver held senders back by this limit in its own queue, in a wait that ended: the
    /// sample being gathered measures the cluster's drain.
    pub(crate) fn held_in_driver(&mut self) {
        self.held_in_sample = true;
    }

    /// A driver says whether senders are held back by this limit in its own queue now
    /// (`running`). Call it each time the driver learns it (when it takes its queue). While a
    /// wait runs, every sample counts as held, until the driver says none runs (or a wait for
    /// another cause): the tokio driver takes its queue only when something is queued, which
    /// its held senders do not do, so one report is all a long wait gets there (the mio
    /// driver takes it on every turn of its loop). (Counted only for the sample it came in, the
    /// wait let the next sample bring the burst floor back, an eighth of `buffer.memory`,
    /// which the senders then filled: the tokio driver's senders, unscraped, on a Kafka node
    /// that drains 20 MB/s kept about 190 ms queued instead of 70.)
    pub(crate) fn driver_hold(&mut self, running: bool) {
        self.driver_holding = running;
        self.held_in_sample |= running;
    }

    /// Whether a wait started by [`QueueDelay::held_back`] runs (one branch on `send`'s path).
    #[inline(always)]
    pub(crate) fn holding_back(&self) -> bool {
        self.held_since.is_some()
    }

    /// Since when the wait started by [`QueueDelay::held_back`] runs, if one does.
    pub(crate) fn held_since(&self) -> Option<Instant> {
        self.held_since
    }

    /// A record was accepted at `now`: the wait ends; returns how long it lasted.
    #[cold]
    pub(crate) fn hold_ended(&mut self, now: Instant) -> Duration {
        self.held_since
            .take()
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }
}

/// Learns how deep a queue pays (`queue.delay.min.ms` below the target). While the limit
/// holds senders back it measures the drain over a phase of samples at the depth it has,
/// then over a phase at a trial limit: the limit it had, doubled or halved (by turns, within
/// what the least and the target allow), held fixed for the phase so that the queue is at
/// once what it tries (a limit that followed the drain would reach it over many round trips
/// where depth pays through larger batches, and the phase would measure the climb). A
/// shallower trial is kept if it drained at least [`DEPTH_COSTS`] of the depth before, a
/// deeper one if it drained [`DEPTH_PAYS`] times it; the depth is then the one the trial limit
/// gives at the drain measured. A sample that held no sender back measured the offer, not the
/// drain: the phase it falls in counts for nothing, and a trial running ends at once (it goes
/// back without counting as a trial that did not pay). Trials that do not pay come less
/// often.
#[derive(Debug)]
struct DepthLearning {
    min: Duration,
    max: Duration,
    /// The trial running: its limit, and whether it is deeper than the depth the limit has.
    trial: Option<(usize, bool)>,
    /// Samples taken in the phase.
    samples: u32,
    /// The drain of each sample measured in the phase (after it settled), bytes per second.
    drains: [f64; DEPTH_MEASURE_SAMPLES as usize],
    /// The drain measured at the depth the limit has, bytes per second.
    drain_before: f64,
    /// The next trial goes deeper.
    next_deeper: bool,
    /// Phases measured at the depth the limit has before the next trial.
    wait: u32,
    /// The wait after the next trial that does not pay: doubled by each (up to
    /// [`DEPTH_MAX_WAIT`]), one again after one that pays.
    backoff: u32,
}

/// What the depth learning asks of the limit once a sample completes.
#[derive(Debug, PartialEq)]
enum DepthStep {
    /// Go on as before.
    Stay,
    /// Hold the limit at this many bytes for the next phase (a trial).
    Try(usize),
    /// The trial paid: the depth is what its limit gives at this drain (bytes per second).
    Keep(usize, f64),
    /// The trial did not pay: back to the depth before it.
    Back,
}

impl DepthLearning {
    fn new(min: Duration, max: Duration) -> Self {
        DepthLearning {
            min,
            max,
            trial: None,
            samples: 0,
            drains: [0.0; DEPTH_MEASURE_SAMPLES as usize],
            drain_before: 0.0,
            next_deeper: true,
            wait: 0,
            backoff: 1,
        }
    }

    /// The depth to start at: the least (a deeper queue is kept once it pays).
    fn start(&self) -> Duration {
        self.min
    }

    /// A drain sample completed: `bytes` acknowledged over `busy`, `held` whether senders were
    /// held back in it; `now` is the limit, `shallowest` and `deepest` those the least depth
    /// and the target give now.
    fn sampled(
        &mut self,
        bytes: usize,
        busy: Duration,
        held: bool,
        now: usize,
        (shallowest, deepest): (usize, usize),
    ) -> DepthStep {
        if !held {
            // The sample measured the offer, not the drain: the phase counts for nothing, and
            // a trial running ends (its fixed limit would keep the burst floor from a producer
            // no longer offered more than the cluster drains).
            self.samples = 0;
            self.drains = [0.0; DEPTH_MEASURE_SAMPLES as usize];
            return match self.trial.take() {
                Some(_) => DepthStep::Back,
                None => DepthStep::Stay,
            };
        }
        self.samples += 1;
        if self.samples > DEPTH_SETTLE_SAMPLES && !busy.is_zero() {
            self.drains[(self.samples - DEPTH_SETTLE_SAMPLES - 1) as usize] =
                bytes as f64 / busy.as_secs_f64();
        }
        if self.samples == DEPTH_SETTLE_SAMPLES + DEPTH_EARLY_SAMPLES {
            if let Some((_, deeper)) = self.trial {
                // A trial that clearly does not pay ends early: where it costs, it costs
                // every sample it runs.
                let early = &self.drains[..DEPTH_EARLY_SAMPLES as usize];
                let drain = early.iter().sum::<f64>() / early.len() as f64;
                let clearly_not = if deeper {
                    drain < DEPTH_EARLY_PAYS * self.drain_before
                } else {
                    drain < DEPTH_EARLY_COSTS * self.drain_before
                };
                if clearly_not {
                    return self.trial_ended(None);
                }
            }
        }
        if self.samples < DEPTH_SETTLE_SAMPLES + DEPTH_MEASURE_SAMPLES {
            return DepthStep::Stay;
        }
        // The mean of the middle half: a sample that spans a probe (the pipeline drained) or
        // a stall is not the depth's drain, nor one that catches an extra answer.
        self.drains.sort_by(f64::total_cmp);
        let quarter = self.drains.len() / 4;
        let middle = &self.drains[quarter..self.drains.len() - quarter];
        let drain = middle.iter().sum::<f64>() / middle.len() as f64;
        self.samples = 0;
        self.drains = [0.0; DEPTH_MEASURE_SAMPLES as usize];
        if self.trial.is_some() {
            return self.trial_ended(Some(drain));
        }
        self.drain_before = drain;
        if self.wait > 0 {
            self.wait -= 1;
            DepthStep::Stay
        } else {
            self.try_from(now, shallowest, deepest)
        }
    }

    /// The trial running ends, having measured `drain` (`None`: it did not pay whatever it
    /// measured).
    fn trial_ended(&mut self, drain: Option<f64>) -> DepthStep {
        let Some((limit, deeper)) = self.trial.take() else {
            return DepthStep::Stay;
        };
        self.samples = 0;
        self.drains = [0.0; DEPTH_MEASURE_SAMPLES as usize];
        let paid = drain.filter(|&drain| {
            if deeper {
                drain >= DEPTH_PAYS * self.drain_before
            } else {
                drain >= DEPTH_COSTS * self.drain_before
            }
        });
        if let Some(drain) = paid {
            self.backoff = 1;
            self.next_deeper = deeper;
            DepthStep::Keep(limit, drain)
        } else {
            self.wait = self.backoff;
            self.backoff = (self.backoff * 2).min(DEPTH_MAX_WAIT);
            self.next_deeper = !deeper;
            DepthStep::Back
        }
    }

    /// A trial from the limit `now`: doubled or halved, the way
    /// [`DepthLearning::next_deeper`] says (or the other if that way is at its bound),
    /// within `shallowest..=deepest`; [`DepthStep::Stay`] if neither way moves it by a
    /// quarter.
    fn try_from(&mut self, now: usize, shallowest: usize, deepest: usize) -> DepthStep {
        let deeper = now.saturating_mul(2).min(deepest);
        let shallower = (now / 2).max(shallowest);
        let deeper_moves = deeper as f64 >= 1.25 * now as f64;
        let shallower_moves = shallower as f64 * 1.25 <= now as f64;
        let go_deeper = match (deeper_moves, shallower_moves) {
            (true, true) => self.next_deeper,
            (true, false) => true,
            (false, true) => false,
            (false, false) => return DepthStep::Stay,
        };
        let limit = if go_deeper { deeper } else { shallower };
        self.trial = Some((limit, go_deeper));
        DepthStep::Try(limit)
    }

    /// The depth at which `rate x (depth + rest)` is `limit`, within the least and the target.
    fn depth_for(&self, limit: usize, rate: f64, rest: Duration) -> Duration {
        if rate <= 0.0 {
            return self.max;
        }
        Duration::from_secs_f64(limit as f64 / rate)
            .saturating_sub(rest)
            .clamp(self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request sent alone at `t`, answered 50 ms later acknowledging 1 MB (a 20 MB/s drain,
    /// three brokers known); `t` moves to the answer.
    fn answer_1_mb_in_50_ms(q: &mut QueueDelay, t: &mut Instant) {
        let sent = *t;
        *t += Duration::from_millis(50);
        q.acknowledged(1_000_000);
        q.answered(*t, sent, true, || brokers(3));
    }

    /// A backlog of `n` brokers and no partition with something to send.
    fn brokers(n: usize) -> Backlog {
        Backlog {
            brokers: n,
            partitions: 0,
        }
    }

    /// The depth is the target (`queue.delay.min.ms` at it: nothing learned), so that the
    /// limit is the formula's.
    fn config(target_ms: u64) -> Config {
        Config::builder([("a", 9092), ("b", 9092), ("c", 9092)])
            .linger(Duration::ZERO)
            .queue_delay_target(Duration::from_millis(target_ms))
            .queue_delay_min(Duration::from_millis(target_ms))
            .build()
            .unwrap()
    }

    /// Before any drain is measured the limit is an eighth of `buffer.memory` (4 MiB of 32),
    /// not the whole of it, and a slow drain never takes it below that: a burst of that size
    /// is taken without pushing back.
    #[test]
    fn starts_at_and_never_goes_below_an_eighth_of_buffer_memory() {
        let mut q = QueueDelay::new(&config(50));
        assert_eq!(q.allowed(), 4 << 20);
        let t0 = Instant::now();
        q.acknowledged(1000);
        q.answered(t0 + Duration::from_millis(20), t0, true, || brokers(3));
        assert_eq!(q.allowed(), 4 << 20, "a slow first answer: still an eighth");
        assert!(q.admits(0), "a record alone always goes, whatever its size");
        assert!(q.admits(q.allowed() - 1));
        assert!(!q.admits(q.allowed()));
    }

    /// While the limit binds, each sample measures about `limit / round trip` and the limit
    /// grows by `(target + 2 x round trip) / round trip` per sample: from the floor (after a slow
    /// first answer), a cluster that drains 1 GB/s with 2 ms round trips is reached within a
    /// few round trips.
    #[test]
    fn the_limit_grows_from_the_floor_to_the_drain_within_a_few_round_trips() {
        let mut q = QueueDelay::new(&config(10));
        let t0 = Instant::now();
        // A first answer of 1 kB after 3 ms: the floor.
        q.acknowledged(1000);
        q.answered(
            t0 + Duration::from_millis(20),
            t0 + Duration::from_millis(17),
            true,
            || brokers(3),
        );
        assert_eq!(q.allowed(), 4 << 20, "the floor");
        let drain = 1e9; // bytes per second the cluster could take
        let round_trip = Duration::from_millis(2);
        let mut t = t0 + Duration::from_millis(20);
        q.busy_from(t);
        let mut trips = 0;
        while (q.allowed() as f64) < drain * 0.010 && q.allowed() < 32 << 20 {
            // The cluster acknowledges what the limit let out, or its drain if that is less.
            let acked = (q.allowed() as f64).min(drain * round_trip.as_secs_f64());
            let sent = t;
            t += round_trip;
            q.acknowledged(acked as usize);
            q.answered(t, sent, true, || brokers(3));
            trips += 1;
            assert!(
                trips < 20,
                "still at {} after {trips} round trips",
                q.allowed()
            );
        }
        assert!(trips <= 8, "{trips} round trips to reach the drain");
    }

    /// The limit covers the bytes in flight the cluster needs at its round trip now, not at
    /// the shortest one ever seen: after a few 2 ms answers (an idle cluster) the round trip
    /// of a request sent alone grows to 100 ms under load (a cluster that parks requests,
    /// acks=all waiting for replicas, where a request takes as long alone as pipelined); with
    /// a 10 ms target, the cluster's 100 MB/s needs 10 MB in flight, and once the probe
    /// interval of the 2 ms answers has passed the limit keeps at least that (with the
    /// shortest round trip for ever it would allow rate x 12 ms, the rate measured would fall
    /// with it, and the limit again: a spiral to the floor).
    #[test]
    fn a_round_trip_grown_under_load_does_not_spiral_the_limit_down() {
        let mut q = QueueDelay::new(&config(10));
        let mut t = Instant::now();
        q.busy_from(t);
        for i in 0..300 {
            let round_trip = Duration::from_millis(if i < 5 { 2 } else { 100 });
            // Every 10 ms an answer: a tenth of what may be in flight (at most 10 MB, the
            // cluster's 100 MB/s at 100 ms), so the rate is `in flight / round trip`.
            let in_flight = q.allowed().min(10_000_000);
            t += Duration::from_millis(10);
            q.acknowledged(in_flight / 10);
            q.answered(t, t - round_trip, true, || brokers(1));
        }
        let rate = q.rate();
        assert!(rate > 90.0e6, "the measured rate fell to {rate}");
        assert!(q.allowed() >= 10_000_000, "allowed {}", q.allowed());
    }

    /// The floor is a full batch for every partition with something to send when that is more
    /// than the brokers' floor and an eighth of `buffer.memory`: with keys over 10,000
    /// partitions a slow drain does not hold the queue below what fills their batches (there
    /// the floor is `buffer.memory`), and 1,000 partitions with data keep 1,000 batches' worth.
    #[test]
    fn the_floor_counts_a_batch_for_every_partition_with_data() {
        let slow = |partitions| {
            let mut q = QueueDelay::new(&config(20));
            let t0 = Instant::now();
            for i in 1..=20u32 {
                q.acknowledged(1000);
                q.answered(t0 + Duration::from_millis(20) * i, t0, true, || Backlog {
                    brokers: 1,
                    partitions,
                });
            }
            q.allowed()
        };
        assert_eq!(slow(0), 4 << 20, "an eighth of buffer.memory");
        assert_eq!(slow(1000), 1000 * 16 * 1024);
        assert_eq!(slow(10_000), 32 << 20, "buffer.memory");
    }

    /// A zero target and `acks=0` turn the limit off: it admits up to `buffer.memory` (which
    /// is checked apart).
    #[test]
    fn a_zero_target_or_acks_0_is_off() {
        let off = QueueDelay::new(&config(0));
        assert_eq!(off.allowed(), usize::MAX);
        assert!(off.admits(31 << 20));
        let acks0 = Config::builder([("a", 9092)])
            .acks(Acks::None)
            .build()
            .unwrap();
        assert_eq!(QueueDelay::new(&acks0).allowed(), usize::MAX);
    }

    /// With the cluster acknowledging 200 MB per second of busy time, the limit settles at
    /// rate x (target + 2 x round trip): 10.4 MB for 50 ms and 1 ms; idle gaps between answers
    /// are not busy time.
    #[test]
    fn the_limit_follows_the_drain_rate_times_the_target() {
        let mut q = QueueDelay::new(&config(50));
        let mut t = Instant::now();
        for i in 0..200u64 {
            if i % 50 == 0 {
                // An idle second now and then, nothing held: not counted (a record accepted
                // with nothing unacknowledged starts the next busy period).
                t += Duration::from_secs(1);
                q.busy_from(t);
            }
            // A request written at `sent`, answered a millisecond later with 200 kB.
            let sent = t;
            t += Duration::from_millis(1);
            q.acknowledged(200_000);
            q.answered(t, sent, true, || brokers(3));
        }
        let rate = q.rate();
        assert!((180.0e6..220.0e6).contains(&rate), "rate {rate}");
        let allowed = q.allowed();
        assert!(
            (9_180_000..11_220_000).contains(&allowed),
            "allowed {allowed}: 200 MB/s x 52 ms"
        );
    }

    /// A cluster that drains 20 MB/s (1 MB answered every 50 ms, one request in flight) while
    /// senders are held back: the drain measured is the cluster's, so the limit follows it
    /// below the burst floor (an eighth of 32 MiB, 200 ms of that drain) to about
    /// `rate x (target + 2 x round trip)`; once a sample passes with nobody held back, the burst
    /// floor is back.
    #[test]
    fn while_senders_are_held_back_the_limit_follows_the_drain_below_the_burst_floor() {
        let mut q = QueueDelay::new(&config(50));
        let burst_floor = 4 << 20;
        assert_eq!(q.allowed(), burst_floor);
        let mut t = Instant::now();
        // Lightly loaded (nobody held back): the burst floor stands, whatever the drain.
        for _ in 0..4 {
            answer_1_mb_in_50_ms(&mut q, &mut t);
        }
        assert_eq!(q.allowed(), burst_floor, "not held back: the burst floor");
        // Saturated: a sender refused by the limit, and again in every later sample.
        q.held_back(t);
        for _ in 0..4 {
            answer_1_mb_in_50_ms(&mut q, &mut t);
        }
        let allowed = q.allowed();
        assert!(
            (2_800_000..3_200_000).contains(&allowed),
            "allowed {allowed}: 20 MB/s x 150 ms (50 ms target + 2 x 50 ms round trip)"
        );
        // The senders go again and a sample passes with nobody held back.
        assert_eq!(q.hold_ended(t), Duration::from_millis(200));
        answer_1_mb_in_50_ms(&mut q, &mut t);
        answer_1_mb_in_50_ms(&mut q, &mut t);
        assert_eq!(
            q.allowed(),
            burst_floor,
            "nobody held back: the burst floor again"
        );
    }

    /// A driver's wait in its own queue (reported with `held_in_driver`) counts as senders held
    /// back by the limit.
    #[test]
    fn a_wait_in_the_driver_counts_as_held_back() {
        let mut q = QueueDelay::new(&config(50));
        let mut t = Instant::now();
        for _ in 0..4 {
            q.held_in_driver();
            let sent = t;
            t += Duration::from_millis(50);
            q.acknowledged(1_000_000);
            q.answered(t, sent, true, || brokers(3));
        }
        assert!(
            q.allowed() < 4 << 20,
            "below the burst floor: {}",
            q.allowed()
        );
    }

    /// A wait running in a driver's queue, reported once (a driver learns of it only when it
    /// takes its queue, which its held senders do not fill), counts for every sample until the
    /// driver reports none: the limit follows the drain (20 MB/s) below the burst floor in
    /// every sample of the wait, not only in the first, and the burst floor comes back once
    /// it is over.
    #[test]
    fn a_wait_running_in_the_driver_counts_for_every_sample_until_it_is_over() {
        let mut q = QueueDelay::new(&config(50));
        let burst_floor = q.allowed();
        assert_eq!(burst_floor, 4 << 20, "an eighth of 32 MiB");
        let mut t = Instant::now();
        q.driver_hold(true);
        for sample in 0..8 {
            answer_1_mb_in_50_ms(&mut q, &mut t);
            let allowed = q.allowed();
            assert!(
                (2_800_000..3_200_000).contains(&allowed),
                "sample {sample}: allowed {allowed}, 20 MB/s x 150 ms"
            );
        }
        q.driver_hold(false);
        answer_1_mb_in_50_ms(&mut q, &mut t);
        answer_1_mb_in_50_ms(&mut q, &mut t);
        assert_eq!(
            q.allowed(),
            burst_floor,
            "the wait is over: the burst floor"
        );
    }

    /// The limit never goes below the floor for the brokers known, nor above
    /// `buffer.memory`.
    #[test]
    fn the_limit_stays_between_the_floor_and_buffer_memory() {
        let mut q = QueueDelay::new(&config(50));
        let t0 = Instant::now();
        // A slow drain: 1 kB per 20 ms.
        for i in 1..=20u32 {
            q.acknowledged(1000);
            let sent = t0 + Duration::from_millis(20) * (i - 1);
            q.answered(t0 + Duration::from_millis(20) * i, sent, true, || {
                brokers(2)
            });
        }
        assert_eq!(
            q.allowed(),
            4 << 20,
            "the floor: an eighth of buffer.memory"
        );
        // A very fast one: 1 GB per ms.
        for i in 21..=40u32 {
            q.acknowledged(1 << 30);
            let sent = t0 + Duration::from_millis(20) * (i - 1);
            q.answered(t0 + Duration::from_millis(20) * i, sent, true, || {
                brokers(2)
            });
        }
        assert_eq!(q.allowed(), 32 << 20, "buffer.memory caps it");
    }

    /// Under a drain bound by a broker that serves a connection's requests in turn, pipelined
    /// requests answer after 250 ms (their wait behind the ones ahead) while one sent alone
    /// answers in 10 ms: the limit counts the 10 ms, not the queueing: 20 MB/s x (50 + 2 x 10)
    /// ms.
    #[test]
    fn the_limit_counts_the_round_trip_of_a_request_sent_alone_not_the_queueing() {
        let mut q = QueueDelay::new(&config(50));
        let mut t = Instant::now();
        q.busy_from(t);
        // One request alone, answered in 10 ms.
        t += Duration::from_millis(10);
        q.acknowledged(200_000);
        q.answered(t, t - Duration::from_millis(10), true, || brokers(1));
        // Then pipelined ones, each 250 ms after it was written, 200 kB every 10 ms.
        for _ in 0..60 {
            q.held_in_driver();
            t += Duration::from_millis(10);
            q.acknowledged(200_000);
            q.answered(t, t - Duration::from_millis(250), false, || brokers(1));
        }
        let allowed = q.allowed();
        assert!(
            (1_300_000..1_500_000).contains(&allowed),
            "allowed {allowed}: 20 MB/s x 70 ms, not x 550 ms"
        );
    }

    /// A probe is due once the probe interval passes without an answer to a request sent alone,
    /// and the first such answer ends it; the limit off never probes.
    #[test]
    fn a_probe_is_due_after_an_interval_without_a_request_sent_alone() {
        let mut q = QueueDelay::new(&config(50));
        let t0 = Instant::now();
        assert!(!q.probing(t0), "no answer yet: nothing to probe");
        q.acknowledged(1000);
        q.answered(t0 + Duration::from_millis(2), t0, true, || brokers(1));
        assert!(!q.probing(t0 + Duration::from_millis(500)));
        // Pipelined answers only, for a whole interval.
        let mut t = t0 + Duration::from_millis(2);
        while t < t0 + PROBE_INTERVAL {
            t += Duration::from_millis(10);
            q.acknowledged(1000);
            q.answered(t, t - Duration::from_millis(30), false, || brokers(1));
        }
        t += Duration::from_millis(10);
        assert!(q.probing(t), "an interval without a request sent alone");
        q.acknowledged(1000);
        q.answered(t, t - Duration::from_millis(3), true, || brokers(1));
        assert!(!q.probing(t), "the answer to one sent alone ends the probe");
        let off = QueueDelay::new(&config(0));
        assert!(!off.probing(t + PROBE_INTERVAL * 10));
    }

    /// The probe interval is at least [`PROBE_ROUND_TRIPS`] base round trips: far from its
    /// cluster (100 ms), a producer probes every 5 s, not every second.
    #[test]
    fn the_probe_interval_grows_with_the_base_round_trip() {
        let mut q = QueueDelay::new(&config(50));
        let t0 = Instant::now();
        q.acknowledged(1000);
        q.answered(t0 + Duration::from_millis(100), t0, true, || brokers(1));
        assert!(!q.probing(t0 + Duration::from_secs(4)));
        assert!(q.probing(t0 + Duration::from_millis(5100)));
    }

    /// Drives a [`DepthLearning`] as the limit does, against a cluster whose drain (bytes per
    /// second) is `drain(limit)`, with every sample holding senders back; returns the depth
    /// after `samples` samples, how many of them ran a trial, and the last drain.
    fn learn(samples: u32, drain: impl Fn(usize) -> f64) -> (Duration, u32, f64) {
        let (min, max) = (Duration::from_millis(2), Duration::from_millis(50));
        let mut l = DepthLearning::new(min, max);
        let mut depth = l.start();
        let mut trial: Option<usize> = None;
        let mut in_trial = 0;
        // The limit a depth gives: the drain times the depth and 10 ms (linger and round
        // trips), at least 64 kB; the rate the limit has is the drain it measured last.
        let mut rate = drain(64_000);
        let limit_at = |d: Duration, rate: f64| {
            ((rate * (d + Duration::from_millis(10)).as_secs_f64()) as usize).max(64_000)
        };
        for _ in 0..samples {
            let now = trial.unwrap_or_else(|| limit_at(depth, rate));
            in_trial += u32::from(trial.is_some());
            let d = drain(now);
            rate = d;
            let busy = Duration::from_millis(20);
            let bytes = (d * busy.as_secs_f64()) as usize;
            let deepest = if depth < max { 32 << 20 } else { now };
            match l.sampled(bytes, busy, true, now, (limit_at(min, rate), deepest)) {
                DepthStep::Stay => {}
                DepthStep::Try(limit) => trial = Some(limit),
                DepthStep::Keep(limit, drained) => {
                    depth = l.depth_for(limit, drained, Duration::from_millis(10));
                    trial = None;
                }
                DepthStep::Back => trial = None,
            }
        }
        (depth, in_trial, rate)
    }

    /// Where the drain does not grow with the queue (a broker whose work is per byte), the
    /// learned depth stays the least, and trials (deeper, which do not pay) come less and
    /// less often: a tenth of the samples at most over a long run.
    #[test]
    fn where_depth_does_not_pay_the_depth_stays_the_least_and_trials_grow_rare() {
        let (depth, in_trial, _) = learn(2000, |_| 20e6);
        assert_eq!(depth, Duration::from_millis(2));
        assert!(in_trial < 200, "{in_trial} samples of 2000 in a trial");
    }

    /// Where the drain grows with the queue (larger batches on a broker whose work is per
    /// request: here 20 times the limit per second, up to 40 MB/s), the depth climbs until
    /// the drain is the most the cluster gives.
    #[test]
    fn where_depth_pays_the_depth_climbs_to_the_most_drain() {
        let (depth, _, drain) = learn(300, |limit| (limit as f64 * 20.0).min(40e6));
        assert!(depth > Duration::from_millis(20), "{depth:?}");
        assert!(drain >= 0.95 * 40e6, "{drain}");
    }

    /// Where a deeper queue drains less (a broker slowed by large requests), the depth stays
    /// the least.
    #[test]
    fn where_depth_costs_the_depth_stays_the_least() {
        let (depth, _, _) = learn(500, |limit| 30e6 - limit as f64);
        assert_eq!(depth, Duration::from_millis(2));
    }

    /// A sample that held no sender back measured the offer, not the drain: the phase it falls
    /// in starts again, and a trial running goes back at once (else its fixed limit would keep
    /// the burst floor from a producer no longer saturated until the phase ended).
    #[test]
    fn a_sample_not_held_back_restarts_the_phase_and_ends_a_trial() {
        let mut l = DepthLearning::new(Duration::from_millis(2), Duration::from_millis(50));
        let busy = Duration::from_millis(20);
        let bounds = (64_000, 32 << 20);
        let phase = DEPTH_SETTLE_SAMPLES + DEPTH_MEASURE_SAMPLES;
        for _ in 0..5 {
            assert_eq!(
                l.sampled(20_000, busy, true, 100_000, bounds),
                DepthStep::Stay
            );
        }
        assert_eq!(
            l.sampled(20_000, busy, false, 100_000, bounds),
            DepthStep::Stay
        );
        // A whole phase from here: no trial before its last sample.
        for i in 1..phase {
            let step = l.sampled(20_000, busy, true, 100_000, bounds);
            assert_eq!(step, DepthStep::Stay, "sample {i}");
        }
        let step = l.sampled(20_000, busy, true, 100_000, bounds);
        assert_eq!(step, DepthStep::Try(200_000), "deeper first");
        // The trial drains twice as much (it would pay); a sample not held back ends it.
        for _ in 0..3 {
            assert_eq!(
                l.sampled(40_000, busy, true, 200_000, bounds),
                DepthStep::Stay
            );
        }
        assert_eq!(
            l.sampled(40_000, busy, false, 200_000, bounds),
            DepthStep::Back
        );
        // Not counted as a trial that did not pay: the next phase's end tries again at once.
        let mut step = DepthStep::Stay;
        for _ in 0..phase {
            step = l.sampled(20_000, busy, true, 100_000, bounds);
        }
        assert_eq!(step, DepthStep::Try(200_000));
    }
}
