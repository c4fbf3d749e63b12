//! Property test of the modern era (2026-07-28): random sequences of app commands (requests
//! that succeed, need input, always need input, fail, hang; cancels; listen / stop; the app
//! answering or refusing input requests), scripted server oddities (5xx, resets, wrong media
//! types, garbage bodies, broken SSE) and time steps, against the fake modern server, which
//! checks every POST's mirrored headers with `mcp_proto::mirror::check_headers`. On every HTTP
//! intent and at the end:
//!
//! - only POSTs: no GET, no DELETE (S-NEW-1, S-NEW-2), no `Mcp-Session-Id`, no
//!   `Last-Event-ID` (S-NEW-3);
//! - every POST is a request (never a response, S-NEW-5; never `notifications/cancelled`,
//!   S-NEW-6) whose `_meta` carries the version, capabilities and info (S-NEW-4) and whose
//!   `MCP-Protocol-Version` and `Mcp-Method` equal the body's (S-NEW-7, S-NEW-8);
//! - an app request is POSTed at most `max_input_rounds + 1` times, each time under an id
//!   never used before (MRTR);
//! - two listening POSTs are never closer than the minimum backoff, unless the app restarted
//!   listening in between (no reconnect storm);
//! - every request ends with exactly one outcome, and nothing follows `Closed`.
//!
//! A second property drives a dual-era session that fell back to a 2025 server (restarts,
//! re-initializations, listening, SSE or JSON replies): one probe ever, and no modern `_meta`
//! or mirrored header after it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcp_proto::client::{
    BackoffConfig, ClientConfig, EraMode, HttpRequestKind, Message, RequestId,
};
use mcp_proto::version::ProtocolVersion;
use mcp_tests::client_harness::{
    Frame, Harness, Match, ModernServer, NetConfig, Reply, Seen, ServerConfig, SseEnd,
    initialize_request,
};
use proptest::prelude::*;
use serde_json::{Value, json};

const MAX_ROUNDS: u32 = 3;

#[derive(Debug, Clone)]
enum Op {
    Request(u8),
    Cancel(u8),
    Listen,
    StopListening,
    /// Answer (`true`) or refuse (`false`) the oldest pending input request.
    Answer(bool),
    AutoAnswer(bool),
    Odd(u8),
    Push,
    Advance(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..8).prop_map(Op::Request),
        1 => any::<u8>().prop_map(Op::Cancel),
        1 => Just(Op::Listen),
        1 => Just(Op::StopListening),
        2 => any::<bool>().prop_map(Op::Answer),
        1 => any::<bool>().prop_map(Op::AutoAnswer),
        2 => (0u8..8).prop_map(Op::Odd),
        1 => Just(Op::Push),
        3 => prop_oneof![0u32..500, 0u32..90_000].prop_map(Op::Advance),
    ]
}

fn request(id: i64, kind: u8) -> Value {
    let (method, params) = match kind {
        0 => ("tools/list", json!({})),
        1 => (
            "tools/call",
            json!({"name": "needs_input", "arguments": {"n": id}}),
        ),
        2 => ("tools/call", json!({"name": "always_input"})),
        3 => ("tools/call", json!({"name": "state_only"})),
        4 => ("nope", json!({})),
        5 => ("hang", json!({})),
        6 => ("resources/read", json!({"uri": "file:///ü"})),
        _ => ("prompts/get", json!({"name": " padded "})),
    };
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})
}

