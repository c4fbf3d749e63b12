//! The "custom endpoints" example of mcp-go's server guide: the MCP endpoint mounted in an axum
//! `Router` at `/mcp`, beside an ordinary JSON route, `GET /api/status`.
//!
//! ```text
//! cargo run --release -p mcp-tokio --example axum -- --bind 127.0.0.1:8080
//! curl http://127.0.0.1:8080/api/status
//! cargo run --release -p mcp-tokio --example client -- http://127.0.0.1:8080/mcp
//! ```
//!
//! [`McpService`] is a hyper service; an axum handler hands it the request and returns its
//! streamed response. Unlike [`mcp_tokio::serve`], `McpService::new` takes the configuration
//! as given, so the example installs what `serve` would: CSPRNG session ids and `Host`
//! validation for the bound address. Logs go to stderr (`RUST_LOG`, default `info`); Ctrl-C
//! shuts down (the MCP driver first, so open SSE streams end and connections can drain).

use std::net::SocketAddr;
use std::process::ExitCode;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::serve::ListenerExt;
use mcp_proto::server::ServerConfig;
use mcp_tokio::{McpService, RandomSessionIds};
use serde_json::json;

const USAGE: &str = "usage: axum [--bind ADDR:PORT]   (default 127.0.0.1:8080)";

/// The MCP endpoint as an axum handler.
async fn mcp(service: McpService, req: Request) -> Response {
    match service.handle(req).await {
        Ok(response) => response.map(axum::body::Body::new),
        // Only after `shutdown`: the driver is gone.
        Err(gone) => (StatusCode::SERVICE_UNAVAILABLE, gone.to_string()).into_response(),
    }
}

/// An ordinary route next to it.
async fn status() -> axum::Json<serde_json::Value> {
    axum::Json(json!({"status": "ok", "mcp": "/mcp"}))
}

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
    let addr = listener.local_addr().unwrap_or(addr);

    // What `mcp_tokio::serve` does to the configuration, then the service.
    let config = ServerConfig::default()
        .with_session_ids(RandomSessionIds)
        .bound_to(addr.ip());
    let service = McpService::new(mcp_demo::users::server(), config);
    let app = Router::new()
        .route("/api/status", get(status))
        .route("/mcp", {
            let service = service.clone();
            any(move |req: Request| mcp(service.clone(), req))
        });

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
