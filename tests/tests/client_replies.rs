//! Replies: 202 for notifications and responses (S-POST-7); one JSON body (S-POST-9), or a
//! batch only when 2025-03-26 was negotiated (S-POST-5, S-POST-6, G-8); an SSE stream that
//! carries requests and notifications before the response (S-POST-12). An unexpected status or
//! content type fails that request alone, with a typed error.

use std::time::Duration;

use mcp_proto::client::{ClientError, ClientEvent, Message, RequestResult, ServerFault};
use mcp_tests::client_harness::{Frame, Harness, Match, NetConfig, Reply, ServerConfig, SseEnd};
use serde_json::json;

fn failed(h: &Harness, id: i64) -> ClientError {
    let outs = h.outcomes_of(id);
    assert_eq!(outs.len(), 1, "{outs:?}");
    match &outs[0] {
        RequestResult::Failed(e) => e.clone(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn s_post_7_notifications_and_responses_get_202_and_no_outcome() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.send(json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}))
        .unwrap();
    h.send(json!({"jsonrpc":"2.0","id":"srv-9","result":{}}))
        .unwrap();
    h.run_for(Duration::from_millis(50));
    assert!(h.outcomes().iter().all(|o| o.id != "srv-9".into()));
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::PostRejected { .. })),
        0
    );
    // A rejected notification is an event (there is no outcome for a notification).
    h.server.script(
        Match::Method("notifications/progress"),
        Reply::Status(400, vec![], "bad".into()),
    );
    h.send(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{}}))
        .unwrap();
    h.run_for(Duration::from_millis(50));
    let rejected: Vec<_> = h
        .events()
        .into_iter()
        .filter(|e| matches!(e, ClientEvent::PostRejected { .. }))
        .collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
}

#[test]
fn s_post_9_json_reply_is_the_outcome() {
    let mut h = Harness::default_pair();
    h.initialize();
    let id = h.request("tools/list");
    h.run_for(Duration::from_millis(50));
    assert_eq!(h.result_of(id).unwrap()["echo"], "tools/list");
}

#[test]
fn s_post_12_sse_reply_delivers_requests_and_notifications_before_the_response() {
    let mut h = Harness::default_pair();
    h.auto_answer = false;
    h.initialize();
    h.server.script(
        Match::Method("tools/call"),
        Reply::Sse(
            vec![
                Frame::default(), // priming: id + empty data (S-POST-19)
                Frame::json(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}})),
                Frame::json(json!({"jsonrpc":"2.0","id":"s1","method":"roots/list"})),
                Frame {
                    event: Some("custom".into()),
                    data: "not json and not a message event".into(),
                    ..Frame::default()
                },
                Frame::json(json!({"jsonrpc":"2.0","id":101,"result":{"done":true}})),
            ],
            SseEnd::Close,
        ),
    );
    let id = h.request("tools/call");
    assert_eq!(id, 101);
    h.run_for(Duration::from_millis(50));
    assert_eq!(h.result_of(id).unwrap(), json!({"done":true}));
    let msgs = h.messages();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(matches!(msgs[0].message, Message::Notification(_)));
    assert!(matches!(msgs[1].message, Message::Request(_)));
    // They came on the request's own POST stream.
    let RequestResult::Response { stream, .. } = &h.outcomes_of(id)[0] else {
        panic!()
    };
    assert!(msgs.iter().all(|m| m.stream == *stream));
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::InvalidMessage { .. })),
        0,
        "priming and non-message events are skipped, not errors"
    );
}

#[test]
fn s_post_5_batch_reply_accepted_when_2025_03_26_was_negotiated() {
    let mut h = Harness::default_pair();
    h.initialize_with("2025-03-26");
    h.server.script(
        Match::Method("tools/list"),
        Reply::Json(json!([
            {"jsonrpc":"2.0","method":"notifications/message","params":{}},
            {"jsonrpc":"2.0","id":101,"result":{"tools":[]}}
        ])),
    );
    let id = h.request("tools/list");
    h.run_for(Duration::from_millis(50));
    assert_eq!(h.result_of(id).unwrap(), json!({"tools":[]}));
    assert_eq!(h.messages().len(), 1);
}

