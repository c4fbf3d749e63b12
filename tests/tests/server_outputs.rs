//! Outputs: response heads per kind (status, `Content-Type`; SSE `Cache-Control: no-cache`
//! and `X-Accel-Buffering: no`), chunks and ends per stream, and every error body a JSON-RPC
//! error with a null id and a message.

use http::{Method, StatusCode};
use mcp_proto::server::{ResponseMode, ServerConfig};
use mcp_tests::server_harness::{Harness, Req};

const V: &str = "2025-11-25";

#[test]
fn sse_heads_carry_the_anti_buffering_headers() {
    let mut h = Harness::new(ServerConfig::default().with_response_mode(ResponseMode::Sse));
    let (id, _) = h.initialize(V);
    let (p, _) = h.call(&id, V, 2, "x");
    let g = h.send(Req::get(&id));
    for s in [p, g] {
        let r = h.response(s);
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        assert_eq!(r.header("cache-control"), Some("no-cache"));
        assert_eq!(r.header("x-accel-buffering"), Some("no"));
    }
}

#[test]
fn every_error_body_is_a_json_rpc_error_with_a_message() {
    let mut h = Harness::new(ServerConfig::default().with_max_body_bytes(1000));
    let (id, _) = h.initialize(V);
    let big = "x".repeat(2000);
    let cases = vec![
        Req::post("{}").path("/nope"),
        Req::new(Method::PUT, "/mcp"),
        Req::post("{}").header("accept", "image/png"),
        Req::post("{}").header("content-type", "text/plain"),
        Req::post(&big),
        Req::post("{").session(&id),
        Req::post("{}").session(&id),
        Req::post(r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#),
        Req::post(r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#).session("gone"),
        Req::post(r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#)
            .session(&id)
            .version("1.0"),
        Req::post("{}").header("host", "evil.example"),
        Req::get(&id).header("last-event-id", "nope"),
    ];
    for req in cases {
        let desc = format!("{} {} {:?}", req.method, req.path, req.headers);
        let s = h.send(req);
        let r = h.response(s);
        assert!(r.status().is_client_error(), "{desc}: {:?}", r.status);
        assert_eq!(r.header("content-type"), Some("application/json"), "{desc}");
        let v = r.json();
        assert_eq!(v["jsonrpc"], "2.0", "{desc}");
        assert!(v["id"].is_null(), "{desc}");
        assert!(v["error"]["code"].is_i64(), "{desc}");
        assert!(
            !v["error"]["message"].as_str().unwrap().is_empty(),
            "{desc}"
        );
        assert!(r.ended, "{desc}");
    }
}

#[test]
fn json_answers_are_one_chunk_then_end() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 2, "x");
    h.reply(handle, r#"{"ok":true}"#);
    let r = h.response(s);
    assert_eq!(r.chunks.len(), 1);
    assert!(r.ended);
}

#[test]
fn sse_events_are_one_chunk_each() {
    let mut h = Harness::new(ServerConfig::default().with_response_mode(ResponseMode::Sse));
    let (id, _) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 2, "x");
    h.reply(handle, "{\n  \"pretty\": true\n}");
    let r = h.response(s);
    assert_eq!(r.chunks.len(), 2, "priming, response");
    assert_eq!(
        r.sse_messages()[0]["result"]["pretty"],
        true,
        "multi-line data split and rejoined"
    );
}
