//! Sessions: creation from `initialize` with an injected id generator, 400 without an id,
//! 404 for unknown / terminated ids, DELETE, stateless mode, the session cap (S-SESS-*).

use http::{Method, StatusCode};
use mcp_proto::server::{
    CloseReason, SendError, ServerConfig, ServerOutput, Target, is_valid_session_id,
};
use mcp_tests::server_harness::{Harness, Req, init_body, init_result};

const V: &str = "2025-11-25";

#[test]
fn s_sess_1_initialize_creates_a_session_from_the_injected_generator() {
    let mut n = 0;
    let cfg = ServerConfig::default().with_session_ids(move || {
        n += 1;
        format!("csprng-{n:032x}")
    });
    let mut h = Harness::new(cfg);
    let (id, session) = h.initialize(V);
    assert_eq!(id, format!("csprng-{:032x}", 1));
    assert!(is_valid_session_id(&id));
    assert_eq!(h.router.session_id(session), Some(id.as_str()));
    assert_eq!(h.router.session_by_id(&id), Some(session));
}

#[test]
fn s_sess_3_a_generator_producing_invalid_ids_gets_500_not_a_bad_header() {
    let mut h = Harness::new(ServerConfig::default().with_session_ids(|| "has space".to_owned()));
    let s = h.send(Req::post(&init_body(1, V)));
    assert_eq!(h.response(s).status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(h.router.session_count(), 0);
    assert!(h.next_request().is_none());
}

#[test]
fn s_sess_1_only_the_initialize_answer_carries_the_id() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 2, "ping");
    h.reply(handle, "{}");
    assert_eq!(h.response(s).header("mcp-session-id"), None);
}

#[test]
fn s_sess_5_request_without_session_id_is_400() {
    let mut h = Harness::new(ServerConfig::default());
    let _ = h.initialize(V);
    let s = h.send(Req::post(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    ));
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Mcp-Session-Id")
    );
    assert!(h.next_request().is_none());
}

#[test]
fn s_sess_6_unknown_session_is_404() {
    let mut h = Harness::new(ServerConfig::default());
    for req in [
        Req::post(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).session("nope"),
        Req::get("nope"),
        Req::delete("nope"),
        Req::post("{}").session("bad id"),
    ] {
        let s = h.send(req);
        assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
    }
}

#[test]
fn s_sess_8_delete_terminates_then_404() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize(V);
    let d = h.send(Req::delete(&id).version(V));
    assert_eq!(h.response(d).status(), StatusCode::OK);
    let closed = h.take_other();
    assert!(closed.iter().any(|o| matches!(o, ServerOutput::SessionClosed { session: s, reason: CloseReason::Deleted } if *s == session)));
    let s = h.post_in(&id, V, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
    assert_eq!(h.router.session_id(session), None);
}

#[test]
fn s_sess_6_delete_cancels_handlers_and_ends_streams() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 2, "tools/call");
    let g = h.send(Req::get(&id));
    h.send(Req::delete(&id));
    assert!(h.response(g).ended);
    let r = h.response(s);
    assert!(r.ended);
    assert_eq!(
        r.status(),
        StatusCode::NOT_FOUND,
        "a pending JSON answer still ends well-formed"
    );
    let other = h.take_other();
    assert!(
        other
            .iter()
            .any(|o| matches!(o, ServerOutput::Cancelled { handle: x, .. } if *x == handle))
    );
    assert_eq!(
        h.router.respond(
            h.now,
            handle,
            mcp_proto::jsonrpc::Outcome::Result(mcp_tests::server_harness::raw("{}"))
        ),
        Err(SendError::UnknownHandle)
    );
}

#[test]
fn s_sess_9_delete_disabled_is_405() {
    let mut h = Harness::new(ServerConfig::default().with_delete(false));
    let (id, _) = h.initialize(V);
    let d = h.send(Req::delete(&id));
    let r = h.response(d);
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(r.header("allow").is_some());
    assert_eq!(h.router.session_count(), 1);
}

