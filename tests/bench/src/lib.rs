//! What the benchmark binaries share: `bench-servers` (our servers and rmcp's side by side)
//! and `bench-cluster` (our servers scaled out on Redis behind nginx).
//!
//! - [`client`]: the neutral hyper HTTP/1.1 keep-alive client, every reply checked;
//! - [`load`]: the load phases (echo calls over concurrent sessions, sessions opened in a
//!   loop) and their statistics;
//! - [`process`]: the server children (the binary re-executed with `--serve`, printing its
//!   URL) and the CPU time and RSS of a process from `/proc`;
//! - [`echo`]: our `echo(text) -> text` server on either adapter, served until stdin closes;
//! - [`chart`]: the SVG charts written next to the tables;
//! - [`instance`]: one of our instances as a child (adapter, memory or Redis store), and
//!   the services beside it on core 0;
//! - [`floor`]: the floor server (hyper + tokio, body parsed, one SSE frame, nothing kept),
//!   the lower bound ours are measured against.

pub mod chart;
pub mod client;
pub mod echo;
pub mod floor;
pub mod instance;
pub mod load;
pub mod process;

/// Pins the calling thread (and so every thread and process it starts later) to `core`, if
/// it exists. (Not looked up in `get_core_ids`, which lists only the cores of the current
/// mask: a server child inherits the load generator's.)
pub fn pin_to(core: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: core })
}

/// Where a benchmark writes its chart `name`: `tests/bench/charts/` for a full run (the
/// README shows those), the temporary directory for a `--quick` one.
pub fn chart_path(name: &str, quick: bool) -> std::path::PathBuf {
    if quick {
        std::env::temp_dir().join(name)
    } else {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("charts")
            .join(name)
    }
}

/// A tokio current-thread runtime with I/O and time: what every benchmark process runs its
/// load generator or tokio server on (one thread, so pinning the caller pins it all).
///
/// # Errors
///
/// When tokio cannot build it, as a message.
pub fn current_thread() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime: {e}"))
}
