//! Connections for adapters whose sockets are futures-io streams (feature `futures-io`),
//! runtime-neutral: the adapter opens and accepts the TCP sockets, this module secures each
//! one and hands back one [`Shared`] stream.
//!
//! - [`Shared`]: a connection's stream with one handle for each of a split reader and writer
//!   (async-h1 wants a `Clone` stream); a TLS session sits behind a lock that each read or
//!   write holds for one poll.
//! - [`Dialer`]: how a client secures a connection it opened: as it is, or (feature
//!   `futures-tls`) by a TLS handshake with futures-rustls that verifies the endpoint's name.
//!   A failed handshake is a [`TransportFailure::Tls`] with rustls' reason.
//! - [`Acceptor`]: how a server secures a connection it accepted: as it is, or (feature
//!   `futures-tls`) by a TLS handshake under [`ServerTls::handshake_timeout`](mcp_driver::ServerTls::handshake_timeout)
//!   ([`tls::handshake`](mcp_driver::tls::handshake)).

use std::net::SocketAddr;
#[cfg(feature = "tls")]
use std::sync::Arc;

use futures_io::{AsyncRead, AsyncWrite};

#[cfg(feature = "tls")]
use mcp_driver::{ClientTls, ConnectError, ServerTls, tls::rustls::pki_types::ServerName};
use mcp_driver::{Runtime, ServerHandle};
use mcp_proto::client::TransportFailure;

/// Locks a mutex, ignoring poisoning: the cork's critical sections leave it consistent.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a connection reads and writes: a TCP socket, or a TLS stream over one.
pub(crate) trait Duplex: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Duplex for T {}

/// A connection's stream, shareable between a split reader and writer (each clone is a
/// handle on the same stream).
pub(crate) type Shared = async_dup::Arc<async_dup::Mutex<Box<dyn Duplex>>>;

/// `stream` as a [`Shared`] one.
pub(crate) fn shared(stream: impl Duplex + 'static) -> Shared {
    async_dup::Arc::new(async_dup::Mutex::new(Box::new(stream)))
}

/// How a client secures each connection it opens to one endpoint: not at all
/// ([`plain`](Dialer::plain), for `http://`) or by TLS ([`tls`](Dialer::tls), for
/// `https://`).
#[derive(Clone, Default)]
pub(crate) struct Dialer {
    /// The TLS connector and the name the server's certificate must be valid for.
    #[cfg(feature = "tls")]
    tls: Option<Arc<(futures_rustls::TlsConnector, ServerName<'static>)>>,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[cfg(feature = "tls")]
        let tls = self.tls.as_ref().map(|tls| &tls.1);
        #[cfg(not(feature = "tls"))]
        let tls: Option<()> = None;
        f.debug_struct("Dialer").field("tls", &tls).finish()
    }
}

impl Dialer {
    /// Connections used as they are.
    pub(crate) fn plain() -> Dialer {
        Dialer::default()
    }

    /// Connections secured by TLS to the host of `uri`, trusting what `tls` says, offering
    /// the ALPN protocols `alpn` (the HTTP versions the adapter speaks).
    ///
    /// # Errors
    ///
    /// A host that is neither a DNS name nor an IP address
    /// ([`tls::server_name`](mcp_driver::tls::server_name)).
    #[cfg(feature = "tls")]
    pub(crate) fn tls(
        tls: &ClientTls,
        uri: &http::Uri,
        alpn: &[&[u8]],
    ) -> Result<Dialer, ConnectError> {
        let config = Arc::new(tls.client_config(alpn));
        let name = mcp_driver::tls::server_name(uri)?;
        Ok(Dialer {
            tls: Some(Arc::new((config.into(), name))),
        })
    }

