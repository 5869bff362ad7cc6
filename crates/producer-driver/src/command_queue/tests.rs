use super::*;

fn id(x: i32) -> i32 {
    x
}

fn commands(taken: &VecDeque<i32>) -> Vec<i32> {
    taken.iter().copied().collect()
}

const NO_BYTE_BOUND: usize = usize::MAX;

#[test]
fn taken_commands_count_until_released() {
    let q = CommandQueue::new(2, NO_BYTE_BOUND);
    assert!(
        q.push(1, 0, OnFull::Return, id).unwrap(),
        "first into an empty queue"
    );
    assert!(!q.push(2, 0, OnFull::Return, id).unwrap());
    assert!(matches!(
        q.push(3, 0, OnFull::Return, id),
        Err(Refused::Full(3))
    ));
    let mut taken = VecDeque::new();
    let refill = q.refill(&mut taken, 0);
    assert_eq!(commands(&taken), [1, 2]);
    assert!(!refill.wake_senders && !refill.finished);
    assert!(
        matches!(q.push(3, 0, OnFull::Return, id), Err(Refused::Full(3))),
        "still held"
    );
    taken.pop_front();
    q.release(1, 0, 0);
    assert!(q.push(3, 0, OnFull::Return, id).is_ok());
    // `taken` is not empty: nothing moves.
    let _ = q.refill(&mut taken, 0);
    assert_eq!(commands(&taken), [2]);
}

#[test]
fn control_commands_ignore_the_capacity_but_not_a_stop() {
    let q = CommandQueue::new(1, 10);
    q.push(1, 10, OnFull::Return, id).unwrap();
    assert!(q.push_control(2).is_ok(), "neither the count nor the bytes");
    assert_eq!(q.stop(), [1, 2]);
    assert!(q.is_stopped());
    assert_eq!(q.push_control(3), Err(3));
    assert!(matches!(
        q.push(4, 0, OnFull::Return, id),
        Err(Refused::Stopped(4))
    ));
    let mut v = vec![5];
    assert_eq!(
        q.push_burst(&mut v, OnFull::Return, |_| 0, |x, _| x),
        Err(Stopped)
    );
    assert_eq!(v, [5], "nothing taken after stop");
}

#[test]
fn a_burst_takes_what_fits_from_the_front() {
    let q = CommandQueue::new(3, NO_BYTE_BOUND);
    let mut v = vec![1, 2, 3, 4, 5];
    let b = q
        .push_burst(&mut v, OnFull::Return, |_| 0, |x, _| x * 10)
        .unwrap();
    assert_eq!(
        b,
        Burst {
            taken: 3,
            was_empty: true
        }
    );
    assert_eq!(v, [4, 5]);
    let b = q
        .push_burst(&mut v, OnFull::Return, |_| 0, |x, _| x * 10)
        .unwrap();
    assert_eq!(
        b,
        Burst {
            taken: 0,
            was_empty: false
        }
    );
    assert_eq!(q.stop(), [10, 20, 30]);
}

#[test]
fn waiting_senders_are_woken_once_half_the_room_is_free() {
    let q = CommandQueue::new(4, NO_BYTE_BOUND);
    let mut v = vec![1, 2, 3, 4, 5];
    q.push_burst(&mut v, OnFull::Wait, |_| 0, |x, _| x).unwrap();
    assert!(matches!(
        q.push(6, 0, OnFull::Wait, id),
        Err(Refused::Full(6))
    ));
    let mut taken = VecDeque::new();
    assert!(!q.refill(&mut taken, 0).wake_senders, "all four still held");
    taken.drain(..2);
    q.release(2, 0, 0);
    assert!(q.refill(&mut taken, 0).wake_senders, "two of four held");
    assert!(!q.refill(&mut taken, 0).wake_senders, "woken once");
}

#[test]
fn finished_once_the_senders_are_gone_and_nothing_is_left() {
    let q = CommandQueue::new(4, NO_BYTE_BOUND);
    q.push(1, 0, OnFull::Return, id).unwrap();
    q.senders_gone();
    let mut taken = VecDeque::new();
    assert!(!q.refill(&mut taken, 0).finished, "one command left");
    taken.clear();
    q.release(1, 0, 0);
    assert!(q.refill(&mut taken, 0).finished);
}

