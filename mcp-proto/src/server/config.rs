//! [`ServerConfig`]: every knob of the [`Router`](super::Router), with production defaults.
//!
//! Each option of the mcp-go server in mcp-go's server guide has a counterpart here:
//!
//! | mcp-go option | here | default |
//! |---|---|---|
//! | `WithEndpointPath` | [`ServerConfig::endpoint_path`] | `/mcp` |
//! | `WithStateLess` | [`ServerConfig::stateless`] | `false` (stateful) |
//! | `WithSessionIdleTTL` | [`ServerConfig::session_idle_ttl`] | 30 min (mcp-go: off) |
//! | `WithHeartbeatInterval` | [`StreamConfig::heartbeat_interval`] | 15 s comment frames |
//! | `WithStreamableHTTPCORS` | [`SecurityConfig::cors`] | off |
//! | `WithProtectedResourceMetadata` | [`SecurityConfig::protected_resource`] | off |
//! | `WithDisableStreaming` (GET) | [`ServerConfig::enable_get_stream`] | GET enabled |
//! | auth middleware | [`SecurityConfig::authenticator`], or the driver's asynchronous authenticator (`DriverConfig::authenticator` in mcp-driver) when the check awaits | none |
//! | session id manager | [`ServerConfig::session_ids`] | none: the adapters install a CSPRNG-backed one; a core without one refuses `initialize` (500) |
//! | event store | [`ServerConfig::event_store`] | [`InMemoryEventStore`] |
//! | health checks | [`ServerConfig::health`] | off |
//! | behind a proxy | [`SecurityConfig::proxies`]: public URL, trusted proxies | none |

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use super::health::Health;
use super::proxy::{ProxyConfig, ProxyNet, PublicUrl};
use super::security::{Authenticator, CorsConfig, HostValidation, ProtectedResourceMetadata};
use super::session::{DeterministicSessionIds, SessionIdGenerator};
use super::store::{EventStore, InMemoryEventStore};
use crate::ProtocolVersion;

// S-POST-9.
/// How the answer to a POST that carries requests is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ResponseMode {
    /// One JSON body, upgraded to an SSE stream as soon as anything (a notification, a
    /// server→client request, a request to close the connection for polling) must precede
    /// the response. The default: cheapest for the common case, honest in the others.
    #[default]
    Auto,
    /// Always an SSE stream (with a priming event for clients of 2025-11-25 and later).
    Sse,
    /// Always one JSON body. Messages related to the request that cannot precede it are
    /// never dropped silently (the TypeScript SDK's JSON mode drops progress notifications):
    /// the command that tried to send them learns
    /// where they went ([`Delivery::Rerouted`](super::Delivery::Rerouted) to the session's
    /// GET stream) or that they could not be sent at all (an `Err`), and a
    /// [`ServerEvent::Rerouted`](super::ServerEvent) is emitted.
    Json,
}

/// What happens when a message for the GET stream arrives while none is open and the
/// session's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OverflowPolicy {
    /// Drop the oldest queued *notification* to make room; when only server→client requests
    /// are queued, refuse the new message. A dropped or refused request always fails with a
    /// typed error; nothing disappears without an event.
    #[default]
    DropOldestNotification,
    /// Refuse the new message (the command returns an error) and keep the queue as it is.
    RejectNew,
}

