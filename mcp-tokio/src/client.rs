//! The client driver: a [`ClientSession`] and a [`ClientBinding`] owned by one task, their
//! HTTP intents carried by hyper-util's legacy client.
//!
//! Each turn: apply what the service client queued, drain the session's outputs (an HTTP
//! intent spawns an exchange task, an abort aborts it, server requests are spawned into the
//! driver's handler set, events become `tracing` records), then wait for the earliest of a network event, a wake-up from
//! the client, the session's deadline, or a close, and feed what fired with `Instant::now()`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::client::legacy::{Client as HttpClient, ResponseFuture};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use mcp_proto::client::{
    ClientConfig, ClientEvent, ClientSession, HeaderContext, HttpRequest, Input, Output, StreamId,
    TransportFailure,
};
use mcp_proto::service::bind::{ClientBinding, Routed};
use mcp_proto::service::client::{Client as ServiceClient, ClientBuilder, RequestError};
use mcp_proto::version::ProtocolVersion;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};

/// Why [`Client::connect`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not an absolute `http://` URL.
    InvalidUrl(String),
    /// `initialize` failed.
    Initialize(RequestError),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::InvalidUrl(why) => write!(f, "invalid URL: {why}"),
            ConnectError::Initialize(e) => write!(f, "initialize failed: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectError::Initialize(e) => Some(e),
            ConnectError::InvalidUrl(_) => None,
        }
    }
}

/// An MCP client over tokio + hyper: the service [`Client`](ServiceClient) (reach it through
/// `Deref` or [`Client::client`]) driven by a task that owns the transport's state machine.
///
/// Dropping it closes the session in the background (the driver sends the DELETE when the
/// server issued a session id, S-SESS-9, then aborts every exchange and ends); [`Client::close`]
/// does the same and waits for it. Clones of the service client fail their calls afterwards.
#[derive(Debug)]
pub struct Client {
    client: ServiceClient,
    close: watch::Sender<bool>,
    driver: tokio::task::JoinHandle<()>,
}

impl std::ops::Deref for Client {
    type Target = ServiceClient;

    fn deref(&self) -> &ServiceClient {
        &self.client
    }
}

impl Client {
    /// Connects to the MCP endpoint at `url` (e.g. `http://127.0.0.1:8080/mcp`) as client
    /// `mcp-tokio` with the default options, and initializes the session.
    ///
    /// # Errors
    ///
    /// A URL that is not absolute `http://`; an `initialize` that fails.
    pub async fn connect(url: &str) -> Result<Client, ConnectError> {
        Client::builder(url).connect().await
    }

    /// A builder for the options of a connection to `url` (see [`ConnectBuilder`]).
    pub fn builder(url: &str) -> ConnectBuilder {
        ConnectBuilder::new(url)
    }

    /// [`connect`](Client::connect) with a client definition and a transport configuration
    /// used as given (its jitter seed included).
    ///
    /// # Errors
    ///
    /// As [`connect`](Client::connect).
    pub async fn connect_with(
        url: &str,
        builder: ClientBuilder,
        config: ClientConfig,
    ) -> Result<Client, ConnectError> {
        Client::builder(url)
            .definition(builder)
            .config(config)
            .connect()
            .await
    }

    /// Starts the driver without initializing (the caller sends `initialize`).
    ///
    /// # Errors
    ///
    /// A URL that is not absolute `http://`.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(
        url: &str,
        builder: ClientBuilder,
        config: ClientConfig,
    ) -> Result<Client, ConnectError> {
        Client::builder(url)
            .definition(builder)
            .config(config)
            .start()
    }

    /// The service client (cheap to clone).
    pub fn client(&self) -> &ServiceClient {
        &self.client
    }

    /// Closes the session (a DELETE when the server issued an id) and waits for the driver
    /// to finish. Waiting calls fail. Wrap it in a timeout to bound the wait (the DELETE
    /// itself is bounded by [`ClientConfig::with_close_timeout`]).
    pub async fn close(self) {
        let _ = self.close.send(true);
        let _ = self.driver.await;
    }
}

