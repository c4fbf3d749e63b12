//! The OAuth 2.1 client machine (feature `oauth`): see the [module docs](super).

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use url::{Url, form_urlencoded};

use super::config::*;
use super::documents::{ResourceMetadata, ServerMetadata};
use super::error::*;
use super::pkce::Entropy;
use super::store::*;
use super::{documents, pkce, urls};

use crate::client::TransportFailure;
use crate::http::BearerChallenge;

/// One exchange of the authorization flow, allocated by the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AuthRequestId(u64);

impl AuthRequestId {
    /// The raw number, for logs and maps.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

/// An HTTP request of the flow: metadata, registration or token. Its response is fed back
/// with [`AuthInput`]s carrying the same `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthHttpRequest {
    /// The exchange.
    pub id: AuthRequestId,
    /// What it fetches or posts.
    pub document: Document,
    /// `GET` or `POST`.
    pub method: Method,
    /// The absolute URL.
    pub url: Uri,
    /// Every header to send.
    pub headers: HeaderMap,
    /// The body (empty for GET).
    pub body: Bytes,
}

/// A person must visit `url` and authorize; the authorization server then redirects the
/// user agent to `redirect_uri`, and that redirect goes to
/// [`handle_redirect`](OAuthClient::handle_redirect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationRequest {
    /// The authorization URL.
    pub url: String,
    /// Where the authorization server will redirect.
    pub redirect_uri: String,
    /// The `state` sent (to pair a redirect with its request).
    pub state: String,
}

/// What the machine asks of its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthOutput {
    /// Perform this request.
    Http(AuthHttpRequest),
    /// Drop this exchange; feed nothing more for it.
    Abort(AuthRequestId),
    /// Have a person visit the authorization URL; feed the redirect back.
    Authorize(AuthorizationRequest),
    /// A new token is in place ([`OAuthClient::authorization`]): send again what waited.
    Authorized,
    /// The flow failed: what waited for it fails.
    Failed(AuthError),
}

/// What the driver observed on an exchange of the flow.
#[derive(Debug, Clone)]
pub enum AuthInput<'a> {
    /// The response status and headers.
    Head {
        /// The exchange.
        id: AuthRequestId,
        /// The status.
        status: StatusCode,
        /// The headers.
        headers: &'a HeaderMap,
    },
    /// A piece of the body.
    Body {
        /// The exchange.
        id: AuthRequestId,
        /// The bytes.
        chunk: Bytes,
    },
    /// The body ended.
    End {
        /// The exchange.
        id: AuthRequestId,
    },
    /// The exchange failed below HTTP.
    Failed {
        /// The exchange.
        id: AuthRequestId,
        /// How.
        kind: TransportFailure,
    },
}

/// The exchange in flight.
#[derive(Debug)]
struct Exchange {
    id: AuthRequestId,
    document: Document,
    method: Method,
    url: Url,
    redirects: u32,
    deadline: Instant,
    status: Option<StatusCode>,
    body: BytesMut,
}

/// A pending authorization: what the redirect is checked against (the 2026-07-28 revision's
/// "per-request record": the PKCE verifier, `state`, and the expected issuer).
#[derive(Debug)]
struct Pending {
    verifier: String,
    state: String,
    issuer: String,
    iss_supported: bool,
    url: String,
}

/// How the client identifies itself to the current authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    client_id: String,
    secret: Option<String>,
    method: TokenAuthMethod,
    /// From dynamic registration (forgotten when the server says `invalid_client`).
    dynamic: bool,
}

#[derive(Debug)]
enum State {
    Idle,
    Resource {
        candidates: VecDeque<String>,
        tried: Vec<String>,
    },
    Server {
        issuer: String,
        candidates: VecDeque<String>,
        tried: Vec<String>,
    },
    Registering,
    AwaitingUser {
        pending: Box<Pending>,
        deadline: Instant,
    },
    Exchanging,
    Requesting,
    /// Enterprise-managed: the identity provider's token exchange is in flight.
    Trading,
    Refreshing {
        on_challenge: bool,
    },
}

/// What happened, as far as the flow is concerned.
enum Ev<'a> {
    Challenge {
        status: StatusCode,
        challenge: &'a BearerChallenge,
    },
    RefreshDue,
    Response {
        status: StatusCode,
        body: Bytes,
    },
    ExchangeFailed(AuthError),
    Redirect(&'a str),
    Abandoned(AuthError),
    UserTimeout,
}

/// What the current flow was started for.
#[derive(Debug, Default)]
struct FlowCtx {
    /// The challenge was a scope refusal (403 / `insufficient_scope`): a new authorization,
    /// never a refresh.
    insufficient: bool,
    challenge_scope: Option<String>,
    prm_scopes: Option<Vec<String>>,
    /// No protected resource metadata: the 2025-03-26 discovery, whose default endpoints
    /// stand in when the origin has no authorization server metadata either.
    legacy: bool,
}

/// The client side of OAuth 2.1 for one MCP endpoint. See the module docs.
pub struct OAuthClient {
    config: OAuthConfig,
    entropy: Box<dyn Entropy>,
    endpoint: Url,
    /// The key of the tokens in the store: the canonical endpoint URI.
    key: String,
    redirect: Option<Url>,
    state: State,
    exchange: Option<Exchange>,
    next_id: u64,
    out: VecDeque<AuthOutput>,
    tokens: Option<StoredTokens>,
    header: Option<HeaderValue>,
    /// How long the current access token was issued for (to refresh at most half-way).
    lifetime: Option<Duration>,
    /// The validated metadata of the authorization server in use.
    server: Option<ServerMetadata>,
    identity: Option<Identity>,
    /// The RFC 8707 `resource` in use.
    resource: String,
    /// The scopes last asked for.
    requested: Vec<String>,
    flow: FlowCtx,
    /// A refresh was made for a challenge and no request has succeeded since.
    refreshed_on_challenge: bool,
    /// DPoP: the current token is bound to the signer's key.
    dpop_bound: bool,
    /// DPoP: the authorization server's latest `DPoP-Nonce`.
    as_nonce: Option<String>,
    /// DPoP: the token request in flight (URL, headers without the proof, body), to send
    /// again once with the server's nonce; `None` once it was.
    token_request: Option<(Url, HeaderMap, Bytes)>,
}

impl std::fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClient")
            .field("endpoint", &self.endpoint.as_str())
            .field("state", &self.state)
            .field("has_token", &self.header.is_some())
            .field("issuer", &self.server.as_ref().map(|s| &s.issuer))
            .finish_non_exhaustive()
    }
}

/// Tokens that live less than this are not renewed ahead of their expiry.
const MIN_RENEWABLE_LIFETIME: Duration = Duration::from_secs(2);

