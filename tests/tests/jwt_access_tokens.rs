//! JWT access tokens end to end on loopback, on both server runtimes: the protected users
//! server of the `protected` example (`mcp_demo::protected`: its validator, its
//! configuration, its tools) spoken to in raw HTTP with a hyper client. Tokens are signed by
//! the demo issuer ([`DemoIssuer`], a P-256 key made per test) or forged here; every refusal
//! is checked on the wire: the status and the whole `WWW-Authenticate` challenge (the
//! metadata URL, the scope, the error). Every await is bounded.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use mcp_demo::protected::{self, DemoIssuer, JwtValidator, KeySource, TokenPolicy};
use mcp_driver::{DpopKey, DpopPolicy, DpopVerifier};
use mcp_proto::dpop::{DpopRequest, DpopSigner};
use mcp_proto::server::ServerConfig;
use mcp_tests::runtime::{DriverConfig, Runtime, Serving};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(10);
const ISSUER: &str = "https://issuer.test/tenant";
const HOUR: Duration = Duration::from_secs(3600);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// The protected server on `rt`, its resource URL naming its own port (a free port is picked
/// first, then bound: retried if someone took it in between). `validator` gets the URL.
async fn serve(rt: Runtime, validator: impl Fn(&str) -> JwtValidator) -> (Serving, String) {
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let url = format!("http://127.0.0.1:{port}/mcp");
        let (config, driver) = protected::protect(
            ServerConfig::default(),
            DriverConfig::default(),
            Arc::new(validator(&url)),
        );
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let serving = rt.serve_with(addr, protected::server(), config, driver);
        if let Ok(serving) = bounded("bind", serving).await {
            return (serving, url);
        }
    }
    panic!("no port could be bound");
}

/// The challenge every refusal must begin with: it names the metadata document.
fn metadata_url(url: &str) -> String {
    url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl Answer {
    fn challenge(&self) -> &str {
        self.headers
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("no WWW-Authenticate on a {}", self.status))
    }
}

/// One request on a fresh connection: `method` to `path`, a JSON-RPC `body` (none for GET).
async fn request(
    addr: SocketAddr,
    method: Method,
    path: &str,
    authorization: Option<&str>,
    session: Option<&str>,
    body: Option<Value>,
) -> Answer {
    request_with(addr, method, path, authorization, session, &[], body).await
}

/// [`request`] with `extra` headers (a DPoP proof).
async fn request_with(
    addr: SocketAddr,
    method: Method,
    path: &str,
    authorization: Option<&str>,
    session: Option<&str>,
    extra: &[(&str, &str)],
    body: Option<Value>,
) -> Answer {
    let tcp = bounded("connect", tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect");
    let (mut sender, conn) = bounded(
        "handshake",
        hyper::client::conn::http1::handshake(TokioIo::new(tcp)),
    )
    .await
    .expect("handshake");
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, addr.to_string())
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json")
        .header("MCP-Protocol-Version", "2025-11-25");
    if let Some(value) = authorization {
        req = req.header(header::AUTHORIZATION, value);
    }
    if let Some(id) = session {
        req = req.header("Mcp-Session-Id", id);
    }
    for (name, value) in extra {
        req = req.header(*name, *value);
    }
    let body = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
    let req = req.body(Full::new(body)).expect("request");
    let resp = bounded("response head", sender.send_request(req))
        .await
        .expect("response");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = bounded("body", resp.into_body().collect())
        .await
        .expect("body")
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    // One JSON body, or an SSE stream whose last `data:` line is the answer.
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .unwrap_or(&text)
        .trim()
        .to_owned();
    let body = serde_json::from_str(&json).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "jwt-e2e", "version": "1"}}})
}

async fn initialize_with(addr: SocketAddr, token: &str) -> Answer {
    let bearer = format!("Bearer {token}");
    request(
        addr,
        Method::POST,
        "/mcp",
        Some(&bearer),
        None,
        Some(initialize()),
    )
    .await
}

