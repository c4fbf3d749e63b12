//! The shape the workspace promises a newcomer, held from the repository alone:
//!
//! - the README is short (≤ 300 lines) and shows both commands, a whole server and a whole
//!   client before line 100;
//! - no two public types of the core and the runtime-neutral crates (`mcp-proto`,
//!   `mcp-service`, `mcp-driver`, `mcp-redis`) share a name: one name per concept (the
//!   adapters may mirror each other's names, and do: `mcp_tokio::Client`, `mcp_smol::Client`).
//!
//! (`adapter_shape.rs` holds the adapters' bounds and the core's freedom from locks; `.ci/run`
//! checks the core's dependency tree with `cargo tree`.)

use std::collections::BTreeMap;
use std::path::Path;

use mcp_tests::shape;

fn readme() -> String {
    std::fs::read_to_string(shape::workspace_root().join("README.md")).expect("README.md")
}

#[test]
fn the_readme_is_short_and_shows_the_commands_a_server_and_a_client_before_line_100() {
    let text = readme();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 300, "README.md has {} lines", lines.len());
    let line_of = |needle: &str| {
        lines
            .iter()
            .position(|l| l.trim() == needle)
            .map(|i| i + 1)
            .unwrap_or_else(|| panic!("README.md has no line {needle:?}"))
    };
    for command in [
        "cargo run --release -p mcp-tokio --example users -- --bind 127.0.0.1:8080",
        "cargo test --workspace",
    ] {
        assert!(line_of(command) < 100, "{command:?} after line 100");
    }
    // The Rust blocks (compiled as doctests of mcp-demo): a server that serves and a client
    // that connects, each whole (a `main`), both closed before line 100.
    let mut blocks = Vec::new();
    let mut open: Option<usize> = None;
    for (i, l) in lines.iter().enumerate() {
        match (open, l.trim_start()) {
            (None, t) if t.starts_with("```rust") => open = Some(i),
            (Some(start), "```") => {
                blocks.push((start + 1, i + 1, lines[start..i].join("\n")));
                open = None;
            }
            _ => {}
        }
    }
    let whole = |needle: &str| {
        blocks
            .iter()
            .find(|(_, _, code)| code.contains(needle) && code.contains("fn main"))
            .map(|(_, end, _)| *end)
            .unwrap_or_else(|| panic!("no whole Rust block with {needle:?} in README.md"))
    };
    assert!(
        whole("mcp_tokio::serve(") < 100,
        "the server ends after line 100"
    );
    assert!(
        whole("Client::connect(") < 100,
        "the client ends after line 100"
    );
}

/// The public type names declared in `dir` (`pub struct|enum|trait|type NAME`, outside test
/// modules), with the file that declares each.
fn public_types(dir: &Path, out: &mut BTreeMap<String, Vec<String>>) {
    for file in shape::rust_files(dir) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (_, line) in shape::code_lines(&text) {
            let t = line.trim_start();
            let Some(rest) = ["pub struct ", "pub enum ", "pub trait ", "pub type "]
                .iter()
                .find_map(|k| t.strip_prefix(k))
            else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // A macro's `pub struct $name` declares what its callers name.
            if name.is_empty() {
                continue;
            }
            out.entry(name)
                .or_default()
                .push(file.display().to_string());
        }
    }
}

#[test]
fn no_two_public_types_of_the_core_and_runtime_neutral_crates_share_a_name() {
    let root = shape::workspace_root();
    let mut names = BTreeMap::new();
    for dir in [
        "mcp-proto/src",
        "mcp-proto/service/src",
        "mcp-proto/driver/src",
        "mcp-proto/redis/src",
    ] {
        public_types(&root.join(dir), &mut names);
    }
    assert!(names.len() > 200, "the scan read {} names", names.len());
    let twice: Vec<_> = names.iter().filter(|(_, files)| files.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "public type names defined twice: {twice:#?}"
    );
}
