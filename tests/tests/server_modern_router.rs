//! The modern era (2026-07-28) in the router, over raw HTTP inputs: S-NEW-1 … S-NEW-9, and
//! that the legacy era on the same router is untouched.

use std::time::Duration;

use http::{Method, StatusCode};
use mcp_proto::jsonrpc::{ErrorObject, Outcome};
use mcp_proto::mirror::{self, ParamHeader, ParamHeaderTable};
use mcp_proto::server::{CancelReason, SendError, ServerConfig, ServerOutput, Target};
use mcp_tests::server_harness::{Harness, Req, raw};
use serde_json::{Value, json};

const V: &str = "2026-07-28";

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// A modern POST: the body, `MCP-Protocol-Version` and the mirrored headers, computed with
/// `mcp_proto::mirror` as a conforming client would.
fn modern(id: i64, method: &str, mut params: Value) -> Req {
    if params.get("_meta").is_none() {
        params["_meta"] = meta();
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let raw_params = raw(&params.to_string());
    let mut req = Req::post(&body.to_string()).version(V);
    for (name, value) in mirror::mirror_headers(method, Some(&raw_params)) {
        req.headers.insert(name, value);
    }
    req
}

fn harness() -> Harness {
    Harness::new(ServerConfig::default().with_modern())
}

fn error_of(h: &Harness, s: mcp_proto::server::ExchangeId) -> (StatusCode, Value) {
    let r = h.response(s);
    (r.status(), r.json())
}

#[test]
fn s_new_1_get_and_delete_are_405_for_modern_clients() {
    let mut h = harness();
    for method in [Method::GET, Method::DELETE] {
        let s = h.send(
            Req::new(method.clone(), "/mcp")
                .header("accept", "text/event-stream")
                .version(V),
        );
        assert_eq!(
            h.response(s).status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method}"
        );
        assert_eq!(h.response(s).header("allow"), Some("POST, OPTIONS"));
    }
    assert_eq!(h.router.session_count(), 0);
}

#[test]
fn s_new_2_no_session_is_minted_or_echoed_and_mcp_session_id_is_ignored() {
    let mut h = harness();
    let s = h.send(modern(1, "tools/list", json!({})).session("made-up-session"));
    let (handle, session, req) = h.expect_request();
    assert_eq!(session, None);
    assert_eq!(&*req.method, "tools/list");
    h.reply(handle, r#"{"tools":[]}"#);
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.header("mcp-session-id").is_none());
    assert_eq!(r.json()["result"]["tools"], json!([]));
    assert_eq!(h.router.session_count(), 0);
}

#[test]
fn s_new_3_last_event_id_is_ignored_and_events_carry_no_ids() {
    let mut h = harness();
    let s = h.send(modern(1, "tools/call", json!({"name": "t"})).header("last-event-id", "1-1"));
    let (handle, _, _) = h.expect_request();
    h.notify(
        Target::Request(handle),
        "notifications/progress",
        r#"{"progressToken":1,"progress":1}"#,
    );
    h.reply(handle, r#"{"content":[]}"#);
    let r = h.response(s);
    assert!(r.is_sse());
    assert!(
        r.event_ids().is_empty(),
        "no resumability: {:?}",
        r.event_ids()
    );
    assert_eq!(r.sse_messages().len(), 2);
    assert!(r.ended);
}

#[test]
fn s_new_4_missing_meta_fields_are_400_with_32602() {
    let mut h = harness();
    for drop in [
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
    ] {
        let mut m = meta();
        m.as_object_mut().unwrap().remove(drop);
        let s = h.send(modern(7, "tools/list", json!({"_meta": m})));
        let (status, body) = error_of(&h, s);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{drop}");
        assert_eq!(body["error"]["code"], -32602, "{drop}");
        assert_eq!(body["id"], 7);
        assert!(body["error"]["message"].as_str().unwrap().contains(drop));
    }
    // No params at all.
    let mut req = modern(8, "tools/list", json!({}));
    req.body = br#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#.to_vec();
    let s = h.send(req);
    assert_eq!(error_of(&h, s).1["error"]["code"], -32602);
    assert!(h.next_request().is_none());
}

#[test]
fn s_new_4_removed_methods_do_not_exist_in_modern() {
    let mut h = harness();
    let removed = mcp_proto::server::REMOVED_IN_MODERN;
    for m in [
        "initialize",
        "logging/setLevel",
        "resources/subscribe",
        "ping",
    ] {
        assert!(removed.contains(&m), "{m}");
    }
    for m in removed {
        let s = h.send(modern(3, m, json!({})));
        let (status, body) = error_of(&h, s);
        assert_eq!(status, StatusCode::NOT_FOUND, "{m}");
        assert_eq!(body["error"]["code"], -32601);
        assert_eq!(body["id"], 3);
    }
    assert_eq!(h.router.session_count(), 0);
    assert!(h.next_request().is_none());
}

/// `ping`, gone from 2026-07-28, is refused like the other removed methods by default (the
/// official conformance suite checks it)...
#[test]
fn a_modern_ping_is_404_by_default() {
    let mut h = harness();
    let s = h.send(modern(5, "ping", json!({})));
    let (status, body) = error_of(&h, s);
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], -32601, "{body}");
}

