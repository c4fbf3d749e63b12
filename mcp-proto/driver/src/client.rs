//! The client side of the driver: [`ClientDriver`] (the per-turn logic), its run loop, the
//! one builder vocabulary of every adapter ([`Connect`]) and the [`ClientHandle`] it starts.
//!
//! # Theory of operation
//!
//! One task owns the [`ClientSession`] and the [`ClientBinding`]. Each turn it applies what
//! the service client queued, drains the session's outputs (an HTTP intent becomes an
//! exchange the adapter's [`Engine`] starts, an abort drops that exchange, server requests
//! become handler tasks, events are logged at the severity they deserve), then waits for the
//! earliest of a close, a network event, a wake-up from the client, or the session's
//! deadline, and feeds what fired with the time. An exchange reports what it observed through
//! its [`NetEvents`]: the head, each body chunk, the end, or a classified failure.
//!
//! | exchange (per intent) | event | next |
//! |---|---|---|
//! | running | `Head`, `Body` | running (fed to the session) |
//! | running | `End`, `Failed` | gone (fed, then dropped) |
//! | running | the session's `Abort`, or the driver stopped | gone (dropped: the engine aborts it) |

use mcp_proto::HandleMap;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_channel::{mpsc, oneshot};
use futures_core::Stream;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};

use super::signal::{Latch, Wakeup};
use super::{Runtime, Woke, short_id, until};
use mcp_proto::auth::AuthHttpRequest;
use mcp_proto::client::{
    ClientConfig, ClientEvent, ClientSession, HeaderContext, HttpRequest, Input, Output,
    RequestOutcome, RequestResult, StreamId, TlsFailure, TransportFailure,
};
use mcp_proto::version::ProtocolVersion;
use mcp_service::bind::{ClientBinding, Routed, Wake};
use mcp_service::client::{Client as ServiceClient, ClientBuilder, RequestError};
use mcp_service::server::BoxFuture;

/// An adapter's HTTP client under the driver.
pub trait Engine: Sized + Send + 'static {
    /// Its runtime.
    type Runtime: Runtime;
    /// Its own options (connector, pool, timeouts), set with [`Connect::http`].
    type Options: Default + Send + 'static;
    /// A running exchange: dropping it aborts the exchange.
    type Exchange: Send + 'static;
    /// The client name [`ClientHandle::connect`] announces by default.
    const NAME: &'static str;

    /// The engine for `url` (already known to be absolute), or why the URL cannot be used.
    ///
    /// # Errors
    ///
    /// A URL this engine cannot reach (e.g. a scheme it does not speak).
    fn build(options: Self::Options, url: &Uri) -> Result<(Self, Self::Runtime), ConnectError>;

    /// Starts carrying `request` to the endpoint; what it observes goes to `events`.
    fn start(&mut self, request: HttpRequest, events: NetEvents) -> Self::Exchange;

    /// An engine for another URL of the same connection: the OAuth requests (metadata,
    /// registration, token endpoints) go to the URL of each request, through an engine
    /// built for it. The default builds one with the default options; an engine whose
    /// options matter there too (a TLS connector, a proxy, a shared pool) overrides it.
    ///
    /// # Errors
    ///
    /// A URL this engine cannot reach.
    fn for_url(&self, url: &Uri) -> Result<Self, ConnectError> {
        Self::build(Self::Options::default(), url).map(|(engine, _)| engine)
    }
}

/// Why [`ClientHandle::connect`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not absolute, or its scheme is not one the HTTP client speaks.
    InvalidUrl(String),
    /// The URL is `https://` and this build has no TLS (the adapter's `tls` feature is off).
    TlsUnavailable(String),
    /// The TLS handshake with `host` failed during `initialize`: its certificate was refused
    /// (`reason` says why), or the two sides could not agree.
    Tls {
        /// The host dialled (a name or an address, without the port).
        host: String,
        /// Why.
        reason: TlsFailure,
    },
    /// The connection to `url` could not be established (`initialize` went nowhere):
    /// `error` is the operating system's reason (connection refused, no route, a name that
    /// does not resolve).
    Connect {
        /// The URL given to the builder.
        url: String,
        /// Why.
        error: std::io::Error,
    },
    /// `initialize` failed.
    Initialize(RequestError),
    /// The OAuth configuration cannot work ([`Connect::oauth`]).
    OAuth(mcp_proto::auth::AuthError),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::InvalidUrl(why) => write!(f, "invalid URL: {why}"),
            ConnectError::TlsUnavailable(url) => {
                write!(f, "{url}: this build has no TLS (the `tls` feature is off)")
            }
            ConnectError::Tls { host, reason } => write!(f, "TLS with {host} failed: {reason}"),
            ConnectError::Connect { url, error } => write!(f, "cannot connect to {url}: {error}"),
            ConnectError::Initialize(e) => write!(f, "initialize failed: {e}"),
            ConnectError::OAuth(e) => write!(f, "OAuth: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectError::Initialize(e) => Some(e),
            ConnectError::Connect { error, .. } => Some(error),
            ConnectError::OAuth(e) => Some(e),
            _ => None,
        }
    }
}

