//! The client driver: a [`ClientSession`] and a [`ClientBinding`] owned by one task, their
//! HTTP intents carried by async-h1 over a small keep-alive pool.
//!
//! Each turn: apply what the service client queued, drain the session's outputs (an HTTP
//! intent spawns an exchange task, an abort drops it, server requests are spawned, events
//! become `tracing` records), then wait for the earliest of a close, a network event, a
//! wake-up from the client, or the session's deadline, and feed what fired with
//! `Instant::now()`.
//!
//! An exchange task: take an idle connection from the [`Pool`] (or connect, `TCP_NODELAY`),
//! write the whole request (async-h1 writes it before reading; our bodies are complete),
//! read the head, then the body chunk by chunk. Only a body read to its end returns the
//! connection to the pool; any failure or abort drops it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use mcp_proto::client::{
    ClientConfig, ClientSession, HttpRequest, Input, Output, StreamId, TransportFailure,
};
use mcp_proto::service::bind::{ClientBinding, Routed};
use mcp_proto::service::client::{Client as ServiceClient, ClientBuilder, RequestError};
use smol::Task;
use smol::channel::{Receiver, Sender};
use smol::future::FutureExt;
use smol::io::AsyncBufReadExt;
use smol::net::TcpStream;

use crate::convert;

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

/// Settings of the HTTP engine under the client (the transport's own settings are in
/// [`ClientConfig`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientOptions {
    /// The most idle keep-alive connections kept for reuse; a connection freed beyond it is
    /// closed. Concurrent requests each use a connection of their own whatever this is.
    /// Default 4.
    pub max_idle_connections: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            max_idle_connections: 4,
        }
    }
}

impl ClientOptions {
    /// Sets [`max_idle_connections`](Self::max_idle_connections) (0 disables reuse).
    pub fn with_max_idle_connections(mut self, max: usize) -> Self {
        self.max_idle_connections = max;
        self
    }
}

/// An MCP client over smol + async-h1: the service [`Client`](ServiceClient) (reach it
/// through `Deref` or [`Client::client`]) driven by a task that owns the transport's state
/// machine.
///
/// Dropping it closes the session in the background; [`Client::close`] closes it and waits.
#[derive(Debug)]
pub struct Client {
    client: ServiceClient,
    close: Sender<()>,
    driver: Option<Task<()>>,
}

impl std::ops::Deref for Client {
    type Target = ServiceClient;

    fn deref(&self) -> &ServiceClient {
        &self.client
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close.close();
        if let Some(driver) = self.driver.take() {
            driver.detach();
        }
    }
}

