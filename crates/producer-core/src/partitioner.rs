//! Choosing a partition: Java-compatible murmur2 for keys, and the rules of the adaptive sticky
//! partitioner (KIP-794, the Java client's default since 3.3) for records without a key: how long
//! to stick to a partition (`Sticky`), the weighted choice of the next one from the queue depths
//! of the partitions' leaders (`LoadStats`), and which leaders count as unavailable
//! (`NodeLatency`). The producer walks its partitions and feeds these; they hold no producer
//! state of their own.

use std::time::{Duration, Instant};

/// Kafka's murmur2 hash, bit for bit as the Java client's `Utils.murmur2`.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len() as u32;
    let mut h: u32 = 0x9747_b28c ^ len;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= (rest[2] as u32) << 16;
    }
    if rest.len() >= 2 {
        h ^= (rest[1] as u32) << 8;
    }
    if !rest.is_empty() {
        h ^= rest[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a keyed record, as the Java client computes it:
/// `(murmur2(key) & 0x7fffffff) % partitions`. `partitions` must be positive.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions
}

/// A small deterministic random number generator (SplitMix64), seeded from the config so the
/// state machine stays reproducible.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A factor uniformly in `[lo, hi)`.
    pub(crate) fn factor(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * unit
    }
}

/// The sticky partition of one topic's records that have no partition of their own (null keys,
/// or every record with `partitioner.ignore.keys`), and the bytes appended to it since it was
/// chosen: Java's `BuiltInPartitioner.StickyPartitionInfo` with its `producedBytes` (kept here as
/// the bytes left before `batch_size`, so the per-record check is one subtraction and a sign
/// test).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sticky {
    partition: Option<u32>,
    /// `batch_size` minus the bytes appended since the partition was chosen (negative past it).
    left: isize,
}

impl Sticky {
    /// The partition records stick to, `None` until one is chosen (and again after a switch is
    /// due): then choose one and call [`Sticky::stick_to`].
    #[inline(always)]
    pub(crate) fn partition(&self) -> Option<u32> {
        self.partition
    }

    /// Sticks to `partition` from now on, with nothing appended to it yet, until about
    /// `batch_size` bytes went to it (Java's `stickyBatchSize`, at least 1).
    pub(crate) fn stick_to(&mut self, partition: u32, batch_size: usize) {
        self.partition = Some(partition);
        self.left = isize::try_from(batch_size.max(1)).unwrap_or(isize::MAX);
    }

    /// Bytes appended since the partition was chosen, given the `batch_size` it was chosen with.
    #[cfg(test)]
    pub(crate) fn produced(&self, batch_size: usize) -> isize {
        batch_size.max(1) as isize - self.left
    }

    /// Whether `batch_size` bytes went to the partition, so a switch is due at the next batch
    /// boundary (cheap: one comparison; see [`Sticky::appended`]).
    #[inline(always)]
    pub(crate) fn switch_pending(&self) -> bool {
        self.left <= 0
    }

    /// Counts `bytes` appended to the sticky partition (0 to only re-check the rule) and
    /// forgets the partition when it is time to move on: at least `batch_size` bytes went to it
    /// and `batch_open` is false (every batch of the partition is closed: the switch lands on a
    /// batch boundary), or twice `batch_size` went to it whatever its batches. Returns whether
    /// the partition was forgotten (the next record chooses again). Call it after each append
    /// to the sticky partition, and before one when its batches are all closed, with the
    /// `batch_size` given to [`Sticky::stick_to`] (Java: `BuiltInPartitioner.updatePartitionInfo`,
    /// called from `RecordAccumulator.append` with `enableSwitch = allBatchesFull(deque)` and
    /// from `RecordAccumulator.partitionChanged` with 0 bytes once the deque's batches are all
    /// full).
    #[inline(always)]
    pub(crate) fn appended(&mut self, bytes: usize, batch_size: usize, batch_open: bool) -> bool {
        // A record is at most `max_request_size` bytes: no overflow.
        self.left -= bytes as isize;
        if self.left > 0 {
            return false;
        }
        let past = self.left.unsigned_abs();
        let due = !batch_open || past >= batch_size.max(1);
        if due {
            self.partition = None;
        }
        due
    }
}

