//! Errors, sorted by blame: the peer's, an app command's, and ordinary endings.
//!
//! - [`ProtocolError`]: the peer's fault (a bad header, body, session id…). The router
//!   answers it itself with [`ProtocolError::status_hint`] and a JSON-RPC error body with a
//!   null id, and reports it as [`ServerEvent::Rejected`](super::ServerEvent); the app never
//!   sees it as an `Err`.
//! - [`SendError`]: why an app command (reply, notify, server→client request, close) could
//!   not be carried out. Most are ordinary races (the client cancelled, the session expired)
//!   and never poison the router; [`SendError::UnknownHandle`] is the only API misuse.
//! - [`ServerRequestError`]: how a server→client request ended without an answer, delivered
//!   as [`ServerOutput::ServerRequestFailed`](super::ServerOutput).
//! - [`CloseReason`] and [`CancelReason`]: ordinary endings, delivered as outputs.

use http::StatusCode;

/// A request the router refused because of what the peer sent (the peer's fault).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The path is neither the MCP endpoint nor a metadata document.
    #[error("no MCP endpoint at this path")]
    NotFound,
    // S-GET-3, S-SESS-9.
    /// The method is not one the endpoint serves (or GET/DELETE are disabled).
    #[error("method not allowed on the MCP endpoint")]
    MethodNotAllowed,
    // S-POST-3, S-GET-2, G-1.
    /// `Accept` allows no form the answer can take.
    #[error("the Accept header must allow {0}")]
    NotAcceptable(&'static str),
    // G-1.
    /// The POST body is not `application/json`.
    #[error("Content-Type must be application/json")]
    UnsupportedMediaType,
    /// The POST body exceeds the configured cap.
    #[error("request body exceeds {0} bytes")]
    PayloadTooLarge(usize),
    /// The body is not JSON (-32700).
    #[error("parse error: the body is not valid JSON")]
    Parse,
    /// The body is JSON but not JSON-RPC, or breaks a JSON-RPC rule (-32600).
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
    // S-POST-6.
    /// A batch in a revision without batches.
    #[error("JSON-RPC batches are only accepted in protocol version 2025-03-26")]
    BatchNotAllowed,
    // S-SESS-5.
    /// A stateful server got a non-initialize request without `Mcp-Session-Id`.
    #[error("missing Mcp-Session-Id header: initialize first")]
    MissingSessionId,
    // S-SESS-6.
    /// Unknown, expired, terminated, or another principal's session.
    #[error("session not found: it expired, was terminated, or never existed")]
    UnknownSession,
    // S-VER-4.
    /// `MCP-Protocol-Version` names a revision the server does not support.
    #[error("unsupported protocol version")]
    UnsupportedVersion,
    // S-SEC-5.
    /// `Host` failed validation.
    #[error("Host header not allowed")]
    HostNotAllowed,
    // S-SEC-2.
    /// `Origin` is present and not allowed.
    #[error("Origin not allowed")]
    OriginNotAllowed,
    // S-AUTH-4.
    /// The authentication hook refused the credentials.
    #[error("authentication required")]
    Unauthorized,
    // S-AUTH-13.
    /// The authentication hook found the scopes insufficient.
    #[error("insufficient scope")]
    InsufficientScope,
    /// The credentials could not be checked right now (an asynchronous validator failed or
    /// timed out): 503, retry later.
    #[error("authentication is unavailable; try again later{}", .0.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    AuthenticationUnavailable(Option<Box<str>>),
    /// The session cap is reached.
    #[error("too many sessions; try again later")]
    TooManySessions,
    /// A cluster member could not reach its session store in time (503, retry later).
    #[error("the session store is unavailable; try again later ({0})")]
    StoreUnavailable(Box<str>),
    /// `Last-Event-ID` names no stream of this session that can still be replayed.
    #[error("Last-Event-ID does not name a replayable stream of this session")]
    UnknownLastEventId,
    // S-SESS-3.
    /// The session id generator produced an id outside visible ASCII: a server
    /// misconfiguration, answered 500 rather than sent.
    #[error("internal error: invalid session id generated")]
    BadSessionIdGenerated,
    // S-NEW-7, S-NEW-8.
    /// 2026-07-28: the mirrored headers do not match the body, or a required one is missing or
    /// malformed (`HeaderMismatch`, -32020). The text says which.
    #[error("{0}")]
    HeaderMismatch(Box<str>),
    /// 2026-07-28: `MCP-Protocol-Version` names a revision this server does not speak
    /// (`UnsupportedProtocolVersionError`, -32022; the body's `data` lists the supported
    /// ones and echoes the requested one).
    #[error("Unsupported protocol version: {0}")]
    UnsupportedProtocolVersion(Box<str>),
    // S-NEW-4.
    /// 2026-07-28: the request's `_meta` lacks a required field (-32602).
    #[error("Invalid params: _meta must carry {0} (2026-07-28)")]
    MissingRequestMeta(&'static str),
    // S-NEW-9.
    /// 2026-07-28: a method this revision does not have (404, -32601).
    #[error("Method not found: {0}")]
    MethodNotFound(Box<str>),
    // S-NEW-5.
    /// 2026-07-28: a client POSTed a JSON-RPC response (-32600).
    #[error(
        "invalid request: 2026-07-28 clients must not POST JSON-RPC responses; answer input requests with inputResponses on a retry"
    )]
    ModernResponse,
    /// 2026-07-28: [`ServerConfig::limits.max_modern_in_flight`](super::ServerConfig) requests are
    /// already in flight (503).
    #[error("too many requests in flight; try again later")]
    TooManyRequests,
    /// A draining shutdown is under way ([`Router::begin_shutdown`](super::Router)): no new
    /// request is taken; retry later or elsewhere.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The router has no session id generator (a server bug: every adapter installs one;
    /// a router driven directly needs [`ServerConfig::with_session_ids`](super::ServerConfig::with_session_ids)).
    #[error("the server cannot create sessions: no session id generator is configured")]
    NoSessionIdGenerator,
    /// A GET for a session whose GET stream already has a live connection, after the
    /// session's takeover budget ([`ServerConfig::limits.listen_takeovers`](super::ServerConfig))
    /// was spent (409): keep using the open stream.
    #[error(
        "another GET stream is open for this session; keep using it (or close it before opening a new one)"
    )]
    ListenConflict,
    /// A rate limit ([`ServerLimits::rate`](super::ServerLimits)) refused the request before
    /// it was processed (429, with `Retry-After` in whole seconds and the same delay in the
    /// JSON-RPC error's `data.retryAfter`): send it again after that.
    #[error("rate limit exceeded ({scope}); retry after {} s", retry_after_secs(*.retry_after))]
    RateLimited {
        /// Which bucket was empty.
        scope: super::RateScope,
        /// How long until it holds a token again.
        retry_after: std::time::Duration,
    },
    /// This cluster instance already waits on as many store operations as
    /// [`ClusterConfig::max_store_backlog`](super::ClusterConfig) allows: a new request is
    /// refused before it is processed (503, with `Retry-After` in whole seconds and the same
    /// delay in the JSON-RPC error's `data.retryAfter`), rather than queued past the store's
    /// deadline and failed half-way: send it again after that.
    #[error("the session store is busy; retry after {} s", retry_after_secs(*.retry_after))]
    StoreBusy {
        /// [`ClusterConfig::backlog_retry_after`](super::ClusterConfig).
        retry_after: std::time::Duration,
    },
}

