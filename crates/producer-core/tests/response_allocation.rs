//! What a 1 MiB answer can make the producer allocate, measured with a counting global
//! allocator: a small multiple of its size, whatever its arrays claim. Peak bytes are asserted
//! (requested sizes, on the measuring thread only), never time.
//!
//! Each answer below is shaped to allocate as much as its bytes allow: arrays of the smallest
//! elements the parser accepts (the most elements per byte), arrays whose claimed lengths are
//! as large as the bytes left can hold at each level of nesting, and claims far past the
//! bytes. Before the bound on reservations, a 1 MiB Metadata answer reserved 73-165 MiB.

mod script;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use producer_core::protocol::get_telemetry_subscriptions::GetTelemetrySubscriptionsResponse;
use producer_core::protocol::metadata::MetadataResponse;
use producer_core::protocol::produce::ProduceResponse;
use producer_core::protocol::FrameDecoder;
use script::Script;

/// Counts the bytes the measuring thread has allocated and not freed, and their peak.
struct Counting;

thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = MEASURING.try_with(|on| {
        if on.get() {
            LIVE.with(|live| {
                let now = live.get() + delta;
                live.set(now);
                PEAK.with(|peak| peak.set(peak.get().max(now)));
            });
        }
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// thread-local cells that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f`, returning the peak of bytes it held at once beyond what was held before it.
fn peak_of(f: impl FnOnce()) -> usize {
    LIVE.with(|c| c.set(0));
    PEAK.with(|c| c.set(0));
    MEASURING.with(|c| c.set(true));
    f();
    MEASURING.with(|c| c.set(false));
    PEAK.with(Cell::get).max(0) as usize
}

const MIB: usize = 1 << 20;

fn i16b(out: &mut Vec<u8>, v: i16) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn i32b(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Metadata v1 bodies of about 1 MiB, each shaped to allocate as much as it can.
fn metadata_v1_bodies() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();

    // Brokers of the smallest size (12 bytes: id, empty host, port, null rack).
    let n = (MIB - 12) / 12;
    let mut b = Vec::new();
    i32b(&mut b, n as i32);
    for i in 0..n {
        i32b(&mut b, i as i32);
        i16b(&mut b, 0);
        i32b(&mut b, 9092);
        i16b(&mut b, -1);
    }
    i32b(&mut b, 0); // controller
    i32b(&mut b, 0); // topics
    out.push(("brokers of 12 bytes", b));

    // Topics of the smallest size (9 bytes: error, empty name, internal, no partitions).
    let n = (MIB - 12) / 9;
    let mut b = Vec::new();
    i32b(&mut b, 0);
    i32b(&mut b, 0);
    i32b(&mut b, n as i32);
    for _ in 0..n {
        i16b(&mut b, 0);
        i16b(&mut b, 0);
        b.push(0);
        i32b(&mut b, 0);
    }
    out.push(("topics of 9 bytes", b));

    // One topic (not in use) with partitions of the smallest size (18 bytes), indexed
    // 0..n-1.
    let n = (MIB - 32) / 18;
    let mut b = Vec::new();
    i32b(&mut b, 0);
    i32b(&mut b, 0);
    i32b(&mut b, 1);
    i16b(&mut b, 0);
    i16b(&mut b, 5);
    b.extend_from_slice(b"other");
    b.push(0);
    i32b(&mut b, n as i32);
    for i in 0..n {
        i16b(&mut b, 0);
        i32b(&mut b, i as i32);
        i32b(&mut b, 1);
        i32b(&mut b, 0);
        i32b(&mut b, 0);
    }
    out.push(("partitions of 18 bytes", b));

    // Each level claims as many elements as the bytes left can hold at its minimum size:
    // topics, the first topic's partitions, its first partition's replicas; zeros after.
    let mut b = Vec::new();
    i32b(&mut b, 0);
    i32b(&mut b, 0);
    let rest = MIB - b.len() - 4;
    i32b(&mut b, (rest / 9) as i32);
    i16b(&mut b, 0);
    i16b(&mut b, 0);
    b.push(0);
    let rest = MIB - b.len() - 4;
    i32b(&mut b, (rest / 18) as i32);
    i16b(&mut b, 0);
    i32b(&mut b, 0);
    i32b(&mut b, 1);
    let rest = MIB - b.len() - 4;
    i32b(&mut b, (rest / 4) as i32);
    b.resize(MIB, 0);
    out.push(("nested claims as large as the bytes allow", b));

    // Each level claims one element per byte left (what the parsers allowed before the
    // minimum sizes): refused at the first level, nothing reserved.
    let mut b = Vec::new();
    i32b(&mut b, 0);
    i32b(&mut b, 0);
    let rest = MIB - b.len() - 4;
    i32b(&mut b, rest as i32);
    i16b(&mut b, 0);
    i16b(&mut b, 0);
    b.push(0);
    let rest = MIB - b.len() - 4;
    i32b(&mut b, rest as i32);
    b.resize(MIB, 0);
    out.push(("nested claims of one element per byte left", b));

    // Claims far past the bytes at every level.
    let mut b = Vec::new();
    i32b(&mut b, 0);
    i32b(&mut b, 0);
    i32b(&mut b, i32::MAX);
    b.resize(MIB, 0);
    out.push(("a topic count of i32::MAX", b));
    let mut b = Vec::new();
    i32b(&mut b, i32::MAX);
    b.resize(MIB, 0xff);
    out.push(("a broker count of i32::MAX", b));
    out
}

/// Metadata v12 (flexible) bodies of about 1 MiB: compact lengths, smallest elements.
fn metadata_v12_bodies() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    // Brokers of 11 bytes: id, empty compact host, port, null rack, no tags.
    let n = (MIB - 16) / 11;
    let mut b = vec![0, 0, 0, 0]; // throttle
    put_uvarint(&mut b, n as u32 + 1);
    for i in 0..n {
        i32b(&mut b, i as i32);
        b.push(1);
        i32b(&mut b, 9092);
        b.push(0);
        b.push(0);
    }
    b.push(0); // cluster id null
    i32b(&mut b, 0);
    b.push(1); // topics: empty
    b.push(0);
    out.push(("v12 brokers of 11 bytes", b));
    // Partitions of 18 bytes (error, index, leader, epoch, three empty compact arrays, tags).
    let n = (MIB - 64) / 18;
    let mut b = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2];
    i16b(&mut b, 0);
    b.extend_from_slice(&[6, b'o', b't', b'h', b'e', b'r']);
    b.extend_from_slice(&[0; 16]);
    b.push(0);
    put_uvarint(&mut b, n as u32 + 1);
    for i in 0..n {
        i16b(&mut b, 0);
        i32b(&mut b, i as i32);
        i32b(&mut b, 1);
        i32b(&mut b, 0);
        b.extend_from_slice(&[1, 1, 1, 0]);
    }
    i32b(&mut b, 0);
    b.push(0);
    b.push(0);
    out.push(("v12 partitions of 18 bytes", b));
    out
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A Produce v8 body of about 1 MiB: one topic, one partition, record errors of the smallest
/// size (6 bytes: index, null message).
fn produce_v8_record_errors() -> Vec<u8> {
    let n = (MIB - 64) / 6;
    let mut b = Vec::new();
    i32b(&mut b, 1);
    i16b(&mut b, 1);
    b.push(b't');
    i32b(&mut b, 1);
    i32b(&mut b, 0); // index
    i16b(&mut b, 0); // error
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&0i64.to_be_bytes());
    i32b(&mut b, n as i32);
    for i in 0..n {
        i32b(&mut b, i as i32);
        i16b(&mut b, -1);
    }
    i16b(&mut b, -1); // error message
    i32b(&mut b, 0); // throttle
    b
}

