//! Write pacing and the listen stream's durability: a resumed stream is written as the client
//! reads it (never cut for its size), a client that takes nothing is cut after the slow-reader
//! timeout and can resume losing nothing, messages for a GET stream whose connection is away
//! are stored and replayed, an eviction is announced with an `events-lost` event, and GET
//! takeovers are bounded (409 after the budget).

use std::time::Duration;

use http::StatusCode;
use mcp_proto::server::{
    Delivery, ExchangeId, InMemoryEventStore, ResponseMode, Router, ServerConfig, ServerEvent,
    Target,
};
use mcp_tests::server_harness::{Harness, Req, init_body};
use serde_json::Value;

const NEW: &str = "2025-11-25";
const WINDOW: usize = 2048;

fn config() -> ServerConfig {
    ServerConfig::default()
        .with_response_mode(ResponseMode::Sse)
        .with_send_window(WINDOW)
        .with_heartbeat_interval(None)
}

/// The numbers carried by `notifications/message` payloads `{"n": k}` on `stream`, in order.
fn numbers(h: &Harness, stream: ExchangeId) -> Vec<u64> {
    h.response(stream)
        .sse_messages()
        .iter()
        .filter(|m| m["method"] == "n")
        .map(|m| m["params"]["n"].as_u64().expect("n"))
        .collect()
}

fn last_id(h: &Harness, stream: ExchangeId) -> String {
    h.response(stream)
        .event_ids()
        .pop()
        .expect("the stream carried an event id")
}

