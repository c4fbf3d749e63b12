//! Cancel and close: cancelling a request aborts its stream and POSTs
//! `notifications/cancelled` (S-POST-17, S-CANCEL-1); `initialize` cannot be cancelled
//! (S-CANCEL-2). `close()` aborts everything, sends DELETE with the session id (as mcp-go's
//! client does; S-SESS-8), tolerates 405 (S-SESS-9), then emits `Closed`; no intent after that.

use std::time::Duration;

use mcp_proto::client::{
    ApiMisuse, ClientConfig, ClientError, ClientEvent, CloseOutcome, HttpRequestKind, RequestResult,
};
use mcp_tests::client_harness::{Harness, NetConfig, Seen, ServerConfig, initialize_request};
use serde_json::json;

#[test]
fn s_post_17_cancel_aborts_the_stream_and_sends_notifications_cancelled() {
    let mut h = Harness::default_pair();
    h.initialize();
    let id = h.request("hang");
    let post = h.intents().pop().unwrap().stream;
    h.run_for(Duration::from_millis(20));
    h.client.cancel(h.now, &id.into(), Some("user")).unwrap();
    h.drain();
    assert!(
        h.log
            .iter()
            .any(|(_, s)| matches!(s, Seen::Abort(x) if *x == post))
    );
    h.run_for(Duration::from_millis(20));
    assert!(matches!(h.outcomes_of(id)[..], [RequestResult::Cancelled]));
    let cancel = h.server.received.last().unwrap();
    assert_eq!(cancel.rpc_method(), Some("notifications/cancelled"));
    let b = cancel.body.as_ref().unwrap();
    assert_eq!(b["params"]["requestId"], id);
    assert_eq!(b["params"]["reason"], "user");
    assert_eq!(cancel.header("mcp-session-id"), h.client.session_id());
    // Cancelling again: unknown.
    assert_eq!(
        h.client.cancel(h.now, &id.into(), None),
        Err(ApiMisuse::UnknownRequest { id: id.into() })
    );
}

#[test]
fn s_cancel_2_initialize_cannot_be_cancelled_and_queued_requests_cancel_silently() {
    let mut h = Harness::default_pair();
    h.send(initialize_request(1, "2025-11-25")).unwrap();
    assert_eq!(
        h.client.cancel(h.now, &1.into(), None),
        Err(ApiMisuse::CannotCancelInitialize)
    );
    // Queued (never sent): cancelled without a notification.
    h.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .unwrap();
    h.client.cancel(h.now, &2.into(), None).unwrap();
    h.drain();
    h.run_for(Duration::from_millis(100));
    assert!(matches!(h.outcomes_of(2)[..], [RequestResult::Cancelled]));
    assert!(h.server.received.iter().all(|r| !matches!(
        r.rpc_method(),
        Some("notifications/cancelled" | "tools/list")
    )));
}

