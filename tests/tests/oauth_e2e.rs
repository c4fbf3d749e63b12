//! OAuth end to end on loopback, on the four runtime pairs: our client, configured with
//! `Connect::oauth`, against our server protected by an authenticator that accepts only the
//! tokens of the test authorization server ([`mcp_tests::auth_server`]), whose PRM names that
//! server. The client gets a 401 on `initialize`, discovers, registers, has the "browser"
//! follow the authorization URL (automatic consent), exchanges the code (PKCE verified by the
//! server), sends `initialize` again with the token; later it refreshes the token before it
//! expires, so no request is refused again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use mcp_driver::{DpopCheck, DpopKey, DpopPolicy, DpopVerifier, OAuth};
use mcp_proto::auth::{ClientMetadata, OAuthConfig};
use mcp_proto::server::{AuthDecision, ProtectedResourceMetadata, RequestHead, ServerConfig};
use mcp_tests::auth_server::{AsConfig, AuthServer, browser};
use mcp_tests::runtime::{Client, ConnectError, Runtime, Serving};
use mcp_tests::users;

const LIMIT: Duration = Duration::from_secs(20);
const REDIRECT: &str = "http://127.0.0.1:1/callback";

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// The MCP server, protected: its PRM names `auth`, its authenticator asks `auth`. Counts
/// the requests it refused.
async fn protected(rt: Runtime, auth: &AuthServer) -> (Serving, String, Arc<AtomicU32>) {
    serve_protected(rt, auth, |auth, head, _url| {
        let token = head
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match token.and_then(|t| auth.subject(t)) {
            Some(client) => AuthDecision::allow(client),
            None => AuthDecision::Unauthorized {
                error: Some("invalid_token".into()),
                description: None,
                scope: Some("mcp".into()),
            },
        }
    })
    .await
}

/// The MCP server, protected by `decide(auth, head, its URL)`; counts what it refused.
async fn serve_protected(
    rt: Runtime,
    auth: &AuthServer,
    decide: impl Fn(&AuthServer, &RequestHead<'_>, &str) -> AuthDecision + Clone + Send + 'static,
) -> (Serving, String, Arc<AtomicU32>) {
    let refused = Arc::new(AtomicU32::new(0));
    // The PRM must name the server's own URL: pick a free port first (retried if taken).
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let url = format!("http://127.0.0.1:{port}/mcp");
        let verifier = auth.clone();
        let count = refused.clone();
        let decide = decide.clone();
        let own = url.clone();
        let config = ServerConfig::default()
            .with_protected_resource(ProtectedResourceMetadata::new(&url, auth.issuer()))
            .with_authenticator(move |head: &RequestHead<'_>| {
                let decision = decide(&verifier, head, &own);
                if !matches!(decision, AuthDecision::Allow { .. }) {
                    count.fetch_add(1, Ordering::SeqCst);
                }
                decision
            });
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if let Ok(s) = rt.serve_on(addr, users::server(), config).await {
            return (s, url, refused);
        }
    }
    panic!("no port for the MCP server");
}

fn oauth() -> OAuth {
    OAuth::new(OAuthConfig::authorization_code(
        ClientMetadata::new("oauth e2e"),
        REDIRECT,
    ))
    .on_authorize(|req| browser(req.url))
}

async fn connect(rt: Runtime, url: &str, oauth: OAuth) -> Result<Client, ConnectError> {
    Ok(match rt {
        Runtime::Tokio => Client::Tokio(
            mcp_tokio::Client::builder(url)
                .oauth(oauth)
                .connect()
                .await?,
        ),
        Runtime::Smol => Client::Smol(
            mcp_smol::Client::builder(url)
                .oauth(oauth)
                .connect()
                .await?,
        ),
    })
}