    /// Secures `tcp`, a connection just opened: at once when plain, after the TLS handshake
    /// otherwise.
    ///
    /// # Errors
    ///
    /// [`TransportFailure::Tls`] when the handshake fails: the reason rustls gave
    /// ([`tls::failure`](mcp_driver::tls::failure)), or `Handshake` for any other error.
    pub(crate) async fn secure(
        &self,
        tcp: impl Duplex + 'static,
    ) -> Result<Shared, TransportFailure> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return match tls.0.connect(tls.1.clone(), tcp).await {
                Ok(stream) => Ok(shared(stream)),
                Err(e) => {
                    tracing::debug!(error = %e, "TLS handshake failed");
                    let why = mcp_driver::tls::failure(&e);
                    Err(TransportFailure::Tls(
                        why.unwrap_or(mcp_proto::client::TlsFailure::Handshake),
                    ))
                }
            };
        }
        Ok(shared(tcp))
    }
}

/// How a server secures each connection it accepts: not at all ([`plain`](Acceptor::plain))
/// or by TLS ([`tls`](Acceptor::tls)).
#[derive(Clone, Default)]
pub(crate) struct Acceptor {
    /// The TLS acceptor and the settings it was made from (for the handshake timeout).
    #[cfg(feature = "tls")]
    tls: Option<Arc<(futures_rustls::TlsAcceptor, ServerTls)>>,
}

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[cfg(feature = "tls")]
        let tls = self.tls.as_ref().map(|tls| &tls.1);
        #[cfg(not(feature = "tls"))]
        let tls: Option<()> = None;
        f.debug_struct("Acceptor").field("tls", &tls).finish()
    }
}

impl Acceptor {
    /// Connections used as they are.
    pub(crate) fn plain() -> Acceptor {
        Acceptor::default()
    }

    /// Connections secured by TLS with `tls`, its ALPN protocols narrowed to `speaks` (the
    /// HTTP versions the adapter speaks, see [`ServerTls::server_config`]).
    #[cfg(feature = "tls")]
    pub(crate) fn tls(tls: ServerTls, speaks: &[&[u8]]) -> Acceptor {
        let acceptor = futures_rustls::TlsAcceptor::from(tls.server_config(speaks));
        Acceptor {
            tls: Some(Arc::new((acceptor, tls))),
        }
    }

    /// Secures `tcp`, a connection just accepted from `peer`: at once when plain; otherwise
    /// after the TLS handshake, run on `rt` under the handshake timeout and given up when
    /// the driver of `handle` stops. `None` (logged) when the handshake failed or did not
    /// end in time: the connection is to be dropped, and concerns no one else.
    #[cfg_attr(not(feature = "tls"), allow(unused_variables))]
    pub(crate) async fn secure<R: Runtime>(
        &self,
        rt: &R,
        handle: &ServerHandle,
        peer: SocketAddr,
        tcp: impl Duplex + 'static,
    ) -> Option<Shared> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let accepted = mcp_driver::tls::handshake(rt, &tls.1, handle, peer, tls.0.accept(tcp));
            // Boxed: the connection's task keeps no room for the handshake after it.
            return Box::pin(accepted).await.map(shared);
        }
        Some(shared(tcp))
    }
}

/// A server connection's stream whose writes made while its task polls the HTTP library go
/// out together: one send per poll, not one per piece.
///
/// async-h1 writes a response as it encodes it, one write per piece: the head, each body
/// chunk, the chunked terminator. On TCP each write is a segment of its own, so a JSON answer
/// (head, body, terminator) cost three sends, each a full trip through the kernel's TCP stack
/// (on loopback, with the peer's receive path too). The connection's task instead polls the
/// library inside [`Corked::during`]: while it polls, writes gather in a buffer (the cork is
/// in), and when the poll returns the buffer goes out in one write (the cork is out). A
/// response complete in one poll is one send; an SSE stream's event goes out as soon as the
/// poll that wrote it returns, so nothing waits on a later event.
///
/// Writes made while the task is not polling (async-h1 answers `Expect: 100-continue` from
/// a task of its own) go straight through, after whatever the buffer still holds. The buffer
/// holds at most [`Corked::LIMIT`] bytes: a larger write first sends what it holds, and a
/// write larger than the limit goes through as it is. Once all is sent, the buffer is freed.
///
/// | cork | event | next |
/// |---|---|---|
/// | out | `during` polls the library | in |
/// | in | a write | buffered (or sent, past the limit) |
/// | in | the poll returns | out, the buffer sent (what the socket did not take waits for the next write, flush or poll) |
/// | out | a write, flush or close | the buffer sent first, then the write |
#[derive(Clone)]
pub(crate) struct Corked {
    io: Shared,
    cork: std::sync::Arc<std::sync::Mutex<Cork>>,
}