#[test]
fn a_request_timeout_fails_and_cancels() {
    let mut h = Harness::new(
        ClientConfig::new().with_request_timeout(Some(Duration::from_secs(30))),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    let id = h.request("hang");
    h.run_for(Duration::from_secs(29));
    assert!(h.outcomes_of(id).is_empty());
    h.run_for(Duration::from_secs(2));
    assert!(matches!(
        h.outcomes_of(id)[..],
        [RequestResult::Failed(ClientError::TimedOut)]
    ));
    assert_eq!(
        h.server.received.last().unwrap().rpc_method(),
        Some("notifications/cancelled")
    );
}

/// The session's next deadline is the earliest request deadline (the adapters sleep until
/// `poll_timeout`, so a deadline it does not report never fires on a real clock), and a
/// request that got its answer leaves no deadline behind.
#[test]
fn poll_timeout_reports_the_earliest_request_deadline_and_forgets_answered_ones() {
    let mut h = Harness::new(
        ClientConfig::new().with_request_timeout(Some(Duration::from_secs(30))),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    let idle = h.client.poll_timeout();
    let sent_at = h.now;
    let first = h.request("hang");
    h.run_for(Duration::from_secs(5));
    let _second = h.request("hang");
    h.run_for(Duration::from_millis(10));
    let next = h.client.poll_timeout().expect("a request deadline");
    assert!(
        next <= sent_at + Duration::from_secs(30),
        "{next:?} is later than the first request's deadline"
    );
    h.run_for(Duration::from_secs(26));
    assert!(matches!(
        h.outcomes_of(first)[..],
        [RequestResult::Failed(ClientError::TimedOut)]
    ));
    // The second one's deadline is next now, 5 s after the first's.
    let next = h.client.poll_timeout().expect("the second deadline");
    assert!(next > sent_at + Duration::from_secs(30), "{next:?}");
    h.run_for(Duration::from_secs(6));
    assert_eq!(h.client.poll_timeout(), idle, "no request deadline is left");
}

#[test]
fn s_sess_8_close_aborts_everything_deletes_and_emits_closed_last() {
    let mut h = Harness::new(
        ClientConfig::new().with_continuous_listening(true),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    let sid = h.client.session_id().unwrap().to_string();
    let a = h.request("hang");
    h.send(json!({"jsonrpc":"2.0","method":"notifications/x"}))
        .unwrap();
    h.run_for(Duration::from_millis(20));
    let before = h.log.len();
    h.client.close(h.now);
    h.drain();
    h.run_for(Duration::from_secs(10));
    assert!(matches!(
        h.outcomes_of(a)[..],
        [RequestResult::Failed(ClientError::Closed)]
    ));
    let after: Vec<_> = h.log[before..].iter().map(|(_, s)| s.clone()).collect();
    let https: Vec<_> = after
        .iter()
        .filter_map(|s| match s {
            Seen::Http(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(https.len(), 1, "only the DELETE: {https:?}");
    assert_eq!(https[0].kind, HttpRequestKind::Delete);
    assert_eq!(https[0].method, http::Method::DELETE);
    assert_eq!(https[0].headers["mcp-session-id"], sid.as_str());
    assert!(!h.server.has_session(&sid));
    assert!(after.iter().filter(|s| matches!(s, Seen::Abort(_))).count() >= 2);
    match after.last().unwrap() {
        Seen::Event(ClientEvent::Closed {
            reason: CloseOutcome::Deleted { status },
        }) => assert_eq!(status.as_u16(), 200),
        other => panic!("{other:?}"),
    }
    assert!(h.client.is_closed());
    assert_eq!(h.client.poll_timeout(), None);
    assert_eq!(
        h.send(json!({"jsonrpc":"2.0","id":5,"method":"x"})),
        Err(ApiMisuse::Closed)
    );
    assert_eq!(h.client.listen(h.now), Err(ApiMisuse::Closed));
    h.client.close(h.now); // no-op
    h.drain();
}

#[test]
fn s_sess_9_a_405_to_delete_is_tolerated() {
    let mut h = Harness::new(
        ClientConfig::new(),
        ServerConfig {
            delete_supported: false,
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.initialize();
    h.client.close(h.now);
    h.drain();
    h.run_for(Duration::from_secs(1));
    assert!(h.events().contains(&ClientEvent::Closed {
        reason: CloseOutcome::Deleted {
            status: http::StatusCode::METHOD_NOT_ALLOWED
        }
    }));
}

#[test]
fn close_gives_up_on_a_delete_that_never_answers() {
    let mut h = Harness::new(
        ClientConfig::new().with_close_timeout(Duration::from_secs(5)),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    h.client.close(h.now);
    let del = h.client.poll_output().unwrap();
    let mcp_proto::client::Output::Http(del) = del else {
        panic!()
    };
    // Drop the DELETE on the floor.
    let _ = del;
    h.run_for(Duration::from_secs(4));
    assert!(!h.client.is_closed());
    h.run_for(Duration::from_secs(2));
    assert!(h.client.is_closed());
    assert!(h.events().contains(&ClientEvent::Closed {
        reason: CloseOutcome::DeleteTimedOut
    }));
}
