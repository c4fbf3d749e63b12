//! The wire flows the official conformance suite (0.1.16) drives against a server (its
//! initialize handshake and the transport scenarios: concurrent POST streams, polling with
//! `retry` and `Last-Event-ID`, DNS-rebinding checks), replayed on the router directly.

use http::StatusCode;
use mcp_proto::server::{ServerConfig, Target};
use mcp_tests::server_harness::{Harness, Req, init_body, init_result};

const V: &str = "2025-11-25";

#[test]
fn sdk_client_session_with_sampling_on_the_get_stream() {
    let mut h = Harness::new(ServerConfig::default());
    // 1. initialize (JSON or SSE both fine), 2. initialized → 202, 3. GET → 200 SSE.
    let (id, session) = h.initialize(V);
    let g = h.send(Req::get(&id).version(V));
    assert_eq!(h.response(g).status(), StatusCode::OK);
    // 4. tools/call whose handler asks the client to sample, on the GET stream like the TS
    //    reference; the client POSTs its answer and expects 202.
    let (call, handle) = h.call(&id, V, 5, "tools/call");
    let out = h.request_client(Target::Session(session), "sampling/createMessage");
    let req = h.response(g).sse_messages()[0].clone();
    assert_eq!(req["method"], "sampling/createMessage");
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"role":"assistant","content":{{"type":"text","text":"hi"}},"model":"m"}}}}"#,
        req["id"]
    );
    let a = h.post_in(&id, V, &answer);
    assert_eq!(h.response(a).status(), StatusCode::ACCEPTED);
    assert!(h.take_other().iter().any(|o| matches!(o, mcp_proto::server::ServerOutput::ClientResponse { request, .. } if *request == out)));
    h.reply(
        handle,
        r#"{"content":[{"type":"text","text":"LLM response: hi"}]}"#,
    );
    assert_eq!(h.response(call).json()["id"], 5);
}

#[test]
fn server_sse_multiple_streams_with_an_older_version_header() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let mut calls = Vec::new();
    for n in 1000..1003 {
        let s = h.send(
            Req::post(&format!(
                r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/list"}}"#
            ))
            .session(&id)
            .version("2025-03-26")
            .header("accept", "text/event-stream, application/json"),
        );
        let (handle, _, _) = h.expect_request();
        calls.push((s, handle));
    }
    for (s, handle) in calls.into_iter().rev() {
        h.reply(handle, r#"{"tools":[]}"#);
        assert_eq!(h.response(s).status(), StatusCode::OK);
    }
}

#[test]
fn dns_rebinding_protection_probe() {
    let mut h = Harness::new(ServerConfig::default());
    let s = h.send(
        Req::post(&init_body(1, V))
            .header("host", "evil.example.com")
            .header("origin", "http://evil.example.com"),
    );
    assert!(h.response(s).status().is_client_error());
    let s = h.send(
        Req::post(&init_body(1, V))
            .header("host", "localhost:3001")
            .header("origin", "http://localhost:3001"),
    );
    let (handle, _, _) = h.expect_request();
    h.reply(handle, &init_result(V));
    assert!(h.response(s).status().is_success());
}

#[test]
fn server_sse_polling_with_a_2025_03_26_header_after_negotiating_2025_11_25() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let s = h.post_in(
        &id,
        "2025-03-26",
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_reconnection"}}"#,
    );
    let (handle, _, _) = h.expect_request();
    // The tool closes the stream mid-call: priming (the negotiated version allows it), retry.
    h.router
        .close_for_polling(h.now, Target::Request(handle))
        .unwrap();
    h.pump();
    let frames = h.response(s).frames();
    assert!(frames[0].id.is_some() && frames[0].data.is_empty());
    assert!(frames.iter().any(|f| f.retry.is_some()));
    let last = h.response(s).event_ids().pop().unwrap();
    h.reply(handle, r#"{"content":[{"type":"text","text":"done"}]}"#);
    let g = h.send(
        Req::get(&id)
            .version("2025-03-26")
            .header("last-event-id", &last),
    );
    assert_eq!(h.response(g).sse_messages()[0]["id"], 7);
}
