//! The tables: printed to the terminal and rendered in Markdown between the README's markers.

use crate::cluster::Broker;
use crate::coordinator::{Figures, Row};
use crate::payloads::{Codec, Workload};
use crate::plan::Plan;
use crate::{Error, BASELINE, BROKERS};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// The title of a workload's table.
pub(crate) fn describe(w: Workload) -> String {
    format!(
        "{} B values, {} keys{}",
        w.value_bytes,
        if w.keyed { "8-byte" } else { "null" },
        match w.codec {
            Codec::None => String::new(),
            c => format!(", {}", c.name()),
        }
    )
}

/// The note under a table for a row some of whose runs gave no figures.
pub(crate) fn partial_note(p: &str, row: &Row) -> Option<String> {
    (!row.errors.is_empty() && row.figures.is_some()).then(|| {
        format!(
            "{p}: {} of {} run(s) gave no figures: {}",
            row.errors.len(),
            row.runs,
            row.errors[0]
        )
    })
}

pub(crate) fn print_table(
    name: &str,
    w: Workload,
    producers: &[String],
    rows: &BTreeMap<&str, Row>,
) {
    println!();
    println!("== {name}: {} ==", describe(w));
    println!(
        "{:<16} {:>10} {:>8} {:>11} {:>9} {:>7} {:>6} {:>10} | {:>7} {:>7} {:>7} {:>7}",
        "producer",
        "records/s",
        "MB/s",
        "CPU-s/M",
        "RSS MB",
        "failed",
        "lost",
        "broker CPU",
        "x rate",
        "x MB/s",
        "x CPU",
        "x RSS"
    );
    let base = rows.get(BASELINE).and_then(|r| r.figures.as_ref());
    let mut notes = Vec::new();
    for p in producers {
        let Some(row) = rows.get(p.as_str()) else {
            continue;
        };
        notes.extend(partial_note(p, row));
        let Some(x) = row.figures.as_ref() else {
            println!("{p:<16} no figures: {}", row.errors[0]);
            continue;
        };
        let ratio = |get: fn(&Figures) -> f64| {
            base.map_or("-".to_string(), |b| format!("{:.2}", get(x) / get(b)))
        };
        println!(
            "{:<16} {:>10.0} {:>8.1} {:>11.3} {:>9.1} {:>7.0} {:>6.0} {:>10.3} | {:>7} {:>7} {:>7} {:>7}",
            p,
            x.rate,
            x.mbps,
            x.cpu_per_m,
            x.rss_mb,
            x.failed,
            x.lost,
            x.broker_cpu_per_m,
            ratio(|f| f.rate),
            ratio(|f| f.mbps),
            ratio(|f| f.cpu_per_m),
            ratio(|f| f.rss_mb)
        );
    }
    for n in notes {
        println!("  note: {n}");
    }
}

/// The p99 of a latency row over librdkafka's, or `-`.
pub(crate) fn p99_ratio(x: &Figures, base: Option<&Figures>) -> String {
    match (x.latency_ms, base.and_then(|b| b.latency_ms)) {
        (Some(l), Some(b)) => format!("{:.2}", l[1] / b[1]),
        _ => "-".to_string(),
    }
}

pub(crate) fn print_latency_table(
    name: &str,
    rate: f64,
    producers: &[String],
    rows: &BTreeMap<&str, Row>,
) {
    println!();
    println!(
        "== {name}: 100 B values, null keys, open loop at {rate:.0} records/s, delivery latency =="
    );
    println!(
        "{:<16} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>6} | {:>7}",
        "producer",
        "target/s",
        "achieved/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "failed",
        "lost",
        "x p99"
    );
    let base = rows.get(BASELINE).and_then(|r| r.figures.as_ref());
    let mut notes = Vec::new();
    for p in producers {
        let Some(row) = rows.get(p.as_str()) else {
            continue;
        };
        notes.extend(partial_note(p, row));
        let Some(x) = row.figures.as_ref() else {
            println!("{p:<16} no figures: {}", row.errors[0]);
            continue;
        };
        let [p50, p99, p999] = x.latency_ms.unwrap_or([f64::NAN; 3]);
        println!(
            "{:<16} {:>10.0} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>7.0} {:>6.0} | {:>7}",
            p,
            rate,
            x.achieved,
            p50,
            p99,
            p999,
            x.failed,
            x.lost,
            p99_ratio(x, base)
        );
    }
    for n in notes {
        println!("  note: {n}");
    }
}

/// A table cell of a row that gave no figures: the reason, on one line, without `|`.
pub(crate) fn md_reason(row: &Row) -> String {
    format!(
        "no figures: {}",
        row.errors[0].replace('|', "/").replace('\n', " ")
    )
}

