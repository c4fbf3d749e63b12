// S-POST-2, S-POST-3, G-1, S-SESS-4, S-VER-1, S-GET-10, S-SESS-1, S-LIFE-4, G-9, S-MULTI-4,
// S-RPC-7, S-NEW-6, S-NEW-1, S-NEW-10, G-11, S-NEW-4, S-NEW-4, S-NEW-7, S-NEW-8, S-NEW-3, S-NEW-9,
// S-NEW-5.
//! The client half of the Streamable HTTP transport as one sans-IO state machine:
//! [`ClientSession`].
//!
//! # The run loop
//!
//! **After any command or input, call [`ClientSession::poll_output`] until it returns `None`,
//! then sleep until [`ClientSession::poll_timeout`] or the next input, whichever comes first,
//! and feed it with [`ClientSession::handle_timeout`] or [`ClientSession::handle_input`].** An
//! early `handle_timeout` is a harmless no-op; time passed in must not go backwards.
//!
//! ```no_run
//! use std::time::Instant;
//! use mcp_proto::client::{ClientConfig, ClientSession, Output};
//!
//! let mut session = ClientSession::new(ClientConfig::new(), Instant::now());
//! let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{
//!     "protocolVersion":"2025-11-25","capabilities":{},
//!     "clientInfo":{"name":"x","version":"1"}}}"#;
//! session.send(Instant::now(), bytes::Bytes::from_static(init)).unwrap();
//! while let Some(out) = session.poll_output() {
//!     match out {
//!         Output::Http(req) => { /* start req.method on the endpoint with req.headers, req.body */ }
//!         Output::Abort(stream) => { /* drop that exchange */ }
//!         Output::Message(m) => { /* a server request or notification for the app */ }
//!         Output::Outcome(o) => { /* one of our requests ended */ }
//!         Output::Event(e) => { /* log it */ }
//!         _ => {}
//!     }
//! }
//! // … then wait for network input or `session.poll_timeout()`.
//! ```
//!
//! # Method kinds
//!
//! - **Commands** (the app): [`send`](ClientSession::send) a serialized JSON-RPC message
//!   (request, notification, or the response to a server request),
//!   [`cancel`](ClientSession::cancel) a request, [`listen`](ClientSession::listen) /
//!   [`stop_listening`](ClientSession::stop_listening), [`close`](ClientSession::close),
//!   [`set_bearer_token`](ClientSession::set_bearer_token), and after an authorization
//!   [`authorized`](ClientSession::authorized) / [`authorization_failed`](ClientSession::authorization_failed)
//!   (messages held for it, `hold.rs`).
//! - **Inputs** (the adapter): [`handle_input`](ClientSession::handle_input) with an
//!   [`Input`] (response head, body chunk, end, transport failure) and
//!   [`handle_timeout`](ClientSession::handle_timeout).
//! - **Outputs**: [`poll_output`](ClientSession::poll_output) yields [`Output`]s — HTTP
//!   intents, aborts, server messages, request outcomes (exactly one per request: a response,
//!   a typed error, or cancelled), and [`ClientEvent`]s; [`poll_timeout`](ClientSession::poll_timeout).
//! - **Getters**: `session_id`, `protocol_version`, `era`, `discovery`, `is_ready`,
//!   `is_closed`, `in_flight`.
//!
//! # Theory of operation
//!
//! Every message the app sends is one POST with `Accept: application/json,
//! text/event-stream` and `Content-Type: application/json`; once a session
//! is established, `Mcp-Session-Id` (if the server issued one) and
//! `MCP-Protocol-Version` go on every request, GET and DELETE included.
//! Each POST is followed by a `post.rs` sub-machine, the listening GET by the `listen.rs`
//! sub-machine; this facade owns the session phase, the table of requests in flight, the queue
//! of messages waiting for the session, and the routing of every server message.
//!
//! **Initialize** (decision): the app sends its own `initialize` request; the session
//! recognises it by method, saves its bytes (for re-initialization), and watches its response
//! for `protocolVersion` and the response head for `Mcp-Session-Id`. The app gets
//! the response as the request's outcome. The session then POSTs `notifications/initialized`
//! **itself** — it must do so anyway when it re-initializes on its own, so there is
//! one path — and absorbs the app's copy if the app sends one ([`SendReceipt::Absorbed`]).
//! Messages sent before the answer to `notifications/initialized` are **queued** and go
//! out in order once it arrives; the listening stream opens then too (as in mcp-go: after `notifications/initialized`).
//! A server that refuses `notifications/initialized` does not wedge the session: it proceeds,
//! and [`ClientEvent::Ready`] carries the refusal.
//!
//! **Matching**: responses are matched to requests by id only, on whatever stream they arrive
//! (the listening stream included); a second in-flight request with the same id is
//! refused ([`ApiMisuse::DuplicateRequestId`]), so nothing is ever cross-wired. An error
//! response without an id on a request's own POST body is that request's
//! error. Anything else is [`ClientEvent::UnmatchedResponse`].
//!
//! **Session expiry**: a 404 to an exchange that carried the *current* session id expires it:
//! [`ClientEvent::SessionExpired`] (one per id), id cleared, listening suspended. With
//! re-initialization on (the default) and a saved `initialize`, the session replays it under a
//! session-owned id (`"mcp-proto-reinit-N"`), sends `notifications/initialized`, retries once
//! each request that failed with a 404 (a POST; a resume that 404s fails, the request may have
//! run), and emits [`ClientEvent::Reinitialized`]. At most three re-initializations in a row
//! without reaching `Ready`. A 404 to `initialize` is [`ClientError::EndpointNotFound`].
//!
//! **Eras**: the negotiated (or configured) [`ProtocolVersion`] selects behaviour: batches
//! only where `allows_batch`; sessions, the GET stream, resumption and
//! `notifications/cancelled` only where `has_sessions` (the modern era cancels by dropping the
//! stream, and has no GET). Nothing assumes a session id exists. There is
//! one machine: every rule below is a question the version answers, not a second code path.
//!
//! **Era detection** ([`EraMode`]): with `EraMode::Legacy` (the default) the
//! app's `initialize` goes out as is. With `Auto` (dual-era) or `Modern`, the app still sends
//! `initialize`, and the session holds it (phase `Probing`) while it POSTs its own
//! `server/discover` (id `mcp-proto-discover-N`) with the modern `_meta` and headers, using
//! the app's `clientInfo`/`capabilities`. A result means modern: the session answers the
//! app's `initialize` itself from the discovery result (`protocolVersion` 2026-07-28,
//! `capabilities`, `serverInfo`, `instructions`; the modern server has no `initialize`),
//! goes `Ready` and absorbs the app's `notifications/initialized`. A JSON-RPC error
//! `-32020/-32021/-32022` (in a 200 or in a 4xx body, whatever its id) also means modern:
//! `-32022` naming a modern version we speak re-probes with it (one not tried yet; else the
//! very version refused, once more, never a third time), naming only legacy versions falls
//! back, otherwise the error is the `initialize`'s response. Any other
//! error or 4xx means legacy: the app's `initialize` is POSTed, and a 400/404/405 to it is
//! [`ClientError::LegacySseTransport`] (HTTP+SSE, which we do not speak). A 5xx, a transport
//! failure or a timeout fails the `initialize` without a verdict. `Modern` turns "legacy" into
//! [`ClientError::ModernUnsupported`]. The verdict goes out as
//! [`ClientEvent::KnownEraChanged`] for the app to remember per origin (modern at once;
//! legacy once `initialize` succeeded), and comes back in the next session's
//! [`ClientConfig::with_known_era`] (the driver's `EraCache` does both); a cached legacy
//! origin is not probed, a cached modern one is probed at its version, and a cached modern
//! origin that answers as legacy is forgotten and falls back — at the probe, or later when an
//! ordinary modern request gets a 400/404/405 without a JSON-RPC error (the next session
//! probes again).
//!
//! **Modern requests**: every POSTed request gets `_meta`
//! `io.modelcontextprotocol/protocolVersion` (always the session's, so it equals the
//! `MCP-Protocol-Version` header), `clientCapabilities` and `clientInfo` (the app's, when it
//! set them; else the [`ClientIdentity`]), and the mirrored headers of [`crate::mirror`]:
//! `Mcp-Method`, `Mcp-Name`, and `Mcp-Param-*` for tools whose `x-mcp-header` declarations the
//! session learnt from `tools/list` results (tools with invalid declarations are removed from
//! the result, [`ClientEvent::InvalidToolDefinition`]). No session id, no GET, no
//! `Last-Event-ID`: a broken stream fails its request ([`ServerFault::StreamEndedWithoutResponse`]
//! or [`ClientError::Transport`]) and the app re-issues it under a new id. A 4xx
//! whose body is a JSON-RPC error (unknown method → 404 `-32601`, `-32020`, `-32022`)
//! is delivered as the request's response. The app cannot send responses
//! ([`ApiMisuse::ResponseNotAllowed`]) except to input requests (below).
//!
//! **Multi round-trip requests**: a result with `"resultType": "input_required"`
//! does not end the request. Each of its `inputRequests` is handed to the app as a server
//! request ([`Output::Message`], id `mcp-proto-input/<request>/<round>/<key>`), exactly as a
//! legacy server's `sampling/createMessage` would be, so the same handlers answer it; the
//! app's `send` of the answer is collected ([`SendReceipt::Absorbed`]), never POSTed. When
//! every answer is in (or at once when there were no input requests), the original request is
//! POSTed again with `inputResponses`, the exact `requestState` (none when the server gave
//! none) and a new wire id (`<request>#input-<round>`, mapped back: the app only ever sees its
//! own id). An error answer fails the request ([`ClientError::InputRequestFailed`]); more than
//! `max_input_rounds` rounds fail it ([`ClientError::TooManyInputRounds`]); the request
//! timeout covers every round; cancelling while the app answers sends the app a
//! `notifications/cancelled` for each pending input request (so its handlers stop) and
//! nothing to the server.
//!
//! **Modern listening**: `listen` (or continuous listening) opens
//! `subscriptions/listen` as a POST with the configured notification filter
//! ([`ClientConfig::with_subscription_filter`]; without one there is nothing to listen for:
//! [`ClientEvent::ListenUnsupported`]). The same `listen.rs` machine runs it, with the same
//! backoff, failure budget and `retry` floors; 404 and 405 are final; a delivered message
//! (the acknowledgement comes first) is progress; a new id per attempt; the response to
//! `subscriptions/listen` (a graceful end) is [`ClientEvent::SubscriptionEnded`];
//! `stop_listening` closes the stream, which is the cancellation.
//!
//! **Other decisions**:
//! - Messages sent before the session is ready — even before `initialize` is sent — are
//!   queued (bounded by `max_queued_messages`), not refused; `close` fails them.
//! - The session's own steps never wedge it: a replayed `initialize` or an unanswered
//!   `notifications/initialized` is given up on after the request timeout (30 s without one).
//! - A POST that fails below HTTP is not retried (it may have been processed); only a 404
//!   with a session id is retried, once, after re-initialization.
//! - Static and callback headers cannot override the protocol's own headers.
//! - A 404 to a request that carried no session id (a server without sessions) is an
//!   ordinary [`ClientError::HttpStatus`].
//!
//! # Layout
//!
//! Four state machines, each in its own file with a theory of operation, an ASCII state
//! table and one exhaustive `match`: the session phase (`lifecycle.rs`: Uninitialized →
//! [Probing →] Initializing → Acknowledging → Ready, Probing → Ready in the modern era,
//! Reinitializing on expiry, Closing → Closed), one request in flight (`request.rs`:
//! Queued → Sent → [AwaitingInput →] …), one POST exchange and its resumes (`post.rs`), and
//! the GET listening stream (`listen.rs`).
//! `session.rs` builds intents, runs the sub-machines and routes what they yield; `wire.rs`
//! is the seam to `jsonrpc` and `sse`; `per_request.rs` the modern era's JSON (`_meta`, the probe
//! verdict, input requests and retries); `backoff.rs` the deterministic jittered backoff;
//! `config.rs`, `io.rs`, `event.rs` and `error.rs` the public vocabulary.

