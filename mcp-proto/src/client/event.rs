//! [`ClientEvent`]: every decision the session takes, as data. The log lines of mcp-go's client
//! become these; adapters map them to `tracing` (peer SDKs offer logs or a bare error callback,
//! nothing an app can act on).

use std::time::{Duration, Instant};

use http::StatusCode;

use super::error::{ClientError, Limit};
use super::io::StreamId;
use super::wire::RequestId;
use crate::http::BearerChallenge;
use crate::version::{Era, ProtocolVersion};

/// Which logical stream a reconnect concerns.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamRole {
    /// The GET listening stream.
    Listen,
    /// The POST stream of this request, resumed with GET + `Last-Event-ID`.
    Request(RequestId),
}

/// Why the listening stream stopped for good (until the next `listen`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListenStop {
    /// The failure budget was exhausted.
    TooManyFailures {
        /// Failures inside the window.
        failures: u32,
    },
    /// 401/403: the app must authorize, then call `listen` again.
    AuthorizationRequired,
}

/// How the DELETE of `close` went.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseOutcome {
    /// `close` with no session to delete (none issued, or the modern era).
    NoSession,
    // S-SESS-9.
    /// The server answered the DELETE (2xx; 405 means it does not let clients end sessions;
    /// 404 means it was already gone).
    Deleted {
        /// The status.
        status: StatusCode,
    },
    /// The DELETE failed below HTTP.
    DeleteFailed,
    /// The DELETE got no answer within the close timeout.
    DeleteTimedOut,
}