/// A Produce v3 body of about 1 MiB: one topic, partitions of the smallest size (22 bytes).
fn produce_v3_partitions() -> Vec<u8> {
    let n = (MIB - 64) / 22;
    let mut b = Vec::new();
    i32b(&mut b, 1);
    i16b(&mut b, 1);
    b.push(b't');
    i32b(&mut b, n as i32);
    for i in 0..n {
        i32b(&mut b, i as i32);
        i16b(&mut b, 0);
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&(-1i64).to_be_bytes());
    }
    i32b(&mut b, 0);
    b
}

/// GetTelemetrySubscriptions v0 bodies of about 1 MiB: compression types (one byte each),
/// requested metrics of the smallest size (empty names, one byte each), and a names claim far
/// past the bytes.
fn telemetry_bodies() -> Vec<(&'static str, Vec<u8>)> {
    // ThrottleTimeMs, ErrorCode, ClientInstanceId, SubscriptionId.
    let head = |b: &mut Vec<u8>| b.extend_from_slice(&[0; 4 + 2 + 16 + 4]);
    // PushIntervalMs, TelemetryMaxBytes, DeltaTemporality.
    let middle = |b: &mut Vec<u8>| b.extend_from_slice(&[0; 4 + 4 + 1]);
    let n = MIB - 64;
    let mut types = Vec::new();
    head(&mut types);
    put_uvarint(&mut types, n as u32 + 1);
    types.extend(std::iter::repeat_n(4u8, n));
    middle(&mut types);
    types.extend_from_slice(&[1, 0]); // no names, no tags
    let mut names = Vec::new();
    head(&mut names);
    names.push(1); // no compression types
    middle(&mut names);
    put_uvarint(&mut names, n as u32 + 1);
    names.extend(std::iter::repeat_n(1u8, n)); // empty names
    names.push(0);
    let mut claim = Vec::new();
    head(&mut claim);
    claim.push(1);
    middle(&mut claim);
    put_uvarint(&mut claim, u32::MAX);
    claim.extend(std::iter::repeat_n(1u8, n));
    vec![
        ("compression types of 1 byte", types),
        ("requested metrics of 1 byte", names),
        ("a names claim past the bytes", claim),
    ]
}

