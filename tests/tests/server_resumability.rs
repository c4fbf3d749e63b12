//! Resumability: event ids per stream, priming, `retry`, server-side close for polling, and
//! GET + `Last-Event-ID` replay of exactly that stream (S-RES-*, S-POST-19..22).

use std::time::Duration;

use http::StatusCode;
use mcp_proto::server::{
    CancelReason, InMemoryEventStore, ResponseMode, SendError, ServerConfig, ServerEvent,
    ServerOutput, Target,
};
use mcp_tests::server_harness::{Harness, Req};

const NEW: &str = "2025-11-25";
const OLD: &str = "2025-06-18";

fn sse_harness() -> Harness {
    Harness::new(ServerConfig::default().with_response_mode(ResponseMode::Sse))
}

#[test]
fn s_post_19_priming_event_for_2025_11_25_clients_only() {
    let mut h = sse_harness();
    let (id, _) = h.initialize(NEW);
    let (s, _) = h.call(&id, NEW, 2, "tools/call");
    let f = &h.response(s).frames()[0];
    assert!(
        f.id.is_some() && f.data.is_empty(),
        "priming: id + empty data"
    );
    assert_eq!(f.retry, Some(3000), "S-POST-22: retry announced");

    let mut h = sse_harness();
    let (id, _) = h.initialize(OLD);
    let (s, handle) = h.call(&id, OLD, 2, "tools/call");
    assert!(
        h.response(s).body.is_empty(),
        "G-3: no priming for older clients"
    );
    h.reply(handle, "{}");
    assert!(h.response(s).frames().iter().all(|f| !f.data.is_empty()));
}

#[test]
fn s_res_2_event_ids_are_unique_in_the_session_and_name_their_stream() {
    let mut h = sse_harness();
    let (id, session) = h.initialize(NEW);
    let g = h.send(Req::get(&id));
    let (a, ha) = h.call(&id, NEW, 2, "x");
    let (b, hb) = h.call(&id, NEW, 3, "x");
    for _ in 0..3 {
        h.notify(Target::Request(ha), "n", "{}");
        h.notify(Target::Request(hb), "n", "{}");
        h.notify(Target::Session(session), "n", "{}");
    }
    let ids: Vec<String> = [a, b, g]
        .iter()
        .flat_map(|s| h.response(*s).event_ids())
        .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    let prefix = |s| {
        let ids = h.response(s).event_ids();
        let p: Vec<_> = ids
            .iter()
            .map(|i| i.split('-').next().unwrap().to_owned())
            .collect();
        assert!(
            p.windows(2).all(|w| w[0] == w[1]),
            "one stream prefix per stream: {ids:?}"
        );
        p[0].clone()
    };
    let (pa, pb, pg) = (prefix(a), prefix(b), prefix(g));
    assert!(pa != pb && pb != pg && pa != pg);
}

