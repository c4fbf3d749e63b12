//! Errors, sorted by blame: the server's, the caller's, and one request's failure.
//!
//! - [`ServerFault`]: the server broke the protocol (a status or content type it must not
//!   send, a body that is not JSON-RPC, a stream over a limit, a missing response).
//! - [`ApiMisuse`]: the caller broke the API contract (a second in-flight request with the same
//!   id, cancelling `initialize`, a command after `close`); returned by the command, nothing
//!   else changes.
//! - [`ClientError`]: why one request failed, delivered in its outcome. Ordinary endings
//!   (session expiry, listening unsupported, closed) are also [`super::ClientEvent`]s.

use bytes::Bytes;
use http::StatusCode;

use super::io::TransportFailure;
use super::wire::RequestId;
use crate::http::BearerChallenge;
use crate::version::ProtocolVersion;

/// Which limit of [`super::Limits`] (or of the session) was hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// `max_sse_event_bytes`.
    SseEvent,
    /// `max_json_body_bytes`.
    JsonBody,
    /// `max_in_flight_requests`.
    InFlightRequests,
    /// `max_queued_messages`.
    QueuedMessages,
    /// `max_error_body_bytes` (the body is truncated and the exchange dropped).
    ErrorBody,
    /// The listening stream's failure budget.
    ListenFailures,
    /// `max_resume_failures` of a POST stream.
    ResumeFailures,
    // S-NEW-5.
    /// `max_input_rounds` of one request (MRTR).
    InputRounds,
    /// `max_input_requests` in one `InputRequiredResult` (MRTR).
    InputRequests,
}

/// The server broke the protocol. Carries the HTTP status that led to it, when there was one
/// ([`ServerFault::status_hint`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerFault {
    /// A success status this exchange cannot have (202 to a request, 200 to a resume that is
    /// not an SSE stream …).
    #[error("unexpected HTTP status {status}")]
    UnexpectedStatus {
        /// The status.
        status: StatusCode,
    },
    // S-POST-9, S-GET-3.
    /// A 200 whose `Content-Type` is neither `application/json` nor `text/event-stream`,
    /// or not `text/event-stream` on a GET.
    #[error("unexpected content type {content_type:?}")]
    UnexpectedContentType {
        /// The media type, if there was a readable one.
        content_type: Option<String>,
    },
    /// A body or SSE event that is not JSON-RPC.
    #[error("invalid JSON-RPC: {detail}")]
    InvalidJsonRpc {
        /// What was wrong.
        detail: String,
    },
    // S-POST-6.
    /// A batch array when the negotiated version has no batches.
    #[error("JSON-RPC batch not allowed in {version}")]
    BatchNotAllowed {
        /// The negotiated version.
        version: ProtocolVersion,
    },
    /// A JSON body that ended without the response to the request.
    #[error("the response body did not contain the response")]
    MissingResponse,
    /// An SSE stream that ended before the response and could not be resumed (a typed error
    /// rather than a hang: the Python SDK client once left such a call pending forever).
    #[error("the stream ended before the response and cannot be resumed")]
    StreamEndedWithoutResponse,
    /// A stream went over a limit.
    #[error("limit exceeded: {limit:?}")]
    LimitExceeded {
        /// Which one.
        limit: Limit,
    },
    // S-SESS-3.
    /// An `Mcp-Session-Id` that is not visible ASCII or too long.
    #[error("invalid Mcp-Session-Id")]
    InvalidSessionId,
    // S-LIFE-9.
    /// An `initialize` result whose `protocolVersion` we do not speak.
    #[error("unsupported protocol version {offered:?}")]
    UnsupportedVersion {
        /// What the server offered, if it said anything.
        offered: Option<String>,
    },
}

impl ServerFault {
    /// The HTTP status the server answered that caused this error, if one did.
    pub fn status_hint(&self) -> Option<StatusCode> {
        match self {
            ServerFault::UnexpectedStatus { status } => Some(*status),
            _ => None,
        }
    }
}

