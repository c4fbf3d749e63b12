//! [`ClientConfig`]: everything a [`super::ClientSession`] is told once, at construction.
//!
//! Defaults are safe: bounded SSE events and JSON bodies, a bounded number of in-flight
//! requests, 1 s → 30 s jittered backoff, a reconnect budget, automatic re-initialization on
//! session expiry, no continuous listening unless asked (mcp-go's `WithContinuousListening`),
//! the legacy era unless [`EraMode::Auto`] or [`EraMode::Modern`] is chosen, at most 8
//! input rounds per request and 32 input requests per round (MRTR), 4096 tools'
//! `x-mcp-header` declarations remembered.

use std::fmt;
use std::time::Duration;

use http::{HeaderMap, Method};
use serde_json::Value;

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

/// The per-request header callback (mcp-go: `headerFunc`). It may add headers to the map it is
/// given; the protocol's own headers (`Accept`, `Content-Type`, `Mcp-Session-Id`,
/// `MCP-Protocol-Version`, `Last-Event-ID`, `Authorization`) are set after it and win.
pub type HeaderFn = Box<dyn FnMut(&HeaderContext<'_>, &mut HeaderMap) + Send>;

// S-AUTH-2.
/// The bearer-token provider: called for every request; `Some(token)` adds
/// `Authorization: Bearer <token>`. A token that is not a valid header value is
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
    /// A known session (mcp-go: `WithSession`) at a known version.
    Session {
        id: Box<str>,
        version: ProtocolVersion,
    },
    /// A known version and no session: the modern era, or a stateless legacy server whose
    /// version the app cached.
    Version(ProtocolVersion),
}

// S-NEW-10.
/// Which era(s) a session may speak. The era is a property of the server, chosen
/// once per origin; see [`ClientConfig::with_known_era`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum EraMode {
    /// Legacy only (2025-03-26 … 2025-11-25): the app's `initialize` is POSTed as is. The
    /// default, so that existing apps keep their exact behaviour.
    #[default]
    Legacy,
    // G-11, S-NEW-10.
    /// Dual-era: the app's `initialize` first triggers a `server/discover` probe; a result
    /// or a recognised modern error keeps the session modern, anything else falls back
    /// to `initialize`.
    Auto,
    /// Modern only (2026-07-28): the probe must succeed; a legacy server is
    /// [`super::ClientError::ModernUnsupported`].
    Modern,
}

/// What is known about an origin's era.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KnownEra {
    /// It answered the probe as a legacy server (and `initialize` succeeded).
    Legacy,
    /// It speaks the modern era, at this version.
    Modern(ProtocolVersion),
}

// S-NEW-4.
/// Who the client is, for the modern era's per-request `_meta`:
/// `io.modelcontextprotocol/clientInfo` and `io.modelcontextprotocol/clientCapabilities`.
/// An app `initialize` overrides it with its own `clientInfo` and `capabilities`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientIdentity {
    /// The `Implementation` object (`name`, `version`, …).
    pub client_info: Value,
    /// The `ClientCapabilities` object.
    pub capabilities: Value,
}

impl Default for ClientIdentity {
    fn default() -> Self {
        ClientIdentity {
            client_info: serde_json::json!({"name": "mcp-proto", "version": env!("CARGO_PKG_VERSION")}),
            capabilities: serde_json::json!({}),
        }
    }
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
    pub(crate) answered_stream_grace: Duration,
    pub(crate) limits: Limits,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) close_timeout: Duration,
    pub(crate) seed: u64,
    pub(crate) era: EraMode,
    pub(crate) known_era: Option<KnownEra>,
    pub(crate) identity: ClientIdentity,
    pub(crate) max_input_rounds: u32,
    pub(crate) subscription: Option<Value>,
    pub(crate) max_known_tools: usize,
    pub(crate) max_input_requests: usize,
    pub(crate) auth_retries: Option<u32>,
    pub(crate) rate_limit_retry: RateLimitRetry,
}

