//! Fuzz target `router`: arbitrary sequences of HTTP requests (valid and broken heads and
//! bodies, split at arbitrary offsets), disconnects, app commands and time jumps against one
//! [`Router`]. The router must never panic, and its outputs must stay well-formed per
//! stream: one head, then body chunks, then one end, nothing after.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use serde_json::value::RawValue;

use crate::jsonrpc::{ErrorObject, Notification, Outcome};
use crate::server::{
    CorsConfig, ExchangeId, OutboundId, OverflowPolicy, ProtectedResourceMetadata, RequestHandle,
    RequestHead, ResponseMode, Router, ServerConfig, ServerOutput, SessionHandle, Target,
};

/// A cursor over the fuzzer's bytes; reads zeros once exhausted.
struct Bytes<'a> {
    data: &'a [u8],
}

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    fn pick<'s, T>(&mut self, items: &'s [T]) -> Option<&'s T> {
        if items.is_empty() {
            return None;
        }
        Some(&items[self.byte() as usize % items.len()])
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

const VERSIONS: [&str; 6] = [
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
    "bogus",
    "",
];

const BODIES: [&str; 17] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#,
    r#"{"jsonrpc":"2.0","id":"s","method":"tools/list"}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#,
    r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
    r#"{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"no"}}"#,
    r#"[{"jsonrpc":"2.0","id":3,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"x":1}]"#,
    r#"[{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#,
    r#"[]"#,
    r#"{"jsonrpc":"2.0""#,
    r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
    r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
    // 2026-07-28 requests: per-request `_meta`, mirrored headers (see `head_headers`).
    r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    r#"{"jsonrpc":"2.0","id":6,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
];

#[derive(Default)]
struct Seen {
    headed: HashSet<ExchangeId>,
    ended: HashSet<ExchangeId>,
    handles: Vec<RequestHandle>,
    sessions: Vec<SessionHandle>,
    session_ids: Vec<String>,
    outbound: Vec<OutboundId>,
    streams: Vec<ExchangeId>,
    event_ids: Vec<String>,
    bodies: HashMap<ExchangeId, usize>,
    /// Bytes handed out and not yet reported taken, per exchange; the router must never go
    /// beyond its send window by more than one chunk.
    unacked: HashMap<ExchangeId, usize>,
    window: usize,
}

fn drain(router: &mut Router, seen: &mut Seen) {
    while let Some(out) = router.poll_output() {
        match out {
            ServerOutput::ResponseHead {
                stream, headers, ..
            } => {
                assert!(seen.headed.insert(stream), "two heads on one stream");
                assert!(!seen.ended.contains(&stream), "head after end");
                if let Some(id) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) {
                    seen.session_ids.push(id.to_owned());
                }
            }
            ServerOutput::ResponseBody { stream, chunk } => {
                assert!(seen.headed.contains(&stream), "body before head");
                assert!(!seen.ended.contains(&stream), "body after end");
                *seen.bodies.entry(stream).or_default() += chunk.len();
                let unacked = seen.unacked.entry(stream).or_default();
                assert!(
                    *unacked < seen.window.max(1),
                    "a chunk handed out while the send window was full"
                );
                *unacked += chunk.len();
                let text = String::from_utf8_lossy(&chunk);
                for line in text.lines() {
                    if let Some(id) = line.strip_prefix("id: ")
                        && seen.event_ids.len() < 64
                    {
                        seen.event_ids.push(id.to_owned());
                    }
                }
            }
            ServerOutput::ResponseEnd { stream } => {
                assert!(seen.headed.contains(&stream), "end before head");
                assert!(seen.ended.insert(stream), "two ends on one stream");
            }
            ServerOutput::ResponseAbort { stream } => {
                assert!(seen.ended.insert(stream), "an abort after the end");
            }
            ServerOutput::Request { handle, .. } => seen.handles.push(handle),
            ServerOutput::SessionCreated { session } => seen.sessions.push(session),
            _ => {}
        }
    }
}

