//! The in-memory pair **over the transport**: the service [`Client`] on a
//! [`ClientSession`], the service [`Server`] behind a [`Router`], HTTP exchanges carried as
//! data between the two state machines, on the test [`Executor`]'s virtual clock. No
//! sockets, no runtime: the same requests, headers and SSE frames an adapter would move.
//!
//! # Theory of operation
//!
//! [`MemoryPair::block_on`] is the driver loop an adapter would run, with the network
//! replaced by function calls:
//!
//! 1. run every ready task (handlers, calls, the test's own future);
//! 2. **pump**: apply the commands the service queued (notifications, server→client
//!    requests, responses, client sends and cancels) to the machines, then drain both
//!    machines' outputs — the client's HTTP intents become router requests (with `Host:
//!    localhost`, as a client library adds), the router's heads, body chunks and ends become
//!    client inputs — and turn the application-level outputs into actions on the service
//!    (a request to handle, a notification, a response for a call);
//! 3. when nothing moves, jump the virtual clock to the earliest deadline (a sleeping
//!    handler's, or a machine's `poll_timeout`) and feed `handle_timeout`.
//!
//! The binding of the service to the machines is `mcp_proto::service::bind` — the same
//! [`ServerBinding`] and [`ClientBinding`] the runtime adapters use — so these tests exercise
//! the production glue; only the network and the clock are replaced.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use http::{HeaderValue, Uri};
use mcp_proto::client::{
    ClientConfig, ClientEvent, ClientSession, HttpRequestKind, Input, Output,
    StreamId as ClientStream,
};
use mcp_proto::server::{
    RequestHead, Router, ServerConfig, ServerEvent, ServerOutput, StreamId as ServerStream,
};
use mcp_proto::service::bind::{ClientBinding, Routed, ServerBinding};
use mcp_proto::service::client::{Client, ClientBuilder};
use mcp_proto::service::{Server, ServerSession};

use crate::exec::Executor;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How far the virtual clock may run in one `block_on` before the test is declared stuck
/// (heartbeats and idle timers would otherwise keep an unfinished test going forever).
pub const TIME_LIMIT: Duration = Duration::from_secs(600);

/// What the transport did, for assertions.
#[derive(Debug, Clone, PartialEq)]
pub enum Trace {
    /// The client started an HTTP exchange.
    Http(http::Method, HttpRequestKind),
    /// The router answered one with this status.
    Status(http::StatusCode),
    /// A client event.
    Client(ClientEvent),
    /// A router event.
    Server(ServerEvent),
    /// The client session delivered a server→client request or notification (its method).
    Received(String),
    /// The client session ended one of the client's requests (with a response, a failure or
    /// a cancellation).
    Answered(mcp_proto::jsonrpc::RequestId),
}

/// A [`Client`] and a [`Server`] connected through a [`ClientSession`] and a [`Router`].
pub struct MemoryPair {
    /// The client.
    pub client: Client,
    /// The executor everything runs on.
    pub exec: Executor,
    router: Router,
    session: ClientSession,
    server_binding: ServerBinding,
    client_binding: ClientBinding,
    c2s: HashMap<ClientStream, ServerStream>,
    s2c: HashMap<ServerStream, ClientStream>,
    trace: Vec<Trace>,
}

impl MemoryPair {
    /// Connects a client built from `builder` to `server` with these transport configs.
    pub fn connect(
        server: &Server,
        builder: ClientBuilder,
        client_config: ClientConfig,
        server_config: ServerConfig,
    ) -> MemoryPair {
        let exec = Executor::new();
        let now = exec.now();
        let timer = exec.clone();
        // The loop looks at both queues on every turn, so it needs no wake-up call.
        let server_binding = ServerBinding::new(
            server.clone(),
            Arc::new(move |d| Box::pin(timer.sleep(d))),
            Arc::new(|| {}),
        );
        let client_binding = ClientBinding::new(builder, Arc::new(|| {}));
        MemoryPair {
            client: client_binding.client().clone(),
            router: Router::new(
                server_config.with_insecure_test_session_ids_unless_set(),
                now,
            ),
            session: ClientSession::new(client_config, now),
            server_binding,
            client_binding,
            c2s: HashMap::new(),
            s2c: HashMap::new(),
            trace: Vec::new(),
            exec,
        }
    }

    /// Connects with the default configs; the client keeps a GET stream open (so requests
    /// and notifications not tied to a call reach it).
    pub fn new(server: &Server, builder: ClientBuilder) -> MemoryPair {
        Self::connect(
            server,
            builder,
            ClientConfig::new().with_continuous_listening(true),
            ServerConfig::default(),
        )
    }

    /// What the transport did so far.
    pub fn trace(&self) -> &[Trace] {
        &self.trace
    }

