//! [`AuthError`]: why an authorization attempt failed, sorted by who is at fault (the
//! configuration, a server, the person at the browser, the transport).

use http::StatusCode;

use crate::client::TransportFailure;

/// What an OAuth error response said (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 6749 §4.1.2.1):
/// the server's `error` code and its `error_description`, verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuthErrorBody {
    /// `error`, e.g. `invalid_grant` (`None` when the body was not an OAuth error object).
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
    /// `error_uri`.
    pub error_uri: Option<String>,
}

impl std::fmt::Display for OAuthErrorBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.error, &self.error_description) {
            (Some(e), Some(d)) => write!(f, "{e}: {d}"),
            (Some(e), None) => f.write_str(e),
            (None, Some(d)) => f.write_str(d),
            (None, None) => f.write_str("no OAuth error object"),
        }
    }
}

/// Which document or exchange an error concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Document {
    /// The protected resource metadata (RFC 9728).
    ResourceMetadata,
    /// The authorization server metadata (RFC 8414, OpenID Connect Discovery 1.0).
    ServerMetadata,
    /// The dynamic client registration response (RFC 7591).
    Registration,
    /// A token endpoint response (RFC 6749 §5).
    Token,
    /// The identity provider's token exchange response (RFC 8693 §2.2; the ID-JAG of
    /// enterprise-managed authorization).
    TokenExchange,
}

impl std::fmt::Display for Document {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Document::ResourceMetadata => "protected resource metadata",
            Document::ServerMetadata => "authorization server metadata",
            Document::Registration => "client registration response",
            Document::Token => "token response",
            Document::TokenExchange => "identity provider's token exchange response",
        })
    }
}

