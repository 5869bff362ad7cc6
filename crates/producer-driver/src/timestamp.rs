//! The wall-clock timestamp of records sent without one.
//!
//! The core never reads a clock: a record without a timestamp would be written with -1. The
//! drivers give it the wall clock at the moment the application sends it.

use std::time::{SystemTime, UNIX_EPOCH};

use producer_core::Record;

/// The wall clock in milliseconds since the Unix epoch (0 before it).
#[inline]
pub fn wall_clock_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        // Seconds and milliseconds separately: `as_millis` goes through a u128.
        Ok(d) => d.as_secs() as i64 * 1000 + i64::from(d.subsec_millis()),
        Err(_) => 0,
    }
}

/// Gives `record` the wall clock if it has no timestamp; whether it did so (so that a driver
/// refusing the record can hand it back as it came, see [`unfill`]).
#[inline]
pub fn fill(record: &mut Record) -> bool {
    if record.timestamp.is_some() {
        return false;
    }
    record.timestamp = Some(wall_clock_ms());
    true
}

/// Takes back the timestamp [`fill`] gave `record` (when `filled`), before the record goes back
/// to the application unsent.
#[inline]
pub fn unfill(record: &mut Record, filled: bool) {
    if filled {
        record.timestamp = None;
    }
}

/// Gives `record` the wall-clock reading `now_ms` if it has no timestamp: for a burst of
/// records that share one reading of [`wall_clock_ms`].
#[inline]
pub fn fill_at(record: &mut Record, now_ms: i64) {
    if record.timestamp.is_none() {
        record.timestamp = Some(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_keeps_a_timestamp_and_unfill_undoes_only_its_own() {
        let mut own = Record::new("t", "v").with_timestamp(7);
        assert!(!fill(&mut own));
        unfill(&mut own, false);
        assert_eq!(own.timestamp, Some(7));

        let mut none = Record::new("t", "v");
        let before = wall_clock_ms();
        assert!(fill(&mut none));
        let ts = none.timestamp.expect("filled");
        assert!(ts >= before && ts <= wall_clock_ms());
        unfill(&mut none, true);
        assert_eq!(none.timestamp, None);
    }

    #[test]
    fn fill_at_keeps_a_timestamp() {
        let mut records = [
            Record::new("t", "v"),
            Record::new("t", "v").with_timestamp(5),
        ];
        for r in &mut records {
            fill_at(r, 9);
        }
        assert_eq!(records.map(|r| r.timestamp), [Some(9), Some(5)]);
    }
}
