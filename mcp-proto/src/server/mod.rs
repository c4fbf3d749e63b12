// G-11, S-POST-7, S-SESS-5, S-VER-4, S-SEC-1/2/5, S-SESS-6, S-GET-3, S-SESS-9.
//! The server half of the transport: [`Router`], a sans-IO state machine that answers the
//! MCP endpoint's HTTP exchanges and hands JSON-RPC messages to the application.
//!
//! # The run loop
//!
//! **After any input (`handle_*`) or command (`respond`, `notify`, `send_request`,
//! `close_*`, `cancel_request`), call [`Router::poll_output`] until it returns `None`, then
//! wait until [`Router::poll_timeout`] or the next input, and call
//! [`Router::handle_timeout`] when the deadline passes.** An early or repeated
//! `handle_timeout` is a harmless no-op. Time only enters as the `now` argument; pass
//! non-decreasing instants (an older one is treated as the newest seen).
//!
//! ```no_run
//! use std::time::Instant;
//! use mcp_proto::server::{RequestHead, Router, ServerConfig, ServerOutput};
//! # fn next_http_request() -> (http::request::Parts, Vec<u8>) { unimplemented!() }
//! # struct MyCsprngIds;
//! # impl mcp_proto::server::SessionIdGenerator for MyCsprngIds { fn generate(&mut self) -> String { unimplemented!() } }
//! // Session ids must come from a CSPRNG: the core reads no random source itself.
//! let config = ServerConfig::default().with_session_ids(MyCsprngIds);
//! let mut router = Router::new(config, Instant::now());
//! let (parts, body) = next_http_request();
//! let stream = router.handle_request(Instant::now(), RequestHead::from_parts(&parts));
//! router.handle_body(Instant::now(), stream, &body);
//! router.handle_body_end(Instant::now(), stream);
//! while let Some(out) = router.poll_output() {
//!     match out {
//!         ServerOutput::ResponseHead { .. } => { /* start the HTTP response */ }
//!         ServerOutput::ResponseBody { .. } => { /* write and flush the chunk */ }
//!         ServerOutput::ResponseEnd { .. } => { /* finish the response */ }
//!         ServerOutput::Request { handle, .. } => { /* run the handler, then router.respond(..) */ }
//!         _ => {}
//!     }
//! }
//! ```
//!
//! # Methods, by kind
//!
//! - **Inputs** (the adapter): [`handle_request`](Router::handle_request) (a request head;
//!   returns the exchange's [`ExchangeId`]), [`handle_body`](Router::handle_body) (chunks as they
//!   arrive, so 413 needs no more than the cap in memory), [`handle_body_end`](Router::handle_body_end),
//!   [`handle_disconnect`](Router::handle_disconnect), [`handle_written`](Router::handle_written)
//!   (the client's reading), [`handle_timeout`](Router::handle_timeout), and in a cluster
//!   [`handle_store`](Router::handle_store), [`handle_bus`](Router::handle_bus),
//!   [`handle_bus_lost`](Router::handle_bus_lost),
//!   [`handle_store_unreachable`](Router::handle_store_unreachable),
//!   [`handle_store_reachable`](Router::handle_store_reachable).
//! - **Commands** (the app): [`respond`](Router::respond), [`notify`](Router::notify),
//!   [`send_request`](Router::send_request), [`cancel_request`](Router::cancel_request),
//!   [`close_for_polling`](Router::close_for_polling), [`close_session`](Router::close_session),
//!   [`set_session_state`](Router::set_session_state), [`begin_shutdown`](Router::begin_shutdown),
//!   [`shutdown`](Router::shutdown).
//! - **Outputs**: [`poll_output`](Router::poll_output) ([`ServerOutput`]: response heads,
//!   body chunks and ends per stream; messages for the app; session and observability
//!   events) and [`poll_timeout`](Router::poll_timeout).
//! - **Getters**: [`session_id`](Router::session_id), [`session_version`](Router::session_version),
//!   [`session_count`](Router::session_count), [`owns_path`](Router::owns_path),
//!   [`readiness`](Router::readiness), [`client_address`](Router::client_address).
//!
//! # The parts, and what each input drives
//!
//! The router owns five machines; each opens its module with its theory and its state table,
//! and changes state only through its one transition function:
//!
//! | part | module | state | transition |
//! |---|---|---|---|
//! | sessions | `session.rs` | `Initializing`, `Ready` (ended: absent) | `Sessions::step` |
//! | logical streams | `stream.rs` | `Pending`, `Open`, `Detached`, `Finished`, `Done` | `LogicalStream::step` |
//! | exchanges | `stream.rs` | `ReadingBody`, `Attached`, `Draining` | `Exchange::step` |
//! | parked requests (cluster) | `cluster.rs` | waiting for a session's record | `Parked::on` |
//! | drain | `drain.rs` | `Running`, `Draining`, `Forced` | `Drain::on` |
//!
//! `Streams` also owns an exchange's write path (pacing, the stall and heartbeat timers,
//! draining: `pace.rs`'s table). Beside the parts: the requests in flight and the
//! server→client requests (tables without a life of their own: a request is in flight from
//! its dispatch to its answer or cancellation), the timer set (`timer.rs`) and the output
//! queue, which the router lends a part for one call (`Fx`). What needs only the
//! configuration is the configuration's (`admission.rs`, `names.rs`). The router's own code is the glue between the parts: it reads an
//! input, asks the parts' tables, and performs the effects they return, in this order:
//!
//! ```text
//!  input / command        parts it drives, in order                           module
//!  ---------------------  --------------------------------------------------  -------------
//!  handle_request         drain (503) → checks: path, Host/Origin, CORS,       inbound.rs
//!                         auth, method, headers → sessions (404 | park on the
//!                         store's record) → exchange ReadingBody (POST) |
//!                         stream Attach (GET) | session Delete (DELETE)
//!  handle_body            exchange ReadingBody (413 over the cap) | parked     inbound.rs
//!  handle_body_end        parse → sessions (initialize: begin; Activity) →     inbound.rs,
//!                         in flight + stream Pending → Request/Notification;   sessionless.rs
//!                         responses → server→client requests; 202
//!  handle_disconnect      exchange removed → stream Disconnect{keep} →         inbound.rs
//!                         handlers cancelled (not resumable) or grace timer
//!  handle_written         exchange pace → BacklogWritten → End                 inbound.rs
//!  handle_timeout         drain Tick → timers: session IdleTimer, heartbeat,   timeout.rs
//!                         stall (slow reader), request deadline, stream
//!                         RetentionOver / GraceOver, store call timed out
//!  handle_store/bus/…     store calls → parked Loaded/Missing/Failed →         cluster.rs
//!                         sessions adopt; follows feed streams
//!  respond                in flight → stream write / LastResponse;             outbound.rs
//!                         initialize → session InitializeAnswered
//!  notify, send_request   stream Upgrade / write | listen stream | session     outbound.rs
//!                         queue | cluster publish
//!  close_for_polling      stream Release                                       outbound.rs
//!  close_session          session AppClose                                     outbound.rs
//!  begin_shutdown         drain Begin → streams Release (GET)                  drain.rs
//!  shutdown               sessions Shutdown (each)                             outbound.rs
//! ```
//!
//! # Both eras, one machine
//!
//! With [`ServerConfig::with_modern`] the router serves revision 2026-07-28 next to the legacy
//! ones. The era is chosen per request by its `MCP-Protocol-Version` header (and a modern
//! `_meta` under a legacy header is a mismatch, not a legacy request); a modern request runs
//! through the same exchanges, logical streams and phase table with the behaviour its version
//! selects — no session, no resumability, no server→client requests, GET/DELETE 405, its
//! mirrored headers checked against the body. The `sessionless` module docs hold its admission
//! table. Off (the default), a 2026-07-28 probe gets the legacy 400 -32000 that tells a
//! modern client to fall back.
//!
//! # What the router answers itself
//!
//! 202 (only notifications or responses), 400 (unparsable body -32700, not
//! JSON-RPC -32600, missing session, unsupported `MCP-Protocol-Version` —
//! -32022 with `data.supported` when the modern era is on —, batch outside 2025-03-26;
//! modern: header/body mismatch -32020, missing `_meta` fields -32602, a posted response
//! -32600), 404 for a modern request of a removed method (-32601), 401 (auth hook, with an RFC 9728 challenge), 403 (`Host`,
//! `Origin`), 404 (unknown path; unknown, expired, terminated or another
//! principal's session), 405 (GET/DELETE disabled or stateless), 406, 413, 415, 429 (rate
//! limits, with `Retry-After`: `rate.rs`), 503 (session cap), CORS preflights and other `OPTIONS` (204 with `Allow`), and the protected
//! resource metadata document. Every error body is a JSON-RPC error with `"id": null` and a message
//! saying what to fix.
//!
//! # Decisions where the specification is silent
//!
//! Listed in the [`Router`] docs.

