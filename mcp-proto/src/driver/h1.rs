//! For adapters on async-h1 (feature `http-types`), runtime-neutral: conversions between
//! `http-types` 2 (async-h1's types) and the `http` 1.x types of this crate, written by
//! hand: http-types' own conversion targets `http` 0.2.
//!
//! Every function is a mechanical copy of method, target, status and headers; nothing here
//! gives a meaning to a header or a status. A value one side cannot represent is an error
//! (never a silent substitute): an unknown status code, a non-ASCII header value.

use std::fmt;

use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};

/// A head that cannot be carried across the two type systems.
#[derive(Debug)]
pub struct Unrepresentable(
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
pub fn request_parts(req: &http_types::Request) -> Result<http::request::Parts, Unrepresentable> {
    let url = req.url();
    let mut target = url.path().to_owned();
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    let method = Method::from_bytes(req.method().as_ref().as_bytes()).map_err(err)?;
    let uri: Uri = target.parse().map_err(err)?;
    let mut headers = HeaderMap::new();
    for (name, values) in req.iter() {
        let name = HeaderName::from_bytes(name.as_str().as_bytes()).map_err(err)?;
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
pub fn status_to_h1(status: StatusCode) -> Result<http_types::StatusCode, Unrepresentable> {
    http_types::StatusCode::try_from(status.as_u16()).map_err(|_| {
        err(format_args!(
            "status {status} has no http-types counterpart"
        ))
    })
}

/// An `http` status from an http-types one (always possible: `http` takes 100..=999).
pub fn status_from_h1(status: http_types::StatusCode) -> Result<StatusCode, Unrepresentable> {
    StatusCode::from_u16(status as u16).map_err(err)
}

/// Appends `headers` to an http-types message through `append` (name, value).
pub fn headers_to_h1(
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

/// The `http` header map of an http-types response.
pub fn response_headers(res: &http_types::Response) -> Result<HeaderMap, Unrepresentable> {
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
