//! The topics in use: each with its partitions, the records held until its metadata arrives,
//! its sticky partition for null keys, and the index from name to topic number.
//!
//! A topic unused for `metadata.max.idle.ms` (nothing buffered or in flight, nothing sent to
//! it) is forgotten ([`Topics::forget`]): its number is free for the next new topic, and a
//! record sent to it later finds it new. Whoever forgets it first takes its number out of the
//! brokers' partition lists and the timers.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use crate::batch::Unrouted;
use crate::partition::PartitionQueue;
use crate::partitioner::Sticky;
use crate::ErrorCode;

/// A record held because its topic's metadata is not known yet.
#[derive(Debug)]
pub(crate) struct Held<T> {
    pub(crate) pending: Unrouted<T>,
    pub(crate) partition: Option<i32>,
    pub(crate) since: Instant,
}

/// A topic in use.
#[derive(Debug)]
pub(crate) struct TopicState<T> {
    pub(crate) name: Arc<str>,
    pub(crate) partitions: Vec<PartitionQueue<T>>,
    /// Metadata with partitions has arrived.
    pub(crate) known: bool,
    /// The topic id Metadata (v10+) gave, all zeros while none is known: Produce v13 names the
    /// topic by it. A different id later means the topic was deleted and created again. Set
    /// only by [`Topics::set_topic_id`], which keeps ids unique across topics.
    topic_id: [u8; 16],
    /// The id before the last change (all zeros if none): answers to requests sent before
    /// the change still name it.
    replaced_topic_id: [u8; 16],
    /// Records waiting for metadata (bounded by the buffer limits).
    pub(crate) holding: VecDeque<Held<T>>,
    pub(crate) holding_timer: Option<Instant>,
    /// The partition records without a key stick to, and what went to it.
    pub(crate) sticky: Sticky,
    /// A permanent error metadata reported for the topic (e.g. authorization).
    pub(crate) error: Option<ErrorCode>,
    /// `flush` was called while records were held: close their batches once routed.
    pub(crate) flush_held: bool,
    /// [`crate::Producer::request_partitions`] asked for the topic's partitions and waits until
    /// this deadline (`max_block` after the first ask) for its metadata.
    pub(crate) partitions_asked: Option<Instant>,
    /// When a record was last sent to it (`send`): it is idle from here.
    last_used: Instant,
    /// The number is free: the topic was forgotten (an inert entry, skipped by iteration).
    vacant: bool,
    /// How far its batches may grow past `batch_size` at most, learned from a broker that
    /// refused a grown batch as too large (its `max.message.bytes`); `None`: the configured
    /// `batch_grow_max`. Only ever lowered (see [`TopicState::learn_grow_limit`]); forgotten
    /// when the topic is created again.
    grow_limit: Option<usize>,
}

impl<T> TopicState<T> {
    fn new(name: Arc<str>, now: Instant) -> Self {
        TopicState {
            name,
            partitions: Vec::new(),
            known: false,
            topic_id: [0; 16],
            replaced_topic_id: [0; 16],
            holding: VecDeque::new(),
            holding_timer: None,
            sticky: Sticky::default(),
            error: None,
            flush_held: false,
            partitions_asked: None,
            last_used: now,
            vacant: false,
            grow_limit: None,
        }
    }

    /// The most bytes its batches may grow to while their leader's in-flight slots are busy:
    /// `configured` (`batch_grow_max`) unless a broker refused a smaller grown batch.
    #[inline]
    pub(crate) fn grow_limit(&self, configured: usize) -> usize {
        self.grow_limit.map_or(configured, |l| l.min(configured))
    }

    /// A broker refused a batch of `refused` bytes (uncompressed) as too large: later batches
    /// grow to at most half of it, never below `floor` (`batch_size`, where growth is off).
    /// Each refusal at least halves the limit, so it settles within a few answers.
    pub(crate) fn learn_grow_limit(&mut self, refused: usize, floor: usize) {
        let limit = (refused / 2).max(floor);
        self.grow_limit = Some(self.grow_limit.map_or(limit, |l| l.min(limit)));
    }

