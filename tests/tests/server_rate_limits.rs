//! Rate limits on the router, on a virtual clock: 429 with `Retry-After` and a JSON-RPC error
//! carrying the delay, admitted again after the refill, buckets per session, principal and
//! client address kept apart, off by default, both eras.

use std::time::Duration;

use http::StatusCode;
use mcp_proto::ProtocolVersion;
use mcp_proto::mirror;
use mcp_proto::server::{ProtocolError, RateLimits, RateScope, ServerConfig, ServerEvent};
use mcp_tests::server_harness::{Harness, Req};
use serde_json::json;

const V: &str = "2025-06-18";

fn ping(id: i64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)
}

/// Asserts `r` is the rate limit's answer and returns its `Retry-After` seconds.
fn assert_limited(h: &Harness, s: mcp_proto::server::ExchangeId, scope: RateScope) -> u64 {
    let r = h.response(s);
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{:?}", h.log);
    let secs: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("delta-seconds");
    assert!(secs >= 1);
    let body = r.json();
    assert_eq!(body["error"]["code"], -32000);
    assert_eq!(body["error"]["data"]["retryAfter"], secs);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rate limit")
    );
    assert!(body["id"].is_null());
    assert!(h.events.iter().any(|e| matches!(
        e,
        ServerEvent::Rejected { stream, error: ProtocolError::RateLimited { scope: sc, .. } }
            if *stream == s && *sc == scope
    )));
    secs
}

#[test]
fn off_by_default() {
    assert_eq!(ServerConfig::default().limits.rate, RateLimits::off());
    assert!(!RateLimits::default().is_on());
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    for i in 0..200 {
        let s = h.send(Req::post(&ping(i)).session(&id).peer("192.0.2.1:5000"));
        assert_ne!(h.response(s).status, Some(StatusCode::TOO_MANY_REQUESTS));
        let (handle, _, _) = h.expect_request();
        h.reply(handle, "{}");
    }
}

#[test]
fn over_the_session_limit_is_429_with_retry_after_then_admitted_after_the_refill() {
    // 2 per second, bursts of 3; `notifications/initialized` spends one token.
    let config = ServerConfig::default().with_rate_limits(RateLimits::default().per_session(2, 3));
    let mut h = Harness::new(config);
    let (id, _) = h.initialize(V);
    let ok = h.send(Req::get(&id).version(V));
    assert_eq!(h.response(ok).status(), StatusCode::OK, "GET counts too");
    let ok = h.post_in(&id, V, &ping(2));
    let (handle, _, _) = h.expect_request();
    h.reply(handle, "{}");
    assert_eq!(h.response(ok).status(), StatusCode::OK);
    let s = h.post_in(&id, V, &ping(3));
    assert_eq!(assert_limited(&h, s, RateScope::Session), 1);
    assert!(h.response(s).stopped_reading, "the body is not read");
    assert!(h.next_request().is_none(), "not handed to the app");
    // Half a token later: still refused, still "1" (rounded up).
    h.advance(Duration::from_millis(250));
    let s = h.post_in(&id, V, &ping(4));
    assert_eq!(assert_limited(&h, s, RateScope::Session), 1);
    h.advance(Duration::from_millis(250));
    let s = h.post_in(&id, V, &ping(5));
    assert!(h.response(s).status.is_none(), "admitted after the refill");
    let (handle, _, req) = h.expect_request();
    assert_eq!(req.id, mcp_proto::jsonrpc::RequestId::Number(5));
    h.reply(handle, "{}");
    // Another session has its own bucket.
    let (other, _) = h.initialize(V);
    let s = h.post_in(&other, V, &ping(6));
    assert!(h.response(s).status.is_none());
}

#[test]
fn an_unknown_session_id_costs_no_bucket_and_gets_404() {
    let config = ServerConfig::default().with_rate_limits(RateLimits::default().per_session(1, 1));
    let mut h = Harness::new(config);
    for i in 0..20 {
        let s = h.post_in(&format!("made-up-{i}"), V, &ping(i));
        assert_eq!(h.response(s).status(), StatusCode::NOT_FOUND);
    }
}