mod backoff;
mod config;
mod error;
mod event;
mod hold;
mod io;
mod lifecycle;
mod listen;
mod per_request;
mod post;
mod request;
mod wire;

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method};

pub use backoff::{BackoffConfig, FailureBudget};
pub use config::{
    ClientConfig, ClientIdentity, EraMode, HeaderContext, HeaderFn, KnownEra, Limits,
    RateLimitRetry, TokenProvider,
};
pub use error::{ApiMisuse, ClientError, Limit, ServerFault};
pub use event::{ClientEvent, CloseOutcome, ListenStop, StreamRole};
pub use io::{
    Delivered, HttpRequest, HttpRequestKind, Input, Output, RequestOutcome, RequestResult,
    SendReceipt, StreamId, TlsFailure, TransportFailure,
};
pub use wire::{Message, RequestId, Response};

use backoff::{Backoff, FailureWindow, after};
use config::Start;
use lifecycle::PhaseEvent;
use listen::{Listen, ListenCtx, ListenEffect, ListenInput};
use post::{PostCtx, PostEffect, PostInput, PostStream, Purpose};
use request::{ReqEvent, ReqState, Requests};
use wire::{INITIALIZE, INITIALIZED, Outgoing};

use crate::http::{header, mime};
use crate::version::ProtocolVersion;