impl Client {
    /// Connects to the MCP endpoint at `url` (e.g. `http://127.0.0.1:8080/mcp`) as client
    /// `mcp-smol` and initializes the session.
    ///
    /// # Errors
    ///
    /// A URL that is not absolute `http://`; an `initialize` that fails.
    pub async fn connect(url: &str) -> Result<Client, ConnectError> {
        Self::connect_with(
            url,
            ServiceClient::builder("mcp-smol", env!("CARGO_PKG_VERSION")),
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
        let client = Self::start(url, builder, config, ClientOptions::default())?;
        client
            .client
            .initialize()
            .await
            .map_err(ConnectError::Initialize)?;
        Ok(client)
    }

    /// Starts the driver on smol's global executor without initializing (the caller sends
    /// `initialize`).
    ///
    /// # Errors
    ///
    /// A URL that is not absolute `http://`.
    pub fn start(
        url: &str,
        builder: ClientBuilder,
        config: ClientConfig,
        options: ClientOptions,
    ) -> Result<Client, ConnectError> {
        let url = http_types::Url::parse(url)
            .map_err(|e| ConnectError::InvalidUrl(format!("{url}: {e}")))?;
        let host = match url.host_str() {
            Some(host) if url.scheme() == "http" => host.to_owned(),
            _ => {
                return Err(ConnectError::InvalidUrl(format!(
                    "{url}: only absolute http:// URLs are supported"
                )));
            }
        };
        let port = url.port_or_known_default().unwrap_or(80);
        let (wake_tx, wake_rx) = smol::channel::bounded::<()>(1);
        let binding = ClientBinding::new(
            builder,
            Arc::new(move || {
                // A full channel already holds a wake-up.
                let _ = wake_tx.try_send(());
            }),
        );
        let client = binding.client().clone();
        let (close, close_rx) = smol::channel::bounded(1);
        let driver = Driver {
            session: ClientSession::new(config, Instant::now()),
            binding,
            pool: Pool {
                addr: Arc::from(format!("{host}:{port}")),
                idle: Arc::new(Mutex::new(Vec::new())),
                max_idle: options.max_idle_connections,
            },
            url,
            exchanges: HashMap::new(),
        };
        let driver = smol::spawn(driver.run(wake_rx, close_rx));
        Ok(Client {
            client,
            close,
            driver: Some(driver),
        })
    }

    /// The service client (cheap to clone).
    pub fn client(&self) -> &ServiceClient {
        &self.client
    }

    /// Closes the session (a DELETE when the server issued an id) and waits for the driver
    /// to finish. Waiting calls fail. Wrap it in a timeout to bound the wait.
    pub async fn close(mut self) {
        self.close.close();
        if let Some(driver) = self.driver.take() {
            driver.await;
        }
    }
}

/// Idle keep-alive connections to the server, at most `max_idle`.
#[derive(Clone)]
struct Pool {
    addr: Arc<str>,
    idle: Arc<Mutex<Vec<TcpStream>>>,
    max_idle: usize,
}

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<TcpStream>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection the server has not closed, or a new one.
    async fn checkout(&self) -> std::io::Result<TcpStream> {
        loop {
            let Some(tcp) = self.lock().pop() else { break };
            // An idle connection has nothing to read: readable data or EOF means the server
            // closed it (or broke the protocol); a pending peek means it is still open.
            let mut one = [0u8; 1];
            if smol::future::poll_once(tcp.peek(&mut one)).await.is_none() {
                return Ok(tcp);
            }
        }
        let tcp = TcpStream::connect(&*self.addr).await?;
        tcp.set_nodelay(true)?;
        Ok(tcp)
    }

