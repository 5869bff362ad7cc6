//! The sticky partition of records without a partition of their own (null keys, or every record
//! with `partitioner.ignore.keys`): when it moves on, and where to, as the Java client's
//! built-in partitioner does (KIP-794: `BuiltInPartitioner` with the load statistics
//! `RecordAccumulator` gathers). The rules live in `crate::partitioner`; this module feeds them
//! from the producer's partitions and brokers.
//!
//! Cost: per record, one comparison before the append and a counted-down byte budget after it
//! (the append reports its bytes and whether its batch is still open). The queue depths
//! are the partitions' own counters, read only when a new partition is chosen (once per
//! `batch_size` bytes), where Java rebuilds its table on every `ready` pass; the leaders'
//! availability is updated once per broker serviced, and only with
//! `partitioner.availability.timeout.ms` set.

use std::time::{Duration, Instant};

use crate::batch::Unrouted;
use crate::partition::PartitionQueue;
#[cfg(doc)]
use crate::partitioner::Sticky;
use crate::partitioner::{LoadStats, NodeLatency};
use crate::partitioners::{LeaderSource, PartitionView, PartitionerError, Route};
use crate::types::{Callback, Event, Output};

use super::intake::Appended;
use super::Producer;

/// What the partitioner keeps across choices: the table of the last choice (its buffers reused)
/// and when each leader last took batches.
#[derive(Debug, Default)]
pub(super) struct Partitioning {
    loads: LoadStats,
    nodes: NodeLatency,
}

/// A topic's partitions as the application's partitioner sees them
/// ([`crate::PartitionView`]): their leaders, and each leader's availability as
/// [`Producer::next_sticky_partition`] weighs it.
struct Live<'a, T> {
    partitions: &'a [PartitionQueue<T>],
    nodes: &'a NodeLatency,
    now: Instant,
    /// `partitioner.availability.timeout.ms` when tracked, else zero (off).
    timeout: Duration,
}

impl<T> LeaderSource for Live<'_, T> {
    fn leader(&self, p: u32) -> i32 {
        self.partitions.get(p as usize).map_or(-1, |q| q.leader())
    }

    fn node_unavailable(&self, node: i32) -> bool {
        !self.timeout.is_zero() && self.nodes.unavailable(node, self.now, self.timeout)
    }
}

impl<T> Producer<T> {
    /// `batch.size` as the switch threshold (Java's `stickyBatchSize`; [`Sticky`] counts 0 as
    /// 1, as Java does).
    #[inline(always)]
    fn sticky_batch_size(&self) -> usize {
        self.config.batch_size
    }

    /// The partition the next record without a partition of its own goes to in `topic` (a
    /// known topic). Keeps the current one unless it had its `batch_size` bytes and its batches
    /// are all closed (a switch the last append held back for its open batch: Java's
    /// `RecordAccumulator.partitionChanged`), else chooses the next one. Call it right before
    /// appending such a record, then [`Producer::sticky_appended`] with what the append added.
    #[inline(always)]
    pub(super) fn sticky_partition(&mut self, topic: u32) -> u32 {
        let batch_size = self.sticky_batch_size();
        let t = self.topics.get_mut(topic);
        if let Some(p) = t.sticky.partition() {
            let keep = !t.sticky.switch_pending()
                || t.partitions[p as usize].open.is_some()
                || !t.sticky.appended(0, batch_size, false);
            if keep {
                return p;
            }
        }
        self.next_sticky_partition(topic)
    }

    /// A record was appended to the sticky partition of `topic`: counts its bytes, and forgets
    /// the partition when it had its `batch_size` bytes and the append left it without an open
    /// batch, or had twice that (Java: `BuiltInPartitioner.updatePartitionInfo` with
    /// `enableSwitch = allBatchesFull`). The next record then chooses again.
    #[inline(always)]
    pub(super) fn sticky_appended(&mut self, topic: u32, appended: Appended) {
        let batch_size = self.sticky_batch_size();
        self.topics
            .get_mut(topic)
            .sticky
            .appended(appended.bytes, batch_size, appended.batch_open);
    }

