//! Host/Origin validation (S-SEC-1/2/5), CORS (seed `WithStreamableHTTPCORS`), RFC 9728
//! metadata (seed `WithProtectedResourceMetadata`, S-AUTH-8/9), the auth hook and principal
//! binding (S-SESS-11/12).

use std::time::Duration;

use http::{Method, StatusCode};
use mcp_proto::server::{
    AuthDecision, CorsConfig, HostValidation, ProtectedResourceMetadata, RequestHead, ServerConfig,
};
use mcp_tests::server_harness::{Collected, Harness, Req, init_body};

const V: &str = "2025-11-25";

fn init() -> Req {
    Req::post(&init_body(1, V))
}

#[test]
fn s_sec_5_loopback_hosts_with_any_port_are_accepted() {
    let mut h = Harness::new(ServerConfig::default());
    for host in [
        "localhost:3000",
        "127.0.0.1:1234",
        "[::1]:8080",
        "localhost",
    ] {
        let s = h.send(
            init()
                .header("host", host)
                .header("origin", &format!("http://{host}")),
        );
        assert_eq!(h.response(s).status, None, "{host}: accepted");
        assert!(h.next_request().is_some());
    }
}

#[test]
fn s_sec_5_dns_rebinding_host_and_origin_are_403() {
    let mut h = Harness::new(ServerConfig::default());
    let s = h.send(init().header("host", "evil.example.com"));
    assert_eq!(h.response(s).status(), StatusCode::FORBIDDEN);
    let s = h.send(init().header("origin", "http://evil.example.com"));
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Origin")
    );
    let s = h.send(init().without("host"));
    assert_eq!(h.response(s).status(), StatusCode::FORBIDDEN);
    assert!(h.next_request().is_none());
    assert_eq!(h.router.session_count(), 0);
}

#[test]
fn bound_to_a_public_address_turns_loopback_validation_off() {
    let cfg = ServerConfig::default().bound_to("0.0.0.0".parse().unwrap());
    assert_eq!(cfg.security.host_validation, HostValidation::Disabled);
    let cfg = ServerConfig::default().bound_to("127.0.0.1".parse().unwrap());
    assert_eq!(cfg.security.host_validation, HostValidation::Loopback);
}

#[test]
fn allow_lists() {
    let v = HostValidation::AllowList {
        hosts: vec!["mcp.example.com".into()],
        origins: vec!["https://app.example.com".into()],
    };
    let mut h = Harness::new(ServerConfig::default().with_host_validation(v));
    let s = h.send(
        init()
            .header("host", "mcp.example.com:443")
            .header("origin", "https://app.example.com"),
    );
    assert_eq!(h.response(s).status, None);
    let s = h.send(
        init()
            .header("host", "mcp.example.com")
            .header("origin", "https://other.example.com"),
    );
    assert_eq!(h.response(s).status(), StatusCode::FORBIDDEN);
    let s = h.send(init().header("host", "localhost"));
    assert_eq!(h.response(s).status(), StatusCode::FORBIDDEN);
}

#[test]
fn seed_cors_preflight_and_exposed_session_header() {
    let cors = CorsConfig::allow_origins(["https://app.example.com"]);
    let mut h = Harness::new(ServerConfig::default().with_cors(cors));
    let s = h.send(
        Req::new(Method::OPTIONS, "/mcp")
            .header("origin", "https://app.example.com")
            .header("access-control-request-method", "POST"),
    );
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    assert!(
        r.header("access-control-allow-headers")
            .unwrap()
            .contains("mcp-session-id")
    );
    assert!(
        r.header("access-control-allow-methods")
            .unwrap()
            .contains("DELETE")
    );
    assert_eq!(r.header("allow"), Some("GET, POST, DELETE, OPTIONS"));
    // The CORS-allowed origin passes Origin validation and sees Mcp-Session-Id.
    let s = h.send(init().header("origin", "https://app.example.com"));
    let (handle, _, _) = h.expect_request();
    h.reply(handle, &mcp_tests::server_harness::init_result(V));
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.header("access-control-expose-headers")
            .unwrap()
            .contains("mcp-session-id")
    );
    // A foreign origin's preflight is refused.
    let s = h.send(Req::new(Method::OPTIONS, "/mcp").header("origin", "https://evil.example.com"));
    assert_eq!(h.response(s).status(), StatusCode::FORBIDDEN);
}