#[test]
fn s_post_20_close_for_polling_then_resume_replays_the_result() {
    // The conformance `server-sse-polling` flow, in auto mode.
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(NEW);
    let (s, handle) = h.call(&id, NEW, 2, "tools/call");
    h.router
        .close_for_polling(h.now, Target::Request(handle))
        .unwrap();
    h.pump();
    let r = h.response(s);
    assert!(r.is_sse() && r.ended);
    let frames = r.frames();
    assert!(
        frames[0].data.is_empty() && frames[0].id.is_some(),
        "priming first"
    );
    assert!(frames.iter().any(|f| f.retry.is_some()));
    let last_id = r.event_ids().last().unwrap().clone();
    // The handler goes on (no cancellation) and answers while the client is away.
    h.reply(handle, r#"{"content":[]}"#);
    assert!(
        !h.take_other()
            .iter()
            .any(|o| matches!(o, ServerOutput::Cancelled { .. }))
    );
    let g = h.send(Req::get(&id).header("last-event-id", &last_id));
    let r = h.response(g);
    assert_eq!(r.status(), StatusCode::OK);
    let msgs = r.sse_messages();
    assert_eq!(msgs.len(), 1);
    assert_eq!(
        msgs[0]["id"], 2,
        "S-RES-9: the response arrives on the resumed stream"
    );
    assert!(r.ended, "a finished stream ends after its replay");
}

#[test]
fn s_res_6_resume_while_running_replays_then_continues_live() {
    let mut h = sse_harness();
    let (id, _) = h.initialize(NEW);
    let (s, handle) = h.call(&id, NEW, 2, "x");
    h.notify(Target::Request(handle), "n/1", "{}");
    let after = h.response(s).event_ids().last().unwrap().clone();
    h.notify(Target::Request(handle), "n/2", "{}");
    h.router.handle_disconnect(h.now, s);
    h.pump();
    assert_eq!(
        h.notify(Target::Request(handle), "n/3", "{}"),
        mcp_proto::server::Delivery::StoredForResume
    );
    let g = h.send(Req::get(&id).header("last-event-id", &after));
    let m: Vec<_> = h
        .response(g)
        .sse_messages()
        .iter()
        .map(|m| m["method"].clone())
        .collect();
    assert_eq!(m, ["n/2", "n/3"], "exactly the later events of that stream");
    h.reply(handle, "{}");
    let r = h.response(g);
    assert_eq!(r.sse_messages().last().unwrap()["id"], 2);
    assert!(r.ended);
}

#[test]
fn s_res_7_never_replays_another_stream_or_session() {
    let mut h = sse_harness();
    let (a, _) = h.initialize(NEW);
    let (b, _) = h.initialize(NEW);
    let (s, handle) = h.call(&a, NEW, 2, "x");
    h.notify(Target::Request(handle), "n", "{}");
    let id_in_a = h.response(s).event_ids()[0].clone();
    let g = h.send(Req::get(&b).header("last-event-id", &id_in_a));
    assert_eq!(h.response(g).status(), StatusCode::BAD_REQUEST);
    for junk in ["", "x", "1", "99999-1"] {
        let g = h.send(Req::get(&a).header("last-event-id", junk));
        assert_eq!(h.response(g).status(), StatusCode::BAD_REQUEST, "{junk:?}");
    }
}

#[test]
fn finished_streams_are_kept_for_a_grace_period() {
    let mut h = sse_harness();
    let (id, _) = h.initialize(NEW);
    let (s, handle) = h.call(&id, NEW, 2, "x");
    let first = h.response(s).event_ids()[0].clone();
    h.reply(handle, "{}");
    h.advance(Duration::from_secs(59));
    let g = h.send(Req::get(&id).header("last-event-id", &first));
    assert_eq!(h.response(g).sse_messages().len(), 1);
    h.advance(Duration::from_secs(2));
    let g = h.send(Req::get(&id).header("last-event-id", &first));
    assert_eq!(
        h.response(g).status(),
        StatusCode::BAD_REQUEST,
        "retention over"
    );
}

#[test]
fn get_stream_resumes_with_last_event_id() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize(NEW);
    let g = h.send(Req::get(&id));
    h.notify(Target::Session(session), "n/1", "{}");
    let after = h.response(g).event_ids().last().unwrap().clone();
    h.notify(Target::Session(session), "n/2", "{}");
    h.router.handle_disconnect(h.now, g);
    h.pump();
    h.notify(Target::Session(session), "n/3", "{}");
    let g2 = h.send(Req::get(&id).header("last-event-id", &after));
    let m: Vec<_> = h
        .response(g2)
        .sse_messages()
        .iter()
        .map(|m| m["method"].clone())
        .collect();
    assert_eq!(m, ["n/2", "n/3"]);
}

#[test]
fn close_for_polling_needs_a_2025_11_25_client() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(OLD);
    let (_s, handle) = h.call(&id, OLD, 2, "x");
    assert_eq!(
        h.router.close_for_polling(h.now, Target::Request(handle)),
        Err(SendError::NotResumable)
    );
}

#[test]
fn evicted_events_are_reported_as_a_gap() {
    let mut h = Harness::new(
        ServerConfig::default()
            .with_response_mode(ResponseMode::Sse)
            .with_event_store(InMemoryEventStore::new(2, 1 << 20)),
    );
    let (id, _) = h.initialize(NEW);
    let (s, handle) = h.call(&id, NEW, 2, "x");
    for _ in 0..5 {
        h.notify(Target::Request(handle), "n", "{}");
    }
    let first = h.response(s).event_ids()[1].clone();
    let g = h.send(Req::get(&id).header("last-event-id", &first));
    let messages = h.response(g).sse_messages();
    assert_eq!(
        messages.iter().filter(|m| m["method"] == "n").count(),
        2,
        "the two kept"
    );
    // The client is told: an `events-lost` event naming its cursor comes first.
    assert_eq!(messages[0], serde_json::json!({ "lastEventId": first }));
    assert!(String::from_utf8_lossy(&h.response(g).body).contains("event: events-lost\n"));
    assert!(
        h.events
            .iter()
            .any(|e| matches!(e, ServerEvent::Resumed { gap: true, .. }))
    );
}

#[test]
fn resumability_off_means_no_ids() {
    let mut h = Harness::new(
        ServerConfig::default()
            .with_response_mode(ResponseMode::Sse)
            .with_resumability(false),
    );
    let (id, _) = h.initialize(NEW);
    let (s, handle) = h.call(&id, NEW, 2, "x");
    h.reply(handle, "{}");
    assert!(h.response(s).event_ids().is_empty());
    // Without ids a disconnect cancels at once.
    let (s, handle) = h.call(&id, NEW, 3, "x");
    h.router.handle_disconnect(h.now, s);
    h.pump();
    assert!(h.take_other().iter().any(|o| matches!(o, ServerOutput::Cancelled { handle: x, reason: CancelReason::Disconnected } if *x == handle)));
}

#[test]
fn a_guessed_id_cannot_hijack_a_pending_json_answer() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(NEW);
    let (s, handle) = h.call(&id, NEW, 2, "x");
    // Stream numbers are small integers; try the neighbours of every plausible one.
    for n in 0..64 {
        let g = h.send(Req::get(&id).header("last-event-id", &format!("{n}-0")));
        assert_eq!(h.response(g).status(), StatusCode::BAD_REQUEST);
    }
    h.reply(handle, "{}");
    let r = h.response(s);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["id"], 2);
}
