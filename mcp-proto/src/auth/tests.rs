//! The authorization machine on a virtual clock: responses are fed by hand, intents checked
//! (URLs, headers, form and JSON bodies), and every refusal the specifications require is
//! exercised.

use std::time::{Duration, Instant};

use base64::Engine as _;
use http::{HeaderMap, HeaderValue, StatusCode};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const MCP: &str = "https://mcp.example.com/mcp";
const AS: &str = "https://auth.example.com";
const REDIRECT: &str = "http://127.0.0.1:7777/callback";

/// A counter as entropy: deterministic, distinct bytes per call.
fn counter() -> impl Entropy {
    let mut n = 0u8;
    move |b: &mut [u8]| {
        for x in b.iter_mut() {
            n = n.wrapping_add(1);
            *x = n;
        }
        true
    }
}

struct H {
    c: OAuthClient,
    now: Instant,
}

impl H {
    fn new(config: OAuthConfig) -> H {
        H {
            c: OAuthClient::new(config, MCP, counter()).expect("config"),
            now: Instant::now(),
        }
    }

    fn code() -> H {
        H::new(OAuthConfig::authorization_code(
            ClientMetadata::new("test client"),
            REDIRECT,
        ))
    }

    fn drain(&mut self) -> Vec<AuthOutput> {
        std::iter::from_fn(|| self.c.poll_output()).collect()
    }

    /// The next HTTP intent (aborts before it are skipped); panics on anything else.
    fn http(&mut self) -> AuthHttpRequest {
        loop {
            match self.c.poll_output() {
                Some(AuthOutput::Http(r)) => return r,
                Some(AuthOutput::Abort(_)) => continue,
                other => panic!("expected an HTTP intent, got {other:?}"),
            }
        }
    }

    fn respond_with(&mut self, id: AuthRequestId, status: u16, headers: HeaderMap, body: &[u8]) {
        let status = StatusCode::from_u16(status).unwrap();
        self.c.handle_input(
            self.now,
            AuthInput::Head {
                id,
                status,
                headers: &headers,
            },
        );
        self.c.handle_input(
            self.now,
            AuthInput::Body {
                id,
                chunk: Bytes::copy_from_slice(body),
            },
        );
        self.c.handle_input(self.now, AuthInput::End { id });
    }

    fn respond(&mut self, id: AuthRequestId, status: u16, body: &Value) {
        self.respond_with(id, status, HeaderMap::new(), body.to_string().as_bytes());
    }

    fn challenge(&mut self, status: u16, ch: BearerChallenge) {
        self.c
            .handle_challenge(self.now, StatusCode::from_u16(status).unwrap(), &ch);
    }

    /// 401 → PRM → AS metadata (`asm`): answers the first two fetches.
    fn discover(&mut self, asm: Value) {
        self.challenge(401, challenge_with_prm());
        let prm = self.http();
        self.respond(prm.id, 200, &prm_doc(AS));
        let md = self.http();
        assert_eq!(
            md.url.to_string(),
            "https://auth.example.com/.well-known/oauth-authorization-server"
        );
        self.respond(md.id, 200, &asm);
    }

    /// Answers a registration with a public client id.
    fn register(&mut self) -> AuthHttpRequest {
        let reg = self.http();
        assert_eq!(reg.document, Document::Registration);
        self.respond(reg.id, 201, &json!({"client_id": "dyn-client"}));
        reg
    }

    fn authorize(&mut self) -> AuthorizationRequest {
        match self.c.poll_output() {
            Some(AuthOutput::Authorize(a)) => a,
            other => panic!("expected Authorize, got {other:?}"),
        }
    }

    /// Runs the whole code flow with DCR; returns the token request.
    fn full_flow(&mut self, token: Value) -> AuthHttpRequest {
        self.discover(as_doc(AS));
        self.register();
        let a = self.authorize();
        let redirect = format!("{REDIRECT}?code=the-code&state={}&iss={}", a.state, enc(AS));
        self.c.handle_redirect(self.now, &redirect);
        let tok = self.http();
        self.respond(tok.id, 200, &token);
        assert_eq!(self.drain(), [AuthOutput::Authorized]);
        tok
    }
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn challenge_with_prm() -> BearerChallenge {
    BearerChallenge {
        resource_metadata: Some(
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp".into(),
        ),
        ..BearerChallenge::default()
    }
}

fn prm_doc(issuer: &str) -> Value {
    json!({"resource": MCP, "authorization_servers": [issuer]})
}

fn as_doc(issuer: &str) -> Value {
    json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "registration_endpoint": format!("{issuer}/register"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "authorization_response_iss_parameter_supported": true,
    })
}

