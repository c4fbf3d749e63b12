//! The neutral client: one hyper HTTP/1.1 keep-alive connection per [`Conn`] (or one
//! HTTP/2 connection with prior knowledge, h2c, when the [`Target`] says so), identical
//! requests for every server, and every reply checked.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};

/// The protocol revision both servers negotiate (the newest with sessions in both).
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// What a reply was wrong about.
pub type Wrong = String;

/// How a JSON-RPC response came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One `application/json` body.
    Json,
    /// An event of a `text/event-stream` body.
    Sse,
}

/// Where requests go: `Host` (and the TCP peer) and the endpoint's path.
#[derive(Debug, Clone)]
pub struct Target {
    /// `127.0.0.1:PORT`.
    pub authority: Arc<str>,
    /// The MCP endpoint's path (`/mcp`).
    pub path: Arc<str>,
    /// Whether connections speak HTTP/2 with prior knowledge (h2c, RFC 9113 section 3.3)
    /// rather than HTTP/1.1.
    pub http2: bool,
}

impl Target {
    /// The target of `http://AUTHORITY[/PATH]` (path `/` when there is none).
    ///
    /// # Errors
    ///
    /// When `url` is not `http://`.
    pub fn from_url(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("not an http URL: {url:?}"))?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        Ok(Target {
            authority: authority.into(),
            path: if path.is_empty() { "/" } else { path }.into(),
            http2: false,
        })
    }

    /// The same endpoint path on another authority (a load balancer in front of it).
    pub fn via(&self, authority: &str) -> Target {
        Target {
            authority: authority.into(),
            path: self.path.clone(),
            http2: self.http2,
        }
    }

    /// The same endpoint, over HTTP/2 with prior knowledge (`true`) or HTTP/1.1.
    pub fn with_http2(mut self, http2: bool) -> Target {
        self.http2 = http2;
        self
    }
}

/// A connection's request sender.
enum Sender {
    Http1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    Http2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    async fn ready(&mut self) -> Result<(), hyper::Error> {
        match self {
            Sender::Http1(s) => s.ready().await,
            Sender::Http2(s) => s.ready().await,
        }
    }

