//! Server→client requests (sampling, elicitation, roots, ping; S-S2C-1) arriving on any stream
//! are delivered with the stream they came on (S-S2C-2); the app's response is POSTed back and
//! answered 202 (S-S2C-3).

use std::time::Duration;

use mcp_proto::client::{ClientConfig, ClientEvent, HttpRequestKind, Message, RequestResult};
use mcp_tests::client_harness::{Harness, NetConfig, ServerConfig};
use serde_json::json;

#[test]
fn s_s2c_2_a_request_on_the_post_stream_is_answered_and_the_original_completes() {
    let mut h = Harness::default_pair();
    h.initialize();
    let id = h.request("ask"); // the server asks sampling/createMessage before answering
    h.run_for(Duration::from_millis(100));
    let msgs = h.messages();
    assert_eq!(msgs.len(), 1);
    let Message::Request(r) = &msgs[0].message else {
        panic!("{msgs:?}")
    };
    assert_eq!(&*r.method, "sampling/createMessage");
    let post = h
        .intents_of(HttpRequestKind::Post)
        .into_iter()
        .find(|(_, p)| p.body.windows(5).any(|w| w == b"\"ask\""))
        .unwrap()
        .1
        .stream;
    assert_eq!(msgs[0].stream, post);
    // The harness answered it (auto_answer): a POST of a response, 202, no PostRejected.
    let answer = h
        .server
        .received
        .iter()
        .find(|r| r.body.as_ref().is_some_and(|b| b.get("result").is_some()))
        .unwrap();
    assert_eq!(answer.body.as_ref().unwrap()["id"], "srv-1");
    assert_eq!(answer.header("mcp-session-id"), h.client.session_id());
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::PostRejected { .. })),
        0
    );
    // The server then answered the original request on its stream.
    assert_eq!(h.result_of(id).unwrap()["answer"], json!({"ok": true}));
    match &h.outcomes_of(id)[..] {
        [RequestResult::Response { stream, .. }] => assert_eq!(*stream, post),
        other => panic!("{other:?}"),
    }
}

#[test]
fn requests_on_the_get_stream_are_delivered_with_the_get_stream() {
    let mut h = Harness::new(
        ClientConfig::new().with_continuous_listening(true),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.auto_answer = false;
    h.initialize();
    let get = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    for (i, m) in [
        "ping",
        "roots/list",
        "elicitation/create",
        "sampling/createMessage",
    ]
    .iter()
    .enumerate()
    {
        h.push_listen(json!({"jsonrpc":"2.0","id":format!("g{i}"),"method":m}));
    }
    h.run_for(Duration::from_millis(50));
    let msgs = h.messages();
    assert_eq!(msgs.len(), 4);
    for m in &msgs {
        assert_eq!(m.stream, get);
        assert!(matches!(m.message, Message::Request(_)));
    }
    // The app answers one; it is POSTed (not sent on the GET) and accepted.
    h.send(json!({"jsonrpc":"2.0","id":"g0","result":{}}))
        .unwrap();
    h.run_for(Duration::from_millis(50));
    let last = h.intents().pop().unwrap();
    assert_eq!(last.kind, HttpRequestKind::Post);
    assert!(h.outcomes().iter().all(|o| o.id != "g0".into()));
}
