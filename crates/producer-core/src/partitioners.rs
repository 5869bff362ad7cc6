//! Pluggable partitioners: the [`Partitioner`] trait an application implements to choose the
//! partition of records sent without one, the view of a topic's partitions it is given
//! ([`PartitionView`]), what it answers ([`Route`], [`PartitionerError`]), and the built-in
//! partitioners, which implement the same trait: [`DefaultPartitioner`] (murmur2 of the key as
//! Java, the adaptive sticky partition for null keys), [`StickyPartitioner`] (Java's
//! `partitioner.ignore.keys=true`), [`RoundRobinPartitioner`] (Java's `RoundRobinPartitioner`)
//! and [`Murmur2Partitioner`] (librdkafka's `murmur2`).
//!
//! # How the producer uses one
//! Without a partitioner of the application's ([`crate::Producer::set_partitioner`] /
//! [`crate::Producer::with_partitioner`]) the producer routes as [`DefaultPartitioner`] does
//! (or [`StickyPartitioner`] with `partitioner.ignore.keys`), inline, without a call through
//! the trait. With one, every record sent without an explicit partition is routed by one call
//! of [`Partitioner::partition`] when its topic's partitions are known: at `send`, or, for a
//! record held for its topic's metadata, when the metadata arrives. A record with an explicit
//! partition never reaches the partitioner.
//!
//! # The sticky partition
//! The adaptive sticky partitioner (KIP-794) moves to a new partition at a batch boundary,
//! after `batch.size` bytes, weighing partitions against their queue depths: that is tied to
//! the producer's batches, which a partitioner does not see. A partitioner that wants it for a
//! record answers [`Route::Sticky`], and the producer places the record on the topic's sticky
//! partition (the same one records without a key use, with the same rules).
//!
//! # Errors and panics
//! An `Err` from the partitioner, or a partition not below the topic's count
//! ([`PartitionerError::OutOfRange`]), fails that record alone: its report is
//! [`crate::ProduceError::Partitioner`] with the record handed back. A partitioner that
//! panics is caught around that one call ([`std::panic::catch_unwind`]): the record fails with
//! [`PartitionerError::Panicked`], [`crate::Event::CallbackPanicked`] names it
//! ([`crate::Callback::Partitioner`]), and the producer goes on using the partitioner for
//! later records. A partitioner must not rely on state a panic may have left half-changed.

use std::collections::HashMap;

use crate::partitioner::partition_for_key;

/// Chooses the partition of a record sent without an explicit partition. Implement it to
/// route records by their contents (a tenant id in the value, a hash of part of the key); set
/// it with [`crate::Producer::set_partitioner`] (or a driver builder's `partitioner`).
///
/// It runs on the producer's thread or task, once per record, inside the core: keep it short
/// and non-blocking (no I/O, no locks held for long). `Send` because the producer moves to
/// its driver's thread; `Sync` so that the producer stays `Sync` (shared read-only, e.g. in
/// an `RwLock`), which costs a partitioner nothing: it changes its state through `&mut self`.
pub trait Partitioner: Send + Sync {
    /// The route of one record of `topic` with `key` and `value` (each `None` when null).
    /// `partitions` is the topic's partition count and their availability at this moment
    /// (a leader known and, with `partitioner.availability.timeout.ms`, not stalled).
    ///
    /// Answer [`Route::Partition`] with a partition below `partitions.count()` (an index at or
    /// above it fails the record with [`PartitionerError::OutOfRange`]), [`Route::Sticky`] for
    /// the producer's adaptive sticky partition, or an error ([`PartitionerError::Failed`]) to
    /// fail this record alone.
    fn partition(
        &mut self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError>;
}

/// Where a [`Partitioner`] sends a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Route {
    /// This partition (below [`PartitionView::count`]).
    Partition(u32),
    /// The topic's adaptive sticky partition, as for a record without a key: the producer
    /// keeps it for about `batch.size` bytes and moves on at a batch boundary (see the module
    /// documentation).
    Sticky,
}

/// Why a [`Partitioner`] did not route a record: the record fails with
/// [`crate::ProduceError::Partitioner`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionerError {
    /// The partitioner chose a partition the topic does not have.
    #[error("the partitioner chose partition {partition}, but the topic has {count}")]
    OutOfRange {
        /// The partition it chose.
        partition: u32,
        /// The topic's partition count.
        count: u32,
    },
    /// The partitioner refused the record, with its reason.
    #[error("the partitioner failed: {0}")]
    Failed(String),
    /// The partitioner panicked while routing the record, with the panic's message.
    #[error("the partitioner panicked: {0}")]
    Panicked(String),
}

