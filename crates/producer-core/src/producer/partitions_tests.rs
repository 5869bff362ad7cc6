//! The application's partitioner inside the producer: what it is given, where its records go,
//! its errors and panics as failure reports of that record alone; and the partitions asked
//! for (`request_partitions`) answered by events.

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use crate::config::{Config, ConfigBuilder};
    use crate::partitioners::{
        PartitionView, Partitioner, PartitionerError, RoundRobinPartitioner, Route,
        StickyPartitioner,
    };
    use crate::types::{Callback, Event, Output, ProduceError, Record};

    use super::super::Producer;

    const TOPIC: &str = "t";

    fn config() -> ConfigBuilder {
        Config::builder([("k", 9092)])
            .batch_size(1000)
            .linger(Duration::from_secs(3600))
            .seed(7)
    }

    /// Marks `topic` known with one partition per entry of `leaders` (-1: no leader).
    fn know(p: &mut Producer<u32>, topic: &str, leaders: &[i32], now: Instant) {
        let (id, _) = p.topics.id_of(&Arc::from(topic), now);
        let t = p.topics.get_mut(id);
        t.grow_partitions(leaders.len());
        t.known = true;
        for (pq, &leader) in t.partitions.iter_mut().zip(leaders) {
            pq.set_leader(leader, 0);
        }
    }

    /// Records queued in each partition of topic 0 (after a flush closes the open batches:
    /// nothing is ever sent, so every batch is still queued).
    fn counts(p: &mut Producer<u32>) -> Vec<u32> {
        let now = p.now;
        p.flush(now);
        p.topics
            .get(0)
            .partitions
            .iter()
            .map(|pq| {
                (0..pq.queued_batches() as usize)
                    .map(|i| pq.batch(i).record_count() as u32)
                    .sum::<u32>()
            })
            .collect()
    }

    /// What a partitioner was called with.
    type Calls = Arc<Mutex<Vec<(String, Option<Vec<u8>>, Option<Vec<u8>>, u32, Vec<u32>)>>>;

    /// Partition = the value's first byte modulo the count; an empty value panics, a value
    /// starting with 0xff is refused, 0xfe answers a partition out of range, 0xfd the sticky
    /// partition. Records every call.
    struct ByFirstByte(Calls);

    impl Partitioner for ByFirstByte {
        fn partition(
            &mut self,
            topic: &str,
            key: Option<&[u8]>,
            value: Option<&[u8]>,
            partitions: &PartitionView<'_>,
        ) -> Result<Route, PartitionerError> {
            self.0.lock().unwrap().push((
                topic.to_owned(),
                key.map(<[u8]>::to_vec),
                value.map(<[u8]>::to_vec),
                partitions.count(),
                partitions.available().collect(),
            ));
            let first = value.unwrap_or_default()[0];
            match first {
                0xff => Err(PartitionerError::Failed("refused".into())),
                0xfe => Ok(Route::Partition(partitions.count())),
                0xfd => Ok(Route::Sticky),
                b => Ok(Route::Partition(u32::from(b) % partitions.count())),
            }
        }
    }

    /// Every failure report out of the producer, with its opaque value.
    fn failures(p: &mut Producer<u32>) -> (Vec<(u32, ProduceError, Record)>, Vec<Event>) {
        let mut failed = Vec::new();
        let mut events = Vec::new();
        while let Some(o) = p.outputs.pop_front() {
            match o {
                Output::Delivery(d) => {
                    let f = d.result.unwrap_err();
                    failed.push((d.opaque, f.error, f.record));
                }
                Output::Event(e) => events.push(e),
                _ => {}
            }
        }
        (failed, events)
    }

    /// The partitioner gets the topic, key, value, the count and the available partitions
    /// (partition 2 has no leader); its choices are where the records go; a record with an
    /// explicit partition never reaches it.
    #[test]
    fn a_custom_partitioner_routes_with_what_it_is_given() {
        let calls = Calls::default();
        let t0 = Instant::now();
        let mut p = Producer::with_partitioner(
            config().build().unwrap(),
            t0,
            Box::new(ByFirstByte(calls.clone())),
        );
        know(&mut p, TOPIC, &[1, 2, -1, 1], t0);
        for (i, b) in [0u8, 1, 5, 7, 9].into_iter().enumerate() {
            let r = Record::new(TOPIC, vec![b, 0]).with_key(vec![i as u8]);
            p.send(t0, r, i as u32).unwrap();
        }
        p.send(t0, Record::new(TOPIC, vec![3]).with_partition(0), 9)
            .unwrap();
        assert_eq!(
            counts(&mut p),
            [1 + 1, 3, 0, 1],
            "0 1 5 7 9 mod 4, and one explicit"
        );
        let calls = calls.lock().unwrap();
        assert_eq!(calls.len(), 5, "the explicit partition is not asked");
        assert_eq!(
            calls[2],
            (
                TOPIC.to_owned(),
                Some(vec![2]),
                Some(vec![5, 0]),
                4,
                vec![0, 1, 3]
            )
        );
    }

    /// An error, an index out of range and a panic each fail that record alone, handed back
    /// with a typed error (the panic also named by an event); the next record is routed by the
    /// same partitioner.
    #[test]
    fn errors_and_panics_fail_that_record_and_the_producer_goes_on() {
        let calls = Calls::default();
        let t0 = Instant::now();
        let mut p = Producer::with_partitioner(
            config().build().unwrap(),
            t0,
            Box::new(ByFirstByte(calls.clone())),
        );
        know(&mut p, TOPIC, &[1, 1, 1], t0);
        let _ = failures(&mut p);
        p.send(t0, Record::new(TOPIC, vec![0xff]), 1).unwrap();
        p.send(t0, Record::new(TOPIC, vec![0xfe]), 2).unwrap();
        p.send(t0, Record::new(TOPIC, Vec::<u8>::new()).with_key("k"), 3)
            .unwrap();
        p.send(t0, Record::new(TOPIC, vec![2]), 4).unwrap();
        let (failed, events) = failures(&mut p);
        assert_eq!(failed.len(), 3, "{failed:?}");
        assert_eq!(
            (failed[0].0, &failed[0].1),
            (
                1,
                &ProduceError::Partitioner(PartitionerError::Failed("refused".into()))
            )
        );
        assert_eq!(
            (failed[1].0, &failed[1].1),
            (
                2,
                &ProduceError::Partitioner(PartitionerError::OutOfRange {
                    partition: 3,
                    count: 3
                })
            )
        );
        assert_eq!(failed[2].0, 3);
        assert!(
            matches!(&failed[2].1, ProduceError::Partitioner(PartitionerError::Panicked(m)) if m.contains("index out of bounds")),
            "{:?}",
            failed[2].1
        );
        let back = &failed[2].2;
        assert_eq!(
            (back.key.as_deref(), back.partition),
            (Some(&b"k"[..]), None),
            "the record comes back as sent"
        );
        assert!(!failed[2].1.possibly_persisted());
        assert!(
            events.iter().any(|e| matches!(
                e,
                Event::CallbackPanicked {
                    callback: Callback::Partitioner,
                    ..
                }
            )),
            "{events:?}"
        );
        assert_eq!(
            counts(&mut p),
            [0, 0, 1],
            "the next record is routed: 2 mod 3"
        );
        assert_eq!(
            p.buffered_records(),
            1,
            "the failed ones released their space"
        );
        assert_eq!(p.stats.records_failed, 3);
    }

    /// `Route::Sticky` uses the producer's sticky partition: records stick to one partition
    /// for `batch.size` bytes, and the built-in `StickyPartitioner` does the same as
    /// `partitioner.ignore.keys` (a key does not move a record).
    #[test]
    fn the_sticky_route_uses_the_producers_sticky_partition() {
        for keyed in [false, true] {
            let t0 = Instant::now();
            let mut p = Producer::with_partitioner(
                config().build().unwrap(),
                t0,
                Box::new(StickyPartitioner),
            );
            know(&mut p, TOPIC, &[1, 2, 3], t0);
            for i in 0..5u32 {
                let mut r = Record::new(TOPIC, vec![b'v'; 10]);
                if keyed {
                    r = r.with_key(i.to_be_bytes().to_vec());
                }
                p.send(t0, r, i).unwrap();
            }
            let c = counts(&mut p);
            assert_eq!(
                c.iter().filter(|&&n| n == 5).count(),
                1,
                "one partition: {c:?}"
            );
        }
    }

    /// A producer with a partitioner is still `Send` and `Sync`, as without one.
    #[test]
    fn the_producer_stays_send_and_sync() {
        fn send_sync<P: Send + Sync>(_: &P) {}
        let p: Producer<u32> = Producer::with_partitioner(
            config().build().unwrap(),
            Instant::now(),
            Box::new(RoundRobinPartitioner::new()),
        );
        send_sync(&p);
    }

    /// Round-robin through the producer: one record per available partition in turn.
    #[test]
    fn round_robin_through_the_producer() {
        let t0 = Instant::now();
        let mut p = Producer::with_partitioner(
            config().build().unwrap(),
            t0,
            Box::new(RoundRobinPartitioner::new()),
        );
        know(&mut p, TOPIC, &[1, -1, 2], t0);
        for i in 0..6 {
            p.send(t0, Record::new(TOPIC, "v").with_key("same"), i)
                .unwrap();
        }
        assert_eq!(counts(&mut p), [3, 0, 3]);
    }

    /// Records held for their topic's metadata are routed by the partitioner when it arrives
    /// (here: when the topic becomes known and the held records are routed).
    #[test]
    fn held_records_meet_the_partitioner_when_metadata_arrives() {
        let calls = Calls::default();
        let t0 = Instant::now();
        let mut p = Producer::with_partitioner(
            config().build().unwrap(),
            t0,
            Box::new(ByFirstByte(calls.clone())),
        );
        p.send(t0, Record::new(TOPIC, vec![1]), 1).unwrap();
        p.send(t0, Record::new(TOPIC, vec![4]), 2).unwrap();
        assert!(calls.lock().unwrap().is_empty(), "no count known yet");
        let t = p.topics.get_mut(0);
        t.grow_partitions(2);
        t.known = true;
        p.route_held(0);
        assert_eq!(calls.lock().unwrap().len(), 2);
        assert_eq!(counts(&mut p), [1, 1]);
    }

    /// `request_partitions`: a known topic answers at once; an unknown one waits for its
    /// metadata and, without it, is answered unavailable at `max_block` (never reached:
    /// `DeliveryTimeout`); an invalid name is an error; a closing producer answers `Closed`.
    #[test]
    fn partitions_asked_are_answered_by_events() {
        let t0 = Instant::now();
        let max_block = Duration::from_secs(5);
        let mut p: Producer<u32> =
            Producer::new(config().max_block(max_block).build().unwrap(), t0);
        know(&mut p, TOPIC, &[1, -1], t0);
        let _ = failures(&mut p);
        assert_eq!(p.partitions(TOPIC).unwrap().leaders(), [1, -1]);
        p.request_partitions(t0, TOPIC).unwrap();
        let (_, events) = failures(&mut p);
        assert_eq!(
            events,
            [Event::PartitionsKnown {
                topic: TOPIC.into(),
                count: 2
            }]
        );
        assert!(p.request_partitions(t0, "bad name!").is_err());
        p.request_partitions(t0, "u").unwrap();
        p.request_partitions(t0 + Duration::from_secs(1), "u")
            .unwrap();
        assert!(p.partitions("u").is_none());
        assert!(failures(&mut p).1.is_empty(), "waits for metadata");
        p.handle_timeout(t0 + max_block);
        let (_, events) = failures(&mut p);
        let answers: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::PartitionsUnavailable { .. }))
            .collect();
        assert_eq!(answers.len(), 1, "one answer for both asks: {events:?}");
        assert!(
            matches!(answers[0], Event::PartitionsUnavailable { topic, error: ProduceError::DeliveryTimeout { .. } } if &**topic == "u"),
            "{answers:?}"
        );
        p.close(t0 + max_block);
        let _ = failures(&mut p);
        p.request_partitions(t0 + max_block, "u").unwrap();
        assert_eq!(
            failures(&mut p).1,
            [Event::PartitionsUnavailable {
                topic: "u".into(),
                error: ProduceError::Closed
            }]
        );
    }
}
