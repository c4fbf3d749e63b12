//! A scripted fake MCP server: enough of the legacy Streamable HTTP server to exercise the
//! client — sessions (and restarts that forget them), JSON or SSE replies, priming events,
//! `retry`, a replaying event store keyed by `<stream>-<seq>` event ids, the GET stream,
//! server→client requests, DELETE — plus one-shot scripted replies for anything odd.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use mcp_proto::client::{HttpRequest, HttpRequestKind, StreamId};
use serde_json::{Value, json};

use super::net::Part;

/// How the server behaves by default.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The version it answers to `initialize` (`None`: echo the client's).
    pub version: Option<&'static str>,
    /// Whether it issues `Mcp-Session-Id`.
    pub issue_sessions: bool,
    /// Whether GET opens a stream (else 405).
    pub get_supported: bool,
    /// Whether DELETE is allowed (else 405).
    pub delete_supported: bool,
    /// Reply to requests with SSE (else one JSON body).
    pub sse_replies: bool,
    /// Start SSE streams with a priming event (id + empty data).
    pub priming: bool,
    /// A `retry` field (ms) on the priming event.
    pub retry_ms: Option<u64>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            version: None,
            issue_sessions: true,
            get_supported: true,
            delete_supported: true,
            sse_replies: false,
            priming: true,
            retry_ms: None,
        }
    }
}

/// One SSE event a script writes.
#[derive(Debug, Clone, Default)]
pub struct Frame {
    /// `id:` (`None`: the server assigns one when `auto_id`).
    pub id: Option<String>,
    /// `retry:` in ms.
    pub retry: Option<u64>,
    /// `event:`.
    pub event: Option<String>,
    /// `data:` (may be empty: a priming event).
    pub data: String,
}

impl Frame {
    /// A message event with this JSON.
    pub fn json(v: Value) -> Self {
        Frame {
            data: v.to_string(),
            ..Frame::default()
        }
    }
}

/// How a scripted SSE reply ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseEnd {
    /// Body ends cleanly.
    Close,
    /// The connection breaks.
    Reset,
    /// Stays open.
    Open,
}