#[derive(Default)]
struct Cork {
    /// Whether writes are gathered (the connection's task is polling the library).
    gathering: bool,
    /// Written and not yet sent.
    buf: Vec<u8>,
}

impl std::fmt::Debug for Corked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cork = lock(&self.cork);
        f.debug_struct("Corked")
            .field("gathering", &cork.gathering)
            .field("held", &cork.buf.len())
            .finish()
    }
}

impl Corked {
    /// What the buffer holds at most: 64 KiB.
    pub(crate) const LIMIT: usize = 64 * 1024;

    /// `io`, corked while its task polls through [`during`](Corked::during).
    pub(crate) fn new(io: Shared) -> Corked {
        Corked {
            io,
            cork: std::sync::Arc::default(),
        }
    }

    /// Runs `f` (the HTTP library's work on this connection) with the cork in during each of
    /// its polls; after each poll what was gathered is sent. A failed send ends it with the
    /// error (the connection is then of no use). `f` is pinned by the caller (an async fn's
    /// argument is kept whole in its future: `f` by value would be held twice).
    pub(crate) async fn during<F: Future + Unpin>(&self, mut f: F) -> std::io::Result<F::Output> {
        std::future::poll_fn(|cx| {
            lock(&self.cork).gathering = true;
            let polled = std::pin::Pin::new(&mut f).poll(cx);
            let mut cork = lock(&self.cork);
            cork.gathering = false;
            // What the socket does not take now waits, with this task woken when it can.
            if let std::task::Poll::Ready(Err(e)) = send_held(&mut cork.buf, &self.io, cx) {
                return std::task::Poll::Ready(Err(e));
            }
            polled.map(Ok)
        })
        .await
    }
}

/// Sends what `buf` holds; ready once it is all sent.
fn send_held(
    buf: &mut Vec<u8>,
    io: &Shared,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<std::io::Result<()>> {
    use std::task::Poll;
    let mut sent = 0;
    let mut io = io.clone();
    let result = loop {
        if sent == buf.len() {
            break Poll::Ready(Ok(()));
        }
        match std::pin::Pin::new(&mut io).poll_write(cx, &buf[sent..]) {
            Poll::Ready(Ok(0)) => break Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
            Poll::Ready(Ok(n)) => sent += n,
            Poll::Ready(Err(e)) => break Poll::Ready(Err(e)),
            Poll::Pending => break Poll::Pending,
        }
    };
    buf.drain(..sent);
    if buf.is_empty() {
        // All sent: an SSE stream between two events, or a connection between two
        // requests, holds no buffer.
        *buf = Vec::new();
    }
    result
}

impl AsyncRead for Corked {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        out: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_read(cx, out)
    }
}

impl AsyncWrite for Corked {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::task::Poll;
        let this = self.get_mut();
        let mut cork = lock(&this.cork);
        if cork.gathering && cork.buf.len() + data.len() <= Corked::LIMIT {
            cork.buf.extend_from_slice(data);
            return Poll::Ready(Ok(data.len()));
        }
        // Out, or past the limit: what is held goes first.
        match send_held(&mut cork.buf, &this.io, cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        if cork.gathering && data.len() <= Corked::LIMIT {
            cork.buf.extend_from_slice(data);
            return Poll::Ready(Ok(data.len()));
        }
        std::pin::Pin::new(&mut this.io).poll_write(cx, data)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.send_all_held(cx))?;
        std::pin::Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.send_all_held(cx))?;
        std::pin::Pin::new(&mut this.io).poll_close(cx)
    }
}

