//! The queue-delay limit's formula, floors, holds and probes.

#[cfg(test)]
mod tests {
    use super::super::*;

    /// A request sent alone at `t`, answered `round_trip` later acknowledging `bytes`, with
    /// `known` brokers; `t` moves to the answer.
    fn answer_alone(
        q: &mut QueueDelay,
        t: &mut Instant,
        bytes: usize,
        round_trip: Duration,
        known: usize,
    ) {
        let sent = *t;
        *t += round_trip;
        q.acknowledged(bytes);
        q.answered(*t, sent, true, None, || brokers(known));
    }

    /// A request sent alone at `t`, answered 50 ms later acknowledging 1 MB (a 20 MB/s drain,
    /// three brokers known); `t` moves to the answer.
    fn answer_1_mb_in_50_ms(q: &mut QueueDelay, t: &mut Instant) {
        answer_alone(q, t, 1_000_000, Duration::from_millis(50), 3);
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
        q.answered(t0 + Duration::from_millis(20), t0, true, None, || {
            brokers(3)
        });
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
            None,
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
            q.answered(t, sent, true, None, || brokers(3));
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
            q.answered(t, t - round_trip, true, None, || brokers(1));
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
                q.answered(t0 + Duration::from_millis(20) * i, t0, true, None, || {
                    Backlog {
                        brokers: 1,
                        partitions,
                    }
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
            q.answered(t, sent, true, None, || brokers(3));
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

    /// `n` pipelined requests of 10-50 KB answered back to back, each written 40 ms before
    /// the answer before it (a round trip under the 50 ms of a request sent alone) and served in `per_request` plus 50 us a KB (20 MB/s); `t` moves
    /// to the last answer.
    fn serve_pipelined(q: &mut QueueDelay, t: &mut Instant, n: usize, per_request: Duration) {
        for i in 0..n {
            let kb = 10 + (i * 7) % 41;
            let (previous, sent) = (*t, *t - Duration::from_millis(40));
            *t += per_request + Duration::from_micros(50) * kb as u32;
            q.acknowledged(kb * 1000);
            q.answered(*t, sent, false, Some(previous), || brokers(3));
        }
    }

    /// 20 ms linger, a 50 ms target and depth.
    fn config_lingering() -> Config {
        Config::builder([("a", 9092), ("b", 9092), ("c", 9092)])
            .linger(Duration::from_millis(20))
            .queue_delay_target(Duration::from_millis(50))
            .queue_delay_min(Duration::from_millis(50))
            .build()
            .unwrap()
    }

    /// `linger` counts in the limit while batches wait for it: where the brokers' work is per
    /// byte, after two samples whose requests all went without waiting their linger (sealed
    /// full), the limit counts none of it; a sample with a request that waited its linger
    /// brings it back at once.
    #[test]
    fn linger_counts_while_requests_wait_for_it() {
        let mut q = QueueDelay::new(&config_lingering());
        let mut t = Instant::now();
        q.held_back(t);
        serve_pipelined(&mut q, &mut t, 200, Duration::ZERO);
        let mut sample = |q: &mut QueueDelay, lingered: bool| {
            q.request_sent(lingered);
            answer_1_mb_in_50_ms(q, &mut t);
            q.allowed()
        };
        for _ in 0..3 {
            sample(&mut q, true);
        }
        let with_linger = sample(&mut q, true);
        assert!(
            (3_300_000..3_500_000).contains(&with_linger),
            "{with_linger}: 20 MB/s x 170 ms (50 ms target, 20 ms linger, 2 x 50 ms round trip)"
        );
        assert_eq!(
            sample(&mut q, false),
            with_linger,
            "one sample without: still counted"
        );
        let without = sample(&mut q, false);
        assert!(
            (2_900_000..3_100_000).contains(&without),
            "{without}: 20 MB/s x 150 ms, no linger"
        );
        assert_eq!(sample(&mut q, true), with_linger, "back at once");
    }

    /// `n` samples whose requests went without waiting their linger; returns the delay the
    /// limit then counts (the limit over the rate, in seconds).
    fn delay_after_samples_without_linger(q: &mut QueueDelay, t: &mut Instant, n: usize) -> f64 {
        for _ in 0..n {
            q.request_sent(false);
            answer_1_mb_in_50_ms(q, t);
        }
        q.allowed() as f64 / q.rate()
    }

    /// Where the brokers' work is per request (larger requests drain more), `linger` counts
    /// in the limit though no batch waits for it: a queue that deep lets batches grow.
    #[test]
    fn linger_counts_where_the_brokers_work_is_per_request() {
        let mut q = QueueDelay::new(&config_lingering());
        let mut t = Instant::now();
        q.held_back(t);
        serve_pipelined(&mut q, &mut t, 200, Duration::from_millis(3));
        let counted = delay_after_samples_without_linger(&mut q, &mut t, 4);
        assert!(
            (0.165..0.175).contains(&counted),
            "{counted} s: 50 ms target, 20 ms linger, 2 x 50 ms round trip"
        );
        // The same requests served per byte: linger is no longer counted.
        serve_pipelined(&mut q, &mut t, 2000, Duration::ZERO);
        let counted = delay_after_samples_without_linger(&mut q, &mut t, 2);
        assert!(
            (0.145..0.155).contains(&counted),
            "{counted} s: 50 ms target, 2 x 50 ms round trip"
        );
    }

    /// Where Produce requests wait at the brokers (a pipelined round trip of about 40 ms
    /// against 10 ms for one sent alone), the limit counts the base round trip once if the
    /// cost fit says the brokers' work is per byte (the brokers' own queue is the headroom),
    /// twice if it is per request (a deeper queue grows requests that drain more).
    #[test]
    fn where_requests_wait_the_round_trip_counts_once_if_the_work_is_per_byte() {
        let delay_counted = |per_request: Duration| {
            let mut q = QueueDelay::new(&config(50));
            let mut t = Instant::now();
            q.held_back(t);
            answer_alone(&mut q, &mut t, 200_000, Duration::from_millis(10), 1);
            serve_pipelined(&mut q, &mut t, 2000, per_request);
            assert!(q.pipelined_over_alone() >= REQUESTS_WAIT_FROM);
            q.allowed() as f64 / q.rate()
        };
        let per_byte = delay_counted(Duration::ZERO);
        assert!(
            (0.058..0.062).contains(&per_byte),
            "{per_byte} s: 50 ms target, 1 x 10 ms round trip"
        );
        let per_request = delay_counted(Duration::from_millis(3));
        assert!(
            (0.068..0.072).contains(&per_request),
            "{per_request} s: 50 ms target, 2 x 10 ms round trip"
        );
    }

    /// For senders that wait for room the limit has no burst floor: before any drain is
    /// measured it is the floor of the bootstrap brokers' pipelines, not an eighth of
    /// `buffer.memory`; then it follows the drain whether senders are held back or not, and
    /// while they are it is the limit for `send` too.
    #[test]
    fn for_senders_that_wait_the_limit_has_no_burst_floor() {
        let config = config(50);
        let mut q = QueueDelay::new(&config);
        let pipelines = 3 * (config.max_in_flight + 1) * config.batch_size;
        assert_eq!(q.allowed(), 4 << 20);
        assert_eq!(
            q.allowed_waiting(),
            pipelines,
            "max.in.flight + 1 batches on each of 3 bootstrap brokers"
        );
        let mut t = Instant::now();
        for _ in 0..4 {
            answer_1_mb_in_50_ms(&mut q, &mut t);
        }
        assert_eq!(q.allowed(), 4 << 20, "nobody held back: the burst floor");
        let waiting = q.allowed_waiting();
        assert!(
            (2_800_000..3_200_000).contains(&waiting),
            "waiting {waiting}: 20 MB/s x 150 ms (50 ms target + 2 x 50 ms round trip)"
        );
        q.held_back(t);
        answer_1_mb_in_50_ms(&mut q, &mut t);
        assert_eq!(q.allowed(), q.allowed_waiting(), "held back: one limit");
    }

    /// Answers that acknowledge nothing (errors all) measure no drain to hold senders to: the
    /// burst floor stands for every send, held back or waiting, until bytes are acknowledged.
    #[test]
    fn answers_that_acknowledge_nothing_leave_the_burst_floor_to_every_send() {
        let mut q = QueueDelay::new(&config(50));
        let burst_floor = 4 << 20;
        let mut t = Instant::now();
        q.held_back(t);
        for _ in 0..3 {
            let sent = t;
            t += Duration::from_millis(50);
            assert!(!q.answered(t, sent, true, None, || brokers(3)) || q.allowed() == burst_floor);
        }
        assert_eq!(
            (q.allowed(), q.allowed_waiting()),
            (burst_floor, burst_floor),
            "no drain measured: the burst floor for every send"
        );
        answer_1_mb_in_50_ms(&mut q, &mut t);
        let drained = q.allowed_waiting();
        assert!(
            (2_800_000..3_200_000).contains(&drained),
            "{drained}: a drain measured, held back: 20 MB/s x 150 ms"
        );
        assert_eq!(q.allowed(), drained);
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
            q.answered(t, sent, true, None, || brokers(3));
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
            q.answered(t0 + Duration::from_millis(20) * i, sent, true, None, || {
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
            q.answered(t0 + Duration::from_millis(20) * i, sent, true, None, || {
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
        answer_alone(&mut q, &mut t, 200_000, Duration::from_millis(10), 1);
        // Then pipelined ones, each 250 ms after it was written, 200 kB every 10 ms.
        for _ in 0..60 {
            q.held_in_driver();
            t += Duration::from_millis(10);
            q.acknowledged(200_000);
            q.answered(t, t - Duration::from_millis(250), false, None, || {
                brokers(1)
            });
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
        q.answered(t0 + Duration::from_millis(2), t0, true, None, || brokers(1));
        assert!(!q.probing(t0 + Duration::from_millis(500)));
        // Pipelined answers only, for a whole interval.
        let mut t = t0 + Duration::from_millis(2);
        while t < t0 + PROBE_INTERVAL {
            t += Duration::from_millis(10);
            q.acknowledged(1000);
            q.answered(t, t - Duration::from_millis(30), false, None, || brokers(1));
        }
        t += Duration::from_millis(10);
        assert!(q.probing(t), "an interval without a request sent alone");
        q.acknowledged(1000);
        q.answered(t, t - Duration::from_millis(3), true, None, || brokers(1));
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
        q.answered(t0 + Duration::from_millis(100), t0, true, None, || {
            brokers(1)
        });
        assert!(!q.probing(t0 + Duration::from_secs(4)));
        assert!(q.probing(t0 + Duration::from_millis(5100)));
    }
}
