//! For adapters on async-h1 (feature `http-types`), runtime-neutral: conversions between
//! `http-types` 2 (async-h1's types) and the `http` 1.x types of this crate, written by
//! hand (http-types' own conversion targets `http` 0.2); [`respond`], the answer to one
//! request, encoded by async-h1; and the server's [`Reader`], request heads parsed by
//! httparse straight into `http` types (async-h1's decoder for the requests it frames
//! itself).
//!
//! Every conversion is a mechanical copy of method, target, status and headers; nothing here
//! gives a meaning to a header or a status. A value one side cannot represent is an error
//! (never a silent substitute): an unknown status code, a non-ASCII header value.

use std::fmt;

use futures_io::AsyncRead as _;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
pub(crate) use mcp_driver::h1::{MAX_HEAD, asks_close};
use mcp_driver::h1::{ParsedHead, parse_request_head};
use mcp_driver::h1::{close_token, header_name};

/// A head that cannot be carried across the two type systems.
#[derive(Debug)]
pub(crate) struct Unrepresentable(
    /// What could not be carried, and why.
    pub String,
);

impl fmt::Display for Unrepresentable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unrepresentable {}

fn err(what: impl fmt::Display) -> Unrepresentable {
    Unrepresentable(what.to_string())
}

/// The `http` request head of an async-h1 request. The target is the URL's path and query
/// (async-h1 rebuilt an absolute URL from the request line and `Host`; the `Host` header
/// itself is copied with the others).
pub(crate) fn request_parts(
    req: &http_types::Request,
) -> Result<http::request::Parts, Unrepresentable> {
    let url = req.url();
    let mut target = url.path().to_owned();
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    let method = Method::from_bytes(req.method().as_ref().as_bytes()).map_err(err)?;
    let uri: Uri = target.parse().map_err(err)?;
    let mut headers = HeaderMap::with_capacity(16);
    for (name, values) in req.iter() {
        let name = header_name(name.as_str()).map_err(err)?;
        for value in values.iter() {
            let value = HeaderValue::from_str(value.as_str()).map_err(err)?;
            headers.append(name.clone(), value);
        }
    }
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = http::Version::HTTP_11;
    parts.headers = headers;
    Ok(parts)
}

/// An http-types status from an `http` one. http-types knows only the registered codes:
/// any other is an error.
pub(crate) fn status_to_h1(status: StatusCode) -> Result<http_types::StatusCode, Unrepresentable> {
    http_types::StatusCode::try_from(status.as_u16()).map_err(|_| {
        err(format_args!(
            "status {status} has no http-types counterpart"
        ))
    })
}

/// An `http` status from an http-types one (always possible: `http` takes 100..=999).
pub(crate) fn status_from_h1(
    status: http_types::StatusCode,
) -> Result<StatusCode, Unrepresentable> {
    StatusCode::from_u16(status as u16).map_err(err)
}

/// Appends `headers` to an http-types message through `append` (name, value).
pub(crate) fn headers_to_h1(
    headers: &HeaderMap,
    mut append: impl FnMut(http_types::headers::HeaderName, http_types::headers::HeaderValue),
) -> Result<(), Unrepresentable> {
    for (name, value) in headers {
        let name = http_types::headers::HeaderName::from_bytes(name.as_str().as_bytes().to_vec())
            .map_err(err)?;
        let value =
            http_types::headers::HeaderValue::from_bytes(value.as_bytes().to_vec()).map_err(err)?;
        append(name, value);
    }
    Ok(())
}

/// Whether a `Connection` header (of async-h1's request or response) asks to close the
/// connection.
pub(crate) fn asks_close_h1(value: Option<&http_types::headers::HeaderValues>) -> bool {
    value.is_some_and(|v| v.iter().any(|v| close_token(v.as_str())))
}

/// The http-types method async-h1's encoder is told of: it only asks whether it is `HEAD`
/// (whose response has no body), so any other is `GET` there.
pub(crate) fn method_to_h1(method: &Method) -> http_types::Method {
    if method == Method::HEAD {
        http_types::Method::Head
    } else {
        http_types::Method::Get
    }
}