/// A session whose GET stream was opened, then lost its connection, then got `count`
/// numbered messages (each ≈ 100 bytes, so many windows' worth). Returns the session id
/// and the `Last-Event-ID` the client holds.
fn detached_with_backlog(h: &mut Harness, count: u64) -> (String, String) {
    let (id, session) = h.initialize(NEW);
    let g = h.send(Req::get(&id));
    assert_eq!(h.response(g).status(), StatusCode::OK);
    let held = last_id(h, g);
    h.router.handle_disconnect(h.now, g);
    h.pump();
    let pad = "x".repeat(64);
    for n in 1..=count {
        let d = h.notify(
            Target::Session(session),
            "n",
            &format!(r#"{{"n":{n},"pad":"{pad}"}}"#),
        );
        assert_eq!(
            d,
            Delivery::StoredForResume,
            "stored under the GET stream's ids"
        );
    }
    (id, held)
}

#[test]
fn a_resume_is_written_as_the_client_reads_it_and_never_cut_for_its_size() {
    let mut h = Harness::new(config());
    let (id, held) = detached_with_backlog(&mut h, 300);
    h.auto_read = false;
    let r = h.send(Req::get(&id).header("last-event-id", &held));
    assert_eq!(h.response(r).status(), StatusCode::OK);
    let first = h.response(r).body.len();
    assert!(
        first < WINDOW + 256,
        "only about one window is handed out before the client reads: {first} bytes"
    );
    // The client has the whole timeout to start reading: a fresh response is not cut.
    h.advance(Duration::from_secs(29));
    assert!(!h.response(r).aborted, "cut before the client had a chance");
    for _ in 0..1000 {
        if numbers(&h, r).len() >= 300 {
            break;
        }
        h.read_all(r);
    }
    assert_eq!(
        numbers(&h, r),
        (1..=300).collect::<Vec<_>>(),
        "all, once, in order"
    );
    assert!(
        !h.events
            .iter()
            .any(|e| matches!(e, ServerEvent::SlowReader { .. }))
    );
}

#[test]
fn a_client_that_takes_nothing_is_cut_after_the_timeout_and_resumes_losing_nothing() {
    let mut h = Harness::new(config().with_slow_reader(Duration::from_secs(10), 1 << 20));
    let (id, held) = detached_with_backlog(&mut h, 200);
    h.auto_read = false;
    let r = h.send(Req::get(&id).header("last-event-id", &held));
    // Nothing for 6 s, some progress, then nothing: the clock restarts at the progress.
    h.advance(Duration::from_secs(6));
    h.read(r, 500);
    h.advance(Duration::from_secs(6));
    assert!(!h.response(r).aborted, "progress restarted the clock");
    h.advance(Duration::from_secs(5));
    assert!(
        h.response(r).aborted,
        "cut as a slow reader, not ended cleanly"
    );
    assert!(
        h.events
            .iter()
            .any(|e| matches!(e, ServerEvent::SlowReader { stream } if *stream == r))
    );
    let got_first = numbers(&h, r);
    assert!(!got_first.is_empty() && got_first.len() < 200);
    // The stream detached with its events kept: the client resumes where it was.
    h.auto_read = true;
    let again = h.send(Req::get(&id).header("last-event-id", &last_id(&h, r)));
    let mut all = got_first;
    all.extend(numbers(&h, again));
    assert_eq!(all, (1..=200).collect::<Vec<_>>(), "no loss, no duplicate");
}

#[test]
fn a_live_backlog_over_its_budget_is_cut_at_once() {
    let mut h = Harness::new(config().with_slow_reader(Duration::from_secs(30), 8 * 1024));
    let (id, session) = h.initialize(NEW);
    h.auto_read = false;
    let g = h.send(Req::get(&id));
    let pad = "x".repeat(64);
    for n in 1..=200u64 {
        h.notify(
            Target::Session(session),
            "n",
            &format!(r#"{{"n":{n},"pad":"{pad}"}}"#),
        );
    }
    assert!(h.response(g).aborted, "cut without waiting for the timeout");
    // And the messages after the cut are stored for the resume.
    h.auto_read = true;
    let r = h.send(Req::get(&id).header("last-event-id", &last_id(&h, g)));
    let mut all = numbers(&h, g);
    all.extend(numbers(&h, r));
    assert_eq!(all, (1..=200).collect::<Vec<_>>());
}

#[test]
fn an_ended_stream_drains_its_backlog_before_its_end() {
    let mut h = Harness::new(config());
    let (id, _) = h.initialize(NEW);
    h.auto_read = false;
    let (s, handle) = h.call(&id, NEW, 2, "tools/call");
    let pad = "x".repeat(64);
    for n in 1..=100u64 {
        h.notify(
            Target::Request(handle),
            "n",
            &format!(r#"{{"n":{n},"pad":"{pad}"}}"#),
        );
    }
    h.reply(handle, "{}");
    assert!(!h.response(s).ended, "the end waits behind the backlog");
    for _ in 0..1000 {
        if h.response(s).ended {
            break;
        }
        h.read_all(s);
    }
    assert!(h.response(s).ended && !h.response(s).aborted);
    assert_eq!(numbers(&h, s), (1..=100).collect::<Vec<_>>());
    let last = h.response(s).sse_messages().pop().expect("the response");
    assert_eq!(last["id"], 2, "the response comes last");
}

#[test]
fn messages_for_a_get_stream_whose_connection_is_away_are_replayed_on_resume() {
    let mut h = Harness::new(config());
    let (id, held) = detached_with_backlog(&mut h, 500);
    let r = h.send(Req::get(&id).header("last-event-id", &held));
    assert_eq!(numbers(&h, r), (1..=500).collect::<Vec<_>>());
    assert!(h.events.iter().any(|e| matches!(
        e,
        ServerEvent::Resumed {
            replayed: 500,
            gap: false,
            ..
        }
    )));
}

#[test]
fn a_plain_get_gets_what_was_stored_since_the_last_connection_went_away() {
    let mut h = Harness::new(config());
    let (id, session) = h.initialize(NEW);
    let g = h.send(Req::get(&id));
    h.notify(Target::Session(session), "n", r#"{"n":1}"#);
    h.router.handle_disconnect(h.now, g);
    h.pump();
    h.notify(Target::Session(session), "n", r#"{"n":2}"#);
    h.notify(Target::Session(session), "n", r#"{"n":3}"#);
    let plain = h.send(Req::get(&id));
    assert_eq!(numbers(&h, g), [1]);
    assert_eq!(
        numbers(&h, plain),
        [2, 3],
        "what the first connection never carried"
    );
}

#[test]
fn a_resume_past_the_retention_is_told_that_events_were_lost() {
    let mut h = Harness::new(config().with_event_store(InMemoryEventStore::new(10, 1 << 20)));
    let (id, held) = detached_with_backlog(&mut h, 50);
    let r = h.send(Req::get(&id).header("last-event-id", &held));
    let body = String::from_utf8_lossy(&h.response(r).body).into_owned();
    let lost = body
        .find("event: events-lost")
        .expect("an events-lost event");
    let first_message = body.find(r#""method":"n""#).expect("the kept messages");
    assert!(lost < first_message, "announced before the replay");
    assert!(body.contains(&format!(r#"{{"lastEventId":"{held}"}}"#)));
    assert_eq!(
        numbers(&h, r),
        (41..=50).collect::<Vec<_>>(),
        "the ten kept"
    );
    assert!(
        h.events
            .iter()
            .any(|e| matches!(e, ServerEvent::Resumed { gap: true, .. }))
    );
}

#[test]
fn get_takeovers_are_bounded_per_session_and_window() {
    let mut h = Harness::new(config().with_listen_takeovers(2, Duration::from_secs(60)));
    let (id, _) = h.initialize(NEW);
    let g1 = h.send(Req::get(&id));
    let g2 = h.send(Req::get(&id));
    assert!(h.response(g1).ended, "a takeover ends the old connection");
    let g3 = h.send(Req::get(&id).header("last-event-id", &last_id(&h, g2)));
    assert!(h.response(g2).ended, "a resuming GET is a takeover too");
    // Budget spent: the next GET is refused and the live connection stays.
    let g4 = h.send(Req::get(&id));
    assert_eq!(h.response(g4).status(), StatusCode::CONFLICT);
    let err: Value = h.response(g4).json();
    assert_eq!(err["error"]["code"], -32000);
    assert!(!h.response(g3).ended, "the open stream is kept");
    // A GET after the connection really went away is no takeover: always served.
    h.router.handle_disconnect(h.now, g3);
    h.pump();
    let g5 = h.send(Req::get(&id));
    assert_eq!(h.response(g5).status(), StatusCode::OK);
    // A new window brings a new budget.
    h.advance(Duration::from_secs(61));
    let g6 = h.send(Req::get(&id));
    assert_eq!(h.response(g6).status(), StatusCode::OK);
    assert!(h.response(g5).ended);
}

#[test]
fn a_router_without_a_session_id_generator_refuses_initialize() {
    let now = std::time::Instant::now();
    let mut router = Router::new(ServerConfig::default(), now);
    let req = Req::post(&init_body(1, NEW));
    let uri: http::Uri = req.path.parse().unwrap();
    let head = mcp_proto::server::RequestHead::new(&req.method, &uri, &req.headers);
    let s = router.handle_request(now, head);
    router.handle_body(now, s, &req.body);
    router.handle_body_end(now, s);
    let mut status = None;
    let mut body = Vec::new();
    while let Some(out) = router.poll_output() {
        match out {
            mcp_proto::server::ServerOutput::ResponseHead { status: st, .. } => status = Some(st),
            mcp_proto::server::ServerOutput::ResponseBody { chunk, .. } => {
                body.extend_from_slice(&chunk);
            }
            _ => {}
        }
    }
    assert_eq!(status, Some(StatusCode::INTERNAL_SERVER_ERROR));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["code"], -32603);
    assert_eq!(router.session_count(), 0);
}
