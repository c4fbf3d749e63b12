//! HTTP vocabulary shared by the client and server state machines: header names, media types,
//! and the few header grammars the transport must read (`Accept`, `Content-Type`,
//! `WWW-Authenticate`).
//!
//! The core speaks the [`http`] crate's types (`Method`, `StatusCode`, `HeaderMap`), so an
//! adapter on hyper hands them over without conversion; only the *meaning* of a header lives
//! here.

use http::HeaderMap;

/// Header names the transport reads or writes, lower-case as HTTP/2 and `http` want them.
pub mod header {
    // S-SESS-1.
    /// `Mcp-Session-Id` (2025-11-25 spells it `MCP-Session-Id`: names are
    /// case-insensitive).
    pub const MCP_SESSION_ID: &str = "mcp-session-id";
    // S-VER-1.
    /// `MCP-Protocol-Version`.
    pub const MCP_PROTOCOL_VERSION: &str = "mcp-protocol-version";
    // S-RES-5.
    /// `Last-Event-ID`, sent on a resuming GET.
    pub const LAST_EVENT_ID: &str = "last-event-id";
    // S-NEW-8.
    /// `Mcp-Method`, mirrored from the body in the modern era.
    pub const MCP_METHOD: &str = "mcp-method";
    // S-NEW-8.
    /// `Mcp-Name`, mirrored from the body in the modern era.
    pub const MCP_NAME: &str = "mcp-name";
    /// `X-Accel-Buffering`: `no` keeps nginx-style proxies from buffering SSE.
    pub const X_ACCEL_BUFFERING: &str = "x-accel-buffering";
}

/// The names of [`header`] as [`http::HeaderName`]s: a lookup by one hashes the name as it
/// is, where a lookup by a `&str` first parses and validates it.
pub mod header_name {
    use http::HeaderName;

    /// [`super::header::MCP_SESSION_ID`].
    pub static MCP_SESSION_ID: HeaderName = HeaderName::from_static(super::header::MCP_SESSION_ID);
    /// [`super::header::MCP_PROTOCOL_VERSION`].
    pub static MCP_PROTOCOL_VERSION: HeaderName =
        HeaderName::from_static(super::header::MCP_PROTOCOL_VERSION);
    /// [`super::header::LAST_EVENT_ID`].
    pub static LAST_EVENT_ID: HeaderName = HeaderName::from_static(super::header::LAST_EVENT_ID);
}

/// Media types of the transport.
pub mod mime {
    /// `application/json`: one JSON-RPC message (or a 2025-03-26 batch).
    pub const APPLICATION_JSON: &str = "application/json";
    // S-SSE-1.
    /// `text/event-stream`: an SSE stream.
    pub const TEXT_EVENT_STREAM: &str = "text/event-stream";
    // S-POST-3.
    /// The `Accept` value a client sends on every POST.
    pub const POST_ACCEPT: &str = "application/json, text/event-stream";
}

/// The media type of a `Content-Type` value as written (media types compare
/// case-insensitively: `eq_ignore_ascii_case`), without parameters or spaces. Borrowed:
/// checking a header allocates nothing.
pub fn media_type(value: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(value).ok()?;
    let essence = s.split(';').next()?.trim();
    (!essence.is_empty()).then_some(essence)
}

/// Whether the `Content-Type` header of `headers` names `wanted` (parameters such as
/// `charset=utf-8` are allowed; comparison is case-insensitive).
pub fn content_type_is(headers: &HeaderMap, wanted: &str) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| media_type(v.as_bytes()))
        .is_some_and(|m| m.eq_ignore_ascii_case(wanted))
}

/// Whether the `Accept` headers allow `wanted` (`type/subtype`): an exact match, `type/*` or
/// `*/*`, with a quality above zero. A request with no `Accept` header at all accepts
/// anything (RFC 9110 §12.5.1).
pub fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    let mut values = headers.get_all(http::header::ACCEPT).iter().peekable();
    if values.peek().is_none() {
        return true;
    }
    let want_type = wanted.split_once('/').map_or(wanted, |(t, _)| t);
    let q_zero = |param: &str| {
        let p = param.trim();
        p.len() >= 2
            && p.as_bytes()[..2].eq_ignore_ascii_case(b"q=")
            && p[2..].trim().parse::<f32>().is_ok_and(|q| q <= 0.0)
    };
    values
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .any(|range| {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim();
            let matches = media.eq_ignore_ascii_case(wanted)
                || media == "*/*"
                || media
                    .strip_suffix("/*")
                    .is_some_and(|t| t.eq_ignore_ascii_case(want_type));
            matches && !parts.any(q_zero)
        })
}

