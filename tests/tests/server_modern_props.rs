//! Property: one router serving both eras never leaks between them. Random interleavings of
//! legacy sessions (initialize, calls) and modern requests (some carrying a stray
//! `Mcp-Session-Id` of a live legacy session, S-NEW-2), answered in random order or
//! abandoned by a disconnect.
//!
//! Invariants: a modern request reaches the app with no session and its answer never carries
//! `Mcp-Session-Id`; a legacy request reaches the app in its own session; every answer carries
//! the client's id; the session count is exactly the number of legacy initializations; a
//! disconnected modern request is cancelled and its exchange gets nothing more.

use http::StatusCode;
use mcp_proto::mirror;
use mcp_proto::server::{ExchangeId, RequestHandle, ServerConfig, ServerOutput, SessionHandle};
use mcp_tests::server_harness::{Harness, Req, raw};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
enum Op {
    LegacyInit,
    LegacyCall {
        session: usize,
        id: i64,
    },
    ModernCall {
        id: i64,
        stray_session: Option<usize>,
    },
    Reply(usize),
    Disconnect(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::LegacyInit),
        3 => (any::<usize>(), 1i64..4).prop_map(|(session, id)| Op::LegacyCall { session, id }),
        3 => (1i64..4, proptest::option::of(any::<usize>()))
            .prop_map(|(id, stray_session)| Op::ModernCall { id, stray_session }),
        4 => any::<usize>().prop_map(Op::Reply),
        1 => any::<usize>().prop_map(Op::Disconnect),
    ]
}

struct Pending {
    stream: ExchangeId,
    handle: RequestHandle,
    id: i64,
    modern: bool,
}

fn modern_req(id: i64) -> Req {
    let params = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    }});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
    let mut req = Req::post(&body.to_string()).version("2026-07-28");
    for (n, v) in mirror::mirror_headers("tools/list", Some(&raw(&params.to_string()))) {
        req.headers.insert(n, v);
    }
    req
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn eras_do_not_leak_into_each_other(ops in proptest::collection::vec(op(), 1..40)) {
        let mut h = Harness::new(ServerConfig::default().with_modern());
        let mut sessions: Vec<(String, SessionHandle)> = Vec::new();
        let mut pending: Vec<Pending> = Vec::new();
        for op in ops {
            match op {
                Op::LegacyInit => {
                    sessions.push(h.initialize("2025-11-25"));
                }
                Op::LegacyCall { session, id } => {
                    if sessions.is_empty() {
                        continue;
                    }
                    let (sid, handle) = sessions[session % sessions.len()].clone();
                    // Ids in flight in a session must be unique: skip a duplicate.
                    if pending.iter().any(|p| !p.modern && p.id == id) {
                        continue;
                    }
                    let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
                    let s = h.post_in(&sid, "2025-11-25", &body);
                    let (rh, got, _) = h.expect_request();
                    prop_assert_eq!(got, Some(handle));
                    pending.push(Pending { stream: s, handle: rh, id, modern: false });
                }
                Op::ModernCall { id, stray_session } => {
                    let mut req = modern_req(id);
                    if let (Some(i), false) = (stray_session, sessions.is_empty()) {
                        req = req.session(&sessions[i % sessions.len()].0);
                    }
                    let s = h.send(req);
                    let (rh, got, _) = h.expect_request();
                    prop_assert_eq!(got, None, "a modern request has no session");
                    pending.push(Pending { stream: s, handle: rh, id, modern: true });
                }
                Op::Reply(i) => {
                    if pending.is_empty() {
                        continue;
                    }
                    let p = pending.remove(i % pending.len());
                    h.reply(p.handle, r#"{"tools":[]}"#);
                    let r = h.response(p.stream);
                    prop_assert_eq!(r.status(), StatusCode::OK);
                    let msg = if r.is_sse() { r.sse_messages().pop().unwrap() } else { r.json() };
                    prop_assert_eq!(&msg["id"], &json!(p.id));
                    if p.modern {
                        prop_assert!(r.header("mcp-session-id").is_none());
                        prop_assert!(r.event_ids().is_empty());
                    }
                }
                Op::Disconnect(i) => {
                    if pending.is_empty() {
                        continue;
                    }
                    let p = pending.remove(i % pending.len());
                    h.router.handle_disconnect(h.now, p.stream);
                    h.pump();
                    let cancelled = h.take_other().iter().any(|o| {
                        matches!(o, ServerOutput::Cancelled { handle, .. } if *handle == p.handle)
                    });
                    // A pending JSON answer cannot be resumed in either era: cancelled at once.
                    prop_assert!(cancelled);
                    let late = h.router.respond_result(h.now, p.handle, raw("{}"));
                    prop_assert!(late.is_err(), "a cancelled request cannot be answered");
                }
            }
            prop_assert_eq!(h.router.session_count(), sessions.len());
        }
        for (sid, handle) in &sessions {
            prop_assert_eq!(h.router.session_by_id(sid), Some(*handle));
        }
    }
}