fn odd(kind: u8) -> Reply {
    match kind {
        0 => Reply::Status(500, vec![], Bytes::from_static(b"oops")),
        1 => Reply::Fail,
        2 => Reply::Sse(vec![Frame::default()], SseEnd::Reset),
        3 => Reply::Raw("text/html", Bytes::from_static(b"<html>")),
        4 => Reply::Raw("application/json", Bytes::from_static(b"{not json")),
        5 => Reply::Sse(
            vec![Frame::json(
                json!({"jsonrpc":"2.0","method":"notifications/progress","params":{}}),
            )],
            SseEnd::Close,
        ),
        6 => Reply::Status(
            400,
            vec![],
            Bytes::from_static(br#"{"jsonrpc":"2.0","error":{"code":-32020,"message":"m"}}"#),
        ),
        _ => Reply::Json(json!({"jsonrpc":"2.0","id":"nobody","result":{}})),
    }
}

struct Checker {
    min_delay: Duration,
    last_listen: Option<Instant>,
    listen_reset: bool,
    wire_ids: BTreeSet<String>,
    posts_per_request: BTreeMap<String, u32>,
    seen: usize,
}

impl Checker {
    fn check_new(&mut self, h: &Harness, aliases: &BTreeMap<String, String>) {
        let new: Vec<(Instant, Seen)> = h.log[self.seen..].to_vec();
        self.seen = h.log.len();
        for (at, s) in new {
            let Seen::Http(req) = s else { continue };
            assert_eq!(req.method, http::Method::POST, "S-NEW-1/2: {req:?}");
            assert!(req.headers.get("mcp-session-id").is_none(), "S-NEW-2");
            assert!(req.headers.get("last-event-id").is_none(), "S-NEW-3");
            let b: Value = serde_json::from_slice(&req.body).expect("JSON body");
            let method = b["method"]
                .as_str()
                .expect("S-NEW-5: only requests are POSTed");
            assert_ne!(method, "notifications/cancelled", "S-NEW-6");
            assert!(b.get("id").is_some(), "a request");
            let meta = &b["params"]["_meta"];
            let v = meta["io.modelcontextprotocol/protocolVersion"].as_str();
            assert_eq!(v, Some("2026-07-28"), "S-NEW-4");
            assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
            assert!(meta["io.modelcontextprotocol/clientInfo"].is_object());
            assert_eq!(req.headers["mcp-protocol-version"], "2026-07-28", "S-NEW-7");
            assert_eq!(req.headers["mcp-method"], method, "S-NEW-8");
            let wire = b["id"].to_string();
            assert!(
                self.wire_ids.insert(wire.clone()),
                "id {wire} reused on the wire"
            );
            if req.kind == HttpRequestKind::Listen {
                if let (Some(t), false) = (self.last_listen, self.listen_reset) {
                    assert!(at - t >= self.min_delay, "listen POSTs {:?} apart", at - t);
                }
                self.last_listen = Some(at);
                self.listen_reset = false;
            } else {
                let app = aliases.get(&wire).cloned().unwrap_or(wire);
                let n = self.posts_per_request.entry(app.clone()).or_insert(0);
                *n += 1;
                assert!(*n <= MAX_ROUNDS + 1, "request {app} POSTed {n} times");
            }
        }
    }
}

/// Wire ids of MRTR retries (`<app>#input-<round>`) back to the app's id, as the checker
/// reads them from bodies.
fn aliases_of(h: &Harness) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for r in h.intents() {
        if let Ok(b) = serde_json::from_slice::<Value>(&r.body)
            && let Some(s) = b["id"].as_str()
            && let Some((app, _)) = s.split_once("#input-")
        {
            let app_json = app
                .parse::<i64>()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| Value::from(app).to_string());
            m.insert(b["id"].to_string(), app_json);
        }
    }
    m
}

