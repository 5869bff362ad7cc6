//! Network model and fault injection: connections, ordering, stop/start, stalls, drops,
//! delays, byte-at-a-time writes, garbage, determinism.

mod support;

use kafka_protocol::messages::{ApiKey, MetadataResponse, ProduceResponse};
use producer_sim::{NetEvent, SimCluster, SimConfig};
use std::time::Duration;
use support::client::*;
use support::ErrorCode;

#[test]
fn connect_takes_one_latency_and_unknown_address_fails() {
    let mut c = cluster(2, 1);
    let t0 = c.now;
    let conn = c.sim.connect(t0, "broker-2", 9092);
    assert_eq!(c.sim.next_event_time(), Some(t0 + Duration::from_millis(1)));
    assert_eq!(c.sim.poll_event(t0), None, "not before one latency");
    assert_eq!(
        c.sim.poll_event(t0 + Duration::from_millis(1)),
        Some(NetEvent::Connected(conn))
    );
    let bad = c.sim.connect(t0, "broker-9", 9092);
    let wrong_port = c.sim.connect(t0, "broker-1", 9093);
    c.now = t0 + Duration::from_millis(2);
    c.run_idle();
    assert!(c.failed.contains(&bad) && c.failed.contains(&wrong_port));
    // Writes to a failed connection are ignored.
    c.sim.write(c.now, bad, &[0, 0, 0, 1, 0]);
    assert_eq!(c.sim.next_event_time(), None);
    assert_eq!(
        c.sim.bootstrap(),
        vec![("broker-1".into(), 9092), ("broker-2".into(), 9092)]
    );
}

#[test]
fn pipelined_responses_arrive_in_request_order() {
    let mut cfg = SimConfig::with_brokers(1, 5);
    cfg.latency = (Duration::from_micros(10), Duration::from_millis(20));
    let mut c = Client::new(cfg);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let mut corrs = Vec::new();
    for i in 0..20 {
        // Interleave APIs, advancing time a little between writes.
        if i % 2 == 0 {
            corrs.push((
                ApiKey::Metadata,
                c.send(conn, ApiKey::Metadata, 12, &metadata_request(None)),
            ));
        } else {
            let req = produce_request(-1, &[("t", 0, batch(B::plain(1)))]);
            corrs.push((ApiKey::Produce, c.send(conn, ApiKey::Produce, 11, &req)));
        }
        c.now += Duration::from_micros(100);
    }
    for (api, corr) in corrs {
        let v = if api == ApiKey::Metadata { 12 } else { 11 };
        let frame = c.recv_frame(conn).unwrap();
        let got = if api == ApiKey::Metadata {
            decode_response::<MetadataResponse>(api, v, frame).0
        } else {
            decode_response::<ProduceResponse>(api, v, frame).0
        };
        assert_eq!(got, corr);
    }
    let offsets: Vec<i64> = c.sim.log("t", 0).iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..10).collect::<Vec<_>>());
}

#[test]
fn byte_at_a_time_writes_are_reassembled() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let mut bytes = encode_request(
        ApiKey::Produce,
        9,
        77,
        &produce_request(-1, &[("t", 0, batch(B::plain(2)))]),
    );
    bytes.extend(encode_request(
        ApiKey::Metadata,
        12,
        78,
        &metadata_request(None),
    ));
    for b in &bytes {
        c.sim.write(c.now, conn, std::slice::from_ref(b));
        c.now += Duration::from_micros(3);
        // Drive the sim between bytes: nothing must be answered before the frame is complete.
        assert_eq!(
            c.sim.poll_event(c.now),
            None,
            "no response before the request is complete"
        );
    }
    let (corr, p) =
        decode_response::<ProduceResponse>(ApiKey::Produce, 9, c.recv_frame(conn).unwrap());
    assert_eq!(corr, 77);
    assert_eq!(p.responses[0].partition_responses[0].base_offset, 0);
    let (corr, _) =
        decode_response::<MetadataResponse>(ApiKey::Metadata, 12, c.recv_frame(conn).unwrap());
    assert_eq!(corr, 78);
    assert_eq!(c.sim.log("t", 0).len(), 2);
    assert!(c.sim.violations().is_empty());
}

#[test]
fn fragmented_responses_reassemble() {
    let mut cfg = SimConfig::with_brokers(1, 11);
    cfg.fragment_responses = true;
    let mut c = Client::new(cfg);
    c.sim.create_topic("t", 3).unwrap();
    let conn = c.connect_to(1);
    for _ in 0..20 {
        let r: MetadataResponse = c.roundtrip(conn, ApiKey::Metadata, 12, &metadata_request(None));
        assert_eq!(r.topics[0].partitions.len(), 3);
    }
    let data_events = c
        .trace
        .iter()
        .filter(|(_, e)| e.starts_with("data"))
        .count();
    assert!(
        data_events > 20,
        "some responses were split ({data_events} data events)"
    );
}

