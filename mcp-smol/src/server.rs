//! The server: [`serve`], an accept loop of async-h1 connections whose exchanges go to the
//! driver's [`ServerHandle`].
//!
//! # Theory of operation
//!
//! Each connection reads one request at a time through its [`Reader`] (heads parsed by
//! httparse into `http` types; async-h1's decoder for a chunked body or `Expect`), waiting at most
//! [`DriverConfig::first_request_timeout`](mcp_driver::DriverConfig::first_request_timeout) for the first head and [`DriverConfig::keep_alive_timeout`](mcp_driver::DriverConfig::keep_alive_timeout)
//! for each later one (one timer per connection, [`KeepAlive`]). The head, with the body,
//! goes to [`ServerHandle::exchange`]; the response goes out through async-h1's encoder
//! ([`respond`](crate::h1::respond)), everything written in one poll in one send
//! ([`Corked`]). Once the request body is in, nothing reads the socket before the response
//! ends: a task then watches it, so EOF there means the client left and the router hears of
//! it at once rather than at the next failed write. The body is the driver's
//! [`ResponseStream`](mcp_driver::ResponseStream), one chunk per router chunk,
//! written as it comes (`TCP_NODELAY`).
//!
//! Per connection:
//!
//! | state | event | next |
//! |---|---|---|
//! | idle (waiting for a request head) | head decoded | busy |
//! | idle | the driver stopped, or quiet past the bound | closed (the socket is dropped) |
//! | busy (an exchange in progress) | response written, keep-alive | idle, or closed once the driver stopped |
//! | any | EOF, error, `Connection: close` | closed |

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use mcp_driver::{Adapter, Departure, Latch, Runtime, Serve, ServerHandle, Serving, accept_loop};
use mcp_service::Server;
use mcp_service::server::BoxFuture;
use smol::io::AsyncBufRead;
use smol::net::TcpStream;
use smol::stream::Stream;

use crate::conn::{Acceptor, Corked, KeepAlive, ResponseReader};
use crate::h1::{self as convert, Head, Reader, Replay};

/// smol as the driver's [`Runtime`]: its global executor and its timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Smol;

impl Runtime for Smol {
    type Sleep = smol::Timer;

    fn sleep_until(&self, deadline: Instant) -> smol::Timer {
        smol::Timer::at(deadline)
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) {
        smol::spawn(task).detach();
    }
}

/// Serves `server` on `listener` (HTTP/1.1 through async-h1, `TCP_NODELAY` on every
/// connection) on smol's global executor once [`Serve::start`] is called: the one entry
/// point, a builder over the core's configuration ([`Serve::config`]), the driver's
/// ([`Serve::driver`]: queue bound, deadlines, the authentication step, the cluster store)
/// and TLS (`Serve::tls`, feature `tls`; still HTTP/1.1: async-h1 has no HTTP/2, so ALPN
/// offers `http/1.1` alone; each handshake, under
/// [`ServerTls::handshake_timeout`](crate::ServerTls::handshake_timeout), runs in its own
/// task, and [`Serving::url`] is `https://`).
///
/// The configuration is adjusted as every adapter must: session ids from
/// [`RandomSessionIds`](crate::RandomSessionIds) (unless it has a generator),
/// [`ServerConfig::bound_to`](mcp_proto::server::ServerConfig::bound_to) the listener's
/// address (loopback `Host` validation for a loopback bind), and
/// [`ServerConfig::with_heartbeats_required`](mcp_proto::server::ServerConfig::with_heartbeats_required):
/// async-h1 notices a client that left only when a write fails, so an SSE stream must be
/// written to now and then.
pub fn serve(listener: smol::net::TcpListener, server: Server) -> Serve<Smol> {
    Serve::new(listener, server)
}

impl Adapter for Smol {
    type Listener = smol::net::TcpListener;
    const TLS: bool = cfg!(feature = "tls");

    fn start(serve: Serve<Smol>) -> io::Result<Serving> {
        let local_addr = serve.listener.local_addr()?;
        let config = serve.config.with_heartbeats_required();
        #[cfg(feature = "tls")]
        if let Some(tls) = serve.tls {
            let started =
                Serving::start_https(&Smol, local_addr, serve.server, config, serve.driver);
            let tls = Acceptor::tls(tls, &[b"http/1.1"]);
            return Ok(launch(serve.listener, started, tls));
        }
        let started = Serving::start(&Smol, local_addr, serve.server, config, serve.driver);
        Ok(launch(serve.listener, started, Acceptor::plain()))
    }
}

