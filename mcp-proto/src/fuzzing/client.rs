// S-SESS-4, S-VER-1, G-6, S-POST-23.
//! The `client_session` fuzz body, and the invariant checker it shares with the property test
//! (`tests/tests/client_props.rs`): a [`ClientSession`] driven by an adversarial adapter
//! through a sequence of [`Op`]s — app commands, response heads (any status, any content type),
//! SSE events, JSON bodies, raw bytes, ends, failures and time steps — with every output
//! checked as it leaves.
//!
//! Invariants (panics name them):
//! 1. No intent after `close()` but the DELETE (at most one); no output at all after `Closed`.
//! 2. After initialize, every intent carries the current session id (if any) and the
//!    negotiated `MCP-Protocol-Version`; `initialize` carries neither.
//! 3. `SessionExpired` only for the current id, once per id, only after a 404 met an exchange
//!    that carried it; and a 404 on an exchange carrying the current id always raises it.
//! 4. No listening GET after a 405 to one.
//! 5. Reconnect delays within `[server retry, max(cap, server retry)]`; two listening GETs of
//!    one reconnect loop are never closer than the backoff's minimum delay, or than
//!    `min_server_retry` where the server's `retry` sets the first reconnect (it is
//!    waited exactly, raised to that floor).
//! 6. Every request ends with exactly one outcome (checked after a final `close`).
//! 7. `poll_timeout` is never in the past after `handle_timeout`.
//! 8. Memory is bounded: limits are small and requests in flight never exceed the limit.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};

use crate::client::{
    BackoffConfig, ClientConfig, ClientEvent, ClientSession, FailureBudget, HttpRequest,
    HttpRequestKind, Input, Limits, Output, RequestId, TransportFailure,
};
use crate::version::ProtocolVersion;