/// The configuration of a [`Router`](super::Router). Build it with [`ServerConfig::default`]
/// and the `with_*` methods, or set the public fields directly. What the router bounds,
/// how its streams behave and who may call are grouped ([`limits`](Self::limits),
/// [`streams`](Self::streams), [`security`](Self::security)); every field has its `with_*`
/// shortcut here too.
#[non_exhaustive]
pub struct ServerConfig {
    // S-POST-1.
    /// The single MCP endpoint path, e.g. `/mcp`. mcp-go: `WithEndpointPath`.
    pub endpoint_path: String,
    /// Stateless mode: no session ids, GET and DELETE answer 405, server→client requests
    /// fail at once with [`SendError::Stateless`](super::SendError). mcp-go: `WithStateLess`.
    pub stateless: bool,
    /// Answers `ping` under 2026-07-28, which removed it (default `false`: 404 with -32601,
    /// as the revision says). For SDKs that still send it; see
    /// [`with_modern_ping`](Self::with_modern_ping).
    pub modern_ping: bool,
    // S-GET-3.
    /// Whether a GET opens the session's listening stream (otherwise 405).
    pub enable_get_stream: bool,
    // S-SESS-9.
    /// Whether DELETE terminates a session (otherwise 405).
    pub enable_delete: bool,
    /// JSON, SSE, or JSON upgraded to SSE on demand.
    pub response_mode: ResponseMode,
    /// A session that has seen no request and had no open stream for this long is evicted,
    /// and its id then gets 404. `None` disables eviction. Default 30 min. mcp-go:
    /// `WithSessionIdleTTL`.
    pub session_idle_ttl: Option<Duration>,
    /// What the router bounds: bodies, batches, sessions, queues, windows, requests in flight.
    pub limits: ServerLimits,
    /// How SSE streams behave: heartbeats, resumability, retry, retention, queue overflow.
    pub streams: StreamConfig,
    // S-NEW-10, G-11.
    /// The protocol revisions accepted in `MCP-Protocol-Version` and negotiated by
    /// `initialize`. Default: every revision ([`ProtocolVersion::ALL`]), so one router serves
    /// both eras at once: requests whose `MCP-Protocol-Version` is 2026-07-28 are served
    /// sessionless (see [`Router`](super::Router)), an unsupported version gets
    /// `UnsupportedProtocolVersionError` (-32022), and `initialize` negotiates among the
    /// legacy revisions only. [`ServerConfig::legacy_only`] keeps to the legacy revisions
    /// (2025-03-26, 2025-06-18, 2025-11-25): a 2026-07-28 probe then gets 400 (-32000), which
    /// is how a modern client detects a legacy server.
    pub supported_versions: Vec<ProtocolVersion>,
    // S-NEW-8.
    /// The `x-mcp-header` declarations of the server's tools, to check a modern
    /// `tools/call`'s `Mcp-Param-*` headers against its arguments. `None`: no
    /// parameter headers are checked. The service binding builds the table from the server's
    /// tools and hands it to the router ([`Router::set_param_headers`](super::Router::set_param_headers))
    /// whenever they change, unless one is configured here.
    pub param_headers: Option<crate::mirror::ParamHeaderTable>,
    /// Who may call: `Host`/`Origin` validation, CORS, RFC 9728 metadata, authentication.
    pub security: SecurityConfig,
    /// Where session ids come from. `None` (the default): every adapter's constructor
    /// installs a CSPRNG-backed generator, and a router used without an adapter refuses
    /// `initialize` with 500 rather than hand out guessable ids. A deterministic generator
    /// only by [`with_insecure_test_session_ids`](Self::with_insecure_test_session_ids).
    pub session_ids: Option<Box<dyn SessionIdGenerator + Send>>,
    /// Where SSE events are kept for replay.
    pub event_store: Box<dyn EventStore + Send>,
    /// Membership in a cluster of instances sharing sessions through a store (see
    /// [`ClusterConfig`](super::ClusterConfig)). `None` (the default): this router alone.
    pub cluster: Option<super::ClusterConfig>,
    /// Liveness and readiness paths ([`Health`]). Default: none.
    pub health: Health,
}

