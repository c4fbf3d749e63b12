//! Property test of the session lifecycle: random sequences of initialize, requests, replies,
//! notifications, GETs (with and without `Last-Event-ID`), DELETEs, disconnects,
//! cancellations, polling closes, server→client requests, garbage and time jumps, checked
//! against a model after every step:
//!
//! 1. 404 after terminate or expiry, and never before;
//! 2. idle sessions are evicted when the TTL has passed since their last activity, not before;
//! 3. a message is never delivered on two streams (a replay resends it on the *same* logical
//!    stream, with the same event id);
//! 4. a replay returns exactly the events after the given id on the same stream (contiguous
//!    sequence numbers of that stream, up to the newest one seen);
//! 5. every request gets at most one response, and exactly one unless cancelled or its
//!    session ended.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use http::StatusCode;
use mcp_proto::jsonrpc::{Notification, Outcome};
use mcp_proto::server::{
    CloseReason, ExchangeId, RequestHandle, ResponseMode, SendError, ServerConfig, ServerOutput,
    SessionHandle, Target,
};
use mcp_tests::server_harness::{AppEvent, Harness, Req, init_body, init_result, raw};
use proptest::prelude::*;
use serde_json::Value;

const V: &str = "2025-11-25";
const TTL: Duration = Duration::from_secs(100);

#[derive(Debug, Clone)]
enum Op {
    Init,
    Call(usize),
    Reply(usize),
    NotifyRelated(usize),
    NotifySession(usize),
    Get(usize),
    Resume(usize, usize),
    Delete(usize),
    Disconnect(usize),
    Cancel(usize),
    PollClose(usize),
    ServerRequest(usize),
    Garbage(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Init),
        6 => any::<usize>().prop_map(Op::Call),
        6 => any::<usize>().prop_map(Op::Reply),
        3 => any::<usize>().prop_map(Op::NotifyRelated),
        3 => any::<usize>().prop_map(Op::NotifySession),
        2 => any::<usize>().prop_map(Op::Get),
        3 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Resume(a, b)),
        1 => any::<usize>().prop_map(Op::Delete),
        3 => any::<usize>().prop_map(Op::Disconnect),
        2 => any::<usize>().prop_map(Op::Cancel),
        2 => any::<usize>().prop_map(Op::PollClose),
        2 => any::<usize>().prop_map(Op::ServerRequest),
        1 => any::<usize>().prop_map(Op::Garbage),
        4 => (0u64..250).prop_map(Op::Advance),
    ]
}

#[derive(Debug)]
struct MSession {
    id: String,
    handle: SessionHandle,
    alive: bool,
    last_touch: Instant,
    streams: Vec<ExchangeId>,
}

#[derive(Debug)]
struct MRequest {
    session: usize,
    wire_id: i64,
    responded: bool,
    cancelled: bool,
}

struct World {
    h: Harness,
    sessions: Vec<MSession>,
    requests: BTreeMap<RequestHandle, MRequest>,
    disconnected: BTreeSet<ExchangeId>,
    next_wire: i64,
    next_marker: u64,
}

impl World {
    fn new(mode: ResponseMode) -> Self {
        // An endless grace window: a handler stays busy until answered, so the model knows
        // exactly when a session is idle.
        let cfg = ServerConfig::default()
            .with_session_idle_ttl(Some(TTL))
            .with_response_mode(mode)
            .with_resume_grace(Duration::from_secs(1_000_000_000));
        World {
            h: Harness::new(cfg),
            sessions: Vec::new(),
            requests: BTreeMap::new(),
            disconnected: BTreeSet::new(),
            next_wire: 0,
            next_marker: 0,
        }
    }

