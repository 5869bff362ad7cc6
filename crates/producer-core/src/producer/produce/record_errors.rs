//! A batch the broker rejected because of some of its records (KIP-467): the response's record
//! errors name them by index in the batch, so each of those fails with its own
//! [`ProduceError::InvalidRecord`] and the rest of the batch with
//! [`ProduceError::BatchRejected`], as Java's producer does (`Sender.failBatch` with its record
//! exceptions): a record named alone takes the partition's error code, several named take
//! `INVALID_RECORD` each (the one code cannot tell their reasons apart; their messages do).
//! Only a batch that fails for good reads them: record errors on a success or a
//! retried error are ignored, as Java ignores them.
//!
//! Bytes from the network decide nothing else: an entry whose index names no record of the
//! batch is left out, of several entries for one record the first counts, and when no entry is
//! left the whole batch fails with the partition's error ([`ProduceError::Broker`]) as if the
//! response had carried none. Every record is reported either way.

use crate::batch::RecordFailures;
use crate::protocol::produce::PartitionProduceResponse;
use crate::types::ProduceError;
use crate::ErrorCode;

use super::super::Producer;

/// The error of the records the response does not name and the errors of those it does, for
/// a batch of `record_count` records; `None` when the response names none of them.
pub(super) fn record_failures(
    r: &PartitionProduceResponse,
    record_count: usize,
    possibly_persisted: bool,
) -> Option<(ProduceError, RecordFailures)> {
    let code = r.error_code;
    let entries = r.record_errors.iter().map(|e| {
        // The record's own message, else the partition's (Java's order).
        let message = e
            .message
            .clone()
            .filter(|m| !m.is_empty())
            .or_else(|| r.error_message.clone());
        let error = ProduceError::InvalidRecord {
            code,
            batch_index: e.batch_index,
            message,
            possibly_persisted,
        };
        (i64::from(e.batch_index), error)
    });
    let mut own = RecordFailures::new(record_count, entries)?;
    // One code for several records says nothing of each: they are invalid records, and
    // their messages say why (Java's `InvalidRecordException` for each).
    if own.len() > 1 {
        for e in own.errors_mut() {
            if let ProduceError::InvalidRecord { code, .. } = e {
                *code = ErrorCode::INVALID_RECORD;
            }
        }
    }
    let others = ProduceError::BatchRejected {
        code,
        invalid_records: u32::try_from(own.len()).unwrap_or(u32::MAX),
        message: r.error_message.clone(),
        possibly_persisted,
    };
    Some((others, own))
}

