//! URLs of the flow: the HTTPS rule, the well-known locations of RFC 9728 and RFC 8414 in the
//! order the MCP authorization specification lists them, the canonical resource URI, and the
//! redirect URI check. All parsing is the `url` crate's.

use url::{Host, Url};

use super::error::AuthError;

/// Whether `url`'s host is a loopback host: `localhost`, an address in `127.0.0.0/8`, or
/// `::1`.
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(a)) => a.is_loopback(),
        Some(Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    }
}

/// Parses an absolute `http(s)` URL and applies the HTTPS rule: `https`, or `http` to a
/// loopback host, or any `http` when `allow_http`.
pub(crate) fn secure_url(s: &str, allow_http: bool) -> Result<Url, AuthError> {
    let insecure = || AuthError::InsecureUrl { url: s.to_owned() };
    let url = Url::parse(s).map_err(|_| insecure())?;
    match url.scheme() {
        "https" if url.host().is_some() => Ok(url),
        "http" if url.host().is_some() && (allow_http || is_loopback(&url)) => Ok(url),
        _ => Err(insecure()),
    }
}

/// The path of `url` without its trailing slashes ("" for the root).
fn trimmed_path(url: &Url) -> &str {
    url.path().trim_end_matches('/')
}

/// `scheme://host[:port]` of `url`.
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The protected resource metadata locations for the MCP endpoint `endpoint` when the
/// challenge gave none (RFC 9728 §3.1; MCP authorization, "Protected Resource Metadata
/// Discovery Requirements"): the path-suffixed form first, then the root.
pub(crate) fn resource_metadata_urls(endpoint: &Url) -> Vec<String> {
    const WK: &str = "/.well-known/oauth-protected-resource";
    let origin = origin(endpoint);
    let path = trimmed_path(endpoint);
    let mut out = Vec::with_capacity(2);
    if !path.is_empty() {
        out.push(format!("{origin}{WK}{path}"));
    }
    out.push(format!("{origin}{WK}"));
    out
}

/// The authorization server metadata locations of `issuer`, in the order of MCP
/// authorization "Authorization Server Metadata Discovery" (RFC 8414 §3.1 path insertion,
/// then OpenID Connect Discovery with path insertion, then with path appending).
pub(crate) fn server_metadata_urls(issuer: &Url) -> Vec<String> {
    const OAUTH: &str = "/.well-known/oauth-authorization-server";
    const OIDC: &str = "/.well-known/openid-configuration";
    let origin = origin(issuer);
    let path = trimmed_path(issuer);
    if path.is_empty() {
        vec![format!("{origin}{OAUTH}"), format!("{origin}{OIDC}")]
    } else {
        vec![
            format!("{origin}{OAUTH}{path}"),
            format!("{origin}{OIDC}{path}"),
            format!("{origin}{path}{OIDC}"),
        ]
    }
}

/// Parses an issuer identifier: HTTPS (or loopback HTTP), no query, no fragment (RFC 8414
/// §2).
pub(crate) fn issuer_url(issuer: &str, allow_http: bool) -> Result<Url, AuthError> {
    let url = secure_url(issuer, allow_http)?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(AuthError::Malformed {
            document: super::error::Document::ResourceMetadata,
            detail: format!("issuer {issuer:?} has a query or fragment"),
        });
    }
    Ok(url)
}

/// The canonical URI of the MCP server at `endpoint` (MCP authorization, "Canonical Server
/// URI"; RFC 8707 §2): lower-case scheme and host (the `url` crate's serialization), no
/// fragment, no trailing slash on an empty path.
pub(crate) fn canonical_resource(endpoint: &Url) -> String {
    let mut u = endpoint.clone();
    u.set_fragment(None);
    let s = u.to_string();
    if u.path() == "/" && u.query().is_none() {
        s.trim_end_matches('/').to_owned()
    } else {
        s
    }
}

/// Whether the protected resource metadata's `resource` identifies the MCP server at
/// `endpoint`: the same origin (scheme, host and port, compared after the `url` crate's
/// normalization: case, default port), and a path that is the endpoint's path or one of its
/// parent paths, at a segment boundary (RFC 9728 §3.3 and §7.3; a resource served at the
/// root identifies the whole origin).
pub(crate) fn resource_matches(resource: &str, endpoint: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.fragment().is_some() || r.origin() != endpoint.origin() {
        return false;
    }
    let rp = trimmed_path(&r);
    let ep = trimmed_path(endpoint);
    ep == rp || (ep.starts_with(rp) && ep.as_bytes().get(rp.len()) == Some(&b'/'))
}

