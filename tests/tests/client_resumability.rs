//! Resumability: the last event id is tracked per stream; a POST SSE stream that breaks before
//! its response is resumed with GET + `Last-Event-ID` (S-RES-5, S-RES-8, G-4), honouring
//! `retry` (S-POST-23); the GET stream resumes the same way; priming events (id + empty data)
//! record the id and are never delivered as messages (S-POST-19, S-SSE-18). Without an event
//! id there is nothing to resume and the request fails rather than hanging (as the TypeScript
//! and Python SDK clients once did).

use std::time::Duration;

use mcp_proto::client::{
    ClientConfig, ClientError, ClientEvent, HttpRequestKind, RequestResult, ServerFault, StreamRole,
};
use mcp_tests::client_harness::{Frame, Harness, Match, NetConfig, Reply, ServerConfig, SseEnd};
use serde_json::json;

fn sse_server(retry_ms: Option<u64>) -> ServerConfig {
    ServerConfig {
        sse_replies: true,
        retry_ms,
        ..ServerConfig::default()
    }
}

#[test]
fn s_res_5_a_broken_post_stream_resumes_with_last_event_id_after_retry() {
    let mut h = Harness::new(
        ClientConfig::new().with_seed(9),
        sse_server(Some(3000)),
        NetConfig::default(),
    );
    h.initialize();
    let id = h.request("hang"); // priming (id, retry 3000) and no response yet
    h.run_for(Duration::from_millis(50));
    let post = h.intents_of(HttpRequestKind::Post).pop().unwrap().1.stream;
    let broke_at = h.now;
    h.net.break_stream(h.now, post);
    h.run_for(Duration::from_millis(50));
    // The response is written while the client is away; the resume replays it.
    let parts = h.server.answer_hanging(post, json!(id));
    h.deliver(parts);
    h.run_for(Duration::from_secs(10));
    let resumes = h.intents_of(HttpRequestKind::Resume);
    assert_eq!(resumes.len(), 1);
    let (at, get) = &resumes[0];
    assert_eq!(get.method, http::Method::GET);
    assert_eq!(get.headers["accept"], "text/event-stream");
    assert!(
        get.headers["last-event-id"]
            .to_str()
            .unwrap()
            .starts_with(&format!("{}-", post.as_u64()))
    );
    assert!(
        *at - broke_at >= Duration::from_secs(3),
        "retry not honoured"
    );
    assert_eq!(h.result_of(id).unwrap(), json!({"late": true}));
    let ev = h.events();
    assert!(ev.iter().any(|e| matches!(e, ClientEvent::Reconnecting { role: StreamRole::Request(_), server_retry: Some(r), .. } if *r == Duration::from_secs(3))));
    assert!(ev.iter().any(|e| matches!(e, ClientEvent::Resumed { .. })));
    // The priming events were never delivered as messages.
    assert!(h.messages().is_empty());
}

#[test]
fn sep_1699_a_post_stream_closed_after_priming_resumes_exactly_after_retry() {
    // The conformance `sse-retry` mock: priming event (id, retry 500), the stream closed
    // without the response; the GET resume must come 500 ms later (450–700 ms passes), not
    // after a jittered backoff above the floor (it came 729 ms later before the fix).
    for seed in 0..20 {
        let mut h = Harness::new(
            ClientConfig::new().with_seed(seed),
            sse_server(Some(500)),
            NetConfig::default(),
        );
        h.initialize();
        let id = h.request("hang");
        h.run_for(Duration::from_millis(50));
        let post = h.intents_of(HttpRequestKind::Post).pop().unwrap().1.stream;
        let closed_at = h.now;
        h.net.break_stream(h.now, post);
        h.run_for(Duration::from_millis(10));
        let parts = h.server.answer_hanging(post, json!(id));
        h.deliver(parts);
        h.run_for(Duration::from_secs(3));
        let resumes = h.intents_of(HttpRequestKind::Resume);
        assert_eq!(resumes.len(), 1, "seed {seed}");
        let (at, get) = &resumes[0];
        assert!(get.headers.get("last-event-id").is_some());
        // The harness network takes a few ms to report the close.
        let gap = *at - closed_at;
        assert!(
            gap >= Duration::from_millis(500) && gap <= Duration::from_millis(520),
            "seed {seed}: {gap:?}"
        );
        assert_eq!(h.result_of(id).unwrap(), json!({"late": true}));
    }
}