/// Bytes queued, taken and not yet handled, and held by the core share one budget: a
/// record moves from the queue's count to the core's without ever being in neither, and
/// the queue refuses what would go over the budget.
#[test]
fn queued_taken_and_core_bytes_share_the_budget() {
    let q = CommandQueue::new(100, 1000);
    assert!(q.push(1, 400, OnFull::Return, id).is_ok());
    assert!(q.push(2, 400, OnFull::Return, id).is_ok());
    assert!(
        matches!(q.push(3, 300, OnFull::Return, id), Err(Refused::Full(3))),
        "800 queued + 300 > 1000"
    );
    let mut taken = VecDeque::new();
    let _ = q.refill(&mut taken, 0);
    assert!(
        matches!(q.push(3, 300, OnFull::Return, id), Err(Refused::Full(3))),
        "taken and not handled: still counted"
    );
    // The owner hands record 1 to the core, which now holds 400 bytes: moved, not freed.
    taken.pop_front();
    q.release(1, 400, 400);
    assert!(matches!(
        q.push(3, 300, OnFull::Return, id),
        Err(Refused::Full(3))
    ));
    // A report frees the core's 400 bytes.
    let _ = q.settle(0);
    assert!(
        q.push(3, 300, OnFull::Return, id).is_ok(),
        "400 taken + 300 queued"
    );
}

/// Taken behind what the owner holds (a record held aside): the commands move from queued
/// to held, in order, and count against the capacity and the byte budget exactly as
/// before until released.
#[test]
fn taken_behind_what_is_held_stays_counted_until_released() {
    let q = CommandQueue::new(4, 1000);
    q.push(1, 300, OnFull::Return, id).unwrap();
    let mut taken = VecDeque::new();
    let _ = q.refill(&mut taken, 0);
    q.push(2, 300, OnFull::Return, id).unwrap();
    q.push(3, 300, OnFull::Return, id).unwrap();
    assert!(!q.take_behind(&mut taken, 0));
    assert_eq!(commands(&taken), [1, 2, 3]);
    assert!(
        matches!(q.push(4, 200, OnFull::Return, id), Err(Refused::Full(4))),
        "900 held + 200 > 1000"
    );
    assert!(q.push(4, 100, OnFull::Return, id).is_ok());
    assert!(
        matches!(q.push(5, 0, OnFull::Return, id), Err(Refused::Full(5))),
        "3 held + 1 queued: the capacity"
    );
    // Nothing queued: nothing moves.
    let mut more = VecDeque::from([9]);
    let _ = q.take_behind(&mut more, 0);
    let _ = q.take_behind(&mut more, 0);
    assert_eq!(commands(&more), [9, 4]);
    // The owner ends commands 1..=3 without the core (failed, never sent).
    taken.clear();
    q.release(3, 900, 0);
    assert!(
        q.push(5, 800, OnFull::Return, id).is_ok(),
        "100 held + 800 queued"
    );
}

/// A record larger than the whole budget could never fit: it goes in alone, into a queue
/// that holds no record bytes, for the core to refuse; never beside other records.
#[test]
fn a_record_larger_than_the_budget_goes_in_alone() {
    let q = CommandQueue::new(100, 1000);
    q.push(1, 10, OnFull::Return, id).unwrap();
    assert!(matches!(
        q.push(2, 5000, OnFull::Return, id),
        Err(Refused::Full(2))
    ));
    let mut taken = VecDeque::new();
    let _ = q.refill(&mut taken, 0);
    taken.pop_front();
    q.release(1, 10, 10);
    assert!(
        q.push(2, 5000, OnFull::Return, id).is_ok(),
        "the core's records do not stop it"
    );
    assert!(matches!(
        q.push(3, 1, OnFull::Return, id),
        Err(Refused::Full(3))
    ));
    let mut v = vec![4, 5];
    let b = q
        .push_burst(&mut v, OnFull::Return, |_| 5000, |x, _| x)
        .unwrap();
    assert_eq!(b.taken, 0, "not beside the queued one");
}

#[test]
fn a_burst_stops_at_the_first_record_over_the_byte_budget() {
    let q = CommandQueue::new(100, 1000);
    let mut v = vec![300, 300, 300, 300, 50];
    let b = q
        .push_burst(&mut v, OnFull::Wait, |&x| x as usize, |x, bytes| (x, bytes))
        .unwrap();
    assert_eq!(b.taken, 3);
    assert_eq!(v, [300, 50], "in order: the small one waits behind");
    let mut taken = VecDeque::new();
    let _ = q.refill(&mut taken, 0);
    assert_eq!(
        taken.iter().map(|&(_, bytes)| bytes).collect::<Vec<_>>(),
        [0, 0, 900],
        "the last command carries the burst's charge"
    );
}