impl Corked {
    /// Sends what the buffer holds (a flush or a close comes after it).
    fn send_all_held(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        send_held(&mut lock(&self.cork).buf, &self.io, cx)
    }
}

/// A response body fed by the driver ([`ResponseStream`](mcp_driver::ResponseStream)) as a
/// futures-io `AsyncBufRead`, for HTTP libraries that read bodies (async-h1's chunked
/// encoder makes each read one chunk). A cut response fails the read
/// (`ConnectionAborted`), so a chunked body never gets its terminating chunk.
#[derive(Debug)]
pub(crate) struct ResponseReader {
    stream: mcp_driver::ResponseStream,
    buf: bytes::Bytes,
}

impl ResponseReader {
    /// Reads `stream`.
    pub(crate) fn new(stream: mcp_driver::ResponseStream) -> ResponseReader {
        ResponseReader {
            stream,
            buf: bytes::Bytes::new(),
        }
    }

    /// The body's whole length, when the driver has given all of it
    /// ([`ResponseStream::exact_len`](mcp_driver::ResponseStream::exact_len)).
    pub(crate) fn exact_len(&self) -> Option<usize> {
        let rest = self.stream.exact_len()?;
        usize::try_from(rest).ok()?.checked_add(self.buf.len())
    }
}

impl futures_io::AsyncBufRead for ResponseReader {
    fn poll_fill_buf(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<&[u8]>> {
        use std::task::Poll;
        let this = self.get_mut();
        while this.buf.is_empty() {
            match futures_core::Stream::poll_next(std::pin::Pin::new(&mut this.stream), cx) {
                Poll::Ready(Some(Ok(chunk))) => this.buf = chunk,
                Poll::Ready(Some(Err(e))) => {
                    let e = std::io::Error::new(std::io::ErrorKind::ConnectionAborted, e);
                    return Poll::Ready(Err(e));
                }
                Poll::Ready(None) => break,
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(&this.buf))
    }

    fn consume(self: std::pin::Pin<&mut Self>, amt: usize) {
        let this = self.get_mut();
        let amt = amt.min(this.buf.len());
        bytes::Buf::advance(&mut this.buf, amt);
    }
}

impl AsyncRead for ResponseReader {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        out: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use futures_io::AsyncBufRead;
        let buf = std::task::ready!(self.as_mut().poll_fill_buf(cx))?;
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.consume(n);
        std::task::Poll::Ready(Ok(n))
    }
}

/// The quiet bound of a kept-alive HTTP/1.1 connection between two requests, kept with one
/// timer per connection that is re-armed only when it fires: a timer per request would cost
/// a reactor registration (and, on a busy core, a reactor thread's wake-up) per request.
pub(crate) struct KeepAlive<R: Runtime> {
    bound: std::time::Duration,
    /// The deadline the timer was armed for, and the timer.
    timer: Option<(std::time::Instant, std::pin::Pin<Box<R::Sleep>>)>,
}

impl<R: Runtime> KeepAlive<R> {
    /// A connection may stay quiet for `bound` between two requests.
    pub(crate) fn new(bound: std::time::Duration) -> Self {
        KeepAlive { bound, timer: None }
    }

