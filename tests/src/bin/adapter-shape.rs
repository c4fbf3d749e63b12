//! Prints the code lines of each adapter's `src/` and the runs of 6+ lines the two share
//! (see `mcp_tests::shape`). Exit status 1 when an adapter is over its bound
//! (`shape::BOUNDS`) or a run is shared. `adapter-shape [ROOT]`: another checkout (e.g. an older commit's worktree), for a
//! before/after.

use std::process::ExitCode;

use mcp_tests::shape;

fn main() -> ExitCode {
    let root = std::env::args_os()
        .nth(1)
        .map_or_else(shape::workspace_root, std::path::PathBuf::from);
    let mut ok = true;
    for (adapter, bound) in shape::BOUNDS {
        let n = shape::count_code_lines(&root.join(adapter).join("src"));
        ok &= n <= bound;
        println!("{adapter}/src: {n} code lines (bound {bound})");
    }
    let runs = shape::shared_runs(&root.join("mcp-tokio/src"), &root.join("mcp-smol/src"), 6);
    println!(
        "runs of 6+ lines shared by mcp-tokio/src and mcp-smol/src: {}",
        runs.len()
    );
    for r in &runs {
        println!(
            "  {}:{} ~ {}:{} ({} lines from `{}`)",
            r.a.0.display(),
            r.a.1,
            r.b.0.display(),
            r.b.1,
            r.len,
            r.first
        );
    }
    ok &= runs.is_empty();
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