    async fn send(
        &mut self,
        req: http::Request<Full<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error> {
        match self {
            Sender::Http1(s) => s.send_request(req).await,
            Sender::Http2(s) => s.send_request(req).await,
        }
    }
}

/// One hyper HTTP/1.1 keep-alive connection (or HTTP/2 one), opened again when the peer closes it between
/// two requests: after a response with `Connection: close` (nginx's `keepalive_requests`,
/// 1,000 by default, ends a client connection so), or when it was closed while idle
/// (`keepalive_timeout`). A request is never sent twice.
pub struct Conn {
    send: Sender,
    target: Target,
    /// The last response said `Connection: close`.
    closing: bool,
    /// How many times this connection was opened again.
    pub reopened: u64,
    /// The last response's `Retry-After` (delta-seconds), if it had one.
    pub retry_after: Option<u64>,
}

impl Conn {
    /// Connects to `target` (`TCP_NODELAY` on), over HTTP/2 with prior knowledge when
    /// [`Target::http2`].
    ///
    /// # Errors
    ///
    /// When it cannot connect.
    pub async fn open(target: &Target) -> Result<Conn, String> {
        let tcp = tokio::net::TcpStream::connect(&*target.authority)
            .await
            .map_err(|e| format!("connect {}: {e}", target.authority))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let send = if target.http2 {
            let (send, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                    .await
                    .map_err(|e| format!("h2 handshake: {e}"))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Sender::Http2(send)
        } else {
            let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                .await
                .map_err(|e| format!("handshake: {e}"))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Sender::Http1(send)
        };
        Ok(Conn {
            send,
            target: target.clone(),
            closing: false,
            reopened: 0,
            retry_after: None,
        })
    }

    /// A new connection in place of this one, which the peer closed.
    async fn reopen(&mut self) -> Result<(), Wrong> {
        let reopened = self.reopened + 1;
        *self = Conn::open(&self.target.clone()).await?;
        self.reopened = reopened;
        Ok(())
    }

    /// POSTs `body`; returns the status, the session id header, the content type and the
    /// body.
    ///
    /// # Errors
    ///
    /// When the exchange fails.
    pub async fn post(
        &mut self,
        session: Option<&str>,
        body: Bytes,
    ) -> Result<(u16, Option<String>, Option<String>, Bytes), Wrong> {
        let mut req = http::Request::post(&*self.target.path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, text/event-stream");
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        let resp = self.exchange(req, body).await?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let sid = header("mcp-session-id");
        let ctype = header("content-type");
        self.retry_after = header("retry-after").and_then(|v| v.trim().parse().ok());
        self.closing = header("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"));
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok((status, sid, ctype, body))
    }

    /// Sends `req` (with `Host` and the protocol version added) and returns the response
    /// head with its body unread, on a connection opened again first if the peer closed it.
    async fn exchange(
        &mut self,
        req: http::request::Builder,
        body: Bytes,
    ) -> Result<hyper::Response<hyper::body::Incoming>, Wrong> {
        if self.closing || self.send.ready().await.is_err() {
            self.reopen().await?;
        }
        // HTTP/2 carries the authority in the `:authority` pseudo-header (from the URI),
        // never in `Host` (RFC 9113 section 8.3.1).
        let req = if self.target.http2 {
            let uri = format!("http://{}{}", self.target.authority, self.target.path);
            req.uri(uri)
        } else {
            req.header(http::header::HOST, &*self.target.authority)
        };
        let req = req
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        self.send.ready().await.map_err(|e| format!("send: {e}"))?;
        self.send
            .send(req)
            .await
            .map_err(|e| format!("request: {e}"))
    }

    /// Opens `session`'s GET stream (`Accept: text/event-stream`) and returns its body, to
    /// be read as it arrives.
    ///
    /// # Errors
    ///
    /// A failed exchange, a status other than 200 or a content type other than
    /// `text/event-stream`.
    pub async fn get_stream(&mut self, session: &str) -> Result<hyper::body::Incoming, Wrong> {
        let mut pushbacks = 0;
        loop {
            match self.get_stream_once(session).await {
                Err(_) if self.retry_after.is_some() && pushbacks < MAX_PUSHBACKS => {
                    // Pushed back (503 with `Retry-After`): wait, open it again.
                    pushbacks += 1;
                    let secs = self.retry_after.unwrap_or(1);
                    tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
                }
                other => return other,
            }
        }
    }

    async fn get_stream_once(&mut self, session: &str) -> Result<hyper::body::Incoming, Wrong> {
        let req = http::Request::get(&*self.target.path)
            .header(http::header::ACCEPT, "text/event-stream")
            .header("mcp-session-id", session);
        let resp = self.exchange(req, Bytes::new()).await?;
        self.retry_after = resp
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let ctype = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if resp.status() != 200 || !ctype.is_some_and(|c| c.starts_with("text/event-stream")) {
            return Err(format!(
                "GET stream: status {}, content type {ctype:?}",
                resp.status()
            ));
        }
        Ok(resp.into_body())
    }

    /// Sends one JSON-RPC request and returns its response message (from a JSON body or
    /// the SSE event that carries it), with the session id header and how it was framed.
    ///
    /// # Errors
    ///
    /// A failed exchange, a status other than 200, or no response to `id`.
    pub async fn rpc(
        &mut self,
        session: Option<&str>,
        id: u64,
        body: Bytes,
    ) -> Result<(Option<String>, Value, Framing), Wrong> {
        let (status, sid, ctype, body) = self.post(session, body).await?;
        if status != 200 {
            return Err(format!(
                "status {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        let (msg, framing) = match ctype.as_deref() {
            Some(c) if c.starts_with("application/json") => (
                serde_json::from_slice::<Value>(&body).map_err(|e| format!("JSON body: {e}"))?,
                Framing::Json,
            ),
            Some(c) if c.starts_with("text/event-stream") => {
                (sse_response(&body, id)?, Framing::Sse)
            }
            other => return Err(format!("content type {other:?}")),
        };
        if msg.get("id") != Some(&json!(id)) {
            return Err(format!("reply to another id: {msg}"));
        }
        Ok((sid, msg, framing))
    }
}

/// The JSON-RPC response with `id` among the `data:` payloads of an SSE body.
fn sse_response(body: &[u8], id: u64) -> Result<Value, Wrong> {
    sse_messages(body)?
        .into_iter()
        .find(|v| v.get("id") == Some(&json!(id)))
        .ok_or_else(|| {
            format!(
                "no response with id {id} in the SSE body {:?}",
                String::from_utf8_lossy(body)
            )
        })
}

/// The JSON messages of an SSE body's events, in order (events whose data is not JSON,
/// such as a priming event's empty data, left out).
fn sse_messages(body: &[u8]) -> Result<Vec<Value>, Wrong> {
    let text = std::str::from_utf8(body).map_err(|e| format!("SSE body: {e}"))?;
    let mut data = String::new();
    let mut out = Vec::new();
    // Events end at a blank line; their `data:` lines join with '\n'.
    for line in text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        if line.is_empty() {
            if !data.is_empty() {
                if let Ok(v) = serde_json::from_str::<Value>(&data) {
                    out.push(v);
                }
                data.clear();
            }
        } else if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    Ok(out)
}

/// A session: its id, on its own connection.
pub struct Session {
    /// The connection its requests go on.
    pub conn: Conn,
    /// `Mcp-Session-Id`.
    pub id: String,
    /// Whether an echo reply must be a JSON body (an SSE one is then a wrong reply).
    pub json_only: bool,
}

/// Opens a session (`initialize`, then `notifications/initialized` answered 202) on `conn`,
/// or on a new connection to `target`.
///
/// # Errors
///
/// Any exchange that fails or is answered wrongly.
pub async fn open_session(target: &Target, conn: Option<Conn>) -> Result<Session, Wrong> {
    let mut conn = match conn {
        Some(c) => c,
        None => Conn::open(target).await?,
    };
    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcp-bench", "version": "0"},
        },
    });
    let (sid, msg, _) = conn.rpc(None, 0, Bytes::from(init.to_string())).await?;
    if msg.pointer("/result/protocolVersion").is_none() {
        return Err(format!("initialize failed: {msg}"));
    }
    let id = sid.ok_or("initialize: no session id")?;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _, body) = conn.post(Some(&id), Bytes::from(note.to_string())).await?;
    if status != 202 {
        return Err(format!(
            "notifications/initialized: status {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(Session {
        conn,
        id,
        json_only: false,
    })
}

fn echo_body(id: u64) -> (Bytes, String) {
    let text = format!("bench {id}");
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    });
    (Bytes::from(body.to_string()), text)
}

