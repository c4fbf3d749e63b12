//! The client: the driver's [`Client`](mcp_driver::ClientHandle) on [`Http`], async-h1 over
//! a small keep-alive pool.
//!
//! An exchange task: take an idle connection from the [`Pool`] (or connect, `TCP_NODELAY`,
//! and for `https://` the TLS handshake), write the whole request (async-h1 writes it before
//! reading; our bodies are complete), read the head, then the body chunk by chunk. Only a body read to its end returns the
//! connection to the pool; any failure or abort drops it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::conn::{Dialer, Shared};
use crate::h1 as convert;
use bytes::Bytes;
use http::Uri;
use mcp_driver::{ConnectError, Engine, NetEvents};
use mcp_proto::client::{HttpRequest, TransportFailure};
use smol::Task;
use smol::io::{AsyncBufReadExt, AsyncReadExt};
use smol::net::TcpStream;

use crate::Smol;

/// An MCP client over smol + async-h1 (see [`mcp_driver::ClientHandle`]).
pub type Client = mcp_driver::ClientHandle<Http>;

/// The options of a connection, from [`Client::builder`](mcp_driver::ClientHandle::builder)
/// (see [`mcp_driver::Connect`]; the engine's own options are [`ClientOptions`]).
pub type ConnectBuilder = mcp_driver::Connect<Http>;

/// Settings of the HTTP engine under the client, set with
/// [`Connect::http`](mcp_driver::Connect::http).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientOptions {
    /// The most idle keep-alive connections kept for reuse. Concurrent requests each use a
    /// connection of their own; the pool keeps as many idle as requests were ever in flight
    /// at once, up to this, and closes a connection freed beyond it (so a client that runs
    /// 64 requests at a time reuses 64 connections instead of dialing anew). Default 128.
    pub max_idle_connections: usize,
    /// What `https://` trusts (default: Mozilla's roots,
    /// [`ClientTls::webpki_roots`](crate::ClientTls::webpki_roots)).
    #[cfg(feature = "tls")]
    pub tls: crate::ClientTls,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            max_idle_connections: 128,
            #[cfg(feature = "tls")]
            tls: crate::ClientTls::default(),
        }
    }
}

impl ClientOptions {
    /// Sets [`max_idle_connections`](Self::max_idle_connections) (0 disables reuse).
    pub fn with_max_idle_connections(mut self, max: usize) -> Self {
        self.max_idle_connections = max;
        self
    }

    /// Sets [`tls`](Self::tls).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: crate::ClientTls) -> Self {
        self.tls = tls;
        self
    }
}

/// async-h1 over a keep-alive pool as the driver's [`Engine`].
pub struct Http {
    pool: Pool,
    url: http_types::Url,
}

impl Engine for Http {
    type Runtime = Smol;
    type Options = ClientOptions;
    type Exchange = Task<()>;
    const NAME: &'static str = "mcp-smol";

    fn build(options: ClientOptions, uri: &Uri) -> Result<(Http, Smol), ConnectError> {
        let invalid = |why: String| ConnectError::InvalidUrl(format!("{uri}: {why}"));
        let dialer = match uri.scheme_str() {
            Some("http") => Dialer::plain(),
            #[cfg(feature = "tls")]
            Some("https") => Dialer::tls(&options.tls, uri, &[b"http/1.1"])?,
            #[cfg(not(feature = "tls"))]
            Some("https") => return Err(ConnectError::TlsUnavailable(uri.to_string())),
            _ => {
                return Err(invalid(
                    "only http:// and https:// URLs are supported".into(),
                ));
            }
        };
        let url = http_types::Url::parse(&uri.to_string()).map_err(|e| invalid(e.to_string()))?;
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        let pool = Pool {
            addr: Arc::from(format!("{host}:{port}")),
            dialer,
            idle: Arc::default(),
            load: Arc::default(),
            max_idle: options.max_idle_connections,
        };
        Ok((Http { pool, url }, Smol))
    }

    fn start(&mut self, req: HttpRequest, net: NetEvents) -> Task<()> {
        match self.request(req) {
            Ok(request) => smol::spawn(exchange(self.pool.clone(), request, net)),
            Err(e) => {
                tracing::error!(error = %e, "request not representable in http-types");
                net.failed(TransportFailure::Other);
                smol::spawn(async {})
            }
        }
    }
}

