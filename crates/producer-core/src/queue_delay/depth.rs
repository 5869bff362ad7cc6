//! Learning the depth of the queue-delay limit (`queue.delay.min.ms`): see the parent
//! module's "Learning the depth".

use std::time::Duration;

/// Drain samples a phase of the depth learning lets pass before it measures: the queue takes
/// about that long to settle at a new depth (the bytes above a lowered limit drain, those
/// below a raised one fill).
const DEPTH_SETTLE_SAMPLES: u32 = 2;

/// Drain samples a phase of the depth learning measures over, once settled.
const DEPTH_MEASURE_SAMPLES: u32 = 8;

/// The most phases measured at the learned depth between two trials: trials that do not pay
/// come less often (each wait four times the one before), until one phase in this many and
/// one is a trial.
const DEPTH_MAX_WAIT: u32 = 64;

/// How much deeper (or shallower) a trial's limit is than the limit before it, unless a
/// deeper trial doubles it (see [`DepthLearning::try_from`]). A trial's records queue that
/// much longer, and where depth does not pay every trial costs only that: on one Kafka node,
/// doubled trials set the p99 from send of a saturated 6 s run (their records queued about
/// 25-35 ms against the steady 11), and ran 10-30% of it.
const DEPTH_STEP: f64 = 1.5;

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

/// A deeper trial that drained at least this many times the depth before is kept without
/// waiting for the phase after it to confirm it.
const DEPTH_PAYS_AT_ONCE: f64 = 1.5;

/// A phase drained clearly less than the one before it at the same depth (see
/// [`DepthLearning::falling`]) when that one drained at least this many times as much, and
/// by more than [`DEPTH_NOISE_ERRORS`] standard errors of the difference: on
/// `producer-sim`'s per-request broker a shallow limit's drain fell by 35-40% a phase, and
/// on one Kafka node the drain drifts by a tenth or so between phases.
const DEPTH_FALLING: f64 = 1.25;

/// How many standard errors of the difference a deeper trial's drain must pass the depth
/// before's by to be kept (beside [`DEPTH_PAYS`]).
const DEPTH_NOISE_ERRORS: f64 = 2.0;

/// What a phase measured: the mean of the middle half of its samples' drains, and the
/// standard error of that mean from the spread of that middle half (of 8 normal samples
/// sorted, the 3rd and the 6th lie about 0.94 standard deviations apart; the mean of the
/// middle half of `n` errs about 1.1 / sqrt(n) of one), both bytes per second.
#[derive(Debug, Clone, Copy)]
struct Phase {
    drain: f64,
    error: f64,
}

impl Phase {
    /// Whether this phase, a deeper trial's, drained enough more than `other`, at a depth
    /// before or after it, for the depth to pay: [`DEPTH_PAYS`] times it, and by more than
    /// [`DEPTH_NOISE_ERRORS`] standard errors of the difference (a noisy cluster's drain
    /// passes a tenth more by chance every few trials, and each such keep doubled the queue).
    fn pays_against(&self, other: &Phase) -> bool {
        self.drain >= DEPTH_PAYS * other.drain
            && self.drain - other.drain >= DEPTH_NOISE_ERRORS * self.error.hypot(other.error)
    }

    /// Whether this phase drained clearly less than `earlier`, at the same depth:
    /// [`DEPTH_FALLING`] times less, and by more than [`DEPTH_NOISE_ERRORS`] standard errors
    /// of the difference.
    fn fell_from(&self, earlier: &Phase) -> bool {
        earlier.drain >= DEPTH_FALLING * self.drain
            && earlier.drain - self.drain >= DEPTH_NOISE_ERRORS * self.error.hypot(earlier.error)
    }

    /// The phase of `drains` (sorted here).
    fn of(drains: &mut [f64]) -> Phase {
        drains.sort_by(f64::total_cmp);
        let quarter = drains.len() / 4;
        let middle = &drains[quarter..drains.len() - quarter];
        let drain = middle.iter().sum::<f64>() / middle.len() as f64;
        let spread = drains[drains.len() - 1 - quarter] - drains[quarter];
        let error = spread / 0.94 * 1.1 / (drains.len() as f64).sqrt();
        Phase { drain, error }
    }
}

