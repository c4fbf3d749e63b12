//! The examples' logging: the core's `tracing` events on stderr, filtered by `RUST_LOG`
//! (comma-separated `target=level` directives and a bare default level, e.g.
//! `info,mcp_driver=debug`; default `info`: startup, recoveries and warnings).
//!
//! The filter is `tracing_subscriber`'s `Targets`, not its `EnvFilter`: the same directives
//! for targets and levels, without span and field filters, and without the regex engine
//! behind them, which would double the cold build of the examples.

use std::io::IsTerminal;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

/// The filter `RUST_LOG` gives (`info` when unset; a bad value is reported on stderr and
/// `info` used instead).
pub fn filter(rust_log: Option<&str>) -> Targets {
    let default = Targets::new().with_default(LevelFilter::INFO);
    match rust_log.map(str::parse::<Targets>) {
        None => default,
        Some(Ok(targets)) => targets,
        Some(Err(e)) => {
            eprintln!("RUST_LOG: {e}; logging at info");
            default
        }
    }
}

/// Installs the subscriber: formatted lines on stderr (coloured on a terminal), filtered by
/// `RUST_LOG`. Call once, at the start of `main`.
pub fn init() {
    let rust_log = std::env::var("RUST_LOG").ok();
    let stderr_is_terminal = std::io::stderr().is_terminal();
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(stderr_is_terminal)
        .with_filter(filter(rust_log.as_deref()))
        .with_subscriber(tracing_subscriber::registry())
        .init();
}

#[cfg(test)]
mod tests {
    use super::filter;
    use tracing::Level;

    #[test]
    fn rust_log_directives_select_levels_per_target() {
        let f = filter(Some("warn,mcp_driver=debug"));
        assert!(f.would_enable("mcp_driver::server", &Level::DEBUG));
        assert!(!f.would_enable("mcp_driver::server", &Level::TRACE));
        assert!(!f.would_enable("mcp_service", &Level::INFO));
        assert!(f.would_enable("hyper", &Level::WARN));
        assert!(!f.would_enable("hyper", &Level::INFO));
    }

    #[test]
    fn unset_or_bad_rust_log_logs_at_info() {
        for f in [filter(None), filter(Some("mcp_driver=loud"))] {
            assert!(f.would_enable("mcp_driver", &Level::INFO));
            assert!(!f.would_enable("mcp_driver", &Level::DEBUG));
        }
    }
}