/// Answers one request with `response` (the endpoint's answer to a request whose method was
/// `method`, `close` when the request asked to close the connection), written to `io` by
/// async-h1's encoder through `buf` (the connection's, 4 KiB; freed while the body waits for
/// its next chunk, so an SSE stream between two events holds none; `response` is best boxed,
/// so that nothing keeps room for it once the head is in). Says whether the connection
/// may carry another request (neither side asked `Connection: close`). The caller then reads
/// what the endpoint left of the request body, so that the next request starts where it
/// should.
///
/// What async-h1's `Server::accept_one` does after its decode, through one 4 KiB buffer
/// kept by the connection: its copy of the response and its drain of the body each
/// allocated (and zeroed) an 8 KiB buffer of their own per request, held as long as the
/// response (an SSE stream's whole life). A larger body goes through in 4 KiB reads (a
/// chunked one in 4 KiB chunks). (No upgrades: an MCP endpoint never answers 101.) A
/// connection whose writes are [`Corked`](crate::conn::Corked) sends a whole JSON answer at
/// once.
///
/// # Errors
///
/// The endpoint's error, or a failed write: the connection is then of no use.
pub(crate) async fn respond<IO, Fut>(
    io: &IO,
    method: http_types::Method,
    close: bool,
    buf: &mut Vec<u8>,
    response: Fut,
) -> http_types::Result<bool>
where
    IO: futures_io::AsyncWrite + Clone + Unpin,
    Fut: Future<Output = http_types::Result<http_types::Response>>,
{
    use std::pin::Pin;
    let mut response = response.await?;
    let close = close || asks_close_h1(response.header(http_types::headers::CONNECTION));
    if close && response.header(http_types::headers::CONNECTION).is_none() {
        // The request asked to close: the answer says so too (RFC 9112 §9.6), as hyper's.
        response.insert_header(http_types::headers::CONNECTION, "close");
    }
    let mut encoder = async_h1::server::Encoder::new(response, method);
    let mut out = io.clone();
    loop {
        let n = std::future::poll_fn(|cx| {
            if buf.len() < 4 * 1024 {
                buf.resize(4 * 1024, 0);
            }
            let read = Pin::new(&mut encoder).poll_read(cx, buf);
            if read.is_pending() {
                // Waiting for the body's next chunk: an SSE stream between two events
                // holds no buffer (the encoder keeps nothing in it meanwhile).
                *buf = Vec::new();
            }
            read
        })
        .await?;
        let mut piece = &buf[..n];
        while !piece.is_empty() {
            let wrote = std::future::poll_fn(|cx| Pin::new(&mut out).poll_write(cx, piece)).await?;
            if wrote == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::WriteZero).into());
            }
            piece = &piece[wrote..];
        }
        if n == 0 {
            break;
        }
    }
    std::future::poll_fn(|cx| Pin::new(&mut out).poll_flush(cx)).await?;
    Ok(!close)
}

/// The `http` header map of an http-types response.
pub(crate) fn response_headers(res: &http_types::Response) -> Result<HeaderMap, Unrepresentable> {
    let mut headers = HeaderMap::new();
    for (name, values) in res.iter() {
        let name = HeaderName::from_bytes(name.as_str().as_bytes()).map_err(err)?;
        for value in values.iter() {
            headers.append(
                name.clone(),
                HeaderValue::from_str(value.as_str()).map_err(err)?,
            );
        }
    }
    Ok(headers)
}

// ------------------------------------------------------------------------------------------
// Request heads, parsed in place with httparse.

/// What a connection's read buffer holds at first: a head and a small body, in one read.
const READ_BUFFER: usize = 4 * 1024;

/// A bad request head (the connection is closed without a response, as async-h1 does).
fn bad_head(why: impl fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string())
}