/// Learns how deep a queue pays (`queue.delay.min.ms` below the target). While the limit
/// holds senders back it measures the drain over a phase of samples at the depth it has,
/// then over a phase at a trial limit: the limit it had, [`DEPTH_STEP`] times it or divided
/// by it (by turns, within what the least and the target allow; some deeper trials double
/// it, see [`DepthLearning::try_from`]), held fixed for the phase so that the queue is at
/// once what it tries (a limit that followed the drain would reach it over many round trips
/// where depth pays through larger batches, and the phase would measure the climb). A
/// shallower trial is kept if it drained at least [`DEPTH_COSTS`] of the depth before, a
/// deeper one if it drained [`DEPTH_PAYS`] times it and past the phases' noise
/// ([`Phase::pays_against`]), confirmed by the phase after it unless it drained
/// [`DEPTH_PAYS_AT_ONCE`] times it; the depth is then the one the trial limit
/// gives at the drain measured. A sample that held no sender back measured the offer, not the
/// drain: the phase it falls in counts for nothing, and a trial running ends at once (it goes
/// back without counting as a trial that did not pay). Trials that do not pay come less
/// often.
#[derive(Debug)]
pub(super) struct DepthLearning {
    pub(super) min: Duration,
    pub(super) max: Duration,
    /// The trial running: its limit, and whether it is deeper than the depth the limit has.
    trial: Option<(usize, bool)>,
    /// Samples taken in the phase.
    samples: u32,
    /// The drain of each sample measured in the phase (after it settled), bytes per second.
    drains: [f64; DEPTH_MEASURE_SAMPLES as usize],
    /// What the last phase at the depth the limit has measured.
    before: Phase,
    /// A deeper trial's limit and phase that paid against the phase before it, waiting for the
    /// phase after it (back at the depth before) to confirm it: a cluster's drain drifts
    /// (a broker's collections, log segments rolled, a neighbour on its cores), and a trial
    /// that only caught a rise would double the queue for good.
    confirming: Option<(usize, Phase)>,
    /// The next trial goes deeper.
    next_deeper: bool,
    /// Phases measured at the depth the limit has before the next trial.
    wait: u32,
    /// The wait after the next trial that does not pay: four times as long after each (up to
    /// [`DEPTH_MAX_WAIT`]), one again after one that pays.
    backoff: u32,
    /// The last trial was a deeper one that paid: the climb goes on with doubled trials.
    climbing: bool,
    /// The last phase measured at the depth the limit has drained clearly less than the one
    /// before it there ([`Phase::fell_from`]): where work is per request a shallow limit
    /// feeds on itself (smaller requests drain less, and the limit follows the drain down),
    /// so the next deeper trial doubles the limit.
    falling: bool,
}

/// What the depth learning asks of the limit once a sample completes.
#[derive(Debug, PartialEq)]
pub(super) enum DepthStep {
    /// Go on as before.
    Stay,
    /// Hold the limit at this many bytes for the next phase (a trial).
    Try(usize),
    /// The trial (`deeper` or not) at `limit` paid, having drained `drain` (bytes per
    /// second): the depth is what [`DepthLearning::depth_kept`] gives.
    Keep {
        limit: usize,
        drain: f64,
        deeper: bool,
    },
    /// The trial did not pay: back to the depth before it.
    Back,
}

/// How the brokers serve Produce requests, as the depth learning asks when a sample completes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Serving {
    /// Produce requests wait at the brokers: their smoothed round trip is
    /// [`super::REQUESTS_WAIT_FROM`] times that of one sent alone, or more. Where they do (a Kafka node bound by its CPU), a deeper queue is
    /// all delay unless it drains more, and each trial that does not pay delays every record
    /// sent while it runs by as much as it is deeper; where they do not (a cluster that parks
    /// each request, as acks=all waits for replicas), the bytes in flight are what drains, a
    /// deeper queue costs its records little past its own fill, and a deeper trial doubles the
    /// limit.
    pub(super) requests_wait: bool,
    /// A deeper trial may pay ([`deeper_may_pay`]).
    pub(super) deeper_may_pay: bool,
}