    /// Waits for `data` (the next request, or its first byte) and returns what it gave;
    /// `None` when `stopped` completes (the driver stopped: [`ServerHandle::stopped`]), or
    /// when the connection stays quiet for the bound from now.
    pub(crate) async fn next_request<T>(
        &mut self,
        rt: &R,
        stopped: impl Future,
        data: impl Future<Output = T>,
    ) -> Option<T> {
        let due = rt.now() + self.bound;
        let mut data = std::pin::pin!(data);
        let mut stopped = std::pin::pin!(stopped);
        std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(there) = data.as_mut().poll(cx) {
                return std::task::Poll::Ready(Some(there));
            }
            if stopped.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(None);
            }
            loop {
                let (at, timer) = self
                    .timer
                    .get_or_insert_with(|| (due, Box::pin(rt.sleep_until(due))));
                if timer.as_mut().poll(cx).is_pending() {
                    return std::task::Poll::Pending;
                }
                if *at >= due {
                    self.timer = None;
                    return std::task::Poll::Ready(None);
                }
                // Fired for an earlier quiet spell: armed again for this one.
                self.timer = Some((due, Box::pin(rt.sleep_until(due))));
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::io;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// A runtime on a virtual clock: a sleep is ready once the clock reaches its deadline;
    /// it counts the sleeps made.
    #[derive(Clone, Default)]
    struct Virtual(Arc<Mutex<(Option<std::time::Instant>, usize)>>);

    impl Virtual {
        fn at(t0: std::time::Instant) -> Virtual {
            Virtual(Arc::new(Mutex::new((Some(t0), 0))))
        }
        fn advance(&self, by: std::time::Duration) {
            let mut clock = self.0.lock().unwrap();
            clock.0 = clock.0.map(|t| t + by);
        }
        fn sleeps(&self) -> usize {
            self.0.lock().unwrap().1
        }
    }

    struct VirtualSleep(Virtual, std::time::Instant);

    impl Future for VirtualSleep {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            if self.0.now() >= self.1 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }
    }

    impl Runtime for Virtual {
        type Sleep = VirtualSleep;
        fn sleep_until(&self, deadline: std::time::Instant) -> VirtualSleep {
            self.0.lock().unwrap().1 += 1;
            VirtualSleep(self.clone(), deadline)
        }
        fn spawn(&self, task: mcp_service::server::BoxFuture<'static, ()>) {
            drop(task);
        }
        fn now(&self) -> std::time::Instant {
            self.0.lock().unwrap().0.expect("a virtual clock")
        }
    }

    /// Pending on its first poll, then `answer`: the next request arrives a little later.
    fn later(answer: bool) -> impl Future<Output = bool> {
        let mut polled = false;
        std::future::poll_fn(move |_| {
            if std::mem::replace(&mut polled, true) {
                Poll::Ready(answer)
            } else {
                Poll::Pending
            }
        })
    }

    fn poll_once<F: Future>(f: &mut Pin<&mut F>) -> Poll<F::Output> {
        f.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    const BOUND: std::time::Duration = std::time::Duration::from_secs(60);

    #[test]
    fn a_kept_alive_connection_arms_one_timer_for_many_requests() {
        let rt = Virtual::at(std::time::Instant::now());
        let mut quiet = KeepAlive::new(BOUND);
        for _ in 0..100 {
            let wait = quiet.next_request(&rt, std::future::pending::<()>(), later(true));
            let mut wait = std::pin::pin!(wait);
            assert!(poll_once(&mut wait).is_pending());
            rt.advance(std::time::Duration::from_millis(10));
            assert_eq!(poll_once(&mut wait), Poll::Ready(Some(true)));
        }
        assert_eq!(
            rt.sleeps(),
            1,
            "one timer for the connection, not one per request"
        );
    }

    #[test]
    fn a_quiet_connection_ends_at_the_bound_from_its_last_request() {
        let rt = Virtual::at(std::time::Instant::now());
        let mut quiet = KeepAlive::new(BOUND);
        // A request half-way through the first timer's span.
        {
            let wait = quiet.next_request(&rt, std::future::pending::<()>(), later(true));
            let mut wait = std::pin::pin!(wait);
            assert!(poll_once(&mut wait).is_pending());
            rt.advance(BOUND / 2);
            assert_eq!(poll_once(&mut wait), Poll::Ready(Some(true)));
        }
        // Then silence: the old timer fires at the first bound and is armed again; the
        // connection ends a whole bound after the request.
        let wait = quiet.next_request(
            &rt,
            std::future::pending::<()>(),
            std::future::pending::<bool>(),
        );
        let mut wait = std::pin::pin!(wait);
        assert!(poll_once(&mut wait).is_pending());
        rt.advance(BOUND / 2);
        assert!(
            poll_once(&mut wait).is_pending(),
            "still within the bound of the last request"
        );
        assert_eq!(rt.sleeps(), 2, "armed again once");
        rt.advance(BOUND / 2);
        assert_eq!(poll_once(&mut wait), Poll::Ready(None));
    }

    #[test]
    fn what_the_wait_gave_comes_back_and_a_stopped_driver_ends_it() {
        let rt = Virtual::at(std::time::Instant::now());
        let mut quiet = KeepAlive::new(BOUND);
        {
            let wait = quiet.next_request(&rt, std::future::pending::<()>(), later(false));
            let mut wait = std::pin::pin!(wait);
            assert!(poll_once(&mut wait).is_pending());
            assert_eq!(poll_once(&mut wait), Poll::Ready(Some(false)));
        }
        let wait = quiet.next_request(&rt, std::future::ready(()), std::future::pending::<bool>());
        let mut wait = std::pin::pin!(wait);
        assert_eq!(poll_once(&mut wait), Poll::Ready(None));
    }

    /// A peer whose reads are at EOF at once and that takes every write, keeping what was
    /// written.
    #[derive(Clone, Default)]
    struct Closed(Arc<Mutex<Vec<u8>>>);

    impl Closed {
        fn written(&self) -> Vec<u8> {
            self.0.lock().unwrap().clone()
        }
    }

    impl AsyncRead for Closed {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(0))
        }
    }