#[test]
fn cors_is_off_by_default() {
    let mut h = Harness::new(ServerConfig::default());
    let s = h.send(
        Req::new(Method::OPTIONS, "/mcp")
            .header("origin", "http://localhost:5173")
            .header("access-control-request-method", "POST"),
    );
    let r = h.response(s);
    // A plain OPTIONS answer: no CORS headers, so a browser's preflight fails.
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(r.header("allow"), Some("GET, POST, DELETE, OPTIONS"));
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert_eq!(r.header("access-control-allow-methods"), None);
}

#[test]
fn with_cors_an_options_without_origin_is_a_plain_answer() {
    let cors = CorsConfig::allow_origins(["https://app.example.com"]);
    let mut h = Harness::new(ServerConfig::default().with_cors(cors).with_stateless(true));
    let s = h.send(Req::new(Method::OPTIONS, "/mcp"));
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(r.header("allow"), Some("POST, OPTIONS"));
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert_eq!(r.header("vary"), Some("origin"));
    // A preflight from the allowed origin offers the same methods.
    let s = h.send(
        Req::new(Method::OPTIONS, "/mcp")
            .header("origin", "https://app.example.com")
            .header("access-control-request-method", "POST"),
    );
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(r.header("allow"), Some("POST, OPTIONS"));
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("POST, OPTIONS")
    );
}

fn prm() -> ProtectedResourceMetadata {
    ProtectedResourceMetadata::new("https://mcp.example.com/mcp", "https://auth.example.com")
        .with_scopes(["mcp:read", "mcp:write"])
        .with_name("My MCP Server")
}

#[test]
fn seed_protected_resource_metadata_document() {
    let mut h = Harness::new(ServerConfig::default().with_protected_resource(prm()));
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        assert!(h.router.owns_path(path));
        let s = h.send(Req::new(Method::GET, path));
        let r = h.response(s);
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let doc = r.json();
        assert_eq!(doc["resource"], "https://mcp.example.com/mcp");
        assert_eq!(doc["authorization_servers"][0], "https://auth.example.com");
        assert_eq!(doc["scopes_supported"][1], "mcp:write");
        assert_eq!(doc["bearer_methods_supported"][0], "header");
        assert_eq!(doc["resource_name"], "My MCP Server");
    }
}

#[test]
fn s_auth_9_401_carries_www_authenticate_with_resource_metadata() {
    let cfg = ServerConfig::default()
        .with_protected_resource(prm())
        .with_authenticator(
            |head: &RequestHead<'_>| match head.headers.get("authorization") {
                Some(v) if v == "Bearer good" => AuthDecision::allow("alice"),
                Some(_) => AuthDecision::Unauthorized {
                    error: Some("invalid_token".into()),
                    description: None,
                    scope: Some("mcp:read".into()),
                },
                None => AuthDecision::unauthorized(),
            },
        );
    let mut h = Harness::new(cfg);
    let s = h.send(init());
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let www = r.header("www-authenticate").unwrap();
    assert!(www.starts_with("Bearer "));
    assert!(www.contains(
        r#"resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp""#
    ));
    let back = mcp_proto::http::bearer_challenge(&r.headers).unwrap();
    assert!(back.resource_metadata.is_some());
    let s = h.send(init().header("authorization", "Bearer bad"));
    let back = mcp_proto::http::bearer_challenge(&h.response(s).headers).unwrap();
    assert_eq!(back.error.as_deref(), Some("invalid_token"));
    let s = h.send(init().header("authorization", "Bearer good"));
    assert_eq!(h.response(s).status, None);
    // The metadata document itself needs no credentials.
    let s = h.send(Req::new(
        Method::GET,
        "/.well-known/oauth-protected-resource",
    ));
    assert_eq!(h.response(s).status(), StatusCode::OK);
}