impl ConnectError {
    /// The error of a failed `initialize` to `url`: [`Tls`](ConnectError::Tls) when the
    /// exchange failed in its TLS handshake, [`Connect`](ConnectError::Connect) (with the
    /// reason an exchange recorded in `dial`) when it could not connect.
    fn initialize(error: RequestError, url: &str, uri: &Uri, dial: &DialError) -> ConnectError {
        use mcp_proto::client::ClientError;
        use mcp_service::PeerError;
        let failure = match &error {
            RequestError::Transport(
                PeerError::Interrupted(ClientError::Transport(failure))
                | PeerError::Client(ClientError::Transport(failure)),
            ) => Some(*failure),
            _ => None,
        };
        match failure {
            Some(TransportFailure::Tls(reason)) => ConnectError::Tls {
                host: uri.host().unwrap_or_default().to_owned(),
                reason,
            },
            Some(TransportFailure::Connect) => ConnectError::Connect {
                url: url.to_owned(),
                error: crate::lock(dial)
                    .take()
                    .unwrap_or_else(|| std::io::Error::other("connection failed")),
            },
            _ => ConnectError::Initialize(error),
        }
    }
}

/// What an exchange observed.
#[derive(Debug)]
pub enum NetEventKind {
    /// The response head.
    Head(StatusCode, HeaderMap),
    /// A body chunk.
    Body(Bytes),
    /// The body's end.
    End,
    /// A failure below HTTP.
    Failed(TransportFailure),
}

/// What an exchange observed, and which.
#[derive(Debug)]
pub struct NetEvent {
    /// The exchange.
    pub stream: StreamId,
    /// What.
    pub kind: NetEventKind,
}

/// Which machine an exchange belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The session's.
    Session(StreamId),
    /// The OAuth flow's.
    Auth(mcp_proto::auth::AuthRequestId),
}

/// Why the last connection attempt failed, as an exchange reported it
/// ([`NetEvents::failed_with`]), for [`ConnectError::Connect`].
type DialError = Arc<std::sync::Mutex<Option<std::io::Error>>>;

/// How an exchange reports to the driver. Each call says whether the driver still listens.
#[derive(Debug, Clone)]
pub struct NetEvents {
    tx: mpsc::UnboundedSender<(Target, NetEventKind)>,
    target: Target,
    dial: DialError,
}

impl NetEvents {
    fn emit(&self, kind: NetEventKind) -> bool {
        self.tx.unbounded_send((self.target, kind)).is_ok()
    }

    /// The response head arrived.
    pub fn head(&self, status: StatusCode, headers: HeaderMap) -> bool {
        self.emit(NetEventKind::Head(status, headers))
    }

    /// A body chunk arrived.
    pub fn body(&self, chunk: Bytes) -> bool {
        self.emit(NetEventKind::Body(chunk))
    }

    /// The body ended.
    pub fn end(self) {
        self.emit(NetEventKind::End);
    }

    /// The exchange failed below HTTP.
    pub fn failed(self, kind: TransportFailure) {
        self.emit(NetEventKind::Failed(kind));
    }

    /// The exchange failed below HTTP because of `cause`: for a
    /// [`Connect`](TransportFailure::Connect) failure, the I/O error in `cause`'s chain (the
    /// operating system's reason) is what [`ConnectError::Connect`] reports.
    pub fn failed_with(self, kind: TransportFailure, cause: &(dyn std::error::Error + 'static)) {
        if kind == TransportFailure::Connect {
            *crate::lock(&self.dial) = Some(io_error_in(cause));
        }
        self.failed(kind);
    }
}

/// A copy of the first [`std::io::Error`] in `cause`'s source chain (the error itself when
/// there is none).
fn io_error_in(cause: &(dyn std::error::Error + 'static)) -> std::io::Error {
    let mut next = Some(cause);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.raw_os_error() {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::new(io.kind(), io.to_string()),
            };
        }
        next = e.source();
    }
    std::io::Error::other(cause.to_string())
}

/// The per-turn logic of a client driver: the [`ClientSession`], the [`ClientBinding`] and
/// the running exchanges `X` by stream.
pub struct ClientDriver<X> {
    session: ClientSession,
    binding: ClientBinding,
    exchanges: HandleMap<StreamId, X>,
    tap: Option<Tap>,
    /// Boxed: most clients have no OAuth flow, and the part is large.
    auth: Option<Box<super::oauth::AuthPart<X>>>,
    /// Where the session's era verdicts go, and under which origin.
    eras: Option<(super::EraCache, Box<str>)>,
}

/// Sees every session output before the driver acts on it ([`ClientDriver::with_tap`]).
type Tap = Box<dyn FnMut(&Output) + Send>;

impl<X> std::fmt::Debug for ClientDriver<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientDriver")
            .field("exchanges", &self.exchanges.len())
            .finish_non_exhaustive()
    }
}

