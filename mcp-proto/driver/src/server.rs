//! The server side of the driver: [`ServerDriver`] (the per-turn logic), its run loop, and
//! [`ServerHandle`] (what a connection of any HTTP library calls).
//!
//! # Theory of operation
//!
//! Connections send the driver [`ToDriver`] messages (request heads, body chunks, ends,
//! disconnects, bytes written) over one bounded queue ([`DriverConfig::inbound`]), so that the
//! messages of an exchange keep their order; when it is full, a connection waits before it
//! reads more of its request (TCP backpressure). `key` names an exchange, allocated on the
//! connection side so that a head and its body chunks need no round trip. The driver answers
//! on a per-exchange [`Exchange`] channel that the core bounds: the router hands out at most
//! its send window of body bytes that the [`ResponseStream`] has not reported taken
//! ([`ToDriver::Written`]), so a client that reads slowly holds at most that much here.
//!
//! Whether a client reads too slowly is the core's decision (its slow-reader rule): on
//! [`ServerOutput::ResponseAbort`] the stream ends with [`ResponseAborted`], so the HTTP
//! library aborts the connection instead of ending the body as if it were complete.
//!
//! [`ServerHandle::shutdown_within`] drains: the driver calls [`Router::begin_shutdown`],
//! keeps running until [`Router::is_drained`] (the core's grace deadline, from
//! [`Router::poll_timeout`], bounds that), calls [`Router::shutdown`], writes what it
//! produced, and stops; [`ServerHandle::stopped`] then tells the connections to close.
//!
//! | exchange (per key) | event | next |
//! |---|---|---|
//! | open | `Head` | mapped to a router stream |
//! | mapped | `ResponseEnd` / `ResponseAbort` output | gone (the reply channel drops: the body ends, or fails) |
//! | mapped | `Disconnect`, or the reply side is gone | gone (`Router::handle_disconnect`) |

use mcp_proto::HandleMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_channel::{mpsc, oneshot};
use futures_core::Stream;
use http::{HeaderMap, StatusCode};

use super::outbox::Exchange;
use super::short_id;
use super::signal::{Latch, Wakeup};
use super::{Runtime, Woke, binding_sleep};
use mcp_proto::server::{
    AuthDecision, ClusterDelivery, DEFAULT_SHUTDOWN_GRACE, ExchangeId, ProtectedResourceMetadata,
    RequestHead, Router, ServerConfig, ServerOutput, SessionHandle, SessionIdGenerator, StoreError,
    StoreReply,
};

use crate::auth::AsyncAuthenticator;
use crate::cluster::{ClusterBackend, ClusterInbox, StoreLink};
use mcp_service::Server;
use mcp_service::bind::{Routed, ServerBinding, Sleep, Wake};
use mcp_service::server::BoxFuture;

/// The address of a connection's other end, put in a request's extensions
/// (`http::Request::extensions_mut().insert(PeerAddr(addr))`) by the adapter that accepted the
/// connection; the driver hands it to the core as [`RequestHead::peer`] (client addresses, and
/// which reverse proxies to believe). mcp-tokio and mcp-smol set it on every request they
/// serve; where the endpoint is mounted in another framework, a middleware may set it (axum's
/// `ConnectInfo<SocketAddr>` holds the same address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// What the driver needs beyond the core's [`ServerConfig`]: its queue bound, the
/// connections' deadlines, how handlers start, and the two plug-ins that do I/O — the
/// asynchronous authentication step and the cluster store. None of it is protocol meaning;
/// the core never sees it.
#[derive(Clone)]
#[non_exhaustive]
pub struct DriverConfig {
    /// Messages queued from all connections to the driver (heads, body chunks, ends,
    /// disconnects), beyond one in flight per exchange. When full, connections wait before
    /// reading more. Default 1024. (What a response may hold is bounded by the core:
    /// `ServerConfig::limits.send_window`.)
    pub inbound: usize,
    /// How long an accepted connection may take to send the head of its first request
    /// (counted after its TLS handshake, if any): the adapter closes a slower one, HTTP/1.1
    /// or HTTP/2. Default [`DEFAULT_FIRST_REQUEST_TIMEOUT`](Self::DEFAULT_FIRST_REQUEST_TIMEOUT).
    /// The wait for later requests on a kept-alive connection: [`keep_alive_timeout`](Self::keep_alive_timeout).
    pub first_request_timeout: Duration,
    /// How long a kept-alive HTTP/1.1 connection may stay quiet between two requests before
    /// the adapter closes it. Default [`DEFAULT_KEEP_ALIVE_TIMEOUT`](Self::DEFAULT_KEEP_ALIVE_TIMEOUT).
    /// mcp-smol applies it to every connection, plain or TLS (the whole next head must come
    /// within it); hyper bounds the wait with its own header read timeout (30 s).
    pub keep_alive_timeout: Duration,
    /// Whether every request handler starts in a task of its own. Default `false`: the
    /// driver polls a new handler once itself, so one that answers without waiting (most
    /// do: a lookup, a computation) costs no task and its answer goes out in the same turn;
    /// one that waits is spawned then. The price: what a handler does before its first
    /// `.await` runs on the driver's task, so a handler that blocks there (synchronous I/O, a
    /// long computation) holds up every other request meanwhile. Set this for such handlers
    /// (or move the work off the executor: `spawn_blocking`).
    pub spawn_handlers: bool,
    /// Validates each request's credentials asynchronously (see [`AsyncAuthenticator`]): run
    /// on the connection's task before the router sees the head; the router applies its
    /// verdict. `None` (the default): no such step (`ServerConfig::security.authenticator`, the
    /// synchronous hook, may still judge).
    pub authenticator: Option<Arc<dyn AsyncAuthenticator>>,
    /// How long [`authenticator`](Self::authenticator) may take per request before the
    /// request is answered 503. Default 10 s.
    pub authentication_timeout: Duration,
    /// What executes a clustered router's store operations (`ServerConfig::cluster`): the
    /// driver connects the router to it. `None`: every store operation fails, so requests
    /// that need the store get 503.
    pub cluster_backend: Option<Arc<dyn ClusterBackend>>,
}

impl std::fmt::Debug for DriverConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverConfig")
            .field("inbound", &self.inbound)
            .field("first_request_timeout", &self.first_request_timeout)
            .field("keep_alive_timeout", &self.keep_alive_timeout)
            .field("spawn_handlers", &self.spawn_handlers)
            .field("authenticator", &self.authenticator.is_some())
            .field("authentication_timeout", &self.authentication_timeout)
            .field("cluster_backend", &self.cluster_backend.is_some())
            .finish()
    }
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            inbound: 1024,
            first_request_timeout: Self::DEFAULT_FIRST_REQUEST_TIMEOUT,
            keep_alive_timeout: Self::DEFAULT_KEEP_ALIVE_TIMEOUT,
            spawn_handlers: false,
            authenticator: None,
            authentication_timeout: Self::DEFAULT_AUTHENTICATION_TIMEOUT,
            cluster_backend: None,
        }
    }
}

impl DriverConfig {
    /// The default [`first_request_timeout`](Self::first_request_timeout): 30 s.
    pub const DEFAULT_FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

