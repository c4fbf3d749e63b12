//! The user server of mcp-go's server guide (`get_user`, `create_user`, `search_users`,
//! `users://{user_id}`) on an in-memory store, served over smol + async-h1.
//!
//! ```text
//! cargo run --release -p mcp-smol --example smol_users -- --bind 127.0.0.1:8080
//! cargo run --release -p mcp-smol --features redis --example smol_users -- --bind 127.0.0.1:8081 \
//!     --store redis://127.0.0.1:6379 --instance a
//! ```
//!
//! With `--store`, the sessions, their streams and the notification bus are shared by every
//! instance on that Redis (the user records stay in each process's memory: they are the
//! demo's data, not the transport's).
//!
//! Prints the endpoint's URL; Ctrl-C shuts it down.

use std::net::SocketAddr;
use std::process::ExitCode;

use std::sync::Arc;

use mcp_demo::scale::ScaleOut;
use mcp_smol::ClusterBackend;
use mcp_smol::{DriverConfig, ServerConfig};

const USAGE: &str = "usage: users [--bind HOST:PORT]   (default 127.0.0.1:8080)";

fn parse_args() -> Result<(SocketAddr, ScaleOut), String> {
    let mut scale = ScaleOut::default();
    let usage = format!("{USAGE}\n{}", mcp_demo::scale::USAGE);
    let args = std::env::args().skip(1);
    let addr = mcp_demo::bind::bind_and(args, &usage, |flag, rest| scale.take(flag, rest))?;
    Ok((addr, scale))
}

/// The Redis store of `--store` (a build without the `redis` feature says how to get one).
fn redis(url: &str) -> Result<Arc<dyn ClusterBackend>, String> {
    #[cfg(feature = "redis")]
    return mcp_smol::redis_backend(url, Default::default()).map_err(|e| e.to_string());
    #[cfg(not(feature = "redis"))]
    return Err(format!(
        "{url} needs the Redis store: build with `cargo run -p mcp-smol --features redis --example smol_users`"
    ));
}

/// Resolves at the first Ctrl-C (SIGINT).
async fn ctrl_c() -> std::io::Result<()> {
    use smol::stream::StreamExt;
    let mut signals = async_signal::Signals::new([async_signal::Signal::Int])?;
    signals.next().await;
    Ok(())
}

fn main() -> ExitCode {
    mcp_demo::logging::init();
    smol::block_on(run())
}

async fn run() -> ExitCode {
    let (addr, server, config, driver) = match parse_args().and_then(|(addr, scale)| {
        let (server, config, driver) = scale.apply(
            mcp_demo::users::server(),
            ServerConfig::default(),
            DriverConfig::default(),
            redis,
        )?;
        Ok((addr, server, config, driver))
    }) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let listener = match smol::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot bind {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let serving = match mcp_smol::serve(listener, server)
        .config(config)
        .driver(driver)
        .start()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("users MCP server on {}", serving.url());
    if let Err(e) = ctrl_c().await {
        eprintln!("cannot wait for Ctrl-C: {e}");
    }
    println!("shutting down");
    serving.shutdown().await;
    ExitCode::SUCCESS
}