    /// Whether the topic may be forgotten at `now`: nothing sent to it (nor its partitions
    /// asked for) for `max_idle`, no record held for its metadata, no ask for its partitions
    /// waiting, and every partition empty (no open batch, none queued or in flight).
    pub(crate) fn is_idle(&self, now: Instant, max_idle: std::time::Duration) -> bool {
        !self.vacant
            && self.last_used + max_idle <= now
            && self.holding.is_empty()
            && self.partitions_asked.is_none()
            && self.partitions.iter().all(PartitionQueue::is_empty)
    }

    /// The highest epoch a partition of the topic has used under `producer_id`, if any did.
    pub(crate) fn highest_epoch(&self, producer_id: i64) -> Option<i16> {
        self.partitions
            .iter()
            .filter_map(|p| {
                let (id, epoch) = p.identity();
                (id == producer_id).then_some(epoch)
            })
            .max()
    }

    /// The topic id Metadata gave (all zeros while none is known).
    pub(crate) fn topic_id(&self) -> [u8; 16] {
        self.topic_id
    }

    /// Grows the partition list to `count` (metadata said so; partitions are never removed).
    pub(crate) fn grow_partitions(&mut self, count: usize) {
        while self.partitions.len() < count {
            self.partitions.push(PartitionQueue::new());
        }
    }
}

/// Every topic in use, numbered in the order they were first sent to (a forgotten topic's
/// number goes to a later one).
#[derive(Debug)]
pub(crate) struct Topics<T> {
    list: Vec<TopicState<T>>,
    index: TopicIndex,
    /// The topic of the last lookup and its number: callers sending many records to one topic
    /// share one `Arc<str>`, so a pointer comparison usually saves hashing the name.
    last: Option<(Arc<str>, u32)>,
    /// Numbers of forgotten topics, for the next new ones.
    free: Vec<u32>,
    /// Each topic id Metadata gave (a topic's id now, and the one it replaced) -> the topic's
    /// number: at most two per topic in use, so bounded by [`crate::limits::MAX_TOPICS`]. One
    /// id names one topic (Kafka never gives two names one id; an answer that does is
    /// refused).
    by_id: HashMap<[u8; 16], u32>,
    /// The highest producer epoch a partition of a forgotten topic used, with its producer id:
    /// a new partition (of a topic that may have been written before under this id) starts
    /// above it, so the broker never sees its sequence start over under an epoch it has seen.
    forgotten_epoch: Option<(i64, i16)>,
}

impl<T> Default for Topics<T> {
    fn default() -> Self {
        Topics {
            list: Vec::new(),
            index: TopicIndex::default(),
            last: None,
            free: Vec::new(),
            by_id: HashMap::new(),
            forgotten_epoch: None,
        }
    }
}

impl<T> Topics<T> {
    /// The number of a topic a record is sent to at `now`, registering it the first time; the
    /// flag says it is new (its metadata is needed). The topic is in use from `now`.
    ///
    /// Inlined: a record sent to the same topic as the one before (its name the same `Arc`)
    /// costs a pointer comparison; the look-up by name is out of line.
    #[inline(always)]
    pub(crate) fn id_of(&mut self, name: &Arc<str>, now: Instant) -> (u32, bool) {
        if let Some((last, id)) = &self.last {
            if Arc::ptr_eq(last, name) {
                let id = *id;
                self.list[id as usize].last_used = now;
                return (id, false);
            }
        }
        self.id_by_name(name, now)
    }

    /// [`Topics::id_of`] for a name other than the last one's: the look-up, or the
    /// registration of a new topic.
    #[inline(never)]
    fn id_by_name(&mut self, name: &Arc<str>, now: Instant) -> (u32, bool) {
        let (id, new) = match self.index.get(name) {
            Some(&id) => {
                self.list[id as usize].last_used = now;
                (id, false)
            }
            None => {
                let state = TopicState::new(name.clone(), now);
                let id = match self.free.pop() {
                    Some(id) => {
                        self.list[id as usize] = state;
                        id
                    }
                    None => {
                        self.list.push(state);
                        self.list.len() as u32 - 1
                    }
                };
                self.index.insert(name.clone(), id);
                (id, true)
            }
        };
        self.last = Some((name.clone(), id));
        (id, new)
    }

