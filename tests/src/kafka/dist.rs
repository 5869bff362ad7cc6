//! The Apache Kafka distribution the tier runs: jars fetched by Maven from Maven Central on
//! first use (the version is pinned in `tests/kafka/pom.xml`), the test suite's admin program
//! (`tests/kafka/java/KafkaCtl.java`) compiled with `javac` against them, and the brokers'
//! logging configuration. Everything lives under `target/kafka/` (the Maven local repository
//! too), so nothing outside the build directory is touched and nothing is downloaded at test
//! time from anywhere but Maven Central.
//!
//! Call [`Dist::shared`]: the first call in a process fetches and compiles (tens of seconds
//! the first time on a machine, milliseconds after), later calls return the same value. A
//! file lock serialises concurrent test processes.

use std::fmt;
use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The pom naming the pinned version and its dependencies.
const POM: &str = include_str!("../../kafka/pom.xml");
/// The admin and read-back program.
const KAFKA_CTL_JAVA: &str = include_str!("../../kafka/java/KafkaCtl.java");
/// Java's producer in the rolling-fault transaction loop, compiled beside KafkaCtl.
const TXN_LOOP_JAVA: &str = include_str!("../../kafka/java/TxnLoop.java");
/// The brokers' KIP-714 receiver (a metrics reporter implementing `ClientTelemetry`), compiled
/// beside KafkaCtl; on a broker's class path only when the cluster asks for it
/// ([`super::ClusterSpec::telemetry_reporter`]).
const TELEMETRY_REPORTER_JAVA: &str = include_str!("../../kafka/java/TelemetryReporter.java");
/// Broker and KafkaCtl logging.
const LOG4J2: &str = include_str!("../../kafka/log4j2.properties");

/// The environment variable that opts out of the real-Kafka tier (see [`super::skip_requested`]).
pub const SKIP_ENV: &str = "SKIP_KAFKA_TESTS";

/// What to install, said when a tool is missing.
const INSTALL_HINT: &str =
    "install Java 17 and Maven (Debian: `apt-get install openjdk-17-jdk-headless maven`, \
     or run `.ci/install-deps`), or set SKIP_KAFKA_TESTS=1 to skip the real-Kafka tier explicitly";

/// Why the distribution could not be prepared.
#[derive(Debug)]
pub enum DistError {
    /// A tool (`java`, `javac`, `mvn`) is not installed.
    ToolMissing {
        /// The tool.
        tool: &'static str,
    },
    /// `java` is older than 17 (Kafka 4 needs 17).
    JavaTooOld {
        /// What `java -version` said.
        found: String,
    },
    /// Maven could not fetch the artifacts.
    Maven {
        /// The artifact named by the pom (group:artifact:version), and the first artifact
        /// Maven says it could not fetch, when it says one.
        artifact: String,
        /// Maven's output (its end).
        log: String,
    },
    /// `javac` failed on KafkaCtl.java.
    Javac {
        /// Its output.
        log: String,
    },
    /// A file operation failed.
    Io {
        /// What was being done.
        what: String,
        /// The error.
        error: io::Error,
    },
}

impl fmt::Display for DistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DistError::ToolMissing { tool } => {
                write!(
                    f,
                    "the real-Kafka tests need `{tool}`, which is not installed: {INSTALL_HINT}"
                )
            }
            DistError::JavaTooOld { found } => write!(
                f,
                "Kafka {} needs Java 17 or newer; `java -version` says: {found}; {INSTALL_HINT}",
                kafka_version()
            ),
            DistError::Maven { artifact, log } => write!(
                f,
                "Maven could not fetch {artifact} from Maven Central (is it reachable?); \
                 Maven said:\n{log}"
            ),
            DistError::Javac { log } => {
                write!(
                    f,
                    "javac failed on KafkaCtl.java, TxnLoop.java or TelemetryReporter.java:\n{log}"
                )
            }
            DistError::Io { what, error } => write!(f, "{what}: {error}"),
        }
    }
}

impl std::error::Error for DistError {}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> DistError {
    let what = what.into();
    move |error| DistError::Io { what, error }
}

/// A property of `tests/kafka/pom.xml`.
fn pom_property(name: &str) -> &'static str {
    let open = format!("<{name}>");
    let start = POM
        .find(&open)
        .unwrap_or_else(|| panic!("pom.xml names {name}"))
        + open.len();
    let end = start + POM[start..].find('<').expect("a closed property");
    &POM[start..end]
}

/// The Kafka version pinned in `tests/kafka/pom.xml` (`<kafka.version>`).
pub fn kafka_version() -> &'static str {
    pom_property("kafka.version")
}