/// Re-initializations in a row that may happen without the session reaching `Ready`.
const MAX_REINIT_STREAK: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Uninitialized,
    Probing,
    Initializing,
    Acknowledging,
    Ready,
    Reinitializing,
    Closing { stream: StreamId, deadline: Instant },
    Closed,
}

/// The input requests of one MRTR round waiting for the app's answers.
#[derive(Debug)]
struct Inputs {
    /// Answers by key (`None`: not answered yet), in the server's order.
    answers: Vec<(String, Option<Box<serde_json::value::RawValue>>)>,
    /// The server's `requestState`, echoed exactly on the retry.
    state: Option<String>,
    /// The stream the `InputRequiredResult` came on.
    stream: StreamId,
}

#[derive(Debug)]
struct Req {
    method: Box<str>,
    bytes: Bytes,
    state: ReqState,
    /// Already retried after a session expiry.
    retried: bool,
    deadline: Option<Instant>,
    /// The session's own (re-initialization); never gets an outcome.
    internal: bool,
    /// The session epoch of the last POST.
    epoch: u64,
    /// `InputRequiredResult` rounds so far (MRTR).
    rounds: u32,
    /// The JSON-RPC id of the current retry on the wire, when it differs from the app's id
    /// (MRTR: a retry MUST have a new id).
    wire: Option<RequestId>,
    /// The current round's input requests.
    inputs: Option<Box<Inputs>>,
}