/// ... and, for the SDKs that still send it (the official Python SDK, fastmcp), reaches the
/// app like any modern request when the server accepts it (the service answers `{}`).
#[test]
fn a_modern_ping_reaches_the_app_when_accepted() {
    let mut h = Harness::new(ServerConfig::default().with_modern().with_modern_ping(true));
    let s = h.send(modern(5, "ping", json!({})));
    let (handle, session, request) = h.expect_request();
    assert!(session.is_none());
    assert_eq!(&*request.method, "ping");
    h.reply(handle, "{}");
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::OK);
    let body = if r.is_sse() {
        r.sse_messages().last().cloned().unwrap()
    } else {
        r.json()
    };
    assert_eq!(body["result"], json!({}), "{body}");
    assert_eq!(body["id"], 5);
}

#[test]
fn s_new_5_a_posted_response_is_400_and_no_request_goes_to_a_modern_client() {
    let mut h = harness();
    let mut req = modern(1, "tools/list", json!({}));
    req.body = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec();
    let s = h.send(req);
    let (status, body) = error_of(&h, s);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32600);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("inputResponses")
    );

    let _s = h.send(modern(2, "tools/call", json!({"name": "t"})));
    let (handle, _, _) = h.expect_request();
    let e = h
        .router
        .send_request(
            h.now,
            Target::Request(handle),
            "elicitation/create",
            None,
            None,
        )
        .unwrap_err();
    assert_eq!(e, SendError::ModernNoRequests);
}

#[test]
fn s_new_6_closing_the_stream_cancels_the_handler_and_nothing_more_is_sent() {
    let mut h = harness();
    let s = h.send(modern(1, "tools/call", json!({"name": "slow"})));
    let (handle, _, _) = h.expect_request();
    h.notify(
        Target::Request(handle),
        "notifications/progress",
        r#"{"progressToken":1,"progress":1}"#,
    );
    let before = h.response(s).body.len();
    h.router.handle_disconnect(h.now, s);
    h.pump();
    let cancelled: Vec<_> = h
        .take_other()
        .into_iter()
        .filter_map(|o| match o {
            ServerOutput::Cancelled { handle, reason } => Some((handle, reason)),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, [(handle, CancelReason::Disconnected)]);
    assert_eq!(
        h.router
            .respond(h.now, handle, Outcome::Result(raw("{}")))
            .unwrap_err(),
        SendError::UnknownHandle
    );
    h.pump();
    assert_eq!(h.response(s).body.len(), before);
    // A disconnect while still pending (JSON answer) cancels too.
    let s = h.send(modern(2, "tools/call", json!({"name": "slow"})));
    let (handle, _, _) = h.expect_request();
    h.router.handle_disconnect(h.now, s);
    h.pump();
    assert!(
        h.take_other()
            .iter()
            .any(|o| matches!(o, ServerOutput::Cancelled { handle: x, .. } if *x == handle))
    );
}

#[test]
fn s_new_7_version_header_must_match_meta() {
    let mut h = harness();
    let mut m = meta();
    m["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let s = h.send(modern(4, "tools/list", json!({"_meta": m})));
    let (status, body) = error_of(&h, s);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32020);
    assert_eq!(body["id"], 4);
    // A modern body under a legacy header (or none) is a mismatch too, not a legacy request.
    for version in [Some("2025-11-25"), None] {
        let mut req = modern(5, "tools/list", json!({})).without("mcp-protocol-version");
        if let Some(v) = version {
            req = req.version(v);
        }
        let s = h.send(req);
        let (status, body) = error_of(&h, s);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{version:?}");
        assert_eq!(body["error"]["code"], -32020, "{version:?}");
    }
    assert!(h.next_request().is_none());
}

#[test]
fn s_new_7_unsupported_version_is_400_with_32022_and_the_supported_list() {
    let mut h = harness();
    let mut m = meta();
    m["io.modelcontextprotocol/protocolVersion"] = json!("1900-01-01");
    let s = h.send(modern(9, "tools/list", json!({"_meta": m})).version("1900-01-01"));
    let (status, body) = error_of(&h, s);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["id"], 9);
    assert_eq!(body["error"]["code"], -32022);
    assert_eq!(body["error"]["data"]["requested"], "1900-01-01");
    assert_eq!(
        body["error"]["data"]["supported"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
    );
    // A legacy-only router answers the same probe with the legacy -32000 (G-11).
    let mut legacy = Harness::new(ServerConfig::default().legacy_only());
    let s = legacy.send(modern(9, "tools/list", json!({})));
    let (status, body) = error_of(&legacy, s);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32000);
}