    /// The default [`keep_alive_timeout`](Self::keep_alive_timeout): 60 s.
    pub const DEFAULT_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(60);

    /// The default [`authentication_timeout`](Self::authentication_timeout): 10 s.
    pub const DEFAULT_AUTHENTICATION_TIMEOUT: Duration = Duration::from_secs(10);

    /// Sets [`inbound`](Self::inbound) (at least 1).
    pub fn with_inbound(mut self, capacity: usize) -> Self {
        self.inbound = capacity.max(1);
        self
    }

    /// Sets [`first_request_timeout`](Self::first_request_timeout).
    pub fn with_first_request_timeout(mut self, timeout: Duration) -> Self {
        self.first_request_timeout = timeout;
        self
    }

    /// Sets [`keep_alive_timeout`](Self::keep_alive_timeout).
    pub fn with_keep_alive_timeout(mut self, timeout: Duration) -> Self {
        self.keep_alive_timeout = timeout;
        self
    }

    /// Sets [`spawn_handlers`](Self::spawn_handlers).
    pub fn with_spawn_handlers(mut self, spawn: bool) -> Self {
        self.spawn_handlers = spawn;
        self
    }

    /// Sets [`authenticator`](Self::authenticator): the auth hook that awaits (a key-set
    /// fetch, token introspection).
    pub fn with_authenticator(mut self, auth: impl AsyncAuthenticator) -> Self {
        self.authenticator = Some(Arc::new(auth));
        self
    }

    /// Sets [`authentication_timeout`](Self::authentication_timeout).
    pub fn with_authentication_timeout(mut self, timeout: Duration) -> Self {
        self.authentication_timeout = timeout;
        self
    }

    /// Sets [`cluster_backend`](Self::cluster_backend).
    pub fn with_cluster_backend(mut self, backend: Arc<dyn ClusterBackend>) -> Self {
        self.cluster_backend = Some(backend);
        self
    }
}

// S-SESS-2.
/// Session ids from the operating system's CSPRNG: 16 random bytes as 32 lowercase hex
/// characters.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomSessionIds;

impl SessionIdGenerator for RandomSessionIds {
    fn generate(&mut self) -> String {
        let mut bytes = [0u8; 16];
        if let Err(e) = getrandom::fill(&mut bytes) {
            // An empty id is invalid: the router refuses to send it, so the session fails
            // closed rather than get a guessable id.
            tracing::error!(error = %e, "no random source for a session id");
            return String::new();
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Eight random letters and digits appended to a clustered router's instance name: ids the
/// router mints (server→client request ids, request-stream names, hence event ids) carry
/// the name, and a restarted instance must never mint an id of its previous life (a late
/// response or a `Last-Event-ID` of the dead process would reach the new one's handler or
/// stream). Without a random source the name is left as given (and logged).
fn with_incarnation(mut config: ServerConfig) -> ServerConfig {
    const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    if let Some(cluster) = config.cluster.as_mut() {
        let mut bytes = [0u8; 8];
        match getrandom::fill(&mut bytes) {
            Ok(()) => {
                let suffix: String = bytes
                    .iter()
                    .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
                    .collect();
                cluster.instance = format!("{}{suffix}", cluster.instance).into();
            }
            Err(e) => tracing::error!(
                error = %e,
                instance = &*cluster.instance,
                "no random source for the instance's incarnation: ids may repeat after a restart"
            ),
        }
    }
    config
}

/// What the driver sends back on an exchange's reply channel.
#[derive(Debug)]
pub enum Reply {
    /// The response head.
    Head(StatusCode, HeaderMap),
    /// A body chunk (one SSE frame or a whole JSON body).
    Body(Bytes),
}

/// Where the driver writes one exchange's response.
pub trait ExchangeSink: Send + 'static {
    /// Delivers a reply; `false` when the response side is gone (the client left).
    fn send(&mut self, reply: Reply) -> bool;
    /// The router cut the response ([`ServerOutput::ResponseAbort`]): it must not look
    /// complete.
    fn abort(self);
}

/// A message from a connection to the driver, about the exchange `key`.
#[derive(Debug)]
pub enum ToDriver<X> {
    /// A new request.
    Head {
        /// The exchange.
        key: u64,
        /// Its head.
        parts: Box<http::request::Parts>,
        /// The verdict of the asynchronous authentication step, when it ran.
        verdict: Option<AuthDecision>,
        /// Where its response goes.
        exchange: X,
        /// The start of its body, when the HTTP library had it at hand with the head (one
        /// chunk at most): a small POST then costs one message.
        body: Option<Bytes>,
        /// Whether the body had ended (after `body`, or empty) when the head was sent.
        end: bool,
    },
    /// A chunk of its body.
    Body {
        /// The exchange.
        key: u64,
        /// The chunk.
        chunk: Bytes,
    },
    /// Its body is complete.
    End {
        /// The exchange.
        key: u64,
    },
    /// The client went away (the response or the request was dropped early, a read failed).
    Disconnect {
        /// The exchange.
        key: u64,
    },
    /// The HTTP library took this many more bytes of the response.
    Written {
        /// The exchange.
        key: u64,
        /// How many.
        bytes: usize,
    },
}

/// The per-turn logic of a server driver: the [`Router`], the [`ServerBinding`] and the maps
/// between connection keys, router streams and response sinks.
pub struct ServerDriver<X> {
    router: Router,
    binding: ServerBinding,
    by_key: HandleMap<u64, ExchangeId>,
    exchanges: HandleMap<ExchangeId, (u64, X)>,
    /// The log of each exchange (its span, what it was, how it went).
    traces: HandleMap<ExchangeId, Trace>,
    /// Each session's span and short id.
    sessions: HandleMap<SessionHandle, (tracing::Span, String)>,
    tap: Option<Tap>,
    /// A clustered router's link to its store (`ClusterConfig::backend`).
    store: Option<Box<dyn StoreLink>>,
    /// The warnings that the store did not keep an event: one per [`QUIET`] at most.
    not_stored: Quiet,
}

/// How often at most a warning repeated for every event under one trouble is logged (the
/// others are counted, and the count is logged with the next one).
const QUIET: std::time::Duration = std::time::Duration::from_secs(1);

/// A warning logged at most once per [`QUIET`], with how many were held back since.
#[derive(Debug, Default)]
struct Quiet {
    /// When it was last logged.
    last: Option<Instant>,
    /// How many were held back since.
    held: u64,
}

impl Quiet {
    /// `Some(held back since the last one)` when this one is to be logged at `now`.
    fn admit(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < QUIET)
        {
            self.held += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held))
    }
}

/// Sees every router output before the driver acts on it ([`ServerDriver::with_tap`]).
type Tap = Box<dyn FnMut(&ServerOutput) + Send>;

impl<X> std::fmt::Debug for ServerDriver<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerDriver")
            .field("exchanges", &self.exchanges.len())
            .field("sessions", &self.router.session_count())
            .finish_non_exhaustive()
    }
}