/// The weights of the next sticky partition, from the queue depth at each candidate's leader:
/// Java's `BuiltInPartitioner.updatePartitionLoadStats` (the cumulative frequency table) and
/// `nextPartition` (the weighted draw). The buffers are kept between choices, so a choice
/// allocates nothing once they have grown.
#[derive(Debug, Clone, Default)]
pub(crate) struct LoadStats {
    /// Queue depths as pushed, then (after [`LoadStats::build`]) the running sums of weights.
    table: Vec<u32>,
    partitions: Vec<u32>,
    built: bool,
}

impl LoadStats {
    /// Starts a new table: call before pushing the candidates of one choice.
    pub(crate) fn clear(&mut self) {
        self.table.clear();
        self.partitions.clear();
        self.built = false;
    }

    /// Adds a candidate partition with `queued` batches waiting at its leader. Leave out the
    /// partitions without a leader and those whose leader is unavailable.
    pub(crate) fn push(&mut self, partition: u32, queued: u32) {
        self.table.push(queued);
        self.partitions.push(partition);
    }

    /// Turns the pushed depths into the cumulative frequency table: each candidate weighs
    /// `max + 1 - queued` (the deepest queue still weighs 1), e.g. depths `0 3 1` weigh `4 1 3`
    /// and sum to `4 5 8` (Java: `BuiltInPartitioner.updatePartitionLoadStats`). Call once,
    /// after the pushes; returns false when there is no candidate.
    #[must_use]
    pub(crate) fn build(&mut self) -> bool {
        let Some(&max) = self.table.iter().max() else {
            return false;
        };
        let max_plus_1 = max.saturating_add(1);
        let mut sum = 0u32;
        for w in &mut self.table {
            sum = sum.saturating_add(max_plus_1 - *w);
            *w = sum;
        }
        self.built = true;
        true
    }

    /// The weight of each candidate after [`LoadStats::build`], in push order.
    #[cfg(test)]
    pub(crate) fn weights(&self) -> Vec<u32> {
        let mut prev = 0;
        self.table
            .iter()
            .map(|&s| {
                let w = s - prev;
                prev = s;
                w
            })
            .collect()
    }

    /// A candidate drawn with probability proportional to its weight: a uniform value in
    /// `0..total`, and the first candidate whose running sum is above it (Java:
    /// `BuiltInPartitioner.nextPartition`, its binary search of the table). `None` before
    /// [`LoadStats::build`] or with no candidate.
    #[must_use]
    pub(crate) fn pick(&self, rng: &mut Rng) -> Option<u32> {
        let total = *self.table.last().filter(|_| self.built)?;
        self.at(rng.below(u64::from(total.max(1))) as u32)
    }

    /// The candidate a draw of `r` (in `0..total`) lands on: the first whose running sum is
    /// above `r`.
    fn at(&self, r: u32) -> Option<u32> {
        let i = self.table.partition_point(|&s| s <= r);
        self.partitions.get(i).copied()
    }
}

/// When each leader last took batches, and whether it has since had batches waiting that it
/// could not take: Java's `RecordAccumulator.NodeLatencyStats` (`drainTimeMs`, `readyTimeMs`),
/// updated by `updateNodeLatencyStats` from the sender's loop and read by `partitionReady` against
/// `partitioner.availability.timeout.ms`. A handful of brokers: a vector searched by node id.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeLatency {
    nodes: Vec<NodeStat>,
}

#[derive(Debug, Clone, Copy)]
struct NodeStat {
    node: i32,
    /// The last time the node took batches (or was first seen).
    drained: Instant,
    /// The node has batches waiting that it could not take since `drained`.
    stalled: bool,
}

impl NodeLatency {
    fn entry(&mut self, node: i32, now: Instant) -> &mut NodeStat {
        let i = match self.nodes.iter().position(|n| n.node == node) {
            Some(i) => i,
            None => {
                self.nodes.push(NodeStat {
                    node,
                    drained: now,
                    stalled: false,
                });
                self.nodes.len() - 1
            }
        };
        &mut self.nodes[i]
    }

