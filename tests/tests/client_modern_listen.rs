//! The modern era's listening stream (S-NEW-9: `subscriptions/listen`, a POST whose SSE reply
//! stays open; S-NEW-1: no GET) with the legacy GET stream's reconnect discipline (backoff,
//! failure budget, 404/405 final), cancellation by closing streams (S-NEW-6), and broken
//! request streams that fail instead of resuming (S-NEW-3).

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use mcp_proto::client::{
    BackoffConfig, ClientConfig, ClientError, ClientEvent, FailureBudget, HttpRequestKind,
    ListenStop, Message, RequestResult, StreamRole,
};
use mcp_proto::version::ProtocolVersion;
use mcp_tests::client_harness::{
    Frame, Harness, Match, ModernServer, NetConfig, Reply, ServerConfig, SseEnd,
};
use serde_json::{Value, json};

fn modern(cfg: ClientConfig) -> Harness {
    let mut h = Harness::new(
        cfg.with_version(ProtocolVersion::V2026_07_28).with_seed(11),
        ServerConfig {
            issue_sessions: false,
            get_supported: false,
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.server.modern = Some(ModernServer::default());
    h.drain();
    h
}

/// A filter, no listening yet (the tests call `listen` once the fake server is modern).
fn listening(filter: Value) -> ClientConfig {
    ClientConfig::new().with_subscription_filter(filter)
}

fn listens(h: &Harness) -> Vec<(std::time::Instant, Value)> {
    h.intents_of(HttpRequestKind::Listen)
        .into_iter()
        .map(|(t, r)| {
            assert_eq!(r.method, Method::POST, "S-NEW-1: never a GET");
            assert!(r.headers.get("last-event-id").is_none(), "S-NEW-3");
            assert!(r.headers.get("mcp-session-id").is_none(), "S-NEW-2");
            assert_eq!(r.headers["mcp-method"], "subscriptions/listen");
            assert_eq!(r.headers["mcp-protocol-version"], "2026-07-28");
            (t, serde_json::from_slice(&r.body).unwrap())
        })
        .collect()
}

fn notifications(h: &Harness) -> Vec<String> {
    h.messages()
        .into_iter()
        .filter_map(|d| match d.message {
            Message::Notification(n) => Some(n.method.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn s_new_9_listening_is_a_subscriptions_listen_post_with_the_filter() {
    // The ModernServer's listen checks the mirrored headers and the _meta and acknowledges.
    let mut h = Harness::new(
        listening(json!({"toolsListChanged": true}))
            .with_version(ProtocolVersion::V2026_07_28)
            .with_seed(11),
        ServerConfig {
            issue_sessions: false,
            get_supported: false,
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.server.modern = Some(ModernServer::default());
    h.client.listen(h.now).unwrap();
    h.drain();
    h.run_for(Duration::from_millis(50));
    let l = listens(&h);
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].1["method"], "subscriptions/listen");
    assert_eq!(
        l[0].1["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert_eq!(
        l[0].1["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        notifications(&h),
        ["notifications/subscriptions/acknowledged"]
    );
    let parts = h.server.push_modern(
        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed",
        "params":{"_meta":{"io.modelcontextprotocol/subscriptionId": l[0].1["id"]}}}),
    );
    h.deliver(parts);
    h.run_for(Duration::from_millis(50));
    assert_eq!(
        notifications(&h).last().map(String::as_str),
        Some("notifications/tools/list_changed")
    );
    assert!(h.count_events(|e| matches!(e, ClientEvent::ListenOpened { .. })) == 1);
}

#[test]
fn s_new_1_without_a_filter_the_modern_era_has_nothing_to_listen_on() {
    let mut h = modern(ClientConfig::new().with_continuous_listening(true));
    h.run_for(Duration::from_secs(5));
    assert!(h.intents_of(HttpRequestKind::Listen).is_empty());
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::ListenUnsupported)),
        1
    );
}

#[test]
fn s_new_9_404_or_405_means_not_supported_and_is_never_retried() {
    for status in [404u16, 405] {
        let mut h = modern(listening(json!({"toolsListChanged": true})));
        h.server.script(
            Match::Method("subscriptions/listen"),
            Reply::Status(status, vec![], Bytes::new()),
        );
        h.client.listen(h.now).unwrap();
        h.drain();
        h.run_for(Duration::from_secs(600));
        assert_eq!(listens(&h).len(), 1, "{status}");
        assert_eq!(
            h.count_events(|e| matches!(e, ClientEvent::ListenUnsupported)),
            1
        );
    }
}

#[test]
fn s_new_9_a_stream_that_ends_after_its_acknowledgement_reconnects_with_a_new_id() {
    let mut h = modern(listening(json!({"resourcesListChanged": true})));
    let ack = json!({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{}}});
    for _ in 0..3 {
        h.server.script(
            Match::Method("subscriptions/listen"),
            Reply::Sse(vec![Frame::json(ack.clone())], SseEnd::Close),
        );
    }
    h.client.listen(h.now).unwrap();
    h.drain();
    h.run_for(Duration::from_secs(10));
    let l = listens(&h);
    assert!(l.len() >= 3, "{l:?}");
    let ids: std::collections::BTreeSet<String> =
        l.iter().map(|(_, b)| b["id"].to_string()).collect();
    assert_eq!(
        ids.len(),
        l.len(),
        "every subscriptions/listen has its own id"
    );
    // Progress resets the backoff: every reconnect is attempt 0, never sooner than the
    // minimum delay.
    let backoff = BackoffConfig::default();
    for w in l.windows(2) {
        assert!(w[1].0 - w[0].0 >= backoff.min_delay());
    }
    let attempts: Vec<u32> = h
        .events()
        .into_iter()
        .filter_map(|e| match e {
            ClientEvent::Reconnecting {
                role: StreamRole::Listen,
                attempt,
                ..
            } => Some(attempt),
            _ => None,
        })
        .take(2)
        .collect();
    assert_eq!(attempts, [0, 0]);
}

#[test]
fn s_new_9_failures_back_off_and_exhaust_the_budget() {
    let budget = FailureBudget {
        max_failures: 3,
        window: Duration::from_secs(300),
    };
    let mut h = modern(listening(json!({"toolsListChanged": true})).with_listen_budget(budget));
    for _ in 0..10 {
        h.server.script(
            Match::Method("subscriptions/listen"),
            Reply::Status(500, vec![], Bytes::new()),
        );
    }
    h.client.listen(h.now).unwrap();
    h.drain();
    h.run_for(Duration::from_secs(600));
    let l = listens(&h);
    assert_eq!(l.len(), 3, "three failures, then it gives up");
    for w in l.windows(2) {
        assert!(w[1].0 - w[0].0 >= BackoffConfig::default().min_delay());
    }
    assert!(h.events().contains(&ClientEvent::ListenGaveUp {
        reason: ListenStop::TooManyFailures { failures: 3 }
    }));
}

#[test]
fn s_new_9_a_graceful_end_is_recognised() {
    let mut h = modern(listening(json!({"toolsListChanged": true})));
    h.client.listen(h.now).unwrap();
    h.drain();
    h.run_for(Duration::from_millis(50));
    let id = listens(&h)[0].1["id"].clone();
    let parts = h.server.push_modern(
        json!({"jsonrpc":"2.0","id":id,"result":{"resultType":"complete",
        "_meta":{"io.modelcontextprotocol/subscriptionId": id}}}),
    );
    h.deliver(parts);
    h.run_for(Duration::from_millis(50));
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::SubscriptionEnded { .. })),
        1
    );
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::UnmatchedResponse { .. })),
        0
    );
}

