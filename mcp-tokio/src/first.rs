//! A connection's first bytes ([`sniff`]): the HTTP/2 preface (hyper's HTTP/2), a `GET`
//! whose head is whole and carries no body ([`serve_get`], answered here), or anything else
//! (hyper's HTTP/1.1), which hyper then reads again from the first byte ([`Sniffed`]).
//!
//! # Theory of operation
//!
//! A hyper HTTP/1.1 connection keeps an 8 KiB read buffer and an 8 KiB write buffer for its
//! whole life (it does not let them be sized). An open GET stream is an SSE response that
//! may last hours, idle between heartbeats: those buffers were two thirds of what it held.
//! So a connection whose first request is a `GET` is answered here:
//! - its head parsed by httparse into `http` types ([`mcp_driver::h1`], as smol's adapter
//!   reads every head);
//! - the driver's response written as it comes, a chunk per router chunk (chunked, or with a
//!   `Content-Length` when the driver gave the body whole), the bytes of each write freed
//!   once written: between two events the connection holds the driver's stream and its
//!   socket, nothing else;
//! - the socket read meanwhile, so that EOF (the client left) drops the exchange at once and
//!   the router hears of it; what the client sends meanwhile (a pipelined request, at most
//!   [`MAX_HEAD`]) is kept for hyper.
//!
//! When the response ends, the connection goes on in hyper's HTTP/1.1 (keep-alive), or
//! closes: `Connection: close` from either side, or the driver stopped. Every other first
//! request, and every later request, is hyper's: a `GET` whose head httparse or `http`'s
//! types reject goes to hyper too, which answers it as it answers any bad request.
//!
//! | state | event | next |
//! |---|---|---|
//! | first bytes | the HTTP/2 preface | hyper's HTTP/2 |
//! | first bytes | a `GET` head, whole, HTTP/1.1, without a body | a GET here |
//! | first bytes | anything else, EOF included | hyper's HTTP/1.1, from the first byte |
//! | a GET here | its response written to the end, keep-alive | hyper's HTTP/1.1, after the GET |
//! | a GET here | its response written, `Connection: close` or the driver stopped | closed |
//! | a GET here | EOF or an error on the socket, the body cut, the driver gone | closed |
//!
//! [`connection`](crate::server) takes each transition: it matches [`First`], then what
//! [`serve_get`] returns.

use std::future::poll_fn;
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use hyper::rt::Write as _;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use mcp_driver::ServerHandle;
use mcp_driver::h1::{MAX_HEAD, ParsedHead, asks_close, parse_request_head};

/// The HTTP/2 connection preface ([RFC 9113 §3.4]): a client speaking HTTP/2 with prior
/// knowledge (or after ALPN chose `h2`) starts with it.
///
/// [RFC 9113 §3.4]: https://www.rfc-editor.org/rfc/rfc9113#section-3.4
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The room of the read that follows a `GET`'s first bytes: a whole head, usually.
const GET_READ: usize = 4 * 1024;

/// A response's bytes are written once this many wait (a body whose chunks all come at once).
const WRITE_AT: usize = 16 * 1024;

/// What a connection's first bytes are ([`sniff`]).
// Returned once per connection and matched at once: boxing the head would cost an
// allocation for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum First {
    /// The HTTP/2 preface.
    H2,
    /// A `GET` head, whole, without a body: answered by [`serve_get`].
    Get(http::request::Parts),
    /// Anything else: hyper's HTTP/1.1, from the first byte.
    Http1,
}

/// Reads the first bytes of a connection until they are the HTTP/2 preface or cannot be
/// (what hyper-util's `auto` builder does); when they start a `GET`, on until its head is
/// whole (at most [`MAX_HEAD`]). Says what they are, and gives the connection with the bytes
/// not taken to be read again ([`Sniffed`]).
pub(crate) async fn sniff<I: hyper::rt::Read + Unpin>(io: I) -> io::Result<(First, Sniffed<I>)> {
    let mut io = Sniffed {
        io,
        bytes: Vec::with_capacity(H2_PREFACE.len()),
        at: 0,
    };
    while io.bytes.len() < H2_PREFACE.len() {
        if io.read_more(H2_PREFACE.len()).await? == 0 || !H2_PREFACE.starts_with(&io.bytes) {
            break;
        }
    }
    if io.bytes[..] == H2_PREFACE[..] {
        return Ok((First::H2, io));
    }
    if !io.bytes.starts_with(b"GET ") {
        return Ok((First::Http1, io));
    }
    loop {
        match parse_request_head(&io.bytes) {
            Ok(Some(ParsedHead::Plain {
                parts,
                len,
                body: 0,
            })) => {
                io.at = len;
                return Ok((First::Get(parts), io));
            }
            Ok(None) if io.bytes.len() < MAX_HEAD => {
                let room = (io.bytes.len() * 2).clamp(GET_READ, MAX_HEAD);
                if io.read_more(room).await? == 0 {
                    break;
                }
            }
            // A body, a framing of more than a length, a bad head or one too long: hyper's.
            _ => break,
        }
    }
    Ok((First::Http1, io))
}