/// A decision of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientEvent {
    // S-SESS-1.
    /// The `initialize` response arrived: the session id (if the server issued one)
    /// and the negotiated version. `notifications/initialized` is POSTed next.
    Initialized {
        /// The session id.
        session_id: Option<Box<str>>,
        /// The negotiated version.
        version: ProtocolVersion,
    },
    // G-9.
    /// `notifications/initialized` was answered: queued messages go out, listening
    /// starts. `acknowledged` is `Err` when the server refused it; the session proceeds anyway.
    Ready {
        /// The answer to `notifications/initialized`.
        acknowledged: Result<(), ClientError>,
    },
    // S-SESS-6, S-SESS-7.
    /// A 404 answered a request that carried this session id. The id is
    /// cleared. Exactly one per expired id.
    SessionExpired {
        /// The expired id.
        session_id: Box<str>,
    },
    /// The saved `initialize` was replayed and answered; requests that failed with the 404 are
    /// retried once.
    Reinitialized {
        /// The new session id.
        session_id: Option<Box<str>>,
        /// The negotiated version.
        version: ProtocolVersion,
        /// How many requests are retried.
        retried: usize,
    },
    /// Re-initialization failed; the requests waiting for it failed with `SessionExpired`.
    ReinitializeFailed {
        /// Why.
        error: ClientError,
    },
    // S-GET-3, S-NEW-1.
    /// 405 to the listening GET, or an era without one: never retried.
    ListenUnsupported,
    /// The listening stream is open (200 `text/event-stream`).
    ListenOpened {
        /// Its exchange.
        stream: StreamId,
        /// The `Last-Event-ID` it resumed from, if any.
        resumed_from: Option<Box<str>>,
    },
    /// A reconnect is scheduled.
    Reconnecting {
        /// Which logical stream.
        role: StreamRole,
        /// When the GET goes out.
        at: Instant,
        /// The delay chosen.
        delay: Duration,
        /// The reconnect number (0-based) of the current run of failures.
        attempt: u32,
        /// The server's `retry` (or `Retry-After`) that floored the delay, if any.
        server_retry: Option<Duration>,
    },
    /// A POST was refused with `429 Too Many Requests` (or `503` with `Retry-After`): the
    /// same message (same JSON-RPC id)
    /// goes out again at `at` (see [`super::RateLimitRetry`]).
    RateLimited {
        /// The refused exchange.
        stream: StreamId,
        /// The request, when the message is one.
        request: Option<RequestId>,
        /// When it is sent again.
        at: Instant,
        /// The delay chosen: the server's `Retry-After`, or the backoff without one.
        delay: Duration,
        /// The re-send number (1 for the first).
        attempt: u32,
        /// The server's `Retry-After`, if it sent one.
        retry_after: Option<Duration>,
    },
    // S-RES-5.
    /// A resuming GET was answered with a stream.
    Resumed {
        /// Which logical stream.
        role: StreamRole,
        /// The new exchange.
        stream: StreamId,
        /// The `Last-Event-ID` sent.
        last_event_id: Box<str>,
    },
    /// A resumed stream told us that some of its events after the `Last-Event-ID` we sent
    /// were evicted before we came back (the server's retention is over): messages are
    /// missing, and the application may want to re-read state (list tools, resources…).
    EventsLost {
        /// Which logical stream.
        role: StreamRole,
        /// The exchange that said so.
        stream: StreamId,
    },
    /// The listening stream stopped.
    ListenGaveUp {
        /// Why.
        reason: ListenStop,
    },
    // S-AUTH-11.
    /// 401, or 403 with a Bearer challenge.
    AuthorizationRequired {
        /// The exchange that got it.
        stream: StreamId,
        /// 401 or 403.
        status: StatusCode,
        /// The challenge parameters.
        challenge: BearerChallenge,
    },
    /// A message refused for authorization is held until [`super::ClientSession::authorized`]
    /// or [`super::ClientSession::authorization_failed`] (with
    /// [`super::ClientConfig::with_authorization_hold`]): run the authorization flow with
    /// this challenge.
    AwaitingAuthorization {
        /// 401 or 403.
        status: StatusCode,
        /// The challenge parameters.
        challenge: BearerChallenge,
    },
    /// A limit was hit.
    LimitExceeded {
        /// The exchange concerned, if one.
        stream: Option<StreamId>,
        /// Which limit.
        limit: Limit,
    },
    // S-CANCEL-3.
    /// A response whose id matches no request in flight (late after a cancel, or
    /// bogus): dropped.
    UnmatchedResponse {
        /// Where it came.
        stream: StreamId,
        /// Its id.
        id: Option<RequestId>,
    },
    /// An SSE event or body element that is not JSON-RPC: dropped.
    InvalidMessage {
        /// Where it came.
        stream: StreamId,
        /// What was wrong.
        error: ClientError,
    },
    /// A POSTed notification or response was not accepted (no outcome exists for those).
    PostRejected {
        /// The exchange.
        stream: StreamId,
        /// The JSON-RPC method of a notification, if it was one.
        method: Option<Box<str>>,
        /// Why.
        error: ClientError,
    },
    /// The bearer-token provider returned a value that cannot be a header; it was not sent.
    InvalidBearerToken,
    // S-NEW-10.
    /// The server's era is known: probed (`cached: false`) or taken from what the app
    /// remembered ([`super::ClientConfig::with_known_era`], `cached: true`). `version` is the modern version in use, `None` for
    /// the legacy era (whose version `initialize` negotiates next).
    EraDetected {
        /// The era.
        era: Era,
        /// The modern version chosen, if modern.
        version: Option<ProtocolVersion>,
        /// Whether it came from the cache.
        cached: bool,
    },
    // S-NEW-10.
    /// What is known of the endpoint's era changed: the probe or `initialize` taught it
    /// (`Some`), or what was known no longer holds (`None`: probe again next time). An
    /// application that caches eras per origin records it, and passes it to the next
    /// session with [`super::ClientConfig::with_known_era`].
    KnownEraChanged {
        /// The era now known, or `None` to forget.
        era: Option<super::KnownEra>,
    },
    /// The server ended the modern listening stream with the response to
    /// `subscriptions/listen` (a graceful end); the stream is reopened like any ended one.
    SubscriptionEnded {
        /// The exchange.
        stream: StreamId,
    },
    // S-NEW-8.
    /// A tool of a modern `tools/list` result declares invalid `x-mcp-header` parameters: it
    /// was removed from the result given to the app.
    InvalidToolDefinition {
        /// The tool's name.
        tool: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The session is closed: no output follows.
    Closed {
        /// How the DELETE went.
        reason: CloseOutcome,
    },
}
