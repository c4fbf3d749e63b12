//! A command-line MCP client over tokio + hyper.
//!
//! ```text
//! cargo run --release -p mcp-tokio --example client -- <url> [<tool> [<json args>]] [--listen]
//!     [--token <bearer token> | --oauth]
//! ```
//!
//! `--token` sends `Authorization: Bearer <token>` on every request. `--oauth` authorizes with
//! OAuth 2.1 when the server asks for it (a 401): the client discovers the server's
//! authorization server, registers itself, prints the authorization URL for you to open in
//! a browser, and takes the redirect on a loopback listener (`http://127.0.0.1:<port>/callback`).
//!
//! Connects and initializes; then prints the server's name, version and protocol and its
//! tools, or calls `<tool>` with `<json args>` (default `{}`) and prints its content.
//! `--listen` keeps a GET stream open and prints the server's notifications until Ctrl-C.
//! Exits 0 on success, 1 with a one-line error on stderr otherwise (2 on bad usage). The
//! core's events are logged to stderr through `tracing` (`RUST_LOG`, default `info`: only
//! recoveries and warnings).

use std::process::ExitCode;
use std::sync::Arc;

use mcp_proto::auth::{ClientMetadata, OAuthConfig};
use mcp_proto::client::ClientConfig;
use mcp_proto::driver::OAuth;
use mcp_proto::schema::ContentBlock;
use mcp_proto::service::client::ServerNotification;
use mcp_tokio::Client;
use serde_json::Value;
use tokio::net::TcpListener;

const USAGE: &str =
    "usage: client <url> [<tool> [<json args>]] [--listen] [--token <bearer token> | --oauth]";

enum Authorization {
    None,
    Token(String),
    OAuth,
}

struct Args {
    url: String,
    tool: Option<String>,
    args: Value,
    listen: bool,
    auth: Authorization,
}

fn parse() -> Result<Args, String> {
    let mut listen = false;
    let mut auth = Authorization::None;
    let mut positional = Vec::new();
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--listen" => listen = true,
            "--token" => auth = Authorization::Token(argv.next().ok_or("--token needs a token")?),
            "--oauth" => auth = Authorization::OAuth,
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
        auth,
    })
}

/// Waits for the authorization server's redirect on `listener` and returns its full URL:
/// the first request for `/callback` (others get 404), served by hyper.
async fn take_redirect(listener: Arc<TcpListener>, port: u16) -> Result<String, String> {
    use http_body_util::Full;
    use hyper::body::Bytes;
    loop {
        let (tcp, _) = listener
            .accept()
            .await
            .map_err(|e| format!("redirect listener: {e}"))?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = std::sync::Mutex::new(Some(tx));
        let service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let callback = req.uri().path() == "/callback";
                if callback && let Some(tx) = tx.lock().ok().and_then(|mut t| t.take()) {
                    let _ = tx.send(req.uri().to_string());
                }
                let (status, text) = match callback {
                    true => (200, "Authorized: you may close this window.\n"),
                    false => (404, "not found\n"),
                };
                let response = hyper::Response::builder()
                    .status(status)
                    .header("content-type", "text/plain; charset=utf-8")
                    .body(Full::new(Bytes::from_static(text.as_bytes())));
                async move { response }
            });
        let io = hyper_util::rt::TokioIo::new(tcp);
        let _ = hyper::server::conn::http1::Builder::new()
            .keep_alive(false)
            .serve_connection(io, service)
            .await;
        if let Ok(target) = rx.await {
            return Ok(format!("http://127.0.0.1:{port}{target}"));
        }
    }
}

/// The connection builder, with the `--token` or `--oauth` authorization.
async fn builder(args: &Args) -> Result<mcp_tokio::ConnectBuilder, String> {
    let definition = mcp_proto::service::client::Client::builder("mcp-tokio-client", "0.1.0");
    let config = ClientConfig::new().with_continuous_listening(args.listen);
    let connect = Client::builder(&args.url)
        .definition(definition)
        .config(config);
    Ok(match &args.auth {
        Authorization::None => connect,
        Authorization::Token(token) => {
            let token = token.clone();
            connect.bearer_token_provider(move || Some(token.clone()))
        }
        Authorization::OAuth => {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("cannot listen for the OAuth redirect: {e}"))?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            let listener = Arc::new(listener);
            let config = OAuthConfig::authorization_code(
                ClientMetadata::new("mcp-tokio example client"),
                format!("http://127.0.0.1:{port}/callback"),
            );
            connect.oauth(OAuth::new(config).on_authorize(move |req| {
                eprintln!("authorize this client: open\n  {}\nin a browser", req.url);
                take_redirect(listener.clone(), port)
            }))
        }
    })
}

/// One notification as one JSON line: `{"method": ..., "params": ...}`.
fn render(n: &ServerNotification) -> String {
    use mcp_proto::schema::methods as m;
    let (method, params) = match n {
        ServerNotification::Progress(p) => (m::NOTIFICATION_PROGRESS, serde_json::to_value(p)),
        ServerNotification::Log(p) => (m::NOTIFICATION_MESSAGE, serde_json::to_value(p)),
        ServerNotification::ResourceUpdated(p) => {
            (m::NOTIFICATION_RESOURCES_UPDATED, serde_json::to_value(p))
        }
        ServerNotification::ResourceListChanged => {
            (m::NOTIFICATION_RESOURCES_LIST_CHANGED, Ok(Value::Null))
        }
        ServerNotification::ToolListChanged => {
            (m::NOTIFICATION_TOOLS_LIST_CHANGED, Ok(Value::Null))
        }
        ServerNotification::PromptListChanged => {
            (m::NOTIFICATION_PROMPTS_LIST_CHANGED, Ok(Value::Null))
        }
        ServerNotification::Cancelled(p) => (m::NOTIFICATION_CANCELLED, serde_json::to_value(p)),
        ServerNotification::ElicitationComplete(p) => (
            m::NOTIFICATION_ELICITATION_COMPLETE,
            serde_json::to_value(p),
        ),
        ServerNotification::Other(n) => (
            &*n.method,
            n.params
                .as_deref()
                .map_or(Ok(Value::Null), |raw| serde_json::from_str(raw.get())),
        ),
        other => return format!("{other:?}"),
    };
    let params = params.unwrap_or_else(|e| Value::String(format!("unprintable: {e}")));
    serde_json::json!({"method": method, "params": params}).to_string()
}

async fn run(args: Args) -> Result<(), String> {
    let client = builder(&args)
        .await?
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    let mut notifications = client.notifications();
    let result = match &args.tool {
        None => match client.list_tools().await {
            Ok(tools) => {
                if let Some(info) = client.server_info() {
                    println!(
                        "{} {} (protocol {})",
                        info.server_info.name, info.server_info.version, info.protocol_version
                    );
                }
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
        loop {
            tokio::select! {
                n = notifications.next() => match n {
                    Some(n) => println!("{}", render(&n)),
                    None => break,
                },
                _ = tokio::signal::ctrl_c() => break,
            }
        }
    }
    client.close().await;
    result
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
