//! Continuous listening (seed: WithContinuousListening): GET with `Accept: text/event-stream`
//! (S-GET-2); 405 → `ListenUnsupported`, never retried (S-GET-3; peers.md item 2); other
//! failures reconnect with jittered exponential backoff from 1 s capped at 30 s, never sooner
//! than the server's `retry` (S-POST-23, S-GET-8); a clean end without a new event id is a
//! failure (items 1, 3, 5); a failure budget ends listening with a typed event (item 6);
//! responses arriving on the GET stream are delivered (the seed ignored them).

use std::time::Duration;

use mcp_proto::client::{
    BackoffConfig, ClientConfig, ClientEvent, HttpRequestKind, ListenStop, Message, RequestResult,
    StreamRole,
};
use mcp_tests::client_harness::{Frame, Harness, Match, NetConfig, Reply, ServerConfig, SseEnd};
use serde_json::json;

fn pair(server: ServerConfig) -> Harness {
    let mut h = Harness::new(
        ClientConfig::new()
            .with_continuous_listening(true)
            .with_seed(11),
        server,
        NetConfig::default(),
    );
    h.initialize();
    h
}

fn listen_gets(h: &Harness) -> usize {
    h.intents_of(HttpRequestKind::Listen).len()
}

fn reconnects(h: &Harness) -> Vec<(Duration, u32, Option<Duration>)> {
    h.events()
        .into_iter()
        .filter_map(|e| match e {
            ClientEvent::Reconnecting {
                role: StreamRole::Listen,
                delay,
                attempt,
                server_retry,
                ..
            } => Some((delay, attempt, server_retry)),
            _ => None,
        })
        .collect()
}

#[test]
fn s_get_2_the_listening_get_accepts_event_streams() {
    let h = pair(ServerConfig::default());
    let gets = h.intents_of(HttpRequestKind::Listen);
    assert_eq!(gets.len(), 1);
    let g = &gets[0].1;
    assert_eq!(g.method, http::Method::GET);
    assert_eq!(g.headers["accept"], "text/event-stream");
    assert!(g.body.is_empty());
    assert!(g.headers.get("last-event-id").is_none());
}

#[test]
fn s_get_3_405_is_listen_unsupported_and_never_retried() {
    let mut h = pair(ServerConfig {
        get_supported: false,
        ..ServerConfig::default()
    });
    h.run_for(Duration::from_secs(3600));
    assert_eq!(listen_gets(&h), 1);
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::ListenUnsupported)),
        1
    );
    assert!(reconnects(&h).is_empty());
    // Asking again only repeats the event; still no GET. Re-initialization does not retry it.
    h.client.listen(h.now).unwrap();
    h.drain();
    h.restart_server();
    h.request("x");
    h.run_for(Duration::from_secs(600));
    assert_eq!(listen_gets(&h), 1);
}

#[test]
fn failures_back_off_exponentially_with_jitter_capped_at_30s_then_give_up() {
    let mut h = pair(ServerConfig::default());
    // Break the open stream, and fail every reconnect with 500.
    for _ in 0..50 {
        h.server.script(
            Match::Listen,
            Reply::Status(500, vec![], Default::default()),
        );
    }
    let s = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    h.net.break_stream(h.now, s);
    h.run_for(Duration::from_secs(3600));
    let r = reconnects(&h);
    let cfg = BackoffConfig::default();
    assert!(r.len() >= 5, "{r:?}");
    for (delay, attempt, _) in &r {
        let base = Duration::from_secs(1u64 << (*attempt).min(5)).min(cfg.max);
        assert!(*delay <= base, "attempt {attempt}: {delay:?} > {base:?}");
        assert!(
            *delay >= base / 2,
            "attempt {attempt}: {delay:?} < {:?}",
            base / 2
        );
    }
    // The budget (10 failures in 5 minutes) ended it with a typed event.
    assert!(h.events().iter().any(|e| matches!(
        e,
        ClientEvent::ListenGaveUp {
            reason: ListenStop::TooManyFailures { failures: 10 }
        }
    )));
    assert!(listen_gets(&h) <= 11, "{}", listen_gets(&h));
    // listen() starts again with a fresh budget, and the server works again.
    let before = listen_gets(&h);
    h.server.clear_scripts();
    h.client.listen(h.now).unwrap();
    h.drain();
    h.run_for(Duration::from_secs(1));
    assert_eq!(listen_gets(&h), before + 1);
}

