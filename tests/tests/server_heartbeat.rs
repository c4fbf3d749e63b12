//! Heartbeats (seed `WithHeartbeatInterval`): `:` comment frames on idle SSE streams, default
//! 15 s, reset by traffic (S-SSE-16).

use std::time::Duration;

use mcp_proto::server::{ServerConfig, Target};
use mcp_tests::server_harness::{Harness, Req};

const V: &str = "2025-06-18";

fn comments(h: &Harness, s: mcp_proto::server::ExchangeId) -> usize {
    h.response(s).frames().iter().filter(|f| f.comment).count()
}

#[test]
fn default_heartbeat_every_15_seconds_on_idle_streams() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let g = h.send(Req::get(&id));
    h.advance(Duration::from_secs(14));
    assert_eq!(comments(&h, g), 0);
    h.advance(Duration::from_secs(1));
    assert_eq!(comments(&h, g), 1);
    h.advance(Duration::from_secs(45));
    assert_eq!(comments(&h, g), 4);
    assert!(h.response(g).body.starts_with(b": "));
}

#[test]
fn traffic_resets_the_heartbeat() {
    let mut h = Harness::new(
        ServerConfig::default().with_heartbeat_interval(Some(Duration::from_secs(10))),
    );
    let (id, session) = h.initialize(V);
    let g = h.send(Req::get(&id));
    for _ in 0..5 {
        h.advance(Duration::from_secs(9));
        h.notify(Target::Session(session), "n", "{}");
    }
    assert_eq!(comments(&h, g), 0);
    h.advance(Duration::from_secs(10));
    assert_eq!(comments(&h, g), 1);
}

#[test]
fn heartbeats_on_post_streams_too_and_stop_at_the_end() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 2, "slow");
    h.notify(Target::Request(handle), "n", "{}");
    h.advance(Duration::from_secs(16));
    assert_eq!(comments(&h, s), 1);
    h.reply(handle, "{}");
    h.advance(Duration::from_secs(60));
    assert_eq!(comments(&h, s), 1, "none after ResponseEnd");
}

#[test]
fn heartbeat_can_be_disabled() {
    let mut h = Harness::new(ServerConfig::default().with_heartbeat_interval(None));
    let (id, _) = h.initialize(V);
    let g = h.send(Req::get(&id));
    h.advance(Duration::from_secs(600));
    assert_eq!(comments(&h, g), 0);
}