impl<X> ClientDriver<X> {
    /// A driver of a client built from `definition`; `wake` as for [`ClientBinding::new`].
    pub fn new(definition: ClientBuilder, config: ClientConfig, now: Instant, wake: Wake) -> Self {
        ClientDriver {
            session: ClientSession::new(config, now),
            binding: ClientBinding::new(definition, wake),
            exchanges: HandleMap::default(),
            tap: None,
            auth: None,
            eras: None,
        }
    }

    /// Records the session's era verdicts (`ClientEvent::KnownEraChanged`) in `cache` under
    /// `origin`. The session's configuration should start from what `cache` knows
    /// ([`ClientConfig::with_known_era`]); [`Connect::era_cache`] does both.
    pub fn with_era_cache(mut self, cache: super::EraCache, origin: impl Into<String>) -> Self {
        self.eras = Some((cache, origin.into().into_boxed_str()));
        self
    }

    /// Shows every session output to `tap` first (traces in tests, metrics).
    pub fn with_tap(mut self, tap: impl FnMut(&Output) + Send + 'static) -> Self {
        self.tap = Some(Box::new(tap));
        self
    }

    /// The service client (cheap to clone; hand it to the application).
    pub fn client(&self) -> &ServiceClient {
        self.binding.client()
    }

    /// The session (inspection).
    pub fn session(&self) -> &ClientSession {
        &self.session
    }

    /// The session (deadlines, closing).
    pub fn session_mut(&mut self) -> &mut ClientSession {
        &mut self.session
    }

    /// Feeds what an exchange of either machine observed.
    fn net_target(&mut self, now: Instant, (target, kind): (Target, NetEventKind)) {
        match target {
            Target::Session(stream) => self.net(now, NetEvent { stream, kind }),
            Target::Auth(id) => {
                if let Some(auth) = self.auth.as_mut() {
                    auth.net(now, id, kind);
                }
            }
        }
    }

    /// Feeds what an exchange observed (ignored once the exchange was aborted).
    pub fn net(&mut self, now: Instant, event: NetEvent) {
        let stream = event.stream;
        let input = match event.kind {
            NetEventKind::Head(status, headers) => {
                if self.exchanges.contains_key(&stream) {
                    self.session.handle_input(
                        now,
                        Input::ResponseHead {
                            stream,
                            status,
                            headers: &headers,
                        },
                    );
                }
                return;
            }
            NetEventKind::Body(chunk) if self.exchanges.contains_key(&stream) => {
                Input::Body { stream, chunk }
            }
            NetEventKind::Body(_) => return,
            NetEventKind::End => Input::End { stream },
            NetEventKind::Failed(kind) => Input::Failed { stream, kind },
        };
        let last = !matches!(input, Input::Body { .. });
        if !last || self.exchanges.remove(&stream).is_some() {
            self.session.handle_input(now, input);
        }
    }

