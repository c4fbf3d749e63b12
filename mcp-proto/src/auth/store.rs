//! Pluggable storage of tokens (per protected resource) and of dynamic registrations (per
//! authorization server issuer): [`TokenStore`], and [`MemoryTokenStore`], the default.

use std::collections::HashMap;
use std::time::Instant;

use super::config::TokenAuthMethod;

/// Tokens issued for one protected resource.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredTokens {
    /// The issuer of the authorization server that issued them: tokens from another
    /// authorization server than the one the resource names are never sent.
    pub issuer: String,
    /// The access token.
    pub access_token: String,
    /// The refresh token, if one was issued.
    pub refresh_token: Option<String>,
    /// When the access token expires (`None`: the server did not say).
    pub expires_at: Option<Instant>,
    /// The scope requested (or granted, when the server said), space-separated.
    pub scope: Option<String>,
}

impl std::fmt::Debug for StoredTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredTokens")
            .field("issuer", &self.issuer)
            .field("access_token", &"…")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "…"))
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish()
    }
}

impl StoredTokens {
    /// Tokens for `issuer`.
    pub fn new(issuer: impl Into<String>, access_token: impl Into<String>) -> Self {
        StoredTokens {
            issuer: issuer.into(),
            access_token: access_token.into(),
            refresh_token: None,
            expires_at: None,
            scope: None,
        }
    }

    /// With a refresh token.
    pub fn with_refresh_token(mut self, token: impl Into<String>) -> Self {
        self.refresh_token = Some(token.into());
        self
    }

    /// With an expiry.
    pub fn with_expiry(mut self, at: Instant) -> Self {
        self.expires_at = Some(at);
        self
    }
}

/// A client registered with one authorization server (dynamically, RFC 7591).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegisteredClient {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, if one was issued.
    pub client_secret: Option<String>,
    /// The `token_endpoint_auth_method` registered (`None`: the registration response did
    /// not say).
    pub auth_method: Option<TokenAuthMethod>,
}

impl std::fmt::Debug for RegisteredClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("auth_method", &self.auth_method)
            .finish()
    }
}

/// Where an [`OAuthClient`](super::OAuthClient) keeps what it obtained. Tokens are keyed by
/// the protected resource (the MCP endpoint URL), registrations by the authorization
/// server's `issuer` (MCP authorization, "Authorization Server Binding": credentials are
/// never reused with another authorization server).
///
/// Calls are synchronous and must not block for long: the state machine calls them inside
/// its transitions. An implementation that persists (a keychain, a file) converts
/// [`StoredTokens::expires_at`] to wall-clock time itself. Tokens are secrets: keep them
/// confidential (OAuth 2.1 §7.1).
pub trait TokenStore: Send {
    /// The tokens kept for `resource`.
    fn tokens(&self, resource: &str) -> Option<StoredTokens>;
    /// Keeps `tokens` for `resource`, replacing what was there.
    fn save_tokens(&mut self, resource: &str, tokens: StoredTokens);
    /// Forgets the tokens of `resource`.
    fn clear_tokens(&mut self, resource: &str);
    /// The client registered with `issuer`.
    fn client(&self, issuer: &str) -> Option<RegisteredClient>;
    /// Keeps the registration with `issuer`.
    fn save_client(&mut self, issuer: &str, client: RegisteredClient);
    /// Forgets the registration with `issuer`.
    fn clear_client(&mut self, issuer: &str);
}

/// The default [`TokenStore`]: in memory, gone with the process.
#[derive(Debug, Default)]
pub struct MemoryTokenStore {
    tokens: HashMap<String, StoredTokens>,
    clients: HashMap<String, RegisteredClient>,
}

impl TokenStore for MemoryTokenStore {
    fn tokens(&self, resource: &str) -> Option<StoredTokens> {
        self.tokens.get(resource).cloned()
    }

    fn save_tokens(&mut self, resource: &str, tokens: StoredTokens) {
        self.tokens.insert(resource.to_owned(), tokens);
    }

    fn clear_tokens(&mut self, resource: &str) {
        self.tokens.remove(resource);
    }

    fn client(&self, issuer: &str) -> Option<RegisteredClient> {
        self.clients.get(issuer).cloned()
    }

    fn save_client(&mut self, issuer: &str, client: RegisteredClient) {
        self.clients.insert(issuer.to_owned(), client);
    }

    fn clear_client(&mut self, issuer: &str) {
        self.clients.remove(issuer);
    }
}
