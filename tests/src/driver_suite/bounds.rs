//! The driver's command queue counts bytes against `buffer.memory`: what it queues and what
//! the core holds stay within the budget together, whatever the queue's capacity in commands.

use std::time::Duration;

use producer_core::{Config, Record};

use crate::drive::Driver;
use crate::running::{Options, Running, TryRefused, HANG_GUARD};
use crate::workload::dead_port;

/// Nothing can be delivered (no broker listens), the queue has room for 8,192 commands, and
/// `buffer.memory` is 512 KiB: records of 10 KB are refused as full once about 52 of them are
/// queued or held, not 8,192 (80 MB); tokio's waiting `send` goes on once reports free bytes.
/// Every record accepted is still reported.
pub fn the_command_queue_counts_bytes_against_buffer_memory(driver: Driver) {
    const BUDGET: usize = 512 * 1024;
    const VALUE: usize = 10_000;
    let config = Config::builder([("127.0.0.1", dead_port())])
        .max_request_size(256 * 1024)
        .buffer_memory(BUDGET)
        // What is measured here is `buffer.memory` alone, not the queue-delay limit below it.
        .queue_delay_target(Duration::ZERO)
        // Long enough that no record fails (freeing its bytes) while the test fills the
        // queue, whatever the machine's load; the close then waits this long.
        .max_block(Duration::from_secs(3))
        .request_timeout(Duration::from_secs(1))
        .delivery_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let p = Running::start(driver, Options::new(config));
    let value = bytes::Bytes::from(vec![b'v'; VALUE]);
    let mut accepted = 0u64;
    let full = loop {
        match p.try_send(Record::new("t", value.clone()), accepted) {
            Ok(()) => accepted += 1,
            Err(TryRefused::Full(r)) => break r,
            Err(TryRefused::Closed(_)) => panic!("closed"),
        }
        assert!(accepted < 8192, "the byte budget did not hold");
    };
    assert_eq!(full.value, Some(value.clone()), "handed back");
    // Each record counts at least its value: the queue and the core together hold at most the
    // budget, and one record the driver holds aside while the core is full.
    assert!(
        accepted as usize * VALUE <= BUDGET + VALUE,
        "{accepted} records of {VALUE} bytes accepted for a budget of {BUDGET}"
    );
    assert!(
        accepted as usize * VALUE >= BUDGET / 2,
        "only {accepted} records accepted"
    );
    if driver == Driver::Tokio {
        // tokio's `send` waits for room instead: it is woken once the records the core holds
        // fail (no broker: after `max.block.ms`) and their bytes are free again.
        p.send(Record::new("t", value.clone()), accepted)
            .expect("woken when the core's bytes are freed");
        accepted += 1;
    }
    p.close();
    let mut reported = 0;
    while reported < accepted {
        let r = p
            .next_report(HANG_GUARD)
            .expect("a report for every record");
        assert!(r.result.is_err(), "nothing can be delivered");
        reported += 1;
    }
    assert!(p.reports().is_empty());
}
