//! The GET stream: one per session with takeover, unrelated messages routed there and never
//! broadcast, a bounded queue with an explicit overflow policy (S-GET-*, S-MULTI-2).

use http::StatusCode;
use mcp_proto::server::{
    Delivery, OverflowPolicy, SendError, ServerConfig, ServerEvent, ServerOutput,
    ServerRequestError, Target,
};
use mcp_tests::server_harness::{Harness, Req};

const V: &str = "2025-06-18";

#[test]
fn s_get_3_get_opens_an_sse_stream() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let g = h.send(Req::get(&id).version(V));
    let r = h.response(g);
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.is_sse());
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    assert!(!r.ended);
}

#[test]
fn s_get_2_get_must_accept_event_stream() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let g = h.send(Req::get(&id).header("accept", "application/json"));
    assert_eq!(h.response(g).status(), StatusCode::NOT_ACCEPTABLE);
}

#[test]
fn s_sess_5_get_without_session_is_400() {
    let mut h = Harness::new(ServerConfig::default());
    let _ = h.initialize(V);
    let g = h.send(Req::get("x").without("mcp-session-id"));
    assert_eq!(h.response(g).status(), StatusCode::BAD_REQUEST);
}

#[test]
fn peers_15_a_new_get_replaces_a_stale_one_instead_of_409() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize(V);
    let g1 = h.send(Req::get(&id));
    let g2 = h.send(Req::get(&id));
    assert_eq!(h.response(g2).status(), StatusCode::OK);
    assert!(h.response(g1).ended, "the stale GET is closed");
    assert!(h.events.iter().any(|e| matches!(e, ServerEvent::ConnectionReplaced { session: s, old, new } if *s == session && *old == g1 && *new == g2)));
    assert_eq!(
        h.notify(
            Target::Session(session),
            "notifications/tools/list_changed",
            "{}"
        ),
        Delivery::ListenStream
    );
    assert_eq!(h.response(g2).sse_messages().len(), 1);
    assert!(h.response(g1).sse_messages().is_empty());
}

#[test]
fn s_multi_2_unrelated_messages_go_to_the_get_stream_only() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize(V);
    let g = h.send(Req::get(&id));
    let (p, handle) = h.call(&id, V, 5, "tools/call");
    h.notify(
        Target::Session(session),
        "notifications/resources/updated",
        r#"{"uri":"x"}"#,
    );
    h.notify(
        Target::Request(handle),
        "notifications/progress",
        r#"{"progressToken":1,"progress":1}"#,
    );
    h.reply(handle, "{}");
    let on_get: Vec<_> = h
        .response(g)
        .sse_messages()
        .iter()
        .map(|m| m["method"].clone())
        .collect();
    let on_post: Vec<_> = h
        .response(p)
        .sse_messages()
        .iter()
        .map(|m| m["method"].clone())
        .collect();
    assert_eq!(on_get, ["notifications/resources/updated"]);
    assert_eq!(on_post[0], "notifications/progress");
    assert_eq!(on_post.len(), 2, "progress, then the response");
}

#[test]
fn messages_wait_in_the_queue_until_a_get_opens() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize(V);
    assert_eq!(
        h.notify(Target::Session(session), "n/1", "{}"),
        Delivery::Queued
    );
    assert_eq!(
        h.notify(Target::Session(session), "n/2", "{}"),
        Delivery::Queued
    );
    let g = h.send(Req::get(&id));
    let m: Vec<_> = h
        .response(g)
        .sse_messages()
        .iter()
        .map(|m| m["method"].clone())
        .collect();
    assert_eq!(m, ["n/1", "n/2"]);
    // Disconnect: the next messages are stored as the GET stream's events (a resume
    // replays them), and a plain GET gets the ones the first connection never carried.
    h.router.handle_disconnect(h.now, g);
    h.pump();
    assert_eq!(
        h.notify(Target::Session(session), "n/3", "{}"),
        Delivery::StoredForResume
    );
    let g2 = h.send(Req::get(&id));
    let m: Vec<_> = h
        .response(g2)
        .sse_messages()
        .iter()
        .map(|m| m["method"].clone())
        .collect();
    assert_eq!(m, ["n/3"]);
}

#[test]
fn overflow_drops_the_oldest_notification_and_reports_it() {
    let mut h = Harness::new(
        ServerConfig::default().with_listen_queue(2, OverflowPolicy::DropOldestNotification),
    );
    let (id, session) = h.initialize(V);
    h.notify(Target::Session(session), "n/1", "{}");
    h.notify(Target::Session(session), "n/2", "{}");
    h.notify(Target::Session(session), "n/3", "{}");
    assert!(
        h.events
            .iter()
            .any(|e| matches!(e, ServerEvent::QueueOverflow { .. }))
    );
    let g = h.send(Req::get(&id));
    let m: Vec<_> = h
        .response(g)
        .sse_messages()
        .iter()
        .map(|m| m["method"].clone())
        .collect();
    assert_eq!(m, ["n/2", "n/3"]);
}

#[test]
fn overflow_never_drops_requests_silently() {
    let mut h = Harness::new(
        ServerConfig::default().with_listen_queue(1, OverflowPolicy::DropOldestNotification),
    );
    let (_id, session) = h.initialize(V);
    let _r = h.request_client(Target::Session(session), "roots/list");
    let err = h.router.notify(
        h.now,
        Target::Session(session),
        mcp_proto::jsonrpc::Notification {
            method: "n".into(),
            params: None,
        },
    );
    assert_eq!(err, Err(SendError::QueueFull));
    let err = h
        .router
        .send_request(h.now, Target::Session(session), "ping", None, None);
    assert_eq!(err, Err(SendError::QueueFull));
}

#[test]
fn reject_new_policy() {
    let mut h =
        Harness::new(ServerConfig::default().with_listen_queue(1, OverflowPolicy::RejectNew));
    let (_id, session) = h.initialize(V);
    h.notify(Target::Session(session), "n/1", "{}");
    let err = h.router.notify(
        h.now,
        Target::Session(session),
        mcp_proto::jsonrpc::Notification {
            method: "n/2".into(),
            params: None,
        },
    );
    assert_eq!(err, Err(SendError::QueueFull));
}

#[test]
fn a_queued_request_past_its_deadline_fails_and_is_never_sent() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize(V);
    let r = h
        .router
        .send_request(
            h.now,
            Target::Session(session),
            "roots/list",
            None,
            Some(std::time::Duration::from_secs(5)),
        )
        .unwrap();
    h.advance(std::time::Duration::from_secs(6));
    assert!(h.take_other().iter().any(|o| matches!(o, ServerOutput::ServerRequestFailed { request, error: ServerRequestError::Timeout } if *request == r)));
    let g = h.send(Req::get(&id));
    assert!(h.response(g).sse_messages().is_empty());
}

#[test]
fn s_get_6_responses_never_go_on_the_get_stream() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let g = h.send(Req::get(&id));
    let (_p, handle) = h.call(&id, V, 9, "x");
    h.reply(handle, "{}");
    assert!(h.response(g).sse_messages().is_empty());
}
