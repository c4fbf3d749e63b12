//! The user server of mcp-go's server guide (`get_user`, `create_user`, `search_users`,
//! `users://{user_id}`) on an in-memory store, served over smol + async-h1.
//!
//! ```text
//! cargo run --release -p mcp-smol --example users -- --bind 127.0.0.1:8080
//! ```
//!
//! Prints the endpoint's URL; Ctrl-C shuts it down.

use std::net::SocketAddr;
use std::process::ExitCode;

use mcp_proto::server::ServerConfig;

const USAGE: &str = "usage: users [--bind ADDR:PORT]   (default 127.0.0.1:8080)";

fn bind_arg() -> Result<SocketAddr, String> {
    let mut bind = "127.0.0.1:8080".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bind" => bind = args.next().ok_or("--bind needs an address")?,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    bind.parse()
        .map_err(|e| format!("bad --bind address {bind:?}: {e}"))
}

/// Resolves at the first Ctrl-C (SIGINT).
async fn ctrl_c() -> std::io::Result<()> {
    use smol::stream::StreamExt;
    let mut signals = async_signal::Signals::new([async_signal::Signal::Int])?;
    signals.next().await;
    Ok(())
}

fn main() -> ExitCode {
    smol::block_on(run())
}

async fn run() -> ExitCode {
    let addr = match bind_arg() {
        Ok(addr) => addr,
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
    let serving =
        match mcp_smol::serve(listener, mcp_demo::users::server(), ServerConfig::default()) {
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
