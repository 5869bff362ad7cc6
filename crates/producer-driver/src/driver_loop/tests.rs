//! The command layer without a broker and without a runtime.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::Duration;

use producer_core::Config;

use crate::commands::{Answered, Channel};
use crate::{CloseOutcome, FlushOutcome};

use super::*;

/// `sync_channel(1)`, as the threaded mio producer answers.
struct Blocking;

impl Channel for Blocking {
    type Sender<V> = SyncSender<V>;

    fn send<V>(sender: SyncSender<V>, value: V) {
        let _ = sender.try_send(value);
    }
}

/// Keeps every report and event it is handed.
#[derive(Default)]
struct Recorder {
    reports: Vec<Delivery<u32>>,
    events: Vec<Event>,
}

impl Host for Recorder {
    type Replies = Answered<u32, Blocking>;

    fn deliver(&mut self, delivery: Delivery<u32>) {
        self.reports.push(delivery);
    }

    fn show(&mut self, event: &Event) {
        self.events.push(event.clone());
    }
}

fn channel<V>() -> (SyncSender<V>, Receiver<V>) {
    sync_channel(1)
}

/// Without a broker and without a runtime: a record the core refuses is reported failed at
/// once with the record; a flush waits for the record sent before it; metrics and a
/// refused transactional call are answered at once; once the core fails the record (its
/// delivery timeout) the flush is answered, and the close once the core is closed; the
/// commands queued after the loop stopped are answered too.
#[test]
fn every_command_is_applied_and_every_waiting_call_answered() {
    let config = Config::builder([("127.0.0.1", 9)])
        .max_request_size(1024)
        .build()
        .unwrap();
    let t0 = Instant::now();
    let mut core = Producer::new(config, t0);
    let queue = CommandQueue::new(64, 1 << 20);
    let mut layer = DriverLoop::new(Recorder::default(), InjectedPanics::default());
    let send = |record: Record, opaque: u32| Command::Send {
        bytes: DriverLoop::<Recorder>::charge(&record),
        record,
        opaque,
    };
    let (flushed, flush_rx) = channel();
    let (metrics, metrics_rx) = channel();
    let (init, init_rx) = channel();
    let (closed, close_rx) = channel();
    for command in [
        send(Record::new("t", "v"), 1),
        send(Record::new("t", vec![0u8; 4096]), 2),
        Command::Flush(flushed),
        Command::Metrics(metrics),
        Command::Transaction(TransactionCall::Init, init),
        Command::Close(closed),
    ] {
        let bytes = command.bytes();
        queue
            .push(command, bytes, crate::OnFull::Return, |c| c)
            .ok()
            .unwrap();
    }
    let intake = Intake {
        per_call: 16,
        release_every: 4,
    };
    assert!(!layer.take_commands(&mut core, &queue, intake, || t0));

    let reports = &layer.host().reports;
    assert_eq!(reports.len(), 1, "only the refused record is reported yet");
    let failure = reports[0].result.as_ref().unwrap_err();
    assert_eq!(reports[0].opaque, 2);
    let ProduceError::Refused(reason) = &failure.error else {
        panic!("refused at send, got {:?}", failure.error)
    };
    assert!(matches!(**reason, SendErrorReason::RecordTooLarge { .. }));
    assert_eq!(failure.record.value.as_ref().map(|v| v.len()), Some(4096));
    assert!(flush_rx.try_recv().is_err(), "record 1 has no report yet");
    assert_eq!(metrics_rx.try_recv().unwrap().buffered_records, 1);
    assert_eq!(
        init_rx.try_recv().unwrap(),
        Err(TransactionError::NotTransactional)
    );

    // No broker: the core fails record 1 once its delivery timeout passes, then closes.
    let mut t = t0;
    while !core.is_closed() {
        t += Duration::from_secs(1);
        assert!(t < t0 + Duration::from_secs(600), "the core never closed");
        if core.poll_timeout().is_some_and(|d| d <= t) {
            core.handle_timeout(t);
        }
        layer.drain(&mut core, |_, _| {});
        let _ = layer.settle(&mut core, &queue);
    }
    let reports = &layer.host().reports;
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[1].opaque, 1);
    assert!(reports[1].result.is_err(), "nothing can be delivered");
    assert_eq!(flush_rx.try_recv(), Ok(()), "the flush is done");

    let (late_flush, late_rx) = channel();
    queue.push_control(Command::Flush(late_flush)).ok().unwrap();
    queue
        .push(
            send(Record::new("t", "late"), 3),
            0,
            crate::OnFull::Return,
            |c| c,
        )
        .ok()
        .unwrap();
    let words = LastWords::default();
    layer.shutdown(&mut core, &queue, &words);
    assert_eq!(close_rx.try_recv(), Ok(()), "the close is answered");
    assert_eq!(
        late_rx.try_recv(),
        Ok(()),
        "a flush queued after the end too"
    );
    let last = layer.host().reports.last().unwrap();
    assert_eq!(last.opaque, 3);
    assert!(matches!(
        last.result.as_ref().unwrap_err().error,
        ProduceError::Closed
    ));
    // The core's last metrics count the record it took and failed (not the one it
    // refused at `send`, nor the one it never saw).
    assert_eq!(words.metrics().unwrap().counters.records_failed, 1);
    assert_eq!(words.transaction_error(), TransactionError::Closed);
}