impl OAuthClient {
    /// A machine for the MCP endpoint `endpoint`, with tokens from the store if it has some.
    ///
    /// # Errors
    ///
    /// [`AuthError::InvalidConfig`] for a configuration that cannot work: an endpoint that is
    /// not an absolute URL, a redirect URI that is neither HTTPS nor loopback, a client ID
    /// metadata document URL that is not HTTPS with a path, the client credentials grant
    /// without credentials.
    pub fn new(
        config: OAuthConfig,
        endpoint: &str,
        entropy: impl Entropy + 'static,
    ) -> Result<Self, AuthError> {
        let endpoint = Url::parse(endpoint)
            .map_err(|e| AuthError::InvalidConfig(format!("MCP endpoint {endpoint:?}: {e}")))?;
        if !matches!(endpoint.scheme(), "http" | "https") || endpoint.host().is_none() {
            return Err(AuthError::InvalidConfig(format!(
                "MCP endpoint {endpoint} is not an absolute http(s) URL"
            )));
        }
        let redirect = match &config.grant {
            Grant::AuthorizationCode { redirect_uri } => Some(urls::redirect_uri(redirect_uri)?),
            Grant::ClientCredentials | Grant::JwtBearer | Grant::EnterpriseManaged { .. } => {
                if config.credentials.is_none() {
                    return Err(AuthError::InvalidConfig(
                        "the client credentials, JWT bearer and enterprise-managed grants need pre-registered credentials"
                            .into(),
                    ));
                }
                None
            }
        };
        if let Some(c) = &config.credentials
            && c.auth_method == Some(TokenAuthMethod::PrivateKeyJwt)
            && config.signer.is_none()
        {
            return Err(AuthError::InvalidConfig(
                "private_key_jwt needs a signer (OAuthConfig::with_assertion_signer)".into(),
            ));
        }
        if let Some(doc) = &config.metadata_document {
            urls::metadata_document_url(doc)?;
        }
        let key = urls::canonical_resource(&endpoint);
        let tokens = config.store.tokens(&key);
        let header = tokens.as_ref().and_then(|t| bearer(&t.access_token));
        Ok(OAuthClient {
            resource: key.clone(),
            config,
            entropy: Box::new(entropy),
            endpoint,
            key,
            redirect,
            state: State::Idle,
            exchange: None,
            next_id: 0,
            out: VecDeque::new(),
            tokens,
            header,
            lifetime: None,
            server: None,
            identity: None,
            requested: Vec::new(),
            flow: FlowCtx::default(),
            refreshed_on_challenge: false,
            dpop_bound: false,
            as_nonce: None,
            token_request: None,
        })
    }

    /// The signer of the current token's DPoP proofs, when the token is DPoP-bound (send it
    /// with [`ClientSession::set_dpop_token`](crate::client::ClientSession::set_dpop_token)
    /// rather than as a bearer token).
    pub fn dpop_signer(&self) -> Option<Box<dyn crate::dpop::DpopSigner>> {
        self.config
            .dpop
            .as_ref()
            .filter(|_| self.dpop_bound && self.tokens.is_some())
            .map(|s| s.clone_box())
    }

    // ------------------------------------------------------------------ getters

    /// The `Authorization` header for the next MCP request (`Bearer <access token>`), if a
    /// token is held.
    pub fn authorization(&self) -> Option<&HeaderValue> {
        self.header.as_ref()
    }

    /// The MCP endpoint the machine authorizes for.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// The access token, if one is held.
    pub fn access_token(&self) -> Option<&str> {
        self.tokens.as_ref().map(|t| t.access_token.as_str())
    }

    /// Whether a flow is running (a challenge now would only be merged into it).
    pub fn is_busy(&self) -> bool {
        !matches!(self.state, State::Idle)
    }

    /// The issuer of the authorization server in use, once discovered.
    pub fn issuer(&self) -> Option<&str> {
        self.server.as_ref().map(|s| s.issuer.as_str())
    }

    /// The scopes last requested.
    pub fn requested_scopes(&self) -> &[String] {
        &self.requested
    }

    /// The configuration.
    pub fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// The client ID metadata document this client's configuration describes, for the
    /// application to host at its URL (draft-ietf-oauth-client-id-metadata-document §3):
    /// `client_id` (the URL itself), `client_name`, `redirect_uris`, the grant and response
    /// types, and `token_endpoint_auth_method` `none`. `None` without a document URL.
    pub fn client_metadata_document(&self) -> Option<serde_json::Value> {
        let url = self.config.metadata_document.as_ref()?;
        let mut doc = self.client_metadata_json(TokenAuthMethod::None);
        doc.insert("client_id".into(), url.clone().into());
        Some(serde_json::Value::Object(doc))
    }

    // ------------------------------------------------------------------ inputs

    /// The MCP server refused a request: `401`, or `403` with a Bearer challenge. Starts a
    /// flow (or refreshes), or merges the challenge into the flow that runs.
    pub fn handle_challenge(
        &mut self,
        now: Instant,
        status: StatusCode,
        challenge: &BearerChallenge,
    ) {
        self.step(now, Ev::Challenge { status, challenge });
    }

    /// A request made with the current token succeeded: a later `401` may refresh again.
    pub fn handle_accepted(&mut self) {
        self.refreshed_on_challenge = false;
    }

    /// Feeds what the driver observed on an exchange. Input for another exchange than the one
    /// in flight is ignored.
    pub fn handle_input(&mut self, now: Instant, input: AuthInput<'_>) {
        let id = match &input {
            AuthInput::Head { id, .. }
            | AuthInput::Body { id, .. }
            | AuthInput::End { id }
            | AuthInput::Failed { id, .. } => *id,
        };
        let Some(x) = self.exchange.as_mut().filter(|x| x.id == id) else {
            return;
        };
        let document = x.document;
        match input {
            AuthInput::Head {
                status, headers, ..
            } => {
                if x.status.is_some() {
                    return;
                }
                x.status = Some(status);
                if document == Document::Token
                    && let Some(n) = headers
                        .get(crate::http::DPOP_NONCE)
                        .and_then(|v| v.to_str().ok())
                {
                    self.as_nonce = Some(n.to_owned());
                }
                let Some(x) = self.exchange.as_mut().filter(|x| x.id == id) else {
                    return;
                };
                if x.method == Method::GET
                    && status.is_redirection()
                    && status != StatusCode::NOT_MODIFIED
                {
                    let location = headers
                        .get(LOCATION)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    self.follow(now, location);
                }
            }
            AuthInput::Body { chunk, .. } => {
                if x.status.is_none() {
                    return;
                }
                let limit = self.config.limits.max_document_bytes;
                if x.body.len() + chunk.len() > limit {
                    self.out.push_back(AuthOutput::Abort(id));
                    self.exchange = None;
                    self.step(
                        now,
                        Ev::ExchangeFailed(AuthError::TooLarge { document, limit }),
                    );
                    return;
                }
                x.body.extend_from_slice(&chunk);
            }
            AuthInput::End { .. } => {
                let Some(x) = self.exchange.take() else {
                    return;
                };
                match x.status {
                    Some(status) => self.step(
                        now,
                        Ev::Response {
                            status,
                            body: x.body.freeze(),
                        },
                    ),
                    None => self.step(
                        now,
                        Ev::ExchangeFailed(AuthError::Transport {
                            document,
                            failure: TransportFailure::Other,
                        }),
                    ),
                }
            }
            AuthInput::Failed { kind, .. } => {
                self.exchange = None;
                self.step(
                    now,
                    Ev::ExchangeFailed(AuthError::Transport {
                        document,
                        failure: kind,
                    }),
                );
            }
        }
    }

