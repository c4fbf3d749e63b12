//! The "custom endpoints" example of mcp-go's server guide: the MCP endpoint mounted in an axum
//! `Router` at `/mcp`, beside an ordinary JSON route, `GET /api/status`.
//!
//! ```text
//! cargo run --release -p mcp-demo --example axum -- --bind 127.0.0.1:8080
//! curl http://127.0.0.1:8080/api/status
//! cargo run --release -p mcp-tokio --example client -- http://127.0.0.1:8080/mcp
//! ```
//!
//! [`McpService`] is a tower service: `Router::route_service` mounts it as it is (it answers
//! 503 once the driver is gone, so it never fails). Unlike [`mcp_tokio::serve`],
//! `McpService::new` takes the configuration as given, so the example installs what `serve`
//! would: CSPRNG session ids and `Host` validation for the bound address. Logs go to stderr (`RUST_LOG`, default `info`); Ctrl-C
//! shuts down (the MCP driver first, so open SSE streams end and connections can drain).

use std::net::SocketAddr;
use std::process::ExitCode;

use axum::Router;
use axum::routing::get;
use axum::serve::ListenerExt;
use mcp_proto::server::ServerConfig;
use mcp_tokio::{McpService, RandomSessionIds};
use serde_json::json;

const USAGE: &str = "usage: axum [--bind ADDR:PORT]   (default 127.0.0.1:8080)";

/// An ordinary route next to the MCP endpoint.
async fn status() -> axum::Json<serde_json::Value> {
    axum::Json(json!({"status": "ok", "mcp": "/mcp"}))
}

fn bind_arg() -> Result<SocketAddr, String> {
    mcp_demo::bind::bind_only(std::env::args().skip(1), USAGE)
}

#[tokio::main]
async fn main() -> ExitCode {
    mcp_demo::logging::init();
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
    let addr = listener.local_addr().unwrap_or(addr);

    // What `mcp_tokio::serve` does to the configuration, then the service.
    let config = ServerConfig::default()
        .with_session_ids(RandomSessionIds)
        .bound_to(addr.ip());
    let service = McpService::new(mcp_demo::users::server(), config);
    let app = Router::new()
        .route_service("/mcp", service.clone())
        .route("/api/status", get(status));

    println!("users MCP server on http://{addr}/mcp (status on http://{addr}/api/status)");
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY");
        }
    });
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            if let Err(e) = tokio::signal::ctrl_c().await {
                eprintln!("cannot wait for Ctrl-C: {e}");
                std::future::pending::<()>().await;
            }
            println!("shutting down");
            service.shutdown();
        })
        .await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("server failed: {e}");
            ExitCode::FAILURE
        }
    }
}