/// The core of these tests: no broker, room for two records.
fn full_after_two(t0: Instant) -> CoreOf<Recorder> {
    let config = Config::builder([("127.0.0.1", 9)])
        .buffer_max_records(2)
        .build()
        .unwrap();
    Producer::new(config, t0)
}

fn send(id: u32) -> Command<Answered<u32, Blocking>> {
    let record = Record::new("t", format!("v{id}"));
    Command::Send {
        bytes: DriverLoop::<Recorder>::charge(&record),
        record,
        opaque: id,
    }
}

const INTAKE: Intake = Intake {
    per_call: 64,
    release_every: 4,
};

/// One turn of a driver at `t`: the stash retried (and the deadlines behind it), the core's
/// deadline, commands, outputs.
fn turn(
    layer: &mut DriverLoop<Recorder>,
    core: &mut CoreOf<Recorder>,
    queue: &CommandQueue<Cmd<Recorder>>,
    t: Instant,
) {
    layer.retry_stash(core, queue, t);
    if core.poll_timeout().is_some_and(|d| d <= t) {
        core.handle_timeout(t);
    }
    if layer.reads_commands() || layer.scans_commands() {
        while layer.take_commands(core, queue, INTAKE, || t) {}
    }
    layer.drain(core, |_, _| {});
    let _ = layer.settle(core, queue);
}

/// Every record reported once, and how each ended: `None` delivered, else the error.
fn outcomes(layer: &DriverLoop<Recorder>) -> Vec<(u32, Option<ProduceError>)> {
    let mut seen: Vec<_> = layer
        .host()
        .reports
        .iter()
        .map(|d| (d.opaque, d.result.as_ref().err().map(|f| f.error.clone())))
        .collect();
    seen.sort_by_key(|(id, _)| *id);
    let mut ids: Vec<_> = seen.iter().map(|(id, _)| *id).collect();
    ids.dedup();
    assert_eq!(ids.len(), seen.len(), "a record reported twice: {seen:?}");
    seen
}

/// The queue holds nothing any more: a record of the whole byte budget and `capacity`
/// commands fit again.
fn assert_queue_released(queue: &CommandQueue<Cmd<Recorder>>) {
    let whole = queue.byte_budget();
    assert!(
        queue
            .push(send(900), whole, crate::OnFull::Return, |c| c)
            .is_ok(),
        "bytes held"
    );
    for i in 1..queue.capacity() {
        assert!(queue
            .push(send(900 + i as u32), 0, crate::OnFull::Return, |c| c)
            .is_ok());
    }
    assert!(
        queue
            .push(send(999), 0, crate::OnFull::Return, |c| c)
            .is_err(),
        "the capacity"
    );
}

/// A `close_within` behind a record the full core refused (held aside) and records queued
/// behind it: the loop still reads it and wakes for its deadline; until then nothing is
/// ended; at it, the record held and the records queued before the close fail as never sent,
/// the core ends its own at once, the outcome counts both, every record has one report, a
/// record sent after the close is refused, and the queue's counts are all released.
#[test]
fn a_close_deadline_holds_while_the_core_is_full() {
    let t0 = Instant::now();
    let mut core = full_after_two(t0);
    let queue = CommandQueue::new(16, 1 << 20);
    let mut layer = DriverLoop::new(Recorder::default(), InjectedPanics::default());
    for id in 1..=5 {
        queue_send(&queue, send(id));
    }
    turn(&mut layer, &mut core, &queue, t0);
    assert!(layer.scans_commands(), "record 3 is held aside");
    assert_eq!(core.buffered_records(), 2);
    assert_eq!(layer.next_deadline(), None, "no timed command yet");

    let deadline = t0 + Duration::from_secs(5);
    let (closed, close_rx) = channel();
    queue
        .push_control(Command::CloseWithin(deadline, closed))
        .ok()
        .unwrap();
    queue_send(&queue, send(6));
    turn(&mut layer, &mut core, &queue, t0);
    assert_eq!(layer.next_deadline(), Some(deadline));
    turn(
        &mut layer,
        &mut core,
        &queue,
        deadline - Duration::from_millis(1),
    );
    assert!(
        layer.host().reports.is_empty(),
        "nothing ends before the deadline"
    );
    assert!(close_rx.try_recv().is_err());

    turn(&mut layer, &mut core, &queue, deadline);
    assert_eq!(layer.next_deadline(), None);
    assert!(core.is_closed(), "the close applied past its deadline");
    let seen = outcomes(&layer);
    let purged = Some(ProduceError::Purged {
        possibly_persisted: false,
    });
    for (id, error) in &seen[..5] {
        assert_eq!(error, &purged, "record {id}");
    }
    assert_eq!(seen.len(), 6);
    assert_eq!(seen[5].0, 6, "sent after the close");
    assert!(seen[5].1.is_some() && seen[5].1 != purged);
    assert!(layer.host().reports.iter().all(|d| d
        .result
        .as_ref()
        .unwrap_err()
        .record
        .value
        .is_some()));
    assert_queue_released(&queue);

    layer.shutdown(&mut core, &queue, &LastWords::default());
    // 3 failed by the loop (record 3 held, 4 and 5 queued), 2 by the core (1 and 2).
    assert_eq!(close_rx.try_recv(), Ok(CloseOutcome::new(5, 0)));
}