/// `tools/call echo` with a text made of `id`; checks the reply is that text (and a JSON
/// body when the session is [`json_only`](Session::json_only)).
///
/// # Errors
///
/// A failed exchange or a wrong reply.
pub async fn call_echo(session: &mut Session, id: u64) -> Result<(), Wrong> {
    let (body, text) = echo_body(id);
    let (_, msg, framing) = session.conn.rpc(Some(&session.id), id, body).await?;
    if session.json_only && framing != Framing::Json {
        return Err(format!("an SSE reply where JSON was expected: {msg}"));
    }
    match msg
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
    {
        Some(t) if t == text && msg.pointer("/result/isError") != Some(&json!(true)) => Ok(()),
        _ => Err(format!("not the echo of {text:?}: {msg}")),
    }
}

/// How often [`call_stream`] sends a call again after a 503 with `Retry-After`.
pub const MAX_PUSHBACKS: u32 = 20;

/// `tools/call stream` (see `echo::streaming_server`) with progress token `id`, on `conn`
/// in `session`: checks the reply is an SSE stream of exactly `steps` progress
/// notifications for that token, numbered 1..=`steps` in order, then the text. Returns how
/// often the server pushed the call back (503 with `Retry-After`) before it took it.
///
/// # Errors
///
/// A failed exchange or a wrong reply.
pub async fn call_stream(
    conn: &mut Conn,
    session: &str,
    id: u64,
    steps: u64,
    delay_ms: u64,
) -> Result<u32, Wrong> {
    let text = format!("stream {id}");
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": "stream",
            "arguments": {"text": text, "steps": steps, "delay_ms": delay_ms},
            "_meta": {"progressToken": id},
        },
    });
    let body = Bytes::from(body.to_string());
    // A server pushing back (503 with `Retry-After`: the call was not processed) is
    // waited for and sent the same call again, as our client does, at most
    // `MAX_PUSHBACKS` times; how often is returned.
    let mut pushbacks = 0;
    let (status, ctype, body) = loop {
        let (status, _, ctype, reply) = conn.post(Some(session), body.clone()).await?;
        match (status, conn.retry_after) {
            (503, Some(secs)) if pushbacks < MAX_PUSHBACKS => {
                pushbacks += 1;
                tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
            }
            _ => break (status, ctype, reply),
        }
    };
    if status != 200
        || !ctype
            .as_deref()
            .is_some_and(|c| c.starts_with("text/event-stream"))
    {
        return Err(format!(
            "stream call: status {status}, content type {ctype:?}"
        ));
    }
    let messages = sse_messages(&body)?;
    let (last, progress) = messages
        .split_last()
        .ok_or("stream call: an empty SSE body")?;
    let numbered: Vec<Option<u64>> = progress
        .iter()
        .map(|m| {
            (m.get("method") == Some(&json!("notifications/progress"))
                && m.pointer("/params/progressToken") == Some(&json!(id)))
            .then(|| m.pointer("/params/progress").and_then(Value::as_u64))
            .flatten()
        })
        .collect();
    let want: Vec<Option<u64>> = (1..=steps).map(Some).collect();
    if numbered != want {
        return Err(format!(
            "stream call {id}: progress {numbered:?}, not 1..={steps}"
        ));
    }
    match (last.get("id"), last.pointer("/result/content/0/text")) {
        (Some(i), Some(t)) if *i == json!(id) && *t == json!(text) => Ok(pushbacks),
        _ => Err(format!("stream call {id}: not the result {text:?}: {last}")),
    }
}
