//! Observability: every decision is a typed event — the log lines of mcp-go's client ("failed
//! to listen to server. retry in 1 second", "server does not support listening", "session
//! terminated (404)") become `Reconnecting`, `ListenUnsupported`,
//! `SessionExpired` …, in the order they were decided, at the virtual time they were decided.

use std::time::Duration;

use mcp_proto::client::{ClientConfig, ClientEvent, Limits, StreamRole};
use mcp_tests::client_harness::{Harness, Match, NetConfig, Reply, Seen, ServerConfig};
use serde_json::json;

fn name(e: &ClientEvent) -> &'static str {
    match e {
        ClientEvent::Initialized { .. } => "Initialized",
        ClientEvent::Ready { .. } => "Ready",
        ClientEvent::SessionExpired { .. } => "SessionExpired",
        ClientEvent::Reinitialized { .. } => "Reinitialized",
        ClientEvent::ReinitializeFailed { .. } => "ReinitializeFailed",
        ClientEvent::ListenUnsupported => "ListenUnsupported",
        ClientEvent::ListenOpened { .. } => "ListenOpened",
        ClientEvent::Reconnecting { .. } => "Reconnecting",
        ClientEvent::Resumed { .. } => "Resumed",
        ClientEvent::ListenGaveUp { .. } => "ListenGaveUp",
        ClientEvent::AuthorizationRequired { .. } => "AuthorizationRequired",
        ClientEvent::LimitExceeded { .. } => "LimitExceeded",
        ClientEvent::UnmatchedResponse { .. } => "UnmatchedResponse",
        ClientEvent::InvalidMessage { .. } => "InvalidMessage",
        ClientEvent::PostRejected { .. } => "PostRejected",
        ClientEvent::InvalidBearerToken => "InvalidBearerToken",
        ClientEvent::Closed { .. } => "Closed",
        _ => "other",
    }
}

#[test]
fn a_troubled_session_reports_each_decision_as_a_typed_event_in_order() {
    let mut h = Harness::new(
        ClientConfig::new()
            .with_continuous_listening(true)
            .with_limits(Limits {
                max_sse_event_bytes: 4096,
                ..Limits::default()
            })
            .with_bearer_token_provider(|| Some("bad\ntoken".into())),
        ServerConfig {
            sse_replies: true,
            retry_ms: Some(500),
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.initialize();
    // The GET stream breaks: a reconnect is scheduled, then it reopens and resumes.
    let get = h.intents_of(mcp_proto::client::HttpRequestKind::Listen)[0]
        .1
        .stream;
    h.net.break_stream(h.now, get);
    h.run_for(Duration::from_secs(3));
    // A 401 on a request.
    h.server.script(
        Match::Method("secret"),
        Reply::Status(
            401,
            vec![("www-authenticate", "Bearer scope=\"s\"".into())],
            Default::default(),
        ),
    );
    h.request("secret");
    // A stray response.
    h.push_listen(json!({"jsonrpc":"2.0","id":"nobody","result":{}}));
    // Garbage on the GET stream.
    h.push_listen(json!("not a message"));
    // An oversized event.
    h.push_listen(json!({"jsonrpc":"2.0","method":"big","params":{"x":"y".repeat(5000)}}));
    h.run_for(Duration::from_secs(3));
    // The server restarts: the session expires and is re-established.
    h.restart_server();
    h.request("after");
    h.run_for(Duration::from_secs(5));
    h.client.close(h.now);
    h.drain();
    h.run_for(Duration::from_secs(1));

    let names: Vec<&str> = h.events().iter().map(name).collect();
    for expected in [
        "Initialized",
        "Ready",
        "ListenOpened",
        "Reconnecting",
        "AuthorizationRequired",
        "UnmatchedResponse",
        "InvalidMessage",
        "LimitExceeded",
        "SessionExpired",
        "Reinitialized",
        "InvalidBearerToken",
        "Closed",
    ] {
        assert!(names.contains(&expected), "no {expected} in {names:?}");
    }
    let pos = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(pos("Initialized") < pos("Ready"));
    assert!(pos("Ready") < pos("ListenOpened"));
    assert!(pos("SessionExpired") < pos("Reinitialized"));
    assert_eq!(*names.last().unwrap(), "Closed");
    // Reconnects say which stream, when, how long, and which attempt.
    let rc = h
        .log
        .iter()
        .find_map(|(t, s)| match s {
            Seen::Event(ClientEvent::Reconnecting {
                role: StreamRole::Listen,
                at,
                delay,
                ..
            }) => Some((*t, *at, *delay)),
            _ => None,
        })
        .unwrap();
    assert_eq!(rc.0 + rc.2, rc.1);
    // Events are plain data: clonable, comparable, printable for any logger.
    let all = h.events();
    assert_eq!(all.clone(), all);
    assert!(all.iter().all(|e| !format!("{e:?}").is_empty()));
}