#[test]
fn s_post_6_batch_reply_refused_after_2025_06_18() {
    let mut h = Harness::default_pair();
    h.initialize_with("2025-06-18");
    h.server.script(
        Match::Method("tools/list"),
        Reply::Json(json!([{"jsonrpc":"2.0","id":101,"result":{}}])),
    );
    let id = h.request("tools/list");
    h.run_for(Duration::from_millis(50));
    assert!(matches!(
        failed(&h, id),
        ClientError::Protocol(ServerFault::BatchNotAllowed { .. })
    ));
}

#[test]
fn unexpected_status_fails_that_request_alone_with_its_body() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.server.script(
        Match::Method("tools/call"),
        Reply::Status(500, vec![], "boom".into()),
    );
    let bad = h.request("tools/call");
    let good = h.request("tools/list");
    h.run_for(Duration::from_millis(50));
    match failed(&h, bad) {
        ClientError::HttpStatus { status, body } => {
            assert_eq!(status.as_u16(), 500);
            assert_eq!(&body[..], b"boom");
        }
        other => panic!("{other:?}"),
    }
    assert!(h.result_of(good).is_some());
    assert!(h.client.is_ready());
}

#[test]
fn unexpected_content_type_and_202_to_a_request_are_typed_errors() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.server
        .script(Match::Method("a"), Reply::Raw("text/html", "<html>".into()));
    h.server.script(
        Match::Method("b"),
        Reply::Status(202, vec![], Default::default()),
    );
    let a = h.request("a");
    let b = h.request("b");
    h.run_for(Duration::from_millis(50));
    assert!(matches!(
        failed(&h, a),
        ClientError::Protocol(ServerFault::UnexpectedContentType { content_type: Some(ct) }) if ct == "text/html"
    ));
    assert!(matches!(
        failed(&h, b),
        ClientError::Protocol(ServerFault::UnexpectedStatus { status }) if status.as_u16() == 202
    ));
}

#[test]
fn a_json_body_without_the_response_or_not_json_rpc_fails_the_request() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.server.script(
        Match::Method("a"),
        Reply::Json(json!({"jsonrpc":"2.0","method":"notifications/message"})),
    );
    h.server.script(
        Match::Method("b"),
        Reply::Raw("application/json", "{nope".into()),
    );
    let a = h.request("a");
    let b = h.request("b");
    h.run_for(Duration::from_millis(50));
    assert!(matches!(
        failed(&h, a),
        ClientError::Protocol(ServerFault::MissingResponse)
    ));
    assert!(matches!(
        failed(&h, b),
        ClientError::Protocol(ServerFault::InvalidJsonRpc { .. })
    ));
}

#[test]
fn s_rpc_7_an_error_without_id_on_its_own_post_answers_that_request() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.server.script(
        Match::Method("a"),
        Reply::Json(json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}})),
    );
    let a = h.request("a");
    h.run_for(Duration::from_millis(50));
    let outs = h.outcomes_of(a);
    assert!(
        matches!(outs[..], [RequestResult::Response { .. }]),
        "{outs:?}"
    );
}

#[test]
fn json_replies_survive_any_chunking() {
    for seed in 1..20 {
        let mut h = Harness::new(
            Default::default(),
            ServerConfig {
                sse_replies: seed % 2 == 0,
                ..ServerConfig::default()
            },
            NetConfig {
                seed,
                ..NetConfig::default()
            },
        );
        h.initialize();
        let ids: Vec<i64> = (0..5).map(|_| h.request("echo")).collect();
        h.run_for(Duration::from_millis(100));
        for id in ids {
            assert_eq!(h.result_of(id).unwrap()["params"]["n"], id, "seed {seed}");
        }
    }
}