impl<X: ExchangeSink> ServerDriver<X> {
    /// Runs the work that outlives its request (a task's) on `spawn`
    /// ([`ServerBinding::with_spawn`]).
    pub fn with_spawn(mut self, spawn: mcp_service::bind::Spawn) -> Self {
        self.binding = self.binding.with_spawn(spawn);
        self
    }

    /// A driver of `server`; `sleep` and `wake` as for [`ServerBinding::new`].
    pub fn new(
        server: Server,
        config: ServerConfig,
        now: Instant,
        sleep: Sleep,
        wake: Wake,
    ) -> Self {
        ServerDriver {
            router: Router::new(config, now),
            binding: ServerBinding::new(server, sleep, wake),
            by_key: HandleMap::default(),
            exchanges: HandleMap::default(),
            traces: HandleMap::default(),
            sessions: HandleMap::default(),
            tap: None,
            store: None,
            not_stored: Quiet::default(),
        }
    }

    /// Connects a clustered router to its store: operations go to `link`; the backend
    /// delivers answers to the inbox it was given, which the caller feeds to
    /// [`ServerDriver::cluster_input`].
    pub fn with_store(mut self, link: Box<dyn StoreLink>) -> Self {
        self.store = Some(link);
        self
    }

    /// Feeds what the cluster backend delivered.
    pub fn cluster_input(&mut self, now: Instant, delivery: ClusterDelivery) {
        match delivery {
            ClusterDelivery::Reply(ticket, reply) => self.router.handle_store(now, ticket, reply),
            ClusterDelivery::Bus(message) => self.router.handle_bus(now, message),
            ClusterDelivery::BusLost => self.router.handle_bus_lost(now),
            ClusterDelivery::StoreUnreachable(e) => {
                tracing::debug!(reason = %e, "the cluster store is unreachable: not ready");
                self.router.handle_store_unreachable(now, e);
            }
            ClusterDelivery::StoreReachable => self.router.handle_store_reachable(now),
        }
    }

    /// Shows every router output to `tap` first (traces in tests, metrics).
    pub fn with_tap(mut self, tap: impl FnMut(&ServerOutput) + Send + 'static) -> Self {
        self.tap = Some(Box::new(tap));
        self
    }

    /// The router (inspection).
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The router (deadlines, shutdown).
    pub fn router_mut(&mut self) -> &mut Router {
        &mut self.router
    }

    /// The service binding.
    pub fn binding(&self) -> &ServerBinding {
        &self.binding
    }

    /// Feeds one connection message.
    pub fn input(&mut self, now: Instant, msg: ToDriver<X>) {
        match msg {
            ToDriver::Head {
                key,
                parts,
                verdict,
                exchange,
                body,
                end,
            } => {
                let head = RequestHead::from_parts(&parts)
                    .with_verdict(verdict.as_ref())
                    .with_peer(parts.extensions.get::<PeerAddr>().map(|p| p.0));
                // The client's address is resolved only when a trace will log it.
                let trace = Trace::start(now, &parts, || self.router.client_address(&head));
                if let Some(link) = self.store.as_mut() {
                    // The link's queue, read as each request comes in (the router pushes new
                    // requests back while it is high).
                    let busy = link.busy();
                    if busy != self.router.store_pressure() {
                        self.router.handle_store_pressure(now, busy);
                    }
                }
                let stream = self.router.handle_request(now, head);
                tracing::trace!(stream = stream.as_u64(), method = %parts.method, uri = %parts.uri, "request");
                if let Some(trace) = trace {
                    self.traces.insert(stream, trace);
                }
                self.by_key.insert(key, stream);
                self.exchanges.insert(stream, (key, exchange));
                if let Some(chunk) = body {
                    self.router.handle_body(now, stream, &chunk);
                }
                if end {
                    self.router.handle_body_end(now, stream);
                }
            }
            ToDriver::Body { key, chunk } => {
                if let Some(&stream) = self.by_key.get(&key) {
                    self.router.handle_body(now, stream, &chunk);
                }
            }
            ToDriver::End { key } => {
                if let Some(&stream) = self.by_key.get(&key) {
                    self.router.handle_body_end(now, stream);
                }
            }
            ToDriver::Disconnect { key } => {
                if let Some(stream) = self.by_key.remove(&key) {
                    self.exchanges.remove(&stream);
                    self.finish(now, stream, "client left");
                    tracing::trace!(stream = stream.as_u64(), "client went away");
                    self.router.handle_disconnect(now, stream);
                }
            }
            ToDriver::Written { key, bytes } => {
                if let Some(&stream) = self.by_key.get(&key) {
                    self.router.handle_written(now, stream, bytes);
                }
            }
        }
    }