async fn code_flow_then_refresh_ahead_of_expiry(server_rt: Runtime, client_rt: Runtime) {
    let auth = AuthServer::start(AsConfig {
        token_lifetime: Duration::from_secs(3),
        refresh_tokens: true,
        ..AsConfig::default()
    })
    .await;
    let (serving, url, refused) = protected(server_rt, &auth).await;
    let client = bounded("connect", connect(client_rt, &url, oauth()))
        .await
        .expect("connect authorizes and initializes");
    let s = auth.stats();
    assert_eq!(s.registrations, 1);
    assert_eq!(s.authorizations, 1);
    assert_eq!(s.code_exchanges, 1);
    assert_eq!(s.refused, 0, "PKCE, redirect_uri and resource all matched");
    assert_eq!(s.last_resource.as_deref(), Some(url.as_str()));
    assert_eq!(
        refused.load(Ordering::SeqCst),
        1,
        "only the first initialize"
    );
    let tools = bounded("list_tools", client.list_tools())
        .await
        .expect("tools");
    assert!(!tools.is_empty());
    // The token lives 3 s and is renewed at half its life: a call after 4 s is not refused.
    tokio::time::sleep(Duration::from_secs(4)).await;
    bounded("list_tools after expiry", client.list_tools())
        .await
        .expect("tools with the refreshed token");
    let s = auth.stats();
    assert!(s.refreshes >= 1, "{s:?}");
    assert_eq!(s.authorizations, 1, "no second authorization");
    assert_eq!(refused.load(Ordering::SeqCst), 1, "never refused again");
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

async fn an_expired_token_without_refresh_reauthorizes(server_rt: Runtime, client_rt: Runtime) {
    let auth = AuthServer::start(AsConfig {
        token_lifetime: Duration::from_secs(1),
        refresh_tokens: false,
        ..AsConfig::default()
    })
    .await;
    let (serving, url, refused) = protected(server_rt, &auth).await;
    let client = bounded("connect", connect(client_rt, &url, oauth()))
        .await
        .expect("connect");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Refused (401), held, authorized again (the registration is reused), sent again.
    bounded("list_tools", client.list_tools())
        .await
        .expect("tools after a second authorization");
    let s = auth.stats();
    assert_eq!(s.authorizations, 2);
    assert_eq!(s.registrations, 1, "the registration is kept per issuer");
    assert_eq!(refused.load(Ordering::SeqCst), 2);
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

async fn without_a_handler_the_error_carries_the_authorization_url(
    server_rt: Runtime,
    client_rt: Runtime,
) {
    let auth = AuthServer::start(AsConfig::default()).await;
    let (serving, url, _) = protected(server_rt, &auth).await;
    let oauth = OAuth::new(OAuthConfig::authorization_code(
        ClientMetadata::new("headless"),
        REDIRECT,
    ));
    let err = bounded("connect", connect(client_rt, &url, oauth))
        .await
        .expect_err("nobody can authorize");
    let text = format!("{err}");
    assert!(
        text.contains(&format!("{}/authorize?", auth.issuer())),
        "{text}"
    );
    match err {
        ConnectError::Initialize(e) => {
            let dbg = format!("{e:?}");
            assert!(dbg.contains("AuthorizationRequired"), "{dbg}");
        }
        other => panic!("{other:?}"),
    }
    bounded("shutdown", serving.shutdown()).await;
}

/// DPoP end to end: our client (`OAuthConfig::with_dpop`, a fresh `DpopKey`) through the
/// authorization code flow against an authorization server that binds tokens to the proof's
/// key and wants a nonce, then against an MCP server that takes only DPoP-bound tokens, each
/// request with a proof of that key and the MCP server's nonce (both servers' nonces asked
/// for once and answered). The token lives 3 s: its refresh is proved with the same key.
async fn dpop_bound_tokens_end_to_end(server_rt: Runtime, client_rt: Runtime) {
    let nonces = DpopPolicy::default().with_nonces(Duration::from_secs(300));
    let auth = AuthServer::start(AsConfig {
        token_lifetime: Duration::from_secs(3),
        refresh_tokens: true,
        dpop: Some(nonces.clone()),
    })
    .await;
    let rs = Arc::new(DpopVerifier::new(nonces));
    let (serving, url, refused) = serve_protected(server_rt, &auth, move |auth, head, url| {
        let authorization = head
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let proofs: Vec<&str> = head
            .headers
            .get_all("dpop")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let now = std::time::SystemTime::now();
        let refuse = |error: Option<&str>| AuthDecision::DpopUnauthorized {
            error: error.map(str::to_owned),
            description: None,
            algs: mcp_driver::dpop_algs(),
            nonce: rs.nonce(now),
        };
        let Some(token) = authorization.and_then(|a| a.strip_prefix("DPoP ")) else {
            return refuse(authorization.map(|_| "invalid_token"));
        };
        let (Some(client), Some(jkt)) = (auth.subject(token), auth.binding(token)) else {
            return refuse(Some("invalid_token"));
        };
        let check = DpopCheck {
            proofs: &proofs,
            method: head.method.as_str(),
            url,
            access_token: token,
            jkt: &jkt,
        };
        match rs.check(now, &check) {
            Ok(()) => AuthDecision::allow(client),
            Err(r) => r.decision(),
        }
    })
    .await;
    let key = DpopKey::generate().expect("a DPoP key");
    let oauth = OAuth::new(
        OAuthConfig::authorization_code(ClientMetadata::new("dpop e2e"), REDIRECT).with_dpop(key),
    )
    .on_authorize(|req| browser(req.url));
    let client = bounded("connect", connect(client_rt, &url, oauth))
        .await
        .expect("connect with DPoP");
    let tools = bounded("list_tools", client.list_tools())
        .await
        .expect("tools");
    assert!(!tools.is_empty());
    let s = auth.stats();
    assert_eq!(s.dpop_tokens, 1, "one bound token: {s:?}");
    assert_eq!(s.dpop_refused, 1, "the AS's nonce, asked once: {s:?}");
    // The first initialize (no token), then the MCP server's nonce: refused twice, never more.
    assert_eq!(refused.load(Ordering::SeqCst), 2);
    // Past the token's life: refreshed with a proof of the same key, never refused again.
    tokio::time::sleep(Duration::from_secs(4)).await;
    bounded("list_tools after the refresh", client.list_tools())
        .await
        .expect("tools with the refreshed bound token");
    let s = auth.stats();
    assert!(s.refreshes >= 1 && s.dpop_tokens >= 2, "{s:?}");
    assert_eq!(s.authorizations, 1, "no second authorization");
    assert_eq!(refused.load(Ordering::SeqCst), 2);
    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

macro_rules! pairs {
    ($($name:ident),* $(,)?) => {
        mod tokio_client_tokio_server {
            use super::*;
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(Runtime::Tokio, Runtime::Tokio).await } )*
        }
        mod smol_client_smol_server {
            use super::*;
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(Runtime::Smol, Runtime::Smol).await } )*
        }
        mod smol_client_tokio_server {
            use super::*;
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(Runtime::Tokio, Runtime::Smol).await } )*
        }
        mod tokio_client_smol_server {
            use super::*;
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(Runtime::Smol, Runtime::Tokio).await } )*
        }
    };
}

pairs!(
    code_flow_then_refresh_ahead_of_expiry,
    an_expired_token_without_refresh_reauthorizes,
    without_a_handler_the_error_carries_the_authorization_url,
    dpop_bound_tokens_end_to_end,
);