mod admission;
mod cluster;
mod config;
mod drain;
mod error;
mod health;
mod inbound;
mod memory_cluster;
mod names;
mod outbound;
mod pace;
mod proxy;
mod rate;
pub(crate) mod security;
mod session;
mod sessionless;
mod store;
mod stream;
mod timeout;
mod timer;
mod wire;

use crate::HandleMap;
use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, Uri};

pub use cluster::{
    BusMessage, ClusterConfig, CommitEvent, FollowFrom, InvalidInstanceName, LogEvent, RecordGuard,
    RecordOp, ServiceRecord, SessionRecord, StoreError, StoreOp, StoreReply, StreamCommit,
    StreamEnd, Ticket,
};
pub use config::{
    OverflowPolicy, ResponseMode, SecurityConfig, ServerConfig, ServerLimits, StreamConfig,
};
pub use drain::DEFAULT_SHUTDOWN_GRACE;
pub use error::{CancelReason, CloseReason, ProtocolError, SendError, ServerRequestError};
pub use health::{Health, Readiness};
pub use memory_cluster::{ClusterDelivery, MemberId, MemoryCluster};
pub use proxy::{
    ClientView, ProxyConfig, ProxyNet, ProxySettingError, PublicUrl, client_address, client_view,
};
pub use rate::{RateLimit, RateLimits, RateScope};
pub use security::{
    AllowedOrigins, AuthDecision, Authenticator, CorsConfig, HostValidation,
    ProtectedResourceMetadata, WELL_KNOWN_PRM, needs_authentication,
};
pub use session::{DeterministicSessionIds, SessionIdGenerator, is_valid_session_id};
pub use sessionless::REMOVED_IN_MODERN;
pub use store::{EventStore, InMemoryEventStore, Replay, StoredEvent};

