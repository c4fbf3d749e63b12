//! Request ids: a second in-flight request with the same id in a session gets an error
//! response; nothing is ever cross-wired (the Python and TypeScript SDK servers once handed one
//! caller the response meant for another request with the same id).

use http::StatusCode;
use mcp_proto::server::{ServerConfig, ServerEvent};
use mcp_tests::server_harness::Harness;

const V: &str = "2025-06-18";

#[test]
fn peers_20_duplicate_in_flight_id_gets_an_error() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (s1, first) = h.call(&id, V, 1, "tools/call");
    let s2 = h.post_in(&id, V, r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
    let r = h.response(s2);
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["id"], 1);
    assert_eq!(r.json()["error"]["code"], -32600);
    assert!(h.next_request().is_none(), "not handed to the app");
    assert!(
        h.events
            .iter()
            .any(|e| matches!(e, ServerEvent::DuplicateRequestId { .. }))
    );
    h.reply(first, r#"{"who":"first"}"#);
    assert_eq!(h.response(s1).json()["result"]["who"], "first");
    // Once answered, the id may be reused.
    let (s3, third) = h.call(&id, V, 1, "tools/call");
    h.reply(third, r#"{"who":"third"}"#);
    assert_eq!(h.response(s3).json()["result"]["who"], "third");
}

#[test]
fn same_ids_in_two_sessions_are_not_cross_wired() {
    let mut h = Harness::new(ServerConfig::default());
    let (a, _) = h.initialize(V);
    let (b, _) = h.initialize(V);
    let (sa, ha) = h.call(&a, V, 1, "x");
    let (sb, hb) = h.call(&b, V, 1, "x");
    h.reply(hb, r#"{"s":"b"}"#);
    h.reply(ha, r#"{"s":"a"}"#);
    assert_eq!(h.response(sa).json()["result"]["s"], "a");
    assert_eq!(h.response(sb).json()["result"]["s"], "b");
}

#[test]
fn string_and_number_ids_are_distinct_and_restored_exactly() {
    let mut h = Harness::new(ServerConfig::default());
    let (a, _) = h.initialize(V);
    let (s1, h1) = h.call(&a, V, 5, "x");
    let s2 = h.post_in(&a, V, r#"{"jsonrpc":"2.0","id":"5","method":"x"}"#);
    let (h2, _, _) = h.expect_request();
    h.reply(h1, "1");
    h.reply(h2, "2");
    assert_eq!(h.response(s1).json()["id"], 5);
    assert_eq!(h.response(s2).json()["id"], "5");
}
