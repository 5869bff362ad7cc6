//! The command layer without a broker and without a runtime.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::Duration;

use producer_core::Config;

use crate::commands::{Answered, Channel};

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
        queue.push(command, bytes, false, |c| c).ok().unwrap();
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
        .push(send(Record::new("t", "late"), 3), 0, false, |c| c)
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