/// The caller broke the API contract; the command did nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiMisuse {
    /// `send` got bytes that are not one JSON-RPC message.
    #[error("not a JSON-RPC message: {detail}")]
    NotJsonRpc {
        /// What was wrong.
        detail: String,
    },
    /// A request with this id is already in flight: refused, since two answers with one id
    /// cannot be told apart (peer SDKs have handed one caller another's response).
    #[error("a request with id {id} is already in flight")]
    DuplicateRequestId {
        /// The id.
        id: RequestId,
    },
    /// `cancel` of an id that is not in flight.
    #[error("no request with id {id} is in flight")]
    UnknownRequest {
        /// The id.
        id: RequestId,
    },
    // S-CANCEL-2.
    /// `initialize` must not be cancelled.
    #[error("initialize cannot be cancelled")]
    CannotCancelInitialize,
    /// `initialize` while a session is established or being established.
    #[error("the session is already initialized or initializing")]
    AlreadyInitialized,
    // S-NEW-5.
    /// The app sent a JSON-RPC response in an era where clients send none.
    #[error("responses are not sent in {version}")]
    ResponseNotAllowed {
        /// The version.
        version: ProtocolVersion,
    },
    /// Too many requests in flight.
    #[error("too many requests in flight (limit {limit})")]
    TooManyInFlight {
        /// The limit.
        limit: usize,
    },
    /// Too many messages queued before the session is ready.
    #[error("too many queued messages (limit {limit})")]
    QueueFull {
        /// The limit.
        limit: usize,
    },
    /// A token that cannot be a header value.
    #[error("invalid bearer token")]
    InvalidToken,
    /// The session is closed (or closing).
    #[error("the session is closed")]
    Closed,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server broke the protocol.
    #[error(transparent)]
    Protocol(#[from] ServerFault),
    /// The exchange failed below HTTP and could not be resumed.
    #[error("transport: {0}")]
    Transport(TransportFailure),
    /// An error status, with the start of its body (up to `max_error_body_bytes`).
    #[error("HTTP status {status}")]
    HttpStatus {
        /// The status.
        status: StatusCode,
        /// The start of the body.
        body: Bytes,
    },
    // S-AUTH-10..12.
    /// 401, or 403 with a Bearer challenge: run the OAuth flow with these parameters,
    /// set a token, and send again.
    #[error("authorization required ({status})")]
    AuthorizationRequired {
        /// 401 or 403.
        status: StatusCode,
        /// The `WWW-Authenticate` parameters (empty if there were none); boxed, to keep
        /// every `Result` of the client small.
        challenge: Box<BearerChallenge>,
    },
    /// Authorization was attempted for this message and failed, or was retried as often as
    /// allowed ([`super::ClientConfig::with_authorization_hold`]).
    #[error("authorization failed: {0}")]
    Authorization(crate::auth::AuthError),
    /// The session expired (404 to a request that carried its id) and was not (or could not
    /// be) repaired for this request.
    #[error("session expired")]
    SessionExpired,
    // S-BC-3.
    /// 404 to `initialize`: a wrong endpoint, or an old HTTP+SSE server.
    #[error("no MCP endpoint here (404 to initialize)")]
    EndpointNotFound,
    /// The request deadline passed.
    #[error("request timed out")]
    TimedOut,
    /// The session was closed before the response.
    #[error("session closed")]
    Closed,
    // S-NEW-5.
    /// The server asked for input (`InputRequiredResult`) more than
    /// `max_input_rounds` times for one request.
    #[error("more than {limit} input rounds")]
    TooManyInputRounds {
        /// The limit.
        limit: u32,
    },
    // S-NEW-5.
    /// The app answered one of the server's input requests with an error, so the request
    /// cannot be retried with a complete `inputResponses`.
    #[error("input request {key:?} failed: {code} {message}")]
    InputRequestFailed {
        /// The key of the input request.
        key: String,
        /// The error code the app answered.
        code: i64,
        /// Its message.
        message: String,
    },
    /// An `InputRequiredResult` that cannot be acted on (an input request without a method,
    /// a `requestState` that is not a string …).
    #[error("malformed InputRequiredResult: {detail}")]
    MalformedInputRequest {
        /// What was wrong.
        detail: String,
    },
    /// [`super::EraMode::Modern`] was forced and the server does not speak the modern era
    /// (its answer to `server/discover` was not a result nor a recognised modern error).
    #[error("the server does not speak the modern era")]
    ModernUnsupported,
    // S-NEW-10, S-BC-3.
    /// The server answered `initialize` (after a failed modern probe) with 400, 404 or 405:
    /// it may speak only the deprecated HTTP+SSE transport of 2024-11-05, which this crate
    /// does not implement.
    #[error(
        "no Streamable HTTP endpoint (initialize answered {status}); HTTP+SSE (2024-11-05) is not supported"
    )]
    LegacySseTransport {
        /// The status of the `initialize` POST.
        status: StatusCode,
    },
    /// The server refused the POST with `429 Too Many Requests` (or `503` with
    /// `Retry-After`: it did not process it), and the client sent it again as often as
    /// [`super::RateLimitRetry`] allows, or the server asked for a longer wait than it allows.
    #[error("refused by the server (429, or 503 with Retry-After){}", .retry_after.map(|d| format!("; retry after {} s", d.as_secs())).unwrap_or_default())]
    RateLimited {
        /// The server's last `Retry-After`, if it sent one.
        retry_after: Option<std::time::Duration>,
        /// How often the message was sent again before this.
        retries: u32,
    },
}
