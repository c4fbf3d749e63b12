//! Session expiry: a 404 to a request that carried a session id → `SessionExpired`, id cleared
//! (S-SESS-6, S-SESS-7; the TypeScript and Python SDK clients do not
//! re-initialize, so a server restart breaks them). Re-initialization is automatic by default:
//! the saved initialize is replayed, then each request that failed with that 404 is retried
//! once, and the app sees `Reinitialized`. It can be turned off.

use std::time::Duration;

use mcp_proto::client::{ClientConfig, ClientError, ClientEvent, HttpRequestKind, RequestResult};
use mcp_tests::client_harness::{Harness, Match, NetConfig, Part, Reply, ServerConfig};

/// How many `initialize` requests the server received.
fn inits(h: &Harness) -> usize {
    h.server
        .received
        .iter()
        .filter(|r| r.rpc_method() == Some("initialize"))
        .count()
}

fn expired(h: &Harness) -> usize {
    h.count_events(|e| matches!(e, ClientEvent::SessionExpired { .. }))
}

#[test]
fn s_sess_7_restart_expires_the_session_reinitializes_and_retries_once() {
    let mut h = Harness::new(
        ClientConfig::new()
            .with_continuous_listening(true)
            .with_seed(5),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    let old = h.client.session_id().unwrap().to_string();
    h.restart_server();
    h.run_for(Duration::from_millis(20));
    let a = h.request("tools/list");
    let b = h.request("tools/call");
    h.run_for(Duration::from_secs(5));
    // Both requests succeeded after the replay, each seen by the server twice at most.
    assert!(h.result_of(a).is_some(), "{:?}", h.outcomes_of(a));
    assert!(h.result_of(b).is_some(), "{:?}", h.outcomes_of(b));
    // One SessionExpired for the one expired id, however many 404s met it.
    let ev = h.events();
    let exp: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            ClientEvent::SessionExpired { session_id } => Some(session_id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(exp, std::slice::from_ref(&old));
    assert!(
        ev.iter()
            .any(|e| matches!(e, ClientEvent::Reinitialized { .. }))
    );
    let new = h.client.session_id().unwrap().to_string();
    assert_ne!(new, old);
    assert!(h.server.has_session(&new));
    // The replayed initialize carried no session id (S-SESS-7) and a session-owned id.
    let inits: Vec<_> = h
        .server
        .received
        .iter()
        .filter(|r| r.rpc_method() == Some("initialize"))
        .collect();
    assert_eq!(inits.len(), 2);
    assert!(inits[1].header("mcp-session-id").is_none());
    assert!(
        inits[1].body.as_ref().unwrap()["id"]
            .as_str()
            .unwrap()
            .starts_with("mcp-proto-reinit-")
    );
    // Every request after the new session carries the new id; the listening stream reopened.
    let last_listen = h.intents_of(HttpRequestKind::Listen).pop().unwrap().1;
    assert_eq!(last_listen.headers["mcp-session-id"], new.as_str());
    // The app never saw the internal initialize's response.
    assert_eq!(h.outcomes().len(), 3, "{:?}", h.outcomes());
}

#[test]
fn a_request_that_404s_twice_fails_with_session_expired() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.restart_server();
    // The retry after re-initialization also 404s.
    h.server.script(
        Match::Method("tools/call"),
        Reply::Status(404, vec![], Default::default()),
    );
    h.server.script(
        Match::Method("tools/call"),
        Reply::Status(404, vec![], Default::default()),
    );
    let a = h.request("tools/call");
    h.run_for(Duration::from_secs(2));
    assert!(matches!(
        h.outcomes_of(a)[..],
        [RequestResult::Failed(ClientError::SessionExpired)]
    ));
    let calls = h
        .server
        .received
        .iter()
        .filter(|r| r.rpc_method() == Some("tools/call"))
        .count();
    assert_eq!(calls, 2, "retried exactly once");
}

#[test]
fn with_reinitialization_off_the_request_fails_and_the_app_initializes() {
    let mut h = Harness::new(
        ClientConfig::new().with_auto_reinitialize(false),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    h.restart_server();
    let a = h.request("tools/list");
    h.run_for(Duration::from_secs(1));
    assert!(matches!(
        h.outcomes_of(a)[..],
        [RequestResult::Failed(ClientError::SessionExpired)]
    ));
    assert_eq!(expired(&h), 1);
    assert_eq!(h.client.session_id(), None);
    assert!(!h.client.is_ready());
    assert_eq!(inits(&h), 1);
    // Messages wait for the app's own initialize.
    let b = h.request("tools/list");
    h.run_for(Duration::from_secs(1));
    assert!(h.outcomes_of(b).is_empty());
    h.send(mcp_tests::client_harness::initialize_request(
        7,
        "2025-11-25",
    ))
    .unwrap();
    h.run_for(Duration::from_secs(1));
    assert!(h.result_of(b).is_some());
}

#[test]
fn a_404_on_the_get_stream_expires_the_session_too() {
    let mut h = Harness::new(
        ClientConfig::new().with_continuous_listening(true),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    h.restart_server(); // breaks the GET; its reconnect meets 404
    h.run_for(Duration::from_secs(5));
    assert_eq!(expired(&h), 1);
    assert!(h.count_events(|e| matches!(e, ClientEvent::Reinitialized { .. })) == 1);
    assert!(h.client.is_ready());
    // No reconnect storm: one GET per session, plus the reconnect that found the 404.
    assert_eq!(h.intents_of(HttpRequestKind::Listen).len(), 3);
}

#[test]
fn a_server_that_404s_every_initialized_does_not_loop_forever() {
    let mut h = Harness::default_pair();
    h.initialize();
    for _ in 0..20 {
        h.server.script(
            Match::Method("notifications/initialized"),
            Reply::Status(404, vec![], Default::default()),
        );
    }
    h.restart_server();
    h.request("x");
    h.run_for(Duration::from_secs(60));
    let sent = inits(&h);
    assert!(sent <= 1 + 3, "{sent}");
}

#[test]
fn a_reinitialization_that_never_answers_fails_the_waiting_requests() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.restart_server();
    h.server.script(Match::Method("initialize"), Reply::Hang);
    let a = h.request("tools/list");
    h.run_for(Duration::from_secs(29));
    assert!(h.outcomes_of(a).is_empty());
    h.run_for(Duration::from_secs(2));
    assert!(matches!(
        h.outcomes_of(a)[..],
        [RequestResult::Failed(ClientError::SessionExpired)]
    ));
    assert!(h.events().iter().any(|e| matches!(
        e,
        ClientEvent::ReinitializeFailed {
            error: ClientError::TimedOut
        }
    )));
    assert!(!h.client.is_ready());
}

#[test]
fn a_late_404_to_a_request_of_the_previous_session_does_not_expire_the_current_one() {
    // Session expiry (MCP 2025-11-25, basic/transports, session management): a 404 ends the
    // session whose id the request carried, and only that one.
    let mut h = Harness::default_pair();
    h.initialize();
    let old = h.client.session_id().unwrap().to_string();
    h.server.script(Match::Method("slow"), Reply::Hang);
    let slow = h.request("slow");
    h.run_for(Duration::from_millis(20));
    let slow_stream = h
        .intents_of(HttpRequestKind::Post)
        .into_iter()
        .rev()
        .find(|(_, r)| {
            serde_json::from_slice::<serde_json::Value>(&r.body)
                .ok()
                .unwrap()["id"]
                == slow
        })
        .unwrap()
        .1;
    assert_eq!(slow_stream.headers["mcp-session-id"], old.as_str());
    // The server restarts; the next request finds out and the client re-initializes.
    h.restart_server();
    let a = h.request("tools/list");
    h.run_for(Duration::from_secs(2));
    assert!(h.result_of(a).is_some(), "{:?}", h.outcomes_of(a));
    let new = h.client.session_id().unwrap().to_string();
    assert_ne!(new, old);
    assert_eq!(expired(&h), 1);
    // Only now does the 404 to the old session's request arrive.
    h.deliver(vec![
        (
            slow_stream.stream,
            Part::Head(http::StatusCode::NOT_FOUND, http::HeaderMap::new()),
        ),
        (slow_stream.stream, Part::End),
    ]);
    h.run_for(Duration::from_secs(2));
    assert_eq!(expired(&h), 1, "{:?}", h.events());
    assert_eq!(h.client.session_id(), Some(new.as_str()));
    assert!(h.client.is_ready());
    let b = h.request("tools/list");
    h.run_for(Duration::from_secs(1));
    assert!(h.result_of(b).is_some(), "{:?}", h.outcomes_of(b));
    assert_eq!(inits(&h), 2);
}

#[test]
fn after_a_failed_reinitialization_the_next_request_reinitializes_instead_of_waiting() {
    // A re-initialization that meets a transport failure (a pooled connection to the
    // server's previous process, say) fails the request it was for; the next request must
    // start a new one and succeed, not wait forever for an `initialize` nobody will send.
    let mut h = Harness::default_pair();
    h.initialize();
    h.restart_server();
    h.server.script(Match::Method("initialize"), Reply::Fail);
    let a = h.request("tools/list");
    h.run_for(Duration::from_secs(5));
    assert!(matches!(
        h.outcomes_of(a)[..],
        [RequestResult::Failed(ClientError::SessionExpired)]
    ));
    let b = h.request("tools/list");
    h.run_for(Duration::from_secs(5));
    assert!(
        matches!(h.outcomes_of(b)[..], [RequestResult::Response { .. }]),
        "{:?}",
        h.outcomes_of(b)
    );
    assert!(h.client.is_ready());
}

#[test]
fn when_no_reinitialization_is_left_a_request_without_a_session_fails_at_once() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.restart_server();
    // Every re-initialization fails: the streak bound ends them, then requests fail fast.
    for _ in 0..4 {
        h.server.script(Match::Method("initialize"), Reply::Fail);
    }
    for _ in 0..3 {
        let r = h.request("tools/list");
        h.run_for(Duration::from_secs(5));
        assert!(matches!(
            h.outcomes_of(r)[..],
            [RequestResult::Failed(ClientError::SessionExpired)]
        ));
    }
    let inits_before = inits(&h);
    let last = h.request("tools/list");
    h.run_for(Duration::from_millis(10));
    assert!(
        matches!(
            h.outcomes_of(last)[..],
            [RequestResult::Failed(ClientError::SessionExpired)]
        ),
        "fails at once, never waits: {:?}",
        h.outcomes_of(last)
    );
    let inits_after = inits(&h);
    assert_eq!(inits_before, inits_after, "no more re-initializations");
}