    /// Applies what the service queued and drains the router until nothing moves; handler
    /// futures go to `spawn`. Says whether anything moved.
    pub fn pump(&mut self, now: Instant, spawn: &mut dyn FnMut(BoxFuture<'static, ()>)) -> bool {
        super::until_still(|| {
            let applied = self.binding.apply(&mut self.router, now);
            let mut moved = false;
            while let Some(out) = self.router.poll_output() {
                moved = true;
                if let Some(tap) = &mut self.tap {
                    tap(&out);
                }
                if let ServerOutput::Request {
                    handle, request, ..
                } = &out
                    && let Some(stream) = self.router.exchange_of(*handle)
                    && let Some(trace) = self.traces.get_mut(&stream)
                {
                    trace.request(request);
                }
                match self.binding.handle_output_in(&self.router, out) {
                    Routed::Spawn(task) => spawn(task),
                    Routed::Done => {}
                    Routed::Transport(out) => self.transport(now, out),
                }
            }
            applied || moved
        })
    }

    fn transport(&mut self, now: Instant, out: ServerOutput) {
        let (stream, reply) = match out {
            ServerOutput::ResponseHead {
                stream,
                status,
                headers,
            } => {
                if let Some(trace) = self.traces.get_mut(&stream) {
                    trace.head(status, &headers);
                }
                (stream, Reply::Head(status, headers))
            }
            ServerOutput::ResponseBody { stream, chunk } => (stream, Reply::Body(chunk)),
            // Dropping the sink ends the body.
            ServerOutput::ResponseEnd { stream } => {
                self.forget(stream);
                self.finish(now, stream, "");
                return;
            }
            ServerOutput::ResponseAbort { stream } => {
                if let Some(sink) = self.forget(stream) {
                    sink.abort();
                }
                self.finish(now, stream, "cut: the client read too slowly");
                return;
            }
            // The connection stops reading the body when the head (which comes with this)
            // arrives: see `ServerHandle::exchange`.
            ServerOutput::StopReading { stream } => {
                tracing::trace!(stream = stream.as_u64(), "stop reading");
                return;
            }
            ServerOutput::SessionCreated { session } => {
                // A session's span lives in this map only while `debug` is on here: with it
                // off, an idle session costs the driver nothing.
                if !tracing::enabled!(target: module_path!(), tracing::Level::DEBUG) {
                    return;
                }
                let id = short_id(self.router.session_id(session).unwrap_or_default());
                let span = tracing::debug_span!(parent: None, "session", session = %id);
                tracing::debug!(parent: &span, session = %id, "session created");
                self.sessions.insert(session, (span, id));
                return;
            }
            ServerOutput::SessionClosed { session, reason } => {
                if let Some((span, id)) = self.sessions.remove(&session) {
                    tracing::debug!(parent: &span, session = %id, reason = %reason, "session closed");
                }
                return;
            }
            ServerOutput::Event(event) => {
                self.event(now, event);
                return;
            }
            ServerOutput::Store { ticket, op } => {
                match &mut self.store {
                    Some(link) => link.submit(now, ticket, op),
                    None => {
                        // A clustered router without a backend fails closed (503), at once.
                        let e = StoreError("no cluster store is configured".into());
                        self.router.handle_store(now, ticket, StoreReply::Failed(e));
                    }
                }
                return;
            }
            _ => return,
        };
        let gone = match self.exchanges.get_mut(&stream) {
            Some((_, sink)) => !sink.send(reply),
            None => false,
        };
        if gone {
            // The response side is gone: the client left.
            self.forget(stream);
            self.finish(now, stream, "client left");
            self.router.handle_disconnect(now, stream);
        }
    }

    /// Logs what the router reports, by name and fields.
    fn event(&mut self, now: Instant, event: mcp_proto::server::ServerEvent) {
        use mcp_proto::server::ServerEvent as E;
        match event {
            E::Rejected { stream, error } => {
                let status = error.status_hint().as_u16();
                match self.traces.get_mut(&stream) {
                    Some(trace) => {
                        trace.reason = Some(error.to_string());
                        trace.pushed_back = error.retry_after_secs().is_some();
                    }
                    None => tracing::debug!(status, reason = %error, "rejected"),
                }
            }
            E::NotStored { reason } => {
                // One per event would flood the log while the store is in trouble.
                if let Some(held_back) = self.not_stored.admit(now) {
                    tracing::warn!(
                        reason = &*reason,
                        held_back,
                        "the cluster store did not keep an event (held back: how many more since the last warning)"
                    );
                }
            }
            E::SlowReader { stream } => {
                tracing::debug!(stream = stream.as_u64(), "slow reader: response cut");
            }
            E::Resumed {
                stream,
                replayed,
                gap,
            } => {
                tracing::debug!(stream = stream.as_u64(), replayed, gap, "stream resumed");
            }
            other => {
                let name = match other {
                    E::Upgraded { .. } => "upgraded to SSE",
                    E::Rerouted { .. } => "related message sent to the GET stream",
                    E::QueueOverflow { .. } => "notification dropped: queue full",
                    E::ConnectionReplaced { .. } => "connection replaced by a new GET",
                    E::UnmatchedResponse { .. } => "unmatched client response",
                    E::DuplicateRequestId { .. } => "duplicate request id",
                    E::ClosedForPolling { .. } => "closed for polling",
                    _ => "router event",
                };
                tracing::trace!(event = name, "router event");
            }
        }
    }

    /// Ends the log of an exchange: its duration, and the one line that says how it went.
    fn finish(&mut self, now: Instant, stream: ExchangeId, ending: &str) {
        let Some(trace) = self.traces.remove(&stream) else {
            return;
        };
        let ms = now.saturating_duration_since(trace.started).as_secs_f64() * 1000.0;
        let ms = (ms * 10.0).round() / 10.0;
        trace.span.record("ms", ms);
        let reason = trace.reason.as_deref().unwrap_or(ending);
        let status = trace.status.unwrap_or(0);
        macro_rules! exchange {
            ($level:ident) => {
                tracing::$level!(
                    parent: None,
                    method = %trace.method,
                    rpc.method = trace.rpc_method.as_deref(),
                    tool = trace.subject.as_deref(),
                    session = trace.session.as_deref(),
                    client = trace.client.as_ref().map(tracing::field::display),
                    status,
                    ms,
                    reason = (!reason.is_empty()).then_some(reason),
                    "exchange"
                )
            };
        }
        if status >= 500 && !trace.pushed_back {
            exchange!(warn);
        } else {
            exchange!(debug);
        }
    }

    fn forget(&mut self, stream: ExchangeId) -> Option<X> {
        let (key, sink) = self.exchanges.remove(&stream)?;
        self.by_key.remove(&key);
        Some(sink)
    }
}

/// What the log of one exchange needs: its span, its start, and what the driver learns of
/// it on the way (the JSON-RPC method and subject of the request the router parsed, the
/// status, a rejection's reason).
struct Trace {
    span: tracing::Span,
    started: Instant,
    method: http::Method,
    session: Option<String>,
    /// The client's address (the peer's, or what trusted proxies forwarded).
    client: Option<std::net::IpAddr>,
    rpc_method: Option<String>,
    subject: Option<String>,
    status: Option<u16>,
    reason: Option<String>,
    /// Refused with `Retry-After` (a rate limit, a busy store): the load the server sheds
    /// by design, logged at debug (a warning per shed request would add to the load).
    pushed_back: bool,
}

impl Trace {
    /// `None` when nothing would log it.
    fn start(
        now: Instant,
        parts: &http::request::Parts,
        client: impl FnOnce() -> Option<std::net::IpAddr>,
    ) -> Option<Trace> {
        use tracing::field::Empty;
        let debug = tracing::enabled!(target: module_path!(), tracing::Level::DEBUG);
        if !debug && !tracing::enabled!(target: module_path!(), tracing::Level::WARN) {
            return None;
        }
        let session = parts
            .headers
            .get(mcp_proto::http::header::MCP_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(short_id);
        let span = tracing::debug_span!(
            parent: None,
            "exchange",
            method = %parts.method,
            rpc.method = Empty,
            tool = Empty,
            session = session.as_deref(),
            client = Empty,
            status = Empty,
            ms = Empty,
        );
        // The client's address: the peer's, or what trusted proxies forwarded.
        let client = client();
        if let Some(client) = client {
            span.record("client", tracing::field::display(client));
        }
        Some(Trace {
            span,
            started: now,
            method: parts.method.clone(),
            session,
            client,
            rpc_method: None,
            subject: None,
            status: None,
            reason: None,
            pushed_back: false,
        })
    }

    /// The request the router parsed from this exchange's body (the first, for a batch):
    /// its method and subject (tool or prompt name, resource URI).
    fn request(&mut self, request: &mcp_proto::jsonrpc::Request) {
        if self.rpc_method.is_some() {
            return;
        }
        self.subject = mcp_service::bind::request_subject(request.params.as_deref());
        self.span.record("rpc.method", &*request.method);
        self.span.record("tool", self.subject.as_deref());
        self.rpc_method = Some(request.method.to_string());
    }

    fn head(&mut self, status: StatusCode, headers: &HeaderMap) {
        self.status = Some(status.as_u16());
        self.span.record("status", status.as_u16());
        if self.session.is_none()
            && let Some(id) = headers
                .get(mcp_proto::http::header::MCP_SESSION_ID)
                .and_then(|v| v.to_str().ok())
        {
            let id = short_id(id);
            self.span.record("session", id.as_str());
            self.session = Some(id);
        }
    }
}

/// Why a request got no response: the driver stopped (shutdown) before answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverGone;

impl std::fmt::Display for DriverGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the MCP driver stopped before answering")
    }
}