fn launch(listener: smol::net::TcpListener, started: (Serving, Latch), tls: Acceptor) -> Serving {
    let (serving, accepting) = started;
    let handle = serving.handle().clone();
    let incoming = Box::pin(smol::stream::unfold(listener, |listener| async {
        let accepted = listener.accept().await;
        Some((accepted, listener))
    }));
    let serve = {
        let handle = handle.clone();
        move |tcp, peer| -> BoxFuture<'static, ()> {
            Box::pin(connection(tcp, peer, handle.clone(), tls.clone()))
        }
    };
    smol::spawn(accept_loop(Smol, handle, accepting, incoming, serve)).detach();
    serving
}

async fn connection(tcp: TcpStream, peer: SocketAddr, handle: ServerHandle, tls: Acceptor) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "TCP_NODELAY");
    }
    let Some(io) = tls.secure(&Smol, &handle, peer, tcp.clone()).await else {
        return;
    };
    let io = Corked::new(io);
    let limits = handle.config();
    // One timer per connection bounds the wait for each request's head (async-h1's own
    // per-request head timer, on async-io 1.x, is never armed: a second reactor whose thread
    // each request would wake twice).
    let mut quiet = KeepAlive::new(limits.first_request_timeout);
    let mut first = true;
    // One wait on the driver's end for the whole connection, not one per request.
    let mut stopped = std::pin::pin!(handle.stopped());
    // The connection's buffers: its reads', and the response encoder's.
    let mut reader = Reader::new(io.clone());
    let mut buf = Vec::new();
    loop {
        let head = match quiet
            .next_request(&Smol, stopped.as_mut(), reader.head())
            .await
        {
            Some(Ok(Some(head))) => head,
            // EOF, quiet for too long, or the driver stopped.
            Some(Ok(None)) | None => break,
            Some(Err(e)) => return tracing::debug!(%peer, error = %e, "bad request head"),
        };
        if std::mem::take(&mut first) {
            quiet = KeepAlive::new(limits.keep_alive_timeout);
        }
        let answered = match head {
            Head::Plain(parts) => {
                let close = convert::asks_close(&parts.headers);
                let method = convert::method_to_h1(&parts.method);
                // Boxed, and freed once the head is in: waiting for the driver's answer takes
                // the most room, which a streaming response would otherwise keep for its life.
                let response = Box::pin(exchange(&handle, &tcp, peer, parts, &mut reader));
                let respond = convert::respond(&io, method, close, &mut buf, response);
                // Each poll sends what it wrote in one go (a JSON answer: one send).
                let answered = io.during(std::pin::pin!(respond)).await;
                match answered {
                    Ok(Ok(again)) => reader
                        .drain_body()
                        .await
                        .map(|()| again)
                        .map_err(Into::into),
                    Ok(Err(e)) => Err(e),
                    Err(e) => Err(e.into()),
                }
            }
            Head::ForAsyncH1 => {
                let replay = Replay::new(io.clone(), reader.take_buffered());
                // Boxed: async-h1's decoder holds 128 header slots (4 KiB) while it waits.
                Box::pin(async_h1_exchange(
                    &handle, &tcp, peer, &io, replay, &mut buf,
                ))
                .await
            }
        };
        match answered {
            Ok(true) if !handle.is_stopped() => {}
            Ok(_) => break,
            Err(e) => return tracing::debug!(%peer, error = %e, "connection ended"),
        }
    }
}

