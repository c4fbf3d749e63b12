//! The single endpoint (S-POST-1, seed `WithEndpointPath`) and method handling.

use http::{Method, StatusCode};
use mcp_proto::server::ServerConfig;
use mcp_tests::server_harness::{Harness, Req, init_body};

#[test]
fn s_post_1_default_endpoint_is_mcp() {
    let mut h = Harness::new(ServerConfig::default());
    assert!(h.router.owns_path("/mcp"));
    let s = h.send(Req::post(&init_body(1, "2025-11-25")));
    assert!(h.next_request().is_some());
    assert!(h.response(s).status.is_none());
    let s = h.send(Req::post(&init_body(1, "2025-11-25")).path("/other"));
    assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
    assert!(!h.router.owns_path("/other"));
}

#[test]
fn seed_with_endpoint_path() {
    let mut h = Harness::new(ServerConfig::default().with_endpoint_path("/api/v1/mcp"));
    let s = h.send(Req::post(&init_body(1, "2025-11-25")).path("/api/v1/mcp"));
    assert!(h.next_request().is_some());
    assert!(h.response(s).status.is_none());
    let s = h.send(Req::post(&init_body(1, "2025-11-25")));
    assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
    assert_eq!(
        ServerConfig::default()
            .with_endpoint_path("x")
            .endpoint_path,
        "/x"
    );
}

#[test]
fn other_methods_are_405_with_allow() {
    let mut h = Harness::new(ServerConfig::default());
    for m in [Method::PUT, Method::PATCH, Method::HEAD] {
        let s = h.send(Req::new(m.clone(), "/mcp"));
        let r = h.response(s);
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{m}");
        assert_eq!(r.header("allow"), Some("GET, POST, DELETE, OPTIONS"));
        assert!(r.json()["error"]["code"].is_i64());
    }
}

/// `OPTIONS` succeeds (204, no body) with `Allow` listing what the endpoint answers, which
/// follows the configuration and the era the request names.
#[test]
fn options_is_204_with_allow() {
    let cases = [
        (ServerConfig::default(), None, "GET, POST, DELETE, OPTIONS"),
        (
            ServerConfig::default().with_stateless(true),
            None,
            "POST, OPTIONS",
        ),
        (
            ServerConfig::default().with_get_stream(false),
            None,
            "POST, DELETE, OPTIONS",
        ),
        (
            ServerConfig::default().with_delete(false),
            None,
            "GET, POST, OPTIONS",
        ),
        (
            ServerConfig::default().with_modern(),
            Some("2026-07-28"),
            "POST, OPTIONS",
        ),
        (
            ServerConfig::default().with_modern(),
            Some("2025-11-25"),
            "GET, POST, DELETE, OPTIONS",
        ),
    ];
    for (config, version, allow) in cases {
        let mut h = Harness::new(config);
        let mut req = Req::new(Method::OPTIONS, "/mcp");
        if let Some(v) = version {
            req = req.version(v);
        }
        let s = h.send(req);
        let r = h.response(s);
        assert_eq!(r.status(), StatusCode::NO_CONTENT, "{allow}");
        assert_eq!(r.header("allow"), Some(allow));
        assert!(r.body.is_empty(), "{allow}");
        assert_eq!(h.router.session_count(), 0);
        assert!(h.next_request().is_none());
    }
    // A method the configuration turned off is refused with the same list.
    let mut h = Harness::new(ServerConfig::default().with_get_stream(false));
    let (id, _) = h.initialize("2025-11-25");
    let s = h.send(Req::get(&id));
    assert_eq!(h.response(s).header("allow"), Some("POST, DELETE, OPTIONS"));
}

#[test]
fn s_get_3_get_disabled_is_405() {
    let mut h = Harness::new(ServerConfig::default().with_get_stream(false));
    let (id, _) = h.initialize("2025-11-25");
    let s = h.send(Req::get(&id));
    assert_eq!(h.response(s).status(), StatusCode::METHOD_NOT_ALLOWED);
}