/// How a POST refused with `429 Too Many Requests`, or with `503 Service Unavailable` and a
/// `Retry-After` (a server pushing back under load), is sent again (part of
/// [`ClientConfig`]). Such a refusal means the server did not process the message, so
/// sending it again is safe: the
/// client waits the server's `Retry-After` (delta-seconds), plus up to half of
/// [`BackoffConfig::jitter_percent`] of it so that clients pushed back together come back
/// spread out (without one, the reconnect backoff of [`BackoffConfig`]), and re-sends the same message, with the same JSON-RPC id, at most
/// [`max_retries`](Self::max_retries) times; then, or at once when `Retry-After` asks for more
/// than [`max_wait`](Self::max_wait), the request fails with
/// [`ClientError::RateLimited`](super::ClientError::RateLimited). A request cancelled or timed
/// out during the wait is not sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimitRetry {
    /// The most re-sends of one message after such refusals (default 3; 0: fail at the
    /// first).
    pub max_retries: u32,
    /// The longest `Retry-After` the client waits for (default 30 s); a longer one fails the
    /// request at once, carrying the delay, so the application can decide.
    pub max_wait: Duration,
}

impl Default for RateLimitRetry {
    fn default() -> Self {
        RateLimitRetry {
            max_retries: 3,
            max_wait: Duration::from_secs(30),
        }
    }
}

impl RateLimitRetry {
    /// At most `max_retries` re-sends, each waiting at most `max_wait`.
    pub fn new(max_retries: u32, max_wait: Duration) -> Self {
        RateLimitRetry {
            max_retries,
            max_wait,
        }
    }

    /// Never re-sent: the first 429 fails the request.
    pub fn off() -> Self {
        RateLimitRetry::new(0, Duration::ZERO)
    }
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
            answered_stream_grace: Duration::from_secs(2),
            limits: Limits::default(),
            request_timeout: None,
            close_timeout: Duration::from_secs(5),
            seed: 0x6D63_702D_636C_6E74,
            era: EraMode::Legacy,
            known_era: None,
            identity: ClientIdentity::default(),
            max_input_rounds: 8,
            subscription: None,
            max_known_tools: 4096,
            max_input_requests: 32,
            auth_retries: None,
            rate_limit_retry: RateLimitRetry::default(),
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
            .field("answered_stream_grace", &self.answered_stream_grace)
            .field("limits", &self.limits)
            .field("request_timeout", &self.request_timeout)
            .field("close_timeout", &self.close_timeout)
            .field("seed", &self.seed)
            .field("era", &self.era)
            .field("known_era", &self.known_era)
            .field("identity", &self.identity)
            .field("max_input_rounds", &self.max_input_rounds)
            .field("subscription", &self.subscription)
            .field("max_known_tools", &self.max_known_tools)
            .field("max_input_requests", &self.max_input_requests)
            .field("auth_retries", &self.auth_retries)
            .field("rate_limit_retry", &self.rate_limit_retry)
            .finish()
    }
}

impl ClientConfig {
    /// The defaults: a fresh session, no listening, automatic re-initialization.
    pub fn new() -> Self {
        ClientConfig::default()
    }

    /// Starts from a known session (mcp-go: `WithSession`): the session is ready at once, sends
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
    /// every request. With 2026-07-28 this starts the modern era without a probe and without
    /// `initialize` (an app `initialize` is then [`super::ApiMisuse::AlreadyInitialized`]);
    /// the `_meta` identity is [`ClientConfig::with_client_identity`]'s. To detect the era,
    /// use [`ClientConfig::with_era`] instead.
    pub fn with_version(mut self, version: ProtocolVersion) -> Self {
        self.start = Start::Version(version);
        self
    }

    /// Static headers sent on every request (mcp-go: `WithHTTPHeaders`).
    pub fn with_headers(mut self, headers: HeaderMap) -> Self {
        self.headers = headers;
        self
    }

    /// A per-request header callback (mcp-go: `WithHTTPHeaderFunc`).
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