    impl AsyncWrite for Closed {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Polls `f` once: every future here is ready at once (its I/O never waits).
    fn ready<T>(f: impl Future<Output = T>) -> T {
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(t) => t,
            Poll::Pending => panic!("the future waited"),
        }
    }

    /// A socket that records each write it takes as one segment, and takes none while
    /// `blocked` (its writer is then woken by the test, as a reactor would).
    #[derive(Clone, Default)]
    struct Segments {
        sent: Arc<Mutex<Vec<Vec<u8>>>>,
        blocked: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Segments {
        fn sent(&self) -> Vec<String> {
            let sent = self.sent.lock().unwrap();
            sent.iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        }
    }

    impl AsyncRead for Segments {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Pending
        }
    }

    impl AsyncWrite for Segments {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            if self.blocked.load(std::sync::atomic::Ordering::SeqCst) {
                return Poll::Pending;
            }
            self.sent.lock().unwrap().push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// What an HTTP library does in one poll: writes `pieces`, then waits (`wait`) or is done.
    fn writes(io: &Corked, pieces: &[&str], wait: bool) -> impl Future<Output = ()> {
        let (mut io, pieces) = (io.clone(), pieces.iter().map(|p| p.as_bytes().to_vec()));
        let pieces: Vec<Vec<u8>> = pieces.collect();
        let mut done = false;
        std::future::poll_fn(move |cx| {
            if !done {
                done = true;
                for piece in &pieces {
                    let wrote = Pin::new(&mut io).poll_write(cx, piece);
                    assert!(matches!(wrote, Poll::Ready(Ok(n)) if n == piece.len()));
                }
                if wait {
                    return Poll::Pending;
                }
            }
            Poll::Ready(())
        })
    }

    #[test]
    fn what_one_poll_writes_goes_out_in_one_send() {
        let socket = Segments::default();
        let io = Corked::new(shared(socket.clone()));
        ready(io.during(writes(
            &io,
            &["HTTP/1.1 200 OK\r\n\r\n", "2\r\n{}\r\n", "0\r\n\r\n"],
            false,
        )))
        .expect("sent");
        assert_eq!(
            socket.sent(),
            ["HTTP/1.1 200 OK\r\n\r\n2\r\n{}\r\n0\r\n\r\n"]
        );
    }