/// What a [`Router`](super::Router) bounds (part of [`ServerConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerLimits {
    /// The largest POST body accepted, in bytes; larger ones get 413. Default 4 MiB.
    pub max_body_bytes: usize,
    /// The most JSON-RPC messages accepted in one 2025-03-26 batch. Default 100.
    pub max_batch_len: usize,
    /// The most live sessions; an `initialize` beyond it gets 503. Default 10,000.
    pub max_sessions: usize,
    /// Capacity of a session's queue of messages for a GET stream that was never opened.
    /// Once the session has a GET stream, messages for it while its connection is away are
    /// written to the [`EventStore`] under that stream's event ids instead (a resume
    /// replays them; a plain GET gets the ones never written to any connection).
    pub listen_queue_capacity: usize,
    /// Bytes of a streaming response the router hands to the adapter ahead of what the
    /// client has taken ([`Router::handle_written`](super::Router::handle_written)); further
    /// chunks wait in the router until the client reads (see `pace.rs`). Default 256 KiB.
    pub send_window: usize,
    /// A streaming connection with data waiting whose client took no byte for this long is
    /// cut as a slow reader (aborted, then treated as a disconnect: a resumable stream
    /// detaches and keeps its events for a resume). Default 30 s.
    pub slow_reader_timeout: Duration,
    /// Live (not replayed) bytes that may wait behind a full [`send_window`](Self::send_window)
    /// on one connection; beyond it the connection is cut as a slow reader at once.
    /// Default 8 MiB.
    pub max_backlog_bytes: usize,
    /// GET takeovers allowed per session within [`listen_takeover_window`](Self::listen_takeover_window):
    /// a GET for a session whose listen stream already has a connection replaces that
    /// connection (which may have died silently behind a proxy) while this budget lasts, and
    /// is refused with 409 after, so two live GETs of one client cannot evict each other
    /// forever. Default 3.
    pub listen_takeovers: u32,
    /// The window of [`listen_takeovers`](Self::listen_takeovers). Default 60 s.
    pub listen_takeover_window: Duration,
    /// At most this many 2026-07-28 requests in flight at once (each holds its HTTP
    /// exchange; `subscriptions/listen` streams count until closed); beyond it, 503.
    /// Default 10 000.
    pub max_modern_in_flight: usize,
    /// Token-bucket rate limits per principal, session and client address (429 with
    /// `Retry-After` beyond them). Default: off (see [`RateLimits`](super::RateLimits)).
    pub rate: super::RateLimits,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_body_bytes: 4 * 1024 * 1024,
            max_batch_len: 100,
            max_sessions: 10_000,
            listen_queue_capacity: 64,
            send_window: 256 * 1024,
            slow_reader_timeout: Duration::from_secs(30),
            max_backlog_bytes: 8 * 1024 * 1024,
            listen_takeovers: 3,
            listen_takeover_window: Duration::from_secs(60),
            max_modern_in_flight: 10_000,
            rate: super::RateLimits::default(),
        }
    }
}

/// How a [`Router`](super::Router)'s SSE streams behave (part of [`ServerConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamConfig {
    /// A `:` comment frame is written on an SSE stream that has been silent this long.
    /// `None` disables heartbeats. Default 15 s. mcp-go: `WithHeartbeatInterval`.
    pub heartbeat_interval: Option<Duration>,
    /// Attach event ids to SSE events and keep them in the [`EventStore`] so a client can
    /// resume with `Last-Event-ID` (S-RES-*). Stateful mode only. Default on.
    pub resumability: bool,
    // S-POST-22.
    /// The `retry` value sent in priming events and before a server-side close.
    pub retry_interval: Duration,
    /// How long a finished request stream stays replayable after its last event.
    pub finished_stream_retention: Duration,
    /// How long a resumable stream whose connection dropped keeps its handlers running while
    /// waiting for the client to resume; then they are cancelled.
    pub resume_grace: Duration,
    /// What a full queue does.
    pub overflow_policy: OverflowPolicy,
    /// Deadline of a server→client request when the caller gives none.
    pub server_request_timeout: Duration,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            heartbeat_interval: Some(ServerConfig::DEFAULT_HEARTBEAT_INTERVAL),
            resumability: true,
            retry_interval: Duration::from_secs(3),
            finished_stream_retention: Duration::from_secs(60),
            resume_grace: Duration::from_secs(60),
            overflow_policy: OverflowPolicy::DropOldestNotification,
            server_request_timeout: Duration::from_secs(60),
        }
    }
}