    /// Forgets `node` (it left the cluster): the table holds only nodes that may lead.
    pub(crate) fn forget(&mut self, node: i32) {
        self.nodes.retain(|n| n.node != node);
    }

    /// The node was looked at for sending at `now`: it took batches (`drained`), or it did not
    /// although batches were waiting for it (`waiting`), or it had nothing to take. After it, a
    /// node that did not take its waiting batches for longer than the timeout counts as
    /// unavailable until it takes some again (Java: `updateNodeLatencyStats(node, now,
    /// canDrain)`, where a node first seen starts as drained at `now`).
    pub(crate) fn serviced(&mut self, node: i32, now: Instant, drained: bool, waiting: bool) {
        if !drained && !waiting && !self.nodes.iter().any(|n| n.node == node) {
            return;
        }
        let n = self.entry(node, now);
        if drained {
            n.drained = now;
        }
        n.stalled = !drained && waiting;
    }

    /// Whether partitions led by `node` are left out of the choice at `now`: the node has had
    /// batches waiting that it did not take, and took none for longer than `timeout` (Java:
    /// `readyTimeMs - drainTimeMs > partitionAvailabilityTimeoutMs` in
    /// `RecordAccumulator.partitionReady`; here the node still stalled counts as ready now).
    #[must_use]
    pub(crate) fn unavailable(&self, node: i32, now: Instant, timeout: Duration) -> bool {
        self.nodes.iter().any(|n| {
            n.node == node && n.stalled && now.saturating_duration_since(n.drained) > timeout
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test vectors from `reference/producer-behaviour.md` section 4.1 (values from the Java
    /// implementation, as librdkafka's `rdmurmur2.c` records them).
    #[test]
    fn java_test_vectors() {
        let cases: &[(&str, u32, i32)] = &[
            ("kafka", 0xd067cf64, 0),
            ("giberish123456789", 0x8f552b0c, 0),
            ("1234", 0x9fc97b14, 0),
            ("234", 0xe7c009ca, 6),
            ("34", 0x873930da, 0),
            ("4", 0x5a4b5ca1, 3),
            ("PreAmbleWillBeRemoved,ThePrePartThatIs", 0x78424f1c, 8),
            ("", 0x106e08d9, 1),
        ];
        for (key, hash, part) in cases {
            assert_eq!(murmur2(key.as_bytes()) as u32, *hash, "murmur2({key:?})");
            assert_eq!(
                partition_for_key(key.as_bytes(), 10),
                *part,
                "partition of {key:?}"
            );
        }
    }

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            let x = a.below(12);
            assert_eq!(x, b.below(12));
            assert!(x < 12);
            let f = a.factor(0.8, 1.2);
            assert!((0.8..1.2).contains(&f));
            b.factor(0.8, 1.2);
        }
    }

    /// Java's example in `BuiltInPartitioner.updatePartitionLoadStats`: queue sizes `0 3 1`
    /// invert to `4 1 3` against max + 1 = 4 and sum to `4 5 8`; draws 0-3 land on the first
    /// partition, 4 on the second, 5-7 on the third.
    #[test]
    fn cumulative_frequency_table_as_java_builds_it() {
        let mut s = LoadStats::default();
        for (p, q) in [(10, 0), (11, 3), (12, 1)] {
            s.push(p, q);
        }
        assert!(s.build());
        assert_eq!(s.weights(), [4, 1, 3]);
        assert_eq!(s.table, [4, 5, 8]);
        let landed: Vec<u32> = (0..8).map(|r| s.at(r).unwrap()).collect();
        assert_eq!(landed, [10, 10, 10, 10, 11, 12, 12, 12]);
    }

    /// The deepest queue still weighs 1 (max + 1 - max), never 0, so its partition stays
    /// possible; equal depths weigh the same (Java then draws uniformly).
    #[test]
    fn the_deepest_queue_still_weighs_one() {
        let mut s = LoadStats::default();
        for (p, q) in [(0, 5), (1, 5), (2, 2)] {
            s.push(p, q);
        }
        assert!(s.build());
        assert_eq!(s.weights(), [1, 1, 4]);
        s.clear();
        for p in 0..3 {
            s.push(p, 7);
        }
        assert!(s.build());
        assert_eq!(s.weights(), [1, 1, 1]);
        s.clear();
        assert!(!s.build(), "no candidate, no table");
        assert_eq!(s.pick(&mut Rng::new(1)), None);
    }

    /// Seeded draws over `0 3 1` land in proportion to the weights `4 1 3` / 8.
    #[test]
    fn seeded_draws_follow_the_weights() {
        let mut s = LoadStats::default();
        for (p, q) in [(0, 0), (1, 3), (2, 1)] {
            s.push(p, q);
        }
        assert!(s.build());
        let mut rng = Rng::new(42);
        let n = 80_000;
        let mut counts = [0u32; 3];
        for _ in 0..n {
            counts[s.pick(&mut rng).unwrap() as usize] += 1;
        }
        for (c, w) in counts.iter().zip([4.0, 1.0, 3.0]) {
            let share = f64::from(*c) / f64::from(n);
            assert!((share - w / 8.0).abs() < 0.01, "{counts:?}");
        }
    }

    /// Java's `updatePartitionInfo`: the switch waits for `batch_size` bytes and a batch
    /// boundary (no open batch), or happens anyway at twice `batch_size`.
    #[test]
    fn sticky_switches_after_batch_size_bytes_at_a_boundary() {
        let mut s = Sticky::default();
        assert_eq!(s.partition(), None);
        s.stick_to(4, 1000);
        assert!(!s.appended(600, 1000, false), "600 < batch.size");
        assert!(!s.switch_pending());
        assert!(
            !s.appended(600, 1000, true),
            "1200 bytes, but a batch is open"
        );
        assert!(s.switch_pending());
        assert_eq!(s.partition(), Some(4));
        assert!(s.appended(0, 1000, false), "the batch closed: switch");
        assert_eq!(s.partition(), None);
        s.stick_to(5, 1000);
        assert_eq!(s.produced(1000), 0);
        assert!(!s.appended(1000, 1000, true));
        assert!(
            s.appended(1000, 1000, true),
            "twice batch.size: switch, batch open or not"
        );
        assert_eq!(s.partition(), None);
        // batch.size 0 counts as 1 (Java: `KafkaProducer` passes `Math.max(1, batch.size)` to
        // the accumulator and its partitioners): a fresh stint is not due yet, its first
        // record is past twice that.
        s.stick_to(6, 0);
        assert!(!s.switch_pending());
        assert!(s.appended(100, 0, true), "100 bytes: past twice 1 byte");
    }

    /// Java's `NodeLatencyStats` against `partitioner.availability.timeout.ms`: a node that
    /// left batches waiting and took none for longer than the timeout is unavailable, until it
    /// takes some again or has nothing waiting.
    #[test]
    fn a_stalled_node_is_unavailable_after_the_timeout() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let timeout = ms(100);
        let mut n = NodeLatency::default();
        assert!(!n.unavailable(1, t0 + ms(500), timeout), "never seen");
        n.serviced(1, t0, true, false);
        n.serviced(1, t0 + ms(10), false, true);
        assert!(
            !n.unavailable(1, t0 + ms(100), timeout),
            "within the timeout"
        );
        assert!(
            n.unavailable(1, t0 + ms(101), timeout),
            "stalled past the timeout"
        );
        assert!(
            !n.unavailable(2, t0 + ms(101), timeout),
            "other nodes unaffected"
        );
        n.serviced(1, t0 + ms(150), true, false);
        assert!(
            !n.unavailable(1, t0 + ms(300), timeout),
            "it took batches again"
        );
        n.serviced(1, t0 + ms(310), false, true);
        assert!(n.unavailable(1, t0 + ms(251) + timeout, timeout));
        n.serviced(1, t0 + ms(400), false, false);
        assert!(
            !n.unavailable(1, t0 + ms(500), timeout),
            "nothing waits for it"
        );
        // A node first seen stalled counts from then (Java: `new NodeLatencyStats(nowMs)`).
        n.serviced(3, t0 + ms(200), false, true);
        assert!(!n.unavailable(3, t0 + ms(300), timeout));
        assert!(n.unavailable(3, t0 + ms(301), timeout));
    }
}
