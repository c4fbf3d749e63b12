// S-SEC-1/2/5, S-AUTH-8/9.
//! Who may talk to the server: `Host`/`Origin` validation (DNS rebinding), CORS
//! (opt-in), the authentication hook, and RFC 9728 protected resource metadata.
//!
//! Everything here is a pure function of the request head and the configuration; the
//! [`Router`](super::Router) calls it before any session is looked up, so a forbidden request
//! learns nothing about sessions.

use std::fmt;
use std::time::Duration;

use http::header::{self, HeaderMap, HeaderValue};
use serde::Serialize;

use super::RequestHead;
use super::error::ProtocolError;

// S-SEC-1, S-SEC-2, S-SEC-5, G-7.
/// `Host` and `Origin` validation, the DNS-rebinding defence.
///
/// A request whose `Host` (or `:authority`) is not allowed, or whose `Origin` is present and
/// not allowed, gets `403 Forbidden` with a JSON-RPC error body. A missing `Origin` is fine
/// (non-browser clients send none). Origins allowed by [`CorsConfig`] are allowed here
/// too.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HostValidation {
    /// The default: `Host` must be `localhost`, `127.0.0.1` or `[::1]` with any port, and an
    /// `Origin`, when present, must be `http(s)://` one of those with any port.
    #[default]
    Loopback,
    /// Explicit allow-lists. A `hosts` entry without a port (`example.com`) matches any port,
    /// one with a port (`example.com:8443`) only that port; an empty `hosts` allows any
    /// `Host`. `origins` are exact origins (`https://app.example.com`); an empty `origins`
    /// rejects every `Origin` not allowed by CORS: it fails closed (the TypeScript SDK's
    /// DNS-rebinding protection fails open with empty allow-lists).
    AllowList {
        /// Allowed `Host` values.
        hosts: Vec<String>,
        /// Allowed `Origin` values.
        origins: Vec<String>,
    },
    /// No validation at all. Only behind a proxy that already validates.
    Disabled,
}

const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Splits `host[:port]` (with `[v6]` literals) into the host and the optional port.
fn split_host_port(authority: &str) -> (&str, Option<&str>) {
    if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => {
                let host = &authority[..=end];
                let rest = &authority[end + 1..];
                (host, rest.strip_prefix(':'))
            }
            None => (authority, None),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            _ => (authority, None),
        }
    }
}

fn is_loopback_authority(authority: &str) -> bool {
    let (host, port) = split_host_port(authority);
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok && LOOPBACK_NAMES.iter().any(|n| n.eq_ignore_ascii_case(host))
}

/// The authority part of an origin (`scheme://authority`), when the scheme is http(s).
fn origin_authority(origin: &str) -> Option<&str> {
    let (scheme, rest) = origin.split_once("://")?;
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return None;
    }
    if rest.is_empty() || rest.contains('/') {
        return None;
    }
    Some(rest)
}

fn host_matches(entry: &str, authority: &str) -> bool {
    let (eh, ep) = split_host_port(entry);
    let (h, p) = split_host_port(authority);
    eh.eq_ignore_ascii_case(h) && ep.is_none_or(|ep| Some(ep) == p)
}

