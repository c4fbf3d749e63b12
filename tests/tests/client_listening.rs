//! Continuous listening (seed: WithContinuousListening): GET with `Accept: text/event-stream`
//! (S-GET-2); 405 → `ListenUnsupported`, never retried (S-GET-3; peer clients have retried it
//! until rate-limited); other failures reconnect with jittered exponential backoff from 1 s
//! capped at 30 s, never sooner than the server's `retry` (S-POST-23, S-GET-8); a clean end
//! without a new event id is a failure (the Python SDK, TypeScript SDK and rmcp clients looped
//! forever on such ends); a failure budget ends listening with a typed event (mcp-go's client
//! retried every second, unseen by the app, after a server restart); responses arriving on the
//! GET stream are delivered (mcp-go's client ignores them).

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

/// The harness network's one-way latency: a reconnect leaves this long after the delay was
/// scheduled from the failed GET's head.
fn latency() -> Duration {
    NetConfig::default().latency
}

/// The listening stream, broken once (after its priming event: the reconnect is progress,
/// attempt 0) so that its reconnects meet `replies`, one each; then `d` of virtual time.
fn reconnects_meeting(server: ServerConfig, replies: Vec<Reply>, d: Duration) -> Harness {
    let mut h = pair(server);
    for r in replies {
        h.server.script(Match::Listen, r);
    }
    let s = h.intents_of(HttpRequestKind::Listen)[0].1.stream;
    h.net.break_stream(h.now, s);
    h.run_for(d);
    h
}

fn gave_up(h: &Harness) -> Vec<ListenStop> {
    h.events()
        .into_iter()
        .filter_map(|e| match e {
            ClientEvent::ListenGaveUp { reason } => Some(reason),
            _ => None,
        })
        .collect()
}

#[test]
fn a_401_or_a_403_with_a_bearer_challenge_stops_listening_until_listen_is_called_again() {
    // Authorization (MCP 2025-11-25, basic/authorization): 401 asks for a token; 403 with a
    // Bearer challenge asks for more scope. Retrying with the same credentials is pointless.
    for (status, headers) in [
        (401, vec![]),
        (
            401,
            vec![("www-authenticate", r#"Bearer realm="mcp""#.into())],
        ),
        (
            403,
            vec![(
                "www-authenticate",
                r#"Bearer error="insufficient_scope", scope="mcp:listen""#.into(),
            )],
        ),
    ] {
        let replies = (0..20)
            .map(|_| Reply::Status(status, headers.clone(), Default::default()))
            .collect();
        let mut h = reconnects_meeting(ServerConfig::default(), replies, Duration::from_secs(3600));
        assert_eq!(
            gave_up(&h),
            [ListenStop::AuthorizationRequired],
            "{status} {headers:?}"
        );
        assert_eq!(
            h.count_events(|e| matches!(
                e,
                ClientEvent::AuthorizationRequired { status: s, .. } if s.as_u16() == status
            )),
            1,
            "{status}"
        );
        // The first GET and the one reconnect that met the refusal; no backoff after it.
        assert_eq!(listen_gets(&h), 2, "{status} {headers:?}");
        assert_eq!(reconnects(&h).len(), 1, "{status}: {:?}", reconnects(&h));
        // Once authorized, the app calls listen again and the GET is sent at once.
        h.server.clear_scripts();
        h.client.listen(h.now).unwrap();
        h.drain();
        h.run_for(Duration::from_millis(100));
        assert_eq!(listen_gets(&h), 3, "{status}");
        assert_eq!(
            h.count_events(|e| matches!(e, ClientEvent::ListenOpened { .. })),
            2
        );
    }
}

#[test]
fn a_403_without_a_bearer_challenge_is_an_ordinary_listen_failure() {
    let replies = (0..50)
        .map(|_| Reply::Status(403, vec![], Default::default()))
        .collect();
    let h = reconnects_meeting(ServerConfig::default(), replies, Duration::from_secs(3600));
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::AuthorizationRequired { .. })),
        0
    );
    // It backs off and retries like any other status, until the failure budget ends it.
    assert!(reconnects(&h).len() >= 5, "{:?}", reconnects(&h));
    assert_eq!(gave_up(&h), [ListenStop::TooManyFailures { failures: 10 }]);
}

#[test]
fn an_http_date_retry_after_is_ignored_and_the_ordinary_backoff_applies() {
    // RFC 9110 §10.2.3 allows an HTTP-date; the core has no wall clock to read it against.
    for status in [429, 503] {
        let replies = vec![Reply::Status(
            status,
            vec![("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT".into())],
            Default::default(),
        )];
        let h = reconnects_meeting(ServerConfig::default(), replies, Duration::from_secs(60));
        let r = reconnects(&h);
        assert!(r.len() >= 2, "{status}: {r:?}");
        let (delay, attempt, server_retry) = r[1];
        assert_eq!(server_retry, None, "{status}: {r:?}");
        let base = Duration::from_secs(1 << attempt);
        assert!(
            delay >= base / 2 && delay <= base,
            "{status}: attempt {attempt}: {delay:?}"
        );
        // And the GET went out after that delay, not ten minutes later.
        let gets = h.intents_of(HttpRequestKind::Listen);
        assert!(gets.len() >= 3, "{status}: {}", gets.len());
        assert_eq!(gets[2].0 - gets[1].0, delay + latency(), "{status}");
    }
}