/// One step of the adversarial adapter or the app.
#[derive(Debug, Clone)]
pub enum Op {
    /// The app sends `initialize` with this id, offering version `version % 5`.
    Init {
        /// Id.
        id: u8,
        /// Offered version index.
        version: u8,
    },
    /// The app sends a request.
    Request {
        /// Id (small, so ids collide).
        id: u8,
        /// Method index.
        method: u8,
    },
    /// The app sends a notification (`notifications/initialized` when `initialized`).
    Notify {
        /// Which one.
        initialized: bool,
    },
    /// The app answers a server request.
    Respond {
        /// Id.
        id: u8,
    },
    /// The app cancels a request.
    Cancel {
        /// Id.
        id: u8,
    },
    /// The app asks to listen.
    Listen,
    /// The app stops listening.
    StopListening,
    /// The app closes the session.
    Close,
    /// The app sets a token (0: clear; 1: an invalid one).
    Token(u8),
    /// A response head for a live exchange that has none.
    Head {
        /// Which exchange.
        pick: u8,
        /// The status (any; clamped to 100..=999).
        status: u16,
        /// Content type index.
        content_type: u8,
        /// Session header index.
        session: u8,
        /// Add a Bearer challenge.
        challenge: bool,
        /// `Retry-After` seconds (0: none).
        retry_after: u8,
    },
    /// One SSE event on an exchange with a head.
    Sse {
        /// Which exchange.
        pick: u8,
        /// Event id (0: none).
        id: u8,
        /// `retry` in ms (0: none).
        retry: u16,
        /// Payload kind.
        data: u8,
        /// Message id used by the payload.
        msg_id: u8,
    },
    /// A JSON body chunk.
    Json {
        /// Which exchange.
        pick: u8,
        /// Payload kind.
        data: u8,
        /// Message id used by the payload.
        msg_id: u8,
    },
    /// Raw body bytes.
    Raw {
        /// Which exchange.
        pick: u8,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// The body ends.
    End {
        /// Which exchange.
        pick: u8,
    },
    /// The exchange fails.
    Fail {
        /// Which exchange.
        pick: u8,
    },
    /// A plausible complete answer to a live exchange without a head.
    Auto {
        /// Which exchange.
        pick: u8,
        /// Answer requests with SSE.
        sse: bool,
    },
    /// Time passes; timers fire.
    Advance {
        /// Milliseconds.
        ms: u32,
    },
}

const VERSIONS: [&str; 5] = [
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
    "1999-01-01",
];
const METHODS: [&str; 4] = ["tools/list", "tools/call", "ping", "initialize"];
const CONTENT_TYPES: [Option<&str>; 6] = [
    None,
    Some("application/json"),
    Some("text/event-stream"),
    Some("text/html"),
    Some("Application/JSON; charset=utf-8"),
    Some("text/event-stream;charset=utf-8"),
];

/// How the session under test starts.
#[derive(Debug, Clone, Copy)]
pub enum StartKind {
    /// Fresh: the app initializes.
    Fresh,
    /// `with_session("s1", 2025-11-25)`.
    Session,
    /// `with_version(2026-07-28)`.
    Modern,
}

struct Live {
    req: HttpRequest,
    head: bool,
    /// Whether the bytes fed so far end a line (a structured event then parses as written).
    at_line_start: bool,
}

/// The adapter, the app and the checker.
pub struct Driver {
    session: ClientSession,
    now: Instant,
    backoff: BackoffConfig,
    max_in_flight: usize,
    live: Vec<Live>,
    // Checker state.
    current: Option<String>,
    version: Option<String>,
    close_called: bool,
    deletes: u32,
    closed: bool,
    expired: BTreeSet<String>,
    met_404: BTreeSet<String>,
    listen_405: bool,
    /// The last `retry` surely parsed on the listening stream since the session began.
    listen_retry: Option<Duration>,
    last_listen_get: Option<Instant>,
    listen_reset: bool,
    outstanding: BTreeMap<RequestId, u32>,
    next_session: u32,
    /// Outputs seen (for tests that want to look).
    pub outputs: usize,
}

fn header(req: &HttpRequest, name: &str) -> Option<String> {
    req.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn rpc_method(req: &HttpRequest) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(&req.body).ok()?;
    v.get("method")?.as_str().map(str::to_string)
}

impl Driver {
    /// A driver over a session with small limits.
    pub fn new(start: StartKind, seed: u64) -> Self {
        let now = Instant::now();
        let backoff = BackoffConfig::default();
        let limits = Limits {
            max_sse_event_bytes: 4096,
            max_json_body_bytes: 4096,
            max_in_flight_requests: 8,
            max_queued_messages: 16,
            max_error_body_bytes: 256,
            max_session_id_bytes: 64,
        };
        let mut cfg = ClientConfig::new()
            .with_seed(seed)
            .with_limits(limits)
            .with_backoff(backoff)
            .with_listen_budget(FailureBudget {
                max_failures: 4,
                window: Duration::from_secs(60),
            })
            .with_request_timeout(Some(Duration::from_secs(120)))
            .with_continuous_listening(seed.is_multiple_of(2));
        let (current, version) = match start {
            StartKind::Fresh => (None, None),
            StartKind::Session => {
                cfg = cfg.with_session("s1", ProtocolVersion::V2025_11_25);
                (Some("s1".to_string()), Some("2025-11-25".to_string()))
            }
            StartKind::Modern => {
                cfg = cfg.with_version(ProtocolVersion::V2026_07_28);
                (None, Some("2026-07-28".to_string()))
            }
        };
        let session = ClientSession::new(cfg, now);
        let mut d = Driver {
            session,
            now,
            backoff,
            max_in_flight: limits.max_in_flight_requests,
            live: Vec::new(),
            current,
            version,
            close_called: false,
            deletes: 0,
            closed: false,
            expired: BTreeSet::new(),
            met_404: BTreeSet::new(),
            listen_405: false,
            listen_retry: None,
            last_listen_get: None,
            listen_reset: true,
            outstanding: BTreeMap::new(),
            next_session: 1,
            outputs: 0,
        };
        d.drain();
        d
    }

    fn send(&mut self, v: serde_json::Value, request_id: Option<RequestId>) {
        let r = self.session.send(self.now, Bytes::from(v.to_string()));
        if let (Ok(_), Some(id)) = (r, request_id) {
            let n = self.outstanding.entry(id.clone()).or_insert(0);
            assert_eq!(
                *n, 0,
                "invariant 6: send accepted a duplicate in-flight id {id}"
            );
            *n = 1;
        }
        self.drain();
    }

