//! Shared pieces of the workspace's integration tests: the fuzz-corpus replay helper, the
//! shared test servers ([`everything`], [`users`]), a deterministic executor on a virtual
//! clock ([`exec`]), the in-memory client/server pair ([`loopback`]), the service over the
//! real transport in memory ([`pair`]), and the client and server transport harnesses
//! ([`client_harness`], [`server_harness`]), and the two runtime adapters behind one interface
//! ([`runtime`]) for the end-to-end suite and the binaries.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod client_harness;
pub mod everything;
pub mod exec;
pub mod faults;
pub mod harness;
pub mod loopback;
pub mod pair;
pub mod runtime;
pub mod server_harness;
pub mod users;

use std::path::{Path, PathBuf};

/// The workspace root (the parent of this package's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// Every input a fuzz target has on disk: the committed seeds (`fuzz/seeds/<target>`) and,
/// when present, the local corpus and crash artifacts that `cargo fuzz run` wrote.
///
/// Returned sorted by path so that a failure names the same file on every run.
pub fn fuzz_inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let root = workspace_root().join("fuzz");
    let mut out = Vec::new();
    for dir in ["seeds", "corpus", "artifacts"] {
        let dir = root.join(dir).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_file()
                && let Ok(bytes) = std::fs::read(&path)
            {
                out.push((path, bytes));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Runs `body` on every input of `target` under `catch_unwind` and panics with the list of
/// inputs that panicked. Panics too when the target has no committed seed at all, so that a
/// replay test can never pass by running nothing.
pub fn replay_fuzz_target(target: &str, body: fn(&[u8])) -> usize {
    let inputs = fuzz_inputs(target);
    let seeds = inputs
        .iter()
        .filter(|(p, _)| p.components().any(|c| c.as_os_str() == "seeds"))
        .count();
    assert!(
        seeds > 0,
        "fuzz target `{target}` has no committed seed in fuzz/seeds/{target}"
    );
    let mut failed = Vec::new();
    for (path, bytes) in &inputs {
        if std::panic::catch_unwind(|| body(bytes)).is_err() {
            failed.push(path.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "fuzz target `{target}` panicked on: {failed:#?}"
    );
    inputs.len()
}