/// What [`Reader::head`] found.
// Returned once per request and matched at once: boxing the head would cost an allocation
// per request for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Head {
    /// A request without a body or with a `Content-Length` one: its head, its body to be
    /// read through [`Reader::body`].
    Plain(http::request::Parts),
    /// A request whose framing async-h1 takes care of (a `Transfer-Encoding`, an `Expect`):
    /// its head, and whatever followed it, are still unread ([`Reader::take_buffered`]).
    ForAsyncH1,
}

/// A server connection's reads: one buffer for the connection's life (not two zeroed 8 KiB
/// buffers per request, async-h1's decoder's), request heads parsed in it by httparse and
/// turned into `http` types at once (no URL built, no http-types map), bodies with a
/// `Content-Length` read through it. A request head and a small body arrive in one read;
/// bytes after the body (a pipelined request) stay for the next head. Requests whose
/// framing is more than a length (chunked bodies, `Expect: 100-continue`) go to async-h1's
/// own decoder instead ([`Head::ForAsyncH1`], [`Replay`]).
///
/// | state | event | next |
/// |---|---|---|
/// | between requests | a complete head, plain | in a body ([`Head::Plain`]; no body: between requests) |
/// | between requests | a complete head async-h1 frames | handed over ([`Head::ForAsyncH1`]) |
/// | between requests | EOF with nothing buffered | closed (`None`) |
/// | between requests | a bad head, EOF inside one, or 8 KiB without its end | closed (an error) |
/// | in a body | its last byte read ([`body`](Reader::body), [`drain_body`](Reader::drain_body)) | between requests |
/// | in a body | EOF | closed (an error) |
pub(crate) struct Reader<IO> {
    io: IO,
    /// Read bytes are `buf[start..end]`; the rest is room for the next read (zeroed once,
    /// when it grows).
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// What is left to read of the current request's body.
    body_left: u64,
}

impl<IO: futures_io::AsyncRead + Unpin> Reader<IO> {
    /// Reads `io`; the buffer is allocated at the first read.
    pub(crate) fn new(io: IO) -> Self {
        Reader {
            io,
            buf: Vec::new(),
            start: 0,
            end: 0,
            body_left: 0,
        }
    }