use crate::ProtocolVersion;
use crate::jsonrpc::{Notification, Request, RequestId, Response};
use session::Sessions;
use stream::Streams;
use timer::TimerQueue;

/// One HTTP exchange (request and its response), allocated by the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExchangeId(pub(crate) u64);

/// A client request handed to the app; answer it with [`Router::respond`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestHandle(pub(crate) u64);

/// A server→client request; its answer arrives as [`ServerOutput::ClientResponse`] or its
/// failure as [`ServerOutput::ServerRequestFailed`]. Its value is also the JSON-RPC id sent,
/// unique in the router, so ids never collide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OutboundId(pub(crate) u64);

/// A live session; [`Router::session_id`] gives its `Mcp-Session-Id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionHandle(pub(crate) u64);

macro_rules! id_getters {
    ($($t:ty),*) => {$(
        impl $t {
            /// The raw number (for logs and maps).
            pub fn as_u64(self) -> u64 {
                self.0
            }
        }
    )*};
}
id_getters!(ExchangeId, RequestHandle, OutboundId, SessionHandle);

/// The head of an HTTP request, borrowed from the adapter (`http::request::Parts` fits).
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// The method.
    pub method: &'a Method,
    /// The request target (HTTP/2 puts `:authority` here).
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// An identity the adapter already established (TLS client certificate, an async auth
    /// middleware); the [`Authenticator`] may read or override it.
    pub principal: Option<&'a str>,
    /// A verdict reached before the head was handed over (an asynchronous validator the
    /// driver ran because [`Router::needs_authentication`] said so). When present, the
    /// router applies it exactly as it would its own [`Authenticator`]'s decision, and
    /// does not call that hook.
    pub verdict: Option<&'a AuthDecision>,
    /// The address of the connection's other end, as the adapter accepted it (a reverse
    /// proxy's, behind one). `None` when the adapter does not know it.
    pub peer: Option<std::net::SocketAddr>,
    /// The request's HTTP version, when the adapter says it ([`RequestHead::from_parts`]
    /// does): reported, never a protocol decision.
    pub http_version: Option<http::Version>,
}