    /// The methods of the server→client messages the client session delivered, in order.
    pub fn received(&self) -> Vec<&str> {
        self.trace
            .iter()
            .filter_map(|t| match t {
                Trace::Received(m) => Some(m.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Forgets the trace so far.
    pub fn clear_trace(&mut self) {
        self.trace.clear();
    }

    /// The server sessions the router has.
    pub fn server_sessions(&self) -> Vec<ServerSession> {
        self.server_binding.sessions().cloned().collect()
    }

    /// The session id the client holds.
    pub fn session_id(&self) -> Option<&str> {
        self.session.session_id()
    }

    /// The client session (to inspect its state).
    pub fn client_session(&self) -> &ClientSession {
        &self.session
    }

    /// The router (to inspect its state).
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Runs `future`, the handlers and both machines until `future` completes.
    ///
    /// # Panics
    ///
    /// When nothing can move and no deadline is set, or when the virtual clock passes
    /// [`TIME_LIMIT`]: the test is stuck.
    pub fn block_on<T: Send + 'static>(
        &mut self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> T {
        let slot = Arc::new(Mutex::new(None));
        let out = slot.clone();
        self.exec.spawn(async move {
            let value = future.await;
            *lock(&out) = Some(value);
        });
        let limit = self.exec.elapsed() + TIME_LIMIT;
        let start = self.exec.now() - self.exec.elapsed();
        loop {
            self.exec.run_ready();
            if let Some(value) = lock(&slot).take() {
                return value;
            }
            if self.pump() || self.exec.has_ready() {
                continue;
            }
            let machine = match (self.router.poll_timeout(), self.session.poll_timeout()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .map(|at| at.saturating_duration_since(start));
            let next = match (machine, self.exec.next_timer()) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => panic!(
                    "stuck at {:?}: nothing can move and no deadline is set",
                    self.exec.elapsed()
                ),
            };
            assert!(next <= limit, "stuck: virtual time would pass {limit:?}");
            self.exec.advance_to(next);
        }
    }

    /// Lets `duration` of virtual time pass, everything running.
    pub fn run_for(&mut self, duration: Duration) {
        let sleep = self.exec.sleep(duration);
        self.block_on(sleep);
    }

    /// Applies queued commands and moves outputs until nothing moves; `true` if anything did.
    fn pump(&mut self) -> bool {
        let now = self.exec.now();
        self.router.handle_timeout(now);
        self.session.handle_timeout(now);
        let mut progressed = false;
        loop {
            let served = self.server_binding.apply(&mut self.router, now);
            let sent = self.client_binding.apply(&mut self.session, now);
            let moved = self.move_outputs(now);
            if !served && !sent && !moved {
                return progressed;
            }
            progressed = true;
        }
    }

    /// Drains both machines once; `true` if either had output.
    fn move_outputs(&mut self, now: Instant) -> bool {
        let uri = Uri::from_static("/mcp");
        let mut moved = false;
        while let Some(out) = self.session.poll_output() {
            moved = true;
            match &out {
                Output::Message(d) => self
                    .trace
                    .push(Trace::Received(d.message.method().unwrap_or("").to_owned())),
                Output::Outcome(o) => self.trace.push(Trace::Answered(o.id.clone())),
                _ => {}
            }
            match self.client_binding.handle_output(out) {
                Routed::Spawn(task) => self.exec.spawn(task),
                Routed::Done => {}
                Routed::Transport(Output::Http(req)) => {
                    self.trace.push(Trace::Http(req.method.clone(), req.kind));
                    let mut headers = req.headers.clone();
                    headers.insert(http::header::HOST, HeaderValue::from_static("localhost"));
                    let sid = self
                        .router
                        .handle_request(now, RequestHead::new(&req.method, &uri, &headers));
                    self.c2s.insert(req.stream, sid);
                    self.s2c.insert(sid, req.stream);
                    self.router.handle_body(now, sid, &req.body);
                    self.router.handle_body_end(now, sid);
                }
                Routed::Transport(Output::Abort(cs)) => {
                    if let Some(sid) = self.c2s.remove(&cs) {
                        self.s2c.remove(&sid);
                        self.router.handle_disconnect(now, sid);
                    }
                }
                Routed::Transport(Output::Event(e)) => self.trace.push(Trace::Client(e)),
                Routed::Transport(_) => {}
            }
        }
        while let Some(out) = self.router.poll_output() {
            moved = true;
            match self.server_binding.handle_output(out) {
                Routed::Spawn(task) => self.exec.spawn(task),
                Routed::Done => {}
                Routed::Transport(ServerOutput::ResponseHead {
                    stream,
                    status,
                    headers,
                }) => {
                    self.trace.push(Trace::Status(status));
                    if let Some(&cs) = self.s2c.get(&stream) {
                        self.session.handle_input(
                            now,
                            Input::ResponseHead {
                                stream: cs,
                                status,
                                headers: &headers,
                            },
                        );
                    }
                }
                Routed::Transport(ServerOutput::ResponseBody { stream, chunk }) => {
                    if let Some(&cs) = self.s2c.get(&stream) {
                        self.session
                            .handle_input(now, Input::Body { stream: cs, chunk });
                    }
                }
                Routed::Transport(ServerOutput::ResponseEnd { stream }) => {
                    if let Some(cs) = self.s2c.remove(&stream) {
                        self.c2s.remove(&cs);
                        self.session.handle_input(now, Input::End { stream: cs });
                    }
                }
                Routed::Transport(ServerOutput::Event(e)) => self.trace.push(Trace::Server(e)),
                Routed::Transport(_) => {}
            }
        }
        moved
    }
}
