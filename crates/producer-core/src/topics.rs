//! The topics in use: each with its partitions, the records held until its metadata arrives,
//! its sticky partition for null keys, and the index from name to topic number.

use std::collections::VecDeque;
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
    /// topic by it. A different id later means the topic was deleted and created again.
    pub(crate) topic_id: [u8; 16],
    /// The id before the last change (all zeros if none): answers to requests sent before
    /// the change still name it.
    pub(crate) replaced_topic_id: [u8; 16],
    /// Records waiting for metadata (bounded by the buffer limits).
    pub(crate) holding: VecDeque<Held<T>>,
    pub(crate) holding_timer: Option<Instant>,
    /// The partition records without a key stick to, and what went to it.
    pub(crate) sticky: Sticky,
    /// A permanent error metadata reported for the topic (e.g. authorization).
    pub(crate) error: Option<ErrorCode>,
    /// `flush` was called while records were held: close their batches once routed.
    pub(crate) flush_held: bool,
}

impl<T> TopicState<T> {
    fn new(name: Arc<str>) -> Self {
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
        }
    }

    /// Whether `id` (from a Produce v13 answer) names this topic: its id now, or the one
    /// before the topic was created again.
    pub(crate) fn has_topic_id(&self, id: [u8; 16]) -> bool {
        id != [0; 16] && (self.topic_id == id || self.replaced_topic_id == id)
    }

    /// Grows the partition list to `count` (metadata said so; partitions are never removed).
    pub(crate) fn grow_partitions(&mut self, count: usize) {
        while self.partitions.len() < count {
            self.partitions.push(PartitionQueue::new());
        }
    }
}

/// Every topic in use, numbered in the order they were first sent to.
#[derive(Debug)]
pub(crate) struct Topics<T> {
    list: Vec<TopicState<T>>,
    index: TopicIndex,
    /// The topic of the last lookup and its number: callers sending many records to one topic
    /// share one `Arc<str>`, so a pointer comparison usually saves hashing the name.
    last: Option<(Arc<str>, u32)>,
}

impl<T> Default for Topics<T> {
    fn default() -> Self {
        Topics {
            list: Vec::new(),
            index: TopicIndex::default(),
            last: None,
        }
    }
}

impl<T> Topics<T> {
    /// The number of a topic, registering it the first time; the flag says it is new (its
    /// metadata is needed).
    #[inline]
    pub(crate) fn id_of(&mut self, name: &Arc<str>) -> (u32, bool) {
        if let Some((last, id)) = &self.last {
            if Arc::ptr_eq(last, name) {
                return (*id, false);
            }
        }
        let (id, new) = match self.index.get(name) {
            Some(&id) => (id, false),
            None => {
                let id = self.list.len() as u32;
                self.list.push(TopicState::new(name.clone()));
                self.index.insert(name.clone(), id);
                (id, true)
            }
        };
        self.last = Some((name.clone(), id));
        (id, new)
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

    /// How many topics are in use.
    pub(crate) fn len(&self) -> u32 {
        self.list.len() as u32
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &TopicState<T>> {
        self.list.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut TopicState<T>> {
        self.list.iter_mut()
    }

    #[inline]
    pub(crate) fn get(&self, topic: u32) -> &TopicState<T> {
        &self.list[topic as usize]
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
    fn topics_are_found_by_content_and_numbered_once() {
        let mut topics = Topics::<()>::default();
        assert_eq!(topics.id_of(&Arc::from("orders")), (0, true));
        assert_eq!(topics.id_of(&Arc::from("clicks")), (1, true));
        // Another Arc with the same name (no pointer match): hashed, found.
        assert_eq!(topics.id_of(&Arc::from("orders")), (0, false));
        assert_eq!(topics.lookup("clicks"), Some(1));
        assert_eq!(topics.lookup("other"), None);
        assert_eq!(topics.len(), 2);
    }
}
