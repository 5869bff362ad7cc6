//! The wall-clock timestamp of records sent without one.
//!
//! The core never reads a clock: a record without a timestamp would be written with -1. The
//! drivers give it the wall clock at the moment the application sends it.

use std::time::{SystemTime, UNIX_EPOCH};

use producer_core::Record;

/// The wall clock in milliseconds since the Unix epoch (0 before it).
pub fn wall_clock_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        // Seconds and milliseconds separately: `as_millis` goes through a u128.
        Ok(d) => d.as_secs() as i64 * 1000 + i64::from(d.subsec_millis()),
        Err(_) => 0,
    }
}

/// Gives `record` the wall clock if it has no timestamp; whether it did so (so that a driver
/// refusing the record can hand it back as it came, see [`unfill`]).
pub fn fill(record: &mut Record) -> bool {
    if record.timestamp.is_some() {
        return false;
    }
    record.timestamp = Some(wall_clock_ms());
    true
}

/// Takes back the timestamp [`fill`] gave `record` (when `filled`), before the record goes back
/// to the application unsent.
pub fn unfill(record: &mut Record, filled: bool) {
    if filled {
        record.timestamp = None;
    }
}

/// One wall-clock reading shared by a burst of records: read at the first record that needs
/// it, so a burst costs one reading, and a burst that takes nothing none.
#[derive(Debug, Default)]
pub struct BurstClock {
    reading: Option<i64>,
}

impl BurstClock {
    /// Gives `record` this burst's reading if it has no timestamp.
    pub fn fill(&mut self, record: &mut Record) {
        if record.timestamp.is_none() {
            record.timestamp = Some(*self.reading.get_or_insert_with(wall_clock_ms));
        }
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
    fn a_burst_shares_one_reading() {
        let mut clock = BurstClock::default();
        let mut records: Vec<Record> = (0..3).map(|_| Record::new("t", "v")).collect();
        records[1] = records[1].clone().with_timestamp(5);
        for r in &mut records {
            clock.fill(r);
        }
        assert_eq!(records[1].timestamp, Some(5));
        assert_eq!(records[0].timestamp, records[2].timestamp);
        assert!(records[0].timestamp.is_some());
    }
}