    /// Chooses and sticks to the next partition of `topic` (Java:
    /// `BuiltInPartitioner.nextPartition`). With adaptive partitioning, a weighted draw over
    /// the partitions with a leader (less the unavailable ones) against the batches queued for
    /// each (`LoadStats`; Java builds the same table in `RecordAccumulator.partitionReady`).
    /// Without it, or when no candidate is left, a uniform draw among the partitions with a
    /// leader; among all when none has one.
    #[cold]
    #[inline(never)]
    fn next_sticky_partition(&mut self, topic: u32) -> u32 {
        let now = self.now;
        let adaptive = self.config.adaptive_partitioning;
        let timeout = self.config.partitioner_availability_timeout;
        let t = self.topics.get(topic);
        let loads = &mut self.partitioning.loads;
        loads.clear();
        let mut led = 0u64;
        for (i, pq) in t.partitions.iter().enumerate() {
            let leader = pq.leader();
            if leader < 0 {
                continue;
            }
            led += 1;
            let unavailable =
                !timeout.is_zero() && self.partitioning.nodes.unavailable(leader, now, timeout);
            if adaptive && !unavailable {
                loads.push(i as u32, pq.queued_load());
            }
        }
        let weighted = if adaptive && loads.build() {
            loads.pick(&mut self.rng)
        } else {
            None
        };
        let p = match weighted {
            Some(p) => p,
            None if led > 0 => {
                let k = self.rng.below(led) as usize;
                t.partitions
                    .iter()
                    .enumerate()
                    .filter(|(_, pq)| pq.leader() >= 0)
                    .nth(k)
                    .map_or(0, |(i, _)| i as u32)
            }
            None => self.rng.below(t.partitions.len().max(1) as u64) as u32,
        };
        let batch_size = self.sticky_batch_size();
        self.topics.get_mut(topic).sticky.stick_to(p, batch_size);
        p
    }

    /// Routes a record of `topic` (a known topic) with the application's partitioner (call
    /// only when there is one), giving it the topic's partitions and their availability (the
    /// leaders' as [`Producer::next_sticky_partition`] weighs them). A panic in it is caught
    /// here (the record fails with it) and named by [`Event::CallbackPanicked`]. Out of line
    /// and marked cold so that the built-in route, taken when no partitioner is set, stays as
    /// tight as before; with one set, it costs one call per record.
    #[cold]
    #[inline(never)]
    pub(super) fn custom_route(
        &mut self,
        topic: u32,
        pending: &Unrouted<T>,
    ) -> Result<Route, PartitionerError> {
        let timeout = if self.tracks_availability() {
            self.config.partitioner_availability_timeout
        } else {
            Duration::ZERO
        };
        let t = self.topics.get(topic);
        let live = Live {
            partitions: &t.partitions,
            nodes: &self.partitioning.nodes,
            now: self.now,
            timeout,
        };
        let view = PartitionView::live(t.partitions.len() as u32, &live);
        let Some(custom) = self.partitioner.as_mut() else {
            return Ok(Route::Sticky);
        };
        let routed = custom.route(
            &t.name,
            pending.key.as_deref(),
            pending.value.as_deref(),
            &view,
        );
        if let Err(PartitionerError::Panicked(message)) = &routed {
            let event = Event::CallbackPanicked {
                callback: Callback::Partitioner,
                message: message.clone(),
            };
            self.outputs.push_back(Output::Event(event));
        }
        routed
    }

    /// Whether leaders' availability is tracked: adaptive partitioning with
    /// `partitioner.availability.timeout.ms` set (Java updates its node statistics only then).
    #[inline]
    pub(super) fn tracks_availability(&self) -> bool {
        self.config.adaptive_partitioning && !self.config.partitioner_availability_timeout.is_zero()
    }

    /// Forgets what the partitioner knows of `node` (it left the cluster).
    pub(super) fn partitioning_forget_node(&mut self, node: i32) {
        self.partitioning.nodes.forget(node);
    }