#[test]
fn s_post_23_reconnects_never_sooner_than_the_servers_retry() {
    let mut h = pair(ServerConfig::default());
    // Each connection: one new event id with retry 5000, then a clean close (polling).
    for _ in 0..10 {
        h.server.script(
            Match::Listen,
            Reply::Sse(
                vec![Frame {
                    retry: Some(5000),
                    ..Frame::default()
                }],
                SseEnd::Close,
            ),
        );
    }
    let s = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    h.net.break_stream(h.now, s);
    h.run_for(Duration::from_secs(40));
    let gets = h.intents_of(HttpRequestKind::Listen);
    assert!(gets.len() >= 4, "{}", gets.len());
    for w in gets[2..].windows(2) {
        let gap = w[1].0 - w[0].0;
        assert!(gap >= Duration::from_secs(5), "{gap:?}");
    }
    // Progress (a new id each time) keeps the backoff at its first step: polling, not giving up.
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::ListenGaveUp { .. })),
        0
    );
    for (delay, attempt, retry) in reconnects(&h).into_iter().skip(1) {
        assert_eq!(attempt, 0);
        assert_eq!(retry, Some(Duration::from_secs(5)));
        assert!(delay >= Duration::from_secs(5));
    }
    // Every reconnect resumed from the last id.
    for (_, g) in &gets[1..] {
        assert!(g.headers.get("last-event-id").is_some());
    }
}

#[test]
fn a_clean_end_without_a_new_event_id_counts_as_a_failure() {
    // rust-sdk#958: 200 + empty stream to every (re)connect; must not loop at 1 Hz forever.
    let mut h = pair(ServerConfig::default());
    for _ in 0..100 {
        h.server
            .script(Match::Listen, Reply::Sse(vec![], SseEnd::Close));
    }
    let s = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    h.net.break_stream(h.now, s);
    h.run_for(Duration::from_secs(3 * 3600));
    assert!(listen_gets(&h) <= 11, "{}", listen_gets(&h));
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::ListenGaveUp { .. })),
        1
    );
}

#[test]
fn a_200_that_is_not_an_event_stream_is_a_failure() {
    // malloydata PR #134: GET answered 200 with JSON → 11 h at 1 req/s in the TS client.
    let mut h = pair(ServerConfig::default());
    for _ in 0..100 {
        h.server
            .script(Match::Listen, Reply::Raw("application/json", "{}".into()));
    }
    let s = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    h.net.break_stream(h.now, s);
    h.run_for(Duration::from_secs(11 * 3600));
    assert!(listen_gets(&h) <= 11, "{}", listen_gets(&h));
}

#[test]
fn retry_after_on_429_floors_the_delay() {
    let mut h = pair(ServerConfig::default());
    h.server.script(
        Match::Listen,
        Reply::Status(429, vec![("retry-after", "20".into())], Default::default()),
    );
    let s = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    h.net.break_stream(h.now, s);
    h.run_for(Duration::from_secs(60));
    let r = reconnects(&h);
    assert!(r.len() >= 2, "{r:?}");
    assert!(r[1].0 >= Duration::from_secs(20), "{r:?}");
}

#[test]
fn notifications_and_responses_on_the_get_stream_are_delivered() {
    let mut h = pair(ServerConfig::default());
    let get = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    h.push_listen(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
    let id = h.request("hang");
    h.run_for(Duration::from_millis(50));
    // The server answers the hanging request on the GET stream (S-MULTI-4).
    h.push_listen(json!({"jsonrpc":"2.0","id":id,"result":{"via":"get"}}));
    h.run_for(Duration::from_millis(50));
    let msgs = h.messages();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].stream, get);
    assert!(matches!(msgs[0].message, Message::Notification(_)));
    match &h.outcomes_of(id)[..] {
        [RequestResult::Response { stream, .. }] => assert_eq!(*stream, get),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.result_of(id).unwrap(), json!({"via":"get"}));
}

#[test]
fn stop_listening_closes_the_stream_and_nothing_reconnects() {
    let mut h = pair(ServerConfig::default());
    let get = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    h.client.stop_listening(h.now).unwrap();
    h.drain();
    assert!(h.log.iter().any(|(_, s)| matches!(
        s,
        mcp_tests::client_harness::Seen::Abort(x) if *x == get
    )));
    h.run_for(Duration::from_secs(600));
    assert_eq!(listen_gets(&h), 1);
}