/// Checks a redirect URI: HTTPS, or HTTP to a loopback host (MCP authorization,
/// "Communication Security": "All redirect URIs MUST be either localhost or use HTTPS").
pub(crate) fn redirect_uri(s: &str) -> Result<Url, AuthError> {
    let url =
        Url::parse(s).map_err(|e| AuthError::InvalidConfig(format!("redirect URI {s:?}: {e}")))?;
    let ok = match url.scheme() {
        "https" => url.host().is_some(),
        "http" => is_loopback(&url),
        _ => false,
    };
    if !ok || url.fragment().is_some() {
        return Err(AuthError::InvalidConfig(format!(
            "redirect URI {s:?} must be https:// or http:// to a loopback host, without a fragment"
        )));
    }
    Ok(url)
}

/// Checks a client ID metadata document URL: HTTPS with a path (MCP authorization, "Client
/// ID Metadata Documents").
pub(crate) fn metadata_document_url(s: &str) -> Result<Url, AuthError> {
    let url = Url::parse(s)
        .map_err(|e| AuthError::InvalidConfig(format!("client metadata document {s:?}: {e}")))?;
    if url.scheme() != "https" || url.host().is_none() || trimmed_path(&url).is_empty() {
        return Err(AuthError::InvalidConfig(format!(
            "client metadata document URL {s:?} must be https:// with a path"
        )));
    }
    Ok(url)
}

/// Whether `a` and `b` name the same redirect endpoint: scheme, host, port and path
/// (the query and fragment of the redirect carry the response).
pub(crate) fn same_endpoint(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host() == b.host()
        && a.port_or_known_default() == b.port_or_known_default()
        && a.path() == b.path()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn resource_metadata_locations_path_first_then_root() {
        assert_eq!(
            resource_metadata_urls(&u("https://example.com/public/mcp")),
            [
                "https://example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://example.com/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            resource_metadata_urls(&u("https://example.com/")),
            ["https://example.com/.well-known/oauth-protected-resource"]
        );
        assert_eq!(
            resource_metadata_urls(&u("http://127.0.0.1:8080/mcp/")),
            [
                "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
                "http://127.0.0.1:8080/.well-known/oauth-protected-resource",
            ]
        );
    }

    #[test]
    fn server_metadata_locations_in_the_spec_order() {
        assert_eq!(
            server_metadata_urls(&u("https://auth.example.com/tenant1")),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            server_metadata_urls(&u("https://auth.example.com")),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn the_https_rule_exempts_loopback_only() {
        assert!(secure_url("https://as.example/token", false).is_ok());
        assert!(secure_url("http://localhost:9/token", false).is_ok());
        assert!(secure_url("http://127.0.0.7/token", false).is_ok());
        assert!(secure_url("http://[::1]:3/x", false).is_ok());
        for bad in [
            "http://as.example/token",
            "http://localhost.evil.example/x",
            "ftp://as.example/x",
            "not a url",
            "file:///etc/passwd",
        ] {
            assert!(
                matches!(secure_url(bad, false), Err(AuthError::InsecureUrl { .. })),
                "{bad}"
            );
        }
        assert!(secure_url("http://as.example/token", true).is_ok());
    }

    #[test]
    fn resource_identity_same_origin_and_parent_path() {
        let ep = u("https://mcp.example.com/server/mcp");
        assert!(resource_matches("https://mcp.example.com/server/mcp", &ep));
        assert!(resource_matches("https://MCP.example.com:443/server", &ep));
        assert!(resource_matches("https://mcp.example.com", &ep));
        assert!(!resource_matches("https://mcp.example.com/serv", &ep));
        assert!(!resource_matches(
            "https://other.example.com/server/mcp",
            &ep
        ));
        assert!(!resource_matches("http://mcp.example.com/server/mcp", &ep));
        assert!(!resource_matches(
            "https://mcp.example.com/server/mcp/more",
            &ep
        ));
        assert!(!resource_matches("garbage", &ep));
    }

    #[test]
    fn canonical_resource_drops_the_root_slash_and_fragment() {
        assert_eq!(
            canonical_resource(&u("HTTPS://MCP.Example.com/")),
            "https://mcp.example.com"
        );
        assert_eq!(
            canonical_resource(&u("https://mcp.example.com/mcp#x")),
            "https://mcp.example.com/mcp"
        );
    }

    #[test]
    fn redirect_uris_must_be_https_or_loopback() {
        assert!(redirect_uri("http://127.0.0.1:3000/callback").is_ok());
        assert!(redirect_uri("http://localhost/cb").is_ok());
        assert!(redirect_uri("https://app.example/cb").is_ok());
        assert!(redirect_uri("http://app.example/cb").is_err());
        assert!(redirect_uri("com.example.app:/cb").is_err());
        assert!(metadata_document_url("https://app.example/client.json").is_ok());
        assert!(metadata_document_url("https://app.example").is_err());
        assert!(metadata_document_url("http://localhost/client.json").is_err());
    }
}