/// Whether a trial of a deeper queue may drain enough more to be kept, from what the
/// brokers' work is measured to be ([`super::RequestCost`]): `fitted`, the fit has its answers;
/// `per_request_share`, the fixed part of a request's serving time (none where requests are
/// too alike in size to tell). A deeper queue drains more only through larger requests: if
/// every request grew [`DEPTH_STEP`] times, the drain would rise
/// `step / (step - share x (step - 1))` times, and where that is less than [`DEPTH_PAYS`] (a
/// share below about 0.27) the trial cannot be kept, and all it does is delay each record
/// sent while it runs by as much as it is deeper. Where `requests_wait` at the brokers, none
/// is tried either until the fit has its answers: a trial in a run's first tenth of a second
/// (the first came after about 70 ms) set the p99 from send of a 6 s run on one Kafka node,
/// whose share was 0.05-0.35. Where requests do not wait (a cluster that parks each
/// request), the bytes in flight are the drain and trials go on from the start: held back
/// there until the fit had 64 answers, `producer-sim`'s 100 ms parking cluster delivered 0.89x
/// the limit-off rate, against 0.94x.
pub(super) fn deeper_may_pay(
    requests_wait: bool,
    fitted: bool,
    per_request_share: Option<f64>,
) -> bool {
    (fitted || !requests_wait)
        && per_request_share.is_none_or(|share| {
            DEPTH_STEP / (DEPTH_STEP - share * (DEPTH_STEP - 1.0)) >= DEPTH_PAYS
        })
}

impl DepthLearning {
    pub(super) fn new(min: Duration, max: Duration) -> Self {
        DepthLearning {
            min,
            max,
            trial: None,
            samples: 0,
            drains: [0.0; DEPTH_MEASURE_SAMPLES as usize],
            before: Phase {
                drain: 0.0,
                error: 0.0,
            },
            confirming: None,
            next_deeper: true,
            wait: 0,
            backoff: 1,
            climbing: false,
            falling: false,
        }
    }

    /// The depth to start at: the least (a deeper queue is kept once it pays).
    pub(super) fn start(&self) -> Duration {
        self.min
    }

