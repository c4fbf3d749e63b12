//! The user server of mcp-go's server guide (`get_user`, `create_user`, `search_users`,
//! `users://{user_id}`) on an in-memory store, served over tokio + hyper.
//!
//! ```text
//! cargo run --release -p mcp-tokio --example users -- --bind 127.0.0.1:8080
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

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let addr = match bind_arg() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot bind {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let serving =
        match mcp_tokio::serve(listener, mcp_demo::users::server(), ServerConfig::default()) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("cannot serve: {e}");
                return ExitCode::FAILURE;
            }
        };
    println!("users MCP server on {}", serving.url());
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("cannot wait for Ctrl-C: {e}");
    }
    println!("shutting down");
    serving.shutdown().await;
    ExitCode::SUCCESS
}
