//! OAuth in the driver: the [`OAuthClient`] machine beside the session, its exchanges carried
//! by the same [`Engine`](super::Engine) as the MCP requests, and the application's
//! [`OAuth::on_authorize`] handler awaited when a person must visit an authorization URL.
//!
//! # Theory of operation
//!
//! The session holds what the MCP server refuses for authorization
//! ([`ClientConfig::with_authorization_hold`](mcp_proto::client::ClientConfig::with_authorization_hold))
//! and says so with [`ClientEvent::AwaitingAuthorization`]; the driver hands that challenge
//! to the machine. The machine's intents become exchanges (one engine per URL, built with
//! [`Engine::for_url`](super::Engine::for_url)); an [`AuthOutput::Authorize`] runs the
//! handler as a task whose answer (the redirect URL) comes back into the run loop, tagged
//! with the request's `state` so that a late answer to an abandoned authorization is
//! dropped. [`AuthOutput::Authorized`] sets the new token on the session and re-sends what
//! it held; [`AuthOutput::Failed`] fails what it held. Every successful response tells the
//! machine the token works ([`OAuthClient::handle_accepted`]).
//!
//! | authorization request | event | next |
//! |---|---|---|
//! | none | `Authorize`, a handler | waiting (handler task spawned) |
//! | none | `Authorize`, no handler | none (`decline_authorization`: fails with the URL) |
//! | waiting | the handler's `Ok(redirect)` with the current `state` | none (`handle_redirect`) |
//! | waiting | the handler's `Err(reason)` with the current `state` | none (`abandon_authorization`) |
//! | any | an answer with another `state` | (same): dropped |

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures_channel::mpsc;

use mcp_proto::auth::{
    AuthHttpRequest, AuthInput, AuthOutput, AuthRequestId, AuthorizationRequest, Entropy,
    MemoryTokenStore, OAuthClient, OAuthConfig, RegisteredClient, StoredTokens, TokenStore,
};
use mcp_proto::client::ClientSession;
use mcp_service::server::BoxFuture;

use super::client::NetEventKind;

/// The application's handler of an authorization URL: have the person visit
/// `request.url` (open a browser, print it), wait for the authorization server's redirect to
/// `request.redirect_uri` (a loopback listener, a custom handler), and return the full
/// redirect URL; or `Err` with why it could not.
pub type AuthorizeHandler =
    Arc<dyn Fn(AuthorizationRequest) -> BoxFuture<'static, Result<String, String>> + Send + Sync>;

/// OAuth for a connection ([`Connect::oauth`](super::Connect::oauth)): the machine's
/// [`OAuthConfig`] and, for the authorization code grant, the handler of the authorization
/// URL.
pub struct OAuth {
    pub(crate) config: OAuthConfig,
    pub(crate) on_authorize: Option<AuthorizeHandler>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("config", &self.config)
            .field("on_authorize", &self.on_authorize.is_some())
            .finish()
    }
}

impl OAuth {
    /// OAuth with `config`. Without [`on_authorize`](Self::on_authorize), an authorization
    /// that needs a person fails with
    /// [`AuthError::AuthorizationRequired`](mcp_proto::auth::AuthError::AuthorizationRequired),
    /// which carries the URL (headless clients use the client credentials grant).
    pub fn new(config: OAuthConfig) -> Self {
        OAuth {
            config,
            on_authorize: None,
        }
    }

    /// The handler of authorization URLs (see [`AuthorizeHandler`]).
    pub fn on_authorize<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(AuthorizationRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, String>> + Send + 'static,
    {
        self.on_authorize = Some(Arc::new(move |r| Box::pin(f(r))));
        self
    }
}

/// The operating system's random source.
pub(crate) struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, buf: &mut [u8]) -> bool {
        getrandom::fill(buf).is_ok()
    }
}

/// The handler's answer, tagged with the `state` of its request.
pub(crate) type Redirected = (String, Result<String, String>);

/// The machine, its exchanges `X`, the handler, and where handler answers go.
pub(crate) struct AuthPart<X> {
    pub(crate) machine: OAuthClient,
    exchanges: HashMap<AuthRequestId, X>,
    on_authorize: Option<AuthorizeHandler>,
    /// The `state` of the authorization request the handler is working on.
    waiting: Option<String>,
    redirects: mpsc::UnboundedSender<Redirected>,
}

impl<X> AuthPart<X> {
    pub(crate) fn new(
        machine: OAuthClient,
        on_authorize: Option<AuthorizeHandler>,
        redirects: mpsc::UnboundedSender<Redirected>,
    ) -> Self {
        AuthPart {
            machine,
            exchanges: HashMap::new(),
            on_authorize,
            waiting: None,
            redirects,
        }
    }

