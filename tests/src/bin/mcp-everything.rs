//! The conformance "everything" server (the tools, resources and prompts the official suite's
//! server scenarios call, plus `echo`).
//!
//! ```text
//! cargo run --release --bin mcp-everything -- --runtime tokio|smol --bind 127.0.0.1:3001 [--stateless] [--json]
//!     [--store redis://HOST:PORT [--instance NAME]] [--state-key-file FILE] [--allow-origin ORIGIN]...
//! ```
//!
//! Serves `/mcp`, prints its URL, and runs until Ctrl-C. With `--store`, it is one instance of
//! a cluster sharing that Redis (see `mcp_demo::scale`); the requestState key comes from
//! `--state-key-file` or `MCP_STATE_KEY`. Each `--allow-origin` adds an origin to a CORS
//! allow-list ([`CorsConfig::allow_origins`]): browser pages served from it may call the
//! server and read `Mcp-Session-Id`; without the flag CORS stays off.

use std::net::SocketAddr;
use std::process::ExitCode;

use mcp_demo::scale::ScaleOut;
use mcp_proto::server::{CorsConfig, ResponseMode, ServerConfig};
use mcp_tests::runtime::Runtime;

const USAGE: &str =
    "usage: mcp-everything [--runtime tokio|smol] [--bind HOST:PORT] [--stateless] [--json] [--retry-ms N]
    [--store URL [--instance NAME]] [--state-key-file FILE] [--allow-origin ORIGIN]...
  --runtime   the adapter to serve with: tokio (default) or smol
  --bind      default 127.0.0.1:3001
  --stateless no sessions: no session ids, GET and DELETE answered 405
  --json      answer every request with one JSON body (never SSE)
  --retry-ms  the SSE `retry` field: how long a cut client waits to resume (default 3000)
  --allow-origin  CORS for this browser origin (`http://127.0.0.1:8000`); repeatable; default: no CORS";

struct Args {
    runtime: Runtime,
    bind: SocketAddr,
    stateless: bool,
    json: bool,
    scale: ScaleOut,
    retry: Option<std::time::Duration>,
    /// `--allow-origin`s, in order; empty: no CORS.
    allow_origins: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut bind = "127.0.0.1:3001".to_owned();
    let mut runtime = "tokio".to_owned();
    let (mut stateless, mut json) = (false, false);
    let mut scale = ScaleOut::default();
    let mut retry = None;
    let mut allow_origins = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if scale.take(&arg, &mut args)? {
            continue;
        }
        match arg.as_str() {
            "--bind" => bind = args.next().ok_or("--bind needs an address")?,
            "--runtime" => runtime = args.next().ok_or("--runtime needs a name")?,
            "--stateless" => stateless = true,
            "--json" => json = true,
            "--retry-ms" => {
                let ms = args.next().ok_or("--retry-ms needs a number")?;
                let ms: u64 = ms
                    .parse()
                    .map_err(|e| format!("bad --retry-ms {ms:?}: {e}"))?;
                retry = Some(std::time::Duration::from_millis(ms));
            }
            "--allow-origin" => {
                let origin = args.next().ok_or("--allow-origin needs an origin")?;
                if !(origin.starts_with("http://") || origin.starts_with("https://"))
                    || origin.trim_end_matches('/').matches('/').count() != 2
                {
                    return Err(format!(
                        "bad --allow-origin {origin:?}: an origin is scheme://host[:port], \
                         without a path"
                    ));
                }
                allow_origins.push(origin.trim_end_matches('/').to_owned());
            }
            "-h" | "--help" => return Err(format!("{USAGE}\n{}", mcp_demo::scale::USAGE)),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let runtime = runtime
        .parse()
        .map_err(|e: String| format!("{e}\n{USAGE}"))?;
    let bind = mcp_demo::bind::parse_bind(&bind)?;
    Ok(Args {
        runtime,
        bind,
        stateless,
        json,
        scale,
        retry,
        allow_origins,
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
    if let Some(retry) = args.retry {
        config = config.with_retry_interval(retry);
    }
    if !args.allow_origins.is_empty() {
        eprintln!("CORS: allowing {}", args.allow_origins.join(", "));
        config = config.with_cors(CorsConfig::allow_origins(args.allow_origins.clone()));
    }
    let runtime = args.runtime;
    let applied = args.scale.apply(
        mcp_tests::everything::server(),
        config,
        Default::default(),
        |url| {
            match runtime {
                Runtime::Tokio => mcp_tokio::redis_backend(url, Default::default()),
                Runtime::Smol => mcp_smol::redis_backend(url, Default::default()),
            }
            .map_err(|e| e.to_string())
        },
    );
    let (server, config, driver) = match applied {
        Ok(applied) => applied,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let serving = match args
        .runtime
        .serve_with(args.bind, server, config, driver)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot serve on {}: {e}", args.bind);
            return ExitCode::FAILURE;
        }
    };
    println!(
        "everything MCP server ({}, {}) on {}",
        args.runtime,
        args.scale.describe(),
        serving.url()
    );
    if let Err(e) = args.runtime.ctrl_c().await {
        eprintln!("cannot wait for Ctrl-C: {e}");
    }
    serving.shutdown().await;
    ExitCode::SUCCESS
}
