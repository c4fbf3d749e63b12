//! The server: [`serve`] (a TCP accept loop of hyper connections, HTTP/1.1 and HTTP/2, plain
//! or TLS) over [`McpService`] (the hyper and tower service on the driver's
//! [`ServerHandle`]).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, Bytes};
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use mcp_driver::{
    Adapter, DriverConfig, DriverGone, Latch, ResponseAborted, ResponseStream, Runtime, Serve,
    ServerHandle, Serving, accept_loop,
};
use mcp_proto::server::ServerConfig;
use mcp_service::Server;
use mcp_service::server::BoxFuture;
use tokio::net::{TcpListener, TcpStream};

use crate::first::{self, First};

/// tokio as the driver's [`Runtime`]: `tokio::spawn` and tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tokio;

impl Runtime for Tokio {
    type Sleep = tokio::time::Sleep;

    fn sleep_until(&self, deadline: Instant) -> tokio::time::Sleep {
        tokio::time::sleep_until(deadline.into())
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) {
        tokio::spawn(task);
    }
}

/// Serves `server` on `listener` (HTTP/1.1, and HTTP/2 with prior knowledge: h2c;
/// `TCP_NODELAY` on every connection) once [`Serve::start`] is called: the one entry point,
/// a builder over the core's configuration ([`Serve::config`]), the driver's
/// ([`Serve::driver`]: queue bound, deadlines, the authentication step, the cluster store)
/// and TLS ([`Serve::tls`], feature `tls`: each connection's handshake, under
/// [`ServerTls::handshake_timeout`](crate::ServerTls::handshake_timeout), runs in its own
/// task, so a peer that fails it or stalls concerns itself alone; then HTTP/2 or HTTP/1.1 as
/// ALPN chose, and [`Serving::url`] is `https://`).
///
/// ```no_run
/// # async fn run(server: mcp_tokio::service::Server) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let serving = mcp_tokio::serve(listener, server).start()?;
/// # serving.shutdown().await; Ok(()) }
/// ```
///
/// The configuration is adjusted as every adapter must: session ids from
/// [`RandomSessionIds`](crate::RandomSessionIds) unless it has a generator, and
/// [`ServerConfig::bound_to`](mcp_proto::server::ServerConfig::bound_to) the listener's
/// address (loopback `Host` validation for a loopback bind).
///
/// [`Serve::tls`]: mcp_driver::Serve
///
/// # Panics
///
/// [`Serve::start`] panics outside a tokio runtime.
pub fn serve(listener: TcpListener, server: Server) -> Serve<Tokio> {
    Serve::new(listener, server)
}

impl Adapter for Tokio {
    type Listener = TcpListener;
    const TLS: bool = cfg!(feature = "tls");

    fn start(serve: Serve<Tokio>) -> io::Result<Serving> {
        let local_addr = serve.listener.local_addr()?;
        #[cfg(feature = "tls")]
        if let Some(tls) = serve.tls {
            let started =
                Serving::start_https(&Tokio, local_addr, serve.server, serve.config, serve.driver);
            let acceptor =
                tokio_rustls::TlsAcceptor::from(tls.server_config(&[b"h2", b"http/1.1"]));
            let serve_one: ServeOne = Box::new(move |tcp, peer, service| {
                let (handshake, tls) = (acceptor.accept(tcp), tls.clone());
                Box::pin(async move {
                    let handle = service.handle.clone();
                    let tls_stream =
                        mcp_driver::tls::handshake(&Tokio, &tls, &handle, peer, handshake).await;
                    if let Some(stream) = tls_stream {
                        connection(TokioIo::new(stream), peer, service).await;
                    }
                })
            });
            return Ok(launch(serve.listener, started, serve_one));
        }
        let started = Serving::start(&Tokio, local_addr, serve.server, serve.config, serve.driver);
        Ok(launch(
            serve.listener,
            started,
            Box::new(|tcp, peer, service| Box::pin(connection(TokioIo::new(tcp), peer, service))),
        ))
    }
}

/// What runs one accepted connection.
type ServeOne = Box<dyn Fn(TcpStream, SocketAddr, McpService) -> BoxFuture<'static, ()> + Send>;

fn launch(listener: TcpListener, started: (Serving, Latch), serve_one: ServeOne) -> Serving {
    let (serving, accepting) = started;
    let service = McpService {
        handle: serving.handle().clone(),
    };
    let handle = service.handle.clone();
    let serve = move |tcp, peer| serve_one(tcp, peer, service.clone());
    tokio::spawn(accept_loop(
        Tokio,
        handle,
        accepting,
        Accepted(listener),
        serve,
    ));
    serving
}