    /// Applies what the client queued and drains the session until nothing moves: intents go
    /// to `start`, handler futures to `spawn`. Says whether anything moved.
    pub fn pump(
        &mut self,
        now: Instant,
        start: &mut dyn FnMut(HttpRequest) -> X,
        spawn: &mut dyn FnMut(BoxFuture<'static, ()>),
    ) -> bool {
        let moved = super::until_still(|| {
            let applied = self.binding.apply(&mut self.session, now);
            let mut moved = false;
            while let Some(out) = self.session.poll_output() {
                moved = true;
                if let Some(tap) = &mut self.tap {
                    tap(&out);
                }
                if let Some(auth) = self.auth.as_mut() {
                    match &out {
                        Output::Event(ClientEvent::AwaitingAuthorization { status, challenge }) => {
                            // The MCP server wants a DPoP nonce (RFC 9449 §9): the held
                            // request goes again with it, once per nonce; the same nonce
                            // asked again is the authorization flow's to handle.
                            let nonce = challenge
                                .dpop_nonce
                                .as_deref()
                                .filter(|_| challenge.error.as_deref() == Some("use_dpop_nonce"));
                            if let Some(n) = nonce
                                && self.session.set_dpop_nonce(n)
                            {
                                self.session.authorized(now);
                            } else {
                                auth.machine.handle_challenge(now, *status, challenge);
                            }
                        }
                        Output::Outcome(RequestOutcome {
                            result: RequestResult::Response { .. },
                            ..
                        }) => auth.machine.handle_accepted(),
                        _ => {}
                    }
                }
                match self.binding.handle_output(out) {
                    Routed::Spawn(task) => spawn(task),
                    Routed::Done => {}
                    Routed::Transport(Output::Http(req)) => {
                        let stream = req.stream;
                        let exchange = start(req);
                        self.exchanges.insert(stream, exchange);
                    }
                    Routed::Transport(Output::Abort(stream)) => {
                        self.exchanges.remove(&stream);
                    }
                    Routed::Transport(Output::Event(event)) => {
                        if let (ClientEvent::KnownEraChanged { era }, Some((cache, origin))) =
                            (&event, &self.eras)
                        {
                            cache.set(origin, *era);
                        }
                        log_event(&event);
                    }
                    Routed::Transport(other) => tracing::trace!(?other, "client output"),
                }
            }
            applied || moved
        });
        // Nothing left to do this turn: an idle session keeps no empty buffers.
        self.session.shrink_idle();
        if self.exchanges.is_empty() && self.exchanges.capacity() > 0 {
            self.exchanges = HandleMap::default();
        }
        moved
    }

    /// Drains the OAuth machine, if there is one: its intents go to `start`, the
    /// authorization handler's task to `spawn`. Says whether anything moved.
    fn pump_auth(
        &mut self,
        now: Instant,
        start: &mut dyn FnMut(AuthHttpRequest) -> Option<X>,
        spawn: &mut dyn FnMut(BoxFuture<'static, ()>),
    ) -> bool {
        match self.auth.as_mut() {
            Some(auth) => auth.pump(now, &mut self.session, start, spawn),
            None => false,
        }
    }

    /// The earliest deadline of the session and of the OAuth machine.
    fn poll_timeout(&self) -> Option<Instant> {
        let auth = self.auth.as_ref().and_then(|a| a.machine.poll_timeout());
        self.session.poll_timeout().into_iter().chain(auth).min()
    }

    /// Fires the timers of the session and of the OAuth machine.
    fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
        if let Some(auth) = self.auth.as_mut() {
            auth.machine.handle_timeout(now);
        }
    }
}

/// Logs a core event as structured fields: what the application would want to know about at
/// `warn`, recoveries (expiry, re-initialization, reconnects) at `info`, the routine
/// lifecycle at `debug`. A session id appears only as its first 8 characters (it works like
/// a bearer secret); errors by their message.
fn log_event(event: &ClientEvent) {
    use tracing::{debug, info, warn};
    let short = |id: &Option<Box<str>>| id.as_deref().map(short_id).unwrap_or_default();
    match event {
        ClientEvent::Initialized {
            session_id,
            version,
        } => debug!(session = %short(session_id), %version, "mcp client: initialized"),
        ClientEvent::Ready { acknowledged } => match acknowledged {
            Ok(()) => debug!("mcp client: ready"),
            Err(error) => debug!(%error, "mcp client: ready (notifications/initialized refused)"),
        },
        ClientEvent::SessionExpired { session_id } => {
            info!(session = %short_id(session_id), "mcp client: session expired (404)");
        }
        ClientEvent::Reinitialized {
            session_id,
            version,
            retried,
        } => info!(
            session = %short(session_id),
            %version,
            retried,
            "mcp client: re-initialized"
        ),
        ClientEvent::ReinitializeFailed { error } => {
            warn!(%error, "mcp client: re-initialization failed");
        }
        ClientEvent::ListenUnsupported => debug!("mcp client: the server has no GET stream"),
        ClientEvent::ListenOpened {
            stream,
            resumed_from,
        } => debug!(
            %stream,
            resumed_from = resumed_from.as_deref().unwrap_or(""),
            "mcp client: GET stream open"
        ),
        ClientEvent::Reconnecting {
            role,
            delay,
            attempt,
            server_retry,
            ..
        } => info!(
            stream = %role_name(role),
            delay_ms = delay.as_millis() as u64,
            attempt,
            server_retry_ms = server_retry.map(|r| r.as_millis() as u64),
            "mcp client: reconnecting"
        ),
        ClientEvent::Resumed {
            role,
            stream,
            last_event_id,
        } => info!(
            stream = %role_name(role),
            exchange = %stream,
            last_event_id = &**last_event_id,
            "mcp client: stream resumed"
        ),
        ClientEvent::EventsLost { role, stream } => warn!(
            stream = %role_name(role),
            exchange = %stream,
            "mcp client: events lost (evicted by the server before the resume)"
        ),
        ClientEvent::ListenGaveUp { reason } => {
            warn!(reason = ?reason, "mcp client: GET stream given up");
        }
        ClientEvent::AuthorizationRequired {
            stream,
            status,
            challenge,
        } => warn!(
            exchange = %stream,
            status = status.as_u16(),
            error = challenge.error.as_deref().unwrap_or(""),
            scope = challenge.scope.as_deref().unwrap_or(""),
            "mcp client: authorization required"
        ),
        ClientEvent::AwaitingAuthorization { status, challenge } => info!(
            status = status.as_u16(),
            error = challenge.error.as_deref().unwrap_or(""),
            scope = challenge.scope.as_deref().unwrap_or(""),
            "mcp client: waiting for authorization"
        ),
        ClientEvent::LimitExceeded { stream, limit } => warn!(
            exchange = stream.map(|s| s.to_string()).unwrap_or_default(),
            limit = ?limit,
            "mcp client: limit exceeded"
        ),
        ClientEvent::UnmatchedResponse { stream, id } => debug!(
            exchange = %stream,
            id = id.as_ref().map(ToString::to_string).unwrap_or_default(),
            "mcp client: response to no request in flight, dropped"
        ),
        ClientEvent::InvalidMessage { stream, error } => {
            warn!(exchange = %stream, %error, "mcp client: invalid message, dropped");
        }
        ClientEvent::PostRejected {
            stream,
            method,
            error,
        } => warn!(
            exchange = %stream,
            method = method.as_deref().unwrap_or(""),
            %error,
            "mcp client: POST refused"
        ),
        ClientEvent::InvalidBearerToken => {
            warn!("mcp client: the bearer token is not a valid header value; not sent");
        }
        ClientEvent::EraDetected {
            era,
            version,
            cached,
        } => debug!(
            era = ?era,
            version = version.map(|v| v.to_string()).unwrap_or_default(),
            cached,
            "mcp client: era detected"
        ),
        ClientEvent::SubscriptionEnded { stream } => {
            debug!(exchange = %stream, "mcp client: subscriptions/listen ended");
        }
        ClientEvent::InvalidToolDefinition { tool, reason } => {
            warn!(
                tool = &**tool,
                reason = &**reason,
                "mcp client: invalid tool, dropped"
            );
        }
        ClientEvent::Closed { reason } => debug!(reason = ?reason, "mcp client: closed"),
        ClientEvent::KnownEraChanged { era } => debug!(?era, "mcp client: known era changed"),
        other => debug!(event = ?other, "mcp client: event"),
    }
}

/// A logical stream, for logs: `listen`, or `request <id>`.
fn role_name(role: &mcp_proto::client::StreamRole) -> String {
    match role {
        mcp_proto::client::StreamRole::Listen => "listen".to_owned(),
        mcp_proto::client::StreamRole::Request(id) => format!("request {id}"),
        other => format!("{other:?}"),
    }
}

// S-SESS-9.
/// An MCP client on engine `E`: the service [`ClientHandle`](ServiceClient) (reach it through
/// `Deref` or [`ClientHandle::client`]) driven by a task that owns the transport's state machine.
///
/// Dropping it closes the session in the background (the driver sends the DELETE when the
/// server issued a session id, then aborts every exchange and ends);
/// [`ClientHandle::close`] does the same and waits for it. Clones of the service client fail their
/// calls afterwards.
pub struct ClientHandle<E> {
    client: ServiceClient,
    close: Option<oneshot::Sender<()>>,
    stopped: Latch,
    engine: PhantomData<fn() -> E>,
}

impl<E> std::fmt::Debug for ClientHandle<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("client", &self.client)
            .field("stopped", &self.stopped.is_set())
            .finish()
    }
}