#[derive(Debug)]
struct Pending {
    bytes: Bytes,
    purpose: Purpose,
    rpc_method: Option<Box<str>>,
    /// Times it was already re-sent after an authorization.
    auth_tries: u32,
}

/// A message refused for authorization, waiting for it.
#[derive(Debug)]
struct Held {
    message: Pending,
    /// The exchange that was refused.
    stream: StreamId,
}

/// A DPoP-bound access token and what its proofs need.
struct DpopToken {
    token: Box<str>,
    /// `DPoP <token>`.
    header: HeaderValue,
    signer: Box<dyn crate::dpop::DpopSigner>,
    /// `htu`: the endpoint without query.
    url: Box<str>,
    /// The MCP server's latest `DPoP-Nonce`.
    nonce: Option<Box<str>>,
}

/// The client side of one MCP connection over Streamable HTTP. See the module docs.
pub struct ClientSession {
    limits: Limits,
    auto_reinit: bool,
    max_resume_failures: u32,
    answered_stream_grace: Duration,
    request_timeout: Option<Duration>,
    close_timeout: Duration,
    static_headers: HeaderMap,
    header_fn: Option<HeaderFn>,
    bearer: Option<TokenProvider>,
    token: Option<HeaderValue>,
    /// A DPoP-bound token ([`set_dpop_token`](ClientSession::set_dpop_token)): every request
    /// carries it with the `DPoP` scheme and a fresh proof.
    dpop: Option<DpopToken>,
    phase: Phase,
    session: Option<Box<str>>,
    version: Option<ProtocolVersion>,
    epoch: u64,
    saved_init: Option<Bytes>,
    /// When the answer to `notifications/initialized` stops being waited for.
    ack_deadline: Option<Instant>,
    reinit_streak: u32,
    /// A session had been established and is gone without a replacement (see the
    /// lifecycle's `RequestWithoutSession`).
    session_lost: bool,
    reinit_seq: u64,
    requests: Requests,
    /// Boxed: a map's node stays allocated when it empties, and 11 inline `PostStream`s
    /// would keep ≈ 2.9 KB per idle session.
    posts: BTreeMap<StreamId, Box<PostStream>>,
    pending: VecDeque<Pending>,
    listen: Listen,
    backoff: Backoff,
    next_stream: u64,
    out: VecDeque<Output>,
    // ---- the modern era (2026-07-28) and era detection
    era_mode: EraMode,
    /// What is known of the endpoint's era (from the app, then learned); changes go out as
    /// `ClientEvent::KnownEraChanged`.
    known_era: Option<KnownEra>,
    identity: ClientIdentity,
    max_input_rounds: u32,
    subscription: Option<serde_json::Value>,
    /// The app's `initialize`, held while the probe runs.
    app_init: Option<RequestId>,
    /// The `server/discover` probe in flight.
    probe: Option<RequestId>,
    /// Modern versions already probed.
    probe_tried: Vec<ProtocolVersion>,
    /// The probe failed and the app's `initialize` went out: a 400/404/405 to it means
    /// HTTP+SSE.
    fell_back: bool,
    /// The last `server/discover` result.
    discovered: Option<Box<serde_json::value::RawValue>>,
    /// Input request id (as given to the app) → (the request it belongs to, its key).
    input_ids: BTreeMap<RequestId, (RequestId, String)>,
    /// Wire id of an MRTR retry → the app's id.
    aliases: BTreeMap<RequestId, RequestId>,
    /// The JSON-RPC id of the open `subscriptions/listen`.
    listen_rpc: Option<RequestId>,
    /// Counter for the session's own ids.
    own_seq: u64,
    // S-NEW-8.
    /// The `x-mcp-header` declarations of the tools seen in `tools/list`.
    tool_headers: BTreeMap<String, Vec<crate::mirror::ParamHeader>>,
    max_known_tools: usize,
    max_input_requests: usize,
    // ---- authorization (with_authorization_hold)
    auth_retries: Option<u32>,
    /// How a POST refused with 429 is sent again.
    rate_limit_retry: config::RateLimitRetry,
    /// Messages waiting for an authorization, in the order they were refused.
    held: Vec<Held>,
    /// The listening stream stopped for authorization and reopens after it.
    listen_held: bool,
}

