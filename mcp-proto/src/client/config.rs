//! [`ClientConfig`]: everything a [`super::ClientSession`] is told once, at construction.
//!
//! Defaults are safe: bounded SSE events and JSON bodies, a bounded number of in-flight
//! requests, 1 s → 30 s jittered backoff, a reconnect budget, automatic re-initialization on
//! session expiry, no continuous listening unless asked (the seed's `WithContinuousListening`).

use std::fmt;
use std::time::Duration;

use http::{HeaderMap, Method};

use super::backoff::{BackoffConfig, FailureBudget};
use super::io::HttpRequestKind;
use crate::version::ProtocolVersion;

/// What the per-request header callback is told about the request being built.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct HeaderContext<'a> {
    /// What the request is for.
    pub kind: HttpRequestKind,
    /// The HTTP method.
    pub method: &'a Method,
    /// The JSON-RPC method of a POSTed request or notification, if any.
    pub rpc_method: Option<&'a str>,
    /// The session id the request will carry, if any.
    pub session_id: Option<&'a str>,
}

/// The per-request header callback (seed: `headerFunc`). It may add headers to the map it is
/// given; the protocol's own headers (`Accept`, `Content-Type`, `Mcp-Session-Id`,
/// `MCP-Protocol-Version`, `Last-Event-ID`, `Authorization`) are set after it and win.
pub type HeaderFn = Box<dyn FnMut(&HeaderContext<'_>, &mut HeaderMap) + Send>;

/// The bearer-token provider: called for every request; `Some(token)` adds
/// `Authorization: Bearer <token>` (S-AUTH-2). A token that is not a valid header value is
/// not sent, and [`super::ClientEvent::InvalidBearerToken`] says so.
pub type TokenProvider = Box<dyn FnMut() -> Option<String> + Send>;

/// Resource limits. Exceeding one is a typed error for the stream or request concerned and a
/// [`super::ClientEvent::LimitExceeded`] event, never unbounded memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest SSE event (its data, and any single line) the client buffers: 8 MiB.
    pub max_sse_event_bytes: usize,
    /// The largest `application/json` response body: 8 MiB.
    pub max_json_body_bytes: usize,
    /// Requests in flight at once (sent, queued or waiting for a retry): 64. One more is
    /// refused with [`super::ApiMisuse::TooManyInFlight`].
    pub max_in_flight_requests: usize,
    /// Messages (of any kind) queued before the session is ready: 256.
    pub max_queued_messages: usize,
    /// How much of an error response's body is kept for [`super::ClientError::HttpStatus`]:
    /// 4 KiB; beyond it the exchange is aborted.
    pub max_error_body_bytes: usize,
    /// The longest `Mcp-Session-Id` accepted from a server: 1 KiB.
    pub max_session_id_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_sse_event_bytes: 8 << 20,
            max_json_body_bytes: 8 << 20,
            max_in_flight_requests: 64,
            max_queued_messages: 256,
            max_error_body_bytes: 4 << 10,
            max_session_id_bytes: 1 << 10,
        }
    }
}

/// Where a session starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Start {
    /// Nothing known: the app sends `initialize`.
    Fresh,
    /// A known session (seed: `WithSession`) at a known version.
    Session {
        id: Box<str>,
        version: ProtocolVersion,
    },
    /// A known version and no session: the modern era, or a stateless legacy server whose
    /// version the app cached.
    Version(ProtocolVersion),
}

/// The configuration of a [`super::ClientSession`]. Build it with [`ClientConfig::new`] (or
/// `default()`) and the `with_*` methods.
pub struct ClientConfig {
    pub(crate) start: Start,
    pub(crate) headers: HeaderMap,
    pub(crate) header_fn: Option<HeaderFn>,
    pub(crate) bearer: Option<TokenProvider>,
    pub(crate) listen: bool,
    pub(crate) auto_reinitialize: bool,
    pub(crate) backoff: BackoffConfig,
    pub(crate) listen_budget: FailureBudget,
    pub(crate) max_resume_failures: u32,
    pub(crate) limits: Limits,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) close_timeout: Duration,
    pub(crate) seed: u64,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            start: Start::Fresh,
            headers: HeaderMap::new(),
            header_fn: None,
            bearer: None,
            listen: false,
            auto_reinitialize: true,
            backoff: BackoffConfig::default(),
            listen_budget: FailureBudget::default(),
            max_resume_failures: 5,
            limits: Limits::default(),
            request_timeout: None,
            close_timeout: Duration::from_secs(5),
            seed: 0x6D63_702D_636C_6E74,
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("start", &self.start)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("header_fn", &self.header_fn.is_some())
            .field("bearer", &self.bearer.is_some())
            .field("listen", &self.listen)
            .field("auto_reinitialize", &self.auto_reinitialize)
            .field("backoff", &self.backoff)
            .field("listen_budget", &self.listen_budget)
            .field("max_resume_failures", &self.max_resume_failures)
            .field("limits", &self.limits)
            .field("request_timeout", &self.request_timeout)
            .field("close_timeout", &self.close_timeout)
            .field("seed", &self.seed)
            .finish()
    }
}

