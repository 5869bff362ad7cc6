//! The invariants of ARCHITECTURE.md that a reader of the source can check, checked on the
//! source: the codec imports no producer state, and the core does no I/O and reads no clock.

use std::fs;
use std::path::{Path, PathBuf};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The source of a file without its `#[cfg(test)] mod tests` (tests may read the clock).
fn non_test_source(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// [`non_test_source`] without its `//` comments (doc comments included).
fn code_without_comments(path: &Path) -> String {
    non_test_source(path)
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `src` directory of every crate of the workspace.
fn crate_source_dirs() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&crates)
        .unwrap()
        .map(|entry| entry.unwrap().path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_codec_imports_no_producer_state() {
    let allowed = [
        "crate::protocol",
        "crate::record",
        "crate::ErrorCode",
        "crate::error_code",
    ];
    let mut checked = 0;
    for dir in ["protocol", "record"] {
        for file in sources(&src().join(dir)) {
            let text = non_test_source(&file);
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if let Some(i) = line.find("crate::") {
                    let path = &line[i..];
                    assert!(
                        allowed.iter().any(|a| path.starts_with(a)),
                        "{}:{}: the codec uses `{path}`",
                        file.display(),
                        n + 1
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} codec files found");
}

#[test]
fn the_core_does_no_io_and_reads_no_clock() {
    let forbidden = [
        "std::net",
        "std::fs",
        "std::process",
        // (`std::io::Write` is allowed: the compression codecs write into a `Vec`.)
        "std::io::stdin",
        "std::io::stdout",
        "std::thread",
        "Instant::now",
        "SystemTime",
        "Mutex",
        "RwLock",
    ];
    let mut checked = 0;
    for file in sources(&src()) {
        let text = non_test_source(&file);
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for f in forbidden {
                assert!(
                    !line.contains(f),
                    "{}:{}: the core uses `{f}`",
                    file.display(),
                    n + 1
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} core files found");
}

/// Where an error code is decided: every comparison of an answer's error code with a named code
/// (`==`, `!=`, a `match` arm, `matches!`, a list of codes) outside the codec belongs to the one
/// retry table, `classify.rs`. Naming a code to *build* an error (`code: ErrorCode::X`) or to
/// *describe* one the table already decided is not a decision; the few places that describe
/// are listed here, each with what it describes.
#[test]
fn only_the_retry_table_maps_an_error_code_to_an_action() {
    // (file, code): a code named in a comparison that describes, not decides.
    let describes: &[(&str, &str, &str)] = &[
        (
            "producer/auth.rs",
            "UNSUPPORTED_SASL_MECHANISM",
            "which AuthError a failed SaslHandshake is",
        ),
        (
            "producer/auth.rs",
            "ILLEGAL_SASL_STATE",
            "the message of a failed SaslHandshake",
        ),
    ];
    let exempt_dirs = ["protocol", "record"];
    let exempt_files = ["classify.rs", "error_code.rs"];
    let mut decisions = Vec::new();
    for file in sources(&src()) {
        let rel = file
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .to_string();
        if exempt_files.contains(&rel.as_str()) || exempt_dirs.iter().any(|d| rel.starts_with(d)) {
            continue;
        }
        let text = non_test_source(&file);
        for (n, line) in text.lines().enumerate() {
            let code_part = line.split("//").next().unwrap_or("");
            let mut rest = code_part;
            while let Some(i) = rest.find("ErrorCode::") {
                let after = &rest[i + "ErrorCode::".len()..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_' || c.is_ascii_digit())
                    .collect();
                rest = &after[name.len()..];
                if name.is_empty() || name == "NONE" {
                    continue;
                }
                let before = code_part[..code_part.len() - rest.len() - name.len() - 11].trim_end();
                let after = rest.trim_start();
                // A comparison, a match arm or pattern, or a list of codes to look codes up in.
                let compared = before.ends_with("==")
                    || before.ends_with("!=")
                    || before.ends_with('|')
                    || after.starts_with("=>")
                    || after.starts_with('|')
                    || code_part.contains("matches!")
                    || code_part.contains(".contains(")
                    || code_part.contains("[ErrorCode;");
                let built =
                    before.ends_with(':') || before.ends_with('=') && !before.ends_with("==");
                if !compared || built {
                    continue;
                }
                if describes.iter().any(|(f, c, _)| *f == rel && *c == name) {
                    continue;
                }
                decisions.push(format!("{rel}:{}: ErrorCode::{name}", n + 1));
            }
        }
    }
    assert!(
        decisions.is_empty(),
        "error codes compared outside the retry table (classify.rs):\n{}",
        decisions.join("\n")
    );
}

/// The state machine chooses what to send; the codec writes how: outside `protocol/` and
/// `record/` (and the SASL mechanisms' own messages in `sasl/`), no module writes or reads a
/// byte layout (no `Put` writer, no big-endian conversions).
#[test]
fn the_state_machine_holds_no_byte_layout() {
    let forbidden = [
        "to_be_bytes",
        "from_be_bytes",
        "primitives::Put",
        ".put_i",
        ".put_u",
        ".put_string",
        ".put_nullable",
        ".put_array_len",
        ".put_empty_tags",
    ];
    let exempt = ["protocol", "record", "sasl"];
    let mut checked = 0;
    for file in sources(&src()) {
        let rel = file
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .to_string();
        if exempt.iter().any(|d| rel.starts_with(d)) {
            continue;
        }
        let text = non_test_source(&file);
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for f in forbidden {
                assert!(
                    !code.contains(f),
                    "{rel}:{}: byte layout outside the codec (`{f}`)",
                    n + 1
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} files checked");
}

/// The drivers reach the core only through its crate-root re-exports and
/// `producer_core::metrics`: no other public module of the core (`config`, `protocol`,
/// `record`, `sasl`, ...) is named in a driver's source, so the core's internals can move
/// without a driver noticing.
#[test]
fn the_drivers_use_only_the_cores_root_and_metrics() {
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
        .filter(|m| *m != "metrics")
        .collect();
    assert!(modules.len() >= 5, "only {modules:?} found in lib.rs");
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    let mut found = Vec::new();
    for driver in [
        "producer-driver",
        "producer-mio",
        "producer-tokio",
        "producer-py",
    ] {
        for file in sources(&crates.join(driver).join("src")) {
            let code = code_without_comments(&file);
            for (i, _) in code.match_indices("producer_core::") {
                let rest = &code[i + "producer_core::".len()..];
                // The first segment of each path: one name, or each item of a `{...}` list.
                let names: Vec<String> = match rest.strip_prefix('{') {
                    Some(list) => {
                        let list = &list[..list.find('}').unwrap_or(list.len())];
                        list.split(',')
                            .map(|item| item.trim().split("::").next().unwrap_or("").to_string())
                            .collect()
                    }
                    None => vec![rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect()],
                };
                for name in names {
                    if modules.contains(&name.as_str()) {
                        found.push(format!("{}: producer_core::{name}", file.display()));
                    }
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} driver files checked");
    assert!(
        found.is_empty(),
        "drivers using core internals:\n{}",
        found.join("\n")
    );
}

/// The public types a crate declares (`pub struct|enum|trait|type Name`, outside tests).
fn public_type_names(src: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for file in sources(src) {
        for line in non_test_source(&file).lines() {
            let line = line.trim_start();
            for kind in ["pub struct ", "pub enum ", "pub trait ", "pub type "] {
                if let Some(rest) = line.strip_prefix(kind) {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    out.push((name, file.clone()));
                }
            }
        }
    }
    out
}

/// The names a crate's root re-exports from other crates (`pub use other_crate::{A, B}`).
fn reexported_names(src: &Path) -> Vec<String> {
    let lib = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|f| f.exists());
    let Some(lib) = lib else { return Vec::new() };
    let text = non_test_source(&lib);
    let mut out = Vec::new();
    for stmt in text.split(';') {
        let Some(i) = stmt.find("pub use ") else {
            continue;
        };
        let path = &stmt[i + "pub use ".len()..];
        if path.starts_with("crate::") || path.starts_with("self::") || !path.contains("::") {
            continue;
        }
        let first = path.split("::").next().unwrap_or("");
        if src.join(format!("{first}.rs")).exists() || src.join(first).is_dir() {
            continue; // one of the crate's own modules
        }
        let items = match (path.find('{'), path.rfind('}')) {
            (Some(a), Some(b)) => &path[a + 1..b],
            _ => path.rsplit("::").next().unwrap_or(""),
        };
        for item in items.split(',') {
            let name = item
                .rsplit(" as ")
                .next()
                .unwrap_or("")
                .rsplit("::")
                .next()
                .unwrap_or("");
            let name = name.trim();
            if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// Type names are unique within each crate's public API: no two public types a crate
/// declares share a name, and none shares a name with a type its root re-exports from
/// another crate.
#[test]
fn public_type_names_are_unique_within_a_crate() {
    let mut clashes = Vec::new();
    let mut checked = 0;
    for src in crate_source_dirs() {
        checked += 1;
        let names = public_type_names(&src);
        for (i, (name, file)) in names.iter().enumerate() {
            if let Some((_, other)) = names[..i].iter().find(|(n, _)| n == name) {
                clashes.push(format!(
                    "{name}: {} and {}",
                    other.display(),
                    file.display()
                ));
            }
        }
        for name in reexported_names(&src) {
            if let Some((_, file)) = names.iter().find(|(n, _)| *n == name) {
                clashes.push(format!("{name}: {} and a re-export", file.display()));
            }
        }
    }
    assert!(checked >= 6, "only {checked} crates found");
    assert!(
        clashes.is_empty(),
        "public type names used twice:\n{}",
        clashes.join("\n")
    );
}

/// One crate's source files and the imports between them, to find circles.
mod imports {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    /// A file's module path from the crate root (`["producer", "cluster"]`), `[]` for the root.
    fn module_of(src: &Path, file: &Path) -> Vec<String> {
        let rel = file.strip_prefix(src).unwrap();
        let mut parts: Vec<String> = rel
            .iter()
            .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if matches!(
            parts.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            parts.pop();
        }
        parts
    }

    /// Every `crate::a::b` / `super::a` / `self::a` path in the code, braces of `use` lists
    /// expanded, as absolute module paths.
    fn paths(code: &str, module: &[String], is_mod_file: bool) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        // `use` statements, whole (they may span lines), braces expanded.
        for stmt in code.split(';') {
            let stmt = stmt.trim();
            let Some(i) = stmt.find("use ") else { continue };
            if !(i == 0
                || stmt[..i].trim_end().ends_with(')')
                || stmt[..i].trim().starts_with("pub"))
            {
                continue;
            }
            let body: String = stmt[i + 4..]
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            for p in expand(&body) {
                out.push(p);
            }
        }
        // Paths written inline.
        for (i, _) in code.match_indices("crate::") {
            if code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let p: String = code[i..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(p.split("::").map(str::to_string).collect());
        }
        out.into_iter()
            .filter_map(|p| absolute(&p, module, is_mod_file))
            .collect()
    }

    /// `a::{b, c::{d, e}}` -> `a::b`, `a::c::d`, `a::c::e`.
    fn expand(s: &str) -> Vec<Vec<String>> {
        let Some(open) = s.find('{') else {
            let s = s.split(" as ").next().unwrap_or(s);
            return vec![s
                .split("::")
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()];
        };
        let prefix = &s[..open];
        let inner = &s[open + 1..s.rfind('}').unwrap_or(s.len())];
        let mut out = Vec::new();
        let (mut depth, mut start) = (0, 0);
        let bytes: Vec<char> = inner.chars().collect();
        let mut parts = Vec::new();
        for (k, c) in bytes.iter().enumerate() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(bytes[start..k].iter().collect::<String>());
                    start = k + 1;
                }
                _ => {}
            }
        }
        parts.push(bytes[start..].iter().collect::<String>());
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            for tail in expand(&part) {
                let mut p: Vec<String> = prefix
                    .split("::")
                    .filter(|x| !x.is_empty())
                    .map(str::to_string)
                    .collect();
                p.extend(tail);
                out.push(p);
            }
        }
        out
    }

    /// A path made absolute from the crate root, or `None` for an outside crate.
    fn absolute(p: &[String], module: &[String], is_mod_file: bool) -> Option<Vec<String>> {
        let first = p.first()?.as_str();
        // The module a file's `super` and `self` are relative to.
        let here: Vec<String> = module.to_vec();
        match first {
            "crate" => Some(p[1..].to_vec()),
            "self" => {
                let mut b = here;
                b.extend(p[1..].iter().cloned());
                Some(b)
            }
            "super" => {
                let mut b = here;
                let mut rest = p;
                while rest.first().map(String::as_str) == Some("super") {
                    b.pop()?;
                    rest = &rest[1..];
                }
                b.extend(rest.iter().cloned());
                Some(b)
            }
            // A child module declared in this file (`use child::X`).
            _ if is_mod_file || module.is_empty() => None,
            _ => None,
        }
    }

    pub(super) struct Graph {
        pub(super) edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
    }

    impl Graph {
        pub(super) fn of_crate(src: &Path) -> Graph {
            let files = super::sources(src);
            let by_module: BTreeMap<Vec<String>, PathBuf> = files
                .iter()
                .map(|f| (module_of(src, f), f.clone()))
                .collect();
            // Re-exports (`pub use x::Y` / `pub(crate) use x::Y`) of each module: item -> the
            // path it stands for.
            let mut reexports: BTreeMap<(Vec<String>, String), Vec<String>> = BTreeMap::new();
            for f in &files {
                let module = module_of(src, f);
                let is_mod = f.ends_with("mod.rs") || f.ends_with("lib.rs");
                let text = super::code_without_comments(f);
                for stmt in text.split(';') {
                    let stmt = stmt.trim();
                    if !stmt.starts_with("pub") {
                        continue;
                    }
                    let Some(i) = stmt.find("use ") else { continue };
                    let body: String = stmt[i + 4..]
                        .chars()
                        .filter(|c| !c.is_whitespace())
                        .collect();
                    for p in expand(&body) {
                        let Some(name) = p.last().cloned() else {
                            continue;
                        };
                        // Relative to this module: `use child::X` means module::child::X.
                        let abs = match p.first().map(String::as_str) {
                            Some("crate" | "super" | "self") => absolute(&p, &module, is_mod),
                            Some(_) => {
                                let mut b = module.clone();
                                b.extend(p.iter().cloned());
                                Some(b)
                            }
                            None => None,
                        };
                        if let Some(abs) = abs {
                            reexports.insert((module.clone(), name), abs);
                        }
                    }
                }
            }
            // The file a path lands in: the longest module prefix that is a file, following
            // that file's re-export of the next name.
            let resolve = |p: &[String]| -> Option<PathBuf> {
                let mut path = p.to_vec();
                for _ in 0..8 {
                    let k = (0..=path.len())
                        .rev()
                        .find(|&k| by_module.contains_key(&path[..k]))?;
                    let module = path[..k].to_vec();
                    match path
                        .get(k)
                        .and_then(|n| reexports.get(&(module.clone(), n.clone())))
                    {
                        Some(target) if target != &path => {
                            let mut next = target.clone();
                            next.extend(path[k + 1..].iter().cloned());
                            path = next;
                        }
                        _ => return by_module.get(&module).cloned(),
                    }
                }
                None
            };
            let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
            for f in &files {
                let module = module_of(src, f);
                let is_mod = f.ends_with("mod.rs") || f.ends_with("lib.rs");
                let set = edges.entry(f.clone()).or_default();
                for p in paths(&super::code_without_comments(f), &module, is_mod) {
                    let Some(to) = resolve(&p) else { continue };
                    let to_module = module_of(src, &to);
                    // A module using its own ancestors' items (its parent's `Producer`) is the
                    // module tree, not an import between peers; the crate root's re-exports
                    // were followed above.
                    if &to == f || module.starts_with(&to_module) {
                        continue;
                    }
                    set.insert(to);
                }
            }
            Graph { edges }
        }

        /// Every file that imports one that imports it back, directly or around a loop: each
        /// circle once, as its files in order.
        pub(super) fn circles(&self) -> Vec<Vec<PathBuf>> {
            let mut out: Vec<Vec<PathBuf>> = Vec::new();
            let mut seen: BTreeSet<BTreeSet<PathBuf>> = BTreeSet::new();
            for start in self.edges.keys() {
                // Shortest path from each neighbour back to `start` (breadth first).
                for first in &self.edges[start] {
                    let mut prev: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
                    let mut queue = std::collections::VecDeque::from([first.clone()]);
                    let mut found = false;
                    while let Some(n) = queue.pop_front() {
                        if &n == start {
                            found = true;
                            break;
                        }
                        for m in self.edges.get(&n).into_iter().flatten() {
                            if !prev.contains_key(m) && m != first {
                                prev.insert(m.clone(), n.clone());
                                queue.push_back(m.clone());
                            }
                        }
                    }
                    if !found {
                        continue;
                    }
                    let mut circle = vec![start.clone()];
                    let mut n = start.clone();
                    while let Some(p) = prev.get(&n) {
                        circle.push(p.clone());
                        n = p.clone();
                    }
                    if n != *first {
                        circle.push(first.clone());
                    }
                    let key: BTreeSet<PathBuf> = circle.iter().cloned().collect();
                    if seen.insert(key) {
                        out.push(circle);
                    }
                }
            }
            out
        }
    }
}

/// No file imports one that imports it back, directly or around a loop, in any crate of the
/// workspace (a module using its own ancestors' items is the module tree, not a circle).
#[test]
fn no_file_imports_one_that_imports_it_back() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut all = Vec::new();
    let mut checked = 0;
    for src in crate_source_dirs() {
        checked += 1;
        for circle in imports::Graph::of_crate(&src).circles() {
            let names: Vec<String> = circle
                .iter()
                .map(|f| f.strip_prefix(&crates).unwrap().display().to_string())
                .collect();
            all.push(names.join(" -> "));
        }
    }
    assert!(checked >= 6, "only {checked} crates found");
    assert!(all.is_empty(), "import circles:\n{}", all.join("\n"));
}