/// The most parsing any of these answers may allocate, per byte of answer.
const PARSE_BOUND: usize = 10;

#[test]
fn parsing_a_1_mib_answer_allocates_a_small_multiple_of_its_size() {
    let mut report = Vec::new();
    for (version, bodies) in [(1, metadata_v1_bodies()), (12, metadata_v12_bodies())] {
        for (what, body) in bodies {
            assert!(body.len() <= MIB + 64, "{what}: {}", body.len());
            let peak = peak_of(|| {
                let _ = MetadataResponse::parse(version, &body);
            });
            report.push(format!("Metadata v{version}, {what}: {peak} bytes"));
            assert!(
                peak <= PARSE_BOUND * body.len(),
                "Metadata v{version}, {what}: {peak} bytes for a {} byte answer",
                body.len()
            );
        }
    }
    for (version, what, body) in [
        (8, "record errors of 6 bytes", produce_v8_record_errors()),
        (3, "partitions of 22 bytes", produce_v3_partitions()),
    ] {
        let parsed = ProduceResponse::parse(version, &body);
        assert!(parsed.is_ok(), "{what}: {parsed:?}");
        drop(parsed);
        let peak = peak_of(|| {
            let _ = ProduceResponse::parse(version, &body);
        });
        report.push(format!("Produce v{version}, {what}: {peak} bytes"));
        assert!(peak <= PARSE_BOUND * body.len(), "{what}: {peak} bytes");
    }
    for (what, body) in telemetry_bodies() {
        let parsed = GetTelemetrySubscriptionsResponse::parse(0, &body);
        assert_eq!(
            parsed.is_ok(),
            !what.contains("claim"),
            "{what}: {parsed:?}"
        );
        drop(parsed);
        let peak = peak_of(|| {
            let _ = GetTelemetrySubscriptionsResponse::parse(0, &body);
        });
        report.push(format!(
            "GetTelemetrySubscriptions v0, {what}: {peak} bytes"
        ));
        assert!(peak <= PARSE_BOUND * body.len(), "{what}: {peak} bytes");
    }
    // The nested and over-long claims cost almost nothing: they fail before their elements
    // are held.
    println!("{}", report.join("\n"));
}

/// The frame decoder holds what arrived, not what the prefix announced: a 100 MiB frame
/// announced, 1 MiB of it sent in 64 KiB reads, costs about 2 MiB at most.
#[test]
fn the_frame_decoder_allocates_for_the_bytes_that_arrived() {
    let mut d = FrameDecoder::new(100 * MIB);
    let chunk = vec![0u8; 64 * 1024];
    let peak = peak_of(|| {
        d.push(&(100 * MIB as i32).to_be_bytes());
        for _ in 0..16 {
            d.push(&chunk);
            assert!(d.next_frame().unwrap().is_none());
        }
    });
    assert!(peak <= 2 * MIB + 64 * 1024, "{peak} bytes");
    assert!(peak >= MIB, "the bytes that arrived are held: {peak}");
}

/// The whole path, `handle_read` of a 1 MiB Metadata answer in 64 KiB reads, for each shape:
/// the frame buffer, the parse and applying the answer (the topic the answers list is not one
/// the producer uses) stay within a small multiple of the answer's size, and the producer
/// goes on.
#[test]
fn reading_a_1_mib_metadata_answer_allocates_a_small_multiple_of_its_size() {
    for (what, body) in metadata_v1_bodies() {
        let mut s = Script::new(1, &[("t", 1)], |b| b.max_response_size(2 * MIB));
        s.hold_metadata = true;
        s.send("t", "k", 0);
        s.drain();
        let req = s.held.pop().expect("a Metadata request");
        let frame = script::frame(&req, &body);
        let (now, conn) = (s.now, req.conn);
        let malformed = s.producer.stats().malformed_responses;
        let peak = peak_of(|| {
            for chunk in frame.chunks(64 * 1024) {
                s.producer.handle_read(now, conn, chunk);
            }
        });
        // The answer was read whole (refused or applied), not cut short by a mismatch.
        assert_eq!(
            s.producer.stats().metadata_refreshes + s.producer.stats().malformed_responses
                - malformed,
            1,
            "{what}"
        );
        println!("handle_read, {what}: {peak} bytes");
        assert!(
            peak <= (PARSE_BOUND + 2) * frame.len(),
            "{what}: {peak} bytes for a {} byte answer",
            frame.len()
        );
        // The producer goes on: a good answer delivers the record.
        s.hold_metadata = false;
        s.answered_directly(&req);
        assert!(
            s.run_until(Duration::from_secs(5), |s| s.outcomes().0.len() == 1),
            "{what}"
        );
    }
}
