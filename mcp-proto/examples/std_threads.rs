//! Driving `mcp-proto` from a runtime of your own: std threads, a 15-line `block_on`, and
//! no sockets. One "network" thread owns both state machines — a client
//! ([`ClientSession`] + [`ClientBinding`]) and a server ([`Router`] + [`ServerBinding`]) —
//! and carries each HTTP intent of the client straight into the router and each response
//! back, as an adapter would over TCP. Handler futures run on threads of their own.
//!
//! ```text
//! cargo run -p mcp-proto --example std_threads
//! ```
//!
//! The loop is the whole adapter contract: apply what the service layers queued, drain
//! the outputs, then sleep until the earliest deadline (`poll_timeout`) or a wake-up, and
//! feed what fired with `Instant::now()`. The core never reads a clock, spawns, or sleeps.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::mpsc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use http::{HeaderValue, Uri, header};
use mcp_proto::client::{self, ClientConfig, ClientSession, Input, Output};
use mcp_proto::server::{
    self, RequestHead, Router, ServerConfig, ServerOutput, SessionIdGenerator,
};
use mcp_proto::service::bind::{ClientBinding, Routed, ServerBinding};
use mcp_proto::service::client::Client;
use mcp_proto::service::{BoxFuture, CallToolResult, Server, Tool, required};

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

/// Session ids from the OS CSPRNG: 16 random bytes as hex (an empty id, which the router
/// refuses, if the OS has no random source).
struct OsRandomIds;

impl SessionIdGenerator for OsRandomIds {
    fn generate(&mut self) -> String {
        let mut bytes = [0u8; 16];
        match getrandom::fill(&mut bytes) {
            Ok(()) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
            Err(_) => String::new(),
        }
    }
}

fn main() {
    let (signal, signals) = mpsc::channel::<Signal>();

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
    let s = signal.clone();
    let mut server_binding =
        ServerBinding::new(server, sleep, Arc::new(move || drop(s.send(Signal::Wake))));
    // The core reads no random source: session ids come from the OS CSPRNG through the
    // generator we install (without one the router refuses `initialize`).
    let mut router = Router::new(
        ServerConfig::default().with_session_ids(OsRandomIds),
        Instant::now(),
    );

    // The client.
    let s = signal.clone();
    let mut client_binding = ClientBinding::new(
        Client::builder("std-threads-client", "1.0.0"),
        Arc::new(move || drop(s.send(Signal::Wake))),
    );
    let mut session = ClientSession::new(ClientConfig::new(), Instant::now());

    // The app, on its own thread: initialize, call the tool, then ask for the close.
    let app = client_binding.client().clone();
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
    let endpoint: Uri = "/mcp".parse().expect("a path");
    let mut to_server: HashMap<client::StreamId, server::StreamId> = HashMap::new();
    let mut to_client: HashMap<server::StreamId, client::StreamId> = HashMap::new();
    loop {
        let now = Instant::now();
        // Drain both sides until nothing moves.
        loop {
            let mut moved = client_binding.apply(&mut session, now);
            moved |= server_binding.apply(&mut router, now);
            while let Some(out) = session.poll_output() {
                moved = true;
                match client_binding.handle_output(out) {
                    Routed::Spawn(task) => spawn(task),
                    Routed::Done => {}
                    Routed::Transport(Output::Http(req)) => {
                        // "Send" the request: its head, its body, its end.
                        let mut headers = req.headers;
                        headers.insert(header::HOST, HeaderValue::from_static("localhost"));
                        let head = RequestHead::new(&req.method, &endpoint, &headers);
                        let stream = router.handle_request(now, head);
                        router.handle_body(now, stream, &req.body);
                        router.handle_body_end(now, stream);
                        to_server.insert(req.stream, stream);
                        to_client.insert(stream, req.stream);
                    }
                    Routed::Transport(Output::Abort(stream)) => {
                        if let Some(s) = to_server.remove(&stream) {
                            to_client.remove(&s);
                            router.handle_disconnect(now, s);
                        }
                    }
                    Routed::Transport(other) => println!("client: {other:?}"),
                }
            }
            while let Some(out) = router.poll_output() {
                moved = true;
                match server_binding.handle_output(out) {
                    Routed::Spawn(task) => spawn(task),
                    Routed::Done => {}
                    Routed::Transport(ServerOutput::ResponseHead {
                        stream,
                        status,
                        headers,
                    }) => {
                        if let Some(&c) = to_client.get(&stream) {
                            let input = Input::ResponseHead {
                                stream: c,
                                status,
                                headers: &headers,
                            };
                            session.handle_input(now, input);
                        }
                    }
                    Routed::Transport(ServerOutput::ResponseBody { stream, chunk }) => {
                        if let Some(&c) = to_client.get(&stream) {
                            session.handle_input(now, Input::Body { stream: c, chunk });
                        }
                    }
                    Routed::Transport(ServerOutput::ResponseEnd { stream }) => {
                        if let Some(c) = to_client.remove(&stream) {
                            to_server.remove(&c);
                            session.handle_input(now, Input::End { stream: c });
                        }
                    }
                    Routed::Transport(_) => {}
                }
            }
            if !moved {
                break;
            }
        }
        if session.is_closed() {
            break;
        }
        // Sleep until the earliest deadline or a signal; then feed the clock.
        let deadline = [router.poll_timeout(), session.poll_timeout()]
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
            Ok(Signal::Close) => session.close(now),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                router.handle_timeout(now);
                session.handle_timeout(now);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    client_binding.client().close();
    match app_thread.join().expect("the app thread") {
        Ok(sum) => {
            println!("add(2, 40) = {sum}");
            assert_eq!(sum, "42");
            println!("sessions left on the server: {}", router.session_count());
        }
        Err(e) => {
            eprintln!("failed: {e}");
            std::process::exit(1);
        }
    }
}