/// One exchange whose request async-h1 decodes (its head is at the start of `replay`): it
/// frames the body (chunked) or answers `Expect: 100-continue` itself. Says whether the
/// connection may carry another request.
async fn async_h1_exchange(
    handle: &ServerHandle,
    tcp: &TcpStream,
    peer: SocketAddr,
    io: &Corked,
    replay: Replay<Corked>,
    buf: &mut Vec<u8>,
) -> http_types::Result<bool> {
    use futures_io::AsyncRead as _;
    let Some((mut req, mut body)) = async_h1::server::decode(replay).await? else {
        return Ok(false);
    };
    let close = convert::asks_close_h1(req.header(http_types::headers::CONNECTION));
    let method = req.method();
    let response = async {
        let mut parts = convert::request_parts(&req).map_err(|e| {
            tracing::debug!(error = %e, "request not representable in http 1.x types");
            no_response(e)
        })?;
        parts.extensions.insert(mcp_driver::PeerAddr(peer));
        let body = Chunks(req.take_body());
        let head = handle
            .exchange(parts, body, Eof(tcp.clone().into()))
            .await
            .map_err(no_response)?;
        Ok(response_to_h1(head)?.0)
    };
    let respond = convert::respond(io, method, close, buf, Box::pin(response));
    let again = io.during(std::pin::pin!(respond)).await??;
    while std::future::poll_fn(|cx| Pin::new(&mut body).poll_read(cx, buf)).await? > 0 {}
    Ok(again)
}

/// An error that makes async-h1 close the connection without a response: the adapter never
/// invents a status code.
fn no_response(why: impl std::fmt::Display) -> http_types::Error {
    http_types::Error::from(io::Error::other(why.to_string()))
}

/// One HTTP exchange: the request (its body read through `reader`) to the driver, the
/// driver's response back. A connection whose response streams keeps no read buffer
/// meanwhile.
async fn exchange(
    handle: &ServerHandle,
    tcp: &TcpStream,
    peer: SocketAddr,
    mut parts: http::request::Parts,
    reader: &mut Reader<Corked>,
) -> http_types::Result<http_types::Response> {
    parts.extensions.insert(mcp_driver::PeerAddr(peer));
    let head = handle
        .exchange(parts, reader.body(), Eof(tcp.clone().into()))
        .await
        .map_err(no_response)?;
    let (res, streams) = response_to_h1(head)?;
    if streams {
        reader.release_if_empty();
    }
    Ok(res)
}

/// The driver's response as async-h1's, and whether its body streams (has no length yet).
fn response_to_h1(
    head: mcp_driver::HttpResponse,
) -> http_types::Result<(http_types::Response, bool)> {
    let mut streams = false;
    let status = convert::status_to_h1(head.status).map_err(no_response)?;
    let mut res = http_types::Response::new(status);
    convert::headers_to_h1(&head.headers, |name, value| res.append_header(name, value))
        .map_err(no_response)?;
    // A status without a body (the core says which: a 204 answers a CORS preflight) keeps
    // async-h1's empty body (it writes `content-length: 0`; a chunked empty body would read
    // as the start of the next response, and Chromium fails the POST after the preflight),
    // and the driver's stream, which ends at once, is dropped.
    if !mcp_proto::http::status_forbids_body(head.status) {
        // A body the driver gave whole (a JSON answer) goes with a `Content-Length`; a
        // stream in chunks (async-h1's encoder makes each read one chunk).
        let body = ResponseReader::new(head.body);
        let len = body.exact_len();
        streams = len.is_none();
        res.set_body(http_types::Body::from_reader(body, len));
        // `set_body` adds the body's default content type where the router set none; the
        // router's headers are the only ones.
        if !head.headers.contains_key(http::header::CONTENT_TYPE) {
            res.remove_header("content-type");
        }
    }
    Ok((res, streams))
}

/// The client's socket, watched for its end while nothing reads it (the request is in, the
/// response not yet out: async-h1 reads again only after the response): EOF there means the
/// client left, and the router hears of it at once rather than at the next failed write.
/// The bytes of a pipelined request end the watch. No syscall until the socket is readable.
struct Eof(std::sync::Arc<smol::Async<std::net::TcpStream>>);

impl Departure for Eof {
    fn poll_departed(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        loop {
            if std::task::ready!(self.0.poll_readable(cx)).is_err() {
                return Poll::Ready(true);
            }
            match self.0.get_ref().peek(&mut [0u8; 1]) {
                Ok(n) => return Poll::Ready(n == 0),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return Poll::Ready(true),
            }
        }
    }
}

/// A request body as the driver reads it: one chunk per read of async-h1's body.
struct Chunks(http_types::Body);

impl Stream for Chunks {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        match Pin::new(&mut this.0).poll_fill_buf(cx) {
            Poll::Ready(Ok([])) => Poll::Ready(None),
            Poll::Ready(Ok(buf)) => {
                let chunk = Bytes::copy_from_slice(buf);
                Pin::new(&mut this.0).consume(chunk.len());
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Pending => Poll::Pending,
        }
    }
}