    /// Reads once from the socket into the buffer's room (made first); 0 at EOF.
    fn poll_fill(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            } else {
                let grown = (self.buf.len() * 2).clamp(READ_BUFFER, MAX_HEAD);
                if grown <= self.buf.len() {
                    return std::task::Poll::Ready(Err(bad_head("request head too long")));
                }
                self.buf.resize(grown, 0);
            }
        }
        let n = std::task::ready!(
            std::pin::Pin::new(&mut self.io).poll_read(cx, &mut self.buf[self.end..])
        )?;
        self.end += n;
        std::task::Poll::Ready(Ok(n))
    }

    /// The next request's head; `None` at EOF between requests.
    ///
    /// # Errors
    ///
    /// A failed read, EOF inside a head, a head longer than [`MAX_HEAD`] or with more than
    /// 128 fields, one httparse rejects, one not HTTP/1.1, without `Host`, or with a bad
    /// `Content-Length`.
    pub(crate) async fn head(&mut self) -> std::io::Result<Option<Head>> {
        loop {
            if self.end > self.start {
                if let Some(head) = self.parse()? {
                    return Ok(Some(head));
                }
                if self.end - self.start >= MAX_HEAD {
                    return Err(bad_head("request head too long"));
                }
            }
            if std::future::poll_fn(|cx| self.poll_fill(cx)).await? == 0 {
                return if self.start == self.end {
                    Ok(None)
                } else {
                    Err(bad_head("connection closed inside a request head"))
                };
            }
        }
    }

    /// The head at the start of the buffer, if it is all there ([`parse_request_head`]).
    fn parse(&mut self) -> std::io::Result<Option<Head>> {
        match parse_request_head(&self.buf[self.start..self.end])? {
            None => Ok(None),
            Some(ParsedHead::Framed) => Ok(Some(Head::ForAsyncH1)),
            Some(ParsedHead::Plain { parts, len, body }) => {
                self.start += len;
                self.body_left = body;
                Ok(Some(Head::Plain(parts)))
            }
        }
    }

    /// The next piece of the current body: its range in the buffer (consumed); `None` at
    /// its end.
    fn poll_body_piece(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::io::Result<std::ops::Range<usize>>>> {
        use std::task::Poll;
        if self.body_left == 0 {
            return Poll::Ready(None);
        }
        if self.start == self.end {
            match std::task::ready!(self.poll_fill(cx)) {
                Ok(0) => {
                    let cut = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
                    return Poll::Ready(Some(Err(cut)));
                }
                Ok(_) => {}
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
        }
        let have = self.end - self.start;
        let n = usize::try_from(self.body_left).map_or(have, |left| left.min(have));
        let piece = self.start..self.start + n;
        self.start += n;
        self.body_left -= n as u64;
        Poll::Ready(Some(Ok(piece)))
    }

    /// The current request's body, as the driver reads it: a chunk per read (the first one
    /// what came with the head).
    pub(crate) fn body(&mut self) -> Body<'_, IO> {
        Body(self)
    }

    /// Reads and drops what is left of the current request's body (the endpoint answered
    /// without it), so that the next head starts where it should.
    ///
    /// # Errors
    ///
    /// A failed read, or EOF before the body's end.
    pub(crate) async fn drain_body(&mut self) -> std::io::Result<()> {
        while let Some(piece) = std::future::poll_fn(|cx| self.poll_body_piece(cx)).await {
            piece?;
        }
        Ok(())
    }

    /// What is buffered and unread (a request async-h1 is to decode), taken out.
    pub(crate) fn take_buffered(&mut self) -> Vec<u8> {
        let taken = self.buf[self.start..self.end].to_vec();
        (self.start, self.end) = (0, 0);
        taken
    }

    /// Frees the buffer when it holds nothing unread: a connection that goes on to stream a
    /// response (an SSE stream may last hours) keeps no read buffer meanwhile.
    pub(crate) fn release_if_empty(&mut self) {
        if self.start == self.end && self.body_left == 0 {
            (self.buf, self.start, self.end) = (Vec::new(), 0, 0);
        }
    }
}

/// A request body read through its connection's [`Reader`].
pub(crate) struct Body<'a, IO>(&'a mut Reader<IO>);

impl<IO: futures_io::AsyncRead + Unpin> futures_core::Stream for Body<'_, IO> {
    type Item = std::io::Result<bytes::Bytes>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let reader = &mut *self.get_mut().0;
        reader
            .poll_body_piece(cx)
            .map(|piece| piece.map(|r| r.map(|r| bytes::Bytes::copy_from_slice(&reader.buf[r]))))
    }
}

/// A connection's stream that first gives back bytes already read from it: how a request
/// the [`Reader`] read the head of reaches async-h1's decoder whole. Writes go straight to
/// the stream. (A `Clone` stream, as async-h1 wants one.)
#[derive(Clone)]
pub(crate) struct Replay<IO> {
    first: std::sync::Arc<std::sync::Mutex<(Vec<u8>, usize)>>,
    io: IO,
}

impl<IO> Replay<IO> {
    /// `io`, with `first` read before it.
    pub(crate) fn new(io: IO, first: Vec<u8>) -> Self {
        Replay {
            first: std::sync::Arc::new(std::sync::Mutex::new((first, 0))),
            io,
        }
    }
}

impl<IO: futures_io::AsyncRead + Unpin> futures_io::AsyncRead for Replay<IO> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        out: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        {
            let mut first = this
                .first
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let (bytes, at) = &mut *first;
            if *at < bytes.len() {
                let n = (bytes.len() - *at).min(out.len());
                out[..n].copy_from_slice(&bytes[*at..*at + n]);
                *at += n;
                if *at == bytes.len() {
                    *bytes = Vec::new();
                    *at = 0;
                }
                return std::task::Poll::Ready(Ok(n));
            }
        }
        std::pin::Pin::new(&mut this.io).poll_read(cx, out)
    }
}