impl<E> std::ops::Deref for ClientHandle<E> {
    type Target = ServiceClient;

    fn deref(&self) -> &ServiceClient {
        &self.client
    }
}

impl<E: Engine> ClientHandle<E> {
    /// Connects to the MCP endpoint at `url` (e.g. `http://127.0.0.1:8080/mcp`) with the
    /// default options, and initializes the session.
    ///
    /// # Errors
    ///
    /// A URL the engine cannot use; an `initialize` that fails.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::builder(url).connect().await
    }

    /// A builder for the options of a connection to `url` (see [`Connect`]).
    pub fn builder(url: &str) -> Connect<E> {
        Connect::new(url)
    }

    /// [`connect`](ClientHandle::connect) with a client definition and a transport configuration
    /// used as given (its jitter seed included).
    ///
    /// # Errors
    ///
    /// As [`connect`](ClientHandle::connect).
    pub async fn connect_with(
        url: &str,
        definition: ClientBuilder,
        config: ClientConfig,
    ) -> Result<Self, ConnectError> {
        Self::builder(url)
            .definition(definition)
            .config(config)
            .connect()
            .await
    }

    /// Starts the driver without initializing (the caller sends `initialize`).
    ///
    /// # Errors
    ///
    /// A URL the engine cannot use.
    pub fn start(
        url: &str,
        definition: ClientBuilder,
        config: ClientConfig,
    ) -> Result<Self, ConnectError> {
        Self::builder(url)
            .definition(definition)
            .config(config)
            .start()
    }
}

impl<E> ClientHandle<E> {
    /// The service client (cheap to clone).
    pub fn client(&self) -> &ServiceClient {
        &self.client
    }

    /// Closes the session (a DELETE when the server issued an id) and waits for the driver
    /// to finish. Waiting calls fail. Wrap it in a timeout to bound the wait (the DELETE
    /// itself is bounded by [`ClientConfig::with_close_timeout`]).
    pub async fn close(mut self) {
        // The driver hears the close when the sender goes.
        self.close.take();
        self.stopped.wait().await;
    }
}

/// The options of a connection (mcp-go: the `StreamableHTTPCOption`s), from
/// [`ClientHandle::builder`]; [`connect`](Connect::connect) or [`start`](Connect::start) it.
///
/// Every transport option of [`ClientConfig`] is reachable: through the shortcuts below or
/// through [`config`](Connect::config) as a whole; the engine's own options (a connector, a
/// pool) through [`http`](Connect::http).
pub struct Connect<E: Engine> {
    url: String,
    definition: Option<ClientBuilder>,
    config: ClientConfig,
    /// Whether `config` came whole from the caller (then its seed is kept).
    config_given: bool,
    /// Static headers set by [`header`](Self::header)/[`headers`](Self::headers), applied
    /// over `config` at start.
    headers: Option<HeaderMap>,
    seed: Option<u64>,
    options: E::Options,
    oauth: Option<super::oauth::OAuth>,
    eras: Option<super::EraCache>,
}