/// A topic's partitions as a [`Partitioner`] sees them: how many there are, and which are
/// available (a leader known and, with `partitioner.availability.timeout.ms`, a leader that
/// has not left batches waiting for longer than that: the adaptive partitioner's rule).
/// Borrowed for one call: asking costs nothing until a method is called.
pub struct PartitionView<'a> {
    count: u32,
    leaders: Leaders<'a>,
}

impl std::fmt::Debug for PartitionView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionView")
            .field("count", &self.count)
            .field("available", &self.available().collect::<Vec<_>>())
            .finish()
    }
}

/// Where a view reads leaders from.
enum Leaders<'a> {
    /// Every partition available (a view made by [`PartitionView::all_available`]).
    All,
    /// Leader ids given (-1: none).
    Given(&'a [i32]),
    /// The producer's partitions.
    Live(&'a dyn LeaderSource),
}

/// The producer's side of a [`PartitionView`]: its partitions' leaders and the adaptive
/// partitioner's view of each leader (implemented in `producer/partitioning.rs`).
pub(crate) trait LeaderSource {
    /// The leader of partition `p` (below the count), -1 when none is known.
    fn leader(&self, p: u32) -> i32;
    /// Whether partitions led by `node` are left out for now.
    fn node_unavailable(&self, node: i32) -> bool;
}

impl<'a> PartitionView<'a> {
    /// A view of `count` partitions, every one available: for an application's tests of its
    /// partitioner.
    #[must_use]
    pub fn all_available(count: u32) -> Self {
        PartitionView {
            count,
            leaders: Leaders::All,
        }
    }

    /// A view of one partition per entry of `leaders`, each the leader's node id (-1: none
    /// known, so the partition is unavailable): for an application's tests of its partitioner.
    #[must_use]
    pub fn with_leaders(leaders: &'a [i32]) -> Self {
        PartitionView {
            count: leaders.len() as u32,
            leaders: Leaders::Given(leaders),
        }
    }

    /// The producer's `count` partitions of a topic.
    pub(crate) fn live(count: u32, live: &'a dyn LeaderSource) -> Self {
        PartitionView {
            count,
            leaders: Leaders::Live(live),
        }
    }

    /// How many partitions the topic has (at least 1 when the producer calls a partitioner).
    #[must_use]
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The node id of the leader of partition `p`, `None` when none is known or `p` is not
    /// below [`PartitionView::count`].
    #[must_use]
    pub fn leader(&self, p: u32) -> Option<i32> {
        if p >= self.count {
            return None;
        }
        let leader = match &self.leaders {
            Leaders::All => 0,
            Leaders::Given(l) => l[p as usize],
            Leaders::Live(s) => s.leader(p),
        };
        (leader >= 0).then_some(leader)
    }

    /// Whether partition `p` is available: below the count, with a leader known and, with
    /// `partitioner.availability.timeout.ms` set (and adaptive partitioning on), a leader that
    /// has not left batches waiting for longer than that.
    #[must_use]
    pub fn is_available(&self, p: u32) -> bool {
        match (&self.leaders, self.leader(p)) {
            (_, None) => false,
            (Leaders::Live(s), Some(node)) => !s.node_unavailable(node),
            (_, Some(_)) => true,
        }
    }

    /// The available partitions, in order (see [`PartitionView::is_available`]). Walks every
    /// partition: O(count).
    pub fn available(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.count).filter(|&p| self.is_available(p))
    }
}

/// The producer's own rule, as a [`Partitioner`]: a record with a key goes to
/// `(murmur2(key) & 0x7fffffff) % count` (bit for bit as the Java client, so records with one
/// key land where Java's producer puts them), a record without one to the adaptive sticky
/// partition. Setting it changes nothing but adds a call per record; it is here to delegate
/// to (a partitioner that routes some topics itself and the rest as usual).
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultPartitioner;

impl Partitioner for DefaultPartitioner {
    fn partition(
        &mut self,
        _topic: &str,
        key: Option<&[u8]>,
        _value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        Ok(match key {
            Some(key) if partitions.count() > 0 => {
                Route::Partition(partition_for_key(key, partitions.count() as i32) as u32)
            }
            _ => Route::Sticky,
        })
    }
}

