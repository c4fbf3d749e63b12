//! `MCP-Protocol-Version` (S-VER-*) and negotiation.

use http::StatusCode;
use mcp_proto::ProtocolVersion;
use mcp_proto::server::ServerConfig;
use mcp_tests::server_harness::{Harness, Req, init_body, init_result};

#[test]
fn s_ver_4_unsupported_version_is_400() {
    // Legacy-only: 2026-07-28 is unsupported too (with the modern era on, the default, an
    // unsupported version gets -32022 instead: server_modern_router.rs, S-NEW-7).
    let mut h = Harness::new(ServerConfig::default().legacy_only());
    let (id, _) = h.initialize("2025-11-25");
    for bad in ["1999-01-01", "garbage", "2024-11-05", "2026-07-28"] {
        let s = h.post_in(&id, bad, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
        let r = h.response(s);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(r.json()["error"]["code"], -32000);
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("protocol version")
        );
        let g = h.send(Req::get(&id).version(bad));
        assert_eq!(h.response(g).status(), StatusCode::BAD_REQUEST, "{bad}");
    }
    assert!(h.next_request().is_none());
}

#[test]
fn s_ver_3_absent_header_is_accepted() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize("2025-06-18");
    let s = h.send(Req::post(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#).session(&id));
    let (handle, _, _) = h.expect_request();
    h.reply(handle, "{}");
    assert_eq!(h.response(s).status(), StatusCode::OK);
}

#[test]
fn any_supported_version_is_accepted_after_negotiating_another() {
    // The conformance suite sends 2025-03-26 after negotiating 2025-11-25.
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize("2025-11-25");
    for v in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let s = h.post_in(&id, v, r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
        let (handle, _, _) = h.expect_request();
        h.reply(handle, "{}");
        assert_eq!(h.response(s).status(), StatusCode::OK, "{v}");
    }
    // Behaviour follows the negotiated revision, not the header.
    assert_eq!(
        h.router.session_version(session),
        Some(ProtocolVersion::V2025_11_25)
    );
}

#[test]
fn g_6_initialize_is_exempt_from_the_header_check() {
    let mut h = Harness::new(ServerConfig::default());
    let s = h.send(Req::post(&init_body(1, "2025-06-18")).version("2099-01-01"));
    let (handle, _, _) = h.expect_request();
    h.reply(handle, &init_result("2025-06-18"));
    assert_eq!(h.response(s).status(), StatusCode::OK);
}

#[test]
fn s_life_8_negotiated_version_comes_from_the_reply() {
    let mut h = Harness::new(ServerConfig::default());
    let s = h.send(Req::post(&init_body(1, "2025-11-25")));
    let (handle, session, _) = h.expect_request();
    let session = session.unwrap();
    assert_eq!(
        h.router.session_version(session),
        Some(ProtocolVersion::V2025_11_25)
    );
    h.reply(handle, &init_result("2025-06-18"));
    assert_eq!(
        h.router.session_version(session),
        Some(ProtocolVersion::V2025_06_18)
    );
    assert!(h.response(s).header("mcp-session-id").is_some());
}

#[test]
fn s_life_8_unknown_requested_version_starts_at_the_newest_supported() {
    let mut h = Harness::new(ServerConfig::default());
    h.send(Req::post(&init_body(1, "2030-01-01")));
    let (_, session, _) = h.expect_request();
    assert_eq!(
        h.router.session_version(session.unwrap()),
        Some(ProtocolVersion::V2025_11_25)
    );
}
