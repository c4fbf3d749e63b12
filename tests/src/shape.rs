//! The shape of the adapters, measured from the repository alone: code lines per adapter and
//! the runs of lines the two share (`cargo run -p mcp-tests --bin adapter-shape`; the test
//! `adapter_shape` holds them to the design's bounds).
//!
//! A **code line** is a line that is not blank and not a `//` comment, in a file up to its
//! first `#[cfg(test)]` line (test modules sit at the end of a file). A **shared run** is a
//! stretch of at least `min` consecutive significant lines that stands, the same after
//! whitespace is folded, in a file of each adapter; significant lines are code lines other
//! than `use` lines and lone punctuation (`}`, `});`, `)?;`, …), which any two Rust files
//! share.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Each adapter's bound on its code lines. Everything both adapters need lives once in the
/// runtime-neutral driver (`mcp-driver`: run loops, queues, shutdown, TLS settings, the
/// handshake timeout). Code only one adapter uses lives in that adapter: mcp-smol carries
/// what async-h1 lacks and hyper brings to mcp-tokio — the futures-io connections (one
/// stream shared by async-h1's split reader and writer, the futures-rustls handshakes, the
/// cork that sends a whole answer at once: `conn.rs`) and the http-types ↔ http 1.x
/// conversion (`h1.rs`), ≈ 400 code lines, and the server's request-head reader (`h1.rs`,
/// `Reader`: heads parsed in place by httparse, where async-h1's decoder cost half the smol
/// server's instructions per call), ≈ 290 — beside its keep-alive pool, its watch for
/// departed clients and its body adapters. Hence two bounds: the design's 500 plus the
/// re-exports for mcp-tokio, and that plus the async-h1 glue for mcp-smol. mcp-tokio also
/// tells HTTP/1.1 from HTTP/2 itself (`sniff`, `Sniffed`, ≈ 90 lines: what hyper-util's `auto`
/// builder did, redone so that hyper's HTTP/1 read buffer is not doubled: 8 KiB less per
/// open GET stream), and answers a connection's first `GET` outside hyper (`first.rs`,
/// ≈ 200 lines more: the response head and its chunks written as they come, the socket
/// watched for EOF meanwhile, the connection handed to hyper after; an open GET stream then
/// holds none of hyper's two 8 KiB buffers, 23 KB → 6.3 KB of heap). And each runs the
/// Redis links on a thread of its own (`LinkThread` in `redis.rs`, ≈ 30 lines each: a
/// current-thread tokio runtime, a smol executor; where the link waited behind the server's
/// connection tasks, a burst of streaming calls on Redis failed).
pub const BOUNDS: [(&str, usize); 2] = [("mcp-tokio", 870), ("mcp-smol", 1260)];

/// The `.rs` files below `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The code lines of one file (trimmed, whitespace folded), with their line numbers.
pub fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let t = line.trim();
        if t.is_empty() || t.starts_with("//") {
            continue;
        }
        out.push((i + 1, t.split_whitespace().collect::<Vec<_>>().join(" ")));
    }
    out
}

/// How many code lines the `.rs` files below `dir` have.
pub fn count_code_lines(dir: &Path) -> usize {
    rust_files(dir)
        .iter()
        .map(|f| code_lines(&std::fs::read_to_string(f).unwrap_or_default()).len())
        .sum()
}

fn significant(line: &str) -> bool {
    !line.starts_with("use ")
        && !line.starts_with("pub use ")
        && !line.starts_with("mod ")
        && line.chars().any(|c| c.is_alphanumeric())
}

/// A run of lines that stands in two files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedRun {
    /// The first file and the line where the run starts there.
    pub a: (PathBuf, usize),
    /// The second file and the line where the run starts there.
    pub b: (PathBuf, usize),
    /// How many significant lines it has.
    pub len: usize,
    /// Its first line.
    pub first: String,
}

/// The maximal runs of at least `min` significant lines shared by a file below `a` and a
/// file below `b`.
pub fn shared_runs(a: &Path, b: &Path, min: usize) -> Vec<SharedRun> {
    let load = |dir: &Path| -> Vec<(PathBuf, Vec<(usize, String)>)> {
        rust_files(dir)
            .into_iter()
            .map(|f| {
                let lines = code_lines(&std::fs::read_to_string(&f).unwrap_or_default())
                    .into_iter()
                    .filter(|(_, l)| significant(l))
                    .collect();
                (f, lines)
            })
            .collect()
    };
    let (left, right) = (load(a), load(b));
    let mut runs = Vec::new();
    for (fa, la) in &left {
        for (fb, lb) in &right {
            let mut at: HashMap<&str, Vec<usize>> = HashMap::new();
            for (j, (_, l)) in lb.iter().enumerate() {
                at.entry(l.as_str()).or_default().push(j);
            }
            for (i, (_, l)) in la.iter().enumerate() {
                for &j in at.get(l.as_str()).into_iter().flatten() {
                    // Only where a run starts (the previous lines differ).
                    if i > 0 && j > 0 && la[i - 1].1 == lb[j - 1].1 {
                        continue;
                    }
                    let len = la[i..]
                        .iter()
                        .zip(&lb[j..])
                        .take_while(|(x, y)| x.1 == y.1)
                        .count();
                    if len >= min {
                        runs.push(SharedRun {
                            a: (fa.clone(), la[i].0),
                            b: (fb.clone(), lb[j].0),
                            len,
                            first: la[i].1.clone(),
                        });
                    }
                }
            }
        }
    }
    runs
}

/// The workspace root (this package's parent).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}