/// The request's authority: the URI's (HTTP/2 `:authority`), else the `Host` header.
pub(crate) fn request_authority<'a>(head: &'a RequestHead<'a>) -> Option<&'a str> {
    if let Some(a) = head.uri.authority() {
        return Some(a.as_str());
    }
    head.headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// The `Origin` header, if present (`Err` when present but not text).
fn request_origin(headers: &HeaderMap) -> Option<Result<&str, ()>> {
    headers
        .get(header::ORIGIN)
        .map(|v| v.to_str().map(str::trim).map_err(|_| ()))
}

impl HostValidation {
    // S-SEC-1/2/5.
    /// Checks `Host` and `Origin`: `authority` is the host the client named (the request's,
    /// or the one a trusted proxy forwarded); the `public` URL's host and origin are allowed
    /// whatever the policy (except [`Disabled`](Self::Disabled), which allows everything).
    pub(crate) fn check(
        &self,
        authority: Option<&str>,
        headers: &HeaderMap,
        cors: Option<&CorsConfig>,
        public: Option<&super::proxy::PublicUrl>,
    ) -> Result<(), ProtocolError> {
        let origin = request_origin(headers);
        // CORS-allowed origins are valid whatever the host policy (the operator listed them),
        // and so is the public URL's.
        let origin_ok = |o: &str| {
            cors.is_some_and(|c| c.allows_origin(o))
                || public.is_some_and(|p| p.origin().eq_ignore_ascii_case(o))
        };
        let public_host = |a: &str| public.is_some_and(|p| host_matches(p.authority(), a));
        let host_ok = match self {
            HostValidation::Disabled => return Ok(()),
            HostValidation::Loopback => {
                authority.is_some_and(|a| is_loopback_authority(a) || public_host(a))
            }
            HostValidation::AllowList { hosts, .. } => {
                hosts.is_empty()
                    || authority
                        .is_some_and(|a| hosts.iter().any(|h| host_matches(h, a)) || public_host(a))
            }
        };
        if !host_ok {
            return Err(ProtocolError::HostNotAllowed);
        }
        let allowed = match (self, origin) {
            (_, None) => true,
            (_, Some(Err(()))) => false,
            (HostValidation::Loopback, Some(Ok(o))) => {
                origin_authority(o).is_some_and(is_loopback_authority) || origin_ok(o)
            }
            (HostValidation::AllowList { origins, .. }, Some(Ok(o))) => {
                origins.iter().any(|a| a.eq_ignore_ascii_case(o)) || origin_ok(o)
            }
            (HostValidation::Disabled, _) => true,
        };
        if allowed {
            Ok(())
        } else {
            Err(ProtocolError::OriginNotAllowed)
        }
    }
}

/// Which origins CORS allows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllowedOrigins {
    /// Any origin: `Access-Control-Allow-Origin: *`. Never with credentials: the Fetch
    /// standard's CORS check refuses `*` on a credentialed request, and echoing every origin
    /// instead would let any web page make credentialed requests and read the answers, so
    /// [`CorsConfig::allow_credentials`] is ignored under this policy.
    Any,
    /// Exactly these origins (`https://app.example.com`), compared case-insensitively.
    List(Vec<String>),
}

/// CORS for browser-based clients, opt-in (mcp-go: `WithStreamableHTTPCORS`). Preflights
/// (`OPTIONS` with `Access-Control-Request-Method`) are answered with 204; every response to
/// an allowed origin carries `Access-Control-Allow-Origin` and exposes `Mcp-Session-Id`,
/// `MCP-Protocol-Version` and `WWW-Authenticate`, which a browser client must read.
///
/// Origins compare ASCII case-insensitively (scheme and host are case-insensitive); the
/// allowed origin is answered as the request spelled it, since the browser's CORS check
/// compares it byte for byte. Every response of an allow-list policy carries
/// `Vary: Origin`, also those to a request without an allowed `Origin`, so that a shared cache
/// never serves one origin's answer to another (Fetch standard, "CORS protocol and HTTP
/// caches").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CorsConfig {
    /// Allowed origins.
    pub allowed_origins: AllowedOrigins,
    /// `Access-Control-Allow-Credentials: true` (allow-list policies only: ignored under
    /// [`AllowedOrigins::Any`]).
    pub allow_credentials: bool,
    /// `Access-Control-Max-Age` of preflight answers.
    pub max_age: Option<Duration>,
    /// Request headers allowed beyond the transport's own.
    pub extra_allowed_headers: Vec<String>,
    /// Response headers exposed beyond the transport's own.
    pub extra_exposed_headers: Vec<String>,
}

const CORS_ALLOWED_HEADERS: &str = "content-type, accept, authorization, dpop, mcp-session-id, mcp-protocol-version, last-event-id";
const CORS_EXPOSED_HEADERS: &str =
    "mcp-session-id, mcp-protocol-version, www-authenticate, dpop-nonce, retry-after";

impl CorsConfig {
    /// CORS for exactly these origins.
    pub fn allow_origins<I, S>(origins: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        CorsConfig {
            allowed_origins: AllowedOrigins::List(origins.into_iter().map(Into::into).collect()),
            allow_credentials: false,
            max_age: Some(Duration::from_secs(600)),
            extra_allowed_headers: Vec::new(),
            extra_exposed_headers: Vec::new(),
        }
    }

    /// CORS for any origin.
    pub fn allow_any_origin() -> Self {
        CorsConfig {
            allowed_origins: AllowedOrigins::Any,
            ..CorsConfig::allow_origins(Vec::<String>::new())
        }
    }

    /// Sets `Access-Control-Allow-Credentials`.
    pub fn with_credentials(mut self, allow: bool) -> Self {
        self.allow_credentials = allow;
        self
    }

    /// Whether `origin` is allowed.
    pub fn allows_origin(&self, origin: &str) -> bool {
        match &self.allowed_origins {
            AllowedOrigins::Any => true,
            AllowedOrigins::List(l) => l.iter().any(|o| o.eq_ignore_ascii_case(origin)),
        }
    }