    /// The broker in `slot` was serviced (`drained`: it took batches into a Produce request).
    /// Records when its node last took batches, or that it left batches waiting (Java: the
    /// sender's `updateNodeLatencyStats(node, now, canDrain)` for each node `ready` named).
    /// Call after servicing a broker, when [`Producer::tracks_availability`].
    pub(super) fn broker_serviced(&mut self, slot: u32, drained: bool) {
        let (now, linger) = (self.now, self.config.linger);
        let b = self.brokers.slot(slot);
        if b.node_id < 0 {
            return;
        }
        let waiting = !drained
            && b.partitions
                .iter()
                .any(|&(t, p)| self.topics.partition(t, p).has_waiting(now, linger));
        self.partitioning
            .nodes
            .serviced(b.node_id, now, drained, waiting);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::config::{Config, ConfigBuilder};
    use crate::partitioners::{PartitionView, Partitioner, PartitionerError, Route};
    use crate::types::Record;

    use super::Producer;

    const TOPIC: &str = "t";

    fn config() -> ConfigBuilder {
        Config::builder([("k", 9092)])
            .batch_size(1000)
            .linger(Duration::from_secs(3600))
            // Nothing is ever sent: no drain to limit the queue by.
            .queue_delay_target(Duration::ZERO)
            // Nor batches growing behind the queued ones (`batch.grow.max.bytes`): these tests
            // count batches of `batch_size`.
            .batch_grow_max(0)
            .seed(7)
    }

    /// A producer whose topic `t` is known with one partition per entry of `leaders` (-1: no
    /// leader). Nothing is ever sent (no connection), so batches stay queued.
    fn producer(config: ConfigBuilder, leaders: &[i32]) -> (Producer<()>, Instant) {
        let t0 = Instant::now();
        let mut p = Producer::new(config.build().unwrap(), t0);
        let (id, _) = p.topics.id_of(&Arc::from(TOPIC), t0);
        let t = p.topics.get_mut(id);
        t.grow_partitions(leaders.len());
        t.known = true;
        for (pq, &leader) in t.partitions.iter_mut().zip(leaders) {
            pq.set_leader(leader, 0);
        }
        (p, t0)
    }

    /// The bytes each partition holds, closed batches and open one (nothing is ever sent, so
    /// every closed batch is still queued).
    fn shape(p: &Producer<()>) -> Vec<usize> {
        p.topics
            .get(0)
            .partitions
            .iter()
            .map(|pq| {
                let open = pq.open.as_ref().map_or(0, |o| o.size_in_bytes());
                let closed = pq.queued_batches() as usize - usize::from(pq.open.is_some());
                open + (0..closed).map(|i| pq.batch(i).len_bytes()).sum::<usize>()
            })
            .collect()
    }

    /// Sends `record` and returns the partition it went to (the one whose batches changed).
    fn route(p: &mut Producer<()>, now: Instant, record: Record) -> usize {
        let before = shape(p);
        p.send(now, record, ()).unwrap();
        let after = shape(p);
        let changed: Vec<usize> = (0..after.len()).filter(|&i| before[i] < after[i]).collect();
        assert_eq!(
            changed.len(),
            1,
            "one partition got the record: {before:?} {after:?}"
        );
        changed[0]
    }

    fn value() -> Vec<u8> {
        vec![b'v'; 100]
    }

    /// Runs of consecutive records to one partition: (partition, length).
    fn runs(routes: &[usize]) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for &r in routes {
            match out.last_mut() {
                Some((p, n)) if *p == r => *n += 1,
                _ => out.push((r, 1)),
            }
        }
        out
    }

    /// With 100-byte values a 1000-byte batch holds 8 records (925 bytes), so `batch.size`
    /// bytes are reached inside the second batch; Java's `RecordAccumulator.append` holds the
    /// switch back while that batch is open and makes it at its boundary: the record that
    /// does not fit the second batch goes to the next partition. Runs are 16 records (two
    /// batches), never 8: the switch does not happen at every batch.
    #[test]
    fn sticks_for_batch_size_bytes_and_switches_at_a_batch_boundary() {
        let (mut p, now) = producer(config(), &[1, 2, 3]);
        let routes: Vec<usize> = (0..800)
            .map(|_| route(&mut p, now, Record::new(TOPIC, value())))
            .collect();
        let runs = runs(&routes);
        assert!(runs.len() > 20, "the partition moves on: {runs:?}");
        for &(_, n) in &runs[..runs.len() - 1] {
            // A run can repeat a partition (the draw may pick it again): 16 records per stint.
            assert_eq!(n % 16, 0, "{runs:?}");
        }
        let t = p.topics.get(0);
        for pq in &t.partitions {
            // Every stint left whole batches of 8 behind.
            assert!(pq.queued_batches() >= 2, "{:?}", shape(&p));
            assert!(pq.batch(0).record_count() == 8, "{:?}", shape(&p));
        }
    }