impl std::error::Error for DriverGone {}

impl DriverGone {
    /// The answer for a request that came after the driver stopped (an app that mounts the
    /// service itself and must answer something): 503, plain text saying so.
    pub fn response(self) -> http::Response<Bytes> {
        let mut response = http::Response::new(Bytes::from(self.to_string()));
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }
}

/// Why a response ended early: the client stopped reading it and the core cut it
/// (`ServerConfig::limits.slow_reader_timeout`); the HTTP library must then abort the connection
/// rather than end the body as if it were complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseAborted;

impl std::fmt::Display for ResponseAborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the response was cut: the client stopped reading it")
    }
}

impl std::error::Error for ResponseAborted {}

type Inbound = mpsc::Sender<ToDriver<Exchange>>;

struct Shared {
    tx: Inbound,
    keys: AtomicU64,
    drain: Mutex<Option<oneshot::Sender<Duration>>>,
    draining: Latch,
    stopped: Latch,
    config: DriverConfig,
    /// `ServerConfig::write_report_threshold`.
    report_every: usize,
    /// `DriverConfig::authenticator`, run on the connection's task.
    auth: Option<AuthStep>,
}

/// The asynchronous authentication step: asked about each request the core says needs it,
/// before the head goes to the driver, bounded by `DriverConfig::authentication_timeout`.
struct AuthStep {
    validator: Arc<dyn AsyncAuthenticator>,
    timeout: Duration,
    endpoint_path: String,
    metadata: Option<ProtectedResourceMetadata>,
    sleep: Sleep,
}

impl AuthStep {
    fn new(driver: &DriverConfig, config: &ServerConfig, sleep: Sleep) -> Option<AuthStep> {
        Some(AuthStep {
            validator: driver.authenticator.clone()?,
            timeout: driver.authentication_timeout,
            endpoint_path: config.endpoint_path.clone(),
            metadata: config.security.protected_resource.clone(),
            sleep,
        })
    }

    /// The verdict on `parts`, `None` when the request is not one to judge. A validator that
    /// takes too long or panics gives `Unavailable` (503), never a hung or lost request.
    async fn judge(&self, parts: &http::request::Parts) -> Option<AuthDecision> {
        let head = RequestHead::from_parts(parts)
            .with_peer(parts.extensions.get::<PeerAddr>().map(|p| p.0));
        if !mcp_proto::server::needs_authentication(
            &self.endpoint_path,
            self.metadata.as_ref(),
            &head,
        ) {
            return None;
        }
        let unavailable = |why: String| AuthDecision::Unavailable {
            description: Some(why),
        };
        let mut check = self.validator.authenticate(&head);
        let mut deadline = (self.sleep)(self.timeout);
        let decision = std::future::poll_fn(|cx| {
            let polled =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check.as_mut().poll(cx)));
            match polled {
                Ok(Poll::Ready(decision)) => return Poll::Ready(decision),
                Err(_) => {
                    tracing::error!("the authenticator panicked");
                    return Poll::Ready(unavailable("the authenticator failed".to_owned()));
                }
                Ok(Poll::Pending) => {}
            }
            if deadline.as_mut().poll(cx).is_ready() {
                tracing::warn!(timeout = ?self.timeout, "the authenticator timed out");
                return Poll::Ready(unavailable(format!(
                    "the credentials could not be checked within {:?}",
                    self.timeout
                )));
            }
            Poll::Pending
        })
        .await;
        Some(decision)
    }
}

/// The running driver of one [`Server`], as the connections of any HTTP library see it:
/// [`exchange`](ServerHandle::exchange) per request, draining shutdown. Cheap to clone; the
/// driver stops after a drain, or when every handle and response is gone.
#[derive(Clone)]
pub struct ServerHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("config", &self.shared.config)
            .field("draining", &self.shared.draining.is_set())
            .field("stopped", &self.shared.stopped.is_set())
            .finish_non_exhaustive()
    }
}

/// A response head and its body, from [`ServerHandle::exchange`].
#[derive(Debug)]
pub struct HttpResponse {
    /// The status.
    pub status: StatusCode,
    /// Every header (the router's are the only ones).
    pub headers: HeaderMap,
    /// The body, chunk by chunk.
    pub body: ResponseStream,
}

impl ServerHandle {
    /// Spawns the driver of `server` on `rt`.
    ///
    /// Secure by default: session ids come from [`RandomSessionIds`] unless `config` has a
    /// generator, and `Host` validation is the core's default (loopback only) unless `config`
    /// says otherwise (behind a public name, `ServerConfig::with_host_validation`, or
    /// `ServerConfig::bound_to` the bind address).
    pub fn start<R: Runtime>(
        rt: &R,
        server: Server,
        config: ServerConfig,
        driver_config: DriverConfig,
    ) -> ServerHandle {
        let inbound = driver_config.inbound;
        let driver_config = driver_config.with_inbound(inbound);
        let mut config = with_incarnation(config.or_session_ids(RandomSessionIds));
        // A request without the step's verdict fails closed (503), never unjudged.
        config.security.requires_verdict |= driver_config.authenticator.is_some();
        let report_every = config.write_report_threshold();
        let auth = AuthStep::new(&driver_config, &config, binding_sleep(rt));
        let (tx, rx) = mpsc::channel(driver_config.inbound);
        let (drain, drain_rx) = oneshot::channel();
        let wakeup = Arc::new(Wakeup::default());
        let backend = config
            .cluster
            .as_ref()
            .and_then(|c| Some((driver_config.cluster_backend.clone()?, c.instance.clone())));
        let (cluster_tx, cluster_rx) = mpsc::unbounded();
        let mut driver = ServerDriver::new(
            server,
            config,
            rt.now(),
            binding_sleep(rt),
            wakeup.callback(),
        )
        .with_spawn({
            let rt = rt.clone();
            Arc::new(move |work| rt.spawn(work))
        });
        if let Some((backend, instance)) = backend {
            let inbox = ClusterInbox::new(move |d| cluster_tx.unbounded_send(d).is_ok());
            driver = driver.with_store(backend.connect(&instance, inbox));
        }
        let stopped = Latch::new();
        let on_stop = stopped.set_on_drop();
        let runtime = rt.clone();
        rt.spawn(Box::pin(async move {
            let _on_stop = on_stop;
            run(
                runtime,
                driver,
                rx,
                cluster_rx,
                drain_rx,
                wakeup,
                driver_config.spawn_handlers,
            )
            .await;
        }));
        ServerHandle {
            shared: Arc::new(Shared {
                tx,
                keys: AtomicU64::new(1),
                drain: Mutex::new(Some(drain)),
                draining: Latch::new(),
                stopped,
                config: driver_config,
                report_every,
                auth,
            }),
        }
    }

    /// The driver's configuration in force.
    pub fn config(&self) -> &DriverConfig {
        &self.shared.config
    }