/// A delay in whole seconds, rounded up, at least 1 (`Retry-After` has no fractions).
fn retry_after_secs(d: std::time::Duration) -> u64 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    secs.max(1)
}

impl ProtocolError {
    /// The HTTP status the router answers with.
    pub fn status_hint(&self) -> StatusCode {
        use ProtocolError::*;
        match self {
            NotFound | UnknownSession => StatusCode::NOT_FOUND,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Parse
            | InvalidRequest(_)
            | BatchNotAllowed
            | MissingSessionId
            | UnsupportedVersion
            | UnknownLastEventId
            | HeaderMismatch(_)
            | UnsupportedProtocolVersion(_)
            | MissingRequestMeta(_)
            | ModernResponse => StatusCode::BAD_REQUEST,
            MethodNotFound(_) => StatusCode::NOT_FOUND,
            HostNotAllowed | OriginNotAllowed | InsufficientScope => StatusCode::FORBIDDEN,
            Unauthorized => StatusCode::UNAUTHORIZED,
            TooManySessions
            | TooManyRequests
            | ShuttingDown
            | AuthenticationUnavailable(_)
            | StoreUnavailable(_)
            | StoreBusy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            BadSessionIdGenerated | NoSessionIdGenerator => StatusCode::INTERNAL_SERVER_ERROR,
            ListenConflict => StatusCode::CONFLICT,
            RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// For a refusal the client should retry later: the `Retry-After` delay in whole seconds
    /// (rounded up, at least 1).
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ProtocolError::RateLimited { retry_after, .. }
            | ProtocolError::StoreBusy { retry_after } => Some(retry_after_secs(*retry_after)),
            _ => None,
        }
    }

