//! The users server with OpenTelemetry: the MCP spans of OpenTelemetry's semantic conventions
//! for MCP (`mcp-otel`: one `SERVER` span per request, named `tools/call get_user` and so on,
//! the child of the caller's span when its `params._meta` carries a `traceparent`), and the
//! transport's own `tracing` spans through the `tracing-opentelemetry` layer, all printed by
//! the stdout exporter (swap in `opentelemetry-otlp`'s exporter to send them to a collector;
//! nothing else changes).
//!
//! ```text
//! cargo run --release -p mcp-demo --example otel -- --bind 127.0.0.1:8080
//! ```
//!
//! The transport's spans, all at `debug` under the `mcp_driver` and `mcp_service` targets:
//! - `exchange`, one per HTTP exchange: `method`, `rpc.method`, `tool` (the tool or prompt
//!   name, or the resource URI), `session` (the session id's 8-character prefix), `status`,
//!   `ms`;
//! - `rpc`, one per request a handler runs: `rpc.method`, `tool`, `outcome`;
//! - `session`, from a session's creation to its end.
//!
//! `RUST_LOG` filters the formatted lines on stderr as in the other examples; the exporter
//! always gets the transport's spans.

use std::net::SocketAddr;
use std::process::ExitCode;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

const USAGE: &str = "usage: otel [--bind HOST:PORT]   (default 127.0.0.1:8080)";

fn bind_arg() -> Result<SocketAddr, String> {
    mcp_demo::bind::bind_only(std::env::args().skip(1), USAGE)
}

#[tokio::main]
async fn main() -> ExitCode {
    let addr = match bind_arg() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    // A simple (synchronous) span processor: each span is printed as it ends. A service
    // exporting over the network would use `with_batch_exporter`.
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .build();
    // W3C trace context in `params._meta` (what `mcp-otel` extracts by default), and the MCP
    // spans on this provider (metrics: the global meter provider, a no-op until one is set).
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let telemetry = mcp_otel::McpTelemetry::new(
        provider.tracer_with_scope(mcp_otel::scope()),
        &opentelemetry::global::meter_with_scope(mcp_otel::scope()),
    );
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("mcp-users"))
        .with_filter(
            Targets::new()
                .with_target("mcp_driver", LevelFilter::DEBUG)
                .with_target("mcp_service", LevelFilter::DEBUG),
        );
    let rust_log = std::env::var("RUST_LOG").ok();
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(mcp_demo::logging::filter(rust_log.as_deref()));
    tracing_subscriber::registry().with(otel).with(lines).init();

    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot bind {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = mcp_proto::server::ServerConfig::default();
    let serving = match mcp_tokio::serve(listener, mcp_demo::users::server().telemetry(telemetry))
        .config(config)
        .start()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("users MCP server on {} (spans on stdout)", serving.url());
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("cannot wait for Ctrl-C: {e}");
    }
    serving.shutdown().await;
    // Flushes what is still buffered.
    if let Err(e) = provider.shutdown() {
        eprintln!("tracer provider: {e}");
    }
    ExitCode::SUCCESS
}