    /// Drains the machine: intents to `start` (`None`: it cannot be carried), handler tasks to `spawn`, tokens and failures
    /// to the session. Says whether anything moved.
    pub(crate) fn pump(
        &mut self,
        now: Instant,
        session: &mut ClientSession,
        start: &mut dyn FnMut(AuthHttpRequest) -> Option<X>,
        spawn: &mut dyn FnMut(BoxFuture<'static, ()>),
    ) -> bool {
        let mut moved = false;
        while let Some(out) = self.machine.poll_output() {
            moved = true;
            match out {
                AuthOutput::Http(req) => {
                    tracing::debug!(url = %req.url, document = %req.document, "oauth request");
                    let id = req.id;
                    match start(req) {
                        Some(x) => {
                            self.exchanges.insert(id, x);
                        }
                        // No engine for that URL: the exchange fails at once.
                        None => self.machine.handle_input(
                            now,
                            AuthInput::Failed {
                                id,
                                kind: mcp_proto::client::TransportFailure::Connect,
                            },
                        ),
                    }
                }
                AuthOutput::Abort(id) => {
                    self.exchanges.remove(&id);
                }
                AuthOutput::Authorize(req) => match &self.on_authorize {
                    Some(handler) => {
                        tracing::info!(url = %req.url, "oauth: authorization needed");
                        let state = req.state.clone();
                        self.waiting = Some(state.clone());
                        let answer = handler(req);
                        let tx = self.redirects.clone();
                        spawn(Box::pin(async move {
                            let r = answer.await;
                            let _ = tx.unbounded_send((state, r));
                        }));
                    }
                    None => self.machine.decline_authorization(now),
                },
                AuthOutput::Authorized => {
                    tracing::debug!("oauth: authorized");
                    // A DPoP-bound token goes with a proof on every request (RFC 9449 §7.1).
                    let set = match (self.machine.dpop_signer(), self.machine.access_token()) {
                        (Some(signer), Some(token)) => {
                            let endpoint = self.machine.endpoint().to_owned();
                            session.set_dpop_token(Some((token, signer, &endpoint)))
                        }
                        _ => session
                            .set_dpop_token(None)
                            .and_then(|()| session.set_bearer_token(self.machine.access_token())),
                    };
                    if set.is_err() {
                        tracing::warn!("oauth: the access token is not a valid header value");
                    }
                    session.authorized(now);
                }
                AuthOutput::Failed(error) => {
                    tracing::warn!(%error, "oauth: authorization failed");
                    session.authorization_failed(now, error);
                }
                other => tracing::debug!(output = ?other, "oauth: output"),
            }
        }
        moved
    }

    /// Feeds what an exchange of the flow observed.
    pub(crate) fn net(&mut self, now: Instant, id: AuthRequestId, kind: NetEventKind) {
        if !self.exchanges.contains_key(&id) {
            return;
        }
        match kind {
            NetEventKind::Head(status, headers) => self.machine.handle_input(
                now,
                AuthInput::Head {
                    id,
                    status,
                    headers: &headers,
                },
            ),
            NetEventKind::Body(chunk) => self
                .machine
                .handle_input(now, AuthInput::Body { id, chunk }),
            NetEventKind::End => {
                self.exchanges.remove(&id);
                self.machine.handle_input(now, AuthInput::End { id });
            }
            NetEventKind::Failed(kind) => {
                self.exchanges.remove(&id);
                self.machine
                    .handle_input(now, AuthInput::Failed { id, kind });
            }
        }
    }

    /// The handler answered.
    pub(crate) fn redirected(&mut self, now: Instant, (state, result): Redirected) {
        if self.waiting.as_deref() != Some(state.as_str()) {
            tracing::debug!("oauth: a late answer of the authorization handler dropped");
            return;
        }
        self.waiting = None;
        match result {
            Ok(url) => self.machine.handle_redirect(now, &url),
            Err(reason) => self.machine.abandon_authorization(now, reason),
        }
    }

    /// Drops every exchange (the driver stops).
    pub(crate) fn clear(&mut self) {
        self.exchanges.clear();
    }
}

/// A [`TokenStore`] shared between clients (and with the application), behind a lock.
#[derive(Debug, Default, Clone)]
pub struct SharedTokenStore(std::sync::Arc<std::sync::Mutex<MemoryTokenStore>>);

impl SharedTokenStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryTokenStore> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TokenStore for SharedTokenStore {
    fn tokens(&self, resource: &str) -> Option<StoredTokens> {
        self.lock().tokens(resource)
    }

    fn save_tokens(&mut self, resource: &str, tokens: StoredTokens) {
        self.lock().save_tokens(resource, tokens);
    }

    fn clear_tokens(&mut self, resource: &str) {
        self.lock().clear_tokens(resource);
    }

    fn client(&self, issuer: &str) -> Option<RegisteredClient> {
        self.lock().client(issuer)
    }

    fn save_client(&mut self, issuer: &str, client: RegisteredClient) {
        self.lock().save_client(issuer, client);
    }

    fn clear_client(&mut self, issuer: &str) {
        self.lock().clear_client(issuer);
    }
}