    fn pick(&self, pick: u8, head: Option<bool>) -> Option<usize> {
        let idx: Vec<usize> = (0..self.live.len())
            .filter(|i| head.is_none_or(|h| self.live[*i].head == h))
            .collect();
        if idx.is_empty() {
            None
        } else {
            Some(idx[pick as usize % idx.len()])
        }
    }

    fn feed(&mut self, i: usize, input: FeedKind) {
        let stream = self.live[i].req.stream;
        match input {
            FeedKind::Head(status, headers) => {
                self.live[i].head = true;
                let req = &self.live[i].req;
                let carried = header(req, "mcp-session-id");
                let kind = req.kind;
                let mut expect_expiry = None;
                if status == StatusCode::NOT_FOUND
                    && kind != HttpRequestKind::Delete
                    && let Some(c) = &carried
                {
                    self.met_404.insert(c.clone());
                    if Some(c) == self.current.as_ref() {
                        expect_expiry = Some(c.clone());
                    }
                }
                if status == StatusCode::METHOD_NOT_ALLOWED && kind == HttpRequestKind::Listen {
                    self.listen_405 = true;
                }
                self.session.handle_input(
                    self.now,
                    Input::ResponseHead {
                        stream,
                        status,
                        headers: &headers,
                    },
                );
                self.drain();
                if let Some(x) = expect_expiry {
                    assert!(
                        self.expired.contains(&x),
                        "invariant 3: a 404 on an exchange carrying the current id {x} raised no SessionExpired"
                    );
                }
            }
            FeedKind::Chunk(b) => {
                if let Some(&last) = b.last() {
                    self.live[i].at_line_start = last == b'\n' || last == b'\r';
                }
                self.session
                    .handle_input(self.now, Input::Body { stream, chunk: b });
                self.drain();
            }
            FeedKind::End => {
                self.live.remove(i);
                self.session.handle_input(self.now, Input::End { stream });
                self.drain();
            }
            FeedKind::Fail => {
                self.live.remove(i);
                self.session.handle_input(
                    self.now,
                    Input::Failed {
                        stream,
                        kind: TransportFailure::Reset,
                    },
                );
                self.drain();
            }
        }
    }