/// An asynchronous authenticator is the driver's to run: a router told that verdicts are
/// required (as the driver tells it when it runs one) that gets a head without its verdict
/// fails closed (503, never let through), and only MCP endpoint requests are judged.
#[test]
fn an_async_authenticator_without_its_verdict_fails_closed() {
    let cfg = ServerConfig::default()
        .with_protected_resource(prm())
        .with_requires_verdict(true);
    let head = |method: &str, path: &str| {
        http::Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap()
            .into_parts()
            .0
    };
    for (method, path, judged) in [
        ("POST", "/mcp", true),
        ("GET", "/mcp", true),
        ("DELETE", "/mcp", true),
        ("OPTIONS", "/mcp", false),
        ("GET", "/.well-known/oauth-protected-resource/mcp", false),
        ("GET", "/.well-known/oauth-protected-resource", false),
        ("POST", "/other", false),
    ] {
        let parts = head(method, path);
        assert_eq!(
            cfg.needs_authentication(&RequestHead::from_parts(&parts)),
            judged,
            "{method} {path}"
        );
    }
    let mut h = Harness::new(cfg);
    let s = h.send(init());
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("authentication is unavailable")
    );
}

#[test]
fn s_auth_13_insufficient_scope_is_403_with_a_challenge() {
    let cfg = ServerConfig::default().with_authenticator(|_: &RequestHead<'_>| {
        AuthDecision::InsufficientScope {
            scope: "mcp:write".into(),
            description: None,
        }
    });
    let mut h = Harness::new(cfg);
    let s = h.send(init());
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let c = mcp_proto::http::bearer_challenge(&r.headers).unwrap();
    assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
    assert_eq!(c.scope.as_deref(), Some("mcp:write"));
}

#[test]
fn s_sess_12_a_session_is_bound_to_its_principal() {
    let cfg = ServerConfig::default().with_authenticator(|head: &RequestHead<'_>| {
        match head
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
        {
            Some(t) => AuthDecision::allow(t.trim_start_matches("Bearer ")),
            None => AuthDecision::unauthorized(),
        }
    });
    let mut h = Harness::new(cfg);
    let s = h.send(init().header("authorization", "Bearer alice"));
    let (handle, session, _) = h.expect_request();
    h.reply(handle, &mcp_tests::server_harness::init_result(V));
    let id = h.response(s).header("mcp-session-id").unwrap().to_owned();
    assert_eq!(h.router.session_principal(session.unwrap()), Some("alice"));
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let s = h.send(
        Req::post(ping)
            .session(&id)
            .header("authorization", "Bearer mallory"),
    );
    assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
    let s = h.send(Req::get(&id).header("authorization", "Bearer mallory"));
    assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
    let s = h.send(Req::delete(&id).header("authorization", "Bearer mallory"));
    assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
    assert_eq!(h.router.session_count(), 1);
    let s = h.send(
        Req::post(ping)
            .session(&id)
            .header("authorization", "Bearer alice"),
    );
    assert_eq!(h.response(s).status, None);
}

#[test]
fn adapter_established_principal_binds_too() {
    let mut h = Harness::new(ServerConfig::default());
    let s = h.send(init().principal("cert:alice"));
    let (handle, _, _) = h.expect_request();
    h.reply(handle, &mcp_tests::server_harness::init_result(V));
    let id = h.response(s).header("mcp-session-id").unwrap().to_owned();
    let s = h.send(Req::get(&id).principal("cert:bob"));
    assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
    let s = h.send(Req::get(&id));
    assert_eq!(
        h.response(s).status(),
        StatusCode::NOT_FOUND,
        "no principal is another principal"
    );
}