/// Who may call a [`Router`](super::Router) (part of [`ServerConfig`]).
#[non_exhaustive]
pub struct SecurityConfig {
    // S-SEC-1/2/5.
    /// `Host`/`Origin` validation. Default: loopback only.
    pub host_validation: HostValidation,
    /// CORS, opt-in. mcp-go: `WithStreamableHTTPCORS`.
    pub cors: Option<CorsConfig>,
    /// RFC 9728 protected resource metadata, opt-in. mcp-go: `WithProtectedResourceMetadata`.
    pub protected_resource: Option<ProtectedResourceMetadata>,
    /// Validates each request's credentials; sessions are bound to the principal it returns.
    pub authenticator: Option<Box<dyn Authenticator + Send>>,
    /// Whether every request the authentication step judges
    /// ([`needs_authentication`](ServerConfig::needs_authentication)) must come with its verdict
    /// ([`RequestHead::verdict`](super::RequestHead::verdict)): set when an asynchronous step
    /// outside the core (the driver's authenticator) judges requests before the router sees
    /// them. A head without a verdict is then answered 503, failing closed. Default `false`.
    pub requires_verdict: bool,
    /// The public URL and the trusted reverse proxies ([`ProxyConfig`]). Default: none.
    pub proxies: ProxyConfig,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            host_validation: HostValidation::Loopback,
            cors: None,
            protected_resource: None,
            authenticator: None,
            requires_verdict: false,
            proxies: ProxyConfig::default(),
        }
    }
}

impl fmt::Debug for SecurityConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecurityConfig")
            .field("host_validation", &self.host_validation)
            .field("cors", &self.cors)
            .field("protected_resource", &self.protected_resource)
            .field("authenticator", &self.authenticator.is_some())
            .field("requires_verdict", &self.requires_verdict)
            .field("proxies", &self.proxies)
            .finish()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            endpoint_path: "/mcp".to_owned(),
            stateless: false,
            modern_ping: false,
            enable_get_stream: true,
            enable_delete: true,
            response_mode: ResponseMode::Auto,
            session_idle_ttl: Some(Duration::from_secs(30 * 60)),
            limits: ServerLimits::default(),
            streams: StreamConfig::default(),
            supported_versions: ProtocolVersion::ALL.to_vec(),
            param_headers: None,
            security: SecurityConfig::default(),
            session_ids: None,
            event_store: Box::new(InMemoryEventStore::default()),
            cluster: None,
            health: Health::default(),
        }
    }
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("endpoint_path", &self.endpoint_path)
            .field("stateless", &self.stateless)
            .field("enable_get_stream", &self.enable_get_stream)
            .field("enable_delete", &self.enable_delete)
            .field("response_mode", &self.response_mode)
            .field("session_idle_ttl", &self.session_idle_ttl)
            .field("limits", &self.limits)
            .field("streams", &self.streams)
            .field("security", &self.security)
            .field("health", &self.health)
            .finish_non_exhaustive()
    }
}

impl ServerConfig {
    /// The endpoint path (mcp-go: `WithEndpointPath`). A missing leading `/` is added.
    pub fn with_endpoint_path(mut self, path: impl Into<String>) -> Self {
        let mut p = path.into();
        if !p.starts_with('/') {
            p.insert(0, '/');
        }
        self.endpoint_path = p;
        self
    }

    /// Answers `ping` under 2026-07-28 with an empty result instead of 404 / -32601. The
    /// revision removed `ping` (and the official conformance suite checks the 404), but the
    /// official Python SDK and fastmcp still send it: turn this on to serve them without
    /// errors in their logs.
    pub fn with_modern_ping(mut self, accept: bool) -> Self {
        self.modern_ping = accept;
        self
    }