impl<E: Engine> std::fmt::Debug for Connect<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connect")
            .field("url", &self.url)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<E: Engine> Connect<E> {
    fn new(url: &str) -> Self {
        Connect {
            url: url.to_owned(),
            definition: None,
            config: ClientConfig::new(),
            config_given: false,
            headers: None,
            seed: None,
            options: E::Options::default(),
            oauth: None,
            eras: None,
        }
    }

    /// The client's definition: its name and version, capabilities, and the handlers of
    /// server requests (sampling, elicitation, roots). Default: the adapter's name with no
    /// capabilities.
    pub fn definition(mut self, definition: ClientBuilder) -> Self {
        self.definition = Some(definition);
        self
    }

    /// The whole transport configuration, used as given (replaces what the shortcuts below
    /// set before this call; its jitter seed is kept unless [`seed`](Self::seed) follows).
    pub fn config(mut self, config: ClientConfig) -> Self {
        self.config = config;
        self.config_given = true;
        self.headers = None;
        self
    }

    fn map(mut self, f: impl FnOnce(ClientConfig) -> ClientConfig) -> Self {
        self.config = f(self.config);
        self
    }

    /// The engine's own options (connector, pool, timeouts: see the adapter).
    pub fn http(mut self, f: impl FnOnce(E::Options) -> E::Options) -> Self {
        self.options = f(self.options);
        self
    }

    // S-GET-1.
    /// Opens the GET listening stream once the session is ready (mcp-go:
    /// `WithContinuousListening`; needed for server requests outside a call).
    pub fn continuous_listening(self, on: bool) -> Self {
        self.map(|c| c.with_continuous_listening(on))
    }

    /// Static headers sent on every request (mcp-go: `WithHTTPHeaders`), replacing those
    /// set before. The protocol's own headers win over them.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        self.headers = Some(headers);
        self
    }

    /// Adds one static header (mcp-go: `WithHTTPHeaders`) to those set by
    /// [`headers`](Self::headers) or earlier calls.
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.get_or_insert_default().append(name, value);
        self
    }

    /// A per-request header callback (mcp-go: `WithHTTPHeaderFunc`).
    pub fn header_fn(
        self,
        f: impl FnMut(&HeaderContext<'_>, &mut HeaderMap) + Send + 'static,
    ) -> Self {
        self.map(|c| c.with_header_fn(f))
    }

    // S-AUTH-2.
    /// A bearer-token provider asked on every request: `Some(token)` adds
    /// `Authorization: Bearer <token>`.
    pub fn bearer_token_provider(self, f: impl FnMut() -> Option<String> + Send + 'static) -> Self {
        self.map(|c| c.with_bearer_token_provider(f))
    }

    /// OAuth 2.1 as the MCP authorization specification describes it (see
    /// [`mcp_proto::auth`]): on a `401` (or a `403` with `insufficient_scope`) the driver holds
    /// the refused messages, discovers the authorization server, registers or uses the
    /// configured identity, obtains a token (awaiting the [`OAuth::on_authorize`] handler
    /// when a person must authorize), and sends the held messages again with it; it also
    /// refreshes the token before it expires. The token goes on every request; a
    /// [`bearer_token_provider`](Self::bearer_token_provider), when it returns a token,
    /// still takes precedence. The flow's requests are carried by this connection's engine
    /// ([`Engine::for_url`]).
    ///
    /// [`OAuth::on_authorize`]: super::OAuth::on_authorize
    pub fn oauth(mut self, oauth: super::oauth::OAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Shares `cache`, the era known per origin: with [`EraMode::Auto`] or `Modern`
    /// ([`ClientConfig::with_era`]), a known legacy origin is not probed, a known modern one is
    /// probed at its version, and what this session learns is written back.
    ///
    /// [`EraMode::Auto`]: mcp_proto::client::EraMode::Auto
    pub fn era_cache(mut self, cache: super::EraCache) -> Self {
        self.eras = Some(cache);
        self
    }

    // S-SESS-4.
    /// Starts from a known session (mcp-go: `WithSession`): no `initialize` is sent, every
    /// request carries `id` and `version`. [`connect`](Self::connect) then does
    /// not initialize either.
    pub fn session(self, id: impl Into<String>, version: ProtocolVersion) -> Self {
        self.map(|c| c.with_session(id, version))
    }

    // S-LIFE-12.
    /// A deadline for every request (none by default): past it the request fails
    /// with a timeout and is cancelled.
    pub fn request_timeout(self, timeout: Option<Duration>) -> Self {
        self.map(|c| c.with_request_timeout(timeout))
    }

    /// How long closing waits for the DELETE (default 5 s, as mcp-go).
    pub fn close_timeout(self, timeout: Duration) -> Self {
        self.map(|c| c.with_close_timeout(timeout))
    }

    /// The seed of the reconnect jitter. Default: random from the operating system (so that
    /// clients do not reconnect in step), or the seed of a [`config`](Self::config) given
    /// whole. Tests pass a fixed one.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Starts the driver and initializes the session (unless it starts from a known
    /// [`session`](Self::session) or version, then it is ready at once).
    ///
    /// It returns once `initialize` is answered, when `notifications/initialized` has been
    /// POSTed but its answer may still be on its way: requests made at once are queued
    /// until the server has acknowledged it, so they never overtake it.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); an `initialize` that fails.
    pub async fn connect(self) -> Result<ClientHandle<E>, ConnectError> {
        let uri = parse_url(&self.url)?;
        let url = self.url.clone();
        let (client, ready, dial) = self.launch()?;
        if !ready {
            client
                .client
                .initialize()
                .await
                .map_err(|e| ConnectError::initialize(e, &url, &uri, &dial))?;
        }
        Ok(client)
    }

    /// Starts the driver without initializing (the caller sends `initialize`).
    ///
    /// # Errors
    ///
    /// A URL that is not absolute, or that the engine cannot reach.
    pub fn start(self) -> Result<ClientHandle<E>, ConnectError> {
        self.launch().map(|(client, _, _)| client)
    }

    /// Starts the driver; also says whether the session is ready without an `initialize`,
    /// and where the exchanges record why a connection failed.
    fn launch(self) -> Result<(ClientHandle<E>, bool, DialError), ConnectError> {
        let uri = parse_url(&self.url)?;
        let (engine, rt) = E::build(self.options, &uri)?;
        let mut config = self.config;
        if let Some(headers) = self.headers {
            config = config.with_headers(headers);
        }
        if let Some(seed) = self.seed.or_else(|| (!self.config_given).then(random_seed)) {
            config = config.with_seed(seed);
        }
        let definition = self
            .definition
            .unwrap_or_else(|| ServiceClient::builder(E::NAME, env!("CARGO_PKG_VERSION")));
        let (redirect_tx, redirect_rx) = mpsc::unbounded();
        let auth = match self.oauth {
            Some(o) => {
                let retries = o.config.limits().max_authorization_retries;
                config = config.with_authorization_hold(Some(retries));
                let machine =
                    mcp_proto::auth::OAuthClient::new(o.config, &self.url, super::oauth::OsEntropy)
                        .map_err(ConnectError::OAuth)?;
                Some(super::oauth::AuthPart::new(
                    machine,
                    o.on_authorize,
                    redirect_tx,
                ))
            }
            None => None,
        };
        let origin = self.eras.as_ref().map(|_| super::EraCache::origin_of(&uri));
        if let (Some(cache), Some(origin)) = (&self.eras, &origin) {
            config = config.with_known_era(cache.get(origin));
        }
        let wakeup = Arc::new(Wakeup::default());
        // The runtime's timer, for the client's waits between a task's polls.
        let definition = if definition.has_timer() {
            definition
        } else {
            definition.timer(super::binding_sleep(&rt))
        };
        // The server's address, for the telemetry (`server.address`, `server.port`).
        let definition = match uri.host() {
            Some(host) if !definition.has_server_address() => {
                let port = uri.port_u16().or(match uri.scheme_str() {
                    Some("https") => Some(443),
                    Some("http") => Some(80),
                    _ => None,
                });
                definition.server_address(host.trim_start_matches('[').trim_end_matches(']'), port)
            }
            _ => definition,
        };
        let mut driver = ClientDriver::new(definition, config, rt.now(), wakeup.callback());
        if let (Some(cache), Some(origin)) = (self.eras, origin) {
            driver = driver.with_era_cache(cache, origin);
        }
        if let Some(auth) = auth {
            if let Some(token) = auth.machine.access_token() {
                let _ = driver.session.set_bearer_token(Some(token));
            }
            driver.auth = Some(Box::new(auth));
        }
        let client = driver.client().clone();
        let ready = driver.session.is_ready();
        let (close, close_rx) = oneshot::channel();
        let stopped = Latch::new();
        let on_stop = stopped.set_on_drop();
        let runtime = rt.clone();
        let dial = DialError::default();
        let net = dial.clone();
        // `run` itself, not an `async` block around it: a wrapper would hold run's arguments
        // twice (as its captures and inside run's future).
        let fut = run(
            runtime,
            engine,
            Box::new(driver),
            Inputs {
                close: close_rx,
                redirects: redirect_rx,
                wakeup,
                dial: net,
                on_stop,
            },
        );
        rt.spawn(Box::pin(fut));
        let client = ClientHandle {
            client,
            close: Some(close),
            stopped,
            engine: PhantomData,
        };
        Ok((client, ready, dial))
    }
}

/// `url` as an absolute URI.
fn parse_url(url: &str) -> Result<Uri, ConnectError> {
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| ConnectError::InvalidUrl(format!("{url}: {e}")))?;
    if uri.scheme().is_none() || uri.authority().is_none() {
        return Err(ConnectError::InvalidUrl(format!(
            "{url}: only absolute URLs are supported"
        )));
    }
    Ok(uri)
}