    /// Returns a connection whose last response was read to its end.
    fn checkin(&self, tcp: TcpStream) {
        let mut idle = self.lock();
        if idle.len() < self.max_idle {
            idle.push(tcp);
        }
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
    pool: Pool,
    url: http_types::Url,
    /// The running exchanges; dropping a task cancels it (and drops its connection).
    exchanges: HashMap<StreamId, Task<()>>,
}

enum Fired {
    Close,
    Net(NetEvent),
    Wake,
    Deadline,
}

impl Driver {
    async fn run(mut self, wake: Receiver<()>, close: Receiver<()>) {
        let (net_tx, net_rx) = smol::channel::unbounded();
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
            let fired = async {
                if closing {
                    std::future::pending::<()>().await;
                }
                let _ = close.recv().await;
                Fired::Close
            }
            .or(async {
                match net_rx.recv().await {
                    Ok(event) => Fired::Net(event),
                    // The driver holds a sender: this cannot end.
                    Err(_) => std::future::pending().await,
                }
            })
            .or(async {
                let _ = wake.recv().await;
                Fired::Wake
            })
            .or(async {
                match deadline {
                    Some(d) => {
                        smol::Timer::at(d).await;
                    }
                    None => std::future::pending::<()>().await,
                }
                Fired::Deadline
            })
            .await;
            match fired {
                Fired::Close => {
                    closing = true;
                    self.session.close(Instant::now());
                }
                Fired::Net(event) => {
                    self.net(event);
                    for _ in 0..256 {
                        match net_rx.try_recv() {
                            Ok(event) => self.net(event),
                            Err(_) => break,
                        }
                    }
                }
                Fired::Wake => {}
                Fired::Deadline => self.session.handle_timeout(Instant::now()),
            }
        }
        self.exchanges.clear();
        self.binding.client().close();
        tracing::debug!("mcp-smol client driver stopped");
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
                if let Some(task) = self.exchanges.remove(&stream) {
                    // It ends by itself (it is returning its connection to the pool).
                    task.detach();
                    self.session.handle_input(now, Input::End { stream });
                }
            }
            NetEvent::Failed(stream, kind) => {
                if let Some(task) = self.exchanges.remove(&stream) {
                    task.detach();
                    self.session
                        .handle_input(now, Input::Failed { stream, kind });
                }
            }
        }
    }

    fn pump(&mut self, now: Instant, net: &Sender<NetEvent>) {
        loop {
            let applied = self.binding.apply(&mut self.session, now);
            let mut moved = false;
            while let Some(out) = self.session.poll_output() {
                moved = true;
                match self.binding.handle_output(out) {
                    Routed::Spawn(task) => smol::spawn(task).detach(),
                    Routed::Done => {}
                    Routed::Transport(Output::Http(req)) => self.start(req, net.clone()),
                    Routed::Transport(Output::Abort(stream)) => {
                        // Dropping the task cancels it and closes its connection.
                        self.exchanges.remove(&stream);
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

    fn start(&mut self, req: HttpRequest, net: Sender<NetEvent>) {
        let stream = req.stream;
        let request = match self.request(req) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "request not representable in http-types");
                let _ = net.try_send(NetEvent::Failed(stream, TransportFailure::Other));
                let task = smol::spawn(async {});
                self.exchanges.insert(stream, task);
                return;
            }
        };
        let task = smol::spawn(exchange(self.pool.clone(), request, stream, net));
        self.exchanges.insert(stream, task);
    }

    /// The async-h1 request of an intent: the endpoint's absolute URL, the intent's method,
    /// headers and complete body.
    fn request(&self, req: HttpRequest) -> Result<http_types::Request, convert::Unrepresentable> {
        let method = req
            .method
            .as_str()
            .parse::<http_types::Method>()
            .map_err(|e| convert::Unrepresentable(e.to_string()))?;
        let mut request = http_types::Request::new(method, self.url.clone());
        if !req.body.is_empty() {
            request.set_body(http_types::Body::from_bytes(req.body.to_vec()));
        }
        // `set_body` adds the body's default content type; the session's headers are the
        // only ones.
        request.remove_header("content-type");
        convert::headers_to_h1(&req.headers, |name, value| {
            request.append_header(name, value);
        })?;
        Ok(request)
    }
}

/// One exchange, from checkout to the end of the response body.
async fn exchange(
    pool: Pool,
    request: http_types::Request,
    stream: StreamId,
    net: Sender<NetEvent>,
) {
    let tcp = match pool.checkout().await {
        Ok(tcp) => tcp,
        Err(e) => {
            tracing::debug!(error = %e, "connect failed");
            let _ = net.try_send(NetEvent::Failed(stream, TransportFailure::Connect));
            return;
        }
    };
    let mut response = match async_h1::connect(tcp.clone(), request).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, "exchange failed");
            let kind = if e.downcast_ref::<std::io::Error>().is_some() {
                TransportFailure::Reset
            } else {
                // A head async-h1 could not read (malformed, or a status http-types does
                // not know).
                TransportFailure::Other
            };
            let _ = net.try_send(NetEvent::Failed(stream, kind));
            return;
        }
    };
    let head = convert::status_from_h1(response.status())
        .and_then(|status| Ok((status, convert::response_headers(&response)?)));
    let (status, headers) = match head {
        Ok(head) => head,
        Err(e) => {
            tracing::debug!(error = %e, "response head not representable in http 1.x types");
            let _ = net.try_send(NetEvent::Failed(stream, TransportFailure::Other));
            return;
        }
    };
    // async-h1 frames a body by length or chunks; with neither, it reads none and the
    // connection's state is unknown, so it is not reused. Nor is one the server closes.
    let reusable = (response.len().is_some() || response.header("transfer-encoding").is_some())
        && !response
            .header("connection")
            .is_some_and(|c| c.as_str().eq_ignore_ascii_case("close"));
    if net
        .try_send(NetEvent::Head(stream, status, headers))
        .is_err()
    {
        return;
    }
    let mut body = response.take_body();
    loop {
        let event = match body.fill_buf().await {
            Ok([]) => NetEvent::End(stream),
            Ok(chunk) => NetEvent::Body(stream, Bytes::copy_from_slice(chunk)),
            Err(e) => {
                tracing::debug!(error = %e, "response body failed");
                NetEvent::Failed(stream, TransportFailure::Reset)
            }
        };
        let n = match &event {
            NetEvent::Body(_, chunk) => chunk.len(),
            _ => 0,
        };
        let last = !matches!(event, NetEvent::Body(..));
        if matches!(event, NetEvent::End(_)) && reusable {
            // Back in the pool before the driver hears of the end, so that the request the
            // end lets through finds it.
            drop(body);
            pool.checkin(tcp);
            let _ = net.try_send(event);
            return;
        }
        if net.try_send(event).is_err() || last {
            return;
        }
        std::pin::Pin::new(&mut body).consume(n);
    }
}
