//! The Prometheus text exposition format (version 0.0.4): [`MetricsSnapshot::render_prometheus`]
//! and its `Display`, with the names of the [module docs](super).

use std::fmt::{self, Write as _};

use super::histogram::Histogram;
use super::java_named::{SeriesKind, SeriesValue};
use super::per_broker::{BrokerMetrics, ConnectionState};
use super::{MetricsSnapshot, PREFIX};

impl MetricsSnapshot {
    /// Appends the snapshot to `out` in the Prometheus text exposition format (version 0.0.4),
    /// with the names in the [module docs](super).
    pub fn render_prometheus(&self, out: &mut String) {
        // Writing to a String cannot fail.
        let _ = self.write_prometheus(out);
    }

    fn write_prometheus(&self, out: &mut String) -> fmt::Result {
        let c = &self.counters;
        let counters: [(&str, &str, u64); 16] = [
            (
                "records_sent_total",
                "Records carried by Produce requests, retries included.",
                c.records_sent,
            ),
            (
                "bytes_sent_total",
                "Record batch bytes carried by Produce requests, retries included.",
                c.bytes_sent,
            ),
            (
                "records_delivered_total",
                "Records reported delivered.",
                c.records_delivered,
            ),
            (
                "records_failed_total",
                "Records reported failed.",
                c.records_failed,
            ),
            (
                "invalid_records_total",
                "Records a broker rejected themselves (Produce record errors).",
                c.records_invalid,
            ),
            (
                "produce_requests_total",
                "Produce requests sent.",
                c.produce_requests,
            ),
            (
                "batches_sent_total",
                "Batches carried by Produce requests, retries included.",
                c.batches_sent,
            ),
            (
                "retries_total",
                "Batches put back to be sent again.",
                c.retries,
            ),
            (
                "disconnects_total",
                "Connections lost or timed out.",
                c.disconnects,
            ),
            (
                "metadata_refreshes_total",
                "Metadata responses applied.",
                c.metadata_refreshes,
            ),
            (
                "topics_recreated_total",
                "Topics seen with a new topic id (deleted and created again while in use).",
                c.topics_recreated,
            ),
            (
                "rebootstraps_total",
                "Returns to the bootstrap list.",
                c.rebootstraps,
            ),
            (
                "transactions_committed_total",
                "Transactions committed.",
                c.transactions_committed,
            ),
            (
                "transactions_aborted_total",
                "Transactions aborted.",
                c.transactions_aborted,
            ),
            (
                "malformed_responses_total",
                "Responses that could not be parsed.",
                c.malformed_responses,
            ),
            (
                "ignored_responses_total",
                "Answers to acks=0 requests, ignored.",
                c.ignored_responses,
            ),
        ];
        for (name, help, v) in counters {
            header(out, name, help, "counter")?;
            writeln!(out, "{PREFIX}{name} {v}")?;
        }
        header(
            out,
            "errors_total",
            "Partition errors in Produce responses, by error code.",
            "counter",
        )?;
        for &(code, n) in &self.errors {
            let name = code.name().unwrap_or("UNKNOWN");
            writeln!(
                out,
                "{PREFIX}errors_total{{code=\"{}\",name=\"{name}\"}} {n}",
                code.0
            )?;
        }
        header(
            out,
            "buffered_records",
            "Records accepted and not yet reported.",
            "gauge",
        )?;
        writeln!(out, "{PREFIX}buffered_records {}", self.buffered_records)?;
        header(
            out,
            "buffered_bytes",
            "Bytes of records accepted and not yet reported.",
            "gauge",
        )?;
        writeln!(out, "{PREFIX}buffered_bytes {}", self.buffered_bytes)?;
        header(
            out,
            "in_flight_requests",
            "Requests awaiting an answer, per broker.",
            "gauge",
        )?;
        for b in &self.brokers {
            write!(out, "{PREFIX}in_flight_requests{{")?;
            broker_labels(out, b)?;
            writeln!(out, "}} {}", b.in_flight_requests)?;
        }
        header(
            out,
            "connection_state",
            "1 for the state of each broker's connection.",
            "gauge",
        )?;
        for b in &self.brokers {
            for s in ConnectionState::ALL {
                write!(out, "{PREFIX}connection_state{{")?;
                broker_labels(out, b)?;
                writeln!(
                    out,
                    ",state=\"{}\"}} {}",
                    s.as_str(),
                    u8::from(b.state == s)
                )?;
            }
        }
        if let Some((id, epoch)) = self.producer_id {
            header(out, "producer_id", "The idempotent producer's id.", "gauge")?;
            writeln!(out, "{PREFIX}producer_id {id}")?;
            header(
                out,
                "producer_epoch",
                "The idempotent producer's epoch.",
                "gauge",
            )?;
            writeln!(out, "{PREFIX}producer_epoch {epoch}")?;
        }
        histogram(
            out,
            "request_latency_seconds",
            "Produce request round trips.",
            &self.request_latency,
            1e6,
        )?;
        histogram(
            out,
            "delivery_latency_seconds",
            "Age of a batch's first record at its success report, once per record.",
            &self.delivery_latency,
            1e6,
        )?;
        histogram(
            out,
            "batch_size_bytes",
            "Encoded size of closed batches.",
            &self.batch_size,
            1.0,
        )?;
        self.write_java_named(out)
    }