/// What carries the HTTP exchanges: hyper-util's legacy client over any connector.
trait Transport: Send + Sync + 'static {
    fn request(&self, req: Request<Full<Bytes>>) -> ResponseFuture;
}

impl<C> Transport for HttpClient<C, Full<Bytes>>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    fn request(&self, req: Request<Full<Bytes>>) -> ResponseFuture {
        HttpClient::request(self, req)
    }
}

/// Which HTTP client the driver uses.
enum Http {
    /// hyper-util's client over an [`HttpConnector`] with `TCP_NODELAY`: `http://` only.
    Default { connect_timeout: Option<Duration> },
    /// The caller's client or connector (TLS, proxies, Unix sockets...): any scheme it
    /// supports.
    Custom(Arc<dyn Transport>),
}

/// The options of a connection (seed: the `StreamableHTTPCOption`s), from
/// [`Client::builder`]; [`connect`](ConnectBuilder::connect) or
/// [`start`](ConnectBuilder::start) it.
///
/// ```no_run
/// # async fn run() -> Result<(), mcp_tokio::ConnectError> {
/// use std::time::Duration;
/// let client = mcp_tokio::Client::builder("http://127.0.0.1:8080/mcp")
///     .continuous_listening(true)
///     .header(http::header::USER_AGENT, http::HeaderValue::from_static("my-agent/1"))
///     .bearer_token_provider(|| std::env::var("TOKEN").ok())
///     .request_timeout(Some(Duration::from_secs(60)))
///     .connect()
///     .await?;
/// # let _ = client; Ok(()) }
/// ```
///
/// Every transport option of [`ClientConfig`] is reachable: through the shortcuts below or
/// through [`config`](ConnectBuilder::config) as a whole. The HTTP client is hyper-util's
/// (HTTP/1.1 keep-alive pool, `TCP_NODELAY`) unless [`http_client`](ConnectBuilder::http_client)
/// or [`connector`](ConnectBuilder::connector) replaces it.
pub struct ConnectBuilder {
    url: String,
    definition: ClientBuilder,
    config: ClientConfig,
    /// Whether `config` came whole from the caller (then its seed is kept).
    config_given: bool,
    /// Static headers set by [`header`](Self::header)/[`headers`](Self::headers), applied
    /// over `config` at start.
    headers: Option<HeaderMap>,
    seed: Option<u64>,
    http: Http,
}

impl std::fmt::Debug for ConnectBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectBuilder")
            .field("url", &self.url)
            .field("config", &self.config)
            .field(
                "http",
                &match &self.http {
                    Http::Default { connect_timeout } => format!("default ({connect_timeout:?})"),
                    Http::Custom(_) => "custom".to_owned(),
                },
            )
            .finish_non_exhaustive()
    }
}

impl ConnectBuilder {
    fn new(url: &str) -> ConnectBuilder {
        ConnectBuilder {
            url: url.to_owned(),
            definition: ServiceClient::builder("mcp-tokio", env!("CARGO_PKG_VERSION")),
            config: ClientConfig::new(),
            config_given: false,
            headers: None,
            seed: None,
            http: Http::Default {
                connect_timeout: None,
            },
        }
    }

    /// The client's definition: its name and version, capabilities, and the handlers of
    /// server requests (sampling, elicitation, roots). Default: `mcp-tokio` with no
    /// capabilities.
    pub fn definition(mut self, definition: ClientBuilder) -> Self {
        self.definition = definition;
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

    /// Opens the GET listening stream once the session is ready (seed:
    /// `WithContinuousListening`; needed for server requests outside a call, S-GET-1).
    pub fn continuous_listening(self, on: bool) -> Self {
        self.map(|c| c.with_continuous_listening(on))
    }

    /// Static headers sent on every request (seed: `WithHTTPHeaders`), replacing those set
    /// before. The protocol's own headers win over them.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        self.headers = Some(headers);
        self
    }