/// One workload's rows of the README's throughput table.
pub(crate) fn markdown_throughput(
    w: Workload,
    producers: &[String],
    rows: &BTreeMap<&str, Row>,
) -> String {
    let base = rows.get(BASELINE).and_then(|r| r.figures.as_ref());
    let mut out = String::new();
    let mut first = true;
    for p in producers {
        let Some(row) = rows.get(p.as_str()) else {
            continue;
        };
        let label = if std::mem::take(&mut first) {
            describe(w)
        } else {
            String::new()
        };
        let Some(x) = row.figures.as_ref() else {
            out += &format!("| {label} | {p} | {} | | | | | | |\n", md_reason(row));
            continue;
        };
        let cell = |v: String, get: fn(&Figures) -> f64| match base {
            Some(b) => format!("{v} ({:.2})", get(x) / get(b)),
            None => v,
        };
        out += &format!(
            "| {label} | {p} | {} | {} | {} | {} | {:.0} | {:.0} | {:.3} |\n",
            cell(thousands(x.rate), |f| f.rate),
            cell(format!("{:.1}", x.mbps), |f| f.mbps),
            cell(format!("{:.3}", x.cpu_per_m), |f| f.cpu_per_m),
            cell(format!("{:.1}", x.rss_mb), |f| f.rss_mb),
            x.failed,
            x.lost,
            x.broker_cpu_per_m
        );
    }
    out
}

/// The README's latency table.
pub(crate) fn markdown_latency(
    rate: f64,
    producers: &[String],
    rows: &BTreeMap<&str, Row>,
) -> String {
    let base = rows.get(BASELINE).and_then(|r| r.figures.as_ref());
    let mut out = format!(
        "Latency: 100 B values, null keys, an open-loop sender at {} records/s:\n\n\
         | producer | target records/s | achieved records/s | p50 ms | p99 ms (x) | p99.9 ms | \
         failed | lost |\n|---|---|---|---|---|---|---|---|\n",
        thousands(rate)
    );
    for p in producers {
        let Some(row) = rows.get(p.as_str()) else {
            continue;
        };
        let Some(x) = row.figures.as_ref() else {
            out += &format!(
                "| {p} | {} | {} | | | | | |\n",
                thousands(rate),
                md_reason(row)
            );
            continue;
        };
        let [p50, p99, p999] = x.latency_ms.unwrap_or([f64::NAN; 3]);
        out += &format!(
            "| {p} | {} | {} | {p50:.2} | {p99:.2} ({}) | {p999:.2} | {:.0} | {:.0} |\n",
            thousands(rate),
            thousands(x.achieved),
            p99_ratio(x, base),
            x.failed,
            x.lost
        );
    }
    out
}

/// `1234567.8` as `1,234,568`.
pub(crate) fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 && c.is_ascii_digit() {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text` with what lies between the `<!-- bench_e2e MARKER begin -->` and `end` comments replaced by `body`; an error if
/// the markers are missing, repeated or out of order.
pub(crate) fn replace_marked(text: &str, marker: &str, body: &str) -> Result<String, Error> {
    let begin = format!("<!-- bench_e2e {marker} begin -->");
    let end = format!("<!-- bench_e2e {marker} end -->");
    let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) else {
        return Err(format!("no {begin} ... {end} markers").into());
    };
    if text.matches(&begin).count() != 1 || text.matches(&end).count() != 1 || e < b {
        return Err(format!("the {begin} ... {end} markers must appear once, in order").into());
    }
    let inner = b + begin.len();
    Ok(format!("{}\n{body}{}", &text[..inner], &text[e..]))
}

/// The commit of this checkout (`with uncommitted changes` if the tracked files differ) and
/// the command line that regenerates a table, for the line above it.
pub(crate) fn commit_and_command(args: &[String]) -> (String, String) {
    let git = |a: &[&str]| {
        Command::new("git")
            .args(a)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]).map_or("unknown".to_string(), |c| {
        let dirty =
            git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        if dirty {
            format!("{c} with uncommitted changes")
        } else {
            c
        }
    });
    let command = if args.is_empty() {
        "cargo run --release --example bench_e2e".to_string()
    } else {
        format!(
            "cargo run --release --example bench_e2e -- {}",
            args.join(" ")
        )
    };
    (commit, command)
}

/// The line above the README's tables: the command, commit, date, records and runs.
pub(crate) fn provenance(args: &[String], plan: &Plan, broker: Broker) -> String {
    let (commit, command) = commit_and_command(args);
    format!(
        "Generated by `{command}` on commit {commit}, {} (UTC), {} records per run, medians of \
         {} run(s), {}{}; ratios (x) to `{BASELINE}` on the same broker.\n",
        utc_date(),
        thousands(plan.records as f64),
        plan.runs,
        {
            let topics = if plan.topics.count == 1 {
                format!("{} partitions", plan.topics.partitions)
            } else {
                format!(
                    "{} topics of {} partitions",
                    plan.topics.count, plan.topics.partitions
                )
            };
            match broker {
                Broker::Mock => format!("the mock cluster ({BROKERS} brokers, {topics})"),
                Broker::Kafka => format!("Apache Kafka 4.1.1 (one node, {topics})"),
            }
        },
        if plan.defaults {
            ", every producer at its shipped defaults (no batch size, linger, in-flight or \
             buffer setting of the bench; acks=all and the row's idempotence)"
        } else {
            ""
        }
    )
}

/// Today's date (UTC) as `YYYY-MM-DD`, from the system clock.
pub(crate) fn utc_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