/// The listener as the accept loop's stream of connections, `TCP_NODELAY` on each.
struct Accepted(TcpListener);

impl futures_core::Stream for Accepted {
    type Item = io::Result<(TcpStream, SocketAddr)>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_accept(cx).map(|accepted| {
            if let Ok((tcp, peer)) = &accepted
                && let Err(e) = tcp.set_nodelay(true)
            {
                tracing::debug!(%peer, error = %e, "TCP_NODELAY");
            }
            Some(accepted)
        })
    }
}

/// Serves one connection, HTTP/1.1 or HTTP/2 (by the client's first bytes,
/// [`first::sniff`]; a first `GET` is answered outside hyper, [`first::serve_get`]),
/// until it ends, sends no request within [`DriverConfig::first_request_timeout`], or the
/// driver stopped (the end of a drain: the connection then closes after its responses in
/// progress, an HTTP/2 one with a GOAWAY).
///
/// What a connection holds while a response streams (an open GET stream) is kept small:
/// a GET that opens its connection holds none of hyper's buffers ([`first`]); on a
/// connection hyper serves, its request future is boxed (hyper keeps the slot of the
/// connection's request future for the connection's life; boxed, it is freed once the
/// response head is out), and hyper's HTTP/1 read buffer stays at its 8 KiB ([`first::Sniffed`]).
async fn connection<I>(io: I, peer: SocketAddr, service: McpService)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut stopped = std::pin::pin!(service.handle.stopped());
    let first_request = service.handle.config().first_request_timeout;
    let served = Latch::new();
    let on_request = served.clone();
    let handle = service.handle.clone();
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        on_request.set();
        req.extensions_mut().insert(mcp_driver::PeerAddr(peer));
        let service = service.clone();
        Box::pin(async move { service.handle(req).await })
    });
    let serve = async {
        // A connection that sent nothing yet when the driver stops is closed at once.
        let (first, mut io) = tokio::select! {
            sniffed = first::sniff(io) => sniffed?,
            () = stopped.as_mut() => return Ok(()),
        };
        let h2 = match first {
            First::H2 => true,
            First::Http1 => false,
            First::Get(parts) => {
                served.set();
                if !first::serve_get(&mut io, parts, peer, &handle).await? {
                    return Ok(());
                }
                false
            }
        };
        // hyper's timer: its own defaults (the header read timeout) then apply, so a client
        // that never finishes a request head cannot hold the connection forever.
        if h2 {
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .serve_connection(io, service);
            Ok(until_stopped(conn, stopped, |c| c.graceful_shutdown()).await?)
        } else {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(io, service);
            Ok(until_stopped(conn, stopped, |c| c.graceful_shutdown()).await?)
        }
    };
    let silent = async {
        tokio::time::sleep(first_request).await;
        if served.is_set() {
            std::future::pending::<()>().await;
        }
    };
    let result: Result<(), Box<dyn std::error::Error + Send + Sync>> = tokio::select! {
        result = serve => result,
        () = silent => return tracing::debug!(%peer, "no request in time"),
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended");
    }
}

/// Runs `conn` (a hyper connection) to its end; once `stopped` completes, shuts it down
/// gracefully (`shut`: its responses in progress end first) and waits for that.
async fn until_stopped<C: Future<Output = hyper::Result<()>>>(
    conn: C,
    stopped: impl Future<Output = ()>,
    shut: impl FnOnce(Pin<&mut C>),
) -> hyper::Result<()> {
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => return result,
        () = stopped => shut(conn.as_mut()),
    }
    conn.await
}

/// The MCP endpoint as a hyper [`Service`](hyper::service::Service) and a
/// [`tower_service::Service`]: clone it into every connection, or mount it in any framework
/// that takes either. All clones feed one driver task; it derefs to its [`ServerHandle`]
/// (shutdown, limits).
///
/// As a tower service it takes any request body and never fails (`Error = Infallible`, as
/// axum's `route_service` wants): once the driver is gone (after a shutdown) it answers 503.
/// It is always ready; a request waits for room in the driver's queue inside its future.
/// Bodies are read as through [`serve`], up to [`ServerLimits::max_body_bytes`](mcp_proto::server::ServerLimits::max_body_bytes) (413 past it).
///
/// `McpService::new` takes the configuration as given; install what [`serve`] would, then
/// mount it (in axum: `Router::new().route_service("/mcp", service.clone())`;
/// `demo/examples/axum.rs` in the repository is a whole program):
///
/// ```no_run
/// # async fn run(server: mcp_service::Server) -> std::io::Result<()> {
/// use mcp_proto::server::ServerConfig;
/// use mcp_tokio::{McpService, RandomSessionIds};
///
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let config = ServerConfig::default()
///     .with_session_ids(RandomSessionIds)
///     .bound_to(listener.local_addr()?.ip());
/// let service = McpService::new(server, config);
/// // … hand `service.clone()` to the router, serve the listener with it, and at shutdown:
/// service.shutdown();
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct McpService {
    handle: ServerHandle,
}