    fn marker(&mut self) -> String {
        self.next_marker += 1;
        format!(r#"{{"marker":{}}}"#, self.next_marker)
    }

    fn touch(&mut self, s: usize) {
        if self.sessions[s].alive {
            self.sessions[s].last_touch = self.h.now;
        }
    }

    fn busy(&self, s: usize) -> bool {
        let m = &self.sessions[s];
        let open = m.streams.iter().any(|st| {
            !self.disconnected.contains(st) && self.h.exchanges.get(st).is_some_and(|c| !c.ended)
        });
        open || self
            .requests
            .values()
            .any(|r| r.session == s && !r.responded && !r.cancelled)
    }

    /// Reads cancellations and session ends; checks eviction is never early (property 2).
    fn absorb(&mut self) {
        let by_handle: HashMap<SessionHandle, usize> = self
            .sessions
            .iter()
            .enumerate()
            .map(|(i, s)| (s.handle, i))
            .collect();
        for o in self.h.take_other() {
            match o {
                ServerOutput::Cancelled { handle, .. } => {
                    if let Some(r) = self.requests.get_mut(&handle) {
                        r.cancelled = true;
                    }
                }
                ServerOutput::SessionClosed { session, reason } => {
                    let i = by_handle[&session];
                    assert!(self.sessions[i].alive, "closed twice");
                    if reason == CloseReason::IdleExpired {
                        assert!(
                            self.h.now >= self.sessions[i].last_touch + TTL,
                            "evicted before the TTL"
                        );
                        assert!(!self.busy(i), "evicted while busy");
                    }
                    self.sessions[i].alive = false;
                    for r in self.requests.values_mut() {
                        if r.session == i && !r.responded {
                            r.cancelled = true;
                        }
                    }
                }
                _ => {}
            }
        }
        self.h.take_notifications();
        // Property 2, the other half: due evictions happened.
        for (i, s) in self.sessions.iter().enumerate() {
            if s.alive && self.h.now >= s.last_touch + TTL && !self.busy(i) {
                panic!(
                    "session {i} idle past its TTL but not evicted: now-touch={:?} model={:?} router={:?} log={:#?}",
                    self.h.now - s.last_touch,
                    self.requests,
                    self.h.router,
                    &self.h.log[self.h.log.len().saturating_sub(6)..]
                );
            }
            assert_eq!(
                self.h.router.session_id(s.handle).is_some(),
                s.alive,
                "router and model disagree on session {i}"
            );
        }
    }

    fn advance(&mut self, secs: u64) {
        let target = self.h.now + Duration::from_secs(secs);
        while let Some(at) = self.h.router.poll_timeout() {
            if at > target {
                break;
            }
            self.h.now = self.h.now.max(at);
            self.h.router.handle_timeout(self.h.now);
            self.h.pump();
            self.absorb();
        }
        self.h.now = target;
        self.h.router.handle_timeout(self.h.now);
        self.h.pump();
        self.absorb();
    }

    /// Property 1 for a request on session `s`.
    fn check_status(&self, s: usize, st: ExchangeId) {
        let c = self.h.response(st);
        if self.sessions[s].alive {
            assert_ne!(
                c.status,
                Some(StatusCode::NOT_FOUND),
                "404 for a live session"
            );
        } else {
            assert_eq!(
                c.status,
                Some(StatusCode::NOT_FOUND),
                "a dead session must get 404"
            );
        }
    }

    fn pick_request(&self, k: usize) -> Option<RequestHandle> {
        let open: Vec<_> = self
            .requests
            .iter()
            .filter(|(_, r)| !r.responded && !r.cancelled)
            .map(|(h, _)| *h)
            .collect();
        (!open.is_empty()).then(|| open[k % open.len()])
    }

    fn apply(&mut self, op: Op) {
        let n = self.sessions.len();
        match op {
            Op::Init => {
                let st = self.h.send(Req::post(&init_body(1, V)));
                let (handle, session, _) = self.h.expect_request();
                self.h.reply(handle, &init_result(V));
                let id = self
                    .h
                    .response(st)
                    .header("mcp-session-id")
                    .unwrap()
                    .to_owned();
                self.sessions.push(MSession {
                    id,
                    handle: session.unwrap(),
                    alive: true,
                    last_touch: self.h.now,
                    streams: vec![st],
                });
            }
            Op::Call(s) if n > 0 => {
                let s = s % n;
                self.next_wire += 1;
                let wire = self.next_wire;
                let body = format!(r#"{{"jsonrpc":"2.0","id":{wire},"method":"tools/call"}}"#);
                let st = self.h.post_in(&self.sessions[s].id.clone(), V, &body);
                self.touch(s);
                self.check_status(s, st);
                self.sessions[s].streams.push(st);
                if self.sessions[s].alive {
                    let (handle, _, _) = self.h.expect_request();
                    self.requests.insert(
                        handle,
                        MRequest {
                            session: s,
                            wire_id: wire,
                            responded: false,
                            cancelled: false,
                        },
                    );
                }
            }
            Op::Reply(k) => {
                if let Some(handle) = self.pick_request(k) {
                    let m = self.marker();
                    self.h
                        .router
                        .respond(self.h.now, handle, Outcome::Result(raw(&m)))
                        .unwrap();
                    self.h.pump();
                    let r = self.requests.get_mut(&handle).unwrap();
                    r.responded = true;
                    let s = r.session;
                    self.touch(s);
                    // Property 5: never twice.
                    assert_eq!(
                        self.h
                            .router
                            .respond(self.h.now, handle, Outcome::Result(raw("{}"))),
                        Err(SendError::UnknownHandle)
                    );
                }
            }
            Op::NotifyRelated(k) => {
                if let Some(handle) = self.pick_request(k) {
                    let m = self.marker();
                    let n = Notification {
                        method: "n/rel".into(),
                        params: Some(raw(&m)),
                    };
                    self.h
                        .router
                        .notify(self.h.now, Target::Request(handle), n)
                        .unwrap();
                    self.h.pump();
                }
            }
            Op::NotifySession(s) if n > 0 => {
                let s = s % n;
                let m = self.marker();
                let n = Notification {
                    method: "n/sess".into(),
                    params: Some(raw(&m)),
                };
                let r =
                    self.h
                        .router
                        .notify(self.h.now, Target::Session(self.sessions[s].handle), n);
                assert_eq!(r.is_ok(), self.sessions[s].alive, "{r:?}");
                self.h.pump();
            }
            Op::Get(s) if n > 0 => {
                let s = s % n;
                let st = self.h.send(Req::get(&self.sessions[s].id.clone()));
                self.touch(s);
                self.check_status(s, st);
                self.sessions[s].streams.push(st);
            }
            Op::Resume(s, pick) if n > 0 => {
                let s = s % n;
                let ids: Vec<String> = self.sessions[s]
                    .streams
                    .iter()
                    .flat_map(|st| self.h.response(*st).event_ids())
                    .collect();
                if ids.is_empty() {
                    return;
                }
                let last = ids[pick % ids.len()].clone();
                let st = self
                    .h
                    .send(Req::get(&self.sessions[s].id.clone()).header("last-event-id", &last));
                self.touch(s);
                self.check_status(s, st);
                self.sessions[s].streams.push(st);
                if self.h.response(st).status == Some(StatusCode::OK) {
                    self.check_replay(s, st, &last);
                }
            }
            Op::Delete(s) if n > 0 => {
                let s = s % n;
                let st = self.h.send(Req::delete(&self.sessions[s].id.clone()));
                self.check_status(s, st);
            }
            Op::Disconnect(k) => {
                let open: Vec<(usize, ExchangeId)> = self
                    .sessions
                    .iter()
                    .enumerate()
                    .flat_map(|(i, m)| m.streams.iter().map(move |st| (i, *st)))
                    .filter(|(_, st)| {
                        !self.disconnected.contains(st) && !self.h.response(*st).ended
                    })
                    .collect();
                if !open.is_empty() {
                    let (s, st) = open[k % open.len()];
                    self.h.router.handle_disconnect(self.h.now, st);
                    self.h.pump();
                    self.disconnected.insert(st);
                    self.touch(s);
                }
            }
            Op::Cancel(k) => {
                if let Some(handle) = self.pick_request(k) {
                    let r = &self.requests[&handle];
                    let (s, wire) = (r.session, r.wire_id);
                    let body = format!(
                        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{wire}}}}}"#
                    );
                    let st = self.h.post_in(&self.sessions[s].id.clone(), V, &body);
                    self.touch(s);
                    self.check_status(s, st);
                }
            }
            Op::PollClose(k) => {
                if let Some(handle) = self.pick_request(k) {
                    let s = self.requests[&handle].session;
                    let _ = self
                        .h
                        .router
                        .close_for_polling(self.h.now, Target::Request(handle));
                    self.h.pump();
                    self.touch(s);
                }
            }
            Op::ServerRequest(s) if n > 0 => {
                let s = s % n;
                let r = self.h.router.send_request(
                    self.h.now,
                    Target::Session(self.sessions[s].handle),
                    "ping",
                    None,
                    None,
                );
                assert_eq!(r.is_ok(), self.sessions[s].alive, "{r:?}");
                self.h.pump();
            }
            Op::Garbage(s) if n > 0 => {
                let s = s % n;
                let st = self
                    .h
                    .post_in(&self.sessions[s].id.clone(), V, "{\"jsonrpc\":");
                self.touch(s);
                self.check_status(s, st);
                if self.sessions[s].alive {
                    assert_eq!(self.h.response(st).status, Some(StatusCode::BAD_REQUEST));
                }
            }
            Op::Advance(secs) => self.advance(secs),
            _ => {}
        }
        self.absorb();
        self.check_delivery();
    }

    /// Property 4: the replay is the contiguous run of that stream's events after `last`.
    fn check_replay(&self, s: usize, st: ExchangeId, last: &str) {
        let (prefix, after) = last.split_once('-').unwrap();
        let after: u64 = after.parse().unwrap();
        let replayed: Vec<u64> = self
            .h
            .response(st)
            .frames()
            .into_iter()
            .filter(|f| !f.data.is_empty())
            .filter_map(|f| f.id)
            .map(|id| {
                let (p, q) = id.split_once('-').unwrap();
                assert_eq!(p, prefix, "replay crossed streams");
                q.parse().unwrap()
            })
            .collect();
        let expected: Vec<u64> = (after + 1..after + 1 + replayed.len() as u64).collect();
        assert_eq!(replayed, expected, "replay must be contiguous after {last}");
        let newest_seen = self.sessions[s]
            .streams
            .iter()
            .filter(|x| **x != st)
            .flat_map(|x| self.h.response(*x).event_ids())
            .filter_map(|id| {
                let (p, q) = id.split_once('-')?;
                (p == prefix).then(|| q.parse::<u64>().ok()).flatten()
            })
            .max()
            .unwrap_or(0);
        let reached = replayed.last().copied().unwrap_or(after);
        assert!(
            reached >= newest_seen,
            "replay stopped before events already sent ({reached} < {newest_seen})"
        );
    }

    /// Property 3 (and 5: each response marker once): every marker is on one logical stream.
    fn check_delivery(&self) {
        let mut seen: HashMap<String, Vec<Option<String>>> = HashMap::new();
        for c in self.h.exchanges.values() {
            if c.status != Some(StatusCode::OK) {
                continue;
            }
            if c.is_sse() {
                for f in c.frames() {
                    if f.data.is_empty() {
                        continue;
                    }
                    let v: Value = serde_json::from_str(&f.data).unwrap();
                    if let Some(m) = marker_of(&v) {
                        let stream =
                            f.id.as_ref()
                                .map(|i| i.split('-').next().unwrap().to_owned());
                        seen.entry(m).or_default().push(stream);
                    }
                }
            } else {
                for v in c.messages() {
                    if let Some(m) = marker_of(&v) {
                        seen.entry(m).or_default().push(None);
                    }
                }
            }
        }
        for (m, places) in seen {
            if places.iter().any(Option::is_none) {
                assert_eq!(
                    places.len(),
                    1,
                    "marker {m} delivered more than once: {places:?}"
                );
            } else {
                assert!(
                    places.windows(2).all(|w| w[0] == w[1]),
                    "marker {m} on two streams: {places:?}"
                );
            }
        }
    }

    /// Property 5 at the end: answer what is left; every request answered at most once.
    fn finish(&mut self) {
        let open: Vec<RequestHandle> = self
            .requests
            .iter()
            .filter(|(_, r)| !r.responded && !r.cancelled)
            .map(|(h, _)| *h)
            .collect();
        for h in open {
            let m = self.marker();
            self.h
                .router
                .respond(self.h.now, h, Outcome::Result(raw(&m)))
                .unwrap();
            let r = self.requests.get_mut(&h).unwrap();
            r.responded = true;
            let s = r.session;
            self.touch(s);
        }
        self.h.pump();
        self.absorb();
        self.check_delivery();
        assert!(
            !self
                .h
                .app
                .iter()
                .any(|e| matches!(e, AppEvent::Request { .. })),
            "unexpected request"
        );
    }
}

fn marker_of(v: &Value) -> Option<String> {
    v.get("result")
        .or_else(|| v.get("params"))
        .and_then(|p| p.get("marker"))
        .map(|m| m.to_string())
}

proptest! {
    // 96 cases by default; `PROPTEST_CASES=N` for a longer search.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(96),
        ..ProptestConfig::default()
    })]

    #[test]
    fn session_lifecycle_auto(ops in prop::collection::vec(op(), 1..80)) {
        let mut w = World::new(ResponseMode::Auto);
        for op in ops {
            w.apply(op);
        }
        w.finish();
    }

    #[test]
    fn session_lifecycle_sse(ops in prop::collection::vec(op(), 1..80)) {
        let mut w = World::new(ResponseMode::Sse);
        for op in ops {
            w.apply(op);
        }
        w.finish();
    }
}