    /// Adds the headers of an actual (non-preflight) response for `origin`.
    pub(crate) fn apply(&self, origin: Option<&str>, headers: &mut HeaderMap) {
        let Some(origin) = origin.filter(|o| self.allows_origin(o)) else {
            if self.varies_by_origin() {
                headers.append(header::VARY, HeaderValue::from_static("origin"));
            }
            return;
        };
        self.allow_origin_header(origin, headers);
        let mut exposed = CORS_EXPOSED_HEADERS.to_owned();
        for h in &self.extra_exposed_headers {
            exposed.push_str(", ");
            exposed.push_str(h);
        }
        if let Ok(v) = HeaderValue::from_str(&exposed) {
            headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, v);
        }
    }

    /// Whether the answer depends on the request's `Origin` (an allow-list echoes it).
    fn varies_by_origin(&self) -> bool {
        !matches!(self.allowed_origins, AllowedOrigins::Any)
    }

    fn allow_origin_header(&self, origin: &str, headers: &mut HeaderMap) {
        let value = if self.varies_by_origin() {
            match HeaderValue::from_str(origin) {
                Ok(v) => v,
                Err(_) => return,
            }
        } else {
            HeaderValue::from_static("*")
        };
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        headers.append(header::VARY, HeaderValue::from_static("origin"));
        if self.allow_credentials && self.varies_by_origin() {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
    }

    /// The headers of a preflight answer allowing `methods`, or `None` when the origin is
    /// not allowed.
    pub(crate) fn preflight(
        &self,
        origin: Option<&str>,
        methods: HeaderValue,
    ) -> Option<HeaderMap> {
        let origin = origin.filter(|o| self.allows_origin(o))?;
        let mut headers = HeaderMap::new();
        self.allow_origin_header(origin, &mut headers);
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, methods);
        let mut allowed = CORS_ALLOWED_HEADERS.to_owned();
        for h in &self.extra_allowed_headers {
            allowed.push_str(", ");
            allowed.push_str(h);
        }
        if let Ok(v) = HeaderValue::from_str(&allowed) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, v);
        }
        if let Some(age) = self.max_age {
            headers.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from(age.as_secs()),
            );
        }
        Some(headers)
    }
}

/// What an [`Authenticator`] decided about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthDecision {
    // S-SESS-12.
    /// Let it through. `principal` names who is calling (a user id, a token subject): a
    /// session is bound to the principal that created it, and a request from any other
    /// principal for that session gets 404, as if the session did not exist.
    Allow {
        /// Who is calling, if known.
        principal: Option<String>,
    },
    // S-AUTH-4/9/12.
    /// `401 Unauthorized` with a `Bearer` challenge: `resource_metadata` is
    /// added when [`ProtectedResourceMetadata`] is configured.
    Unauthorized {
        /// `error`, e.g. `invalid_token`.
        error: Option<String>,
        /// `error_description`.
        description: Option<String>,
        /// `scope` the request needs.
        scope: Option<String>,
    },
    // S-AUTH-13.
    /// `403 Forbidden` with `error="insufficient_scope"`.
    InsufficientScope {
        /// The scope the request needs.
        scope: String,
        /// `error_description`.
        description: Option<String>,
    },
    /// The credentials could not be checked right now (the token introspection endpoint or
    /// the key set is unreachable, the check timed out): `503 Service Unavailable` with a
    /// JSON-RPC error saying so. Not a 401: the client's token may well be good, and a 401
    /// would send it through authorization again.
    Unavailable {
        /// What is unavailable, for the error message.
        description: Option<String>,
    },
    /// `401 Unauthorized` with a `DPoP` challenge (RFC 9449 §7.1): for a DPoP-bound token
    /// whose proof is missing or wrong, or a request that must prove possession.
    /// `resource_metadata` is added as for [`Unauthorized`](Self::Unauthorized); `nonce`, when
    /// set, goes in a `DPoP-Nonce` header (§9: with `error="use_dpop_nonce"` the client sends
    /// the request again with it).
    DpopUnauthorized {
        /// `error`: `invalid_dpop_proof`, `use_dpop_nonce`, `invalid_token`, ….
        error: Option<String>,
        /// `error_description`.
        description: Option<String>,
        /// `algs`: the proof algorithms accepted, space-separated (`ES256`).
        algs: String,
        /// The nonce the next proof must carry.
        nonce: Option<String>,
    },
}

impl AuthDecision {
    /// Allows the request as `principal`.
    pub fn allow(principal: impl Into<String>) -> Self {
        AuthDecision::Allow {
            principal: Some(principal.into()),
        }
    }

