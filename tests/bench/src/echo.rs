//! Our echo server, the same for both adapters, served until stdin closes.

use std::time::Duration;

use mcp_proto::server::ServerConfig;
use mcp_service::{CallToolResult, Server, Tool, ToolArgs, required};

use crate::process::URL_LINE;

/// `echo(text) -> text`.
pub fn server() -> Server {
    Server::new("bench-ours", env!("CARGO_PKG_VERSION")).tool(
        Tool::new("echo")
            .description("Returns its text")
            .string("text", required().description("The text to return")),
        |_ctx, args: ToolArgs| async move { Ok(CallToolResult::text(args.get_string("text", ""))) },
    )
}

/// [`server`] with `stream(text, steps, delay_ms) -> text` as well: `steps` progress
/// notifications (when the call has a progress token), `delay_ms` apart on the transport's
/// clock, then the text. `steps` at most 1,000 and `delay_ms` at most 10 s (a benchmark's
/// bounds, not a protocol's).
pub fn streaming_server() -> Server {
    server().tool(
        Tool::new("stream")
            .description("Reports progress `steps` times, `delay_ms` apart, then returns its text")
            .string("text", required().description("The text to return"))
            .integer(
                "steps",
                required().description("Progress notifications to send"),
            )
            .integer(
                "delay_ms",
                required().description("Milliseconds before each one"),
            ),
        |ctx, args: ToolArgs| async move {
            let steps = args.get_int("steps", 0).clamp(0, 1_000) as u64;
            let delay = Duration::from_millis(args.get_int("delay_ms", 0).clamp(0, 10_000) as u64);
            for step in 1..=steps {
                ctx.sleep(delay).await;
                ctx.progress(step, Some(steps));
            }
            Ok(CallToolResult::text(args.get_string("text", "")))
        },
    )
}

/// The default configuration with room for every session a benchmark opens.
pub fn config() -> ServerConfig {
    ServerConfig::default().with_max_sessions(100_000)
}

/// `mcp_tokio::serve` of `server` on `listener` with `config`; prints its URL and serves
/// until stdin closes.
///
/// # Errors
///
/// When it cannot serve.
pub async fn serve_tokio(
    listener: tokio::net::TcpListener,
    server: Server,
    config: ServerConfig,
    driver: mcp_tokio::DriverConfig,
) -> std::io::Result<()> {
    let serving = mcp_tokio::serve(listener, server)
        .config(config)
        .driver(driver)
        .start()?;
    println!("{URL_LINE}{}", serving.url());
    wait_for_stdin_eof().await;
    serving.handle().shutdown();
    Ok(())
}

/// `mcp_smol::serve` of `server` on `bind` with `config`; prints its URL and serves until
/// stdin closes, with the calling thread parked off the reactor: it
/// waits in a plain blocking read, not in `smol::block_on`, so that smol's executor thread is
/// the one polling the reactor and runs the tasks it wakes itself. (A thread parked in
/// `block_on` competes for the reactor: when it holds it, every I/O event is handed to the
/// executor's thread, a cross-thread wake-up and context switch per event.)
///
/// # Errors
///
/// When it cannot bind or serve.
pub fn serve_smol_parked(
    bind: &str,
    server: Server,
    config: ServerConfig,
    driver: mcp_smol::DriverConfig,
) -> std::io::Result<()> {
    let listener = smol::block_on(smol::net::TcpListener::bind(bind))?;
    let serving = mcp_smol::serve(listener, server)
        .config(config)
        .driver(driver)
        .start()?;
    println!("{URL_LINE}{}", serving.url());
    let mut sink = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    serving.handle().shutdown();
    Ok(())
}

/// Resolves when stdin reaches its end (the parent closed it or exited). Runtime-neutral
/// (a thread and tokio's oneshot channel, which needs no tokio runtime).
pub async fn wait_for_stdin_eof() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        let _ = tx.send(());
    });
    let _ = rx.await;
}
