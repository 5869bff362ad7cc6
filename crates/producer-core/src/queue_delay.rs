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
//! or lingering long, is not held back for those (under saturation `linger` counts only
//! where a deeper queue pays: see "Linger, and what a request costs" below). The round trip
//! counts twice ([`ROUND_TRIP_HEADROOM`]): `rate x round trip` is what must be in flight for
//! the rate, and a limit with no room above it lowers the rate it measures (batches still
//! filling, a lull of the sender) and then itself. On a simulated cluster that parks every request for 100 ms
//! (five in flight, a 50 ms target) the limit counting it once delivered 0.70x the limit-off
//! rate; counting it twice, 0.94x (`producer-sim`'s
//! `on_a_cluster_that_parks_requests_the_limit_keeps_the_rate_of_the_limit_off`). It counts
//! once where Produce requests wait at the brokers (their pipelined round trip twice that of
//! one sent alone, or more) and the cost fit says the brokers' work is per byte (below): there
//! the brokers' own queue of pipelined requests keeps them busy, and a second round trip of
//! records in front of it is only delay. On one Kafka node recompressing every batch that
//! took the average from `send` from 5.3 / 5.3 / 8.2 ms to 4.2 / 3.9 / 6.5 (`mio-idem` /
//! `tokio-cb-idem` / `tokio-batch-idem`, medians of 6 runs) at the same rate; the p99, set by
//! a run's start, hardly moved. Where requests wait but their work is per request (larger
//! requests drain more) it still counts twice: counting it once there halved the drain of
//! `producer-sim`'s broker whose work is per request (7.0 MB/s against 13.3).
//!
//! # Linger, and what a request costs
//! Under saturation batches seal full, not on their linger, and `rate x linger` of queue is
//! only delay, unless a deeper queue drains more: where the brokers' work is per request,
//! the queue that linger adds lets batches grow while every in-flight slot is busy
//! (`batch.grow.max.bytes`), and fewer, larger requests drain more. So `linger` counts while
//! batches wait for it (a Produce request sent because a batch's linger passed, none of its
//! batches full, in the last two drain samples; the first such request brings it back at
//! once), or while the brokers' work is measured to be per request ([`RequestCost`]). That is
//! a least-squares fit, over about the last 512 answers, of the time a broker took to serve a
//! request on the bytes it acknowledged. A Kafka broker reads a connection's next request once
//! it has answered the one before, so a request written before that answer came was served
//! from that answer to its own, with nothing of the network or of the producer's own pauses
//! in it (a cluster that holds each request for its replicas adds that wait, a fixed cost per
//! request: there linger counts, as it did before the fit). The fit's fixed part, as a share
//! of the mean request's time, is how much larger requests would drain more: from 0.45 the
//! work counts as per request, below 0.35 as per byte (in between the last verdict stands;
//! per request until 64 answers are fitted, and while requests are too alike in size to
//! tell). Measured (`bench_e2e worker`, fits over half a second of answers): one Kafka node
//! recompressing every batch to gzip, 0.06-0.35 once warm (about 300 us a request and 40 us a
//! KB, at 24-40 KB a request); the same node, an uncompressed topic and 1000 B records at the
//! shipped defaults, 0.34-0.85 (450-1,600 us a request, 1.1-2.4 us a KB, at 150-880 KB). On
//! the first node this took the average from `send` from 11-14 ms to 5-9 at the same rate; the
//! p99 fell less (21-24 ms to 16-26), as it is set by the first few tenths of a second of a
//! run, linger counted until the fit has its 64 answers among them (the README's "The start,
//! again"). On the second, where leaving linger out always made requests a third as large and
//! lost the lead over librdkafka at its defaults, the fit keeps linger and the lead (the
//! README's saturation section has the runs). Starting per byte instead lost that lead too (a
//! limit that starts low where the drain grows with request size climbs slowly). Starting per
//! byte only where requests wait, until the fit has its answers, shortened the start's queue
//! on the first node but cost `producer-sim`'s brokers that serve requests in turn a tenth to
//! a fifth of their drain over the second half of an 8 s run (the README's "The start: per
//! byte where requests wait").
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
//! The burst floor is for a caller that cannot wait (a `try_send` refused is a record handed
//! back). A driver's senders that wait for room (an async `send`, a blocking `send_timeout`)
//! lose nothing by waiting, and records they queue in a burst wait behind all of it: they are
//! held to the limit without it, as if held back ([`QueueDelay::allowed_waiting`], the
//! producer's `queue_delay_room_waiting`): the brokers' pipeline floor until a drain is
//! measured, then the drain's limit (answers that acknowledge nothing, errors all, measure no
//! drain: the burst floor then stands for every send until one is measured, else a sender
//! that waits on a failing cluster waited for a delivery timeout to free room where the
//! burst would have taken its records). So a producer flooded from its start by senders that wait
//! queues its pipelines' floor, not the eighth: on one Kafka node that drains 20 MB/s, with a
//! 64 MiB buffer, the eighth was 400 ms of records, and the p99 from `send` of a million
//! records was 198-232 ms; held to the floor, 27-52 ms, the average from 21-29 ms to 11-15
//! (`bench_e2e --saturation --broker kafka`).
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
//! sample spanning a probe or a stall does not count), then holds the limit fixed for a
//! phase at a trial (fixed, so the queue is at once what is tried; a limit that followed the
//! drain would reach a deeper queue over many round trips where depth pays through larger
//! batches, and the phase would measure the climb). A shallower trial is two-thirds of the
//! limit. A deeper one is half as much again where Produce requests wait at the brokers (their
//! pipelined round trip twice that of one sent alone, or more): there a trial's records wait
//! as much longer as it is deeper, and where depth does not pay that is all a trial does (on
//! one Kafka node, doubled trials ran 10-30% of a saturated 6 s run, and their records, which
//! waited 25-35 ms against the steady 11, were its p99 from send). It doubles the limit where
//! requests do not wait (a cluster that parks each request: the bytes in flight are the
//! drain), while a climb goes on (the trial before was deeper and paid), and when a phase
//! drained a quarter less than the one before it at the same depth: where work is per
//! request a shallow limit feeds on itself (smaller requests drain less, the limit follows),
//! and against a drain that falls a trial half as deep again shows no gain (`producer-sim`'s
//! per-request broker drained 0.37x the target's so, 0.93x with the doublings). A deeper trial
//! is kept if it drained a tenth more and more than twice the standard error of the two phases'
//! difference (from each phase's spread), and, unless it drained half as much again, only if
//! the phase after it, back at the depth before, confirms it (a drain that drifted up over
//! the three phases is not the depth's doing); a shallower one is kept unless it drained a
//! twentieth less;
//! the depth is then what the trial's limit is at the drain it measured, within the least
//! and the target, and never past the depth before the other way (a shallower trial kept
//! never deepens the queue). No deeper trial runs where the cost fit says it cannot pay (its
//! per-request share too small for requests half as large again to drain a tenth more), nor,
//! where requests wait at the brokers, before the fit has its answers (the first trial of a
//! run otherwise came in its first tenth of a second, where on one Kafka node it set the p99
//! from send of a 6 s run; see `depth::deeper_may_pay`). A trial that clearly does not pay
//! ends after two samples, and each that does not pay makes the phases before the next four
//! times as many (up to 64): a producer whose depth is right spends about a hundredth of its
//! samples in trials. A sample that held no sender back measured the offer, not the drain: its
//! phase counts for nothing and a trial running ends at once (its fixed limit would otherwise
//! keep the burst floor from a producer no longer saturated); the depth changes only while the
//! producer is offered more than the cluster drains. Measured on one Kafka node recompressing
//! every batch (`bench_e2e --saturation`): 25-29 ms from send on average against 70-74 at the
//! 50 ms target alone, at a higher rate; on the simulated brokers that serve requests in turn
//! (`producer-sim`'s `queue_delay` tests), the least depth's latency where depth does not pay
//! and about the target's drain where it does.
//!
//! # What is counted
//! Bytes as `buffer.memory` counts them (a record's encoded size and its entry), of records
//! not yet acknowledged: a transactional producer's acknowledged records, held for the
//! transaction's end, count against `buffer.memory` but not here.
//!
//! # Cost
//! `send` pays one comparison ([`QueueDelay::admits`]); the rate and the cost fit are updated
//! once per Produce answer (a few multiplications and a division), the limit once per sample
//! (at least a quarter of the depth of busy time).

