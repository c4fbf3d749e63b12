//! A driver for testing [`Router`] directly: a virtual clock, request builders, and the
//! router's outputs collected per HTTP exchange (with SSE bodies decoded) and per kind.
//!
//! Designed so a client state machine can be plugged in later: [`Harness::send`] takes any
//! [`Req`] (what a client's HTTP intent becomes) and [`Harness::response`] shows what it
//! would read back; [`Harness::advance`] moves the shared clock and fires timers in order.

mod sse;

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use mcp_proto::jsonrpc::{Notification, Outcome, Request};
use mcp_proto::server::{
    ExchangeId, OutboundId, RequestHandle, RequestHead, Router, ServerConfig, ServerEvent,
    ServerOutput, SessionHandle, Target,
};
use mcp_proto::sse::SseDecoder;
use serde_json::Value;
use serde_json::value::RawValue;

pub use sse::{SseFrame, parse_sse};

/// The default `Host` of harness requests (a loopback authority, so the default DNS-rebinding
/// defence lets it through).
pub const HOST: &str = "localhost:3000";

/// An HTTP request to feed the router.
#[derive(Debug, Clone)]
pub struct Req {
    /// Method.
    pub method: Method,
    /// Path (and query).
    pub path: String,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Vec<u8>,
    /// Adapter-established principal.
    pub principal: Option<String>,
    /// The connection's peer address ([`RequestHead::peer`]); none by default.
    pub peer: Option<std::net::SocketAddr>,
}

impl Req {
    /// A request with `Host: localhost:3000` and nothing else.
    pub fn new(method: Method, path: &str) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::HOST, HeaderValue::from_static(HOST));
        Req {
            method,
            path: path.to_owned(),
            headers,
            body: Vec::new(),
            principal: None,
            peer: None,
        }
    }

    /// A well-formed POST of `body` to `/mcp` (both `Accept` types, JSON content type).
    pub fn post(body: &str) -> Self {
        Req::new(Method::POST, "/mcp")
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body)
    }

    /// A well-formed GET of `/mcp` for `session`.
    pub fn get(session: &str) -> Self {
        Req::new(Method::GET, "/mcp")
            .header("accept", "text/event-stream")
            .session(session)
    }

    /// A DELETE of `/mcp` for `session`.
    pub fn delete(session: &str) -> Self {
        Req::new(Method::DELETE, "/mcp").session(session)
    }

    /// Sets (replaces) a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("header name");
        self.headers
            .insert(name, HeaderValue::from_str(value).expect("header value"));
        self
    }

    /// Removes a header.
    pub fn without(mut self, name: &str) -> Self {
        self.headers.remove(name);
        self
    }

    /// Sets `Mcp-Session-Id`.
    pub fn session(self, id: &str) -> Self {
        self.header("mcp-session-id", id)
    }

    /// Sets `MCP-Protocol-Version`.
    pub fn version(self, v: &str) -> Self {
        self.header("mcp-protocol-version", v)
    }

    /// Sets the body.
    pub fn body(mut self, body: &str) -> Self {
        self.body = body.as_bytes().to_vec();
        self
    }

    /// Sets the path.
    pub fn path(mut self, path: &str) -> Self {
        self.path = path.to_owned();
        self
    }

    /// Sets the connection's peer address (`"127.0.0.1:5000"`).
    pub fn peer(mut self, peer: &str) -> Self {
        self.peer = Some(peer.parse().expect("a socket address"));
        self
    }

    /// Sets the adapter-established principal.
    pub fn principal(mut self, p: &str) -> Self {
        self.principal = Some(p.to_owned());
        self
    }
}

/// What the router wrote for one exchange.
#[derive(Debug, Default, Clone)]
pub struct Collected {
    /// The status, once the head was written.
    pub status: Option<StatusCode>,
    /// The head's headers.
    pub headers: HeaderMap,
    /// Every body chunk, concatenated.
    pub body: Vec<u8>,
    /// The body chunks one by one.
    pub chunks: Vec<Bytes>,
    /// `ResponseEnd` was seen.
    pub ended: bool,
    /// `StopReading` was seen.
    pub stopped_reading: bool,
    /// `ResponseAbort` was seen (the core cut the connection).
    pub aborted: bool,
}

impl Collected {
    /// The status (panics if no head yet).
    pub fn status(&self) -> StatusCode {
        self.status.expect("no response head yet")
    }