    /// Starts a draining shutdown with the core's default grace period
    /// ([`DEFAULT_SHUTDOWN_GRACE`]); see [`shutdown_within`](ServerHandle::shutdown_within).
    pub fn shutdown(&self) {
        self.shutdown_within(DEFAULT_SHUTDOWN_GRACE);
    }

    /// Starts a draining shutdown ([`Router::begin_shutdown`]): new requests are refused
    /// (the core answers 503), GET streams end cleanly, requests in flight finish and their
    /// responses are written; after `grace` whatever is left is cancelled. The driver then
    /// stops ([`stopped`](ServerHandle::stopped)). A second call changes nothing.
    pub fn shutdown_within(&self, grace: Duration) {
        let drain = crate::lock(&self.shared.drain).take();
        if let Some(drain) = drain {
            let _ = drain.send(grace);
            self.shared.draining.set();
        }
    }

    /// Resolves once a shutdown has started (accept loops stop accepting then).
    pub fn draining(&self) -> impl Future<Output = ()> + Send + 'static {
        self.shared.draining.wait()
    }

    /// Resolves once the driver has stopped (after a drain, or when every handle is gone):
    /// connections then close after their response in progress.
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        self.shared.stopped.wait()
    }

    /// Whether the driver has stopped.
    pub fn is_stopped(&self) -> bool {
        self.shared.stopped.is_set()
    }

    /// Handles one HTTP exchange: hands the head to the driver (waiting while its queue is
    /// full), reads `body` into it while waiting for the response head, and resolves to the
    /// response once the router sent its head; the body then streams from the driver as the
    /// router produces it. Dropping the future or the body before its end is a disconnect.
    ///
    /// The router answers a POST only once it has the whole body, or early when it refuses
    /// it: either way the head means the body is no longer needed, so reading stops there.
    ///
    /// `departure` is polled from the moment the whole request body is in the driver until
    /// the response ends, whenever this exchange waits: an HTTP library that notices a
    /// departed client only when a write fails watches the socket through it (`()` watches
    /// nothing). No task is spawned for it.
    pub async fn exchange<B, E, D>(
        &self,
        parts: http::request::Parts,
        body: B,
        departure: D,
    ) -> Result<HttpResponse, DriverGone>
    where
        B: Stream<Item = Result<Bytes, E>> + Unpin,
        D: Departure,
    {
        let key = self.shared.keys.fetch_add(1, Ordering::Relaxed);
        let (exchange, mut replies) = super::outbox::exchange();
        // One sender for the exchange: its messages, then its disconnect if it is dropped.
        let mut guard = Guard {
            key,
            tx: self.shared.tx.clone(),
            armed: true,
        };
        let verdict = match &self.shared.auth {
            Some(step) => step.judge(&parts).await,
            None => None,
        };
        let mut body = Some(body);
        let mut next: Option<ToDriver<Exchange>> = None;
        // What of the body the HTTP library has at hand goes with the head.
        let (first, end) =
            std::future::poll_fn(|cx| Poll::Ready(prefetch(cx, key, &mut body, &mut next))).await;
        let head = ToDriver::Head {
            key,
            parts: Box::new(parts),
            verdict,
            exchange,
            body: first,
            end,
        };
        send(&mut guard.tx, head).await?;
        // Watched once the body is in (before, the body's own reads see a departure).
        let mut departure = Watch {
            departure: Some(departure),
            armed: end,
        };
        let head = std::future::poll_fn(|cx| {
            if let Poll::Ready(head) = replies.poll_head(cx) {
                return Poll::Ready(head);
            }
            if pump_body(cx, key, &mut body, &mut next, &mut guard.tx) {
                departure.armed = true;
            }
            if departure.departed(cx) {
                guard.depart();
            }
            Poll::Pending
        })
        .await;
        let Some((status, headers)) = head else {
            // The router always starts with the head; anything else means it is gone.
            guard.armed = false;
            return Err(DriverGone);
        };
        Ok(HttpResponse {
            status,
            headers,
            body: ResponseStream {
                replies,
                guard: Some(guard),
                report_every: self.shared.report_every,
                taken: 0,
                departure: departure
                    .departure
                    .map(|d| Box::new(d) as Box<dyn Departure>),
            },
        })
    }
}

/// Takes what of `body` is at hand without waiting: one chunk at most, and whether the body
/// ended. A second chunk, or a failure, is left in `next` for [`pump_body`]; the body is
/// `None` once it ended or failed.
fn prefetch<B, E>(
    cx: &mut Context<'_>,
    key: u64,
    body: &mut Option<B>,
    next: &mut Option<ToDriver<Exchange>>,
) -> (Option<Bytes>, bool)
where
    B: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let Some(stream) = body.as_mut() else {
        return (None, false);
    };
    let first = match Pin::new(&mut *stream).poll_next(cx) {
        Poll::Ready(Some(Ok(chunk))) => chunk,
        Poll::Ready(None) => {
            *body = None;
            return (None, true);
        }
        Poll::Ready(Some(Err(_))) => {
            *body = None;
            *next = Some(ToDriver::Disconnect { key });
            return (None, false);
        }
        Poll::Pending => return (None, false),
    };
    match Pin::new(stream).poll_next(cx) {
        Poll::Ready(None) => {
            *body = None;
            (Some(first), true)
        }
        Poll::Ready(Some(Ok(chunk))) => {
            *next = Some(ToDriver::Body { key, chunk });
            (Some(first), false)
        }
        Poll::Ready(Some(Err(_))) => {
            *body = None;
            *next = Some(ToDriver::Disconnect { key });
            (Some(first), false)
        }
        Poll::Pending => (Some(first), false),
    }
}

/// Sends `msg`, waiting for room in the queue.
async fn send(tx: &mut Inbound, msg: ToDriver<Exchange>) -> Result<(), DriverGone> {
    std::future::poll_fn(|cx| tx.poll_ready(cx))
        .await
        .map_err(|_| DriverGone)?;
    tx.start_send(msg).map_err(|_| DriverGone)
}

/// Moves request body chunks into the driver while there is room; `body` becomes `None`
/// once it ended, failed, or the driver is gone. Says whether the body's end was just sent.
fn pump_body<B, E>(
    cx: &mut Context<'_>,
    key: u64,
    body: &mut Option<B>,
    next: &mut Option<ToDriver<Exchange>>,
    tx: &mut Inbound,
) -> bool
where
    B: Stream<Item = Result<Bytes, E>> + Unpin,
{
    loop {
        if next.is_none() {
            let Some(stream) = body.as_mut() else {
                return false;
            };
            *next = match Pin::new(stream).poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => Some(ToDriver::Body { key, chunk }),
                Poll::Ready(None) => Some(ToDriver::End { key }),
                Poll::Ready(Some(Err(_))) => Some(ToDriver::Disconnect { key }),
                Poll::Pending => return false,
            };
        }
        match tx.poll_ready(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(_)) => {
                (*body, *next) = (None, None);
                return false;
            }
            Poll::Pending => return false,
        }
        if let Some(msg) = next.take() {
            let end = matches!(msg, ToDriver::End { .. });
            let last = !matches!(msg, ToDriver::Body { .. });
            let sent = tx.start_send(msg).is_ok();
            if !sent || last {
                *body = None;
                return sent && end;
            }
        }
    }
}