fn config(b: &mut Bytes<'_>) -> ServerConfig {
    let flags = b.byte();
    let mut modern = false;
    let mut c = ServerConfig::default()
        .with_stateless(flags & 1 != 0)
        .with_response_mode(match (flags >> 1) % 3 {
            0 => ResponseMode::Auto,
            1 => ResponseMode::Sse,
            _ => ResponseMode::Json,
        })
        .with_max_body_bytes(64 + (b.byte() as usize) * 8)
        .with_max_sessions({
            let n = b.byte();
            if n & 128 != 0 {
                // Both eras on one router (2026-07-28 requests are then admitted).
                modern = true;
            }
            1 + (n as usize % 8)
        })
        .with_listen_queue(
            b.byte() as usize % 4,
            if flags & 8 != 0 {
                OverflowPolicy::RejectNew
            } else {
                OverflowPolicy::DropOldestNotification
            },
        )
        .with_session_idle_ttl(Some(Duration::from_secs(1 + b.byte() as u64)))
        .with_resumability(flags & 16 == 0)
        // Small windows and budgets, so that pacing, backlogs, draining ends and the
        // slow-reader cut all happen.
        .with_send_window(64 + b.byte() as usize * 16)
        .with_slow_reader(
            Duration::from_secs(1 + u64::from(b.byte() % 60)),
            512 + b.byte() as usize * 64,
        )
        .with_listen_takeovers(u32::from(b.byte() % 4), Duration::from_secs(30));
    if modern {
        c = c.with_modern();
    }
    if flags & 32 != 0 {
        c = c.with_cors(CorsConfig::allow_origins(["https://app.example"]));
    }
    if flags & 64 != 0 {
        c = c.with_protected_resource(ProtectedResourceMetadata::new(
            "https://mcp.example/mcp",
            "https://as.example",
        ));
    }
    c
}