    /// Applies one op.
    pub fn apply(&mut self, op: &Op) {
        match op {
            Op::Init { id, version } => {
                let v = VERSIONS[*version as usize % VERSIONS.len()];
                let msg = serde_json::json!({"jsonrpc":"2.0","id":*id,"method":"initialize",
                    "params":{"protocolVersion":v,"capabilities":{},"clientInfo":{"name":"f","version":"0"}}});
                self.send(msg, Some(RequestId::Number(i64::from(*id))));
            }
            Op::Request { id, method } => {
                let m = METHODS[*method as usize % METHODS.len()];
                let msg = serde_json::json!({"jsonrpc":"2.0","id":*id,"method":m});
                self.send(msg, Some(RequestId::Number(i64::from(*id))));
            }
            Op::Notify { initialized } => {
                let m = if *initialized {
                    "notifications/initialized"
                } else {
                    "notifications/progress"
                };
                self.send(serde_json::json!({"jsonrpc":"2.0","method":m}), None);
            }
            Op::Respond { id } => {
                self.send(
                    serde_json::json!({"jsonrpc":"2.0","id":format!("srv{id}"),"result":{}}),
                    None,
                );
            }
            Op::Cancel { id } => {
                let _ =
                    self.session
                        .cancel(self.now, &RequestId::Number(i64::from(*id)), Some("f"));
                self.drain();
            }
            Op::Listen => {
                if self.session.listen(self.now).is_ok() {
                    self.listen_reset = true;
                }
                self.drain();
            }
            Op::StopListening => {
                let _ = self.session.stop_listening(self.now);
                self.drain();
            }
            Op::Close => {
                self.close_now();
            }
            Op::Token(t) => {
                let tok = match t {
                    0 => None,
                    1 => Some("bad\ntoken".to_string()),
                    n => Some(format!("tok{n}")),
                };
                let _ = self.session.set_bearer_token(tok.as_deref());
            }
            Op::Head {
                pick,
                status,
                content_type,
                session,
                challenge,
                retry_after,
            } => {
                let Some(i) = self.pick(*pick, Some(false)) else {
                    return;
                };
                let status =
                    StatusCode::from_u16((*status).clamp(100, 999)).unwrap_or(StatusCode::OK);
                let mut h = HeaderMap::new();
                if let Some(ct) = CONTENT_TYPES[*content_type as usize % CONTENT_TYPES.len()] {
                    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(ct));
                }
                match session {
                    0 => {}
                    1 => {
                        h.insert("mcp-session-id", HeaderValue::from_static("s1"));
                    }
                    2 => {
                        h.insert("mcp-session-id", HeaderValue::from_static("has space"));
                    }
                    n => {
                        let v = format!("s{n}");
                        if let Ok(v) = HeaderValue::from_str(&v) {
                            h.insert("mcp-session-id", v);
                        }
                    }
                }
                if *challenge {
                    h.insert(
                        http::header::WWW_AUTHENTICATE,
                        HeaderValue::from_static("Bearer scope=\"a\""),
                    );
                }
                if *retry_after > 0 {
                    h.insert(
                        http::header::RETRY_AFTER,
                        HeaderValue::from(u32::from(*retry_after)),
                    );
                }
                self.feed(i, FeedKind::Head(status, h));
            }
            Op::Sse {
                pick,
                id,
                retry,
                data,
                msg_id,
            } => {
                let Some(i) = self.pick(*pick, Some(true)) else {
                    return;
                };
                let mut s = String::new();
                if *id > 0 {
                    s.push_str(&format!("id: e{id}\n"));
                }
                if *retry > 0 {
                    s.push_str(&format!("retry: {retry}\n"));
                }
                let live = &self.live[i];
                if *retry > 0 && live.req.kind == HttpRequestKind::Listen {
                    // Parsed as written only at a line start; otherwise it may or may not
                    // become a `retry` field, so the expected floor is unknown.
                    self.listen_retry = live
                        .at_line_start
                        .then(|| Duration::from_millis(u64::from(*retry)));
                }
                let payload = payload(*data, *msg_id);
                if payload.is_empty() {
                    s.push_str("data:\n");
                } else {
                    s.push_str(&format!("data: {payload}\n"));
                }
                s.push('\n');
                self.feed(i, FeedKind::Chunk(Bytes::from(s)));
            }
            Op::Json { pick, data, msg_id } => {
                let Some(i) = self.pick(*pick, Some(true)) else {
                    return;
                };
                self.feed(i, FeedKind::Chunk(Bytes::from(payload(*data, *msg_id))));
            }
            Op::Raw { pick, bytes } => {
                let Some(i) = self.pick(*pick, Some(true)) else {
                    return;
                };
                if self.live[i].req.kind == HttpRequestKind::Listen {
                    // Raw bytes may hold (part of) a `retry` field.
                    self.listen_retry = None;
                }
                self.feed(i, FeedKind::Chunk(Bytes::from(bytes.clone())));
            }
            Op::End { pick } => {
                if let Some(i) = self.pick(*pick, Some(true)) {
                    self.feed(i, FeedKind::End);
                }
            }
            Op::Fail { pick } => {
                if let Some(i) = self.pick(*pick, None) {
                    self.feed(i, FeedKind::Fail);
                }
            }
            Op::Auto { pick, sse } => {
                if let Some(i) = self.pick(*pick, Some(false)) {
                    self.auto(i, *sse);
                }
            }
            Op::Advance { ms } => {
                self.now += Duration::from_millis(u64::from(*ms));
                self.session.handle_timeout(self.now);
                if let Some(t) = self.session.poll_timeout() {
                    assert!(t > self.now, "invariant 7: poll_timeout in the past");
                }
                self.drain();
            }
        }
        assert!(
            self.session.in_flight() <= self.max_in_flight + 1,
            "invariant 8: {} requests in flight",
            self.session.in_flight()
        );
    }

