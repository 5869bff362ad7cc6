//! Credentials are wiped before their memory is freed. A global allocator that looks at every
//! block as it is freed (and at the old block of every reallocation) counts the blocks that
//! still hold a marker password or token; a PLAIN, a SCRAM and an OAUTHBEARER exchange run
//! through the producer, which is then dropped, and no freed block may hold the marker. A
//! control first frees an unwiped copy, to show the allocator does see one.
//!
//! One test in this binary: the allocator counts for the whole process.

mod by_hand;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use by_hand::Scripted;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse};
use producer_core::{
    Acks, Config, OAuthToken, Producer, Record, SaslConfig, SecurityProtocol, TlsConfig,
};

/// The secret the test looks for in freed memory.
const MARKER: &str = "Zq8-marker-credential-7Yx";

static ARMED: AtomicBool = AtomicBool::new(false);
static FREED_WITH_MARKER: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, looking at each block it frees while armed.
struct Watching;

fn holds_marker(block: &[u8]) -> bool {
    let m = MARKER.as_bytes();
    block.windows(m.len()).any(|w| w == m)
}

// SAFETY: every call is passed on to the system allocator unchanged; `dealloc` only reads the
// block it is about to free (its whole size, initialised or not, as a memory scanner reads it).
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ARMED.load(Ordering::Relaxed) && layout.size() >= MARKER.len() {
            let block = unsafe { std::slice::from_raw_parts(ptr, layout.size()) };
            if holds_marker(block) {
                FREED_WITH_MARKER.fetch_add(1, Ordering::Relaxed);
            }
        }
        unsafe { System.dealloc(ptr, layout) }
    }
    // `realloc` is GlobalAlloc's default: alloc, copy, then `dealloc` of the old block, which
    // is looked at too (a secret buffer that grew would leave its old copy there).
}

#[global_allocator]
static ALLOCATOR: Watching = Watching;

fn run_exchange(sasl: SaslConfig, mechanism: &'static str, token: Option<&str>) {
    let t0 = Instant::now();
    let config = Config::builder([("bootstrap", 9092)])
        .acks(Acks::Leader)
        .security_protocol(SecurityProtocol::SaslSsl)
        .tls(TlsConfig::with_ca("ca.pem"))
        .sasl(sasl.with_nonce_seed([1; 32]))
        .build()
        .unwrap();
    let mut s = Scripted::new(Producer::new(config, t0), t0);
    s.producer
        .send(t0, Record::new("orders", &b"v"[..]), 1)
        .unwrap();
    s.pump();
    s.answer_api_versions();
    s.answer_handshake(mechanism);
    if let Some(token) = token {
        assert_eq!(s.token_requests, 1);
        s.producer
            .handle_token(t0, Ok(OAuthToken::new(token, Duration::from_secs(60))));
        s.pump();
    }
    let first = s.take(ApiKey::SaslAuthenticate);
    if mechanism != "SCRAM-SHA-256" {
        // PLAIN and OAUTHBEARER send the credential itself: the frame holds it.
        assert!(
            holds_marker(&first.body),
            "{mechanism}: the frame carries it"
        );
        s.answer(&first, &SaslAuthenticateResponse::default());
    }
    drop(first);
    drop(s);
}

#[test]
fn credentials_are_wiped_before_their_memory_is_freed() {
    ARMED.store(true, Ordering::SeqCst);
    // The control: an unwiped copy, freed, is seen.
    drop(std::hint::black_box(MARKER.to_string()));
    assert_eq!(
        FREED_WITH_MARKER.swap(0, Ordering::SeqCst),
        1,
        "the allocator sees a freed copy"
    );
    run_exchange(SaslConfig::plain("alice", MARKER), "PLAIN", None);
    run_exchange(
        SaslConfig::scram_sha256("alice", MARKER),
        "SCRAM-SHA-256",
        None,
    );
    run_exchange(SaslConfig::oauthbearer(), "OAUTHBEARER", Some(MARKER));
    ARMED.store(false, Ordering::SeqCst);
    assert_eq!(
        FREED_WITH_MARKER.load(Ordering::SeqCst),
        0,
        "blocks freed with the credential still in them"
    );
}