    /// Forgets topic `topic`, which [`TopicState::is_idle`]: its name no longer finds it, its
    /// number goes to the next new topic, and its partitions' epochs under `producer_id` (the
    /// producer's current id, if any) raise [`Topics::epoch_floor`]. Call it only once no
    /// broker lists its partitions and no timer names it; a record sent to the topic later
    /// registers it anew.
    pub(crate) fn forget(&mut self, topic: u32, producer_id: Option<i64>) {
        let t = &mut self.list[topic as usize];
        debug_assert!(t.holding.is_empty() && t.partitions.iter().all(PartitionQueue::is_empty));
        if let Some(id) = producer_id {
            if let Some(epoch) = t.highest_epoch(id) {
                let floor = match self.forgotten_epoch {
                    Some((fid, f)) if fid == id => f.max(epoch),
                    _ => epoch,
                };
                self.forgotten_epoch = Some((id, floor));
            }
        }
        self.index.remove(&t.name);
        for id in [t.topic_id, t.replaced_topic_id] {
            if self.by_id.get(&id) == Some(&topic) {
                self.by_id.remove(&id);
            }
        }
        if self.last.as_ref().is_some_and(|(_, id)| *id == topic) {
            self.last = None;
        }
        let mut vacant = TopicState::new(Arc::from(""), t.last_used);
        vacant.vacant = true;
        *t = vacant;
        self.free.push(topic);
    }

    /// The highest epoch a partition of a forgotten topic used under `producer_id`, if one
    /// did: new partitions start above it (see [`crate::partition::PartitionQueue::start_above`]).
    pub(crate) fn epoch_floor(&self, producer_id: i64) -> Option<i16> {
        self.forgotten_epoch
            .filter(|&(id, _)| id == producer_id)
            .map(|(_, epoch)| epoch)
    }

    /// Gives topic `topic` the id Metadata (v10+) listed it with; call it for each topic entry
    /// of an answer before its partitions are used. All zeros (no id) and the id it has
    /// changes nothing. A new id replaces the old one, which answers to requests sent before
    /// still name; `Ok(true)` then says the topic had an id before (it was deleted and
    /// created again). `Err(other)`: the id is another topic's (now or before it was created
    /// again), which Kafka never does; nothing changes.
    pub(crate) fn set_topic_id(&mut self, topic: u32, id: [u8; 16]) -> Result<bool, u32> {
        let t = &self.list[topic as usize];
        if id == [0; 16] || t.topic_id == id {
            return Ok(false);
        }
        match self.by_id.get(&id) {
            Some(&other) if other != topic => return Err(other),
            _ => {}
        }
        let t = &mut self.list[topic as usize];
        let dropped = std::mem::replace(&mut t.replaced_topic_id, t.topic_id);
        t.topic_id = id;
        let recreated = t.replaced_topic_id != [0; 16];
        if recreated {
            // A new topic of the same name: its `max.message.bytes` is learned afresh.
            t.grow_limit = None;
        }
        if dropped != [0; 16] && dropped != id && self.by_id.get(&dropped) == Some(&topic) {
            self.by_id.remove(&dropped);
        }
        self.by_id.insert(id, topic);
        Ok(recreated)
    }

    /// The topic a Produce v13 answer names by `id`: the id it has now, or the one before it
    /// was created again.
    pub(crate) fn by_topic_id(&self, id: [u8; 16]) -> Option<u32> {
        if id == [0; 16] {
            return None;
        }
        self.by_id.get(&id).copied()
    }