    /// A plausible answer to exchange `i`.
    fn auto(&mut self, i: usize, sse: bool) {
        let req = self.live[i].req.clone();
        let body: Option<serde_json::Value> = serde_json::from_slice(&req.body).ok();
        let method = body
            .as_ref()
            .and_then(|b| b.get("method"))
            .and_then(|m| m.as_str());
        let id = body.as_ref().and_then(|b| b.get("id")).cloned();
        let mut h = HeaderMap::new();
        match (req.kind, method, id) {
            (HttpRequestKind::Delete, ..) => {
                self.feed(i, FeedKind::Head(StatusCode::OK, h));
                self.end_live(req.stream);
            }
            (HttpRequestKind::Listen | HttpRequestKind::Resume, ..) => {
                h.insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("text/event-stream"),
                );
                self.feed(i, FeedKind::Head(StatusCode::OK, h));
                let n = self.next_session;
                self.next_session += 1;
                self.feed_live(req.stream, Bytes::from(format!("id: p{n}\ndata:\n\n")));
            }
            (_, Some("initialize"), Some(id)) => {
                let offered = body
                    .as_ref()
                    .and_then(|b| b.pointer("/params/protocolVersion"))
                    .and_then(|v| v.as_str())
                    .unwrap_or("2025-11-25")
                    .to_string();
                self.next_session += 1;
                let sid = format!("s{}", self.next_session);
                h.insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                if let Ok(v) = HeaderValue::from_str(&sid) {
                    h.insert("mcp-session-id", v);
                }
                self.feed(i, FeedKind::Head(StatusCode::OK, h));
                let resp = serde_json::json!({"jsonrpc":"2.0","id":id,"result":{"protocolVersion":offered,"capabilities":{},"serverInfo":{"name":"f","version":"0"}}});
                self.feed_live(req.stream, Bytes::from(resp.to_string()));
                self.end_live(req.stream);
            }
            (_, Some(_), Some(id)) => {
                let resp = serde_json::json!({"jsonrpc":"2.0","id":id,"result":{}});
                if sse {
                    h.insert(
                        http::header::CONTENT_TYPE,
                        HeaderValue::from_static("text/event-stream"),
                    );
                    self.feed(i, FeedKind::Head(StatusCode::OK, h));
                    self.feed_live(
                        req.stream,
                        Bytes::from(format!("id: q1\ndata:\n\nid: q2\ndata: {resp}\n\n")),
                    );
                } else {
                    h.insert(
                        http::header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    self.feed(i, FeedKind::Head(StatusCode::OK, h));
                    self.feed_live(req.stream, Bytes::from(resp.to_string()));
                }
                self.end_live(req.stream);
            }
            _ => {
                self.feed(i, FeedKind::Head(StatusCode::ACCEPTED, h));
                self.end_live(req.stream);
            }
        }
    }

    fn feed_live(&mut self, stream: crate::client::StreamId, b: Bytes) {
        if let Some(i) = self.live.iter().position(|l| l.req.stream == stream) {
            self.feed(i, FeedKind::Chunk(b));
        }
    }

    fn end_live(&mut self, stream: crate::client::StreamId) {
        if let Some(i) = self.live.iter().position(|l| l.req.stream == stream) {
            self.feed(i, FeedKind::End);
        }
    }

    fn close_now(&mut self) {
        if !self.close_called {
            self.close_called = true;
        }
        self.session.close(self.now);
        self.drain();
    }

    /// Closes the session, answers (or times out) the DELETE, and checks that every request
    /// ended exactly once.
    pub fn finish(mut self) {
        self.close_now();
        if let Some(i) = self.pick(0, Some(false)) {
            let kind = self.live[i].req.kind;
            assert_eq!(kind, HttpRequestKind::Delete, "invariant 1");
            self.feed(
                i,
                FeedKind::Head(StatusCode::METHOD_NOT_ALLOWED, HeaderMap::new()),
            );
        }
        self.now += Duration::from_secs(3600);
        self.session.handle_timeout(self.now);
        self.drain();
        assert!(self.closed, "invariant 1: close never completed");
        for (id, n) in &self.outstanding {
            assert_eq!(*n, 0, "invariant 6: request {id} never ended");
        }
    }