fn run(auto: bool, seed: u64, ops: &[Op]) {
    let cfg = ClientConfig::new()
        .with_seed(seed)
        .with_max_input_rounds(MAX_ROUNDS)
        .with_request_timeout(Some(Duration::from_secs(120)))
        .with_subscription_filter(json!({"toolsListChanged": true}));
    let cfg = if auto {
        cfg.with_era(EraMode::Auto)
    } else {
        cfg.with_version(ProtocolVersion::V2026_07_28)
    };
    let mut h = Harness::new(
        cfg,
        ServerConfig {
            issue_sessions: false,
            get_supported: false,
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.server.modern = Some(ModernServer::default());
    let mut c = Checker {
        min_delay: BackoffConfig::default().min_delay(),
        last_listen: None,
        listen_reset: true,
        wire_ids: BTreeSet::new(),
        posts_per_request: BTreeMap::new(),
        seen: 0,
    };
    let mut sent: Vec<i64> = Vec::new();
    if auto {
        h.send(initialize_request(1, "2025-11-25")).unwrap();
        h.run_for(Duration::from_millis(100));
        assert!(h.client.is_ready());
        sent.push(1);
    }
    let mut next = 10i64;
    for op in ops {
        match op {
            Op::Request(k) => {
                next += 1;
                if h.send(request(next, *k)).is_ok() {
                    sent.push(next);
                }
            }
            Op::Cancel(p) => {
                if !sent.is_empty() {
                    let id = sent[*p as usize % sent.len()];
                    let _ = h.client.cancel(h.now, &RequestId::Number(id), None);
                    h.drain();
                }
            }
            Op::Listen => {
                c.listen_reset = true;
                let _ = h.client.listen(h.now);
                h.drain();
            }
            Op::StopListening => {
                c.listen_reset = true;
                let _ = h.client.stop_listening(h.now);
                h.drain();
            }
            Op::Answer(ok) => {
                let pending: Vec<RequestId> = h
                    .messages()
                    .into_iter()
                    .filter_map(|d| match d.message {
                        Message::Request(r) => Some(r.id),
                        _ => None,
                    })
                    .collect();
                if let Some(id) = pending.last() {
                    let id = serde_json::to_value(id).unwrap();
                    let reply = if *ok {
                        json!({"jsonrpc":"2.0","id":id,"result":{"role":"assistant","content":{"type":"text","text":"a"},"model":"m"}})
                    } else {
                        json!({"jsonrpc":"2.0","id":id,"error":{"code":-1,"message":"no"}})
                    };
                    // A second answer, or one after a cancel, is refused: fine.
                    let _ = h.send(reply);
                }
            }
            Op::AutoAnswer(on) => h.auto_answer = *on,
            Op::Odd(k) => {
                let m = match k % 3 {
                    0 => "tools/list",
                    1 => "tools/call",
                    _ => "subscriptions/listen",
                };
                h.server.script(Match::Method(m), odd(*k));
            }
            Op::Push => {
                let parts = h.server.push_modern(
                    json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}),
                );
                h.deliver(parts);
            }
            Op::Advance(ms) => h.run_for(Duration::from_millis(u64::from(*ms))),
        }
        c.check_new(&h, &aliases_of(&h));
    }
    h.run_for(Duration::from_secs(200));
    c.check_new(&h, &aliases_of(&h));
    h.client.close(h.now);
    h.drain();
    h.run_for(Duration::from_secs(10));
    c.check_new(&h, &aliases_of(&h));
    assert!(h.client.is_closed());
    // Exactly one outcome per request.
    let mut outcomes: BTreeMap<RequestId, u32> = BTreeMap::new();
    for o in h.outcomes() {
        *outcomes.entry(o.id).or_default() += 1;
    }
    for id in &sent {
        assert_eq!(
            outcomes.get(&RequestId::Number(*id)).copied().unwrap_or(0),
            1,
            "request {id}"
        );
    }
    assert_eq!(outcomes.values().filter(|n| **n != 1).count(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    #[test]
    fn modern_client_invariants_hold(
        auto in any::<bool>(),
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 0..60),
    ) {
        run(auto, seed, &ops);
    }
}

#[derive(Debug, Clone)]
enum LegacyOp {
    Request(u8),
    Cancel(u8),
    Restart,
    Listen,
    StopListening,
    Advance(u32),
}

fn legacy_op() -> impl Strategy<Value = LegacyOp> {
    prop_oneof![
        4 => (0u8..3).prop_map(LegacyOp::Request),
        1 => any::<u8>().prop_map(LegacyOp::Cancel),
        1 => Just(LegacyOp::Restart),
        1 => Just(LegacyOp::Listen),
        1 => Just(LegacyOp::StopListening),
        3 => prop_oneof![0u32..500, 0u32..60_000].prop_map(LegacyOp::Advance),
    ]
}

/// A dual-era session that fell back stays legacy: one probe, ever (re-initialization after
/// a server restart replays `initialize`, it does not probe); no modern `_meta` nor mirrored
/// headers on anything after it; every request ends with exactly one outcome.
fn run_fallback(seed: u64, sse: bool, ops: &[LegacyOp]) {
    let mut h = Harness::new(
        ClientConfig::new()
            .with_era(EraMode::Auto)
            .with_seed(seed)
            .with_request_timeout(Some(Duration::from_secs(60)))
            .with_continuous_listening(true),
        ServerConfig {
            sse_replies: sse,
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.send(initialize_request(1, "2025-11-25")).unwrap();
    h.run_for(Duration::from_millis(200));
    assert!(h.client.is_ready());
    assert_eq!(h.client.era(), Some(mcp_proto::Era::Legacy));
    let mut sent = vec![1i64];
    let mut next = 10i64;
    for op in ops {
        match op {
            LegacyOp::Request(k) => {
                next += 1;
                let m = ["tools/list", "hang", "ask"][*k as usize % 3];
                if h.send(json!({"jsonrpc":"2.0","id":next,"method":m,"params":{}}))
                    .is_ok()
                {
                    sent.push(next);
                }
            }
            LegacyOp::Cancel(p) => {
                let id = sent[*p as usize % sent.len()];
                let _ = h.client.cancel(h.now, &RequestId::Number(id), None);
                h.drain();
            }
            LegacyOp::Restart => h.restart_server(),
            LegacyOp::Listen => {
                let _ = h.client.listen(h.now);
                h.drain();
            }
            LegacyOp::StopListening => {
                let _ = h.client.stop_listening(h.now);
                h.drain();
            }
            LegacyOp::Advance(ms) => h.run_for(Duration::from_millis(u64::from(*ms))),
        }
    }
    h.run_for(Duration::from_secs(120));
    h.client.close(h.now);
    h.drain();
    h.run_for(Duration::from_secs(10));
    let intents = h.intents();
    let probes = intents
        .iter()
        .filter(|r| {
            serde_json::from_slice::<Value>(&r.body).is_ok_and(|b| b["method"] == "server/discover")
        })
        .count();
    assert_eq!(probes, 1, "one probe, ever");
    for r in &intents[1..] {
        assert!(r.headers.get("mcp-method").is_none(), "{r:?}");
        if let Ok(b) = serde_json::from_slice::<Value>(&r.body) {
            assert!(
                b["params"]
                    .get("_meta")
                    .is_none_or(|m| m.get("io.modelcontextprotocol/protocolVersion").is_none()),
                "{b}"
            );
        }
    }
    let mut outcomes: BTreeMap<RequestId, u32> = BTreeMap::new();
    for o in h.outcomes() {
        *outcomes.entry(o.id).or_default() += 1;
    }
    for id in &sent {
        assert_eq!(
            outcomes.get(&RequestId::Number(*id)).copied().unwrap_or(0),
            1,
            "request {id}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn a_fallen_back_session_stays_legacy(
        seed in any::<u64>(),
        sse in any::<bool>(),
        ops in prop::collection::vec(legacy_op(), 0..40),
    ) {
        run_fallback(seed, sse, &ops);
    }
}