impl<'a> RequestHead<'a> {
    /// A head from its parts.
    pub fn new(method: &'a Method, uri: &'a Uri, headers: &'a HeaderMap) -> Self {
        RequestHead {
            method,
            uri,
            headers,
            principal: None,
            verdict: None,
            peer: None,
            http_version: None,
        }
    }

    /// A head from `http::request::Parts` (its HTTP version included).
    pub fn from_parts(parts: &'a http::request::Parts) -> Self {
        let mut head = RequestHead::new(&parts.method, &parts.uri, &parts.headers);
        head.http_version = Some(parts.version);
        head
    }

    /// Sets the adapter-established principal.
    pub fn with_principal(mut self, principal: Option<&'a str>) -> Self {
        self.principal = principal;
        self
    }

    /// Sets the verdict of an authentication that ran before (see [`RequestHead::verdict`]).
    pub fn with_verdict(mut self, verdict: Option<&'a AuthDecision>) -> Self {
        self.verdict = verdict;
        self
    }

    /// Sets the connection's peer address (see [`RequestHead::peer`]).
    pub fn with_peer(mut self, peer: Option<std::net::SocketAddr>) -> Self {
        self.peer = peer;
        self
    }
}

/// Where to send a notification or a server→client request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    // S-POST-12, S-PROG-4.
    /// Related to a client request: on that request's POST stream,
    /// upgrading a pending JSON answer to SSE in auto mode.
    Request(RequestHandle),
    // S-GET-4/5, S-MULTI-2.
    /// Not related to a request: on the session's GET stream, or its bounded queue while
    /// none is open. Never broadcast.
    Session(SessionHandle),
}

/// Where a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// Written on the request's stream.
    RequestStream,
    /// Stored on the request's stream while its connection is away; the client gets it when
    /// it resumes.
    StoredForResume,
    /// Written on the session's GET stream.
    ListenStream,
    /// Queued until the session opens a GET stream.
    Queued,
    /// Handed to the cluster's listen log, which the instance holding the session's GET
    /// stream follows (see [`ClusterConfig`]).
    Published,
    /// JSON response mode could not put it before the response, so it went to the session's
    /// GET stream (or queue) instead.
    Rerouted,
}