/// Senders waiting for room are woken when reports free the core's bytes, even while the
/// queue itself holds nothing to take.
#[test]
fn waiting_senders_are_woken_when_the_core_frees_bytes() {
    let q = CommandQueue::new(100, 1000);
    let mut taken = VecDeque::new();
    let _ = q.refill(&mut taken, 900);
    assert!(matches!(
        q.push(1, 200, OnFull::Wait, id),
        Err(Refused::Full(1))
    ));
    assert!(!q.settle(900), "nothing freed");
    assert!(q.settle(850), "the queue holds no bytes: waiters may try");
    assert!(!q.settle(800), "woken once");
    assert!(q.push(1, 200, OnFull::Return, id).is_ok());
    assert!(matches!(
        q.push(2, 1, OnFull::Wait, id),
        Err(Refused::Full(2))
    ));
    assert!(!q.settle(700), "200 queued, 900 used: not half free");
    assert!(q.settle(200), "half free");
}

fn load(bytes: usize, delay_room: usize) -> CoreLoad {
    CoreLoad {
        bytes,
        delay_room,
        delay_room_waiting: delay_room,
    }
}

/// The core's queue-delay limit bounds the queue below `buffer_memory`: records are
/// queued while the queued and taken bytes are below the room the core publishes, for
/// single records and bursts alike; a sender refused by it is woken once a report or a
/// Produce answer grows the room, and never by a release that only moves records to the
/// core.
#[test]
fn the_queue_delay_room_holds_senders_back_below_the_byte_budget() {
    let q = CommandQueue::new(100, 10_000);
    let mut taken = VecDeque::new();
    // The core holds 1000 bytes unacknowledged and its limit is 1500: room for 500.
    let _ = q.refill(&mut taken, load(1000, 500));
    assert!(q.push(1, 300, OnFull::Return, id).is_ok());
    assert!(
        q.push(2, 400, OnFull::Return, id).is_ok(),
        "300 queued: below the room"
    );
    assert!(
        matches!(q.push(3, 1, OnFull::Wait, id), Err(Refused::Full(3))),
        "700 queued: over the room, far below the byte budget"
    );
    let mut burst = vec![4, 5];
    let b = q
        .push_burst(&mut burst, OnFull::Wait, |_| 10, |x, _| x)
        .unwrap();
    assert_eq!(b.taken, 0, "a burst is held back too");
    // The owner hands both to the core (its room shrinks by as much): no room grew.
    let _ = q.refill(&mut taken, load(1000, 500));
    taken.clear();
    q.release(2, 700, load(1700, 0));
    assert!(!q.settle(load(1700, 0)), "nothing freed, no room grew");
    assert!(
        matches!(q.push(4, 1, OnFull::Wait, id), Err(Refused::Full(4))),
        "no room: not even into the empty queue"
    );
    // A release that would raise the room does not: the rise waits for `settle`, which
    // wakes the senders refused meanwhile.
    q.release(0, 0, load(1700, 700));
    assert!(matches!(
        q.push(4, 1, OnFull::Wait, id),
        Err(Refused::Full(4))
    ));
    assert!(
        q.settle(load(1000, 700)),
        "reports freed bytes and the room grew: wake"
    );
    assert!(
        q.push(4, 5000, OnFull::Return, id).is_ok(),
        "larger than the room, into a queue below it"
    );
    assert!(matches!(
        q.push(5, 1, OnFull::Return, id),
        Err(Refused::Full(5))
    ));
    assert!(
        q.push(6, 0, OnFull::Return, id).is_ok(),
        "a command without record bytes is not held back"
    );
    // Without a limit (the room usize::MAX) the byte budget alone counts.
    assert!(!q.settle(load(1000, usize::MAX)), "no sender waits");
    assert!(
        q.push(7, 4000, OnFull::Return, id).is_ok(),
        "5000 + 4000 + 1000 <= 10 000"
    );
}

/// A Produce answer that raises the limit without freeing bytes (a transactional
/// producer's acknowledged records stay held) still wakes the waiting senders, once the
/// queue holds at most half the room.
#[test]
fn a_rise_of_the_queue_delay_room_alone_wakes_waiting_senders() {
    let q = CommandQueue::new(100, 10_000);
    let mut taken = VecDeque::new();
    let _ = q.refill(&mut taken, load(2000, 100));
    q.push(1, 100, OnFull::Return, id).unwrap();
    assert!(matches!(
        q.push(2, 100, OnFull::Wait, id),
        Err(Refused::Full(2))
    ));
    assert!(!q.settle(load(2000, 100)), "nothing changed");
    assert!(
        !q.settle(load(2000, 150)),
        "100 queued: over half the room, not yet"
    );
    assert!(q.settle(load(2000, 400)), "the room grew to 400: wake");
    assert!(q.push(2, 100, OnFull::Return, id).is_ok());
}