/// Every record to the adaptive sticky partition, keys ignored: Java's
/// `partitioner.ignore.keys=true` (also [`crate::ConfigBuilder::partitioner_ignore_keys`],
/// which does the same without a partitioner).
#[derive(Debug, Clone, Copy, Default)]
pub struct StickyPartitioner;

impl Partitioner for StickyPartitioner {
    fn partition(
        &mut self,
        _topic: &str,
        _key: Option<&[u8]>,
        _value: Option<&[u8]>,
        _partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        Ok(Route::Sticky)
    }
}

/// Records spread one by one over a topic's partitions, keys ignored: Java's
/// `RoundRobinPartitioner`. A counter per topic (from 0) picks the next of the available
/// partitions ([`PartitionView::is_available`]), or of all partitions when none is available.
/// Keeps one counter per topic it has routed (a name and a `u32`), for its whole life.
#[derive(Debug, Clone, Default)]
pub struct RoundRobinPartitioner {
    counters: HashMap<String, u32>,
}

impl RoundRobinPartitioner {
    /// A round-robin partitioner, every topic's counter at 0.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The next value of `topic`'s counter (Java: `nextValue`).
    fn next_value(&mut self, topic: &str) -> u32 {
        let counter = match self.counters.get_mut(topic) {
            Some(c) => c,
            None => self.counters.entry(topic.to_owned()).or_insert(0),
        };
        let value = *counter;
        *counter = counter.wrapping_add(1);
        value
    }
}

impl Partitioner for RoundRobinPartitioner {
    fn partition(
        &mut self,
        topic: &str,
        _key: Option<&[u8]>,
        _value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        let next = self.next_value(topic) & 0x7fff_ffff;
        let available = partitions.available().count() as u32;
        if available == 0 {
            return Ok(match partitions.count() {
                0 => Route::Sticky,
                n => Route::Partition(next % n),
            });
        }
        let k = (next % available) as usize;
        Ok(partitions
            .available()
            .nth(k)
            .map_or(Route::Sticky, Route::Partition))
    }
}

/// Every record by murmur2 of its key, a record without a key as if its key were empty (so
/// all of them to one partition): librdkafka's `partitioner=murmur2`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Murmur2Partitioner;

impl Partitioner for Murmur2Partitioner {
    fn partition(
        &mut self,
        _topic: &str,
        key: Option<&[u8]>,
        _value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        if partitions.count() == 0 {
            return Ok(Route::Sticky);
        }
        let key = key.unwrap_or_default();
        Ok(Route::Partition(
            partition_for_key(key, partitions.count() as i32) as u32,
        ))
    }
}

/// The application's partitioner as the producer keeps it (`Debug` without the partitioner's).
pub(crate) struct Custom(pub(crate) Box<dyn Partitioner>);

impl std::fmt::Debug for Custom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Partitioner(..)")
    }
}

impl Custom {
    /// Routes one record, a panic caught around the call and an index out of range checked.
    pub(crate) fn route(
        &mut self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        let p = &mut self.0;
        let routed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            p.partition(topic, key, value, partitions)
        }));
        match routed {
            Ok(Ok(Route::Partition(partition))) if partition >= partitions.count() => {
                Err(PartitionerError::OutOfRange {
                    partition,
                    count: partitions.count(),
                })
            }
            Ok(r) => r,
            Err(payload) => Err(PartitionerError::Panicked(panic_text(&*payload))),
        }
    }
}

