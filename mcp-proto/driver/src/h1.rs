//! HTTP/1.1 request heads for the adapters that read a connection themselves: parsed by
//! httparse straight into `http` types (no URL built, no second header map). smol's
//! adapter reads every request this way; tokio's the first request of a connection when it
//! is a `GET` (an SSE stream then holds none of hyper's connection buffers).
//!
//! Nothing here gives a meaning to a header beyond the message's framing (`Content-Length`,
//! `Transfer-Encoding`, `Expect`, `Connection: close`); the core decides the rest.

use std::fmt;
use std::io;

use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};

/// The longest request head read: 8 KiB (hyper's and async-h1's first buffer too).
pub const MAX_HEAD: usize = 8 * 1024;
/// The most header fields a request head may carry (async-h1's bound too).
pub const MAX_HEADERS: usize = 128;

/// A request head at the start of a buffer ([`parse_request_head`]).
// Returned once per request and matched at once: boxing the head would cost an allocation
// per request for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ParsedHead {
    /// A request without a body or with a `Content-Length` one.
    Plain {
        /// Its head (HTTP/1.1, the target in origin form).
        parts: http::request::Parts,
        /// How many bytes of the buffer the head took.
        len: usize,
        /// Its body's length (0 without a `Content-Length`).
        body: u64,
    },
    /// A request whose framing is more than a length (a `Transfer-Encoding`, an `Expect`):
    /// left to a full HTTP/1.1 implementation, from its first byte.
    Framed,
}

/// A bad request head: the connection is closed without a response.
fn bad_head(why: impl fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// The request head at the start of `buf`, if it is all there (`None`: read more).
///
/// # Errors
///
/// A head httparse rejects, with more than [`MAX_HEADERS`] fields, not HTTP/1.1, without
/// `Host`, with a bad or conflicting `Content-Length`, or whose method, a header or the
/// target is not valid in `http`'s types. (A head longer than [`MAX_HEAD`] is the
/// caller's bound to keep: it decides how much to read.)
pub fn parse_request_head(buf: &[u8]) -> io::Result<Option<ParsedHead>> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    let len = match req.parse(buf).map_err(bad_head)? {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return Ok(None),
    };
    if req.version != Some(1) {
        return Err(bad_head("not an HTTP/1.1 request"));
    }
    let mut headers = HeaderMap::with_capacity(req.headers.len());
    let (mut length, mut host) = (None, false);
    for field in req.headers.iter() {
        let name = header_name(field.name).map_err(bad_head)?;
        let value = HeaderValue::from_bytes(field.value).map_err(bad_head)?;
        if name == http::header::TRANSFER_ENCODING || name == http::header::EXPECT {
            return Ok(Some(ParsedHead::Framed));
        }
        if name == http::header::CONTENT_LENGTH {
            let digits = value.as_bytes();
            let n = std::str::from_utf8(digits)
                .ok()
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u64>().ok())
                .ok_or_else(|| bad_head("bad Content-Length"))?;
            if length.replace(n).is_some_and(|m| m != n) {
                return Err(bad_head("conflicting Content-Length fields"));
            }
        }
        host |= name == http::header::HOST;
        headers.append(name, value);
    }
    if !host {
        return Err(bad_head("no Host header"));
    }
    let method = Method::from_bytes(req.method.unwrap_or_default().as_bytes()).map_err(bad_head)?;
    let uri = origin_form(req.path.unwrap_or_default())?;
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = http::Version::HTTP_11;
    parts.headers = headers;
    Ok(Some(ParsedHead::Plain {
        parts,
        len,
        body: length.unwrap_or(0),
    }))
}

/// `name` as an `http` header name; the transport's own names (sent with every request)
/// without a parse or an allocation.
///
/// # Errors
///
/// A name that is not a valid header name.
pub fn header_name(name: &str) -> Result<HeaderName, http::header::InvalidHeaderName> {
    use mcp_proto::http::header_name as ours;
    Ok(match name {
        mcp_proto::http::header::MCP_SESSION_ID => ours::MCP_SESSION_ID.clone(),
        mcp_proto::http::header::MCP_PROTOCOL_VERSION => ours::MCP_PROTOCOL_VERSION.clone(),
        mcp_proto::http::header::LAST_EVENT_ID => ours::LAST_EVENT_ID.clone(),
        other => HeaderName::from_bytes(other.as_bytes())?,
    })
}

/// A request target in origin form (path and query): one in absolute form (a proxy's) keeps
/// only those.
fn origin_form(target: &str) -> io::Result<Uri> {
    let uri: Uri = target.parse().map_err(bad_head)?;
    if uri.scheme().is_none() {
        return Ok(uri);
    }
    let path = uri
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str);
    path.parse().map_err(bad_head)
}

/// Whether the `Connection` fields of a head ask to close the connection.
pub fn asks_close(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .any(|v| v.to_str().is_ok_and(close_token))
}

/// Whether one `Connection` field value (a token list) holds `close`.
pub fn close_token(list: &str) -> bool {
    list.split(',')
        .any(|token| token.trim().eq_ignore_ascii_case("close"))
}