#[test]
fn s_new_8_mirrored_headers_are_checked_against_the_body() {
    let mut h = harness();
    // Mcp-Method missing.
    let s = h.send(modern(1, "tools/list", json!({})).without("mcp-method"));
    assert_eq!(error_of(&h, s).1["error"]["code"], -32020);
    // Mcp-Method differs.
    let s = h.send(modern(1, "tools/list", json!({})).header("mcp-method", "prompts/list"));
    assert_eq!(error_of(&h, s).1["error"]["code"], -32020);
    // Mcp-Name missing / differs, for each method that needs it.
    for (method, params) in [
        ("tools/call", json!({"name": "bar"})),
        ("prompts/get", json!({"name": "bar"})),
        ("resources/read", json!({"uri": "file:///bar"})),
    ] {
        let s = h.send(modern(1, method, params.clone()).without("mcp-name"));
        let (status, body) = error_of(&h, s);
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (StatusCode::BAD_REQUEST, json!(-32020)),
            "{method}"
        );
        let s = h.send(modern(1, method, params).header("mcp-name", "foo"));
        let body = error_of(&h, s).1;
        assert_eq!(body["error"]["code"], -32020, "{method}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Mcp-Name")
        );
    }
    // Invalid Base64 in the sentinel form.
    let s = h
        .send(modern(1, "tools/call", json!({"name": "bar"})).header("mcp-name", "=?base64?%%%?="));
    assert_eq!(error_of(&h, s).1["error"]["code"], -32020);
    assert!(h.next_request().is_none());
    // A non-ASCII name travels Base64-encoded and passes once decoded.
    let s = h.send(modern(2, "tools/call", json!({"name": "wetter_köln"})));
    let (handle, _, _) = h.expect_request();
    h.reply(handle, r#"{"content":[]}"#);
    assert_eq!(h.response(s).status(), StatusCode::OK);
}

/// `execute_sql` mirrors its `region` argument as `Mcp-Param-Region`.
fn region() -> ParamHeaderTable {
    let mut table = ParamHeaderTable::new();
    table.insert(
        "execute_sql",
        vec![ParamHeader {
            name: "Region".into(),
            path: vec!["region".into()],
        }],
    );
    table
}

#[test]
fn s_new_8_mcp_param_headers_are_checked_with_the_tools_declarations() {
    let mut h = Harness::new(
        ServerConfig::default()
            .with_modern()
            .with_param_headers(region()),
    );
    let params = json!({"name": "execute_sql", "arguments": {"region": "us-west1", "query": "q"}});
    // Missing while the argument is present: rejected.
    let s = h.send(modern(1, "tools/call", params.clone()));
    assert_eq!(error_of(&h, s).1["error"]["code"], -32020);
    // Different: rejected.
    let s = h.send(modern(1, "tools/call", params.clone()).header("mcp-param-region", "eu-west1"));
    assert_eq!(error_of(&h, s).1["error"]["code"], -32020);
    assert!(h.next_request().is_none());
    // Matching (header names are case-insensitive): admitted.
    let _ = h.send(modern(1, "tools/call", params).header("Mcp-Param-Region", "us-west1"));
    assert!(h.next_request().is_some());
    // Argument absent: the header is not expected.
    let _ = h.send(modern(
        2,
        "tools/call",
        json!({"name": "execute_sql", "arguments": {"query": "q"}}),
    ));
    assert!(h.next_request().is_some());
}

#[test]
fn s_new_9_unknown_method_is_404_with_32601() {
    let mut h = harness();
    let s = h.send(modern(1, "no/such", json!({})));
    let (handle, _, _) = h.expect_request();
    h.router
        .respond(
            h.now,
            handle,
            Outcome::Error(ErrorObject::new(-32601, "Method not found: no/such")),
        )
        .unwrap();
    h.pump();
    let (status, body) = error_of(&h, s);
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], -32601);
    assert_eq!(body["id"], 1);
    // Other errors keep 200.
    let s = h.send(modern(2, "tools/call", json!({"name": "x"})));
    let (handle, _, _) = h.expect_request();
    h.router
        .respond(
            h.now,
            handle,
            Outcome::Error(ErrorObject::new(-32602, "bad")),
        )
        .unwrap();
    h.pump();
    assert_eq!(h.response(s).status(), StatusCode::OK);
}

