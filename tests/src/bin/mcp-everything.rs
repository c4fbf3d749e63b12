//! The conformance "everything" server (the tools, resources and prompts the official suite's
//! server scenarios call, plus `echo`).
//!
//! ```text
//! cargo run --release --bin mcp-everything -- --runtime tokio|smol --bind 127.0.0.1:3001 [--stateless] [--json]
//! ```
//!
//! Serves `/mcp`, prints its URL, and runs until Ctrl-C.

use std::net::SocketAddr;
use std::process::ExitCode;

use mcp_proto::server::{ResponseMode, ServerConfig};
use mcp_tests::runtime::Runtime;

const USAGE: &str =
    "usage: mcp-everything [--runtime tokio|smol] [--bind ADDR:PORT] [--stateless] [--json]
  --runtime   the adapter to serve with: tokio (default) or smol
  --bind      default 127.0.0.1:3001
  --stateless no sessions: no session ids, GET and DELETE answered 405
  --json      answer every request with one JSON body (never SSE)";

struct Args {
    runtime: Runtime,
    bind: SocketAddr,
    stateless: bool,
    json: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut bind = "127.0.0.1:3001".to_owned();
    let mut runtime = "tokio".to_owned();
    let (mut stateless, mut json) = (false, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bind" => bind = args.next().ok_or("--bind needs an address")?,
            "--runtime" => runtime = args.next().ok_or("--runtime needs a name")?,
            "--stateless" => stateless = true,
            "--json" => json = true,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let runtime = runtime
        .parse()
        .map_err(|e: String| format!("{e}\n{USAGE}"))?;
    let bind = bind
        .parse()
        .map_err(|e| format!("bad --bind address {bind:?}: {e}"))?;
    Ok(Args {
        runtime,
        bind,
        stateless,
        json,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    args.runtime.block_on(run(args))
}

async fn run(args: Args) -> ExitCode {
    let mut config = ServerConfig::default().with_stateless(args.stateless);
    if args.json {
        config = config.with_response_mode(ResponseMode::Json);
    }
    let serving = match args
        .runtime
        .serve_on(args.bind, mcp_tests::everything::server(), config)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot serve on {}: {e}", args.bind);
            return ExitCode::FAILURE;
        }
    };
    println!(
        "everything MCP server ({}) on {}",
        args.runtime,
        serving.url()
    );
    if let Err(e) = args.runtime.ctrl_c().await {
        eprintln!("cannot wait for Ctrl-C: {e}");
    }
    serving.shutdown().await;
    ExitCode::SUCCESS
}