impl<IO: futures_io::AsyncWrite + Unpin> futures_io::AsyncWrite for Replay<IO> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_write(cx, data)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_close(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_head_keeps_target_and_repeated_headers() {
        let url = http_types::Url::parse("http://127.0.0.1:9/mcp?x=1").unwrap();
        let mut req = http_types::Request::new(http_types::Method::Post, url);
        req.append_header("accept", "application/json");
        req.append_header("accept", "text/event-stream");
        req.append_header("mcp-session-id", "abc");
        let parts = request_parts(&req).unwrap();
        assert_eq!(parts.method, Method::POST);
        assert_eq!(parts.uri, "/mcp?x=1");
        let accept: Vec<_> = parts.headers.get_all("accept").iter().collect();
        assert_eq!(accept, ["application/json", "text/event-stream"]);
        assert_eq!(parts.headers["mcp-session-id"], "abc");
    }

    /// A socket that gives one scripted piece per read, then EOF.
    struct Script(std::collections::VecDeque<Vec<u8>>);

    impl futures_io::AsyncRead for Script {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            out: &mut [u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let Some(mut piece) = self.0.pop_front() else {
                return std::task::Poll::Ready(Ok(0));
            };
            let n = piece.len().min(out.len());
            out[..n].copy_from_slice(&piece[..n]);
            if n < piece.len() {
                self.0.push_front(piece.split_off(n));
            }
            std::task::Poll::Ready(Ok(n))
        }
    }

    fn reader(pieces: &[&[u8]]) -> Reader<Script> {
        Reader::new(Script(pieces.iter().map(|p| p.to_vec()).collect()))
    }

    fn plain(head: Option<Head>) -> http::request::Parts {
        match head {
            Some(Head::Plain(parts)) => parts,
            other => panic!("not a plain head: {other:?}"),
        }
    }

    fn body_of(r: &mut Reader<Script>) -> Vec<u8> {
        use futures_core::Stream;
        let mut body = r.body();
        let mut all = Vec::new();
        while let Some(chunk) = smol::block_on(std::future::poll_fn(|cx| {
            std::pin::Pin::new(&mut body).poll_next(cx)
        })) {
            all.extend_from_slice(&chunk.unwrap());
        }
        all
    }

    #[test]
    fn heads_and_bodies_are_read_in_place_and_pipelined_bytes_kept() {
        let two = b"POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\
            Mcp-Session-Id: s\r\nAccept: a\r\nAccept: b\r\n\r\nhelloGET /mcp HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut r = reader(&[two]);
        let parts = plain(smol::block_on(r.head()).unwrap());
        assert_eq!(parts.method, Method::POST);
        assert_eq!(parts.uri, "/mcp?x=1");
        assert_eq!(parts.headers["mcp-session-id"], "s");
        let accept: Vec<_> = parts.headers.get_all("accept").iter().collect();
        assert_eq!(accept, ["a", "b"]);
        assert_eq!(body_of(&mut r), b"hello");
        // The second request came in the same read.
        let parts = plain(smol::block_on(r.head()).unwrap());
        assert_eq!(parts.method, Method::GET);
        assert!(body_of(&mut r).is_empty());
        assert!(smol::block_on(r.head()).unwrap().is_none());
    }

    #[test]
    fn a_head_and_body_in_pieces_are_put_together() {
        let mut r = reader(&[
            b"POST http://a/mcp HTTP/1.1\r\nHo",
            b"st: a\r\nContent-Length: 11\r\n\r\nhel",
            b"lo ",
            b"world",
        ]);
        let parts = plain(smol::block_on(r.head()).unwrap());
        // A target in absolute form keeps its path.
        assert_eq!(parts.uri, "/mcp");
        assert_eq!(body_of(&mut r), b"hello world");
    }

    #[test]
    fn an_unread_body_is_drained_before_the_next_head() {
        let mut r = reader(&[
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nab",
            b"cDELETE / HTTP/1.1\r\nHost: a\r\n\r\n",
        ]);
        plain(smol::block_on(r.head()).unwrap());
        smol::block_on(r.drain_body()).unwrap();
        assert_eq!(
            plain(smol::block_on(r.head()).unwrap()).method,
            Method::DELETE
        );
    }

    #[test]
    fn chunked_and_expect_requests_go_to_async_h1_whole() {
        for head in [
            &b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
        ] {
            let mut r = reader(&[head]);
            assert!(matches!(smol::block_on(r.head()), Ok(Some(Head::ForAsyncH1))));
            assert_eq!(r.take_buffered(), head);
        }
    }

    #[test]
    fn a_chunked_request_replayed_to_async_h1_is_decoded() {
        let bytes = b"POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        // The head was read; the rest is on the socket (here a mock with no more bytes).
        let (head, rest) = bytes.split_at(40);
        let io = async_dup::Arc::new(async_dup::Mutex::new(Sink(rest.to_vec())));
        let replay = Replay::new(io, head.to_vec());
        let (mut req, _) = smol::block_on(async_h1::server::decode(replay))
            .unwrap()
            .unwrap();
        assert_eq!(req.url().path(), "/mcp");
        let body = smol::block_on(req.body_string()).unwrap();
        assert_eq!(body, "abcde");
    }

    /// A socket for async-h1: reads what it holds, takes every write.
    struct Sink(Vec<u8>);

    impl futures_io::AsyncRead for Sink {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            out: &mut [u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = self.0.len().min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0.drain(..n);
            std::task::Poll::Ready(Ok(n))
        }
    }

    impl futures_io::AsyncWrite for Sink {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            data: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::task::Poll::Ready(Ok(data.len()))
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_close(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn bad_heads_are_errors() {
        let long = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "y".repeat(MAX_HEAD)
        );
        for bad in [
            &b"GET / HTTP/1.0\r\nHost: a\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nAccept: a\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n",
            b"GET / HTTP/1.1\r\nHo st: a\r\n\r\n",
            long.as_bytes(),
        ] {
            let mut r = reader(&[bad]);
            assert!(
                smol::block_on(r.head()).is_err(),
                "{:?}",
                String::from_utf8_lossy(&bad[..bad.len().min(60)])
            );
        }
    }

    #[test]
    fn a_cut_body_is_an_error() {
        let mut r = reader(&[b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\nab"]);
        plain(smol::block_on(r.head()).unwrap());
        assert!(smol::block_on(r.drain_body()).is_err());
    }

    #[test]
    fn a_streaming_connection_keeps_no_read_buffer() {
        let mut r = reader(&[b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"]);
        plain(smol::block_on(r.head()).unwrap());
        assert!(r.buf.capacity() > 0);
        r.release_if_empty();
        assert_eq!(r.buf.capacity(), 0);
    }

    #[test]
    fn unknown_status_codes_are_errors_not_substitutes() {
        assert!(status_to_h1(StatusCode::from_u16(299).unwrap()).is_err());
        assert!(status_to_h1(StatusCode::from_u16(599).unwrap()).is_err());
        assert_eq!(
            status_to_h1(StatusCode::ACCEPTED).unwrap(),
            http_types::StatusCode::Accepted
        );
        assert_eq!(
            status_from_h1(http_types::StatusCode::NotFound).unwrap(),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn header_values_that_are_not_ascii_are_errors() {
        let mut headers = HeaderMap::new();
        headers.insert("x-a", HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        assert!(headers_to_h1(&headers, |_, _| {}).is_err());
        let mut headers = HeaderMap::new();
        headers.append("x-a", HeaderValue::from_static("1"));
        headers.append("x-a", HeaderValue::from_static("2"));
        let mut seen = Vec::new();
        headers_to_h1(&headers, |n, v| seen.push((n.to_string(), v.to_string()))).unwrap();
        assert_eq!(
            seen,
            [("x-a".into(), "1".into()), ("x-a".into(), "2".into())]
        );
    }
}