    /// Adds one static header (seed: `WithHTTPHeaders`) to those set by
    /// [`headers`](Self::headers) or earlier calls.
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.get_or_insert_default().append(name, value);
        self
    }

    /// A per-request header callback (seed: `WithHTTPHeaderFunc`).
    pub fn header_fn(
        self,
        f: impl FnMut(&HeaderContext<'_>, &mut HeaderMap) + Send + 'static,
    ) -> Self {
        self.map(|c| c.with_header_fn(f))
    }

    /// A bearer-token provider asked on every request (S-AUTH-2): `Some(token)` adds
    /// `Authorization: Bearer <token>`.
    pub fn bearer_token_provider(self, f: impl FnMut() -> Option<String> + Send + 'static) -> Self {
        self.map(|c| c.with_bearer_token_provider(f))
    }

    /// Starts from a known session (seed: `WithSession`): no `initialize` is sent, every
    /// request carries `id` and `version` (S-SESS-4). [`connect`](Self::connect) then does
    /// not initialize either.
    pub fn session(self, id: impl Into<String>, version: ProtocolVersion) -> Self {
        self.map(|c| c.with_session(id, version))
    }

    /// A deadline for every request (S-LIFE-12; none by default): past it the request fails
    /// with a timeout and is cancelled.
    pub fn request_timeout(self, timeout: Option<Duration>) -> Self {
        self.map(|c| c.with_request_timeout(timeout))
    }

    /// How long closing waits for the DELETE (default 5 s, as the seed).
    pub fn close_timeout(self, timeout: Duration) -> Self {
        self.map(|c| c.with_close_timeout(timeout))
    }

    /// The TCP connect timeout of the default HTTP client (default: none, the operating
    /// system's). Ignored with a custom [`http_client`](Self::http_client) or
    /// [`connector`](Self::connector), which carry their own.
    pub fn connect_timeout(mut self, timeout: Option<Duration>) -> Self {
        if let Http::Default { connect_timeout } = &mut self.http {
            *connect_timeout = timeout;
        }
        self
    }

    /// The seed of the reconnect jitter. Default: random from the operating system (so that
    /// clients do not reconnect in step), or the seed of a [`config`](Self::config) given
    /// whole. Tests pass a fixed one.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// A custom hyper-util client (seed: `WithHTTPBasicClient`): its pool, its connector (TLS,
    /// a proxy...), its executor. With it any URL scheme its connector accepts is allowed.
    /// Requests bodies are [`Full<Bytes>`](http_body_util::Full).
    pub fn http_client<C>(mut self, client: HttpClient<C, Full<Bytes>>) -> Self
    where
        C: Connect + Clone + Send + Sync + 'static,
    {
        self.http = Http::Custom(Arc::new(client));
        self
    }

    /// A custom connector (TLS, a proxy, Unix sockets...) under hyper-util's client on tokio.
    /// With it any URL scheme the connector accepts is allowed.
    pub fn connector<C>(self, connector: C) -> Self
    where
        C: Connect + Clone + Send + Sync + 'static,
    {
        let client = HttpClient::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .build(connector);
        self.http_client(client)
    }

    /// Starts the driver and initializes the session (unless it starts from a known
    /// [`session`](Self::session) or version, then it is ready at once).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); an `initialize` that fails.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn connect(self) -> Result<Client, ConnectError> {
        let (client, ready) = self.launch()?;
        if !ready {
            client
                .client
                .initialize()
                .await
                .map_err(ConnectError::Initialize)?;
        }
        Ok(client)
    }

    /// Starts the driver without initializing (the caller sends `initialize`).
    ///
    /// # Errors
    ///
    /// A URL that is not absolute, or (with the default HTTP client) not `http://`.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(self) -> Result<Client, ConnectError> {
        self.launch().map(|(client, _)| client)
    }

    /// Starts the driver; also says whether the session is ready without an `initialize`.
    fn launch(self) -> Result<(Client, bool), ConnectError> {
        let url = self.url.as_str();
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| ConnectError::InvalidUrl(e.to_string()))?;
        let scheme_ok = match &self.http {
            Http::Default { .. } => uri.scheme_str() == Some("http"),
            Http::Custom(_) => uri.scheme().is_some(),
        };
        if !scheme_ok || uri.authority().is_none() {
            let expected = match &self.http {
                Http::Default { .. } => "absolute http://",
                Http::Custom(_) => "absolute",
            };
            return Err(ConnectError::InvalidUrl(format!(
                "{url}: only {expected} URLs are supported"
            )));
        }
        let http: Arc<dyn Transport> = match self.http {
            Http::Custom(http) => http,
            Http::Default { connect_timeout } => {
                let mut connector = HttpConnector::new();
                connector.set_nodelay(true);
                connector.set_connect_timeout(connect_timeout);
                Arc::new(
                    HttpClient::builder(TokioExecutor::new())
                        .pool_timer(TokioTimer::new())
                        .build(connector),
                )
            }
        };
        let mut config = self.config;
        if let Some(headers) = self.headers {
            config = config.with_headers(headers);
        }
        if let Some(seed) = self.seed.or_else(|| (!self.config_given).then(random_seed)) {
            config = config.with_seed(seed);
        }
        let wake = Arc::new(Notify::new());
        let waker = wake.clone();
        let binding = ClientBinding::new(self.definition, Arc::new(move || waker.notify_one()));
        let client = binding.client().clone();
        let (close, close_rx) = watch::channel(false);
        let session = ClientSession::new(config, Instant::now());
        let ready = session.is_ready();
        let driver = Driver {
            session,
            binding,
            http,
            uri,
            exchanges: HashMap::new(),
            handlers: JoinSet::new(),
        };
        let driver = tokio::spawn(driver.run(wake, close_rx));
        let client = Client {
            client,
            close,
            driver,
        };
        Ok((client, ready))
    }
}

