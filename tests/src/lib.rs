//! Shared pieces of the workspace's integration tests: the fuzz-corpus replay helper, the
//! shared test servers ([`everything`], [`users`]), a deterministic executor on a virtual
//! clock ([`exec`]), the in-memory client/server pair ([`loopback`]), the service over the
//! real transport in memory ([`pair`]), and the client and server transport harnesses
//! ([`client_harness`], [`server_harness`]), and the two runtime adapters behind one interface
//! ([`runtime`], plain or over HTTPS with certificates made by [`tls`]) for the end-to-end
//! suite and the binaries, and the real external services of the multi-instance tests
//! ([`services`]: `redis-server`, nginx as a round-robin load balancer; [`redis_faults`]: a
//! proxy that cuts and delays the instances' link to Redis), and a test binary's
//! log as text ([`log_capture`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth_server;
pub mod client_harness;
pub mod cluster_harness;
pub mod cluster_procs;
pub mod everything;
pub mod exec;
pub mod faults;
pub mod harness;
pub mod log_capture;
pub mod loopback;
pub mod pair;
pub mod raw;
pub mod redis_faults;
pub mod runtime;
pub mod server_harness;
pub mod services;
pub mod shape;
pub mod tls;
pub mod users;

use std::path::{Path, PathBuf};

/// The workspace root (the parent of this package's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// The MCP specification data (each revision's `schema.json`, the 2026-07-28 examples):
/// `$MCP_SPEC_DATA` when set, else `shared/spec-data` beside the workspace. It is read at run
/// time and never copied into the repository.
pub fn spec_data_dir() -> PathBuf {
    match std::env::var_os("MCP_SPEC_DATA") {
        Some(dir) => PathBuf::from(dir),
        None => workspace_root().join("..").join("shared").join("spec-data"),
    }
}

/// Whether missing spec data fails a test instead of skipping it, given the value of the `CI`
/// environment variable: in CI (CI services set `CI=true`) a skipped validation would pass
/// silently, so anything but unset, empty, `false` or `0` makes it fatal.
pub fn missing_spec_data_is_fatal(ci: Option<&str>) -> bool {
    ci_forbids_skipping(ci)
}

/// Whether a test must fail instead of skipping for want of something (spec data, an
/// installed service), given the value of the `CI` environment variable: anything but unset,
/// empty, `false` or `0`.
pub fn ci_forbids_skipping(ci: Option<&str>) -> bool {
    ci.map(str::trim)
        .is_some_and(|v| !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false")))
}

/// Reports that the spec data `test` needs is not at `dir`: panics in CI (see
/// [`missing_spec_data_is_fatal`]), else says `SKIPPED` on stderr so the caller can return.
pub fn spec_data_missing(test: &str, dir: &Path) {
    spec_data_missing_under(test, dir, std::env::var("CI").ok().as_deref());
}

fn spec_data_missing_under(test: &str, dir: &Path, ci: Option<&str>) {
    let what = format!(
        "{test}: MCP spec data not found at {} (expected shared/spec-data beside the \
         workspace, or set MCP_SPEC_DATA)",
        dir.display()
    );
    if missing_spec_data_is_fatal(ci) {
        panic!("{what}; CI is set, so this fails instead of skipping");
    }
    eprintln!("SKIPPED {what}");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_spec_data_fails_under_ci_and_skips_otherwise() {
        for ci in ["true", "TRUE", "1", "yes", " true "] {
            assert!(missing_spec_data_is_fatal(Some(ci)), "{ci:?}");
        }
        for ci in [None, Some(""), Some("false"), Some("False"), Some("0")] {
            assert!(!missing_spec_data_is_fatal(ci), "{ci:?}");
        }
    }

    #[test]
    fn a_missing_spec_data_folder_panics_with_a_clear_message_only_under_ci() {
        let dir = std::env::temp_dir().join("mcp-tests-no-spec-data-here");
        assert!(!dir.exists());
        let err = std::panic::catch_unwind(|| spec_data_missing_under("t1", &dir, Some("true")))
            .expect_err("CI=true: missing data must fail the test");
        let msg = err
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        assert!(
            msg.contains("t1") && msg.contains("mcp-tests-no-spec-data-here"),
            "{msg}"
        );
        assert!(msg.contains("MCP_SPEC_DATA"), "{msg}");
        // Locally (no CI) it only says so and returns: the caller skips.
        spec_data_missing_under("t2", &dir, None);
        spec_data_missing_under("t3", &dir, Some("false"));
    }
}
