//! A command-line MCP client over smol + async-h1.
//!
//! ```text
//! cargo run --release -p mcp-smol --example smol_client -- <url> [<tool> [<json args>]] [--listen]
//!     [--token <bearer token> | --oauth]
//! ```
//!
//! `--token` sends `Authorization: Bearer <token>` on every request. `--oauth` authorizes with
//! OAuth 2.1 when the server asks for it (a 401): the client discovers the server's
//! authorization server, registers itself, prints the authorization URL for you to open in
//! a browser, and takes the redirect on a loopback listener (`http://127.0.0.1:<port>/callback`,
//! served by async-h1).
//!
//! Connects and initializes; then prints the server's name, version and protocol and its
//! tools, or calls `<tool>` with `<json args>` (default `{}`) and prints its content.
//! `--listen` keeps a GET stream open and prints the server's notifications until Ctrl-C.
//! Exits 0 on success, 1 with a one-line error on stderr otherwise (2 on bad usage). The
//! core's events are logged to stderr through `tracing` (`RUST_LOG`, default `info`: only
//! recoveries and warnings).
//!
//! The runtime-neutral half (arguments, options, output, the redirect's answers) is
//! `mcp_demo::cli`, shared with mcp-tokio's example client; this file is smol's half.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use mcp_demo::cli::{self, Args, Authorization, Redirect};
use mcp_smol::Client;
use smol::future::FutureExt;
use smol::net::TcpListener;

/// Waits for the authorization server's redirect on `listener` and returns its full URL:
/// the first request for `/callback` (others get 404), one request per connection, served
/// by async-h1.
async fn take_redirect(listener: TcpListener, redirect: Redirect) -> Result<String, String> {
    loop {
        let (tcp, _) = listener
            .accept()
            .await
            .map_err(|e| format!("redirect listener: {e}"))?;
        let taken = Arc::new(Mutex::new(None));
        let endpoint = {
            let taken = taken.clone();
            move |req: http_types::Request| {
                let answer = redirect.answer(&req.url()[http_types::url::Position::BeforePath..]);
                if let Some(url) = answer.redirect
                    && let Ok(mut taken) = taken.lock()
                {
                    taken.get_or_insert(url);
                }
                async move {
                    let status = http_types::StatusCode::try_from(answer.status)?;
                    let mut res = http_types::Response::new(status);
                    res.set_body(answer.body);
                    res.insert_header("content-type", "text/plain; charset=utf-8");
                    res.insert_header("connection", "close");
                    Ok(res)
                }
            }
        };
        if let Err(e) = async_h1::server::Server::new(tcp, endpoint)
            .accept_one()
            .await
        {
            eprintln!("redirect listener: {e}");
        }
        if let Some(url) = taken.lock().ok().and_then(|mut t| t.take()) {
            return Ok(url);
        }
    }
}

/// The connection builder, with the `--token` or `--oauth` authorization.
async fn builder(args: &Args) -> Result<mcp_smol::ConnectBuilder, String> {
    let connect = cli::options(Client::builder(&args.url), args, "mcp-smol-client");
    if args.auth != Authorization::OAuth {
        return Ok(connect);
    }
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen for the OAuth redirect: {e}"))?;
    let redirect = Redirect::new(listener.local_addr().map_err(|e| e.to_string())?.port());
    let take = move || take_redirect(listener.clone(), redirect);
    Ok(connect.oauth(cli::oauth("mcp-smol example client", redirect, take)))
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
        let interrupted = async {
            if let Err(e) = ctrl_c().await {
                eprintln!("cannot wait for Ctrl-C: {e}");
                std::future::pending::<()>().await;
            }
        };
        cli::print_notifications(notifications)
            .or(interrupted)
            .await;
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
    mcp_demo::logging::init();
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match smol::block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
