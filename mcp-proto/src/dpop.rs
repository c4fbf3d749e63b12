//! DPoP (RFC 9449) on the client, as far as the core goes: which request a proof is for
//! ([`DpopRequest`]), and the [`DpopSigner`] the application hands in that makes it. The
//! key, the JWS and its times are the signer's (`mcp-driver`'s `DpopKey` is one); the core
//! decides where proofs go (every token request of the OAuth flow, every MCP request with a
//! DPoP-bound token), with which method, URL, token and server nonce.

/// The request a DPoP proof goes with (RFC 9449 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpopRequest<'a> {
    /// `htm`: the HTTP method.
    pub method: &'a str,
    /// `htu`: the target URI, without query and fragment.
    pub url: &'a str,
    /// The access token the request carries (the signer puts its SHA-256, base64url, in
    /// `ath`); `None` on a token request.
    pub access_token: Option<&'a str>,
    /// `nonce`: the server's latest `DPoP-Nonce`, if it gave one.
    pub nonce: Option<&'a str>,
}

/// Makes DPoP proofs with the application's key: a JWS of `typ` `dpop+jwt` whose header
/// carries the public key (`jwk`), with `jti` (unique), `iat` (now), `htm`, `htu`, and
/// `ath` and `nonce` when given. One key for the life of the tokens it binds.
pub trait DpopSigner: Send + Sync {
    /// The proof for `request`; `Err` says why none could be made.
    fn proof(&self, request: &DpopRequest<'_>) -> Result<String, String>;

    /// Another handle on the same key: the OAuth flow proves its token requests with one,
    /// the session its MCP requests with another (each owns its own; nothing is shared
    /// through the core).
    fn clone_box(&self) -> Box<dyn DpopSigner>;
}

/// `url` without its query and fragment: a proof's `htu` (RFC 9449 §4.2).
pub fn htu(url: &str) -> &str {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    &url[..end]
}

#[cfg(test)]
mod tests {
    #[test]
    fn htu_drops_the_query_and_the_fragment() {
        assert_eq!(
            super::htu("https://a.example/mcp?x=1#f"),
            "https://a.example/mcp"
        );
        assert_eq!(
            super::htu("https://a.example/mcp#f"),
            "https://a.example/mcp"
        );
        assert_eq!(super::htu("https://a.example/mcp"), "https://a.example/mcp");
    }
}