// S-AUTH-10, S-AUTH-12.
/// The parameters of a `Bearer` challenge in `WWW-Authenticate` (RFC 6750 §3, RFC 9728 §5.1):
/// what a client needs to start its authorization flow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    /// `resource_metadata`: the URL of the protected resource metadata document.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the server requires, space-separated.
    pub scope: Option<String>,
    /// `error`, e.g. `invalid_token` or `insufficient_scope`.
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
    /// The response's `DPoP-Nonce` (RFC 9449 §8, §9): the nonce the server wants in the next
    /// DPoP proof (with `error="use_dpop_nonce"`, the request must be sent again with it).
    pub dpop_nonce: Option<String>,
}

/// The `DPoP-Nonce` response header (RFC 9449 §8).
pub const DPOP_NONCE: &str = "dpop-nonce";

/// Reads the first `Bearer` challenge of the `WWW-Authenticate` headers, else the first
/// `DPoP` one (RFC 9449 §7.1, same parameters), if any, with the response's `DPoP-Nonce`.
///
/// Tolerant by design: quoted and token values, any parameter order, several challenges in
/// one header or several headers; unknown parameters are ignored.
pub fn bearer_challenge(headers: &HeaderMap) -> Option<BearerChallenge> {
    let nonce = headers
        .get(DPOP_NONCE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    for scheme in ["bearer", "dpop"] {
        for value in headers.get_all(http::header::WWW_AUTHENTICATE) {
            let Ok(s) = value.to_str() else { continue };
            if let Some(mut ch) = parse_challenge(s, scheme) {
                ch.dpop_nonce.clone_from(&nonce);
                return Some(ch);
            }
        }
    }
    None
}

fn parse_challenge(s: &str, scheme: &str) -> Option<BearerChallenge> {
    let lower = s.to_ascii_lowercase();
    let start = find_scheme(&lower, scheme)?;
    let mut rest = &s[start + scheme.len()..];
    let mut out = BearerChallenge::default();
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        let Some(eq) = rest.find('=') else { break };
        let name = rest[..eq].trim();
        if name.contains(' ') {
            // The next challenge's scheme: this one is over.
            break;
        }
        rest = rest[eq + 1..].trim_start();
        let value;
        if let Some(stripped) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = stripped.char_indices();
            let mut end = stripped.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    _ => v.push(c),
                }
            }
            value = v;
            rest = &stripped[end.min(stripped.len())..];
        } else {
            let end = rest.find([',', ' ']).unwrap_or(rest.len());
            value = rest[..end].to_string();
            rest = &rest[end..];
        }
        match name.to_ascii_lowercase().as_str() {
            "resource_metadata" => out.resource_metadata = Some(value),
            "scope" => out.scope = Some(value),
            "error" => out.error = Some(value),
            "error_description" => out.error_description = Some(value),
            _ => {}
        }
    }
    Some(out)
}

/// Position of `scheme` as an auth-scheme token (at the start or after a comma/space).
fn find_scheme(lower: &str, scheme: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(pos) = lower[from..].find(scheme) {
        let at = from + pos;
        let before_ok = at == 0 || matches!(lower.as_bytes()[at - 1], b' ' | b',' | b'\t');
        let after = lower.as_bytes().get(at + scheme.len());
        let after_ok = matches!(after, None | Some(b' ') | Some(b'\t') | Some(b','));
        if before_ok && after_ok {
            return Some(at);
        }
        from = at + scheme.len();
    }
    None
}