#[test]
fn addresses_have_separate_buckets_and_ipv6_counts_by_its_64() {
    let config = ServerConfig::default()
        .with_stateless(true)
        .with_rate_limits(RateLimits::default().per_address(1, 2));
    let mut h = Harness::new(config);
    let post = |peer: &str, i| Req::post(&ping(i)).version(V).peer(peer);
    for i in 0..2 {
        let s = h.send(post("192.0.2.1:4000", i));
        assert!(h.response(s).status.is_none());
    }
    // Another connection from the same address shares the bucket.
    let s = h.send(post("192.0.2.1:4001", 3));
    let secs = assert_limited(&h, s, RateScope::Address);
    assert_eq!(secs, 1);
    let s = h.send(post("192.0.2.2:4000", 4));
    assert!(h.response(s).status.is_none(), "another address");
    for i in 0..2 {
        let s = h.send(post(&format!("[2001:db8:1:2::{i}]:443"), 10 + i));
        assert!(h.response(s).status.is_none());
    }
    let s = h.send(post("[2001:db8:1:2:ffff::9]:443", 20));
    assert_limited(&h, s, RateScope::Address);
    let s = h.send(post("[2001:db8:1:3::1]:443", 21));
    assert!(h.response(s).status.is_none(), "another /64");
    // A request whose address the adapter does not know is not charged to any.
    let s = h.send(Req::post(&ping(30)).version(V));
    assert!(h.response(s).status.is_none());
    // OPTIONS is not counted.
    let s = h.send(Req::new(http::Method::OPTIONS, "/mcp").peer("192.0.2.1:4000"));
    assert_eq!(h.response(s).status(), StatusCode::NO_CONTENT);
}

#[test]
fn principals_have_separate_buckets() {
    let config = ServerConfig::default()
        .with_stateless(true)
        .with_rate_limits(RateLimits::default().per_principal(1, 2));
    let mut h = Harness::new(config);
    let post = |who: &str, i| Req::post(&ping(i)).version(V).principal(who);
    for i in 0..2 {
        let s = h.send(post("alice", i));
        assert!(h.response(s).status.is_none());
    }
    let s = h.send(post("alice", 2));
    assert_limited(&h, s, RateScope::Principal);
    let s = h.send(post("bob", 3));
    assert!(h.response(s).status.is_none());
    // Anonymous requests have no principal bucket.
    for i in 10..15 {
        let s = h.send(Req::post(&ping(i)).version(V));
        assert!(h.response(s).status.is_none());
    }
    h.advance(Duration::from_secs(1));
    let s = h.send(post("alice", 4));
    assert!(h.response(s).status.is_none(), "refilled");
}

#[test]
fn modern_requests_are_limited_too() {
    let config = ServerConfig::default()
        .with_supported_versions(ProtocolVersion::ALL.iter().copied())
        .with_rate_limits(RateLimits::default().per_address(1, 1));
    let mut h = Harness::new(config);
    let modern = |id: i64| {
        let params = json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }});
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
        let mut req = Req::post(&body.to_string())
            .version("2026-07-28")
            .peer("198.51.100.7:1234");
        let raw = serde_json::value::RawValue::from_string(params.to_string()).unwrap();
        for (n, v) in mirror::mirror_headers("tools/list", Some(&raw)) {
            req.headers.insert(n, v);
        }
        req
    };
    let s = h.send(modern(1));
    assert!(h.response(s).status.is_none(), "{:?}", h.log);
    let s = h.send(modern(2));
    assert_limited(&h, s, RateScope::Address);
}

#[test]
fn a_parked_request_is_charged_once() {
    use mcp_tests::cluster_harness::Cluster;
    use mcp_tests::server_harness::{init_body, init_result};
    const V2: &str = "2025-11-25";
    // One token per principal, per instance: a request parked while the session's record
    // loads must not be charged again when it runs.
    let mut c = Cluster::new(2, |_| {
        ServerConfig::default().with_rate_limits(RateLimits::default().per_principal(1, 1))
    });
    let s = c
        .node(0)
        .send(Req::post(&init_body(1, V2)).principal("alice"));
    c.settle();
    let (h, _, _) = c.node(0).expect_request();
    c.node(0).reply(h, &init_result(V2));
    c.settle();
    let sid = c
        .node(0)
        .response(s)
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let s = c.node(1).send(
        Req::post(&ping(2))
            .session(&sid)
            .version(V2)
            .principal("alice"),
    );
    c.settle();
    assert_eq!(c.node(1).response(s).status, None, "admitted");
    let (_, _, req) = c.node(1).expect_request();
    assert_eq!(&*req.method, "ping");
    // The next one on that instance is over the limit.
    let s = c.node(1).send(
        Req::post(&ping(3))
            .session(&sid)
            .version(V2)
            .principal("alice"),
    );
    c.settle();
    assert_eq!(
        c.node(1).response(s).status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}