/// A jitter seed from the operating system's random source (a fixed one if it has none:
/// the jitter then only loses its spread across processes).
fn random_seed() -> u64 {
    getrandom::u64().unwrap_or_else(|e| {
        tracing::debug!(error = %e, "no random source for the jitter seed");
        0x6D63_702D_746F_6B69
    })
}

/// Logs a core event: what the application would want to know about at `warn`, recoveries
/// (expiry, re-initialization, reconnects) at `info`, the routine lifecycle at `debug`.
fn log_event(event: &ClientEvent) {
    match event {
        ClientEvent::ReinitializeFailed { .. }
        | ClientEvent::ListenGaveUp { .. }
        | ClientEvent::AuthorizationRequired { .. }
        | ClientEvent::LimitExceeded { .. }
        | ClientEvent::InvalidMessage { .. }
        | ClientEvent::PostRejected { .. }
        | ClientEvent::InvalidBearerToken => tracing::warn!(?event, "mcp client"),
        ClientEvent::SessionExpired { .. }
        | ClientEvent::Reinitialized { .. }
        | ClientEvent::Reconnecting { .. }
        | ClientEvent::Resumed { .. } => tracing::info!(?event, "mcp client"),
        _ => tracing::debug!(?event, "mcp client"),
    }
}

/// What an exchange task observed.
enum NetEvent {
    Head(StreamId, StatusCode, HeaderMap),
    Body(StreamId, Bytes),
    End(StreamId),
    Failed(StreamId, TransportFailure),
}

struct Driver {
    session: ClientSession,
    binding: ClientBinding,
    http: Arc<dyn Transport>,
    uri: Uri,
    exchanges: HashMap<StreamId, AbortHandle>,
    /// The application's handlers of server requests (sampling, elicitation, roots):
    /// dropping the set when the driver ends aborts those still running.
    handlers: JoinSet<()>,
}

