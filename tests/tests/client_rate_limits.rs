//! 429 on a POST, on the virtual clock: the client waits the server's `Retry-After` (and up
//! to a quarter more, spread by its seed; or its backoff without one) and sends the same message again, same JSON-RPC id, at most
//! `RateLimitRetry::max_retries` times; then, or when the server asks for more than
//! `max_wait`, the request fails with `ClientError::RateLimited`. A request cancelled or timed
//! out during the wait is not sent again.

use std::time::{Duration, Instant};

use bytes::Bytes;
use mcp_proto::client::{
    ClientConfig, ClientError, ClientEvent, HttpRequestKind, RateLimitRetry, RequestId,
    RequestResult,
};
use mcp_tests::client_harness::{Harness, Match, NetConfig, Reply, ServerConfig};
use serde_json::Value;

fn too_many(retry_after: Option<u64>) -> Reply {
    let headers = retry_after
        .map(|s| vec![("retry-after", s.to_string())])
        .unwrap_or_default();
    let body = match retry_after {
        Some(s) => format!(
            r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32000,"message":"rate limit exceeded","data":{{"retryAfter":{s}}}}}}}"#
        ),
        None => r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"slow down"}}"#
            .to_owned(),
    };
    Reply::Status(429, headers, Bytes::from(body))
}

fn pair(retry: Option<RateLimitRetry>) -> Harness {
    let mut cfg = ClientConfig::new().with_seed(7);
    if let Some(r) = retry {
        cfg = cfg.with_rate_limit_retry(r);
    }
    let mut h = Harness::new(cfg, ServerConfig::default(), NetConfig::default());
    h.initialize();
    h
}

/// The POSTs of `method`: when each went out, and its JSON body.
fn posts_of(h: &Harness, method: &str) -> Vec<(Instant, Value)> {
    h.intents_of(HttpRequestKind::Post)
        .into_iter()
        .filter_map(|(at, r)| {
            let v: Value = serde_json::from_slice(&r.body).ok()?;
            (v["method"] == method).then_some((at, v))
        })
        .collect()
}

#[test]
fn a_429_is_sent_again_after_retry_after_with_the_same_id() {
    let mut h = pair(None);
    h.server
        .script(Match::Method("tools/call"), too_many(Some(2)));
    h.server
        .script(Match::Method("tools/call"), too_many(Some(3)));
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(10));
    assert!(h.result_of(id).is_some(), "{:?}", h.outcomes_of(id));
    let posts = posts_of(&h, "tools/call");
    assert_eq!(posts.len(), 3, "{posts:?}");
    for (_, body) in &posts {
        assert_eq!(body["id"], id, "the same JSON-RPC id");
        assert_eq!(body, &posts[0].1, "the same message");
    }
    assert!(posts[1].0 - posts[0].0 >= Duration::from_secs(2));
    assert!(posts[2].0 - posts[1].0 >= Duration::from_secs(3));
    // At most a quarter more than asked (the default jitter, 50 %, halved).
    assert!(posts[1].0 - posts[0].0 <= Duration::from_millis(2_500));
    assert!(posts[2].0 - posts[1].0 <= Duration::from_millis(3_750));
    let waits: Vec<(u32, Option<Duration>, Option<RequestId>)> = h
        .events()
        .into_iter()
        .filter_map(|e| match e {
            ClientEvent::RateLimited {
                attempt,
                retry_after,
                request,
                ..
            } => Some((attempt, retry_after, request)),
            _ => None,
        })
        .collect();
    let rid = Some(RequestId::Number(id));
    assert_eq!(
        waits,
        vec![
            (1, Some(Duration::from_secs(2)), rid.clone()),
            (2, Some(Duration::from_secs(3)), rid)
        ]
    );
}

/// Clients a server pushed back at the same moment (`Retry-After: 1`) come back spread over
/// a quarter of a second after it, not all at once to be pushed back again: never earlier
/// than asked.
#[test]
fn clients_pushed_back_together_come_back_spread_out() {
    let mut waits = Vec::new();
    for seed in 1..=8 {
        let mut h = Harness::new(
            ClientConfig::new().with_seed(seed),
            ServerConfig::default(),
            NetConfig::default(),
        );
        h.initialize();
        h.server
            .script(Match::Method("tools/call"), too_many(Some(1)));
        let id = h.request("tools/call");
        h.run_for(Duration::from_secs(3));
        assert!(h.result_of(id).is_some(), "{:?}", h.outcomes_of(id));
        let posts = posts_of(&h, "tools/call");
        assert_eq!(posts.len(), 2, "{posts:?}");
        waits.push(posts[1].0 - posts[0].0);
    }
    for w in &waits {
        assert!(
            (Duration::from_secs(1)..=Duration::from_millis(1_250)).contains(w),
            "{waits:?}"
        );
    }
    let mut distinct = waits.clone();
    distinct.sort();
    distinct.dedup_by(|a, b| a.abs_diff(*b) < Duration::from_millis(10));
    assert!(distinct.len() >= 4, "spread out: {waits:?}");
}

