//! Limits: max SSE event size, max JSON body, max concurrent in-flight requests, max queued
//! messages — configurable, safe defaults, typed errors and `LimitExceeded` events.

use std::time::Duration;

use mcp_proto::client::{
    ApiMisuse, ClientConfig, ClientError, ClientEvent, HttpRequestKind, Limit, Limits,
    RequestResult, ServerFault,
};
use mcp_tests::client_harness::{Frame, Harness, Match, NetConfig, Reply, ServerConfig, SseEnd};
use serde_json::json;

fn small(limits: Limits) -> Harness {
    let mut h = Harness::new(
        ClientConfig::new()
            .with_limits(limits)
            .with_continuous_listening(true),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    h
}

fn limit_events(h: &Harness, l: Limit) -> usize {
    h.count_events(|e| matches!(e, ClientEvent::LimitExceeded { limit, .. } if *limit == l))
}

#[test]
fn defaults_are_bounded() {
    let l = Limits::default();
    assert_eq!(l.max_sse_event_bytes, 8 << 20);
    assert_eq!(l.max_json_body_bytes, 8 << 20);
    assert_eq!(l.max_in_flight_requests, 64);
    assert!(l.max_queued_messages > 0 && l.max_error_body_bytes > 0);
}

#[test]
fn an_sse_event_over_the_limit_fails_the_request_and_aborts_its_stream() {
    let mut h = small(Limits {
        max_sse_event_bytes: 1024,
        ..Limits::default()
    });
    h.server.script(
        Match::Method("big"),
        Reply::Sse(
            vec![Frame::json(
                json!({"jsonrpc":"2.0","id":101,"result":{"x":"y".repeat(4000)}}),
            )],
            SseEnd::Open,
        ),
    );
    let id = h.request("big");
    assert_eq!(id, 101);
    h.run_for(Duration::from_secs(1));
    assert!(
        matches!(
            h.outcomes_of(id)[..],
            [RequestResult::Failed(ClientError::Protocol(
                ServerFault::LimitExceeded {
                    limit: Limit::SseEvent
                }
            ))] | [RequestResult::Failed(ClientError::Protocol(
                ServerFault::StreamEndedWithoutResponse
            ))]
        ),
        "{:?}",
        h.outcomes_of(id)
    );
    assert!(limit_events(&h, Limit::SseEvent) >= 1);
    // An oversized event on the GET stream is a listen failure, not a crash.
    h.push_listen(json!({"jsonrpc":"2.0","method":"n","params":{"x":"y".repeat(4000)}}));
    h.run_for(Duration::from_secs(5));
    assert!(limit_events(&h, Limit::SseEvent) >= 2);
    assert!(
        h.intents_of(HttpRequestKind::Listen).len() >= 2,
        "reconnected"
    );
}

#[test]
fn a_json_body_over_the_limit_fails_the_request() {
    let mut h = small(Limits {
        max_json_body_bytes: 2048,
        ..Limits::default()
    });
    h.server.script(
        Match::Method("big"),
        Reply::Json(json!({"jsonrpc":"2.0","id":101,"result":{"x":"y".repeat(4000)}})),
    );
    let id = h.request("big");
    h.run_for(Duration::from_secs(1));
    assert!(matches!(
        h.outcomes_of(id)[..],
        [RequestResult::Failed(ClientError::Protocol(
            ServerFault::LimitExceeded {
                limit: Limit::JsonBody
            }
        ))]
    ));
    assert_eq!(limit_events(&h, Limit::JsonBody), 1);
    let ok = h.request("small");
    h.run_for(Duration::from_secs(1));
    assert!(h.result_of(ok).is_some());
}

#[test]
fn in_flight_and_queue_limits_refuse_with_typed_errors() {
    let mut h = small(Limits {
        max_in_flight_requests: 3,
        ..Limits::default()
    });
    for i in 0..3 {
        h.send(json!({"jsonrpc":"2.0","id":1000 + i,"method":"hang"}))
            .unwrap();
    }
    assert_eq!(
        h.send(json!({"jsonrpc":"2.0","id":2000,"method":"hang"})),
        Err(ApiMisuse::TooManyInFlight { limit: 3 })
    );
    assert_eq!(limit_events(&h, Limit::InFlightRequests), 1);
    // Notifications are not requests: still fine.
    h.send(json!({"jsonrpc":"2.0","method":"notifications/x"}))
        .unwrap();

    let mut q = Harness::new(
        ClientConfig::new().with_limits(Limits {
            max_queued_messages: 2,
            ..Limits::default()
        }),
        ServerConfig::default(),
        NetConfig::default(),
    );
    q.send(json!({"jsonrpc":"2.0","method":"notifications/a"}))
        .unwrap();
    q.send(json!({"jsonrpc":"2.0","id":5,"method":"x"}))
        .unwrap();
    assert_eq!(
        q.send(json!({"jsonrpc":"2.0","id":6,"method":"x"})),
        Err(ApiMisuse::QueueFull { limit: 2 })
    );
    assert_eq!(q.client.in_flight(), 1, "the refused request left no trace");
}

#[test]
fn an_overlong_or_invisible_session_id_is_refused() {
    let mut h = Harness::default_pair();
    // Build the reply by hand: a valid result with a bad session id header.
    let init = mcp_tests::client_harness::initialize_request(1, "2025-11-25");
    h.client
        .send(h.now, bytes::Bytes::from(init.to_string()))
        .unwrap();
    let out = h.client.poll_output().unwrap();
    let mcp_proto::client::Output::Http(req) = out else {
        panic!()
    };
    let mut headers = http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    headers.insert("mcp-session-id", "has space".parse().unwrap());
    h.client.handle_input(
        h.now,
        mcp_proto::client::Input::ResponseHead {
            stream: req.stream,
            status: http::StatusCode::OK,
            headers: &headers,
        },
    );
    let body = json!({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"x","version":"0"}}});
    h.client.handle_input(
        h.now,
        mcp_proto::client::Input::Body {
            stream: req.stream,
            chunk: body.to_string().into(),
        },
    );
    h.client
        .handle_input(h.now, mcp_proto::client::Input::End { stream: req.stream });
    h.drain();
    assert!(matches!(
        h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::Protocol(
            ServerFault::InvalidSessionId
        ))]
    ));
    assert!(!h.client.is_ready());
}

#[test]
fn an_error_body_is_kept_only_up_to_its_limit() {
    let mut h = small(Limits {
        max_error_body_bytes: 100,
        ..Limits::default()
    });
    h.server.script(
        Match::Method("bad"),
        Reply::Status(500, vec![], "x".repeat(1000).into()),
    );
    let id = h.request("bad");
    h.run_for(Duration::from_secs(1));
    match &h.outcomes_of(id)[..] {
        [RequestResult::Failed(ClientError::HttpStatus { status, body })] => {
            assert_eq!(status.as_u16(), 500);
            assert_eq!(body.len(), 100);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(limit_events(&h, Limit::ErrorBody), 1);
}
