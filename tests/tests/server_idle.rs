//! Idle TTL and eviction (seed `WithSessionIdleTTL`): on by default, evicts after the TTL and
//! not before, frees the session's event-store entries, then 404.

use std::time::Duration;

use http::StatusCode;
use mcp_proto::server::{
    CloseReason, EventStore, InMemoryEventStore, Replay, ResponseMode, ServerConfig, ServerOutput,
    Target,
};
use mcp_tests::server_harness::{Harness, Req};

const V: &str = "2025-11-25";
const TTL: Duration = Duration::from_secs(600);

fn closed(h: &mut Harness) -> Vec<CloseReason> {
    h.take_other()
        .into_iter()
        .filter_map(|o| match o {
            ServerOutput::SessionClosed { reason, .. } => Some(reason),
            _ => None,
        })
        .collect()
}

#[test]
fn seed_with_session_idle_ttl_evicts_after_not_before() {
    let mut h = Harness::new(ServerConfig::default().with_session_idle_ttl(Some(TTL)));
    let (id, _) = h.initialize(V);
    h.advance(TTL - Duration::from_secs(1));
    assert_eq!(h.router.session_count(), 1);
    // Activity pushes the deadline back.
    let (_s, handle) = h.call(&id, V, 2, "ping");
    h.reply(handle, "{}");
    h.advance(TTL - Duration::from_secs(1));
    assert_eq!(
        h.router.session_count(),
        1,
        "not before the TTL since the last request"
    );
    h.advance(Duration::from_secs(2));
    assert_eq!(h.router.session_count(), 0);
    assert_eq!(closed(&mut h), [CloseReason::IdleExpired]);
    let s = h.post_in(&id, V, r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
}

#[test]
fn default_ttl_is_30_minutes() {
    let mut h = Harness::new(ServerConfig::default());
    let _ = h.initialize(V);
    h.advance(Duration::from_secs(30 * 60 - 1));
    assert_eq!(h.router.session_count(), 1);
    h.advance(Duration::from_secs(2));
    assert_eq!(h.router.session_count(), 0);
}

#[test]
fn ttl_can_be_disabled() {
    let mut h = Harness::new(ServerConfig::default().with_session_idle_ttl(None));
    let _ = h.initialize(V);
    h.advance(Duration::from_secs(365 * 24 * 3600));
    assert_eq!(h.router.session_count(), 1);
}

#[test]
fn an_open_get_stream_or_running_handler_keeps_a_session() {
    let mut h = Harness::new(
        ServerConfig::default()
            .with_session_idle_ttl(Some(TTL))
            .with_heartbeat_interval(None),
    );
    let (id, _) = h.initialize(V);
    let g = h.send(Req::get(&id));
    h.advance(TTL * 3);
    assert_eq!(h.router.session_count(), 1);
    h.router.handle_disconnect(h.now, g);
    h.pump();
    h.advance(TTL - Duration::from_secs(1));
    assert_eq!(
        h.router.session_count(),
        1,
        "the TTL counts from the stream's end"
    );
    let (_s, _handle) = h.call(&id, V, 2, "slow");
    h.advance(TTL * 2);
    assert_eq!(h.router.session_count(), 1, "a running handler keeps it");
}

#[test]
fn eviction_frees_event_store_entries() {
    // A store wrapper that shares its state with the test (a store must be `Send`, so the
    // router can move into an adapter's task).
    struct Probe(std::sync::Arc<std::sync::Mutex<InMemoryEventStore>>);
    impl EventStore for Probe {
        fn append(&mut self, s: &str, st: u64, q: u64, f: bytes::Bytes) {
            self.0.lock().unwrap().append(s, st, q, f)
        }
        fn replay_after(&mut self, s: &str, st: u64, a: u64) -> Replay {
            self.0.lock().unwrap().replay_after(s, st, a)
        }
        fn remove_stream(&mut self, s: &str, st: u64) {
            self.0.lock().unwrap().remove_stream(s, st)
        }
        fn remove_session(&mut self, s: &str) {
            self.0.lock().unwrap().remove_session(s)
        }
    }
    let store = std::sync::Arc::new(std::sync::Mutex::new(InMemoryEventStore::default()));
    let cfg = ServerConfig::default()
        .with_session_idle_ttl(Some(TTL))
        .with_response_mode(ResponseMode::Sse)
        .with_event_store(Probe(store.clone()));
    let mut h = Harness::new(cfg);
    let (id, session) = h.initialize(V);
    let g = h.send(Req::get(&id));
    h.notify(Target::Session(session), "n", "{}");
    let (_s, handle) = h.call(&id, V, 2, "x");
    h.reply(handle, "{}");
    assert!(store.lock().unwrap().total_bytes() > 0);
    h.router.handle_disconnect(h.now, g);
    h.pump();
    h.advance(TTL + Duration::from_secs(1));
    assert_eq!(h.router.session_count(), 0);
    assert_eq!(store.lock().unwrap().total_bytes(), 0);
    assert_eq!(store.lock().unwrap().stream_count(), 0);
}

/// Requests move a busy session's idle end later without touching the router's timers: its
/// deadline stays where it was armed, fires there and is armed again for the rest; the
/// session still ends one TTL after its last request, not before (within a millisecond).
#[test]
fn activity_defers_the_idle_timer_until_it_fires() {
    let mut h = Harness::new(ServerConfig::default().with_session_idle_ttl(Some(TTL)));
    let (id, _) = h.initialize(V);
    let armed = h.router.poll_timeout().expect("the idle timer");
    for n in 0..10 {
        h.advance(Duration::from_secs(30));
        let (_s, handle) = h.call(&id, V, 10 + n, "ping");
        h.reply(handle, "{}");
        assert_eq!(
            h.router.poll_timeout(),
            Some(armed),
            "a request re-armed the timer"
        );
    }
    let last = h.now;
    // The armed deadline passes: armed again for the rest, the session kept.
    h.advance(armed - h.now + Duration::from_millis(1));
    assert_eq!(h.router.session_count(), 1);
    let rearmed = h.router.poll_timeout().expect("armed again");
    assert!(
        rearmed >= last + TTL && rearmed <= last + TTL + Duration::from_millis(1),
        "{:?} after the last request",
        rearmed - last
    );
    h.advance(rearmed - h.now - Duration::from_millis(2));
    assert_eq!(h.router.session_count(), 1, "not before the TTL");
    h.advance(Duration::from_millis(3));
    assert_eq!(h.router.session_count(), 0);
    assert_eq!(closed(&mut h), [CloseReason::IdleExpired]);
}
