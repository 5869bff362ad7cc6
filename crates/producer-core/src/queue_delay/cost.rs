//! What a Produce request costs the broker that serves it, per request and per byte: whether
//! the queue-delay limit counts `linger` while no batch waits for it (see the parent module's
//! "Linger, and what a request costs").

use std::time::Duration;

/// How many answers the fit remembers: each answer's weight falls by `1 / COST_MEMORY` with
/// every later one (about half a second of answers on one Kafka node, which answered 500-1,200
/// Produce requests a second in the runs below).
const COST_MEMORY: f64 = 512.0;

/// Answers (by weight) the fit needs before it says anything.
const COST_MIN_ANSWERS: f64 = 64.0;

/// The fit says nothing while the requests' sizes spread less than this share of their mean
/// (standard deviation over mean): with every request alike, what they cost per request and
/// per byte cannot be told apart.
const COST_MIN_SPREAD: f64 = 0.1;

/// The per-request share of a request's cost at or above which the brokers' work is counted
/// as per request (larger requests drain more), and below [`PER_BYTE_BELOW`] as per byte; in
/// between the last verdict stands. Measured (`bench_e2e worker`, fits over half a second of
/// answers): one Kafka node recompressing every batch to gzip, 0.06-0.35 (about 300 us a
/// request and 40 us a KB, at 24-40 KB a request); the same node uncompressed with 1000 B
/// records at the shipped defaults, 0.34-0.85 (450-1,600 us a request and 1.1-2.4 us a KB, at
/// 150-880 KB a request).
const PER_REQUEST_FROM: f64 = 0.45;

/// See [`PER_REQUEST_FROM`].
const PER_BYTE_BELOW: f64 = 0.35;

/// A least-squares fit, over the recent answers (weighted by [`COST_MEMORY`]), of the time a
/// broker took to serve a Produce request on `bytes`: `per_request + per_byte x bytes`. Only a
/// request written while the one before it on its connection was in flight is measured: a
/// Kafka broker reads a connection's next request once it has answered the one before, so the
/// time from that answer to this one is what serving this one took (and nothing of the
/// network's round trip or of the producer's own pauses before writing it).
#[derive(Debug)]
pub(super) struct RequestCost {
    /// The sums of the weighted fit: weight, bytes, seconds, bytes squared, bytes x seconds.
    weight: f64,
    bytes: f64,
    seconds: f64,
    bytes_squared: f64,
    bytes_seconds: f64,
    /// The verdict: the brokers' work is per request. True until the fit says otherwise.
    per_request: bool,
}

impl RequestCost {
    pub(super) fn new() -> Self {
        RequestCost {
            weight: 0.0,
            bytes: 0.0,
            seconds: 0.0,
            bytes_squared: 0.0,
            bytes_seconds: 0.0,
            per_request: true,
        }
    }

    /// A broker served a Produce request acknowledging `bytes` in `time`. Call it for every
    /// answer whose request waited behind the one before on its connection, with the time
    /// since that one's answer; the verdict ([`RequestCost::per_request`]) may change.
    pub(super) fn served(&mut self, bytes: usize, time: Duration) {
        if bytes == 0 {
            return;
        }
        let keep = 1.0 - 1.0 / COST_MEMORY;
        let (x, y) = (bytes as f64, time.as_secs_f64());
        self.weight = self.weight * keep + 1.0;
        self.bytes = self.bytes * keep + x;
        self.seconds = self.seconds * keep + y;
        self.bytes_squared = self.bytes_squared * keep + x * x;
        self.bytes_seconds = self.bytes_seconds * keep + x * y;
        match self.per_request_share() {
            Some(share) if share >= PER_REQUEST_FROM => self.per_request = true,
            Some(share) if share < PER_BYTE_BELOW => self.per_request = false,
            _ => {}
        }
    }

    /// Whether the brokers' work is per request, as last told by the fit: larger requests
    /// drain more. True until the fit has enough answers of spread sizes to say otherwise.
    pub(super) fn per_request(&self) -> bool {
        self.per_request
    }

    /// Whether the fit has the answers it needs ([`COST_MIN_ANSWERS`]) to say anything.
    pub(super) fn fitted(&self) -> bool {
        self.weight >= COST_MIN_ANSWERS
    }

    /// The share of the mean request's serving time that its fixed per-request part takes
    /// (0 to 1); `None` while the fit has too few answers, or sizes too alike.
    pub(super) fn per_request_share(&self) -> Option<f64> {
        if !self.fitted() {
            return None;
        }
        let mean_bytes = self.bytes / self.weight;
        let mean_seconds = self.seconds / self.weight;
        let variance = self.bytes_squared / self.weight - mean_bytes * mean_bytes;
        let covariance = self.bytes_seconds / self.weight - mean_bytes * mean_seconds;
        let spread = COST_MIN_SPREAD * mean_bytes;
        if variance <= spread * spread || mean_seconds <= 0.0 {
            return None;
        }
        let per_byte = covariance / variance;
        let per_request = mean_seconds - per_byte * mean_bytes;
        Some((per_request / mean_seconds).clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `n` requests of 10-50 KB, each taking `per_request` plus `per_kb` per KB.
    fn serve(cost: &mut RequestCost, n: usize, per_request: Duration, per_kb: Duration) {
        for i in 0..n {
            let kb = 10 + (i * 7) % 41;
            cost.served(kb * 1000, per_request + per_kb * kb as u32);
        }
    }

    #[test]
    fn work_per_byte_and_per_request_are_told_apart() {
        let (ms_2, us_1, us_40) = (
            Duration::from_millis(2),
            Duration::from_micros(1),
            Duration::from_micros(40),
        );
        let mut cost = RequestCost::new();
        assert!(cost.per_request(), "per request until measured");
        serve(&mut cost, 32, Duration::ZERO, us_40);
        assert!(cost.per_request(), "too few answers to say");
        serve(&mut cost, 100, Duration::ZERO, us_40);
        assert!(!cost.per_request(), "40 us a KB, nothing per request");
        serve(&mut cost, 2000, ms_2, us_1);
        assert!(cost.per_request(), "2 ms a request, 1 us a KB");
        // 300 us a request and 40 us a KB at 30 KB: a fifth per request (one Kafka node
        // recompressing to gzip).
        serve(&mut cost, 2000, Duration::from_micros(300), us_40);
        assert!(!cost.per_request());
    }

    #[test]
    fn requests_all_alike_leave_the_verdict_as_it_was() {
        let mut cost = RequestCost::new();
        for _ in 0..1000 {
            cost.served(30_000, Duration::from_millis(1));
        }
        assert!(cost.per_request());
        assert_eq!(cost.per_request_share(), None);
        serve(&mut cost, 2000, Duration::ZERO, Duration::from_micros(40));
        assert!(!cost.per_request());
        for _ in 0..5000 {
            cost.served(30_000, Duration::from_millis(1));
        }
        assert!(!cost.per_request(), "alike sizes say nothing either way");
    }

    #[test]
    fn answers_that_acknowledge_nothing_are_not_counted() {
        let mut cost = RequestCost::new();
        for _ in 0..1000 {
            cost.served(0, Duration::from_millis(5));
        }
        assert_eq!(cost.weight, 0.0);
    }
}
