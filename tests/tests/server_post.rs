//! POST: Accept, Content-Type, size cap, parse and JSON-RPC errors, 202, JSON vs SSE answers,
//! response modes and batches (S-POST-*, G-1, G-8).

use http::StatusCode;
use mcp_proto::server::{Delivery, ResponseMode, ServerConfig, Target};
use mcp_tests::server_harness::{Harness, Req, init_body, init_result};

const V: &str = "2025-06-18";

fn ready() -> (Harness, String) {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    (h, id)
}

#[test]
fn g_1_accept_without_json_or_sse_is_406() {
    let (mut h, id) = ready();
    let s = h.send(
        Req::post(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .session(&id)
            .header("accept", "text/html"),
    );
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Accept")
    );
    assert!(r.json()["id"].is_null());
}

#[test]
fn g_1_wrong_content_type_is_415() {
    let (mut h, id) = ready();
    let s = h.send(
        Req::post("{}")
            .session(&id)
            .header("content-type", "text/plain"),
    );
    assert_eq!(h.response(s).status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let s = h.send(
        Req::post(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .session(&id)
            .header("content-type", "application/json; charset=utf-8"),
    );
    assert_eq!(h.response(s).status, None, "accepted and handed to the app");
    assert!(h.next_request().is_some());
}

#[test]
fn body_over_the_cap_is_413_without_buffering() {
    let mut h = Harness::new(ServerConfig::default().with_max_body_bytes(64));
    // Declared too large: refused at the head.
    let s = h.send_head(&Req::post("").header("content-length", "65"));
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(r.stopped_reading);
    // Streamed: refused at the chunk that crosses the cap; later chunks are ignored.
    let s = h.send_head(&Req::post(""));
    h.router.handle_body(h.now, s, &[b' '; 40]);
    h.pump();
    assert!(h.response(s).status.is_none());
    h.router.handle_body(h.now, s, &[b' '; 40]);
    h.router.handle_body(h.now, s, &[b' '; 40]);
    h.router.handle_body_end(h.now, s);
    h.pump();
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(r.stopped_reading && r.ended);
}

#[test]
fn default_cap_is_4_mib() {
    assert_eq!(
        ServerConfig::default().limits.max_body_bytes,
        4 * 1024 * 1024
    );
}

#[test]
fn unparsable_json_is_400_with_32700() {
    let (mut h, id) = ready();
    let s = h.post_in(&id, V, "{not json");
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["error"]["code"], -32700);
    assert!(r.json()["id"].is_null());
}

#[test]
fn json_that_is_not_jsonrpc_is_400_with_32600() {
    let (mut h, id) = ready();
    for body in [
        r#"{"hello":1}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
        "42",
        "[]",
    ] {
        let s = h.post_in(&id, V, body);
        let r = h.response(s);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(r.json()["error"]["code"], -32600, "{body}");
    }
}

#[test]
fn s_post_7_notifications_and_responses_get_202_without_body() {
    let (mut h, id) = ready();
    let s = h.post_in(
        &id,
        V,
        r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#,
    );
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert!(r.body.is_empty() && r.ended);
    assert_eq!(h.take_notifications().len(), 1);
    let s = h.post_in(&id, V, r#"{"jsonrpc":"2.0","id":99,"result":{}}"#);
    assert_eq!(h.response(s).status(), StatusCode::ACCEPTED);
}

#[test]
fn s_post_9_auto_mode_answers_plain_replies_with_one_json_body() {
    let (mut h, id) = ready();
    let (s, handle) = h.call(&id, V, 7, "tools/list");
    assert!(h.response(s).status.is_none(), "nothing before the reply");
    h.reply(handle, r#"{"tools":[]}"#);
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["id"], 7);
    assert_eq!(r.json()["result"]["tools"], serde_json::json!([]));
    assert!(r.ended);
}

#[test]
fn s_post_12_auto_mode_upgrades_to_sse_when_a_notification_precedes_the_reply() {
    let (mut h, id) = ready();
    let (s, handle) = h.call(&id, V, 8, "tools/call");
    let d = h.notify(
        Target::Request(handle),
        "notifications/progress",
        r#"{"progressToken":1,"progress":1}"#,
    );
    assert_eq!(d, Delivery::RequestStream);
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.is_sse());
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    assert!(!r.ended);
    h.reply(handle, "{}");
    let r = h.response(s);
    let msgs = r.sse_messages();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["method"], "notifications/progress");
    assert_eq!(msgs[1]["id"], 8);
    assert!(r.ended, "S-POST-15: closed after the response");
}

#[test]
fn sse_mode_always_streams() {
    let mut h = Harness::new(ServerConfig::default().with_response_mode(ResponseMode::Sse));
    let s = h.send(Req::post(&init_body(1, V)));
    assert!(h.response(s).is_sse());
    let (handle, _, _) = h.expect_request();
    h.reply(handle, &init_result(V));
    let r = h.response(s);
    assert!(r.header("mcp-session-id").is_some());
    assert_eq!(r.sse_messages()[0]["result"]["protocolVersion"], V);
    assert!(r.ended);
}