    /// A header value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether the answer is an SSE stream.
    pub fn is_sse(&self) -> bool {
        self.header("content-type") == Some("text/event-stream")
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The SSE frames of the body (comments included).
    pub fn frames(&self) -> Vec<SseFrame> {
        parse_sse(&self.body)
    }

    /// The JSON messages carried by SSE events (empty-data events such as priming skipped).
    ///
    /// Decoded twice, by the harness's frame reader and by the workspace's WHATWG decoder
    /// fed one byte at a time, which must agree on every event's data and last event id.
    pub fn sse_messages(&self) -> Vec<Value> {
        let frames: Vec<SseFrame> = self
            .frames()
            .into_iter()
            .filter(|f| !f.comment && f.data_present)
            .collect();
        let mut decoder = SseDecoder::new();
        let mut decoded = Vec::new();
        for b in &self.body {
            decoder.feed(std::slice::from_ref(b));
            while let Ok(Some(ev)) = decoder.next_event() {
                decoded.push(ev);
            }
        }
        assert_eq!(
            decoded.len(),
            frames.len(),
            "decoders disagree on the event count"
        );
        let mut last_id: Option<String> = None;
        for (f, ev) in frames.iter().zip(&decoded) {
            assert_eq!(f.data.as_bytes(), &ev.data[..], "decoders disagree on data");
            if f.id.is_some() {
                last_id = f.id.clone();
            }
            assert_eq!(
                last_id.as_deref(),
                ev.id.as_deref(),
                "decoders disagree on ids"
            );
        }
        frames
            .into_iter()
            .filter(|f| !f.data.is_empty())
            .map(|f| serde_json::from_str(&f.data).expect("SSE data is JSON"))
            .collect()
    }

    /// Every JSON-RPC message in the answer, JSON or SSE, batches flattened.
    pub fn messages(&self) -> Vec<Value> {
        if self.is_sse() {
            return self.sse_messages();
        }
        if self.body.is_empty() {
            return Vec::new();
        }
        match self.json() {
            Value::Array(a) => a,
            v => vec![v],
        }
    }

    /// The ids of the SSE events written (priming included).
    pub fn event_ids(&self) -> Vec<String> {
        self.frames().into_iter().filter_map(|f| f.id).collect()
    }
}

/// A message handed to the app, as collected by the harness.
#[derive(Debug)]
pub enum AppEvent {
    /// A client request.
    Request {
        /// Handle.
        handle: RequestHandle,
        /// Session.
        session: Option<SessionHandle>,
        /// Request.
        request: Request,
        /// Principal.
        principal: Option<Box<str>>,
    },
    /// A client notification.
    Notification {
        /// Session.
        session: Option<SessionHandle>,
        /// Notification.
        notification: Notification,
    },
    /// Any other non-HTTP output (client responses, failures, cancellations, sessions).
    Other(ServerOutput),
}

/// The router under test, a virtual clock, and everything it wrote.
pub struct Harness {
    /// The router.
    pub router: Router,
    /// The virtual clock's origin.
    pub start: Instant,
    /// The virtual now.
    pub now: Instant,
    /// Outputs per exchange.
    pub exchanges: BTreeMap<ExchangeId, Collected>,
    /// Messages and app-facing outputs, in order.
    pub app: VecDeque<AppEvent>,
    /// Observability events, in order.
    pub events: Vec<ServerEvent>,
    /// Every output in order, as `Debug` strings (for diagnosing failures).
    pub log: Vec<String>,
    /// The client reads everything at once: every body chunk is reported taken
    /// ([`Router::handle_written`]) as soon as it is drained. Off: streams in
    /// [`Harness::stalled`] are not reported; call [`Harness::read`].
    pub auto_read: bool,
    /// Exchanges whose client reads nothing (while `auto_read` is on for the others).
    pub stalled: std::collections::BTreeSet<ExchangeId>,
    /// Bytes drained and not yet reported, per stalled exchange.
    pub unread: BTreeMap<ExchangeId, usize>,
}

impl Harness {
    /// A harness around `Router::new(config)`.
    pub fn new(config: ServerConfig) -> Self {
        let start = Instant::now();
        Harness {
            router: Router::new(config.with_insecure_test_session_ids_unless_set(), start),
            start,
            now: start,
            exchanges: BTreeMap::new(),
            app: VecDeque::new(),
            events: Vec::new(),
            log: Vec::new(),
            auto_read: true,
            stalled: Default::default(),
            unread: BTreeMap::new(),
        }
    }