#[test]
fn s_new_9_sse_replies_disable_proxy_buffering_and_keep_alive_with_comments() {
    let mut h = harness();
    let s = h.send(modern(
        1,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ));
    let (handle, _, _) = h.expect_request();
    h.notify(
        Target::Request(handle),
        "notifications/subscriptions/acknowledged",
        r#"{"notifications":{"toolsListChanged":true}}"#,
    );
    let r = h.response(s);
    assert!(r.is_sse());
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    h.advance(Duration::from_secs(16));
    let r = h.response(s);
    assert!(
        r.chunks.last().unwrap().starts_with(b":"),
        "a keep-alive comment after 15 s of silence"
    );
    assert!(!r.ended, "the listen stream stays open");
    // A modern client accepting only SSE gets its plain answer as a one-event stream.
    let s = h.send(modern(2, "tools/list", json!({})).header("accept", "text/event-stream"));
    let (handle, _, _) = h.expect_request();
    h.reply(handle, r#"{"tools":[]}"#);
    let r = h.response(s);
    assert!(r.is_sse());
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    assert_eq!(r.sse_messages().len(), 1);
    assert!(r.ended);
}

#[test]
fn legacy_sessions_are_untouched_on_a_modern_router() {
    let mut h = harness();
    // initialize asking for 2026-07-28 negotiates a legacy revision.
    let s = h.send(Req::post(&mcp_tests::server_harness::init_body(1, V)));
    let (handle, session, _) = h.expect_request();
    h.reply(
        handle,
        &mcp_tests::server_harness::init_result("2025-11-25"),
    );
    assert!(h.response(s).header("mcp-session-id").is_some());
    assert_eq!(
        h.router.session_version(session.unwrap()),
        Some(mcp_proto::ProtocolVersion::V2025_11_25)
    );
    let (id, _) = h.initialize("2025-06-18");
    let (s, handle) = h.call(&id, "2025-06-18", 2, "tools/list");
    h.reply(handle, "{}");
    assert_eq!(h.response(s).status(), StatusCode::OK);
    // A legacy GET stream still opens.
    let g = h.send(Req::get(&id).version("2025-06-18"));
    assert!(h.response(g).is_sse());
}

#[test]
fn modern_requests_in_flight_are_bounded() {
    let mut h = Harness::new(
        ServerConfig::default()
            .with_modern()
            .with_max_modern_in_flight(2),
    );
    let _a = h.send(modern(1, "tools/list", json!({})));
    let (first, _, _) = h.expect_request();
    let _b = h.send(modern(2, "tools/list", json!({})));
    let (_second, _, _) = h.expect_request();
    let c = h.send(modern(3, "tools/list", json!({})));
    let (status, body) = error_of(&h, c);
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["id"], 3);
    assert!(h.next_request().is_none());
    // Legacy sessions are not counted against it.
    let _ = h.initialize("2025-11-25");
    // Once one is answered, there is room again.
    h.reply(first, r#"{"tools":[]}"#);
    let _d = h.send(modern(4, "tools/list", json!({})));
    assert!(h.next_request().is_some());
}

#[test]
fn s_new_9_in_sse_mode_errors_keep_their_status_and_results_stream() {
    let mut h = Harness::new(
        ServerConfig::default()
            .with_modern()
            .with_response_mode(mcp_proto::server::ResponseMode::Sse),
    );
    let s = h.send(modern(1, "no/such", json!({})));
    assert!(
        h.response(s).status.is_none(),
        "the head waits for the answer"
    );
    let (handle, _, _) = h.expect_request();
    h.router
        .respond(
            h.now,
            handle,
            Outcome::Error(ErrorObject::new(-32601, "Method not found")),
        )
        .unwrap();
    h.pump();
    assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
    let s = h.send(modern(2, "tools/list", json!({})));
    let (handle, _, _) = h.expect_request();
    h.reply(handle, r#"{"tools":[]}"#);
    let r = h.response(s);
    assert!(r.is_sse());
    assert_eq!(r.sse_messages()[0]["id"], 2);
    assert!(r.ended);
}

#[test]
fn an_invalid_declaration_from_the_app_never_panics_the_router() {
    let mut broken = ParamHeaderTable::new();
    broken.insert(
        "t",
        vec![ParamHeader {
            name: "not a token\r\n".into(),
            path: vec!["x".into()],
        }],
    );
    assert!(
        broken.is_empty(),
        "a declaration that makes no header name is dropped"
    );
    let mut h = Harness::new(
        ServerConfig::default()
            .with_modern()
            .with_param_headers(broken),
    );
    let _ = h.send(modern(
        1,
        "tools/call",
        json!({"name": "t", "arguments": {"x": 1}}),
    ));
    assert!(h.next_request().is_some());
}
