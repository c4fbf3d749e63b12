//! A command-line MCP client over smol + async-h1.
//!
//! ```text
//! cargo run --release -p mcp-smol --example client -- <url> [<tool> [<json args>]] [--listen]
//! ```
//!
//! Connects and initializes; then lists the tools, or calls `<tool>` with `<json args>`
//! (default `{}`) and prints its content. `--listen` keeps a GET stream open and prints the
//! server's notifications until Ctrl-C. Exits 0 on success.

use std::process::ExitCode;

use mcp_proto::client::ClientConfig;
use mcp_proto::schema::ContentBlock;
use mcp_smol::Client;
use serde_json::Value;
use smol::future::FutureExt;

const USAGE: &str = "usage: client <url> [<tool> [<json args>]] [--listen]";

struct Args {
    url: String,
    tool: Option<String>,
    args: Value,
    listen: bool,
}

fn parse() -> Result<Args, String> {
    let mut listen = false;
    let mut positional = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--listen" => listen = true,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            _ => positional.push(arg),
        }
    }
    let mut positional = positional.into_iter();
    let url = positional.next().ok_or(USAGE)?;
    let tool = positional.next();
    let args = match positional.next() {
        Some(json) => {
            serde_json::from_str(&json).map_err(|e| format!("bad JSON arguments: {e}"))?
        }
        None => Value::Object(Default::default()),
    };
    if positional.next().is_some() {
        return Err(USAGE.to_owned());
    }
    Ok(Args {
        url,
        tool,
        args,
        listen,
    })
}

async fn run(args: Args) -> Result<(), String> {
    let config = ClientConfig::new().with_continuous_listening(args.listen);
    let builder = mcp_proto::service::client::Client::builder("mcp-smol-client", "0.1.0");
    let client = Client::connect_with(&args.url, builder, config)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(info) = client.server_info() {
        eprintln!(
            "connected to {} {} ({})",
            info.server_info.name, info.server_info.version, info.protocol_version
        );
    }
    let mut notifications = client.notifications();
    let result = match &args.tool {
        None => match client.list_tools().await {
            Ok(tools) => {
                for tool in tools {
                    println!("{}\t{}", tool.name, tool.description.unwrap_or_default());
                }
                Ok(())
            }
            Err(e) => Err(format!("tools/list failed: {e}")),
        },
        Some(tool) => match client.call_tool(tool, &args.args).await {
            Ok(result) => {
                for block in &result.content {
                    match block {
                        ContentBlock::Text(t) => println!("{}", t.text),
                        other => println!("{}", serde_json::to_string(other).unwrap_or_default()),
                    }
                }
                if result.is_error == Some(true) {
                    Err(format!("{tool} returned an error"))
                } else {
                    Ok(())
                }
            }
            Err(e) => Err(format!("{tool} failed: {e}")),
        },
    };
    if args.listen && result.is_ok() {
        eprintln!("listening; Ctrl-C to stop");
        let print = async {
            while let Some(n) = notifications.next().await {
                println!("{n:?}");
            }
        };
        let interrupted = async {
            if let Err(e) = ctrl_c().await {
                eprintln!("cannot wait for Ctrl-C: {e}");
                std::future::pending::<()>().await;
            }
        };
        print.or(interrupted).await;
    }
    client.close().await;
    result
}

/// Resolves at the first Ctrl-C (SIGINT).
async fn ctrl_c() -> std::io::Result<()> {
    use smol::stream::StreamExt;
    let mut signals = async_signal::Signals::new([async_signal::Signal::Int])?;
    signals.next().await;
    Ok(())
}

fn main() -> ExitCode {
    smol::block_on(main_async())
}

async fn main_async() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