#[test]
fn stop_broker_closes_connections_loses_in_flight_and_refuses_connects() {
    let mut c = cluster(2, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let other = c.connect_to(2);
    let req = produce_request(-1, &[("t", 0, batch(B::plain(1)))]);
    c.send(conn, ApiKey::Produce, 9, &req);
    // Stop before the request arrives: it is lost.
    c.sim.stop_broker(1, c.now).unwrap();
    c.run_idle();
    assert!(c.closed.contains(&conn));
    assert!(!c.closed.contains(&other));
    assert!(c.sim.log("t", 0).is_empty());
    assert_eq!(c.sim.broker_running(1), Some(false));
    let again = c.connect_to(1);
    assert!(c.failed.contains(&again));
    // A connection still completing when the broker stops fails.
    let pending = c.sim.connect(c.now, "broker-2", 9092);
    c.sim.stop_broker(2, c.now).unwrap();
    c.run_idle();
    assert!(c.failed.contains(&pending));
    assert!(c.closed.contains(&other));
    c.sim.start_broker(1).unwrap();
    let back = c.connect_to(1);
    assert!(c.connected.contains(&back));
    assert_eq!(
        c.produce1(back, FIRST_FLEXIBLE_PRODUCE, "t", 0, batch(B::plain(1))),
        (ErrorCode::NONE, 0)
    );
}

#[test]
fn stop_after_processing_keeps_the_write_but_loses_the_response() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let req = produce_request(-1, &[("t", 0, batch(B::plain(1)))]);
    c.send(conn, ApiKey::Produce, 9, &req);
    // Let the request arrive (1 ms) but not the response (2 ms).
    c.now += Duration::from_millis(1);
    c.sim.advance(c.now);
    assert_eq!(c.sim.log("t", 0).len(), 1);
    c.sim.stop_broker(1, c.now).unwrap();
    assert!(c.recv_frame(conn).is_none());
    assert!(c.closed.contains(&conn));
}

#[test]
fn stalled_broker_delivers_nothing_until_released() {
    let mut c = cluster(2, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    let c2 = c.connect_to(2);
    c.sim.stall_connections_to(1, None).unwrap();
    let req = produce_request(-1, &[("t", 0, batch(B::plain(1)))]);
    let corr = c.send(conn, ApiKey::Produce, 9, &req);
    // Other brokers are unaffected.
    let r: MetadataResponse = c.roundtrip(c2, ApiKey::Metadata, 12, &metadata_request(None));
    assert_eq!(r.brokers.len(), 2);
    c.run_idle();
    c.now += Duration::from_secs(60);
    assert_eq!(c.sim.poll_event(c.now), None);
    assert_eq!(c.sim.next_event_time(), None, "held indefinitely");
    assert_eq!(c.pending_frames(conn), 0);
    // The broker did handle the request (possibly persisted).
    assert_eq!(c.sim.log("t", 0).len(), 1);
    c.sim.unstall_connections_to(1, c.now).unwrap();
    assert_eq!(c.sim.next_event_time(), Some(c.now));
    let got: ProduceResponse = c.recv(conn, ApiKey::Produce, 9, corr);
    assert_eq!(
        got.responses[0].partition_responses[0].error_code,
        ErrorCode::NONE.0
    );
}

#[test]
fn stall_until_a_time() {
    let mut c = cluster(1, 1);
    let conn = c.connect_to(1);
    let until = c.now + Duration::from_secs(5);
    c.sim.stall_connections_to(1, Some(until)).unwrap();
    c.send(conn, ApiKey::Metadata, 12, &metadata_request(None));
    assert!(c.recv_frame(conn).is_some());
    assert_eq!(c.now, until, "delivered exactly when the stall ends");
    // A client that gives up closes the connection: nothing more arrives on it.
    c.sim.stall_connections_to(1, None).unwrap();
    c.send(conn, ApiKey::Metadata, 12, &metadata_request(None));
    c.now += Duration::from_secs(30);
    c.sim.close(c.now, conn);
    c.sim.unstall_connections_to(1, c.now).unwrap();
    c.run_idle();
    assert_eq!(c.pending_frames(conn), 0);
}

#[test]
fn drop_connection_loses_in_flight_bytes() {
    let mut c = cluster(2, 1);
    c.sim.create_topic("t", 2).unwrap();
    let conn = c.connect_to(1);
    let c2 = c.connect_to(2);
    c.send(
        conn,
        ApiKey::Produce,
        9,
        &produce_request(-1, &[("t", 0, batch(B::plain(1)))]),
    );
    c.sim.drop_connection(c.now, conn);
    assert_eq!(c.sim.poll_event(c.now), Some(NetEvent::Closed(conn)));
    c.run_idle();
    assert!(c.sim.log("t", 0).is_empty());
    // Writes after the drop are ignored.
    c.send(conn, ApiKey::Metadata, 12, &metadata_request(None));
    assert_eq!(c.sim.next_event_time(), None);
    c.sim.drop_connections_to(c.now, 2);
    c.run_idle();
    assert!(c.closed.contains(&c2));
    assert_eq!(c.sim.open_connections(), vec![]);
}

#[test]
fn client_close_still_delivers_written_bytes_to_the_broker() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let conn = c.connect_to(1);
    c.send(
        conn,
        ApiKey::Produce,
        9,
        &produce_request(-1, &[("t", 0, batch(B::plain(1)))]),
    );
    c.sim.close(c.now, conn);
    c.run_idle();
    assert_eq!(c.sim.log("t", 0).len(), 1, "the write persisted");
    assert_eq!(c.pending_frames(conn), 0, "no response after close");
    assert!(
        !c.closed.contains(&conn),
        "no Closed event for a client-side close"
    );
}

