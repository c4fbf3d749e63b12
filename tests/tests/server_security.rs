//! Host/Origin validation (S-SEC-1/2/5), CORS (seed `WithStreamableHTTPCORS`), RFC 9728
//! metadata (seed `WithProtectedResourceMetadata`, S-AUTH-8/9), the auth hook and principal
//! binding (S-SESS-11/12).

use http::{Method, StatusCode};
use mcp_proto::server::{
    AuthDecision, CorsConfig, HostValidation, ProtectedResourceMetadata, RequestHead, ServerConfig,
};
use mcp_tests::server_harness::{Harness, Req, init_body};

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
    assert_eq!(cfg.host_validation, HostValidation::Disabled);
    let cfg = ServerConfig::default().bound_to("127.0.0.1".parse().unwrap());
    assert_eq!(cfg.host_validation, HostValidation::Loopback);
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
    let s = h.send(Req::new(Method::OPTIONS, "/mcp").header("origin", "http://localhost:5173"));
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.header("access-control-allow-origin"), None);
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