    /// The numbers of the topics in use (forgotten ones skipped).
    pub(crate) fn numbers(&self) -> impl Iterator<Item = u32> + '_ {
        self.list
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.vacant)
            .map(|(i, _)| i as u32)
    }

    /// Whether `name` is a topic in use already (cheaply when it is the one asked for last):
    /// `send` checks a topic's name only the first time it sees it.
    #[inline]
    pub(crate) fn known(&self, name: &Arc<str>) -> bool {
        matches!(&self.last, Some((last, _)) if Arc::ptr_eq(last, name))
            || self.index.contains_key(name)
    }

    /// The number of a topic already in use, by name (for a metadata answer).
    pub(crate) fn lookup(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    /// How many topic numbers there are, forgotten ones included: topic numbers run below
    /// it. (A forgotten topic's entry holds nothing: no partitions, no records.)
    pub(crate) fn len(&self) -> u32 {
        self.list.len() as u32
    }

    /// How many topics are in use (forgotten ones not counted).
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.list.len() - self.free.len()
    }

    /// The topics in use (forgotten ones skipped).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &TopicState<T>> {
        self.list.iter().filter(|t| !t.vacant)
    }

    /// The topics in use (forgotten ones skipped).
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut TopicState<T>> {
        self.list.iter_mut().filter(|t| !t.vacant)
    }

    #[inline]
    pub(crate) fn get(&self, topic: u32) -> &TopicState<T> {
        &self.list[topic as usize]
    }

    /// Topic number `topic`, `None` when there is no such number.
    pub(crate) fn get_checked(&self, topic: u32) -> Option<&TopicState<T>> {
        self.list.get(topic as usize)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, topic: u32) -> &mut TopicState<T> {
        &mut self.list[topic as usize]
    }

    #[inline]
    pub(crate) fn partition(&self, topic: u32, partition: u32) -> &PartitionQueue<T> {
        &self.list[topic as usize].partitions[partition as usize]
    }

    #[inline]
    pub(crate) fn partition_mut(&mut self, topic: u32, partition: u32) -> &mut PartitionQueue<T> {
        &mut self.list[topic as usize].partitions[partition as usize]
    }

    /// The topic's name, shared.
    pub(crate) fn name(&self, topic: u32) -> Arc<str> {
        self.list[topic as usize].name.clone()
    }

    /// How many partitions the topic has (0 before its metadata).
    #[inline]
    pub(crate) fn partition_count(&self, topic: u32) -> u32 {
        self.list[topic as usize].partitions.len() as u32
    }
}

/// Topic name -> topic number, hashed with FNV-1a: names come from the application (never from
/// the network: metadata responses only look names up), are short, and are hashed on every send
/// that changes topic, where SipHash costs several times more.
type TopicIndex = std::collections::HashMap<Arc<str>, u32, std::hash::BuildHasherDefault<Fnv1a>>;

