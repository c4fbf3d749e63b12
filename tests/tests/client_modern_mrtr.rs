//! Multi round-trip requests (MRTR, S-NEW-5): an `InputRequiredResult` hands its input
//! requests to the app as server requests (the same path the legacy server→client requests
//! take), the app's answers are collected — never POSTed — and the request is retried with
//! `inputResponses`, the exact `requestState`, and a new JSON-RPC id; rounds are bounded.

use std::time::Duration;

use bytes::Bytes;
use mcp_proto::client::{
    ApiMisuse, ClientConfig, ClientError, ClientEvent, HttpRequestKind, Limit, Message, RequestId,
    RequestResult, SendReceipt,
};
use mcp_proto::version::ProtocolVersion;
use mcp_tests::client_harness::{Harness, ModernServer, NetConfig, ServerConfig};
use serde_json::{Value, json};

fn modern(cfg: ClientConfig) -> Harness {
    let mut h = Harness::new(
        cfg.with_version(ProtocolVersion::V2026_07_28).with_seed(5),
        ServerConfig {
            issue_sessions: false,
            get_supported: false,
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.server.modern = Some(ModernServer::default());
    h
}

fn call(h: &mut Harness, id: i64, tool: &str) {
    h.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"a":1}}}))
        .unwrap();
}

fn posts(h: &Harness) -> Vec<Value> {
    h.intents_of(HttpRequestKind::Post)
        .iter()
        .map(|(_, r)| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

fn input_requests(h: &Harness) -> Vec<(RequestId, String)> {
    h.messages()
        .into_iter()
        .filter_map(|d| match d.message {
            Message::Request(r) => Some((r.id, r.method.to_string())),
            _ => None,
        })
        .collect()
}

#[test]
fn s_new_5_input_requests_reach_the_app_and_the_retry_carries_the_answers() {
    let mut h = modern(ClientConfig::new());
    call(&mut h, 7, "needs_input");
    h.run_for(Duration::from_millis(100));
    let asked = input_requests(&h);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].1, "sampling/createMessage");
    let result = h.result_of(7).expect("the final result");
    assert_eq!(result["answer"], json!({"ok": true}), "the app's answer");
    assert_eq!(result["state"], "st-1", "requestState echoed exactly");
    assert_eq!(result["arguments"], json!({"a": 1}), "the original params");
    let bodies = posts(&h);
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["id"], 7);
    assert_ne!(bodies[1]["id"], bodies[0]["id"], "a retry has a new id");
    assert!(bodies[0]["params"].get("inputResponses").is_none());
    assert!(bodies[0]["params"].get("requestState").is_none());
    assert_eq!(
        bodies[1]["params"]["inputResponses"]["q"],
        json!({"ok": true})
    );
    assert_eq!(bodies[1]["params"]["requestState"], "st-1");
    // The retry is a full modern request.
    assert_eq!(
        bodies[1]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    // The client never POSTs a JSON-RPC response.
    for b in &bodies {
        assert!(b.get("method").is_some(), "{b}");
    }
    assert_eq!(h.client.in_flight(), 0);
}

#[test]
fn s_new_5_a_result_with_only_request_state_is_retried_at_once() {
    let mut h = modern(ClientConfig::new());
    call(&mut h, 1, "state_only");
    h.run_for(Duration::from_millis(100));
    assert!(input_requests(&h).is_empty());
    assert_eq!(h.result_of(1).unwrap()["state"], "only");
    let bodies = posts(&h);
    assert_eq!(bodies.len(), 2);
    assert!(bodies[1]["params"].get("inputResponses").is_none());
}

#[test]
fn s_new_5_rounds_are_bounded_with_a_typed_error() {
    let mut h = modern(ClientConfig::new().with_max_input_rounds(3));
    call(&mut h, 1, "always_input");
    h.run_for(Duration::from_millis(200));
    assert!(matches!(
        &h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::TooManyInputRounds {
            limit: 3
        })]
    ));
    assert_eq!(posts(&h).len(), 4, "the first POST and three retries");
    assert_eq!(
        h.count_events(|e| matches!(
            e,
            ClientEvent::LimitExceeded {
                limit: Limit::InputRounds,
                ..
            }
        )),
        1
    );
    // Every retry had a distinct id.
    let ids: std::collections::BTreeSet<String> =
        posts(&h).iter().map(|b| b["id"].to_string()).collect();
    assert_eq!(ids.len(), 4);
}

#[test]
fn s_new_5_an_input_handler_error_fails_the_request() {
    let mut h = modern(ClientConfig::new());
    h.auto_answer = false;
    call(&mut h, 1, "needs_input");
    h.run_for(Duration::from_millis(50));
    let (iid, _) = input_requests(&h).pop().unwrap();
    let iid = serde_json::to_value(&iid).unwrap();
    let r =
        h.send(json!({"jsonrpc":"2.0","id":iid,"error":{"code":-32601,"message":"no handler"}}));
    assert_eq!(r, Ok(SendReceipt::Absorbed));
    h.run_for(Duration::from_millis(50));
    assert!(matches!(
        &h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::InputRequestFailed { key, code: -32601, .. })] if key == "q"
    ));
    assert_eq!(posts(&h).len(), 1, "no retry");
}