impl ClientConfig {
    /// The defaults: a fresh session, no listening, automatic re-initialization.
    pub fn new() -> Self {
        ClientConfig::default()
    }

    /// Starts from a known session (seed: `WithSession`): the session is ready at once, sends
    /// `id` and `version` on every request, and opens the listening stream (if enabled) without
    /// an `initialize`. Without a saved `initialize`, a 404 cannot be repaired automatically:
    /// it ends the session with [`super::ClientEvent::SessionExpired`] and the app initializes.
    pub fn with_session(mut self, id: impl Into<String>, version: ProtocolVersion) -> Self {
        self.start = Start::Session {
            id: id.into().into_boxed_str(),
            version,
        };
        self
    }

    /// Starts at a known version with no session: ready at once, `MCP-Protocol-Version` on
    /// every request. This is how the modern era (2026-07-28, no `initialize`) starts.
    pub fn with_version(mut self, version: ProtocolVersion) -> Self {
        self.start = Start::Version(version);
        self
    }

    /// Static headers sent on every request (seed: `WithHTTPHeaders`).
    pub fn with_headers(mut self, headers: HeaderMap) -> Self {
        self.headers = headers;
        self
    }

    /// A per-request header callback (seed: `WithHTTPHeaderFunc`).
    pub fn with_header_fn(
        mut self,
        f: impl FnMut(&HeaderContext<'_>, &mut HeaderMap) + Send + 'static,
    ) -> Self {
        self.header_fn = Some(Box::new(f));
        self
    }

    /// A bearer-token provider, asked on every request.
    pub fn with_bearer_token_provider(
        mut self,
        f: impl FnMut() -> Option<String> + Send + 'static,
    ) -> Self {
        self.bearer = Some(Box::new(f));
        self
    }

    /// Opens the GET listening stream once the session is ready (seed:
    /// `WithContinuousListening`); the same as calling `listen()` right away.
    pub fn with_continuous_listening(mut self, on: bool) -> Self {
        self.listen = on;
        self
    }

    /// Whether a 404 on a request that carried a session id re-initializes automatically
    /// (default `true`).
    pub fn with_auto_reinitialize(mut self, on: bool) -> Self {
        self.auto_reinitialize = on;
        self
    }

    /// The reconnect backoff.
    pub fn with_backoff(mut self, backoff: BackoffConfig) -> Self {
        self.backoff = backoff;
        self
    }

    /// The failure budget of the listening stream (10 failures in 5 min).
    pub fn with_listen_budget(mut self, budget: FailureBudget) -> Self {
        self.listen_budget = budget;
        self
    }

    /// Consecutive resume attempts of a broken POST stream that bring no new event before the
    /// request fails (5).
    pub fn with_max_resume_failures(mut self, n: u32) -> Self {
        self.max_resume_failures = n;
        self
    }

    /// The resource limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// A deadline for every request (S-LIFE-12; none by default): when it passes, the request
    /// fails with [`super::ClientError::TimedOut`] and is cancelled as by `cancel`.
    pub fn with_request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long `close` waits for the DELETE (5 s, as the seed).
    pub fn with_close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = timeout;
        self
    }

    /// The seed of the jitter generator. Adapters SHOULD pass a random value so that clients
    /// do not reconnect in step; tests pass a fixed one.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The resource limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The backoff in force.
    pub fn backoff(&self) -> &BackoffConfig {
        &self.backoff
    }

    /// The listening stream's failure budget in force.
    pub fn listen_budget(&self) -> &FailureBudget {
        &self.listen_budget
    }
}