/// Everything the router asks of the adapter and the app.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerOutput {
    /// Start the response of `stream`.
    ResponseHead {
        /// The exchange.
        stream: ExchangeId,
        /// The status.
        status: StatusCode,
        /// The headers (`Content-Type`; for SSE `Cache-Control: no-cache` and
        /// `X-Accel-Buffering: no`; `Mcp-Session-Id` on the `initialize` answer; CORS).
        headers: HeaderMap,
    },
    /// Write (and flush) a chunk of the body: one SSE frame or a whole JSON body.
    ResponseBody {
        /// The exchange.
        stream: ExchangeId,
        /// The bytes.
        chunk: Bytes,
    },
    /// The response is complete: finish it (and close an SSE stream).
    ResponseEnd {
        /// The exchange.
        stream: ExchangeId,
    },
    /// Cut the connection: the client stopped reading (the slow-reader rule,
    /// [`ServerLimits::slow_reader_timeout`]). Abort it so that the client cannot mistake the
    /// cut for a complete response (with chunked encoding: no terminating chunk); nothing
    /// more comes for this exchange.
    ResponseAbort {
        /// The exchange.
        stream: ExchangeId,
    },
    /// The request was answered before its body was read: the adapter may stop reading it
    /// (and close the connection rather than drain a large body).
    StopReading {
        /// The exchange.
        stream: ExchangeId,
    },
    /// A client request for the app; answer it exactly once with [`Router::respond`].
    Request {
        /// Pass it back to [`Router::respond`].
        handle: RequestHandle,
        /// The session (`None` in stateless mode).
        session: Option<SessionHandle>,
        /// The request (its `id` is the client's; the router restores it in the response).
        request: Request,
        /// Who sent it, as the authentication step established (`None` without one). A
        /// session's requests all come from the principal it is bound to.
        principal: Option<Box<str>>,
    },
    /// A client notification for the app (`notifications/cancelled` is handled by the
    /// router and surfaces as [`ServerOutput::Cancelled`] instead).
    Notification {
        /// The session (`None` in stateless mode).
        session: Option<SessionHandle>,
        /// The notification.
        notification: Notification,
    },
    /// The client's answer to a server→client request.
    ClientResponse {
        /// The request it answers.
        request: OutboundId,
        /// The session.
        session: SessionHandle,
        /// The response.
        response: Response,
    },
    /// A server→client request ended without an answer.
    ServerRequestFailed {
        /// The request.
        request: OutboundId,
        /// Why.
        error: ServerRequestError,
    },
    /// Stop handling a request and do not answer it.
    Cancelled {
        /// The request.
        handle: RequestHandle,
        /// Why.
        reason: CancelReason,
    },
    /// `initialize` created a session.
    SessionCreated {
        /// The session.
        session: SessionHandle,
    },
    /// A session ended; its id now gets 404.
    SessionClosed {
        /// The session.
        session: SessionHandle,
        /// Why.
        reason: CloseReason,
    },
    /// A cluster store operation for the driver to execute (see [`ClusterConfig`]); give
    /// its answer to [`Router::handle_store`] with the same ticket.
    Store {
        /// Names the operation; its answer must carry it.
        ticket: Ticket,
        /// The operation.
        op: StoreOp,
    },
    /// A session created by another cluster instance is now served here too (its record was
    /// loaded from the store); `state` is what [`Router::set_session_state`] last stored.
    SessionLoaded {
        /// The session.
        session: SessionHandle,
        /// The service's state of the session.
        state: Option<Bytes>,
    },
    /// This instance forgot its copy of a clustered session (idle here, or the bus was
    /// lost); the session lives on in the store and other instances.
    SessionUnloaded {
        /// The session.
        session: SessionHandle,
    },
    /// Another cluster instance's service-level notice ([`Router::broadcast_notice`] there,
    /// [`BusMessage::Notice`] on the bus), for the service to hand to its
    /// `subscriptions/listen` streams here. Never one of this instance's own.
    ClusterNotice {
        /// The instance that sent it.
        from: Box<str>,
        /// The service's notice, as it was broadcast.
        payload: Bytes,
    },
    /// The store's answer to the service's record operation [`Router::record_op`] returned
    /// `ticket` for ([`StoreReply::Failed`] when the store did not answer in time).
    RecordAnswer {
        /// The ticket `record_op` returned.
        ticket: Ticket,
        /// The answer.
        reply: StoreReply,
    },
    /// Something worth a log line or a metric.
    Event(ServerEvent),
}