/// A jitter seed from the operating system's random source (a fixed one if it has none:
/// the jitter then only loses its spread across processes).
fn random_seed() -> u64 {
    getrandom::u64().unwrap_or_else(|e| {
        tracing::debug!(error = %e, "no random source for the jitter seed");
        0x6D63_702D_6472_6976
    })
}

enum Fired {
    Close,
    Net((Target, NetEventKind)),
    Redirected(super::oauth::Redirected),
}

/// The engines of the OAuth flow's URLs, built once per URL (bounded: the flow touches a
/// handful of URLs; a full cache is emptied).
struct AuthEngines<E>(HashMap<String, E>);

/// The most URLs whose engines are kept.
const MAX_AUTH_ENGINES: usize = 32;

impl<E: Engine> AuthEngines<E> {
    fn start(&mut self, base: &E, req: AuthHttpRequest, events: NetEvents) -> Option<E::Exchange> {
        let key = req.url.to_string();
        if !self.0.contains_key(&key) {
            if self.0.len() >= MAX_AUTH_ENGINES {
                self.0.clear();
            }
            match base.for_url(&req.url) {
                Ok(e) => {
                    self.0.insert(key.clone(), e);
                }
                Err(e) => {
                    tracing::warn!(error = %e, url = %req.url, "oauth: no engine for this URL");
                    return None;
                }
            }
        }
        let engine = self.0.get_mut(&key)?;
        let request = HttpRequest {
            stream: StreamId::UNALLOCATED,
            kind: mcp_proto::client::HttpRequestKind::Authorization,
            method: req.method,
            headers: req.headers,
            body: req.body,
        };
        Some(engine.start(request, events))
    }
}

