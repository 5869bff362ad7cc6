//! `purge`, `flush_within` and `close_within` on a producer whose topic is known and whose
//! leader is never connected: what is buffered stays unsent unless a test puts a batch in
//! flight by hand (on a connection id the brokers do not know, so only the partition's rules
//! are in play).

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::config::Config;
    use crate::partition::IdentityStep;
    use crate::types::{ConnId, Delivery, Event, Output, ProduceError, Record};

    use super::super::purge::{InFlight, PurgeScope};
    use super::super::Producer;

    const TOPIC: &str = "t";

    /// A producer with topic `t` known (`partitions` partitions led by node 1, never connected).
    fn producer(partitions: usize, idempotence: bool) -> (Producer<u32>, Instant) {
        let config = Config::builder([("k", 9092)])
            .linger(Duration::from_secs(3600))
            .set(
                "enable.idempotence",
                if idempotence { "true" } else { "false" },
            )
            .unwrap()
            .seed(7)
            .build()
            .unwrap();
        let t0 = Instant::now();
        let mut p: Producer<u32> = Producer::new(config, t0);
        let (id, _) = p.topics.id_of(&Arc::from(TOPIC), t0);
        let t = p.topics.get_mut(id);
        t.grow_partitions(partitions);
        t.known = true;
        for pq in t.partitions.iter_mut() {
            pq.set_leader(1, 0);
        }
        (p, t0)
    }

    fn record(partition: i32, n: u32) -> Record {
        Record::new(TOPIC, format!("v{n}")).with_partition(partition)
    }

    /// Every delivery report and event output now (connections asked for are ignored).
    fn drain(p: &mut Producer<u32>) -> (Vec<Delivery<u32>>, Vec<Event>) {
        let (mut reports, mut events) = (Vec::new(), Vec::new());
        while let Some(o) = p.poll_output() {
            match o {
                Output::Delivery(d) => reports.push(d),
                Output::Event(e) => events.push(e),
                _ => {}
            }
        }
        (reports, events)
    }

    /// The error of a failed report, and the value of the record it hands back.
    fn failure(d: &Delivery<u32>) -> (&ProduceError, Option<&[u8]>) {
        let f = d.result.as_ref().expect_err("a failure report");
        (&f.error, f.record.value.as_deref())
    }

    const NOT_SENT: ProduceError = ProduceError::Purged {
        possibly_persisted: false,
    };

    /// Closes partition `p`'s open batch and puts it in flight on a connection of its own.
    fn put_in_flight(p: &mut Producer<u32>, partition: u32, conn: ConnId) {
        let t = p.topics.lookup(TOPIC).unwrap();
        p.close_open_batch(t, partition);
        let pq = p.topics.partition_mut(t, partition);
        assert_eq!(pq.prepare_identity(5, 0, true), IdentityStep::Adopted);
        let i = pq
            .next_sendable(conn, true)
            .expect("the closed batch may go");
        pq.begin_flight(i, conn, true);
    }

    #[test]
    fn purge_all_hands_back_every_record_never_sent_and_frees_the_buffer() {
        let (mut p, t0) = producer(3, false);
        for n in 0..9 {
            p.send(t0, record((n % 3) as i32, n), n).unwrap();
        }
        // A closed batch not sent yet, and records waiting for an unknown topic's metadata.
        p.flush(t0);
        p.send(t0, record(0, 9), 9).unwrap();
        for n in 10..12 {
            p.send(t0, Record::new("unknown", format!("v{n}")), n)
                .unwrap();
        }
        drain(&mut p);
        assert_eq!(p.buffered_records(), 12);

        assert_eq!(p.purge(t0, PurgeScope::All, InFlight::Wait), 12);
        let (reports, _) = drain(&mut p);
        assert_eq!(reports.len(), 12, "one report per record");
        let mut opaques: Vec<u32> = reports.iter().map(|d| d.opaque).collect();
        opaques.sort_unstable();
        assert_eq!(opaques, (0..12).collect::<Vec<_>>());
        for d in &reports {
            let (error, value) = failure(d);
            assert_eq!(*error, NOT_SENT);
            assert!(!error.possibly_persisted());
            assert_eq!(
                value,
                Some(format!("v{}", d.opaque).as_bytes()),
                "handed back"
            );
        }
        assert_eq!(p.buffered_records(), 0);
        assert_eq!(p.buffered_bytes(), 0);
        assert_eq!(
            p.purge(t0, PurgeScope::All, InFlight::Abandon),
            0,
            "nothing left"
        );
        // The producer goes on.
        p.send(t0, record(1, 20), 20).unwrap();
        assert_eq!(p.buffered_records(), 1);
    }

    #[test]
    fn purge_of_a_topic_or_a_partition_leaves_the_others() {
        let (mut p, t0) = producer(3, false);
        for n in 0..6 {
            p.send(t0, record((n % 3) as i32, n), n).unwrap();
        }
        p.send(t0, Record::new("other", "o"), 100).unwrap();
        let scope = PurgeScope::Partition(Arc::from(TOPIC), 1);
        assert_eq!(p.purge(t0, scope, InFlight::Wait), 2);
        let (reports, _) = drain(&mut p);
        let mut purged: Vec<u32> = reports.iter().map(|d| d.opaque).collect();
        purged.sort_unstable();
        assert_eq!(purged, [1, 4], "partition 1's records only");
        assert_eq!(p.buffered_records(), 5);
        // Out of range, unknown: nothing.
        let none = PurgeScope::Partition(Arc::from(TOPIC), 7);
        assert_eq!(p.purge(t0, none, InFlight::Abandon), 0);
        assert_eq!(
            p.purge(t0, PurgeScope::Topic("nope".into()), InFlight::Wait),
            0
        );
        assert_eq!(
            p.purge(t0, PurgeScope::Topic(TOPIC.into()), InFlight::Wait),
            4
        );
        let (reports, _) = drain(&mut p);
        assert_eq!(reports.len(), 4);
        assert!(reports.iter().all(|d| d.opaque != 100));
        assert_eq!(p.buffered_records(), 1, "the other topic's record stays");
    }

    #[test]
    fn wait_leaves_a_batch_in_flight_and_its_purged_successors_report_after_it() {
        let (mut p, t0) = producer(1, true);
        let conn = ConnId {
            slot: 40,
            generation: 1,
        };
        p.send(t0, record(0, 0), 0).unwrap();
        p.send(t0, record(0, 1), 1).unwrap();
        put_in_flight(&mut p, 0, conn);
        p.send(t0, record(0, 2), 2).unwrap();
        drain(&mut p);
        assert_eq!(p.purge(t0, PurgeScope::All, InFlight::Wait), 1);
        let (reports, _) = drain(&mut p);
        assert!(
            reports.is_empty(),
            "record 2 waits behind the batch in flight"
        );
        assert_eq!(p.buffered_records(), 3);
        // The batch in flight is answered (here: it is abandoned by a second purge): both come
        // out, in send order.
        assert_eq!(p.purge(t0, PurgeScope::All, InFlight::Abandon), 2);
        let (reports, _) = drain(&mut p);
        let order: Vec<u32> = reports.iter().map(|d| d.opaque).collect();
        assert_eq!(order, [0, 1, 2]);
        let sent = ProduceError::Purged {
            possibly_persisted: true,
        };
        assert_eq!(*failure(&reports[0]).0, sent);
        assert_eq!(*failure(&reports[1]).0, sent);
        assert_eq!(*failure(&reports[2]).0, NOT_SENT);
        assert_eq!(p.buffered_records(), 0);
    }

    #[test]
    fn abandon_ends_the_flight_and_an_idempotent_partition_bumps_its_epoch_before_sending_again() {
        let (mut p, t0) = producer(2, true);
        let conn = ConnId {
            slot: 40,
            generation: 1,
        };
        p.send(t0, record(0, 0), 0).unwrap();
        put_in_flight(&mut p, 0, conn);
        p.send(t0, record(1, 1), 1).unwrap();
        drain(&mut p);
        let t = p.topics.lookup(TOPIC).unwrap();
        let scope = PurgeScope::Partition(Arc::from(TOPIC), 0);
        assert_eq!(p.purge(t0, scope, InFlight::Abandon), 1);
        let (reports, _) = drain(&mut p);
        assert_eq!(reports.len(), 1);
        let (error, value) = failure(&reports[0]);
        assert!(error.possibly_persisted(), "{error:?}");
        assert_eq!(value, Some(&b"v0"[..]));
        let pq = p.topics.partition_mut(t, 0);
        assert!(pq.is_empty(), "the abandoned batch left the queue");
        // Nothing in flight any more: the partition may send on any connection, after the reset.
        let other = ConnId {
            slot: 41,
            generation: 1,
        };
        assert_eq!(pq.prepare_identity(5, 0, true), IdentityStep::Reset(1));
        assert_eq!(pq.identity(), (5, 1));
        assert!(!pq.has_sendable(other, true, t0, Duration::ZERO, false));
        // Partition 1 was not in scope.
        assert_eq!(p.buffered_records(), 1);
    }

    #[test]
    fn flush_within_completes_at_once_when_nothing_is_buffered_and_times_out_otherwise() {
        let (mut p, t0) = producer(1, false);
        drain(&mut p);
        p.flush_within(t0, t0 + Duration::from_secs(1));
        let (_, events) = drain(&mut p);
        assert_eq!(events, [Event::FlushCompleted]);

        p.send(t0, record(0, 0), 0).unwrap();
        p.send(t0, record(0, 1), 1).unwrap();
        let deadline = t0 + Duration::from_secs(1);
        p.flush_within(t0, deadline);
        let (_, events) = drain(&mut p);
        assert!(events.is_empty(), "{events:?}");
        assert!(p.poll_timeout().is_some_and(|at| at <= deadline));
        p.handle_timeout(deadline);
        let (reports, events) = drain(&mut p);
        assert!(reports.is_empty(), "nothing is cancelled");
        assert_eq!(events, [Event::FlushTimedOut { unacknowledged: 2 }]);
        // Once: a later deadline passing says nothing more.
        p.handle_timeout(deadline + Duration::from_secs(5));
        assert!(drain(&mut p).1.is_empty());
        // A purge brings the count to 0: a pending flush then completes after the reports.
        p.flush_within(deadline, deadline + Duration::from_secs(1));
        assert_eq!(p.purge(deadline, PurgeScope::All, InFlight::Wait), 2);
        let mut seen = Vec::new();
        while let Some(o) = p.poll_output() {
            match o {
                Output::Delivery(d) => seen.push(format!("report {}", d.opaque)),
                Output::Event(e) => seen.push(format!("{e:?}")),
                _ => {}
            }
        }
        assert_eq!(seen, ["report 0", "report 1", "FlushCompleted"]);
    }

    #[test]
    fn close_within_ends_what_is_held_at_its_deadline_with_honest_reports() {
        let (mut p, t0) = producer(2, true);
        let conn = ConnId {
            slot: 40,
            generation: 1,
        };
        p.send(t0, record(0, 0), 0).unwrap();
        p.send(t0, record(0, 1), 1).unwrap();
        put_in_flight(&mut p, 0, conn);
        p.send(t0, record(0, 2), 2).unwrap();
        p.send(t0, record(1, 3), 3).unwrap();
        p.send(t0, Record::new("unknown", "h"), 4).unwrap();
        drain(&mut p);
        let deadline = t0 + Duration::from_secs(2);
        p.close_within(t0, deadline);
        let (reports, events) = drain(&mut p);
        assert!(reports.is_empty() && !events.contains(&Event::Closed));
        assert!(!p.is_closed());
        assert!(p.poll_timeout().is_some_and(|at| at <= deadline));
        p.handle_timeout(deadline);
        let (reports, events) = drain(&mut p);
        assert_eq!(reports.len(), 5, "one report per record");
        for d in &reports {
            let (error, _) = failure(d);
            let expected = match d.opaque {
                0 | 1 => ProduceError::CloseTimedOut {
                    possibly_persisted: true,
                },
                _ => NOT_SENT,
            };
            assert_eq!(*error, expected, "record {}", d.opaque);
        }
        assert_eq!(
            events,
            [
                Event::CloseDeadlineReached {
                    purged: 3,
                    timed_out: 2
                },
                Event::Closed
            ]
        );
        assert!(p.is_closed());
        assert_eq!(p.buffered_records(), 0);
        assert_eq!(p.purge(deadline, PurgeScope::All, InFlight::Abandon), 0);
    }

    #[test]
    fn close_within_completes_before_its_deadline_when_nothing_is_held() {
        let (mut p, t0) = producer(1, false);
        drain(&mut p);
        p.close_within(t0, t0 + Duration::from_secs(5));
        let (_, events) = drain(&mut p);
        assert_eq!(events, [Event::Closed]);
        p.handle_timeout(t0 + Duration::from_secs(6));
        assert!(
            drain(&mut p).1.is_empty(),
            "no deadline event after the close"
        );
    }

    #[test]
    fn a_close_within_a_deadline_already_passed_ends_at_once() {
        let (mut p, t0) = producer(1, false);
        p.send(t0, record(0, 0), 0).unwrap();
        drain(&mut p);
        p.close_within(t0, t0);
        let (reports, events) = drain(&mut p);
        assert_eq!(reports.len(), 1);
        assert_eq!(*failure(&reports[0]).0, NOT_SENT);
        assert_eq!(
            events,
            [
                Event::CloseDeadlineReached {
                    purged: 1,
                    timed_out: 0
                },
                Event::Closed
            ]
        );
    }
}