    fn drain(&mut self) {
        while let Some(out) = self.session.poll_output() {
            self.outputs += 1;
            assert!(!self.closed, "invariant 1: output after Closed: {out:?}");
            match out {
                Output::Http(req) => self.check_http(req),
                Output::Abort(s) => self.live.retain(|l| l.req.stream != s),
                Output::Outcome(o) => {
                    let n = self.outstanding.entry(o.id.clone()).or_insert(0);
                    assert_eq!(*n, 1, "invariant 6: outcome for {} not in flight", o.id);
                    *n = 0;
                }
                Output::Event(e) => self.check_event(e),
                Output::Message(_) => {}
            }
        }
    }

    fn check_http(&mut self, req: HttpRequest) {
        if self.close_called {
            assert_eq!(req.kind, HttpRequestKind::Delete, "invariant 1: {req:?}");
            self.deletes += 1;
            assert_eq!(self.deletes, 1, "invariant 1: two DELETEs");
        }
        let sid = header(&req, "mcp-session-id");
        let ver = header(&req, "mcp-protocol-version");
        if req.kind == HttpRequestKind::Post && rpc_method(&req).as_deref() == Some("initialize") {
            assert!(sid.is_none() && ver.is_none(), "invariant 2: {req:?}");
        } else {
            assert_eq!(sid, self.current, "invariant 2: session header {req:?}");
            if self.version.is_some() {
                assert_eq!(ver, self.version, "invariant 2: version header {req:?}");
            }
        }
        if req.kind == HttpRequestKind::Listen {
            assert!(!self.listen_405, "invariant 4: GET after 405");
            if let (Some(t), false) = (self.last_listen_get, self.listen_reset) {
                let floor = self.backoff.min_delay().min(
                    self.backoff
                        .min_server_retry
                        .min(self.backoff.max_server_retry),
                );
                assert!(
                    self.now - t >= floor,
                    "invariant 5: listening GETs {:?} apart",
                    self.now - t
                );
            }
            self.last_listen_get = Some(self.now);
            self.listen_reset = false;
        }
        self.live.push(Live {
            req,
            head: false,
            at_line_start: true,
        });
    }

    fn check_event(&mut self, e: ClientEvent) {
        match e {
            ClientEvent::Initialized {
                session_id,
                version,
            }
            | ClientEvent::Reinitialized {
                session_id,
                version,
                ..
            } => {
                self.current = session_id.map(|s| s.to_string());
                self.version = Some(version.as_str().to_string());
                self.listen_reset = true;
                self.listen_retry = None;
            }
            ClientEvent::SessionExpired { session_id } => {
                let id = session_id.to_string();
                assert_eq!(
                    self.current.as_deref(),
                    Some(&*id),
                    "invariant 3: expired a non-current id"
                );
                assert!(self.met_404.contains(&id), "invariant 3: no 404 met {id}");
                assert!(self.expired.insert(id), "invariant 3: expired twice");
                self.current = None;
                self.listen_reset = true;
                self.listen_retry = None;
            }
            ClientEvent::Ready { .. } => self.listen_reset = true,
            ClientEvent::Reconnecting {
                role,
                delay,
                server_retry,
                ..
            } => {
                if role == crate::client::StreamRole::Listen
                    && let Some(fed) = self.listen_retry
                {
                    assert!(
                        server_retry >= Some(fed),
                        "invariant 5: the server's retry {fed:?} was not honoured ({server_retry:?})"
                    );
                }
                let floor = server_retry.map(|r| r.min(self.backoff.max_server_retry));
                assert!(
                    delay >= floor.unwrap_or_default(),
                    "invariant 5: {delay:?} < {floor:?}"
                );
                assert!(
                    delay <= self.backoff.max_delay(server_retry),
                    "invariant 5: {delay:?} over the cap"
                );
            }
            ClientEvent::Closed { .. } => {
                assert!(self.close_called, "invariant 1: Closed without close()");
                self.closed = true;
            }
            _ => {}
        }
    }
}

enum FeedKind {
    Head(StatusCode, HeaderMap),
    Chunk(Bytes),
    End,
    Fail,
}