/// Reports a disconnect when the exchange is dropped before the driver ended it.
struct Guard {
    key: u64,
    tx: Inbound,
    armed: bool,
}

impl Guard {
    /// Sends `msg` without waiting: when this sender's slot is taken, a fresh clone has one
    /// (the queue then holds at most one such message more per exchange).
    fn deliver(&mut self, msg: ToDriver<Exchange>) {
        if let Err(e) = self.tx.try_send(msg)
            && e.is_full()
        {
            let _ = self.tx.clone().try_send(e.into_inner());
        }
    }
}

impl Guard {
    /// The client left: the driver hears it now, and not again on drop.
    fn depart(&mut self) {
        if std::mem::take(&mut self.armed) {
            let key = self.key;
            self.deliver(ToDriver::Disconnect { key });
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.armed {
            let key = self.key;
            self.deliver(ToDriver::Disconnect { key });
        }
    }
}

/// A response body fed by the driver, one router chunk per item. Ends with
/// `Err(ResponseAborted)` when the core cut the response. It tells the driver how much the
/// HTTP library took (the core paces by it); dropping it before its end tells the router the
/// client went away.
pub struct ResponseStream {
    replies: super::outbox::Replies,
    guard: Option<Guard>,
    /// Report taken bytes to the driver once this many are unreported.
    report_every: usize,
    /// Bytes handed out and not yet reported ([`ToDriver::Written`]).
    taken: usize,
    /// The watch on the client's socket, until it has nothing more to tell.
    departure: Option<Box<dyn Departure>>,
}

impl std::fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStream")
            .field("ended", &self.is_ended())
            .finish()
    }
}

impl ResponseStream {
    /// Whether the body has ended (or was cut).
    pub fn is_ended(&self) -> bool {
        self.guard.is_none()
    }

    /// The length of the rest of the body when the driver has given all of it (a JSON
    /// answer, by the time its head is read): an HTTP library can then send it with a
    /// `Content-Length`. `None` while more may come.
    pub fn exact_len(&self) -> Option<u64> {
        if self.guard.is_none() {
            return Some(0);
        }
        self.replies.exact_rest()
    }

    fn report(&mut self) {
        let Some(guard) = &mut self.guard else { return };
        if self.taken > 0 {
            let key = guard.key;
            let bytes = std::mem::take(&mut self.taken);
            guard.deliver(ToDriver::Written { key, bytes });
        }
    }
}

impl Stream for ResponseStream {
    type Item = Result<Bytes, ResponseAborted>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.guard.is_none() {
            return Poll::Ready(None);
        }
        match self.replies.poll_chunk(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                self.taken += chunk.len();
                if self.taken >= self.report_every {
                    self.report();
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(end) => {
                if let Some(mut guard) = self.guard.take() {
                    guard.armed = false;
                }
                Poll::Ready(end)
            }
            Poll::Pending => {
                // Everything given so far was taken: let the core send more.
                self.report();
                let departed = self.departure.as_mut().map(|d| d.poll_departed(cx));
                match departed {
                    Some(Poll::Ready(true)) => {
                        self.departure = None;
                        if let Some(mut guard) = self.guard.take() {
                            guard.depart();
                        }
                        // The library stops writing a response nobody reads.
                        Poll::Ready(Some(Err(ResponseAborted)))
                    }
                    Some(Poll::Ready(false)) => {
                        self.departure = None;
                        Poll::Pending
                    }
                    _ => Poll::Pending,
                }
            }
        }
    }
}

/// A watch on a connection for a client that left while nothing reads its socket (the
/// request is in, the response not yet out): for HTTP libraries that notice a departure only
/// when a write fails. [`ServerHandle::exchange`] polls it whenever the exchange waits; a
/// departure is reported to the router at once (it cancels what the request started).
pub trait Departure: Send + Sync + 'static {
    /// `Ready(true)` once the client has gone (EOF or an error on its socket);
    /// `Ready(false)` when the watch can tell no more (the client sent something else: the
    /// next request's bytes); `Pending` otherwise, with `cx` woken when that may change.
    fn poll_departed(&mut self, cx: &mut Context<'_>) -> Poll<bool>;
}

/// No watch: the HTTP library notices departed clients itself (hyper does).
impl Departure for () {
    fn poll_departed(&mut self, _: &mut Context<'_>) -> Poll<bool> {
        Poll::Ready(false)
    }
}

/// An exchange's [`Departure`] while it waits for its head: polled once armed (the body is
/// in), dropped once it told something.
struct Watch<D> {
    departure: Option<D>,
    armed: bool,
}

impl<D: Departure> Watch<D> {
    /// Whether the client just departed.
    fn departed(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.armed {
            return false;
        }
        match self.departure.as_mut().map(|d| d.poll_departed(cx)) {
            Some(Poll::Ready(gone)) => {
                self.departure = None;
                gone
            }
            _ => false,
        }
    }
}

enum Fired {
    Drain(Option<Duration>),
    Message(ToDriver<Exchange>),
    Cluster(ClusterDelivery),
    Closed,
}

/// The run loop: until a drain has finished or every sender is gone.
async fn run<R: Runtime>(
    rt: R,
    mut driver: ServerDriver<Exchange>,
    mut inbound: mpsc::Receiver<ToDriver<Exchange>>,
    mut cluster: mpsc::UnboundedReceiver<ClusterDelivery>,
    drain: oneshot::Receiver<Duration>,
    wakeup: Arc<Wakeup>,
    spawn_handlers: bool,
) {
    let mut drain = Some(drain);
    // See `DriverConfig::spawn_handlers`. A handler polled once here and spawned is polled again
    // by the runtime at once, with the task's waker: nothing it registered is lost.
    let mut spawn = |mut task: BoxFuture<'static, ()>| {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if spawn_handlers || task.as_mut().poll(&mut cx).is_pending() {
            rt.spawn(task);
        }
    };
    loop {
        driver.pump(rt.now(), &mut spawn);
        if driver.router.is_drained() {
            driver.router.shutdown(rt.now());
            driver.pump(rt.now(), &mut spawn);
            break;
        }
        // A shutdown first, then messages.
        let woke = super::wait(&rt, driver.router.poll_timeout(), &wakeup, |cx| {
            if let Some(rx) = drain.as_mut()
                && let Poll::Ready(grace) = Pin::new(rx).poll(cx)
            {
                drain = None;
                // An error: every handle is gone, nobody can drain any more.
                return Poll::Ready(Fired::Drain(grace.ok()));
            }
            // The store's answers before new requests: they unblock what waits.
            if let Poll::Ready(Some(d)) = Pin::new(&mut cluster).poll_next(cx) {
                return Poll::Ready(Fired::Cluster(d));
            }
            match Pin::new(&mut inbound).poll_next(cx) {
                Poll::Ready(Some(msg)) => Poll::Ready(Fired::Message(msg)),
                Poll::Ready(None) => Poll::Ready(Fired::Closed),
                Poll::Pending => Poll::Pending,
            }
        })
        .await;
        match woke {
            Woke::Input(Fired::Drain(Some(grace))) => {
                tracing::debug!(grace_ms = grace.as_millis() as u64, "mcp driver draining");
                driver.router.begin_shutdown(rt.now(), grace);
            }
            Woke::Input(Fired::Drain(None)) | Woke::Wake => {}
            Woke::Input(Fired::Message(msg)) => {
                let now = rt.now();
                driver.input(now, msg);
                // Take what else is already there before draining outputs.
                for _ in 0..256 {
                    match inbound.try_recv() {
                        Ok(msg) => driver.input(now, msg),
                        _ => break,
                    }
                }
            }
            Woke::Input(Fired::Cluster(d)) => {
                let now = rt.now();
                driver.cluster_input(now, d);
                for _ in 0..256 {
                    match cluster.try_recv() {
                        Ok(d) => driver.cluster_input(now, d),
                        _ => break,
                    }
                }
            }
            Woke::Input(Fired::Closed) => break,
            Woke::Deadline => driver.router.handle_timeout(rt.now()),
        }
    }
    tracing::debug!(
        exchanges = driver.exchanges.len(),
        sessions = driver.router.session_count(),
        "mcp driver stopped"
    );
}

