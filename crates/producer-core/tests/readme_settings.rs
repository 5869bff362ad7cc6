//! The README's configuration table against `properties::SETTINGS`, both ways: one row per
//! setting, in the table's order, with exactly the setting's names and value form; no row
//! that is not a setting; and every default cell that starts with a value in backticks gives
//! the real default (applying
//! it by name leaves the configuration as the builder makes it).

use std::path::Path;

use producer_core::properties::SETTINGS;
use producer_core::Config;

/// One row of the table: its names, value form and default cell.
#[derive(Debug)]
struct Row {
    names: Vec<String>,
    form: String,
    default: String,
}

/// The rows of the first table under `## Configuration`.
fn readme_rows() -> Vec<Row> {
    // The workspace's README; a packaged crate carries it at its root.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let packaged = dir.join("README.md");
    let path = match packaged.exists() {
        true => packaged,
        false => dir.join("../../README.md"),
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let section = text
        .split("\n## Configuration\n")
        .nth(1)
        .expect("README has a ## Configuration section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let table: Vec<&str> = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(table.len() > 2, "no table under ## Configuration");
    assert_eq!(
        table[0], "| Kafka name (aliases) | value | default | setter |",
        "the table's header changed: update this test's reading of it"
    );
    table[2..]
        .iter()
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 4, "a row of four cells: {line}");
            Row {
                names: backticked(cells[0]),
                form: cells[1].to_string(),
                default: cells[2].to_string(),
            }
        })
        .collect()
}

/// The `code spans` of a cell, in order.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn every_setting_has_its_row_and_every_row_is_a_setting() {
    let rows = readme_rows();
    let table: Vec<Vec<String>> = rows.iter().map(|r| r.names.clone()).collect();
    let settings: Vec<Vec<String>> = SETTINGS
        .iter()
        .map(|s| s.names.iter().map(|n| n.to_string()).collect())
        .collect();
    for s in &settings {
        assert!(table.contains(s), "README has no row for {s:?}");
    }
    for r in &table {
        assert!(
            settings.contains(r),
            "README row {r:?} is not a setting (or its aliases differ)"
        );
    }
    assert_eq!(table, settings, "README rows are in SETTINGS order");
    for (row, setting) in rows.iter().zip(SETTINGS) {
        assert_eq!(row.form, setting.form, "value form of {}", setting.names[0]);
    }
}

#[test]
fn defaults_in_backticks_are_the_real_defaults() {
    let bootstrap = [("k", 9092)];
    let plain = format!("{:?}", Config::builder(bootstrap).build().unwrap());
    let mut checked = 0;
    for row in readme_rows() {
        // A cell starting with a code span gives the default as a value to apply; "required",
        // "none", ... (explanations may follow in either case) give nothing to apply.
        if !row.default.starts_with('`') {
            continue;
        }
        let default = backticked(&row.default).remove(0);
        let name = &row.names[0];
        let applied = Config::builder(bootstrap)
            .set(name, &default)
            .unwrap_or_else(|e| panic!("{name}={default}: {e}"))
            .build()
            .unwrap_or_else(|e| panic!("{name}={default}: {e}"));
        assert_eq!(
            format!("{applied:?}"),
            plain,
            "{name}'s default is not {default}"
        );
        checked += 1;
    }
    assert!(checked >= 18, "only {checked} defaults checked");
}

#[test]
fn a_wrong_default_would_be_caught() {
    // The check above is not vacuous: a value other than the default changes the config.
    let bootstrap = [("k", 9092)];
    let plain = format!("{:?}", Config::builder(bootstrap).build().unwrap());
    let other = Config::builder(bootstrap)
        .set("linger.ms", "6")
        .unwrap()
        .build()
        .unwrap();
    assert_ne!(format!("{other:?}"), plain);
}
