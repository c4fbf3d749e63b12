//! Eras: the negotiated (or configured) version selects behaviour, and nothing assumes a
//! session. In 2026-07-28 there is no GET stream (S-NEW-1), no session or DELETE (S-NEW-2),
//! no resumption (S-NEW-3), no client responses (S-NEW-5), cancellation is dropping the stream
//! (S-NEW-6), and `MCP-Protocol-Version` is on every POST (S-NEW-7).

use std::time::Duration;

use mcp_proto::client::{
    ApiMisuse, ClientConfig, ClientError, ClientEvent, CloseOutcome, HttpRequestKind, RequestResult,
};
use mcp_proto::version::ProtocolVersion;
use mcp_tests::client_harness::{Frame, Harness, Match, NetConfig, Reply, ServerConfig, SseEnd};
use serde_json::json;

fn modern() -> Harness {
    Harness::new(
        ClientConfig::new()
            .with_version(ProtocolVersion::V2026_07_28)
            .with_continuous_listening(true),
        ServerConfig {
            issue_sessions: false,
            get_supported: false,
            ..ServerConfig::default()
        },
        NetConfig::default(),
    )
}

#[test]
fn s_new_1_no_get_stream_and_s_new_7_version_on_every_post() {
    let mut h = modern();
    assert!(h.client.is_ready());
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::ListenUnsupported)),
        1
    );
    let id = h.request("tools/list");
    h.run_for(Duration::from_millis(50));
    assert!(h.result_of(id).is_some());
    assert!(h.intents_of(HttpRequestKind::Listen).is_empty());
    for i in h.intents() {
        assert_eq!(i.headers["mcp-protocol-version"], "2026-07-28");
        assert!(i.headers.get("mcp-session-id").is_none());
    }
}

#[test]
fn s_new_5_s_new_6_no_responses_and_cancel_is_dropping_the_stream() {
    let mut h = modern();
    assert!(matches!(
        h.send(json!({"jsonrpc":"2.0","id":"x","result":{}})),
        Err(ApiMisuse::ResponseNotAllowed { .. })
    ));
    let id = h.request("hang");
    h.run_for(Duration::from_millis(20));
    let n = h.server.received.len();
    h.client.cancel(h.now, &id.into(), None).unwrap();
    h.drain();
    h.run_for(Duration::from_millis(50));
    assert!(matches!(h.outcomes_of(id)[..], [RequestResult::Cancelled]));
    assert_eq!(h.server.received.len(), n, "no notifications/cancelled");
}

#[test]
fn s_new_3_a_broken_stream_fails_the_request_and_close_sends_no_delete() {
    let mut h = modern();
    h.server.script(
        Match::Method("tools/call"),
        Reply::Sse(vec![Frame::default()], SseEnd::Reset),
    );
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(30));
    assert!(matches!(
        h.outcomes_of(id)[..],
        [RequestResult::Failed(ClientError::Transport(_))]
    ));
    assert!(h.intents_of(HttpRequestKind::Resume).is_empty());
    h.client.close(h.now);
    h.drain();
    assert!(h.intents_of(HttpRequestKind::Delete).is_empty());
    assert!(h.events().contains(&ClientEvent::Closed {
        reason: CloseOutcome::NoSession
    }));
}