/// Why authorization failed. Every variant is data: no peer input panics, none is dropped
/// silently.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    // ---- the configuration (the application's fault)
    /// The OAuth configuration cannot work (a redirect URI that is neither HTTPS nor
    /// loopback, a client ID metadata document URL that is not HTTPS with a path, …).
    #[error("invalid OAuth configuration: {0}")]
    InvalidConfig(String),
    /// The application's assertion could not be had: its `AssertionSigner` could not sign a
    /// `private_key_jwt` assertion, or its `AssertionSource` gave no JWT bearer assertion.
    #[error("no assertion: {0}")]
    Assertion(String),
    /// No random bytes could be had for PKCE and `state`: nothing is sent without them.
    #[error("no random source for PKCE and state")]
    NoRandomness,
    /// The authorization code grant needs a person, and no redirect handler was given.
    #[error("a person must authorize at {url}, and no redirect handler is configured")]
    AuthorizationRequired {
        /// The authorization URL to visit.
        url: String,
    },

    // ---- discovery (the servers' fault)
    /// No protected resource metadata was found at any of the locations tried
    /// (MCP authorization, "Protected Resource Metadata Discovery Requirements").
    #[error("no protected resource metadata found (tried {tried:?})")]
    NoResourceMetadata {
        /// The URLs tried, in order.
        tried: Vec<String>,
    },
    /// No authorization server metadata was found at any well-known location of the issuer
    /// (RFC 8414 §3.1, OpenID Connect Discovery 1.0 §4).
    #[error("no authorization server metadata for {issuer} (tried {tried:?})")]
    NoServerMetadata {
        /// The issuer.
        issuer: String,
        /// The URLs tried, in order.
        tried: Vec<String>,
    },
    /// A document is not what its specification requires (not JSON, a required member
    /// missing or of the wrong type, …).
    #[error("malformed {document}: {detail}")]
    Malformed {
        /// Which document.
        document: Document,
        /// What was wrong.
        detail: String,
    },
    /// The metadata's `issuer` differs from the issuer whose well-known URL served it
    /// (RFC 8414 §3.3): the metadata is not used.
    #[error("authorization server metadata names issuer {found:?}, expected {expected:?}")]
    IssuerMismatch {
        /// The issuer the metadata was fetched for.
        expected: String,
        /// The `issuer` it contained.
        found: String,
    },
    /// The protected resource metadata's `resource` does not identify this MCP server
    /// (RFC 9728 §3.3, §7.3).
    #[error("protected resource metadata is for {found:?}, not {expected:?}")]
    ResourceMismatch {
        /// The MCP endpoint.
        expected: String,
        /// The `resource` it contained.
        found: String,
    },
    /// The authorization server does not list `S256` in `code_challenge_methods_supported`
    /// (MCP authorization, "Authorization Code Protection"): the client refuses to proceed.
    #[error("the authorization server does not support PKCE with S256")]
    PkceUnsupported,
    /// The authorization server does not offer what this client needs (a grant type, an
    /// endpoint, a token endpoint authentication method it can use).
    #[error("the authorization server is unsuitable: {0}")]
    Unsupported(String),
    /// A URL the flow would contact or open is not HTTPS and not loopback (OAuth 2.1 §1.5).
    #[error("refusing a non-HTTPS URL outside loopback: {url}")]
    InsecureUrl {
        /// The URL.
        url: String,
    },
    /// No way to identify this client to the authorization server: no pre-registered
    /// credentials for it, no client ID metadata document it accepts, no registration
    /// endpoint.
    #[error(
        "no client identity for {issuer}: pre-register a client, or give a client ID metadata document URL"
    )]
    NoClientIdentity {
        /// The issuer.
        issuer: String,
    },
    /// The pre-registered credentials belong to another authorization server than the one
    /// the protected resource metadata names (MCP authorization, "Authorization Server
    /// Binding").
    #[error("pre-registered credentials are for {registered:?}, the resource now uses {issuer:?}")]
    CredentialsForOtherIssuer {
        /// The issuer the credentials were registered with.
        registered: String,
        /// The issuer in use.
        issuer: String,
    },

    // ---- the exchanges
    /// A metadata or registration or token request got an error status or error object.
    #[error("{document} request failed with {status}: {body}")]
    Rejected {
        /// Which exchange.
        document: Document,
        /// The HTTP status.
        status: StatusCode,
        /// The OAuth error object, if the body had one.
        body: OAuthErrorBody,
    },
    /// The token endpoint issued a token of a type this client cannot present (only
    /// `Bearer` is supported).
    #[error("unsupported token type {0:?}")]
    UnsupportedTokenType(String),
    /// An exchange failed below HTTP.
    #[error("{document} request failed: {failure}")]
    Transport {
        /// Which exchange.
        document: Document,
        /// How.
        failure: TransportFailure,
    },
    /// A response body exceeded the configured limit.
    #[error("{document} larger than {limit} bytes")]
    TooLarge {
        /// Which document.
        document: Document,
        /// The limit.
        limit: usize,
    },
    /// More redirects than allowed while fetching a metadata document, or a redirect
    /// without a usable `Location`.
    #[error("too many or bad redirects fetching {document}")]
    Redirects {
        /// Which document.
        document: Document,
    },
    /// An exchange got no complete answer within the request timeout.
    #[error("{document} request timed out")]
    TimedOut {
        /// Which exchange.
        document: Document,
    },

    // ---- the authorization response (the browser's side)
    /// The authorization server redirected with an error (RFC 6749 §4.1.2.1), e.g.
    /// `access_denied`.
    #[error("authorization denied: {0}")]
    Denied(OAuthErrorBody),
    /// The redirect's `state` is missing or differs from the one sent (RFC 6749 §10.12).
    #[error("the authorization response's state does not match")]
    StateMismatch,
    /// The redirect's `iss` is missing where the server promised one, or names another
    /// issuer (RFC 9207 §2.4).
    #[error("the authorization response's iss {found:?} does not match issuer {expected:?}")]
    IssMismatch {
        /// The recorded issuer.
        expected: String,
        /// The `iss` received (`None`: absent although advertised).
        found: Option<String>,
    },
    /// The redirect is not a valid authorization response (no `code`, a parameter given
    /// twice, not the registered redirect URI).
    #[error("invalid authorization response: {0}")]
    InvalidRedirect(String),
    /// The person did not complete the authorization within the configured time, or the
    /// redirect handler gave up.
    #[error("authorization was not completed: {0}")]
    Abandoned(String),
    /// Authorization was retried as often as allowed for one request, and the server still
    /// refused (MCP authorization, "Step-Up Authorization Flow").
    #[error("authorization retry limit ({limit}) reached")]
    RetryLimit {
        /// The limit.
        limit: u32,
    },
}