    /// A drain sample completed: `bytes` acknowledged over `busy`, `held` whether senders were
    /// held back in it; `now` is the limit, `shallowest` and `deepest` those the least depth
    /// and the target give now; `serving`: whether Produce requests wait at the brokers now,
    /// and whether a deeper trial may pay (see [`Serving`]).
    pub(super) fn sampled(
        &mut self,
        bytes: usize,
        busy: Duration,
        held: bool,
        now: usize,
        (shallowest, deepest): (usize, usize),
        serving: Serving,
    ) -> DepthStep {
        if !held {
            // The sample measured the offer, not the drain: the phase counts for nothing, and
            // a trial running ends (its fixed limit would keep the burst floor from a producer
            // no longer offered more than the cluster drains).
            self.samples = 0;
            self.drains = [0.0; DEPTH_MEASURE_SAMPLES as usize];
            self.confirming = None;
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
                    drain < DEPTH_EARLY_PAYS * self.before.drain
                } else {
                    drain < DEPTH_EARLY_COSTS * self.before.drain
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
        let phase = Phase::of(&mut self.drains);
        self.samples = 0;
        self.drains = [0.0; DEPTH_MEASURE_SAMPLES as usize];
        if self.trial.is_some() {
            return self.trial_ended(Some(phase));
        }
        if let Some((limit, trial)) = self.confirming.take() {
            // The phase after a deeper trial that paid against the phase before: kept only
            // if it pays against this one too (a drain that drifted up over the three phases
            // is not the depth's doing).
            let before = self.measured_at_depth(phase);
            return if trial.pays_against(&before) && trial.pays_against(&phase) {
                self.paid(true, limit, trial.drain)
            } else {
                self.did_not_pay(true);
                DepthStep::Stay
            };
        }
        self.measured_at_depth(phase);
        if self.wait > 0 {
            self.wait -= 1;
            DepthStep::Stay
        } else {
            self.try_from(now, shallowest, deepest, serving)
        }
    }

    /// A phase at the depth the limit has measured `phase`: it is the phase before the next
    /// trial, and whether the drain fell since the one it replaces (returned) is taken.
    fn measured_at_depth(&mut self, phase: Phase) -> Phase {
        let earlier = std::mem::replace(&mut self.before, phase);
        self.falling = phase.fell_from(&earlier);
        earlier
    }

    /// The trial running ends, having measured `phase` (`None`: it did not pay whatever it
    /// measured).
    fn trial_ended(&mut self, phase: Option<Phase>) -> DepthStep {
        let Some((limit, deeper)) = self.trial.take() else {
            return DepthStep::Stay;
        };
        self.samples = 0;
        self.drains = [0.0; DEPTH_MEASURE_SAMPLES as usize];
        let before = self.before;
        match phase {
            // A deeper trial that paid by far is kept at once: a drift is not that large, and
            // where depth pays through batches that grow a doubling drains about half as much
            // again or more, so the climb takes one trial per step, not a trial and a phase.
            Some(p) if deeper && p.drain >= DEPTH_PAYS_AT_ONCE * before.drain => {
                self.paid(true, limit, p.drain)
            }
            // One that paid less is confirmed by the phase after it, at the depth before (see
            // `confirming`).
            Some(p) if deeper && p.pays_against(&before) => {
                self.confirming = Some((limit, p));
                DepthStep::Back
            }
            Some(p) if !deeper && p.drain >= DEPTH_COSTS * before.drain => {
                self.paid(false, limit, p.drain)
            }
            _ => {
                self.did_not_pay(deeper);
                DepthStep::Back
            }
        }
    }

    /// A trial (`deeper` or not) at `limit` paid, having drained `drain`: the next goes the
    /// same way, without a wait; the limit keeps the depth it gives.
    fn paid(&mut self, deeper: bool, limit: usize, drain: f64) -> DepthStep {
        self.backoff = 1;
        self.next_deeper = deeper;
        self.climbing = deeper;
        DepthStep::Keep {
            limit,
            drain,
            deeper,
        }
    }

    /// A trial (`deeper` or not) did not pay: the next goes the other way, and after a longer
    /// wait.
    fn did_not_pay(&mut self, deeper: bool) {
        self.climbing = false;
        self.wait = self.backoff;
        self.backoff = (self.backoff * 4).min(DEPTH_MAX_WAIT);
        self.next_deeper = !deeper;
    }

    /// A trial from the limit `now`: deeper or shallower by [`DEPTH_STEP`], the way
    /// [`DepthLearning::next_deeper`] says (or the other if that way is at its bound),
    /// within `shallowest..=deepest`; [`DepthStep::Stay`] if neither way moves it by a
    /// quarter. A deeper one doubles the limit instead where requests do not wait at the
    /// brokers (see [`Serving`]), while a climb goes on
    /// ([`DepthLearning::climbing`]), and after a phase whose drain fell
    /// ([`DepthLearning::falling`]). No deeper one unless it may pay ([`Serving`]).
    fn try_from(
        &mut self,
        now: usize,
        shallowest: usize,
        deepest: usize,
        serving: Serving,
    ) -> DepthStep {
        let step = if self.climbing || self.falling || !serving.requests_wait {
            2.0
        } else {
            DEPTH_STEP
        };
        let deeper = ((now as f64 * step) as usize).min(deepest);
        let shallower = ((now as f64 / DEPTH_STEP) as usize).max(shallowest);
        let deeper_moves = serving.deeper_may_pay && deeper as f64 >= 1.25 * now as f64;
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

    /// The depth once a trial (`deeper` or not) at `limit` that drained `drain` is kept, the
    /// depth before it `current`: the one at which `drain x (depth + rest)` is `limit`, within
    /// the least and the target, and no shallower than `current` after a deeper trial, no
    /// deeper after a shallower one. (The drain a trial measured may be below the rate the
    /// limit had, which rises at once and falls smoothed, and its limit at that drain then
    /// gives a deeper depth than the one before: traced on one Kafka node, a shallower trial
    /// kept took the depth from 2 ms to 3.9, and the next kept one to 15.)
    pub(super) fn depth_kept(
        &self,
        limit: usize,
        drain: f64,
        deeper: bool,
        current: Duration,
        rest: Duration,
    ) -> Duration {
        let at_drain = if drain <= 0.0 {
            self.max
        } else {
            Duration::from_secs_f64(limit as f64 / drain)
                .saturating_sub(rest)
                .clamp(self.min, self.max)
        };
        if deeper {
            at_drain.max(current)
        } else {
            at_drain.min(current)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that wait at the brokers or not, where a deeper trial may pay.
    fn serving(requests_wait: bool) -> Serving {
        Serving {
            requests_wait,
            deeper_may_pay: true,
        }
    }

    /// Drives a [`DepthLearning`] as the limit does, against a cluster whose drain (bytes per
    /// second) is `drain(limit)` and where requests wait at the broker, with every sample
    /// holding senders back; returns the depth after `samples` samples, how many of them ran a
    /// trial, and the last drain.
    fn learn(samples: u32, drain: impl Fn(usize) -> f64) -> (Duration, u32, f64) {
        learn_where(samples, true, drain)
    }

    /// [`learn`], with `deeper_may_pay` given to every sample (see [`deeper_may_pay`]).
    fn learn_where(
        samples: u32,
        deeper_may_pay: bool,
        drain: impl Fn(usize) -> f64,
    ) -> (Duration, u32, f64) {
        let (min, max) = (Duration::from_millis(2), Duration::from_millis(50));
        let mut l = DepthLearning::new(min, max);
        let mut depth = l.start();
        let mut trial: Option<usize> = None;
        let mut in_trial = 0;
        // The limit a depth gives: the drain times the depth and 10 ms (linger and round
        // trips), at least 64 kB; the rate the limit has is the drain it measured last.
        let mut rate = drain(64_000);
        let mut rate_before_trial = rate;
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
            match l.sampled(
                bytes,
                busy,
                true,
                now,
                (limit_at(min, rate), deepest),
                Serving {
                    requests_wait: true,
                    deeper_may_pay,
                },
            ) {
                DepthStep::Stay => {}
                DepthStep::Try(limit) => {
                    trial = Some(limit);
                    rate_before_trial = rate;
                }
                DepthStep::Keep {
                    limit,
                    drain: drained,
                    deeper,
                } => {
                    depth = l.depth_kept(limit, drained, deeper, depth, Duration::from_millis(10));
                    trial = None;
                }
                // As the limit does: back to the rate before the trial.
                DepthStep::Back => {
                    trial = None;
                    rate = rate_before_trial;
                }
            }
        }
        (depth, in_trial, rate)
    }

    /// Where the drain does not grow with the queue (a broker whose work is per byte), the
    /// learned depth stays the least, and trials (deeper, which do not pay) come less and
    /// less often: a fiftieth of the samples at most over a long run (each trial's records
    /// queue half as long again, and those are what a run's p99 from send counts).
    #[test]
    fn where_depth_does_not_pay_the_depth_stays_the_least_and_trials_grow_rare() {
        let (depth, in_trial, _) = learn(2000, |_| 20e6);
        assert_eq!(depth, Duration::from_millis(2));
        assert!(in_trial < 40, "{in_trial} samples of 2000 in a trial");
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

    /// Where the brokers' work is measured per byte (the cost fit's per-request share too
    /// small for larger requests to drain a tenth more), no deeper trial runs, even against a
    /// drain that would reward one: a trial there only delays its records.
    #[test]
    fn where_a_deeper_trial_may_not_pay_none_runs() {
        let (depth, in_trial, _) = learn_where(300, false, |limit| (limit as f64 * 20.0).min(40e6));
        assert_eq!(depth, Duration::from_millis(2));
        assert_eq!(
            in_trial, 0,
            "no trial: none deeper, and none shallower than the least"
        );
    }

    /// A deeper trial may pay only where the cost fit says larger requests could drain
    /// [`DEPTH_PAYS`] times as much; where requests wait at the brokers, not before it has
    /// its answers; where they do not (parked), from the start.
    #[test]
    fn a_deeper_trial_may_pay_where_the_cost_fit_says_so() {
        assert!(
            !deeper_may_pay(true, false, None),
            "requests wait, the fit not ready"
        );
        assert!(
            deeper_may_pay(false, false, None),
            "requests parked, not waiting"
        );
        assert!(
            !deeper_may_pay(true, true, Some(0.1)),
            "per byte: requests half as large again drain 1.03x"
        );
        assert!(deeper_may_pay(true, true, Some(0.5)), "per request: 1.2x");
        assert!(deeper_may_pay(true, true, None), "sizes too alike to tell");
    }

    /// A kept trial moves the depth only its own way: a shallower one whose drain was below
    /// the rate before it never deepens the queue, a deeper one never makes it shallower.
    #[test]
    fn a_kept_trial_moves_the_depth_only_its_own_way() {
        let ms = Duration::from_millis;
        let l = DepthLearning::new(ms(2), ms(50));
        let (current, rest) = (ms(10), ms(10));
        // Shallower, 267 kB: at 12 MB/s that is 22 ms, 12 past the rest; kept at 10.
        assert_eq!(l.depth_kept(267_000, 12e6, false, current, rest), current);
        // At 20 MB/s, 13.4 ms: 3.4 past the rest.
        let shallower = l.depth_kept(267_000, 20e6, false, current, rest);
        assert!((ms(3)..ms(4)).contains(&shallower), "{shallower:?}");
        // Deeper, 600 kB: at 40 MB/s that is 15 ms, 5 past the rest; kept at 10.
        assert_eq!(l.depth_kept(600_000, 40e6, true, current, rest), current);
        // At 20 MB/s, 30 ms: 20 past the rest.
        let deeper = l.depth_kept(600_000, 20e6, true, current, rest);
        assert!((ms(19)..ms(21)).contains(&deeper), "{deeper:?}");
    }

    /// Where the drain does not grow with the queue but each sample varies by up to a fifth
    /// either way, and the drain drifts by a fifth over a few phases (a Kafka node's, beside
    /// the producer on two cores: 11-28 MB/s samples at one depth), the depth stays the least:
    /// before trials had to pay by more than the phases' noise and be confirmed by the phase
    /// after them, chance kept a deeper queue every few seconds (on one Kafka node, the depth
    /// went from 2 ms to 9, 25, 14 ms within a 7 s run, the average from send with it).
    #[test]
    fn where_depth_does_not_pay_a_noisy_drifting_drain_keeps_the_least_depth() {
        // A fixed xorshift sequence: each sample's noise within +-20%, and a slow swing.
        let state = std::cell::Cell::new(0x9e37_79b9_7f4a_7c15_u64);
        let calls = std::cell::Cell::new(0u32);
        let noisy = |_limit: usize| {
            let mut x = state.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            state.set(x);
            let n = calls.get();
            calls.set(n + 1);
            let noise = (x % 4001) as f64 / 10_000.0 - 0.2;
            let drift = 0.1 * (f64::from(n) / 40.0).sin();
            20e6 * (1.0 + drift + noise)
        };
        let (depth, in_trial, _) = learn(3000, noisy);
        assert_eq!(depth, Duration::from_millis(2));
        assert!(in_trial < 60, "{in_trial} samples of 3000 in a trial");
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
                l.sampled(20_000, busy, true, 100_000, bounds, serving(true)),
                DepthStep::Stay
            );
        }
        assert_eq!(
            l.sampled(20_000, busy, false, 100_000, bounds, serving(true)),
            DepthStep::Stay
        );
        // A whole phase from here: no trial before its last sample.
        for i in 1..phase {
            let step = l.sampled(20_000, busy, true, 100_000, bounds, serving(true));
            assert_eq!(step, DepthStep::Stay, "sample {i}");
        }
        let step = l.sampled(20_000, busy, true, 100_000, bounds, serving(true));
        assert_eq!(step, DepthStep::Try(150_000), "deeper first, by half");
        // The trial drains twice as much (it would pay); a sample not held back ends it.
        for _ in 0..3 {
            assert_eq!(
                l.sampled(40_000, busy, true, 150_000, bounds, serving(true)),
                DepthStep::Stay
            );
        }
        assert_eq!(
            l.sampled(40_000, busy, false, 150_000, bounds, serving(true)),
            DepthStep::Back
        );
        // Not counted as a trial that did not pay: the next phase's end tries again at once.
        let mut step = DepthStep::Stay;
        for _ in 0..phase {
            step = l.sampled(20_000, busy, true, 100_000, bounds, serving(true));
        }
        assert_eq!(step, DepthStep::Try(150_000));
    }

    /// A deeper trial is half as deep again where requests wait at the broker (its records
    /// wait that much longer, for nothing where depth does not pay), and doubles the limit
    /// where they do not (a cluster that parks requests: the bytes in flight are the drain),
    /// or while a climb goes on.
    #[test]
    fn a_deeper_trial_doubles_only_where_requests_do_not_wait_or_while_climbing() {
        let busy = Duration::from_millis(20);
        let bounds = (64_000, 32 << 20);
        let phase = DEPTH_SETTLE_SAMPLES + DEPTH_MEASURE_SAMPLES;
        let first_trial = |wait: bool| {
            let mut l = DepthLearning::new(Duration::from_millis(2), Duration::from_millis(50));
            let mut step = DepthStep::Stay;
            for _ in 0..phase {
                step = l.sampled(20_000, busy, true, 100_000, bounds, serving(wait));
            }
            (l, step)
        };
        assert_eq!(first_trial(true).1, DepthStep::Try(150_000));
        assert_eq!(first_trial(false).1, DepthStep::Try(200_000));
        // A trial that drains twice as much is kept at once; the next goes on doubling.
        let (mut l, _) = first_trial(true);
        let mut step = DepthStep::Stay;
        for _ in 0..phase {
            step = l.sampled(40_000, busy, true, 150_000, bounds, serving(true));
        }
        assert!(
            matches!(step, DepthStep::Keep { limit: 150_000, .. }),
            "{step:?}"
        );
        for _ in 0..phase {
            step = l.sampled(40_000, busy, true, 150_000, bounds, serving(true));
        }
        assert_eq!(step, DepthStep::Try(300_000));
    }
}
