//! The client driver: a [`ClientSession`] and a [`ClientBinding`] owned by one task, their
//! HTTP intents carried by hyper-util's legacy client.
//!
//! Each turn: apply what the service client queued, drain the session's outputs (an HTTP
//! intent spawns an exchange task, an abort aborts it, server requests are spawned, events
//! become `tracing` records), then wait for the earliest of a network event, a wake-up from
//! the client, the session's deadline, or a close, and feed what fired with `Instant::now()`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mcp_proto::client::{
    ClientConfig, ClientSession, HttpRequest, Input, Output, StreamId, TransportFailure,
};
use mcp_proto::service::bind::{ClientBinding, Routed};
use mcp_proto::service::client::{Client as ServiceClient, ClientBuilder, RequestError};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::AbortHandle;

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
/// Dropping it closes the session in the background; [`Client::close`] closes it and waits.
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
    /// `mcp-tokio` and initializes the session.
    ///
    /// # Errors
    ///
    /// A URL that is not absolute `http://`; an `initialize` that fails.
    pub async fn connect(url: &str) -> Result<Client, ConnectError> {
        Self::connect_with(
            url,
            ServiceClient::builder("mcp-tokio", env!("CARGO_PKG_VERSION")),
            ClientConfig::new(),
        )
        .await
    }

    /// [`connect`](Client::connect) with a client definition and a transport configuration.
    ///
    /// # Errors
    ///
    /// As [`connect`](Client::connect).
    pub async fn connect_with(
        url: &str,
        builder: ClientBuilder,
        config: ClientConfig,
    ) -> Result<Client, ConnectError> {
        let client = Self::start(url, builder, config)?;
        client
            .client
            .initialize()
            .await
            .map_err(ConnectError::Initialize)?;
        Ok(client)
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
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| ConnectError::InvalidUrl(e.to_string()))?;
        if uri.scheme_str() != Some("http") || uri.authority().is_none() {
            return Err(ConnectError::InvalidUrl(format!(
                "{url}: only absolute http:// URLs are supported"
            )));
        }
        let wake = Arc::new(Notify::new());
        let waker = wake.clone();
        let binding = ClientBinding::new(builder, Arc::new(move || waker.notify_one()));
        let client = binding.client().clone();
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let http = HttpClient::builder(TokioExecutor::new()).build(connector);
        let (close, close_rx) = watch::channel(false);
        let driver = Driver {
            session: ClientSession::new(config, Instant::now()),
            binding,
            http,
            uri,
            exchanges: HashMap::new(),
        };
        let driver = tokio::spawn(driver.run(wake, close_rx));
        Ok(Client {
            client,
            close,
            driver,
        })
    }

    /// The service client (cheap to clone).
    pub fn client(&self) -> &ServiceClient {
        &self.client
    }

    /// Closes the session (a DELETE when the server issued an id) and waits for the driver
    /// to finish. Waiting calls fail. Wrap it in a timeout to bound the wait.
    pub async fn close(self) {
        let _ = self.close.send(true);
        let _ = self.driver.await;
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
    http: HttpClient<HttpConnector, Full<Bytes>>,
    uri: Uri,
    exchanges: HashMap<StreamId, AbortHandle>,
}

impl Driver {
    async fn run(mut self, wake: Arc<Notify>, mut close: watch::Receiver<bool>) {
        let (net_tx, mut net_rx) = mpsc::unbounded_channel();
        let mut closing = false;
        loop {
            self.pump(Instant::now(), &net_tx);
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
                        tokio::spawn(task);
                    }
                    Routed::Done => {}
                    Routed::Transport(Output::Http(req)) => self.start(req, net.clone()),
                    Routed::Transport(Output::Abort(stream)) => {
                        if let Some(task) = self.exchanges.remove(&stream) {
                            task.abort();
                        }
                    }
                    Routed::Transport(Output::Event(event)) => {
                        tracing::debug!(?event, "client event");
                    }
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
        let http = self.http.clone();
        let task = tokio::spawn(async move {
            let response = match http.request(request).await {
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