fn form(r: &AuthHttpRequest) -> Vec<(String, String)> {
    url::form_urlencoded::parse(&r.body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn param(pairs: &[(String, String)], k: &str) -> Option<String> {
    pairs.iter().find(|(p, _)| p == k).map(|(_, v)| v.clone())
}

fn query(url: &str) -> Vec<(String, String)> {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn failed(outs: &[AuthOutput]) -> &AuthError {
    outs.iter()
        .find_map(|o| match o {
            AuthOutput::Failed(e) => Some(e),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no failure in {outs:?}"))
}

fn token_doc(access: &str, refresh: Option<&str>, expires_in: u64) -> Value {
    let mut t = json!({"access_token": access, "token_type": "Bearer", "expires_in": expires_in});
    if let Some(r) = refresh {
        t["refresh_token"] = r.into();
    }
    t
}

#[test]
fn the_code_flow_end_to_end_with_dynamic_registration_pkce_state_and_resource() {
    let mut h = H::code();
    assert!(h.c.authorization().is_none());
    h.challenge(
        401,
        BearerChallenge {
            scope: Some("files:read".into()),
            ..challenge_with_prm()
        },
    );
    // The challenge's resource_metadata URL first.
    let prm = h.http();
    assert_eq!(prm.method, Method::GET);
    assert_eq!(
        prm.url.to_string(),
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    );
    assert_eq!(prm.headers[ACCEPT], "application/json");
    h.respond(prm.id, 200, &prm_doc(AS));
    let md = h.http();
    h.respond(md.id, 200, &as_doc(AS));
    // Dynamic registration: a public native client asking for refresh tokens.
    let reg = h.http();
    assert_eq!(reg.method, Method::POST);
    assert_eq!(reg.url.to_string(), "https://auth.example.com/register");
    assert_eq!(reg.headers[CONTENT_TYPE], "application/json");
    let body: Value = serde_json::from_slice(&reg.body).unwrap();
    assert_eq!(body["client_name"], "test client");
    assert_eq!(body["redirect_uris"], json!([REDIRECT]));
    assert_eq!(
        body["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    assert_eq!(body["response_types"], json!(["code"]));
    assert_eq!(body["token_endpoint_auth_method"], "none");
    assert_eq!(body["application_type"], "native");
    h.respond(reg.id, 201, &json!({"client_id": "dyn-client"}));
    // The authorization URL.
    let a = h.authorize();
    assert!(a.url.starts_with("https://auth.example.com/authorize?"));
    let q = query(&a.url);
    assert_eq!(param(&q, "response_type").as_deref(), Some("code"));
    assert_eq!(param(&q, "client_id").as_deref(), Some("dyn-client"));
    assert_eq!(param(&q, "redirect_uri").as_deref(), Some(REDIRECT));
    assert_eq!(param(&q, "code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(param(&q, "state"), Some(a.state.clone()));
    assert_eq!(param(&q, "scope").as_deref(), Some("files:read"));
    assert_eq!(param(&q, "resource").as_deref(), Some(MCP));
    let challenge = param(&q, "code_challenge").unwrap();
    assert!(h.c.is_busy());
    // The redirect, then the token request.
    h.c.handle_redirect(
        h.now,
        &format!("{REDIRECT}?code=abc&state={}&iss={}", a.state, enc(AS)),
    );
    let tok = h.http();
    assert_eq!(tok.method, Method::POST);
    assert_eq!(tok.url.to_string(), "https://auth.example.com/token");
    assert_eq!(
        tok.headers[CONTENT_TYPE],
        "application/x-www-form-urlencoded"
    );
    let f = form(&tok);
    assert_eq!(
        param(&f, "grant_type").as_deref(),
        Some("authorization_code")
    );
    assert_eq!(param(&f, "code").as_deref(), Some("abc"));
    assert_eq!(param(&f, "redirect_uri").as_deref(), Some(REDIRECT));
    assert_eq!(param(&f, "resource").as_deref(), Some(MCP));
    assert_eq!(param(&f, "client_id").as_deref(), Some("dyn-client"));
    assert!(tok.headers.get(AUTHORIZATION).is_none(), "a public client");
    // PKCE: the challenge is BASE64URL(SHA256(verifier)), the verifier 43..128 unreserved.
    let verifier = param(&f, "code_verifier").unwrap();
    assert!((43..=128).contains(&verifier.len()));
    let digest = <sha2::Sha256 as sha2::Digest>::digest(verifier.as_bytes());
    assert_eq!(
        challenge,
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    );
    h.respond(tok.id, 200, &token_doc("tok-1", Some("ref-1"), 3600));
    assert_eq!(h.drain(), [AuthOutput::Authorized]);
    assert_eq!(h.c.authorization().unwrap(), "Bearer tok-1");
    assert_eq!(h.c.issuer(), Some(AS));
    assert!(!h.c.is_busy());
}

#[test]
fn resource_metadata_falls_back_path_suffixed_then_root_and_server_metadata_in_order() {
    let mut h = H::code();
    h.challenge(401, BearerChallenge::default());
    let a = h.http();
    assert_eq!(
        a.url.to_string(),
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    );
    h.respond(a.id, 404, &json!({}));
    let b = h.http();
    assert_eq!(
        b.url.to_string(),
        "https://mcp.example.com/.well-known/oauth-protected-resource"
    );
    h.respond(
        b.id,
        200,
        &json!({"resource": "https://mcp.example.com", "authorization_servers": ["https://auth.example.com/tenant1"]}),
    );
    let mut urls = Vec::new();
    for _ in 0..2 {
        let r = h.http();
        urls.push(r.url.to_string());
        h.respond(r.id, 404, &json!({}));
    }
    let r = h.http();
    urls.push(r.url.to_string());
    assert_eq!(
        urls,
        [
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
            "https://auth.example.com/.well-known/openid-configuration/tenant1",
            "https://auth.example.com/tenant1/.well-known/openid-configuration",
        ]
    );
    h.respond(r.id, 404, &json!({}));
    assert!(matches!(
        failed(&h.drain()),
        AuthError::NoServerMetadata { issuer, tried } if issuer == "https://auth.example.com/tenant1" && tried.len() == 3
    ));
}

#[test]
fn without_any_resource_metadata_the_origin_is_the_issuer_unless_legacy_discovery_is_off() {
    let mut h = H::code();
    h.challenge(401, BearerChallenge::default());
    for _ in 0..2 {
        let r = h.http();
        h.respond(r.id, 404, &json!({}));
    }
    let md = h.http();
    assert_eq!(
        md.url.to_string(),
        "https://mcp.example.com/.well-known/oauth-authorization-server"
    );

    let mut off = H::new(
        OAuthConfig::authorization_code(ClientMetadata::new("c"), REDIRECT)
            .with_legacy_discovery(false),
    );
    off.challenge(401, BearerChallenge::default());
    for _ in 0..2 {
        let r = off.http();
        off.respond(r.id, 404, &json!({}));
    }
    assert!(matches!(
        failed(&off.drain()),
        AuthError::NoResourceMetadata { tried } if tried.len() == 2
    ));
}

#[test]
fn without_any_metadata_the_origins_default_endpoints_are_used_in_legacy_discovery_only() {
    let mut h = H::code();
    h.challenge(401, BearerChallenge::default());
    for _ in 0..4 {
        let r = h.http();
        assert_eq!(r.method, Method::GET);
        h.respond(r.id, 404, &json!({}));
    }
    let reg = h.http();
    assert_eq!(reg.document, Document::Registration);
    assert_eq!(reg.url.to_string(), "https://mcp.example.com/register");
    h.respond(reg.id, 201, &json!({"client_id": "dyn-client"}));
    let a = h.authorize();
    assert!(
        a.url.starts_with("https://mcp.example.com/authorize?"),
        "{}",
        a.url
    );
    let q = query(&a.url);
    assert_eq!(param(&q, "code_challenge_method").as_deref(), Some("S256"));
    let redirect = format!("{REDIRECT}?code=the-code&state={}", a.state);
    h.c.handle_redirect(h.now, &redirect);
    let tok = h.http();
    assert_eq!(tok.url.to_string(), "https://mcp.example.com/token");
    h.respond(tok.id, 200, &token_doc("at", None, 3600));
    assert_eq!(h.drain(), [AuthOutput::Authorized]);

    // With protected resource metadata, an authorization server without metadata is an
    // error: the default endpoints belong to the 2025-03-26 discovery alone.
    let mut h = H::code();
    h.challenge(401, challenge_with_prm());
    let prm = h.http();
    h.respond(prm.id, 200, &prm_doc(AS));
    for _ in 0..2 {
        let r = h.http();
        h.respond(r.id, 404, &json!({}));
    }
    assert!(matches!(
        failed(&h.drain()),
        AuthError::NoServerMetadata { tried, .. } if tried.len() == 2
    ));
}

fn to_authorize(h: &mut H, asm: Value) -> AuthorizationRequest {
    h.discover(asm);
    h.register();
    h.authorize()
}

#[test]
fn a_state_mismatch_is_refused_and_no_token_request_is_made() {
    for redirect in [
        format!("{REDIRECT}?code=abc&state=forged&iss={}", enc(AS)),
        format!("{REDIRECT}?code=abc&iss={}", enc(AS)),
    ] {
        let mut h = H::code();
        to_authorize(&mut h, as_doc(AS));
        h.c.handle_redirect(h.now, &redirect);
        let outs = h.drain();
        assert_eq!(failed(&outs), &AuthError::StateMismatch);
        assert!(!outs.iter().any(|o| matches!(o, AuthOutput::Http(_))));
    }
}

#[test]
fn iss_is_checked_as_rfc_9207_and_the_2026_table_say() {
    // (advertised, iss in the redirect, accepted)
    let wrong = enc("https://evil.example.com");
    let normalized = enc("https://auth.example.com/");
    let right = enc(AS);
    let cases: [(bool, Option<&str>, bool); 6] = [
        (true, Some(&right), true),
        (true, None, false),
        (true, Some(&wrong), false),
        (true, Some(&normalized), false),
        (false, Some(&wrong), false),
        (false, None, true),
    ];
    for (advertised, iss, ok) in cases {
        let mut h = H::code();
        let mut asm = as_doc(AS);
        asm["authorization_response_iss_parameter_supported"] = advertised.into();
        let a = to_authorize(&mut h, asm);
        let mut redirect = format!("{REDIRECT}?code=abc&state={}", a.state);
        if let Some(i) = iss {
            redirect.push_str(&format!("&iss={i}"));
        }
        h.c.handle_redirect(h.now, &redirect);
        let outs = h.drain();
        let token_requested = outs.iter().any(|o| matches!(o, AuthOutput::Http(_)));
        assert_eq!(
            token_requested, ok,
            "advertised {advertised}, iss {iss:?}: {outs:?}"
        );
        if !ok {
            assert!(matches!(failed(&outs), AuthError::IssMismatch { .. }));
        }
    }
}

#[test]
fn an_error_redirect_is_believed_only_after_iss_and_state() {
    let mut h = H::code();
    let a = to_authorize(&mut h, as_doc(AS));
    h.c.handle_redirect(
        h.now,
        &format!(
            "{REDIRECT}?error=access_denied&error_description=no&state={}&iss={}",
            a.state,
            enc(AS)
        ),
    );
    assert!(matches!(
        failed(&h.drain()),
        AuthError::Denied(b) if b.error.as_deref() == Some("access_denied") && b.error_description.as_deref() == Some("no")
    ));
    let mut h = H::code();
    to_authorize(&mut h, as_doc(AS));
    h.c.handle_redirect(
        h.now,
        &format!("{REDIRECT}?error=access_denied&state=x&iss=https://evil"),
    );
    assert!(matches!(failed(&h.drain()), AuthError::IssMismatch { .. }));
}

#[test]
fn a_redirect_to_another_uri_or_with_repeated_parameters_is_refused() {
    let mut h = H::code();
    let a = to_authorize(&mut h, as_doc(AS));
    h.c.handle_redirect(
        h.now,
        &format!(
            "http://127.0.0.1:7778/callback?code=abc&state={}&iss={}",
            a.state,
            enc(AS)
        ),
    );
    assert!(matches!(failed(&h.drain()), AuthError::InvalidRedirect(_)));
    let mut h = H::code();
    let a = to_authorize(&mut h, as_doc(AS));
    h.c.handle_redirect(
        h.now,
        &format!(
            "{REDIRECT}?code=abc&code=def&state={}&iss={}",
            a.state,
            enc(AS)
        ),
    );
    assert!(matches!(failed(&h.drain()), AuthError::InvalidRedirect(_)));
}

#[test]
fn a_server_without_s256_is_refused() {
    for methods in [None, Some(json!(["plain"]))] {
        let mut h = H::code();
        let mut asm = as_doc(AS);
        match methods {
            None => {
                asm.as_object_mut()
                    .unwrap()
                    .remove("code_challenge_methods_supported");
            }
            Some(m) => asm["code_challenge_methods_supported"] = m,
        }
        h.discover(asm);
        let outs = h.drain();
        assert_eq!(failed(&outs), &AuthError::PkceUnsupported);
        assert!(
            !outs
                .iter()
                .any(|o| matches!(o, AuthOutput::Http(_) | AuthOutput::Authorize(_)))
        );
    }
}

#[test]
fn metadata_naming_another_issuer_is_not_used() {
    let mut h = H::code();
    h.discover(as_doc("https://honest.example"));
    let outs = h.drain();
    assert!(matches!(
        failed(&outs),
        AuthError::IssuerMismatch { expected, found } if expected == AS && found == "https://honest.example"
    ));
    assert!(!outs.iter().any(|o| matches!(o, AuthOutput::Http(_))));
}

#[test]
fn resource_metadata_for_another_resource_is_refused() {
    let mut h = H::code();
    h.challenge(401, challenge_with_prm());
    let prm = h.http();
    h.respond(
        prm.id,
        200,
        &json!({"resource": "https://other.example.com/mcp", "authorization_servers": [AS]}),
    );
    assert!(matches!(
        failed(&h.drain()),
        AuthError::ResourceMismatch { .. }
    ));
}

#[test]
fn authorization_servers_outside_https_are_refused_loopback_aside() {
    let mut h = H::code();
    h.challenge(401, challenge_with_prm());
    let prm = h.http();
    h.respond(prm.id, 200, &prm_doc("http://auth.example.com"));
    assert!(matches!(failed(&h.drain()), AuthError::InsecureUrl { .. }));
    // A token endpoint over plain http is refused too.
    let mut h = H::code();
    let mut asm = as_doc(AS);
    asm["token_endpoint"] = "http://auth.example.com/token".into();
    h.discover(asm);
    assert!(matches!(failed(&h.drain()), AuthError::InsecureUrl { .. }));
}

#[test]
fn malformed_documents_are_typed_errors() {
    // A token response that is not JSON.
    let mut h = H::code();
    let a = to_authorize(&mut h, as_doc(AS));
    h.c.handle_redirect(
        h.now,
        &format!("{REDIRECT}?code=c&state={}&iss={}", a.state, enc(AS)),
    );
    let tok = h.http();
    h.respond_with(tok.id, 200, HeaderMap::new(), b"<html>not json");
    assert!(matches!(
        failed(&h.drain()),
        AuthError::Malformed {
            document: Document::Token,
            ..
        }
    ));
    // A registration response without client_id.
    let mut h = H::code();
    h.discover(as_doc(AS));
    let reg = h.http();
    h.respond(reg.id, 201, &json!({"client_secret": "s"}));
    assert!(matches!(
        failed(&h.drain()),
        AuthError::Malformed {
            document: Document::Registration,
            ..
        }
    ));
    // An error response keeps the server's error and description.
    let mut h = H::code();
    h.discover(as_doc(AS));
    let reg = h.http();
    h.respond(
        reg.id,
        400,
        &json!({"error": "invalid_client_metadata", "error_description": "bad redirect"}),
    );
    assert!(matches!(
        failed(&h.drain()),
        AuthError::Rejected { document: Document::Registration, status, body }
            if status.as_u16() == 400
                && body.error.as_deref() == Some("invalid_client_metadata")
                && body.error_description.as_deref() == Some("bad redirect")
    ));
}

#[test]
fn the_token_is_refreshed_before_expiry_on_the_virtual_clock() {
    let mut h = H::code();
    h.full_flow(token_doc("tok-1", Some("ref-1"), 3600));
    let due = h.c.poll_timeout().expect("a refresh is scheduled");
    assert_eq!(due, h.now + Duration::from_secs(3600 - 60));
    // Early: nothing.
    h.now += Duration::from_secs(3000);
    h.c.handle_timeout(h.now);
    assert!(h.drain().is_empty());
    h.now = due;
    h.c.handle_timeout(h.now);
    let r = h.http();
    let f = form(&r);
    assert_eq!(param(&f, "grant_type").as_deref(), Some("refresh_token"));
    assert_eq!(param(&f, "refresh_token").as_deref(), Some("ref-1"));
    assert_eq!(param(&f, "resource").as_deref(), Some(MCP));
    assert_eq!(param(&f, "client_id").as_deref(), Some("dyn-client"));
    // The old token is still sent while the refresh runs.
    assert_eq!(h.c.authorization().unwrap(), "Bearer tok-1");
    h.respond(r.id, 200, &token_doc("tok-2", None, 100));
    assert_eq!(h.drain(), [AuthOutput::Authorized]);
    assert_eq!(h.c.authorization().unwrap(), "Bearer tok-2");
    // The refresh token stays (none was issued), the next refresh is at half of 100 s.
    assert_eq!(h.c.poll_timeout(), Some(h.now + Duration::from_secs(50)));
}

#[test]
fn a_401_refreshes_once_then_runs_the_full_flow_which_rediscovers() {
    let mut h = H::code();
    h.full_flow(token_doc("tok-1", Some("ref-1"), 3600));
    h.challenge(401, challenge_with_prm());
    let r = h.http();
    assert_eq!(
        param(&form(&r), "grant_type").as_deref(),
        Some("refresh_token")
    );
    h.respond(r.id, 200, &token_doc("tok-2", Some("ref-2"), 3600));
    assert_eq!(h.drain(), [AuthOutput::Authorized]);
    // Refused again before any success: re-discover.
    h.challenge(401, challenge_with_prm());
    let prm = h.http();
    assert_eq!(prm.document, Document::ResourceMetadata);
    // After a success, a 401 may refresh again.
    let mut h = H::code();
    h.full_flow(token_doc("tok-1", Some("ref-1"), 3600));
    h.challenge(401, challenge_with_prm());
    let r = h.http();
    h.respond(r.id, 200, &token_doc("tok-2", Some("ref-2"), 3600));
    h.drain();
    h.c.handle_accepted();
    h.challenge(401, challenge_with_prm());
    assert_eq!(
        param(&form(&h.http()), "grant_type").as_deref(),
        Some("refresh_token")
    );
}

#[test]
fn a_failed_refresh_after_a_challenge_falls_back_to_authorizing() {
    let mut h = H::code();
    h.full_flow(token_doc("tok-1", Some("ref-1"), 3600));
    h.challenge(401, challenge_with_prm());
    let r = h.http();
    h.respond(r.id, 400, &json!({"error": "invalid_grant"}));
    // Metadata and registration are known: straight to the authorization URL.
    assert!(matches!(h.c.poll_output(), Some(AuthOutput::Authorize(_))));
}

#[test]
fn step_up_asks_for_the_union_of_scopes_and_never_refreshes() {
    let mut h = H::code();
    h.challenge(
        401,
        BearerChallenge {
            scope: Some("mcp:basic".into()),
            ..challenge_with_prm()
        },
    );
    let prm = h.http();
    h.respond(prm.id, 200, &prm_doc(AS));
    let md = h.http();
    h.respond(md.id, 200, &as_doc(AS));
    h.register();
    let a = h.authorize();
    assert_eq!(param(&query(&a.url), "scope").as_deref(), Some("mcp:basic"));
    h.c.handle_redirect(
        h.now,
        &format!("{REDIRECT}?code=c&state={}&iss={}", a.state, enc(AS)),
    );
    let t = h.http();
    h.respond(t.id, 200, &token_doc("tok", Some("ref"), 3600));
    h.drain();
    h.challenge(
        403,
        BearerChallenge {
            scope: Some("mcp:write".into()),
            error: Some("insufficient_scope".into()),
            ..challenge_with_prm()
        },
    );
    // A full flow (discovery again), then authorization with both scopes.
    let prm = h.http();
    assert_eq!(prm.document, Document::ResourceMetadata);
    h.respond(prm.id, 200, &prm_doc(AS));
    let md = h.http();
    h.respond(md.id, 200, &as_doc(AS));
    let a = h.authorize();
    assert_eq!(
        param(&query(&a.url), "scope").as_deref(),
        Some("mcp:basic mcp:write")
    );
}

#[test]
fn scopes_come_from_the_challenge_else_scopes_supported_else_are_omitted_plus_offline_access() {
    // From scopes_supported of the resource.
    let mut h = H::code();
    h.challenge(401, challenge_with_prm());
    let prm = h.http();
    h.respond(
        prm.id,
        200,
        &json!({"resource": MCP, "authorization_servers": [AS], "scopes_supported": ["a", "b"]}),
    );
    let md = h.http();
    let mut asm = as_doc(AS);
    asm["scopes_supported"] = json!(["a", "b", "offline_access"]);
    h.respond(md.id, 200, &asm);
    h.register();
    let q = query(&h.authorize().url);
    assert_eq!(param(&q, "scope").as_deref(), Some("a b offline_access"));
    // Omitted when nothing says.
    let mut h = H::code();
    let q = query(&to_authorize(&mut h, as_doc(AS)).url);
    assert_eq!(param(&q, "scope"), None);
    // offline_access only if wanted.
    let mut h = H::new(
        OAuthConfig::authorization_code(ClientMetadata::new("c"), REDIRECT)
            .with_offline_access(false),
    );
    let mut asm = as_doc(AS);
    asm["scopes_supported"] = json!(["offline_access"]);
    let q = query(&to_authorize(&mut h, asm).url);
    assert_eq!(param(&q, "scope"), None);
}

#[test]
fn pre_registered_secrets_use_basic_or_post_as_the_server_allows() {
    for (methods, expect) in [
        (
            json!(["client_secret_basic", "client_secret_post"]),
            "basic",
        ),
        (json!(["client_secret_post"]), "post"),
    ] {
        let mut h = H::new(
            OAuthConfig::authorization_code(ClientMetadata::new("c"), REDIRECT)
                .with_credentials(ClientCredentials::confidential("pre id", "s:cret")),
        );
        let mut asm = as_doc(AS);
        asm["token_endpoint_auth_methods_supported"] = methods;
        asm.as_object_mut().unwrap().remove("registration_endpoint");
        let a = {
            h.discover(asm);
            h.authorize()
        };
        assert_eq!(
            param(&query(&a.url), "client_id").as_deref(),
            Some("pre id")
        );
        h.c.handle_redirect(
            h.now,
            &format!("{REDIRECT}?code=c&state={}&iss={}", a.state, enc(AS)),
        );
        let tok = h.http();
        let f = form(&tok);
        match expect {
            "basic" => {
                let v = tok.headers[AUTHORIZATION].to_str().unwrap();
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(v.strip_prefix("Basic ").unwrap())
                    .unwrap();
                assert_eq!(raw, b"pre+id:s%3Acret");
                assert_eq!(param(&f, "client_secret"), None);
            }
            _ => {
                assert!(tok.headers.get(AUTHORIZATION).is_none());
                assert_eq!(param(&f, "client_id").as_deref(), Some("pre id"));
                assert_eq!(param(&f, "client_secret").as_deref(), Some("s:cret"));
            }
        }
    }
}

#[test]
fn the_registered_auth_method_wins() {
    let mut h = H::code();
    let mut asm = as_doc(AS);
    asm["token_endpoint_auth_methods_supported"] = json!(["client_secret_post"]);
    h.discover(asm);
    let reg = h.http();
    let body: Value = serde_json::from_slice(&reg.body).unwrap();
    assert_eq!(body["token_endpoint_auth_method"], "client_secret_post");
    h.respond(
        reg.id,
        201,
        &json!({"client_id": "d", "client_secret": "sec", "token_endpoint_auth_method": "client_secret_post"}),
    );
    let a = h.authorize();
    h.c.handle_redirect(
        h.now,
        &format!("{REDIRECT}?code=c&state={}&iss={}", a.state, enc(AS)),
    );
    let f = form(&h.http());
    assert_eq!(param(&f, "client_secret").as_deref(), Some("sec"));
}

#[test]
fn client_id_metadata_documents_are_used_when_advertised() {
    let doc = "https://app.example/client.json";
    let mut h = H::new(
        OAuthConfig::authorization_code(ClientMetadata::new("c"), REDIRECT)
            .with_client_metadata_document(doc),
    );
    let mut asm = as_doc(AS);
    asm["client_id_metadata_document_supported"] = true.into();
    h.discover(asm);
    // No registration: straight to the authorization URL with the URL as client_id.
    let a = h.authorize();
    assert_eq!(param(&query(&a.url), "client_id").as_deref(), Some(doc));
    let d = h.c.client_metadata_document().unwrap();
    assert_eq!(d["client_id"], doc);
    assert_eq!(d["redirect_uris"], json!([REDIRECT]));
    // Not advertised: dynamic registration.
    let mut h = H::new(
        OAuthConfig::authorization_code(ClientMetadata::new("c"), REDIRECT)
            .with_client_metadata_document(doc),
    );
    h.discover(as_doc(AS));
    assert_eq!(h.http().document, Document::Registration);
}

#[test]
fn credentials_bound_to_another_issuer_are_refused() {
    let mut h = H::new(
        OAuthConfig::authorization_code(ClientMetadata::new("c"), REDIRECT).with_credentials(
            ClientCredentials::public("id").for_issuer("https://old-as.example.com"),
        ),
    );
    h.discover(as_doc(AS));
    assert!(matches!(
        failed(&h.drain()),
        AuthError::CredentialsForOtherIssuer { .. }
    ));
}

#[test]
fn no_identity_at_all_is_a_typed_error() {
    let mut h = H::code();
    let mut asm = as_doc(AS);
    asm.as_object_mut().unwrap().remove("registration_endpoint");
    h.discover(asm);
    assert!(matches!(
        failed(&h.drain()),
        AuthError::NoClientIdentity { .. }
    ));
}

#[test]
fn a_new_authorization_server_drops_the_old_tokens_and_registers_again() {
    let mut h = H::code();
    h.full_flow(token_doc("as1-token", None, 3600));
    assert_eq!(h.c.config.store.tokens(MCP).unwrap().issuer, AS);
    assert_eq!(h.c.config.store.client(AS).unwrap().client_id, "dyn-client");
    // The resource moved to AS2.
    let as2 = "https://auth2.example.com";
    h.challenge(401, challenge_with_prm());
    let prm = h.http();
    h.respond(prm.id, 200, &prm_doc(as2));
    let md = h.http();
    h.respond(md.id, 200, &as_doc(as2));
    assert!(
        h.c.authorization().is_none(),
        "AS1's token is never sent again"
    );
    assert!(h.c.config.store.tokens(MCP).is_none());
    let reg = h.http();
    assert_eq!(reg.url.to_string(), "https://auth2.example.com/register");
    h.respond(reg.id, 201, &json!({"client_id": "as2-client"}));
    let a = h.authorize();
    assert_eq!(
        param(&query(&a.url), "client_id").as_deref(),
        Some("as2-client")
    );
    // AS1's registration is kept for AS1 only.
    assert_eq!(h.c.config.store.client(AS).unwrap().client_id, "dyn-client");
}

#[test]
fn stored_tokens_are_used_at_once() {
    let mut store = MemoryTokenStore::default();
    store.save_tokens(MCP, StoredTokens::new(AS, "kept"));
    let h = H::new(
        OAuthConfig::authorization_code(ClientMetadata::new("c"), REDIRECT).with_store(store),
    );
    assert_eq!(h.c.authorization().unwrap(), "Bearer kept");
}

#[test]
fn client_credentials_request_a_token_without_a_person() {
    let mut h = H::new(OAuthConfig::client_credentials(
        ClientMetadata::new("svc"),
        ClientCredentials::confidential("svc-id", "svc-secret"),
    ));
    let mut asm = as_doc(AS);
    asm["grant_types_supported"] = json!(["client_credentials"]);
    asm["token_endpoint_auth_methods_supported"] = json!(["client_secret_basic"]);
    asm.as_object_mut()
        .unwrap()
        .remove("code_challenge_methods_supported");
    h.challenge(
        401,
        BearerChallenge {
            scope: Some("svc:read".into()),
            ..challenge_with_prm()
        },
    );
    let prm = h.http();
    h.respond(prm.id, 200, &prm_doc(AS));
    let md = h.http();
    h.respond(md.id, 200, &asm);
    let tok = h.http();
    let f = form(&tok);
    assert_eq!(
        param(&f, "grant_type").as_deref(),
        Some("client_credentials")
    );
    assert_eq!(param(&f, "scope").as_deref(), Some("svc:read"));
    assert_eq!(param(&f, "resource").as_deref(), Some(MCP));
    assert!(
        tok.headers[AUTHORIZATION]
            .to_str()
            .unwrap()
            .starts_with("Basic ")
    );
    h.respond(tok.id, 200, &token_doc("cc", None, 600));
    assert_eq!(h.drain(), [AuthOutput::Authorized]);
    // Renewed ahead of expiry with the same grant.
    let due = h.c.poll_timeout().unwrap();
    h.now = due;
    h.c.handle_timeout(h.now);
    assert_eq!(
        param(&form(&h.http()), "grant_type").as_deref(),
        Some("client_credentials")
    );
    // A server that does not offer the grant is refused.
    let mut h = H::new(OAuthConfig::client_credentials(
        ClientMetadata::new("svc"),
        ClientCredentials::confidential("svc-id", "svc-secret"),
    ));
    let mut asm = as_doc(AS);
    asm["grant_types_supported"] = json!(["authorization_code"]);
    h.discover(asm);
    assert!(matches!(failed(&h.drain()), AuthError::Unsupported(_)));
}

/// A signer whose "signature" spells out the claims: `sig|<client>|<aud>|<jti>`.
struct FakeSigner;

impl AssertionSigner for FakeSigner {
    fn sign(&self, c: &AssertionClaims) -> Result<String, String> {
        Ok(format!("sig|{}|{}|{}", c.client_id, c.audience, c.jwt_id))
    }
}

/// A machine-only server: the grant `grant`, the auth methods `methods`, no PKCE.
fn machine_as(grant: &str, methods: serde_json::Value) -> serde_json::Value {
    let mut asm = as_doc(AS);
    asm["grant_types_supported"] = json!([grant]);
    asm["token_endpoint_auth_methods_supported"] = methods;
    asm.as_object_mut()
        .unwrap()
        .remove("code_challenge_methods_supported");
    asm
}

#[test]
fn private_key_jwt_sends_a_fresh_assertion_for_the_issuer_and_no_secret() {
    let creds = ClientCredentials::public("svc-id");
    let mut h = H::new(
        OAuthConfig::client_credentials(ClientMetadata::new("svc"), creds)
            .with_assertion_signer(FakeSigner),
    );
    h.discover(machine_as("client_credentials", json!(["private_key_jwt"])));
    let tok = h.http();
    let f = form(&tok);
    assert_eq!(
        param(&f, "grant_type").as_deref(),
        Some("client_credentials")
    );
    assert_eq!(param(&f, "client_id").as_deref(), Some("svc-id"));
    assert_eq!(
        param(&f, "client_assertion_type").as_deref(),
        Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
    );
    assert!(param(&f, "client_secret").is_none() && !tok.headers.contains_key(AUTHORIZATION));
    let first = param(&f, "client_assertion").unwrap();
    let parts: Vec<&str> = first.split('|').collect();
    assert_eq!(parts[..3], ["sig", "svc-id", AS]);
    assert_eq!(parts[3].len(), 43, "256 random bits, base64url");
    h.respond(tok.id, 200, &token_doc("cc", None, 600));
    assert_eq!(h.drain(), [AuthOutput::Authorized]);
    // The renewal signs a new assertion (another jti).
    let due = h.c.poll_timeout().unwrap();
    h.now = due;
    h.c.handle_timeout(h.now);
    let again = param(&form(&h.http()), "client_assertion").unwrap();
    assert!(again.starts_with(&format!("sig|svc-id|{AS}|")));
    assert_ne!(again, first, "a fresh jti");
    // A signer that fails is the flow's error, and nothing is sent.
    struct Refusing;
    impl AssertionSigner for Refusing {
        fn sign(&self, _: &AssertionClaims) -> Result<String, String> {
            Err("the HSM is locked".into())
        }
    }
    let creds = ClientCredentials::public("svc-id");
    let mut h = H::new(
        OAuthConfig::client_credentials(ClientMetadata::new("svc"), creds)
            .with_assertion_signer(Refusing),
    );
    h.discover(machine_as("client_credentials", json!(["private_key_jwt"])));
    assert!(matches!(failed(&h.drain()), AuthError::Assertion(why) if why.contains("HSM")));
    // private_key_jwt without a signer is refused when built.
    let creds =
        ClientCredentials::public("svc-id").with_auth_method(TokenAuthMethod::PrivateKeyJwt);
    let config = OAuthConfig::client_credentials(ClientMetadata::new("svc"), creds);
    assert!(matches!(
        OAuthClient::new(config, MCP, counter()),
        Err(AuthError::InvalidConfig(_))
    ));
}

#[test]
fn the_jwt_bearer_grant_presents_the_workload_token_and_does_not_retry_a_refusal() {
    let config = OAuthConfig::jwt_bearer(
        ClientMetadata::new("wl"),
        ClientCredentials::public("wl-id"),
        || Ok("workload-jwt".to_owned()),
    );
    let mut h = H::new(config);
    h.discover(machine_as(
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
        json!(["none"]),
    ));
    let tok = h.http();
    let f = form(&tok);
    assert_eq!(
        param(&f, "grant_type").as_deref(),
        Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    );
    assert_eq!(param(&f, "assertion").as_deref(), Some("workload-jwt"));
    assert_eq!(param(&f, "resource").as_deref(), Some(MCP));
    h.respond(tok.id, 200, &token_doc("wif", None, 600));
    assert_eq!(h.drain(), [AuthOutput::Authorized]);
    // Renewed by presenting the source's token again.
    let due = h.c.poll_timeout().unwrap();
    h.now = due;
    h.c.handle_timeout(h.now);
    let renewal = h.http();
    assert_eq!(
        param(&form(&renewal), "assertion").as_deref(),
        Some("workload-jwt")
    );
    // Refused: the flow fails with the server's error; no retry, no other grant.
    h.respond(
        renewal.id,
        400,
        &json!({"error": "invalid_grant", "error_description": "expired"}),
    );
    let outs = h.drain();
    assert!(
        outs.iter().all(|o| !matches!(o, AuthOutput::Http(_))),
        "nothing sent again: {outs:?}"
    );
    assert!(
        matches!(
            failed(&outs),
            AuthError::Denied(_) | AuthError::Rejected { .. }
        ),
        "{outs:?}"
    );
    // A source with no token: the flow's error, nothing sent.
    let config = OAuthConfig::jwt_bearer(
        ClientMetadata::new("wl"),
        ClientCredentials::public("wl-id"),
        || Err("no token file".to_owned()),
    );
    let mut h = H::new(config);
    h.discover(machine_as(
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
        json!(["none"]),
    ));
    assert!(matches!(failed(&h.drain()), AuthError::Assertion(_)));
}

#[test]
fn enterprise_managed_trades_the_id_token_at_the_idp_then_redeems_the_id_jag() {
    const IDP: &str = "https://idp.example.com/token";
    let enterprise = || {
        let idp = IdentityProvider::new(IDP).with_client_id("idp-client");
        OAuthConfig::enterprise_managed(
            ClientMetadata::new("agent"),
            ClientCredentials::confidential("as-client", "as-secret"),
            idp,
            || Ok("the-id-token".to_owned()),
        )
    };
    let asm = machine_as(
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
        json!(["client_secret_basic"]),
    );
    let mut h = H::new(enterprise());
    h.discover(asm.clone());
    let trade = h.http();
    assert_eq!(trade.url.to_string(), IDP);
    assert_eq!(trade.document, Document::TokenExchange);
    let f = form(&trade);
    for (k, v) in [
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange",
        ),
        (
            "requested_token_type",
            "urn:ietf:params:oauth:token-type:id-jag",
        ),
        ("audience", AS),
        ("resource", MCP),
        ("subject_token", "the-id-token"),
        (
            "subject_token_type",
            "urn:ietf:params:oauth:token-type:id_token",
        ),
        ("client_id", "idp-client"),
    ] {
        assert_eq!(param(&f, k).as_deref(), Some(v), "{k}");
    }
    assert!(
        !trade.headers.contains_key(AUTHORIZATION),
        "the AS secret never goes to the IdP"
    );
    h.respond(
        trade.id,
        200,
        &json!({"access_token": "the-id-jag", "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"}),
    );
    let redeem = h.http();
    assert_eq!(redeem.document, Document::Token);
    let f = form(&redeem);
    assert_eq!(
        param(&f, "grant_type").as_deref(),
        Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    );
    assert_eq!(param(&f, "assertion").as_deref(), Some("the-id-jag"));
    assert!(
        redeem.headers[AUTHORIZATION]
            .to_str()
            .unwrap()
            .starts_with("Basic ")
    );
    h.respond(redeem.id, 200, &token_doc("emt", None, 600));
    assert_eq!(h.drain(), [AuthOutput::Authorized]);
    assert_eq!(h.c.authorization().unwrap(), "Bearer emt");
    // The IdP refuses: the flow fails, blaming the exchange; nothing goes to the AS.
    let mut h = H::new(enterprise());
    h.discover(asm.clone());
    let trade = h.http();
    h.respond(trade.id, 400, &json!({"error": "invalid_grant"}));
    let outs = h.drain();
    assert!(
        outs.iter().all(|o| !matches!(o, AuthOutput::Http(_))),
        "{outs:?}"
    );
    assert!(matches!(
        failed(&outs),
        AuthError::Rejected {
            document: Document::TokenExchange,
            ..
        }
    ));
    // Something else than an ID-JAG is not presented to the AS.
    let mut h = H::new(enterprise());
    h.discover(asm);
    let trade = h.http();
    h.respond(trade.id, 200, &json!({"access_token": "x", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}));
    assert!(matches!(
        failed(&h.drain()),
        AuthError::Malformed {
            document: Document::TokenExchange,
            ..
        }
    ));
}

/// A DPoP signer whose "proof" spells out what it is for: `proof|<method>|<url>|<nonce>`.
#[derive(Clone)]
struct FakeDpop;

impl crate::dpop::DpopSigner for FakeDpop {
    fn proof(&self, r: &crate::dpop::DpopRequest<'_>) -> Result<String, String> {
        Ok(format!(
            "proof|{}|{}|{}|{}",
            r.method,
            r.url,
            r.access_token.unwrap_or("-"),
            r.nonce.unwrap_or("-")
        ))
    }

    fn clone_box(&self) -> Box<dyn crate::dpop::DpopSigner> {
        Box::new(self.clone())
    }
}

#[test]
fn dpop_proofs_go_on_token_requests_a_nonce_is_retried_once_and_the_token_is_bound() {
    let config = || {
        OAuthConfig::client_credentials(
            ClientMetadata::new("svc"),
            ClientCredentials::confidential("svc-id", "svc-secret"),
        )
    };
    let mut h = H::new(config().with_dpop(FakeDpop));
    h.discover(machine_as(
        "client_credentials",
        json!(["client_secret_basic"]),
    ));
    let tok = h.http();
    assert_eq!(
        tok.headers["dpop"],
        "proof|POST|https://auth.example.com/token|-|-"
    );
    // The AS wants a nonce: the same request again, once, with it.
    let mut nonce = HeaderMap::new();
    nonce.insert("dpop-nonce", HeaderValue::from_static("as-n1"));
    h.respond_with(tok.id, 400, nonce.clone(), br#"{"error":"use_dpop_nonce"}"#);
    let again = h.http();
    assert_eq!(again.body, tok.body);
    assert_eq!(
        again.headers["dpop"],
        "proof|POST|https://auth.example.com/token|-|as-n1"
    );
    // Asked again: no second retry, the flow fails.
    h.respond_with(again.id, 400, nonce, br#"{"error":"use_dpop_nonce"}"#);
    let outs = h.drain();
    assert!(
        outs.iter().all(|o| !matches!(o, AuthOutput::Http(_))),
        "{outs:?}"
    );
    assert!(matches!(failed(&outs), AuthError::Rejected { .. }));
    // A DPoP token: bound, the signer handed out with it.
    let mut h = H::new(config().with_dpop(FakeDpop));
    h.discover(machine_as(
        "client_credentials",
        json!(["client_secret_basic"]),
    ));
    let tok = h.http();
    h.respond(
        tok.id,
        200,
        &json!({"access_token": "bound", "token_type": "DPoP", "expires_in": 600}),
    );
    assert_eq!(h.drain(), [AuthOutput::Authorized]);
    assert!(h.c.dpop_signer().is_some());
    assert_eq!(h.c.authorization().unwrap(), "DPoP bound");
    // A server that ignores DPoP and issues a bearer token: not bound.
    let mut h = H::new(config().with_dpop(FakeDpop));
    h.discover(machine_as(
        "client_credentials",
        json!(["client_secret_basic"]),
    ));
    let tok = h.http();
    h.respond(tok.id, 200, &token_doc("plain", None, 600));
    assert_eq!(h.drain(), [AuthOutput::Authorized]);
    assert!(h.c.dpop_signer().is_none());
    // Without DPoP asked for, a DPoP token is refused, and no proof is sent.
    let mut h = H::new(config());
    h.discover(machine_as(
        "client_credentials",
        json!(["client_secret_basic"]),
    ));
    let tok = h.http();
    assert!(!tok.headers.contains_key("dpop"));
    h.respond(
        tok.id,
        200,
        &json!({"access_token": "bound", "token_type": "DPoP"}),
    );
    assert!(matches!(
        failed(&h.drain()),
        AuthError::UnsupportedTokenType(_)
    ));
}

#[test]
fn limits_bound_documents_redirects_exchanges_and_the_person() {
    // Document size.
    let mut h = H::new(
        OAuthConfig::authorization_code(ClientMetadata::new("c"), REDIRECT).with_limits(
            AuthLimits {
                max_document_bytes: 64,
                ..AuthLimits::default()
            },
        ),
    );
    h.challenge(401, challenge_with_prm());
    let prm = h.http();
    h.respond_with(prm.id, 200, HeaderMap::new(), &[b' '; 65]);
    // Too large: aborted, the next location is tried.
    let outs = h.drain();
    assert!(outs.contains(&AuthOutput::Abort(prm.id)));
    assert!(
        outs.iter()
            .any(|o| matches!(o, AuthOutput::Http(r) if r.document == Document::ResourceMetadata))
    );
    // Redirects: followed up to the limit, relative Location resolved.
    let mut h = H::code();
    h.challenge(401, challenge_with_prm());
    let mut r = h.http();
    for i in 0..3 {
        let mut hd = HeaderMap::new();
        hd.insert(
            LOCATION,
            HeaderValue::from_str(&format!("/moved/{i}")).unwrap(),
        );
        h.respond_with(r.id, 302, hd, b"");
        r = h.http();
        assert_eq!(
            r.url.to_string(),
            format!("https://mcp.example.com/moved/{i}")
        );
    }
    let mut hd = HeaderMap::new();
    hd.insert(LOCATION, HeaderValue::from_static("/moved/again"));
    h.respond_with(r.id, 302, hd, b"");
    // The fourth is not followed: that location failed, the root one is tried next.
    assert_eq!(
        h.http().url.to_string(),
        "https://mcp.example.com/.well-known/oauth-protected-resource"
    );
    // A redirect to plain http is not followed.
    let mut h = H::code();
    h.challenge(401, challenge_with_prm());
    let r = h.http();
    let mut hd = HeaderMap::new();
    hd.insert(
        LOCATION,
        HeaderValue::from_static("http://mcp.example.com/x"),
    );
    h.respond_with(r.id, 301, hd, b"");
    assert_ne!(h.http().url.to_string(), "http://mcp.example.com/x");
    // An exchange that never answers times out.
    let mut h = H::code();
    h.discover(as_doc(AS));
    let reg = h.http();
    assert_eq!(h.c.poll_timeout(), Some(h.now + Duration::from_secs(30)));
    h.now += Duration::from_secs(30);
    h.c.handle_timeout(h.now);
    let outs = h.drain();
    assert!(outs.contains(&AuthOutput::Abort(reg.id)));
    assert!(matches!(
        failed(&outs),
        AuthError::TimedOut {
            document: Document::Registration
        }
    ));
    // The person has ten minutes.
    let mut h = H::code();
    to_authorize(&mut h, as_doc(AS));
    assert_eq!(h.c.poll_timeout(), Some(h.now + Duration::from_secs(600)));
    h.now += Duration::from_secs(600);
    h.c.handle_timeout(h.now);
    assert!(matches!(failed(&h.drain()), AuthError::Abandoned(_)));
}

#[test]
fn without_a_person_the_failure_carries_the_url() {
    let mut h = H::code();
    let a = to_authorize(&mut h, as_doc(AS));
    h.c.decline_authorization(h.now);
    assert_eq!(
        failed(&h.drain()),
        &AuthError::AuthorizationRequired { url: a.url }
    );
}

#[test]
fn challenges_during_a_flow_are_merged_not_restarted() {
    let mut h = H::code();
    h.challenge(401, challenge_with_prm());
    let prm = h.http();
    h.challenge(
        401,
        BearerChallenge {
            scope: Some("late".into()),
            ..challenge_with_prm()
        },
    );
    assert!(h.drain().is_empty(), "no second flow");
    h.respond(prm.id, 200, &prm_doc(AS));
    let md = h.http();
    h.respond(md.id, 200, &as_doc(AS));
    h.register();
    assert_eq!(
        param(&query(&h.authorize().url), "scope").as_deref(),
        Some("late")
    );
}

#[test]
fn bad_configurations_are_refused_up_front() {
    for bad in ["http://app.example/cb", "com.app:/cb", "not a url"] {
        assert!(matches!(
            OAuthClient::new(
                OAuthConfig::authorization_code(ClientMetadata::new("c"), bad),
                MCP,
                counter()
            ),
            Err(AuthError::InvalidConfig(_))
        ));
    }
    assert!(matches!(
        OAuthClient::new(
            OAuthConfig::authorization_code(ClientMetadata::new("c"), REDIRECT)
                .with_client_metadata_document("http://app.example/c.json"),
            MCP,
            counter()
        ),
        Err(AuthError::InvalidConfig(_))
    ));
    // No randomness: no authorization URL.
    let mut h = H {
        c: OAuthClient::new(
            OAuthConfig::authorization_code(ClientMetadata::new("c"), REDIRECT),
            MCP,
            |_: &mut [u8]| false,
        )
        .unwrap(),
        now: Instant::now(),
    };
    h.discover(as_doc(AS));
    h.register();
    assert_eq!(failed(&h.drain()), &AuthError::NoRandomness);
}

// ---------------------------------------------------------------------- properties

/// A response the property feeds: a status and a body made of JSON fragments or bytes.
fn arb_body() -> impl Strategy<Value = Vec<u8>> {
    let fragment = prop_oneof![
        Just(br#"{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://auth.example.com"]}"#.to_vec()),
        Just(as_doc(AS).to_string().into_bytes()),
        Just(br#"{"client_id":"x"}"#.to_vec()),
        Just(br#"{"access_token":"t","token_type":"Bearer","expires_in":0,"refresh_token":"r"}"#.to_vec()),
        Just(br#"{"issuer":null,"authorization_servers":{},"expires_in":"x"}"#.to_vec()),
        Just(b"null".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..64),
    ];
    proptest::collection::vec(fragment, 1..3).prop_map(|v| v.concat())
}

#[derive(Debug, Clone)]
enum Op {
    Challenge(u16, Option<String>, Option<String>),
    Respond(u16, Vec<u8>, Option<String>),
    Fail,
    Redirect(String),
    Advance(u64),
    Accepted,
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            prop_oneof![Just(401u16), Just(403)],
            proptest::option::of("[ a-z:]{0,12}"),
            proptest::option::of("https?://[a-z.]{1,12}(/[a-z]{0,5})?")
        )
            .prop_map(|(s, sc, rm)| Op::Challenge(s, sc, rm)),
        (
            prop_oneof![
                Just(200u16),
                Just(201),
                Just(302),
                Just(400),
                Just(404),
                Just(500)
            ],
            arb_body(),
            proptest::option::of("[ -~]{0,20}")
        )
            .prop_map(|(s, b, l)| Op::Respond(s, b, l)),
        Just(Op::Fail),
        "[ -~]{0,60}".prop_map(Op::Redirect),
        (0u64..4000).prop_map(Op::Advance),
        Just(Op::Accepted),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random and malformed metadata, registration and token responses, redirects and
    /// timings never panic, and the machine stays within its contract: at most one exchange
    /// in flight, and every intent it emits is HTTPS or loopback.
    #[test]
    fn random_peers_never_panic(ops in proptest::collection::vec(arb_op(), 1..40)) {
        let mut h = H::code();
        let mut inflight: Option<AuthRequestId> = None;
        let mut last_state = String::new();
        for op in ops {
            match op {
                Op::Challenge(s, scope, rm) => h.challenge(s, BearerChallenge { scope, resource_metadata: rm, ..BearerChallenge::default() }),
                Op::Respond(s, body, loc) => if let Some(id) = inflight {
                    let mut hd = HeaderMap::new();
                    if let Some(l) = loc.and_then(|l| HeaderValue::from_str(&l).ok()) {
                        hd.insert(LOCATION, l);
                    }
                    h.respond_with(id, s, hd, &body);
                },
                Op::Fail => if let Some(id) = inflight {
                    h.c.handle_input(h.now, AuthInput::Failed { id, kind: TransportFailure::Reset });
                },
                Op::Redirect(r) => {
                    let r = if r.starts_with('?') { format!("{REDIRECT}{r}&state={last_state}") } else { r };
                    h.c.handle_redirect(h.now, &r);
                }
                Op::Advance(s) => {
                    h.now += Duration::from_secs(s);
                    h.c.handle_timeout(h.now);
                }
                Op::Accepted => h.c.handle_accepted(),
            }
            while let Some(o) = h.c.poll_output() {
                match o {
                    AuthOutput::Http(r) => {
                        let u = url::Url::parse(&r.url.to_string()).unwrap();
                        prop_assert!(u.scheme() == "https" || urls::is_loopback(&u), "{u}");
                        inflight = Some(r.id);
                    }
                    AuthOutput::Authorize(a) => last_state = a.state,
                    _ => {}
                }
            }
        }
    }
}