impl Driver {
    async fn run(mut self, wake: Arc<Notify>, mut close: watch::Receiver<bool>) {
        let (net_tx, mut net_rx) = mpsc::unbounded_channel();
        let mut closing = false;
        loop {
            self.pump(Instant::now(), &net_tx);
            // Reap finished handlers so the set holds only running ones.
            while self.handlers.try_join_next().is_some() {}
            if self.session.is_closed() {
                break;
            }
            let deadline = self.session.poll_timeout();
            if deadline.is_some_and(|d| d <= Instant::now()) {
                self.session.handle_timeout(Instant::now());
                continue;
            }
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                changed = close.changed(), if !closing => {
                    if changed.is_err() || *close.borrow() {
                        closing = true;
                        self.session.close(Instant::now());
                    }
                }
                Some(event) = net_rx.recv() => {
                    self.net(event);
                    for _ in 0..256 {
                        match net_rx.try_recv() {
                            Ok(event) => self.net(event),
                            Err(_) => break,
                        }
                    }
                }
                () = wake.notified() => {}
                () = sleep => self.session.handle_timeout(Instant::now()),
            }
        }
        for (_, task) in self.exchanges.drain() {
            task.abort();
        }
        self.handlers.abort_all();
        self.binding.client().close();
        tracing::debug!("mcp-tokio client driver stopped");
    }

    fn net(&mut self, event: NetEvent) {
        let now = Instant::now();
        match event {
            NetEvent::Head(stream, status, headers) => {
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
            }
            NetEvent::Body(stream, chunk) => {
                if self.exchanges.contains_key(&stream) {
                    self.session
                        .handle_input(now, Input::Body { stream, chunk });
                }
            }
            NetEvent::End(stream) => {
                if self.exchanges.remove(&stream).is_some() {
                    self.session.handle_input(now, Input::End { stream });
                }
            }
            NetEvent::Failed(stream, kind) => {
                if self.exchanges.remove(&stream).is_some() {
                    self.session
                        .handle_input(now, Input::Failed { stream, kind });
                }
            }
        }
    }

    fn pump(&mut self, now: Instant, net: &mpsc::UnboundedSender<NetEvent>) {
        loop {
            let applied = self.binding.apply(&mut self.session, now);
            let mut moved = false;
            while let Some(out) = self.session.poll_output() {
                moved = true;
                match self.binding.handle_output(out) {
                    Routed::Spawn(task) => {
                        self.handlers.spawn(task);
                    }
                    Routed::Done => {}
                    Routed::Transport(Output::Http(req)) => self.start(req, net.clone()),
                    Routed::Transport(Output::Abort(stream)) => {
                        if let Some(task) = self.exchanges.remove(&stream) {
                            task.abort();
                        }
                    }
                    Routed::Transport(Output::Event(event)) => log_event(&event),
                    Routed::Transport(other) => tracing::trace!(?other, "client output"),
                }
            }
            if !applied && !moved {
                return;
            }
        }
    }

    fn start(&mut self, req: HttpRequest, net: mpsc::UnboundedSender<NetEvent>) {
        let stream = req.stream;
        let mut request = Request::new(Full::new(req.body));
        *request.method_mut() = req.method;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = req.headers;
        let response = self.http.request(request);
        let task = tokio::spawn(async move {
            let response = match response.await {
                Ok(r) => r,
                Err(e) => {
                    let kind = if e.is_connect() {
                        TransportFailure::Connect
                    } else {
                        TransportFailure::Reset
                    };
                    tracing::debug!(error = %e, "exchange failed");
                    let _ = net.send(NetEvent::Failed(stream, kind));
                    return;
                }
            };
            let (parts, mut body) = response.into_parts();
            if net
                .send(NetEvent::Head(stream, parts.status, parts.headers))
                .is_err()
            {
                return;
            }
            loop {
                let event = match body.frame().await {
                    None => NetEvent::End(stream),
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(chunk) => NetEvent::Body(stream, chunk),
                        Err(_) => continue,
                    },
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "response body failed");
                        NetEvent::Failed(stream, TransportFailure::Reset)
                    }
                };
                let last = !matches!(event, NetEvent::Body(..));
                if net.send(event).is_err() || last {
                    return;
                }
            }
        });
        self.exchanges.insert(stream, task.abort_handle());
    }
}