/// Whether a response with `status` has no body (RFC 9110, 6.4.1: every 1xx, 204 and 304):
/// an adapter sends it without one, whatever its HTTP library would frame (async-h1 frames
/// an empty body of unknown length as chunked, terminating chunk included, which a browser
/// after a 204 takes for the start of the next response).
pub fn status_forbids_body(status: http::StatusCode) -> bool {
    status.is_informational()
        || status == http::StatusCode::NO_CONTENT
        || status == http::StatusCode::NOT_MODIFIED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodiless_statuses_are_1xx_204_and_304() {
        use http::StatusCode as S;
        for s in [
            S::CONTINUE,
            S::SWITCHING_PROTOCOLS,
            S::NO_CONTENT,
            S::NOT_MODIFIED,
        ] {
            assert!(status_forbids_body(s), "{s}");
        }
        for s in [
            S::OK,
            S::ACCEPTED,
            S::BAD_REQUEST,
            S::NOT_FOUND,
            S::INTERNAL_SERVER_ERROR,
        ] {
            assert!(!status_forbids_body(s), "{s}");
        }
    }
    use http::HeaderValue;

    fn h(name: http::header::HeaderName, values: &[&str]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for v in values {
            m.append(name.clone(), HeaderValue::from_str(v).unwrap());
        }
        m
    }

    #[test]
    fn s_post_3_accept_lists_and_wildcards() {
        let both = h(http::header::ACCEPT, &[mime::POST_ACCEPT]);
        assert!(accepts(&both, mime::APPLICATION_JSON));
        assert!(accepts(&both, mime::TEXT_EVENT_STREAM));
        let json_only = h(http::header::ACCEPT, &["application/json"]);
        assert!(!accepts(&json_only, mime::TEXT_EVENT_STREAM));
        let star = h(http::header::ACCEPT, &["*/*"]);
        assert!(accepts(&star, mime::TEXT_EVENT_STREAM));
        let text_star = h(http::header::ACCEPT, &["text/*;q=0.5"]);
        assert!(accepts(&text_star, mime::TEXT_EVENT_STREAM));
        assert!(!accepts(&text_star, mime::APPLICATION_JSON));
        let refused = h(
            http::header::ACCEPT,
            &["application/json", "text/event-stream;q=0"],
        );
        assert!(!accepts(&refused, mime::TEXT_EVENT_STREAM));
        assert!(accepts(&HeaderMap::new(), mime::TEXT_EVENT_STREAM));
        let upper = h(http::header::ACCEPT, &["Application/JSON"]);
        assert!(accepts(&upper, mime::APPLICATION_JSON));
    }

    #[test]
    fn content_type_ignores_parameters_and_case() {
        let ct = h(
            http::header::CONTENT_TYPE,
            &["Application/Json; charset=utf-8"],
        );
        assert!(content_type_is(&ct, mime::APPLICATION_JSON));
        assert!(!content_type_is(&ct, mime::TEXT_EVENT_STREAM));
        assert!(!content_type_is(&HeaderMap::new(), mime::APPLICATION_JSON));
        assert_eq!(media_type(b"  ;x"), None);
        assert_eq!(
            media_type(b" Text/Event-Stream ; q=1"),
            Some("Text/Event-Stream")
        );
    }

    #[test]
    fn s_auth_10_bearer_challenge_parameters() {
        let m = h(
            http::header::WWW_AUTHENTICATE,
            &[
                r#"Bearer resource_metadata="https://x.example/.well-known/oauth-protected-resource", scope="files:read files:write", error="insufficient_scope""#,
            ],
        );
        let c = bearer_challenge(&m).unwrap();
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://x.example/.well-known/oauth-protected-resource")
        );
        assert_eq!(c.scope.as_deref(), Some("files:read files:write"));
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
    }

    #[test]
    fn a_dpop_challenge_and_the_servers_nonce_are_read() {
        let mut m = h(
            http::header::WWW_AUTHENTICATE,
            &[r#"DPoP error="use_dpop_nonce", resource_metadata="https://x.example/prm""#],
        );
        m.insert(DPOP_NONCE, HeaderValue::from_static("n-1"));
        let c = bearer_challenge(&m).unwrap();
        assert_eq!(c.error.as_deref(), Some("use_dpop_nonce"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://x.example/prm")
        );
        assert_eq!(c.dpop_nonce.as_deref(), Some("n-1"));
        // A Bearer challenge wins over a DPoP one; the nonce goes with it.
        m.append(
            http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Bearer scope="s""#),
        );
        let c = bearer_challenge(&m).unwrap();
        assert_eq!((c.scope.as_deref(), c.error), (Some("s"), None));
        assert_eq!(c.dpop_nonce.as_deref(), Some("n-1"));
        // "DPoPx" is not the scheme.
        let other = h(http::header::WWW_AUTHENTICATE, &[r#"DPoPx error="e""#]);
        assert_eq!(bearer_challenge(&other), None);
    }

    #[test]
    fn bearer_challenge_among_others_and_token_values() {
        let m = h(
            http::header::WWW_AUTHENTICATE,
            &[r#"Basic realm="x", Bearer scope=read, error_description="a \"q\"""#],
        );
        let c = bearer_challenge(&m).unwrap();
        assert_eq!(c.scope.as_deref(), Some("read"));
        assert_eq!(c.error_description.as_deref(), Some(r#"a "q""#));
        let none = h(http::header::WWW_AUTHENTICATE, &[r#"Basic realm="x""#]);
        assert_eq!(bearer_challenge(&none), None);
        let bare = h(http::header::WWW_AUTHENTICATE, &["Bearer"]);
        assert_eq!(bearer_challenge(&bare), Some(BearerChallenge::default()));
    }
}
