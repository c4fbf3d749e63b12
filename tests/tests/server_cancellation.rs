//! Cancellation: `notifications/cancelled` cancels the handler (S-CANCEL-*); a disconnect
//! from a non-resumable stream cancels it; a resumable one gets a grace window.

use std::time::Duration;

use mcp_proto::jsonrpc::Outcome;
use mcp_proto::server::{
    CancelReason, ResponseMode, SendError, ServerConfig, ServerOutput, Target,
};
use mcp_tests::server_harness::{Harness, raw};

const V: &str = "2025-11-25";

fn cancelled(h: &mut Harness) -> Vec<(mcp_proto::server::RequestHandle, CancelReason)> {
    h.take_other()
        .into_iter()
        .filter_map(|o| match o {
            ServerOutput::Cancelled { handle, reason } => Some((handle, reason)),
            _ => None,
        })
        .collect()
}

#[test]
fn s_cancel_3_notifications_cancelled_cancels_the_handler() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 7, "tools/call");
    let c = h.post_in(&id, V, r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}"#);
    assert_eq!(h.response(c).status(), http::StatusCode::ACCEPTED);
    assert_eq!(cancelled(&mut h), [(handle, CancelReason::ClientCancelled)]);
    assert!(h.take_notifications().is_empty(), "handled by the router");
    let r = h.response(s);
    assert!(r.ended, "the exchange ends");
    assert!(
        r.messages().iter().all(|m| m.get("result").is_none()),
        "and carries no response"
    );
    assert_eq!(
        h.router.respond(h.now, handle, Outcome::Result(raw("{}"))),
        Err(SendError::UnknownHandle)
    );
}

#[test]
fn s_cancel_2_initialize_cannot_be_cancelled() {
    let mut h = Harness::new(ServerConfig::default());
    let s = h.send(mcp_tests::server_harness::Req::post(
        &mcp_tests::server_harness::init_body(1, V),
    ));
    let (handle, _, _) = h.expect_request();
    let id = h
        .router
        .session_id(h.router.session_by_id("insecure-test-session-1").unwrap())
        .unwrap()
        .to_owned();
    h.post_in(
        &id,
        V,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
    );
    assert!(cancelled(&mut h).is_empty());
    h.reply(handle, &mcp_tests::server_harness::init_result(V));
    assert!(h.response(s).header("mcp-session-id").is_some());
}

#[test]
fn unknown_cancellations_are_ignored() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    h.post_in(
        &id,
        V,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nope"}}"#,
    );
    h.post_in(
        &id,
        V,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#,
    );
    assert!(cancelled(&mut h).is_empty());
}

#[test]
fn disconnect_from_a_non_resumable_stream_cancels_at_once() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 2, "tools/call");
    // A pending JSON answer cannot be resumed.
    h.router.handle_disconnect(h.now, s);
    h.pump();
    assert_eq!(cancelled(&mut h), [(handle, CancelReason::Disconnected)]);
}

#[test]
fn disconnect_from_a_resumable_stream_gets_a_grace_window() {
    let mut h = Harness::new(ServerConfig::default().with_response_mode(ResponseMode::Sse));
    let (id, _) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 2, "tools/call");
    h.router.handle_disconnect(h.now, s);
    h.pump();
    h.advance(Duration::from_secs(59));
    assert!(cancelled(&mut h).is_empty());
    h.advance(Duration::from_secs(1));
    assert_eq!(cancelled(&mut h), [(handle, CancelReason::Disconnected)]);
}

#[test]
fn resuming_within_the_grace_window_keeps_the_handler() {
    let mut h = Harness::new(ServerConfig::default().with_response_mode(ResponseMode::Sse));
    let (id, _) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 2, "tools/call");
    let last = h.response(s).event_ids()[0].clone();
    h.router.handle_disconnect(h.now, s);
    h.pump();
    h.advance(Duration::from_secs(30));
    let g = h.send(mcp_tests::server_harness::Req::get(&id).header("last-event-id", &last));
    h.advance(Duration::from_secs(120));
    assert!(cancelled(&mut h).is_empty());
    h.reply(handle, "{}");
    assert_eq!(h.response(g).sse_messages()[0]["id"], 2);
    let _ = Target::Request(handle);
}