impl Http {
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

/// Idle keep-alive connections to the server: as many as exchanges were ever in flight at
/// once, at most `max_idle`.
#[derive(Clone)]
struct Pool {
    addr: Arc<str>,
    dialer: Dialer,
    idle: Arc<Mutex<Vec<Shared>>>,
    load: Arc<Load>,
    max_idle: usize,
}

/// The exchanges in flight, and the most ever in flight at once.
#[derive(Default)]
struct Load {
    in_flight: AtomicUsize,
    peak: AtomicUsize,
}

/// One exchange in flight, from its start to its end.
struct Busy(Arc<Load>);

impl Busy {
    fn new(load: &Arc<Load>) -> Self {
        let now = load.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        load.peak.fetch_max(now, Ordering::Relaxed);
        Busy(load.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Shared>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection the server has not closed, or a new one. A failed dial also
    /// gives its I/O error.
    async fn checkout(&self) -> Result<Shared, (TransportFailure, Option<std::io::Error>)> {
        loop {
            let Some(mut io) = self.lock().pop() else {
                break;
            };
            // An idle connection has nothing to read: data, EOF or an error means the server
            // closed it (or broke the protocol); a pending read means it is still open (TLS
            // records that carry no data, such as session tickets, keep it pending).
            let mut one = [0u8; 1];
            if smol::future::poll_once(io.read(&mut one)).await.is_none() {
                return Ok(io);
            }
        }
        let connected = async {
            let tcp = TcpStream::connect(&*self.addr).await?;
            tcp.set_nodelay(true)?;
            Ok::<_, std::io::Error>(tcp)
        };
        let tcp = connected.await.map_err(|e| {
            tracing::debug!(error = %e, "connect failed");
            (TransportFailure::Connect, Some(e))
        })?;
        self.dialer.secure(tcp).await.map_err(|f| (f, None))
    }

    /// Returns a connection whose last response was read to its end.
    fn checkin(&self, io: Shared) {
        let keep = self.load.peak.load(Ordering::Relaxed).min(self.max_idle);
        let mut idle = self.lock();
        if idle.len() < keep {
            idle.push(io);
        }
    }
}

/// One exchange, from checkout to the end of the response body.
async fn exchange(pool: Pool, request: http_types::Request, net: NetEvents) {
    let _busy = Busy::new(&pool.load);
    let io = match pool.checkout().await {
        Ok(io) => io,
        Err((failure, Some(cause))) => return net.failed_with(failure, &cause),
        Err((failure, None)) => return net.failed(failure),
    };
    let mut response = match async_h1::connect(io.clone(), request).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, "exchange failed");
            return net.failed(if e.downcast_ref::<std::io::Error>().is_some() {
                TransportFailure::Reset
            } else {
                // A head async-h1 could not read (malformed, or a status http-types does
                // not know).
                TransportFailure::Other
            });
        }
    };
    let head = convert::status_from_h1(response.status())
        .and_then(|status| Ok((status, convert::response_headers(&response)?)));
    let (status, headers) = match head {
        Ok(head) => head,
        Err(e) => {
            tracing::debug!(error = %e, "response head not representable in http 1.x types");
            return net.failed(TransportFailure::Other);
        }
    };
    // async-h1 frames a body by length or chunks; with neither, it reads none and the
    // connection's state is unknown, so it is not reused. Nor is one the server closes.
    let reusable = (response.len().is_some() || response.header("transfer-encoding").is_some())
        && !response
            .header("connection")
            .is_some_and(|c| c.as_str().eq_ignore_ascii_case("close"));
    if !net.head(status, headers) {
        return;
    }
    let mut body = response.take_body();
    loop {
        let n = match body.fill_buf().await {
            Ok([]) => break,
            Ok(chunk) if net.body(Bytes::copy_from_slice(chunk)) => chunk.len(),
            Ok(_) => return,
            Err(e) => {
                tracing::debug!(error = %e, "response body failed");
                return net.failed(TransportFailure::Reset);
            }
        };
        std::pin::Pin::new(&mut body).consume(n);
    }
    if reusable {
        // Back in the pool before the driver hears of the end, so that the request the end
        // lets through finds it.
        drop(body);
        pool.checkin(io);
    }
    net.end();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client dials `http://` and (with the `tls` feature) `https://`, and refuses any
    /// other scheme at once.
    #[test]
    fn url_schemes_follow_the_features() {
        let ftp = Client::builder("ftp://x/mcp").start();
        assert!(matches!(ftp, Err(ConnectError::InvalidUrl(_))), "{ftp:?}");
        let https = Client::builder("https://x/mcp").start();
        #[cfg(feature = "tls")]
        assert!(https.is_ok(), "{https:?}");
        #[cfg(not(feature = "tls"))]
        assert!(
            matches!(https, Err(ConnectError::TlsUnavailable(_))),
            "{https:?}"
        );
        drop(https);
    }
}