/// A scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A status with headers and a body.
    Status(u16, Vec<(&'static str, String)>, Bytes),
    /// 200 with a `Content-Type` of our choice and a body.
    Raw(&'static str, Bytes),
    /// 200 `application/json` with this body.
    Json(Value),
    /// 200 `text/event-stream` with these frames (ids assigned by the server when missing,
    /// so the stream is resumable) and this end.
    Sse(Vec<Frame>, SseEnd),
    /// The connection fails before any head.
    Fail,
    /// No answer at all, ever.
    Hang,
}

/// What a script matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// A POST of this JSON-RPC method (requests and notifications).
    Method(&'static str),
    /// Any POST of a JSON-RPC response.
    AnyResponse,
    /// A listening GET (no `Last-Event-ID` naming a POST stream).
    Listen,
    /// Any GET.
    Get,
    /// A DELETE.
    Delete,
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The exchange.
    pub stream: StreamId,
    /// What the client said it was for.
    pub kind: HttpRequestKind,
    /// The method.
    pub method: Method,
    /// The headers.
    pub headers: HeaderMap,
    /// The parsed body.
    pub body: Option<Value>,
    /// When.
    pub at: Instant,
}

impl Received {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    /// The JSON-RPC method of the body.
    pub fn rpc_method(&self) -> Option<&str> {
        self.body.as_ref()?.get("method")?.as_str()
    }
}

#[derive(Debug, Default)]
struct Logical {
    session: Option<String>,
    /// (event id, encoded frame).
    events: Vec<(String, Bytes)>,
    /// Whether the logical stream has ended (its response was written).
    finished: bool,
    /// The exchange currently carrying it, if open.
    attached: Option<StreamId>,
    /// Opened by a POST (a request's stream), not a GET.
    is_post: bool,
}

/// The fake server.
#[derive(Debug)]
pub struct FakeServer {
    /// Behaviour.
    pub cfg: ServerConfig,
    /// Every request received, in order.
    pub received: Vec<Received>,
    /// Times it restarted.
    pub restarts: u32,
    sessions: BTreeSet<String>,
    next_session: u32,
    scripts: VecDeque<(Match, Reply)>,
    /// Logical SSE streams keyed by their first exchange's number.
    logical: BTreeMap<u64, Logical>,
    /// Exchange → logical stream.
    carrying: BTreeMap<StreamId, u64>,
    /// The listening logical stream per session ("" without sessions).
    listen: BTreeMap<String, u64>,
    next_event: u64,
    /// Server request id → (logical stream, client request id).
    asks: BTreeMap<String, (u64, Value)>,
    next_ask: u32,
    /// When set, the server speaks the modern era (2026-07-28) instead; see [`ModernServer`].
    pub modern: Option<ModernServer>,
}

/// The modern (2026-07-28) behaviour of the fake server: every POST is checked with
/// [`mcp_proto::mirror::check_headers`] (400 `-32020` on a mismatch) and its `_meta`
/// (400 `-32602` when a required field is missing, 400 `-32022` for an unsupported version);
/// GET and DELETE are 405; `server/discover`, `subscriptions/listen` (acknowledged, then open;
/// [`FakeServer::push_listen`] writes on it), MRTR tools, and 404 `-32601` for `nope`.
///
/// MRTR tools (`tools/call` by name): `needs_input` asks once for `sampling/createMessage`
/// (key `q`) with `requestState` `"st-1"` and answers `{"answer": <inputResponses.q>,
/// "state": <requestState>}`; `always_input` asks again every time; `state_only` returns
/// only a `requestState` first.
#[derive(Debug, Clone)]
pub struct ModernServer {
    /// The versions it accepts (and lists in `-32022` and `server/discover`).
    pub supported: Vec<&'static str>,
    /// The tools `tools/list` returns (their `x-mcp-header` declarations are enforced).
    pub tools: Vec<Value>,
    /// Whether `subscriptions/listen` exists (else 404 `-32601`).
    pub listen: bool,
}

impl Default for ModernServer {
    fn default() -> Self {
        ModernServer {
            supported: vec!["2026-07-28"],
            tools: Vec::new(),
            listen: true,
        }
    }
}

fn rpc_error(id: Option<&Value>, code: i64, message: &str, data: Option<Value>) -> Bytes {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    let mut v = json!({"jsonrpc": "2.0", "error": e});
    if let Some(id) = id {
        v["id"] = id.clone();
    }
    Bytes::from(v.to_string())
}

type Out = Vec<(StreamId, Part)>;

fn head(status: u16, ct: Option<&str>, extra: &[(&str, String)]) -> Part {
    let mut h = HeaderMap::new();
    if let Some(ct) = ct {
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_str(ct).unwrap(),
        );
    }
    for (k, v) in extra {
        h.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    Part::Head(StatusCode::from_u16(status).unwrap(), h)
}

/// Encodes one SSE frame.
pub fn encode_frame(f: &Frame) -> Bytes {
    let mut s = String::new();
    if let Some(e) = &f.event {
        s.push_str(&format!("event: {e}\n"));
    }
    if let Some(id) = &f.id {
        s.push_str(&format!("id: {id}\n"));
    }
    if let Some(r) = f.retry {
        s.push_str(&format!("retry: {r}\n"));
    }
    if f.data.is_empty() {
        s.push_str("data:\n");
    }
    for line in f.data.split('\n').filter(|_| !f.data.is_empty()) {
        s.push_str(&format!("data: {line}\n"));
    }
    s.push('\n');
    Bytes::from(s)
}

impl FakeServer {
    /// A server.
    pub fn new(cfg: ServerConfig) -> Self {
        FakeServer {
            cfg,
            received: Vec::new(),
            restarts: 0,
            sessions: BTreeSet::new(),
            next_session: 0,
            scripts: VecDeque::new(),
            logical: BTreeMap::new(),
            carrying: BTreeMap::new(),
            listen: BTreeMap::new(),
            next_event: 0,
            asks: BTreeMap::new(),
            next_ask: 0,
            modern: None,
        }
    }

    /// Queues a one-shot reply for the next request that matches.
    pub fn script(&mut self, m: Match, reply: Reply) {
        self.scripts.push_back((m, reply));
    }

    /// Drops every scripted reply not used yet.
    pub fn clear_scripts(&mut self) {
        self.scripts.clear();
    }

    /// Whether a session id is live.
    pub fn has_session(&self, id: &str) -> bool {
        self.sessions.contains(id)
    }

    /// Forgets every session and breaks every open stream (all sessions then 404).
    pub fn restart(&mut self) -> Out {
        self.restarts += 1;
        self.sessions.clear();
        self.asks.clear();
        self.listen.clear();
        let mut out = Vec::new();
        for l in self.logical.values_mut() {
            if let Some(s) = l.attached.take() {
                out.push((s, Part::Fail));
            }
        }
        self.logical.clear();
        self.carrying.clear();
        out
    }

    /// The client dropped an exchange.
    pub fn abort(&mut self, stream: StreamId) {
        if let Some(l) = self.carrying.remove(&stream)
            && let Some(lg) = self.logical.get_mut(&l)
            && lg.attached == Some(stream)
        {
            lg.attached = None;
        }
    }

    /// The exchange ended or failed on the network.
    pub fn gone(&mut self, stream: StreamId) {
        self.abort(stream);
    }

    /// Sends `msg` on the listening stream of `session` (recorded for replay even when no
    /// exchange carries it right now).
    pub fn push_listen(&mut self, session: Option<&str>, msg: Value) -> Out {
        let key = session.unwrap_or("").to_string();
        let Some(&l) = self.listen.get(&key) else {
            return Vec::new();
        };
        self.emit(l, Frame::json(msg))
    }

    /// Sends a frame on logical stream `l` (assigning an id).
    fn emit(&mut self, l: u64, mut f: Frame) -> Out {
        self.next_event += 1;
        let id =
            f.id.clone()
                .unwrap_or_else(|| format!("{l}-{}", self.next_event));
        f.id = Some(id.clone());
        let b = encode_frame(&f);
        let Some(lg) = self.logical.get_mut(&l) else {
            return Vec::new();
        };
        lg.events.push((id, b.clone()));
        match lg.attached {
            Some(s) => vec![(s, Part::Chunk(b))],
            None => Vec::new(),
        }
    }

    fn new_logical(&mut self, stream: StreamId, session: Option<String>) -> u64 {
        let l = stream.as_u64();
        self.logical.insert(
            l,
            Logical {
                session,
                events: Vec::new(),
                finished: false,
                attached: Some(stream),
                is_post: true,
            },
        );
        self.carrying.insert(stream, l);
        l
    }

    fn priming(&mut self, l: u64) -> Out {
        if !self.cfg.priming {
            return Vec::new();
        }
        let f = Frame {
            retry: self.cfg.retry_ms,
            ..Frame::default()
        };
        self.emit(l, f)
    }

    /// Handles one request; returns the parts to put on the network.
    pub fn handle(&mut self, now: Instant, req: &HttpRequest) -> Out {
        let body: Option<Value> = serde_json::from_slice(&req.body).ok();
        let rec = Received {
            stream: req.stream,
            kind: req.kind,
            method: req.method.clone(),
            headers: req.headers.clone(),
            body: body.clone(),
            at: now,
        };
        let sid = rec.header("mcp-session-id").map(str::to_string);
        let last_event_id = rec.header("last-event-id").map(str::to_string);
        let rpc_method = rec.rpc_method().map(str::to_string);
        self.received.push(rec);
        let s = req.stream;

        // A scripted reply, if one matches.
        let is_response = body
            .as_ref()
            .is_some_and(|b| b.get("method").is_none() && b.get("id").is_some());
        let resumes_post = last_event_id
            .as_deref()
            .and_then(|id| id.split('-').next()?.parse::<u64>().ok())
            .is_some_and(|l| self.logical.get(&l).is_some_and(|lg| lg.is_post));
        let pos = self.scripts.iter().position(|(m, _)| match m {
            Match::Method(name) => {
                req.method == Method::POST && rpc_method.as_deref() == Some(*name)
            }
            Match::AnyResponse => req.method == Method::POST && is_response,
            Match::Listen => req.method == Method::GET && !resumes_post,
            Match::Get => req.method == Method::GET,
            Match::Delete => req.method == Method::DELETE,
        });
        if let Some(pos) = pos {
            let (_, reply) = self.scripts.remove(pos).unwrap();
            let is_get = req.method == Method::GET;
            return self.scripted(s, sid, reply, is_get);
        }

        if let Some(m) = self.modern.clone() {
            return self.handle_modern(&m, req, body);
        }

        if req.method == Method::DELETE {
            if !self.cfg.delete_supported {
                return vec![(s, head(405, None, &[])), (s, Part::End)];
            }
            let known = sid.as_deref().is_some_and(|x| self.sessions.remove(x));
            let st = if known { 200 } else { 404 };
            return vec![(s, head(st, None, &[])), (s, Part::End)];
        }

        // Session checks for everything but initialize.
        if rpc_method.as_deref() != Some("initialize") {
            match &sid {
                Some(x) if !self.sessions.contains(x) => {
                    return vec![(s, head(404, None, &[])), (s, Part::End)];
                }
                None if self.cfg.issue_sessions => {
                    return vec![(s, head(400, None, &[])), (s, Part::End)];
                }
                _ => {}
            }
        }

        if req.method == Method::GET {
            if !self.cfg.get_supported {
                return vec![(s, head(405, None, &[])), (s, Part::End)];
            }
            let mut out = vec![(s, head(200, Some("text/event-stream"), &[]))];
            if let Some(lei) = &last_event_id {
                let l = lei.split('-').next().and_then(|x| x.parse::<u64>().ok());
                if let Some(l) = l.filter(|l| self.logical.contains_key(l)) {
                    let lg = self.logical.get_mut(&l).unwrap();
                    let from = lg
                        .events
                        .iter()
                        .position(|(id, _)| id == lei)
                        .map_or(0, |p| p + 1);
                    for (_, b) in &lg.events[from..] {
                        out.push((s, Part::Chunk(b.clone())));
                    }
                    if lg.finished {
                        out.push((s, Part::End));
                    } else {
                        lg.attached = Some(s);
                        self.carrying.insert(s, l);
                    }
                    return out;
                }
                // An unknown id: a fresh stream (as a forgetful server would).
            }
            let l = self.new_logical(s, sid.clone());
            self.listen.insert(sid.unwrap_or_default(), l);
            if let Some(lg) = self.logical.get_mut(&l) {
                lg.is_post = false;
            }
            out.extend(self.priming(l));
            return out;
        }

        // POST.
        let Some(body) = body else {
            return vec![(s, head(400, None, &[])), (s, Part::End)];
        };
        if is_response {
            let mut out = vec![(s, head(202, None, &[])), (s, Part::End)];
            let id = body.get("id").map(|v| match v {
                Value::String(x) => x.clone(),
                other => other.to_string(),
            });
            if let Some((l, client_id)) = id.and_then(|i| self.asks.remove(&i)) {
                let answer = body.get("result").cloned().unwrap_or(Value::Null);
                let resp = json!({"jsonrpc":"2.0","id":client_id,"result":{"answer":answer}});
                out.extend(self.finish_logical(l, resp));
            }
            return out;
        }
        let Some(method) = rpc_method else {
            return vec![(s, head(400, None, &[])), (s, Part::End)];
        };
        let Some(id) = body.get("id").cloned() else {
            // A notification.
            return vec![(s, head(202, None, &[])), (s, Part::End)];
        };
        let mut extra = Vec::new();
        let result = match method.as_str() {
            "initialize" => {
                let v = self
                    .cfg
                    .version
                    .map(str::to_string)
                    .or_else(|| {
                        body.pointer("/params/protocolVersion")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| "2025-11-25".into());
                if self.cfg.issue_sessions {
                    self.next_session += 1;
                    let new = format!("sess-{}-{}", self.restarts, self.next_session);
                    self.sessions.insert(new.clone());
                    extra.push(("mcp-session-id", new));
                }
                json!({"protocolVersion": v, "capabilities": {}, "serverInfo": {"name":"fake","version":"0"}})
            }
            "hang" => {
                let mut out = vec![(s, head(200, Some("text/event-stream"), &extra))];
                let l = self.new_logical(s, sid);
                out.extend(self.priming(l));
                return out;
            }
            "ask" => {
                let mut out = vec![(s, head(200, Some("text/event-stream"), &extra))];
                let l = self.new_logical(s, sid);
                out.extend(self.priming(l));
                self.next_ask += 1;
                let ask_id = format!("srv-{}", self.next_ask);
                self.asks.insert(ask_id.clone(), (l, id));
                out.extend(self.emit(
                    l,
                    Frame::json(json!({"jsonrpc":"2.0","id":ask_id,"method":"sampling/createMessage","params":{}})),
                ));
                return out;
            }
            _ => {
                json!({"echo": method, "params": body.get("params").cloned().unwrap_or(Value::Null)})
            }
        };
        let resp = json!({"jsonrpc":"2.0","id":id,"result":result});
        if self.cfg.sse_replies {
            let mut out = vec![(s, head(200, Some("text/event-stream"), &extra))];
            let l = self.new_logical(s, sid);
            out.extend(self.priming(l));
            out.extend(self.finish_logical(l, resp));
            out
        } else {
            vec![
                (s, head(200, Some("application/json"), &extra)),
                (s, Part::Chunk(Bytes::from(resp.to_string()))),
                (s, Part::End),
            ]
        }
    }

    /// The modern era's answers (see [`ModernServer`]).
    fn handle_modern(&mut self, m: &ModernServer, req: &HttpRequest, body: Option<Value>) -> Out {
        let s = req.stream;
        let status = |st: u16, b: Bytes| {
            vec![
                (s, head(st, Some("application/json"), &[])),
                (s, Part::Chunk(b)),
                (s, Part::End),
            ]
        };
        if req.method != Method::POST {
            return vec![(s, head(405, None, &[])), (s, Part::End)];
        }
        let Some(body) = body else {
            return status(400, rpc_error(None, -32700, "parse error", None));
        };
        let id = body.get("id").cloned();
        let method = body
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let params = body.get("params").cloned();
        let Some(id) = id else {
            return vec![(s, head(202, None, &[])), (s, Part::End)];
        };
        // S-NEW-4: the required `_meta` fields.
        let meta = params.as_ref().and_then(|p| p.get("_meta"));
        let version = meta
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
            .and_then(Value::as_str);
        let caps = meta.and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"));
        let (Some(version), Some(_)) = (version, caps) else {
            return status(400, rpc_error(Some(&id), -32602, "missing _meta", None));
        };
        if !m.supported.contains(&version) {
            let data = json!({"supported": m.supported, "requested": version});
            return status(
                400,
                rpc_error(
                    Some(&id),
                    -32022,
                    "Unsupported protocol version",
                    Some(data),
                ),
            );
        }
        // S-NEW-7, S-NEW-8: the mirrored headers against the body.
        let decls = if method == "tools/call" {
            let name = params
                .as_ref()
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str);
            m.tools
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == name)
                .and_then(|t| {
                    mcp_proto::mirror::ParamHeader::from_input_schema(t.get("inputSchema")?).ok()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let raw = params
            .as_ref()
            .and_then(|p| serde_json::value::to_raw_value(p).ok());
        if let Err(e) =
            mcp_proto::mirror::check_headers(&req.headers, &method, raw.as_deref(), &decls)
        {
            return status(
                400,
                rpc_error(Some(&id), -32020, &format!("HeaderMismatch: {e:?}"), None),
            );
        }
        let p = params.unwrap_or(Value::Null);
        let result = match method.as_str() {
            "server/discover" => json!({
                "resultType": "complete",
                "supportedVersions": m.supported,
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake-modern", "version": "1"}},
                "instructions": "modern fake"
            }),
            "subscriptions/listen" if m.listen => {
                let mut out = vec![(s, head(200, Some("text/event-stream"), &[]))];
                let l = self.new_logical(s, None);
                self.listen.insert(String::new(), l);
                let ack = json!({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged",
                    "params":{"_meta":{"io.modelcontextprotocol/subscriptionId": id},
                              "notifications": p.get("notifications").cloned().unwrap_or(json!({}))}});
                out.extend(self.emit_plain(l, ack));
                return out;
            }
            "tools/list" => json!({"tools": m.tools}),
            "tools/call" => {
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                let answer = p.pointer("/inputResponses/q").cloned();
                let state = p.get("requestState").cloned();
                let ask = json!({"resultType": "input_required",
                    "inputRequests": {"q": {"method": "sampling/createMessage",
                        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "?"}}], "maxTokens": 5}}},
                    "requestState": "st-1"});
                match (name, answer) {
                    ("always_input", _) | ("needs_input", None) => ask,
                    ("state_only", _) if state.is_none() => {
                        json!({"resultType": "input_required", "requestState": "only"})
                    }
                    (_, answer) => json!({"resultType": "complete", "content": [],
                        "answer": answer, "state": state, "arguments": p.get("arguments")}),
                }
            }
            "nope" => return status(404, rpc_error(Some(&id), -32601, "Method not found", None)),
            "hang" => {
                // Opens a stream and never answers.
                self.new_logical(s, None);
                return vec![(s, head(200, Some("text/event-stream"), &[]))];
            }
            _ => json!({"echo": method, "params": p}),
        };
        let resp = json!({"jsonrpc":"2.0","id":id,"result":result});
        if self.cfg.sse_replies {
            let mut out = vec![(s, head(200, Some("text/event-stream"), &[]))];
            let l = self.new_logical(s, None);
            out.extend(self.emit_plain(l, resp));
            if let Some(lg) = self.logical.get_mut(&l) {
                lg.finished = true;
                lg.attached = None;
            }
            self.carrying.remove(&s);
            out.push((s, Part::End));
            out
        } else {
            status(200, Bytes::from(resp.to_string()))
        }
    }

    /// Writes a message event without an id (the modern era has no resumability).
    fn emit_plain(&mut self, l: u64, msg: Value) -> Out {
        let b = encode_frame(&Frame::json(msg));
        match self.logical.get(&l).and_then(|lg| lg.attached) {
            Some(s) => vec![(s, Part::Chunk(b))],
            None => Vec::new(),
        }
    }

    /// Sends `msg` on the open modern listening stream (no event id).
    pub fn push_modern(&mut self, msg: Value) -> Out {
        let Some(&l) = self.listen.get("") else {
            return Vec::new();
        };
        self.emit_plain(l, msg)
    }

    /// Writes the final response on logical stream `l` and ends it.
    fn finish_logical(&mut self, l: u64, resp: Value) -> Out {
        let mut out = self.emit(l, Frame::json(resp));
        if let Some(lg) = self.logical.get_mut(&l) {
            lg.finished = true;
            if let Some(s) = lg.attached.take() {
                out.push((s, Part::End));
                self.carrying.remove(&s);
            }
        }
        out
    }

    fn scripted(&mut self, s: StreamId, sid: Option<String>, reply: Reply, is_get: bool) -> Out {
        match reply {
            Reply::Status(st, h, body) => {
                let mut out = vec![(s, head(st, None, &h))];
                if !body.is_empty() {
                    out.push((s, Part::Chunk(body)));
                }
                out.push((s, Part::End));
                out
            }
            Reply::Raw(ct, body) => vec![
                (s, head(200, Some(ct), &[])),
                (s, Part::Chunk(body)),
                (s, Part::End),
            ],
            Reply::Json(v) => vec![
                (s, head(200, Some("application/json"), &[])),
                (s, Part::Chunk(Bytes::from(v.to_string()))),
                (s, Part::End),
            ],
            Reply::Sse(frames, end) => {
                let mut out = vec![(s, head(200, Some("text/event-stream"), &[]))];
                let l = self.new_logical(s, sid.clone());
                if is_get {
                    self.listen.insert(sid.unwrap_or_default(), l);
                    if let Some(lg) = self.logical.get_mut(&l) {
                        lg.is_post = false;
                    }
                }
                for f in frames {
                    out.extend(self.emit(l, f));
                }
                match end {
                    SseEnd::Close => {
                        out.push((s, Part::End));
                        self.abort(s);
                    }
                    SseEnd::Reset => {
                        out.push((s, Part::Fail));
                        self.abort(s);
                    }
                    SseEnd::Open => {}
                }
                out
            }
            Reply::Fail => vec![(s, Part::Fail)],
            Reply::Hang => Vec::new(),
        }
    }

    /// Writes the response to a request left hanging on logical stream of `stream`.
    pub fn answer_hanging(&mut self, first_stream: StreamId, id: Value) -> Out {
        let resp = json!({"jsonrpc":"2.0","id":id,"result":{"late":true}});
        self.finish_logical(first_stream.as_u64(), resp)
    }

    /// Whether the logical stream first opened by `first_stream` ended.
    pub fn is_finished(&self, first_stream: StreamId) -> bool {
        self.logical
            .get(&first_stream.as_u64())
            .is_some_and(|l| l.finished)
    }

    /// Session of a logical stream (for debugging).
    pub fn logical_session(&self, first_stream: StreamId) -> Option<String> {
        self.logical.get(&first_stream.as_u64())?.session.clone()
    }
}
