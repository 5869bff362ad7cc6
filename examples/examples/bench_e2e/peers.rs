//! The producers of other projects (franz-go, Java, krafka, Confluent's client): building
//! their programs and the command line of one run.

use crate::cluster::{Broker, TopicSpec};
use crate::coordinator::RunSpec;
use crate::payloads::{sized, workload, Payloads};
use crate::Error;
use crate::DEFAULT_BATCH_SIZE;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// The producers of other projects, each a program of its own (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Peer {
    FranzGo,
    Java,
    Krafka,
    Confluent,
}

/// The peer and idempotence of a `--producers` name, `None` for our worker's producers.
pub(crate) fn peer(name: &str) -> Option<(Peer, bool)> {
    let (base, idem) = name
        .strip_suffix("-idem")
        .map_or((name, false), |b| (b, true));
    let p = match base {
        "franz-go" => Peer::FranzGo,
        "java" => Peer::Java,
        "krafka" => Peer::Krafka,
        "confluent" => Peer::Confluent,
        _ => return None,
    };
    Some((p, idem))
}

/// Records of the Java peer's warm-up, sent and flushed before its clock starts.
pub(crate) const JAVA_WARMUP: u64 = 100_000;

/// The built peer programs: the command line that starts each, or why it could not be built.
pub(crate) type PeerPrograms = BTreeMap<Peer, Result<Vec<String>, String>>;

/// 64-bit FNV-1a of the files' contents: the cache key of a built peer.
pub(crate) fn source_hash(files: &[std::path::PathBuf]) -> Result<String, Error> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in files {
        for b in std::fs::read(f)? {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
    Ok(format!("{h:016x}"))
}

pub(crate) fn run_tool(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "{:?} failed ({}): {}",
        cmd.get_program(),
        out.status,
        err.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
    ))
}

/// Builds (or finds cached under `target/peers`) the program of `peer`.
pub(crate) fn build_peer(peer: Peer) -> Result<Vec<String>, String> {
    let target = producer_tests::kafka::dist::target_dir();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("peers");
    let cache = target.join("peers");
    std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
    let s = |p: &std::path::Path| p.display().to_string();
    match peer {
        Peer::FranzGo => {
            let dir = src.join("franz-go");
            let files = ["main.go", "go.mod", "go.sum"].map(|f| dir.join(f));
            let hash = source_hash(&files).map_err(|e| e.to_string())?;
            let bin = cache.join(format!("franz-go-{hash}"));
            if !bin.is_file() {
                eprintln!("bench_e2e: go build of the franz-go peer");
                let tmp = cache.join(format!("franz-go-{hash}.tmp"));
                run_tool(
                    Command::new("go")
                        .args(["build", "-o"])
                        .arg(&tmp)
                        .arg(".")
                        .current_dir(&dir),
                )?;
                std::fs::rename(&tmp, &bin).map_err(|e| e.to_string())?;
            }
            Ok(vec![s(&bin)])
        }
        Peer::Java => {
            let dist = producer_tests::kafka::dist::Dist::shared()?;
            let file = src.join("java").join("JavaPeer.java");
            let hash = source_hash(std::slice::from_ref(&file)).map_err(|e| e.to_string())?;
            let classes = cache.join(format!("java-{hash}"));
            if !classes.join("JavaPeer.class").is_file() {
                eprintln!("bench_e2e: javac of the Java peer");
                let tmp = cache.join(format!("java-{hash}.tmp"));
                let _ = std::fs::remove_dir_all(&tmp);
                run_tool(
                    Command::new("javac")
                        .arg("-d")
                        .arg(&tmp)
                        .args(["-cp", &dist.classpath()])
                        .arg(&file),
                )?;
                let _ = std::fs::remove_dir_all(&classes);
                std::fs::rename(&tmp, &classes).map_err(|e| e.to_string())?;
            }
            Ok(vec![
                "java".to_string(),
                "-cp".to_string(),
                format!("{}:{}", s(&classes), dist.classpath()),
                "JavaPeer".to_string(),
            ])
        }
        Peer::Krafka | Peer::Confluent => {
            let dir = target.join("rust-peers");
            eprintln!("bench_e2e: cargo build of the Rust peers (krafka, confluent-kafka)");
            run_tool(
                Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                    .args(["build", "--release", "--manifest-path"])
                    .arg(src.join("rust-peers").join("Cargo.toml"))
                    .env("CARGO_TARGET_DIR", &dir),
            )?;
            let bin = dir.join("release").join("rust-peers");
            let client = if peer == Peer::Krafka {
                "krafka"
            } else {
                "confluent"
            };
            Ok(vec![s(&bin), client.to_string()])
        }
    }
}