#[test]
fn delayed_responses_keep_order() {
    let mut c = cluster(1, 1);
    let conn = c.connect_to(1);
    c.sim.delay_responses(1, Duration::from_secs(2), 1).unwrap();
    let start = c.now;
    let a = c.send(conn, ApiKey::Metadata, 12, &metadata_request(None));
    let b = c.send(conn, ApiKey::Metadata, 12, &metadata_request(None));
    let ra =
        decode_response::<MetadataResponse>(ApiKey::Metadata, 12, c.recv_frame(conn).unwrap()).0;
    assert_eq!(ra, a);
    assert!(c.now >= start + Duration::from_secs(2));
    let rb =
        decode_response::<MetadataResponse>(ApiKey::Metadata, 12, c.recv_frame(conn).unwrap()).0;
    assert_eq!(rb, b, "the second waits behind the first (TCP order)");
    let t = c.now;
    c.send(conn, ApiKey::Metadata, 12, &metadata_request(None));
    c.recv_frame(conn).unwrap();
    assert_eq!(c.now, t + Duration::from_millis(2), "delay count exhausted");
}

#[test]
fn random_drops_are_seeded_and_sometimes_persist() {
    let run = |seed: u64| {
        let mut cfg = SimConfig::with_brokers(1, seed);
        cfg.drop_probability = 0.5;
        let mut c = Client::new(cfg);
        c.sim.create_topic("t", 1).unwrap();
        let mut answered = 0;
        for _ in 0..40 {
            let conn = c.connect_to(1);
            let req = produce_request(-1, &[("t", 0, batch(B::plain(1)))]);
            c.send(conn, ApiKey::Produce, 9, &req);
            match c.recv_frame(conn) {
                Some(_) => answered += 1,
                None => assert!(c.closed.contains(&conn)),
            }
        }
        (answered, c.sim.log("t", 0).len(), c.trace.clone())
    };
    let (answered, logged, trace) = run(3);
    assert!(answered > 5 && answered < 35, "answered {answered}");
    assert!(
        logged > answered,
        "some dropped requests were processed first ({logged} vs {answered})"
    );
    assert_eq!(run(3).2, trace, "same seed, same run");
}

#[test]
fn garbage_never_panics_and_closes_the_connection() {
    let mut c = cluster(1, 1);
    c.sim.create_topic("t", 1).unwrap();
    let mut rng = 0x1234_5678_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let valid = encode_request(
        ApiKey::Produce,
        9,
        1,
        &produce_request(-1, &[("t", 0, batch(B::plain(2)))]),
    );
    let valid_md = encode_request(ApiKey::Metadata, 12, 2, &metadata_request(Some(&["t"])));
    for i in 0..600 {
        let conn = c.connect_to(1);
        let mut bytes = if i % 3 == 0 {
            valid.clone()
        } else {
            valid_md.clone()
        };
        match i % 4 {
            0 => {
                // Random byte flips after the size prefix.
                for _ in 0..(1 + next() % 4) {
                    let pos = 4 + (next() as usize % (bytes.len() - 4));
                    bytes[pos] = next() as u8;
                }
            }
            1 => {
                // Truncate the body but keep the size prefix consistent.
                let n = 8 + next() as usize % (bytes.len() - 8);
                bytes.truncate(n);
                let len = (n - 4) as i32;
                bytes[..4].copy_from_slice(&len.to_be_bytes());
            }
            2 => {
                // Pure random frame.
                let n = next() as usize % 64;
                bytes = (n as i32 + 4).to_be_bytes().to_vec();
                bytes.extend((0..n + 4).map(|_| next() as u8));
            }
            _ => {
                // Random size prefix.
                bytes[..4].copy_from_slice(&(next() as i32).to_be_bytes());
            }
        }
        c.sim.write(c.now, conn, &bytes);
        c.run_idle();
        c.sim.close(c.now, conn);
    }
    assert!(!c.sim.violations().is_empty());
    // The cluster still works.
    let conn = c.connect_to(1);
    let r = c
        .produce(conn, 9, -1, &[("t", 0, batch(B::plain(1)))])
        .unwrap();
    assert_eq!(
        r.responses[0].partition_responses[0].error_code,
        ErrorCode::NONE.0
    );
}