#[test]
fn s_new_6_stop_listening_closes_the_stream_and_sends_nothing() {
    let mut h = modern(listening(json!({"toolsListChanged": true})));
    h.client.listen(h.now).unwrap();
    h.drain();
    h.run_for(Duration::from_millis(50));
    let stream = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    let before = h.server.received.len();
    h.client.stop_listening(h.now).unwrap();
    h.drain();
    h.run_for(Duration::from_secs(60));
    assert!(h.log.iter().any(|(_, s)| matches!(
        s,
        mcp_tests::client_harness::Seen::Abort(a) if *a == stream
    )));
    assert_eq!(
        h.server.received.len(),
        before,
        "no notifications/cancelled"
    );
}

#[test]
fn s_new_3_a_broken_request_stream_fails_and_the_app_reissues_with_a_new_id() {
    let mut h = modern(ClientConfig::new());
    h.server.script(
        Match::Method("tools/call"),
        Reply::Sse(
            vec![Frame {
                id: Some("e-1".into()),
                retry: Some(10),
                ..Frame::default()
            }],
            SseEnd::Close,
        ),
    );
    h.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}))
        .unwrap();
    h.run_for(Duration::from_secs(30));
    assert!(matches!(
        &h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::Protocol(_))]
    ));
    assert!(h.intents_of(HttpRequestKind::Resume).is_empty());
    // The app re-issues under a new id; the session accepts it and the server answers.
    h.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t"}}))
        .unwrap();
    h.run_for(Duration::from_millis(50));
    assert!(h.result_of(2).is_some());
}