    /// Refuses the request with a plain 401 challenge.
    pub fn unauthorized() -> Self {
        AuthDecision::Unauthorized {
            error: None,
            description: None,
            scope: None,
        }
    }
}

// S-AUTH-4, S-SESS-11.
/// The authentication hook (mcp-go: its auth middleware): validates each request's credentials
/// (every request, never the session alone).
///
/// It is synchronous, like the rest of the core. Validation that must await (token
/// introspection) runs in the adapter before the head is handed over; the adapter then
/// passes its result as [`RequestHead::principal`], which this hook can read. Installed
/// authenticators must be `Send` (the router holds `dyn Authenticator + Send`).
pub trait Authenticator {
    /// Decides about one request from its head.
    fn authenticate(&mut self, head: &RequestHead<'_>) -> AuthDecision;
}

impl<F> Authenticator for F
where
    F: FnMut(&RequestHead<'_>) -> AuthDecision,
{
    fn authenticate(&mut self, head: &RequestHead<'_>) -> AuthDecision {
        self(head)
    }
}

/// Whether a request is one the authentication step judges: a request to the MCP endpoint,
/// except CORS preflights; never the protected resource metadata, which clients must reach
/// without credentials (RFC 9728).
pub fn needs_authentication(
    endpoint_path: &str,
    metadata: Option<&ProtectedResourceMetadata>,
    head: &RequestHead<'_>,
) -> bool {
    let path = head.uri.path();
    !metadata.is_some_and(|m| m.serves(path, endpoint_path))
        && path == endpoint_path
        && head.method != http::Method::OPTIONS
}

// S-AUTH-8, S-AUTH-9.
/// RFC 9728 protected resource metadata (mcp-go: `WithProtectedResourceMetadata`).
/// Served at `/.well-known/oauth-protected-resource` and at its path-suffixed form
/// (`/.well-known/oauth-protected-resource/mcp`, RFC 9728 §3.1); its URL goes in the
/// `resource_metadata` parameter of every 401 challenge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ProtectedResourceMetadata {
    /// `resource`: the canonical URI of this MCP server, e.g. `https://mcp.example.com/mcp`.
    pub resource: String,
    // S-AUTH-8.
    /// `authorization_servers`: at least one issuer URL.
    pub authorization_servers: Vec<String>,
    /// `scopes_supported`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    /// `bearer_methods_supported`, normally `["header"]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bearer_methods_supported: Vec<String>,
    /// `resource_name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
    /// `resource_documentation`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_documentation: Option<String>,
    /// Overrides the URL put in `resource_metadata` (by default derived from `resource`).
    #[serde(skip)]
    pub metadata_url: Option<String>,
}

/// The RFC 9728 well-known prefix.
pub const WELL_KNOWN_PRM: &str = "/.well-known/oauth-protected-resource";

impl ProtectedResourceMetadata {
    /// Metadata for `resource` protected by `authorization_server`.
    pub fn new(resource: impl Into<String>, authorization_server: impl Into<String>) -> Self {
        ProtectedResourceMetadata {
            resource: resource.into(),
            authorization_servers: vec![authorization_server.into()],
            scopes_supported: Vec::new(),
            bearer_methods_supported: vec!["header".to_owned()],
            resource_name: None,
            resource_documentation: None,
            metadata_url: None,
        }
    }

    /// Metadata whose `resource` is the server's public URL
    /// ([`ServerConfig::with_public_url`](super::ServerConfig::with_public_url)), protected by
    /// `authorization_server`. Until a public URL is configured, `resource` is empty.
    pub fn for_public_url(authorization_server: impl Into<String>) -> Self {
        ProtectedResourceMetadata::new("", authorization_server)
    }

