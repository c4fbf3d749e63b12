//! The conformance "everything" server (`../shared/docs/conformance.md` §4, plus `echo`).
//!
//! ```text
//! cargo run --release --bin mcp-everything -- --runtime tokio --bind 127.0.0.1:3001 [--stateless] [--json]
//! ```
//!
//! Serves `/mcp`, prints its URL, and runs until Ctrl-C.

use std::net::SocketAddr;
use std::process::ExitCode;

use mcp_proto::server::{ResponseMode, ServerConfig};

const USAGE: &str =
    "usage: mcp-everything [--runtime tokio] [--bind ADDR:PORT] [--stateless] [--json]
  --runtime   the adapter to serve with (tokio; smol arrives with the mcp-smol adapter)
  --bind      default 127.0.0.1:3001
  --stateless no sessions: no session ids, GET and DELETE answered 405
  --json      answer every request with one JSON body (never SSE)";

struct Args {
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
    if runtime != "tokio" {
        return Err(format!(
            "runtime {runtime:?} is not available in this build (only tokio so far)\n{USAGE}"
        ));
    }
    let bind = bind
        .parse()
        .map_err(|e| format!("bad --bind address {bind:?}: {e}"))?;
    Ok(Args {
        bind,
        stateless,
        json,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut config = ServerConfig::default().with_stateless(args.stateless);
    if args.json {
        config = config.with_response_mode(ResponseMode::Json);
    }
    let listener = match tokio::net::TcpListener::bind(args.bind).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot bind {}: {e}", args.bind);
            return ExitCode::FAILURE;
        }
    };
    let serving = match mcp_tokio::serve(listener, mcp_tests::everything::server(), config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("everything MCP server on {}", serving.url());
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("cannot wait for Ctrl-C: {e}");
    }
    serving.shutdown().await;
    ExitCode::SUCCESS
}