/// What the run loop listens to besides the network, and what it sets when it stops.
struct Inputs {
    close: oneshot::Receiver<()>,
    redirects: mpsc::UnboundedReceiver<super::oauth::Redirected>,
    wakeup: Arc<Wakeup>,
    dial: DialError,
    /// Dropped when the loop ends: the [`ClientHandle`]'s stop latch is set.
    on_stop: super::signal::SetOnDrop,
}

/// The run loop: until the session is closed. The driver comes boxed: the loop's future
/// (one per client session, on the heap) then holds a pointer, not the driver's ≈ 1.3 KB
/// again at each await point.
async fn run<E: Engine>(
    rt: E::Runtime,
    mut engine: E,
    mut driver: Box<ClientDriver<E::Exchange>>,
    inputs: Inputs,
) {
    let Inputs {
        close,
        mut redirects,
        wakeup,
        dial,
        on_stop: _on_stop,
    } = inputs;
    let (net_tx, mut net_rx) = mpsc::unbounded();
    let mut close = Some(close);
    let mut auth_engines = AuthEngines::<E>(HashMap::new());
    // Set when the driver ends: the handlers of server requests stop with it.
    let stop = Latch::new();
    let _stop = stop.set_on_drop();
    let mut spawn = |task| rt.spawn(Box::pin(until(task, stop.clone())));
    loop {
        super::until_still(|| {
            let now = rt.now();
            let mut start = |req: HttpRequest| {
                let events = NetEvents {
                    tx: net_tx.clone(),
                    target: Target::Session(req.stream),
                    dial: dial.clone(),
                };
                engine.start(req, events)
            };
            let a = driver.pump(now, &mut start, &mut spawn);
            let mut start_auth = |req: AuthHttpRequest| {
                let events = NetEvents {
                    tx: net_tx.clone(),
                    target: Target::Auth(req.id),
                    dial: dial.clone(),
                };
                auth_engines.start(&engine, req, events)
            };
            let b = driver.pump_auth(now, &mut start_auth, &mut spawn);
            a || b
        });
        if driver.session.is_closed() {
            break;
        }
        // A close first, then network events, then the authorization handler.
        let woke = super::wait(&rt, driver.poll_timeout(), &wakeup, |cx| {
            if let Some(rx) = close.as_mut()
                && Pin::new(rx).poll(cx).is_ready()
            {
                // `close` sent nothing: its sender was dropped (closed or dropped Client).
                close = None;
                return Poll::Ready(Fired::Close);
            }
            if let Poll::Ready(Some(event)) = Pin::new(&mut net_rx).poll_next(cx) {
                return Poll::Ready(Fired::Net(event));
            }
            match Pin::new(&mut redirects).poll_next(cx) {
                Poll::Ready(Some(r)) => Poll::Ready(Fired::Redirected(r)),
                _ => Poll::Pending,
            }
        })
        .await;
        match woke {
            Woke::Input(Fired::Close) => driver.session.close(rt.now()),
            Woke::Input(Fired::Net(event)) => {
                let now = rt.now();
                driver.net_target(now, event);
                for _ in 0..256 {
                    match net_rx.try_recv() {
                        Ok(event) => driver.net_target(now, event),
                        _ => break,
                    }
                }
            }
            Woke::Input(Fired::Redirected(r)) => {
                if let Some(auth) = driver.auth.as_mut() {
                    auth.redirected(rt.now(), r);
                }
            }
            Woke::Wake => {}
            Woke::Deadline => driver.handle_timeout(rt.now()),
        }
    }
    // Dropping the exchanges aborts them.
    driver.exchanges.clear();
    if let Some(auth) = driver.auth.as_mut() {
        auth.clear();
    }
    driver.binding.client().close();
    tracing::debug!("mcp client driver stopped");
}