#[test]
fn seed_with_stateless_no_ids_get_and_delete_405() {
    let mut h = Harness::new(ServerConfig::default().with_stateless(true));
    let s = h.send(Req::post(&init_body(1, V)));
    let (handle, session, _) = h.expect_request();
    assert_eq!(session, None);
    h.reply(handle, &init_result(V));
    assert_eq!(h.response(s).header("mcp-session-id"), None);
    assert_eq!(h.router.session_count(), 0);
    // Any request works without a session id.
    let s = h.send(Req::post(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    ));
    let (handle, _, _) = h.expect_request();
    h.reply(handle, "{}");
    assert_eq!(h.response(s).status(), StatusCode::OK);
    for req in [
        Req::new(Method::GET, "/mcp").header("accept", "text/event-stream"),
        Req::new(Method::DELETE, "/mcp"),
    ] {
        let s = h.send(req);
        assert_eq!(h.response(s).status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}

#[test]
fn peers_11_stateless_server_to_client_requests_fail_at_once() {
    let mut h = Harness::new(ServerConfig::default().with_stateless(true));
    h.send(Req::post(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call"}"#,
    ));
    let (handle, _, _) = h.expect_request();
    let err = h
        .router
        .send_request(
            h.now,
            Target::Request(handle),
            "sampling/createMessage",
            None,
            None,
        )
        .unwrap_err();
    assert_eq!(err, SendError::Stateless);
}

#[test]
fn max_sessions_cap_is_503_and_frees_up() {
    let mut h = Harness::new(ServerConfig::default().with_max_sessions(2));
    let (a, _) = h.initialize(V);
    let _ = h.initialize(V);
    let s = h.send(Req::post(&init_body(1, V)));
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.json()["error"]["message"].is_string());
    h.send(Req::delete(&a));
    let _ = h.initialize(V);
    assert_eq!(h.router.session_count(), 2);
}

#[test]
fn default_session_limits() {
    let c = ServerConfig::default();
    assert_eq!(c.limits.max_sessions, 10_000);
    assert_eq!(
        c.session_idle_ttl,
        Some(std::time::Duration::from_secs(1800))
    );
}

#[test]
fn initialize_answered_with_an_error_ends_the_session_without_an_id() {
    let mut h = Harness::new(ServerConfig::default());
    let s = h.send(Req::post(&init_body(1, V)));
    let (handle, session, _) = h.expect_request();
    h.router
        .respond(
            h.now,
            handle,
            mcp_proto::jsonrpc::Outcome::Error(mcp_proto::jsonrpc::ErrorObject {
                code: -32602,
                message: "Unsupported protocol version".into(),
                data: None,
                extra: Default::default(),
            }),
        )
        .unwrap();
    h.pump();
    let r = h.response(s);
    assert_eq!(r.header("mcp-session-id"), None);
    assert_eq!(r.json()["error"]["code"], -32602);
    assert_eq!(h.router.session_id(session.unwrap()), None);
}

#[test]
fn s_sess_7_reinitialize_after_404_gets_a_new_session() {
    let mut h = Harness::new(ServerConfig::default());
    let (a, _) = h.initialize(V);
    h.send(Req::delete(&a));
    let (b, _) = h.initialize(V);
    assert_ne!(a, b);
}

#[test]
fn shutdown_ends_everything_well_formed() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (pending, handle) = h.call(&id, V, 2, "slow");
    let g = h.send(Req::get(&id));
    let reading = h.send_head(&Req::post("{").session(&id));
    h.router.shutdown(h.now);
    h.pump();
    assert_eq!(h.response(pending).status(), StatusCode::NOT_FOUND);
    assert!(h.response(pending).ended && h.response(g).ended);
    assert_eq!(
        h.response(reading).status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    let other = h.take_other();
    assert!(
        other
            .iter()
            .any(|o| matches!(o, ServerOutput::Cancelled { handle: x, .. } if *x == handle))
    );
    assert!(other.iter().any(|o| matches!(
        o,
        ServerOutput::SessionClosed {
            reason: CloseReason::Shutdown,
            ..
        }
    )));
    assert_eq!(h.router.session_count(), 0);
    assert_eq!(h.router.poll_timeout(), None);
}
