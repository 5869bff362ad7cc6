//! [`ProducerMetrics`]: the producer's metrics snapshot as OpenTelemetry observable
//! instruments, read when the meter provider collects (names in [`crate::otel`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use opentelemetry::metrics::{Meter, ObservableCounter, ObservableGauge};
use opentelemetry::KeyValue;
use producer_core::metrics::{Series, SeriesKind, SeriesValue};
use producer_core::MetricsSnapshot;

/// How long one fetched snapshot serves the instruments: a collection reads every instrument
/// one after the other, and they all see the snapshot the first one fetched. A collection
/// later than this fetches a new one.
pub const SNAPSHOT_MAX_AGE: Duration = Duration::from_millis(500);

/// A series' OpenTelemetry name: KIP-714's, `org.apache.kafka.producer.` and the Java name
/// with dots (`record_send_total` is `org.apache.kafka.producer.record.send.total`).
#[must_use]
pub fn instrument_name(series_name: &str) -> String {
    format!(
        "org.apache.kafka.producer.{}",
        series_name.replace('_', ".")
    )
}

/// The samples of one snapshot, by series name.
type Samples = HashMap<&'static str, Vec<(Vec<KeyValue>, SeriesValue)>>;

/// Fetches snapshots for the instruments, one per collection ([`SNAPSHOT_MAX_AGE`]).
struct Source {
    fetch: Box<dyn Fn() -> Option<MetricsSnapshot> + Send + Sync>,
    /// How long a fetched snapshot serves.
    max_age: Duration,
    last: Mutex<Option<(Instant, Arc<Samples>)>>,
}

impl Source {
    /// The samples of a snapshot at most `max_age` old, fetching one when needed;
    /// `None` when the producer gave none.
    fn samples(&self) -> Option<Arc<Samples>> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, samples)) = &*last {
            if at.elapsed() <= self.max_age {
                return Some(samples.clone());
            }
        }
        let snapshot = (self.fetch)()?;
        let samples = Arc::new(by_name(snapshot.java_named()));
        *last = Some((Instant::now(), samples.clone()));
        Some(samples)
    }
}

fn by_name(series: Vec<Series>) -> Samples {
    let mut samples = Samples::new();
    for s in series {
        let attributes = s
            .labels
            .into_iter()
            .map(|(k, v)| KeyValue::new(k, v))
            .collect();
        samples
            .entry(s.name)
            .or_default()
            .push((attributes, s.value));
    }
    samples
}

/// An instrument, kept for as long as the registration lives.
enum Instrument {
    Counter(#[allow(dead_code)] ObservableCounter<u64>),
    Gauge(#[allow(dead_code)] ObservableGauge<f64>),
}

/// The producer's metrics as observable instruments on a [`Meter`]: every series of
/// [`MetricsSnapshot::java_named`] under its [`instrument_name`], counters as monotonic sums,
/// the rest as gauges (a NaN, Java's average of nothing, is not observed: the series has no
/// data point until it has a value), each sample's labels as attributes. When the meter
/// provider collects,
/// the instruments fetch one snapshot through the function given to
/// [`ProducerMetrics::register`] and observe its values.
///
/// The instruments are registered for the series names a snapshot has when
/// [`ProducerMetrics::register`] (or [`ProducerMetrics::register_new_names`]) runs: the
/// per-topic and per-broker names appear once the producer has a topic and a broker, so call
/// `register_new_names` after the first records were sent (an OpenTelemetry callback cannot
/// register instruments itself). Keep the value for as long as the metrics are to be exported:
/// the instruments' callbacks stay with the meter provider (OpenTelemetry cannot take them
/// back) but reach the fetch function (and the producer handle it holds) only through this
/// value; once it is dropped they observe nothing, and the handle is let go.
#[must_use = "the instruments observe nothing once this is dropped"]
pub struct ProducerMetrics {
    meter: Meter,
    source: Arc<Source>,
    instruments: Mutex<(BTreeSet<&'static str>, Vec<Instrument>)>,
}

impl std::fmt::Debug for ProducerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let registered = self
            .instruments
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .len();
        f.debug_struct("ProducerMetrics")
            .field("instruments", &registered)
            .finish_non_exhaustive()
    }
}

impl ProducerMetrics {
    /// Registers on `meter` an instrument per series name of [`MetricsSnapshot::default`] and of
    /// the snapshot `fetch` gives now. `fetch` is called on the collecting thread, at most once
    /// per [`SNAPSHOT_MAX_AGE`]; it must not wait long (the drivers' functions bound the
    /// wait), and `None` means no snapshot: the instruments observe nothing that time.
    pub fn register(
        meter: Meter,
        fetch: impl Fn() -> Option<MetricsSnapshot> + Send + Sync + 'static,
    ) -> Self {
        Self::register_with_max_age(meter, SNAPSHOT_MAX_AGE, fetch)
    }