#[test]
fn a_delta_seconds_retry_after_on_503_sets_the_reconnect_delay() {
    let replies = vec![Reply::Status(
        503,
        vec![("retry-after", " 7 ".into())],
        Default::default(),
    )];
    let h = reconnects_meeting(ServerConfig::default(), replies, Duration::from_secs(60));
    let r = reconnects(&h);
    assert!(r.len() >= 2, "{r:?}");
    // Attempt 0 after a progressing stream: exactly the server's value.
    assert_eq!(
        r[1],
        (Duration::from_secs(7), 0, Some(Duration::from_secs(7)))
    );
    // A value too large for any clock is clamped, not obeyed.
    let replies = vec![Reply::Status(
        503,
        vec![("retry-after", "99999999999999999999999".into())],
        Default::default(),
    )];
    let h = reconnects_meeting(ServerConfig::default(), replies, Duration::from_secs(60));
    let r = reconnects(&h);
    assert_eq!(r[1].0, BackoffConfig::default().max_server_retry, "{r:?}");
}

#[test]
fn the_reconnect_waits_the_larger_of_the_sse_retry_and_retry_after() {
    // (SSE `retry` ms on the priming event, `Retry-After` s on the failed reconnect, expected)
    for (retry_ms, retry_after, expected) in [(2_000, "7", 7), (9_000, "3", 9)] {
        let server = ServerConfig {
            retry_ms: Some(retry_ms),
            ..ServerConfig::default()
        };
        let replies = vec![Reply::Status(
            503,
            vec![("retry-after", retry_after.into())],
            Default::default(),
        )];
        let h = reconnects_meeting(server, replies, Duration::from_secs(60));
        let r = reconnects(&h);
        assert!(r.len() >= 2, "{r:?}");
        assert_eq!(r[0].2, Some(Duration::from_millis(retry_ms)), "{r:?}");
        let want = Duration::from_secs(expected);
        assert_eq!(
            r[1],
            (want, 0, Some(want)),
            "{retry_ms} ms / {retry_after} s"
        );
        let gets = h.intents_of(HttpRequestKind::Listen);
        assert_eq!(gets[2].0 - gets[1].0, want + latency());
    }
}

/// Runs until the listening loop gives up for the `n`th time (or an hour passes).
fn run_until_gave_up(h: &mut Harness, n: usize) {
    for _ in 0..3600 {
        if gave_up(h).len() >= n {
            return;
        }
        h.run_for(Duration::from_secs(1));
    }
    panic!("listening never gave up {n} times: {:?}", gave_up(h));
}

#[test]
fn listen_after_giving_up_gets_a_fresh_failure_budget_while_old_failures_are_in_the_window() {
    let replies = (0..100)
        .map(|_| Reply::Status(500, vec![], Default::default()))
        .collect();
    let mut h = reconnects_meeting(ServerConfig::default(), replies, Duration::ZERO);
    run_until_gave_up(&mut h, 1);
    // Ten failures in well under the five-minute window: all still inside it.
    assert!(h.elapsed() < Duration::from_secs(200), "{:?}", h.elapsed());
    let before = listen_gets(&h);
    h.client.listen(h.now).unwrap();
    h.drain();
    run_until_gave_up(&mut h, 2);
    assert_eq!(
        gave_up(&h),
        [
            ListenStop::TooManyFailures { failures: 10 },
            ListenStop::TooManyFailures { failures: 10 }
        ]
    );
    assert_eq!(listen_gets(&h) - before, 10);
}

#[test]
fn listen_after_an_authorization_stop_does_not_inherit_the_earlier_failures() {
    // Three failures, then 401: stopped with three failures in the window.
    let mut replies: Vec<Reply> = (0..3)
        .map(|_| Reply::Status(500, vec![], Default::default()))
        .collect();
    replies.push(Reply::Status(401, vec![], Default::default()));
    let mut h = reconnects_meeting(ServerConfig::default(), replies, Duration::from_secs(30));
    assert_eq!(gave_up(&h), [ListenStop::AuthorizationRequired]);
    let before = listen_gets(&h);
    // Authorized, the app listens again; the server now fails every GET.
    for _ in 0..50 {
        h.server.script(
            Match::Listen,
            Reply::Status(500, vec![], Default::default()),
        );
    }
    h.client.listen(h.now).unwrap();
    h.drain();
    run_until_gave_up(&mut h, 2);
    assert!(h.elapsed() < Duration::from_secs(300), "{:?}", h.elapsed());
    assert_eq!(gave_up(&h)[1], ListenStop::TooManyFailures { failures: 10 });
    assert_eq!(listen_gets(&h) - before, 10);
}