/// Observability: what the router did on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerEvent {
    /// A request was refused with an error status.
    Rejected {
        /// The exchange.
        stream: ExchangeId,
        /// Why.
        error: ProtocolError,
    },
    /// A pending JSON answer became an SSE stream.
    Upgraded {
        /// The exchange.
        stream: ExchangeId,
    },
    /// JSON response mode sent a related message to the GET stream instead.
    Rerouted {
        /// The session.
        session: SessionHandle,
    },
    /// A queued notification was dropped to make room (overflow policy).
    QueueOverflow {
        /// The session.
        session: SessionHandle,
    },
    /// A new GET took over a stream (the session's GET stream, or a stream resumed with
    /// `Last-Event-ID`) whose connection still looked open; the old connection was ended.
    ConnectionReplaced {
        /// The session.
        session: SessionHandle,
        /// The connection that was ended.
        old: ExchangeId,
        /// The new connection.
        new: ExchangeId,
    },
    /// A GET with `Last-Event-ID` replayed events.
    Resumed {
        /// The new connection.
        stream: ExchangeId,
        /// How many events were replayed.
        replayed: usize,
        /// Some events after the id had been evicted from the store.
        gap: bool,
    },
    /// The client answered a server→client request the router does not know (late,
    /// cancelled, or another session's).
    UnmatchedResponse {
        /// The session.
        session: Option<SessionHandle>,
    },
    /// A request reused the id of a request still in flight in its session and got an
    /// error response.
    DuplicateRequestId {
        /// The session.
        session: Option<SessionHandle>,
    },
    // S-POST-20.
    /// The server closed a connection so that the client polls.
    ClosedForPolling {
        /// The connection.
        stream: ExchangeId,
    },
    /// A cluster store refused to store an event after its retries; it was written to the
    /// client all the same and kept on this instance only.
    NotStored {
        /// What the store said.
        reason: Box<str>,
    },
    /// A client took nothing of a streaming response for
    /// [`ServerLimits::slow_reader_timeout`] while data waited (or let too much pile up): its
    /// connection was cut ([`ServerOutput::ResponseAbort`]) and treated as a disconnect.
    SlowReader {
        /// The connection.
        stream: ExchangeId,
    },
}

/// Where a part's effects go: the output queue and the timer set, at `now`. The router
/// lends its own to a part's method for the length of one call.
pub(crate) struct Fx<'a> {
    /// The time now.
    pub(crate) now: Instant,
    /// The router's timers.
    pub(crate) timers: &'a mut TimerQueue,
    /// The router's outputs.
    pub(crate) out: &'a mut VecDeque<ServerOutput>,
}

/// A client request in flight.
#[derive(Debug)]
struct InFlight {
    session: Option<SessionHandle>,
    stream: u64,
    client_id: RequestId,
    initialize: bool,
    /// Who sent it ([`Router::request_client`]).
    client: RequestClient,
}

/// Who sent a request, as far as the transport knows: what observability reports of the
/// client (OpenTelemetry's `client.address`, `client.port`, `network.protocol.version`).
/// Never a protocol decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestClient {
    /// The client's address, as [`client_address`] resolves it (behind trusted proxies, the
    /// forwarded client's).
    pub address: Option<std::net::IpAddr>,
    /// The client's port: the connection's, when the address is the connection's peer (a
    /// proxy does not forward the client's port).
    pub port: Option<u16>,
    /// The HTTP version of the POST that carried the request.
    pub http_version: Option<http::Version>,
}

/// A pending server→client request.
#[derive(Debug)]
struct Outbound {
    session: SessionHandle,
    deadline: Option<Instant>,
}