/// The payload arenas of `wname` in files (`target/bench_e2e/payloads`), for the peers.
pub(crate) fn payload_files(
    wname: &str,
    value_bytes: Option<usize>,
) -> Result<(String, Option<String>), Error> {
    let dir = producer_tests::kafka::dist::target_dir()
        .join("bench_e2e")
        .join("payloads");
    std::fs::create_dir_all(&dir)?;
    let p = Payloads::new(sized(workload(wname)?, value_bytes));
    let values = dir.join(format!("{wname}.values"));
    std::fs::write(&values, &p.values)?;
    let keys = if p.keyed {
        let keys = dir.join(format!("{wname}.keys"));
        std::fs::write(&keys, &p.keys)?;
        Some(keys.display().to_string())
    } else {
        None
    };
    Ok((values.display().to_string(), keys))
}

/// The peer's command line for one run.
pub(crate) fn peer_command(
    peer: Peer,
    idem: bool,
    program: &[String],
    spec: &RunSpec<'_>,
    bootstrap: &str,
) -> Result<Command, String> {
    let w = sized(
        workload(spec.workload).map_err(|e| e.to_string())?,
        spec.value_bytes,
    );
    let (values, keys) = spec.payload_files.ok_or("no payload files")?;
    let mut cmd = Command::new(&program[0]);
    cmd.args(&program[1..])
        .args(["--bootstrap", bootstrap])
        .args(["--records", &spec.records.to_string()])
        .args(["--values", values])
        .args(["--value-bytes", &w.value_bytes.to_string()]);
    if !spec.defaults {
        // Every peer gets 16 KiB batches (Java's default and ours) unless --batch-size says.
        cmd.args([
            "--batch-size",
            &spec.batch_size.unwrap_or(DEFAULT_BATCH_SIZE).to_string(),
        ]);
    }
    let scaled = spec.topics.count > 1 || spec.instances > 1 || spec.max_request_size.is_some();
    if let Some(k) = keys {
        cmd.args(["--keys", k]);
    }
    cmd.args(["--compression", w.codec.name()]);
    if let Some(rate) = spec.rate {
        cmd.args(["--rate", &format!("{rate:.0}")]);
    }
    match peer {
        Peer::FranzGo => {
            if scaled {
                return Err(
                    "the franz-go peer has no topics, instances or request-size axis".into(),
                );
            }
            cmd.arg(format!("--topic={}", spec.topics.base))
                .arg(format!("--idempotence={idem}"))
                .arg(format!("--defaults={}", spec.defaults));
            if spec.broker == Broker::Mock {
                // franz-go cannot read the mock's ApiVersions v3 answer (nor its v5 one): capped
                // at Kafka 2.3's protocol it asks ApiVersions v2, which it reads.
                cmd.arg("--max-kafka=2.3");
            }
        }
        Peer::Java => {
            // The warm-up is at most the timed records (the 1 MB point's few).
            cmd.args(["--idempotence", &idem.to_string()])
                .args(["--warmup", &JAVA_WARMUP.min(spec.records).to_string()])
                .args(["--topic", &spec.topics.base])
                .args(["--topics", &spec.topics.count.to_string()])
                .args(["--instances", &spec.instances.to_string()])
                .args(["--defaults", &spec.defaults.to_string()]);
            if let Some(n) = spec.max_request_size {
                cmd.args(["--max-request-size", &n.to_string()]);
            }
        }
        Peer::Krafka | Peer::Confluent => {
            if scaled || spec.defaults || *spec.topics != TopicSpec::bench() {
                return Err(
                    "the krafka and Confluent peers have no scale axes or shipped-defaults mode"
                        .into(),
                );
            }
            if idem {
                cmd.arg("--idempotence");
            }
        }
    }
    Ok(cmd)
}

/// Builds the peers `producers` name (each once), or says why one cannot be.
pub(crate) fn build_peers(producers: &[String]) -> PeerPrograms {
    let mut peers = PeerPrograms::new();
    for p in producers {
        if let Some((kind, _)) = peer(p) {
            if !peers.contains_key(&kind) {
                // krafka and Confluent's client are one program: built once.
                let built = match kind {
                    Peer::Krafka => peers.get(&Peer::Confluent).cloned(),
                    Peer::Confluent => peers.get(&Peer::Krafka).cloned(),
                    _ => None,
                };
                let client = if kind == Peer::Krafka {
                    "krafka"
                } else {
                    "confluent"
                };
                let program = match built {
                    Some(Ok(mut cmd)) => {
                        cmd[1] = client.to_string();
                        Ok(cmd)
                    }
                    Some(Err(e)) => Err(e),
                    None => build_peer(kind),
                };
                peers.insert(kind, program);
            }
        }
    }
    for (kind, r) in &peers {
        if let Err(e) = r {
            eprintln!("bench_e2e: peer {kind:?} cannot be built: {e}");
        }
    }
    peers
}