    /// [`ProducerMetrics::register`] with a fetched snapshot serving the instruments for
    /// `max_age` instead of [`SNAPSHOT_MAX_AGE`]: longer for collections that take long (every
    /// instrument of one collection then sees one snapshot), shorter for collections closer
    /// together than that.
    pub fn register_with_max_age(
        meter: Meter,
        max_age: Duration,
        fetch: impl Fn() -> Option<MetricsSnapshot> + Send + Sync + 'static,
    ) -> Self {
        let metrics = ProducerMetrics {
            meter,
            source: Arc::new(Source {
                fetch: Box::new(fetch),
                max_age,
                last: Mutex::new(None),
            }),
            instruments: Mutex::new((BTreeSet::new(), Vec::new())),
        };
        metrics.add_names(MetricsSnapshot::default().java_named());
        metrics.register_new_names();
        metrics
    }

    /// Registers an instrument for each series name of a snapshot fetched now that has none
    /// yet; how many it registered. Call it once the producer has sent to its topics (the
    /// per-topic and per-broker names then exist); later topics and brokers come under the
    /// same names.
    pub fn register_new_names(&self) -> usize {
        match (self.source.fetch)() {
            Some(snapshot) => self.add_names(snapshot.java_named()),
            None => 0,
        }
    }

    /// How many instruments are registered.
    #[must_use]
    pub fn instruments(&self) -> usize {
        self.instruments
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .len()
    }

    fn add_names(&self, series: Vec<Series>) -> usize {
        let mut guard = self
            .instruments
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (names, instruments) = &mut *guard;
        let mut added = 0;
        for s in series {
            if !names.insert(s.name) {
                continue;
            }
            instruments.push(self.instrument(&s));
            added += 1;
        }
        added
    }

    /// The instrument of `series`' name: a counter for a counter with a whole value, else a
    /// gauge.
    fn instrument(&self, series: &Series) -> Instrument {
        let name = series.name;
        let source = Arc::downgrade(&self.source);
        let counter = matches!(
            (series.kind, series.value),
            (SeriesKind::Counter, SeriesValue::Count(_))
        );
        if counter {
            let counter = self
                .meter
                .u64_observable_counter(instrument_name(name))
                .with_description(series.help)
                .with_callback(move |observer| {
                    for (attributes, value) in samples_of(&source, name).iter() {
                        if let SeriesValue::Count(n) = value {
                            observer.observe(*n, attributes);
                        }
                    }
                })
                .build();
            Instrument::Counter(counter)
        } else {
            let gauge = self
                .meter
                .f64_observable_gauge(instrument_name(name))
                .with_description(series.help)
                .with_callback(move |observer| {
                    for (attributes, value) in samples_of(&source, name).iter() {
                        let value = value.as_f64();
                        // An average of nothing: no value to report (OpenTelemetry has no
                        // "undefined"; the SDK would drop it anyway).
                        if !value.is_nan() {
                            observer.observe(value, attributes);
                        }
                    }
                })
                .build();
            Instrument::Gauge(gauge)
        }
    }
}

/// The samples of `name` in the current snapshot (none without one, or once the registration
/// was dropped).
fn samples_of(source: &Weak<Source>, name: &str) -> Vec<(Vec<KeyValue>, SeriesValue)> {
    source
        .upgrade()
        .and_then(|source| source.samples())
        .and_then(|s| s.get(name).cloned())
        .unwrap_or_default()
}