// ------------------------------------------------------------------ CORS details

const APP: &str = "https://app.example.com";

fn preflight(h: &mut Harness, origin: &str) -> Collected {
    let s = h.send(
        Req::new(Method::OPTIONS, "/mcp")
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type, mcp-session-id",
            ),
    );
    h.response(s).clone()
}

/// An `initialize` POST (with `origin` when given), answered by the app.
fn actual(h: &mut Harness, origin: Option<&str>) -> Collected {
    let req = match origin {
        Some(o) => init().header("origin", o),
        None => init(),
    };
    let s = h.send(req);
    let (handle, _, _) = h.expect_request();
    h.reply(handle, &mcp_tests::server_harness::init_result(V));
    let r = h.response(s).clone();
    assert_eq!(r.status(), StatusCode::OK);
    r
}

fn varies_on_origin(r: &Collected) -> bool {
    r.headers
        .get_all("vary")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim().eq_ignore_ascii_case("origin"))
}

#[test]
fn cors_allow_list_answers_vary_origin_on_preflights_actual_responses_and_refusals() {
    let mut h = Harness::new(ServerConfig::default().with_cors(CorsConfig::allow_origins([APP])));
    let r = preflight(&mut h, APP);
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert!(varies_on_origin(&r), "preflight: {:?}", r.headers);
    let r = actual(&mut h, Some(APP));
    assert_eq!(r.header("access-control-allow-origin"), Some(APP));
    assert!(varies_on_origin(&r), "actual: {:?}", r.headers);
    // Answers without an allowed origin vary on it too: a cache must not hand them to APP.
    let r = actual(&mut h, None);
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert!(varies_on_origin(&r), "no Origin: {:?}", r.headers);
    let r = preflight(&mut h, "https://evil.example.com");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert!(varies_on_origin(&r), "refused preflight: {:?}", r.headers);
}

#[test]
fn cors_allow_credentials_is_sent_only_when_configured() {
    let mut h = Harness::new(ServerConfig::default().with_cors(CorsConfig::allow_origins([APP])));
    assert_eq!(
        preflight(&mut h, APP).header("access-control-allow-credentials"),
        None
    );
    assert_eq!(
        actual(&mut h, Some(APP)).header("access-control-allow-credentials"),
        None
    );
    let cors = CorsConfig::allow_origins([APP]).with_credentials(true);
    let mut h = Harness::new(ServerConfig::default().with_cors(cors));
    for r in [preflight(&mut h, APP), actual(&mut h, Some(APP))] {
        assert_eq!(r.header("access-control-allow-credentials"), Some("true"));
        // With credentials the origin is named, never `*`.
        assert_eq!(r.header("access-control-allow-origin"), Some(APP));
    }
}

#[test]
fn cors_max_age_is_on_preflights_as_configured() {
    let mut cors = CorsConfig::allow_origins([APP]);
    cors.max_age = Some(Duration::from_secs(7200));
    let mut h = Harness::new(ServerConfig::default().with_cors(cors.clone()));
    assert_eq!(
        preflight(&mut h, APP).header("access-control-max-age"),
        Some("7200")
    );
    // Only preflight answers are cached by max-age.
    assert_eq!(
        actual(&mut h, Some(APP)).header("access-control-max-age"),
        None
    );
    cors.max_age = None;
    let mut h = Harness::new(ServerConfig::default().with_cors(cors));
    assert_eq!(
        preflight(&mut h, APP).header("access-control-max-age"),
        None
    );
}

#[test]
fn cors_any_origin_answers_star_and_never_echoes_the_origin_with_credentials() {
    let origin = "https://anywhere.example.net";
    for credentials in [false, true] {
        let cors = CorsConfig::allow_any_origin().with_credentials(credentials);
        let mut h = Harness::new(ServerConfig::default().with_cors(cors));
        for r in [preflight(&mut h, origin), actual(&mut h, Some(origin))] {
            assert_eq!(
                r.header("access-control-allow-origin"),
                Some("*"),
                "credentials {credentials}: {:?}",
                r.headers
            );
            // `*` with credentials fails the browser's CORS check; echoing any origin with
            // credentials would open credentialed reads to every web page.
            assert_eq!(
                r.header("access-control-allow-credentials"),
                None,
                "credentials {credentials}"
            );
            assert!(varies_on_origin(&r));
        }
    }
}

