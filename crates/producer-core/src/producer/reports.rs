//! Delivery reports out: the successes of a finished batch (built lazily as they are polled,
//! see [`crate::outputs`]), and failures, each handing its record back; every report releases
//! its record's buffer space.

use crate::batch::{Batch, Finished, RecordFailures, Unreported, Unrouted};
use crate::outputs::SuccessRun;
use crate::types::{Delivery, Output, ProduceError, Record};

use super::Producer;

impl<T> Producer<T> {
    /// Reports one record that never reached a batch as failed, handing back its parts, and
    /// releases its buffer space.
    pub(super) fn fail_unrouted(
        &mut self,
        topic: u32,
        partition: i32,
        p: Unrouted<T>,
        error: ProduceError,
    ) {
        self.buffered.release(p.size, 1);
        self.metrics.tick(self.now, &self.stats);
        self.metrics.records_failed(topic, 1);
        self.stats.records_failed += 1;
        let record = Record {
            topic: self.topics.name(topic),
            partition: p.explicit_partition.then_some(partition),
            key: p.key,
            value: p.value,
            headers: p.headers,
            timestamp: p.timestamp,
        };
        self.report_failure(p.opaque, error, record);
    }

    /// Queues the failure report of one record.
    fn report_failure(&mut self, opaque: T, error: ProduceError, record: Record) {
        self.outputs
            .push_back(Output::Delivery(Delivery::failed(opaque, error, record)));
    }

    /// Reports the records of a batch as failed, each with its record decoded back out of the
    /// batch, and releases the batch's buffer space. Decoding a batch this producer wrote does
    /// not fail; if it ever did, each record is still reported (its opaque value comes back)
    /// with the record's topic and partition only, so nothing is lost silently.
    pub(super) fn fail_records(
        &mut self,
        topic: u32,
        partition: i32,
        unreported: Unreported<T>,
        error: ProduceError,
    ) {
        self.fail_records_each(topic, partition, unreported, error, None);
    }

    /// [`Self::fail_records`], where the records named in `own` (by index in the batch) are
    /// reported with their own error instead of `error`.
    fn fail_records_each(
        &mut self,
        topic: u32,
        partition: i32,
        unreported: Unreported<T>,
        error: ProduceError,
        own: Option<Box<RecordFailures>>,
    ) {
        let Unreported {
            records,
            decoded,
            charged,
        } = unreported;
        // Decoded records pair with the pending entries one to one, or not at all.
        let decoded = decoded.and_then(|d| match d.len() == records.len() {
            true => Ok(d),
            false => Err(format!("{} records decoded for {}", d.len(), records.len())),
        });
        debug_assert!(
            decoded.is_ok(),
            "records of a batch did not decode: {decoded:?}"
        );
        self.buffered.release(charged, records.len());
        self.metrics.tick(self.now, &self.stats);
        self.metrics.records_failed(topic, records.len() as u64);
        self.stats.records_failed += records.len() as u64;
        if let Some(own) = &own {
            self.stats.records_invalid += own.len() as u64;
        }
        let mut own = own.map(|f| f.into_sorted().peekable());
        let mut decoded = decoded.unwrap_or_default().into_iter();
        let name = self.topics.name(topic);
        for (k, p) in records.into_iter().enumerate() {
            // Indexes were checked against the batch's record count: each is met once, in order.
            let error = match own.as_mut().and_then(|o| o.next_if(|&(i, _)| i == k)) {
                Some((_, e)) => e,
                None => error.clone(),
            };
            let d = decoded.next();
            let (key, value, headers, timestamp) = match d {
                Some(d) => (d.key, d.value, d.headers, d.timestamp),
                None => (None, None, Vec::new(), p.timestamp),
            };
            let record = Record {
                topic: name.clone(),
                partition: p.explicit_partition.then_some(partition),
                key,
                value,
                headers,
                timestamp: (timestamp != -1).then_some(timestamp),
            };
            self.report_failure(p.opaque, error, record);
        }
    }

    /// Emits the reports of the finished batches at the front of a partition, in order, and
    /// completes a close this may have been waiting for.
    pub(super) fn emit_done(&mut self, topic: u32, p: u32) {
        while let Some(batch) = self.topics.partition_mut(topic, p).pop_done() {
            self.report_finished(topic, p, batch);
        }
        self.check_closed();
    }

    /// Reports a finished batch that left its partition: its records delivered (held until
    /// their transaction ends, for a transactional producer), or failed with its error.
    pub(super) fn report_finished(&mut self, topic: u32, p: u32, batch: Batch<T>) {
        let created = batch.created();
        let attempted = batch.attempts() > 0;
        let Finished {
            result,
            records,
            charged,
            sealed,
            record_errors,
        } = batch.into_finished();
        if result.is_ok() {
            // Drained: the queue-delay limit measures the cluster's rate by these bytes.
            self.queue_delay.acknowledged(charged);
        }
        match result {
            Ok((base, append_time)) if self.txn.is_some() => {
                // Reported when the transaction ends.
                self.metrics
                    .batch_delivered(self.now.saturating_duration_since(created), records.len());
                self.txn_hold(topic, p, records, charged, sealed, base, append_time);
                self.work_pending = true;
            }
            Ok((base, append_time)) => {
                self.buffers
                    .give(sealed.into_buffer(), self.config.batch_size);
                self.buffered.release(charged, records.len());
                self.stats.records_delivered += records.len() as u64;
                self.metrics
                    .batch_delivered(self.now.saturating_duration_since(created), records.len());
                if self.config.report_successes {
                    let name = self.topics.name(topic);
                    let base = if base >= 0 { base } else { -1 };
                    let run = SuccessRun::new(records, name, p as i32, base, append_time);
                    self.outputs.push_successes(run);
                }
            }
            Err(error) => {
                // Once the producer failed for good, the transaction ends with that error.
                if self.lifecycle.fatal.is_none() {
                    self.txn_record_failed(&error, attempted);
                }
                let decoded = sealed.into_records().map_err(|e| e.to_string());
                let unreported = Unreported {
                    records,
                    decoded,
                    charged,
                };
                self.fail_records_each(topic, p as i32, unreported, error, record_errors);
            }
        }
    }
}