fn head_headers(b: &mut Bytes<'_>, seen: &Seen) -> HeaderMap {
    let mut h = HeaderMap::new();
    let flags = b.byte();
    let host = match flags % 4 {
        0 | 1 => "localhost:3000",
        2 => "evil.example",
        _ => "[::1]",
    };
    h.insert(http::header::HOST, HeaderValue::from_static(host));
    let accept = match (flags >> 2) % 4 {
        0 | 1 => "application/json, text/event-stream",
        2 => "application/json",
        _ => "text/event-stream",
    };
    h.insert(http::header::ACCEPT, HeaderValue::from_static(accept));
    if (flags >> 4) % 4 != 3 {
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    if flags & 64 != 0 {
        h.insert(
            http::header::ORIGIN,
            HeaderValue::from_static("https://app.example"),
        );
    }
    let sel = b.byte();
    if !sel.is_multiple_of(4) {
        let id = match b.pick(&seen.session_ids) {
            Some(id) if sel % 4 != 3 => id.clone(),
            _ => "insecure-test-session-999".to_owned(),
        };
        if let Ok(v) = HeaderValue::from_str(&id) {
            h.insert(HeaderName::from_static("mcp-session-id"), v);
        }
    }
    if let Some(v) = b.pick(&VERSIONS)
        && !v.is_empty()
    {
        h.insert(
            HeaderName::from_static("mcp-protocol-version"),
            HeaderValue::from_static(v),
        );
        if *v == "2026-07-28" {
            // Mirrored headers that match some bodies and not others (S-NEW-8).
            let m = b.byte();
            let method = ["tools/call", "tools/list", "subscriptions/listen", "ping"];
            h.insert(
                HeaderName::from_static("mcp-method"),
                HeaderValue::from_static(method[m as usize % method.len()]),
            );
            if m & 64 != 0 {
                let name = if m & 32 != 0 { "x" } else { "=?base64?eA==?=" };
                h.insert(
                    HeaderName::from_static("mcp-name"),
                    HeaderValue::from_static(name),
                );
            }
        }
    }
    if flags & 128 != 0 {
        let lei = b
            .pick(&seen.event_ids)
            .cloned()
            .unwrap_or_else(|| "7-1".to_owned());
        if let Ok(v) = HeaderValue::from_str(&lei) {
            h.insert(HeaderName::from_static("last-event-id"), v);
        }
    }
    h
}

fn raw(json: &str) -> Option<Box<RawValue>> {
    RawValue::from_string(json.to_owned()).ok()
}

/// The fuzz body.
pub fn router(data: &[u8]) {
    let mut b = Bytes { data };
    let start = Instant::now();
    let mut now = start;
    let mut router = Router::new(config(&mut b).with_insecure_test_session_ids(), now);
    let mut seen = Seen {
        window: router.config().limits.send_window,
        ..Seen::default()
    };
    let mut steps = 0;
    while !b.is_empty() && steps < 256 {
        steps += 1;
        match b.byte() % 14 {
            0..=3 => {
                let method = match b.byte() % 8 {
                    0..=4 => Method::POST,
                    5 => Method::GET,
                    6 => Method::DELETE,
                    _ => Method::OPTIONS,
                };
                let path = match b.byte() % 8 {
                    0..=5 => "/mcp",
                    6 => "/.well-known/oauth-protected-resource/mcp",
                    _ => "/elsewhere",
                };
                let uri = Uri::from_static(path);
                let headers = head_headers(&mut b, &seen);
                let stream = router.handle_request(now, RequestHead::new(&method, &uri, &headers));
                seen.streams.push(stream);
                drain(&mut router, &mut seen);
                if method == Method::POST {
                    let sel = b.byte();
                    let body: Vec<u8> = if sel < 200 {
                        BODIES[sel as usize % BODIES.len()].as_bytes().to_vec()
                    } else {
                        let n = b.byte() as usize;
                        b.take(n).to_vec()
                    };
                    let split = (b.byte() as usize).min(body.len());
                    router.handle_body(now, stream, &body[..split]);
                    drain(&mut router, &mut seen);
                    router.handle_body(now, stream, &body[split..]);
                    if !b.byte().is_multiple_of(8) {
                        router.handle_body_end(now, stream);
                    }
                }
            }
            4 => {
                if let Some(h) = b.pick(&seen.handles).copied() {
                    let outcome = if b.byte().is_multiple_of(4) {
                        Outcome::Error(ErrorObject {
                            code: -32603,
                            message: "x".into(),
                            data: None,
                            extra: serde_json::Map::new(),
                        })
                    } else {
                        let r = if b.byte().is_multiple_of(2) {
                            r#"{"protocolVersion":"2025-11-25"}"#
                        } else {
                            r#"{"protocolVersion":"2025-03-26","x":[1,2]}"#
                        };
                        Outcome::Result(raw(r).unwrap_or_else(|| RawValue::NULL.to_owned()))
                    };
                    let _ = router.respond(now, h, outcome);
                }
            }
            5 => {
                let target = if b.byte().is_multiple_of(2) {
                    b.pick(&seen.handles).copied().map(Target::Request)
                } else {
                    b.pick(&seen.sessions).copied().map(Target::Session)
                };
                if let Some(t) = target {
                    let n = Notification {
                        method: "notifications/message".into(),
                        params: raw("{\"a\":\"b\\nc\"}"),
                    };
                    let _ = router.notify(now, t, n);
                }
            }
            6 => {
                let target = if b.byte().is_multiple_of(2) {
                    b.pick(&seen.handles).copied().map(Target::Request)
                } else {
                    b.pick(&seen.sessions).copied().map(Target::Session)
                };
                if let Some(t) = target {
                    let timeout = Some(Duration::from_secs(b.byte() as u64));
                    if let Ok(id) = router.send_request(now, t, "ping", None, timeout) {
                        seen.outbound.push(id);
                    }
                }
            }
            7 => {
                if let Some(id) = b.pick(&seen.outbound).copied() {
                    let _ = router.cancel_request(now, id);
                }
            }
            8 => {
                let target = if b.byte().is_multiple_of(2) {
                    b.pick(&seen.handles).copied().map(Target::Request)
                } else {
                    b.pick(&seen.sessions).copied().map(Target::Session)
                };
                if let Some(t) = target {
                    let _ = router.close_for_polling(now, t);
                }
            }
            9 => {
                if let Some(s) = b.pick(&seen.sessions).copied() {
                    let _ = router.close_session(now, s);
                }
            }
            10 => {
                if let Some(s) = b.pick(&seen.streams).copied() {
                    router.handle_disconnect(now, s);
                }
            }
            11 => {
                // The client takes some (or all) of what it was given.
                if let Some(s) = b.pick(&seen.streams).copied() {
                    let unacked = seen.unacked.get(&s).copied().unwrap_or(0);
                    let n = match b.byte() {
                        0..=127 => unacked,
                        k => unacked * usize::from(k - 127) / 128,
                    };
                    if let Some(u) = seen.unacked.get_mut(&s) {
                        *u -= n;
                    }
                    router.handle_written(now, s, n);
                }
            }
            _ => {
                // Mostly short jumps (heartbeats, deadlines); sometimes far past every TTL.
                let unit = if b.byte().is_multiple_of(16) { 256 } else { 4 };
                now += Duration::from_secs(b.byte() as u64 * unit);
                // Fire every timer in order, as a driver would.
                while let Some(at) = router.poll_timeout() {
                    if at > now {
                        break;
                    }
                    router.handle_timeout(at);
                    drain(&mut router, &mut seen);
                }
                router.handle_timeout(now);
            }
        }
        drain(&mut router, &mut seen);
        if let Some(t) = router.poll_timeout() {
            assert!(t >= now, "a timer due now must have been handled");
        }
    }
    // Quiesce: everything answered, closed, and time far ahead frees every session.
    for h in seen.handles.clone() {
        let _ = router.respond(now, h, Outcome::Result(RawValue::NULL.to_owned()));
    }
    for s in seen.sessions.clone() {
        let _ = router.close_session(now, s);
    }
    for s in seen.streams.clone() {
        router.handle_disconnect(now, s);
    }
    drain(&mut router, &mut seen);
    now += Duration::from_secs(10_000_000);
    router.handle_timeout(now);
    drain(&mut router, &mut seen);
    assert_eq!(router.session_count(), 0, "every session is gone");
    assert_eq!(router.poll_timeout(), None, "no timer survives its owner");
}