    /// Stateless mode (mcp-go: `WithStateLess`).
    pub fn with_stateless(mut self, stateless: bool) -> Self {
        self.stateless = stateless;
        self
    }

    /// The response mode.
    pub fn with_response_mode(mut self, mode: ResponseMode) -> Self {
        self.response_mode = mode;
        self
    }

    /// The idle TTL (mcp-go: `WithSessionIdleTTL`); `None` or zero disables eviction.
    pub fn with_session_idle_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.session_idle_ttl = ttl.filter(|d| !d.is_zero());
        self
    }

    /// The most live sessions (503 beyond).
    pub fn with_max_sessions(mut self, max: usize) -> Self {
        self.limits.max_sessions = max;
        self
    }

    /// The default [`heartbeat_interval`](StreamConfig::heartbeat_interval): 15 s.
    pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(15);

    // S-SSE-16.
    /// Turns heartbeats on at [`DEFAULT_HEARTBEAT_INTERVAL`](Self::DEFAULT_HEARTBEAT_INTERVAL)
    /// when they are off; an interval already set is kept. For adapters whose HTTP engine
    /// notices a client that left only when a write to it fails (async-h1): without
    /// heartbeats, an idle SSE stream of a departed client would never be written to, so
    /// never noticed.
    pub fn with_heartbeats_required(mut self) -> Self {
        if self.streams.heartbeat_interval.is_none() {
            self.streams.heartbeat_interval = Some(Self::DEFAULT_HEARTBEAT_INTERVAL);
        }
        self
    }

    /// The heartbeat interval (mcp-go: `WithHeartbeatInterval`); `None` or zero disables it.
    pub fn with_heartbeat_interval(mut self, every: Option<Duration>) -> Self {
        self.streams.heartbeat_interval = every.filter(|d| !d.is_zero());
        self
    }

    /// The body size cap (413 beyond).
    pub fn with_max_body_bytes(mut self, max: usize) -> Self {
        self.limits.max_body_bytes = max;
        self
    }

    /// Whether GET opens a listening stream (mcp-go: `WithDisableStreaming` turns it off).
    pub fn with_get_stream(mut self, enabled: bool) -> Self {
        self.enable_get_stream = enabled;
        self
    }

    /// Whether DELETE terminates sessions (405 otherwise).
    pub fn with_delete(mut self, enabled: bool) -> Self {
        self.enable_delete = enabled;
        self
    }

    /// CORS (mcp-go: `WithStreamableHTTPCORS`).
    pub fn with_cors(mut self, cors: CorsConfig) -> Self {
        self.security.cors = Some(cors);
        self
    }

    /// RFC 9728 metadata (mcp-go: `WithProtectedResourceMetadata`).
    pub fn with_protected_resource(mut self, metadata: ProtectedResourceMetadata) -> Self {
        self.security.protected_resource = Some(metadata);
        self.security.apply_public_url();
        self
    }

    /// Serves liveness and readiness ([`Health`]): `GET`/`HEAD` on its paths, answered
    /// before `Host` validation and authentication. Default: off.
    pub fn with_health(mut self, health: Health) -> Self {
        self.health = health;
        self
    }

    /// The URL clients use for the endpoint, behind a reverse proxy
    /// (`"https://mcp.example.com/mcp".parse()?`): it fills an empty RFC 9728 `resource`
    /// ([`ProtectedResourceMetadata::for_public_url`]), and `Host`/`Origin` validation
    /// admits its host and origin besides what [`HostValidation`] allows.
    pub fn with_public_url(mut self, url: PublicUrl) -> Self {
        self.security.proxies.public_url = Some(url);
        self.security.apply_public_url();
        self
    }

    /// The reverse proxies whose `Forwarded` and `X-Forwarded-For`/`-Proto`/`-Host`
    /// headers are believed (addresses or CIDR ranges: `"10.0.0.0/8".parse()?`); from any
    /// other peer they are ignored. Default: none.
    pub fn with_trusted_proxies(mut self, proxies: impl IntoIterator<Item = ProxyNet>) -> Self {
        self.security.proxies.trusted_proxies = proxies.into_iter().collect();
        self
    }

    /// The auth hook (mcp-go: its auth middleware).
    pub fn with_authenticator(mut self, auth: impl Authenticator + Send + 'static) -> Self {
        self.security.authenticator = Some(Box::new(auth));
        self
    }

    /// Sets [`requires_verdict`](SecurityConfig::requires_verdict).
    pub fn with_requires_verdict(mut self, required: bool) -> Self {
        self.security.requires_verdict = required;
        self
    }

    /// Whether `head` is a request the authentication step judges (the MCP endpoint, not a
    /// CORS preflight, not the protected resource metadata).
    pub fn needs_authentication(&self, head: &super::RequestHead<'_>) -> bool {
        super::security::needs_authentication(
            &self.endpoint_path,
            self.security.protected_resource.as_ref(),
            head,
        )
    }

    /// The session id generator (a CSPRNG-backed one, or a shared one for many instances).
    pub fn with_session_ids(mut self, ids: impl SessionIdGenerator + Send + 'static) -> Self {
        self.session_ids = Some(Box::new(ids));
        self
    }

    /// Installs `ids` unless a generator is already configured (what adapters call, so a
    /// user's own generator wins).
    pub fn or_session_ids(self, ids: impl SessionIdGenerator + Send + 'static) -> Self {
        if self.session_ids.is_some() {
            self
        } else {
            self.with_session_ids(ids)
        }
    }

    /// **Insecure, for tests only**: predictable session ids (`insecure-test-session-1`, …)
    /// from [`DeterministicSessionIds`]. Anyone who can guess an id can use the session.
    pub fn with_insecure_test_session_ids(self) -> Self {
        self.with_session_ids(DeterministicSessionIds::default())
    }

    /// [`with_insecure_test_session_ids`](Self::with_insecure_test_session_ids) unless a
    /// generator is already configured: **for test harnesses only**.
    pub fn with_insecure_test_session_ids_unless_set(self) -> Self {
        self.or_session_ids(DeterministicSessionIds::default())
    }

    /// How many bytes an adapter may take from a streaming body before it reports them with
    /// [`Router::handle_written`](super::Router::handle_written): a quarter of
    /// [`send_window`](ServerLimits::send_window).
    pub fn write_report_threshold(&self) -> usize {
        (self.limits.send_window / 4).max(1)
    }

    /// The pacing window (see [`ServerLimits::send_window`]; at least 1 byte).
    pub fn with_send_window(mut self, bytes: usize) -> Self {
        self.limits.send_window = bytes.max(1);
        self
    }

    /// The slow-reader rule (see [`ServerLimits::slow_reader_timeout`] and
    /// [`ServerLimits::max_backlog_bytes`]).
    pub fn with_slow_reader(mut self, timeout: Duration, max_backlog_bytes: usize) -> Self {
        self.limits.slow_reader_timeout = timeout;
        self.limits.max_backlog_bytes = max_backlog_bytes;
        self
    }

    /// The GET takeover budget (see [`ServerLimits::listen_takeovers`]).
    pub fn with_listen_takeovers(mut self, takeovers: u32, window: Duration) -> Self {
        self.limits.listen_takeovers = takeovers;
        self.limits.listen_takeover_window = window;
        self
    }

    /// Makes the router a member of a cluster sharing sessions through a store (see
    /// [`ClusterConfig`](super::ClusterConfig)); the driver executes its store operations.
    pub fn with_cluster(mut self, cluster: super::ClusterConfig) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// The event store.
    pub fn with_event_store(mut self, store: impl EventStore + Send + 'static) -> Self {
        self.event_store = Box::new(store);
        self
    }

    /// Host/Origin validation.
    pub fn with_host_validation(mut self, validation: HostValidation) -> Self {
        self.security.host_validation = validation;
        self
    }

    /// Resumability (event ids, event store, `Last-Event-ID` replay).
    pub fn with_resumability(mut self, enabled: bool) -> Self {
        self.streams.resumability = enabled;
        self
    }

    /// The `retry` interval announced before server-side closes.
    pub fn with_retry_interval(mut self, retry: Duration) -> Self {
        self.streams.retry_interval = retry;
        self
    }

    /// Capacity and overflow policy of the queue for a GET stream that is not open.
    pub fn with_listen_queue(mut self, capacity: usize, policy: OverflowPolicy) -> Self {
        self.limits.listen_queue_capacity = capacity;
        self.streams.overflow_policy = policy;
        self
    }

    /// The default deadline of server→client requests.
    pub fn with_server_request_timeout(mut self, timeout: Duration) -> Self {
        self.streams.server_request_timeout = timeout;
        self
    }

    /// How long a resumable stream whose client went away keeps its handlers running.
    pub fn with_resume_grace(mut self, grace: Duration) -> Self {
        self.streams.resume_grace = grace;
        self
    }

    /// How long a finished request stream stays replayable.
    pub fn with_finished_stream_retention(mut self, retention: Duration) -> Self {
        self.streams.finished_stream_retention = retention;
        self
    }

    /// The most messages in one 2025-03-26 batch.
    pub fn with_max_batch_len(mut self, max: usize) -> Self {
        self.limits.max_batch_len = max;
        self
    }

    /// The revisions accepted and negotiated.
    pub fn with_supported_versions(
        mut self,
        versions: impl IntoIterator<Item = ProtocolVersion>,
    ) -> Self {
        self.supported_versions = versions.into_iter().collect();
        self
    }

    /// Serves the modern era (2026-07-28) next to the legacy revisions: every revision in
    /// [`ProtocolVersion::ALL`] (the default).
    pub fn with_modern(mut self) -> Self {
        self.supported_versions = ProtocolVersion::ALL.to_vec();
        self
    }

    /// Serves the legacy revisions only ([`ProtocolVersion::LEGACY`]): 2026-07-28 requests
    /// get 400 with -32000, as a server written before that revision answers them.
    pub fn legacy_only(mut self) -> Self {
        self.supported_versions = ProtocolVersion::LEGACY.to_vec();
        self
    }

    /// The cap on modern requests in flight (see [`ServerLimits::max_modern_in_flight`]).
    pub fn with_max_modern_in_flight(mut self, max: usize) -> Self {
        self.limits.max_modern_in_flight = max;
        self
    }

    /// The rate limits (see [`ServerLimits::rate`]), e.g.
    /// `RateLimits::default().per_principal(20, 40).per_address(50, 100)`.
    pub fn with_rate_limits(mut self, limits: super::RateLimits) -> Self {
        self.limits.rate = limits;
        self
    }

    /// Whether a modern revision is among [`supported_versions`](Self::supported_versions).
    pub fn modern_enabled(&self) -> bool {
        self.supported_versions
            .iter()
            .any(|v| v.era() == crate::Era::Modern)
    }

    /// The `x-mcp-header` declarations of the tools (see [`ServerConfig::param_headers`]).
    pub fn with_param_headers(mut self, table: crate::mirror::ParamHeaderTable) -> Self {
        self.param_headers = Some(table);
        self
    }

    // S-SEC-5.
    /// Adjusts `Host` validation to the address the server is bound to: loopback validation
    /// for a loopback address (the DNS-rebinding defence), none for any other
    /// address unless an allow-list was already configured. Adapters call this with their
    /// bind address; the default (no call) stays loopback-only, which fails closed.
    pub fn bound_to(mut self, ip: IpAddr) -> Self {
        if matches!(self.security.host_validation, HostValidation::Loopback) && !ip.is_loopback() {
            self.security.host_validation = HostValidation::Disabled;
        }
        self
    }
}