    /// Sets `scopes_supported`.
    pub fn with_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes_supported = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets `resource_name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.resource_name = Some(name.into());
        self
    }

    /// `(origin, path)` of `resource`, e.g. `("https://h", "/mcp")`.
    fn resource_parts(&self) -> (&str, &str) {
        let r = self.resource.trim_end_matches('/');
        let after_scheme = r.find("://").map_or(0, |i| i + 3);
        match r[after_scheme..].find('/') {
            Some(i) => (&r[..after_scheme + i], &r[after_scheme + i..]),
            None => (r, ""),
        }
    }

    /// The absolute URL of the metadata document: the well-known prefix inserted between the
    /// origin and the path of `resource` (RFC 9728 §3.1).
    pub fn url(&self) -> String {
        if let Some(u) = &self.metadata_url {
            return u.clone();
        }
        let (origin, path) = self.resource_parts();
        format!("{origin}{WELL_KNOWN_PRM}{path}")
    }

    /// Whether `path` names the document: the bare well-known path, its form suffixed with
    /// the endpoint path, or its form suffixed with the path of `resource`.
    pub(crate) fn serves(&self, path: &str, endpoint_path: &str) -> bool {
        let Some(rest) = path.strip_prefix(WELL_KNOWN_PRM) else {
            return false;
        };
        let rest = rest.trim_end_matches('/');
        rest.is_empty()
            || rest == endpoint_path.trim_end_matches('/')
            || rest == self.resource_parts().1
    }

    /// The JSON document.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec())
    }
}

/// Quotes a `WWW-Authenticate` parameter value (RFC 9110 quoted-string).
fn quote(out: &mut String, v: &str) {
    out.push('"');
    for c in v.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        if c.is_control() {
            continue;
        }
        out.push(c);
    }
    out.push('"');
}

/// The `WWW-Authenticate: Bearer …` value for a refusal.
pub(crate) fn bearer_challenge(
    prm: Option<&ProtectedResourceMetadata>,
    error: Option<&str>,
    description: Option<&str>,
    scope: Option<&str>,
) -> HeaderValue {
    challenge("Bearer", prm, error, description, scope, None)
}

/// The `WWW-Authenticate: DPoP …` value for a refusal (RFC 9449 §7.1).
pub(crate) fn dpop_challenge(
    prm: Option<&ProtectedResourceMetadata>,
    error: Option<&str>,
    description: Option<&str>,
    algs: &str,
) -> HeaderValue {
    challenge("DPoP", prm, error, description, None, Some(algs))
}

fn challenge(
    scheme: &'static str,
    prm: Option<&ProtectedResourceMetadata>,
    error: Option<&str>,
    description: Option<&str>,
    scope: Option<&str>,
    algs: Option<&str>,
) -> HeaderValue {
    let mut s = String::from(scheme);
    let mut first = true;
    let mut param = |s: &mut String, name: &str, v: &str| {
        s.push_str(if first { " " } else { ", " });
        first = false;
        s.push_str(name);
        s.push('=');
        quote(s, v);
    };
    if let Some(p) = prm {
        param(&mut s, "resource_metadata", &p.url());
    }
    if let Some(scope) = scope {
        param(&mut s, "scope", scope);
    }
    if let Some(e) = error {
        param(&mut s, "error", e);
    }
    if let Some(d) = description {
        param(&mut s, "error_description", d);
    }
    if let Some(a) = algs {
        param(&mut s, "algs", a);
    }
    HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static(scheme))
}

impl fmt::Display for HostValidation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostValidation::Loopback => f.write_str("loopback"),
            HostValidation::AllowList { .. } => f.write_str("allow-list"),
            HostValidation::Disabled => f.write_str("disabled"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s_sec_5_loopback_authorities() {
        for ok in [
            "localhost",
            "localhost:3000",
            "127.0.0.1:1",
            "[::1]:8080",
            "[::1]",
            "LOCALHOST",
        ] {
            assert!(is_loopback_authority(ok), "{ok}");
        }
        for bad in [
            "evil.example.com",
            "localhost.evil.com",
            "127.0.0.2",
            "[::2]:1",
            "localhost:x",
            "localhost:",
        ] {
            assert!(!is_loopback_authority(bad), "{bad}");
        }
        assert_eq!(
            origin_authority("http://localhost:3000"),
            Some("localhost:3000")
        );
        assert_eq!(origin_authority("file://x"), None);
        assert_eq!(origin_authority("null"), None);
    }

    #[test]
    fn allow_list_host_entries() {
        assert!(host_matches("example.com", "example.com:443"));
        assert!(host_matches("example.com:443", "EXAMPLE.com:443"));
        assert!(!host_matches("example.com:443", "example.com:80"));
        assert!(!host_matches("example.com", "evil.com"));
    }

    #[test]
    fn s_auth_9_metadata_url_inserts_well_known() {
        let p = ProtectedResourceMetadata::new("https://mcp.example.com/mcp", "https://as.example");
        assert_eq!(
            p.url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert!(p.serves("/.well-known/oauth-protected-resource", "/mcp"));
        assert!(p.serves("/.well-known/oauth-protected-resource/mcp", "/mcp"));
        assert!(!p.serves("/.well-known/oauth-protected-resource/other", "/mcp"));
        let root = ProtectedResourceMetadata::new("https://mcp.example.com", "https://as.example");
        assert_eq!(
            root.url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource"
        );
        let v = bearer_challenge(Some(&p), Some("invalid_token"), None, Some("a b"));
        assert_eq!(
            v.to_str().unwrap(),
            "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\", scope=\"a b\", error=\"invalid_token\""
        );
    }
}
