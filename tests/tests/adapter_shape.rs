//! The adapters stay thin over the one shared driver (`mcp_driver`): at most 500 code
//! lines each, and no run of 6+ lines written in both (see `mcp_tests::shape`).

use mcp_tests::shape;

/// Both within their bounds ([`shape::BOUNDS`]: what both need is the driver's, what one
/// needs is its own).
#[test]
fn each_adapter_is_within_its_code_line_bound() {
    let root = shape::workspace_root();
    for (adapter, bound) in shape::BOUNDS {
        let n = shape::count_code_lines(&root.join(adapter).join("src"));
        assert!(
            n <= bound,
            "{adapter}/src has {n} code lines; the bound is {bound}"
        );
    }
}

#[test]
fn the_adapters_share_no_run_of_six_lines() {
    let root = shape::workspace_root();
    let runs = shape::shared_runs(&root.join("mcp-tokio/src"), &root.join("mcp-smol/src"), 6);
    assert!(runs.is_empty(), "shared runs: {runs:#?}");
}

#[test]
fn the_run_finder_finds_a_shared_run() {
    let dir = std::env::temp_dir().join(format!("adapter-shape-{}", std::process::id()));
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let body = "let x = 1;\nlet y = 2;\n}\nlet z = x + y;\nfoo(z);\nbar(z);\nbaz(z);\n";
    std::fs::write(a.join("one.rs"), format!("fn a() {{\n{body}}}\n")).unwrap();
    std::fs::write(
        b.join("two.rs"),
        format!("// other\nfn b() {{\n    {body}}}\n"),
    )
    .unwrap();
    let runs = shape::shared_runs(&a, &b, 6);
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0].len, 6);
    assert!(shape::shared_runs(&a, &b, 7).is_empty());
    assert_eq!(shape::count_code_lines(&a), 9);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The transport core (`mcp-proto`, all of it but the fuzzing entry points) holds no lock,
/// no channel, no waker and no shared plug-in (`Arc<dyn …>`): a pure state machine. (CI
/// also checks its dependency tree with `cargo tree`.)
#[test]
fn the_transport_core_has_no_lock_or_channel() {
    let src = shape::workspace_root().join("mcp-proto/src");
    let layered = ["fuzzing"];
    let mut found = Vec::new();
    for file in shape::rust_files(&src) {
        let rel = file.strip_prefix(&src).unwrap_or(&file);
        if layered.iter().any(|l| rel.starts_with(l)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (n, line) in shape::code_lines(&text) {
            for word in [
                "Mutex",
                "RwLock",
                "Condvar",
                "mpsc",
                "futures_channel",
                "Waker",
                "Atomic",
                "Arc<dyn",
                "oneshot",
                "async_channel",
                "crossbeam",
            ] {
                if line.contains(word) {
                    found.push(format!("{}:{n}: {line}", rel.display()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "locks or channels in the transport core:\n{}",
        found.join("\n")
    );
    assert!(
        shape::rust_files(&src).len() > 30,
        "the scan read the core's sources"
    );
}