    /// A switch held back for an open batch happens once that batch closes (here by
    /// `flush`), before the next record is placed (Java: `partitionChanged` with
    /// `allBatchesFull`).
    #[test]
    fn a_held_back_switch_happens_once_the_batch_closes() {
        let (mut p, now) = producer(config(), &[1, 2, 3]);
        let first = route(&mut p, now, Record::new(TOPIC, value()));
        for _ in 0..11 {
            assert_eq!(route(&mut p, now, Record::new(TOPIC, value())), first);
        }
        let t = p.topics.get(0);
        assert!(t.sticky.switch_pending(), "12 records: past batch.size");
        assert!(
            t.partitions[first].open.is_some(),
            "the second batch is open"
        );
        p.flush(now);
        route(&mut p, now, Record::new(TOPIC, value()));
        let produced = p.topics.get(0).sticky.produced(1000);
        assert!(
            produced < 200,
            "a new stint started with that record ({produced} bytes counted)"
        );
    }

    /// Queue depths `0 3 1` (Java's example): the next partition is drawn with weights
    /// `4 1 3` out of 8.
    fn depths_0_3_1(config: ConfigBuilder) -> (Producer<()>, Instant) {
        let (mut p, now) = producer(config, &[1, 2, 3]);
        // Explicit partitions: 3 batches for partition 1 (two closed, one open), one open
        // batch for partition 2.
        for _ in 0..17 {
            p.send(now, Record::new(TOPIC, value()).with_partition(1), ())
                .unwrap();
        }
        p.send(now, Record::new(TOPIC, value()).with_partition(2), ())
            .unwrap();
        let depths: Vec<u32> = (0..3)
            .map(|i| p.topics.partition(0, i).queued_batches())
            .collect();
        assert_eq!(depths, [0, 3, 1]);
        (p, now)
    }

    fn draws(p: &mut Producer<()>, n: u32) -> [f64; 3] {
        let mut counts = [0u32; 3];
        for _ in 0..n {
            counts[p.next_sticky_partition(0) as usize] += 1;
        }
        counts.map(|c| f64::from(c) / f64::from(n))
    }

    #[test]
    fn the_next_partition_is_weighted_against_queue_depth() {
        let (mut p, _) = depths_0_3_1(config());
        let shares = draws(&mut p, 40_000);
        for (share, w) in shares.iter().zip([4.0, 1.0, 3.0]) {
            assert!((share - w / 8.0).abs() < 0.015, "{shares:?}");
        }
    }

    /// `partitioner.adaptive.partitioning.enable=false`: uniform among the partitions with a
    /// leader, whatever their queues (Java: `nextPartition` without load stats).
    #[test]
    fn without_adaptive_partitioning_the_choice_is_uniform() {
        let (mut p, _) = depths_0_3_1(config().adaptive_partitioning(false));
        let shares = draws(&mut p, 30_000);
        for share in shares {
            assert!((share - 1.0 / 3.0).abs() < 0.015, "{shares:?}");
        }
    }

    /// Partitions without a leader are never chosen, adaptive or not (Java: partitions without
    /// a leader are left out of the load stats and of `availablePartitionsForTopic`).
    #[test]
    fn partitions_without_a_leader_are_not_chosen() {
        for adaptive in [true, false] {
            let (mut p, _) = producer(config().adaptive_partitioning(adaptive), &[1, -1, 3]);
            let shares = draws(&mut p, 3_000);
            assert_eq!(shares[1], 0.0, "adaptive {adaptive}: {shares:?}");
            assert!(shares[0] > 0.4 && shares[2] > 0.4, "{shares:?}");
        }
    }