/// A connection whose first bytes were read ([`sniff`]): those not taken are read again
/// first, and in the same read whatever the client sent with them, so that hyper finds a
/// whole request head in its first read (hyper-util's `auto` builder gave hyper the sniffed
/// bytes alone, and hyper's next read doubled its 8 KiB read buffer to hold 8 KiB more).
/// The buffer is freed once read again.
pub(crate) struct Sniffed<I> {
    io: I,
    bytes: Vec<u8>,
    /// `bytes[at..]` is still to be read again.
    at: usize,
}

impl<I> Sniffed<I> {
    /// Frees the buffer once everything in it was read again.
    fn release_if_read(&mut self) {
        if self.at == self.bytes.len() && self.bytes.capacity() > 0 {
            (self.bytes, self.at) = (Vec::new(), 0);
        }
    }
}

impl<I: hyper::rt::Read + Unpin> Sniffed<I> {
    /// Reads once more into `bytes`, up to `cap` of them in all (the room zeroed first);
    /// 0 at EOF.
    async fn read_more(&mut self, cap: usize) -> io::Result<usize> {
        let len = self.bytes.len();
        self.bytes.resize(cap, 0);
        let read = poll_fn(|cx| {
            let mut buf = hyper::rt::ReadBuf::new(&mut self.bytes[len..]);
            ready!(Pin::new(&mut self.io).poll_read(cx, buf.unfilled()))?;
            Poll::Ready(Ok::<_, io::Error>(buf.filled().len()))
        })
        .await;
        self.bytes.truncate(len + read.as_ref().map_or(0, |n| *n));
        read
    }

    /// Reads what the client sends while a response is in progress; `Ready` with why once
    /// the client is gone (EOF, an error) or sent more than a request head meanwhile. What
    /// it sent is kept, to be read again by hyper.
    fn poll_gone(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            let mut room = [0u8; 1024];
            let mut buf = hyper::rt::ReadBuf::new(&mut room);
            if let Err(e) = ready!(Pin::new(&mut self.io).poll_read(cx, buf.unfilled())) {
                return Poll::Ready(e);
            }
            let read = buf.filled();
            if read.is_empty() {
                return Poll::Ready(io::ErrorKind::UnexpectedEof.into());
            }
            if self.bytes.len() - self.at + read.len() > MAX_HEAD {
                let why = "more than a request head sent while a GET response streams";
                return Poll::Ready(io::Error::new(io::ErrorKind::InvalidData, why));
            }
            self.bytes.extend_from_slice(read);
        }
    }
}