    /// Holds what the server refuses for authorization (a `401`, or a `403` with a Bearer
    /// challenge) instead of failing it: the message waits, [`super::ClientEvent::AwaitingAuthorization`]
    /// says so, and [`super::ClientSession::authorized`] sends it again (at most
    /// `max_retries` times per message; then it fails with
    /// [`super::ClientError::Authorization`] carrying the retry limit) or
    /// [`super::ClientSession::authorization_failed`] fails it. `None` (the default): such a
    /// message fails at once with [`super::ClientError::AuthorizationRequired`]. The
    /// driver's OAuth support (`Connect::oauth` in `mcp-driver`) turns this on.
    pub fn with_authorization_hold(mut self, max_retries: Option<u32>) -> Self {
        self.auth_retries = max_retries;
        self
    }

    /// Opens the GET listening stream once the session is ready (mcp-go:
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

    /// How long an SSE stream whose request is answered stays open for what may follow
    /// before the client closes it (2 s). Servers normally end it after the response; some
    /// never end a resumed one, which would otherwise hold a connection for nothing.
    pub fn with_answered_stream_grace(mut self, grace: Duration) -> Self {
        self.answered_stream_grace = grace;
        self
    }

    /// How a POST refused with 429 is sent again (3 times, waiting at most 30 s each; see
    /// [`RateLimitRetry`]).
    pub fn with_rate_limit_retry(mut self, retry: RateLimitRetry) -> Self {
        self.rate_limit_retry = retry;
        self
    }

    /// The resource limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    // S-LIFE-12.
    /// A deadline for every request (none by default): when it passes, the request
    /// fails with [`super::ClientError::TimedOut`] and is cancelled as by `cancel`.
    pub fn with_request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long `close` waits for the DELETE (5 s, as in mcp-go).
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

    // S-NEW-4.
    /// Which era(s) the session may speak ([`EraMode::Legacy`] by default). With `Auto` or
    /// `Modern`, the app still sends `initialize`: the session probes with `server/discover`
    /// first and, in the modern era, answers that `initialize` itself from the discovery
    /// result (the modern server has no `initialize`).
    pub fn with_era(mut self, era: EraMode) -> Self {
        self.era = era;
        self
    }

    // S-NEW-10.
    /// What the application remembers of this endpoint's era (a per-origin cache of its own,
    /// e.g. the driver's `EraCache`, or a file): a known legacy origin is not probed, a known
    /// modern one is probed at its version. What the session learns later comes out as
    /// [`ClientEvent::KnownEraChanged`](super::ClientEvent::KnownEraChanged), for the
    /// application to remember: the core itself keeps nothing between sessions.
    pub fn with_known_era(mut self, era: Option<KnownEra>) -> Self {
        self.known_era = era;
        self
    }

    /// The identity sent in every modern request's `_meta` until an app `initialize` gives
    /// its own (default: `{"name":"mcp-proto","version":…}` and no capabilities).
    pub fn with_client_identity(mut self, identity: ClientIdentity) -> Self {
        self.identity = identity;
        self
    }

    // S-NEW-5.
    /// How many `InputRequiredResult` rounds one request may go through before it fails with
    /// [`super::ClientError::TooManyInputRounds`] (8, MRTR).
    pub fn with_max_input_rounds(mut self, rounds: u32) -> Self {
        self.max_input_rounds = rounds;
        self
    }

    /// How many input requests one `InputRequiredResult` may carry (32); more fail the
    /// request with [`super::ServerFault::LimitExceeded`] (`InputRequests`), since each is
    /// handed to the app.
    pub fn with_max_input_requests(mut self, n: usize) -> Self {
        self.max_input_requests = n;
        self
    }

    // S-NEW-1.
    /// The `notifications` filter of the modern era's listening stream
    /// (`subscriptions/listen`, e.g. `{"toolsListChanged": true}`). Without one, the modern
    /// era has nothing to listen for and `listen` reports
    /// [`super::ClientEvent::ListenUnsupported`] (there is no GET stream).
    pub fn with_subscription_filter(mut self, filter: Value) -> Self {
        self.subscription = Some(filter);
        self
    }

    /// How many tools' `x-mcp-header` declarations the session remembers from `tools/list`
    /// (4096); the headers of a tool beyond it are not sent, and the server answers
    /// `HeaderMismatch` for it.
    pub fn with_max_known_tools(mut self, n: usize) -> Self {
        self.max_known_tools = n;
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