#[test]
fn after_max_retries_the_request_fails_with_rate_limited() {
    let mut h = pair(Some(RateLimitRetry::new(1, Duration::from_secs(30))));
    h.server
        .script(Match::Method("tools/call"), too_many(Some(1)));
    h.server
        .script(Match::Method("tools/call"), too_many(Some(1)));
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(5));
    assert_eq!(
        h.outcomes_of(id),
        vec![RequestResult::Failed(ClientError::RateLimited {
            retry_after: Some(Duration::from_secs(1)),
            retries: 1,
        })]
    );
    assert_eq!(posts_of(&h, "tools/call").len(), 2);
    // The session is not harmed.
    let next = h.request("tools/call");
    h.run_for(Duration::from_millis(100));
    assert!(h.result_of(next).is_some());
}

#[test]
fn a_retry_after_over_the_max_wait_fails_at_once() {
    let mut h = pair(None);
    h.server
        .script(Match::Method("tools/call"), too_many(Some(120)));
    let id = h.request("tools/call");
    h.run_for(Duration::from_millis(100));
    assert_eq!(
        h.outcomes_of(id),
        vec![RequestResult::Failed(ClientError::RateLimited {
            retry_after: Some(Duration::from_secs(120)),
            retries: 0,
        })]
    );
    assert_eq!(posts_of(&h, "tools/call").len(), 1);
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::RateLimited { .. })),
        0
    );
}

#[test]
fn without_retry_after_the_backoff_schedule_is_used() {
    let mut h = pair(None);
    h.server.script(Match::Method("tools/call"), too_many(None));
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(5));
    assert!(h.result_of(id).is_some());
    let posts = posts_of(&h, "tools/call");
    assert_eq!(posts.len(), 2);
    // The default backoff's first delay: 1 s minus up to 50 % jitter.
    let gap = posts[1].0 - posts[0].0;
    assert!(
        gap >= Duration::from_millis(500) && gap <= Duration::from_millis(1100),
        "{gap:?}"
    );
}

#[test]
fn a_request_cancelled_during_the_wait_is_not_sent_again() {
    let mut h = pair(None);
    h.server
        .script(Match::Method("tools/call"), too_many(Some(5)));
    let id = h.request("tools/call");
    h.run_for(Duration::from_millis(200));
    h.client
        .cancel(h.now, &RequestId::Number(id), None)
        .expect("in flight");
    h.drain();
    h.run_for(Duration::from_secs(10));
    assert_eq!(h.outcomes_of(id), vec![RequestResult::Cancelled]);
    assert_eq!(posts_of(&h, "tools/call").len(), 1, "not sent again");
    assert!(
        posts_of(&h, "notifications/cancelled").is_empty(),
        "the server never processed it: nothing to cancel"
    );
}

#[test]
fn a_request_timing_out_during_the_wait_is_not_sent_again() {
    let cfg = ClientConfig::new()
        .with_seed(7)
        .with_request_timeout(Some(Duration::from_secs(1)));
    let mut h = Harness::new(cfg, ServerConfig::default(), NetConfig::default());
    h.initialize();
    h.server
        .script(Match::Method("tools/call"), too_many(Some(5)));
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(10));
    assert_eq!(
        h.outcomes_of(id),
        vec![RequestResult::Failed(ClientError::TimedOut)]
    );
    assert_eq!(posts_of(&h, "tools/call").len(), 1);
}

#[test]
fn retries_off_fails_at_the_first_429() {
    let mut h = pair(Some(RateLimitRetry::off()));
    h.server
        .script(Match::Method("tools/call"), too_many(Some(1)));
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(3));
    assert_eq!(
        h.outcomes_of(id),
        vec![RequestResult::Failed(ClientError::RateLimited {
            retry_after: Some(Duration::from_secs(1)),
            retries: 0,
        })]
    );
    assert_eq!(posts_of(&h, "tools/call").len(), 1);
}

#[test]
fn a_503_with_retry_after_is_sent_again_and_one_without_fails() {
    let busy = |retry_after: Option<u64>| {
        let headers = retry_after
            .map(|s| vec![("retry-after", s.to_string())])
            .unwrap_or_default();
        let body = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"the session store is busy"}}"#;
        Reply::Status(503, headers, Bytes::from(body))
    };
    // A server pushing back (its store is behind): the same message again after 1 s.
    let mut h = pair(None);
    h.server.script(Match::Method("tools/call"), busy(Some(1)));
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(5));
    assert!(h.result_of(id).is_some(), "{:?}", h.outcomes_of(id));
    let posts = posts_of(&h, "tools/call");
    assert_eq!(posts.len(), 2, "{posts:?}");
    assert_eq!(posts[0].1, posts[1].1, "the same message, the same id");
    assert!(posts[1].0 - posts[0].0 >= Duration::from_secs(1));
    // A 503 that does not say when to come back is not a push back: the request fails.
    let mut h = pair(None);
    h.server.script(Match::Method("tools/call"), busy(None));
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(5));
    assert!(h.result_of(id).is_none());
    assert_eq!(posts_of(&h, "tools/call").len(), 1);
}