    /// The redirect that ended the person's visit: the URL the authorization server sent
    /// the user agent to (the registered redirect URI with the response in its query).
    pub fn handle_redirect(&mut self, now: Instant, redirect: &str) {
        self.step(now, Ev::Redirect(redirect));
    }

    /// The person could not be sent to the authorization URL, or gave up: the pending
    /// authorization fails with [`AuthError::Abandoned`].
    pub fn abandon_authorization(&mut self, now: Instant, reason: impl Into<String>) {
        self.step(now, Ev::Abandoned(AuthError::Abandoned(reason.into())));
    }

    /// No person can be asked (no redirect handler): the pending authorization fails with
    /// [`AuthError::AuthorizationRequired`], which carries the URL to visit.
    pub fn decline_authorization(&mut self, now: Instant) {
        let url = match &self.state {
            State::AwaitingUser { pending, .. } => pending.url.clone(),
            _ => return,
        };
        self.step(now, Ev::Abandoned(AuthError::AuthorizationRequired { url }));
    }

    /// Fires what is due at `now`: an exchange's timeout, the authorization deadline, a
    /// refresh ahead of expiry. Calling it early does nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(x) = self.exchange.as_ref().filter(|x| x.deadline <= now) {
            let (id, document) = (x.id, x.document);
            self.exchange = None;
            self.out.push_back(AuthOutput::Abort(id));
            self.step(now, Ev::ExchangeFailed(AuthError::TimedOut { document }));
        }
        if matches!(self.state, State::AwaitingUser { deadline, .. } if deadline <= now) {
            self.step(now, Ev::UserTimeout);
        }
        if self.refresh_at().is_some_and(|at| at <= now) {
            self.step(now, Ev::RefreshDue);
        }
    }

    // ------------------------------------------------------------------ outputs

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<AuthOutput> {
        self.out.pop_front()
    }

    /// The earliest instant at which [`handle_timeout`](Self::handle_timeout) has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let user = match &self.state {
            State::AwaitingUser { deadline, .. } => Some(*deadline),
            _ => None,
        };
        [
            self.exchange.as_ref().map(|x| x.deadline),
            user,
            self.refresh_at(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// When the token is renewed ahead of its expiry, if it is.
    fn refresh_at(&self) -> Option<Instant> {
        if !matches!(self.state, State::Idle) || self.server.is_none() || self.identity.is_none() {
            return None;
        }
        let t = self.tokens.as_ref()?;
        let at = t.expires_at?;
        let renewable = t.refresh_token.is_some() || self.machine_grant();
        if !renewable {
            return None;
        }
        let margin = match self.lifetime {
            Some(l) if l < MIN_RENEWABLE_LIFETIME => return None,
            Some(l) => self.config.limits.refresh_margin.min(l / 2),
            None => self.config.limits.refresh_margin,
        };
        Some(at.checked_sub(margin).unwrap_or(at))
    }

    // ------------------------------------------------------------------ the transition function

    /// The one place the flow's state changes: the module's table, arm for arm.
    fn step(&mut self, now: Instant, ev: Ev<'_>) {
        let state = std::mem::replace(&mut self.state, State::Idle);
        self.state = match (state, ev) {
            (State::Idle, Ev::Challenge { status, challenge }) => {
                self.begin(now, status, challenge)
            }
            (busy, Ev::Challenge { challenge, .. }) => {
                self.merge_scope(challenge.scope.as_deref());
                busy
            }
            (State::Idle, Ev::RefreshDue) => self.renew(now),
            (other, Ev::RefreshDue) => other,
            (State::Resource { candidates, tried }, Ev::Response { status, body }) => {
                self.on_resource(now, candidates, tried, status, &body)
            }
            (State::Resource { candidates, tried }, Ev::ExchangeFailed(_)) => {
                self.next_resource(now, candidates, tried)
            }
            (
                State::Server {
                    issuer,
                    candidates,
                    tried,
                },
                Ev::Response { status, body },
            ) => self.on_server(now, issuer, candidates, tried, status, &body),
            (
                State::Server {
                    issuer,
                    candidates,
                    tried,
                },
                Ev::ExchangeFailed(_),
            ) => self.next_server(now, issuer, candidates, tried),
            (State::Registering, Ev::Response { status, body }) => {
                self.on_registered(now, status, &body)
            }
            (State::Exchanging | State::Requesting, Ev::Response { status, body }) => {
                self.on_tokens(now, status, &body, false)
            }
            (State::Trading, Ev::Response { status, body }) => self.on_traded(now, status, &body),
            (State::Refreshing { on_challenge }, Ev::Response { status, body }) => {
                if status.is_success() {
                    self.on_tokens(now, status, &body, true)
                } else if self.retry_with_nonce(now, &documents::error_body(&body)) {
                    State::Refreshing { on_challenge }
                } else {
                    self.refresh_failed(now, on_challenge)
                }
            }
            (State::Refreshing { on_challenge }, Ev::ExchangeFailed(_)) => {
                self.refresh_failed(now, on_challenge)
            }
            (
                State::Registering | State::Exchanging | State::Requesting | State::Trading,
                Ev::ExchangeFailed(e),
            ) => self.fail(e),
            (State::AwaitingUser { pending, .. }, Ev::Redirect(url)) => {
                self.on_redirect(now, &pending, url)
            }
            (State::AwaitingUser { .. }, Ev::Abandoned(e)) => self.fail(e),
            (State::AwaitingUser { pending, deadline }, Ev::UserTimeout) => {
                if now >= deadline {
                    self.fail(AuthError::Abandoned(format!(
                        "not completed within {:?}",
                        self.config.limits.authorization_timeout
                    )))
                } else {
                    State::AwaitingUser { pending, deadline }
                }
            }
            // Stale: an answer for an exchange or a redirect the flow no longer waits for.
            (
                other,
                Ev::Response { .. }
                | Ev::ExchangeFailed(_)
                | Ev::Redirect(_)
                | Ev::Abandoned(_)
                | Ev::UserTimeout,
            ) => other,
        };
    }

    // ------------------------------------------------------------------ transitions

    fn fail(&mut self, e: AuthError) -> State {
        self.out.push_back(AuthOutput::Failed(e));
        State::Idle
    }

    fn begin(&mut self, now: Instant, status: StatusCode, challenge: &BearerChallenge) -> State {
        let insufficient = status == StatusCode::FORBIDDEN
            || challenge.error.as_deref() == Some("insufficient_scope");
        self.flow = FlowCtx {
            insufficient,
            challenge_scope: challenge.scope.clone(),
            prm_scopes: None,
            legacy: false,
        };
        if self.may_refresh() && self.server.is_some() && self.identity.is_some() {
            self.refreshed_on_challenge = true;
            return self.start_refresh(now, true);
        }
        let mut candidates = VecDeque::new();
        let mut tried = Vec::new();
        if let Some(u) = &challenge.resource_metadata {
            match urls::secure_url(u, self.config.allow_http) {
                Ok(u) => candidates.push_back(u.to_string()),
                Err(_) => tried.push(u.clone()),
            }
        }
        for u in urls::resource_metadata_urls(&self.endpoint) {
            if !candidates.contains(&u) {
                candidates.push_back(u);
            }
        }
        self.next_resource(now, candidates, tried)
    }

    /// Whether the challenge may be answered by refreshing.
    fn may_refresh(&self) -> bool {
        !self.flow.insufficient
            && !self.refreshed_on_challenge
            && self
                .tokens
                .as_ref()
                .is_some_and(|t| t.refresh_token.is_some())
    }

    fn merge_scope(&mut self, scope: Option<&str>) {
        if let Some(s) = scope {
            let current = self.flow.challenge_scope.get_or_insert_with(String::new);
            for sc in s.split_ascii_whitespace() {
                if !current.split_ascii_whitespace().any(|c| c == sc) {
                    if !current.is_empty() {
                        current.push(' ');
                    }
                    current.push_str(sc);
                }
            }
        }
    }

    fn next_resource(
        &mut self,
        now: Instant,
        mut candidates: VecDeque<String>,
        mut tried: Vec<String>,
    ) -> State {
        while let Some(next) = candidates.pop_front() {
            let Ok(url) = urls::secure_url(&next, self.config.allow_http) else {
                tried.push(next);
                continue;
            };
            tried.push(next);
            if self.get(now, Document::ResourceMetadata, url, 0).is_ok() {
                return State::Resource { candidates, tried };
            }
        }
        if self.config.legacy_discovery {
            // 2025-03-26: no resource metadata; the server's origin is the issuer.
            let issuer = self.endpoint.origin().ascii_serialization();
            self.resource = self.key.clone();
            self.flow.legacy = true;
            return self.start_server(now, issuer);
        }
        self.fail(AuthError::NoResourceMetadata { tried })
    }

    fn on_resource(
        &mut self,
        now: Instant,
        candidates: VecDeque<String>,
        tried: Vec<String>,
        status: StatusCode,
        body: &[u8],
    ) -> State {
        if !status.is_success() {
            return self.next_resource(now, candidates, tried);
        }
        let prm: ResourceMetadata = match documents::resource_metadata(body) {
            Ok(p) => p,
            Err(_) => return self.next_resource(now, candidates, tried),
        };
        if !urls::resource_matches(&prm.resource, &self.endpoint) {
            return self.fail(AuthError::ResourceMismatch {
                expected: self.endpoint.to_string(),
                found: prm.resource,
            });
        }
        let bound = self
            .config
            .credentials
            .as_ref()
            .and_then(|c| c.issuer.as_ref());
        let issuer = bound
            .filter(|b| prm.authorization_servers.contains(b))
            .cloned()
            .unwrap_or_else(|| prm.authorization_servers[0].clone());
        self.resource = prm.resource;
        self.flow.prm_scopes = prm.scopes_supported;
        self.start_server(now, issuer)
    }

    fn start_server(&mut self, now: Instant, issuer: String) -> State {
        let url = match urls::issuer_url(&issuer, self.config.allow_http) {
            Ok(u) => u,
            Err(e) => return self.fail(e),
        };
        let candidates = urls::server_metadata_urls(&url).into();
        self.next_server(now, issuer, candidates, Vec::new())
    }

    fn next_server(
        &mut self,
        now: Instant,
        issuer: String,
        mut candidates: VecDeque<String>,
        mut tried: Vec<String>,
    ) -> State {
        while let Some(next) = candidates.pop_front() {
            let Ok(url) = urls::secure_url(&next, self.config.allow_http) else {
                tried.push(next);
                continue;
            };
            tried.push(next);
            if self.get(now, Document::ServerMetadata, url, 0).is_ok() {
                return State::Server {
                    issuer,
                    candidates,
                    tried,
                };
            }
        }
        if self.flow.legacy {
            // 2025-03-26, "Fallbacks for Servers without Metadata Discovery": the default
            // endpoints at the origin. That revision requires PKCE of every client, so S256
            // is taken as supported.
            let endpoint = |path: &str| Some(format!("{issuer}{path}"));
            let md = ServerMetadata {
                authorization_endpoint: endpoint("/authorize"),
                token_endpoint: endpoint("/token"),
                registration_endpoint: endpoint("/register"),
                code_challenge_methods_supported: Some(vec!["S256".into()]),
                ..ServerMetadata::new(issuer)
            };
            return self.use_server(now, md);
        }
        self.fail(AuthError::NoServerMetadata { issuer, tried })
    }

    fn on_server(
        &mut self,
        now: Instant,
        issuer: String,
        candidates: VecDeque<String>,
        tried: Vec<String>,
        status: StatusCode,
        body: &[u8],
    ) -> State {
        if !status.is_success() {
            return self.next_server(now, issuer, candidates, tried);
        }
        let md = match documents::server_metadata(body) {
            Ok(m) => m,
            Err(_) => return self.next_server(now, issuer, candidates, tried),
        };
        // RFC 8414 §3.3: identical, no normalization.
        if md.issuer != issuer {
            return self.fail(AuthError::IssuerMismatch {
                expected: issuer,
                found: md.issuer,
            });
        }
        self.use_server(now, md)
    }

    /// Uses the authorization server `md` describes: checks it, then registers or runs the
    /// grant.
    fn use_server(&mut self, now: Instant, md: ServerMetadata) -> State {
        if let Err(e) = self.check_server(&md) {
            return self.fail(e);
        }
        // Another authorization server than the one that issued our tokens: drop them.
        if self.tokens.as_ref().is_some_and(|t| t.issuer != md.issuer) {
            self.drop_tokens();
            self.requested.clear();
        }
        if self.server.as_ref().is_some_and(|s| s.issuer != md.issuer) {
            self.identity = None;
        }
        let identity = match self.identity_for(&md) {
            Ok(i) => i,
            Err(e) => return self.fail(e),
        };
        self.server = Some(md);
        match identity {
            Some(i) => {
                self.identity = Some(i);
                self.grant(now)
            }
            None => self.register(now),
        }
    }

    /// What the client needs of the server's metadata.
    fn check_server(&self, md: &ServerMetadata) -> Result<(), AuthError> {
        let allow = self.config.allow_http;
        let token = md
            .token_endpoint
            .as_deref()
            .ok_or_else(|| AuthError::Unsupported("no token_endpoint".into()))?;
        urls::secure_url(token, allow)?;
        if let Some(r) = &md.registration_endpoint {
            urls::secure_url(r, allow)?;
        }
        let grant = match self.config.grant {
            Grant::AuthorizationCode { .. } => {
                let auth = md
                    .authorization_endpoint
                    .as_deref()
                    .ok_or_else(|| AuthError::Unsupported("no authorization_endpoint".into()))?;
                urls::secure_url(auth, allow)?;
                if md
                    .response_types_supported
                    .as_ref()
                    .is_some_and(|r| !r.iter().any(|t| t == "code"))
                {
                    return Err(AuthError::Unsupported(
                        "response type code not supported".into(),
                    ));
                }
                // MCP authorization, "Authorization Code Protection": absent, or without
                // S256, the client MUST refuse.
                if !md
                    .code_challenge_methods_supported
                    .as_ref()
                    .is_some_and(|m| m.iter().any(|x| x == "S256"))
                {
                    return Err(AuthError::PkceUnsupported);
                }
                "authorization_code"
            }
            Grant::ClientCredentials => "client_credentials",
            Grant::JwtBearer | Grant::EnterpriseManaged { .. } => JWT_BEARER_GRANT,
        };
        if md
            .grant_types_supported
            .as_ref()
            .is_some_and(|g| !g.iter().any(|x| x == grant))
        {
            return Err(AuthError::Unsupported(format!(
                "grant type {grant} not supported"
            )));
        }
        Ok(())
    }

    /// The identity to use with `md`'s server; `None`: register dynamically.
    fn identity_for(&mut self, md: &ServerMetadata) -> Result<Option<Identity>, AuthError> {
        if let Some(c) = &self.config.credentials {
            if let Some(bound) = &c.issuer
                && *bound != md.issuer
            {
                return Err(AuthError::CredentialsForOtherIssuer {
                    registered: bound.clone(),
                    issuer: md.issuer.clone(),
                });
            }
            let method = c.auth_method.unwrap_or_else(|| {
                if self.config.signer.is_some() {
                    TokenAuthMethod::PrivateKeyJwt
                } else {
                    default_method(c.client_secret.is_some(), md)
                }
            });
            return Ok(Some(Identity {
                client_id: c.client_id.clone(),
                secret: c.client_secret.clone(),
                method,
                dynamic: false,
            }));
        }
        if let Some(doc) = &self.config.metadata_document
            && md.client_id_metadata_document_supported
        {
            return Ok(Some(Identity {
                client_id: doc.clone(),
                secret: None,
                method: TokenAuthMethod::None,
                dynamic: false,
            }));
        }
        if let Some(i) = self.identity.clone().filter(|i| i.dynamic) {
            return Ok(Some(i));
        }
        if let Some(r) = self.config.store.client(&md.issuer) {
            return Ok(Some(registered_identity(r, md)));
        }
        if md.registration_endpoint.is_some() {
            return Ok(None);
        }
        Err(AuthError::NoClientIdentity {
            issuer: md.issuer.clone(),
        })
    }

    /// The client metadata of a registration request or a client ID metadata document.
    fn client_metadata_json(
        &self,
        method: TokenAuthMethod,
    ) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::Value;
        let m = &self.config.metadata;
        let mut doc = serde_json::Map::new();
        doc.insert("client_name".into(), m.client_name.clone().into());
        let (grants, responses): (&[&str], &[&str]) = match &self.config.grant {
            Grant::AuthorizationCode { .. } => {
                (&["authorization_code", "refresh_token"], &["code"])
            }
            Grant::ClientCredentials => (&["client_credentials"], &[]),
            Grant::JwtBearer | Grant::EnterpriseManaged { .. } => (&[JWT_BEARER_GRANT], &[]),
        };
        if let Some(r) = &self.redirect {
            doc.insert(
                "redirect_uris".into(),
                Value::Array(vec![r.as_str().into()]),
            );
        }
        doc.insert(
            "grant_types".into(),
            grants.iter().map(|g| Value::from(*g)).collect(),
        );
        doc.insert(
            "response_types".into(),
            responses.iter().map(|g| Value::from(*g)).collect(),
        );
        doc.insert("token_endpoint_auth_method".into(), method.as_str().into());
        let app = m.application_type.unwrap_or(match &self.redirect {
            Some(r) if r.scheme() == "https" && !urls::is_loopback(r) => ApplicationType::Web,
            _ => ApplicationType::Native,
        });
        doc.insert("application_type".into(), app.as_str().into());
        for (k, v) in [
            ("client_uri", &m.client_uri),
            ("logo_uri", &m.logo_uri),
            ("software_id", &m.software_id),
            ("software_version", &m.software_version),
        ] {
            if let Some(v) = v {
                doc.insert(k.into(), v.clone().into());
            }
        }
        doc
    }

    fn register(&mut self, now: Instant) -> State {
        let Some(md) = self.server.as_ref() else {
            return self.fail(AuthError::Unsupported("no metadata".into()));
        };
        let Some(endpoint) = md.registration_endpoint.as_deref() else {
            return self.fail(AuthError::NoClientIdentity {
                issuer: md.issuer.clone(),
            });
        };
        let url = match urls::secure_url(endpoint, self.config.allow_http) {
            Ok(u) => u,
            Err(e) => return self.fail(e),
        };
        // A public client unless the server accepts none.
        let method = [
            TokenAuthMethod::None,
            TokenAuthMethod::ClientSecretBasic,
            TokenAuthMethod::ClientSecretPost,
        ]
        .into_iter()
        .find(|m| md.supports_method(*m))
        .unwrap_or(TokenAuthMethod::ClientSecretBasic);
        let body = serde_json::Value::Object(self.client_metadata_json(method)).to_string();
        let mut headers = json_accept();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        match self.send(
            now,
            Document::Registration,
            Method::POST,
            url,
            headers,
            Bytes::from(body),
            0,
        ) {
            Ok(()) => State::Registering,
            Err(e) => self.fail(e),
        }
    }

    fn on_registered(&mut self, now: Instant, status: StatusCode, body: &[u8]) -> State {
        if !status.is_success() {
            return self.fail(AuthError::Rejected {
                document: Document::Registration,
                status,
                body: documents::error_body(body),
            });
        }
        let reg = match documents::registration(body) {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        let Some(md) = self.server.as_ref() else {
            return self.fail(AuthError::Unsupported("no metadata".into()));
        };
        let stored = RegisteredClient {
            client_id: reg.client_id,
            client_secret: reg.client_secret,
            auth_method: reg
                .auth_method
                .as_deref()
                .and_then(TokenAuthMethod::from_name),
        };
        if reg.auth_method.is_some() && stored.auth_method.is_none() {
            return self.fail(AuthError::Unsupported(format!(
                "registered token endpoint auth method {:?}",
                reg.auth_method.unwrap_or_default()
            )));
        }
        let issuer = md.issuer.clone();
        self.identity = Some(registered_identity(stored.clone(), md));
        self.config.store.save_client(&issuer, stored);
        self.grant(now)
    }

    /// With metadata and an identity: refresh, or run the configured grant.
    fn grant(&mut self, now: Instant) -> State {
        if self.may_refresh()
            && self
                .tokens
                .as_ref()
                .zip(self.server.as_ref())
                .is_some_and(|(t, s)| t.issuer == s.issuer)
        {
            self.refreshed_on_challenge = true;
            return self.start_refresh(now, true);
        }
        self.requested = self.select_scopes();
        match self.config.grant.clone() {
            Grant::AuthorizationCode { .. } => self.start_authorization(now),
            Grant::ClientCredentials => self.request_token(now, "client_credentials", None),
            Grant::JwtBearer => match self.assertion() {
                Ok(a) => self.redeem(now, &a),
                Err(e) => self.fail(e),
            },
            Grant::EnterpriseManaged { idp } => match self.trade(now, &idp) {
                Ok(()) => State::Trading,
                Err(e) => self.fail(e),
            },
        }
    }

    /// The scope selection strategy (see the module docs).
    fn select_scopes(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut add = |s: &str| {
            if !out.iter().any(|o| o == s) {
                out.push(s.to_owned());
            }
        };
        for s in &self.requested {
            add(s);
        }
        match &self.flow.challenge_scope {
            Some(c) => c.split_ascii_whitespace().for_each(&mut add),
            None => {
                if self.requested.is_empty()
                    && let Some(p) = &self.flow.prm_scopes
                {
                    p.iter().for_each(|s| add(s));
                }
            }
        }
        for s in &self.config.scopes {
            add(s);
        }
        let offline = self.config.offline_access
            && matches!(self.config.grant, Grant::AuthorizationCode { .. })
            && self
                .server
                .as_ref()
                .and_then(|s| s.scopes_supported.as_ref())
                .is_some_and(|s| s.iter().any(|x| x == "offline_access"));
        if offline {
            add("offline_access");
        }
        out
    }

    fn start_authorization(&mut self, now: Instant) -> State {
        let (Some(md), Some(id), Some(redirect)) = (&self.server, &self.identity, &self.redirect)
        else {
            return self.fail(AuthError::Unsupported("no metadata or identity".into()));
        };
        let Some(endpoint) = md.authorization_endpoint.as_deref() else {
            return self.fail(AuthError::Unsupported("no authorization_endpoint".into()));
        };
        let mut url = match urls::secure_url(endpoint, self.config.allow_http) {
            Ok(u) => u,
            Err(e) => return self.fail(e),
        };
        let (verifier, state) = match (
            pkce::random_token(self.entropy.as_mut()),
            pkce::random_token(self.entropy.as_mut()),
        ) {
            (Ok(v), Ok(s)) => (v, s),
            (Err(e), _) | (_, Err(e)) => return self.fail(e),
        };
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code");
            q.append_pair("client_id", &id.client_id);
            q.append_pair("redirect_uri", redirect.as_str());
            q.append_pair("code_challenge", &pkce::s256_challenge(&verifier));
            q.append_pair("code_challenge_method", "S256");
            q.append_pair("state", &state);
            if !self.requested.is_empty() {
                q.append_pair("scope", &self.requested.join(" "));
            }
            q.append_pair("resource", &self.resource);
        }
        let request = AuthorizationRequest {
            url: url.to_string(),
            redirect_uri: redirect.to_string(),
            state: state.clone(),
        };
        let pending = Pending {
            verifier,
            state,
            issuer: md.issuer.clone(),
            iss_supported: md.iss_parameter_supported,
            url: request.url.clone(),
        };
        self.out.push_back(AuthOutput::Authorize(request));
        State::AwaitingUser {
            pending: Box::new(pending),
            deadline: after(now, self.config.limits.authorization_timeout),
        }
    }

    fn on_redirect(&mut self, now: Instant, pending: &Pending, redirect: &str) -> State {
        match self.check_redirect(pending, redirect) {
            Ok(code) => {
                let mut form = form_urlencoded::Serializer::new(String::new());
                form.append_pair("grant_type", "authorization_code");
                form.append_pair("code", &code);
                if let Some(r) = &self.redirect {
                    form.append_pair("redirect_uri", r.as_str());
                }
                form.append_pair("code_verifier", &pending.verifier);
                form.append_pair("resource", &self.resource);
                match self.post_token(now, form) {
                    Ok(()) => State::Exchanging,
                    Err(e) => self.fail(e),
                }
            }
            Err(e) => self.fail(e),
        }
    }

    /// The authorization response checks, in the order the specifications want them: the
    /// endpoint, single parameters, `iss` (before `error` is believed, RFC 9207 §2.4),
    /// `state`, then `error` or `code`.
    fn check_redirect(&self, pending: &Pending, redirect: &str) -> Result<String, AuthError> {
        let bad = |why: &str| AuthError::InvalidRedirect(why.to_owned());
        let url = Url::parse(redirect).map_err(|_| bad("not an absolute URL"))?;
        if !self
            .redirect
            .as_ref()
            .is_some_and(|r| urls::same_endpoint(r, &url))
        {
            return Err(bad("not the registered redirect URI"));
        }
        let mut params: Vec<(String, String)> = Vec::new();
        for (k, v) in url.query_pairs() {
            if params.iter().any(|(p, _)| *p == k) {
                // RFC 6749 §3.1: a parameter MUST NOT appear more than once.
                return Err(bad(&format!("parameter {k} repeated")));
            }
            params.push((k.into_owned(), v.into_owned()));
        }
        let get = |k: &str| params.iter().find(|(p, _)| p == k).map(|(_, v)| v.as_str());
        match get("iss") {
            Some(iss) if iss != pending.issuer => {
                return Err(AuthError::IssMismatch {
                    expected: pending.issuer.clone(),
                    found: Some(iss.to_owned()),
                });
            }
            None if pending.iss_supported => {
                return Err(AuthError::IssMismatch {
                    expected: pending.issuer.clone(),
                    found: None,
                });
            }
            _ => {}
        }
        if !get("state").is_some_and(|s| pkce::same_secret(s, &pending.state)) {
            return Err(AuthError::StateMismatch);
        }
        if let Some(error) = get("error") {
            return Err(AuthError::Denied(OAuthErrorBody {
                error: Some(error.to_owned()),
                error_description: get("error_description").map(str::to_owned),
                error_uri: get("error_uri").map(str::to_owned),
            }));
        }
        match get("code") {
            Some(c) if !c.is_empty() => Ok(c.to_owned()),
            _ => Err(bad("no code")),
        }
    }

    fn renew(&mut self, now: Instant) -> State {
        if self
            .tokens
            .as_ref()
            .is_some_and(|t| t.refresh_token.is_some())
        {
            return self.start_refresh(now, false);
        }
        if self.machine_grant() {
            self.flow = FlowCtx::default();
            return self.grant(now);
        }
        State::Idle
    }

    /// The configuration's assertion now (the JWT bearer grant's, the enterprise grant's ID
    /// token).
    fn assertion(&self) -> Result<String, AuthError> {
        self.config
            .assertion
            .as_ref()
            .ok_or_else(|| AuthError::InvalidConfig("this grant needs an assertion source".into()))?
            .assertion()
            .map_err(AuthError::Assertion)
    }

    /// The JWT bearer grant with `assertion` (RFC 7523 §2.1): a workload's token, or the
    /// identity provider's ID-JAG.
    fn redeem(&mut self, now: Instant, assertion: &str) -> State {
        self.request_token(now, JWT_BEARER_GRANT, Some(assertion))
    }

    /// The token request of a grant with no person involved: `grant_type`, its `assertion`
    /// if it has one, the scopes asked and the RFC 8707 resource.
    fn request_token(&mut self, now: Instant, grant_type: &str, assertion: Option<&str>) -> State {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", grant_type);
        if let Some(a) = assertion {
            form.append_pair("assertion", a);
        }
        if !self.requested.is_empty() {
            form.append_pair("scope", &self.requested.join(" "));
        }
        form.append_pair("resource", &self.resource);
        match self.post_token(now, form) {
            Ok(()) => State::Requesting,
            Err(e) => self.fail(e),
        }
    }

    /// Enterprise-managed authorization, first leg: the person's ID token exchanged at the
    /// identity provider (RFC 8693 §2.1) for an ID-JAG whose audience is the authorization
    /// server and whose resource is this MCP server.
    fn trade(&mut self, now: Instant, idp: &IdentityProvider) -> Result<(), AuthError> {
        let id_token = self.assertion()?;
        let audience = self
            .server
            .as_ref()
            .map(|s| s.issuer.clone())
            .ok_or_else(|| AuthError::Unsupported("no metadata".into()))?;
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", TOKEN_EXCHANGE_GRANT);
        form.append_pair("requested_token_type", ID_JAG_TOKEN_TYPE);
        form.append_pair("audience", &audience);
        form.append_pair("resource", &self.resource);
        if !self.requested.is_empty() {
            form.append_pair("scope", &self.requested.join(" "));
        }
        form.append_pair("subject_token", &id_token);
        form.append_pair("subject_token_type", ID_TOKEN_TYPE);
        if let Some(id) = &idp.client_id {
            form.append_pair("client_id", id);
        }
        let url = urls::secure_url(&idp.token_endpoint, self.config.allow_http)?;
        let mut headers = json_accept();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let body = Bytes::from(form.finish());
        self.send(
            now,
            Document::TokenExchange,
            Method::POST,
            url,
            headers,
            body,
            0,
        )
    }

    /// The identity provider's answer: an ID-JAG, redeemed at the authorization server.
    fn on_traded(&mut self, now: Instant, status: StatusCode, body: &[u8]) -> State {
        if !status.is_success() {
            return self.fail(AuthError::Rejected {
                document: Document::TokenExchange,
                status,
                body: documents::error_body(body),
            });
        }
        match documents::id_jag(body) {
            Ok(grant) => self.redeem(now, &grant),
            Err(e) => self.fail(e),
        }
    }

    /// A grant with no person involved (client credentials, JWT bearer, enterprise-managed):
    /// renewed by running it again.
    fn machine_grant(&self) -> bool {
        !matches!(self.config.grant, Grant::AuthorizationCode { .. })
    }

    fn start_refresh(&mut self, now: Instant, on_challenge: bool) -> State {
        let Some(refresh) = self.tokens.as_ref().and_then(|t| t.refresh_token.clone()) else {
            return State::Idle;
        };
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "refresh_token");
        form.append_pair("refresh_token", &refresh);
        form.append_pair("resource", &self.resource);
        match self.post_token(now, form) {
            Ok(()) => State::Refreshing { on_challenge },
            Err(e) => self.fail(e),
        }
    }

    fn refresh_failed(&mut self, now: Instant, on_challenge: bool) -> State {
        if let Some(t) = self.tokens.as_mut() {
            t.refresh_token = None;
            let t = t.clone();
            self.config.store.save_tokens(&self.key, t);
        }
        if on_challenge {
            // The refresh token is spent: run the grant (metadata and identity are known).
            self.grant(now)
        } else {
            State::Idle
        }
    }

    fn on_tokens(&mut self, now: Instant, status: StatusCode, body: &[u8], refresh: bool) -> State {
        if !status.is_success() {
            let body = documents::error_body(body);
            if self.retry_with_nonce(now, &body) {
                // The same token request again (an authorization code's or a grant's: both
                // wait for the token response alike).
                return State::Requesting;
            }
            if body.error.as_deref() == Some("invalid_client")
                && let (Some(i), Some(md)) = (&self.identity, &self.server)
                && i.dynamic
            {
                let issuer = md.issuer.clone();
                self.config.store.clear_client(&issuer);
                self.identity = None;
            }
            return self.fail(AuthError::Rejected {
                document: Document::Token,
                status,
                body,
            });
        }
        self.token_request = None;
        let t = match documents::token_response(body, self.config.dpop.is_some()) {
            Ok(t) => t,
            Err(e) => return self.fail(e),
        };
        let Some(issuer) = self.server.as_ref().map(|s| s.issuer.clone()) else {
            return self.fail(AuthError::Unsupported("no metadata".into()));
        };
        let old_refresh = self.tokens.as_ref().and_then(|o| o.refresh_token.clone());
        let scope = t
            .scope
            .clone()
            .or_else(|| (!self.requested.is_empty()).then(|| self.requested.join(" ")));
        let stored = StoredTokens {
            issuer,
            access_token: t.access_token,
            // RFC 6749 §6: without a new refresh token, the old one stays valid.
            refresh_token: t.refresh_token.or(if refresh { old_refresh } else { None }),
            expires_at: t.expires_in.map(|d| after(now, d)),
            scope,
        };
        self.lifetime = t.expires_in;
        self.dpop_bound = t.dpop;
        self.header = if t.dpop {
            HeaderValue::try_from(format!("DPoP {}", stored.access_token)).ok()
        } else {
            bearer(&stored.access_token)
        };
        self.config.store.save_tokens(&self.key, stored.clone());
        self.tokens = Some(stored);
        if !refresh {
            self.refreshed_on_challenge = false;
        }
        self.out.push_back(AuthOutput::Authorized);
        State::Idle
    }

    fn drop_tokens(&mut self) {
        self.tokens = None;
        self.dpop_bound = false;
        self.header = None;
        self.lifetime = None;
        self.config.store.clear_tokens(&self.key);
    }

    // ------------------------------------------------------------------ exchanges

    fn get(
        &mut self,
        now: Instant,
        document: Document,
        url: Url,
        redirects: u32,
    ) -> Result<(), AuthError> {
        self.send(
            now,
            document,
            Method::GET,
            url,
            json_accept(),
            Bytes::new(),
            redirects,
        )
    }

    /// A token request: the form plus the client's authentication (RFC 6749 §2.3.1).
    fn post_token(
        &mut self,
        now: Instant,
        mut form: form_urlencoded::Serializer<'_, String>,
    ) -> Result<(), AuthError> {
        let mut headers = json_accept();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        if let Some(i) = &self.identity {
            if i.method == TokenAuthMethod::PrivateKeyJwt {
                let signer = self.config.signer.as_ref().ok_or_else(|| {
                    AuthError::InvalidConfig("private_key_jwt needs a signer".into())
                })?;
                let audience = self
                    .server
                    .as_ref()
                    .map(|s| s.issuer.clone())
                    .ok_or_else(|| AuthError::Unsupported("no metadata".into()))?;
                let claims = AssertionClaims {
                    client_id: i.client_id.clone(),
                    audience,
                    jwt_id: pkce::random_token(self.entropy.as_mut())?,
                };
                let assertion = signer.sign(&claims).map_err(AuthError::Assertion)?;
                form.append_pair("client_id", &i.client_id);
                form.append_pair("client_assertion_type", JWT_CLIENT_ASSERTION);
                form.append_pair("client_assertion", &assertion);
            }
            match (i.method, &i.secret) {
                (TokenAuthMethod::ClientSecretBasic, Some(secret)) => {
                    let v = HeaderValue::from_str(&pkce::basic_auth(&i.client_id, secret))
                        .map_err(|_| AuthError::InvalidConfig("client credentials".into()))?;
                    headers.insert(AUTHORIZATION, v);
                }
                (TokenAuthMethod::ClientSecretPost, Some(secret)) => {
                    form.append_pair("client_id", &i.client_id);
                    form.append_pair("client_secret", secret);
                }
                (TokenAuthMethod::PrivateKeyJwt, _) => {}
                _ => {
                    form.append_pair("client_id", &i.client_id);
                }
            }
        }
        let token = self
            .server
            .as_ref()
            .and_then(|s| s.token_endpoint.clone())
            .ok_or_else(|| AuthError::Unsupported("no token_endpoint".into()))?;
        let url = urls::secure_url(&token, self.config.allow_http)?;
        let body = Bytes::from(form.finish());
        self.token_request = Some((url.clone(), headers.clone(), body.clone()));
        self.send_token(now, url, headers, body)
    }

    /// Sends a token request, with a DPoP proof when the client asks for bound tokens.
    fn send_token(
        &mut self,
        now: Instant,
        url: Url,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> Result<(), AuthError> {
        if let Some(signer) = &self.config.dpop {
            let target = crate::dpop::htu(url.as_str()).to_owned();
            let request = crate::dpop::DpopRequest {
                method: "POST",
                url: &target,
                access_token: None,
                nonce: self.as_nonce.as_deref(),
            };
            let proof = signer.proof(&request).map_err(AuthError::Assertion)?;
            let proof = HeaderValue::try_from(proof)
                .map_err(|_| AuthError::Assertion("the DPoP proof is not a header value".into()))?;
            headers.insert(http::HeaderName::from_static("dpop"), proof);
        }
        self.send(now, Document::Token, Method::POST, url, headers, body, 0)
    }

    /// A token request refused with `use_dpop_nonce` (RFC 9449 §8): sent again once, with the
    /// nonce the server gave. `false` when it does not apply or was done already.
    fn retry_with_nonce(&mut self, now: Instant, body: &OAuthErrorBody) -> bool {
        if self.config.dpop.is_none()
            || body.error.as_deref() != Some("use_dpop_nonce")
            || self.as_nonce.is_none()
        {
            return false;
        }
        let Some((url, headers, form)) = self.token_request.take() else {
            return false;
        };
        match self.send_token(now, url, headers, form) {
            Ok(()) => true,
            Err(e) => {
                self.out.push_back(AuthOutput::Failed(e));
                false
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        now: Instant,
        document: Document,
        method: Method,
        url: Url,
        headers: HeaderMap,
        body: Bytes,
        redirects: u32,
    ) -> Result<(), AuthError> {
        let uri = Uri::try_from(url.as_str()).map_err(|_| AuthError::InsecureUrl {
            url: url.to_string(),
        })?;
        let id = AuthRequestId(self.next_id);
        self.next_id += 1;
        self.exchange = Some(Exchange {
            id,
            document,
            method: method.clone(),
            url,
            redirects,
            deadline: after(now, self.config.limits.request_timeout),
            status: None,
            body: BytesMut::new(),
        });
        self.out.push_back(AuthOutput::Http(AuthHttpRequest {
            id,
            document,
            method,
            url: uri,
            headers,
            body,
        }));
        Ok(())
    }

    /// A GET was redirected: follow `location` (relative to the URL fetched) if the limit and
    /// the HTTPS rule allow, else fail the exchange.
    fn follow(&mut self, now: Instant, location: Option<String>) {
        let Some(x) = self.exchange.take() else {
            return;
        };
        self.out.push_back(AuthOutput::Abort(x.id));
        let next = location
            .filter(|_| x.redirects < self.config.limits.max_redirects)
            .and_then(|l| x.url.join(&l).ok())
            .and_then(|u| urls::secure_url(u.as_str(), self.config.allow_http).ok());
        let sent = match next {
            Some(url) => self.get(now, x.document, url, x.redirects + 1).is_ok(),
            None => false,
        };
        if !sent {
            self.step(
                now,
                Ev::ExchangeFailed(AuthError::Redirects {
                    document: x.document,
                }),
            );
        }
    }
}

fn json_accept() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(ACCEPT, HeaderValue::from_static("application/json"));
    h
}

fn bearer(token: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("Bearer {token}")).ok()
}

/// `now + d`, saturating far in the future.
fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// The method of a client with (or without) a secret, as `md` allows: `client_secret_basic`,
/// then `client_secret_post`; `none` without a secret (or when the server accepts neither
/// secret method but `none`).
fn default_method(has_secret: bool, md: &ServerMetadata) -> TokenAuthMethod {
    if !has_secret {
        return TokenAuthMethod::None;
    }
    [
        TokenAuthMethod::ClientSecretBasic,
        TokenAuthMethod::ClientSecretPost,
    ]
    .into_iter()
    .find(|m| md.supports_method(*m))
    .unwrap_or(if md.supports_method(TokenAuthMethod::None) {
        TokenAuthMethod::None
    } else {
        TokenAuthMethod::ClientSecretBasic
    })
}

fn registered_identity(r: RegisteredClient, md: &ServerMetadata) -> Identity {
    let method = r
        .auth_method
        .unwrap_or_else(|| default_method(r.client_secret.is_some(), md));
    Identity {
        client_id: r.client_id,
        secret: r.client_secret,
        method,
        dynamic: true,
    }
}