use std::time::{Duration, Instant};

use crate::config::{Acks, Config};

mod cost;
mod depth;

use cost::RequestCost;
use depth::{deeper_may_pay, DepthLearning, DepthStep, Serving};

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
/// product); once where requests wait at the brokers and their work is per byte
/// ([`QueueDelay::round_trip_headroom`]); see the module documentation.
const ROUND_TRIP_HEADROOM: u32 = 2;

/// Where the smoothed round trip of Produce requests is at least this many times the base
/// round trip, requests wait at the brokers: for the depth learning a deeper trial is half
/// as deep again, not twice ([`DepthLearning`]), and none runs before the cost fit has its
/// answers (`depth::deeper_may_pay`); where their work is per byte too, the limit counts the
/// base round trip once ([`QueueDelay::round_trip_headroom`]).
const REQUESTS_WAIT_FROM: f64 = 2.0;

/// The shortest probe interval: the base round trip is the shortest sample of the current
/// interval, and a probe starts once an interval passes without one.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The probe interval is at least this many base round trips, so that probing (a pipeline
/// drained for about one round trip) costs at most about a fiftieth of the time.
const PROBE_ROUND_TRIPS: u32 = 50;

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
    /// Unacknowledged bytes a sender that waits for room may reach now: the limit as if
    /// senders were held back (no burst floor; see the module documentation).
    allowed_waiting: usize,
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
    /// A Produce request sent during the sample being gathered went because a batch's
    /// `linger.ms` had passed ([`QueueDelay::request_sent`]).
    lingered_in_sample: bool,
    /// A request sent during the last completed sample went so.
    lingered_last_sample: bool,
    /// Whether the limit counts `linger`: a request sent during the last completed sample, or
    /// the one before, went because a batch's linger had passed, or the brokers' work is per
    /// request (true until a sample passes).
    linger_counted: bool,
    /// What a Produce request costs the brokers, per request and per byte.
    cost: RequestCost,
    /// Bytes acknowledged by the answer being handled.
    answer_bytes: usize,
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
            allowed_waiting: usize::MAX,
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
            lingered_in_sample: false,
            lingered_last_sample: true,
            linger_counted: true,
            cost: RequestCost::new(),
            answer_bytes: 0,
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

    /// Unacknowledged bytes a sender that waits for room may reach now ([`usize::MAX`] when
    /// the limit is off): the limit without the burst floor, as if senders were held back.
    pub(crate) fn allowed_waiting(&self) -> usize {
        self.allowed_waiting
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
        self.answer_bytes = self.answer_bytes.saturating_add(bytes);
    }

    /// A Produce answer came at `now` for a request written at `sent_at` (call it after the
    /// answer's batches were reported); `sent_alone`: nothing else was in flight on its
    /// connection when it was written (its round trip is a base round trip sample, and ends a
    /// probe); `previous_answer`: when the answer before this one came on its connection (a
    /// request written before it waited behind that one at the broker, and the time since is
    /// what serving it took, which the cost fit takes); `backlog` gives the brokers the
    /// producer knows and the partitions with something to send (for the floor), asked only
    /// when a sample completes. Adds the busy
    /// time since the later of the previous answer and the start of the busy period (the first
    /// answer: since `sent_at`); once the sample spans enough, folds it into the rate and sets
    /// the limit anew. Returns whether the limit rose.
    pub(crate) fn answered(
        &mut self,
        now: Instant,
        sent_at: Instant,
        sent_alone: bool,
        previous_answer: Option<Instant>,
        backlog: impl FnOnce() -> Backlog,
    ) -> bool {
        if self.target.is_none() {
            return false;
        }
        let answer_bytes = std::mem::take(&mut self.answer_bytes);
        if let Some(previous) = previous_answer.filter(|&previous| sent_at < previous) {
            self.cost
                .served(answer_bytes, now.saturating_duration_since(previous));
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
        // Linger counts while batches wait for it, or where the brokers' work is per request
        // (see "Linger, and what a request costs"): a sample whose requests all went full (or
        // as a slot freed) spent none of it. Two samples without, so that a limit that then no
        // longer fills batches within their linger has it back at once and does not swing
        // every sample.
        let lingered = std::mem::take(&mut self.lingered_in_sample);
        let lingered_before = std::mem::replace(&mut self.lingered_last_sample, lingered);
        self.linger_counted = lingered || lingered_before || self.cost.per_request();
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
            let requests_wait = self.pipelined_over_alone() >= REQUESTS_WAIT_FROM;
            let serving = Serving {
                requests_wait,
                deeper_may_pay: deeper_may_pay(
                    requests_wait,
                    self.cost.fitted(),
                    self.cost.per_request_share(),
                ),
            };
            match learning.sampled(
                sample_bytes,
                sample_busy,
                held,
                self.allowed,
                bounds,
                serving,
            ) {
                DepthStep::Stay => {}
                DepthStep::Try(limit) => {
                    self.trial_limit = Some(limit);
                    self.rate_before_trial = self.rate;
                }
                // The depth the trial's limit gives at the drain it measured. (A deeper trial
                // confirmed a phase after it ended is kept at the rate of that phase, lower:
                // the limit climbs to the trial's as the drain rises. Setting the rate to the
                // trial's drain as well left `producer-sim`'s per-request broker at 0.77x the
                // target's drain, against 1.03x without.)
                DepthStep::Keep {
                    limit,
                    drain,
                    deeper,
                } => {
                    self.depth =
                        learning.depth_kept(limit, drain, deeper, self.depth, self.rest_of_delay());
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
    /// The limit for senders that wait for room is set alike, as if `held`. While answers
    /// came and none acknowledged anything (every one an error: the cluster fails rather than
    /// drains slowly) there is no drain to hold senders to, and the burst floor stands for
    /// every send, held or waiting, until a drain is measured.
    fn update(&mut self, backlog: Backlog, held: bool) {
        let drained = self.rate > 0.0;
        let failing = !drained && self.round_trip.is_some();
        (self.allowed, self.allowed_waiting) = if self.target.is_none() {
            (usize::MAX, usize::MAX)
        } else if let Some(trial) = self.trial_limit {
            (trial, trial)
        } else {
            (
                self.limit_at(self.depth, backlog, held && drained),
                self.limit_at(self.depth, backlog, !failing),
            )
        };
    }

    /// What the limit counts beside the depth: `linger` (while batches wait for it, or where
    /// the brokers' work is per request) and the base round trip, twice or once
    /// ([`QueueDelay::round_trip_headroom`]).
    fn rest_of_delay(&self) -> Duration {
        let round_trip = self.base.or(self.round_trip).unwrap_or_default();
        let linger = if self.linger_counted {
            self.linger
        } else {
            Duration::ZERO
        };
        linger + round_trip * self.round_trip_headroom()
    }

    /// How many times the limit counts the base round trip: [`ROUND_TRIP_HEADROOM`], or once
    /// where Produce requests wait at the brokers ([`REQUESTS_WAIT_FROM`]) and the cost fit
    /// says their work is per byte. There the brokers' own queue of pipelined requests is
    /// the headroom: the drain is theirs whatever waits in front of them, and a larger request
    /// drains no more, so a second round trip of records is only delay. (Where the work is
    /// per request, a deeper queue lets requests grow and drain more; where requests do not
    /// wait, a cluster that parks each one, the bytes in flight are the drain.)
    fn round_trip_headroom(&self) -> u32 {
        if !self.cost.per_request() && self.pipelined_over_alone() >= REQUESTS_WAIT_FROM {
            1
        } else {
            ROUND_TRIP_HEADROOM
        }
    }

    /// The smoothed round trip of all Produce requests over the base round trip (that of one
    /// sent alone): how long requests wait at the brokers behind the ones before them. 1
    /// until both are measured (infinite over a base round trip of zero).
    fn pipelined_over_alone(&self) -> f64 {
        match (self.round_trip, self.base) {
            (Some(_), Some(alone)) if alone.is_zero() => f64::INFINITY,
            (Some(pipelined), Some(alone)) => pipelined.as_secs_f64() / alone.as_secs_f64(),
            _ => 1.0,
        }
    }

    /// A Produce request was sent; `lingered`: because a batch's `linger.ms` had passed (no
    /// batch in it sealed full). Call it for every Produce request: one branch.
    #[inline]
    pub(crate) fn request_sent(&mut self, lingered: bool) {
        self.lingered_in_sample |= lingered;
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

#[cfg(test)]
mod limit_tests;