/// A sender that waits for room is held back by the room without the burst floor, one that
/// is refused at once by the whole room; only the first room's rise wakes waiting senders.
#[test]
fn a_sender_that_waits_is_held_back_by_the_room_without_the_burst_floor() {
    let q = CommandQueue::new(100, 10_000);
    let rooms = |bytes, delay_room, delay_room_waiting| CoreLoad {
        bytes,
        delay_room,
        delay_room_waiting,
    };
    // The burst floor lets 1000 bytes in, the drain alone 200: published before any push.
    q.start_from(rooms(0, 1000, 200));
    assert!(q.push(1, 150, OnFull::Look, id).is_ok());
    assert!(
        q.push(2, 150, OnFull::Look, id).is_ok(),
        "150 queued: below the room for waiting senders"
    );
    assert!(
        matches!(q.push(3, 100, OnFull::Wait, id), Err(Refused::Full(3))),
        "300 queued: over it"
    );
    let mut burst = vec![4, 5];
    let b = q
        .push_burst(&mut burst, OnFull::Look, |_| 10, |x, _| x)
        .unwrap();
    assert_eq!(b.taken, 0, "a waiting burst is held back too");
    assert!(
        q.push(6, 100, OnFull::Return, id).is_ok(),
        "a sender refused at once has the burst floor's room"
    );
    let b = q
        .push_burst(&mut burst, OnFull::Return, |_| 10, |x, _| x)
        .unwrap();
    assert_eq!(b.taken, 2, "and so has its burst");
    assert!(
        !q.settle(rooms(0, 5000, 200)),
        "only the room for senders refused at once grew: nobody to wake"
    );
    assert!(
        q.settle(rooms(0, 5000, 900)),
        "the waiting senders' room grew"
    );
}

/// A test clock: a fixed base plus the milliseconds set.
fn test_clock() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
        + std::time::Duration::from_millis(TEST_MS.load(Ordering::SeqCst) as u64)
}
static TEST_MS: AtomicUsize = AtomicUsize::new(0);

/// The time senders are held back runs from the first refusal as full to the next record
/// taken, by the first refusal's reason (the byte budget or the queue-delay room); each
/// refill hands the ended waits over once and shows the one running.
#[test]
fn a_wait_runs_from_the_first_refusal_to_the_next_record_taken_by_cause() {
    let ms = std::time::Duration::from_millis;
    let at = |t: usize| TEST_MS.store(t, Ordering::SeqCst);
    at(0);
    let q = CommandQueue::new(100, 1000).with_clock(test_clock);
    let mut taken = VecDeque::new();
    q.push(1, 900, OnFull::Return, id).unwrap();
    at(10);
    assert!(matches!(
        q.push(2, 200, OnFull::Wait, id),
        Err(Refused::Full(2))
    ));
    at(20);
    let mut burst = vec![3];
    assert_eq!(
        q.push_burst(&mut burst, OnFull::Return, |_| 200, id2)
            .unwrap()
            .taken,
        0
    );
    let waits = q.refill(&mut taken, 0).send_waits;
    assert_eq!(
        waits.buffer_memory,
        ms(0),
        "nothing taken since: still running"
    );
    assert_eq!(
        waits.running,
        Some((test_clock() - ms(10), SendWaitCause::BufferMemory)),
        "from the first refusal"
    );
    taken.clear();
    q.release(1, 900, 0);
    at(35);
    q.push(2, 200, OnFull::Return, id).unwrap();
    let waits = q.refill(&mut taken, 0).send_waits;
    assert_eq!(waits.buffer_memory, ms(25));
    assert_eq!(waits.queue_delay, ms(0));
    assert_eq!(waits.running, None);
    assert_eq!(
        q.refill(&mut taken, 0).send_waits,
        SendWaits::default(),
        "counted once"
    );
    // The queue-delay room: 100 bytes beside the core's.
    taken.clear();
    q.release(1, 200, load(0, 100));
    q.push(4, 150, OnFull::Return, id).unwrap();
    at(50);
    assert!(matches!(
        q.push(5, 10, OnFull::Return, id),
        Err(Refused::Full(5))
    ));
    let _ = q.refill(&mut taken, load(0, 100));
    taken.clear();
    q.release(1, 150, load(150, 0));
    let _ = q.settle(load(0, 100));
    at(57);
    let mut burst = vec![5];
    assert_eq!(
        q.push_burst(&mut burst, OnFull::Return, |_| 10, id2)
            .unwrap()
            .taken,
        1
    );
    let waits = q.refill(&mut taken, load(0, 100)).send_waits;
    assert_eq!((waits.buffer_memory, waits.queue_delay), (ms(0), ms(7)));
}

fn id2(x: i32, _bytes: usize) -> i32 {
    x
}
