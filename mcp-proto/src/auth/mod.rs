//! OAuth 2.1 for the client, as the MCP authorization specification describes it
//! (revisions 2025-11-25 and 2026-07-28, "Authorization"): [`OAuthClient`], a sans-IO state
//! machine like the transport's.
//!
//! # Theory of operation
//!
//! The machine turns what the MCP server said (a `401`, or a `403` with
//! `error="insufficient_scope"`, and its `WWW-Authenticate: Bearer` challenge) into HTTP
//! intents for the discovery, registration and token requests, and into one
//! [`AuthorizationRequest`] when a person must visit an authorization URL. It never opens a
//! socket, reads a clock or a random source: responses come back as [`AuthInput`]s, the
//! redirect as a URL ([`handle_redirect`](OAuthClient::handle_redirect)), time as `Instant`
//! arguments, random bytes from the [`Entropy`] it is given. What it obtains is the header
//! of every MCP request ([`authorization`](OAuthClient::authorization)).
//!
//! **Discovery** (on each full flow, never cached across flows, so that a resource that moved
//! to another authorization server is seen): the protected resource metadata (RFC 9728) from
//! the challenge's `resource_metadata`, else the path-suffixed well-known URL of the MCP
//! endpoint, then the root one; its `resource` must be this MCP server (same origin, the
//! endpoint's path or a parent of it). The first of `authorization_servers` is used (the
//! one the pre-registered credentials are bound to, when listed). Its metadata comes from the
//! RFC 8414 / OpenID Connect well-known URLs in the order the MCP specification lists them;
//! its `issuer` must equal the issuer it was fetched for, character for character (RFC 8414
//! §3.3). With the authorization code grant, `code_challenge_methods_supported` must list
//! `S256`. Without any protected resource metadata, the MCP endpoint's origin is taken as the
//! issuer (the 2025-03-26 revision's discovery, [`OAuthConfig::with_legacy_discovery`]); when
//! that origin has no authorization server metadata either, its default endpoints
//! (`/authorize`, `/token`, `/register`) are used, as that revision says.
//!
//! **Client identity**, in the specification's priority: pre-registered credentials; the
//! client ID metadata document URL when the server advertises
//! `client_id_metadata_document_supported`; a registration kept in the [`TokenStore`] for
//! this issuer; dynamic client registration (RFC 7591). Registrations are kept per issuer and
//! never used with another one.
//!
//! **Grants**: authorization code with PKCE S256, `state` and the RFC 8707 `resource` (the
//! protected resource metadata's `resource`, else the canonical endpoint URI) on the
//! authorization and token requests; the redirect is checked for the registered redirect
//! URI, a single `state` equal to the one sent, and `iss` (RFC 9207 §2.4, as the 2026-07-28
//! revision's table says: compared when present, required when the server advertises
//! `authorization_response_iss_parameter_supported`) before its `error` or `code` is used.
//! Client credentials for headless clients (MCP's OAuth client credentials extension). The
//! JWT bearer grant (RFC 7523 §2.1, [`OAuthConfig::jwt_bearer`]) for workloads: the
//! assertion comes from the application's [`AssertionSource`] (a platform's workload identity
//! token, for MCP's workload identity federation extension), fresh for each token request;
//! a refusal of the token endpoint is the flow's error, never retried with the same
//! assertion nor followed by another grant. Enterprise-managed authorization
//! ([`OAuthConfig::enterprise_managed`]): the person's ID token from the enterprise's
//! [`IdentityProvider`] is exchanged there (RFC 8693; `audience` the authorization server's
//! issuer, `resource` this MCP server) for an ID-JAG, which the JWT bearer grant redeems at
//! the authorization server with the client's credentials; the identity provider's refusal
//! is an error of [`Document::TokenExchange`]. Token endpoint authentication `none`,
//! `client_secret_basic`, `client_secret_post`, or `private_key_jwt` (RFC 7523 §2.2,
//! [`OAuthConfig::with_assertion_signer`]): an assertion with `iss` = `sub` =
//! `client_id`, `aud` = the issuer and a fresh 256-bit `jti`, signed by the application's
//! [`AssertionSigner`] (the key never enters the machine; `mcp-driver`'s `PrivateKeyJwt`
//! signs ES256 or RS256 from PEM, adding `iat` and a 60 s `exp` from the system clock).
//!
//! **DPoP** (RFC 9449, [`OAuthConfig::with_dpop`]): every token request carries a proof of
//! the application's [`DpopSigner`](crate::dpop::DpopSigner); a token issued as `DPoP` is
//! bound ([`OAuthClient::dpop_signer`]) and goes on every MCP request with the `DPoP` scheme
//! and a fresh proof (`ClientSession::set_dpop_token`). A token endpoint's `use_dpop_nonce`
//! is answered by sending the same request again, once, with its `DPoP-Nonce`; the MCP
//! server's, by the driver, once per new nonce. A bound token kept in a [`TokenStore`] is
//! not known as bound after a restart: it is sent as a bearer token, refused, and a new
//! one obtained.
//!
//! **Scopes**: the challenge's `scope`, else the resource's `scopes_supported`, else none;
//! the configured scopes on top; `offline_access` when the authorization server lists it (and
//! the grant is the authorization code grant). A re-authorization with the same server asks
//! for the union of what was asked before and the challenge's scopes (2026-07-28, "Step-Up
//! Authorization Flow"). How often one MCP request is retried is the session's to bound
//! ([`AuthLimits::max_authorization_retries`]).
//!
//! **Refresh**: a token with a refresh token (or from the client credentials or JWT bearer
//! grant, which are run again) is
//! renewed `refresh_margin` before it expires (at most half its lifetime ahead; tokens that
//! live under two seconds are not renewed ahead). A `401` with a refresh token refreshes
//! once; a second `401` before any request succeeded (see
//! [`handle_accepted`](OAuthClient::handle_accepted)) runs the full flow, which re-discovers.
//! A new issuer in the protected resource metadata drops the old tokens.
//!
//! One exchange at a time is in flight; challenges that arrive while a flow runs are merged
//! into it. Every state change goes through `step`, whose `match` is this table:
//!
//! ```text
//! state        | event                                        | next          | effects
//! -------------+----------------------------------------------+---------------+------------------------------
//! Idle         | Challenge, refresh token, server known,      | Refreshing    | POST token (refresh_token)
//!              |   not refreshed since the last success       |               |
//! Idle         | Challenge, otherwise                         | Resource      | GET resource metadata
//! Idle         | RefreshDue (refresh token or client creds)   | Refreshing |  | POST token
//!              |                                              | Requesting    |
//! Resource     | Response 2xx, valid, resource matches        | Server        | GET server metadata
//! Resource     | Response 2xx, resource mismatch              | Idle          | Failed(ResourceMismatch)
//! Resource     | other Response / ExchangeFailed, more left   | Resource      | GET next location
//! Resource     | none left, legacy discovery                  | Server        | GET metadata at the origin
//! Resource     | none left                                    | Idle          | Failed(NoResourceMetadata)
//! Server       | Response 2xx, issuer differs                 | Idle          | Failed(IssuerMismatch)
//! Server       | Response 2xx, unusable (no S256, …)          | Idle          | Failed(…)
//! Server       | Response 2xx, valid, must register           | Registering   | POST registration
//! Server       | Response 2xx, valid, identity known          | (grant)       | see "grant" below
//! Server       | other Response / ExchangeFailed, more left   | Server        | GET next location
//! Server       | none left, legacy discovery                  | (as 2xx)      | the origin's default endpoints
//! Server       | none left                                    | Idle          | Failed(NoServerMetadata)
//! Registering  | Response 2xx, valid                          | (grant)       | registration stored
//! Registering  | other Response / ExchangeFailed              | Idle          | Failed(Rejected | …)
//! AwaitingUser | Redirect: endpoint, iss, state, code ok      | Exchanging    | POST token (authorization_code)
//! AwaitingUser | Redirect: anything else                      | Idle          | Failed(IssMismatch | StateMismatch | Denied | InvalidRedirect)
//! AwaitingUser | Abandoned, or UserTimeout past the deadline  | Idle          | Failed(Abandoned | AuthorizationRequired)
//! Exchanging,  | Response 2xx, valid Bearer token             | Idle          | tokens stored, Authorized
//! Requesting   | other Response / ExchangeFailed              | Idle          | Failed(Rejected | …)
//! Trading      | Response 2xx, an ID-JAG                      | Requesting    | POST token (jwt-bearer, the ID-JAG)
//! Trading      | other Response / ExchangeFailed              | Idle          | Failed(Rejected | …)
//! Refreshing   | Response 2xx, valid                          | Idle          | tokens stored, Authorized
//! Refreshing   | other, after a challenge                     | (grant)       | refresh token dropped
//! Refreshing   | other, ahead of expiry                       | Idle          | refresh token dropped
//! busy         | Challenge                                    | (same)        | scopes merged
//! any          | stale Response / Redirect / timer            | (same)        |
//!
//! grant: a 401 with a refresh token not yet tried → Refreshing;
//!        authorization code → AwaitingUser, Authorize(url); client credentials, JWT bearer →
//!        Requesting, POST token; enterprise-managed → Trading, POST the IdP's token exchange
//! ```
//!
//! # The run loop
//!
//! As for the session: **after any input, drain [`poll_output`](OAuthClient::poll_output)
//! until `None`; then wait for the next input or [`poll_timeout`](OAuthClient::poll_timeout)
//! and feed it.** The driver (`Connect::oauth` of the `mcp-driver` crate) does this for both
//! adapters.

#[cfg(feature = "oauth")]
mod config;
#[cfg(feature = "oauth")]
mod documents;
mod error;
#[cfg(feature = "oauth")]
mod machine;
#[cfg(feature = "oauth")]
mod pkce;
#[cfg(feature = "oauth")]
mod store;
#[cfg(feature = "oauth")]
mod urls;

#[cfg(feature = "oauth")]
pub use config::{
    ApplicationType, AssertionClaims, AssertionSigner, AssertionSource, AuthLimits,
    ClientCredentials, ClientMetadata, Grant, ID_JAG_TOKEN_TYPE, ID_TOKEN_TYPE, IdentityProvider,
    JWT_BEARER_GRANT, JWT_CLIENT_ASSERTION, OAuthConfig, TOKEN_EXCHANGE_GRANT, TokenAuthMethod,
};
pub use error::{AuthError, Document, OAuthErrorBody};
#[cfg(feature = "oauth")]
pub use machine::*;
#[cfg(feature = "oauth")]
pub use pkce::Entropy;
#[cfg(feature = "oauth")]
pub use store::{MemoryTokenStore, RegisteredClient, StoredTokens, TokenStore};