/// The 64-bit FNV-1a hash.
#[derive(Debug, Clone, Copy)]
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        // From the FNV reference (draft-eastlake-fnv): "" and "a" and "foobar".
        for (input, want) in [
            (&b""[..], 0xcbf2_9ce4_8422_2325u64),
            (b"a", 0xaf63_dc4c_8601_ec8c),
            (b"foobar", 0x8594_4171_f739_67e8),
        ] {
            let mut h = Fnv1a::default();
            h.write(input);
            assert_eq!(h.finish(), want);
        }
    }

    #[test]
    fn one_topic_id_names_one_topic() {
        let now = Instant::now();
        let mut topics = Topics::<()>::default();
        let (a, _) = topics.id_of(&Arc::from("a"), now);
        let (b, _) = topics.id_of(&Arc::from("b"), now);
        let (x, y, z) = ([1; 16], [2; 16], [3; 16]);
        assert_eq!(
            topics.set_topic_id(a, [0; 16]),
            Ok(false),
            "no id: nothing changes"
        );
        assert_eq!(
            topics.set_topic_id(a, x),
            Ok(false),
            "a first id: not created again"
        );
        assert_eq!(topics.set_topic_id(a, x), Ok(false));
        assert_eq!(topics.set_topic_id(b, x), Err(a), "a's id refused for b");
        assert_eq!(topics.get(b).topic_id(), [0; 16], "b unchanged");
        assert_eq!(topics.by_topic_id(x), Some(a));
        // a created again: its old id still names it (answers to earlier requests).
        assert_eq!(topics.set_topic_id(a, y), Ok(true));
        assert_eq!(topics.by_topic_id(x), Some(a));
        assert_eq!(topics.by_topic_id(y), Some(a));
        assert_eq!(
            topics.set_topic_id(b, x),
            Err(a),
            "a's replaced id refused for b"
        );
        // Created again once more: the oldest id names nothing now, and may be b's.
        assert_eq!(topics.set_topic_id(a, z), Ok(true));
        assert_eq!(topics.by_topic_id(x), None);
        assert_eq!(topics.set_topic_id(b, x), Ok(false));
        assert_eq!(topics.by_topic_id(x), Some(b));
        assert_eq!(topics.by_topic_id([0; 16]), None);
        // A forgotten topic's ids name nothing.
        topics.forget(b, None);
        assert_eq!(topics.by_topic_id(x), None);
    }

    #[test]
    fn topics_are_found_by_content_and_numbered_once() {
        let now = Instant::now();
        let mut topics = Topics::<()>::default();
        assert_eq!(topics.id_of(&Arc::from("orders"), now), (0, true));
        assert_eq!(topics.id_of(&Arc::from("clicks"), now), (1, true));
        // Another Arc with the same name (no pointer match): hashed, found.
        assert_eq!(topics.id_of(&Arc::from("orders"), now), (0, false));
        assert_eq!(topics.lookup("clicks"), Some(1));
        assert_eq!(topics.lookup("other"), None);
        assert_eq!(topics.len(), 2);
    }

    #[test]
    fn a_forgotten_topic_is_found_no_more_and_its_number_goes_to_the_next_new_one() {
        let t0 = Instant::now();
        let idle = std::time::Duration::from_secs(300);
        let mut topics = Topics::<()>::default();
        let orders: Arc<str> = Arc::from("orders");
        assert_eq!(topics.id_of(&orders, t0), (0, true));
        assert_eq!(topics.id_of(&Arc::from("clicks"), t0), (1, true));
        topics.get_mut(0).grow_partitions(3);
        // Used again at 100 s: idle from there.
        assert!(
            !topics
                .id_of(&orders, t0 + std::time::Duration::from_secs(100))
                .1
        );
        assert!(!topics.get(0).is_idle(t0 + idle, idle));
        assert!(topics.get(1).is_idle(t0 + idle, idle));
        let later = t0 + std::time::Duration::from_secs(400);
        assert!(topics.get(0).is_idle(later, idle));
        topics.forget(0, None);
        assert_eq!(topics.lookup("orders"), None);
        assert_eq!(topics.in_use(), 1);
        assert_eq!(topics.iter().count(), 1);
        assert_eq!(topics.numbers().collect::<Vec<_>>(), vec![1]);
        assert_eq!(topics.partition_count(0), 0, "the entry holds nothing");
        // The same Arc (the last lookup's pointer) finds it new, under the freed number.
        assert_eq!(topics.id_of(&orders, later), (0, true));
        assert_eq!(topics.partition_count(0), 0);
        assert_eq!(topics.id_of(&Arc::from("third"), later), (2, true));
        assert_eq!(topics.len(), 3);
    }

    #[test]
    fn a_topic_with_records_is_not_idle() {
        let t0 = Instant::now();
        let idle = std::time::Duration::from_secs(1);
        let mut topics = Topics::<()>::default();
        topics.id_of(&Arc::from("t"), t0);
        topics.get_mut(0).holding.push_back(Held {
            pending: Unrouted {
                opaque: (),
                key: None,
                value: None,
                headers: Vec::new(),
                timestamp: None,
                explicit_partition: false,
                size: 0,
            },
            partition: None,
            since: t0,
        });
        assert!(!topics.get(0).is_idle(t0 + idle * 10, idle));
        topics.get_mut(0).holding.clear();
        assert!(topics.get(0).is_idle(t0 + idle * 10, idle));
    }
}