#[test]
fn cors_extra_allowed_and_exposed_headers_are_added_to_the_transports_own() {
    let mut cors = CorsConfig::allow_origins([APP]);
    cors.extra_allowed_headers = vec!["x-trace-id".into()];
    cors.extra_exposed_headers = vec!["x-request-cost".into(), "x-region".into()];
    let mut h = Harness::new(ServerConfig::default().with_cors(cors));
    let r = preflight(&mut h, APP);
    let allowed = r.header("access-control-allow-headers").unwrap();
    assert!(allowed.contains("x-trace-id"), "{allowed}");
    assert!(allowed.contains("mcp-session-id"), "{allowed}");
    let r = actual(&mut h, Some(APP));
    let exposed: Vec<&str> = r
        .header("access-control-expose-headers")
        .unwrap()
        .split(',')
        .map(str::trim)
        .collect();
    for h in [
        "x-request-cost",
        "x-region",
        "mcp-session-id",
        "www-authenticate",
        // A browser client reads a 429's delay (rate limits).
        "retry-after",
    ] {
        assert!(exposed.contains(&h), "{h} not in {exposed:?}");
    }
}

#[test]
fn cors_origins_match_without_regard_to_scheme_and_host_case() {
    let cors = CorsConfig::allow_origins(["HTTPS://App.Example.COM"]);
    let mut h = Harness::new(ServerConfig::default().with_cors(cors));
    let r = preflight(&mut h, APP);
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    // Answered as the browser spelled it: its CORS check compares byte for byte.
    assert_eq!(r.header("access-control-allow-origin"), Some(APP));
    let r = actual(&mut h, Some(APP));
    assert_eq!(r.header("access-control-allow-origin"), Some(APP));
    for other in [
        "https://app.example.com.evil.com",
        "http://app.example.com",
        "https://app.example.com:8443",
    ] {
        assert_eq!(
            preflight(&mut h, other).status(),
            StatusCode::FORBIDDEN,
            "{other}"
        );
    }
}

#[test]
fn the_metadata_document_is_served_under_the_resource_path_and_the_endpoint_path() {
    // RFC 9728 §3.1: the well-known prefix goes between the host and the resource's path.
    // Behind a proxy the resource's path (/api/v1/mcp) differs from the router's (/mcp).
    let prm =
        ProtectedResourceMetadata::new("https://mcp.example.com/api/v1/mcp", "https://as.example");
    let url = prm.url();
    let mut h = Harness::new(ServerConfig::default().with_protected_resource(prm));
    let suffixed = url
        .strip_prefix("https://mcp.example.com")
        .unwrap()
        .to_owned();
    assert_eq!(suffixed, "/.well-known/oauth-protected-resource/api/v1/mcp");
    for path in [
        suffixed.as_str(),
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        assert!(h.router.owns_path(path), "{path}");
        let s = h.send(Req::new(Method::GET, path));
        let r = h.response(s);
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.json()["resource"], "https://mcp.example.com/api/v1/mcp");
    }
    for path in [
        "/.well-known/oauth-protected-resource/other",
        "/.well-known/oauth-protected-resource/api",
        "/.well-known/oauth-protected-resource/api/v1/mcp/extra",
        "/.well-known/oauth-protected-resource/mcpx",
        "/.well-known/oauth-protected-resourcex",
        "/.well-known/oauth-authorization-server",
    ] {
        assert!(!h.router.owns_path(path), "{path}");
        let s = h.send(Req::new(Method::GET, path));
        assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND, "{path}");
    }
}