/// The text of a panic's payload (a `&str` or a `String`), or a placeholder.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a payload that is not text".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(p: &mut dyn Partitioner, key: Option<&[u8]>, view: &PartitionView<'_>) -> Route {
        p.partition("t", key, Some(b"v"), view).unwrap()
    }

    /// The default partitioner: Java's murmur2 values for keys (the vectors of
    /// `partitioner.rs`, 10 partitions), sticky for null keys.
    #[test]
    fn default_hashes_keys_as_java_and_sticks_null_keys() {
        let view = PartitionView::all_available(10);
        let mut d = DefaultPartitioner;
        for (key, part) in [("kafka", 0), ("234", 6), ("4", 3), ("", 1)] {
            assert_eq!(
                route(&mut d, Some(key.as_bytes()), &view),
                Route::Partition(part),
                "{key:?}"
            );
        }
        assert_eq!(route(&mut d, None, &view), Route::Sticky);
    }

    /// `partitioner.ignore.keys`: keyed or not, the sticky partition.
    #[test]
    fn sticky_ignores_keys() {
        let view = PartitionView::all_available(10);
        let mut s = StickyPartitioner;
        assert_eq!(route(&mut s, Some(b"kafka"), &view), Route::Sticky);
        assert_eq!(route(&mut s, None, &view), Route::Sticky);
    }

    /// librdkafka's murmur2: keys as Java, a null key as the empty key (partition 1 of 10).
    #[test]
    fn murmur2_hashes_a_null_key_as_empty() {
        let view = PartitionView::all_available(10);
        let mut m = Murmur2Partitioner;
        assert_eq!(route(&mut m, Some(b"234"), &view), Route::Partition(6));
        assert_eq!(route(&mut m, None, &view), Route::Partition(1));
    }

    /// Java's `RoundRobinPartitioner`: a counter per topic, over the available partitions
    /// only (here 0, 2 and 3 of 4: partition 1 has no leader), keys ignored.
    #[test]
    fn round_robin_cycles_over_the_available_partitions_per_topic() {
        let leaders = [1, -1, 2, 3];
        let view = PartitionView::with_leaders(&leaders);
        assert_eq!(view.available().collect::<Vec<_>>(), [0, 2, 3]);
        let mut rr = RoundRobinPartitioner::new();
        let got: Vec<Route> = (0..7)
            .map(|i| route(&mut rr, Some(&[i as u8]), &view))
            .collect();
        let p = Route::Partition;
        assert_eq!(got, [p(0), p(2), p(3), p(0), p(2), p(3), p(0)]);
        // Another topic has its own counter, from 0.
        assert_eq!(rr.partition("u", None, None, &view).unwrap(), p(0));
        assert_eq!(route(&mut rr, None, &view), p(2), "t's counter went on");
        // No partition available: all of them, in turn.
        let none = [-1, -1];
        let view = PartitionView::with_leaders(&none);
        let got: Vec<Route> = (0..3)
            .map(|_| rr.partition("v", None, None, &view).unwrap())
            .collect();
        assert_eq!(got, [p(0), p(1), p(0)]);
    }

    /// A view's leaders and availability.
    #[test]
    fn a_view_tells_leaders_and_availability() {
        let leaders = [4, -1];
        let v = PartitionView::with_leaders(&leaders);
        assert_eq!(v.count(), 2);
        assert_eq!(
            (v.leader(0), v.leader(1), v.leader(2)),
            (Some(4), None, None)
        );
        assert!(v.is_available(0) && !v.is_available(1) && !v.is_available(2));
        let all = PartitionView::all_available(3);
        assert_eq!(all.available().count(), 3);
        assert!(!all.is_available(3));
    }

    struct Fixed(u32);

    impl Partitioner for Fixed {
        fn partition(
            &mut self,
            _: &str,
            _: Option<&[u8]>,
            _: Option<&[u8]>,
            _: &PartitionView<'_>,
        ) -> Result<Route, PartitionerError> {
            Ok(Route::Partition(self.0))
        }
    }

    /// The producer's wrapper: an index out of range is a typed error, a panic too, and the
    /// partitioner is used again after it.
    #[test]
    fn out_of_range_and_panics_are_typed_errors() {
        let view = PartitionView::all_available(3);
        let mut c = Custom(Box::new(Fixed(3)));
        assert_eq!(
            c.route("t", None, None, &view),
            Err(PartitionerError::OutOfRange {
                partition: 3,
                count: 3
            })
        );
        let mut c = Custom(Box::new(Fixed(2)));
        assert_eq!(c.route("t", None, None, &view), Ok(Route::Partition(2)));

        struct PanicsOnEmpty;
        impl Partitioner for PanicsOnEmpty {
            fn partition(
                &mut self,
                _: &str,
                _: Option<&[u8]>,
                value: Option<&[u8]>,
                _: &PartitionView<'_>,
            ) -> Result<Route, PartitionerError> {
                let v = value.unwrap_or_default();
                assert!(!v.is_empty(), "empty value");
                Ok(Route::Partition(u32::from(v[0]) % 3))
            }
        }
        let mut c = Custom(Box::new(PanicsOnEmpty));
        match c.route("t", None, Some(b""), &view) {
            Err(PartitionerError::Panicked(m)) => assert!(m.contains("empty value"), "{m}"),
            other => panic!("expected a panic error, got {other:?}"),
        }
        assert_eq!(
            c.route("t", None, Some(b"\x05"), &view),
            Ok(Route::Partition(2))
        );
    }
}