#[cfg(test)]
mod tests {
    //! Loopback tests of the builder's options and of dropping: an [`McpService`] behind a
    //! hyper server that records the method and headers of every request it sees.

    use std::future::Future;
    use std::net::SocketAddr;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};

    use http::Method;
    use hyper::server::conn::http1;
    use hyper_util::rt::TokioIo;
    use mcp_proto::schema::{CallToolResult, Tool};
    use mcp_proto::server::ServerConfig;
    use mcp_proto::service::Server;
    use tokio::net::TcpStream;

    use super::*;
    use crate::{McpService, RandomSessionIds};

    const LIMIT: Duration = Duration::from_secs(10);

    async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
        tokio::time::timeout(LIMIT, f)
            .await
            .unwrap_or_else(|_| panic!("timed out: {what}"))
    }

    type Seen = mpsc::UnboundedReceiver<(Method, HeaderMap)>;

    /// A server with an `echo` tool on loopback; every request's method and headers go to
    /// the returned receiver.
    async fn recording_server() -> (String, Seen) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        let server = Server::new("rec", "1")
            .tool(Tool::new("echo"), |_ctx, _args| async {
                Ok(CallToolResult::text("echoed"))
            })
            .tool(Tool::new("wait"), |ctx, _args| async move {
                ctx.cancelled().await;
                Ok(CallToolResult::text("cancelled"))
            });
        let config = ServerConfig::default()
            .with_session_ids(RandomSessionIds)
            .bound_to(addr.ip());
        let service = McpService::new(server, config);
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (service, tx) = (service.clone(), tx.clone());
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let _ = tx.send((req.method().clone(), req.headers().clone()));
                    let service = service.clone();
                    async move { service.handle(req).await }
                });
                tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
            }
        });
        (format!("http://{addr}/mcp"), rx)
    }

    /// Waits for a request with `method`; returns its headers.
    async fn next_with(seen: &mut Seen, method: Method) -> HeaderMap {
        bounded("a recorded request", async {
            loop {
                match seen.recv().await {
                    Some((m, h)) if m == method => return h,
                    Some(_) => {}
                    None => panic!("the recorder stopped"),
                }
            }
        })
        .await
    }

    /// S-SESS-9: dropping the client (not only `close`) sends the DELETE of its session and
    /// ends the driver and its exchanges, the GET listening stream included.
    #[tokio::test]
    async fn dropping_the_client_deletes_the_session_and_ends_its_tasks() {
        let (url, mut seen) = recording_server().await;
        let client = bounded(
            "connect",
            Client::builder(&url).continuous_listening(true).connect(),
        )
        .await
        .expect("connect");
        let init = next_with(&mut seen, Method::POST).await;
        assert!(init.get("mcp-session-id").is_none());
        // The GET listening stream is open: the driver has an exchange task.
        let get = next_with(&mut seen, Method::GET).await;
        let id = get
            .get("mcp-session-id")
            .expect("the GET carries the session")
            .clone();
        // A call in flight when the client is dropped.
        let service = client.client().clone();
        let waiting = tokio::spawn(async move { service.call_tool("wait", ()).await });
        let _call = next_with(&mut seen, Method::POST).await;
        let mut notes = client.notifications();
        drop(client);
        let delete = next_with(&mut seen, Method::DELETE).await;
        assert_eq!(delete.get("mcp-session-id"), Some(&id));
        // The driver ended: the waiting call fails, the notification stream ends.
        let outcome = bounded("the waiting call", waiting).await.expect("task");
        assert!(
            matches!(
                outcome,
                Err(mcp_proto::service::client::RequestError::Transport(_))
            ),
            "{outcome:?}"
        );
        assert!(
            bounded("notifications end", notes.next()).await.is_none(),
            "the notification stream ends with the driver"
        );
    }

    struct NotifyOnDrop(Arc<Notify>);

    impl Drop for NotifyOnDrop {
        fn drop(&mut self) {
            self.0.notify_one();
        }
    }

    /// Dropping the client also ends the application's handler of a server request still
    /// running (a sampling handler that never answers nor watches for cancellation).
    #[tokio::test]
    async fn dropping_the_client_ends_a_running_server_request_handler() {
        use mcp_proto::schema::{CreateMessageRequestParams, Role, SamplingMessage, TextContent};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let server = Server::new("ask", "1").tool(Tool::new("ask"), |ctx, _args| async move {
            let asked = ctx
                .create_message(CreateMessageRequestParams {
                    messages: vec![SamplingMessage::new(Role::User, TextContent::new("hi"))],
                    max_tokens: 10,
                    ..CreateMessageRequestParams::default()
                })
                .await;
            Ok(CallToolResult::text(format!("{}", asked.is_ok())))
        });
        let serving = crate::serve(listener, server, ServerConfig::default()).expect("serve");
        let (started, dropped) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let (s, d) = (started.clone(), dropped.clone());
        let definition = ServiceClient::builder("t", "1").sampling_handler(move |_params| {
            let (s, d) = (s.clone(), d.clone());
            async move {
                let _guard = NotifyOnDrop(d);
                s.notify_one();
                std::future::pending().await
            }
        });
        let client = bounded(
            "connect",
            Client::builder(serving.url())
                .definition(definition)
                .connect(),
        )
        .await
        .expect("connect");
        let service = client.client().clone();
        let call = tokio::spawn(async move { service.call_tool("ask", ()).await });
        bounded("the sampling handler runs", started.notified()).await;
        drop(client);
        bounded("the sampling handler is dropped", dropped.notified()).await;
        let outcome = bounded("the call", call).await.expect("task");
        assert!(outcome.is_err(), "{outcome:?}");
        bounded("shutdown", serving.shutdown()).await;
    }

    /// `close` sends the DELETE too, and waits for the driver.
    #[tokio::test]
    async fn closing_the_client_deletes_the_session() {
        let (url, mut seen) = recording_server().await;
        let client = bounded("connect", Client::connect(&url))
            .await
            .expect("connect");
        bounded("close", client.close()).await;
        let delete = next_with(&mut seen, Method::DELETE).await;
        assert!(delete.get("mcp-session-id").is_some());
    }

    #[derive(Clone)]
    struct CountingConnector {
        inner: HttpConnector,
        dials: Arc<AtomicUsize>,
    }

    type Dialing = Pin<
        Box<
            dyn Future<
                    Output = Result<TokioIo<TcpStream>, Box<dyn std::error::Error + Send + Sync>>,
                > + Send,
        >,
    >;

    impl tower_service::Service<Uri> for CountingConnector {
        type Response = TokioIo<TcpStream>;
        type Error = Box<dyn std::error::Error + Send + Sync>;
        type Future = Dialing;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            tower_service::Service::poll_ready(&mut self.inner, cx).map_err(Into::into)
        }

        fn call(&mut self, uri: Uri) -> Dialing {
            self.dials.fetch_add(1, Ordering::SeqCst);
            let dial = tower_service::Service::call(&mut self.inner, uri);
            Box::pin(async move { dial.await.map_err(Into::into) })
        }
    }

    /// The builder's options reach the wire: static headers, the header callback, the
    /// bearer token (S-AUTH-2), a custom connector; and a request timeout is accepted.
    #[tokio::test]
    async fn builder_options_reach_the_server_through_a_custom_connector() {
        let (url, mut seen) = recording_server().await;
        let dials = Arc::new(AtomicUsize::new(0));
        let connector = CountingConnector {
            inner: HttpConnector::new(),
            dials: dials.clone(),
        };
        let client = bounded(
            "connect",
            Client::builder(&url)
                .definition(ServiceClient::builder("built", "9"))
                .header(
                    HeaderName::from_static("x-static"),
                    HeaderValue::from_static("s"),
                )
                .header_fn(|ctx, headers| {
                    if let Some(method) = ctx.rpc_method
                        && let Ok(v) = HeaderValue::from_str(method)
                    {
                        headers.insert("x-rpc-method", v);
                    }
                })
                .bearer_token_provider(|| Some("tok".to_owned()))
                .request_timeout(Some(LIMIT))
                .close_timeout(LIMIT)
                .connector(connector)
                .seed(7)
                .connect(),
        )
        .await
        .expect("connect");
        let init = next_with(&mut seen, Method::POST).await;
        assert_eq!(init.get("x-static").map(|v| v.as_bytes()), Some(&b"s"[..]));
        assert_eq!(
            init.get("x-rpc-method").map(|v| v.as_bytes()),
            Some(&b"initialize"[..])
        );
        assert_eq!(
            init.get(http::header::AUTHORIZATION).map(|v| v.as_bytes()),
            Some(&b"Bearer tok"[..])
        );
        let result = bounded("echo", client.call_tool("echo", ()))
            .await
            .expect("echo");
        assert_eq!(result.first_text(), Some("echoed"));
        assert!(
            dials.load(Ordering::SeqCst) >= 1,
            "the custom connector dialled"
        );
        bounded("close", client.close()).await;
    }

    /// S-LIFE-12: the builder's request timeout fails a call the server does not answer in
    /// time, and the client tells the server it gave up (a `notifications/cancelled` POST).
    #[tokio::test]
    async fn the_request_timeout_fails_a_slow_call() {
        let (url, mut seen) = recording_server().await;
        let client = bounded(
            "connect",
            Client::builder(&url)
                .request_timeout(Some(Duration::from_millis(100)))
                .header_fn(|ctx, headers| {
                    if let Some(method) = ctx.rpc_method
                        && let Ok(v) = HeaderValue::from_str(method)
                    {
                        headers.insert("x-rpc-method", v);
                    }
                })
                .connect(),
        )
        .await
        .expect("connect");
        let err = bounded("wait", client.call_tool("wait", ()))
            .await
            .expect_err("the server never answers");
        assert!(err.to_string().contains("timed out"), "{err}");
        bounded("the cancellation", async {
            loop {
                let headers = next_with(&mut seen, Method::POST).await;
                if headers.get("x-rpc-method").map(|v| v.as_bytes())
                    == Some(&b"notifications/cancelled"[..])
                {
                    return;
                }
            }
        })
        .await;
        bounded("close", client.close()).await;
    }

    /// A preset session (seed: `WithSession`) is used at once: no `initialize`, and the id
    /// and version go out on the first request (S-SESS-4).
    #[tokio::test]
    async fn a_preset_session_skips_initialize() {
        let (url, mut seen) = recording_server().await;
        let client = bounded(
            "connect",
            Client::builder(&url)
                .session(
                    "0123456789abcdef0123456789abcdef",
                    ProtocolVersion::V2025_06_18,
                )
                .connect(),
        )
        .await
        .expect("a preset session needs no round trip");
        // The server never issued that id: 404, and without a saved initialize the session
        // cannot be repaired automatically, so the call fails.
        let err = bounded("ping", client.ping()).await;
        let first = next_with(&mut seen, Method::POST).await;
        assert_eq!(
            first.get("mcp-session-id").map(|v| v.as_bytes()),
            Some(&b"0123456789abcdef0123456789abcdef"[..])
        );
        assert_eq!(
            first.get("mcp-protocol-version").map(|v| v.as_bytes()),
            Some(&b"2025-06-18"[..])
        );
        assert!(err.is_err(), "an unknown session is refused");
        drop(client);
    }

    /// The default client refuses what it cannot dial; a custom connector may take any
    /// absolute URL.
    #[tokio::test]
    async fn url_schemes_follow_the_http_client() {
        assert!(matches!(
            Client::builder("https://x/mcp").start(),
            Err(ConnectError::InvalidUrl(_))
        ));
        assert!(matches!(
            Client::builder("/mcp").start(),
            Err(ConnectError::InvalidUrl(_))
        ));
        let custom = Client::builder("https://127.0.0.1:1/mcp")
            .connector(HttpConnector::new())
            .start()
            .expect("a custom connector decides which schemes it dials");
        drop(custom);
    }
}