impl std::ops::Deref for McpService {
    type Target = ServerHandle;

    fn deref(&self) -> &ServerHandle {
        &self.handle
    }
}

impl McpService {
    /// Spawns the driver of `server` with `config` on the current tokio runtime, with the
    /// default [`DriverConfig`]. Secure by default, as [`ServerHandle::start`].
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn new(server: Server, config: ServerConfig) -> McpService {
        McpService::with_driver(server, config, DriverConfig::default())
    }

    /// [`new`](McpService::new) with the driver's configuration (queue bound, deadlines, the
    /// authentication step, the cluster store).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn with_driver(server: Server, config: ServerConfig, driver: DriverConfig) -> McpService {
        McpService {
            handle: ServerHandle::start(&Tokio, server, config, driver),
        }
    }

    /// Handles one HTTP exchange. Resolves to the response once the router sent its head;
    /// the body streams from the driver as the router produces it.
    pub async fn handle<B>(&self, req: Request<B>) -> Result<Response<ResponseBody>, DriverGone>
    where
        B: Body + Send + Unpin + 'static,
    {
        let (parts, body) = req.into_parts();
        let head = self.handle.exchange(parts, Data(body), ()).await?;
        let mut response = Response::new(ResponseBody(Inner::Driver(head.body)));
        *response.status_mut() = head.status;
        *response.headers_mut() = head.headers;
        Ok(response)
    }
}

impl<B> hyper::service::Service<Request<B>> for McpService
where
    B: Body + Send + Unpin + 'static,
{
    type Response = Response<ResponseBody>;
    type Error = DriverGone;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DriverGone>> + Send>>;

    fn call(&self, req: Request<B>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.handle(req).await })
    }
}

/// Any body (boxed: it need not be `Unpin`), through [`McpService::handle`] as the hyper
/// service; a gone driver is a 503.
impl<B> tower_service::Service<Request<B>> for McpService
where
    B: Body + Send + 'static,
{
    type Response = Response<ResponseBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let gone = |gone: DriverGone| {
                gone.response()
                    .map(|message| ResponseBody(Inner::Fixed(Some(message))))
            };
            Ok(this.handle(req.map(Box::pin)).await.unwrap_or_else(gone))
        })
    }
}

/// The data frames of a request body, as the driver reads them (trailers carry nothing).
struct Data<B>(B);

impl<B: Body + Unpin> futures_core::Stream for Data<B> {
    type Item = Result<Bytes, B::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            return match Pin::new(&mut self.0).poll_frame(cx) {
                // `Bytes` (hyper's, axum's) moves; another buffer is copied once.
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(mut chunk) => Poll::Ready(Some(Ok(chunk.copy_to_bytes(chunk.remaining())))),
                    Err(_) => continue,
                },
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

/// A response body fed by the driver: each router chunk becomes one frame (hyper writes and
/// flushes each frame as it comes). Dropping it before its end tells the router the client
/// went away.
#[derive(Debug)]
pub struct ResponseBody(Inner);

#[derive(Debug)]
enum Inner {
    Driver(ResponseStream),
    /// A body of its own (the tower service's 503), until taken.
    Fixed(Option<Bytes>),
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = ResponseAborted;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match &mut self.0 {
            Inner::Driver(stream) => futures_core::Stream::poll_next(Pin::new(stream), cx)
                .map(|c| c.map(|c| c.map(Frame::data))),
            Inner::Fixed(body) => Poll::Ready(body.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Inner::Driver(stream) => stream.is_ended(),
            Inner::Fixed(body) => body.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            // A body the driver gave whole by the time the head is written (a JSON answer)
            // goes with a `Content-Length`; a stream in chunks.
            Inner::Driver(stream) => stream
                .exact_len()
                .map_or_else(SizeHint::default, SizeHint::with_exact),
            Inner::Fixed(body) => SizeHint::with_exact(body.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}