/// A `flush_within` behind a record held aside is answered at its deadline with what is not
/// reported (the core's two, the one held, the one queued before it), and nothing is
/// cancelled; a later `close_within` then ends the rest at its own deadline.
#[test]
fn a_flush_deadline_holds_while_the_core_is_full() {
    let t0 = Instant::now();
    let mut core = full_after_two(t0);
    let queue = CommandQueue::new(16, 1 << 20);
    let mut layer = DriverLoop::new(Recorder::default(), InjectedPanics::default());
    let (flushed, flush_rx) = channel();
    let at = t0 + Duration::from_secs(1);
    for command in [send(1), send(2), send(3), send(4)] {
        queue_send(&queue, command);
    }
    queue
        .push_control(Command::FlushWithin(at, flushed))
        .ok()
        .unwrap();
    queue_send(&queue, send(5));
    turn(&mut layer, &mut core, &queue, t0);
    assert_eq!(layer.next_deadline(), Some(at));
    assert!(flush_rx.try_recv().is_err());
    turn(&mut layer, &mut core, &queue, at);
    assert_eq!(flush_rx.try_recv(), Ok(FlushOutcome::new(4)));
    assert!(layer.host().reports.is_empty(), "nothing cancelled");
    assert!(layer.scans_commands(), "record 3 still held");
    assert_eq!(layer.next_deadline(), None);

    let (closed, close_rx) = channel();
    let end = t0 + Duration::from_secs(2);
    queue
        .push_control(Command::CloseWithin(end, closed))
        .ok()
        .unwrap();
    turn(&mut layer, &mut core, &queue, at);
    turn(&mut layer, &mut core, &queue, end);
    assert!(core.is_closed());
    let seen = outcomes(&layer);
    assert_eq!(
        seen.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert!(seen.iter().all(|(_, e)| matches!(
        e,
        Some(ProduceError::Purged {
            possibly_persisted: false
        })
    )));
    assert_queue_released(&queue);
    layer.shutdown(&mut core, &queue, &LastWords::default());
    assert_eq!(close_rx.try_recv(), Ok(CloseOutcome::new(5, 0)));
}

/// Queues a command with the bytes it carries, as a handle does.
fn queue_send(queue: &CommandQueue<Cmd<Recorder>>, command: Cmd<Recorder>) {
    let bytes = command.bytes();
    queue
        .push(command, bytes, crate::OnFull::Return, |c| c)
        .ok()
        .unwrap();
}

/// Timed commands handled in turn (no record held aside) leave nothing behind in the loop's
/// list of deadlines: it holds only those still waiting.
#[test]
fn timed_commands_handled_in_turn_are_forgotten() {
    let t0 = Instant::now();
    let mut core = full_after_two(t0);
    let queue = CommandQueue::new(1024, 1 << 20);
    let mut layer = DriverLoop::new(Recorder::default(), InjectedPanics::default());
    let mut answers = Vec::new();
    for _ in 0..100 {
        let (flushed, rx) = channel();
        let at = t0 + Duration::from_secs(1);
        queue
            .push_control(Command::FlushWithin(at, flushed))
            .ok()
            .unwrap();
        answers.push(rx);
        turn(&mut layer, &mut core, &queue, t0);
        assert!(layer.behind.is_empty());
    }
    turn(&mut layer, &mut core, &queue, t0 + Duration::from_secs(1));
    assert!(answers
        .iter()
        .all(|rx| rx.try_recv() == Ok(FlushOutcome::new(0))));
}
