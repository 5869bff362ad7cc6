//! What the broker knows about every record, and the checks each delivery report must pass.
//!
//! A record may have been written when some Produce request carrying it was sent and not
//! answered with an error for its partition (lost with its connection, timed out, answered
//! ambiguously, acks=0) or answered with success. A report that says otherwise lies: a failure
//! with `possibly_persisted = false` for a record that may have been written, `true` for one
//! never sent, a failure for a record the broker acknowledged, a success nobody acknowledged.

use std::collections::HashMap;
use std::sync::Arc;

use producer_core::{Delivery, ProduceError, Record};

use super::broker::{Outcome, ProduceExchange};

#[derive(Debug)]
struct Rec {
    topic: Arc<str>,
    key: Option<bytes::Bytes>,
    value: Option<bytes::Bytes>,
    reported: bool,
    /// Carried by some Produce request.
    transmitted: bool,
    /// Attempts sent and not yet answered or lost.
    pending: u32,
    /// Some attempt may have been written (or was: `acked`).
    possibly_written: bool,
    /// An answer the producer could read said written (error 0).
    acked: bool,
    /// Some entry of some answer (well-formed or not) said written or duplicate.
    ok_seen: bool,
    /// Partitions it was sent to.
    partitions: Vec<(String, i32)>,
}

/// The records accepted by `send`, by opaque id.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    records: HashMap<u64, Rec>,
    /// acks=0: a success needs only that the record was sent.
    pub(crate) acks_zero: bool,
    /// Transactional: acknowledged records of an aborted or failed transaction may fail.
    pub(crate) transactional: bool,
    pub(crate) delivered: u64,
    pub(crate) failed: u64,
}