/// For adapters: the accept loop of a [`Serving`]. Takes connections from `incoming` (the
/// listener) until a shutdown starts ([`ServerHandle::draining`]) and runs each with `serve`
/// in a task of its own; a failed accept (a reset, a file-descriptor limit) is logged and
/// never ends the server. Then it drops `incoming`, waits until every connection has ended
/// and sets `accepting` (the latch of [`Serving::start`]).
pub async fn accept_loop<R, S, I, F>(
    rt: R,
    handle: ServerHandle,
    accepting: Latch,
    mut incoming: I,
    serve: F,
) where
    R: Runtime,
    I: Stream<Item = std::io::Result<(S, std::net::SocketAddr)>> + Unpin,
    F: Fn(S, std::net::SocketAddr) -> BoxFuture<'static, ()>,
{
    // Every connection task holds a sender: the receiver ends once they all have ended.
    let (live, mut ended) = mpsc::unbounded::<std::convert::Infallible>();
    let mut draining = std::pin::pin!(handle.draining());
    loop {
        let accepted = std::future::poll_fn(|cx| {
            if draining.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            Pin::new(&mut incoming).poll_next(cx)
        })
        .await;
        match accepted {
            None => break,
            Some(Ok((stream, peer))) => {
                let (live, connection) = (live.clone(), serve(stream, peer));
                rt.spawn(Box::pin(async move {
                    connection.await;
                    drop(live);
                }));
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "accept failed");
                let mut yielded = false;
                std::future::poll_fn(|cx| {
                    if std::mem::replace(&mut yielded, true) {
                        return Poll::Ready(());
                    }
                    cx.waker().wake_by_ref();
                    Poll::Pending
                })
                .await;
            }
        }
    }
    drop(incoming);
    drop(live);
    let _ = std::future::poll_fn(|cx| Pin::new(&mut ended).poll_next(cx)).await;
    accepting.set();
}

/// A running server: its address and URL, and its [`ServerHandle`]. Dropping it leaves the
/// server running (until the runtime ends); [`Serving::shutdown`] stops it.
#[derive(Debug)]
pub struct Serving {
    local_addr: std::net::SocketAddr,
    url: String,
    handle: ServerHandle,
    accepting: Latch,
}

impl Serving {
    /// For adapters: starts the driver of `server` for a listener bound to `local_addr`,
    /// with `config` [`bound_to`](ServerConfig::bound_to) its address (loopback `Host`
    /// validation for a loopback bind). The adapter's accept loop sets the returned latch
    /// when it and its connections have ended; it stops accepting once
    /// [`ServerHandle::draining`].
    pub fn start<R: Runtime>(
        rt: &R,
        local_addr: std::net::SocketAddr,
        server: Server,
        config: ServerConfig,
        driver: DriverConfig,
    ) -> (Serving, Latch) {
        Serving::start_as("http", rt, local_addr, server, config, driver)
    }

    /// [`start`](Serving::start) for a listener that terminates TLS: the URL is `https://`.
    pub fn start_https<R: Runtime>(
        rt: &R,
        local_addr: std::net::SocketAddr,
        server: Server,
        config: ServerConfig,
        driver: DriverConfig,
    ) -> (Serving, Latch) {
        Serving::start_as("https", rt, local_addr, server, config, driver)
    }

    fn start_as<R: Runtime>(
        scheme: &str,
        rt: &R,
        local_addr: std::net::SocketAddr,
        server: Server,
        config: ServerConfig,
        driver: DriverConfig,
    ) -> (Serving, Latch) {
        let url = format!("{scheme}://{local_addr}{}", config.endpoint_path);
        let config = config.bound_to(local_addr.ip());
        let handle = ServerHandle::start(rt, server, config, driver);
        tracing::info!(%url, "serving MCP");
        let accepting = Latch::new();
        let serving = Serving {
            local_addr,
            url,
            handle,
            accepting: accepting.clone(),
        };
        (serving, accepting)
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.local_addr
    }

    /// The MCP endpoint's URL, e.g. `http://127.0.0.1:8080/mcp` (`https://` when the server
    /// terminates TLS).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The driver's handle (to serve more connections, or to watch it stop).
    pub fn handle(&self) -> &ServerHandle {
        &self.handle
    }

    /// Waits until the server has shut down (started elsewhere, through a clone of its
    /// [`handle`](Self::handle)).
    pub async fn wait(self) {
        self.accepting.wait().await;
    }

    /// [`shutdown_within`](Serving::shutdown_within) the core's default grace period
    /// ([`DEFAULT_SHUTDOWN_GRACE`]).
    pub async fn shutdown(self) {
        self.shutdown_within(DEFAULT_SHUTDOWN_GRACE).await;
    }

    /// Shuts down, draining: stops accepting connections; on the open ones, new requests
    /// are refused (the core answers 503 with a JSON-RPC error), GET streams end cleanly,
    /// and requests in flight finish and have their responses written. When nothing is in
    /// flight, or after `grace` (then what is left is cancelled and answered 503 where no
    /// response started), the driver stops, every connection closes after its response in
    /// progress, and this resolves. A client that does not read its response can hold its
    /// connection open past `grace`: wrap the call in a timeout to bound that.
    pub async fn shutdown_within(self, grace: Duration) {
        self.handle.shutdown_within(grace);
        self.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::{QUIET, Quiet};
    use std::time::{Duration, Instant};

    #[test]
    fn a_repeated_warning_is_logged_once_per_interval_with_the_count_held_back() {
        let t0 = Instant::now();
        let mut q = Quiet::default();
        assert_eq!(q.admit(t0), Some(0));
        for i in 1..=5 {
            assert_eq!(q.admit(t0 + Duration::from_millis(i * 100)), None);
        }
        assert_eq!(q.admit(t0 + QUIET), Some(5));
        assert_eq!(q.admit(t0 + QUIET + Duration::from_millis(1)), None);
        assert_eq!(q.admit(t0 + QUIET * 3), Some(1));
    }
}