    /// The client of `stream` takes `bytes` of what it was given (a stalled stream).
    pub fn read(&mut self, stream: ExchangeId, bytes: usize) {
        let left = self.unread.entry(stream).or_default();
        let n = bytes.min(*left);
        *left -= n;
        self.router.handle_written(self.now, stream, n);
        self.pump();
    }

    /// The client of `stream` takes everything it was given so far.
    pub fn read_all(&mut self, stream: ExchangeId) {
        let n = self.unread.get(&stream).copied().unwrap_or(0);
        self.read(stream, n);
    }

    /// Feeds a whole request (head, body in one chunk, end) and drains the outputs.
    pub fn send(&mut self, req: Req) -> ExchangeId {
        let stream = self.send_head(&req);
        if req.method == Method::POST {
            self.router.handle_body(self.now, stream, &req.body);
            self.router.handle_body_end(self.now, stream);
        }
        self.pump();
        stream
    }

    /// Feeds only the head.
    pub fn send_head(&mut self, req: &Req) -> ExchangeId {
        let uri: Uri = req.path.parse().expect("path");
        let head = RequestHead::new(&req.method, &uri, &req.headers)
            .with_principal(req.principal.as_deref())
            .with_peer(req.peer);
        let stream = self.router.handle_request(self.now, head);
        self.exchanges.entry(stream).or_default();
        self.pump();
        stream
    }

    /// Drains every output (and, with `auto_read`, reports every chunk taken until nothing
    /// moves).
    pub fn pump(&mut self) {
        loop {
            let taken = self.drain();
            if taken.is_empty() {
                return;
            }
            for (stream, n) in taken {
                self.router.handle_written(self.now, stream, n);
            }
        }
    }

    /// Drains the outputs once; returns the bytes to report taken.
    fn drain(&mut self) -> BTreeMap<ExchangeId, usize> {
        let mut taken = BTreeMap::new();
        while let Some(out) = self.router.poll_output() {
            self.log.push(format!("{out:?}"));
            match out {
                ServerOutput::ResponseHead {
                    stream,
                    status,
                    headers,
                } => {
                    let c = self.exchanges.entry(stream).or_default();
                    assert!(c.status.is_none(), "two heads on {stream:?}");
                    c.status = Some(status);
                    c.headers = headers;
                }
                ServerOutput::ResponseBody { stream, chunk } => {
                    let c = self.exchanges.entry(stream).or_default();
                    assert!(c.status.is_some(), "body before head on {stream:?}");
                    assert!(!c.ended, "body after end on {stream:?}");
                    c.body.extend_from_slice(&chunk);
                    let n = chunk.len();
                    c.chunks.push(chunk);
                    if self.auto_read && !self.stalled.contains(&stream) {
                        *taken.entry(stream).or_default() += n;
                    } else {
                        *self.unread.entry(stream).or_default() += n;
                    }
                }
                ServerOutput::ResponseAbort { stream } => {
                    let c = self.exchanges.entry(stream).or_default();
                    assert!(!c.ended, "abort after end on {stream:?}");
                    c.aborted = true;
                    c.ended = true;
                }
                ServerOutput::ResponseEnd { stream } => {
                    let c = self.exchanges.entry(stream).or_default();
                    assert!(c.status.is_some(), "end before head on {stream:?}");
                    assert!(!c.ended, "two ends on {stream:?}");
                    c.ended = true;
                }
                ServerOutput::StopReading { stream } => {
                    self.exchanges.entry(stream).or_default().stopped_reading = true;
                }
                ServerOutput::Request {
                    handle,
                    session,
                    request,
                    principal,
                } => self.app.push_back(AppEvent::Request {
                    handle,
                    session,
                    request,
                    principal,
                }),
                ServerOutput::Notification {
                    session,
                    notification,
                } => self.app.push_back(AppEvent::Notification {
                    session,
                    notification,
                }),
                ServerOutput::Event(e) => self.events.push(e),
                other => self.app.push_back(AppEvent::Other(other)),
            }
        }
        taken
    }

    /// What the router wrote for `stream`.
    pub fn response(&self, stream: ExchangeId) -> &Collected {
        self.exchanges.get(&stream).expect("unknown stream")
    }

    /// Moves the clock forward by `d`, firing every timer in deadline order on the way.
    pub fn advance(&mut self, d: Duration) {
        let target = self.now + d;
        while let Some(at) = self.router.poll_timeout() {
            if at > target {
                break;
            }
            self.now = self.now.max(at);
            self.router.handle_timeout(self.now);
            self.pump();
        }
        self.now = target;
        self.router.handle_timeout(self.now);
        self.pump();
    }