/// An unsigned token (`alg: none`) and an HS256 one keyed with the public JWKS text (the
/// classic algorithm confusion), both naming the real key id.
fn confused_tokens(demo: &DemoIssuer, claims: &Value) -> Vec<(&'static str, String)> {
    let header = B64.encode(json!({"alg": "none", "typ": "JWT", "kid": demo.kid()}).to_string());
    let payload = B64.encode(claims.to_string());
    let none = format!("{header}.{payload}.");
    let mut hs = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    hs.kid = Some(demo.kid().to_owned());
    let hmac = jsonwebtoken::encode(
        &hs,
        claims,
        &jsonwebtoken::EncodingKey::from_secret(demo.jwks().as_bytes()).expect("an HMAC key"),
    )
    .expect("HS256");
    vec![("alg none", none), ("HS256 with the public key", hmac)]
}

/// The checks, on the wire: a good token gets in (and its `sub` is the principal, bound to
/// the session); expired, foreign-audience, foreign-issuer, forged, tampered, unsigned,
/// algorithm-confused, not-yet-valid, mistyped and subject-less tokens get a 401
/// `invalid_token` challenge naming the metadata and the scope; a good token without the
/// scope gets a 403 `insufficient_scope`; no token gets a bare 401 challenge.
async fn tokens_are_checked_on_the_wire(rt: Runtime) {
    let demo = DemoIssuer::with_kid(ISSUER, "k1").expect("demo issuer");
    let (serving, url) = serve(rt, |url| {
        JwtValidator::new(TokenPolicy::new(ISSUER, url), KeySource::fixed(demo.jwks()))
    })
    .await;
    let addr = serving.local_addr();
    let prm = metadata_url(&url);

    // The metadata, served without a token: this resource, this issuer, this scope.
    let doc = request(
        addr,
        Method::GET,
        "/.well-known/oauth-protected-resource/mcp",
        None,
        None,
        None,
    )
    .await;
    assert_eq!(doc.status, StatusCode::OK);
    assert_eq!(doc.body["resource"], url.as_str());
    assert_eq!(doc.body["authorization_servers"], json!([ISSUER]));
    assert_eq!(doc.body["scopes_supported"], json!(["mcp"]));

    // No token, or another scheme: a bare challenge (RFC 6750 §3.1: no error code).
    for authorization in [None, Some("Basic YWxpY2U6cHc=")] {
        let a = request(
            addr,
            Method::POST,
            "/mcp",
            authorization,
            None,
            Some(initialize()),
        )
        .await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{authorization:?}");
        assert_eq!(
            a.challenge(),
            format!(r#"Bearer resource_metadata="{prm}", scope="mcp""#)
        );
    }

    // A good token: in, as its subject.
    let alice = demo
        .token("alice", &url, "profile mcp", HOUR)
        .expect("token");
    let ok = initialize_with(addr, &alice).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    assert!(ok.body["result"]["serverInfo"].is_object(), "{}", ok.body);
    let session = ok.headers["mcp-session-id"]
        .to_str()
        .expect("session id")
        .to_owned();
    let bearer = format!("Bearer {alice}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let a = request(
        addr,
        Method::POST,
        "/mcp",
        Some(&bearer),
        Some(&session),
        Some(initialized),
    )
    .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    let whoami = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}}});
    let a = request(
        addr,
        Method::POST,
        "/mcp",
        Some(&bearer),
        Some(&session),
        Some(whoami.clone()),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.body["result"]["content"][0]["text"], "alice",
        "{}",
        a.body
    );
    // Bob's good token on Alice's session: as if it did not exist.
    let bob = demo.token("bob", &url, "mcp", HOUR).expect("token");
    let a = request(
        addr,
        Method::POST,
        "/mcp",
        Some(&format!("Bearer {bob}")),
        Some(&session),
        Some(whoami),
    )
    .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    // Bad tokens: 401 invalid_token, saying which check failed.
    let t = now();
    let claims = |edit: &dyn Fn(&mut Value)| {
        let mut c = demo.claims("alice", &url, "mcp", HOUR);
        edit(&mut c);
        c
    };
    let sign = |c: Value| demo.sign(&c).expect("sign");
    let impostor = DemoIssuer::with_kid(ISSUER, "k1").expect("another key, the same kid");
    let stranger = DemoIssuer::with_kid(ISSUER, "k9").expect("another key, another kid");
    let tampered = {
        // Bob's scope-less token with Alice's payload: the signature is Bob's.
        let bob_narrow = demo.token("bob", &url, "profile", HOUR).expect("token");
        let (head, rest) = bob_narrow.split_once('.').unwrap();
        let (_, sig) = rest.split_once('.').unwrap();
        let alice_payload = alice.split('.').nth(1).unwrap();
        format!("{head}.{alice_payload}.{sig}")
    };
    let mut bad: Vec<(&str, String, &str)> = vec![
        (
            "expired an hour ago",
            sign(claims(&|c| {
                c["iat"] = (t - 7200).into();
                c["nbf"] = (t - 7200).into();
                c["exp"] = (t - 3600).into();
            })),
            "the token has expired",
        ),
        (
            "another audience",
            sign(claims(&|c| c["aud"] = "http://127.0.0.1:1/mcp".into())),
            "the token is for another resource",
        ),
        (
            "another issuer",
            sign(claims(&|c| c["iss"] = "https://evil.test".into())),
            "the token is from another issuer",
        ),
        (
            "signed by another key under the same kid",
            impostor
                .token("alice", &url, "mcp", HOUR)
                .expect("impostor token"),
            "the token's signature does not verify",
        ),
        (
            "a payload swapped under a signature",
            tampered,
            "the token's signature does not verify",
        ),
        (
            "a key the set does not hold",
            stranger
                .token("alice", &url, "mcp", HOUR)
                .expect("stranger token"),
            "the token's key is unknown",
        ),
        (
            "not valid for an hour",
            sign(claims(&|c| c["nbf"] = (t + 3600).into())),
            "the token is not valid yet",
        ),
        (
            // CVE-2026-25537: a string `exp` must not skip the expiry check (it counts as
            // missing, and `exp` is required).
            "a string exp",
            sign(claims(&|c| c["exp"] = "99999999999".into())),
            "the token lacks a required claim",
        ),
        (
            "a string nbf far ahead",
            sign(claims(&|c| c["nbf"] = "99999999999".into())),
            "the token has a malformed claim",
        ),
        (
            "no exp",
            sign(claims(&|c| {
                c.as_object_mut().unwrap().remove("exp");
            })),
            "the token lacks a required claim",
        ),
        (
            "no sub",
            sign(claims(&|c| {
                c.as_object_mut().unwrap().remove("sub");
            })),
            "the token lacks a required claim",
        ),
        (
            "not a JWT",
            "not-a-jwt".to_owned(),
            "the token is malformed",
        ),
    ];
    let good_claims = claims(&|_| {});
    for (what, token) in confused_tokens(&demo, &good_claims) {
        let why = if what == "alg none" {
            "the token is malformed"
        } else {
            "the token's algorithm is not its key's"
        };
        bad.push((what, token, why));
    }
    for (what, token, why) in &bad {
        let a = initialize_with(addr, token).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{what}: {}", a.body);
        assert_eq!(
            a.challenge(),
            format!(
                r#"Bearer resource_metadata="{prm}", scope="mcp", error="invalid_token", error_description="{why}""#
            ),
            "{what}"
        );
    }

    // A good token without the scope: 403 insufficient_scope, naming the scope needed.
    let narrow = demo.token("carol", &url, "profile", HOUR).expect("token");
    let a = initialize_with(addr, &narrow).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(
        a.challenge(),
        format!(
            r#"Bearer resource_metadata="{prm}", scope="mcp", error="insufficient_scope", error_description="the token does not grant \"mcp\"""#
        )
    );
    // `mcp` must be a whole scope, not a prefix.
    let lookalike = demo.token("carol", &url, "mcp:read", HOUR).expect("token");
    assert_eq!(
        initialize_with(addr, &lookalike).await.status,
        StatusCode::FORBIDDEN
    );
    bounded("shutdown", serving.shutdown()).await;
}