#[test]
fn s_new_5_s_new_6_cancelling_while_the_app_answers_stops_its_handlers() {
    let mut h = modern(ClientConfig::new());
    h.auto_answer = false;
    call(&mut h, 1, "needs_input");
    h.run_for(Duration::from_millis(50));
    let (iid, _) = input_requests(&h).pop().unwrap();
    h.client.cancel(h.now, &RequestId::Number(1), None).unwrap();
    h.drain();
    assert!(matches!(&h.outcomes_of(1)[..], [RequestResult::Cancelled]));
    // The handler is told, as a server would tell it.
    let cancelled: Vec<Value> = h
        .messages()
        .into_iter()
        .filter_map(|d| match d.message {
            Message::Notification(n) if &*n.method == "notifications/cancelled" => {
                serde_json::from_str(n.params.unwrap().get()).ok()
            }
            _ => None,
        })
        .collect();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(
        cancelled[0]["requestId"],
        serde_json::to_value(&iid).unwrap()
    );
    // A late answer is refused like any response in the modern era, and nothing is POSTed.
    let iid = serde_json::to_value(&iid).unwrap();
    assert!(matches!(
        h.send(json!({"jsonrpc":"2.0","id":iid,"result":{}})),
        Err(ApiMisuse::ResponseNotAllowed { .. })
    ));
    h.run_for(Duration::from_millis(50));
    assert_eq!(posts(&h).len(), 1);
    assert_eq!(h.client.in_flight(), 0);
}

#[test]
fn s_new_5_the_request_timeout_covers_every_round() {
    let mut h = modern(ClientConfig::new().with_request_timeout(Some(Duration::from_secs(2))));
    h.auto_answer = false;
    call(&mut h, 1, "needs_input");
    h.run_for(Duration::from_secs(3));
    assert!(matches!(
        &h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::TimedOut)]
    ));
}

#[test]
fn s_new_5_an_app_id_equal_to_a_retry_id_is_refused_while_in_use() {
    let mut h = modern(ClientConfig::new());
    h.auto_answer = false;
    call(&mut h, 1, "needs_input");
    h.run_for(Duration::from_millis(50));
    let (iid, _) = input_requests(&h).pop().unwrap();
    // The input request's id cannot be reused by the app while it is pending.
    let r = h.client.send(
        h.now,
        Bytes::from(
            json!({"jsonrpc":"2.0","id":serde_json::to_value(&iid).unwrap(),"method":"tools/list"})
                .to_string(),
        ),
    );
    assert!(matches!(r, Err(ApiMisuse::DuplicateRequestId { .. })));
}

#[test]
fn s_new_5_the_input_requests_of_one_round_are_bounded() {
    let mut h = modern(ClientConfig::new().with_max_input_requests(2));
    let many: serde_json::Map<String, Value> = (0..3)
        .map(|i| (format!("k{i}"), json!({"method": "roots/list"})))
        .collect();
    h.server.script(
        mcp_tests::client_harness::Match::Method("tools/call"),
        mcp_tests::client_harness::Reply::Json(json!({"jsonrpc":"2.0","id":1,"result":{
            "resultType":"input_required","inputRequests": many}})),
    );
    call(&mut h, 1, "whatever");
    h.run_for(Duration::from_millis(50));
    assert!(matches!(
        &h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::Protocol(
            mcp_proto::client::ServerFault::LimitExceeded {
                limit: Limit::InputRequests
            }
        ))]
    ));
    assert!(input_requests(&h).is_empty(), "none handed to the app");
    assert_eq!(h.client.in_flight(), 0);
}

#[test]
fn s_new_5_rounds_work_over_sse_replies_too() {
    let mut h = Harness::new(
        ClientConfig::new()
            .with_era(mcp_proto::client::EraMode::Auto)
            .with_seed(5),
        ServerConfig {
            issue_sessions: false,
            get_supported: false,
            sse_replies: true,
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.server.modern = Some(ModernServer::default());
    h.send(mcp_tests::client_harness::initialize_request(
        1,
        "2025-11-25",
    ))
    .unwrap();
    h.run_for(Duration::from_millis(100));
    assert_eq!(h.result_of(1).unwrap()["protocolVersion"], "2026-07-28");
    call(&mut h, 7, "needs_input");
    h.run_for(Duration::from_millis(100));
    assert_eq!(h.result_of(7).unwrap()["answer"], json!({"ok": true}));
    assert_eq!(posts(&h).len(), 3, "probe, call, retry");
    assert!(
        h.events().iter().all(|e| !matches!(
            e,
            ClientEvent::UnmatchedResponse { .. } | ClientEvent::InvalidMessage { .. }
        )),
        "{:?}",
        h.events()
    );
}