// S-VER-3, G-6, S-POST-16, S-NEW-6, S-CANCEL-3, S-NEW-10, G-11, S-NEW-9.
/// The server state machine: owns the sessions, their streams and timers.
///
/// # Decisions where the specification is silent
///
/// - **Accept.** A POST must accept what the response mode may produce: JSON mode needs
///   `application/json`, SSE mode `text/event-stream`, auto mode either (406 otherwise).
///   In auto mode a client accepting only JSON never gets an upgrade (its related messages
///   are rerouted as in JSON mode), one accepting only SSE always gets SSE.
/// - **`MCP-Protocol-Version`.** Any supported revision is accepted on any request, whatever
///   was negotiated (the conformance suite sends 2025-03-26 after negotiating 2025-11-25).
///   When absent, the session's negotiated revision applies, else 2025-03-26.
///   `initialize` is exempt. Behaviour that depends on the revision (batches,
///   priming) follows the *negotiated* revision.
/// - **Negotiation.** The session starts with the client's requested revision when
///   supported, else the newest supported one; the app's `InitializeResult`
///   (`result.protocolVersion`) has the last word.
/// - **Duplicate request id** in flight in the session: that request gets a -32600 error
///   response (HTTP 400) and is not handed to the app; the first is untouched.
/// - **Cancellation and disconnects.** `notifications/cancelled` cancels the handler. A
///   client disconnecting from a stream it cannot resume (no event id reached it) cancels
///   the handlers of that stream at once; from a resumable stream, after
///   [`StreamConfig::resume_grace`] unless it resumed. This departs from the
///   specification's "SHOULD NOT be read as cancelling" (2025-11-25, Transports › Sending
///   Messages to the Server) only where resuming is impossible, which is what the
///   2026-07-28 revision mandates anyway.
/// - **A cancelled request's exchange** gets no JSON-RPC response: an SSE
///   stream ends, a pending JSON answer becomes an empty SSE stream (or, when the client
///   accepts only JSON, a -32800 error so the exchange still ends well-formed).
/// - **GET takeover.** A second GET for a session replaces the first (ends its connection),
///   because proxies drop GETs silently and the client must get a working stream at once;
///   but only [`ServerLimits::listen_takeovers`] times per
///   [`ServerLimits::listen_takeover_window`] (3 per minute): after that a GET for a stream
///   that has a live connection gets 409, so two live GETs of one client cannot end each
///   other forever.
/// - **Pacing.** Streaming bodies go out as the client takes them
///   ([`Router::handle_written`]); a client that takes nothing for
///   [`ServerLimits::slow_reader_timeout`] while data waits is cut as a slow reader, never a
///   fresh response for its size.
/// - **The GET stream while away.** Messages for a session's GET stream while its
///   connection is away are stored as its events and replayed on resume (as for request
///   streams); a resume whose cursor fell out of retention gets the events still kept,
///   preceded by an [`events-lost`](crate::sse::EVENTS_LOST) event.
/// - **Idle.** A session is idle when no request arrived and no stream was open for the
///   whole TTL; a long-lived GET stream keeps its session alive.
/// - **Resuming with an unknown `Last-Event-ID`** (bad format, another session's stream,
///   retention over) gets 400 rather than an empty 200 stream, which made rmcp's client loop
///   at 1 Hz with the same `Last-Event-ID`.
/// - **Unsupported 2026-07-28 header** (modern era off, the default) gets 400 (-32000
///   "Unsupported protocol version"), the signal a modern client uses to fall back. With the modern
///   era on, any unsupported version gets -32022 with the supported list, before any session check.
/// - **Modern errors and HTTP status.** A modern answer that is an error with -32601 goes
///   out as 404, with -32020/-32021/-32022 as 400, provided nothing preceded it
///   on the stream (the head waits for the first message for that reason); other errors,
///   and any error after a notification, ride a 200.
/// - **Modern notifications** (none is defined over HTTP in 2026-07-28) get 202 and reach
///   the app with no session; `notifications/cancelled` is dropped (closing cancels).
/// - **DELETE** answers 200 with no body.
pub struct Router {
    config: ServerConfig,
    now: Instant,
    next_id: u64,
    sessions: Sessions,
    streams: Streams,
    inflight: HandleMap<RequestHandle, InFlight>,
    outbound: HandleMap<OutboundId, Outbound>,
    timers: TimerQueue,
    out: VecDeque<ServerOutput>,
    /// The draining shutdown (`drain.rs`).
    drain: drain::Drain,
    /// Store calls in flight and parked requests (`cluster.rs`).
    cluster: cluster::ClusterState,
    /// The rate limits' buckets (`rate.rs`).
    rate: rate::RateLimiter,
    /// What readiness reads besides the drain (`health.rs`).
    health: health::HealthState,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("sessions", &self.sessions.len())
            .field("exchanges", &self.streams.exchange_count())
            .field("streams", &self.streams.stream_count())
            .field("inflight", &self.inflight.len())
            .field("outbound", &self.outbound.len())
            .finish_non_exhaustive()
    }
}

