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
//! The drivers are `mcp_driver`'s — the same [`ServerDriver`] and [`ClientDriver`]
//! (machines, service bindings, key maps) the runtime adapters run, joined by its
//! [`MemoryLink`] — so these tests exercise the production glue; only the network and the
//! clock are replaced. What the transport did is recorded through the drivers' taps.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mcp_driver::{ClientDriver, MemoryExchange, MemoryLink, MemorySink, ServerDriver};
use mcp_proto::client::{ClientConfig, ClientEvent, ClientSession, HttpRequestKind, Output};
use mcp_proto::server::{Router, ServerConfig, ServerEvent, ServerOutput};
use mcp_service::client::{Client, ClientBuilder};
use mcp_service::{Server, ServerSession};

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
    server: ServerDriver<MemorySink>,
    driver: ClientDriver<MemoryExchange>,
    link: MemoryLink,
    trace: Arc<Mutex<Vec<Trace>>>,
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
        let trace = Arc::new(Mutex::new(Vec::new()));
        let (seen_c, seen_s) = (trace.clone(), trace.clone());
        // The loop looks at both queues on every turn, so it needs no wake-up call.
        let server = ServerDriver::new(
            server.clone(),
            server_config.with_insecure_test_session_ids_unless_set(),
            now,
            Arc::new(move |d| Box::pin(timer.sleep(d))),
            Arc::new(|| {}),
        )
        .with_spawn({
            let exec = exec.clone();
            Arc::new(move |work| exec.spawn(work))
        })
        .with_tap(move |out| {
            let t = match out {
                ServerOutput::ResponseHead { status, .. } => Trace::Status(*status),
                ServerOutput::Event(e) => Trace::Server(e.clone()),
                _ => return,
            };
            lock(&seen_s).push(t);
        });
        let builder = if builder.has_timer() {
            builder
        } else {
            let timer = exec.clone();
            builder.timer(Arc::new(move |d| Box::pin(timer.sleep(d))))
        };
        let driver =
            ClientDriver::new(builder, client_config, now, Arc::new(|| {})).with_tap(move |out| {
                let t = match out {
                    Output::Message(d) => {
                        Trace::Received(d.message.method().unwrap_or("").to_owned())
                    }
                    Output::Outcome(o) => Trace::Answered(o.id.clone()),
                    Output::Http(req) => Trace::Http(req.method.clone(), req.kind),
                    Output::Event(e) => Trace::Client(e.clone()),
                    _ => return,
                };
                lock(&seen_c).push(t);
            });
        MemoryPair {
            client: driver.client().clone(),
            server,
            driver,
            link: MemoryLink::new(),
            trace,
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
    pub fn trace(&self) -> Vec<Trace> {
        lock(&self.trace).clone()
    }

    /// The methods of the server→client messages the client session delivered, in order.
    pub fn received(&self) -> Vec<String> {
        lock(&self.trace)
            .iter()
            .filter_map(|t| match t {
                Trace::Received(m) => Some(m.clone()),
                _ => None,
            })
            .collect()
    }

    /// The pair's executor (its virtual clock: `now`, `sleep`).
    pub fn executor(&self) -> Executor {
        self.exec.clone()
    }

    /// Forgets the trace so far (and frees its buffer).
    pub fn clear_trace(&mut self) {
        *lock(&self.trace) = Vec::new();
    }

    /// The server sessions the router has.
    pub fn server_sessions(&self) -> Vec<ServerSession> {
        self.server.binding().sessions().cloned().collect()
    }

    /// The session id the client holds.
    pub fn session_id(&self) -> Option<&str> {
        self.driver.session().session_id()
    }

    /// The client session (to inspect its state).
    pub fn client_session(&self) -> &ClientSession {
        self.driver.session()
    }

    /// The router (to inspect its state).
    pub fn router(&self) -> &Router {
        self.server.router()
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
            let machine = match (
                self.server.router().poll_timeout(),
                self.driver.session().poll_timeout(),
            ) {
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

    /// Moves both drivers until nothing moves; `true` if anything did.
    fn pump(&mut self) -> bool {
        let now = self.exec.now();
        self.server.router_mut().handle_timeout(now);
        self.driver.session_mut().handle_timeout(now);
        let exec = &self.exec;
        let mut spawn = |task| exec.spawn(task);
        self.link
            .turn(now, &mut self.driver, &mut self.server, &mut spawn)
    }
}