#[test]
fn sse_mode_requires_accept_event_stream() {
    let mut h = Harness::new(ServerConfig::default().with_response_mode(ResponseMode::Sse));
    let s = h.send(Req::post(&init_body(1, V)).header("accept", "application/json"));
    assert_eq!(h.response(s).status(), StatusCode::NOT_ACCEPTABLE);
}

#[test]
fn peers_25_json_mode_reports_what_it_reroutes_instead_of_dropping() {
    let mut h = Harness::new(ServerConfig::default().with_response_mode(ResponseMode::Json));
    let (id, session) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 2, "tools/call");
    let d = h.notify(Target::Request(handle), "notifications/progress", "{}");
    assert_eq!(d, Delivery::Rerouted);
    assert!(h.events.iter().any(
        |e| matches!(e, mcp_proto::server::ServerEvent::Rerouted { session: s } if *s == session)
    ));
    h.reply(handle, "{}");
    assert_eq!(
        h.response(s).header("content-type"),
        Some("application/json")
    );
    // The rerouted notification waits for the GET stream and arrives there.
    let g = h.send(Req::get(&id).version(V));
    assert_eq!(
        h.response(g).sse_messages()[0]["method"],
        "notifications/progress"
    );
}

#[test]
fn peers_25_json_mode_without_sessions_refuses_with_an_error() {
    let mut h = Harness::new(
        ServerConfig::default()
            .with_response_mode(ResponseMode::Json)
            .with_stateless(true),
    );
    let _s = h.send(Req::post(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
    ));
    let (handle, _, _) = h.expect_request();
    let err = h
        .router
        .notify(
            h.now,
            Target::Request(handle),
            mcp_proto::jsonrpc::Notification {
                method: "notifications/progress".into(),
                params: None,
            },
        )
        .unwrap_err();
    assert_eq!(err, mcp_proto::server::SendError::JsonModeUndeliverable);
}

#[test]
fn auto_mode_with_a_json_only_client_reroutes_instead_of_upgrading() {
    let (mut h, id) = ready();
    let s = h.send(
        Req::post(r#"{"jsonrpc":"2.0","id":3,"method":"x"}"#)
            .session(&id)
            .version(V)
            .header("accept", "application/json"),
    );
    let (handle, _, _) = h.expect_request();
    assert_eq!(
        h.notify(Target::Request(handle), "notifications/message", "{}"),
        Delivery::Rerouted
    );
    h.reply(handle, "{}");
    assert_eq!(
        h.response(s).header("content-type"),
        Some("application/json")
    );
}

#[test]
fn auto_mode_with_an_sse_only_client_streams() {
    let (mut h, id) = ready();
    let s = h.send(
        Req::post(r#"{"jsonrpc":"2.0","id":3,"method":"x"}"#)
            .session(&id)
            .version(V)
            .header("accept", "text/event-stream"),
    );
    assert!(h.response(s).is_sse());
}

#[test]
fn s_post_5_batches_in_2025_03_26() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize("2025-03-26");
    let s = h.post_in(
        &id,
        "2025-03-26",
        r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":2,"method":"b"},{"bogus":true}]"#,
    );
    let (h1, _, r1) = h.expect_request();
    let (h2, _, r2) = h.expect_request();
    assert_eq!((&*r1.method, &*r2.method), ("a", "b"));
    assert_eq!(h.take_notifications().len(), 1);
    h.reply(h2, r#"{"n":2}"#);
    assert!(h.response(s).status.is_none());
    h.reply(h1, r#"{"n":1}"#);
    let body = h.response(s).json();
    let arr = body.as_array().expect("a batch gets an array");
    assert_eq!(arr.len(), 3, "{arr:?}");
    assert!(arr.iter().any(|m| m["error"]["code"] == -32600));
    assert!(arr.iter().any(|m| m["id"] == 1 && m["result"]["n"] == 1));
    assert!(arr.iter().any(|m| m["id"] == 2 && m["result"]["n"] == 2));
}

#[test]
fn s_post_6_batches_refused_after_2025_03_26() {
    let (mut h, id) = ready();
    let s = h.post_in(&id, V, r#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#);
    assert_eq!(h.response(s).status(), StatusCode::BAD_REQUEST);
    assert!(h.next_request().is_none());
}

#[test]
fn s_lif_2_initialize_in_a_batch_is_refused() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize("2025-03-26");
    let s = h.post_in(
        &id,
        "2025-03-26",
        &format!("[{}]", init_body(5, "2025-03-26")),
    );
    assert_eq!(h.response(s).status(), StatusCode::BAD_REQUEST);
    assert!(h.next_request().is_none());
}

#[test]
fn batch_of_notifications_only_is_202() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize("2025-03-26");
    let s = h.post_in(
        &id,
        "2025-03-26",
        r#"[{"jsonrpc":"2.0","method":"n1"},{"jsonrpc":"2.0","method":"n2"}]"#,
    );
    assert_eq!(h.response(s).status(), StatusCode::ACCEPTED);
    assert_eq!(h.take_notifications().len(), 2);
}