/// A key source that counts its reads and answers what the test sets.
/// DPoP-bound tokens on the wire (nonces on, DPoP required): a token bound to the client's
/// key gets in only as `DPoP` with a fresh proof of that key for this request and the
/// server's nonce; every other presentation is a 401 `DPoP` challenge naming the metadata,
/// the error and the algorithms (with a `DPoP-Nonce` where a nonce is due).
async fn dpop_tokens_are_checked_on_the_wire(rt: Runtime) {
    let demo = DemoIssuer::with_kid(ISSUER, "k1").expect("demo issuer");
    let verifier = Arc::new(DpopVerifier::new(
        DpopPolicy::default().with_nonces(Duration::from_secs(300)),
    ));
    let (serving, url) = serve(rt, |url| {
        JwtValidator::new(TokenPolicy::new(ISSUER, url), KeySource::fixed(demo.jwks()))
            .with_dpop(verifier.clone(), true)
    })
    .await;
    let addr = serving.local_addr();
    let prm = metadata_url(&url);
    let algs = mcp_driver::dpop_algs();
    let key = DpopKey::generate().expect("a DPoP key");
    let bound = |claims: Value, key: &DpopKey| {
        demo.sign(&DemoIssuer::bind(claims, &key.thumbprint()))
            .expect("token")
    };
    let token = bound(demo.claims("alice", &url, "mcp", HOUR), &key);
    let proof = |key: &DpopKey, method: &str, url: &str, token: &str, nonce: Option<&str>| {
        key.proof(&DpopRequest {
            method,
            url,
            access_token: Some(token),
            nonce,
        })
        .expect("a proof")
    };
    let dpop = format!("DPoP {token}");
    let send = |authorization: String, proofs: Vec<String>| async move {
        let extra: Vec<(&str, &str)> = proofs.iter().map(|p| ("dpop", p.as_str())).collect();
        request_with(
            addr,
            Method::POST,
            "/mcp",
            Some(&authorization),
            None,
            &extra,
            Some(initialize()),
        )
        .await
    };

    // No token: a DPoP challenge with the algorithms and a nonce to use.
    let a = request(addr, Method::POST, "/mcp", None, None, Some(initialize())).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        a.challenge(),
        format!(r#"DPoP resource_metadata="{prm}", algs="{algs}""#)
    );
    assert!(a.headers.contains_key("dpop-nonce"));

    // A good proof without the nonce: use_dpop_nonce, and the nonce.
    let a = send(dpop.clone(), vec![proof(&key, "POST", &url, &token, None)]).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(
        a.challenge().starts_with(&format!(
            r#"DPoP resource_metadata="{prm}", error="use_dpop_nonce""#
        )),
        "{}",
        a.challenge()
    );
    let nonce = a.headers["dpop-nonce"]
        .to_str()
        .expect("a nonce")
        .to_owned();

    // With it: in, as the token's subject.
    let good = proof(&key, "POST", &url, &token, Some(&nonce));
    let ok = send(dpop.clone(), vec![good.clone()]).await;
    assert_eq!(ok.status, StatusCode::OK, "{} {:?}", ok.body, ok.headers);
    assert!(ok.body["result"]["serverInfo"].is_object(), "{}", ok.body);

    // Each of these is refused: (what, authorization, proofs, error).
    let other = DpopKey::generate().expect("another key");
    let plain = demo
        .token("alice", &url, "mcp", HOUR)
        .expect("an unbound token");
    let n = Some(nonce.as_str());
    let cases: Vec<(&str, String, Vec<String>, &str)> = vec![
        (
            "the same proof again",
            dpop.clone(),
            vec![good],
            "invalid_dpop_proof",
        ),
        ("no proof", dpop.clone(), vec![], "invalid_dpop_proof"),
        (
            "two proofs",
            dpop.clone(),
            vec![
                proof(&key, "POST", &url, &token, n),
                proof(&key, "POST", &url, &token, n),
            ],
            "invalid_dpop_proof",
        ),
        (
            "another method",
            dpop.clone(),
            vec![proof(&key, "GET", &url, &token, n)],
            "invalid_dpop_proof",
        ),
        (
            "another URL",
            dpop.clone(),
            vec![proof(&key, "POST", "http://127.0.0.1:1/mcp", &token, n)],
            "invalid_dpop_proof",
        ),
        (
            "another token's hash",
            dpop.clone(),
            vec![proof(&key, "POST", &url, &plain, n)],
            "invalid_dpop_proof",
        ),
        (
            "another key",
            dpop.clone(),
            vec![proof(&other, "POST", &url, &token, n)],
            "invalid_token",
        ),
        (
            "a bound token as a bearer token",
            format!("Bearer {token}"),
            vec![proof(&key, "POST", &url, &token, n)],
            "invalid_token",
        ),
        (
            "an unbound token, DPoP required",
            format!("Bearer {plain}"),
            vec![],
            "invalid_token",
        ),
        (
            "an unbound token as DPoP",
            format!("DPoP {plain}"),
            vec![proof(&key, "POST", &url, &plain, n)],
            "invalid_token",
        ),
    ];
    for (what, authorization, proofs, error) in cases {
        let a = send(authorization, proofs).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{what}: {}", a.body);
        let c = a.challenge().to_owned();
        assert!(
            c.starts_with(&format!(
                r#"DPoP resource_metadata="{prm}", error="{error}""#
            )) && c.ends_with(&format!(r#"algs="{algs}""#)),
            "{what}: {c}"
        );
    }
    // An expired bound token is refused as any expired token is.
    let mut old = DemoIssuer::bind(demo.claims("alice", &url, "mcp", HOUR), &key.thumbprint());
    old["exp"] = json!(now() - 3600);
    let old = demo.sign(&old).expect("token");
    let a = send(
        format!("DPoP {old}"),
        vec![proof(&key, "POST", &url, &old, n)],
    )
    .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(
        a.challenge().contains(r#"error="invalid_token""#),
        "{}",
        a.challenge()
    );
    bounded("shutdown", serving.shutdown()).await;
}

#[derive(Clone)]
struct Keys {
    doc: Arc<Mutex<Result<String, String>>>,
    reads: Arc<AtomicUsize>,
}

impl Keys {
    fn new(jwks: &str) -> Keys {
        Keys {
            doc: Arc::new(Mutex::new(Ok(jwks.to_owned()))),
            reads: Arc::default(),
        }
    }

    fn set(&self, doc: Result<String, String>) {
        *self.doc.lock().unwrap() = doc;
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }

    fn source(&self) -> KeySource {
        let keys = self.clone();
        KeySource::new(move || {
            keys.reads.fetch_add(1, Ordering::SeqCst);
            let doc = keys.doc.lock().unwrap().clone();
            async move { doc }
        })
    }
}

/// Two JWK sets in one document.
fn both(a: &DemoIssuer, b: &DemoIssuer) -> String {
    let a: Value = serde_json::from_str(a.jwks()).unwrap();
    let b: Value = serde_json::from_str(b.jwks()).unwrap();
    json!({"keys": [a["keys"][0], b["keys"][0]]}).to_string()
}

/// The key set is read on first use and again for a key it does not hold (a rotation), at
/// most once per interval; a key set that cannot be read is a 503 (not a 401: the token may
/// be fine), while tokens of keys already held keep working.
async fn the_key_set_follows_rotation_and_its_outage_is_a_503(rt: Runtime) {
    let old = DemoIssuer::with_kid(ISSUER, "old").expect("key");
    let new = DemoIssuer::with_kid(ISSUER, "new").expect("key");
    let keys = Keys::new(old.jwks());
    let (serving, url) = serve(rt, |url| {
        JwtValidator::new(TokenPolicy::new(ISSUER, url), keys.source())
            .refetch_interval(Duration::ZERO)
    })
    .await;
    let addr = serving.local_addr();
    let old_token = old.token("alice", &url, "mcp", HOUR).expect("token");
    let new_token = new.token("alice", &url, "mcp", HOUR).expect("token");
    assert_eq!(keys.reads(), 0, "read on first use");
    assert_eq!(
        initialize_with(addr, &old_token).await.status,
        StatusCode::OK
    );
    assert_eq!(
        initialize_with(addr, &old_token).await.status,
        StatusCode::OK
    );
    assert_eq!(keys.reads(), 1, "cached");
    // The authorization server rotates: a token of the new key makes the set be read again.
    keys.set(Ok(both(&old, &new)));
    assert_eq!(
        initialize_with(addr, &new_token).await.status,
        StatusCode::OK
    );
    assert_eq!(keys.reads(), 2);
    // The key server goes down: a token of an unknown key cannot be judged (503) ...
    keys.set(Err("connection refused".to_owned()));
    let other = DemoIssuer::with_kid(ISSUER, "other").expect("key");
    let a = initialize_with(addr, &other.token("alice", &url, "mcp", HOUR).unwrap()).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.body);
    let message = a.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("authentication is unavailable") && message.contains("cannot be read"),
        "{}",
        a.body
    );
    assert!(
        !message.contains("connection refused"),
        "not told: {message}"
    );
    assert!(a.headers.get(header::WWW_AUTHENTICATE).is_none());
    // ... while the keys already held keep verifying without a read.
    let reads = keys.reads();
    assert_eq!(
        initialize_with(addr, &new_token).await.status,
        StatusCode::OK
    );
    assert_eq!(keys.reads(), reads);
    bounded("shutdown", serving.shutdown()).await;

    // With the default interval, made-up key ids cost the key server nothing.
    let keys = Keys::new(old.jwks());
    let (serving, url) = serve(rt, |url| {
        JwtValidator::new(TokenPolicy::new(ISSUER, url), keys.source())
    })
    .await;
    let addr = serving.local_addr();
    let old_token = old.token("alice", &url, "mcp", HOUR).expect("token");
    assert_eq!(
        initialize_with(addr, &old_token).await.status,
        StatusCode::OK
    );
    for kid in ["x1", "x2", "x3"] {
        let liar = DemoIssuer::with_kid(ISSUER, kid).expect("key");
        let a = initialize_with(addr, &liar.token("alice", &url, "mcp", HOUR).unwrap()).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{kid}");
    }
    assert_eq!(keys.reads(), 1, "no read for each unknown key id");
    bounded("shutdown", serving.shutdown()).await;
}

/// Instantiates every scenario for each server runtime.
macro_rules! on_every_runtime {
    ($($name:ident),* $(,)?) => {
        mod tokio_server {
            use mcp_tests::runtime::Runtime;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(Runtime::Tokio).await
                }
            )*
        }
        mod smol_server {
            use mcp_tests::runtime::Runtime;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(Runtime::Smol).await
                }
            )*
        }
    };
}

on_every_runtime![
    tokens_are_checked_on_the_wire,
    the_key_set_follows_rotation_and_its_outage_is_a_503,
    dpop_tokens_are_checked_on_the_wire,
];
