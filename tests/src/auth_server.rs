//! A small OAuth 2.1 authorization server for the end-to-end tests, on tokio + hyper over
//! loopback: RFC 8414 metadata, dynamic client registration (RFC 7591), an authorization
//! endpoint that consents at once (it redirects with a code, `state` and `iss`), and a token
//! endpoint for the authorization code grant (PKCE S256 verified, `redirect_uri` and
//! `resource` checked, codes single-use) and the refresh token grant (rotated). Tokens expire
//! on the wall clock; [`AuthServer::subject`] is what a protected MCP server asks. With
//! [`AsConfig::dpop`], a token request carrying a `DPoP` proof (checked by `mcp_driver`'s
//! `DpopVerifier`, nonces as its policy says) gets a `DPoP` token bound to the proof's key
//! ([`AuthServer::binding`]).
//!
//! [`browser`] plays the person's user agent: it follows the authorization URL and returns
//! the redirect the server answered with, without following it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use sha2::Digest;

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct AsConfig {
    /// Lifetime of access tokens (`expires_in`).
    pub token_lifetime: Duration,
    /// Whether refresh tokens are issued.
    pub refresh_tokens: bool,
    /// DPoP at the token endpoint (RFC 9449 §5), with this policy.
    pub dpop: Option<mcp_driver::DpopPolicy>,
}

impl Default for AsConfig {
    fn default() -> Self {
        AsConfig {
            token_lifetime: Duration::from_secs(3600),
            refresh_tokens: true,
            dpop: None,
        }
    }
}

/// What the server saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsStats {
    /// Metadata documents served.
    pub metadata: u32,
    /// Clients registered.
    pub registrations: u32,
    /// Authorization requests consented to.
    pub authorizations: u32,
    /// Codes exchanged for tokens.
    pub code_exchanges: u32,
    /// Refresh grants honoured.
    pub refreshes: u32,
    /// Token requests refused.
    pub refused: u32,
    /// The `resource` of the last token request.
    pub last_resource: Option<String>,
    /// DPoP-bound tokens issued.
    pub dpop_tokens: u32,
    /// Token requests refused for their DPoP proof (a nonce asked for included).
    pub dpop_refused: u32,
}

struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    resource: Option<String>,
    scope: Option<String>,
}

#[derive(Default)]
struct State {
    clients: HashMap<String, Vec<String>>,
    codes: HashMap<String, Code>,
    /// Access token → expiry, client, the key it is bound to.
    access: HashMap<String, (Instant, String, Option<String>)>,
    /// Refresh token → client, scope, the key its tokens are bound to.
    refresh: HashMap<String, (String, Option<String>, Option<String>)>,
    seq: u64,
    stats: AsStats,
}

/// A running authorization server.
#[derive(Clone)]
pub struct AuthServer {
    issuer: String,
    config: AsConfig,
    state: Arc<Mutex<State>>,
    /// The token endpoint's DPoP proofs (with [`AsConfig::dpop`]).
    dpop: Option<Arc<mcp_driver::DpopVerifier>>,
}

impl std::fmt::Debug for AuthServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthServer")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn json_response(status: StatusCode, v: &Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response<Full<Bytes>> {
    json_response(
        status,
        &json!({"error": error, "error_description": description}),
    )
}

fn pairs(s: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(s).into_owned().collect()
}

