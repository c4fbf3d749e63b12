//! Driving `mcp-proto` from a runtime of your own: std threads, a 15-line `block_on`, and
//! no sockets. One "network" thread owns both drivers — a client
//! ([`ClientDriver`]: a `ClientSession` and its service binding) and a server
//! ([`ServerDriver`]: a `Router` and its service binding) — and a [`MemoryLink`] carries each
//! HTTP intent of the client straight into the router and each response back, as an adapter
//! would over TCP. Handler futures run on threads of their own.
//!
//! ```text
//! cargo run -p mcp-proto --example std_threads
//! ```
//!
//! The loop is the whole adapter contract: move both drivers until neither moves, then
//! sleep until the earliest deadline (`poll_timeout`) or a wake-up, and feed what fired with
//! `Instant::now()`. The core never reads a clock, spawns, or sleeps.

use std::future::Future;
use std::sync::Arc;
use std::sync::mpsc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use mcp_driver::{ClientDriver, MemoryLink, RandomSessionIds, ServerDriver};
use mcp_proto::client::ClientConfig;
use mcp_proto::server::ServerConfig;
use mcp_service::client::Client;
use mcp_service::{BoxFuture, CallToolResult, Server, Tool, required};

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on the current thread.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}

/// "Spawning" a handler: a thread that runs it.
fn spawn(task: BoxFuture<'static, ()>) {
    thread::spawn(move || block_on(task));
}

/// What wakes the network thread.
enum Signal {
    /// A service layer queued a command.
    Wake,
    /// The app is done: close the session (a DELETE).
    Close,
}

fn main() {
    let (signal, signals) = mpsc::channel::<Signal>();
    let wake = |s: mpsc::Sender<Signal>| Arc::new(move || drop(s.send(Signal::Wake)));

    // The server: one tool, and the sleep the service layer needs (a thread per sleep).
    let server = Server::new("std-threads", "1.0.0").tool(
        Tool::new("add")
            .description("a + b")
            .number("a", required())
            .number("b", required()),
        |_ctx, args| async move {
            let sum = args.get_f64("a", 0.0) + args.get_f64("b", 0.0);
            Ok(CallToolResult::text(sum.to_string()))
        },
    );
    let sleep = Arc::new(|d: Duration| -> BoxFuture<'static, ()> {
        let (done, wait) = futures_channel::oneshot::channel::<()>();
        thread::spawn(move || {
            thread::sleep(d);
            let _ = done.send(());
        });
        Box::pin(async move {
            let _ = wait.await;
        })
    });
    // The core reads no random source: session ids come from the OS CSPRNG through the
    // generator we install (without one the router refuses `initialize`).
    let config = ServerConfig::default().with_session_ids(RandomSessionIds);
    let mut server = ServerDriver::new(server, config, Instant::now(), sleep, wake(signal.clone()));

    // The client.
    let definition = Client::builder("std-threads-client", "1.0.0");
    let now = Instant::now();
    let mut client = ClientDriver::new(definition, ClientConfig::new(), now, wake(signal.clone()));

    // The app, on its own thread: initialize, call the tool, then ask for the close.
    let app = client.client().clone();
    let app_thread = thread::spawn(move || {
        let answer = block_on(async {
            let init = app.initialize().await.map_err(|e| e.to_string())?;
            println!("initialized with {}", init.server_info.name);
            let result = app
                .call_tool("add", serde_json::json!({"a": 2, "b": 40}))
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(result.first_text().unwrap_or_default().to_owned())
        });
        let _ = signal.send(Signal::Close);
        answer
    });

    // The network thread's loop (here: the main thread).
    let mut link = MemoryLink::new();
    loop {
        link.turn(Instant::now(), &mut client, &mut server, &mut spawn);
        if client.session().is_closed() {
            break;
        }
        // Sleep until the earliest deadline or a signal; then feed the clock.
        let deadline = [
            server.router().poll_timeout(),
            client.session().poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let signal = match deadline {
            Some(d) => signals.recv_timeout(d.saturating_duration_since(Instant::now())),
            None => signals
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        let now = Instant::now();
        match signal {
            Ok(Signal::Wake) => {}
            Ok(Signal::Close) => client.session_mut().close(now),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                server.router_mut().handle_timeout(now);
                client.session_mut().handle_timeout(now);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    client.client().close();
    match app_thread.join().expect("the app thread") {
        Ok(sum) => {
            println!("add(2, 40) = {sum}");
            assert_eq!(sum, "42");
            println!(
                "sessions left on the server: {}",
                server.router().session_count()
            );
        }
        Err(e) => {
            eprintln!("failed: {e}");
            std::process::exit(1);
        }
    }
}