/// The broker artifact, as Maven names it.
pub fn broker_artifact() -> String {
    format!("org.apache.kafka:kafka_2.13:{}", kafka_version())
}

/// The build directory (`target/`) this code runs from: `CARGO_TARGET_DIR` when set, else the
/// nearest ancestor of the running executable that holds cargo's `CACHEDIR.TAG`, else the
/// workspace's `target/`.
pub fn target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(d);
    }
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1) {
            if dir.join("CACHEDIR.TAG").is_file() {
                return dir.to_path_buf();
            }
        }
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target")
}

/// A prepared Kafka distribution.
#[derive(Debug)]
pub struct Dist {
    /// The Kafka version.
    pub version: String,
    /// `target/kafka`: the Maven repository, the distribution and the clusters' directories.
    pub home: PathBuf,
    /// The directory of every runtime jar.
    pub lib: PathBuf,
    /// The compiled KafkaCtl classes.
    pub ctl_classes: PathBuf,
    /// The logging configuration file.
    pub log4j: PathBuf,
}

impl Dist {
    /// The distribution under `target/kafka`, prepared on the first call in this process.
    pub fn shared() -> Result<&'static Dist, String> {
        static DIST: OnceLock<Result<Dist, String>> = OnceLock::new();
        DIST.get_or_init(|| {
            Dist::prepare(&target_dir().join("kafka"), None).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    /// Prepares the distribution under `home`: checks the tools, fetches the jars with Maven
    /// unless a previous run completed that, compiles KafkaCtl when its source changed.
    /// `maven_settings` replaces Maven's settings file (the tests use it to point Maven at an
    /// unreachable repository).
    pub fn prepare(home: &Path, maven_settings: Option<&Path>) -> Result<Dist, DistError> {
        check_java()?;
        let version = kafka_version().to_string();
        let base = home.join(&version);
        fs::create_dir_all(&base).map_err(io_err(format!("create {}", base.display())))?;
        let _lock = FileLock::exclusive(&home.join(".lock"))?;
        let dist = Dist {
            lib: base.join("lib"),
            ctl_classes: base.join("ctl"),
            log4j: base.join("log4j2.properties"),
            home: home.to_path_buf(),
            version,
        };
        if !dist.lib.join(".complete").is_file() {
            fetch_jars(home, &base, &dist.lib, maven_settings)?;
        }
        write_if_changed(&dist.log4j, LOG4J2)?;
        compile_ctl(&base, &dist)?;
        Ok(dist)
    }

    /// The broker's class path.
    pub fn classpath(&self) -> String {
        format!("{}/*", self.lib.display())
    }

    /// The class path of a broker with the test tier's plugins (the telemetry reporter): the
    /// compiled classes first, then every runtime jar.
    pub fn plugin_classpath(&self) -> String {
        self.ctl_classpath()
    }

    /// KafkaCtl's class path.
    pub fn ctl_classpath(&self) -> String {
        format!("{}:{}/*", self.ctl_classes.display(), self.lib.display())
    }

    /// Where clusters put their directories.
    pub fn clusters_dir(&self) -> PathBuf {
        self.home.join("clusters")
    }
}

fn tool_output(tool: &'static str, args: &[&str]) -> Result<String, DistError> {
    let out = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => DistError::ToolMissing { tool },
            _ => DistError::Io {
                what: format!("run {tool}"),
                error: e,
            },
        })?;
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(s)
}

/// `java` and `javac` present and at least 17; `mvn` present.
fn check_java() -> Result<(), DistError> {
    let v = tool_output("java", &["-version"])?;
    // `openjdk version "17.0.15" 2025-04-15` (or "1.8.0_..." for 8).
    let major = v
        .split('"')
        .nth(1)
        .and_then(|s| s.split('.').next())
        .and_then(|s| s.parse::<u32>().ok());
    if major.is_none_or(|m| m < 17) {
        return Err(DistError::JavaTooOld {
            found: v.lines().next().unwrap_or("").to_string(),
        });
    }
    tool_output("javac", &["-version"])?;
    tool_output("mvn", &["-v"])?;
    Ok(())
}

fn write_if_changed(path: &Path, content: &str) -> Result<(), DistError> {
    if fs::read_to_string(path).ok().as_deref() != Some(content) {
        fs::write(path, content).map_err(io_err(format!("write {}", path.display())))?;
    }
    Ok(())
}

