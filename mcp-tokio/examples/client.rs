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
//!
//! The runtime-neutral half (arguments, options, output, the redirect's answers) is
//! `mcp_demo::cli`, shared with mcp-smol's example client; this file is tokio's half.

use std::process::ExitCode;
use std::sync::Arc;

use mcp_demo::cli::{self, Args, Authorization, Redirect};
use mcp_tokio::Client;
use tokio::net::TcpListener;

/// Waits for the authorization server's redirect on `listener` and returns its full URL:
/// the first request for `/callback` (others get 404), served by hyper.
async fn take_redirect(listener: Arc<TcpListener>, redirect: Redirect) -> Result<String, String> {
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
                let answer = redirect.answer(&req.uri().to_string());
                if let Some(url) = answer.redirect
                    && let Some(tx) = tx.lock().ok().and_then(|mut t| t.take())
                {
                    let _ = tx.send(url);
                }
                let response = hyper::Response::builder()
                    .status(answer.status)
                    .header("content-type", "text/plain; charset=utf-8")
                    .body(Full::new(Bytes::from_static(answer.body.as_bytes())));
                async move { response }
            });
        let io = hyper_util::rt::TokioIo::new(tcp);
        let _ = hyper::server::conn::http1::Builder::new()
            .keep_alive(false)
            .serve_connection(io, service)
            .await;
        if let Ok(url) = rx.await {
            return Ok(url);
        }
    }
}

/// The connection builder, with the `--token` or `--oauth` authorization.
async fn builder(args: &Args) -> Result<mcp_tokio::ConnectBuilder, String> {
    let connect = cli::options(Client::builder(&args.url), args, "mcp-tokio-client");
    if args.auth != Authorization::OAuth {
        return Ok(connect);
    }
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen for the OAuth redirect: {e}"))?;
    let redirect = Redirect::new(listener.local_addr().map_err(|e| e.to_string())?.port());
    let listener = Arc::new(listener);
    let take = move || take_redirect(listener.clone(), redirect);
    Ok(connect.oauth(cli::oauth("mcp-tokio example client", redirect, take)))
}

async fn run(args: Args) -> Result<(), String> {
    let client = builder(&args)
        .await?
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    let notifications = client.notifications();
    let result = cli::list_or_call(&client, &args).await;
    if args.listen && result.is_ok() {
        eprintln!("listening; Ctrl-C to stop");
        tokio::select! {
            () = cli::print_notifications(notifications) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    client.close().await;
    result
}

#[tokio::main]
async fn main() -> ExitCode {
    mcp_demo::logging::init();
    let args = match Args::parse(std::env::args().skip(1)) {
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