/// A broken rule: its class (for the report) and what happened.
pub(crate) type Violation = (&'static str, String);

impl Ledger {
    pub(crate) fn new(acks_zero: bool, transactional: bool) -> Self {
        Ledger {
            acks_zero,
            transactional,
            ..Ledger::default()
        }
    }

    pub(crate) fn accept(&mut self, id: u64, record: &Record) {
        self.records.insert(
            id,
            Rec {
                topic: record.topic.clone(),
                key: record.key.clone(),
                value: record.value.clone(),
                reported: false,
                transmitted: false,
                pending: 0,
                possibly_written: false,
                acked: false,
                ok_seen: false,
                partitions: Vec::new(),
            },
        );
    }

    pub(crate) fn accepted(&self) -> usize {
        self.records.len()
    }

    pub(crate) fn unreported(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .records
            .iter()
            .filter(|(_, r)| !r.reported)
            .map(|(id, _)| *id)
            .collect();
        v.sort_unstable();
        v
    }

    /// A Produce request carrying these batches was sent.
    pub(crate) fn sent(&mut self, x: &ProduceExchange) -> Result<(), Violation> {
        for b in &x.batches {
            for id in &b.ids {
                let Some(r) = self.records.get_mut(id) else {
                    return Err((
                        "phantom-record",
                        format!("Produce carried record {id}, never accepted"),
                    ));
                };
                if r.reported {
                    return Err((
                        "sent-after-report",
                        format!(
                            "record {id} sent to {}-{} after its report",
                            b.topic, b.partition
                        ),
                    ));
                }
                r.transmitted = true;
                r.pending += 1;
                let p = (b.topic.clone(), b.partition);
                if !r.partitions.contains(&p) {
                    r.partitions.push(p);
                }
            }
        }
        Ok(())
    }

    /// The producer read the whole answer to `x`, with the right correlation id. The outcomes
    /// are what it learned of each batch whose partition the answer named once (`x.outcomes`); an
    /// answer it cannot read per partition leaves each attempt possibly written.
    pub(crate) fn answered(&mut self, x: &ProduceExchange) {
        for (i, b) in x.batches.iter().enumerate() {
            let outcome = if !x.acks_zero { x.outcomes[i] } else { None };
            for id in &b.ids {
                let Some(r) = self.records.get_mut(id) else {
                    continue;
                };
                r.pending = r.pending.saturating_sub(1);
                r.ok_seen |= x.ok_seen[i] && !x.acks_zero;
                match outcome {
                    Some(Outcome::Written) => {
                        r.acked = true;
                        r.possibly_written = true;
                    }
                    Some(Outcome::Duplicate) => r.possibly_written = true,
                    Some(Outcome::Rejected) => {}
                    None => r.possibly_written = true,
                }
            }
        }
    }

    /// The answer to `x` reached the producer after bytes that were not the broker's (garbage
    /// on its connection): what the producer read in its place may say anything, success
    /// included, so the attempt may have been written and a success report is not a lie.
    pub(crate) fn garbled(&mut self, x: &ProduceExchange) {
        self.lost(x);
        if x.acks_zero {
            return;
        }
        for b in &x.batches {
            for id in &b.ids {
                if let Some(r) = self.records.get_mut(id) {
                    r.ok_seen = true;
                }
            }
        }
    }

    /// The answer to `x` never reached the producer (connection lost, acks=0).
    pub(crate) fn lost(&mut self, x: &ProduceExchange) {
        for b in &x.batches {
            for id in &b.ids {
                if let Some(r) = self.records.get_mut(id) {
                    r.pending = r.pending.saturating_sub(1);
                    r.possibly_written = true;
                }
            }
        }
    }

    /// Checks one delivery report.
    pub(crate) fn report(&mut self, d: &Delivery<u64>) -> Result<(), Violation> {
        let id = d.opaque;
        let acks_zero = self.acks_zero;
        let transactional = self.transactional;
        let Some(r) = self.records.get_mut(&id) else {
            return Err((
                "phantom-report",
                format!("report for record {id}, never accepted"),
            ));
        };
        if r.reported {
            return Err((
                "reported-twice",
                format!("record {id} reported twice: {:?}", d.result),
            ));
        }
        r.reported = true;
        let maybe_written = r.possibly_written || r.pending > 0;
        match &d.result {
            Ok(meta) => {
                self.delivered += 1;
                if !(r.ok_seen || (acks_zero && r.transmitted)) {
                    return Err((
                        "unacknowledged-success",
                        format!(
                            "record {id} reported delivered ({}-{} @{}), no broker said so",
                            meta.topic, meta.partition, meta.offset
                        ),
                    ));
                }
                if meta.topic != r.topic || !r.partitions.iter().any(|(_, p)| *p == meta.partition)
                {
                    return Err((
                        "wrong-metadata",
                        format!(
                            "record {id} of {} sent to {:?} reported delivered to {}-{}",
                            r.topic, r.partitions, meta.topic, meta.partition
                        ),
                    ));
                }
            }
            Err(f) => {
                self.failed += 1;
                if f.record.topic != r.topic || f.record.key != r.key || f.record.value != r.value {
                    return Err((
                        "record-not-handed-back",
                        format!(
                            "record {id} failed ({}) but the record handed back differs",
                            f.error
                        ),
                    ));
                }
                if matches!(f.error, ProduceError::TransactionAborted) {
                    return Ok(());
                }
                if r.acked && !transactional {
                    return Err((
                        "acknowledged-reported-failed",
                        format!(
                            "record {id} was acknowledged by the broker, reported failed: {:?}",
                            f.error
                        ),
                    ));
                }
                let flag = f.error.possibly_persisted();
                if maybe_written && !flag {
                    return Err((
                        "persisted-flag-false",
                        format!(
                            "record {id} may have been written (acked {}, pending {}), reported {:?}",
                            r.acked, r.pending, f.error
                        ),
                    ));
                }
                if !r.transmitted && flag {
                    return Err((
                        "persisted-flag-true",
                        format!("record {id} was never sent, reported {:?}", f.error),
                    ));
                }
            }
        }
        Ok(())
    }
}