fn payload(kind: u8, id: u8) -> String {
    let v = match kind % 9 {
        0 => serde_json::json!({"jsonrpc":"2.0","id":id,"result":{}}),
        1 => serde_json::json!({"jsonrpc":"2.0","id":id,"error":{"code":-32000,"message":"x"}}),
        2 => {
            serde_json::json!({"jsonrpc":"2.0","id":format!("srv{id}"),"method":"sampling/createMessage"})
        }
        3 => serde_json::json!({"jsonrpc":"2.0","method":"notifications/progress"}),
        4 => {
            serde_json::json!({"jsonrpc":"2.0","id":id,"result":{"protocolVersion":VERSIONS[id as usize % 5]}})
        }
        5 => return "{not json".into(),
        6 => return String::new(),
        7 => {
            serde_json::json!([{"jsonrpc":"2.0","id":id,"result":{}},{"jsonrpc":"2.0","method":"n"}])
        }
        _ => serde_json::json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}),
    };
    v.to_string()
}

/// Runs a whole sequence and the final checks; returns how many outputs the session produced.
pub fn run(start: StartKind, seed: u64, ops: &[Op]) -> usize {
    let mut d = Driver::new(start, seed);
    for op in ops {
        d.apply(op);
    }
    let n = d.outputs;
    d.finish();
    n
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }
}

/// Decodes fuzz bytes into a bounded op sequence.
pub fn decode(data: &[u8]) -> (StartKind, u64, Vec<Op>) {
    let mut r = Reader { data, pos: 0 };
    let start = match r.byte() % 3 {
        0 => StartKind::Fresh,
        1 => StartKind::Session,
        _ => StartKind::Modern,
    };
    let seed = u64::from(r.byte());
    let mut ops = Vec::new();
    while !r.done() && ops.len() < 512 {
        let op = match r.byte() % 20 {
            0 => Op::Init {
                id: r.byte() % 4,
                version: r.byte(),
            },
            1 | 2 => Op::Request {
                id: r.byte() % 8,
                method: r.byte(),
            },
            3 => Op::Notify {
                initialized: r.byte().is_multiple_of(2),
            },
            4 => Op::Respond { id: r.byte() },
            5 => Op::Cancel { id: r.byte() % 8 },
            6 => match r.byte() % 4 {
                0 => Op::Listen,
                1 => Op::StopListening,
                2 => Op::Token(r.byte() % 4),
                _ => Op::Close,
            },
            7 | 8 => {
                let statuses = [200u16, 202, 400, 401, 403, 404, 405, 429, 500, 503];
                let s = r.byte();
                let status = if s < 200 {
                    statuses[s as usize % statuses.len()]
                } else {
                    r.u16()
                };
                Op::Head {
                    pick: r.byte(),
                    status,
                    content_type: r.byte(),
                    session: r.byte() % 5,
                    challenge: r.byte().is_multiple_of(4),
                    retry_after: r.byte() % 8,
                }
            }
            9 | 10 => Op::Sse {
                pick: r.byte(),
                id: r.byte() % 6,
                retry: if r.byte().is_multiple_of(4) {
                    r.u16()
                } else {
                    0
                },
                data: r.byte(),
                msg_id: r.byte() % 8,
            },
            11 => Op::Json {
                pick: r.byte(),
                data: r.byte(),
                msg_id: r.byte() % 8,
            },
            12 => {
                let pick = r.byte();
                let n = (r.byte() % 32) as usize;
                let bytes = (0..n).map(|_| r.byte()).collect();
                Op::Raw { pick, bytes }
            }
            13 => Op::End { pick: r.byte() },
            14 => Op::Fail { pick: r.byte() },
            15..=17 => Op::Auto {
                pick: r.byte(),
                sse: r.byte().is_multiple_of(2),
            },
            _ => Op::Advance {
                ms: u32::from(r.u16()) * 20,
            },
        };
        ops.push(op);
    }
    (start, seed, ops)
}

/// The fuzz target: decode, drive, check. Panics only on a broken invariant.
pub fn client_session(data: &[u8]) {
    let (start, seed, ops) = decode(data);
    let _ = run(start, seed, &ops);
}