/// `mvn dependency:copy-dependencies` into `lib.tmp`, renamed to `lib` when complete.
fn fetch_jars(
    home: &Path,
    base: &Path,
    lib: &Path,
    settings: Option<&Path>,
) -> Result<(), DistError> {
    let pom = base.join("pom.xml");
    write_if_changed(&pom, POM)?;
    let tmp = base.join("lib.tmp");
    let _ = fs::remove_dir_all(&tmp);
    let _ = fs::remove_dir_all(lib);
    let mut cmd = Command::new("mvn");
    cmd.arg("-B")
        .arg("-f")
        .arg(&pom)
        .arg(format!("-Dmaven.repo.local={}", home.join("m2").display()))
        .arg(format!(
            "org.apache.maven.plugins:maven-dependency-plugin:{}:copy-dependencies",
            pom_property("dependency-plugin.version")
        ))
        .arg("-DincludeScope=runtime")
        .arg(format!("-DoutputDirectory={}", tmp.display()))
        .stdin(Stdio::null());
    if let Some(s) = settings {
        cmd.arg("-s").arg(s);
    }
    let out = cmd.output().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => DistError::ToolMissing { tool: "mvn" },
        _ => DistError::Io {
            what: "run mvn".into(),
            error: e,
        },
    })?;
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let failed = log
            .lines()
            .filter(|l| l.contains("[ERROR]"))
            .find_map(failed_artifact)
            .map(|a| format!(" (Maven could not fetch {a})"))
            .unwrap_or_default();
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("[ERROR]"))
            .take(12)
            .collect();
        return Err(DistError::Maven {
            artifact: format!(
                "{} and its dependencies, as tests/kafka/pom.xml lists them{failed}",
                broker_artifact()
            ),
            log: errors.join("\n"),
        });
    }
    fs::write(tmp.join(".complete"), broker_artifact())
        .map_err(io_err("mark the jars complete"))?;
    fs::rename(&tmp, lib).map_err(io_err(format!(
        "rename {} to {}",
        tmp.display(),
        lib.display()
    )))
}

/// The artifact a Maven error line names: "Could not transfer artifact G:A:T:V from/to ..." or
/// "Plugin G:A:V or one of its dependencies could not be resolved" or "Failure to find G:A:T:V".
fn failed_artifact(line: &str) -> Option<String> {
    for marker in [
        "Could not transfer artifact ",
        "Failure to find ",
        "Plugin ",
        "Could not find artifact ",
    ] {
        if let Some(at) = line.find(marker) {
            let rest = &line[at + marker.len()..];
            let name: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
            if name.matches(':').count() >= 2 {
                return Some(name);
            }
        }
    }
    None
}

/// FNV-1a of the source, to recompile KafkaCtl when it changed.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn compile_ctl(base: &Path, dist: &Dist) -> Result<(), DistError> {
    let stamp = format!(
        "{:016x}{:016x}{:016x}",
        fnv(KAFKA_CTL_JAVA),
        fnv(TXN_LOOP_JAVA),
        fnv(TELEMETRY_REPORTER_JAVA)
    );
    let stamp_file = dist.ctl_classes.join(".source-hash");
    if fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(());
    }
    let src_dir = base.join("ctl-src");
    fs::create_dir_all(&src_dir).map_err(io_err("create ctl-src"))?;
    let src = src_dir.join("KafkaCtl.java");
    write_if_changed(&src, KAFKA_CTL_JAVA)?;
    let txn_loop = src_dir.join("TxnLoop.java");
    write_if_changed(&txn_loop, TXN_LOOP_JAVA)?;
    let reporter = src_dir.join("TelemetryReporter.java");
    write_if_changed(&reporter, TELEMETRY_REPORTER_JAVA)?;
    let tmp = base.join("ctl.tmp");
    let _ = fs::remove_dir_all(&tmp);
    let out = Command::new("javac")
        .arg("-d")
        .arg(&tmp)
        .arg("-cp")
        .arg(dist.classpath())
        .arg(&src)
        .arg(&txn_loop)
        .arg(&reporter)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => DistError::ToolMissing { tool: "javac" },
            _ => DistError::Io {
                what: "run javac".into(),
                error: e,
            },
        })?;
    if !out.status.success() {
        return Err(DistError::Javac {
            log: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    fs::write(tmp.join(".source-hash"), &stamp).map_err(io_err("write the KafkaCtl stamp"))?;
    let _ = fs::remove_dir_all(&dist.ctl_classes);
    fs::rename(&tmp, &dist.ctl_classes).map_err(io_err("install the KafkaCtl classes"))
}

/// An exclusive `flock` on a file, released on drop.
struct FileLock(fs::File);

impl FileLock {
    fn exclusive(path: &Path) -> Result<FileLock, DistError> {
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_err(format!("open {}", path.display())))?;
        // SAFETY: a valid open descriptor.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(DistError::Io {
                what: format!("lock {}", path.display()),
                error: io::Error::last_os_error(),
            });
        }
        Ok(FileLock(f))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // SAFETY: a valid open descriptor.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}