impl std::fmt::Debug for ClientSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSession")
            .field("phase", &self.phase)
            .field("session", &self.session)
            .field("version", &self.version)
            .field("requests", &self.requests.len())
            .field("posts", &self.posts.len())
            .field("pending", &self.pending.len())
            .field("listen", &self.listen)
            .finish_non_exhaustive()
    }
}

impl ClientSession {
    /// A new session. With [`ClientConfig::with_session`] or [`ClientConfig::with_version`]
    /// it is ready at once (and opens the listening stream if asked); otherwise the app sends
    /// `initialize` first. A `with_session` id that is not visible ASCII is ignored.
    pub fn new(config: ClientConfig, now: Instant) -> Self {
        let ClientConfig {
            start,
            headers,
            header_fn,
            bearer,
            listen,
            auto_reinitialize,
            backoff,
            listen_budget,
            max_resume_failures,
            answered_stream_grace,
            limits,
            request_timeout,
            close_timeout,
            seed,
            era,
            known_era,
            identity,
            max_input_rounds,
            subscription,
            max_known_tools,
            max_input_requests,
            auth_retries,
            rate_limit_retry,
        } = config;
        let (phase, session, version) = match start {
            Start::Fresh => (Phase::Uninitialized, None, None),
            Start::Session { id, version } => {
                let id = wire::valid_session_id(id.as_bytes(), usize::MAX).then_some(id);
                (Phase::Ready, id, Some(version))
            }
            Start::Version(v) => (Phase::Ready, None, Some(v)),
        };
        let mut s = ClientSession {
            limits,
            auto_reinit: auto_reinitialize,
            max_resume_failures,
            answered_stream_grace,
            request_timeout,
            close_timeout,
            static_headers: headers,
            header_fn,
            bearer,
            token: None,
            dpop: None,
            phase,
            session,
            version,
            epoch: 1,
            saved_init: None,
            ack_deadline: None,
            reinit_streak: 0,
            session_lost: false,
            reinit_seq: 0,
            requests: Requests::default(),
            posts: BTreeMap::new(),
            pending: VecDeque::new(),
            listen: Listen::new(listen, FailureWindow::new(listen_budget)),
            backoff: Backoff::new(backoff, seed),
            next_stream: 0,
            out: VecDeque::new(),
            era_mode: era,
            known_era,
            identity,
            max_input_rounds,
            subscription,
            app_init: None,
            probe: None,
            probe_tried: Vec::new(),
            fell_back: false,
            discovered: None,
            input_ids: BTreeMap::new(),
            aliases: BTreeMap::new(),
            listen_rpc: None,
            own_seq: 0,
            tool_headers: BTreeMap::new(),
            max_known_tools,
            max_input_requests,
            auth_retries,
            rate_limit_retry,
            held: Vec::new(),
            listen_held: false,
        };
        s.maybe_start_listen(now);
        s
    }

    // ------------------------------------------------------------------ getters