    /// Writes [`MetricsSnapshot::java_named`] and the per-broker latency histograms.
    fn write_java_named(&self, out: &mut String) -> fmt::Result {
        let mut last = "";
        for x in self.java_named() {
            if x.name != last {
                let kind = match x.kind {
                    SeriesKind::Counter => "counter",
                    SeriesKind::Gauge => "gauge",
                };
                header(out, x.name, x.help, kind)?;
                last = x.name;
            }
            out.push_str(PREFIX);
            out.push_str(x.name);
            if !x.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in x.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(k);
                    out.push_str("=\"");
                    escape(out, v);
                    out.push('"');
                }
                out.push('}');
            }
            writeln!(out, " {}", x.value)?;
        }
        let name = "node_request_latency_seconds";
        header(
            out,
            name,
            "Produce request round trips, per broker.",
            "histogram",
        )?;
        for b in &self.brokers {
            let h = &b.request_latency;
            for (bound, n) in h.buckets() {
                write!(out, "{PREFIX}{name}_bucket{{")?;
                broker_labels(out, b)?;
                match bound {
                    Some(x) => writeln!(out, ",le=\"{}\"}} {n}", x as f64 / 1e6)?,
                    None => writeln!(out, ",le=\"+Inf\"}} {n}")?,
                }
            }
            write!(out, "{PREFIX}{name}_sum{{")?;
            broker_labels(out, b)?;
            writeln!(out, "}} {}", h.sum() as f64 / 1e6)?;
            write!(out, "{PREFIX}{name}_count{{")?;
            broker_labels(out, b)?;
            writeln!(out, "}} {}", h.count())?;
        }
        Ok(())
    }
}

impl fmt::Display for SeriesValue {
    /// As the Prometheus text writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SeriesValue::Count(n) => write!(f, "{n}"),
            SeriesValue::Float(x) => Float(x).fmt(f),
        }
    }
}

/// A float as the Prometheus text writes it (`NaN`, `+Inf`, else Rust's shortest form).
struct Float(f64);

impl fmt::Display for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            v if v.is_nan() => f.write_str("NaN"),
            v if v == f64::INFINITY => f.write_str("+Inf"),
            v if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            v => write!(f, "{v}"),
        }
    }
}

/// A label value, escaped.
fn escape(out: &mut String, v: &str) {
    for ch in v.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

impl fmt::Display for MetricsSnapshot {
    /// The Prometheus text, as [`MetricsSnapshot::render_prometheus`] writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.render_prometheus(&mut s);
        f.write_str(&s)
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) -> fmt::Result {
    writeln!(out, "# HELP {PREFIX}{name} {help}")?;
    writeln!(out, "# TYPE {PREFIX}{name} {kind}")
}

pub(super) fn broker_labels(out: &mut String, b: &BrokerMetrics) -> fmt::Result {
    out.push_str("broker=\"");
    escape(out, &b.host);
    write!(out, ":{}\",node_id=\"{}\"", b.port, b.node_id)
}

fn histogram(
    out: &mut String,
    name: &str,
    help: &str,
    h: &Histogram,
    per_unit: f64,
) -> fmt::Result {
    header(out, name, help, "histogram")?;
    for (bound, n) in h.buckets() {
        match bound {
            Some(b) => writeln!(
                out,
                "{PREFIX}{name}_bucket{{le=\"{}\"}} {n}",
                b as f64 / per_unit
            )?,
            None => writeln!(out, "{PREFIX}{name}_bucket{{le=\"+Inf\"}} {n}")?,
        }
    }
    writeln!(out, "{PREFIX}{name}_sum {}", h.sum() as f64 / per_unit)?;
    writeln!(out, "{PREFIX}{name}_count {}", h.count())
}