impl<T> Producer<T> {
    /// Fails the batch at index `i` for good with the answer `r` (a non-retriable error):
    /// with `error` for all its records, or, when `r` names some of them in its record errors,
    /// per record. Under idempotence the partition restarts its sequence after it either way.
    /// A batch rejected for its records (record errors, or `rejected`: the retry table's
    /// [`crate::classify::Action::Reject`] for a validation code) is a certain hole unless an
    /// earlier attempt may have been written: the broker validates a batch
    /// before its sequence and appends nothing of a batch it rejects, so the batches sent
    /// behind it are restamped without waiting for them to fail under the old epoch.
    pub(super) fn fail_answered(
        &mut self,
        t: u32,
        p: u32,
        i: usize,
        r: &PartitionProduceResponse,
        error: ProduceError,
        rejected: bool,
    ) {
        let idem = self.config.idempotence;
        let pq = self.topics.partition_mut(t, p);
        let b = pq.batch_mut(i);
        let possibly_persisted = b.possibly_persisted();
        let mut rejected = rejected;
        let error = match r.record_errors.is_empty() {
            true => error,
            false => {
                let count = usize::try_from(b.record_count()).unwrap_or(0);
                match record_failures(r, count, possibly_persisted) {
                    Some((others, own)) => {
                        b.set_record_errors(own);
                        rejected = true;
                        others
                    }
                    None => error,
                }
            }
        };
        if rejected && !possibly_persisted {
            pq.fail_rejected(i, error, idem);
        } else {
            pq.fail_sent(i, error, idem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::produce::RecordError;

    fn response(errors: &[(i32, Option<&str>)], message: Option<&str>) -> PartitionProduceResponse {
        PartitionProduceResponse {
            index: 0,
            error_code: ErrorCode::INVALID_RECORD,
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: -1,
            record_errors: errors
                .iter()
                .map(|&(batch_index, m)| RecordError {
                    batch_index,
                    message: m.map(String::from),
                })
                .collect(),
            error_message: message.map(String::from),
            current_leader: None,
        }
    }

    fn invalid(batch_index: i32, message: Option<&str>) -> ProduceError {
        ProduceError::InvalidRecord {
            code: ErrorCode::INVALID_RECORD,
            batch_index,
            message: message.map(String::from),
            possibly_persisted: false,
        }
    }

    fn split(
        r: &PartitionProduceResponse,
        count: usize,
    ) -> Option<(ProduceError, Vec<(usize, ProduceError)>)> {
        record_failures(r, count, false).map(|(o, own)| (o, own.into_sorted().collect()))
    }

    #[test]
    fn named_records_get_their_own_error_and_the_others_the_batch_error() {
        let r = response(
            &[(3, Some("no key 3")), (1, Some("no key 1"))],
            Some("2 errors"),
        );
        let (others, own) = split(&r, 5).unwrap();
        assert_eq!(
            others,
            ProduceError::BatchRejected {
                code: ErrorCode::INVALID_RECORD,
                invalid_records: 2,
                message: Some("2 errors".into()),
                possibly_persisted: false,
            }
        );
        assert_eq!(
            own,
            [
                (1, invalid(1, Some("no key 1"))),
                (3, invalid(3, Some("no key 3")))
            ]
        );
    }

    #[test]
    fn a_record_without_a_message_takes_the_partition_message() {
        let r = response(&[(0, None), (1, Some(""))], Some("summary"));
        let (_, own) = split(&r, 2).unwrap();
        assert_eq!(
            own,
            [
                (0, invalid(0, Some("summary"))),
                (1, invalid(1, Some("summary")))
            ]
        );
        let r = response(&[(0, None)], None);
        assert_eq!(split(&r, 1).unwrap().1, [(0, invalid(0, None))]);
    }

    #[test]
    fn indexes_naming_no_record_are_left_out_and_duplicates_keep_the_first() {
        let r = response(
            &[
                (-1, Some("negative")),
                (4, Some("past the end")),
                (i32::MAX, Some("far past the end")),
                (2, Some("first")),
                (2, Some("second")),
            ],
            None,
        );
        let (others, own) = split(&r, 4).unwrap();
        assert_eq!(own, [(2, invalid(2, Some("first")))]);
        assert!(matches!(
            others,
            ProduceError::BatchRejected {
                invalid_records: 1,
                ..
            }
        ));
    }

    #[test]
    fn one_named_record_keeps_the_partition_code_several_are_invalid_records() {
        let mut r = response(&[(1, Some("too old"))], None);
        r.error_code = ErrorCode::INVALID_TIMESTAMP;
        let (others, own) = split(&r, 3).unwrap();
        assert!(matches!(
            own[..],
            [(
                1,
                ProduceError::InvalidRecord {
                    code: ErrorCode::INVALID_TIMESTAMP,
                    ..
                }
            )]
        ));
        assert!(matches!(
            others,
            ProduceError::BatchRejected {
                code: ErrorCode::INVALID_TIMESTAMP,
                ..
            }
        ));
        let mut r = response(&[(0, Some("too old")), (2, Some("no key"))], None);
        r.error_code = ErrorCode::INVALID_TIMESTAMP;
        let (_, own) = split(&r, 3).unwrap();
        assert_eq!(
            own,
            [
                (0, invalid(0, Some("too old"))),
                (2, invalid(2, Some("no key")))
            ]
        );
    }

    #[test]
    fn no_usable_entry_means_no_per_record_errors() {
        assert!(split(&response(&[], Some("m")), 3).is_none());
        assert!(split(&response(&[(3, Some("x")), (-2, None)], None), 3).is_none());
    }

    #[test]
    fn an_earlier_attempt_that_may_have_been_written_is_said_on_every_record() {
        let r = response(&[(0, Some("bad"))], None);
        let (others, own) = record_failures(&r, 2, true).unwrap();
        assert!(matches!(
            others,
            ProduceError::BatchRejected {
                possibly_persisted: true,
                ..
            }
        ));
        let own: Vec<_> = own.into_sorted().collect();
        assert!(matches!(
            own[0].1,
            ProduceError::InvalidRecord {
                possibly_persisted: true,
                ..
            }
        ));
    }
}