impl AuthServer {
    /// Starts a server on an ephemeral loopback port, in the current tokio runtime.
    ///
    /// # Panics
    ///
    /// When no port can be bound.
    pub async fn start(config: AsConfig) -> AuthServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the authorization server");
        let addr = listener.local_addr().expect("its address");
        let dpop = config
            .dpop
            .clone()
            .map(|p| Arc::new(mcp_driver::DpopVerifier::new(p)));
        let server = AuthServer {
            issuer: format!("http://{addr}"),
            config,
            state: Arc::default(),
            dpop,
        };
        let s = server.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let s = s.clone();
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let s = s.clone();
                    async move { Ok::<_, hyper::Error>(s.handle(req).await) }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc),
                );
            }
        });
        server
    }

    /// The issuer identifier (`http://127.0.0.1:<port>`, no trailing slash).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// What the server saw so far.
    pub fn stats(&self) -> AsStats {
        lock(&self.state).stats.clone()
    }

    /// The client a live access token of this server was issued to (`None`: not a live
    /// token of this server). A resource server binds sessions to this, not to the token,
    /// which changes at every refresh.
    pub fn subject(&self, token: &str) -> Option<String> {
        lock(&self.state)
            .access
            .get(token)
            .filter(|(exp, _, _)| Instant::now() < *exp)
            .map(|(_, client, _)| client.clone())
    }

    /// The `cnf.jkt` of a live DPoP-bound token (`None`: unbound, or not live).
    pub fn binding(&self, token: &str) -> Option<String> {
        lock(&self.state)
            .access
            .get(token)
            .filter(|(exp, _, _)| Instant::now() < *exp)
            .and_then(|(_, _, jkt)| jkt.clone())
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let path = parts.uri.path();
        let query = parts.uri.query().unwrap_or("");
        match (&parts.method, path) {
            (&Method::GET, "/.well-known/oauth-authorization-server") => self.metadata(),
            (&Method::POST, "/register") => self.register(&body),
            (&Method::GET, "/authorize") => self.authorize(query),
            (&Method::POST, "/token") => {
                let proofs: Vec<&str> = parts
                    .headers
                    .get_all("dpop")
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .collect();
                self.token(&body, &proofs)
            }
            _ => json_response(StatusCode::NOT_FOUND, &json!({"error": "not_found"})),
        }
    }

    fn metadata(&self) -> Response<Full<Bytes>> {
        lock(&self.state).stats.metadata += 1;
        let i = &self.issuer;
        json_response(
            StatusCode::OK,
            &json!({
                "issuer": i,
                "authorization_endpoint": format!("{i}/authorize"),
                "token_endpoint": format!("{i}/token"),
                "registration_endpoint": format!("{i}/register"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "scopes_supported": ["mcp", "offline_access"],
                "authorization_response_iss_parameter_supported": true,
            }),
        )
    }

    fn register(&self, body: &[u8]) -> Response<Full<Bytes>> {
        let Ok(v) = serde_json::from_slice::<Value>(body) else {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_client_metadata",
                "not JSON",
            );
        };
        let redirects: Vec<String> = v["redirect_uris"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if redirects.is_empty() {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_redirect_uri",
                "redirect_uris required",
            );
        }
        let mut st = lock(&self.state);
        st.seq += 1;
        let id = format!("client-{}", st.seq);
        st.clients.insert(id.clone(), redirects.clone());
        st.stats.registrations += 1;
        json_response(
            StatusCode::CREATED,
            &json!({"client_id": id, "redirect_uris": redirects, "token_endpoint_auth_method": "none"}),
        )
    }

    fn authorize(&self, query: &str) -> Response<Full<Bytes>> {
        let q = pairs(query.as_bytes());
        let get = |k: &str| q.get(k).cloned();
        let mut st = lock(&self.state);
        let (Some(client), Some(redirect), Some(challenge)) =
            (get("client_id"), get("redirect_uri"), get("code_challenge"))
        else {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "missing parameter",
            );
        };
        if !st
            .clients
            .get(&client)
            .is_some_and(|r| r.contains(&redirect))
            || get("response_type").as_deref() != Some("code")
            || get("code_challenge_method").as_deref() != Some("S256")
        {
            return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", "refused");
        }
        st.seq += 1;
        let code = format!("code-{}", st.seq);
        st.codes.insert(
            code.clone(),
            Code {
                client_id: client,
                redirect_uri: redirect.clone(),
                challenge,
                resource: get("resource"),
                scope: get("scope"),
            },
        );
        st.stats.authorizations += 1;
        let Ok(mut to) = url::Url::parse(&redirect) else {
            return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", "redirect_uri");
        };
        to.query_pairs_mut()
            .append_pair("code", &code)
            .append_pair("state", &get("state").unwrap_or_default())
            .append_pair("iss", &self.issuer);
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::FOUND;
        if let Ok(v) = http::HeaderValue::from_str(to.as_str()) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        r
    }

    fn issue(
        &self,
        st: &mut State,
        client: String,
        scope: Option<String>,
        jkt: Option<String>,
    ) -> Value {
        st.seq += 1;
        let access = format!("at-{}", st.seq);
        if jkt.is_some() {
            st.stats.dpop_tokens += 1;
        }
        st.access.insert(
            access.clone(),
            (
                Instant::now() + self.config.token_lifetime,
                client.clone(),
                jkt.clone(),
            ),
        );
        let mut v = json!({
            "access_token": access,
            "token_type": if jkt.is_some() { "DPoP" } else { "Bearer" },
            "expires_in": self.config.token_lifetime.as_secs_f64(),
        });
        if let Some(s) = &scope {
            v["scope"] = s.clone().into();
        }
        if self.config.refresh_tokens {
            let refresh = format!("rt-{}", st.seq);
            st.refresh.insert(refresh.clone(), (client, scope, jkt));
            v["refresh_token"] = refresh.into();
        }
        v
    }

    fn token(&self, body: &[u8], proofs: &[&str]) -> Response<Full<Bytes>> {
        let f = pairs(body);
        let get = |k: &str| f.get(k).cloned();
        // DPoP (RFC 9449 §5): a proof binds the token to its key; a bad one is refused with
        // 400 (and the nonce to use, when one is due).
        let jkt = match (&self.dpop, proofs.is_empty()) {
            (Some(v), false) => {
                let url = format!("{}/token", self.issuer);
                match v.check_token_request(std::time::SystemTime::now(), proofs, &url) {
                    Ok(jkt) => Some(jkt),
                    Err(r) => {
                        lock(&self.state).stats.dpop_refused += 1;
                        let mut resp = oauth_error(StatusCode::BAD_REQUEST, r.error, r.description);
                        if let Some(n) = r.nonce.and_then(|n| http::HeaderValue::from_str(&n).ok())
                        {
                            resp.headers_mut().insert("dpop-nonce", n);
                        }
                        return resp;
                    }
                }
            }
            _ => None,
        };
        let mut st = lock(&self.state);
        st.stats.last_resource = get("resource");
        match get("grant_type").as_deref() {
            Some("authorization_code") => {
                let Some(code) = get("code").and_then(|c| st.codes.remove(&c)) else {
                    st.stats.refused += 1;
                    return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "unknown code");
                };
                let verifier = get("code_verifier").unwrap_or_default();
                let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(sha2::Sha256::digest(verifier.as_bytes()));
                if computed != code.challenge
                    || get("client_id").as_deref() != Some(code.client_id.as_str())
                    || get("redirect_uri").as_deref() != Some(code.redirect_uri.as_str())
                    || get("resource") != code.resource
                {
                    st.stats.refused += 1;
                    return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "mismatch");
                }
                st.stats.code_exchanges += 1;
                let v = self.issue(&mut st, code.client_id, code.scope, jkt);
                json_response(StatusCode::OK, &v)
            }
            Some("refresh_token") => {
                let Some((client, scope, bound)) =
                    get("refresh_token").and_then(|r| st.refresh.remove(&r))
                else {
                    st.stats.refused += 1;
                    return oauth_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_grant",
                        "unknown refresh token",
                    );
                };
                // RFC 9449 §5: a bound refresh token is refreshed with a proof of its key.
                if bound.is_some() && bound != jkt {
                    st.stats.refused += 1;
                    return oauth_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_dpop_proof",
                        "the refresh token is bound to another key",
                    );
                }
                st.stats.refreshes += 1;
                let v = self.issue(&mut st, client, scope, jkt);
                json_response(StatusCode::OK, &v)
            }
            _ => {
                st.stats.refused += 1;
                oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type", "")
            }
        }
    }
}

/// The person's user agent: GETs the authorization URL (on a thread of its own, so that any
/// runtime can await it) and returns the `Location` it was redirected to, unfollowed.
///
/// # Errors
///
/// When the authorization server does not redirect.
pub async fn browser(url: String) -> Result<String, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        let r = match rt {
            Ok(rt) => rt.block_on(async move {
                let client = hyper_util::client::legacy::Client::builder(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .build_http::<Full<Bytes>>();
                let uri: http::Uri = url.parse().map_err(|e| format!("{e}"))?;
                let resp = client.get(uri).await.map_err(|e| format!("{e}"))?;
                if !resp.status().is_redirection() {
                    return Err(format!("no redirect: {}", resp.status()));
                }
                resp.headers()
                    .get(header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
                    .ok_or_else(|| "no Location".to_owned())
            }),
            Err(e) => Err(e.to_string()),
        };
        let _ = tx.send(r);
    });
    rx.await.map_err(|_| "the browser thread died".to_owned())?
}