#[test]
fn malformed_frames_are_recorded() {
    let mut c = cluster(1, 1);
    let conn = c.connect_to(1);
    c.sim.write(c.now, conn, &(-5i32).to_be_bytes());
    c.run_idle();
    assert!(c.closed.contains(&conn));
    assert!(c.sim.violations()[0].contains("invalid frame size -5"));
    let conn = c.connect_to(1);
    // Fetch (api 1) is not served.
    c.sim
        .write(c.now, conn, &[0, 0, 0, 8, 0, 1, 0, 4, 0, 0, 0, 9]);
    c.run_idle();
    assert!(c.closed.contains(&conn));
    assert!(
        c.sim.violations()[1].contains("not advertised"),
        "{:?}",
        c.sim.violations()
    );
    let rec = c.sim.request_log().last().unwrap();
    assert_eq!(
        (
            rec.api_key,
            rec.api_version,
            rec.correlation_id,
            rec.responded
        ),
        (1, 4, 9, false)
    );
    // Trailing bytes after a valid body are reported but answered.
    let conn = c.connect_to(1);
    let mut b = encode_request(ApiKey::Metadata, 12, 5, &metadata_request(None));
    b.push(0);
    let n = (b.len() - 4) as i32;
    b[..4].copy_from_slice(&n.to_be_bytes());
    c.sim.write(c.now, conn, &b);
    assert!(c.recv_frame(conn).is_some());
    assert!(c.sim.violations()[2].contains("trailing"));
}

fn scenario(seed: u64) -> Vec<(Duration, String)> {
    let mut cfg = SimConfig::with_brokers(3, seed);
    cfg.latency = (Duration::from_micros(100), Duration::from_millis(30));
    cfg.fragment_responses = true;
    let mut c = Client::new(cfg);
    c.sim.create_topic("t", 6).unwrap();
    let conns: Vec<_> = (1..=3).map(|b| c.connect_to(b)).collect();
    let (pid, e) = c.init_pid(conns[0], 4);
    let mut seq = [0i32; 6];
    for round in 0..10 {
        for p in 0..6 {
            let leader = c.sim.leader("t", p).unwrap().0;
            let conn = conns[(leader - 1) as usize];
            let req = produce_request(-1, &[("t", p, batch(B::idem(pid, e, seq[p as usize], 2)))]);
            c.send(conn, ApiKey::Produce, 11, &req);
            seq[p as usize] += 2;
        }
        if round == 4 {
            c.sim
                .delay_responses(2, Duration::from_millis(50), 3)
                .unwrap();
        }
        c.run_until_time(c.now + Duration::from_millis(7));
    }
    c.run_idle();
    c.trace
}

#[test]
fn same_seed_gives_identical_event_sequences() {
    let a = scenario(42);
    let b = scenario(42);
    assert!(a.len() > 60);
    assert_eq!(a, b);
    let other = scenario(43);
    assert_ne!(a, other, "a different seed changes latencies");
}

#[test]
fn next_event_time_never_goes_backwards_and_poll_is_time_ordered() {
    let mut cfg = SimConfig::with_brokers(2, 9);
    cfg.latency = (Duration::ZERO, Duration::from_millis(10));
    let mut sim = SimCluster::new(cfg, std::time::Instant::now());
    sim.create_topic("t", 2).unwrap();
    let t0 = sim.now();
    let a = sim.connect(t0, "broker-1", 9092);
    let b = sim.connect(t0, "broker-2", 9092);
    let md = encode_request(ApiKey::Metadata, 12, 1, &metadata_request(None));
    sim.write(t0, a, &md);
    sim.write(t0, b, &md);
    // Poll far in the future: events come out one by one, in time order.
    let far = t0 + Duration::from_secs(1);
    let mut n = 0;
    while let Some(ev) = sim.poll_event(far) {
        n += 1;
        assert!(matches!(ev, NetEvent::Connected(_) | NetEvent::Data(..)));
    }
    assert_eq!(n, 4);
    assert_eq!(sim.next_event_time(), None);
}
