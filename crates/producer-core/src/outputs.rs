//! The queue of outputs awaiting [`crate::Producer::poll_output`], in order.
//!
//! The successful reports of a batch are queued as one entry and each report is built only when
//! it is polled: a report is written once, straight into the caller's hands, instead of being
//! built, queued and moved out again (an `Output` is large, and a batch has many records).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::batch::Pending;
use crate::types::{Delivery, Output, RecordMetadata};

/// Outputs in the order they were produced.
#[derive(Debug)]
pub(crate) struct OutputQueue<T> {
    queue: VecDeque<Entry<T>>,
}

#[derive(Debug)]
enum Entry<T> {
    One(Output<T>),
    Successes(SuccessRun<T>),
}

/// The success reports of one acknowledged batch, built as they are polled.
#[derive(Debug)]
pub(crate) struct SuccessRun<T> {
    records: std::vec::IntoIter<Pending<T>>,
    topic: Arc<str>,
    partition: i32,
    /// The next record's offset, or -1 when unknown (acks=0, duplicate).
    next_offset: i64,
    /// The log-append time, or -1 when the topic uses create time.
    append_time: i64,
    /// The records' transaction committed.
    committed: bool,
}

impl<T> SuccessRun<T> {
    /// The reports of `records`, acknowledged at `base_offset` (-1 unknown) and `append_time`
    /// (-1 for create time). A base offset no log can have (below -1, or one whose last record
    /// would pass `i64::MAX`: a broker's answer is not trusted) is reported as unknown: the
    /// records were acknowledged, where they landed is not known.
    pub(crate) fn new(
        records: Vec<Pending<T>>,
        topic: Arc<str>,
        partition: i32,
        base_offset: i64,
        append_time: i64,
    ) -> Self {
        let last = i64::try_from(records.len().saturating_sub(1))
            .ok()
            .and_then(|n| base_offset.checked_add(n));
        let base_offset = match last {
            Some(_) if base_offset >= 0 => base_offset,
            _ => -1,
        };
        SuccessRun {
            records: records.into_iter(),
            topic,
            partition,
            next_offset: base_offset,
            append_time,
            committed: false,
        }
    }

    /// The same reports, saying their transaction committed.
    pub(crate) fn committed(mut self) -> Self {
        self.committed = true;
        self
    }

    /// The next report, if any record is left.
    fn next_report(&mut self) -> Option<Output<T>> {
        let r = self.records.next()?;
        let offset = self.next_offset;
        if offset >= 0 {
            // `new` checked the last record's offset; past it there is no report to number.
            self.next_offset = offset.checked_add(1).unwrap_or(-1);
        }
        let timestamp = if self.append_time >= 0 {
            self.append_time
        } else {
            r.timestamp
        };
        Some(Output::Delivery(Delivery {
            opaque: r.opaque,
            result: Ok(RecordMetadata {
                topic: self.topic.clone(),
                partition: self.partition,
                offset,
                timestamp,
                committed: self.committed,
            }),
        }))
    }
}

impl<T> OutputQueue<T> {
    pub(crate) fn new() -> Self {
        OutputQueue {
            queue: VecDeque::new(),
        }
    }

    /// Queues one output.
    pub(crate) fn push_back(&mut self, output: Output<T>) {
        self.queue.push_back(Entry::One(output));
    }

    /// Queues the success reports of a batch (nothing if it has no records).
    pub(crate) fn push_successes(&mut self, run: SuccessRun<T>) {
        if run.records.len() > 0 {
            self.queue.push_back(Entry::Successes(run));
        }
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The oldest output.
    pub(crate) fn pop_front(&mut self) -> Option<Output<T>> {
        match self.queue.front_mut()? {
            Entry::One(_) => match self.queue.pop_front() {
                Some(Entry::One(output)) => Some(output),
                _ => unreachable!("the front entry is a single output"),
            },
            Entry::Successes(run) => {
                let report = run.next_report();
                if run.records.len() == 0 {
                    self.queue.pop_front();
                }
                report
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(base_offset: i64, records: u64) -> Vec<i64> {
        let pending = (0..records)
            .map(|opaque| Pending {
                opaque,
                timestamp: -1,
                explicit_partition: false,
            })
            .collect();
        let mut run = SuccessRun::new(pending, Arc::from("t"), 0, base_offset, -1);
        std::iter::from_fn(|| run.next_report())
            .map(|o| match o {
                Output::Delivery(d) => d.result.expect("acknowledged").offset,
                _ => unreachable!("a success run reports deliveries"),
            })
            .collect()
    }

    #[test]
    fn offsets_follow_the_base_offset() {
        assert_eq!(offsets(42, 3), [42, 43, 44]);
        assert_eq!(offsets(-1, 2), [-1, -1]);
        assert_eq!(
            offsets(i64::MAX - 2, 3),
            [i64::MAX - 2, i64::MAX - 1, i64::MAX]
        );
    }

    /// Fuzz regression `base-offset-overflow`: a broker's base offset whose last record would
    /// pass `i64::MAX` overflowed the count (a panic with overflow checks, a wrapped negative
    /// offset without). Acknowledged, at an offset no log can have: reported as unknown.
    #[test]
    fn an_impossible_base_offset_is_reported_unknown() {
        assert_eq!(offsets(i64::MAX - 1, 3), [-1, -1, -1]);
        assert_eq!(offsets(i64::MAX, 2), [-1, -1]);
        assert_eq!(offsets(-7, 2), [-1, -1]);
        assert_eq!(offsets(i64::MIN, 1), [-1]);
    }
}