    /// The current session id, if the server issued one and it has not expired.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The negotiated (or configured) protocol version.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.version
    }

    /// The era in use: `None` until it is known (before `initialize` is answered, or while the
    /// `server/discover` probe runs).
    pub fn era(&self) -> Option<crate::version::Era> {
        match self.phase {
            Phase::Probing => None,
            _ => self.version.map(ProtocolVersion::era),
        }
    }

    /// The raw result of the last `server/discover` (modern era), if one was received.
    pub fn discovery(&self) -> Option<&serde_json::value::RawValue> {
        self.discovered.as_deref()
    }

    /// Whether messages go out at once (initialized and acknowledged).
    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// Frees the buffers of the tables and queues that are empty (a map keeps its node, a
    /// queue its buffer, after its last entry leaves): an idle session then holds none. Cheap
    /// when there is nothing to free; a driver calls it before it waits. Between calls the
    /// next request allocates them again (a few small allocations per idle → busy turn).
    pub fn shrink_idle(&mut self) {
        self.requests.shrink_if_empty();
        if self.posts.is_empty() {
            self.posts = BTreeMap::new();
        }
        if self.out.is_empty() && self.out.capacity() > 0 {
            self.out = VecDeque::new();
        }
        if self.pending.is_empty() && self.pending.capacity() > 0 {
            self.pending = VecDeque::new();
        }
    }

    /// Whether `close` has completed (`Closed` was emitted).
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// Whether messages are held waiting for an authorization
    /// ([`ClientConfig::with_authorization_hold`]).
    pub fn is_awaiting_authorization(&self) -> bool {
        !self.held.is_empty() || self.listen_held
    }

    /// Requests in flight (sent, queued, or waiting for a retry), the session's own included.
    pub fn in_flight(&self) -> usize {
        self.requests.len()
    }

    fn closing(&self) -> bool {
        matches!(self.phase, Phase::Closing { .. } | Phase::Closed)
    }

    fn legacy(&self) -> bool {
        self.version.is_none_or(|v| v.has_sessions())
    }

    // ------------------------------------------------------------------ commands

    /// Sends one serialized JSON-RPC message: a request, a notification, or the response to a
    /// server request. Requests get exactly one [`Output::Outcome`]. The bytes go on the wire
    /// as given.
    pub fn send(&mut self, now: Instant, message: Bytes) -> Result<SendReceipt, ApiMisuse> {
        if self.closing() {
            return Err(ApiMisuse::Closed);
        }
        let outgoing = wire::classify(&message)?;
        self.send_classified(now, outgoing, message)
    }

    /// Sends one JSON-RPC message that is already parsed (or built): the same checks and the
    /// same outputs as [`send`](Self::send) of [`message.to_bytes()`](Message::to_bytes),
    /// without parsing those bytes again. A hand-built message whose `params` is not an object,
    /// or a success response without an id, is refused as [`ApiMisuse::NotJsonRpc`], as its
    /// bytes would be.
    pub fn send_message(
        &mut self,
        now: Instant,
        message: Message,
    ) -> Result<SendReceipt, ApiMisuse> {
        if self.closing() {
            return Err(ApiMisuse::Closed);
        }
        wire::check_outgoing(&message)?;
        let bytes = message.to_bytes();
        self.send_classified(now, Outgoing::from(message), bytes)
    }

    fn send_classified(
        &mut self,
        now: Instant,
        outgoing: Outgoing,
        message: Bytes,
    ) -> Result<SendReceipt, ApiMisuse> {
        match outgoing {
            Outgoing::Response(r) => {
                if let Some(v) = self.version.filter(|v| !v.has_sessions()) {
                    // MRTR: an answer to one of the input requests the session handed out
                    // is collected for the retry, never POSTed (S-NEW-5).
                    if r.id
                        .as_ref()
                        .is_some_and(|i| self.input_ids.contains_key(i))
                    {
                        self.input_answer(now, r);
                        return Ok(SendReceipt::Absorbed);
                    }
                    return Err(ApiMisuse::ResponseNotAllowed { version: v });
                }
                self.dispatch(message, Purpose::Response, None)
            }
            Outgoing::Notification { method } => {
                if &*method == INITIALIZED {
                    return Ok(SendReceipt::Absorbed);
                }
                self.dispatch(message, Purpose::Notification(method.clone()), Some(method))
            }
            Outgoing::Request { id, method } => {
                if self.requests.contains_key(&id)
                    || self.aliases.contains_key(&id)
                    || self.input_ids.contains_key(&id)
                {
                    return Err(ApiMisuse::DuplicateRequestId { id });
                }
                let limit = self.limits.max_in_flight_requests;
                if self.requests.len() >= limit {
                    self.event(ClientEvent::LimitExceeded {
                        stream: None,
                        limit: Limit::InFlightRequests,
                    });
                    return Err(ApiMisuse::TooManyInFlight { limit });
                }
                let is_init = &*method == INITIALIZE;
                if is_init && self.phase != Phase::Uninitialized {
                    return Err(ApiMisuse::AlreadyInitialized);
                }
                if !is_init && self.phase != Phase::Ready {
                    self.check_queue()?;
                }
                self.requests.insert(
                    id.clone(),
                    Req {
                        method: method.clone(),
                        bytes: message.clone(),
                        state: ReqState::Queued,
                        retried: false,
                        deadline: self.request_timeout.map(|t| after(now, t)),
                        internal: false,
                        epoch: self.epoch,
                        rounds: 0,
                        wire: None,
                        inputs: None,
                    },
                );
                if is_init {
                    self.saved_init = Some(message.clone());
                    if let Some(identity) = per_request::identity_from_initialize(&message) {
                        self.identity = identity;
                    }
                    if let Some(version) = self.probe_version() {
                        // S-NEW-10: probe first; the initialize waits for the verdict.
                        self.app_init = Some(id);
                        self.step(now, PhaseEvent::ProbeStarted);
                        self.send_probe(now, version);
                        return Ok(SendReceipt::Queued);
                    }
                    self.step(now, PhaseEvent::InitializeSent);
                    let s = self.post_message(message, Purpose::Request(id), Some(method));
                    return Ok(SendReceipt::Posted(s));
                }
                let receipt = self.dispatch(message, Purpose::Request(id.clone()), Some(method))?;
                if self.phase == Phase::Uninitialized && self.session_lost {
                    self.step(now, PhaseEvent::RequestWithoutSession(id));
                }
                Ok(receipt)
            }
        }
    }

    // S-POST-17, S-CANCEL-1, S-CANCEL-2.
    /// Cancels a request in flight: its outcome is [`RequestResult::Cancelled`], its stream is
    /// aborted, and (if the server saw it, in an era with sessions) `notifications/cancelled`
    /// is POSTed. `initialize` cannot be cancelled.
    pub fn cancel(
        &mut self,
        _now: Instant,
        id: &RequestId,
        reason: Option<&str>,
    ) -> Result<(), ApiMisuse> {
        if self.closing() {
            return Err(ApiMisuse::Closed);
        }
        let Some(req) = self.requests.get(id).filter(|r| !r.internal) else {
            return Err(ApiMisuse::UnknownRequest { id: id.clone() });
        };
        if &*req.method == INITIALIZE {
            return Err(ApiMisuse::CannotCancelInitialize);
        }
        self.abandon(id, RequestResult::Cancelled, reason);
        Ok(())
    }

    // S-GET-1.
    /// Opens (or keeps) the GET listening stream once the session is ready. After
    /// `ListenGaveUp` this starts again with a fresh failure budget; after `ListenUnsupported`
    /// it only repeats that event.
    pub fn listen(&mut self, now: Instant) -> Result<(), ApiMisuse> {
        if self.closing() {
            return Err(ApiMisuse::Closed);
        }
        self.listen.wanted = true;
        if self.listen.is_stopped() {
            self.run_listen(now, ListenInput::Restart);
        }
        if self.listen.is_unsupported() {
            self.event(ClientEvent::ListenUnsupported);
        }
        self.maybe_start_listen(now);
        Ok(())
    }

    // S-GET-9.
    /// Closes the listening stream.
    pub fn stop_listening(&mut self, now: Instant) -> Result<(), ApiMisuse> {
        if self.closing() {
            return Err(ApiMisuse::Closed);
        }
        self.run_listen(now, ListenInput::Stop);
        Ok(())
    }

    /// Sets (or clears) a DPoP-bound access token (RFC 9449 §7.1): every request then carries
    /// `Authorization: DPoP <token>` and a `DPoP` proof made by `signer` for its method and
    /// `url` (the endpoint, without query), with the token's hash and the server's latest
    /// nonce. Replaces a bearer token.
    pub fn set_dpop_token(
        &mut self,
        token: Option<(&str, Box<dyn crate::dpop::DpopSigner>, &str)>,
    ) -> Result<(), ApiMisuse> {
        let nonce = self.dpop.as_mut().and_then(|d| d.nonce.take());
        self.dpop = match token {
            None => None,
            Some((token, signer, url)) => {
                let header = HeaderValue::try_from(format!("DPoP {token}"))
                    .map_err(|_| ApiMisuse::InvalidToken)?;
                self.token = None;
                Some(DpopToken {
                    token: token.into(),
                    header,
                    signer,
                    url: crate::dpop::htu(url).into(),
                    nonce,
                })
            }
        };
        Ok(())
    }

    /// The MCP server's DPoP nonce (RFC 9449 §9) for the next proofs; `false` when it is
    /// the one already in use (asked again for the same nonce: do not send again).
    pub fn set_dpop_nonce(&mut self, nonce: &str) -> bool {
        match self.dpop.as_mut() {
            Some(d) if d.nonce.as_deref() != Some(nonce) => {
                d.nonce = Some(nonce.into());
                true
            }
            _ => false,
        }
    }

    // S-AUTH-2.
    /// Sets (or clears) the bearer token sent on every request. A token provider in
    /// the configuration, when it returns a token, takes precedence.
    pub fn set_bearer_token(&mut self, token: Option<&str>) -> Result<(), ApiMisuse> {
        self.token = match token {
            None => None,
            Some(t) => Some(
                HeaderValue::try_from(format!("Bearer {t}"))
                    .map_err(|_| ApiMisuse::InvalidToken)?,
            ),
        };
        Ok(())
    }

    // S-SESS-8, S-SESS-9.
    /// Closes the session: every request in flight fails with [`ClientError::Closed`], every
    /// exchange is aborted, a DELETE with the session id is sent if there is a session (as
    /// mcp-go's client does; 405 tolerated), and [`ClientEvent::Closed`]
    /// follows its answer (or the close timeout). No intent but that DELETE follows `close`.
    /// Calling it again is a no-op.
    pub fn close(&mut self, now: Instant) {
        if self.closing() {
            return;
        }
        let ids: Vec<RequestId> = self.requests.keys().cloned().collect();
        for id in ids {
            self.end_request(&id, RequestResult::Failed(ClientError::Closed), true);
        }
        self.pending.clear();
        self.held.clear();
        self.listen_held = false;
        for (stream, p) in std::mem::take(&mut self.posts) {
            if p.is_live() {
                self.out.push_back(Output::Abort(stream));
            }
        }
        self.run_listen(now, ListenInput::Stop);
        if self.session.is_some() && self.legacy() {
            let stream = self.alloc();
            let (headers, _) =
                self.build_headers(HttpRequestKind::Delete, &Method::DELETE, None, true, None);
            self.out.push_back(Output::Http(HttpRequest {
                stream,
                kind: HttpRequestKind::Delete,
                method: Method::DELETE,
                headers,
                body: Bytes::new(),
            }));
            let deadline = after(now, self.close_timeout);
            self.step(
                now,
                PhaseEvent::CloseRequested {
                    delete: Some((stream, deadline)),
                },
            );
        } else {
            self.step(now, PhaseEvent::CloseRequested { delete: None });
        }
    }

    // ------------------------------------------------------------------ inputs

    /// Feeds what the adapter observed on an exchange.
    pub fn handle_input(&mut self, now: Instant, input: Input<'_>) {
        let (stream, post_input) = match input {
            Input::ResponseHead {
                stream,
                status,
                headers,
            } => (stream, PostInput::Head { status, headers }),
            Input::Body { stream, chunk } => (stream, PostInput::Chunk(chunk)),
            Input::End { stream } => (stream, PostInput::End),
            Input::Failed { stream, kind } => (stream, PostInput::Failed(kind)),
        };
        if let Phase::Closing { stream: d, .. } = self.phase {
            if d == stream {
                match post_input {
                    PostInput::Head { status, .. } => self.step(
                        now,
                        PhaseEvent::DeleteDone(CloseOutcome::Deleted { status }),
                    ),
                    _ => self.step(now, PhaseEvent::DeleteDone(CloseOutcome::DeleteFailed)),
                }
            }
            return;
        }
        if self.phase == Phase::Closed {
            return;
        }
        if self.listen.stream() == Some(stream) {
            let li = match post_input {
                PostInput::Head { status, headers } => ListenInput::Head { status, headers },
                PostInput::Chunk(c) => ListenInput::Chunk(c),
                PostInput::End => ListenInput::End,
                PostInput::Failed(_) => ListenInput::Failed,
                PostInput::Timer => ListenInput::Timer,
            };
            self.run_listen(now, li);
        } else if self.posts.contains_key(&stream) {
            self.run_post(now, stream, post_input);
        }
    }

    /// Fires the timers that are due at `now`. Calling it early does nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Phase::Closing { stream, deadline } = self.phase {
            if now >= deadline {
                self.out.push_back(Output::Abort(stream));
                self.step(now, PhaseEvent::DeleteDone(CloseOutcome::DeleteTimedOut));
            }
            return;
        }
        if self.phase == Phase::Closed {
            return;
        }
        self.handshake_timeouts(now);
        let due = self.requests.due(now, |r| !r.internal);
        for id in due {
            let is_init = self
                .requests
                .get(&id)
                .is_some_and(|r| &*r.method == INITIALIZE);
            if is_init {
                // S-CANCEL-2: never cancelled; it just stops being waited for.
                self.end_request(&id, RequestResult::Failed(ClientError::TimedOut), true);
                self.step(now, PhaseEvent::InitializeFailed);
            } else {
                self.abandon(
                    &id,
                    RequestResult::Failed(ClientError::TimedOut),
                    Some("timeout"),
                );
            }
        }
        if self.listen.deadline().is_some_and(|d| d <= now) {
            self.run_listen(now, ListenInput::Timer);
        }
        let due: Vec<StreamId> = self
            .posts
            .iter()
            .filter(|(_, p)| p.deadline().is_some_and(|d| d <= now))
            .map(|(s, _)| *s)
            .collect();
        for s in due {
            self.run_post(now, s, PostInput::Timer);
        }
    }

    // ------------------------------------------------------------------ outputs

    /// The next output, if any. See the drain rule in the module docs.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// The earliest instant at which [`handle_timeout`](Self::handle_timeout) has work: a
    /// reconnect, a request deadline, the close timeout. `None` when nothing is scheduled.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Closed => return None,
            Phase::Closing { deadline, .. } => return Some(deadline),
            _ => {}
        }
        let reqs = self.requests.next_deadline();
        let posts = self.posts.values().filter_map(|p| p.deadline());
        let ack = self
            .ack_deadline
            .filter(|_| self.phase == Phase::Acknowledging);
        reqs.into_iter()
            .chain(posts)
            .chain(self.listen.deadline())
            .chain(ack)
            .min()
    }
}

mod session;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_can_move_to_a_driver_task() {
        fn assert_send<T: Send + 'static>() {}
        assert_send::<ClientSession>();
        assert_send::<Output>();
    }
}