#[test]
fn s_res_8_the_get_stream_resumes_from_its_last_event_id() {
    let mut h = Harness::new(
        ClientConfig::new().with_continuous_listening(true),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    h.push_listen(json!({"jsonrpc":"2.0","method":"notifications/a"}));
    h.run_for(Duration::from_millis(20));
    let get = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    h.net.break_stream(h.now, get);
    h.run_for(Duration::from_millis(20));
    // Sent while disconnected: replayed on resume.
    h.push_listen(json!({"jsonrpc":"2.0","method":"notifications/b"}));
    h.run_for(Duration::from_secs(3));
    let gets = h.intents_of(HttpRequestKind::Listen);
    assert_eq!(gets.len(), 2);
    assert!(gets[1].1.headers.get("last-event-id").is_some());
    let methods: Vec<String> = h
        .messages()
        .iter()
        .map(|m| match &m.message {
            mcp_proto::client::Message::Notification(n) => n.method.to_string(),
            _ => "?".into(),
        })
        .collect();
    assert_eq!(methods, ["notifications/a", "notifications/b"]);
}

#[test]
fn a_stream_that_breaks_before_any_event_id_fails_instead_of_hanging() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.server.script(
        Match::Method("tools/call"),
        Reply::Sse(
            vec![Frame {
                id: Some(String::new()), // an empty id: nothing to resume from
                data: json!({"jsonrpc":"2.0","method":"notifications/progress"}).to_string(),
                ..Frame::default()
            }],
            SseEnd::Close,
        ),
    );
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(60));
    assert!(matches!(
        h.outcomes_of(id)[..],
        [RequestResult::Failed(ClientError::Protocol(
            ServerFault::StreamEndedWithoutResponse
        ))]
    ));
    assert!(h.intents_of(HttpRequestKind::Resume).is_empty());
}

#[test]
fn resumes_that_bring_nothing_new_are_bounded() {
    let mut h = Harness::new(
        ClientConfig::new().with_max_resume_failures(3),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    h.server.script(
        Match::Method("tools/call"),
        Reply::Sse(vec![Frame::default()], SseEnd::Reset),
    );
    for _ in 0..20 {
        // Every resume: 200 and an empty stream (rust-sdk#958).
        h.server
            .script(Match::Get, Reply::Sse(vec![], SseEnd::Close));
    }
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(600));
    assert!(matches!(
        h.outcomes_of(id)[..],
        [RequestResult::Failed(ClientError::Protocol(
            ServerFault::StreamEndedWithoutResponse
        ))]
    ));
    assert_eq!(h.intents_of(HttpRequestKind::Resume).len(), 4);
}

#[test]
fn random_mid_event_drops_lose_nothing_and_duplicate_nothing() {
    let (mut ok, mut total, mut drops) = (0, 0, 0);
    for seed in 1..30u64 {
        let mut h = Harness::new(
            ClientConfig::new().with_seed(seed),
            sse_server(Some(100)),
            NetConfig {
                seed,
                drop_per_mille: 300,
                ..NetConfig::default()
            },
        );
        h.net.set_drop_per_mille(0);
        h.initialize();
        h.net.set_drop_per_mille(100);
        let ids: Vec<i64> = (0..8).map(|_| h.request("echo")).collect();
        h.run_for(Duration::from_secs(120));
        for id in ids {
            let outs = h.outcomes_of(id);
            assert_eq!(outs.len(), 1, "seed {seed} id {id}: {outs:?}");
            total += 1;
            match &outs[0] {
                RequestResult::Response { .. } => {
                    assert_eq!(h.result_of(id).unwrap()["params"]["n"], id);
                    ok += 1;
                }
                // A drop before the priming event leaves nothing to resume from; a run of
                // resumes that all break before a new event exhausts the resume budget.
                RequestResult::Failed(ClientError::Transport(_))
                | RequestResult::Failed(ClientError::Protocol(
                    ServerFault::StreamEndedWithoutResponse,
                )) => {}
                other => panic!("seed {seed} id {id}: {other:?}"),
            }
        }
        drops += h.net.drops;
    }
    assert!(drops > 20, "the network dropped only {drops} streams");
    assert!(ok * 10 >= total * 9, "{ok} of {total} succeeded");
}

#[test]
fn an_answered_stream_that_the_server_never_ends_is_closed_by_the_client_after_the_grace() {
    // Some servers never end a stream after its response (the TypeScript and Python SDKs'
    // resumed streams): the client must not hold the connection for nothing.
    let mut h = Harness::default_pair();
    h.initialize();
    h.server.script(
        Match::Method("tools/call"),
        Reply::Sse(
            vec![Frame::json(json!({"jsonrpc":"2.0","id":101,"result":{}}))],
            SseEnd::Open,
        ),
    );
    let id = h.request("tools/call");
    assert_eq!(id, 101);
    h.run_for(Duration::from_millis(100));
    assert!(matches!(
        h.outcomes_of(id)[..],
        [RequestResult::Response { .. }]
    ));
    let aborts = |h: &Harness| {
        h.log
            .iter()
            .filter(|(_, s)| matches!(s, mcp_tests::client_harness::Seen::Abort(_)))
            .count()
    };
    let before = aborts(&h);
    h.run_for(Duration::from_millis(1800));
    assert_eq!(aborts(&h), before, "still within the grace (2 s)");
    h.run_for(Duration::from_millis(300));
    assert_eq!(aborts(&h), before + 1, "closed once the grace is over");
    // And nothing else happened to the session.
    assert!(h.client.is_ready());
}