    /// `partitioner.availability.timeout.ms`: once the leader of partition 1 (node 2) left
    /// batches waiting and took none for longer than the timeout, partition 1 is out of the
    /// choice (Java: `RecordAccumulator.partitionReady` drops it from the load stats); before
    /// that, and once node 2 takes batches again, it is in.
    #[test]
    fn an_unavailable_leader_is_left_out_after_the_timeout() {
        let timeout = Duration::from_millis(100);
        let (mut p, t0) = depths_0_3_1(config().partitioner_availability_timeout(timeout));
        p.partitioning.nodes.serviced(2, t0, true, false);
        p.partitioning
            .nodes
            .serviced(2, t0 + Duration::from_millis(20), false, true);
        p.now = t0 + Duration::from_millis(90);
        assert!(draws(&mut p, 2_000)[1] > 0.05, "within the timeout");
        p.now = t0 + Duration::from_millis(150);
        let shares = draws(&mut p, 2_000);
        assert_eq!(shares[1], 0.0, "{shares:?}");
        // The table is built over the remaining partitions: depths 0 and 1 weigh 2 and 1
        // (max + 1 = 2 among them, as Java computes it over the kept entries).
        assert!((shares[0] - 2.0 / 3.0).abs() < 0.04, "{shares:?}");
        p.partitioning.nodes.serviced(2, p.now, true, false);
        assert!(draws(&mut p, 2_000)[1] > 0.05, "node 2 took batches again");
        // With adaptive partitioning off the timeout has no effect (as in Java).
        let (mut p, t0) = depths_0_3_1(
            config()
                .adaptive_partitioning(false)
                .partitioner_availability_timeout(timeout),
        );
        p.partitioning.nodes.serviced(2, t0, false, true);
        p.now = t0 + Duration::from_secs(1);
        assert!(draws(&mut p, 2_000)[1] > 0.25);
    }

    /// `partitioner.ignore.keys=true`: keyed records stick like null keys; false: murmur2.
    #[test]
    fn ignore_keys_makes_keyed_records_sticky() {
        let keyed = |i: u32| Record::new(TOPIC, value()).with_key(format!("key-{i}"));
        let (mut p, now) = producer(config().partitioner_ignore_keys(true), &[1, 2, 3]);
        let routes: Vec<usize> = (0..64).map(|i| route(&mut p, now, keyed(i))).collect();
        let runs = runs(&routes);
        assert!(
            runs[..runs.len() - 1].iter().all(|&(_, n)| n % 16 == 0),
            "{runs:?}"
        );
        let (mut p, now) = producer(config(), &[1, 2, 3]);
        for i in 0..64 {
            let want = crate::partitioner::partition_for_key(format!("key-{i}").as_bytes(), 3);
            assert_eq!(route(&mut p, now, keyed(i)), want as usize);
        }
    }

    /// The same seed, the same choices.
    #[test]
    fn choices_are_deterministic_from_the_seed() {
        let run = |seed| {
            let (mut p, now) = producer(config().seed(seed), &[1, 2, 3, 1, 2, 3]);
            (0..400)
                .map(|_| route(&mut p, now, Record::new(TOPIC, value())))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(11), run(11));
        assert_ne!(run(11), run(12));
    }

    /// What an application's partitioner is shown as available is what the adaptive
    /// partitioner uses: a partition without a leader is not, nor, with
    /// `partitioner.availability.timeout.ms`, one whose leader (node 2) left batches waiting
    /// for longer than that; once it takes batches again it is.
    #[test]
    fn a_partitioner_sees_the_availability_the_adaptive_partitioner_uses() {
        type Seen = Arc<std::sync::Mutex<Vec<Vec<u32>>>>;
        struct Watch(Seen);
        impl Partitioner for Watch {
            fn partition(
                &mut self,
                _: &str,
                _: Option<&[u8]>,
                _: Option<&[u8]>,
                partitions: &PartitionView<'_>,
            ) -> Result<Route, PartitionerError> {
                self.0
                    .lock()
                    .unwrap()
                    .push(partitions.available().collect());
                Ok(Route::Partition(0))
            }
        }
        let ms = Duration::from_millis;
        let config = config().partitioner_availability_timeout(ms(100));
        let (mut p, t0) = producer(config, &[1, 2, 3, -1]);
        let seen = Seen::default();
        p.set_partitioner(Box::new(Watch(seen.clone())));
        p.partitioning.nodes.serviced(2, t0, true, false);
        p.partitioning.nodes.serviced(2, t0 + ms(20), false, true);
        for at in [90, 150] {
            p.send(t0 + ms(at), Record::new(TOPIC, value()), ())
                .unwrap();
        }
        p.partitioning.nodes.serviced(2, t0 + ms(160), true, false);
        p.send(t0 + ms(170), Record::new(TOPIC, value()), ())
            .unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(*seen, [vec![0, 1, 2], vec![0, 2], vec![0, 1, 2]]);
    }
}