/// The outputs a router keeps room for once its queue is empty.
const OUT_RETAINED: usize = 1024;

impl Router {
    /// A router with `config`, at time `now`.
    pub fn new(mut config: ServerConfig, now: Instant) -> Self {
        config.security.apply_public_url();
        Router {
            config,
            now,
            next_id: 0,
            sessions: Sessions::default(),
            streams: Streams::default(),
            inflight: HandleMap::default(),
            outbound: HandleMap::default(),
            timers: TimerQueue::default(),
            out: VecDeque::new(),
            drain: drain::Drain::default(),
            cluster: cluster::ClusterState::default(),
            rate: rate::RateLimiter::default(),
            health: health::HealthState::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The next output, or `None` when there is nothing to do until the next input or
    /// timeout. See the run loop in the module docs.
    pub fn poll_output(&mut self) -> Option<ServerOutput> {
        if !self.cluster.commits.is_empty() {
            self.flush_commits();
        }
        let out = self.out.pop_front();
        if out.is_none() && self.out.capacity() > OUT_RETAINED {
            // A burst (thousands of sessions expiring at once) must not pin its peak; a busy
            // router keeps room for its usual turn rather than growing it from nothing
            // each time (a batch of store answers emits hundreds of outputs).
            self.out.shrink_to(OUT_RETAINED);
        }
        out
    }

    /// The earliest instant at which [`handle_timeout`](Router::handle_timeout) has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.timers.next(), self.drain.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The `Mcp-Session-Id` of a live session.
    pub fn session_id(&self, session: SessionHandle) -> Option<&str> {
        self.sessions.get(&session).map(|s| &*s.id)
    }

    /// The live session with this `Mcp-Session-Id`.
    pub fn session_by_id(&self, id: &str) -> Option<SessionHandle> {
        self.sessions.by_id(id)
    }

    /// The revision negotiated by a live session.
    pub fn session_version(&self, session: SessionHandle) -> Option<ProtocolVersion> {
        self.sessions.get(&session).map(|s| s.version)
    }

    /// The principal a live session is bound to.
    pub fn session_principal(&self, session: SessionHandle) -> Option<&str> {
        self.sessions
            .get(&session)
            .and_then(|s| s.principal.as_deref())
    }

    /// How many sessions are live.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Whether the router answers requests for `path` (the endpoint and, when configured,
    /// the metadata documents), so an adapter mounted among other routes can dispatch.
    pub fn owns_path(&self, path: &str) -> bool {
        path == self.config.endpoint_path
            || self.config.health.serves(path)
            || self
                .config
                .security
                .protected_resource
                .as_ref()
                .is_some_and(|p| p.serves(path, &self.config.endpoint_path))
    }

    /// Replaces the `x-mcp-header` declarations of the tools (see
    /// [`ServerConfig::param_headers`]); the service binding calls it when the tools change.
    pub fn set_param_headers(&mut self, table: crate::mirror::ParamHeaderTable) {
        self.config.param_headers = Some(table);
    }

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
    }

    /// The output queue and the timer set, lent to a part (see [`Fx`]).
    fn fx<'a>(
        now: Instant,
        timers: &'a mut TimerQueue,
        out: &'a mut VecDeque<ServerOutput>,
    ) -> Fx<'a> {
        Fx { now, timers, out }
    }

    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}