impl<I: hyper::rt::Read + Unpin> hyper::rt::Read for Sniffed<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at == this.bytes.len() {
            this.release_if_read();
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        let n = (this.bytes.len() - this.at).min(buf.remaining());
        buf.put_slice(&this.bytes[this.at..this.at + n]);
        this.at += n;
        if this.at == this.bytes.len() {
            this.release_if_read();
            if buf.remaining() > 0 {
                // What came with them, if it is there; a failure shows at the next read.
                let _ = Pin::new(&mut this.io).poll_read(cx, buf);
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: hyper::rt::Write + Unpin> hyper::rt::Write for Sniffed<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, b)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// How a response's body is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// A status that forbids a body (the core says which: a 204, a 304): no length, no body.
    None,
    /// The driver gave the body whole: `Content-Length`.
    Length(u64),
    /// A body that streams: `Transfer-Encoding: chunked`, one chunk per router chunk.
    Chunked,
}

/// What the body loop does next.
enum Next {
    Chunk(Bytes),
    /// Nothing more is ready yet: write what waits.
    Write,
    End,
    /// The driver cut the body (its stream failed).
    Cut,
    Gone(io::Error),
}

/// Answers the `GET` that [`sniff`] read (`parts`) through the driver, and writes its
/// response to its end. Says whether the connection goes on in hyper (neither side asked
/// to close it, the driver runs); `false` once it closed.
///
/// # Errors
///
/// The client gone, or a failed write: the connection is then of no use.
pub(crate) async fn serve_get<I>(
    io: &mut Sniffed<I>,
    mut parts: http::request::Parts,
    peer: SocketAddr,
    handle: &ServerHandle,
) -> io::Result<bool>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
{
    let asked_close = asks_close(&parts.headers);
    parts.extensions.insert(mcp_driver::PeerAddr(peer));
    io.release_if_read();
    // Boxed, and freed once the head is in: waiting for the driver's answer takes the most
    // room, which a stream would otherwise keep for its life.
    let mut exchange = Box::pin(handle.exchange(parts, NoBody, ()));
    let head = poll_fn(|cx| {
        if let Poll::Ready(gone) = io.poll_gone(cx) {
            return Poll::Ready(Err(gone));
        }
        exchange.as_mut().poll(cx).map(Ok)
    })
    .await?;
    drop(exchange);
    // The driver is gone: closed without a response, as hyper does for a failed service.
    let Ok(head) = head else { return Ok(false) };
    let mut body = head.body;
    let framing = if mcp_proto::http::status_forbids_body(head.status) {
        Framing::None
    } else {
        body.exact_len().map_or(Framing::Chunked, Framing::Length)
    };
    let close = asked_close || asks_close(&head.headers) || handle.is_stopped();
    let mut out = Vec::with_capacity(512);
    write_head(&mut out, head.status, &head.headers, framing, close);
    if framing == Framing::None {
        drop(body);
        write_all(io, &out).await?;
        return end(io, close).await;
    }
    loop {
        let next = poll_fn(
            |cx| match futures_core::Stream::poll_next(Pin::new(&mut body), cx) {
                Poll::Ready(Some(Ok(chunk))) => Poll::Ready(Next::Chunk(chunk)),
                Poll::Ready(Some(Err(_))) => Poll::Ready(Next::Cut),
                Poll::Ready(None) => Poll::Ready(Next::End),
                Poll::Pending if !out.is_empty() => Poll::Ready(Next::Write),
                Poll::Pending => io.poll_gone(cx).map(Next::Gone),
            },
        )
        .await;
        match next {
            Next::Chunk(chunk) => {
                frame(&mut out, framing, &chunk);
                if out.len() >= WRITE_AT {
                    write_all(io, &std::mem::take(&mut out)).await?;
                }
            }
            Next::Write => write_all(io, &std::mem::take(&mut out)).await?,
            Next::End => {
                if framing == Framing::Chunked {
                    out.extend_from_slice(b"0\r\n\r\n");
                }
                write_all(io, &out).await?;
                return end(io, close || handle.is_stopped()).await;
            }
            Next::Cut => {
                // What was framed goes out; the missing last chunk (or short length) tells
                // the client the body was cut, as hyper does when a body fails.
                write_all(io, &out).await?;
                return Ok(false);
            }
            Next::Gone(why) => return Err(why),
        }
    }
}

/// The end of a response written here: the connection goes on in hyper, or is shut.
async fn end<I: hyper::rt::Write + Unpin>(io: &mut Sniffed<I>, close: bool) -> io::Result<bool> {
    if close {
        poll_fn(|cx| Pin::new(&mut *io).poll_shutdown(cx)).await?;
    }
    Ok(!close)
}

/// A response head on the wire: the status line, the router's headers (the only ones but
/// the framing's, `Date` and `Connection: close`), an empty line.
fn write_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    headers: &HeaderMap,
    framing: Framing,
    close: bool,
) {
    let reason = status.canonical_reason().unwrap_or("");
    let _ = write!(out, "HTTP/1.1 {} {reason}\r\n", status.as_str());
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    match framing {
        Framing::None => {}
        Framing::Length(n) => {
            let _ = write!(out, "content-length: {n}\r\n");
        }
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    if !headers.contains_key(http::header::DATE) {
        let now = httpdate::fmt_http_date(std::time::SystemTime::now());
        let _ = write!(out, "date: {now}\r\n");
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// One router chunk on the wire: as it is with a length, as a chunk otherwise (an empty one
/// is not written: it would end the body).
fn frame(out: &mut Vec<u8>, framing: Framing, chunk: &[u8]) {
    if framing == Framing::Chunked {
        if chunk.is_empty() {
            return;
        }
        // One allocation for the size line, the chunk and its CRLF (16 hex digits at most).
        out.reserve(chunk.len() + 20);
        let _ = write!(out, "{:x}\r\n", chunk.len());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(chunk);
    }
}

/// Writes all of `bytes`, then flushes (a TLS stream sends its records then).
async fn write_all<W: hyper::rt::Write + Unpin>(io: &mut W, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        let n = poll_fn(|cx| Pin::new(&mut *io).poll_write(cx, bytes)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
    }
    poll_fn(|cx| Pin::new(&mut *io).poll_flush(cx)).await
}

/// A `GET`'s body: none.
struct NoBody;

impl futures_core::Stream for NoBody {
    type Item = io::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(None)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use std::future::Future;

    use super::*;

    /// A connection that gives one scripted piece per read (what fits of it), then EOF.
    struct Script(VecDeque<Vec<u8>>);

    impl hyper::rt::Read for Script {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            mut buf: hyper::rt::ReadBufCursor<'_>,
        ) -> Poll<io::Result<()>> {
            if let Some(mut piece) = self.0.pop_front() {
                let n = piece.len().min(buf.remaining());
                buf.put_slice(&piece[..n]);
                if n < piece.len() {
                    self.0.push_front(piece.split_off(n));
                }
            }
            Poll::Ready(Ok(()))
        }
    }

    fn ready<T>(f: impl Future<Output = T>) -> T {
        let mut f = std::pin::pin!(f);
        match f
            .as_mut()
            .poll(&mut Context::from_waker(std::task::Waker::noop()))
        {
            Poll::Ready(t) => t,
            Poll::Pending => panic!("the future waited"),
        }
    }

    /// Sniffs a connection that sends `pieces`; says what it is (`h2`, `get`, `http1`), and
    /// what hyper's first read (into 8 KiB) then gets.
    fn sniffed(pieces: &[&[u8]]) -> (&'static str, Vec<u8>) {
        let script = Script(pieces.iter().map(|p| p.to_vec()).collect());
        let (first, mut io) = ready(sniff(script)).expect("sniffed");
        let kind = match first {
            First::H2 => "h2",
            First::Get(_) => "get",
            First::Http1 => "http1",
        };
        (kind, hypers_first_read(&mut io))
    }

    /// What hyper's first read (into 8 KiB) of a sniffed connection gets.
    fn hypers_first_read(io: &mut Sniffed<Script>) -> Vec<u8> {
        let mut room = [0u8; 8192];
        let mut buf = hyper::rt::ReadBuf::new(&mut room);
        let read = hyper::rt::Read::poll_read(
            Pin::new(io),
            &mut Context::from_waker(std::task::Waker::noop()),
            buf.unfilled(),
        );
        assert!(matches!(read, Poll::Ready(Ok(()))));
        buf.filled().to_vec()
    }

    #[test]
    fn an_http1_head_of_24_bytes_or_more_in_one_read_is_http1_and_read_whole_again() {
        let head = b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(sniffed(&[head]), ("http1", head.to_vec()));
        // Exactly 24 bytes, all read at once: not the preface.
        assert_eq!(sniffed(&[&head[..24]]), ("http1", head[..24].to_vec()));
    }

    #[test]
    fn the_preface_in_pieces_is_http2_and_comes_back_with_what_follows() {
        let frames = b"\0\0\0\x04\0\0\0\0\0";
        let (kind, first) = sniffed(&[b"PRI * HT", b"TP/2.0\r\n\r\nSM\r\n\r\n", frames]);
        assert_eq!(kind, "h2");
        // The preface and, in the same read, what came after it.
        assert_eq!(first, [&H2_PREFACE[..], frames].concat());
    }

    #[test]
    fn a_head_that_leaves_the_preface_partway_is_http1() {
        let head = b"PRI * HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(
            sniffed(&[&head[..10], &head[10..]]),
            ("http1", head.to_vec())
        );
        assert_eq!(sniffed(&[]), ("http1", Vec::new()));
    }

    #[test]
    fn a_whole_get_head_is_taken_in_pieces_and_what_follows_it_stays_for_hyper() {
        let get = b"GET /mcp HTTP/1.1\r\nHost: a\r\nAccept: text/event-stream\r\n\r\n";
        let next = b"DELETE /mcp HTTP/1.1\r\nHost: a\r\n\r\n";
        let script = Script(
            [&get[..5], &get[5..30], &get[30..], &next[..]]
                .iter()
                .map(|p| p.to_vec())
                .collect(),
        );
        let (first, mut io) = ready(sniff(script)).expect("sniffed");
        let First::Get(parts) = first else {
            panic!("not taken: {first:?}")
        };
        assert_eq!(parts.method, http::Method::GET);
        assert_eq!(parts.uri, "/mcp");
        assert_eq!(parts.headers["accept"], "text/event-stream");
        // Nothing of the head is read again; the next request is, once the GET is answered.
        assert_eq!(io.bytes.len() - io.at, 0);
        assert_eq!(hypers_first_read(&mut io), next);
        assert_eq!(
            io.bytes.capacity(),
            0,
            "the buffer is freed once read again"
        );
    }

    #[test]
    fn a_get_that_is_not_plain_goes_to_hyper_whole() {
        for head in [
            // A body.
            &b"GET /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"[..],
            // A framing of more than a length.
            b"GET /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            // Not HTTP/1.1, no Host, a bad name: hyper answers (or closes) as for any request.
            b"GET /mcp HTTP/1.0\r\nHost: a\r\n\r\n",
            b"GET /mcp HTTP/1.1\r\nAccept: a\r\n\r\n",
            b"GET /mcp HTTP/1.1\r\nHo st: a\r\n\r\n",
            // Cut inside its head.
            b"GET /mcp HTTP/1.1\r\nHost: a\r\n",
        ] {
            assert_eq!(
                sniffed(&[head]),
                ("http1", head.to_vec()),
                "{}",
                String::from_utf8_lossy(head)
            );
        }
        // A head past the bound is not read further.
        let long = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "y".repeat(MAX_HEAD)
        );
        let (kind, first) = sniffed(&[long.as_bytes()]);
        assert_eq!(kind, "http1");
        assert_eq!(first, long.as_bytes()[..first.len()]);
        assert!(first.len() <= MAX_HEAD);
    }

    #[test]
    fn a_response_head_is_the_status_line_the_headers_and_the_framing() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", "text/event-stream".parse().unwrap());
        headers.insert("date", "Mon, 07 Dec 2026 12:00:00 GMT".parse().unwrap());
        let mut out = Vec::new();
        write_head(&mut out, StatusCode::OK, &headers, Framing::Chunked, false);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
             date: Mon, 07 Dec 2026 12:00:00 GMT\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        let mut out = Vec::new();
        write_head(
            &mut out,
            StatusCode::NO_CONTENT,
            &HeaderMap::new(),
            Framing::None,
            true,
        );
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 204 No Content\r\ndate: "),
            "{text}"
        );
        assert!(
            text.ends_with(" GMT\r\nconnection: close\r\n\r\n"),
            "{text}"
        );
        let mut out = Vec::new();
        write_head(
            &mut out,
            StatusCode::BAD_REQUEST,
            &headers,
            Framing::Length(7),
            false,
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\r\ncontent-length: 7\r\n"), "{text}");
        assert!(!text.contains("transfer-encoding"), "{text}");
    }

    #[test]
    fn chunks_are_framed_and_an_empty_one_is_not_written() {
        let mut out = Vec::new();
        frame(&mut out, Framing::Chunked, b"data: 0123456789abcdef\n\n");
        frame(&mut out, Framing::Chunked, b"");
        frame(&mut out, Framing::Chunked, b"x");
        assert_eq!(out, b"18\r\ndata: 0123456789abcdef\n\n\r\n1\r\nx\r\n");
        let mut out = Vec::new();
        frame(&mut out, Framing::Length(3), b"abc");
        assert_eq!(out, b"abc");
    }

    #[test]
    fn while_a_get_streams_what_the_client_sends_is_kept_up_to_a_head_and_eof_is_departure() {
        let cx = &mut Context::from_waker(std::task::Waker::noop());
        // A pipelined request is kept, to be read again by hyper; then EOF: the client left.
        // What the watch makes of the client sending `sent` and then nothing: why it sees
        // the client gone, and the bytes it kept for hyper.
        let mut watch = |sent: Vec<u8>| {
            let mut io = Sniffed {
                io: Script([sent].into_iter().collect()),
                bytes: Vec::new(),
                at: 0,
            };
            let Poll::Ready(why) = io.poll_gone(cx) else {
                panic!("no departure seen")
            };
            (why.kind(), io.bytes)
        };
        let next = b"DELETE /mcp HTTP/1.1\r\nHost: a\r\n\r\n";
        let (why, kept) = watch(next.to_vec());
        assert_eq!(why, io::ErrorKind::UnexpectedEof);
        assert_eq!(kept, next);
        // More than a request head while the response streams: the connection is given up,
        // and no more than a head is kept.
        let (why, kept) = watch(vec![b'x'; MAX_HEAD + 1]);
        assert_eq!(why, io::ErrorKind::InvalidData);
        assert!(kept.len() <= MAX_HEAD, "{}", kept.len());
    }
}