    /// Elapsed virtual time.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// The next client request handed to the app (skipping other app events, which stay).
    pub fn next_request(&mut self) -> Option<(RequestHandle, Option<SessionHandle>, Request)> {
        let i = self
            .app
            .iter()
            .position(|e| matches!(e, AppEvent::Request { .. }))?;
        match self.app.remove(i) {
            Some(AppEvent::Request {
                handle,
                session,
                request,
                ..
            }) => Some((handle, session, request)),
            _ => None,
        }
    }

    /// Like [`Harness::next_request`], panicking when there is none.
    pub fn expect_request(&mut self) -> (RequestHandle, Option<SessionHandle>, Request) {
        self.next_request().expect("the app got no request")
    }

    /// Removes and returns the non-message app outputs collected so far.
    pub fn take_other(&mut self) -> Vec<ServerOutput> {
        let mut out = Vec::new();
        let mut rest = VecDeque::new();
        for e in self.app.drain(..) {
            match e {
                AppEvent::Other(o) => out.push(o),
                e => rest.push_back(e),
            }
        }
        self.app = rest;
        out
    }

    /// Removes and returns the notifications collected so far.
    pub fn take_notifications(&mut self) -> Vec<Notification> {
        let mut out = Vec::new();
        let mut rest = VecDeque::new();
        for e in self.app.drain(..) {
            match e {
                AppEvent::Notification { notification, .. } => out.push(notification),
                e => rest.push_back(e),
            }
        }
        self.app = rest;
        out
    }

    /// Answers `handle` with the JSON `result`.
    pub fn reply(&mut self, handle: RequestHandle, result: &str) {
        self.router
            .respond(self.now, handle, Outcome::Result(raw(result)))
            .expect("respond");
        self.pump();
    }

    /// Sends a notification.
    pub fn notify(
        &mut self,
        target: Target,
        method: &str,
        params: &str,
    ) -> mcp_proto::server::Delivery {
        let d = self
            .router
            .notify(
                self.now,
                target,
                Notification {
                    method: method.into(),
                    params: Some(raw(params)),
                },
            )
            .expect("notify");
        self.pump();
        d
    }

    /// Sends a server→client request.
    pub fn request_client(&mut self, target: Target, method: &str) -> OutboundId {
        let id = self
            .router
            .send_request(self.now, target, method, None, None)
            .expect("send_request");
        self.pump();
        id
    }

    /// The full handshake for `version`: `initialize` (answered by the app with that
    /// version) and `notifications/initialized`. Returns the session id and handle.
    pub fn initialize(&mut self, version: &str) -> (String, SessionHandle) {
        let s = self.send(Req::post(&init_body(1, version)));
        let (h, session, req) = self.expect_request();
        assert_eq!(&*req.method, "initialize");
        self.reply(h, &init_result(version));
        let r = self.response(s);
        assert_eq!(r.status(), StatusCode::OK, "{:?}", self.log);
        let id = r
            .header("mcp-session-id")
            .expect("initialize answer carries Mcp-Session-Id")
            .to_owned();
        let n = self.send(
            Req::post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                .session(&id)
                .version(version),
        );
        assert_eq!(self.response(n).status(), StatusCode::ACCEPTED);
        self.take_notifications();
        self.take_other();
        (id, session.expect("stateful"))
    }

    /// A POST of `body` in `session` with the negotiated version header.
    pub fn post_in(&mut self, session: &str, version: &str, body: &str) -> ExchangeId {
        self.send(Req::post(body).session(session).version(version))
    }

    /// POSTs a request `{"method": method, "id": id}` and returns the stream and handle.
    pub fn call(
        &mut self,
        session: &str,
        version: &str,
        id: i64,
        method: &str,
    ) -> (ExchangeId, RequestHandle) {
        let s = self.post_in(
            session,
            version,
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#),
        );
        let (h, _, _) = self.expect_request();
        (s, h)
    }
}

/// A `RawValue` from JSON text.
pub fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).expect("valid JSON")
}

/// An `initialize` request body.
pub fn init_body(id: i64, version: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"harness","version":"0"}}}}}}"#
    )
}

/// An `InitializeResult` for `version`.
pub fn init_result(version: &str) -> String {
    format!(
        r#"{{"protocolVersion":"{version}","capabilities":{{}},"serverInfo":{{"name":"harness","version":"0"}}}}"#
    )
}