    // G-11, S-NEW-11.
    /// The JSON-RPC error code of the body: -32700 and -32600 where JSON-RPC defines them,
    /// -32603 for our own fault, and -32000 (implementation-defined, what legacy servers
    /// send) for transport-level refusals; the 2026-07-28 refusals use the codes that
    /// revision assigns (-32020, -32022, -32602, -32601).
    pub fn code(&self) -> i64 {
        use crate::jsonrpc::error_codes as c;
        match self {
            ProtocolError::Parse => -32700,
            ProtocolError::InvalidRequest(_)
            | ProtocolError::BatchNotAllowed
            | ProtocolError::ModernResponse => -32600,
            ProtocolError::HeaderMismatch(_) => c::HEADER_MISMATCH,
            ProtocolError::UnsupportedProtocolVersion(_) => c::UNSUPPORTED_PROTOCOL_VERSION,
            ProtocolError::MissingRequestMeta(_) => c::INVALID_PARAMS,
            ProtocolError::MethodNotFound(_) => c::METHOD_NOT_FOUND,
            ProtocolError::BadSessionIdGenerated | ProtocolError::NoSessionIdGenerator => -32603,
            _ => -32000,
        }
    }
}

/// Why an app command could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// API misuse: the handle never existed or its request was already answered.
    #[error("unknown or already answered request handle")]
    UnknownHandle,
    /// The client cancelled the request (or disconnected): send nothing more for it.
    #[error("the request was cancelled")]
    Cancelled,
    /// The session is gone (terminated, expired, evicted) or never existed.
    #[error("no such session")]
    UnknownSession,
    /// Stateless mode has no channel back to the client outside a request's own stream:
    /// server→client requests and unrelated notifications fail at once (on peer SDKs' stateless
    /// servers, sampling and elicitation requests once vanished and the caller timed out).
    #[error("stateless mode: no back channel to the client")]
    Stateless,
    /// The message could not be sent in JSON response mode and there is no GET stream or
    /// queue to reroute it to (reported, never dropped silently).
    #[error("JSON response mode: the message cannot precede the response")]
    JsonModeUndeliverable,
    /// The GET-stream queue is full and the overflow policy refused the message.
    #[error("the session's message queue is full")]
    QueueFull,
    /// Closing a connection for polling needs resumability and a 2025-11-25+ client.
    #[error("the stream is not resumable, so its connection cannot be closed for polling")]
    NotResumable,
    /// The message could not be serialized.
    #[error("the message is not valid JSON")]
    InvalidMessage,
    // S-NEW-5.
    /// 2026-07-28: the server never sends JSON-RPC requests to a modern client;
    /// sampling, elicitation and roots travel as input requests of an `InputRequiredResult`
    /// (MRTR) instead.
    #[error("2026-07-28: no server-to-client requests; use an InputRequiredResult (MRTR)")]
    ModernNoRequests,
}

/// How a server→client request ended without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerRequestError {
    // S-LIFE-12.
    /// No answer before the deadline; `notifications/cancelled` was sent.
    #[error("the client did not answer in time")]
    Timeout,
    /// The session ended first.
    #[error("the session closed")]
    SessionClosed,
    /// It was dropped from a full queue before it could be sent.
    #[error("dropped from a full queue")]
    QueueOverflow,
    /// The app cancelled it.
    #[error("cancelled")]
    Cancelled,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    // S-SESS-8.
    /// The client sent DELETE.
    Deleted,
    /// No activity for the idle TTL.
    IdleExpired,
    /// The app closed it.
    ClosedByApp,
    /// The app answered `initialize` with an error.
    InitializeFailed,
    /// [`Router::shutdown`](super::Router::shutdown).
    Shutdown,
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CloseReason::Deleted => "deleted by the client",
            CloseReason::IdleExpired => "idle",
            CloseReason::ClosedByApp => "closed by the app",
            CloseReason::InitializeFailed => "initialize failed",
            CloseReason::Shutdown => "shutdown",
        })
    }
}

/// Why the app must stop handling a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    // S-CANCEL-1.
    /// `notifications/cancelled` from the client.
    ClientCancelled,
    /// The client disconnected from a stream that cannot be resumed, or did not resume
    /// within the grace window.
    Disconnected,
    /// The session ended.
    SessionClosed,
    /// [`Router::shutdown`](super::Router::shutdown).
    Shutdown,
}