    #[test]
    fn a_poll_that_waits_sends_what_it_wrote_before_waiting() {
        let socket = Segments::default();
        let io = Corked::new(shared(socket.clone()));
        let during = io.during(writes(&io, &["head", "data: 1\n\n"], true));
        let mut during = std::pin::pin!(during);
        assert!(poll_once(&mut during).is_pending());
        assert_eq!(
            socket.sent(),
            ["headdata: 1\n\n"],
            "an SSE event waits for nothing"
        );
    }

    #[test]
    fn writes_outside_a_poll_go_straight_through() {
        let socket = Segments::default();
        let mut io = Corked::new(shared(socket.clone()));
        let mut cx = Context::from_waker(Waker::noop());
        for piece in [&b"HTTP/1.1 100 Continue\r\n\r\n"[..], b"x"] {
            assert!(Pin::new(&mut io).poll_write(&mut cx, piece).is_ready());
        }
        assert_eq!(socket.sent().len(), 2);
    }

    #[test]
    fn what_a_full_socket_refused_goes_first_once_it_takes_again() {
        let socket = Segments::default();
        socket
            .blocked
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let io = Corked::new(shared(socket.clone()));
        let during = io.during(writes(&io, &["one", "two"], true));
        let mut during = std::pin::pin!(during);
        assert!(poll_once(&mut during).is_pending());
        assert!(socket.sent().is_empty());
        // The socket takes again; a write from outside comes after what was held.
        socket
            .blocked
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let mut writer = io.clone();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(
            Pin::new(&mut writer)
                .poll_write(&mut cx, b"three")
                .is_ready()
        );
        assert_eq!(socket.sent(), ["onetwo", "three"]);
    }

    #[test]
    fn a_write_past_the_limit_first_sends_what_is_held() {
        let socket = Segments::default();
        let io = Corked::new(shared(socket.clone()));
        let big = "x".repeat(Corked::LIMIT);
        ready(io.during(writes(&io, &["head", &big, "tail"], false))).expect("sent");
        let sent = socket.sent();
        assert_eq!(sent.len(), 3, "held, then the big write, then the rest");
        assert_eq!(
            (sent[0].as_str(), sent[1].len(), sent[2].as_str()),
            ("head", Corked::LIMIT, "tail")
        );
    }

    /// A plain connection is the socket itself, and every clone of the shared stream writes
    /// to it and reads from it.
    #[test]
    fn a_plain_connection_is_shared_as_it_is() {
        let peer = Closed::default();
        let io = ready(Dialer::plain().secure(peer.clone())).expect("plain");
        let mut cx = Context::from_waker(Waker::noop());
        let (mut writer, mut reader) = (io.clone(), io);
        let wrote = Pin::new(&mut writer).poll_write(&mut cx, b"GET");
        assert!(matches!(wrote, Poll::Ready(Ok(3))), "{wrote:?}");
        let read = Pin::new(&mut reader).poll_read(&mut cx, &mut [0u8; 1]);
        assert!(matches!(read, Poll::Ready(Ok(0))), "{read:?}");
        assert_eq!(peer.written(), b"GET");
    }

    /// A server that closes during the handshake fails the dial as a TLS handshake failure
    /// (not as a refused connection), after the client sent its hello.
    #[cfg(feature = "tls")]
    #[test]
    fn a_peer_that_closes_during_the_handshake_is_a_tls_failure() {
        let uri: http::Uri = "https://127.0.0.1:8443/mcp".parse().unwrap();
        let dialer = Dialer::tls(&ClientTls::default(), &uri, &[b"http/1.1"]).expect("dialer");
        let peer = Closed::default();
        let failed = ready(dialer.secure(peer.clone())).map(|_| ());
        assert!(
            matches!(
                failed,
                Err(TransportFailure::Tls(
                    mcp_proto::client::TlsFailure::Handshake
                ))
            ),
            "{failed:?}"
        );
        // A TLS handshake record (content type 22) came first.
        assert_eq!(peer.written().first(), Some(&22), "{:?}", peer.written());
    }
}
