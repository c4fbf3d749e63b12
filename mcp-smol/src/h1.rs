//! For adapters on async-h1 (feature `http-types`), runtime-neutral: conversions between
//! `http-types` 2 (async-h1's types) and the `http` 1.x types of this crate, written by
//! hand (http-types' own conversion targets `http` 0.2), and [`respond`], the answer to one
//! request decoded by async-h1.
//!
//! Every conversion is a mechanical copy of method, target, status and headers; nothing here
//! gives a meaning to a header or a status. A value one side cannot represent is an error
//! (never a silent substitute): an unknown status code, a non-ASCII header value.

use std::fmt;

use futures_io::AsyncRead as _;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};

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

/// `name` as an `http` header name; the transport's own names (sent with every request)
/// without a parse or an allocation.
fn header_name(name: &str) -> Result<HeaderName, http::header::InvalidHeaderName> {
    use mcp_proto::http::header_name as ours;
    Ok(match name {
        mcp_proto::http::header::MCP_SESSION_ID => ours::MCP_SESSION_ID.clone(),
        mcp_proto::http::header::MCP_PROTOCOL_VERSION => ours::MCP_PROTOCOL_VERSION.clone(),
        mcp_proto::http::header::LAST_EVENT_ID => ours::LAST_EVENT_ID.clone(),
        other => HeaderName::from_bytes(other.as_bytes())?,
    })
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

/// Whether a `Connection` header asks to close the connection.
fn asks_close(value: Option<&http_types::headers::HeaderValues>) -> bool {
    value.is_some_and(|v| {
        v.iter()
            .flat_map(|v| v.as_str().split(','))
            .any(|token| token.trim().eq_ignore_ascii_case("close"))
    })
}

/// Answers `request` (decoded from `io` by `async_h1::server::decode`, its unread body
/// `body`) with what `endpoint` returns, written to `io` by async-h1's encoder; then reads
/// and drops what the endpoint left of the request body, so that the next request starts
/// where it should. Says whether the connection may carry another request (neither side
/// asked `Connection: close`).
///
/// What async-h1's `Server::accept_one` does after its decode, through one 4 KiB buffer: its
/// copy of the response and its drain of the body each allocated (and zeroed) an 8 KiB
/// buffer of their own per request, held as long as the response (an SSE stream's whole
/// life). A larger body goes through in 4 KiB reads (a chunked one in 4 KiB chunks). (No
/// upgrades: an MCP endpoint never answers 101.) A connection whose writes are
/// [`Corked`](crate::conn::Corked) sends a whole JSON answer at once.
///
/// # Errors
///
/// The endpoint's error, or a failed read or write: the connection is then of no use.
pub(crate) async fn respond<IO, B, F, Fut>(
    io: &IO,
    request: http_types::Request,
    mut body: B,
    endpoint: F,
) -> http_types::Result<bool>
where
    IO: futures_io::AsyncWrite + Clone + Unpin,
    B: futures_io::AsyncRead + Unpin,
    F: FnOnce(http_types::Request) -> Fut,
    Fut: Future<Output = http_types::Result<http_types::Response>>,
{
    use std::pin::Pin;
    let close = asks_close(request.header(http_types::headers::CONNECTION));
    let method = request.method();
    let response = endpoint(request).await?;
    let close = close || asks_close(response.header(http_types::headers::CONNECTION));
    let mut encoder = async_h1::server::Encoder::new(response, method);
    let (mut out, mut buf) = (io.clone(), vec![0u8; 4 * 1024]);
    loop {
        let n = std::future::poll_fn(|cx| Pin::new(&mut encoder).poll_read(cx, &mut buf)).await?;
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
    while std::future::poll_fn(|cx| Pin::new(&mut body).poll_read(cx, &mut buf)).await? > 0 {}
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
